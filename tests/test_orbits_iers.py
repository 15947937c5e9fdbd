"""Polar motion and UT1 from an IERS finals file (orbits.iers) for OEM states in ITRF: the columns read as
Skyfield's own parser reads them, the time scale is the one Skyfield builds from a whole file, its UT1 is the
built-in one inside Skyfield's table and the file's past it, the ITRF states written are Skyfield's itrs with that
table installed and move by the pole's offset and by the file's UT1, they read back into TEME, nothing changes
without the file, and a bad, huge or too short file (or one whose leap seconds are not Skyfield's) is refused in
one line naming it."""

from __future__ import annotations

import datetime as dt
import io
import re
from pathlib import Path

import numpy as np
import pytest

from orbits import OrbitError, propagate_offsets, read_oem, read_tle, write_oem
from orbits import iers as iers_module
from orbits import oem as oem_module
from orbits.iers import parse_iers_finals_text, read_iers_finals
from orbits.timeutil import skyfield_times

from _iers import POLE, UT1_MINUS_UTC_S, finals_line, finals_text

EXAMPLE_TLE = Path(__file__).resolve().parents[1] / "examples" / "leo_oem.tle"
START = dt.datetime(2008, 9, 20, 12, 0, tzinfo=dt.timezone.utc)
SPAN_S, STEP_S = 3 * 3600.0, 60.0
ARCSEC_RAD = np.pi / 180.0 / 3600.0
#: The rate of the Earth's rotation angle against UT1 (rad per second of UT1), the IAU 2000 ERA's.
ERA_RAD_PER_UT1_S = 2 * np.pi * 1.00273781191135448 / 86400.0
#: UT1 - UTC (s) of 2008-12-30 .. 2009-01-02 (Skyfield's built-in values, from the IERS): the leap second at the
#: end of 2008-12-31 steps it by a second.
AROUND_A_LEAP_SECOND = {dt.date(2008, 12, 30): -0.5911498, dt.date(2008, 12, 31): -0.5918692,
                        dt.date(2009, 1, 1): 0.4071638, dt.date(2009, 1, 2): 0.4059839}


@pytest.fixture()
def finals(tmp_path: Path) -> Path:
    path = tmp_path / "finals2000A.all"
    path.write_text(finals_text())
    return path


def skyfield_timescale(path: Path):
    """A time scale with the file's polar motion installed by Skyfield alone (its parser and its installer)."""
    from skyfield.api import load
    from skyfield.data import iers

    ts = load.timescale(builtin=True)
    with open(path, "rb") as fh:
        iers.install_polar_motion_table(ts, iers.parse_x_y_dut1_from_finals_all(fh))
    return ts


def test_the_columns_are_read_as_skyfields_own_parser_reads_them(finals: Path) -> None:
    from skyfield.data import iers

    pm = read_iers_finals(finals)
    with open(finals, "rb") as fh:
        theirs = iers.parse_x_y_dut1_from_finals_all(fh)
    assert pm.utc_mjd.tolist() == theirs["utc_mjd"].tolist() == [54728.0, 54729.0, 54730.0]
    assert pm.x_arcsec.tolist() == theirs["x_arcseconds"].tolist() == [p[0] for p in POLE.values()]
    assert pm.y_arcsec.tolist() == theirs["y_arcseconds"].tolist() == [p[1] for p in POLE.values()]
    assert pm.ut1_minus_utc_s.tolist() == theirs["dut1"].tolist() == list(UT1_MINUS_UTC_S.values())
    assert pm.source == str(finals) and pm.span_text() == "2008-09-19T00:00:00Z..2008-09-21T00:00:00Z"
    ts_table = pm.timescale.polar_motion_table
    assert all(np.array_equal(a, b) for a, b in zip(ts_table, skyfield_timescale(finals).polar_motion_table))


