"""What the readers of a drone scenario's flight files share: planned missions
(:mod:`contact_sim.missions`) and recorded tracks (:mod:`contact_sim.tracks`).

Their size limit and the kinds of file they take, a JSON number, the check of a geodetic
position, and the drones' flat East-North-Up frame. Geodetic positions become that frame (km)
about an origin (the scenario's ``origin_lat_deg``/``origin_lon_deg``/``origin_alt_m``, else the
first file's home: a mission's home, a track's first point), through WGS-84 Earth-fixed
coordinates (:func:`orbits.ground_points_itrs`, Skyfield). Altitudes of frame 3 are above home,
of frame 0 above mean sea level, like the home altitude.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from orbits import geodetic_from_itrs, ground_points_itrs
from swarmbase.tomlcheck import brief

from .drones import MAX_LOCAL_KM
from .errors import ContactError

#: Larger mission and track files are refused unread (bytes).
MAX_MISSION_BYTES = 16 * 1024 * 1024
#: What a file of a scenario's ``missions`` list may be, for the message refusing another.
FILE_KINDS = ("expected a QGroundControl .plan, a QGC WPL 110 .waypoints, a GPX track (.gpx), a drone agent's "
              "positions.jsonl, a MAVLink telemetry log (.tlog) or an ArduPilot DataFlash log (.bin)")


def enu_km(lat_deg: Sequence[float], lon_deg: Sequence[float], alt_m: Sequence[float],
           origin: tuple[float, float, float]) -> np.ndarray:
    """East-North-Up km of WGS-84 points about ``origin`` (lat deg, lon deg, alt m), shape ``(n, 3)``.

    Example:
        >>> enu_km([0.0], [90.0], [0.0], (0.0, 0.0, 0.0)).round(3).tolist()
        [[6378.137, 0.0, -6378.137]]
    """
    x0, rot = _enu_frame(origin)
    return (ground_points_itrs(lat_deg, lon_deg, alt_m) - x0) @ rot.T


def _enu_frame(origin: tuple[float, float, float]) -> tuple[np.ndarray, np.ndarray]:
    """Earth-fixed km of ``origin`` and the rotation from Earth-fixed to its East-North-Up axes."""
    x0 = ground_points_itrs([origin[0]], [origin[1]], [origin[2]])[0]
    lat, lon = math.radians(origin[0]), math.radians(origin[1])
    sl, cl, sp, cp = math.sin(lon), math.cos(lon), math.sin(lat), math.cos(lat)
    return x0, np.array([[-sl, cl, 0.0], [-sp * cl, -sp * sl, cp], [cp * cl, cp * sl, sp]])


def lat_lon_of_enu(enu_km: np.ndarray, origin: tuple[float, float, float]) -> tuple[np.ndarray, np.ndarray]:
    """Latitudes and longitudes (deg) of East-North-Up km about ``origin``: :func:`enu_km` reversed."""
    x0, rot = _enu_frame(origin)
    lat, lon, _ = geodetic_from_itrs(x0 + np.asarray(enu_km) @ rot)
    return lat, lon


def json_number(v: Any) -> float:
    """A JSON number; ``null`` (how QGroundControl writes NaN) is NaN."""
    if v is None:
        return math.nan
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError
    try:
        return float(v)
    except OverflowError:  # an integer of hundreds of digits
        raise ValueError from None


def check_position(path: Path, where: str, lat: float, lon: float, alt: float) -> None:
    if not (-90.0 <= lat <= 90.0 and -180.0 <= lon <= 360.0):
        raise ContactError(f"{brief(path)}: {where}: expected latitude -90..90 and longitude -180..360 deg, "
                           f"got {lat}, {lon}")
    if not abs(alt) <= MAX_LOCAL_KM * 1000.0:
        raise ContactError(f"{brief(path)}: {where}: expected an altitude within {MAX_LOCAL_KM * 1000:g} m, got {alt}")


def check_local(path: Path, xyz: np.ndarray, wheres: Sequence[str], origin: tuple[float, float, float]) -> None:
    far = np.flatnonzero(~(np.abs(xyz).max(axis=1) <= MAX_LOCAL_KM))
    if far.size:
        raise ContactError(f"{brief(path)}: {wheres[far[0]]}: lies more than {MAX_LOCAL_KM:g} km from the drones' "
                           f"origin ({origin[0]:g}, {origin[1]:g}); the local frame is flat")
