"""Orbit-driven partition: an image belongs to a satellite that imaged its
location.

During the acquisition period every satellite's swath (a spherical cap around
its sub-satellite point, :mod:`orbits.coverage`) sweeps the ground. A
geo-tagged sample is assigned, by default (``rule = "uniform"``), to one of the
satellites whose swath covered it, drawn with a seeded generator: with several
satellites overflying a region over the period, that spreads its images over
them instead of handing the whole region to whichever passed first. With
``rule = "first"`` it goes to the satellite that covered it first (ties within
one time step to the lowest satellite index). Either way each satellite's data
comes only from regions it actually overflew, and the assignment is
deterministic for a given seed.
"""

from __future__ import annotations

import datetime as _dt

import numpy as np

from orbits import Constellation, Ephemeris
from orbits.coverage import coverage_by_satellite, swath_half_angle_rad
from orbits.groundtrack import ground_track

__all__ = ["orbit_assignment", "swath_coverage", "coverage_step_s", "GROUND_SPEED_KM_S",
           "GROUND_TRACK_BYTES_PER_SAMPLE", "ITRF_GROUND_TRACK_BYTES_PER_SAMPLE", "GROUND_TRACK_BYTES_PER_TIME"]

#: Upper bound of a LEO sub-satellite point's ground speed (km/s), used to pick
#: the coverage time step: the footprint advances at most half a swath width per
#: step (16 km swaths and wider), so points near the track are always seen;
#: points near the swath edge can fall between two samples (see
#: :func:`orbit_assignment`).
GROUND_SPEED_KM_S = 8.0

# Peak resident memory of the partition (``fol simulate --check`` holds it to the contact side's
# MAX_TRAJECTORY_BYTES before a run). Measured as the maximum resident set (``/usr/bin/time -v``) of a script
# that calls orbit_assignment as the run does (2,000 points, 16 km swaths: one sample a second; scipy loaded
# first, as in a run), less the same script's at 2 time samples with the same satellites, for Walker satellites
# (SGP4) and for OEMs that write_oem wrote (states every 300 s) in ITRF, GCRF and TEME: 1, 10 and 500 to 2,000
# satellites x 2,000 to 160,000 samples, one run at a time. The peak is in
# orbits.groundtrack.ground_track (ground_track alone took the same to 0.2 %, 2,000 satellites x 3,000 samples);
# the swath search after it takes less.

#: Per satellite and time sample, for tracks turned Earth-fixed (element sets; an OEM with any state not in
#: ITRF): the TEME positions (with the OEM's velocities, Earth-fixed mask and merged copy), their
#: Earth-fixed copy and the WGS-84 geodetic iteration's temporaries. 500 to 2,000 satellites x 2,000 to 6,000
#: samples took 151 to 155 bytes per satellite and sample, the rotation included (SGP4, GCRF and TEME alike;
#: least squares less the rotation per sample: 140, 140 and 129). Rounded up. SGP4's velocities are since let
#: go as soon as they are made: 128 to 131 bytes (500 x 6,000, 1,000 x 4,000, 2,000 x 3,000), so this bounds the
#: element sets from further above.
GROUND_TRACK_BYTES_PER_SAMPLE = 160
#: Per satellite and time sample for an OEM whose states are all ITRF, Earth-fixed as read (no rotation, no
#: Earth-fixed copy): 104 to 105 bytes at 500 to 2,000 satellites x 2,000 to 6,000 samples (least squares over
#: every ITRF run: 104.8, with 73 per time sample). Rounded up.
ITRF_GROUND_TRACK_BYTES_PER_SAMPLE = 112
#: Per time sample whatever the number of satellites (the time grid, the swath search's per-step lists): 73
#: bytes by the ITRF least squares above (one satellite at 40,000 to 160,000 samples: 118 bytes per sample,
#: satellite and time together, on 9.5 MB that do not grow with them). Tracks turned Earth-fixed add Skyfield's
#: Earth rotation, :data:`contact_sim.trajectory.STATION_ROTATION_BYTES_PER_TIME` (10 satellites at 20,000 to
#: 60,000 samples, SGP4, GCRF and TEME: 22.2 to 22.6 kB more per sample, their tracks included). Rounded up.
GROUND_TRACK_BYTES_PER_TIME = 128


def coverage_step_s(swath_km: float) -> float:
    """The default coverage time step (s): the footprint advances at most half a
    swath width per step, and steps are at least 1 s."""
    return max(1.0, swath_km / (2.0 * GROUND_SPEED_KM_S))


def swath_coverage(lat_deg: np.ndarray, lon_deg: np.ndarray, constellation: Constellation | Ephemeris, start: _dt.datetime,
                   acquisition_s: float, swath_km: float, step_s: float | None = None):
    """The satellites' swaths over the acquisition period, one satellite at a time:
    :func:`orbits.coverage.coverage_by_satellite` on the ground tracks sampled every
    ``step_s`` seconds (default: see :func:`orbit_assignment`)."""
    if step_s is None:
        step_s = coverage_step_s(swath_km)
    track = ground_track(constellation, start, np.arange(0.0, acquisition_s + 1e-9, step_s))
    return coverage_by_satellite(lat_deg, lon_deg, track.lat_deg, track.lon_deg,
                                 swath_half_angle_rad(swath_width_km=swath_km))


def orbit_assignment(
    lat_deg: np.ndarray,
    lon_deg: np.ndarray,
    constellation: Constellation | Ephemeris,
    start: _dt.datetime,
    acquisition_s: float,
    swath_km: float,
    rule: str = "uniform",
    seed: int = 0,
    step_s: float | None = None,
) -> np.ndarray:
    """Satellite index per sample (``-1``: never covered during the period).

    Coverage is sampled every ``step_s`` seconds, by default
    ``max(1, swath_km / (2 * GROUND_SPEED_KM_S))``: for a swath of 16 km or
    more the footprint advances at most half a swath width between samples, so
    every point within ~0.43 swath widths of the ground track is seen; points
    grazing the swath edge may be missed, as with any sampled footprint.
    """
    if rule not in ("first", "uniform"):
        raise ValueError(f"rule must be 'first' or 'uniform', got {rule!r}")
    coverage = swath_coverage(lat_deg, lon_deg, constellation, start, acquisition_s, swath_km, step_s)
    # Satellites come one at a time in index order; memory stays linear in the points
    # ("first") or in the covering pairs ("uniform"), never points x satellites.
    n = np.asarray(lat_deg).shape[0]
    owner = np.full(n, -1, dtype=np.int64)
    if rule == "first":  # the earliest covering step; ties within one step to the lowest satellite index
        best = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        for s, points, when in coverage:
            better = when < best[points]
            best[points[better]] = when[better]
            owner[points[better]] = s
        return owner
    # "uniform": a seeded draw among each point's covering satellites, in index order
    per_sat = [(s, points.astype(np.int32)) for s, points, _ in coverage]
    counts = np.zeros(n, dtype=np.int64)
    for _, points in per_sat:
        counts[points] += 1  # points are unique within a satellite
    u = np.random.default_rng([seed, 0x5A7]).random(n)
    pick = np.minimum((u * counts).astype(np.int64), np.maximum(counts - 1, 0))  # which covering satellite
    seen = np.zeros(n, dtype=np.int64)
    for s, points in per_sat:
        owner[points[seen[points] == pick[points]]] = s
        seen[points] += 1
    return owner
