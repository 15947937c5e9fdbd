"""Node agents on 127.0.0.1: for tests, the drone-swarm example and the swarm
simulation's ``transport = "zmq"``.

Two entry points:

* :class:`LoopbackSwarm` / :func:`run_loopback_exchange`: N full agents (one
  per node, each with its own key pair, trust store, state folder and ZAP
  authenticator) in threads of this process; one exchange round and on-board
  personalization, exactly as on N drones::

      reports = run_loopback_exchange("/tmp/swarm", n=3, fol={"finetune_epochs": 1})
      reports["drone-0"]["selected"]

* :class:`LoopbackLinks`: exchange-only CURVE links between N named nodes, for
  a caller that runs the FOL pipeline itself (the simulation): ``send(src, dst,
  model_file)`` moves one model file through the real protocol (offer, chunks,
  credits, sha256 + safe-format verification, atomic inbox) and returns the
  verified file in ``dst``'s inbox::

      with LoopbackLinks("/tmp/links", ["sat-1", "sat-2"]) as links:
          path = links.send("sat-1", "sat-2", "sat-1-round-0.safetensors")

:func:`prepare_nodes` writes what a deployment needs per node (keys, trust
store, pretrained model, and with ``fixed_ports`` a ``node.toml`` for each
node's own ``fol agent`` process); ``examples/drone_swarm/run_swarm.py`` does
the same with the ``fol`` commands a deployment runs (``fol keys``, ``fol
pretrain``) and starts every agent as its own ``fol agent`` process.
"""

from __future__ import annotations

import logging
import shutil
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import zmq
from zmq.auth.thread import ThreadAuthenticator

from fol.agent import protocol as P
from fol.agent.config import AgentConfig
from fol.agent.inbox import MAX_STATE_BYTES, MAX_STATE_DEPTH, MAX_STATE_ITEMS, Inbox
from fol.agent.keys import KeyPair, TrustStore, ZapKeyCheck, generate_keypair, load_keypair, trust_key
from fol.agent.transfer import Receiver, ReceiverSettings, offer_for_file, secure_server, send_model
from fol.defaults import DEFAULT_ARCH
from fol.errors import FOLError
from swarmbase.safejson import loads as bounded_loads
from swarmbase.tomlcheck import brief, read_text_file

__all__ = [
    "NodeFiles",
    "prepare_nodes",
    "toml_text",
    "LoopbackSwarm",
    "run_loopback_exchange",
    "read_report",
    "LoopbackLinks",
    "free_port",
]

log = logging.getLogger(__name__)

DEFAULT_DATA = "dataset=synthetic-hurricane,nodes={n},node={i},psi=0.5,per_node=120"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (for written configs only)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


#: The characters a TOML basic string writes as a short escape; other control characters are written \uXXXX
_TOML_ESCAPES = {"\\": "\\\\", '"': '\\"', "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _toml_char(c: str) -> str:
    """The character ``c`` as a TOML basic string holds it: a short escape, ``\\uXXXX`` for another control
    character, else itself."""
    if c in _TOML_ESCAPES:
        return _TOML_ESCAPES[c]
    if ord(c) < 0x20 or c == "\x7f":
        return f"\\u{ord(c):04X}"
    if 0xD800 <= ord(c) <= 0xDFFF:  # a lone surrogate (a file name's undecodable byte): TOML holds no such string
        raise ValueError(f"cannot write the character U+{ord(c):04X} (an undecodable byte of a file name) to TOML")
    return c


def toml_text(data: dict[str, Any]) -> str:
    """Serialize the agent-config shape (tables of scalars, arrays of tables) as TOML."""

    def scalar(v: Any) -> str:
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (int, float)):
            return repr(v)
        if isinstance(v, str):
            return '"' + "".join(map(_toml_char, v)) + '"'
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(scalar(x) for x in v) + "]"
        raise TypeError(f"cannot write {type(v).__name__} to TOML")

    lines: list[str] = []
    for name, table in data.items():
        if isinstance(table, list):
            for entry in table:
                lines += ["", f"[[{name}]]", *(f"{k} = {scalar(v)}" for k, v in entry.items())]
        else:
            lines += ["", f"[{name}]", *(f"{k} = {scalar(v)}" for k, v in table.items())]
    return "\n".join(lines).lstrip() + "\n"


