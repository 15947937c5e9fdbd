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
   * ground station elevation mask: ``g = p . u - |p| sin(mask)``, ``u`` the
     station's local vertical (WGS-84 ellipsoid normal, as Skyfield's ``altaz``).

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

For LEO at a 60 s grid these cubics put the edges of links between
satellites within about a millisecond of SGP4's, and those of station links
at a 10 deg mask within 20 ms; a station constraint curves more the higher
its mask (0.16 s at 40 deg), and the error grows with the fourth power of
the step, so a coarse grid shifts edges by tens of seconds and misses short
windows (docs/scenario.md, ``time.step_s``; ``benchmarks/contact_edges.py``
measures it). For
piecewise linear drone motion with its turn times on the grid the range
constraint is exactly quadratic, so edges are exact.

Per-window statistics (minimum and mean range, and the integral of a
range-dependent data rate) use Simpson's rule on every visible piece of
every cell. Steps 2-3 and the bookkeeping of open windows run per pair in
compiled loops (:mod:`contact_sim._kernels`, numba); this module screens,
sizes buffers, evaluates the rate model and assembles the table. Time
chunks can run in parallel processes; windows that cross a chunk boundary
are joined afterwards.

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

import contextlib
import gc
import logging
import multiprocessing as mp
import os
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import numpy as np
from scipy.spatial import cKDTree

try:
    from tqdm.auto import tqdm
except ImportError:  # pragma: no cover
    tqdm = None

from orbits import MU_KM3_S2

from . import _kernels as K
from .errors import ContactError
from .geometry import DEFAULT_GRAZING_KM, EARTH_RADIUS_KM, MAX_GRAZING_KM, MAX_RANGE_KM, geodetic_up
from . import trajectory as _trajectory
from .trajectory import (EARTH_ROTATION_RAD_S, MOVING, STATION, Trajectories, check_window_budget,
                         contact_search_bytes)

log = logging.getLogger(__name__)

RateFn = Callable[[np.ndarray], np.ndarray]

_BATCH = 65536  # candidate pairs per kernel call (the event buffers stay in cache)
_MIN_WINDOW_S = 1e-6
_PART_WINDOWS = 4_000_000  # emitted windows a worker holds before writing a part
#: Bytes per emitted window that writing it in a part adds to the worker's buffers (:meth:`_Scanner._write_part`):
#: its columns handed over (38: int32 pair, float64 start, end and volume, float32 range integral and minimum,
#: two flags), the kept rows, their order and the sorted starts (8 each) and the part's structured array (30),
#: 92 together, rounded up.
_PART_WRITE_BYTES = 96
#: Bytes per open window of the events that close them at a chunk's end (:meth:`_Accumulator.close_all`:
#: its pair id, an int64 and a float64 event row, and its volume: 8 + 24 + 40 + 8).
_CLOSE_BYTES = 80
#: What a forked worker holds besides what its windows are counted at (:meth:`_Accumulator.held_bytes`): the
#: process, the compiled kernels it loads, the event buffers, the pages of the parent it writes to, and what
#: grows with the nodes without being counted apart. Measured (``python benchmarks/contacts_scale.py
#: --fork-overhead --scenarios examples/leo_*.toml examples/drone_*.toml --sizes 1584 4408 --hours 2``,
#: docs/scale.md, three runs of each search): the scan's true peak (the process tree's summed proportional set
#: size) with two forked workers above that of one process, less what the check counts more for their windows,
#: was 41-56 MiB a worker in every shipped example's search, 26-49 MiB for 1,584 satellites and 17-108 MiB for
#: 4,408 (2 h at 60 s), and 49-150 MiB for 4,408 over 1 h (``--sizes 4408 --hours 1``); the largest rounded up
#: to a multiple of 32 MiB. It grows with the search (the examples' searches, whatever their windows, took at most
#: 56 MiB), so a larger constellation may hold more. (Counted at 64 MiB before, from one search: 120 satellites,
#: 24 h, whose two forked workers peaked 118 MiB above one process.) With each step's candidate pairs counted apart
#: (:data:`_PAIR_BYTES`), the 1 h search at 4,408 satellites still took 101-104 MiB a worker beyond the count, and
#: the 2 h one at 1,584 29-46 (docs/scale.md, 2026-12-08): the rest is not the pairs, so it stays at 160 MiB. With
#: the collector's objects frozen before the fork (:func:`find_windows`), 24-52 MiB in the examples' searches, 53-80
#: for 4,408 satellites over 1 h; the 2 h search at 4,408 (up to 108 MiB before) was not measured again in full, so
#: that is no bound to lower it to.
_FORKED_WORKER_BYTES = 160 * 2**20
#: Bytes per candidate pair of a grid step that a worker holds while it scans the step (:meth:`_Scanner._space`)
#: besides its windows: the k-d tree's pairs (``cKDTree.query_pairs``, two int64 each, 16 bytes) sit in a vector
#: that doubles as it fills, so up to twice that is resident, and the allocator keeps much of it once freed,
#: until the next step's. Measured (``/proc/self/status``, VmRSS and VmHWM about one query, three times) on the
#: 4,408 satellites of ``benchmarks/contacts_scale.py`` at a grid step, 1.78 million pairs: 16-30 bytes a pair
#: resident after the query, at most 30 at its peak, up to 14 still held once it was freed. Rounded up.
_PAIR_BYTES = 32
#: Bytes per pair of a ground station and a moving node that a worker holds while it scans a grid step
#: (:meth:`_Scanner._ground`): their ids and pair ids (int64, 24), and at each end of the cell their relative
#: positions and velocities, the stations' verticals and their rates (float64 x 3, 96), the range, its rate,
#: the distance and the two elevation terms (40) and the constraint arrays kept for the kernel (32). Measured
#: (``tracemalloc``, 1,584 satellites and 10 stations, with and without a rate model): 264 at its peak; rounded up.
_GROUND_PAIR_BYTES = 272
_BLOCK = 1 << 22  # rows per block of the table-wide passes (bounds their temporaries)


