"""Node trajectories sampled on a time grid: the input of the window finder.

A :class:`Trajectories` holds positions (km) and velocities (km/s) of every
node at grid times ``times_s`` (seconds from ``start``), time-major
(``(n_times, n_nodes, 3)``). Velocities are given on both sides of each grid
time (``vel_right``: just after, ``vel_left``: just before) so piecewise
linear motion (drones) is represented exactly when its turn times are grid
points; for orbits the two are the same array.

Satellites: positions from vectorized SGP4 in TEME, or interpolated from an OEM. Ground stations: WGS-84
points rotated into TEME with Skyfield (velocity = Earth rotation x r).
"""

from __future__ import annotations

import datetime as _dt
import logging
from dataclasses import dataclass, field

import numpy as np

from orbits import Constellation, Ephemeris, OrbitError, ground_points_itrs, itrs_to_teme, julian_date, parse_utc
from orbits.constants import EARTH_ROTATION_RAD_S
from orbits.iers import PolarMotion
from orbits.propagation import propagate_offsets
from swarmbase.units import format_bytes, format_count

from .errors import ContactError

log = logging.getLogger(__name__)

#: Node kinds.
MOVING, STATION = 0, 1
#: Elements farther than this from the horizon (days) get a warning: SGP4 mean elements drift by
#: kilometres a day away from their epoch (drag, unmodelled manoeuvres).
MAX_ELEMENT_AGE_DAYS = 30.0


def header_name_ok(name: str) -> bool:
    """Whether a node name reads back from an ION plan's ``# node N NAME KIND`` header:
    not empty, words separated by single spaces, no other whitespace. Here, beside the nodes' names, and
    not in :mod:`contact_sim.dtn`, whose imports (numba, scipy: about 90 MB) a mission reader naming its
    drone does not need."""
    return bool(name) and " ".join(name.split()) == name


@dataclass
class GroundStation:
    """A ground station: WGS-84 latitude/longitude (deg), elevation (m)."""

    name: str
    lat_deg: float
    lon_deg: float
    elevation_m: float = 0.0


@dataclass
class Trajectories:
    """Positions/velocities of ``n_nodes`` nodes on a time grid (km, km/s, s)."""

    names: list[str]
    kinds: np.ndarray
    times_s: np.ndarray
    pos: np.ndarray
    vel_right: np.ndarray
    vel_left: np.ndarray
    start: _dt.datetime | None = None
    frame: str = "TEME"
    smooth: bool = True
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        n_t, n = self.times_s.size, len(self.names)
        for nm in ("pos", "vel_right", "vel_left"):
            arr = getattr(self, nm)
            if arr.shape != (n_t, n, 3):
                raise ContactError(f"trajectories.{nm}: expected shape {(n_t, n, 3)}, got {arr.shape}")
        if n_t < 2 or np.any(np.diff(self.times_s) <= 0):
            raise ContactError("trajectories.times_s: expected at least 2 strictly increasing times")
        self.kinds = np.asarray(self.kinds, dtype=np.int8)

    @property
    def n_nodes(self) -> int:
        return len(self.names)

    @property
    def duration_s(self) -> float:
        return float(self.times_s[-1] - self.times_s[0])

    def max_speed_km_s(self) -> float:
        """Largest node speed on the grid (both velocity sides)."""
        return float(max(np.sqrt((self.vel_right**2).sum(-1)).max(),
                         np.sqrt((self.vel_left**2).sum(-1)).max()))


