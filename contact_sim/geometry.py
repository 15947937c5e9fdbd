"""Line-of-sight and range geometry between nodes (positions in km).

Two space nodes see each other when the segment between them clears a sphere
of radius ``rho = R_earth + grazing_altitude`` (R_earth = 6378.135 km, WGS-72
as in SGP4 and Hypatia; grazing altitude 80 km by default, which keeps the
link above most of the atmosphere) and their range is at most the link's
maximum. For nodes at radii ``r_a``, ``r_b`` the segment clears the sphere
exactly when the range is at most

    L(r_a, r_b) = sqrt(r_a^2 - rho^2) + sqrt(r_b^2 - rho^2)

(the two tangent lengths; the segment is tangent to the sphere at equality;
``L`` is 0 when a node is inside the sphere, since every segment from it crosses the sphere),
which for two satellites at altitude ``h`` gives Hypatia's maximum ISL length
``2 sqrt((R + h)^2 - (R + 80 km)^2)``.

A ground station sees a node when its elevation above the station's local
horizontal (normal to the WGS-84 ellipsoid, :func:`geodetic_up`) is at least a
mask angle.

Example:
    >>> round(max_los_range_km(550.0), 1)
    5016.6
"""

from __future__ import annotations

import numpy as np

from orbits.constants import EARTH_RADIUS_KM as _WGS72_RADIUS_KM
from orbits.oem import MAX_OEM_POSITION_KM

#: Earth radius for occlusion, km (WGS-72 equatorial radius, 6378.135 km, as SGP4 and Hypatia use):
#: the orbit code's constant, so occlusion and propagation share one Earth.
EARTH_RADIUS_KM: float = _WGS72_RADIUS_KM
#: Default grazing altitude of an inter-satellite link, km.
DEFAULT_GRAZING_KM = 80.0
#: Largest grazing altitude a link geometry takes, km (the TOML and the API share it).
MAX_GRAZING_KM = 50000.0
#: Largest link range a geometry takes, km (the TOML and the API share it): twice the largest position coordinate
#: an OEM state may have (:data:`orbits.oem.MAX_OEM_POSITION_KM`, past which nothing orbits the Earth);
#: 1e308 km overflowed the squared ranges of the window search.
MAX_RANGE_KM = 2 * MAX_OEM_POSITION_KM


def max_los_range_km(altitude_a_km: float, altitude_b_km: float | None = None,
                     grazing_km: float = DEFAULT_GRAZING_KM,
                     earth_radius_km: float = EARTH_RADIUS_KM) -> float:
    """Longest line-of-sight range (km) between nodes at the two altitudes."""
    if altitude_b_km is None:
        altitude_b_km = altitude_a_km
    rho = earth_radius_km + grazing_km
    return float(los_limit_km(earth_radius_km + altitude_a_km, earth_radius_km + altitude_b_km, rho))


def los_limit_km(r_a_km, r_b_km, rho_km: float) -> np.ndarray:
    """Tangent-length sum ``L(r_a, r_b)``; 0 when a node is inside the grazing sphere."""
    ta = np.sqrt(np.maximum(np.square(r_a_km) - rho_km**2, 0.0))
    tb = np.sqrt(np.maximum(np.square(r_b_km) - rho_km**2, 0.0))
    return np.where((ta > 0) & (tb > 0), ta + tb, 0.0)  # from inside the sphere, every segment crosses it


def segment_clearance_km(pos_a: np.ndarray, pos_b: np.ndarray) -> np.ndarray:
    """Smallest distance (km) from the Earth's centre to the segment ``a``-``b``; vectorized over ``(..., 3)``."""
    a = np.asarray(pos_a, dtype=float)
    b = np.asarray(pos_b, dtype=float)
    ab = b - a
    denom = np.einsum("...i,...i->...", ab, ab)
    lam = np.where(denom > 0, -np.einsum("...i,...i->...", a, ab) / np.where(denom > 0, denom, 1.0), 0.0)
    lam = np.clip(lam, 0.0, 1.0)
    closest = a + lam[..., None] * ab
    return np.linalg.norm(closest, axis=-1)


def line_of_sight(pos_a: np.ndarray, pos_b: np.ndarray, grazing_km: float = DEFAULT_GRAZING_KM,
                  earth_radius_km: float = EARTH_RADIUS_KM) -> np.ndarray:
    """True where the segment clears ``earth_radius_km + grazing_km`` (direct segment test)."""
    return segment_clearance_km(pos_a, pos_b) >= earth_radius_km + grazing_km


def range_km(pos_a: np.ndarray, pos_b: np.ndarray) -> np.ndarray:
    """Euclidean distance (km), vectorized over ``(..., 3)``."""
    return np.linalg.norm(np.asarray(pos_b, dtype=float) - np.asarray(pos_a, dtype=float), axis=-1)


def elevation_deg(station: np.ndarray, target: np.ndarray, up: np.ndarray | None = None) -> np.ndarray:
    """Elevation (deg) of ``target`` seen from ``station`` (Earth-fixed km); ``up``
    defaults to the station's local vertical, :func:`geodetic_up` (the rule the
    window finder applies to the elevation mask)."""
    station = np.asarray(station, dtype=float)
    rel = np.asarray(target, dtype=float) - station
    if up is None:
        up = geodetic_up(station)
    s = np.einsum("...i,...i->...", rel, up) / np.linalg.norm(rel, axis=-1)
    return np.degrees(np.arcsin(np.clip(s, -1.0, 1.0)))


def geodetic_up(pos_km: np.ndarray) -> np.ndarray:
    """Unit local vertical (the WGS-84 ellipsoid normal, as in Skyfield's ``altaz``) at
    positions ``(..., 3)`` km in a frame whose z axis is the Earth's axis (ITRS or TEME)."""
    from orbits.groundtrack import geodetic_from_itrs

    pos = np.asarray(pos_km, dtype=float)
    lat = np.radians(geodetic_from_itrs(pos)[0])
    rho = np.hypot(pos[..., 0], pos[..., 1])
    safe = np.where(rho > 0, rho, 1.0)
    cos_lat = np.where(rho > 0, np.cos(lat), 0.0)
    return np.stack([cos_lat * pos[..., 0] / safe, cos_lat * pos[..., 1] / safe, np.sin(lat)], axis=-1)


def space_visible(pos_a: np.ndarray, pos_b: np.ndarray, max_range_km: float,
                  grazing_km: float = DEFAULT_GRAZING_KM, earth_radius_km: float = EARTH_RADIUS_KM,
                  occlusion: bool = True) -> np.ndarray:
    """Direct visibility test between two space nodes (range and, if ``occlusion``, the segment test)."""
    ok = range_km(pos_a, pos_b) <= max_range_km
    if occlusion:
        ok &= line_of_sight(pos_a, pos_b, grazing_km, earth_radius_km)
    return ok
