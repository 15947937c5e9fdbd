"""Contact windows: contiguous intervals in which two nodes see each other.

Algorithm (exact to the interpolation error, no window missed by the screen):

1. **Screen** each grid cell ``[t_k, t_k+1]`` with a k-d tree
   (``scipy.spatial.cKDTree.query_pairs``) at ``t_k`` with radius
   ``R + V dt``: ``R`` is the largest range at which a link can exist (the
   link maximum, or the line-of-sight limit if smaller) and ``V`` bounds the
   relative speed of any two nodes (twice the largest node speed). A pair
   farther apart than that at ``t_k`` cannot close to ``R`` before
   ``t_k+1``, so no window is missed.
2. **Model** each visibility constraint ``g(t) >= 0`` of a candidate pair on
   the cell as the cubic Hermite interpolant of ``g`` from its values and
   exact time derivatives at both ends (positions *and* velocities come from
   SGP4). Constraints (all in km or km^2):

   * range: ``g = R_max^2 - |p|^2``;
   * Earth occlusion: ``g = L(r_a, r_b)^2 - |p|^2``, ``L`` the tangent-length
     sum of :mod:`contact_sim.geometry` (exactly equivalent to the segment
     clearing ``R_earth + grazing``);
   * ground station elevation mask: ``g = p . u - |p| sin(mask)``.

   The cubic's Bernstein coefficients bound it (convex-hull property): if all
   four are positive for every constraint the pair is visible through the
   cell; if all four are negative for some constraint it is hidden through
   the cell. Pairs so close that no constraint can fail before the cell ends
   (a Lipschitz bound from the relative speed and a gravity bound on the
   relative acceleration) skip even that test. Only the rest (cells with an
   edge, or grazing) go further.
3. **Refine** those cells: every real zero of every constraint cubic inside
   the cell is found (monotone pieces between the cubic's critical points,
   then vectorized safeguarded Newton / bisection to 1e-9 of the cell), and
   visibility between consecutive zeros decides which zeros are window edges.

For LEO at a 60 s grid the Hermite interpolation of positions is within
~0.3 m of SGP4, i.e. edges to a few milliseconds except at grazing
tangencies; for piecewise linear drone motion with its turn times on the grid
the range constraint is exactly quadratic, so edges are exact.

Per-window statistics (minimum and mean range, and the integral of a
range-dependent data rate) use Simpson's rule on every visible piece of
every cell. Time chunks can run in parallel processes; windows that cross a
chunk boundary are joined afterwards.

Example:
    >>> from orbits import walker_delta
    >>> from contact_sim.trajectory import satellite_trajectories
    >>> c = walker_delta(12, 3, 1, 550.0, 53.0, "2025-01-01T00:00:00Z")
    >>> traj = satellite_trajectories(c, c.epoch, 3600.0, 60.0)
    >>> table = find_windows(traj, LinkGeometry(max_range_km=5000.0))
    >>> len(table) > 0 and bool((table.t_end_s > table.t_start_s).all())
    True
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import numpy as np
from scipy.spatial import cKDTree

try:
    from tqdm.auto import tqdm
except ImportError:  # pragma: no cover
    tqdm = None

from orbits import MU_KM3_S2

from .errors import ContactError
from .geometry import DEFAULT_GRAZING_KM, EARTH_RADIUS_KM
from .trajectory import EARTH_ROTATION_RAD_S, MOVING, STATION, Trajectories

log = logging.getLogger(__name__)

RateFn = Callable[[np.ndarray], np.ndarray]

_NEWTON_ITERS = 5
_ROOT_TOL = 1e-9  # cell fraction (60 us for a 60 s cell)
_BATCH = 262144  # candidate pairs per vectorized batch (bounds temporaries; fewer, larger numpy calls)
_ROW4 = np.dtype((np.void, 32))  # one packed accumulator row, for np.put
_MIN_WINDOW_S = 1e-6
_PART_WINDOWS = 4_000_000  # emitted windows a worker holds before writing a part
_BLOCK = 1 << 22  # rows per block of the table-wide passes (bounds their temporaries)


@dataclass(frozen=True)
class LinkGeometry:
    """When two nodes can communicate (km, deg).

    ``occlusion``: apply the Earth-grazing test to space-space pairs (off for
    drones in a local frame). Ground-station links use ``min_elevation_deg``
    (against the geocentric radial) and ``station_max_range_km`` (defaults to
    ``max_range_km``).
    """

    max_range_km: float
    grazing_altitude_km: float = DEFAULT_GRAZING_KM
    earth_radius_km: float = EARTH_RADIUS_KM
    occlusion: bool = True
    min_elevation_deg: float = 10.0
    station_max_range_km: float | None = None

    def __post_init__(self) -> None:
        if not np.isfinite(self.max_range_km) or self.max_range_km <= 0:
            raise ContactError(f"link.max_range_km: expected a positive distance, got {self.max_range_km}")
        if self.grazing_altitude_km < 0:
            raise ContactError(
                f"link.grazing_altitude_km: expected >= 0 km, got {self.grazing_altitude_km}")
        if not -90 < self.min_elevation_deg < 90:
            raise ContactError(
                f"ground_stations.min_elevation_deg: expected -90..90 deg, got {self.min_elevation_deg}")
        if self.station_max_range_km is not None and self.station_max_range_km <= 0:
            raise ContactError(
                f"link.station_max_range_km: expected a positive distance, got {self.station_max_range_km}")

    @property
    def grazing_radius_km(self) -> float:
        return self.earth_radius_km + self.grazing_altitude_km


@dataclass(frozen=True)
class Window:
    """One contact window between nodes ``a < b`` (seconds from scenario start, km, bytes)."""

    a: int
    b: int
    t_start_s: float
    t_end_s: float
    capacity_bytes: int
    mean_range_km: float
    min_range_km: float

    @property
    def duration_s(self) -> float:
        return self.t_end_s - self.t_start_s


class WindowTable(Sequence[Window]):
    """Column store of windows (numpy arrays), usable as a sequence of :class:`Window`.

    Sorted by ``(t_start_s, a, b)``. ``volume_bits`` is the integral of the
    data rate over the window (0 when no rate model was given);
    ``capacity_bytes`` is filled by the link model (:mod:`contact_sim.link`).
    """

    def __init__(self, a, b, t_start_s, t_end_s, min_range_km, mean_range_km, volume_bits,
                 capacity_bytes=None, sort: bool = True) -> None:
        self.a = np.asarray(a, dtype=np.int32)
        self.b = np.asarray(b, dtype=np.int32)
        self.t_start_s = np.asarray(t_start_s, dtype=np.float64)
        self.t_end_s = np.asarray(t_end_s, dtype=np.float64)
        self.min_range_km = np.asarray(min_range_km, dtype=np.float32)
        self.mean_range_km = np.asarray(mean_range_km, dtype=np.float32)
        self.volume_bits = np.asarray(volume_bits, dtype=np.float64)
        self.capacity_bytes = (np.zeros(self.a.size, dtype=np.int64) if capacity_bytes is None
                               else np.asarray(capacity_bytes, dtype=np.int64))
        if sort and self.a.size:
            order = np.lexsort((self.b, self.a, self.t_start_s))
            for name in self._columns():
                setattr(self, name, getattr(self, name)[order])

    @staticmethod
    def _columns() -> tuple[str, ...]:
        return ("a", "b", "t_start_s", "t_end_s", "min_range_km", "mean_range_km",
                "volume_bits", "capacity_bytes")

    @classmethod
    def empty(cls) -> "WindowTable":
        z = np.zeros(0)
        return cls(z, z, z, z, z, z, z)

    @property
    def duration_s(self) -> np.ndarray:
        return self.t_end_s - self.t_start_s

    def __len__(self) -> int:
        return int(self.a.size)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = int(i)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        return Window(int(self.a[i]), int(self.b[i]), float(self.t_start_s[i]), float(self.t_end_s[i]),
                      int(self.capacity_bytes[i]), float(self.mean_range_km[i]),
                      float(self.min_range_km[i]))

    def __iter__(self) -> Iterator[Window]:
        for i in range(len(self)):
            yield self[i]

    def select(self, mask) -> "WindowTable":
        """Rows where ``mask`` is true (keeps order)."""
        cols = [getattr(self, n)[mask] for n in self._columns()]
        return WindowTable(*cols, sort=False)

    def pair(self, a: int, b: int) -> "WindowTable":
        """Windows of the unordered pair ``{a, b}``."""
        lo, hi = min(a, b), max(a, b)
        return self.select((self.a == lo) & (self.b == hi))


# --------------------------------------------------------------------------- cubic tools

def _hermite_coeffs(g0, g1, m0, m1):
    """Power-basis coefficients on s in [0, 1] of the cubic Hermite interpolant."""
    a2 = -3.0 * g0 - 2.0 * m0 + 3.0 * g1 - m1
    a3 = 2.0 * g0 + m0 - 2.0 * g1 + m1
    return g0, m0, a2, a3


def _cubic(c, s):
    a0, a1, a2, a3 = c
    return a0 + s * (a1 + s * (a2 + s * a3))


def _cubic_critical(c) -> tuple[np.ndarray, np.ndarray]:
    """The two critical points of each cubic (NaN where absent)."""
    a0, a1, a2, a3 = c
    qa, qb, qc = 3.0 * a3, 2.0 * a2, a1  # derivative: qa s^2 + qb s + qc
    scale = np.abs(qa) + np.abs(qb) + np.abs(qc) + 1e-300
    lin = np.abs(qa) <= 1e-12 * scale
    disc = qb * qb - 4.0 * qa * qc
    with np.errstate(divide="ignore", invalid="ignore"):
        sq = np.sqrt(np.maximum(disc, 0.0))
        q = -0.5 * (qb + np.copysign(sq, qb))
        r1 = np.where(lin, -qc / qb, q / qa)
        r2 = np.where(lin, np.nan, qc / q)
    r1 = np.where((disc >= 0) | lin, r1, np.nan)
    r2 = np.where(disc >= 0, r2, np.nan)
    return r1, r2


def _cubic_min(c, lo, hi) -> np.ndarray:
    """Minimum of each cubic over ``[lo, hi]`` (endpoints and interior critical points)."""
    best = np.minimum(_cubic(c, lo), _cubic(c, hi))
    for r in _cubic_critical(c):
        ok = np.isfinite(r) & (r > lo) & (r < hi)
        best = np.where(ok, np.minimum(best, _cubic(c, np.where(ok, r, lo))), best)
    return best


def _monotone_root(c, lo, hi, flo, fhi) -> np.ndarray:
    """Zero of cubics with a sign change on ``[lo, hi]`` (vectorized).

    Safeguarded Newton from the secant point (bisection whenever a step
    leaves the bracket); the few rows not converged after that are finished
    by plain bisection, so every root is bracketed to ``_ROOT_TOL``.
    """
    a0, a1, a2, a3 = c
    lo, hi, flo = lo.copy(), hi.copy(), flo.copy()
    x = lo - flo * (hi - lo) / (fhi - flo)  # secant start
    done = np.zeros(x.shape, dtype=bool)
    for _ in range(_NEWTON_ITERS):
        f = a0 + x * (a1 + x * (a2 + x * a3))
        left = (f * flo) > 0.0
        lo = np.where(left, x, lo)
        flo = np.where(left, f, flo)
        hi = np.where(left, hi, x)
        df = a1 + x * (2.0 * a2 + x * 3.0 * a3)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = f / df
        xn = x - step
        done = (np.abs(step) < _ROOT_TOL) | (f == 0.0)
        bad = ~((xn > lo) & (xn < hi))
        x = np.where(done, x, np.where(bad, 0.5 * (lo + hi), xn))
    rest = np.flatnonzero(~done & (hi - lo > _ROOT_TOL))
    if rest.size:
        cc = tuple(v[rest] for v in c)
        rl, rh, rf = lo[rest], hi[rest], flo[rest]
        while True:
            mid = 0.5 * (rl + rh)
            fm = _cubic(cc, mid)
            same = (fm * rf) > 0.0
            rl = np.where(same, mid, rl)
            rf = np.where(same, fm, rf)
            rh = np.where(same, rh, mid)
            if (rh - rl).max() <= _ROOT_TOL:
                break
        x[rest] = 0.5 * (rl + rh)
    return x


def _cubic_zeros(c) -> np.ndarray:
    """Sign-changing zeros of the cubics in (0, 1): ``(3, n)`` array, NaN where absent."""
    n = c[0].shape[0]
    crit = np.zeros((2, n))
    for j, r in enumerate(_cubic_critical(c)):
        crit[j] = np.where(np.isfinite(r) & (r > 0.0) & (r < 1.0), r, 0.0)
    crit.sort(axis=0)
    bounds = np.vstack([np.zeros(n), crit, np.ones(n)])  # (4, n): monotone pieces
    out = np.full((3, n), np.nan)
    for j in range(3):
        lo, hi = bounds[j], bounds[j + 1]
        flo = _cubic(c, lo)
        fhi = _cubic(c, hi)
        idx = np.flatnonzero((hi > lo) & (flo * fhi < 0.0))
        if idx.size == 0:
            continue
        out[j, idx] = _monotone_root(tuple(x[idx] for x in c), lo[idx], hi[idx], flo[idx], fhi[idx])
    return out


# --------------------------------------------------------------------------- accumulator

_EMPTY, _GONE = -1, -2  # free and deleted hash-table keys
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing multiplier


class _PairMap:
    """Vectorized open-addressing hash map ``pair id (int64 >= 0) -> slot``.

    Linear probing, capacity a power of two kept at most half full (deleted
    keys count until the next rebuild), so a lookup costs one or two gathers;
    memory is linear in the number of live keys, not in ``n_nodes^2``.
    ``key_dtype`` int32 (keys below 2^31) halves the table, so more of it
    stays in cache.

    >>> m = _PairMap()
    >>> m.put(np.array([7, 10**12]), np.array([0, 1]))
    >>> m.get(np.array([10**12, 7, 3])).tolist()
    [1, 0, -1]
    >>> m.pop(np.array([7])).tolist(), len(m)
    ([0], 1)
    """

    def __init__(self, capacity: int = 1 << 12, key_dtype=np.int64) -> None:
        self.key_dtype = np.dtype(key_dtype)
        self._alloc(max(1 << 4, 1 << int(np.ceil(np.log2(capacity)))))
        self.live = 0

    def _alloc(self, cap: int) -> None:
        self.keys = np.full(cap, _EMPTY, dtype=self.key_dtype)
        self.vals = np.zeros(cap, dtype=np.int32)  # slots
        self.shift = np.uint64(64 - int(np.log2(cap)))
        self.used = 0  # live + deleted

    def __len__(self) -> int:
        return self.live

    def _home(self, k: np.ndarray) -> np.ndarray:
        h = k.astype(np.uint64)
        with np.errstate(over="ignore"):
            h *= _GOLDEN
        h >>= self.shift
        return h.view(np.int64)

    def _find(self, k: np.ndarray) -> np.ndarray:
        """Table positions of keys ``k`` (-1 where absent)."""
        k = np.asarray(k, dtype=self.key_dtype)
        mask = self.keys.size - 1
        pos = self._home(k)
        kk = np.take(self.keys, pos, mode="clip")  # first probe for all keys at once
        hit = kk == k
        out = np.where(hit, pos, -1)
        todo = np.flatnonzero(~hit & (kk != _EMPTY))
        pos = (pos[todo] + 1) & mask
        while todo.size:
            kk = np.take(self.keys, pos, mode="clip")
            hit = kk == k[todo]
            out[todo[hit]] = pos[hit]
            more = ~hit & (kk != _EMPTY)
            todo = todo[more]
            pos = (pos[more] + 1) & mask
        return out

    def get(self, k: np.ndarray) -> np.ndarray:
        """Slots of keys ``k`` (-1 where absent)."""
        pos = self._find(k)
        return np.where(pos >= 0, np.take(self.vals, pos, mode="clip"), -1)

    def put(self, k: np.ndarray, v: np.ndarray) -> None:
        """Insert distinct keys that are not in the map."""
        k = np.asarray(k, dtype=self.key_dtype)
        if k.size == 0:
            return
        if 2 * (self.used + k.size) > self.keys.size:
            live = self.keys >= 0
            old_k, old_v = self.keys[live], self.vals[live]
            # rebuilt at 2-4x the live keys: grows with them, and shrinks after many deletions
            cap = 1 << max(4, int(np.ceil(np.log2(4 * (old_k.size + k.size)))))
            self._alloc(cap)
            self._insert(old_k, old_v)
        self._insert(k, np.asarray(v, dtype=np.int32))
        self.live += k.size

    def _insert(self, k: np.ndarray, v: np.ndarray) -> None:
        mask = self.keys.size - 1
        pos = self._home(k)
        todo = np.arange(k.size)
        while todo.size:
            p = pos[todo]
            free = self.keys[p] < 0
            # of the keys aiming at the same free cell, the first one takes it
            cand = todo[free]
            cells, first = np.unique(p[free], return_index=True)
            win = cand[first]
            self.used += int((self.keys[cells] == _EMPTY).sum())
            self.keys[cells] = k[win]
            self.vals[cells] = v[win]
            taken = np.zeros(k.size, dtype=bool)
            taken[win] = True
            todo = todo[~taken[todo]]
            pos[todo] = (pos[todo] + 1) & mask

    def pop(self, k: np.ndarray) -> np.ndarray:
        """Remove keys ``k`` (all present); returns their slots."""
        pos = self._find(k)
        if np.any(pos < 0):  # pragma: no cover - would mean inconsistent bookkeeping
            raise KeyError("pair id not in the map")
        vals = self.vals[pos]
        self.keys[pos] = _GONE
        self.live -= pos.size
        return vals

    def items(self) -> tuple[np.ndarray, np.ndarray]:
        live = self.keys >= 0
        return self.keys[live], self.vals[live]


class _Accumulator:
    """Open windows keyed by pair id ``a * n + b``, plus the emitted windows.

    Only open windows hold state: a :class:`_PairMap` gives each one a slot in
    a growable row pool (start time, integral of range, minimum range,
    integral of rate; one packed row so each update touches one cache line),
    and closing a window frees its slot. Memory is linear in the number of
    pairs in contact (plus the emitted windows, which :meth:`checkpoint` and
    :meth:`result` hand over in parts), not in ``n_nodes^2``.
    """

    START, DINT, DMIN, BITS = 0, 1, 2, 3

    def __init__(self, n_nodes: int, rate_fn: RateFn | None) -> None:
        self.n = n_nodes
        self.rate_fn = rate_fn
        self.pid_dtype = np.int32 if n_nodes * n_nodes < 2**31 else np.int64
        self.map = _PairMap(key_dtype=self.pid_dtype)
        self._grow(1 << 12)
        self.n_slots = 0  # slots ever handed out (high-water mark)
        self.free: list[np.ndarray] = []  # freed slots, reused first
        self.out: list[list[np.ndarray | None]] = []
        self.n_out = 0  # emitted windows not yet handed over

    def _grow(self, cap: int) -> None:
        rows = np.zeros((cap, 4))
        left = np.zeros(cap, dtype=bool)
        if hasattr(self, "rows"):
            rows[:self.rows.shape[0]] = self.rows
            left[:self.left.size] = self.left
        self.rows, self.left = rows, left
        self._rows_void = self.rows.view(_ROW4).ravel()

    def _new_slots(self, m: int) -> np.ndarray:
        got = []
        while m and self.free:
            f = self.free.pop()
            take, rest = f[:m], f[m:]
            if rest.size:
                self.free.append(rest)
            got.append(take)
            m -= take.size
        if m:
            if self.n_slots + m > self.rows.shape[0]:
                cap = self.rows.shape[0]
                while self.n_slots + m > cap:
                    cap *= 2
                self._grow(cap)
            got.append(np.arange(self.n_slots, self.n_slots + m))
            self.n_slots += m
        return np.concatenate(got) if len(got) > 1 else (got[0] if got else np.zeros(0, dtype=np.int64))

    def open(self, pid, t, left: bool = False) -> None:
        pid = np.asarray(pid, dtype=np.int64)
        n = pid.size
        if n == 0:
            return
        slot = self.map.get(pid)
        miss = np.flatnonzero(slot < 0)
        if miss.size:
            new = self._new_slots(miss.size)
            self.map.put(pid[miss], new)
            slot[miss] = new
        self._start(slot, t, left)

    def _start(self, slot: np.ndarray, t, left: bool) -> None:
        """(Re)start the windows in ``slot`` at ``t``: empty statistics, flag ``left``."""
        row = np.zeros((slot.size, 4))
        row[:, self.START] = t
        row[:, self.DMIN] = np.inf
        np.put(self._rows_void, slot, row.view(_ROW4).ravel())
        self.left[slot] = left

    def add(self, pid, d_int, d_min, bits) -> None:
        slot = self.map.get(pid)
        ok = slot >= 0
        if not ok.all():  # pragma: no cover - a visible piece of a window never opened
            log.debug("%d visible pieces without an open window ignored", int((~ok).sum()))
            slot, d_int, d_min = slot[ok], d_int[ok], d_min[ok]
            bits = None if bits is None else bits[ok]
        r = np.take(self.rows, slot, axis=0, mode="clip")
        r[:, self.DINT] += d_int
        np.minimum(r[:, self.DMIN], d_min, out=r[:, self.DMIN])
        if bits is not None:
            r[:, self.BITS] += bits
        np.put(self._rows_void, slot, r.view(_ROW4).ravel())

    def close(self, pid, t, right: bool = False) -> None:
        pid = np.asarray(pid, dtype=np.int64)
        if pid.size == 0:
            return
        slot = self.map.pop(pid)
        self.free.append(slot)
        self._emit(pid, slot, t, right)

    def _emit(self, pid: np.ndarray, slot: np.ndarray, t, right: bool) -> None:
        """Append the windows in ``slot`` as ending at ``t`` to the emitted windows."""
        r = np.take(self.rows, slot, axis=0)
        t = np.broadcast_to(np.asarray(t, dtype=float), pid.shape)
        # compact columns: ids fit in int32 below 46,340 nodes; range statistics in float32
        self.out.append([pid.astype(self.pid_dtype), r[:, self.START].copy(), t.copy(),
                         r[:, self.DINT].astype(np.float32), r[:, self.DMIN].astype(np.float32),
                         r[:, self.BITS].copy(), self.left[slot], np.full(pid.shape, right)])
        self.n_out += pid.size

    def open_ids(self) -> np.ndarray:
        return np.sort(self.map.items()[0])

    def checkpoint(self, t: float) -> None:
        """Emit every open window as ending at ``t`` (flagged ``right``) and
        restart it at ``t`` (flagged ``left``), keeping its slot: the emitted
        windows can then be handed over as a part, and the part boundary is
        joined like a chunk boundary (:func:`_assemble`)."""
        pid, slot = self.map.items()
        if pid.size == 0:
            return
        self._emit(pid, slot, t, right=True)
        self._start(slot, t, left=True)

    def piece(self, pid, s_lo, s_hi, q, dt) -> None:
        """Add the visible piece ``[s_lo, s_hi]`` (cell units) using Simpson's rule on the range."""
        s_mid = 0.5 * (s_lo + s_hi)
        d_lo = np.sqrt(np.maximum(_cubic(q, s_lo), 0.0))
        d_mid = np.sqrt(np.maximum(_cubic(q, s_mid), 0.0))
        d_hi = np.sqrt(np.maximum(_cubic(q, s_hi), 0.0))
        self._simpson(pid, (s_hi - s_lo) * dt, d_lo, d_mid, d_hi,
                      (np.arange(np.size(pid)), _cubic_min(q, s_lo, s_hi)))

    def whole(self, pid, q0, q1, qd0, qd1, dt) -> None:
        """Add a whole visible cell from squared ranges and their derivatives at both ends."""
        d_lo = np.sqrt(q0)
        d_hi = np.sqrt(q1)
        d_mid = np.sqrt(np.maximum(0.5 * (q0 + q1) + 0.125 * dt * (qd0 - qd1), 0.0))
        inner = np.flatnonzero((qd0 < 0.0) & (qd1 > 0.0))  # closest approach inside the cell
        q_min = None
        if inner.size:
            q = _hermite_coeffs(q0[inner], q1[inner], qd0[inner] * dt, qd1[inner] * dt)
            q_min = (inner, _cubic_min(q, np.zeros(inner.size), np.ones(inner.size)))
        self._simpson(pid, dt, d_lo, d_mid, d_hi, q_min)

    def _simpson(self, pid, span, d_lo, d_mid, d_hi, q_min=None) -> None:
        w = span / 6.0
        d_int = w * (d_lo + 4.0 * d_mid + d_hi)
        d_min = np.minimum(np.minimum(d_lo, d_mid), d_hi)
        if q_min is not None:
            rows, qm = q_min
            d_min[rows] = np.minimum(d_min[rows], np.sqrt(np.maximum(qm, 0.0)))
        bits = None
        if self.rate_fn is not None:
            bits = w * (self.rate_fn(d_lo) + 4.0 * self.rate_fn(d_mid) + self.rate_fn(d_hi))
        self.add(pid, d_int, d_min, bits)

    def result(self) -> dict[str, np.ndarray]:
        names = ("pid", "t_start", "t_end", "d_int", "d_min", "bits", "left", "right")
        if not self.out:
            dtypes = (self.pid_dtype, float, float, np.float32, np.float32, float, bool, bool)
            return {n: np.zeros(0, dtype=d) for n, d in zip(names, dtypes)}
        res = {}
        for j, n in enumerate(names):  # one column at a time keeps the peak low
            res[n] = np.concatenate([c[j] for c in self.out])
            for c in self.out:
                c[j] = None
        self.out = []
        self.n_out = 0
        return res


