"""Contact windows at constellation scale: a Starlink-like shell over 24 h.

Shell: Walker-delta 1584/72/1 at 550 km, 53 deg; 5,000 km maximum range,
80 km grazing altitude; windows refined to well below 1 s.

Prints, in a form the README quotes:

* wall time (propagation + window search) and peak memory (parent and
  largest worker, from ``getrusage``);
* number of windows, mean duration;
* accuracy: for a sample of pairs, every edge against a brute-force 1 s
  SGP4 scan with the direct segment-vs-sphere test (maximum deviation
  beyond the 1 s bracket);
* speed ratio against a straightforward pairwise Skyfield loop
  (``EarthSatellite.at`` for both satellites of a pair at 1 s over 1 h,
  then the visibility test), extrapolated per pair-second to the full run.

Run:  python benchmarks/contacts_scale.py [--workers 2] [--step 60] [--hours 24]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from contact_sim import (LinkGeometry, find_windows, satellite_trajectories, space_visible,  # noqa: E402
                         windows_from_samples)
from orbits import propagate_offsets, skyfield_times, timescale, walker_delta  # noqa: E402

EPOCH = "2025-03-01T00:00:00Z"


def _cpu_s() -> float:
    """User + system CPU seconds of this process and its (finished) workers."""
    tot = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        ru = resource.getrusage(who)
        tot += ru.ru_utime + ru.ru_stime
    return tot


def _rss_mb(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024.0  # Linux: kB


def check_accuracy(c, table, duration_s: float, pairs: int, seed: int) -> tuple[int, int, float]:
    """Compare sampled pairs against a 1 s brute-force scan; returns (pairs, edges, max excess s)."""
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, duration_s + 0.5, 1.0)
    # pairs with at least one window that starts and ends inside the run
    inner = np.flatnonzero((table.t_start_s > 0) & (table.t_end_s < duration_s))
    chosen = rng.choice(inner, size=min(pairs, inner.size), replace=False)
    n_edges, worst = 0, 0.0
    for i in chosen:
        a, b = int(table.a[i]), int(table.b[i])
        r, _ = propagate_offsets([c.satrecs[a], c.satrecs[b]], c.epoch, t)
        ref = windows_from_samples(t, space_visible(r[0], r[1], 5000.0))
        got = table.pair(a, b)
        if len(ref) != len(got):
            raise SystemExit(f"pair {a}-{b}: {len(ref)} brute-force windows vs {len(got)} computed")
        for (rs, re), s, e in zip(ref, got.t_start_s, got.t_end_s):
            if rs > 0:  # true start in (rs - 1, rs]
                worst = max(worst, s - rs, (rs - 1.0) - s)
                n_edges += 1
            if re < duration_s:  # true end in [re, re + 1)
                worst = max(worst, re - e, e - (re + 1.0))
                n_edges += 1
    return len(chosen), n_edges, max(worst, 0.0)


def naive_skyfield(c, n_pairs: int, seconds: int, seed: int) -> float:
    """Seconds per pair-second of a pairwise Skyfield loop (positions recomputed per pair)."""
    from skyfield.api import EarthSatellite

    ts = timescale()
    rng = np.random.default_rng(seed)
    t = skyfield_times(c.epoch, np.arange(0.0, float(seconds)))
    sats = [EarthSatellite.from_satrec(s, ts) for s in c.satrecs]
    t0 = time.perf_counter()
    for _ in range(n_pairs):
        a, b = rng.choice(len(sats), size=2, replace=False)
        pa = sats[a].at(t).position.km.T
        pb = sats[b].at(t).position.km.T
        windows_from_samples(np.arange(seconds), space_visible(pa, pb, 5000.0))
    return (time.perf_counter() - t0) / (n_pairs * seconds)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--total", type=int, default=1584)
    ap.add_argument("--planes", type=int, default=72)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--step", type=float, default=60.0, help="screening grid (s)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--check-pairs", type=int, default=10)
    ap.add_argument("--naive-pairs", type=int, default=10)
    ap.add_argument("--naive-seconds", type=int, default=3600)
    args = ap.parse_args()
    duration = args.hours * 3600.0

    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs visible, "
          f"workers={args.workers}, numpy {np.__version__}")
    c = walker_delta(args.total, args.planes, 1, 550.0, 53.0, EPOCH)
    geom = LinkGeometry(max_range_km=5000.0)
    cpu0 = _cpu_s()
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    traj = satellite_trajectories(c, c.epoch, duration, args.step)
    t1 = time.perf_counter()
    table = find_windows(traj, geom, workers=args.workers)
    t2 = time.perf_counter()
    wall = t2 - t0
    cpu = _cpu_s() - cpu0
    parent_mb = _rss_mb(resource.RUSAGE_SELF)
    child_mb = _rss_mb(resource.RUSAGE_CHILDREN)
    print(f"shell: Walker-delta {args.total}/{args.planes}/1, 550 km, 53 deg; {args.hours:g} h; "
          f"max range 5000 km, grazing 80 km; grid {args.step:g} s")
    print(f"propagation: {t1 - t0:.1f} s   window search: {t2 - t1:.1f} s   total: {wall:.1f} s")
    print(f"CPU time (parent + workers): {cpu:.1f} s  (load average before the run: {load0:.1f})")
    print(f"peak memory: parent {parent_mb:.0f} MB, largest worker {child_mb:.0f} MB "
          f"(sum {parent_mb + child_mb:.0f} MB)")
    print(f"windows: {len(table):,}   mean duration {table.duration_s.mean():.0f} s   "
          f"per satellite {2 * len(table) / args.total:.0f}")
    target = "met" if wall < 60 and parent_mb + child_mb < 4096 else "NOT met"
    print(f"target (< 60 s, < 4 GB on 2 cores): {target}")

    n_pairs, n_edges, excess = check_accuracy(c, table, duration, args.check_pairs, 1)
    print(f"accuracy: {n_pairs} pairs, {n_edges} edges vs brute-force 1 s SGP4 scan: "
          f"max deviation beyond the 1 s bracket {excess * 1000:.2f} ms")

    per_pair_s = naive_skyfield(c, args.naive_pairs, args.naive_seconds, 2)
    pairs_total = args.total * (args.total - 1) / 2
    naive_total = per_pair_s * pairs_total * duration
    print(f"naive pairwise Skyfield loop: {per_pair_s * 1e6:.2f} us per pair-second "
          f"({args.naive_pairs} pairs x {args.naive_seconds} s); extrapolated to "
          f"{pairs_total:,.0f} pairs x {duration:,.0f} s = {naive_total / 3600:,.0f} h")
    print(f"speed ratio: {naive_total / wall:,.0f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
