"""Drone swarms: waypoint files or a seeded random-waypoint model.

Positions are in a local East-North-Up frame (km) with linear motion between
waypoints; before its first and after its last waypoint a drone hovers.
Contact = range <= radio range (no Earth occlusion at these scales), found by
the same window finder as satellites (:func:`contact_sim.windows.find_windows`);
every waypoint time becomes a grid time, so the motion inside each grid cell
is linear and window edges are exact.

Waypoint CSV columns: ``node_id,t_s,x_km,y_km,z_km`` (header required; one
row per waypoint; times strictly increasing per node).

Example:
    >>> wp = random_waypoints(3, area_km=2.0, speed_m_s=10.0, duration_s=600.0, seed=1)
    >>> traj = drone_trajectories(wp, duration_s=600.0, step_s=30.0)
    >>> traj.pos.shape[1], traj.frame
    (3, 'ENU')
"""

from __future__ import annotations

import csv
import math
from array import array
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from swarmbase.fileio import atomic_writer
from swarmbase.tomlcheck import brief, check_name_length, decimal_number, lines_with_ends, read_text_file, shown

from .errors import ContactError
from .trajectory import MOVING, Trajectories, check_trajectory_size, time_grid

WAYPOINT_COLUMNS = ("node_id", "t_s", "x_km", "y_km", "z_km")
#: Largest distance from the origin of the drones' flat local East-North-Up frame (km): the
#: area's side, the flight altitude, the radio range and every waypoint coordinate stay within
#: it (a flat frame that size is already far from the curved Earth; larger values are typing
#: mistakes, and 1e200 overflowed the window search).
MAX_LOCAL_KM = 1000.0
#: Most drones of the random-waypoint model (``drones.count``): far more than the trajectory budget
#: admits (every drone's turns are time samples of every drone), refused before any estimate is
#: computed (10**400 overflowed it).
MAX_DRONES = 1_000_000
#: Larger waypoint files are refused unread (bytes; a million waypoints take about 50 MB).
MAX_WAYPOINT_BYTES = 64 * 1024 * 1024


@dataclass
class Waypoints:
    """Waypoints of one drone: times (s) and ENU positions (km)."""

    name: str
    t_s: np.ndarray
    xyz_km: np.ndarray


def read_waypoints_csv(path: str | Path) -> list[Waypoints]:
    """Read a waypoint CSV (at most :data:`MAX_WAYPOINT_BYTES`); errors name the file and line."""
    path = Path(path)
    fh = lines_with_ends(read_text_file(path, ContactError, "waypoint file", MAX_WAYPOINT_BYTES))
    rows: dict[str, array] = {}  # each drone's t_s, x_km, y_km, z_km, row after row (8 bytes a value)
    reader = csv.reader(fh)
    try:
        header = next(reader, None)
        if header is None:
            raise ContactError(f"{brief(path)}: empty waypoint file (expected header {','.join(WAYPOINT_COLUMNS)})")
        header = [h.strip() for h in header]
        if tuple(header) != WAYPOINT_COLUMNS:
            raise ContactError(
                f"{brief(path)}:1: expected header {','.join(WAYPOINT_COLUMNS)}, got {shown(','.join(header))}")
        for lineno, row in enumerate(reader, start=2):
            if not row or all(not c.strip() for c in row):
                continue
            if len(row) != 5:
                raise ContactError(f"{brief(path)}:{lineno}: expected 5 columns, got {len(row)}")
            name = row[0].strip()
            if not name:
                raise ContactError(f"{brief(path)}:{lineno}: empty node_id")
            if name not in rows:  # a name seen before passed (its message not formatted for every line)
                check_name_length(name, f"{brief(path)}:{lineno}: node_id", ContactError)
            try:
                vals = tuple(map(decimal_number, row[1:]))
            except ValueError:
                raise ContactError(f"{brief(path)}:{lineno}: t_s, x_km, y_km, z_km must be numbers") from None
            if not all(map(math.isfinite, vals)):
                raise ContactError(f"{brief(path)}:{lineno}: values must be finite")
            if max(map(abs, vals[1:])) > MAX_LOCAL_KM:
                raise ContactError(f"{brief(path)}:{lineno}: x_km, y_km, z_km must lie within {MAX_LOCAL_KM:g} km of "
                                   "the local frame's origin")
            prev = rows.get(name)
            if prev is None:
                prev = rows[name] = array("d")
            elif vals[0] <= prev[-4]:
                raise ContactError(
                    f"{brief(path)}:{lineno}: times of node {name!r} must increase (got {vals[0]} after {prev[-4]})")
            prev.extend(vals)
    except csv.Error as exc:  # e.g. a quote left open: its field runs past the csv module's limit
        raise ContactError(f"{brief(path)}:{reader.line_num}: not a valid CSV record ({exc}); a quote left "
                           "open?") from None
    if not rows:
        raise ContactError(f"{brief(path)}: no waypoints")
    out = []
    for name, vals in rows.items():
        arr = np.frombuffer(vals, dtype=np.float64).reshape(-1, 4).copy()
        out.append(Waypoints(name, arr[:, 0], arr[:, 1:4]))
    return out


def write_waypoints_csv(path: str | Path, drones: list[Waypoints]) -> Path:
    """Write waypoints in the format :func:`read_waypoints_csv` reads."""
    path = Path(path)
    with atomic_writer(path, text=True) as fh:
        out = csv.writer(fh)
        out.writerow(WAYPOINT_COLUMNS)
        for d in drones:
            for t, (x, y, z) in zip(d.t_s, d.xyz_km):
                out.writerow([d.name, f"{t:.3f}", f"{x:.6f}", f"{y:.6f}", f"{z:.6f}"])
    return path