# measured (the three element sets of examples/leo_oem.tle, 181 states each over 3 h from 2008-09-20 12:00, the
# pole of POLE): positions 0.82 mm at most from Skyfield's itrs with the table (the 6 decimals written); moved
# 0.53 to 13.44 m from the export without polar motion, r x the pole's 0.41 arcsec being 13.45 m at most,
# and within 1.3 mm of the small rotation (y, x, 0) x r; velocities 0.98 mm/s from Skyfield's, which turns
# about the ITRS z axis where the reader and the writer turn about TEME's pole, tilted by the polar motion:
# 0.058 mm/s once that tilt is counted (the two rotation rates, as without polar motion)
def test_itrf_states_written_with_polar_motion_are_skyfields_itrs_with_the_table(tmp_path: Path,
                                                                                 finals: Path) -> None:
    from skyfield.api import EarthSatellite
    from skyfield.framelib import itrs

    from orbits.constants import EARTH_ROTATION_RAD_S

    sats = read_tle(EXAMPLE_TLE)
    pm = read_iers_finals(finals)
    plain = read_oem(write_oem(tmp_path / "plain.oem", sats, START, SPAN_S, STEP_S, frame="ITRF"))
    moved = read_oem(write_oem(tmp_path / "pm.oem", sats, START, SPAN_S, STEP_S, frame="ITRF", polar_motion=pm))
    assert (tmp_path / "pm.oem").read_text().splitlines()[2] == (
        "COMMENT rotated from TEME into Skyfield's ITRS (polar motion and UT1 of finals2000A.all); velocities "
        "relative to the Earth (omega x r taken out)")
    ts = skyfield_timescale(finals)
    times = skyfield_times(START, np.arange(0.0, SPAN_S + 1.0, STEP_S), ts)
    pole_x, pole_y = (np.interp(times.tt, ts.polar_motion_table[0], ts.polar_motion_table[k]) for k in (1, 2))
    pole_z_in_itrs = np.asarray(times.polar_motion_matrix())[:, 2].T  # the rotation axis, tilted by (x, y)
    lines = EXAMPLE_TLE.read_text().splitlines()
    for k, (seg, without) in enumerate(zip(moved.segments, plain.segments)):
        at = EarthSatellite(lines[3 * k + 1], lines[3 * k + 2], lines[3 * k], ts=ts).at(times)
        position, velocity = at.frame_xyz_and_velocity(itrs)
        p, v = position.km.T, velocity.km_per_s.T
        assert np.linalg.norm(seg.pos_km - p, axis=-1).max() < 1e-6  # km: 1 mm, the decimals written
        moved_km = np.linalg.norm(seg.pos_km - without.pos_km, axis=-1)
        reach_km = np.linalg.norm(without.pos_km, axis=-1) * np.hypot(pole_x, pole_y) * ARCSEC_RAD
        assert moved_km.max() > 0.9 * reach_km.max() > 0.9 * 6.9e3 * 0.4 * ARCSEC_RAD  # about r * |pole|: 13 m
        assert (moved_km <= reach_km + 2e-6).all()
        small_turn = np.cross(np.stack([pole_y, pole_x, np.zeros_like(pole_x)], -1) * ARCSEC_RAD, without.pos_km)
        assert np.linalg.norm(seg.pos_km - (without.pos_km + small_turn), axis=-1).max() < 2e-6  # km
        apart = np.linalg.norm(seg.vel_km_s - v, axis=-1)
        assert apart.max() > 5e-7  # km/s: Skyfield turns about ITRS's z axis
        tilt = -EARTH_ROTATION_RAD_S * np.cross(pole_z_in_itrs - [0.0, 0.0, 1.0], seg.pos_km)
        assert np.linalg.norm(seg.vel_km_s - v - tilt, axis=-1).max() < 1e-7  # km/s: 0.1 mm/s


# measured (as above): read back with the file, 1.4 mm at most from the TEME export at the states, 1.8 mm between
# them (every 37.3 s), velocities 0.09 mm/s; read without it, 13.4 m from it: the polar motion left in
def test_an_itrf_export_with_polar_motion_reads_back_into_teme_with_the_file(tmp_path: Path, finals: Path) -> None:
    sats = read_tle(EXAMPLE_TLE)
    pm = read_iers_finals(finals)
    path = write_oem(tmp_path / "pm.oem", sats, START, SPAN_S, STEP_S, frame="ITRF", polar_motion=pm)
    teme = read_oem(write_oem(tmp_path / "teme.oem", sats, START, SPAN_S, STEP_S))
    offsets = np.arange(0.0, SPAN_S, 37.3)
    r_teme, v_teme = propagate_offsets(teme, START, offsets)
    r, v = propagate_offsets(read_oem(path, polar_motion=pm), START, offsets)
    assert np.linalg.norm(r - r_teme, axis=-1).max() < 3e-6  # km
    assert np.linalg.norm(v - v_teme, axis=-1).max() < 1e-6  # km/s
    r_plain, _ = propagate_offsets(read_oem(path), START, offsets)
    assert np.linalg.norm(r_plain - r_teme, axis=-1).max() > 5e-3  # km: the pole's 13 m left in


def test_without_the_file_nothing_changes_and_other_frames_do_not_use_it(tmp_path: Path, finals: Path) -> None:
    """No polar motion: the ITRF rotation is Skyfield's itrs on the built-in time scale, to the bit; a GCRF export
    and its reading are the same with and without the file (it turns ITRF states only)."""
    from orbits.groundtrack import teme_to_itrs_matrices

    offsets = np.arange(0.0, SPAN_S + 1.0, STEP_S)
    itrf = oem_module._to_teme_matrices("ITRF", START, offsets)
    assert np.array_equal(itrf, teme_to_itrs_matrices(skyfield_times(START, offsets)).transpose(0, 2, 1))
    pm = read_iers_finals(finals)
    assert not np.array_equal(oem_module._to_teme_matrices("ITRF", START, offsets, pm), itrf)
    sats = read_tle(EXAMPLE_TLE)
    texts = [write_oem(tmp_path / f"gcrf{k}.oem", sats, START, SPAN_S, STEP_S, frame="GCRF",
                       polar_motion=polar).read_text().split("\n", 4)[4] for k, polar in enumerate((None, pm))]
    assert texts[0] == texts[1]  # past the CREATION_DATE line (the 4th: two writes may fall in two seconds)
    r0, r1 = (propagate_offsets(read_oem(tmp_path / "gcrf0.oem", polar_motion=polar), START, offsets)[0]
              for polar in (None, pm))
    assert np.array_equal(r0, r1)


