"""Vectorized SGP4 propagation of many satellites over many times.

Positions and velocities are in the TEME frame (SGP4's native frame), in km
and km/s. ``SatrecArray.sgp4`` runs the C++ SGP4 over the full
satellites x times grid in one call.

Example:
    >>> from orbits.constellation import walker_delta
    >>> c = walker_delta(6, 2, 1, 550.0, 53.0, "2025-01-01T00:00:00Z")
    >>> r, v = propagate_offsets(c, c.epoch, [0.0, 60.0, 120.0])
    >>> r.shape, v.shape
    ((6, 3, 3), (6, 3, 3))
"""

from __future__ import annotations

import datetime as _dt
from typing import Protocol, Sequence

import numpy as np
from sgp4.api import Satrec, SatrecArray

from .constellation import Constellation
from .errors import OrbitError, sgp4_reason
from .timeutil import julian_dates, parse_utc, utc_text


class StateSource(Protocol):
    """Satellites given by their states rather than by mean elements: an OEM :class:`~orbits.oem.Ephemeris`
    (not imported here: the OEM reader uses the ground-track rotations, which propagate)."""

    names: list[str]

    def states_teme_km(self, start: _dt.datetime | str, offsets_s) -> tuple[np.ndarray, np.ndarray]: ...


def _satrecs(sats: Constellation | Sequence[Satrec]) -> tuple[list[Satrec], list[str]]:
    if isinstance(sats, Constellation):
        return list(sats.satrecs), list(sats.names)
    sats = list(sats)
    return sats, [f"satellite {i}" for i in range(len(sats))]


