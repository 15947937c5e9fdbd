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

from orbits import Constellation
from orbits.coverage import first_coverage, swath_half_angle_rad
from orbits.groundtrack import ground_track

__all__ = ["orbit_assignment", "GROUND_SPEED_KM_S"]

#: Upper bound of a LEO sub-satellite point's ground speed (km/s), used to pick
#: a coverage time step that cannot skip over a point.
GROUND_SPEED_KM_S = 8.0


def orbit_assignment(
    lat_deg: np.ndarray,
    lon_deg: np.ndarray,
    constellation: Constellation,
    start: _dt.datetime,
    acquisition_s: float,
    swath_km: float,
    rule: str = "uniform",
    seed: int = 0,
    step_s: float | None = None,
) -> np.ndarray:
    """Satellite index per sample (``-1``: never covered during the period).

    Coverage is sampled every ``step_s`` seconds, by default
    ``swath_km / (2 * GROUND_SPEED_KM_S)``: the footprint advances at most half
    a swath width between samples, so every point within ~0.43 swath widths of
    the ground track is seen; points grazing the swath edge may be missed, as
    with any sampled footprint.
    """
    if step_s is None:
        step_s = max(1.0, swath_km / (2.0 * GROUND_SPEED_KM_S))
    offsets = np.arange(0.0, acquisition_s + 1e-9, step_s)
    track = ground_track(constellation, start, offsets)
    first = first_coverage(lat_deg, lon_deg, track.lat_deg, track.lon_deg, swath_half_angle_rad(swath_width_km=swath_km))
    covered = first >= 0
    owner = np.full(first.shape[0], -1, dtype=np.int64)
    any_cover = covered.any(axis=1)
    if rule == "first":
        big = np.iinfo(np.int64).max
        when = np.where(covered, first, big)
        owner[any_cover] = np.argmin(when[any_cover], axis=1)  # argmin returns the lowest index on ties
    elif rule == "uniform":
        counts = covered.sum(axis=1)
        u = np.random.default_rng([seed, 0x5A7]).random(first.shape[0])
        pick = np.minimum((u * counts).astype(np.int64), np.maximum(counts - 1, 0))  # which covering satellite
        rank = np.cumsum(covered, axis=1) - 1  # rank of each covering satellite among a point's
        hit = covered & (rank == pick[:, None])
        owner[any_cover] = np.argmax(hit[any_cover], axis=1)
    else:
        raise ValueError(f"rule must be 'first' or 'uniform', got {rule!r}")
    return owner