def forks_within_budget(workers: int, grid_bytes: float) -> int:
    """The most of ``workers`` forked workers a budgeted search starts: as many as leave half the contact
    search's budget (:data:`contact_sim.trajectory.MAX_TRAJECTORY_BYTES`) beside the grid's ``grid_bytes``
    to the windows they hold, at :data:`_FORKED_WORKER_BYTES` each; 1 (the search in one process) when not
    two fit. More would only have the search refused once they scan together, whatever its windows (52
    workers at 160 MiB pass the 8 GiB with any grid), where fewer finish it.

    >>> forks_within_budget(64, 0.0), forks_within_budget(2, 0.0), forks_within_budget(8, 7.9 * 2**30)
    (25, 2, 1)
    """
    if _FORKED_WORKER_BYTES <= 0:  # nothing counted for a worker (as some tests set it)
        return max(1, int(workers))
    room = max(0.0, _trajectory.MAX_TRAJECTORY_BYTES - float(grid_bytes))
    return max(1, min(int(workers), int(room // (2 * _FORKED_WORKER_BYTES))))


@dataclass(frozen=True)
class LinkGeometry:
    """When two nodes can communicate (km, deg).

    ``occlusion``: apply the Earth-grazing test to space-space pairs (off for
    drones in a local frame). Ground-station links use ``min_elevation_deg``
    (0..90, 90 excluded, above the local horizontal: normal to the WGS-84 ellipsoid; they have
    no Earth-occlusion test, which a mask at or above the horizon makes
    unneeded) and ``station_max_range_km`` (defaults to ``max_range_km``).
    """

    max_range_km: float
    grazing_altitude_km: float = DEFAULT_GRAZING_KM
    earth_radius_km: float = EARTH_RADIUS_KM
    occlusion: bool = True
    min_elevation_deg: float = 10.0
    station_max_range_km: float | None = None

    def __post_init__(self) -> None:
        if not 0 < self.max_range_km <= MAX_RANGE_KM:  # NaN too
            raise ContactError(f"link.max_range_km: expected a positive distance of at most {MAX_RANGE_KM:g} km, "
                               f"got {self.max_range_km}")
        # NaN fails every comparison: a NaN radius would silently switch the occlusion test off
        if not 0 <= self.grazing_altitude_km <= MAX_GRAZING_KM:
            raise ContactError(f"link.grazing_altitude_km: expected a number in 0..{MAX_GRAZING_KM:g} km, "
                               f"got {self.grazing_altitude_km}")
        if not 0 < self.earth_radius_km < np.inf:
            raise ContactError(f"earth_radius_km: expected a positive distance, got {self.earth_radius_km}")
        if self.min_elevation_deg >= 90:  # only the zenith itself: no window of any length
            raise ContactError(
                f"link.min_elevation_deg: expected 0..90 deg, 90 excluded (a mask of 90 deg or more leaves "
                f"at most the zenith point, no window), got {self.min_elevation_deg}")
        if not 0 <= self.min_elevation_deg < 90:  # below the horizon, a station's ray enters the ground
            raise ContactError(
                f"link.min_elevation_deg: expected 0..90 deg (a mask below the horizon would let a "
                f"station link pass through the Earth), got {self.min_elevation_deg}")
        if self.station_max_range_km is not None and not 0 < self.station_max_range_km <= MAX_RANGE_KM:
            raise ContactError(f"link.station_max_range_km: expected a positive distance of at most "
                               f"{MAX_RANGE_KM:g} km, got {self.station_max_range_km}")

    @property
    def grazing_radius_km(self) -> float:
        return self.earth_radius_km + self.grazing_altitude_km


#: :attr:`WindowTable.direction` / :attr:`Window.direction`: which way a window carries data.
#: Windows found by geometry carry both ways; an imported DTN plan's one-way contacts give
#: windows that carry only ``a -> b`` or only ``b -> a``.
BOTH, A_TO_B, B_TO_A = 0, 1, 2
#: The direction codes as the CSV / JSON exports write them.
DIRECTION_NAMES = ("both", "a->b", "b->a")


@dataclass(frozen=True)
class Window:
    """One contact window between nodes ``a < b`` (seconds from scenario start, km, bytes);
    ``direction`` is :data:`BOTH`, :data:`A_TO_B` or :data:`B_TO_A`."""

    a: int
    b: int
    t_start_s: float
    t_end_s: float
    capacity_bytes: int
    mean_range_km: float
    min_range_km: float
    direction: int = BOTH

    @property
    def duration_s(self) -> float:
        return self.t_end_s - self.t_start_s


class WindowTable(Sequence[Window]):
    """Column store of windows (numpy arrays), usable as a sequence of :class:`Window`.

    Sorted by ``(t_start_s, a, b)``. ``volume_bits`` is the integral of the
    data rate over the window (0 when no rate model was given);
    ``capacity_bytes`` is filled by the link model (:mod:`contact_sim.link`).
    ``direction`` (int8) says which way each window carries data: :data:`BOTH`
    (0, the default, every window found by geometry), :data:`A_TO_B` (1) or
    :data:`B_TO_A` (2); ``volume_bits`` and ``capacity_bytes`` are per
    direction that the window carries.
    """

    def __init__(self, a, b, t_start_s, t_end_s, min_range_km, mean_range_km, volume_bits,
                 capacity_bytes=None, direction=None, sort: bool = True) -> None:
        self.a = np.asarray(a, dtype=np.int32)
        self.b = np.asarray(b, dtype=np.int32)
        self.t_start_s = np.asarray(t_start_s, dtype=np.float64)
        self.t_end_s = np.asarray(t_end_s, dtype=np.float64)
        self.min_range_km = np.asarray(min_range_km, dtype=np.float32)
        self.mean_range_km = np.asarray(mean_range_km, dtype=np.float32)
        self.volume_bits = np.asarray(volume_bits, dtype=np.float64)
        self.capacity_bytes = (np.zeros(self.a.size, dtype=np.int64) if capacity_bytes is None
                               else np.asarray(capacity_bytes, dtype=np.int64))
        if direction is None:  # calloc'd zeros: no pages touched until read
            self.direction = np.zeros(self.a.size, dtype=np.int8)
        else:
            d = np.asarray(direction)
            if d.shape != self.a.shape or (d.size and (d.min() < BOTH or d.max() > B_TO_A)):
                raise ContactError(f"window directions: expected {self.a.size} values of {BOTH}, {A_TO_B} "
                                   f"or {B_TO_A} (both ways, a->b, b->a)")
            self.direction = d.astype(np.int8, copy=False)
        if sort and self.a.size:
            order = np.lexsort((self.b, self.a, self.t_start_s))
            for name in self._columns():
                setattr(self, name, getattr(self, name)[order])

    @staticmethod
    def _columns() -> tuple[str, ...]:
        return ("a", "b", "t_start_s", "t_end_s", "min_range_km", "mean_range_km",
                "volume_bits", "capacity_bytes", "direction")

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
                      float(self.min_range_km[i]), int(self.direction[i]))

    def __iter__(self) -> Iterator[Window]:
        for i in range(len(self)):
            yield self[i]

    @property
    def one_way(self) -> np.ndarray:
        """Boolean mask of the windows that carry data in one direction only."""
        return self.direction != BOTH

    def select(self, mask) -> "WindowTable":
        """Rows where ``mask`` is true (keeps order)."""
        cols = [getattr(self, n)[mask] for n in self._columns()]
        return WindowTable(*cols, sort=False)

    def pair(self, a: int, b: int) -> "WindowTable":
        """Windows of the unordered pair ``{a, b}`` (whichever way they carry data)."""
        lo, hi = min(a, b), max(a, b)
        return self.select((self.a == lo) & (self.b == hi))


# --------------------------------------------------------------------------- open windows

class _Accumulator:
    """Open windows keyed by pair id ``a * n + b``, plus the emitted windows.

    The compiled kernels (:mod:`contact_sim._kernels`) do the work on an
    open-addressing hash table with one 64-byte row per open window (pair id,
    start time, integral of range, minimum range, integral of rate, ``left``
    flag) and on output buffers for the closed windows; this class sizes them
    before each call. Memory is linear in the number of pairs in contact (plus
    the emitted windows, which :meth:`checkpoint` and :meth:`result` hand over
    in parts), not in ``n_nodes^2``.
    """

    def __init__(self, n_nodes: int) -> None:
        self.n = n_nodes
        self.pid_dtype = np.int32 if n_nodes * n_nodes < 2**31 else np.int64
        self.st = np.zeros(3, dtype=np.int64)  # live, out, missed
        self._alloc_table(1 << 12)
        self.out_pid = np.zeros(1 << 12, dtype=np.int64)
        self.out_f = np.zeros((1 << 12, 5))
        self.out_b = np.zeros((1 << 12, 2), dtype=bool)
        self._first_bytes = self._buffer_bytes()
        self._rebuilt = 0  # the most bytes held beyond the first buffers while the table was rebuilt, since asked

    def _alloc_table(self, cap: int) -> None:
        self.tab = _aligned((cap, K.ROW))  # each row one cache line
        self.tab[:, K.KEY] = K.EMPTY
        self.shift = np.uint64(64 - int(np.log2(cap)))

    def __len__(self) -> int:
        return int(self.st[K.S_LIVE])

    @property
    def n_out(self) -> int:
        return int(self.st[K.S_OUT])

    def _buffer_bytes(self) -> int:
        return self.out_pid.nbytes + self.out_f.nbytes + self.out_b.nbytes + self.tab.nbytes

    def held_bytes(self) -> int:
        """Bytes this accumulator holds, or will while its windows are written, beyond its first buffers (a fixed
        0.5 MB; the event buffers' first 4.5 MB are fixed too): the emitted-window buffers and the open-window
        table as they have grown (they are kept for the next part), :data:`_PART_WRITE_BYTES` per emitted window
        not yet written and
        :data:`_CLOSE_BYTES` per open window (closed at the chunk's end, then written); or, if more, what it
        held at once while its open-window table was rebuilt since this was last asked (:meth:`_reserve`).

        Growing the emitted-window buffers (50 bytes a row) needs nothing more, asked once they have grown (after
        a grid step, and after :meth:`checkpoint` or :meth:`close_all`, before the part is written): while one is
        copied the old ones not yet replaced are held beside the new ones, at most 42 bytes a row of the old size
        beyond the new buffers, which are counted whole, and the grown buffers hold more emitted windows than the
        old rows, each counted at :data:`_PART_WRITE_BYTES` for a write not under way then (a closing's own events
        are the :data:`_CLOSE_BYTES` counted for each open window before it)."""
        grown = self._buffer_bytes() - self._first_bytes
        rebuilt, self._rebuilt = self._rebuilt, 0
        return max(grown + self.n_out * _PART_WRITE_BYTES + len(self) * _CLOSE_BYTES, rebuilt)

    def _reserve(self, opens: int, closes: int) -> None:
        """Room for ``opens`` more open windows and ``closes`` more emitted ones."""
        st = self.st
        live, cap, m = int(st[K.S_LIVE]), self.tab.shape[0], opens
        if 2 * (live + m) > cap or (cap > 1 << 12 and 16 * (live + m) < cap):
            # rebuilt at 2.5-5x the live rows: grows with them, and shrinks after many deletions. The new table
            # is written through as it is made (every row's key), and the old one is held until its rows are
            # moved: grown past half its rows, up to 128 bytes an open window beside the new one, more than
            # the 80 counted to close it (held_bytes gives the most held so)
            old = self.tab
            self._alloc_table(1 << max(12, int(np.ceil(np.log2(2.5 * (live + m))))))
            K.table_rebuild(old, self.tab, self.shift, st)
            self._rebuilt = max(self._rebuilt, self._buffer_bytes() + old.nbytes - self._first_bytes)
            del old  # not held beside the emitted-window buffers while they grow
        need = int(st[K.S_OUT]) + closes
        if need > self.out_pid.size:
            cap, n = max(need, 2 * self.out_pid.size), int(st[K.S_OUT])
            self.out_pid = _grown(self.out_pid, cap, n)
            self.out_f = _grown(self.out_f, cap, n)
            self.out_b = _grown(self.out_b, cap, n)

    def apply(self, ev_i: np.ndarray, ev_f: np.ndarray, ne: int, bits: np.ndarray) -> None:
        """Apply events ``0 .. ne-1`` (opens, pieces, closes) in order."""
        opens, _, closes = np.bincount(ev_i[:ne, 1], minlength=3)
        self._reserve(int(opens), int(closes))
        K.apply_events(ev_i, ev_f, bits, ne, self.tab, self.shift, self.st,
                       self.out_pid, self.out_f, self.out_b)
        if self.st[K.S_MISSED]:  # pragma: no cover - a piece of a window never opened
            log.debug("%d events of windows never opened ignored", int(self.st[K.S_MISSED]))
            self.st[K.S_MISSED] = 0

    def open_ids(self) -> np.ndarray:
        keys = self.tab[:, K.KEY]
        return np.sort(keys[keys >= 0]).astype(np.int64)

    def close_all(self, t: float, right: bool) -> None:
        """Close every open window at ``t``."""
        pid = self.open_ids()
        ev_i = np.zeros((pid.size, 3), dtype=np.int64)
        ev_i[:, 0], ev_i[:, 1], ev_i[:, 2] = pid, K.CLOSE, right
        ev_f = np.zeros((pid.size, 5))
        ev_f[:, 0] = t
        self.apply(ev_i, ev_f, pid.size, np.zeros(pid.size))

    def checkpoint(self, t: float) -> None:
        """Emit every open window as ending at ``t`` (flagged ``right``) and
        restart it at ``t`` (flagged ``left``): the emitted windows can then be
        handed over as a part, and the part boundary is joined like a chunk
        boundary (:func:`_assemble`)."""
        self._reserve(0, len(self))
        K.checkpoint(self.tab, self.st, t, self.out_pid, self.out_f, self.out_b)

    def result(self) -> dict[str, np.ndarray]:
        """The emitted windows (columns), handed over: the buffers start empty again."""
        n = self.n_out
        f = self.out_f
        # compact columns: ids fit in int32 below 46,340 nodes; range statistics in float32
        res = {"pid": self.out_pid[:n].astype(self.pid_dtype), "t_start": f[:n, 0].copy(),
               "t_end": f[:n, 1].copy(), "d_int": f[:n, 2].astype(np.float32),
               "d_min": f[:n, 3].astype(np.float32), "bits": f[:n, 4].copy(),
               "left": self.out_b[:n, 0].copy(), "right": self.out_b[:n, 1].copy()}
        self.st[K.S_OUT] = 0
        return res


def _aligned(shape: tuple[int, ...]) -> np.ndarray:
    """An uninitialized float64 array whose data starts on a 64-byte (cache line) boundary."""
    size = int(np.prod(shape))
    raw = np.empty(size + 8)
    off = (-raw.ctypes.data % 64) // 8
    return raw[off:off + size].reshape(shape)


def _grown(x: np.ndarray, cap: int, n: int) -> np.ndarray:
    """``x`` with room for ``cap`` rows, its first ``n`` rows kept."""
    y = np.zeros((cap,) + x.shape[1:], dtype=x.dtype)
    y[:n] = x[:n]
    return y


class _Events:
    """Reusable event buffers of the kernels, grown when a batch overflows them."""

    def __init__(self, cap: int = 1 << 16) -> None:
        self._alloc(cap)
        self._first_bytes = self.ev_i.nbytes + self.ev_f.nbytes + self.bits.nbytes

    def _alloc(self, cap: int) -> None:
        self.ev_i = np.zeros((cap, 3), dtype=np.int64)  # pair id, kind, flag
        self.ev_f = np.zeros((cap, 5))  # time or span, then d_lo, d_mid, d_hi, d_min of a piece
        self.bits = np.zeros(cap)

    def grown_bytes(self) -> int:
        """Bytes the buffers have grown beyond their first size (each time a batch's events overflowed them;
        kept for the batches after)."""
        return self.ev_i.nbytes + self.ev_f.nbytes + self.bits.nbytes - self._first_bytes

    def run(self, kernel, *args) -> int:
        """``kernel(*args, ev_i, ev_f)``, re-run with twice the buffers until they suffice."""
        while True:
            ne = kernel(*args, self.ev_i, self.ev_f)
            if ne >= 0:
                return ne
            self._alloc(2 * self.ev_i.shape[0])

    def bits_of(self, ne: int, rate_fn: RateFn | None) -> np.ndarray:
        """Simpson's rule of ``rate_fn`` over each piece event (zeros without a rate model)."""
        if rate_fn is None:
            return self.bits
        bits = np.zeros(ne)
        piece = np.flatnonzero(self.ev_i[:ne, 1] == K.PIECE)
        f = self.ev_f[piece]
        bits[piece] = f[:, 0] / 6.0 * (rate_fn(f[:, 1]) + 4.0 * rate_fn(f[:, 2]) + rate_fn(f[:, 3]))
        return bits


class _WindowTally:
    """The windows the search has written to parts and the seconds of horizon those parts cover, summed over
    every worker, and the bytes each chunk's worker holds for the windows it has not yet written (in shared
    memory, which forked workers inherit, when :meth:`start` is told so before they are forked); with
    ``budget``, held to the contact search's budget with its grid
    (:func:`contact_sim.trajectory.check_window_budget`): once it is passed, each worker stops at its next
    grid step, before any part is read back into the table."""

    def __init__(self, traj: Trajectories, budget: bool) -> None:
        self.grid_bytes = contact_search_bytes(traj.times_s.size, traj.n_nodes, bool((traj.kinds == STATION).any()))
        self.horizon_s = traj.duration_s
        self.budget = budget
        # the field of the link's range a refusal names: satellites' (TEME) or the drones'
        self.range_field = "link.max_range_km" if traj.frame == "TEME" else "drones.radio_range_km"
        # windows, seconds searched, 1 once over the budget, the most bytes held by all workers together,
        # then the bytes held now by each chunk's worker
        self._sums: Any = [0.0, 0.0, 0.0, 0.0]
        self._lock: Any = contextlib.nullcontext()
        self._forked = False  # the chunks scanned by forked workers (start's shared): fewer of them hold less

    def start(self, chunks: int, shared: bool) -> None:
        """Zero the sums and give each of ``chunks`` chunks its count of held bytes; with ``shared``, in shared
        memory (with a lock), for workers forked after this call."""
        values = [0.0] * (4 + chunks)
        self._sums = mp.get_context("fork").Array("d", values) if shared else values
        self._lock = self._sums.get_lock() if shared else contextlib.nullcontext()
        self._forked = shared

    def add(self, windows: int, seconds: float) -> None:
        """Count a part's new windows (not those continuing one of the part before) and its seconds."""
        with self._lock:
            self._sums[0] += windows
            self._sums[1] += seconds
            self._flag()

    def hold(self, chunk: int, nbytes: float) -> None:
        """Set the bytes the worker of ``chunk`` holds for windows it has not written yet (0 once it is done)."""
        with self._lock:
            self._sums[4 + chunk] = nbytes
            self._sums[3] = max(self._sums[3], sum(self._sums[4:]))
            self._flag()

    def _flag(self) -> None:
        try:
            self.check()
        except ContactError:
            self._sums[2] = 1.0

    @property
    def over(self) -> bool:
        return self._sums[2] > 0

    def check(self) -> None:
        """Raise :class:`ContactError` (one line: the count, the seconds searched, the limit; or the most bytes the
        workers held together) past the budget."""
        if self.budget:
            check_window_budget(self._sums[0], self._sums[1], self.horizon_s, self.grid_bytes, self.range_field,
                                held_bytes=self._sums[3], forked=self._forked)


# --------------------------------------------------------------------------- per-cell work

class _Scanner:
    """Everything a worker needs to scan a range of cells.

    Per grid time, each node's state is packed in one row of columns
    (position, velocity after, velocity before, tangent length to the grazing
    sphere and its rates), so a candidate pair reads a few cache lines.
    """

    # columns of the packed node state
    POS, VR, VL, TAN, TDR, TDL = slice(0, 3), slice(3, 6), slice(6, 9), 9, 10, 11

    def __init__(self, traj: Trajectories, geom: LinkGeometry, rate_fn: RateFn | None, budget: bool = False) -> None:
        self.traj = traj
        self.geom = geom
        self.rate_fn = rate_fn
        self.tally = _WindowTally(traj, budget)
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
        # (time, node, column): a node's state at a grid time is one cache line
        # (8 columns) or two, so a candidate pair reads 4 to 8 lines
        cols = _aligned((pos.shape[0], pos.shape[1], n_col))
        cols[..., self.POS] = pos
        cols[..., self.VR] = vr
        cols[..., self.VL] = vl
        cols[..., self.TAN] = tang
        cols[..., self.TDR] = np.einsum("tni,tni->tn", pos, vr) * inv
        cols[..., self.TDL] = np.einsum("tni,tni->tn", pos, vl) * inv
        self.cols = cols
        vmax = traj.max_speed_km_s()
        self.v_rel = 2.0 * vmax * 1.001 + 1e-9
        reach = geom.max_range_km
        inner = geom.max_range_km  # range below which a link certainly exists
        if self.occlusion and self.moving.size:
            r = np.sqrt(r2[:, self.moving])
            rdot = np.abs(cols[:, self.moving, self.TDR] * tang[:, self.moving]) / np.maximum(r, 1e-9)
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
        # the same, as the compiled kernel takes them: column indices, and -1 for no bound
        self.kernel_cols = np.array([self.POS.start, self.VR.start, self.VL.start,
                                     self.TAN, self.TDR, self.TDL])
        self.kernel_acc_rel = -1.0 if self.acc_rel is None else self.acc_rel
        self.sin_mask = np.sin(np.radians(geom.min_elevation_deg))
        self.st_range = geom.station_max_range_km or geom.max_range_km

    def _space(self, acc: _Accumulator, ev: _Events, k: int, first: bool) -> int:
        """Scan the moving nodes' candidate pairs of cell ``k``; returns the bytes the worker held for them
        (:data:`_PAIR_BYTES` each, and their node indices when the moving nodes are not all the nodes)."""
        traj = self.traj
        t0 = traj.times_s[k]
        dt = traj.times_s[k + 1] - t0
        tree = cKDTree(self.cols[k][self.moving, self.POS])
        pairs = tree.query_pairs(self.reach + self.v_rel * dt, output_type="ndarray")
        if pairs.size == 0:
            return 0
        held = _PAIR_BYTES * pairs.shape[0]
        # query_pairs gives i < j, and ``moving`` is ascending, so lo < hi
        lo, hi = pairs[:, 0], pairs[:, 1]
        if self.moving.size < traj.n_nodes:
            lo, hi = self.moving[lo], self.moving[hi]
            held += lo.nbytes + hi.nbytes
        for i in range(0, lo.size, _BATCH):  # batches: the event buffers stay in cache
            ne = ev.run(K.space_events, self.cols[k], self.cols[k + 1], lo[i:i + _BATCH],
                        hi[i:i + _BATCH], self.kernel_cols, traj.n_nodes, t0, dt, self.geom.max_range_km,
                        self.inner, self.kernel_acc_rel, self.v_rel, self.occlusion, first)
            acc.apply(ev.ev_i, ev.ev_f, ne, ev.bits_of(ne, self.rate_fn))
        return held

    def _ground(self, acc: _Accumulator, ev: _Events, k: int, first: bool) -> int:
        """Scan every station's pairs with the moving nodes on cell ``k``; returns the bytes the worker held for
        them (:data:`_GROUND_PAIR_BYTES` each)."""
        traj, n = self.traj, self.traj.n_nodes
        if self.stations.size == 0 or self.moving.size == 0:
            return 0
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
            u = np.repeat(geodetic_up(P[self.stations]), self.moving.size, axis=0)  # each station's vertical
            du = np.cross(omega, u)
            g_el = np.einsum("ij,ij->i", p, u) - d * self.sin_mask
            gd_el = (np.einsum("ij,ij->i", w, u) + np.einsum("ij,ij->i", p, du)
                     - (0.5 * qd / np.maximum(d, 1e-9)) * self.sin_mask)
            G.append(np.array([self.st_range ** 2 - q, g_el]))
            Dv.append(np.array([-qd, gd_el]))
            qs.append((q, qd))
        ne = ev.run(K.group_events, pid, G[0], G[1], Dv[0], Dv[1],
                    qs[0][0], qs[1][0], qs[0][1], qs[1][1], t0, dt, first)
        acc.apply(ev.ev_i, ev.ev_f, ne, ev.bits_of(ne, self.rate_fn))
        return _GROUND_PAIR_BYTES * pid.size

    def scan(self, k0: int, k1: int, directory: str, chunk: int = 0, fixed_bytes: float = 0.0) -> list[tuple[str, int]]:
        """Windows of cells ``k0 .. k1-1`` (chunk number ``chunk``), written to ``directory`` as parts.

        Whenever ``_PART_WINDOWS`` windows have been emitted, the open ones are
        checkpointed (:meth:`_Accumulator.checkpoint`) and the part is written,
        so a worker holds at most one part however long the scenario. Windows
        still open at the chunk end are closed there, flagged ``right``. Each
        part is counted in :attr:`tally`, and after every grid step the bytes
        the worker holds for the windows not yet written
        (:meth:`_Accumulator.held_bytes`), with those it held for the step's
        candidate pairs (:data:`_PAIR_BYTES`, :data:`_GROUND_PAIR_BYTES`) and
        its event buffers' growth, and so again before each part is written (the
        open windows taken into it, its buffers grown for them); once the windows of every worker, or
        the bytes held by all of them, pass its budget the scan stops at its
        next step (the parts it returns then are not the chunk's whole).
        ``fixed_bytes``: what the worker holds besides (a forked worker's
        :data:`_FORKED_WORKER_BYTES`), counted with them while it scans.
        Returns ``(path, rows)`` per part, in time order.
        """
        acc, ev = _Accumulator(self.traj.n_nodes), _Events()
        parts: list[tuple[str, int]] = []
        times = self.traj.times_s
        cells = range(k0, k1)
        if tqdm is not None:
            cells = tqdm(cells, desc="contact windows", unit="step", disable=None,
                         position=chunk, leave=False)
        since = times[k0]  # where the part being gathered starts
        for k in cells:
            if self.tally.over:  # this worker's windows, or another's, passed the budget
                self.tally.hold(chunk, 0.0)
                return parts
            step = self._space(acc, ev, k, k == k0) + self._ground(acc, ev, k, k == k0)
            # the step's candidate pairs were held with the windows' buffers as they stand now
            self.tally.hold(chunk, fixed_bytes + acc.held_bytes() + step + ev.grown_bytes())
            if acc.n_out >= _PART_WINDOWS and k + 1 < k1 and not self.tally.over:
                acc.checkpoint(times[k + 1])
                # the part as it is written: the open windows emitted into it, the buffers grown for them
                self.tally.hold(chunk, fixed_bytes + acc.held_bytes() + ev.grown_bytes())
                parts.append(self._write_part(acc, directory, chunk, len(parts), times[k + 1] - since))
                since = times[k + 1]
        if self.tally.over:
            self.tally.hold(chunk, 0.0)
            return parts
        acc.close_all(times[k1], right=True)
        self.tally.hold(chunk, fixed_bytes + acc.held_bytes() + ev.grown_bytes())  # the same for the last part
        parts.append(self._write_part(acc, directory, chunk, len(parts), times[k1] - since))
        self.tally.hold(chunk, 0.0)  # done: its buffers go with it
        return parts

    def _write_part(self, acc: _Accumulator, directory: str, chunk: int, index: int,
                    seconds: float) -> tuple[str, int]:
        """Hand over the emitted windows as one part file, sorted by (start, pair), and count its new
        windows and ``seconds`` of horizon in :attr:`tally`.

        Windows that can no longer be joined (no ``left`` / ``right`` flag) and
        last under ``_MIN_WINDOW_S`` are dropped here. A window flagged ``left``
        continues one of the part before (:func:`_assemble`), except in the
        scan's first part, where it is one open at the horizon's start.
        """
        res = acc.result()
        bad = np.isnan(res["t_start"])
        if bad.any():  # pragma: no cover - would mean inconsistent screening
            log.warning("dropping %d windows without a start (inconsistent state)", int(bad.sum()))
        keep = ~bad & ((res["t_end"] - res["t_start"] > _MIN_WINDOW_S) | res["left"] | res["right"])
        rows = np.flatnonzero(keep)
        del bad, keep
        continued = int(np.count_nonzero(res["left"][rows])) if (chunk, index) != (0, 0) else 0
        rows = rows[_order_by_start(res["t_start"][rows], res["pid"][rows])]
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
        self.tally.add(int(rows.size) - continued, float(seconds))
        return path, int(rows.size)


def _order_by_start(t: np.ndarray, pid: np.ndarray) -> np.ndarray:
    """The order of rows by (start, pair id): ``np.lexsort((pid, t))``, but the
    pair ids are only compared within runs of equal start times (windows
    restarted at a part boundary, or opened at the scan's first grid time),
    which is three times faster on a part of millions of windows."""
    order = np.argsort(t, kind="stable")
    ts = t[order]
    eq = ts[1:] == ts[:-1]
    if eq.any():
        tied = np.zeros(t.size, dtype=bool)
        tied[1:] |= eq
        tied[:-1] |= eq
        at = np.flatnonzero(tied)  # sorted positions inside runs of equal start
        sub = order[at]
        order[at] = sub[np.lexsort((pid[sub], t[sub]))]
    return order


_WORKER: _Scanner | None = None


def _scan_chunk(args: tuple[int, int, str, int, float]) -> list[tuple[str, int]]:
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
                 workers: int = 1, chunks: int | None = None, budget: bool = False) -> WindowTable:
    """All contact windows of ``traj`` under ``geometry``.

    ``rate_fn(range_km) -> bit/s`` (vectorized), if given, is integrated over
    each window into ``volume_bits``. ``workers > 1`` scans time chunks in
    forked processes (Linux; at most one per core); ``chunks`` defaults to ``workers``.

    Windows are cut at the ends of ``traj.times_s``: one already open at the
    first time starts exactly there, one still open at the last time ends
    exactly there, and nothing else marks them as cut.

    Memory: each worker holds the open windows and at most one part of
    ``_PART_WINDOWS`` emitted windows, which it writes to a temporary
    directory (``tempfile``: ``TMPDIR``); the parts are then read back one at
    a time into the table. A 24 h, 4,408-satellite search (~94 M windows)
    so needs the table's 32 bytes per window plus the trajectories and the packed node states
    (:data:`contact_sim.trajectory.CONTACT_BYTES_PER_SAMPLE` per node and time sample together, the
    budget :func:`contact_sim.trajectory.check_trajectory_size` holds a scenario to). With ``budget``
    (:func:`contact_sim.scenario.plan_from_trajectories`: ``fol contacts``, ``fol simulate``) the windows
    are held to the same budget as the parts are written (:func:`contact_sim.trajectory.check_window_budget`:
    :data:`~contact_sim.trajectory.CONTACT_BYTES_PER_WINDOW` each, what ``fol contacts`` was measured to
    need per window, plus the grid's cost): once they pass it, every worker stops at its next grid step and
    :class:`ContactError` says how many were found in how much of the horizon, with the temporary
    directory removed and no table built. What the workers hold while they scan (:meth:`_Accumulator.held_bytes`
    for the windows not yet written, and :data:`_FORKED_WORKER_BYTES` for each forked worker) is held to the
    same limit with the grid, and refused the same way; so a budgeted search forks no more workers than
    :func:`forks_within_budget` allows.
    """
    global _WORKER
    if workers < 1:
        raise ContactError(f"workers: expected >= 1, got {workers}")
    workers = min(workers, os.cpu_count() or 1)  # more forks than cores only add chunks and processes
    scanner = _Scanner(traj, geometry, rate_fn, budget)
    if budget and workers > 1:
        fit = forks_within_budget(workers, scanner.tally.grid_bytes)
        if fit < workers:
            log.info("forking %d workers, not %d: %d MiB each must leave half the %.0f GiB budget beside the "
                     "grid to the windows", fit, workers, _FORKED_WORKER_BYTES >> 20,
                     _trajectory.MAX_TRAJECTORY_BYTES / 2**30)
            workers = fit
    n_cells = traj.times_s.size - 1
    chunks = max(1, min(chunks or workers, n_cells))
    edges = np.linspace(0, n_cells, chunks + 1).round().astype(int)
    bounds = [(int(edges[i]), int(edges[i + 1])) for i in range(chunks) if edges[i + 1] > edges[i]]
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
            scanner.tally.start(len(tasks), shared=True)
            # The collector's objects frozen while the pool forks (gc docs, gc.freeze): a child's collections
            # then leave the parent's object pages alone instead of copying them on write; unfrozen once the
            # pool is done. Only when none are frozen yet: gc cannot unfreeze only ours, so a caller's own
            # freeze is left as it was.
            frozen = gc.get_freeze_count() == 0
            if frozen:
                gc.freeze()
            try:
                with ProcessPoolExecutor(max_workers=min(workers, len(tasks)),
                                         mp_context=mp.get_context("fork")) as pool:
                    parts = list(pool.map(_scan_chunk, [t + (_FORKED_WORKER_BYTES,) for t in tasks]))
            finally:
                _WORKER = None
                if frozen:
                    gc.unfreeze()
        else:
            scanner.tally.start(len(tasks), shared=False)
            parts = [scanner.scan(*t) for t in tasks]
        scanner.tally.check()  # every part counted: the table is not built past the budget
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
