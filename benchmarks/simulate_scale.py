"""How the swarm simulation scales: nodes per minute of a full ``run_simulation``
(contacts, data, pretraining, one FOL round) on the local executor, a pool of
local processes, and a real two-raylet Ray cluster (a head and one more raylet,
each started with ``ray start`` on this machine, one CPU each, joined through
``run.ray_address``); then a projection for a 1,584-node FOL scenario on a
K-machine cluster from the measured per-node cost and overhead.

Each run: a Walker-delta shell of N satellites (550 km, 53 deg, 4 planes), 24 h
of contacts on a 60 s grid, synthetic hurricane imagery partitioned by orbit
(at most 300 images per node, 32x32), the default model (cnn-medium; runs
before it became the default used cnn-small), default FOLConfig with Q = 3,
methods local + fol + fol-a (fol-a reuses fol's run), seed 0, 1 torch thread
per task, 2 workers (process pool: 2 processes; cluster: 2 raylets x 1 CPU).

For each run it prints the wall time, nodes per minute, the FOL round per
node (``NodeResult.seconds``), the CPU time of all processes and the true peak
memory of the whole process tree: the peak of the summed PSS, sampled every
second over this process and all its descendants (the pool's processes, or
the cluster's raylets, object stores and workers, which ``ray start`` runs as
children of this process), with :class:`_common.PeakMemory`.

    python benchmarks/simulate_scale.py                                  # 24, 96, 384 nodes
    python benchmarks/simulate_scale.py --nodes 24 --executors local ray-cluster
    python benchmarks/simulate_scale.py --profile 12                     # per-node costs, E = 3
    python benchmarks/simulate_scale.py --budget light                   # overhead at 384 nodes

The measured runs, with their dates and the machine's state, and the
sizes not yet measured (the 384-node runs at the full training budget; at the
light budget, ``--budget light``, every executor has run 384 nodes) are in
docs/scale.md.

``--partition N [N ...]`` times only the orbit partition of each N-node
scenario (serial in the driver, before pretraining; its covering pairs grow
with the square of N): CPU seconds, Python's allocation peak, and the
covering (image, satellite) pairs.

``--profile N`` runs N nodes once on the local executor with E = 3 rounds and
every FOL variant plus DM-PFL, and prints the per-node seconds of each method
(``NodeResult.seconds``) and the projection for 1,584 nodes on K machines.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import PeakMemory, checked, fail, int_in, machine_line, result_line  # noqa: E402

from fol.executors import LocalRayCluster  # noqa: E402
from fol.simulation import parse_scenario, run_simulation  # noqa: E402

TEMPLATE = """
[scenario]
name = "scale-{n}"
seeds = [0]
[constellation]
kind = "walker-delta"
total = {n}
planes = 4
phasing = 1
altitude_km = 550.0
inclination_deg = 53.0
epoch = "2026-06-01T00:00:00Z"
[time]
duration_s = 86400.0
step_s = 60.0
[link]
model = "constant"
rate_bps = 10e6
max_range_km = 5000.0
acquisition_s = 30.0
[rounds]
count = {rounds}
[data]
dataset = "synthetic-hurricane"
size = {size}
partition = "orbit"
per_node = 300
[fol]
max_neighbours = 3
[methods]
run = {methods}
[run]
executor = "{executor}"
workers = 2
threads = 1
"""


# ``--budget light``: every stage of pretraining and the FOL round still runs, on
# the same data, contacts and executors, with the fewest epochs and steps, so
# that a run's wall time is mostly the work around the nodes' training (contacts,
# orbit partition, data shipping, scheduling, results). It measures how that
# overhead grows with the node count at sizes the full budget cannot reach in a
# session; the per-node training cost comes from the full-budget runs.
LIGHT_FOL = {
    "pretrain_epochs": 2, "finetune_epochs": 1, "post_finetune_epochs": 1, "gate_epochs": 1,
    "ensemble_steps": 20, "distill_epochs": 1, "distill_inputs": "train",
}


def _scenario(n: int, executor: str, rounds: int = 1, methods=("local", "fol", "fol-a"), address=None,
              budget: str = "full"):
    doc = tomllib.loads(TEMPLATE.format(n=n, size=n * 450, executor=executor, rounds=rounds,
                                        methods="[" + ", ".join(f'"{m}"' for m in methods) + "]"))
    scn = parse_scenario(doc, Path("."), f"scale-{n}")
    scn.run.ray_address = address
    if budget == "light":
        scn.fol = scn.fol.replace(**LIGHT_FOL)
    return scn


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def scaling(nodes: list[int], executors: list[str], budget: str = "full") -> None:
    rows = []
    cluster = None
    try:
        for executor in executors:
            address = None
            if executor == "ray-cluster":
                cluster = LocalRayCluster(workers=1, cpus_per_node=1, timeout_s=300).start()
                os.environ.update(cluster.env)
                address = cluster.address
            for n in nodes:
                # each run in a fresh interpreter: a driver that ran a larger swarm
                # before keeps its freed memory, which would count in the next peak
                cmd = [sys.executable, __file__, "--one", executor, str(n), "--budget", budget]
                if address:
                    cmd += ["--ray-address", address]
                load = _load()
                with PeakMemory(interval_s=1.0) as peak:
                    done = subprocess.run(cmd, stdout=subprocess.PIPE, text=True)
                if done.returncode != 0:
                    raise SystemExit(fail(f"{executor}, {n} nodes: the run exited with code {done.returncode}", 1))
                wall, node_s = result_line(done.stdout, f"{executor}, {n} nodes: the run", list)
                pss_gb = peak.pss_kb / 2**20
                rows.append((executor, n, wall, 60.0 * n / wall, node_s, peak.cpu_s, pss_gb, load))
                print(f"{executor:>11} {n:>4} nodes ({budget} budget): {wall:7.1f} s, {60 * n / wall:5.2f} nodes/min, "
                      f"FOL round {node_s:.1f} s per node, CPU {peak.cpu_s:.0f} s, true peak {pss_gb:.2f} GB "
                      f"(the kernel's per-process peaks summed, an upper bound: {peak.hwm_kb / 2**20:.2f} GB) "
                      f"(load before: {load})", flush=True)
            if cluster is not None:
                cluster.stop()
                cluster = None
    finally:
        if cluster is not None:
            cluster.stop()
    print("\n| executor | nodes | wall time (s) | nodes / min | FOL round per node (s) | CPU, all processes (s) "
          "| true peak, summed PSS (GB) | load before (1, 5, 15 min) |")
    print("|---|---|---|---|---|---|---|---|")
    for executor, n, wall, npm, node_s, cpu_s, pss_gb, load in rows:
        print(f"| {executor} | {n} | {wall:.0f} | {npm:.2f} | {node_s:.1f} | {cpu_s:.0f} | {pss_gb:.2f} | {load} |")
    for executor in executors:
        mine = [r for r in rows if r[0] == executor]
        if len(mine) >= 2:  # wall = fixed + slope * n, least squares
            import numpy as np

            n = np.array([r[1] for r in mine], dtype=float)
            w = np.array([r[2] for r in mine])
            slope, fixed = np.polyfit(n, w, 1)
            print(f"{executor}: wall ~ {fixed:.0f} s + {slope:.1f} s x nodes")


def _timed_run(scn):
    """``run_simulation`` into a temporary folder: (result, wall seconds)."""
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        result = run_simulation(scn, Path(tmp) / "out", progress=False)
        return result, time.perf_counter() - t0


def one(executor: str, n: int, budget: str, address: str | None) -> None:
    """One scaling run in this process; prints ``[wall_s, fol_round_s_per_node]`` as JSON."""
    scn = _scenario(n, "ray" if executor == "ray-cluster" else executor, address=address, budget=budget)
    result, wall = _timed_run(scn)
    fol = [r for r in result.results if r["method"] == "fol"]
    print(json.dumps([wall, sum(r["seconds"] for r in fol) / n]), flush=True)


def profile(n: int, machines: list[int], cores: int, target: int) -> None:
    methods = ("local", "fol", "fol-a", "fol-n", "fol-an", "dm-pfl")
    scn = _scenario(n, "local", rounds=3, methods=methods)
    scn.fol = scn.fol.replace(rounds=3)
    load = _load()
    result, wall = _timed_run(scn)
    per: dict[str, float] = {}
    for m in methods:
        rs = [r for r in result.results if r["method"] == m]
        per[m] = sum(r["seconds"] for r in rs) / max(len(rs), 1)
    print(f"\nprofile: {n} nodes, E = 3, local executor, wall {wall:.0f} s (load before: {load})")
    for m, s in per.items():
        print(f"  {m:>7}: {s:6.1f} s per node (NodeResult.seconds)")
    # fol and fol-a come from one pipeline run, as do fol-n and fol-an: count each run once
    per_node = max(per["fol"], per["fol-a"]) + max(per["fol-n"], per["fol-an"]) + per["dm-pfl"] + per["local"]
    print(f"  compute per node for E = 3, all FOL variants + DM-PFL: {per_node:.0f} s (pretraining excluded)")
    print(f"\nprojection, {target:,} nodes, {cores} cores per machine, one task per core:")
    print("| machines K | compute (h) if perfectly spread | + driver / contacts overhead |")
    print("|---|---|---|")
    for k in machines:
        hours = target * per_node / (k * cores) / 3600.0
        print(f"| {k} | {hours:.1f} | see docs/scale.md |")


def partition(nodes: list[int]) -> None:
    """The orbit partition of each N-node scenario alone: every image goes to one of
    the satellites whose swath covered it in the acquisition period (serial, in the
    driver, before pretraining)."""
    import tracemalloc

    from contact_sim.scenario import build_constellation
    from fol.simulation.partition import orbit_assignment, swath_coverage
    from fol.simulation.runner import _load_pool

    print("| nodes | images | covering pairs (share of images x satellites) | CPU (s) | allocation peak (MB) |")
    print("|---|---|---|---|---|")
    for n in nodes:
        scn = _scenario(n, "local")
        d, t = scn.data, scn.contact.time
        pool = _load_pool(scn, 0)
        sats = build_constellation(scn.contact)
        acquisition_s = d.acquisition_s or t.duration_s
        tracemalloc.start()
        cpu0 = time.process_time()
        orbit_assignment(pool.lat, pool.lon, sats, t.start, acquisition_s, d.swath_km, rule=d.assign, seed=0)
        cpu = time.process_time() - cpu0
        peak_mb = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        # the same coverage again, untimed, to count its pairs
        pairs = sum(len(p) for _, p, _ in swath_coverage(pool.lat, pool.lon, sats, t.start, acquisition_s, d.swath_km))
        print(f"| {n} | {len(pool.lat):,} | {pairs:,} ({pairs / (len(pool.lat) * len(sats)):.2f}) | {cpu:.1f} "
              f"| {peak_mb:.0f} |", flush=True)


def main(argv: list[str] | None = None) -> int:
    # every value is checked as it is read, before any work (a bad node count was a traceback from the
    # scenario, in the child run of the scaling loop after the runs before it; --cores 0 divided by zero)
    fits = lambda n: n >= 4 and n % 4 == 0  # noqa: E731
    count = "a node count that is a positive multiple of 4 (the scenario's 4 planes)"
    node_count = checked(int, fits, count)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=node_count, nargs="+", default=[24, 96, 384])
    ap.add_argument("--executors", nargs="+", default=["local", "process", "ray-cluster"],
                    choices=["local", "process", "ray", "ray-cluster"])
    ap.add_argument("--profile", type=checked(int, lambda n: n == 0 or fits(n), f"0 (off) or {count}"), default=0,
                    metavar="N",
                    help="instead: per-node costs at N nodes with E = 3, all FOL variants and DM-PFL")
    ap.add_argument("--partition", type=node_count, nargs="+", metavar="N",
                    help="time only the orbit partition of the N-node scenario (its covering pairs, CPU, peak)")
    ap.add_argument("--budget", choices=["full", "light"], default="full",
                    help="light: 2 pretraining epochs and one epoch / few steps per FOL stage, to measure "
                         "the overhead around the training at sizes the full budget cannot reach")
    ap.add_argument("--one", nargs=2, metavar=("EXECUTOR", "N"), help=argparse.SUPPRESS)
    ap.add_argument("--ray-address", help=argparse.SUPPRESS)
    ap.add_argument("--machines", type=int_in(1), nargs="+", default=[1, 4, 16, 64])
    ap.add_argument("--cores", type=int_in(1), default=2)
    args = ap.parse_args(argv)
    # ``kill`` (SIGTERM) ends the run through the ``finally`` that stops the Ray
    # cluster it started, as Ctrl-C does; by default SIGTERM skips it, and the
    # cluster's raylets (their own sessions) would outlive the benchmark
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    if args.one:
        one(args.one[0], int(args.one[1]), args.budget, args.ray_address)
        return 0
    print(machine_line())
    if args.partition:
        partition(args.partition)
    elif args.profile:
        profile(args.profile, args.machines, args.cores, 1584)
    else:
        scaling(args.nodes, args.executors, args.budget)
    return 0


if __name__ == "__main__":
    sys.exit(main())