#: Mean distance between two points drawn uniformly in a unit square.
_MEAN_UNIT_SQUARE_DISTANCE = 0.5214


def expected_turns(count: int, area_km: float, speed_m_s: float, duration_s: float,
                   pause_s: float = 0.0) -> float:
    """Expected number of waypoint times :func:`random_waypoints` draws over all
    drones (each becomes a time sample of every drone's trajectory)."""
    leg_s = max(_MEAN_UNIT_SQUARE_DISTANCE * area_km * 1000.0 / speed_m_s, 1e-3)
    per_drone = duration_s / (leg_s + pause_s) * (2 if pause_s > 0 else 1) + 2
    return count * per_drone


def random_waypoints(count: int, area_km: float, speed_m_s: float, duration_s: float, seed: int,
                     altitude_km: float = 0.1, pause_s: float = 0.0) -> list[Waypoints]:
    """Random-waypoint mobility in a square ``area_km`` wide at ``altitude_km``.

    Each drone starts at a uniform point, flies at ``speed_m_s`` to another
    uniform point, pauses ``pause_s``, and repeats until ``duration_s``.
    Seeded with ``numpy.random.default_rng(seed)``.
    """
    if count < 1:
        raise ContactError(f"drones.count: expected >= 1, got {count}")
    # the scenario file's bounds; written so that NaN (which fails every comparison) is refused too
    if not 0 < area_km <= MAX_LOCAL_KM:
        raise ContactError(f"drones.area_km: expected a positive number of at most {MAX_LOCAL_KM:g} km, got {area_km}")
    if not 0 < speed_m_s < math.inf:
        raise ContactError(f"drones.speed_m_s: expected a positive number of m/s, got {speed_m_s}")
    if not 0 <= pause_s < math.inf:
        raise ContactError(f"drones.pause_s: expected a number of seconds >= 0, got {pause_s}")
    if not -MAX_LOCAL_KM <= altitude_km <= MAX_LOCAL_KM:
        raise ContactError(f"drones.altitude_km: expected a number in -{MAX_LOCAL_KM:g}..{MAX_LOCAL_KM:g} km, "
                           f"got {altitude_km}")
    if not 0 < duration_s < math.inf:
        raise ContactError(f"time.duration_s: expected a positive number of seconds, got {duration_s}")
    turns = expected_turns(count, area_km, speed_m_s, duration_s, pause_s)
    check_trajectory_size(turns, count, waypoint_times=turns)
    rng = np.random.default_rng(seed)
    speed = speed_m_s / 1000.0
    out = []
    for i in range(count):
        p = np.append(rng.uniform(0.0, area_km, 2), altitude_km)
        ts, ps = [0.0], [p]
        t = 0.0
        while t < duration_s:
            q = np.append(rng.uniform(0.0, area_km, 2), altitude_km)
            t += max(np.linalg.norm(q - p) / speed, 1e-3)
            ts.append(t)
            ps.append(q)
            if t < duration_s and t + pause_s > t:  # a pause below the clock's resolution is none (no 0/0 speed)
                t += pause_s
                ts.append(t)
                ps.append(q)
            p = q
        out.append(Waypoints(f"drone-{i:03d}", np.array(ts), np.array(ps)))
    return out


def _interp(w: Waypoints, t: np.ndarray) -> np.ndarray:
    return np.stack([np.interp(t, w.t_s, w.xyz_km[:, j]) for j in range(3)], axis=-1)


def _segment_velocity(w: Waypoints, t: np.ndarray, side: str) -> np.ndarray:
    """Velocity (km/s) just after (``side='right'``) or before (``'left'``) each time."""
    if w.t_s.size < 2:
        return np.zeros(t.shape + (3,))
    seg_v = np.diff(w.xyz_km, axis=0) / np.diff(w.t_s)[:, None]
    seg = np.searchsorted(w.t_s, t, side="right" if side == "right" else "left") - 1
    inside = (seg >= 0) & (seg < seg_v.shape[0])
    v = np.zeros(t.shape + (3,))
    v[inside] = seg_v[seg[inside]]
    return v


def drone_trajectories(drones: list[Waypoints], duration_s: float, step_s: float) -> Trajectories:
    """Sample drone motion on a grid that includes every waypoint time."""
    base = time_grid(duration_s, step_s)
    turns = np.concatenate([d.t_s for d in drones])
    turns = turns[(turns > 0) & (turns < base[-1])]
    grid = np.unique(np.concatenate([base, turns]))
    keep = np.concatenate([[True], np.diff(grid) > 1e-9])
    grid = grid[keep]
    pos = np.stack([_interp(d, grid) for d in drones], axis=1)
    vr = np.stack([_segment_velocity(d, grid, "right") for d in drones], axis=1)
    vl = np.stack([_segment_velocity(d, grid, "left") for d in drones], axis=1)
    names = [d.name for d in drones]
    if len(set(names)) != len(names):
        raise ContactError("drones: node names must be unique")
    return Trajectories(names, np.full(len(drones), MOVING, dtype=np.int8), grid,
                        np.ascontiguousarray(pos), np.ascontiguousarray(vr), np.ascontiguousarray(vl),
                        None, "ENU", False)
