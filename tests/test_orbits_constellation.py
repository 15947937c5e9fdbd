"""Walker constellations, SGP4 propagation, and checks against independent references."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pytest

from orbits import (MU_KM3_S2, EARTH_RADIUS_KM, OrbitError, keplerian_period_s, parse_utc,
                    propagate, propagate_offsets, walker_delta, walker_star)
from orbits.timeutil import julian_date, julian_dates, sgp4_epoch_days

EPOCH = "2025-03-01T00:00:00Z"


def _ascending_node_times(c, start, span_s, step_s=10.0):
    """Times (s) where z crosses 0 upwards, refined by bisection on SGP4 itself."""
    t = np.arange(0.0, span_s, step_s)
    r, _ = propagate_offsets(c, start, t)
    z = r[0, :, 2]
    idx = np.flatnonzero((z[:-1] < 0) & (z[1:] >= 0))
    out = []
    for i in idx:
        lo, hi = t[i], t[i + 1]
        for _ in range(40):
            mid = 0.5 * (lo + hi)
            zm = propagate_offsets(c, start, [mid])[0][0, 0, 2]
            lo, hi = (mid, hi) if zm < 0 else (lo, mid)
        out.append(0.5 * (lo + hi))
    return np.array(out)


def test_550km_period_matches_kepler_within_0p1_percent():
    c = walker_delta(1, 1, 0, 550.0, 53.0, EPOCH)
    nodes = _ascending_node_times(c, c.epoch, 4 * 5800.0)
    assert nodes.size >= 3
    period = np.diff(nodes).mean()
    a = EARTH_RADIUS_KM + 550.0
    kepler = 2 * math.pi * math.sqrt(a**3 / MU_KM3_S2)
    assert kepler == pytest.approx(keplerian_period_s(550.0))
    assert abs(period / kepler - 1.0) < 1e-3
    # and the orbit really sits at ~550 km
    r, _ = propagate_offsets(c, c.epoch, np.arange(0, 5800, 60.0))
    radius = np.linalg.norm(r[0], axis=1)
    assert abs(radius.mean() - a) < 15.0


@pytest.mark.parametrize("inclination_deg", [30.0, 53.0, 97.6])
def test_nodal_period_follows_the_documented_j2_formula(inclination_deg):
    """orbits/constellation.py: SGP4's nodal period is shorter than Kepler's by about
    0.75 J2 (R/a)^2 (5 cos^2 i - 1) (Kozai mean motion in; longer past 63.4 deg)."""
    from orbits.constants import J2

    c = walker_delta(1, 1, 0, 550.0, inclination_deg, EPOCH)
    nodes = _ascending_node_times(c, c.epoch, 3 * 5800.0)
    shorter = 1.0 - np.diff(nodes).mean() / keplerian_period_s(550.0)
    a = EARTH_RADIUS_KM + 550.0
    expected = 0.75 * J2 * (EARTH_RADIUS_KM / a) ** 2 * (5 * math.cos(math.radians(inclination_deg)) ** 2 - 1)
    assert shorter == pytest.approx(expected, rel=0.05)


def test_walker_delta_geometry():
    c = walker_delta(24, 6, 2, 700.0, 60.0, EPOCH)
    assert len(c) == 24 and len(set(c.names)) == 24
    raan = np.degrees([s.nodeo for s in c.satrecs])
    assert sorted(set(np.round(raan, 6))) == pytest.approx([0, 60, 120, 180, 240, 300])
    # phasing: first satellite of plane p is offset by 360 F p / T in mean anomaly
    mo = np.degrees([s.mo for s in c.satrecs])
    assert mo[4] - mo[0] == pytest.approx(360 * 2 / 24)
    assert np.degrees(c.satrecs[0].inclo) == pytest.approx(60.0)
    assert set(c.planes) == set(range(6)) and max(c.slots) == 3
    # Walker i:T/P/F, satellite j of plane p: RAAN 360 p / P, mean anomaly 360 j / (T / P) + 360 F p / T
    # (the 4 satellites of a plane 90 deg apart), for every satellite, plane-major as the names say
    assert list(c.planes) == [p for p in range(6) for _ in range(4)] and list(c.slots) == [0, 1, 2, 3] * 6
    assert c.names[5] == "WD-P01-S01"
    for k, (p, j) in enumerate(zip(c.planes, c.slots)):
        assert raan[k] == pytest.approx(360.0 * p / 6)
        assert (mo[k] - (90.0 * j + 30.0 * p) + 180.0) % 360.0 - 180.0 == pytest.approx(0.0, abs=1e-9), k
        assert np.degrees(c.satrecs[k].inclo) == pytest.approx(60.0)


def test_walker_star_spreads_planes_over_180_degrees():
    c = walker_star(66, 6, 2, 780.0, 86.4, EPOCH)
    raan = sorted(set(np.round(np.degrees([s.nodeo for s in c.satrecs]), 6)))
    assert raan == pytest.approx([0, 30, 60, 90, 120, 150])
    # Walker i:T/P/F phasing holds for the star too: satellite j of plane p at RAAN 180 p / P and
    # mean anomaly 360 j / S + 360 F p / T (S = 11: 32.73 deg in-plane, F = 2: 10.91 deg between planes)
    mo = np.degrees([s.mo for s in c.satrecs])
    for k, (p, j) in enumerate(zip(c.planes, c.slots)):
        assert np.degrees(c.satrecs[k].nodeo) == pytest.approx(180.0 * p / 6)
        assert (mo[k] - (360.0 * j / 11 + 360.0 * 2 * p / 66) + 180.0) % 360.0 - 180.0 == pytest.approx(0.0, abs=1e-9)
    # and in space (argument of latitude u, from the ascending node, of the propagated positions):
    # adjacent planes' first satellites 10.91 deg apart, neighbours in a plane 32.73 deg
    r, v = propagate_offsets(c, c.epoch, [0.0])
    r, v = r[:, 0], v[:, 0]
    h = np.cross(r, v)
    h /= np.linalg.norm(h, axis=1)[:, None]
    node = np.cross([0.0, 0.0, 1.0], h)  # towards the ascending node
    node /= np.linalg.norm(node, axis=1)[:, None]
    u = np.degrees(np.arctan2(np.einsum("ij,ij->i", np.cross(node, r), h), np.einsum("ij,ij->i", node, r)))
    assert (u[11] - u[0]) % 360.0 == pytest.approx(360.0 * 2 / 66, abs=0.05)
    assert (u[1] - u[0]) % 360.0 == pytest.approx(360.0 / 11, abs=0.05)  # in-plane spacing
    node_lon = np.degrees(np.arctan2(node[:, 1], node[:, 0]))
    assert (node_lon[11] - node_lon[0]) % 360.0 == pytest.approx(30.0, abs=0.05)  # 180 / P between planes


@pytest.mark.parametrize("kwargs, match", [
    (dict(total=10, planes=3, phasing=0), "do not divide"),
    (dict(total=12, planes=3, phasing=3), "phasing"),
    (dict(total=0, planes=1, phasing=0), "total"),
    (dict(total=12, planes=3, phasing=0, inclination_deg=200.0), "inclination"),
    (dict(total=12, planes=3, phasing=0, altitude_km=-5.0), "altitude"),
])
def test_walker_rejects_bad_parameters(kwargs, match):
    args = dict(altitude_km=550.0, inclination_deg=53.0, epoch=EPOCH) | kwargs
    with pytest.raises(OrbitError, match=match):
        walker_delta(args["total"], args["planes"], args["phasing"], args["altitude_km"],
                     args["inclination_deg"], args["epoch"])


def test_walker_refuses_more_satellites_than_sgp4_numbers_before_building_any():
    """sgp4 numbers satellites up to 339999 (Alpha-5 Z9999): a larger shell is one
    OrbitError naming constellation.total, raised before 339,999 records are built."""
    import time

    from orbits.constellation import walker

    began = time.perf_counter()
    with pytest.raises(OrbitError, match=r"constellation\.total: .*339999"):
        walker_delta(340_000, 1, 0, 550.0, 53.0, EPOCH)
    assert time.perf_counter() - began < 1.0
    with pytest.raises(OrbitError, match=r"constellation\.total: .*339999"):
        walker(2, 1, 0, 550.0, 53.0, EPOCH, first_satnum=339_999)
    assert len(walker(1, 1, 0, 550.0, 53.0, EPOCH, first_satnum=339_999)) == 1


def test_bad_epoch_is_a_one_line_error():
    """The whole message: one line naming the scenario field, what was expected and the value."""
    with pytest.raises(OrbitError, match=r"\Aconstellation\.epoch: expected an ISO-8601 UTC time like "
                                         r"2025-03-01T00:00:00Z, got 'yesterday'\Z"):
        walker_delta(4, 2, 0, 550.0, 53.0, "yesterday")


def test_a_long_bad_time_is_quoted_cut_in_the_refusal():
    """A time of 20,000 characters (an ION plan's '# start' header, a GPX <time>, a scenario epoch) was
    quoted whole: a 20 kB error line."""
    with pytest.raises(OrbitError, match=r"\Atime\.start: expected an ISO-8601 UTC time like "
                                         r"2025-03-01T00:00:00Z, got '2026x+\.\.\.\Z"):
        parse_utc("2026" + "x" * 20_000, field="time.start")


@pytest.mark.parametrize("value", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:00:00-05:00",
                                   dt.datetime(1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1)))])
def test_a_time_whose_offset_leaves_the_calendar_is_refused(value):
    """A time with an offset that puts it in the year 0 or 10000 in UTC (an ION plan's '# start', a
    GPX <time>, a TOML time.start) was an OverflowError traceback."""
    with pytest.raises(OrbitError, match=r"\Atime\.start: expected a time within the years 1\.\.9999 in UTC, "
                                         r"got '(0001|9999)-"):
        parse_utc(value, field="time.start")


def test_vectorized_propagation_matches_skyfield_within_1m():
    from skyfield.api import EarthSatellite
    from skyfield.positionlib import Geocentric
    from skyfield.sgp4lib import TEME
    from skyfield.units import Distance, Velocity

    from orbits import skyfield_times, timescale

    ts = timescale()
    c = walker_delta(12, 3, 1, 550.0, 53.0, EPOCH)
    offsets = np.linspace(0.0, 86400.0, 97) + 0.37  # includes fractional seconds
    r, v = propagate_offsets(c, c.epoch, offsets)
    t = skyfield_times(c.epoch, offsets)
    for i in (0, 5, 11):
        sat = EarthSatellite.from_satrec(c.satrecs[i], ts)
        ref = sat.at(t).position.km  # GCRS, Skyfield's own pipeline
        mine = Geocentric.from_time_and_frame_vectors(
            t, TEME, Distance(km=r[i].T), Velocity(km_per_s=v[i].T)).position.km
        assert np.abs(mine - ref).max() < 1e-3  # km


def test_propagate_reports_sgp4_errors():
    from sgp4.api import Satrec, WGS72

    from orbits import Constellation
    from orbits.constellation import mean_motion_rad_min

    c = walker_delta(1, 1, 0, 550.0, 53.0, EPOCH)
    decaying = Satrec()  # 200 km with heavy drag: SGP4 stops with an error within a day
    decaying.sgp4init(WGS72, "i", 9, sgp4_epoch_days(c.epoch), 0.05, 0.0, 0.0, 1e-4, 0.0, 0.9, 0.0,
                      mean_motion_rad_min(200.0), 0.0)
    both = Constellation(c.names + ["low"], c.satrecs + [decaying])
    jd, fr = julian_dates(c.epoch, [0.0, 86400.0])
    with pytest.raises(OrbitError, match="low: SGP4 error"):
        propagate(both, jd, fr)


def test_time_helpers():
    jd, fr = julian_date(parse_utc("2000-01-01T12:00:00Z"))
    assert jd + fr == pytest.approx(2451545.0)
    assert sgp4_epoch_days(parse_utc("1950-01-01T00:00:00Z")) == pytest.approx(1.0)
    assert parse_utc("2025-01-01T01:00:00+01:00") == parse_utc("2025-01-01T00:00:00Z")
