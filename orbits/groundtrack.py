"""Ground tracks and Earth-fixed positions via Skyfield's frame rotations.

TEME (SGP4 output) -> ITRS uses Skyfield's ``TEME`` and ``itrs`` frame objects
(``rotation_at``), computed once per time and applied to every satellite.
Geodetic latitude/longitude/height follow Skyfield's WGS-84 ``Geoid``
iteration (same constants, same three fixed-point steps), vectorized over
satellites x times. With a :class:`orbits.iers.PolarMotion` (an IERS finals file) the rotation is on its time
scale: Skyfield's ITRS with the file's polar motion and UT1, as for ground stations and ITRF states. An OEM's
ITRF states are Earth-fixed already: their sub-satellite points are the geodetic of the states as read, with no
rotation there and back.

Example:
    >>> from orbits.constellation import walker_delta
    >>> c = walker_delta(4, 2, 0, 550.0, 53.0, "2025-01-01T00:00:00Z")
    >>> gt = ground_track(c, c.epoch, [0.0, 600.0])
    >>> gt.lat_deg.shape, bool(abs(gt.lat_deg).max() <= 53.5)
    ((4, 2), True)
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass

import numpy as np

from .constellation import Constellation
from .iers import PolarMotion
from .propagation import StateSource, propagate_offsets
from .timeutil import parse_utc, skyfield_times


@dataclass
class GroundTrack:
    """Sub-satellite points: arrays shaped ``(n_sat, n_times)``; degrees and km."""

    names: list[str]
    offsets_s: np.ndarray
    lat_deg: np.ndarray
    lon_deg: np.ndarray
    height_km: np.ndarray


def gcrs_to_teme_matrices(t) -> np.ndarray:
    """Rotation matrices GCRS (ICRF axes) -> TEME for a Skyfield ``Time`` (one or an array), shape ``(n, 3, 3)``."""
    from skyfield.sgp4lib import TEME

    r_teme = np.asarray(TEME.rotation_at(t))  # (3, 3[, n])
    if r_teme.ndim == 2:
        r_teme = r_teme[..., None]
    return r_teme.transpose(2, 0, 1)


def teme_to_itrs_matrices(t) -> np.ndarray:
    """Rotation matrices TEME -> ITRS for a Skyfield ``Time`` array, shape ``(n, 3, 3)``."""
    from skyfield.framelib import itrs
    from skyfield.sgp4lib import TEME

    r_teme = np.asarray(TEME.rotation_at(t))  # ICRF -> TEME, (3, 3[, n])
    r_itrs = np.asarray(itrs.rotation_at(t))  # ICRF -> ITRS
    if r_teme.ndim == 2:
        r_teme, r_itrs = r_teme[..., None], r_itrs[..., None]
    return np.einsum("ijn,kjn->nik", r_itrs, r_teme)


def teme_to_itrs(r_teme_km: np.ndarray, start: _dt.datetime | str, offsets_s,
                 polar_motion: PolarMotion | None = None) -> np.ndarray:
    """Rotate TEME positions ``(n_sat, n_times, 3)`` (km) into ITRS (Earth-fixed) km; with ``polar_motion``
    (an :class:`orbits.iers.PolarMotion`, which must cover the times) Skyfield's ITRS with it, else without."""
    ts = polar_motion.timescale_for(start, offsets_s, "ITRS positions") if polar_motion is not None else None
    mats = teme_to_itrs_matrices(skyfield_times(parse_utc(start), offsets_s, ts))
    return np.einsum("tij,stj->sti", mats, np.asarray(r_teme_km, dtype=float))


def itrs_to_teme(r_itrs_km: np.ndarray, start: _dt.datetime | str, offsets_s,
                 polar_motion: PolarMotion | None = None) -> np.ndarray:
    """Rotate Earth-fixed positions ``(n_pts, n_times, 3)`` (km) into TEME km; with ``polar_motion`` (an
    :class:`orbits.iers.PolarMotion`, which must cover the times) Skyfield's ITRS with it, else without."""
    ts = polar_motion.timescale_for(start, offsets_s, "ITRS positions") if polar_motion is not None else None
    mats = teme_to_itrs_matrices(skyfield_times(parse_utc(start), offsets_s, ts))
    return np.einsum("tji,stj->sti", mats, np.asarray(r_itrs_km, dtype=float))


