"""``fol agent`` and ``fol keys``: run and control a node agent, manage CURVE keys.

Usage on one drone::

    fol keys gen drone-1 --dir keys                  # keys/drone-1.key (public), keys/drone-1.key_secret
    fol keys trust drone-2.key --store trusted       # admit a peer (its id = file stem, or --name)
    fol agent --config node.toml                     # run until SIGINT / SIGTERM / 'ctl ... stop'
                                                     # (a second signal abandons a running round)
    fol agent ctl node.toml status                   # round, inbox, transfers, history
    fol agent ctl node.toml personalize              # run the round now with what arrived
    fol agent ctl node.toml send drone-2             # offer the current model to one peer again
    fol keys revoke drone-3 --store trusted          # a running agent refuses drone-3 within ~1 s
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

from swarmbase.cli import path_argument, printable
from swarmbase.manifest import SHOWN_PATH_END
from swarmbase.tomlcheck import brief
from swarmbase.units import format_seconds

__all__ = ["add_agent_parser", "add_keys_parser", "format_status"]

log = logging.getLogger(__name__)


def add_agent_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("agent", help="run the node agent (model exchange over ZeroMQ + on-board FOL), or control one",
                       description="Run: fol agent --config node.toml.  Control a running agent: "
                       "fol agent ctl node.toml status | personalize | send PEER | reload | stop.")
    p.add_argument("--config", type=path_argument, help="the node's TOML configuration (see fol/agent/config.py)")
    asub = p.add_subparsers(dest="agent_command", metavar="ACTION")
    ctl = asub.add_parser("ctl", help="send a command to a running agent over its CURVE control socket")
    ctl.add_argument("node", type=path_argument, help="the node's TOML configuration file (gives its state folder and key pair)")
    ctl.add_argument("action", metavar="COMMAND", choices=("status", "personalize", "send", "reload", "stop"),
                     help="status | personalize | send PEER | reload (re-read the trust store) | stop")
    ctl.add_argument("peer", nargs="?", help="peer id (for 'send')")
    ctl.add_argument("--json", action="store_true", help="print the raw JSON answer")
    ctl.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the answer, 0.1 to 86400 (default: %(default)s)")
    ctl.set_defaults(func=_run_ctl)
    p.set_defaults(func=_run_agent)


def _run_agent(args: argparse.Namespace) -> int:
    from fol.agent.config import AgentConfig
    from fol.errors import ConfigError

    if not args.config:
        raise ConfigError("fol agent: --config node.toml is required (or use 'fol agent ctl NODE COMMAND')")
    from fol.agent.node import Agent

    agent = Agent(AgentConfig.from_toml(args.config))
    signals: list[int] = []

    def _stop(signum: int, _frame: Any) -> None:
        signals.append(signum)
        if len(signals) == 1:
            log.info("signal %d: stopping (a running personalization finishes first; signal again to abandon it)",
                     signum)
            agent.stop()
        else:  # the operator insists: a running personalization is abandoned, the round runs again at the next start
            log.info("signal %d again: stopping now", signum)
            agent.stop(abandon=True)

    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
        # an ipc:// endpoint and the state folder are the user's paths: named as every message names a file
        print(f"fol agent {agent.node_id}: listening on {brief(agent.listen_endpoint)}, control "
              f"{brief(agent.control_endpoint)}, state {brief(agent.inbox.root)}", flush=True)
        agent.run()
    finally:
        agent.stop()  # a Ctrl-C before the loop ran: release the sockets, the lock and agent.json (else a no-op)
        for sig, handler in previous.items():
            if handler is not None:
                signal.signal(sig, handler)
    if agent.abandoned_round is not None:
        # The abandoned round's worker thread cannot be interrupted and the interpreter would wait for it at
        # exit: end the process now (its files are written through the crash-safe writer: a temporary file
        # left behind is removed at the next start; state.json was not touched).
        print(f"fol agent: interrupted; round {agent.abandoned_round} abandoned (it runs again at the next start)",
              file=sys.stderr)
        _exit_now(130)
    return 0


def _exit_now(status: int) -> None:
    """End the process at once with ``status`` (output and log handlers flushed), without waiting for threads."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
    os._exit(status)


def _run_ctl(args: argparse.Namespace) -> int:
    from fol.agent.config import AgentConfig
    from fol.agent.node import control_request
    from fol.agent.protocol import ProtocolError, check_name
    from fol.errors import ConfigError
    from swarmbase.tomlcheck import shown

    extra = {}
    if args.action == "send":
        if not args.peer:
            raise ConfigError("fol agent ctl NODE send PEER: the peer id is missing")
        try:  # by the rule of every configured peer id: one no agent can know is not sent, then waited for
            extra["peer"] = check_name(args.peer, "peer id")
        except ProtocolError as exc:
            raise ConfigError(f"fol agent ctl NODE send PEER: {exc}") from None
    elif args.peer is not None:  # it would be ignored: a mistyped command line
        raise ConfigError(f"fol agent ctl NODE {args.action}: takes no peer id (only 'send PEER' does), "
                          f"got {shown(args.peer)}")
    cfg = AgentConfig.from_toml(args.node)
    answer = control_request(cfg, args.action, timeout_s=args.timeout, **extra)
    if args.json or args.action != "status":
        print(json.dumps(answer, indent=2, sort_keys=True))
    else:
        print(format_status(answer))
    return 0


