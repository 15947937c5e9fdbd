"""Sunlight and eclipse intervals of satellites (Skyfield ``is_sunlit``).

The Sun's position comes from the JPL DE421 ephemeris shipped inside the
``skyfield-data`` package (extra ``energy``); nothing is downloaded at run
time. DE421 covers 1899-07-29 to 2053-10-09; :func:`check_sunlight_span` refuses horizons
outside it (a day inside each end).

Algorithm: evaluate Skyfield's ``ICRF.is_sunlit`` (whether the Earth hides
the Sun as seen from the satellite) on a grid of ``step_s``, then refine
every change of state by bisection to ``tol_s``, all of a satellite's edges of
one iteration in one vectorized Skyfield call (one call per satellite). An eclipse shorter than
``step_s`` that starts and ends between two grid points is not seen; LEO
eclipses last tens of minutes except in the few orbits where the beta angle
crosses the eclipse limit.

Example:
    >>> from orbits import walker_delta
    >>> c = walker_delta(2, 1, 0, 550.0, 53.0, "2025-03-01T00:00:00Z")
    >>> ecl = eclipse_intervals(c, c.epoch, 6000.0)   # 6,000 s: one ~95-min orbit and a bit more
    >>> [round(sum(b - a for a, b in e) / 6000.0, 2) for e in ecl]   # the 2nd: eclipsed at both ends
    [0.35, 0.4]
"""

from __future__ import annotations

import datetime as _dt
from functools import lru_cache

import numpy as np

from .constellation import Constellation
from .errors import OrbitError
from .groundtrack import gcrs_to_teme_matrices
from .oem import Ephemeris
from .timeutil import parse_utc, skyfield_times, timescale, utc_text

#: Ephemeris file inside the skyfield-data package.
EPHEMERIS_FILE = "de421.bsp"
#: Most samples of the eclipse search grid per satellite (2,000,000: 23 days at 1 s).
MAX_SUNLIGHT_SAMPLES = 2_000_000
#: UTC span DE421 covers (its segments run from 1899-07-29 to 2053-10-09 TDB), a day inside each end.
EPHEMERIS_SPAN = (_dt.datetime(1899, 7, 30, tzinfo=_dt.timezone.utc),
                  _dt.datetime(2053, 10, 8, tzinfo=_dt.timezone.utc))


@lru_cache(maxsize=1)
def ephemeris():
    """The DE421 ephemeris from the ``skyfield-data`` package (cached, offline)."""
    try:
        import importlib.resources as resources

        path = resources.files("skyfield_data") / "data" / EPHEMERIS_FILE
    except ModuleNotFoundError:
        raise OrbitError("sunlight needs the ephemeris package skyfield-data: "
                         "pip install 'fol-swarm[energy]'") from None
    if not path.is_file():
        raise OrbitError(f"skyfield-data has no {EPHEMERIS_FILE}; reinstall it (pip install 'fol-swarm[energy]')")
    from skyfield.jpllib import SpiceKernel

    return SpiceKernel(str(path))


def _sunlit(sat, start: _dt.datetime, offsets_s: np.ndarray) -> np.ndarray:
    t = skyfield_times(start, offsets_s)
    position = sat.at_offsets(t, offsets_s) if isinstance(sat, _EphemerisSatellite) else sat.at(t)
    return np.asarray(position.is_sunlit(ephemeris()), dtype=bool)


class _EphemerisSatellite:
    """One object of an OEM :class:`~orbits.oem.Ephemeris` where :func:`_sunlit` takes a Skyfield
    ``EarthSatellite``: ``at_offsets(t, offsets_s)`` gives its interpolated position at ``t`` (``start +
    offsets_s``, UTC seconds), rotated from TEME into GCRS as ``EarthSatellite.at`` rotates SGP4's."""

    def __init__(self, eph: Ephemeris, name: str, start: _dt.datetime) -> None:
        self.eph = Ephemeris(eph.version, eph.creation_date, eph.originator,
                             [s for s in eph.segments if s.object_name == name], eph.source,
                             polar_motion=eph.polar_motion)
        self.start = start

    def at_offsets(self, t, offsets_s: np.ndarray):
        from skyfield.constants import AU_KM
        from skyfield.positionlib import Geocentric

        teme = self.eph.positions_teme_km(self.start, np.atleast_1d(offsets_s))[0]  # (n, 3)
        gcrs_km = np.einsum("nji,nj->in", gcrs_to_teme_matrices(t), teme)  # the transpose: TEME -> GCRS
        if t.shape == ():
            gcrs_km = gcrs_km[:, 0]
        return Geocentric(gcrs_km / AU_KM, t=t, center=399)


