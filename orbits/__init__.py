"""Orbits: Walker constellations, TLE and OMM files, OEM ephemerides, vectorized SGP4, ground tracks, swath coverage.

Torch-free. Positions are TEME km (SGP4's frame); times are UTC.
"""

from .constants import EARTH_RADIUS_KM, MU_KM3_S2
from .constellation import (Constellation, check_walker, circular_satrec, keplerian_period_s, walker,
                            walker_delta, walker_star)
from .coverage import coverage_by_satellite, first_coverage, in_swath, swath_half_angle_rad
from .errors import OrbitError
from .groundtrack import (GroundTrack, geodetic_from_itrs, ground_points_itrs, ground_track,
                          itrs_to_teme, teme_to_itrs, teme_to_itrs_matrices)
from .propagation import PLANE_TOLERANCE_DEG, orbital_planes, propagate, propagate_offsets, propagate_pairs
from .timeutil import (julian_date, julian_dates, parse_utc, sgp4_epoch_days, skyfield_times, timescale,
                       utc_offset_s, utc_text)
from .iers import PolarMotion, read_iers_finals
from .oem import Ephemeris, OemSegment, check_oem_export, parse_oem_text, read_oem, write_oem
from .omm import OMM_FORMATS, format_omm, omm_records, parse_omm_text, read_omm, write_omm
from .sunlight import eclipse_intervals, sunlit_samples
from .tle import format_tle, parse_tle_text, read_tle, tle_checksum, write_tle

__all__ = [
    "EARTH_RADIUS_KM", "MU_KM3_S2", "Constellation", "GroundTrack", "OrbitError",
    "check_walker", "circular_satrec", "coverage_by_satellite", "first_coverage", "format_tle", "geodetic_from_itrs",
    "ground_points_itrs", "ground_track", "in_swath", "itrs_to_teme", "julian_date",
    "julian_dates", "keplerian_period_s", "parse_tle_text", "parse_utc", "propagate",
    "propagate_offsets", "propagate_pairs", "read_tle", "sgp4_epoch_days", "skyfield_times",
    "swath_half_angle_rad", "teme_to_itrs", "teme_to_itrs_matrices", "timescale",
    "tle_checksum", "utc_offset_s", "utc_text", "walker", "walker_delta", "walker_star", "write_tle",
    "Ephemeris", "OemSegment", "check_oem_export", "parse_oem_text", "read_oem", "write_oem",
    "PolarMotion", "read_iers_finals",
    "OMM_FORMATS", "format_omm", "omm_records", "parse_omm_text", "read_omm", "write_omm",
    "eclipse_intervals", "sunlit_samples", "PLANE_TOLERANCE_DEG", "orbital_planes",
]
