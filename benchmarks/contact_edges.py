"""Accuracy of the window search's edges by grid step and station mask, against SGP4 edges bisected to 1e-6 s.

For a Walker-delta shell and a few ground stations over a horizon, the
project's window search (:func:`contact_sim.find_windows` on
:func:`contact_sim.satellite_trajectories` at each ``--steps`` grid step, each
``--masks`` station elevation mask) is compared with a reference built without
it: every satellite-satellite and station-satellite pair is tested every
``--scan`` seconds (1 s) with the direct geometry of :mod:`contact_sim.geometry`
(the segment-vs-sphere occlusion test and the range for links between
satellites, :func:`~contact_sim.geometry.elevation_deg` and the range for
station links) on SGP4 positions, and every change of visibility is bisected on
the same tests down to ``--tol`` seconds (1e-6 s). The reference so measures
the search's cubic model of the constraints, not SGP4: both take the same
positions. A window shorter than the scan step can escape the reference (the
search's windows that overlap none are counted as spurious).

A reference window overlapped by exactly one found window, which overlaps no
other, is matched, and its edges (but those cut by the horizon's ends) are
compared: the median and largest error of those edges (s). A reference window
no found window overlaps is missed; one that overlaps several found windows, or
shares its found window with another, is counted as split or merged. Links
between satellites do not depend on the mask: one row per step.

Run from the repository root (the figures of docs/scenario.md, ``[time] step_s``;
15 s on 2026-12-07)::

    python benchmarks/contact_edges.py --hours 6 --stations 3 --steps 30 60 300 600 1200 --masks 10 25 40
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _common import checked, fail, int_in, positive_float  # noqa: E402

from contact_sim import (ContactError, GroundStation, LinkGeometry, elevation_deg, find_windows,  # noqa: E402
                         range_km, satellite_trajectories, space_visible, time_grid)
from contact_sim.trajectory import station_positions_teme  # noqa: E402
from orbits import OrbitError, propagate_offsets, walker_delta  # noqa: E402

EPOCH = "2025-03-01T00:00:00Z"
MAX_RANGE_KM = 5000.0  # examples/leo_contacts.toml's link
#: Largest number of node positions the reference scans (48 bytes each with the velocity SGP4 gives): 240 MB.
MAX_SCAN_SAMPLES = 5_000_000
#: Mid-latitude stations a 53 deg shell passes over (the first is examples/leo_contacts.toml's).
STATIONS = [GroundStation("Matera", 40.65, 16.70, 500.0), GroundStation("Wallops", 37.94, -75.46, 10.0),
            GroundStation("Hartebeesthoek", -25.89, 27.69, 1500.0), GroundStation("Usuda", 36.13, 138.36, 1450.0),
            GroundStation("Alice-Springs", -23.76, 133.88, 550.0)]


# --------------------------------------------------------------------------- the reference

class Reference:
    """Exact visibility of satellite pairs and station-satellite pairs at any times (SGP4 + direct geometry)."""

    def __init__(self, constellation, stations, max_range_km: float) -> None:
        self.c, self.stations, self.max_range_km = constellation, stations, max_range_km

    def positions(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Satellites ``(n_sat, n_t, 3)`` and stations ``(n_t, n_st, 3)``, TEME km."""
        r, _ = propagate_offsets(self.c, self.c.epoch, t)
        s = station_positions_teme(self.stations, self.c.epoch, t)[0] if self.stations else None
        return r, s

    def visible(self, kind: str, i: np.ndarray, j: np.ndarray, mask: float, t: np.ndarray,
                at: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
        """Visibility of pair ``(i[m], j[m])`` at ``t[m]``: ``kind`` "isl" (satellites i, j) or "station"
        (station i, satellite j); ``at``: the positions at ``t`` when already computed."""
        r, s = at or self.positions(t)
        cols = np.arange(t.size)
        if kind == "isl":
            return space_visible(r[i, cols], r[j, cols], self.max_range_km)
        sat, st = r[j, cols], s[cols, i]
        return (elevation_deg(st, sat) >= mask) & (range_km(st, sat) <= self.max_range_km)

    def windows(self, kind: str, pairs: list[tuple[int, int]], mask: float, duration_s: float,
                scan_s: float, tol_s: float) -> dict[tuple[int, int], list[tuple[float, float]]]:
        """Each pair's windows: visibility every ``scan_s``, each change bisected to ``tol_s``."""
        t = time_grid(duration_s, scan_s)
        at = self.positions(t)
        # (pair, lo, hi, state at lo) of every change of visibility between two scan samples
        found: dict[tuple[int, int], np.ndarray] = {}
        brackets = []
        for p in pairs:
            v = self.visible(kind, np.full(t.size, p[0]), np.full(t.size, p[1]), mask, t, at)
            found[p] = v
            for k in np.flatnonzero(v[1:] != v[:-1]):
                brackets.append((p, t[k], t[k + 1], bool(v[k])))
        if brackets:
            lo = np.array([b[1] for b in brackets])
            hi = np.array([b[2] for b in brackets])
            state = np.array([b[3] for b in brackets])
            i = np.array([b[0][0] for b in brackets])
            j = np.array([b[0][1] for b in brackets])
            while (hi - lo).max() > tol_s:
                mid = 0.5 * (lo + hi)
                same = self.visible(kind, i, j, mask, mid) == state
                lo, hi = np.where(same, mid, lo), np.where(same, hi, mid)
            edges = 0.5 * (lo + hi)
        out: dict[tuple[int, int], list[tuple[float, float]]] = {}
        n = 0
        for p in pairs:
            v, ws, start = found[p], [], None
            if v[0]:
                start = 0.0
            for k in np.flatnonzero(v[1:] != v[:-1]):
                if v[k + 1]:
                    start = float(edges[n])
                else:
                    ws.append((start, float(edges[n])))
                n += 1
            if v[-1]:
                ws.append((start, float(duration_s)))
            out[p] = ws
        return out


# --------------------------------------------------------------------------- comparison

def compare(ref: dict, got: dict, duration_s: float) -> dict:
    """Match each pair's found windows with its reference windows (see the module's docstring)."""
    n_ref = n_got = missed = spurious = split = 0
    errors: list[float] = []
    for p, rw in ref.items():
        gw = got.get(p, [])
        n_ref += len(rw)
        n_got += len(gw)
        over = [[g for g, (gs, ge) in enumerate(gw) if gs <= re and ge >= rs] for rs, re in rw]
        hits = np.zeros(len(gw), dtype=int)
        for o in over:
            hits[o] += 1
        spurious += int((hits == 0).sum())
        for (rs, re), o in zip(rw, over):
            if not o:
                missed += 1
            elif len(o) > 1 or hits[o[0]] > 1:
                split += 1
            else:
                gs, ge = gw[o[0]]
                if rs > 0:
                    errors.append(abs(gs - rs))
                if re < duration_s:
                    errors.append(abs(ge - re))
    e = np.array(errors)
    return {"ref": n_ref, "got": n_got, "missed": missed, "spurious": spurious, "split": split,
            "edges": e.size, "median": float(np.median(e)) if e.size else float("nan"),
            "max": float(e.max()) if e.size else float("nan")}


def by_pair(table, kind: str, n_sat: int) -> dict[tuple[int, int], list[tuple[float, float]]]:
    """The found windows of one kind: "isl" keyed (sat, sat), "station" keyed (station, sat)."""
    out: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for a, b, s, e in zip(table.a.tolist(), table.b.tolist(), table.t_start_s.tolist(), table.t_end_s.tolist()):
        if (b >= n_sat) != (kind == "station"):
            continue
        key = (a, b) if kind == "isl" else (b - n_sat, a)
        out.setdefault(key, []).append((s, e))
    for ws in out.values():
        ws.sort()
    return out


def seconds(x: float) -> str:
    return "-" if x != x else f"{x:.2g}" if x < 1 else f"{x:,.1f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--total", type=int_in(1, why="satellites"), default=12)
    ap.add_argument("--planes", type=int_in(1, why="orbital planes"), default=3)
    ap.add_argument("--altitude", type=positive_float("an altitude in km"), default=550.0)
    ap.add_argument("--inclination", type=checked(float, lambda v: 0 <= v <= 180, "an inclination in 0..180 deg"),
                    default=53.0)
    ap.add_argument("--stations", type=int_in(0, len(STATIONS), "the first of " + ", ".join(s.name for s in STATIONS)),
                    default=3)
    ap.add_argument("--hours", type=checked(float, lambda v: 0 < v <= 48, "a number of hours in (0, 48]"), default=6.0)
    ap.add_argument("--steps", type=positive_float("a grid step in seconds"), nargs="+",
                    default=[30.0, 60.0, 300.0, 600.0, 1200.0], help="grid steps of the search (s)")
    ap.add_argument("--masks", type=checked(float, lambda v: 0 <= v < 90, "an elevation mask in 0..90 deg, 90 excluded"),
                    nargs="+", default=[10.0, 25.0, 40.0], help="station elevation masks (deg)")
    ap.add_argument("--scan", type=checked(float, lambda v: 0 < v <= 10, "a scan step in (0, 10] s"), default=1.0,
                    help="the reference's scan step (s)")
    ap.add_argument("--tol", type=checked(float, lambda v: 0 < v <= 0.1, "a tolerance in (0, 0.1] s"), default=1e-6,
                    help="the reference's bisection tolerance (s)")
    args = ap.parse_args(argv)
    duration = args.hours * 3600.0
    samples = (args.total + args.stations) * (duration / args.scan + 1)
    if samples > MAX_SCAN_SAMPLES:  # the reference holds every node's position and velocity at every scan time
        ap.error(f"--total, --stations, --hours, --scan: expected at most {MAX_SCAN_SAMPLES:,} node samples for the "
                 f"reference's scan, got {samples:,.0f}")
    args.steps, args.masks = list(dict.fromkeys(args.steps)), list(dict.fromkeys(args.masks))
    t0 = time.perf_counter()
    try:
        c = walker_delta(args.total, args.planes, 1, args.altitude, args.inclination, EPOCH)
        stations = STATIONS[:args.stations]
        ref = Reference(c, stations, MAX_RANGE_KM)
        n = len(c)
        isl_pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
        st_pairs = [(s, j) for s in range(len(stations)) for j in range(n)]
        ref_isl = ref.windows("isl", isl_pairs, 0.0, duration, args.scan, args.tol)
        ref_st = {m: ref.windows("station", st_pairs, m, duration, args.scan, args.tol) for m in args.masks}
        t1 = time.perf_counter()
        isl_rows, st_rows = [], {m: [] for m in args.masks}
        for step in args.steps:
            traj = satellite_trajectories(c, c.epoch, duration, step, stations)
            for k, mask in enumerate(args.masks):
                table = find_windows(traj, LinkGeometry(max_range_km=MAX_RANGE_KM, min_elevation_deg=mask))
                if k == 0:  # links between satellites do not depend on the mask
                    isl_rows.append(("satellite-satellite", step, compare(ref_isl, by_pair(table, "isl", n), duration)))
                if stations:
                    st_rows[mask].append((f"station, {mask:g} deg mask", step,
                                          compare(ref_st[mask], by_pair(table, "station", n), duration)))
    except (ContactError, OrbitError) as exc:
        return fail(str(exc))
    t2 = time.perf_counter()
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs visible, numpy {np.__version__}")
    print(f"{c.description}; stations: {', '.join(s.name for s in stations) or 'none'}; {args.hours:g} h; "
          f"link {MAX_RANGE_KM:g} km; reference: {args.scan:g} s scan, edges bisected to {args.tol:g} s "
          f"({t1 - t0:.1f} s); searches {t2 - t1:.1f} s")
    rows = isl_rows + [r for m in args.masks for r in st_rows[m]]
    print("\n| links | grid step (s) | reference windows | found | missed | split or merged | spurious "
          "| edges compared | median edge error (s) | max edge error (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for links, step, r in rows:
        print(f"| {links} | {step:g} | {r['ref']} | {r['got']} | {r['missed']} | {r['split']} | {r['spurious']} "
              f"| {r['edges']} | {seconds(r['median'])} | {seconds(r['max'])} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