def _satellites(source: Constellation | Ephemeris, start: _dt.datetime) -> list:
    """What :func:`_sunlit` evaluates, one per satellite: Skyfield's SGP4 satellite of each element set,
    or each object of an OEM."""
    from skyfield.api import EarthSatellite

    if isinstance(source, Ephemeris):
        return [_EphemerisSatellite(source, name, start) for name in source.names]
    ts = timescale()
    return [EarthSatellite.from_satrec(s, ts) for s in source.satrecs]


def sunlit_samples(constellation: Constellation | Ephemeris, start: _dt.datetime | str, offsets_s) -> np.ndarray:
    """``is_sunlit`` of every satellite at ``start + offsets_s``: bool ``(n_sat, n_times)``."""
    start = parse_utc(start, field="time.start")
    offsets = np.atleast_1d(np.asarray(offsets_s, dtype=float))
    return np.stack([_sunlit(sat, start, offsets) for sat in _satellites(constellation, start)])


def check_sunlight_steps(duration_s: float, step_s: float, field: str = "sunlight: step_s") -> None:
    """Refuse an eclipse-search grid of more than :data:`MAX_SUNLIGHT_SAMPLES` steps per
    satellite before it is built; ``field`` names the setting in the one-line message."""
    if duration_s / step_s > MAX_SUNLIGHT_SAMPLES:
        raise OrbitError(f"{field}: {step_s} s over {duration_s} s makes {duration_s / step_s:,.0f} samples "
                         f"per satellite, expected at most {MAX_SUNLIGHT_SAMPLES:,}; raise the step")


def check_sunlight_span(start: _dt.datetime | str, duration_s: float, field: str = "time.start") -> None:
    """Refuse a horizon the ephemeris does not cover (Skyfield would fail deep inside the search)."""
    start = parse_utc(start, field=field)
    first, last = EPHEMERIS_SPAN
    if start < first or start + _dt.timedelta(seconds=float(duration_s)) > last:
        raise OrbitError(f"{field}: the horizon from {utc_text(start, 'seconds')} over {duration_s:g} s leaves "
                         f"{first.date().isoformat()}..{last.date().isoformat()}, the span of the {EPHEMERIS_FILE} "
                         "ephemeris that gives the Sun's position")


def eclipse_intervals(constellation: Constellation | Ephemeris, start: _dt.datetime | str, duration_s: float,
                      step_s: float = 60.0, tol_s: float = 0.1) -> list[list[tuple[float, float]]]:
    """Eclipse (not sunlit) intervals of each satellite, seconds from ``start``, edges to ``tol_s``.

    An interval running into the start or the end of the horizon is clipped there. ``constellation``
    may be an OEM :class:`~orbits.oem.Ephemeris` (its interpolated positions).
    """
    if not np.isfinite(duration_s) or duration_s <= 0:
        raise OrbitError(f"time.duration_s: expected a positive number of seconds, got {duration_s}")
    if not step_s > 0 or not tol_s > 0:
        raise OrbitError(f"sunlight: step_s and tol_s must be positive, got {step_s}, {tol_s}")
    check_sunlight_steps(duration_s, step_s)
    check_sunlight_span(start, duration_s)
    start = parse_utc(start, field="time.start")
    n = int(np.ceil(duration_s / step_s))
    grid = np.minimum(np.arange(n + 1) * float(step_s), float(duration_s))
    out: list[list[tuple[float, float]]] = []
    for sat in _satellites(constellation, start):
        lit = _sunlit(sat, start, grid)
        change = np.flatnonzero(lit[1:] != lit[:-1])
        lo, hi = grid[change].copy(), grid[change + 1].copy()
        lit_lo = lit[change]
        while lo.size and np.max(hi - lo) > tol_s:
            mid = 0.5 * (lo + hi)
            same = _sunlit(sat, start, mid) == lit_lo
            lo = np.where(same, mid, lo)
            hi = np.where(same, hi, mid)
        edges = 0.5 * (lo + hi)
        # Intervals in shadow: from an edge into shadow (lit before) to the next edge out of it.
        starts = list(edges[lit_lo]) if lit.size else []
        ends = list(edges[~lit_lo]) if lit.size else []
        if not lit[0]:
            starts.insert(0, 0.0)
        if not lit[-1]:
            ends.append(float(duration_s))
        out.append([(float(a), float(b)) for a, b in zip(starts, ends)])
    return out