# measured (as above, every 60 s): the ground tracks' Earth-fixed points move by 0.53 to 13.44 m with the file, the
# small rotation (y, x, 0) x r to 0.14 mm, Skyfield's itrs on the file's time scale to 8e-11 km; the sub-satellite
# points by up to 0.411 arcsec (12.7 m on the ground)
def test_ground_tracks_are_turned_with_the_polar_motion_too(finals: Path) -> None:
    from skyfield.api import EarthSatellite
    from skyfield.framelib import itrs

    from orbits import ground_track, teme_to_itrs
    from orbits.groundtrack import geodetic_from_itrs

    sats, pm = read_tle(EXAMPLE_TLE), read_iers_finals(finals)
    offsets = np.arange(0.0, SPAN_S + 1.0, STEP_S)
    r_teme, _ = propagate_offsets(sats, START, offsets)
    plain, moved = teme_to_itrs(r_teme, START, offsets), teme_to_itrs(r_teme, START, offsets, pm)
    times = skyfield_times(START, offsets, pm.timescale)
    table = pm.timescale.polar_motion_table
    pole = np.stack([np.interp(times.tt, table[0], table[2]), np.interp(times.tt, table[0], table[1]),
                     np.zeros(offsets.size)], -1) * ARCSEC_RAD  # (y, x, 0): the small turn's vector
    lines = EXAMPLE_TLE.read_text().splitlines()
    for k in range(len(sats.names)):
        theirs = EarthSatellite(lines[3 * k + 1], lines[3 * k + 2], lines[3 * k], ts=pm.timescale).at(times)
        assert np.abs(moved[k] - theirs.frame_xyz(itrs).km.T).max() < 1e-8  # km
        assert np.linalg.norm(moved[k] - (plain[k] + np.cross(pole, plain[k])), axis=-1).max() < 5e-7  # km
    moved_km = np.linalg.norm(moved - plain, axis=-1)
    assert moved_km.max() > 0.013 and moved_km.min() > 0.0005  # km
    track, without = ground_track(sats, START, offsets, polar_motion=pm), ground_track(sats, START, offsets)
    lat, lon, height = geodetic_from_itrs(moved)
    assert np.array_equal(track.lat_deg, lat) and np.array_equal(track.lon_deg, lon)
    assert np.array_equal(track.height_km, height)
    assert np.array_equal(without.lat_deg, geodetic_from_itrs(plain)[0])  # without the file: as before
    shift_deg = np.hypot(track.lat_deg - without.lat_deg, (track.lon_deg - without.lon_deg) * np.cos(np.radians(lat)))
    assert 0.3 / 3600 < shift_deg.max() < 0.42 / 3600  # the pole's 0.41 arcsec at most
    late = dt.datetime(2008, 9, 20, 22, 0, tzinfo=dt.timezone.utc)
    with pytest.raises(OrbitError, match=r"^ITRS positions: .*finals2000A.all gives polar motion for "
                                         r"2008-09-19T00:00:00Z\.\.2008-09-21T00:00:00Z, not for "
                                         r"2008-09-20T22:00:00Z\.\.2008-09-21T01:00:00Z;"):
        ground_track(sats, late, offsets, polar_motion=pm)