# --------------------------------------------------------------------------- per-cell work

def _gather(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``x[..., idx]`` for valid indices (``np.take`` without wrap-around checks, ~2x faster)."""
    return np.take(x, idx, axis=-1, mode="clip")


def _dot3(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Row-wise dot product of ``(3, n)`` arrays."""
    return u[0] * v[0] + u[1] * v[1] + u[2] * v[2]


def _process_group(acc: _Accumulator, pid, G0, G1, D0, D1, Q, t0, dt, first_cell: bool) -> None:
    """Classify candidate pairs of one cell and update windows.

    ``G0/G1`` constraint values at the cell ends ``(C, n)``, ``D0/D1`` their
    time derivatives, ``Q = (q0, q1, qd0, qd1)`` the squared range and its
    derivative at both ends.
    """
    q0, q1, qd0, qd1 = Q
    M0, M1 = D0 * dt, D1 * dt
    b1 = G0 + M0 / 3.0
    b2 = G1 - M1 / 3.0
    pos_c = (G0 > 0) & (b1 > 0) & (b2 > 0) & (G1 > 0)  # (C, n): constraint certainly met
    all_pos = pos_c.all(axis=0)
    any_neg = ((G0 < 0) & (b1 < 0) & (b2 < 0) & (G1 < 0)).any(axis=0)
    vis0 = (G0 >= 0).all(axis=0)
    vis1 = (G1 >= 0).all(axis=0)
    if first_cell:
        acc.open(pid[vis0], t0, left=True)
    cv = np.flatnonzero(all_pos)
    if cv.size:
        acc.whole(pid[cv], q0[cv], q1[cv], qd0[cv], qd1[cv], dt)
    unc = np.flatnonzero(~(all_pos | any_neg))
    if unc.size == 0:
        return
    n_c = G0.shape[0]
    upid = pid[unc]
    cubics = [_hermite_coeffs(G0[c, unc], G1[c, unc], M0[c, unc], M1[c, unc]) for c in range(n_c)]
    zeros = np.full((3 * n_c, unc.size), np.nan)
    for c, cb in enumerate(cubics):
        need = np.flatnonzero(~pos_c[c, unc])  # a certainly-met constraint has no zero
        if need.size:
            zeros[3 * c:3 * c + 3, need] = _cubic_zeros(tuple(x[need] for x in cb))
    zeros = zeros.T  # (n, 3C)
    zeros = np.where(np.isnan(zeros), 1.0, zeros)
    zeros.sort(axis=1)
    n = unc.size
    # segments 0 and -1 are empty segments carrying the states at s = 0 and
    # s = 1, so a state change without an interior zero (a margin exactly 0
    # at a grid time) still produces an edge, at the right end
    bounds = np.hstack([np.zeros((n, 2)), zeros, np.ones((n, 2))])
    length = np.diff(bounds, axis=1)
    nonzero = length > 0.0
    mid = 0.5 * (bounds[:, :-1] + bounds[:, 1:])
    h = np.min(np.stack([_cubic(tuple(x[:, None] for x in cb), mid) for cb in cubics]), axis=0)
    state = h >= 0.0
    n_seg = state.shape[1]
    state[:, 0] = vis0[unc]
    for j in range(1, n_seg - 1):
        state[:, j] = np.where(nonzero[:, j], state[:, j], state[:, j - 1])
    state[:, -1] = vis1[unc]
    q = _hermite_coeffs(q0[unc], q1[unc], qd0[unc] * dt, qd1[unc] * dt)
    for j in range(n_seg):
        if j > 0:
            rise = np.flatnonzero(state[:, j] & ~state[:, j - 1])
            if rise.size:
                acc.open(upid[rise], t0 + bounds[rise, j] * dt)
        vis = np.flatnonzero(state[:, j] & nonzero[:, j])
        if vis.size:
            acc.piece(upid[vis], bounds[vis, j], bounds[vis, j + 1],
                      tuple(x[vis] for x in q), dt)
        if j + 1 < n_seg:
            fall = np.flatnonzero(state[:, j] & ~state[:, j + 1])
            if fall.size:
                acc.close(upid[fall], t0 + bounds[fall, j + 1] * dt)


class _Scanner:
    """Everything a worker needs to scan a range of cells.

    Per grid time, each node's state is packed in columns (position,
    velocity after, velocity before, tangent length to the grazing sphere and
    its rates), one contiguous row of node values per column, so a candidate
    pair's gathers read from a few cached rows.
    """

    # columns of the packed node state
    POS, VR, VL, TAN, TDR, TDL = slice(0, 3), slice(3, 6), slice(6, 9), 9, 10, 11

    def __init__(self, traj: Trajectories, geom: LinkGeometry, rate_fn: RateFn | None) -> None:
        self.traj = traj
        self.geom = geom
        self.rate_fn = rate_fn
        self.moving = np.flatnonzero(traj.kinds == MOVING)
        self.stations = np.flatnonzero(traj.kinds == STATION)
        pos, vr, vl = traj.pos, traj.vel_right, traj.vel_left
        self.occlusion = geom.occlusion and traj.frame == "TEME"
        rho2 = geom.grazing_radius_km ** 2
        r2 = np.einsum("tni,tni->tn", pos, pos)
        tang = np.sqrt(np.maximum(r2 - rho2, 0.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            inv = np.where(tang > 0, 1.0 / tang, 0.0)
        if vl is vr:  # smooth motion: one velocity per grid time, 8 columns
            self.POS, self.VR, self.VL, self.TAN, self.TDR, self.TDL = (
                slice(0, 3), slice(3, 6), slice(3, 6), 6, 7, 7)
            n_col = 8
        else:
            n_col = 12
        # (time, column, node): a candidate pair gathers each column from one
        # contiguous row of n values, which stays in cache
        cols = np.empty((pos.shape[0], n_col, pos.shape[1]))
        cols[:, self.POS] = pos.transpose(0, 2, 1)
        cols[:, self.VR] = vr.transpose(0, 2, 1)
        cols[:, self.VL] = vl.transpose(0, 2, 1)
        cols[:, self.TAN] = tang
        cols[:, self.TDR] = np.einsum("tni,tni->tn", pos, vr) * inv
        cols[:, self.TDL] = np.einsum("tni,tni->tn", pos, vl) * inv
        self.cols = cols
        vmax = traj.max_speed_km_s()
        self.v_rel = 2.0 * vmax * 1.001 + 1e-9
        reach = geom.max_range_km
        inner = geom.max_range_km  # range below which a link certainly exists
        if self.occlusion and self.moving.size:
            r = np.sqrt(r2[:, self.moving])
            rdot = np.abs(cols[:, self.TDR, self.moving] * tang[:, self.moving]) / np.maximum(r, 1e-9)
            dt_max = float(np.diff(traj.times_s).max())
            slack = float(rdot.max() * dt_max + 0.1)
            r_max = float(r.max()) + slack
            r_min = float(r.min()) - slack
            reach = min(reach, 2.0 * np.sqrt(max(r_max**2 - rho2, 0.0)))
            inner = min(inner, 2.0 * np.sqrt(max(r_min**2 - rho2, 0.0)))
        self.reach = reach
        self.inner = inner
        # bound on the relative acceleration of two moving nodes inside a cell:
        # gravity (mu / r^2, +1 % for J2 and margin) for orbits; zero for drones,
        # whose motion is linear inside every cell (turn times are grid times)
        self.acc_rel: float | None = None
        if traj.frame == "TEME" and self.moving.size:
            r_min = float(np.sqrt(r2[:, self.moving].min())) - 50.0
            self.acc_rel = 2.0 * 1.01 * MU_KM3_S2 / r_min**2
        elif not traj.smooth:
            self.acc_rel = 0.0
        self.sin_mask = np.sin(np.radians(geom.min_elevation_deg))
        self.st_range = geom.station_max_range_km or geom.max_range_km

    def _space(self, acc: _Accumulator, k: int, first: bool) -> None:
        traj = self.traj
        t0 = traj.times_s[k]
        dt = traj.times_s[k + 1] - t0
        tree = cKDTree(self.cols[k, self.POS][:, self.moving].T)
        pairs = tree.query_pairs(self.reach + self.v_rel * dt, output_type="ndarray")
        if pairs.size == 0:
            return
        # query_pairs gives i < j, and ``moving`` is ascending, so lo < hi
        lo, hi = pairs[:, 0], pairs[:, 1]
        if self.moving.size < traj.n_nodes:
            lo, hi = self.moving[lo], self.moving[hi]
        for i in range(0, lo.size, _BATCH):
            self._space_batch(acc, k, lo[i:i + _BATCH], hi[i:i + _BATCH], first)

    def _space_batch(self, acc: _Accumulator, k: int, lo: np.ndarray, hi: np.ndarray,
                     first: bool) -> None:
        traj, n = self.traj, self.traj.n_nodes
        t0 = traj.times_s[k]
        dt = traj.times_s[k + 1] - t0
        s0, s1 = self.cols[k], self.cols[k + 1]  # (columns, nodes): gathers stay in cache
        P, VR, VL = self.POS, self.VR, self.VL
        p0 = _gather(s0[P], hi) - _gather(s0[P], lo)
        w0 = _gather(s0[VR], hi) - _gather(s0[VR], lo)
        q0 = _dot3(p0, p0)
        # Lipschitz bound on the range inside the cell: it changes by at most
        # (|w0| + a_rel dt) dt, |w0| the relative speed at t_k and a_rel a bound on
        # the relative acceleration. Pairs that cannot come within the link range
        # are dropped (invisible through the cell); pairs so close that no
        # constraint can fail ("deep") skip the constraint cubics.
        if self.acc_rel is None:
            grow = np.full(q0.size, self.v_rel * dt)
        else:
            grow = np.sqrt(_dot3(w0, w0))
            grow += self.acc_rel * dt
            grow *= dt
        far = grow + self.geom.max_range_km
        keep = np.flatnonzero(q0 <= far * far)
        if keep.size == 0:
            return
        if keep.size < q0.size:
            lo, hi, q0, grow = _gather(lo, keep), _gather(hi, keep), _gather(q0, keep), _gather(grow, keep)
            p0, w0 = _gather(p0, keep), _gather(w0, keep)
        pid = lo.astype(np.int64) * n + hi
        p1 = _gather(s1[P], hi) - _gather(s1[P], lo)
        q1 = _dot3(p1, p1)
        qd0 = 2.0 * _dot3(p0, w0)
        qd1 = 2.0 * _dot3(p1, _gather(s1[VL], hi) - _gather(s1[VL], lo))
        room = np.maximum(self.inner - grow, 0.0)
        deep = q0 <= room * room
        rest = np.flatnonzero(~deep)
        if rest.size < pid.size:
            d = np.flatnonzero(deep)  # index arrays: faster than boolean masks here
            dpid = _gather(pid, d)
            if first:
                acc.open(dpid, t0, left=True)
            acc.whole(dpid, _gather(q0, d), _gather(q1, d), _gather(qd0, d), _gather(qd1, d), dt)
        if rest.size == 0:
            return
        pid, q0, q1, qd0, qd1 = (_gather(x, rest) for x in (pid, q0, q1, qd0, qd1))
        R2 = self.geom.max_range_km ** 2
        G0, G1, Dv0, Dv1 = [R2 - q0], [R2 - q1], [-qd0], [-qd1]
        if self.occlusion:
            lo, hi = _gather(lo, rest), _gather(hi, rest)
            L0 = _gather(s0[self.TAN], lo) + _gather(s0[self.TAN], hi)
            L1 = _gather(s1[self.TAN], lo) + _gather(s1[self.TAN], hi)
            Ld0 = _gather(s0[self.TDR], lo) + _gather(s0[self.TDR], hi)
            Ld1 = _gather(s1[self.TDL], lo) + _gather(s1[self.TDL], hi)
            G0.append(L0 * L0 - q0)
            G1.append(L1 * L1 - q1)
            Dv0.append(2.0 * L0 * Ld0 - qd0)
            Dv1.append(2.0 * L1 * Ld1 - qd1)
        _process_group(acc, pid, np.array(G0), np.array(G1), np.array(Dv0), np.array(Dv1),
                       (q0, q1, qd0, qd1), t0, dt, first)

    def _ground(self, acc: _Accumulator, k: int, first: bool) -> None:
        traj, n = self.traj, self.traj.n_nodes
        if self.stations.size == 0 or self.moving.size == 0:
            return
        t0 = traj.times_s[k]
        dt = traj.times_s[k + 1] - t0
        st = np.repeat(self.stations, self.moving.size)
        mv = np.tile(self.moving, self.stations.size)
        pid = np.minimum(st, mv).astype(np.int64) * n + np.maximum(st, mv)
        omega = np.array([0.0, 0.0, EARTH_ROTATION_RAD_S]) if traj.frame == "TEME" else np.zeros(3)
        G, Dv, qs = [], [], []
        for P, V in ((traj.pos[k], traj.vel_right[k]), (traj.pos[k + 1], traj.vel_left[k + 1])):
            p = P[mv] - P[st]
            w = V[mv] - V[st]
            q = np.einsum("ij,ij->i", p, p)
            qd = 2.0 * np.einsum("ij,ij->i", p, w)
            d = np.sqrt(q)
            u = P[st] / np.linalg.norm(P[st], axis=1, keepdims=True)
            du = np.cross(omega, u)
            g_el = np.einsum("ij,ij->i", p, u) - d * self.sin_mask
            gd_el = (np.einsum("ij,ij->i", w, u) + np.einsum("ij,ij->i", p, du)
                     - (0.5 * qd / np.maximum(d, 1e-9)) * self.sin_mask)
            G.append(np.array([self.st_range ** 2 - q, g_el]))
            Dv.append(np.array([-qd, gd_el]))
            qs.append((q, qd))
        _process_group(acc, pid, G[0], G[1], Dv[0], Dv[1],
                       (qs[0][0], qs[1][0], qs[0][1], qs[1][1]), t0, dt, first)

    def scan(self, k0: int, k1: int, directory: str, chunk: int = 0) -> list[tuple[str, int]]:
        """Windows of cells ``k0 .. k1-1`` (chunk number ``chunk``), written to ``directory`` as parts.

        Whenever ``_PART_WINDOWS`` windows have been emitted, the open ones are
        checkpointed (:meth:`_Accumulator.checkpoint`) and the part is written,
        so a worker holds at most one part however long the scenario. Windows
        still open at the chunk end are closed there, flagged ``right``.
        Returns ``(path, rows)`` per part, in time order.
        """
        acc = _Accumulator(self.traj.n_nodes, self.rate_fn)
        parts: list[tuple[str, int]] = []
        cells = range(k0, k1)
        if tqdm is not None:
            cells = tqdm(cells, desc="contact windows", unit="step", disable=None,
                         position=chunk, leave=False)
        for k in cells:
            self._space(acc, k, k == k0)
            self._ground(acc, k, k == k0)
            if acc.n_out >= _PART_WINDOWS and k + 1 < k1:
                acc.checkpoint(self.traj.times_s[k + 1])
                parts.append(self._write_part(acc, directory, chunk, len(parts)))
        acc.close(acc.open_ids(), self.traj.times_s[k1], right=True)
        parts.append(self._write_part(acc, directory, chunk, len(parts)))
        return parts

    def _write_part(self, acc: _Accumulator, directory: str, chunk: int, index: int) -> tuple[str, int]:
        """Hand over the emitted windows as one part file, sorted by (start, pair).

        Windows that can no longer be joined (no ``left`` / ``right`` flag) and
        last under ``_MIN_WINDOW_S`` are dropped here.
        """
        res = acc.result()
        bad = np.isnan(res["t_start"])
        if bad.any():  # pragma: no cover - would mean inconsistent screening
            log.warning("dropping %d windows without a start (inconsistent state)", int(bad.sum()))
        keep = ~bad & ((res["t_end"] - res["t_start"] > _MIN_WINDOW_S) | res["left"] | res["right"])
        rows = np.flatnonzero(keep)
        del bad, keep
        rows = rows[np.lexsort((res["pid"][rows], res["t_start"][rows]))]
        if self.rate_fn is None:
            del res["bits"]
        # one structured array per part: a single file, read back without pickling
        table = np.empty(rows.size, dtype=[(n, c.dtype) for n, c in res.items()])
        for name in list(res):  # one column at a time keeps the peak low
            table[name] = res.pop(name)[rows]
        path = os.path.join(directory, f"part-{chunk:04d}-{index:05d}.npy")
        try:
            np.save(path, table, allow_pickle=False)
        except OSError as exc:
            raise ContactError(f"contact windows: cannot write a part of {rows.size:,} windows to {path} "
                               f"({exc.strerror or exc}); set TMPDIR to a writable directory with room") from None
        return path, int(rows.size)


_WORKER: _Scanner | None = None


def _scan_chunk(args: tuple[int, int, str, int]) -> list[tuple[str, int]]:
    assert _WORKER is not None
    return _WORKER.scan(*args)


def _is_sorted(t: np.ndarray, a: np.ndarray, b: np.ndarray) -> bool:
    """Whether rows are in ``(t, a, b)`` order (checked in blocks: no full-size temporaries)."""
    for i in range(0, max(t.size - 1, 0), _BLOCK):
        j = min(i + _BLOCK, t.size - 1)
        d = t[i + 1:j + 1] - t[i:j]
        if (d < 0).any():
            return False
        tie = np.flatnonzero(d == 0) + i
        if tie.size:
            a0, a1, b0, b1 = a[tie], a[tie + 1], b[tie], b[tie + 1]
            if ((a0 > a1) | ((a0 == a1) & (b0 >= b1))).any():
                return False
    return True


def _assemble(parts: list[tuple[str, int]], n_nodes: int, with_bits: bool) -> WindowTable:
    """The window table from the parts of all chunks, in time order.

    Each part is sorted by (start, pair), and a part's windows start within
    its time span, so writing the parts one after the other gives the table's
    order without a global sort. A window flagged ``left`` in a part
    continues the window of the same pair flagged ``right`` in the part
    before: it extends that row in place (end, range integral and minimum,
    volume) instead of becoming a row. Memory: the table plus one part.
    """
    total = sum(n for _, n in parts)
    a, b = np.empty(total, dtype=np.int32), np.empty(total, dtype=np.int32)
    t0, t1 = np.empty(total), np.empty(total)
    d_int, d_min = np.empty(total, dtype=np.float32), np.empty(total, dtype=np.float32)
    bits = np.empty(total) if with_bits else None
    open_pid = np.zeros(0, dtype=np.int64)  # windows open at the last boundary, by pair id
    open_row = np.zeros(0, dtype=np.int64)  # ... and their rows
    pos = 0
    for path, _ in parts:
        part = np.load(path, allow_pickle=False)
        pid = part["pid"].astype(np.int64)
        row_of = np.full(pid.size, -1, dtype=np.int64)
        cont = np.flatnonzero(part["left"])
        if cont.size and open_pid.size:
            i = np.minimum(np.searchsorted(open_pid, pid[cont]), open_pid.size - 1)
            hit = open_pid[i] == pid[cont]
            if not hit.all() or hit.sum() != open_pid.size:  # pragma: no cover - inconsistent screening
                log.debug("part edge: %d windows open before, %d flagged after, %d joined",
                          open_pid.size, cont.size, int(hit.sum()))
            cont, r = cont[hit], open_row[i[hit]]
            t1[r] = part["t_end"][cont]
            d_int[r] += part["d_int"][cont]
            d_min[r] = np.minimum(d_min[r], part["d_min"][cont])
            if bits is not None:
                bits[r] += part["bits"][cont]
            row_of[cont] = r
        new = np.flatnonzero(row_of < 0)
        end = pos + new.size
        row_of[new] = np.arange(pos, end)
        p = pid[new]
        a[pos:end], b[pos:end] = p // n_nodes, p % n_nodes
        t0[pos:end], t1[pos:end] = part["t_start"][new], part["t_end"][new]
        d_int[pos:end], d_min[pos:end] = part["d_int"][new], part["d_min"][new]
        if bits is not None:
            bits[pos:end] = part["bits"][new]
        pos = end
        right = np.flatnonzero(part["right"])
        order = np.argsort(pid[right], kind="stable")
        open_pid, open_row = pid[right][order], row_of[right][order]
        del part, pid, row_of, new, p
        os.unlink(path)
    a, b, t0, t1, d_min, d_int = a[:pos], b[:pos], t0[:pos], t1[:pos], d_min[:pos], d_int[:pos]
    cols = [a, b, t0, t1, d_min, d_int]
    cols.append(bits[:pos] if bits is not None else np.zeros(pos))  # zeros: no pages touched
    short = np.zeros(0, dtype=np.int64)
    for i in range(0, pos, _BLOCK):  # mean range = integral / duration, in place
        dur = t1[i:i + _BLOCK] - t0[i:i + _BLOCK]
        short = np.concatenate([short, np.flatnonzero(dur <= _MIN_WINDOW_S) + i])
        with np.errstate(divide="ignore", invalid="ignore"):
            d_int[i:i + _BLOCK] /= dur
    if short.size:  # windows that closed where they opened, at a chunk edge: compacted in place
        keep = np.ones(pos, dtype=bool)
        keep[short] = False
        m = pos - short.size
        for c in cols if bits is not None else cols[:6]:  # one column's temporary at a time
            c[:m] = c[keep]
        cols = [c[:m] for c in cols[:6]] + [cols[6][:m] if bits is not None else np.zeros(m)]
    if not _is_sorted(cols[2], cols[0], cols[1]):  # pragma: no cover - ties across a part edge
        log.debug("window parts out of order at a boundary: sorting the table")
        return WindowTable(*cols)
    return WindowTable(*cols, sort=False)


def find_windows(traj: Trajectories, geometry: LinkGeometry, rate_fn: RateFn | None = None,
                 workers: int = 1, chunks: int | None = None) -> WindowTable:
    """All contact windows of ``traj`` under ``geometry``.

    ``rate_fn(range_km) -> bit/s`` (vectorized), if given, is integrated over
    each window into ``volume_bits``. ``workers > 1`` scans time chunks in
    forked processes (Linux); ``chunks`` defaults to ``workers``.

    Memory: each worker holds the open windows and at most one part of
    ``_PART_WINDOWS`` emitted windows, which it writes to a temporary
    directory (``tempfile``: ``TMPDIR``); the parts are then read back one at
    a time into the table. A 24 h, 4,408-satellite search (~94 M windows)
    so needs the table's 32 bytes per window plus the trajectories.
    """
    global _WORKER
    if workers < 1:
        raise ContactError(f"workers: expected >= 1, got {workers}")
    n_cells = traj.times_s.size - 1
    chunks = max(1, min(chunks or workers, n_cells))
    edges = np.linspace(0, n_cells, chunks + 1).round().astype(int)
    bounds = [(int(edges[i]), int(edges[i + 1])) for i in range(chunks) if edges[i + 1] > edges[i]]
    scanner = _Scanner(traj, geometry, rate_fn)
    log.info("scanning %d cells, %d nodes, screen radius %.1f km + %.2f km/s x step",
             n_cells, traj.n_nodes, scanner.reach, scanner.v_rel)
    try:
        tmp = tempfile.TemporaryDirectory(prefix="contact-windows-")
    except OSError as exc:
        raise ContactError(f"contact windows: cannot create a temporary directory under "
                           f"{tempfile.gettempdir()} ({exc.strerror or exc}); set TMPDIR to a writable "
                           f"directory") from None
    with tmp as directory:
        tasks = [(k0, k1, directory, i) for i, (k0, k1) in enumerate(bounds)]
        if workers > 1 and len(tasks) > 1 and "fork" in mp.get_all_start_methods():
            _WORKER = scanner
            try:
                with ProcessPoolExecutor(max_workers=min(workers, len(tasks)),
                                         mp_context=mp.get_context("fork")) as pool:
                    parts = list(pool.map(_scan_chunk, tasks))
            finally:
                _WORKER = None
        else:
            parts = [scanner.scan(*t) for t in tasks]
        del scanner  # the packed node states: not needed to assemble
        return _assemble([p for chunk in parts for p in chunk], traj.n_nodes, rate_fn is not None)


def windows_from_samples(times_s: np.ndarray, visible: np.ndarray) -> list[tuple[float, float]]:
    """Intervals ``[first visible sample, last visible sample]`` of a sampled boolean series.

    The brute-force reference: with 1 s samples the true edges lie within 1 s.
    """
    v = np.asarray(visible, dtype=bool)
    if v.size == 0:
        return []
    padded = np.concatenate([[False], v, [False]])
    change = np.flatnonzero(np.diff(padded.astype(np.int8)))
    starts, ends = change[0::2], change[1::2] - 1
    return [(float(times_s[s]), float(times_s[e])) for s, e in zip(starts, ends)]