def format_status(status: dict[str, Any]) -> str:
    """Human-readable ``ctl status``. Paths and names come from ``state.json`` and peers' records: every
    line is shown through :func:`swarmbase.cli.printable`, as every line the tools print, so none can
    split a line or reach the terminal as an escape, and a name shows as :func:`~swarmbase.tomlcheck.brief`
    shows it in the agent's other messages."""
    lines = [
        f"node {status['node']} (pid {status['pid']}) on {status['listen']}",
        (f"finished: {status['round'] - 1} of {status['rounds']} round(s) done" if status["finished"]
         else f"collecting round {status['round']} of {status['rounds']}")
        + (" - personalizing" if status["personalizing"] else ""),
        f"current model: {status['current_model']}",
    ]
    if not status["finished"]:
        lines.append(f"received this round: {len(status['received_this_round'])}/{status['expected_models']} "
                     f"({', '.join(status['received_this_round']) or 'none'})")
    lines += [f"inbox holds {status['inbox']} model(s); trusted peers: {', '.join(status['trusted_peers']) or 'none'}"]
    for t in status["incoming"]:
        lines.append(f"  receiving {t['model_id']} from {t['peer']}: {t['bytes']}/{t['size']} bytes")
    for o in status["outbox"]:
        lines.append(f"  sending {o['model_id']} to {o['peer']}: {o['status']} {o['detail']}".rstrip())
    for h in status["history"]:
        lines.append(f"  round {h['round']} ({h['trigger']}): used {', '.join(h['used']) or 'none'} -> {h['model']} "
                     f"{h.get('accuracy_line', '')}".rstrip())
    if status.get("last_error"):
        retry = status.get("retry_in_s")
        lines.append(f"last error: {status['last_error']}"
                     + (f" (automatic retry in {format_seconds(retry)})" if retry is not None and not status["finished"] else ""))
    return "\n".join(printable(line) for line in lines)  # names from state.json and peers: one line each


def add_keys_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("keys", help="create CURVE key pairs and manage a node's trust store")
    ksub = p.add_subparsers(dest="keys_command", metavar="ACTION", required=True)
    gen = ksub.add_parser("gen", help="create NAME.key (public) and NAME.key_secret (secret, mode 0600)")
    gen.add_argument("name", help="the node id the key pair belongs to")
    gen.add_argument("--dir", type=path_argument, default=".", help="output folder (default: current folder)")
    gen.add_argument("--force", action="store_true", help="replace an existing key pair")
    gen.set_defaults(func=_run_keys_gen)
    trust = ksub.add_parser("trust", help="add a peer's public key to a trust store")
    trust.add_argument("key", type=path_argument, help="the peer's public key file (PEER.key)")
    _store_arguments(trust)
    trust.add_argument("--name", help="peer id (default: the key file name without .key)")
    trust.set_defaults(func=_run_keys_trust)
    revoke = ksub.add_parser("revoke", help="remove a peer's key from a trust store")
    revoke.add_argument("peer", help="the peer id")
    _store_arguments(revoke)
    revoke.set_defaults(func=_run_keys_revoke)
    show = ksub.add_parser("list", help="list the peers of a trust store with their public keys")
    _store_arguments(show)
    show.set_defaults(func=_run_keys_list)


def _store_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--store", type=path_argument, help="the trust store folder")
    g.add_argument("--config", type=path_argument, help="a node TOML whose [node] trust_dir is the store")


def _store(args: argparse.Namespace) -> Path:
    if args.store:
        return Path(args.store)
    from fol.agent.config import AgentConfig

    return AgentConfig.from_toml(args.config).trust_dir


def _run_keys_gen(args: argparse.Namespace) -> int:
    from fol.agent.keys import generate_keypair

    public, secret = generate_keypair(args.dir, args.name, overwrite=args.force)
    # a long folder cut, each file's own name kept (drone-7.key told from drone-7.key_secret)
    print(f"wrote {brief(public, keep_end=SHOWN_PATH_END)} (give it to peers) and "
          f"{brief(secret, keep_end=SHOWN_PATH_END)} (keep it on this node only)")
    return 0


def _run_keys_trust(args: argparse.Namespace) -> int:
    from fol.agent.keys import trust_key

    path = trust_key(_store(args), args.key, name=args.name)
    print(f"trusted {path.stem} -> {brief(path, keep_end=SHOWN_PATH_END)}")
    return 0


def _run_keys_revoke(args: argparse.Namespace) -> int:
    from fol.agent.keys import revoke_key

    path = revoke_key(_store(args), args.peer)
    print(f"revoked {args.peer} (removed {brief(path, keep_end=SHOWN_PATH_END)}); a running agent refuses it "
          "within about a second")
    return 0


def _run_keys_list(args: argparse.Namespace) -> int:
    from fol.agent.keys import TrustStore

    peers = TrustStore(_store(args)).reload()
    for key, peer in sorted(peers.items(), key=lambda kv: kv[1]):
        print(f"{peer:<24} {key.decode()}")
    if not peers:
        print("(no trusted peers)")
    return 0