@dataclass
class NodeFiles:
    """Where :func:`prepare_nodes` put one node's files; ``config`` is the TOML
    data (``config_path`` the written file, if any)."""

    node: str
    folder: Path
    secret_key: Path
    public_key: Path
    model: Path
    config: dict[str, Any]
    config_path: Path | None = None


def prepare_nodes(
    workdir: str | Path,
    n: int = 3,
    *,
    names: Sequence[str] | None = None,
    data: str = DEFAULT_DATA,
    arch: str = DEFAULT_ARCH,
    fol: dict[str, Any] | None = None,
    trigger: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    variant: str = "fol",
    fixed_ports: bool = False,
    models: dict[str, Path] | None = None,
    init_seed: int | None = None,
) -> list[NodeFiles]:
    """Create keys, trust stores, pretrained models and configs for ``n`` nodes.

    Every node trusts every other one. ``data`` is a node-data spec template
    (``{n}`` and ``{i}`` are filled in). Models are pretrained here with the
    pretraining fields of the ``[fol]`` settings unless given in ``models``,
    each as ``fol pretrain --data <its spec>`` pretrains it
    (:func:`fol.nodedata.pretrain_from_spec`: node ``i`` is the model
    ``fol simulate`` pretrains for its node ``i``): ``init_seed`` is the seed of
    the initialization every node shares, as FOL assumes; the default (None)
    is the spec's ``seed=`` (0 for the default template, which gives none), as
    ``fol pretrain``'s ``--init-seed`` defaults to it. A node's config holds its spec as ``node.data`` and
    ``variant`` as ``node.variant``, but for ``trigger={"on_board": False}`` (exchange only), whose config refuses
    both. With ``fixed_ports`` each node
    listens on a free port chosen now and ``<folder>/node.toml`` is written; otherwise listen addresses are
    ``tcp://127.0.0.1:*`` and :class:`LoopbackSwarm` wires the peers after binding.
    """
    root = Path(workdir)
    names = list(names) if names is not None else [f"drone-{i}" for i in range(n)]
    n = len(names)
    keys_dir = root / "keys"
    pairs = {}
    for name in names:
        pub, sec = keys_dir / f"{name}.key", keys_dir / f"{name}.key_secret"
        if not sec.exists():
            pub, sec = generate_keypair(keys_dir, name)
        pairs[name] = (pub, sec)
    ports = {name: free_port() for name in names} if fixed_ports else {}
    fol = dict(fol or {})
    out = []
    for i, name in enumerate(names):
        folder = root / name
        trust_dir = folder / "trusted"
        for other in names:
            if other != name:
                trust_key(trust_dir, pairs[other][0])
        spec = data.format(n=n, i=i)
        model = folder / "pretrained.safetensors"
        if models and name in models:
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(models[name], model)
        elif not model.exists():
            _pretrain(model, name, spec, arch, fol, init_seed)
        address = (lambda p: f"tcp://127.0.0.1:{ports[p]}") if fixed_ports else (lambda p: "tcp://127.0.0.1:1")
        on_board = (trigger or {}).get("on_board", True)  # an exchange-only node: no node.data or variant (refused)
        config = {
            "node": {"id": name, "listen": f"tcp://127.0.0.1:{ports[name]}" if fixed_ports else "tcp://127.0.0.1:*",
                     "control": "tcp://127.0.0.1:*", "secret_key": str(pairs[name][1]), "trust_dir": str(trust_dir),
                     "state_dir": str(folder / "state"), "model": str(model),
                     **({"data": spec, "variant": variant} if on_board else {})},
            "peers": [{"id": o, "address": address(o)} for o in names if o != name],
            "limits": dict(limits or {}),
            "trigger": {"models": n - 1, **(trigger or {})},
            "fol": fol,
        }
        files = NodeFiles(name, folder, pairs[name][1], pairs[name][0], model, config)
        if fixed_ports:
            files.config_path = folder / "node.toml"
            files.config_path.write_text(toml_text(config))
        out.append(files)
    return out