def propagate(sats: Constellation | Sequence[Satrec], jd: np.ndarray, fr: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """TEME positions (km) and velocities (km/s), each shaped ``(n_sat, n_times, 3)``.

    ``jd``/``fr`` are UTC Julian dates split in whole and fraction
    (see :func:`orbits.timeutil.julian_dates`). Any SGP4 error code (decay,
    eccentricity out of range, ...) raises :class:`OrbitError` naming the
    first failing satellite and time, and so does a position SGP4 returns as
    NaN without an error code (elements it accepted but cannot propagate, such
    as a mean motion of 1e-319 revolutions per day).
    """
    satrecs, names = _satrecs(sats)
    if not satrecs:
        raise OrbitError("propagate: no satellites given")
    jd = np.ascontiguousarray(jd, dtype=float).ravel()
    fr = np.ascontiguousarray(fr, dtype=float).ravel()
    if jd.shape != fr.shape:
        raise OrbitError(f"propagate: jd and fr shapes differ ({jd.shape} vs {fr.shape})")
    err, r, v = SatrecArray(satrecs).sgp4(jd, fr)
    if err.any():
        i, k = np.argwhere(err)[0]
        code = int(err[i, k])
        raise OrbitError(
            f"{names[i]}: SGP4 error {code} at JD {jd[k] + fr[k]:.6f} "
            f"({sgp4_reason(code)})"
        )
    _check_finite(r, v, names, jd, fr)
    return r, v


def _check_finite(r: np.ndarray, v: np.ndarray, names: Sequence[str], jd: np.ndarray, fr: np.ndarray) -> None:
    """Refuse positions or velocities SGP4 gave as NaN or infinite without an error code."""
    bad = ~(np.isfinite(r).all(axis=-1) & np.isfinite(v).all(axis=-1))
    if bad.any():
        i, k = np.argwhere(bad)[0]
        raise OrbitError(f"{names[i]}: SGP4 gave no finite position at JD {jd[k] + fr[k]:.6f} (elements it "
                         "cannot propagate; check the mean motion and eccentricity)")


def propagate_offsets(sats: Constellation | StateSource | Sequence[Satrec], start: _dt.datetime | str,
                      offsets_s: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Like :func:`propagate` for times ``start + offsets_s`` (seconds, UTC). An OEM
    :class:`~orbits.oem.Ephemeris` is interpolated instead (:meth:`~orbits.oem.Ephemeris.states_teme_km`),
    so whatever takes positions over time (trajectories, ground tracks, eclipses) takes either."""
    if not isinstance(sats, Constellation) and hasattr(sats, "states_teme_km"):
        return sats.states_teme_km(start, offsets_s)
    jd, fr = julian_dates(parse_utc(start, field="start"), offsets_s)
    return propagate(sats, jd, fr)


def propagate_pairs(sats: Constellation | Sequence[Satrec], index: np.ndarray,
                    jd: np.ndarray, fr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions/velocities of satellite ``index[m]`` at time ``(jd[m], fr[m])``, shape ``(m, 3)``.

    Useful for spot checks at scattered (satellite, time) pairs; one
    ``sgp4_array`` call per distinct satellite.
    """
    satrecs, names = _satrecs(sats)
    index = np.asarray(index, dtype=int).ravel()
    jd = np.asarray(jd, dtype=float).ravel()
    fr = np.asarray(fr, dtype=float).ravel()
    r = np.empty((index.size, 3))
    v = np.empty((index.size, 3))
    for s in np.unique(index):
        sel = np.flatnonzero(index == s)
        e, rs, vs = satrecs[s].sgp4_array(jd[sel], fr[sel])
        if e.any():
            code = int(e[e != 0][0])
            raise OrbitError(f"{names[s]}: SGP4 error {code} ({sgp4_reason(code)})")
        _check_finite(rs[None], vs[None], [names[s]], jd[sel], fr[sel])
        r[sel], v[sel] = rs, vs
    return r, v


#: Two satellites share an orbital plane when their orbit normals ``h = r x v`` lie within this angle (deg),
#: RAAN and inclination together. Chosen from the orbits, not from results: the osculating normals of one
#: plane's satellites (SGP4) stay within 0.04 deg of each other (a 1584/72/1 shell at 53 deg, 550 km,
#: hourly for a day; 0.005-0.01 deg at 86.4 and 97.6 deg), while a RAAN step of ``360 / P`` deg between
#: neighbouring planes tilts the normal by about ``sin(i) * 360 / P`` (4.0 deg for that shell's 72 planes):
#: more than 1 deg for up to 287 planes at 53 deg, 180 at 30 deg. Planes closer than that are one plane.
PLANE_TOLERANCE_DEG = 1.0


def orbital_planes(sats: Constellation | StateSource, start: _dt.datetime | str,
                   tolerance_deg: float = PLANE_TOLERANCE_DEG) -> list[int]:
    """Each satellite's orbital plane, numbered ``0, 1, ...`` in the order the planes' first satellites
    come, from the orbit normals ``h = r x v`` at ``start`` (SGP4's states, or an OEM's interpolated
    ones): a satellite joins the plane whose first satellite's normal is nearest to its own within
    ``tolerance_deg`` (RAAN and inclination together), else it opens the next plane. A Walker shell's
    satellites, in the order they are built, get its plane numbers.

    Each satellite looks only at the planes in the 27 grid cells (``tolerance_deg`` wide) around its
    normal, so a file of many planes takes linear time.

    >>> from orbits.constellation import walker_star
    >>> c = walker_star(12, 4, 1, 780.0, 86.4, "2025-01-01T00:00:00Z")
    >>> orbital_planes(c, c.epoch) == c.planes
    True
    """
    r, v = propagate_offsets(sats, start, np.zeros(1))
    h = np.cross(r[:, 0], v[:, 0])
    norm = np.linalg.norm(h, axis=1, keepdims=True)
    if not np.all(norm > 0.0):
        k = int(np.flatnonzero(~(norm[:, 0] > 0.0))[0])
        at = utc_text(parse_utc(start, field="start"), "seconds")
        raise OrbitError(f"{sats.names[k]}: no orbit normal at {at} (its position and velocity are parallel), "
                         "so no orbital plane")
    unit = h / norm
    cos_tol = np.cos(np.radians(tolerance_deg))
    cell = 2.0 * np.sin(np.radians(tolerance_deg) / 2.0)  # the chord of tolerance_deg: a match is <= 1 cell away
    keys = np.floor(unit / cell).astype(np.int64).tolist()
    grid: dict[tuple[int, int, int], list[int]] = {}
    firsts: list[np.ndarray] = []
    out: list[int] = []
    for k, (x, y, z) in enumerate(keys):
        best, best_cos = -1, -np.inf
        for dx in (-1, 0, 1):
            for dy in (-1, 0, 1):
                for dz in (-1, 0, 1):
                    for p in grid.get((x + dx, y + dy, z + dz), ()):
                        c = float(firsts[p] @ unit[k])
                        if c >= cos_tol and (c > best_cos or (c == best_cos and p < best)):
                            best, best_cos = p, c
        if best < 0:
            best = len(firsts)
            firsts.append(unit[k])
            grid.setdefault((x, y, z), []).append(best)
        out.append(best)
    return out
