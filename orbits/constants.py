"""Physical constants used by the orbit code.

SGP4 is defined with the WGS-72 Earth model, so the constellation builder and
the period checks use WGS-72 values (as the SGP4 reference code does).
"""

from __future__ import annotations

from sgp4.api import WGS72
from sgp4.earth_gravity import wgs72

#: The gravity model handed to ``Satrec.sgp4init``.
SGP4_GRAVITY = WGS72
#: Earth's gravitational parameter, km^3/s^2 (WGS-72).
MU_KM3_S2: float = wgs72.mu
#: Earth's equatorial radius, km (WGS-72); also the Hypatia line-of-sight radius.
EARTH_RADIUS_KM: float = wgs72.radiusearthkm
#: Second zonal harmonic (WGS-72), dimensionless.
J2: float = wgs72.j2
#: Largest catalog number the installed sgp4 ``Satrec`` can hold (Alpha-5 ``Z9999``).
SGP4_MAX_SATNUM: int = 339999
#: Julian date of the SGP4 epoch origin, 1949-12-31 00:00 UTC.
SGP4_EPOCH_ORIGIN_JD: float = 2433281.5
#: Seconds per day.
DAY_S: float = 86400.0
#: Earth rotation rate (rad/s) about the TEME z axis: ground stations' and ITRF ephemerides' ``omega x r``.
EARTH_ROTATION_RAD_S: float = 7.2921158553e-5