def _pretrain(path: Path, name: str, spec_text: str, arch: str, fol: dict[str, Any], init_seed: int | None) -> None:
    from fol.checkpoint import save_model
    from fol.config import FOLConfig
    from fol.nodedata import pretrain_from_spec

    done = pretrain_from_spec(spec_text, arch, FOLConfig.from_dict(dict(fol)), init_seed=init_seed, producer=name,
                              where=f"{name}: data")
    path.parent.mkdir(parents=True, exist_ok=True)
    save_model(path, done.model, done.card)  # the card records the split rule: the agent re-splits by it


class LoopbackSwarm:
    """N agents on 127.0.0.1, each in a thread of this process, wired to each
    other after binding ephemeral ports. Use as a context manager or call
    :meth:`stop`."""

    def __init__(self, nodes: Sequence[NodeFiles]) -> None:
        from fol.agent.node import Agent

        self.nodes = list(nodes)
        self.agents: dict[str, Agent] = {}
        try:
            for files in self.nodes:
                cfg = AgentConfig.from_dict(files.config, base_dir=files.folder, source=f"{files.node} config")
                self.agents[files.node] = Agent(cfg)
            for agent in self.agents.values():
                for peer in agent.cfg.peers:
                    if peer.id in self.agents and peer.address == "tcp://127.0.0.1:1":
                        agent.set_peer_address(peer.id, self.agents[peer.id].listen_endpoint)
        except BaseException:
            self.stop()
            raise

    def start(self) -> "LoopbackSwarm":
        for agent in self.agents.values():
            agent.start()
        return self

    def wait_finished(self, timeout_s: float = 120.0, poll_s: float = 0.2) -> dict[str, dict[str, Any]]:
        """Wait until every agent finished its rounds; returns each one's status.

        Raises :class:`fol.errors.FOLError` on timeout or when an agent reports an error.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            statuses = {name: agent.request("status") for name, agent in self.agents.items()}
            errors = {n: s["last_error"] for n, s in statuses.items() if s["last_error"]}
            if errors:
                raise FOLError(f"loopback agents failed: {errors}")
            if all(s["finished"] for s in statuses.values()):
                return statuses
            if time.monotonic() > deadline:
                pending = [n for n, s in statuses.items() if not s["finished"]]
                raise FOLError(f"loopback exchange not finished after {timeout_s:.0f} s (waiting for {pending})")
            time.sleep(poll_s)

    def stop(self, timeout: float = 30.0) -> None:
        for agent in self.agents.values():
            agent.stop(timeout)

    def __enter__(self) -> "LoopbackSwarm":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def run_loopback_exchange(workdir: str | Path, n: int = 3, timeout_s: float = 300.0, **prepare: Any) -> dict[str, dict[str, Any]]:
    """Prepare ``n`` nodes, start their agents on loopback, run one exchange and
    personalization per node, stop; returns each node's round-1 report
    (``reports/round-1.json`` content, :func:`read_report`). ``prepare`` goes to :func:`prepare_nodes`."""
    nodes = prepare_nodes(workdir, n, **prepare)
    with LoopbackSwarm(nodes) as swarm:
        statuses = swarm.wait_finished(timeout_s)
    out = {}
    for files in nodes:
        last = statuses[files.node]["history"][-1]
        out[files.node] = read_report(files.folder / "state" / last["report"])
    return out


def read_report(path: str | Path) -> dict[str, Any]:
    """A node's round report (``<state>/reports/round-<e>.json``, written by the agent), read with the
    bounds of the agent's state file (:data:`fol.agent.inbox.MAX_STATE_BYTES` and its depth and value
    counts): a damaged or replaced file is one :class:`fol.errors.FOLError` line naming it, never a
    ``RecursionError`` or a file of any size read whole."""
    text = read_text_file(path, FOLError, "round report", MAX_STATE_BYTES)
    try:
        report = bounded_loads(text, max_depth=MAX_STATE_DEPTH, max_items=MAX_STATE_ITEMS)
    except ValueError as exc:
        raise FOLError(f"{brief(path)}: cannot read the round report ({exc})") from None
    if not isinstance(report, dict):
        raise FOLError(f"{brief(path)}: expected a round report (a JSON object), got {type(report).__name__}")
    return report


class LoopbackLinks:
    """Exchange-only CURVE links between named nodes on 127.0.0.1.

    Every node gets a key pair, an inbox (``<workdir>/<node>/``) and a ROUTER
    served by one background thread; every node trusts every other. Nothing is
    personalized: the caller reads the returned inbox files.
    """

    def __init__(self, workdir: str | Path, names: Sequence[str], *, max_payload_bytes: int = 200_000_000,
                 chunk_bytes: int = 256 * 1024, window_chunks: int = 8) -> None:
        self.root = Path(workdir)
        self.names = list(names)
        self.settings = ReceiverSettings(chunk_bytes=chunk_bytes, window_chunks=window_chunks,
                                         max_concurrent_transfers=max(4, len(self.names)))
        keys_dir, trust_dir = self.root / "keys", self.root / "trusted"
        self.keys: dict[str, KeyPair] = {}
        for name in self.names:
            sec = keys_dir / f"{name}.key_secret"
            if not sec.exists():  # (a kill between its two files may have left the public one alone)
                generate_keypair(keys_dir, name, overwrite=True)
            self.keys[name] = load_keypair(sec)
        # trusted apart from the key pair: a kill between the two (a resumed simulation
        # reuses the folder) left a node whose every transfer was refused until the deadline
        trust_dir.mkdir(parents=True, exist_ok=True)
        self.trust = TrustStore(trust_dir)
        trusted = self.trust.reload()
        for name in self.names:
            if trusted.get(self.keys[name].public) != name:
                trust_key(trust_dir, keys_dir / f"{name}.key")
        self.trust.reload()
        self.ctx = zmq.Context()
        self.auth = ThreadAuthenticator(self.ctx)
        self.auth.start()
        self.auth.configure_curve_callback(P.ZAP_DOMAIN_PEERS, ZapKeyCheck(lambda key: key in self.trust.peers))
        self.endpoints: dict[str, str] = {}
        self.receivers: dict[str, Receiver] = {}
        self._lock = threading.Lock()
        for name in self.names:
            sock = self.ctx.socket(zmq.ROUTER)
            Receiver.configure(sock, self.settings)
            secure_server(sock, self.keys[name], P.ZAP_DOMAIN_PEERS)
            sock.bind("tcp://127.0.0.1:*")
            self.endpoints[name] = sock.last_endpoint.decode()
            inbox = Inbox(self.root / name, name, max_payload_bytes, accept_any_round=True)
            # a reopened folder (a resumed simulation): a kill between a model's arrival and its
            # record left a file the inbox refused to receive again, and the run could not go on
            inbox.recover()
            self.receivers[name] = Receiver(sock, inbox, self.settings, self.trust)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="fol-loopback-links", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        poller = zmq.Poller()
        by_sock = {r.sock: r for r in self.receivers.values()}
        for sock in by_sock:
            poller.register(sock, zmq.POLLIN)
        while not self._stop.is_set():
            events = dict(poller.poll(50))
            with self._lock:
                now = time.monotonic()
                for sock, receiver in by_sock.items():
                    if sock in events:
                        receiver.drain(sock)
                    receiver.tick(now)

    def send(self, src: str, dst: str, model_file: str | Path, timeout_s: float = 60.0) -> Path:
        """Move ``model_file`` from ``src`` to ``dst`` over CURVE; returns the
        verified file in ``dst``'s inbox. A model ``dst`` already holds (same
        bytes) returns the existing file; a refused one raises :class:`FOLError`."""
        if src not in self.keys or dst not in self.receivers:
            raise FOLError(f"unknown loopback node {src if src not in self.keys else dst!r}; nodes: {self.names}")
        path = Path(model_file)
        offer = offer_for_file(src, path, self.settings.chunk_bytes)
        result = send_model(self.endpoints[dst], path, offer, keys=self.keys[src], server_key=self.keys[dst].public,
                            peer=dst, timeout_s=timeout_s, context=self.ctx)
        inbox = self.receivers[dst].inbox
        with self._lock:
            records = [r for r in inbox.state.received.values() if r["sha256"] == offer.sha256]
        if result.status in ("delivered", "skipped") and records:
            return inbox.path(records[0]["file"])
        raise FOLError(f"transfer {src} -> {dst} of {path.name}: {result.status} {result.detail}".rstrip())

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        for r in self.receivers.values():
            r.flush()
            r.sock.close(linger=0)
        self.auth.stop()
        self.ctx.term()

    def __enter__(self) -> "LoopbackLinks":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