#: Largest memory a contact search may ask for: its trajectories, the window search's copy of them and, for
#: ground stations, their rotation into TEME (:func:`contact_search_bytes`), then the windows it finds
#: (:func:`check_window_budget`). The orbit partition's ground tracks (``fol.simulation.check``) are held to it too.
MAX_TRAJECTORY_BYTES = 8 * 2**30
#: Peak resident memory of a contact search (``fol contacts``) per node and time sample: the trajectory
#: table (positions and the velocity on both sides of every sample, float64: 72 bytes; satellites share one
#: velocity array, 48), the window search's packed copy of every node state (:class:`contact_sim.windows._Scanner`: 12
#: float64 columns for drones, 8 for satellites) and the temporaries that fill it. Fitted (least squares) on
#: the resident set of ``fol contacts --no-plot`` (``/usr/bin/time -v``): 12 random-waypoint drones over
#: 100, 200 and 300 h (1.1 to 3.3 M node samples) took 239 bytes per node and sample, 48 satellites over
#: 24 h at 5, 2.5 and 1.25 s (0.8 to 3.3 M) 179, above the 130 MB of the program itself. Rounded up.
CONTACT_BYTES_PER_SAMPLE = 256
#: Ground stations (satellite scenarios) add, per time sample whatever their number, Skyfield's nutation
#: series and the Earth-rotation matrices that turn them into TEME: 22.2 kB measured alone (1 and 5
#: stations, 34,561 and 69,121 times), rounded up. It peaks before the search, so the sum is an upper
#: bound: the 48 satellites and one station above took 26.9 kB per time sample (549 bytes per node and
#: sample), where the two constants give 37.1 kB. The orbit partition's ground tracks, turned Earth-fixed
#: the same way, take it too (22.2 kB per time sample for 1 and 8 satellites at 10^5 times).
STATION_ROTATION_BYTES_PER_TIME = 24 * 2**10


#: Peak resident memory of ``fol contacts`` per window found, on top of the grid's
#: (:data:`CONTACT_BYTES_PER_SAMPLE`): the window table (32 bytes: int32 pair, float64 start and end, float32
#: ranges; 40 with a rate model's volumes) and the contact plan's capacity and mean rate (16), held from the
#: search on. Its outputs (contacts.csv / .json, ``--ion``, ``--hdtn``) are written a block of rows at a time
#: (:mod:`contact_sim.tablewriter`, a fixed 0.1 to 0.15 GB) and the summary takes 8 bytes a window, so the
#: peak is the search's, a worker's part buffers (up to 4 M windows, :mod:`contact_sim.windows`) while the
#: parts are read back into the table, or about as high while ``--hdtn``'s blocks are written. Measured (``/usr/bin/time -v``, one worker, maximum resident set less the
#: program's 130.5 MiB and the grid as counted), ``fol contacts --no-plot`` on a 1,584-satellite shell over
#: 24 h at 120 s, the grid held fixed and ``link.max_range_km`` 2,000, 3,500 and 5,000 km: 4.2, 6.9 and 9.5 M
#: windows took 99.9, 63.3 and 52.3 bytes each (57.5 at 5,000 km with ``--ion --hdtn``): the largest,
#: where one part's buffers are near full, rounded up, so it covers the two exports too. Fewer windows than
#: one part a worker peak higher per window (the same shell over 6 h, 1.1 M windows: 215 bytes).
CONTACT_BYTES_PER_WINDOW = 104


def grid_samples(duration_s: float, step_s: float) -> int:
    """Number of times :func:`time_grid` returns, computed without building it (held at
    10^18 for a step so small the ratio is infinite, 1e-320 s say: far past any size limit)."""
    return int(np.floor(min(duration_s / step_s, 1e18) + 1e-9)) + 2


def contact_search_bytes(n_times: float, n_nodes: int, stations: bool = False) -> float:
    """Peak memory (bytes) of a contact search over ``n_times`` time samples of ``n_nodes`` nodes, ground
    stations among them when ``stations``: :data:`CONTACT_BYTES_PER_SAMPLE` per node and sample, and
    :data:`STATION_ROTATION_BYTES_PER_TIME` per sample with stations (infinite past the float range)."""
    per_time = max(int(n_nodes), 1) * CONTACT_BYTES_PER_SAMPLE + (STATION_ROTATION_BYTES_PER_TIME if stations else 0)
    return float(n_times) * per_time