# measured (an ITRF export of the three element sets written with the pole of _iers.py, read with the file, 400 km
# swaths every 25 s over 3 h from 12:30): the round trip (into TEME with the file, back without it) the ground tracks
# took before moved the sub-satellite points by 0.46 to 12.71 m (8.5e-8 m read without the file)
def test_itrf_states_give_their_sub_satellite_points_as_read_with_or_without_the_file(
        tmp_path: Path, finals: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ITRF state is Earth-fixed already: the ground track's sub-satellite point is the WGS-84 geodetic of the
    state (Skyfield's wgs84 here), whatever finals file the ephemeris was read with or the track is asked with, and
    no Earth rotation is built. Before, the states went into TEME with the file and back without it: 12.7 m off."""
    from skyfield.api import wgs84
    from skyfield.toposlib import ITRSPosition
    from skyfield.units import Distance

    from orbits import ground_track, groundtrack
    from orbits.groundtrack import turns_earth_fixed

    pm = read_iers_finals(finals)
    path = write_oem(tmp_path / "itrf.oem", read_tle(EXAMPLE_TLE), START, SPAN_S, STEP_S, frame="ITRF",
                     polar_motion=pm)
    with_file, without = read_oem(path, polar_motion=pm), read_oem(path)
    assert with_file.all_itrf and not turns_earth_fixed(with_file)
    offsets = np.arange(0.0, SPAN_S + 1.0, STEP_S)  # the states' own epochs: the interpolant passes through them
    track = ground_track(with_file, START, offsets)
    times = skyfield_times(START, offsets)  # any time scale: an ITRS position into GCRS and back at one instant

    def ground_km(lat_deg, lon_deg):  # the WGS-84 point on the ellipsoid, Earth-fixed km
        return wgs84.latlon(lat_deg, lon_deg).itrs_xyz.km

    for k, seg in enumerate(with_file.segments):
        assert np.array_equal(seg.epochs_s - (START - seg.epoch0).total_seconds(), offsets)
        theirs = wgs84.geographic_position_of(ITRSPosition(Distance(km=seg.pos_km.T)).at(times))
        gap_km = np.linalg.norm(ground_km(track.lat_deg[k], track.lon_deg[k])
                                - ground_km(theirs.latitude.degrees, theirs.longitude.degrees), axis=0)
        assert gap_km.max() < 1e-6  # under 1 mm
        assert np.abs(track.height_km[k] - theirs.elevation.km).max() < 1e-6
    for again in (ground_track(without, START, offsets), ground_track(with_file, START, offsets, polar_motion=pm)):
        for key in ("lat_deg", "lon_deg", "height_km"):  # the file changes none of them: to the bit
            assert np.array_equal(getattr(track, key), getattr(again, key)), key
    monkeypatch.setattr(groundtrack, "teme_to_itrs", lambda *a, **k: pytest.fail("an Earth rotation was built"))
    ground_track(with_file, START, np.arange(0.0, SPAN_S, 7.0))  # between the states too


def test_mixed_frames_turn_only_the_teme_and_inertial_states(tmp_path: Path, finals: Path) -> None:
    """An OEM holding ITRF states for one object and GCRF states for another: the first's ground track is that of
    its ITRF states alone, the second's that of its GCRF states alone, to the bit (one rotation, for the times
    of the GCRF states)."""
    from orbits import Ephemeris, ground_track
    from orbits.groundtrack import turns_earth_fixed

    pm, sats = read_iers_finals(finals), read_tle(EXAMPLE_TLE)
    itrf = read_oem(write_oem(tmp_path / "itrf.oem", sats, START, SPAN_S, STEP_S, frame="ITRF", polar_motion=pm),
                    polar_motion=pm)
    gcrf = read_oem(write_oem(tmp_path / "gcrf.oem", sats, START, SPAN_S, STEP_S, frame="GCRF"), polar_motion=pm)
    mixed = Ephemeris(itrf.version, itrf.creation_date, itrf.originator, [itrf.segments[0], gcrf.segments[1]],
                      polar_motion=pm)
    assert not mixed.all_itrf and turns_earth_fixed(mixed) and not turns_earth_fixed(itrf)
    offsets = np.arange(0.0, SPAN_S, 37.3)
    got = ground_track(mixed, START, offsets)
    alone = [ground_track(itrf, START, offsets), ground_track(gcrf, START, offsets)]
    for k in range(2):
        for key in ("lat_deg", "lon_deg", "height_km"):
            assert np.array_equal(getattr(got, key)[k], getattr(alone[k], key)[k]), (k, key)


# measured: UT1 - UTC and TT of the file's time scale and of the built-in one every 60 s over the 3 h: the same to
# the bit (the fixture's UT1-UTC is the table's, which Skyfield takes from the IERS file to the same 7 decimals)
def test_inside_skyfields_table_the_files_ut1_is_the_built_in_one(finals: Path) -> None:
    from orbits.timeutil import timescale

    pm = read_iers_finals(finals)
    offsets = np.arange(0.0, SPAN_S + 1.0, STEP_S)
    ours, builtin = skyfield_times(START, offsets, pm.timescale), skyfield_times(START, offsets)
    assert np.array_equal(ours.tt, builtin.tt)  # the built-in leap seconds
    assert np.abs(ours.dut1 - builtin.dut1).max() < 1e-7
    assert timescale().polar_motion_table is None  # the shared built-in time scale is left as it was


# measured (the 4 satellites below, 3 h from 2027-06-01 06:00 at 60 s, four months past the end of Skyfield 1.55's
# table, 2027-01-23): the built-in time scale extrapolates UT1 - UTC to 0.10047 s there; a file giving 0.07 s
# (made up: the extrapolation strays by tens of ms in a few months) moves the ITRF states by 9.3 to 15.4 m, r_xy
# times the Earth's turn in 30.5 ms, to 1.3 mm (the two files' 6 decimals), and they are Skyfield's itrs on
# Skyfield's own time scale with that UT1 (load.timescale(delta_t=...)) to 0.50 mm
def test_past_skyfields_table_the_earth_turns_by_the_files_ut1(tmp_path: Path) -> None:
    from skyfield.api import EarthSatellite, load
    from skyfield.data import iers
    from skyfield.framelib import itrs

    from orbits import walker_delta
    from orbits.timeutil import timescale

    start = dt.datetime(2027, 6, 1, 6, 0, tzinfo=dt.timezone.utc)
    offsets = np.arange(0.0, SPAN_S + 1.0, STEP_S)
    builtin = timescale()
    assert skyfield_times(start, [0.0]).tt[0] > builtin.delta_t_table[0][-1] + 120  # days past the built-in table
    days = [dt.date(2027, 6, d) for d in (1, 2, 3)]
    pole = dict.fromkeys(days, (0.15, 0.35))  # made-up
    extrapolated = {d: round(float(builtin.utc(d.year, d.month, d.day).dut1), 7) for d in days}
    files = {}
    for name, dut1 in (("file", dict.fromkeys(days, 0.07)), ("extrapolated", extrapolated)):
        (tmp_path / name).write_text(finals_text(pole, dut1))
        files[name] = read_iers_finals(tmp_path / name)
    ours = skyfield_times(start, offsets, files["file"].timescale)
    assert np.abs(ours.dut1 - 0.07).max() < 1e-9  # UT1 - UTC: the file's
    behind = skyfield_times(start, offsets).dut1 - 0.07  # s: how far the built-in UT1 runs ahead of the file's
    assert 0.03 < behind.min() and behind.max() < 0.031
    sats = walker_delta(4, 2, 1, 550.0, 53.0, start)
    got, extra = (read_oem(write_oem(tmp_path / f"{name}.oem", sats, start, SPAN_S, STEP_S, frame="ITRF",
                                     polar_motion=pm)).segments for name, pm in files.items())
    ts = load.timescale(builtin=True, delta_t=69.184 - 0.07)  # TT - UTC = 32.184 s + 37 leap seconds
    iers.install_polar_motion_table(ts, {"utc_mjd": files["file"].utc_mjd, "x_arcseconds": files["file"].x_arcsec,
                                         "y_arcseconds": files["file"].y_arcsec})
    times = skyfield_times(start, offsets, ts)
    angle = ERA_RAD_PER_UT1_S * (skyfield_times(start, offsets, files["extrapolated"].timescale).dut1 - 0.07)
    cos, sin = np.cos(angle), np.sin(angle)
    for k, sat in enumerate(sats.satrecs):
        theirs = EarthSatellite.from_satrec(sat, ts).at(times).frame_xyz(itrs).km.T
        assert np.abs(got[k].pos_km - theirs).max() < 1e-6  # km: the 6 decimals written
        r = extra[k].pos_km  # with Skyfield's extrapolated UT1: the Earth turned further, r turned back about z
        turned = np.stack([cos * r[:, 0] - sin * r[:, 1], sin * r[:, 0] + cos * r[:, 1], r[:, 2]], -1)
        assert np.linalg.norm(got[k].pos_km - turned, axis=-1).max() < 2e-6  # km
        moved_km = np.linalg.norm(got[k].pos_km - r, axis=-1)
        assert np.abs(moved_km - np.hypot(r[:, 0], r[:, 1]) * angle).max() < 2e-6  # km: r_xy x the turn
        assert moved_km.max() > 0.015  # km: up to 15 m


def test_the_files_leap_seconds_must_be_skyfields(tmp_path: Path) -> None:
    """UT1 - UTC steps by a second where UTC has a leap second: the file's step at the end of 2008 is Skyfield's
    leap second (the time scale's UT1 is the built-in one across it); a file without it, a step on another day or
    a bad value (TT - UT1 changing by a tenth of a second in a day) is refused in one line naming the line."""
    from orbits.timeutil import timescale

    pole = dict.fromkeys(AROUND_A_LEAP_SECOND, (0.1, 0.2))
    pm = parse_iers_finals_text(finals_text(pole, AROUND_A_LEAP_SECOND), "f")
    across = np.arange(0.0, 2 * 86400.0 + 1.0, 600.0)
    start = dt.datetime(2008, 12, 30, tzinfo=dt.timezone.utc)
    ours, builtin = skyfield_times(start, across, pm.timescale), skyfield_times(start, across)
    assert np.abs(ours.dut1 - builtin.dut1).max() < 1e-7 and np.ptp(ours.dut1) > 0.99
    assert np.array_equal(ours.tt, builtin.tt) and np.array_equal(pm.timescale.leap_dates, timescale().leap_dates)
    version = re.escape(__import__("skyfield").__version__)
    for dut1, message in (
            ({**AROUND_A_LEAP_SECOND, dt.date(2009, 1, 1): -0.5928362, dt.date(2009, 1, 2): -0.5940161},
             rf"f:3: UT1-UTC \(columns 59-68\) goes from -0.5918692 s on line 2 to -0.5928362 s where Skyfield "
             rf"{version} has a leap second \(\+1 s\); expected a change of milliseconds a day, or of a second at "
             r"a leap second \(TT-UT1 steps by 1.0010 s; a later leap second needs a newer Skyfield\)$"),
            ({**AROUND_A_LEAP_SECOND, dt.date(2008, 12, 31): 0.4081308},
             rf"f:2: UT1-UTC \(columns 59-68\) goes from -0.5911498 s on line 1 to 0.4081308 s where Skyfield "
             rf"{version} has no leap second; expected .* \(TT-UT1 steps by 0.9993 s;"),
            ({**AROUND_A_LEAP_SECOND, dt.date(2009, 1, 2): 0.2059839},
             r"f:4: UT1-UTC \(columns 59-68\) goes from 0.4071638 s on line 3 to 0.2059839 s where .* has no leap "
             r"second; expected .* \(TT-UT1 steps by 0.2012 s;")):
        with pytest.raises(OrbitError, match=message):
            parse_iers_finals_text(finals_text(pole, dut1), "f")


def test_times_the_file_does_not_cover_are_refused_in_one_line_before_anything_is_propagated(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, finals: Path) -> None:
    sats = read_tle(EXAMPLE_TLE)
    pm = read_iers_finals(finals)
    itrf = write_oem(tmp_path / "pm.oem", sats, START, SPAN_S, STEP_S, frame="ITRF", polar_motion=pm)
    late = dt.datetime(2008, 9, 20, 22, 0, tzinfo=dt.timezone.utc)
    with pytest.raises(OrbitError, match=re.escape(
            f"ITRF states: {finals} gives polar motion for 2008-09-19T00:00:00Z..2008-09-21T00:00:00Z, not for "
            "2008-09-20T22:00:00Z..2008-09-21T01:00:00Z; expected an IERS finals file covering those times")):
        with monkeypatch.context() as m:
            m.setattr(oem_module, "propagate_offsets", lambda *a, **k: pytest.fail("propagated"))
            write_oem(tmp_path / "late.oem", sats, late, SPAN_S, STEP_S, frame="ITRF", polar_motion=pm)
    assert not (tmp_path / "late.oem").exists()
    eph = read_oem(itrf, polar_motion=pm)
    with pytest.raises(OrbitError, match=r"^ITRF states: .*finals2000A.all gives polar motion for .*, not for "
                                         r"2008-09-18T23:59:59Z\.\.2008-09-20T12:00:00Z;"):
        eph.positions_teme_km(START, [-(36 * 3600.0 + 1.0), 0.0])


@pytest.mark.parametrize("edit, message", [
    (lambda lines: lines[:1] + [lines[1][:18] + " 0.2x0000" + lines[1][27:]] + lines[2:],
     r":2: expected the pole's x in columns 19-27, arcsec with 6 decimals within \+-1, got '0.2x0000'"),
    (lambda lines: lines[:1] + [lines[1][:37] + " 1.500000" + lines[1][46:]] + lines[2:],
     r":2: expected the pole's y in columns 38-46, arcsec with 6 decimals within \+-1, got '1.500000'"),
    (lambda lines: lines[:1] + [lines[1][:18] + "     0.20" + lines[1][27:]] + lines[2:],
     r":2: expected the pole's x in columns 19-27, arcsec with 6 decimals"),
    (lambda lines: lines[:1] + [lines[1][:16] + "X" + lines[1][17:]] + lines[2:],
     r":2: expected I \(IERS\) or P \(prediction\) in column 17, got 'X'"),
    (lambda lines: lines[:1] + [lines[1][:57] + "X" + lines[1][58:]] + lines[2:],
     r":2: expected I \(IERS\) or P \(prediction\) in column 58, for UT1-UTC, got 'X'"),
    (lambda lines: lines[:1] + [lines[1][:58] + " 1.4809865" + lines[1][68:]] + lines[2:],
     r":2: expected UT1-UTC in columns 59-68, seconds with 7 decimals within \+-1, got '1.4809865'"),
    (lambda lines: lines[:1] + [lines[1][:58] + "  -0.48099" + lines[1][68:]] + lines[2:],
     r":2: expected UT1-UTC in columns 59-68, seconds with 7 decimals within \+-1, got '-0.48099'"),
    (lambda lines: [line[:57] for line in lines[:3]] + lines[3:],
     r":1: expected I \(IERS\) or P \(prediction\) in column 58, for UT1-UTC, got ''"),
    (lambda lines: lines[:1] + [" " + lines[1]] + lines[2:], r":2: expected a line of an IERS finals2000A.all"),
    (lambda lines: lines[:1] + [lines[1].replace(" 920 ", " 921 ", 1)] + lines[2:],
     r":2: the date of columns 1-6, ' 8 921', is not MJD 54729.00 \(columns 8-15\); expected a line of"),
    (lambda lines: [lines[1], lines[0]] + lines[2:],
     r":2: MJD 54728.00 comes before line 1's 54729.00; expected one line a day, each the day after the line before "
     r"\(MJD 54730.00\)"),
    (lambda lines: [lines[0], lines[2], lines[3]],
     r":2: MJD 54730.00 after line 1's 54728.00 leaves out 1 day; expected one line a day, each the day after the "
     r"line before \(MJD 54729.00\)"),
    (lambda lines: [lines[0], "", lines[3]],
     r":3: MJD 54731.00 after line 1's 54728.00 leaves out 2 days; expected one line a day"),
    (lambda lines: lines[:2] + [lines[1]] + lines[2:],
     r":3: MJD 54729.00 repeats the day of line 2; expected one line a day, each the day after the line before "
     r"\(MJD 54730.00\)"),
    (lambda lines: [lines[0], finals_line(dt.date(2008, 9, 20)).rstrip("\n")] + lines[2:],
     r":3: polar motion after line 2, which had none; expected the lines without it only at the end of the file"),
    (lambda lines: ["<html>not found</html>"], r":1: expected a line of an IERS finals2000A.all or finals.all"),
    (lambda lines: [], r": no polar motion; expected a line of an IERS finals2000A.all"),
    (lambda lines: lines[3:], r": no polar motion"),
    # read as one line: its first day alone, the other days' columns passed over, and then refused as
    # covering no horizon ('gives polar motion for 2008-09-19T00:00:00Z..2008-09-19T00:00:00Z')
    (lambda lines: ["\r".join(lines)], r":1: a carriage return \(CR\) inside the line; expected lines ended by LF "
                                        r"or CR LF$"),
], ids=["x-not-a-number", "y-too-large", "x-misplaced", "flag", "ut1-flag", "ut1-too-large", "ut1-misplaced",
        "ut1-missing", "shifted", "date-not-mjd", "out-of-order",
        "day-left-out", "days-left-out-past-a-blank-line", "day-repeated",
        "after-the-end", "not-finals", "empty", "dates-only", "cr-line-ends"])
def test_a_malformed_file_is_refused_in_one_line_naming_file_and_line(tmp_path: Path, edit, message: str) -> None:
    path = tmp_path / "finals2000A.all"
    path.write_text("\n".join(edit(finals_text().splitlines())))
    with pytest.raises(OrbitError, match=re.escape(str(path)) + message) as caught:
        read_iers_finals(path)
    assert "\n" not in str(caught.value)


def test_the_size_cap_is_checked_before_the_file_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "finals2000A.all"
    with open(path, "wb") as fh:  # sparse: no disk used
        fh.truncate(iers_module.MAX_IERS_BYTES + 1)
    monkeypatch.setattr(Path, "read_bytes", lambda self: pytest.fail("read"))
    with pytest.raises(OrbitError, match=re.escape(f"{path}: {iers_module.MAX_IERS_BYTES + 1} bytes; an IERS finals "
                                                   f"file may have at most {iers_module.MAX_IERS_BYTES}")):
        read_iers_finals(path)


def test_a_real_finals_lines_prediction_flags_and_the_empty_tail_are_read() -> None:
    """Predictions (P) are read as measured values (I) are; lines past the predictions, a date and spaces, are
    skipped; a line of Windows' CR LF too."""
    text = (finals_line(dt.date(2008, 9, 20), 0.2, 0.35) + finals_line(dt.date(2008, 9, 21), -0.01, 0.4, flag="P")
            .replace("\n", "\r\n") + finals_line(dt.date(2008, 9, 22)).rstrip("\n") + " " * 90 + "\n\n")
    pm = parse_iers_finals_text(text, "f")
    assert pm.utc_mjd.tolist() == [54729.0, 54730.0] and pm.x_arcsec.tolist() == [0.2, -0.01]
    from skyfield.data import iers

    theirs = iers.parse_x_y_dut1_from_finals_all(io.BytesIO(text.encode()))
    assert pm.y_arcsec.tolist() == theirs["y_arcseconds"].tolist()
    assert pm.ut1_minus_utc_s.tolist() == theirs["dut1"].tolist()


def _whole_finals_text(issued: dt.date) -> str:
    """A finals2000A.all as the IERS Rapid Service publishes it on ``issued``, laid out by the readme's columns:
    from 1973-01-02, a full line a day (Bulletin A's polar motion, UT1-UTC, LOD and nutation with their flags,
    then Bulletin B's columns, written as the real file writes them: ``   .143000``) up to ``issued``; then a year
    of predictions (polar motion and UT1-UTC only, flag P); then 50 days of a date only, as the real file ends.
    Every line padded to 185 columns and two spaces, as the real file's are. The pole is made up; UT1-UTC is
    Skyfield's built-in one (the IERS values, with their steps at the leap seconds, to the end of its table, then
    its extrapolation), to the 7 decimals of the file."""
    from orbits.timeutil import timescale

    lines = []
    day, last_p, end = dt.date(1973, 1, 2), issued + dt.timedelta(days=365), issued + dt.timedelta(days=415)
    first_mjd = (day - dt.date(1858, 11, 17)).days
    dut1 = timescale().utc(1858, 11, 17.0 + np.arange(first_mjd, first_mjd + (last_p - day).days + 1)).dut1
    while day <= end:
        mjd = (day - dt.date(1858, 11, 17)).days
        head = f"{day.year % 100:2d}{day.month:2d}{day.day:2d} {mjd:8.2f}"
        turn = 2 * np.pi * (mjd - 41684) / 433.0  # the Chandler wobble's 433 days, about the size of the real pole
        x, y = 0.05 + 0.2 * np.cos(turn), 0.3 + 0.2 * np.sin(turn)
        if day <= issued:
            ut1 = dut1[mjd - first_mjd]
            bull_b = re.sub(r"(?<!\d)(-?)0\.", r" \1.", f"{x:10.6f}{y:10.6f}{ut1:11.7f}{-0.252:10.3f}{-0.119:10.3f}")
            line = (f"{head} I {x:9.6f}{0.00009:9.6f} {y:9.6f}{0.0001:9.6f}  I{ut1:10.7f}{0.0000099:10.7f} "
                    f"{0.9333:7.4f}{0.0076:7.4f}  I {-0.135:9.3f}{0.315:9.3f} {-0.204:9.3f}{0.298:9.3f}{bull_b}")
        elif day <= last_p:
            ut1 = dut1[mjd - first_mjd]
            line = f"{head} P {x:9.6f}{0.017:9.6f} {y:9.6f}{0.027:9.6f}  P{ut1:10.7f}{0.0254096:10.7f}"
        else:
            line = head
        lines.append(line.ljust(185) + "  \n")
        day += dt.timedelta(days=1)
    return "".join(lines)


def test_a_whole_finals_file_from_1973_to_a_year_ahead_is_read_as_skyfield_reads_it(tmp_path: Path) -> None:
    """The file a user downloads today (20,113 lines, 3.8 MB), by the readme's columns: well under the size cap,
    read whole (1999 and 2000, written ' 0', dated by the MJD's century rule), the I, P and date-only lines
    to the very values Skyfield's own parser reads, the date-only tail skipped; the time scale is the one
    Skyfield builds from the file itself, to the bit."""
    from skyfield.data import iers

    path = tmp_path / "finals2000A.all"
    path.write_text(_whole_finals_text(dt.date(2026, 12, 7)))
    size = path.stat().st_size
    assert 3_700_000 < size < iers_module.MAX_IERS_BYTES / 2, size  # room for decades of growth (69 kB a year)
    pm = read_iers_finals(path)
    with open(path, "rb") as fh:
        theirs = iers.parse_x_y_dut1_from_finals_all(fh)
    assert pm.utc_mjd.size == theirs.size == (dt.date(2027, 12, 7) - dt.date(1973, 1, 2)).days + 1
    assert np.array_equal(pm.utc_mjd, theirs["utc_mjd"]) and np.array_equal(pm.x_arcsec, theirs["x_arcseconds"])
    assert np.array_equal(pm.y_arcsec, theirs["y_arcseconds"])
    assert np.array_equal(pm.ut1_minus_utc_s, theirs["dut1"])
    assert pm.span_text() == "1973-01-02T00:00:00Z..2027-12-07T00:00:00Z"
    # the time scale Skyfield builds from this file itself (load.timescale(builtin=False) on finals2000A.all):
    # its leap seconds, counted from the file's steps of UT1-UTC, are the built-in ones; its TT - UT1 is ours
    daily_tt, daily_delta_t, leap_dates, leap_offsets = iers.build_timescale_arrays(theirs["utc_mjd"], theirs["dut1"])
    ts = pm.timescale
    assert np.array_equal(ts.leap_dates, leap_dates) and np.array_equal(ts.leap_offsets, leap_offsets)
    assert np.array_equal(ts.delta_t_table[1], daily_delta_t)
    assert np.array_equal(ts.delta_t_table[0], daily_tt)  # TT of the days' 0 h UTC
    lines = path.read_text().splitlines()
    assert lines[-1].startswith("28 126 61796.00") and lines[-1][15:].strip() == ""
    assert any(line.startswith(" 0 1 1 51544.00 I") for line in lines)
    pm.check_covers("1999-12-31T12:00:00Z", 86400.0, "time")  # across the century of the two-digit year
