"""Swath coverage: is a ground point inside a satellite's imaging footprint?

The footprint is a spherical cap centred on the sub-satellite point with
Earth central half-angle ``lambda``: either ``swath_width_km / (2 R)`` (R =
6371 km mean radius) or, from a sensor off-nadir half-angle ``eta`` at
altitude ``h``, ``lambda = asin((R + h) / R * sin(eta)) - eta``. A point is
covered when the great-circle angle to the sub-satellite point is
<= ``lambda``; the test is one matrix product per time step (points x
satellites), so ~10^4 points x 50 satellites x 300 times takes well under a
second.

Example:
    >>> import numpy as np
    >>> lam = swath_half_angle_rad(swath_width_km=200.0)
    >>> in_swath([0.0, 0.0], [0.0, 5.0], np.array([[0.0]]), np.array([[0.5]]), lam)[0, :, 0].tolist()
    [True, False]
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from .errors import OrbitError

#: Mean Earth radius used for footprint geometry, km.
MEAN_EARTH_RADIUS_KM = 6371.0


def swath_half_angle_rad(swath_width_km: float | None = None, off_nadir_deg: float | None = None,
                         altitude_km: float | None = None) -> float:
    """Earth central half-angle (rad) of a footprint from a width or a sensor half-angle."""
    if (swath_width_km is None) == (off_nadir_deg is None):
        raise OrbitError("swath: give exactly one of swath_width_km or off_nadir_deg")
    if swath_width_km is not None:
        if not 0 < swath_width_km < np.pi * MEAN_EARTH_RADIUS_KM:
            raise OrbitError(f"swath_width_km: expected 0 < width < {np.pi * MEAN_EARTH_RADIUS_KM!r} km (pi x "
                             f"{MEAN_EARTH_RADIUS_KM:g} km, half the Earth's circumference), got {swath_width_km}")
        return float(swath_width_km) / (2.0 * MEAN_EARTH_RADIUS_KM)
    if altitude_km is None or altitude_km <= 0:
        raise OrbitError("swath: off_nadir_deg needs a positive altitude_km")
    if not 0 < off_nadir_deg < 90:
        raise OrbitError(f"off_nadir_deg: expected 0 < angle < 90 deg, got {off_nadir_deg}")
    eta = np.radians(off_nadir_deg)
    s = (MEAN_EARTH_RADIUS_KM + altitude_km) / MEAN_EARTH_RADIUS_KM * np.sin(eta)
    if s >= 1.0:  # beyond the horizon: footprint limited by the horizon itself
        return float(np.arccos(MEAN_EARTH_RADIUS_KM / (MEAN_EARTH_RADIUS_KM + altitude_km)))
    return float(np.arcsin(s) - eta)


def _unit(lat_deg, lon_deg) -> np.ndarray:
    lat = np.radians(np.asarray(lat_deg, dtype=float))
    lon = np.radians(np.asarray(lon_deg, dtype=float))
    return np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], axis=-1)


def in_swath(point_lat_deg, point_lon_deg, sat_lat_deg: np.ndarray, sat_lon_deg: np.ndarray,
             half_angle_rad: float) -> np.ndarray:
    """Coverage mask shaped ``(n_times, n_points, n_sats)``.

    ``sat_lat_deg``/``sat_lon_deg`` are sub-satellite points ``(n_sats, n_times)``
    (e.g. :class:`orbits.groundtrack.GroundTrack` fields).
    """
    pts = _unit(np.atleast_1d(point_lat_deg), np.atleast_1d(point_lon_deg))  # (P, 3)
    sub = _unit(np.atleast_2d(sat_lat_deg), np.atleast_2d(sat_lon_deg))  # (S, T, 3)
    cos_lim = np.cos(half_angle_rad)
    mask = np.empty((sub.shape[1], pts.shape[0], sub.shape[0]), dtype=bool)
    for t in range(sub.shape[1]):  # one (P, S) product at a time: no float P x S x T array
        np.greater_equal(pts @ sub[:, t].T, cos_lim, out=mask[t])
    return mask


def coverage_by_satellite(point_lat_deg, point_lon_deg, sat_lat_deg: np.ndarray, sat_lon_deg: np.ndarray,
                          half_angle_rad: float) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """For each satellite in index order, the points its swath ever covers:
    yields ``(sat, points, first_step)``, ``points`` sorted (int64) and
    ``first_step`` the index of the first time step that covers each.

    One satellite at a time, so a caller can keep memory linear in the points
    (or in the covering pairs), never points x satellites. A footprint covers
    a tiny share of the points at any instant, so instead of testing every
    point against every sub-satellite point, the points go into a k-d tree
    (scipy's ``cKDTree``) on the unit sphere and each sub-satellite point asks
    for those within the footprint's chord radius; the hits are then checked
    with the same dot-product test as :func:`in_swath`.
    """
    from scipy.spatial import cKDTree

    pts = _unit(np.atleast_1d(point_lat_deg), np.atleast_1d(point_lon_deg))
    sub = _unit(np.atleast_2d(sat_lat_deg), np.atleast_2d(sat_lon_deg))  # (S, T, 3)
    n_sats, n_times = sub.shape[:2]
    if pts.shape[0] == 0 or n_times == 0:
        return
    cos_lim = np.cos(half_angle_rad)
    tree = cKDTree(pts)
    chord = 2.0 * np.sin(min(half_angle_rad, np.pi) / 2.0) * (1.0 + 1e-9) + 1e-12
    for s in range(n_sats):
        hits = tree.query_ball_point(sub[s], chord)  # one list of point indices per time
        lengths = np.fromiter((len(h) for h in hits), dtype=np.int64, count=n_times)
        if not lengths.any():
            continue
        idx = np.fromiter((i for h in hits for i in h), dtype=np.int64, count=int(lengths.sum()))
        times = np.repeat(np.arange(n_times), lengths)
        keep = np.einsum("ij,ij->i", pts[idx], sub[s, times]) >= cos_lim
        # times are non-decreasing, so a point's first occurrence is its first covering step
        covered, first = np.unique(idx[keep], return_index=True)
        if len(covered):
            yield s, covered, times[keep][first]


def first_coverage(point_lat_deg, point_lon_deg, sat_lat_deg: np.ndarray, sat_lon_deg: np.ndarray,
                   half_angle_rad: float) -> np.ndarray:
    """Index of the first time each point is in each satellite's swath, ``(n_points, n_sats)``; -1 if never.

    The dense form of :func:`coverage_by_satellite` (points x satellites int64;
    iterate :func:`coverage_by_satellite` instead when both are large).
    """
    n_points = np.atleast_1d(point_lat_deg).shape[0]
    n_sats = np.atleast_2d(sat_lat_deg).shape[0]
    first = np.full((n_points, n_sats), -1, dtype=np.int64)
    for s, points, when in coverage_by_satellite(point_lat_deg, point_lon_deg, sat_lat_deg, sat_lon_deg,
                                                 half_angle_rad):
        first[points, s] = when
    return first