def check_trajectory_size(n_times: float, n_nodes: int, waypoint_times: float = 0.0, stations: bool = False) -> None:
    """Refuse, before anything is allocated, a grid whose contact search (:func:`contact_search_bytes`:
    the trajectories, the window search's copy of them, the stations' rotations) would exceed
    :data:`MAX_TRAJECTORY_BYTES`. ``n_times`` counts every time sample, ``waypoint_times`` of them the
    drones' turns (either may be an estimate); ``stations``: ground stations are among the nodes."""
    need = contact_search_bytes(n_times, n_nodes, stations)
    if need > MAX_TRAJECTORY_BYTES:
        turns = waypoint_times > n_times / 2
        field, fix = (("time.duration_s", "shorten time.duration_s (every waypoint time is a sample)") if turns
                      else ("time.step_s", "raise time.step_s or shorten time.duration_s"))
        gib = contact_search_bytes(float(n_times) / 2**30, n_nodes, stations)  # finite where need is not
        raise ContactError(  # a horizon of 1e308 s makes 1e305 waypoint times: counted in powers of ten
            f"{field}: {format_count(float(n_times))} time samples x {max(int(n_nodes), 1):,} node(s) would need "
            f"{format_count(gib, 1)} GiB for the trajectories and their window search "
            f"(limit {MAX_TRAJECTORY_BYTES / 2**30:.0f} GiB); {fix}")


def _size(n_bytes: float) -> str:
    """A size of the contact search's budget as its refusals give it: in binary units, a size under a GiB in MiB."""
    return format_bytes(float(n_bytes), binary=True)


def check_window_budget(n_windows: float, searched_s: float, horizon_s: float, grid_bytes: float,
                        range_field: str = "link.max_range_km", held_bytes: float = 0.0, forked: bool = False) -> None:
    """Refuse a contact search whose windows (:data:`CONTACT_BYTES_PER_WINDOW` each) and grid (``grid_bytes``,
    :func:`contact_search_bytes`) would together exceed :data:`MAX_TRAJECTORY_BYTES`: ``n_windows`` found in
    ``searched_s`` of the ``horizon_s`` seconds searched so far (the window search calls it as it writes its
    parts, before it builds the table). ``held_bytes``: what the search's workers hold for the windows they
    have not written yet (their part buffers, :meth:`contact_sim.windows._Accumulator.held_bytes`) and for the
    candidate pairs of the grid step they scan (:data:`contact_sim.windows._PAIR_BYTES` each), held to
    the same limit with the grid: the workers scan before the table is built, so the two peaks do not add up.
    ``range_field``: the scenario field of the link's range, named in the refusal (``drones.radio_range_km``
    for drones). ``forked``: the workers are processes of their own (more than one), so the refusal of what
    they hold advises fewer of them first; a search in one process is not told to."""
    need = grid_bytes + float(n_windows) * CONTACT_BYTES_PER_WINDOW
    fix = f"shorten time.duration_s, lower {range_field} or use fewer nodes"
    if need > MAX_TRAJECTORY_BYTES:
        raise ContactError(
            f"contact windows: {n_windows:,.0f} found in {searched_s:,.0f} s of the {horizon_s:,.0f} s horizon "
            f"would need {_size(need)} with the grid's {_size(grid_bytes)} "
            f"({CONTACT_BYTES_PER_WINDOW} bytes per window; limit {_size(MAX_TRAJECTORY_BYTES)})"
            f"{', where the search stopped' if searched_s < horizon_s * (1 - 1e-9) else ''}; {fix}")
    scanning = grid_bytes + float(held_bytes)
    if scanning > MAX_TRAJECTORY_BYTES:
        raise ContactError(
            f"contact windows: the search's workers would hold {_size(held_bytes)} for the windows they "
            f"have not yet written to parts and the candidate pairs they scan, {_size(scanning)} with the grid's "
            f"{_size(grid_bytes)} (limit {_size(MAX_TRAJECTORY_BYTES)}), where the search "
            f"stopped; {'use fewer --workers, ' if forked else ''}{fix}")


def time_grid(duration_s: float, step_s: float) -> np.ndarray:
    """Grid ``0, step, 2 step, ..., duration`` (the last cell may be shorter)."""
    if not np.isfinite(duration_s) or duration_s <= 0:
        raise ContactError(f"time.duration_s: expected a positive number of seconds, got {duration_s}")
    if not np.isfinite(step_s) or step_s <= 0:
        raise ContactError(f"time.step_s: expected a positive number of seconds, got {step_s}")
    check_trajectory_size(grid_samples(duration_s, step_s), 1)
    n = int(np.floor(duration_s / step_s + 1e-9))
    grid = np.arange(n + 1) * float(step_s)
    if duration_s - grid[-1] > 1e-6:
        grid = np.append(grid, float(duration_s))
    return grid


