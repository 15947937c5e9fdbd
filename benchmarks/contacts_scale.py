"""Contact windows at constellation scale, 24 h: one Starlink-like shell and a
Starlink-like multi-shell constellation.

Sizes (``--sizes``):

* ``1584``: Walker-delta 1584/72/1 at 550 km, 53 deg;
* ``4408``: five shells, Starlink Gen-1 like: 1584/72/1 at 550 km, 53 deg;
  1584/72/1 at 540 km, 53.2 deg; 720/36/1 at 570 km, 70 deg; 348/6/1 and
  172/4/1 at 560 km, 97.6 deg.

Link: 5,000 km maximum range, 80 km grazing altitude. Edges are refined far
below 1 s (cubic Hermite roots, see :mod:`contact_sim.windows`).

For each size it prints:

* wall time (propagation + window search) and CPU time of all processes;
* the TRUE peak memory of the whole process tree (this process and its
  forked workers): the peak of their summed PSS (proportional set size,
  ``/proc/<pid>/smaps_rollup``), sampled every 0.2 s, so pages shared after
  the fork count once in total; beside it the peak of the summed RSS, which
  counts them once per process (an upper bound);
* the number of windows;
* the edge error against a brute-force 1 s SGP4 scan with the direct
  segment-vs-sphere test on windows sampled at random (seeded) until at least
  ``--check-edges`` edges are compared: the largest distance of a computed
  edge outside the 1 s bracket that contains the true edge, and that
  distance + 1 s as the bound on the error;
* ``uptime``'s load average before the run (the machine is shared).

With ``--fork-overhead`` it instead measures what a forked worker of the window search holds (what
:data:`contact_sim.windows._FORKED_WORKER_BYTES` counts for each): for each ``--sizes`` shell (at
``--hours``, ``--step``) and each ``--scenarios`` file (searched as ``fol contacts`` does), ``--repeat``
times, the true peak of the scan (summed PSS, sampled every 10 ms, until the parts are read back) in one
process and with ``--workers`` forked workers, each run in a fresh process; per forked worker, the
difference, and the difference less what the memory check counts more for what the forked workers hold
(each worker's window buffers and open-window table, and its grid step's candidate pairs, counted apart
from the constant).

With ``--plan-windows N`` it instead times :class:`contact_sim.ContactPlan`
queries (per-round participation through ``deliverable`` for every node, a
graph snapshot) and the CSV / JSON exports on a synthetic plan of N windows.

Measured on 2026-11-23 with the compiled kernels, the machine otherwise idle
(``uptime`` load before each run in brackets; CPU of all processes;
docs/scale.md has the full table):

* ``--sizes 1584``: 37 s wall, 66 CPU-s, 1.57 GB true peak, 9,495,330
  windows, 543 edges within 1 s (load 1.75): the <= 60 s target is met;
* ``--sizes 4408``, two runs: 282 s and 313 s wall, 529 and 579 CPU-s,
  3.58 GB true peak, 94,110,000 windows, 541 edges within 1 s (load 1.31
  and 1.22): the 4 GB target is met, the 4 min target is not;
* ``--plan-windows 10000000``: CSV 15.4 CPU-s, JSON 9.5 CPU-s, per-round
  participation of 1,584 nodes 6.2 CPU-s (load 1.45).

Run:  python benchmarks/contacts_scale.py [--sizes 1584 4408] [--workers 2]
      [--step 60] [--hours 24] [--check-edges 500]
      python benchmarks/contacts_scale.py --plan-windows 10000000
      python benchmarks/contacts_scale.py --fork-overhead --scenarios examples/leo_*.toml
      [examples/drone_*.toml] [--sizes 1584 4408 --hours 2] [--workers 2] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import PeakMemory, fail, int_in, per_core, positive_float, result_line  # noqa: E402

from contact_sim import (LinkGeometry, find_windows, satellite_trajectories, space_visible,  # noqa: E402
                         windows_from_samples)
from orbits import Constellation, propagate_offsets, walker  # noqa: E402

EPOCH = "2025-03-01T00:00:00Z"
MAX_RANGE_KM = 5000.0

# (total, planes, altitude km, inclination deg): Starlink Gen-1 like shells
SHELLS = {
    1584: [(1584, 72, 550.0, 53.0)],
    4408: [(1584, 72, 550.0, 53.0), (1584, 72, 540.0, 53.2), (720, 36, 570.0, 70.0),
           (348, 6, 560.0, 97.6), (172, 4, 560.0, 97.6)],
}


def constellation(shells) -> Constellation:
    """Several Walker-delta shells as one constellation (distinct names and catalogue numbers)."""
    names, sats, planes, slots = [], [], [], []
    first, plane0 = 1, 0
    for i, (total, n_planes, alt, inc) in enumerate(shells):
        c = walker(total, n_planes, 1, alt, inc, EPOCH, 360.0, f"SH{i}", first)
        names += c.names
        sats += c.satrecs
        planes += [p + plane0 for p in c.planes]
        slots += c.slots
        first += total
        plane0 += n_planes
        epoch = c.epoch
    desc = "; ".join(f"{t}/{p}/1 {a:g} km {i:g} deg" for t, p, a, i in shells)
    return Constellation(names, sats, epoch, planes, slots, desc)


# --------------------------------------------------------------------------- edge check

def check_edges(c: Constellation, table, duration_s: float, min_edges: int, seed: int):
    """Brute-force 1 s check of randomly chosen windows (and all windows of their pairs).

    Returns (pairs, edges compared, pairs whose window count differs, max
    distance outside the 1 s bracket in s).
    """
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, duration_s + 0.5, 1.0)
    inner = np.flatnonzero((table.t_start_s > 0) & (table.t_end_s < duration_s))
    order = rng.permutation(inner)
    seen: set[tuple[int, int]] = set()
    n_edges, worst, bad = 0, 0.0, 0
    for i in order:
        if n_edges >= min_edges:
            break
        a, b = int(table.a[i]), int(table.b[i])
        if (a, b) in seen:
            continue
        seen.add((a, b))
        r, _ = propagate_offsets([c.satrecs[a], c.satrecs[b]], c.epoch, t)
        ref = windows_from_samples(t, space_visible(r[0], r[1], MAX_RANGE_KM))
        got = table.pair(a, b)
        if len(ref) != len(got):
            bad += 1
            continue
        for (rs, re), s, e in zip(ref, got.t_start_s, got.t_end_s):
            if rs > 0:  # true start in (rs - 1, rs]
                worst = max(worst, s - rs, (rs - 1.0) - s)
                n_edges += 1
            if re < duration_s:  # true end in [re, re + 1)
                worst = max(worst, re - e, e - (re + 1.0))
                n_edges += 1
    return len(seen), n_edges, bad, max(worst, 0.0)


def naive_skyfield(c: Constellation, n_pairs: int, seconds: int, seed: int) -> float:
    """Seconds per pair-second of a pairwise Skyfield loop (positions recomputed per pair)."""
    from skyfield.api import EarthSatellite

    from orbits import skyfield_times, timescale

    ts = timescale()
    rng = np.random.default_rng(seed)
    t = skyfield_times(c.epoch, np.arange(0.0, float(seconds)))
    sats = [EarthSatellite.from_satrec(s, ts) for s in c.satrecs]
    t0 = time.perf_counter()
    for _ in range(n_pairs):
        a, b = rng.choice(len(sats), size=2, replace=False)
        pa = sats[a].at(t).position.km.T
        pb = sats[b].at(t).position.km.T
        windows_from_samples(np.arange(seconds), space_visible(pa, pb, MAX_RANGE_KM))
    return (time.perf_counter() - t0) / (n_pairs * seconds)


def run_size(size: int, args) -> dict:
    duration = args.hours * 3600.0
    c = constellation(SHELLS[size])
    geom = LinkGeometry(max_range_km=MAX_RANGE_KM)
    load = os.getloadavg()
    with PeakMemory() as peak:
        t0 = time.perf_counter()
        traj = satellite_trajectories(c, c.epoch, duration, args.step)
        t1 = time.perf_counter()
        table = find_windows(traj, geom, workers=args.workers)
        t2 = time.perf_counter()
        del traj
    cpu = peak.cpu_s  # every process of the tree, read from /proc while sampling
    print(f"\n== {size} satellites: {c.description}")
    print(f"{args.hours:g} h, grid {args.step:g} s, workers {args.workers}; "
          f"load average before: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"propagation {t1 - t0:.1f} s, window search {t2 - t1:.1f} s, total wall {t2 - t0:.1f} s, "
          f"CPU (all processes) {cpu:.1f} s")
    print(f"true peak memory of the process tree (summed PSS, sampled): {peak.pss_kb / 2**20:.2f} GB "
          f"(summed RSS, shared pages once per process: {peak.rss_kb / 2**20:.2f} GB; the kernel's per-process "
          f"peaks summed, an upper bound: {peak.hwm_kb / 2**20:.2f} GB)")
    print(f"windows: {len(table):,}   mean duration {table.duration_s.mean():.0f} s")
    pairs, edges, bad, excess = check_edges(c, table, duration, args.check_edges, seed=1)
    err = excess + 1.0
    print(f"edge check vs brute-force 1 s SGP4 scan: {pairs} pairs, {edges} edges, {bad} pairs with a "
          f"different window count; computed edges at most {excess * 1000:.2f} ms outside the 1 s "
          f"bracket, so max error <= {err:.3f} s")
    if args.naive_pairs:
        per_pair_s = naive_skyfield(c, args.naive_pairs, 3600, 2)
        total = per_pair_s * len(c) * (len(c) - 1) / 2 * duration
        print(f"naive pairwise Skyfield loop: {per_pair_s * 1e6:.2f} us per pair-second ({args.naive_pairs} pairs "
              f"x 3600 s), extrapolated {total / 3600:,.0f} h: {total / (t2 - t0):,.0f}x slower")
    return {"size": size, "wall": t2 - t0, "cpu": cpu, "pss_gb": peak.pss_kb / 2**20, "rss_gb": peak.rss_kb / 2**20, "hwm_gb": peak.hwm_kb / 2**20,
            "windows": len(table), "edges": edges, "bad": bad, "err": err, "load": load[0]}


def plan_queries(n_windows: int, n_nodes: int, out_dir: str) -> None:
    """Time ContactPlan queries and exports on a synthetic plan of ``n_windows`` windows."""
    import datetime as dt
    import tempfile

    from contact_sim import ContactPlan, LinkModel, WindowTable

    rng = np.random.default_rng(0)
    a = rng.integers(0, n_nodes - 1, n_windows)
    b = a + 1 + rng.integers(0, 2**31, n_windows) % (n_nodes - 1 - a)
    t0 = rng.uniform(0, 86_400, n_windows)
    rmin = rng.uniform(100, 4000, n_windows).astype(np.float32)
    w = WindowTable(a, b, t0, t0 + rng.uniform(1, 3000, n_windows), rmin, rmin + 100, np.zeros(n_windows))
    del a, b, t0, rmin
    plan = ContactPlan([f"sat-{i}" for i in range(n_nodes)], w, LinkModel("constant", 10e6, 30.0),
                       np.linspace(0, 86_400, 4), start=dt.datetime(2025, 3, 1, tzinfo=dt.timezone.utc))
    print(f"\n== plan queries and exports: {n_windows:,} windows, {n_nodes:,} nodes, 3 rounds; "
          f"load average before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        for name, fn in (("to_csv", lambda: plan.to_csv(Path(tmp) / "c.csv")),
                         ("to_json", lambda: plan.to_json(Path(tmp) / "c.json"))):
            t, c = time.perf_counter(), time.process_time()
            path = fn()
            print(f"{name}: {time.perf_counter() - t:.1f} s wall, {time.process_time() - c:.1f} s CPU, "
                  f"{path.stat().st_size / 2**20:,.0f} MB")
            path.unlink()
    t = time.perf_counter()
    plan.deliverable(0, 0, 1)  # builds the per-node index once
    t_index = time.perf_counter() - t
    t, c = time.perf_counter(), time.process_time()
    part = [k for k in range(n_nodes) if plan.deliverable(k, 1, 50_000_000)]
    print(f"per-node index: {t_index:.1f} s; per-round participation (deliverable for all {n_nodes:,} nodes): "
          f"{time.perf_counter() - t:.1f} s wall, {time.process_time() - c:.1f} s CPU, {len(part):,} nodes take part")
    t, c = time.perf_counter(), time.process_time()
    g = plan.contact_graph(t_s=43_200.0)
    print(f"graph snapshot at 12 h: {time.perf_counter() - t:.1f} s wall, {time.process_time() - c:.1f} s CPU, "
          f"{g.number_of_edges():,} edges")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


# --------------------------------------------------------------------------- a forked worker's own memory

def _search(spec: dict):
    """(trajectories, geometry, rate function) of one search of ``--fork-overhead``: a contact scenario
    file as ``fol contacts`` searches it (:func:`contact_sim.scenario.plan_from_trajectories`), or a
    Walker shell of ``--sizes`` at ``--hours`` and ``--step``."""
    if "scenario" in spec:
        from contact_sim.scenario import build_trajectories, load_contact_scenario

        scenario = load_contact_scenario(spec["scenario"])
        rate_fn = scenario.link.rate_at if scenario.link.needs_integration else None
        return build_trajectories(scenario), scenario.geometry, rate_fn
    c = constellation(SHELLS[spec["size"]])
    traj = satellite_trajectories(c, c.epoch, spec["hours"] * 3600.0, spec["step"])
    return traj, LinkGeometry(max_range_km=MAX_RANGE_KM), None


def measure_scan(spec: dict) -> dict:
    """One search's scan with ``spec["workers"]``, run in a process of its own (``--measure-scan``): the
    true peak of the process tree (summed PSS, sampled every 10 ms) from the search's start until its parts
    are read back into the table, which the parent builds alone whatever the number of workers."""
    from contact_sim import windows

    traj, geometry, rate_fn = _search(spec)
    peak = PeakMemory(interval_s=0.01)
    assemble, start, tallies = windows._assemble, windows._WindowTally.start, []

    def scan_ended(*args, **kwargs):
        peak.stop()  # the workers have ended
        return assemble(*args, **kwargs)

    def started(tally, *args, **kwargs):
        tallies.append(tally)  # to read, once the scan is over, the most bytes it counted the workers held
        return start(tally, *args, **kwargs)

    windows._assemble, windows._WindowTally.start = scan_ended, started
    with peak:
        table = windows.find_windows(traj, geometry, rate_fn=rate_fn, workers=spec["workers"], budget=True)
    forks = len(peak.cpu_by_pid()) - 1
    # the memory check's count of what the workers held together at most (its _sums[3]), less the fixed
    # _FORKED_WORKER_BYTES of each forked worker: what it counts for their windows and candidate pairs
    held = tallies[-1]._sums[3] - forks * windows._FORKED_WORKER_BYTES
    return {"pss_kb": peak.pss_kb, "forks": forks, "held_kb": max(held, 0.0) / 1024, "windows": len(table),
            "nodes": traj.n_nodes, "times": int(traj.times_s.size)}


def _measured(spec: dict, workers: int) -> dict:
    """:func:`measure_scan` in a fresh Python process (its kernels loaded there, as by ``fol contacts``)."""
    run = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--measure-scan",
                          json.dumps(dict(spec, workers=workers))], capture_output=True, text=True)
    if run.returncode != 0:
        last = (run.stderr.strip().splitlines() or ["no message"])[-1]
        raise SystemExit(fail(f"{spec['name']}: the search with --workers {workers} failed: {last}", 1))
    return result_line(run.stdout, f"{spec['name']}: the search with --workers {workers}", dict)


def fork_overhead(args) -> int:
    """Per search, ``--repeat`` times: the scan's true peak in one process and with ``--workers`` forked
    workers, each in a fresh process; what a forked worker adds is the difference over the workers forked."""
    from contact_sim.windows import _FORKED_WORKER_BYTES

    specs = [{"scenario": p, "name": p} for p in args.scenarios]
    specs += [{"size": s, "hours": args.hours, "step": args.step,
               "name": f"Walker {s}, {args.hours:g} h at {args.step:g} s, {MAX_RANGE_KM:g} km"} for s in args.sizes]
    _measured(specs[0], 1)  # compiles the kernels into numba's cache if they are not there yet
    rows = []
    for spec in specs:
        raw, own, one, forked, loads = [], [], [], [], []
        for i in range(args.repeat):
            loads.append(os.getloadavg()[0])
            a, b = _measured(spec, 1), _measured(spec, args.workers)
            if b["forks"] < 2:
                return fail(f"{spec['name']}: --workers {args.workers} forked {b['forks']} workers on this machine "
                            f"of {os.cpu_count()} core(s); nothing to measure", 1)
            one.append(a["pss_kb"] / 1024)
            forked.append(b["pss_kb"] / 1024)
            raw.append((forked[-1] - one[-1]) / b["forks"])
            counted = (b["held_kb"] - a["held_kb"]) / 1024  # what the check counts more for the forked workers
            own.append((forked[-1] - one[-1] - counted) / b["forks"])
            if i == 0:
                capped = " (at most one per core)" if b["forks"] < args.workers else ""
                print(f"\n== {spec['name']}: {a['nodes']:,} nodes, {a['times']:,} grid times, "
                      f"{a['windows']:,} windows; --workers {args.workers}: {b['forks']} forked{capped}")
            print(f"run {i + 1} (load {loads[-1]:.2f}): scan's true peak {one[-1]:.1f} MiB in one process, "
                  f"{forked[-1]:.1f} MiB forked: {raw[-1]:+.1f} MiB a forked worker; the check counts "
                  f"{a['held_kb'] / 1024:.1f} and {b['held_kb'] / 1024:.1f} MiB for the windows and pairs held: "
                  f"{own[-1]:+.1f} MiB a forked worker beyond them")
        rows.append((spec["name"], a, b["forks"], statistics.median(one), statistics.median(forked), raw, own, loads))
    print(f"\n| search | nodes | grid times | windows | forked workers | scan's true peak, one process (MiB, median) "
          f"| forked (MiB, median) | per forked worker (MiB): min / median / max of {args.repeat} "
          f"| the same beyond what the check counts for the windows and pairs held | load before |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, a, forks, one_mib, forked_mib, raw, own, loads in rows:
        print(f"| {name} | {a['nodes']:,} | {a['times']:,} | {a['windows']:,} | {forks} | {one_mib:,.0f} "
              f"| {forked_mib:,.0f} "
              f"| {min(raw):.1f} / {statistics.median(raw):.1f} / {max(raw):.1f} "
              f"| {min(own):.1f} / {statistics.median(own):.1f} / {max(own):.1f} | {min(loads):.2f}-{max(loads):.2f} |")
    most = max(max(r[6]) for r in rows)
    counted = _FORKED_WORKER_BYTES / 2**20
    print(f"largest beyond what the check counts for the windows and pairs held: {most:.1f} MiB a forked worker; "
          f"it counts "
          f"{counted:g} MiB for each (contact_sim.windows._FORKED_WORKER_BYTES): "
          + ("covered" if most <= counted else "NOT covered"))
    return 0


def met(ok: bool) -> str:
    return "met" if ok else "NOT met"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", choices=sorted(SHELLS),
                    help="Walker shells to search (default 1584 4408; with --fork-overhead, none)")
    ap.add_argument("--hours", type=positive_float("a number of hours"), default=24.0)
    ap.add_argument("--step", type=positive_float("a grid step in seconds"), default=60.0, help="screening grid (s)")
    ap.add_argument("--workers", type=per_core, default=2,
                    help="processes of the window search, 1..4 per core (fol contacts --workers' rule; at most one per core is forked)")
    ap.add_argument("--check-edges", type=int_in(1, why="edges to check"), default=500)
    ap.add_argument("--naive-pairs", type=int_in(0, why="0: off"), default=0,
                    help="also time a pairwise Skyfield loop on this many pairs and extrapolate")
    ap.add_argument("--plan-windows", type=int_in(0, why="0: off"), default=0, metavar="N",
                    help="instead: time plan queries and CSV/JSON export on a synthetic N-window plan")
    ap.add_argument("--plan-nodes", type=int_in(2, why="nodes of the plan"), default=1584)
    ap.add_argument("--fork-overhead", action="store_true",
                    help="instead: what a forked worker of the window search holds, the scan's true peak with "
                         "--workers forked workers less that in one process, per worker, for each --sizes shell "
                         "(at --hours, --step) and each --scenarios file, each run in a fresh process")
    ap.add_argument("--scenarios", nargs="+", default=[], metavar="TOML",
                    help="with --fork-overhead: contact scenario files, searched as fol contacts does")
    ap.add_argument("--repeat", type=int_in(1, why="runs of each search"), default=3,
                    help="with --fork-overhead: runs of each search in one process and forked (default 3)")
    ap.add_argument("--measure-scan", help=argparse.SUPPRESS)  # fork_overhead's fresh process
    args = ap.parse_args(argv)
    if args.measure_scan:
        print(json.dumps(measure_scan(json.loads(args.measure_scan))))
        return 0
    if args.sizes is None:
        args.sizes = [] if args.fork_overhead else [1584, 4408]
    if args.fork_overhead:
        if args.workers < 2:
            ap.error(f"--fork-overhead: expected --workers >= 2, got {args.workers}")
        if not args.sizes and not args.scenarios:
            ap.error("--fork-overhead: expected --sizes or --scenarios")
        from contact_sim.errors import ContactError
        from contact_sim.scenario import load_contact_scenario

        for path in args.scenarios:
            try:
                load_contact_scenario(path)
            except ContactError as exc:
                raise SystemExit(fail(str(exc)))
    elif args.scenarios:
        ap.error("--scenarios: expected with --fork-overhead")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs visible, "
          f"numpy {np.__version__}")
    if args.plan_windows:
        plan_queries(args.plan_windows, args.plan_nodes, "/tmp")
        return 0
    if args.fork_overhead:
        return fork_overhead(args)
    rows = [run_size(s, args) for s in args.sizes]
    targets = {1584: (60.0, None), 4408: (240.0, 4.0)}
    print("\n| satellites | grid (s) | wall (s) | CPU, all processes (s) | true peak, summed PSS (GB) "
          "| summed RSS (GB) | windows | edges checked | max edge error (s) | load before |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['size']:,} | {args.step:g} | {r['wall']:.0f} | {r['cpu']:.0f} | {r['pss_gb']:.2f} | {r['rss_gb']:.2f} | {r['windows']:,} "
              f"| {r['edges']} | {r['err']:.3f} | {r['load']:.2f} |")
    for r in rows:
        wall_max, mem_max = targets[r["size"]]
        mem = f", <= {mem_max:g} GB" if mem_max else ""
        if args.hours != 24.0 or args.step != 60.0:
            print(f"target {r['size']} (24 h, 60 s grid): <= {wall_max:g} s{mem}: not evaluated "
                  f"({args.hours:g} h, {args.step:g} s grid)")
            continue
        parts = [f"wall <= {wall_max:g} s: {met(r['wall'] <= wall_max)} ({r['wall']:.0f} s)"]
        if mem_max is not None:
            parts.append(f"true peak <= {mem_max:g} GB: {met(r['pss_gb'] <= mem_max)} ({r['pss_gb']:.2f} GB)")
        edges_ok = r["err"] <= 1.0 and r["bad"] == 0 and r["edges"] >= args.check_edges
        parts.append(f"edge error <= 1 s on >= {args.check_edges} edges: {met(edges_ok)}")
        print(f"target {r['size']}: " + "; ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
