"""Model transfer over ZeroMQ on loopback: throughput with CURVE on and off, and
the end-to-end time of a 1 MB model through a running node agent.

1. Throughput: a ~50 MB model (a ``cnn`` with widths 64/256/1024/1024, hidden
   512, float32, in the safe format) is sent ``--repeats`` times to a receiver
   (the agent's :class:`fol.agent.transfer.Receiver` and inbox) with CURVE
   (encryption + ZAP authentication) and with plain TCP. Reported per mode:
   *wire* MB/s (first FETCH accepted -> last byte written, chunks of
   ``--chunk-kib`` KiB, ``--window`` credits) and *end-to-end* MB/s (offer sent
   -> DONE received: includes the sha256 of the file, the safe-format
   validation, the atomic rename and the fsynced state write).
2. Latency: a ~1 MB model (widths 32/64/128/128) offered to a running agent
   (CURVE, ZAP, persisted state) over a fresh connection, from the first OFFER
   to the DONE, i.e. verified in the inbox; median of ``--repeats`` runs, at
   least 5.

MB = 10^6 bytes. Run from the repository root::

    python benchmarks/transfer.py
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import zmq
from zmq.auth.thread import ThreadAuthenticator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import fail, int_in, machine_line  # noqa: E402
from fol.agent import protocol as P  # noqa: E402
from fol.agent.config import AgentConfig  # noqa: E402
from fol.agent.inbox import Inbox  # noqa: E402
from fol.agent.keys import TrustStore, generate_keypair, load_keypair, trust_key  # noqa: E402
from fol.agent.node import Agent  # noqa: E402
from fol.agent.transfer import Receiver, ReceiverSettings, offer_for_file, secure_server, send_model  # noqa: E402
from fol.checkpoint import save_model  # noqa: E402
from fol.models import ModelSpec, build_model  # noqa: E402

MAX_CHUNK_KIB = 16 * 1024


def _model(path: Path, widths: list[int], hidden: int, round_: int = 0, seed: int = 0) -> Path:
    spec = ModelSpec("cnn", num_classes=2, options={"widths": widths, "hidden": hidden})
    save_model(path, build_model(spec, seed=seed), spec=spec, class_names=["a", "b"], producer="sender", round=round_)
    return path


def _receiver_process(work: str, curve: bool, chunk: int, window: int, conn: Any) -> None:
    """The receiving drone, in its own process: a Receiver + inbox on a ROUTER
    (CURVE + ZAP or plain TCP); serves until told to stop, sends back its events."""
    work_dir = Path(work)
    ctx = zmq.Context()
    r_keys = load_keypair(work_dir / f"keys-{curve}" / "receiver.key_secret")
    settings = ReceiverSettings(chunk_bytes=chunk, window_chunks=window)
    sock = ctx.socket(zmq.ROUTER)
    Receiver.configure(sock, settings)
    auth, trust = None, None
    if curve:
        trust = TrustStore(work_dir / f"trusted-{curve}")
        trust.reload()
        auth = ThreadAuthenticator(ctx)
        auth.start()
        auth.configure_curve(domain=P.ZAP_DOMAIN_PEERS, location=str(trust.folder))
        secure_server(sock, r_keys, P.ZAP_DOMAIN_PEERS)
    sock.bind("tcp://127.0.0.1:*")
    inbox = Inbox(work_dir / f"recv-{curve}", "receiver", 200_000_000, accept_any_round=True)
    receiver = Receiver(sock, inbox, settings, trust)
    conn.send(sock.last_endpoint.decode())
    poller = zmq.Poller()
    poller.register(sock, zmq.POLLIN)
    while not conn.poll():
        if poller.poll(20):
            receiver.drain(sock)
        receiver.tick(time.monotonic())
    conn.recv()
    conn.send(receiver.events)
    sock.close(linger=0)
    if auth is not None:
        auth.stop()
    ctx.term()


def throughput(work: Path, models: list[Path], curve: bool, chunk: int, window: int) -> dict[str, Any]:
    """Send each of ``models`` once to a receiver in another process; returns MB/s figures."""
    keys_dir = work / f"keys-{curve}"
    _, r_sec = generate_keypair(keys_dir, "receiver")
    s_pub, s_sec = generate_keypair(keys_dir, "sender")
    trust_key(work / f"trusted-{curve}", s_pub)
    r_keys, s_keys = load_keypair(r_sec), load_keypair(s_sec)
    mp = multiprocessing.get_context("spawn")
    parent, child = mp.Pipe()
    proc = mp.Process(target=_receiver_process, args=(str(work), curve, chunk, window, child), daemon=True)
    proc.start()
    try:
        if not parent.poll(120):
            raise SystemExit(fail("receiver process did not start", 1))
        endpoint = parent.recv()
        e2e = []
        ctx = zmq.Context()
        for path in models:
            offer = offer_for_file("sender", path, chunk)
            t0 = time.perf_counter()
            result = send_model(endpoint, path, offer, keys=s_keys if curve else None,
                                server_key=r_keys.public if curve else None, timeout_s=300, context=ctx)
            total = time.perf_counter() - t0
            if result.status != "delivered":
                raise SystemExit(fail(f"transfer failed: {result.status} {result.detail}", 1))
            e2e.append(path.stat().st_size / total / 1e6)
        ctx.term()
        parent.send("stop")
        events = parent.recv()
    finally:
        proc.join(30)
        if proc.is_alive():
            proc.kill()
    stored = [e for e in events if e["outcome"] == "stored"]
    wire = [e["bytes"] / e["transfer_s"] / 1e6 for e in stored]
    verify = [e["verify_s"] for e in stored]
    return {"wire_MBps": statistics.median(wire), "e2e_MBps": statistics.median(e2e),
            "verify_s": statistics.median(verify), "wire_all": wire, "e2e_all": e2e}


def agent_latency(work: Path, model_dir: Path, repeats: int) -> list[float]:
    """Seconds from OFFER to DONE for ~1 MB models sent to a running agent."""
    keys = work / "agent-keys"
    s_pub, s_sec = generate_keypair(keys, "sender")
    _, r_sec = generate_keypair(keys, "receiver")
    trust_key(work / "agent-trusted", s_pub)
    own = _model(work / "agent-own.safetensors", [16, 32], 64)
    cfg = AgentConfig.from_dict({
        "node": {"id": "receiver", "listen": "tcp://127.0.0.1:*", "secret_key": str(r_sec),
                 "trust_dir": str(work / "agent-trusted"), "state_dir": str(work / "agent-state"), "model": str(own)},
        "trigger": {"on_board": False, "auto_send": False},
    }, source="benchmark")
    agent = Agent(cfg, load_fol=False).start()
    s_keys, r_pub = load_keypair(s_sec), load_keypair(r_sec).public
    times = []
    try:
        for i in range(repeats):
            path = _model(model_dir / f"one-mb-{i}.safetensors", [32, 64, 128, 128], 64, round_=i, seed=i)
            offer = offer_for_file("sender", path, cfg.limits.chunk_bytes)
            t0 = time.perf_counter()
            res = send_model(agent.listen_endpoint, path, offer, keys=s_keys, server_key=r_pub, timeout_s=60)
            times.append(time.perf_counter() - t0)
            if res.status != "delivered":
                raise SystemExit(fail(f"1 MB transfer failed: {res.status} {res.detail}", 1))
    finally:
        agent.stop()
    return times


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int_in(1), default=3)
    # a node's limits.chunk_bytes takes 4 KiB (the smallest chunk an OFFER may ask for) to 16 MiB
    ap.add_argument("--chunk-kib", type=int_in(4, MAX_CHUNK_KIB), default=256)
    ap.add_argument("--window", type=int_in(1), default=8)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        # Distinct models (different seeds and rounds), so the receiver never skips one as a duplicate.
        bigs = [_model(work / f"fifty-mb-{i}.safetensors", [64, 256, 1024, 1024], 512, round_=i, seed=i)
                for i in range(args.repeats)]
        size = bigs[0].stat().st_size
        print(machine_line())
        print(f"model: {size / 1e6:.1f} MB, chunks {args.chunk_kib} KiB, window {args.window}, "
              f"median of {args.repeats} runs, sender and receiver in two processes on 127.0.0.1")
        for curve in (True, False):
            r = throughput(work, bigs, curve, args.chunk_kib * 1024, args.window)
            label = "CURVE on " if curve else "CURVE off"
            print(f"{label}: wire {r['wire_MBps']:6.1f} MB/s   end-to-end {r['e2e_MBps']:6.1f} MB/s "
                  f"({size / 1e6 / r['e2e_MBps']:.2f} s, of which {r['verify_s']:.2f} s sha256 + safe-format "
                  f"validation + atomic rename)")
        times = agent_latency(work, work, max(args.repeats, 5))
        one = (work / "one-mb-0.safetensors").stat().st_size
        print(f"{one / 1e6:.2f} MB model to a running agent (new CURVE connection, offer -> verified in inbox): "
              f"median {1000 * statistics.median(times):.0f} ms (min {1000 * min(times):.0f}, "
              f"max {1000 * max(times):.0f}, {len(times)} runs)")


if __name__ == "__main__":
    main()