def station_positions_teme(stations: list[GroundStation], start: _dt.datetime, times_s: np.ndarray,
                           polar_motion: PolarMotion | None = None) -> tuple[np.ndarray, np.ndarray]:
    """TEME positions (km) and velocities (km/s) of ground stations, ``(n_times, n_st, 3)``; turned from ITRS with
    ``polar_motion`` when given (:func:`orbits.itrs_to_teme`)."""
    itrs = ground_points_itrs([s.lat_deg for s in stations], [s.lon_deg for s in stations],
                              [s.elevation_m for s in stations])
    rep = np.repeat(itrs[:, None, :], times_s.size, axis=1)
    pos = itrs_to_teme(rep, start, times_s, polar_motion).transpose(1, 0, 2)
    omega = np.array([0.0, 0.0, EARTH_ROTATION_RAD_S])
    vel = np.cross(omega, pos)
    return np.ascontiguousarray(pos), np.ascontiguousarray(vel)


def _warn_old_elements(constellation: Constellation, start: _dt.datetime, duration_s: float) -> None:
    """Warn when satellites' element epochs lie more than :data:`MAX_ELEMENT_AGE_DAYS` from the
    horizon (e.g. a TLE file years older than ``time.start``): SGP4 still propagates, silently wrong."""
    jd0 = sum(julian_date(start))
    epochs = np.array([s.jdsatepoch + s.jdsatepochF for s in constellation.satrecs])
    # days from each epoch to the nearest instant of the horizon [start, start + duration]
    age = np.maximum(jd0 - epochs, epochs - (jd0 + duration_s / 86400.0)).clip(min=0.0)
    old = np.flatnonzero(age > MAX_ELEMENT_AGE_DAYS)
    if old.size:
        worst = int(old[np.argmax(age[old])])
        log.warning("%d of %d satellites have elements more than %g days from the horizon (%s: %.0f days); "
                    "SGP4 drifts by kilometres a day away from the epoch: use elements near time.start",
                    old.size, len(constellation.satrecs), MAX_ELEMENT_AGE_DAYS, constellation.names[worst],
                    age[worst])


def satellite_trajectories(constellation: Constellation | Ephemeris, start: _dt.datetime | str,
                           duration_s: float, step_s: float = 60.0,
                           stations: list[GroundStation] | None = None,
                           polar_motion: PolarMotion | None = None) -> Trajectories:
    """SGP4 trajectories of a constellation (plus optional ground stations) on a grid; or those of an
    OEM :class:`~orbits.oem.Ephemeris`, interpolated (:func:`orbits.propagate_offsets` takes either). The
    stations are turned from ITRS into TEME with ``polar_motion`` when given (``[time] iers_finals``).

    ``step_s`` is the screening grid: window edges are refined inside each
    cell on the cubic (Hermite) model of each visibility constraint, from its
    exact values and rates at the cell ends; at 60 s LEO edges are within
    milliseconds between satellites, 20 ms at a 10 deg station mask and 0.16 s at
    40 deg (``benchmarks/contact_edges.py``), and the error
    grows with the fourth power of the step (edges off by up to tens of
    seconds at 600 s; short windows missed at coarser steps or higher masks).
    """
    start = parse_utc(start, field="time.start")
    grid = time_grid(duration_s, step_s)
    if isinstance(constellation, Constellation):  # an OEM's states have no epoch to age from, only a span
        _warn_old_elements(constellation, start, duration_s)
    try:
        r, v = propagate_offsets(constellation, start, grid)
    except OrbitError as exc:
        raise ContactError(f"propagation failed: {exc}") from None
    pos = np.ascontiguousarray(r.transpose(1, 0, 2))
    vel = np.ascontiguousarray(v.transpose(1, 0, 2))
    names = list(constellation.names)
    kinds = np.zeros(len(names), dtype=np.int8)
    if stations:
        sp, sv = station_positions_teme(stations, start, grid, polar_motion)
        pos = np.concatenate([pos, sp], axis=1)
        vel = np.concatenate([vel, sv], axis=1)
        names += [s.name for s in stations]
        kinds = np.concatenate([kinds, np.full(len(stations), STATION, dtype=np.int8)])
    return Trajectories(names, kinds, grid, pos, vel, vel, start, "TEME", True)