def geodetic_from_itrs(xyz_km: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """WGS-84 geodetic latitude (deg), longitude (deg, -180..180) and height (km).

    Same iteration as Skyfield's ``wgs84.latlon_of`` / ``height_of``.
    """
    from skyfield.api import wgs84

    xyz = np.asarray(xyz_km, dtype=float)
    x, y, z = xyz[..., 0], xyz[..., 1], xyz[..., 2]
    a = wgs84.radius.km
    e2 = wgs84._e2
    r = np.hypot(x, y)
    lat = np.arctan2(z, r)
    for _ in range(3):
        sin_lat = np.sin(lat)
        e2_sin = e2 * sin_lat
        a_c = a / np.sqrt(1.0 - e2_sin * sin_lat)
        hyp = z + a_c * e2_sin
        lat = np.arctan2(hyp, r)
    lon = (np.arctan2(y, x) - np.pi) % (2 * np.pi) - np.pi
    height = np.sqrt(hyp * hyp + r * r) - a_c
    return np.degrees(lat), np.degrees(lon), height


def turns_earth_fixed(constellation: Constellation | StateSource) -> bool:
    """Whether :func:`ground_track` turns the satellites' positions Earth-fixed, Skyfield's rotation at every time
    sample: for element sets (SGP4's TEME) and an OEM holding a state in any frame but ITRF, yes; for an OEM whose
    states are all ITRF (:attr:`orbits.oem.Ephemeris.all_itrf`), no: they are Earth-fixed as read."""
    return isinstance(constellation, Constellation) or not getattr(constellation, "all_itrf", False)


def ground_track(constellation: Constellation | StateSource, start: _dt.datetime | str, offsets_s,
                 positions_teme_km: np.ndarray | None = None,
                 polar_motion: PolarMotion | None = None) -> GroundTrack:
    """Ground tracks of every satellite (of element sets or of an OEM) at ``start + offsets_s`` (s): TEME positions
    turned onto Skyfield's ITRS, with ``polar_motion`` when given (:func:`teme_to_itrs`); an OEM's ITRF states are
    Earth-fixed already and taken as interpolated (:meth:`orbits.oem.Ephemeris.positions_teme_or_itrf_km`), with no
    rotation, so ``polar_motion`` and the OEM's own finals file leave them as they are; the rotation is built
    unless every state is ITRF (:func:`turns_earth_fixed`).

    Pass ``positions_teme_km`` (``(n_sat, n_times, 3)``, all TEME) to reuse a propagation.
    """
    offsets = np.asarray(offsets_s, dtype=float)
    earth_fixed = None  # (n_sat, n_times): True where a position is Earth-fixed as read
    if positions_teme_km is not None:
        positions_km = positions_teme_km
    elif not isinstance(constellation, Constellation) and hasattr(constellation, "positions_teme_or_itrf_km"):
        positions_km, earth_fixed = constellation.positions_teme_or_itrf_km(start, offsets)
    else:
        positions_km = propagate_offsets(constellation, start, offsets)[0]  # the velocities go at once
    if earth_fixed is None:
        itrs_km = teme_to_itrs(positions_km, start, offsets, polar_motion)
    elif turns_earth_fixed(constellation):
        turned_km = teme_to_itrs(positions_km, start, offsets, polar_motion)
        itrs_km = np.where(earth_fixed[..., None], positions_km, turned_km)
    else:
        itrs_km = positions_km
    lat, lon, h = geodetic_from_itrs(itrs_km)
    return GroundTrack(list(constellation.names), offsets, lat, lon, h)


def ground_points_itrs(lat_deg, lon_deg, elevation_m=0.0) -> np.ndarray:
    """Earth-fixed (ITRS) km of WGS-84 ground points, shape ``(n, 3)`` (Skyfield ``wgs84.latlon``)."""
    from skyfield.api import wgs84

    lat = np.atleast_1d(np.asarray(lat_deg, dtype=float))
    lon = np.atleast_1d(np.asarray(lon_deg, dtype=float))
    elev = np.broadcast_to(np.asarray(elevation_m, dtype=float), lat.shape)
    return np.asarray(wgs84.latlon(lat, lon, elev).itrs_xyz.km).T.reshape(-1, 3)
