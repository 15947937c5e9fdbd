"""Drone mobility, scenario files and the ``contacts`` CLI."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import textwrap
import time
import tomllib

import numpy as np
import pytest

from contact_sim import (ContactError, LinkGeometry, compute_contacts, drone_trajectories,
                         find_windows, load_contact_scenario, parse_contact_scenario,
                         random_waypoints, read_waypoints_csv, windows_from_samples,
                         write_waypoints_csv)
from contact_sim.cli import add_contacts_parser, run_contacts
from contact_sim.drones import _interp
from contact_sim.dtn import parse_ion, read_plan
from contact_sim.scenario import check_contact_scenario

from _names import odd_folder

LEO = """
[constellation]
kind = "walker-delta"
total = 12
planes = 3
phasing = 1
altitude_km = 550.0
inclination_deg = 53.0
epoch = "2025-03-01T00:00:00Z"

[time]
duration_s = 3600.0
step_s = 60.0

[link]
model = "constant"
rate_bps = 1e8
max_range_km = 5000.0

[rounds]
count = 2
"""


def _write(tmp_path, text, name="s.toml"):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def test_random_waypoints_are_seeded_and_respect_speed():
    a = random_waypoints(4, 3.0, 12.0, 900.0, seed=5)
    b = random_waypoints(4, 3.0, 12.0, 900.0, seed=5)
    c = random_waypoints(4, 3.0, 12.0, 900.0, seed=6)
    assert all(np.array_equal(x.xyz_km, y.xyz_km) for x, y in zip(a, b, strict=True))
    assert not np.array_equal(a[0].xyz_km, c[0].xyz_km)
    for d in a:
        speed = np.linalg.norm(np.diff(d.xyz_km, axis=0), axis=1) / np.diff(d.t_s)
        assert np.allclose(speed, 0.012) and d.t_s[-1] >= 900.0
        assert (d.xyz_km[:, :2] >= 0).all() and (d.xyz_km[:, :2] <= 3.0).all()


@pytest.mark.parametrize("kwargs, match", [
    (dict(area_km=float("nan")), r"drones.area_km: expected a positive number of at most 1000 km, got nan"),
    (dict(area_km=1e200), r"drones.area_km: expected a positive number of at most 1000 km, got 1e\+200"),
    (dict(speed_m_s=float("nan")), r"drones.speed_m_s: expected a positive number of m/s, got nan"),
    (dict(pause_s=float("nan")), r"drones.pause_s: expected a number of seconds >= 0, got nan"),
    (dict(altitude_km=float("nan")), r"drones.altitude_km: expected a number in -1000..1000 km, got nan"),
    (dict(duration_s=float("nan")), r"time.duration_s: expected a positive number of seconds, got nan"),
])
def test_random_waypoints_refuse_what_the_scenario_file_refuses(kwargs, match):
    """Through the API a NaN area died in numpy (OverflowError), a NaN speed or altitude
    in the k-d tree (ValueError), and a NaN pause was silently no pause; the TOML path
    refused each. Now one ContactError line, with the file's bounds."""
    args = dict(count=3, area_km=2.0, speed_m_s=10.0, duration_s=600.0, seed=1) | kwargs
    with pytest.raises(ContactError, match=match):
        random_waypoints(**args)


def test_drone_windows_match_brute_force_scan():
    wps = random_waypoints(8, 3.0, 15.0, 1800.0, seed=3, pause_s=15.0)
    traj = drone_trajectories(wps, 1800.0, 30.0)
    table = find_windows(traj, LinkGeometry(max_range_km=1.0, occlusion=False))
    t = np.arange(0.0, 1800.0 + 1e-9, 0.25)
    pos = np.stack([_interp(w, t) for w in wps])
    edges = 0
    for a in range(8):
        for b in range(a + 1, 8):
            vis = np.linalg.norm(pos[a] - pos[b], axis=1) <= 1.0
            ref = windows_from_samples(t, vis)
            got = table.pair(a, b)
            ref = [(s, e) for s, e in ref if e - s > 0.5]  # sub-sample blips cannot be compared
            mine = [(s, e) for s, e in zip(got.t_start_s, got.t_end_s) if e - s > 0.5]
            assert len(ref) == len(mine)
            for (rs, re), (ms, me) in zip(ref, mine):
                assert abs(rs - ms) <= 0.25 + 1e-6 and abs(re - me) <= 0.25 + 1e-6
                edges += 2
    assert edges > 20


def test_waypoint_csv_round_trip_and_errors(tmp_path):
    wps = random_waypoints(2, 1.0, 10.0, 120.0, seed=0)
    p = write_waypoints_csv(tmp_path / "w.csv", wps)
    back = read_waypoints_csv(p)
    assert [w.name for w in back] == [w.name for w in wps]
    for got, want in zip(back, wps, strict=True):  # every drone, every waypoint: times and positions
        assert got.t_s.shape == want.t_s.shape and got.xyz_km.shape == want.xyz_km.shape
        assert np.allclose(got.t_s, want.t_s, rtol=0.0, atol=5e-4)  # written to the millisecond
        assert np.allclose(got.xyz_km, want.xyz_km, rtol=0.0, atol=1e-6)  # written to the millimetre
    bad = tmp_path / "bad.csv"
    bad.write_text("node_id,t_s,x_km,y_km,z_km\na,0,0,0,0\na,10,1,x,0\n")
    with pytest.raises(ContactError, match=r"bad.csv:3: .*numbers"):
        read_waypoints_csv(bad)
    bad.write_text("node_id,t_s,x_km,y_km,z_km\na,10,0,0,0\na,5,1,1,0\n")
    with pytest.raises(ContactError, match=r"bad.csv:3: times of node 'a' must increase"):
        read_waypoints_csv(bad)
    bad.write_text("id,t,x,y,z\n")
    with pytest.raises(ContactError, match=r"bad.csv:1: expected header"):
        read_waypoints_csv(bad)


def test_waypoint_csv_with_a_bom_is_read_and_a_huge_one_refused_unread(tmp_path, monkeypatch):
    """Excel's "CSV UTF-8" begins with a byte-order mark: it stuck to node_id and the file was
    refused with 'expected header node_id,... got node_id,...' (the mark is invisible). A file over
    MAX_WAYPOINT_BYTES is refused before it is read."""
    import contact_sim.drones as drones
    p = tmp_path / "excel.csv"
    p.write_bytes(b"\xef\xbb\xbfnode_id,t_s,x_km,y_km,z_km\r\na,0,0,0,0.1\r\na,10,1,0,0.1\r\n")
    assert [w.name for w in read_waypoints_csv(p)] == ["a"]
    monkeypatch.setattr(drones, "MAX_WAYPOINT_BYTES", 10)
    with pytest.raises(ContactError, match=r"excel\.csv: \d+ bytes; a waypoint file may have at most 10"):
        read_waypoints_csv(p)


def test_scenario_passes_reserved_tables_and_resolves_paths(tmp_path):
    (tmp_path / "wp.csv").write_text(
        "node_id,t_s,x_km,y_km,z_km\na,0,0,0,0.1\na,100,1,0,0.1\nb,0,0.5,0,0.1\nb,100,0.5,0,0.1\n")
    p = _write(tmp_path, """
        [scenario]
        name = "demo"
        [fol]
        rounds = 3
        [data]
        root = "anything"
        [drones]
        radio_range_km = 0.3
        waypoints_csv = "wp.csv"
        [time]
        duration_s = 100.0
        step_s = 10.0
        """)
    sc = load_contact_scenario(p)
    assert sc.reserved["fol"] == {"rounds": 3} and sc.reserved["scenario"]["name"] == "demo"
    assert sc.drones.waypoints_csv == tmp_path / "wp.csv"
    plan = compute_contacts(sc)
    # b sits at x=0.5; a passes from x=0.2 to x=0.8 (t = 20..80 s)
    assert len(plan.windows) == 1
    assert plan.windows[0].t_start_s == pytest.approx(20.0, abs=1e-6)
    assert plan.windows[0].t_end_s == pytest.approx(80.0, abs=1e-6)


def test_a_run_shorter_than_the_default_step_needs_no_step_s(tmp_path):
    """Without step_s a 30-s drone run was refused with 'time.step_s: 60.0 s exceeds
    time.duration_s', naming a field the file never set; the default grid is now at most the
    run, and a step_s the file sets is still checked against it."""
    (tmp_path / "wp.csv").write_text("node_id,t_s,x_km,y_km,z_km\na,0,0,0,0.1\na,30,1,0,0.1\n"
                                     "b,0,0.5,0,0.1\nb,30,0.5,0,0.1\n")
    text = """
        [drones]
        radio_range_km = 0.3
        waypoints_csv = "wp.csv"
        [time]
        duration_s = 30.0
        """
    sc = load_contact_scenario(_write(tmp_path, text))
    assert sc.time.step_s == 30.0
    assert len(compute_contacts(sc).windows) == 1
    with pytest.raises(ContactError, match=r"time.step_s: 60.0 s exceeds time.duration_s \(30.0 s\)"):
        load_contact_scenario(_write(tmp_path, text + "        step_s = 60.0\n"))


@pytest.mark.parametrize("patch, match", [
    (("[rounds]", "[bogus]\nx = 1\n[rounds]"), "unknown top-level key 'bogus'"),
    (("rate_bps = 1e8", "rate_bps = 1e8\nspeed = 3"), r"link: unknown key 'speed'"),
    (("planes = 3", "planes = 5"), "constellation.planes: 5 planes do not divide 12"),
    (("step_s = 60.0", "step_s = 0.0"), "time.step_s: expected a positive"),
    (("duration_s = 3600.0", "duration_s = -1.0"), "time.duration_s: expected a positive"),
    (("max_range_km = 5000.0", ""), r"link.max_range_km: missing"),
    (("kind = \"walker-delta\"", "kind = \"walker-gamma\""), "constellation.kind: expected one of"),
    (("total = 12", "total = \"12\""), "constellation.total: expected an integer"),
    # a link field of the other model was silently ignored (e.g. Shannon parameters without model = "shannon")
    (("rate_bps = 1e8", "rate_bps = 1e8\nfrequency_hz = 2.2e9"),
     r"link.frequency_hz: only used with model = 'shannon'"),
    (("model = \"constant\"", "model = \"shannon\""), r"link.rate_bps: not used with model = 'shannon'"),
])
def test_scenario_errors_are_one_line(tmp_path, patch, match):
    p = _write(tmp_path, LEO.replace(*patch))
    with pytest.raises(ContactError, match=match) as exc:
        load_contact_scenario(p)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("patch, message", [
    # checked only when the shell was built: the line named no file, and fol contacts --check passed it
    (("altitude_km = 550.0", "altitude_km = 99.0"), "constellation.altitude_km: expected 100..50000 km above the "
                                                    "Earth, got 99.0"),
    # asked the trajectory budget first, naming time.step_s for a satellite count sgp4 cannot number
    (("total = 12", "total = 1000000000002"), "constellation.total: expected at most 339999 satellites (numbered "
                                              "from 1; sgp4's catalog numbers end at 339999), got 1000000000002"),
])
def test_walker_ranges_are_checked_when_the_file_is_read(tmp_path, patch, message):
    p = _write(tmp_path, LEO.replace(*patch))
    with pytest.raises(ContactError) as exc:
        load_contact_scenario(p)
    assert str(exc.value) == f"{p}: {message}"


def test_a_station_named_as_a_satellite_is_refused_naming_the_file(tmp_path):
    p = _write(tmp_path, LEO + '[[ground_stations]]\nname = "WD-P01-S02"\nlat_deg = 1.0\nlon_deg = 2.0\n')
    with pytest.raises(ContactError) as exc:
        check_contact_scenario(load_contact_scenario(p))
    assert str(exc.value) == (f"{p}: ground_stations[0].name: 'WD-P01-S02' is also the name of a satellite; "
                              "node names must be unique")


_SEARCH_TOO_BIG = r"time.step_s: .* would need .* GiB for the trajectories and their window search \(limit 8 GiB\)"


@pytest.mark.parametrize("patch, match", [
    # a few characters asking for terabytes of trajectories are refused when read
    (("step_s = 60.0", "step_s = 1e-9"), _SEARCH_TOO_BIG),
    # a subnormal step made duration / step infinite: an OverflowError traceback before the size check
    (("step_s = 60.0", "step_s = 1e-320"), _SEARCH_TOO_BIG),
    # 32 million years: past the calendar, said before the grid it would make is sized
    (("duration_s = 3600.0", "duration_s = 1e15"), r"time.duration_s: 1e\+15 s from time.start \(default: "
                                                   r"constellation.epoch\) 2025-03-01T00:00:00Z end after 9999-"),
    (("count = 2", "count = 1000000000"), r"rounds.count: expected at most 10,000 rounds"),
    # squared by the window search: an OverflowError traceback after the satellites were propagated
    (("max_range_km = 5000.0", "max_range_km = 1e308"),
     r"link.max_range_km: expected a positive number of at most 2e\+07, got 1e\+308"),
    (("max_range_km = 5000.0", "max_range_km = 5000.0\nmin_elevation_deg = 95.0"),
     r"link.min_elevation_deg: expected 0..90"),
    (("count = 2", "count = 2\n[energy]\nbattery_wh = 1.0\nsolar_w = 1.0\nidle_w = 0.5\n"
                   "sunlight_step_s = 0.0001"), r"energy.sunlight_step_s: .* expected at most 2,000,000"),
])
def test_oversized_requests_are_refused_before_anything_is_built(tmp_path, patch, match):
    import tracemalloc

    p = _write(tmp_path, LEO.replace(*patch))
    tracemalloc.start()
    try:
        with pytest.raises(ContactError, match=match) as exc:
            load_contact_scenario(p)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(exc.value).startswith(f"{p}: ") and "\n" not in str(exc.value)
    assert peak < 20e6


DRONES = """
[drones]
count = 3
radio_range_km = 1.0

[time]
duration_s = 600.0
step_s = 10.0
"""


@pytest.mark.parametrize("text, patch, match", [
    # magnitudes no swarm has: a typing mistake, refused when read (1e200 overflowed the window search)
    (DRONES, ("count = 3", "count = 3\narea_km = 1e200"), r"drones.area_km: expected a positive number of at most 1000, got 1e\+200"),
    (DRONES, ("count = 3", "count = 3\naltitude_km = -5e3"), r"drones.altitude_km: expected a number in -1000..1000"),
    (DRONES, ("radio_range_km = 1.0", "radio_range_km = 1e200"), r"drones.radio_range_km: expected a positive number of at most 1000, got 1e\+200"),
    # a random-waypoint speed was only > 0 (missions already took 0.01..1000 m/s): at 1e7 m/s fol contacts
    # ended in an OverflowError traceback drawing the tracks
    (DRONES, ("count = 3", "count = 3\nspeed_m_s = 1e7"), r"^.*s\.toml: drones.speed_m_s: expected a number in "
                                                        r"0\.01\.\.1000, got 10000000\.0$"),
    (DRONES, ("count = 3", "count = 3\nspeed_m_s = 1e-9"), r"drones.speed_m_s: expected a number in 0\.01\.\.1000"),
    (LEO, ("max_range_km = 5000.0", "max_range_km = 5000.0\ngrazing_altitude_km = 1e160"),
     r"link.grazing_altitude_km: expected a number in 0..50000, got 1e\+160"),
    (LEO, ("[rounds]", "[[ground_stations]]\nlat_deg = 1.0\nlon_deg = 2.0\nelevation_m = 1e9\n[rounds]"),
     r"ground_stations\[0\].elevation_m: expected a number in -1000..10000"),
    # a rate no link has (1e308 bit/s was accepted, its capacities held at 2**62 bytes)
    (LEO, ("rate_bps = 1e8", "rate_bps = 1e308"),
     r"\.toml: link.rate_bps: expected a positive number of at most 1e\+15, got 1e\+308$"),
    (LEO, ("rate_bps = 1e8", "rate_bps = 1e8\nmax_rate_bps = 2e16"),
     r"link.max_rate_bps: expected a positive number of at most 1e\+15, got 2e\+16"),
    # Shannon fields no terminal has: 4000 dBW overflowed the SNR to inf ('fol contacts --ion' then died on
    # a NaN rate), a 1e300 Hz band gave 0 bit/s (1 + SNR rounded to 1)
    (LEO, ('model = "constant"\nrate_bps = 1e8', 'model = "shannon"\ntx_power_dbw = 4000.0'),
     r"link.tx_power_dbw: expected a number in -100..100, got 4000"),
    (LEO, ('model = "constant"\nrate_bps = 1e8', 'model = "shannon"\nbandwidth_hz = 1e300'),
     r"link.bandwidth_hz: expected a number in 1..1e\+16, got 1e\+300"),
    (LEO, ('model = "constant"\nrate_bps = 1e8', 'model = "shannon"\nbandwidth_hz = 1e12\nfrequency_hz = 26e9'),
     r"link.bandwidth_hz: 1e\+12 Hz exceeds the carrier \(link.frequency_hz = 2.6e\+10 Hz\)"),
])
def test_absurd_magnitudes_are_refused_when_read(tmp_path, text, patch, match):
    p = _write(tmp_path, text.replace(*patch))
    with pytest.raises(ContactError, match=match) as exc:
        load_contact_scenario(p)
    assert "\n" not in str(exc.value)


def test_a_pause_below_the_clocks_resolution_is_no_pause():
    """pause_s = 1e-20 added a waypoint at the same time as the one before: a 0/0 speed, a NaN
    velocity and numpy's RuntimeWarning on stderr. Such a pause is no pause."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        wps = random_waypoints(2, area_km=1.0, speed_m_s=10.0, duration_s=600.0, seed=1, pause_s=1e-20)
        traj = drone_trajectories(wps, 600.0, 10.0)
    assert all(np.all(np.diff(w.t_s) > 0) for w in wps)
    assert np.isfinite(traj.vel_right).all() and np.isfinite(traj.vel_left).all()
    plain = random_waypoints(2, area_km=1.0, speed_m_s=10.0, duration_s=600.0, seed=1)
    assert all(np.array_equal(a.t_s, b.t_s) for a, b in zip(wps, plain))


@pytest.mark.parametrize("bounds", ["[0.0, nan]", "[nan, 600.0]", "[0.0, 300.0, nan]"])
def test_a_nan_round_boundary_is_refused_when_read(tmp_path, bounds):
    """NaN compares False, so it passed the 'strictly increasing' and 'within the horizon'
    checks: `fol contacts --check` and `fol simulate --check` said OK, and the run stopped
    only after the window search, when the plan was built."""
    p = _write(tmp_path, DRONES + f"\n[rounds]\nboundaries_s = {bounds}\n")
    with pytest.raises(ContactError, match=r"\.toml: rounds.boundaries_s: expected a list of at least two "
                                           r"finite numbers \(s\)$"):
        load_contact_scenario(p)


@pytest.mark.parametrize("big", [2**64, 10**400], ids=["2**64", "10**400"])
def test_a_round_boundary_of_64_bits_or_more_is_one_line(tmp_path, big):
    """numpy's isfinite takes no integer of 64 bits or more: such a boundary was a TypeError traceback."""
    p = _write(tmp_path, DRONES + f"\n[rounds]\nboundaries_s = [0, {big}]\n")
    with pytest.raises(ContactError, match=r"\.toml: rounds.boundaries_s: expected "):
        load_contact_scenario(p)


@pytest.mark.parametrize("count", [1_000_001, 10**400], ids=["1e6+1", "10**400"])
def test_a_drone_count_beyond_a_million_is_refused_when_read(tmp_path, count):
    """10**400 drones made the grid estimate an OverflowError traceback; far fewer already
    exceed the trajectory budget (each drone's turns are samples of every drone)."""
    p = _write(tmp_path, DRONES.replace("count = 3", f"count = {count}"))
    with pytest.raises(ContactError, match=r"\.toml: drones\.count: expected an integer <= 1000000, got "):
        load_contact_scenario(p)


@pytest.mark.parametrize("start, match", [
    ('"0001-01-01T00:00:00+01:00"', r"time\.start: expected a time within the years 1\.\.9999 in UTC, got "),
    ("0001-01-01T00:00:00+01:00", r"time\.start: expected a time within the years 1\.\.9999 in UTC, got "),
    ('"9999-12-31T23:00:00-02:00"', r"time\.start: expected a time within the years 1\.\.9999 in UTC, got "),
    ('"9999-12-31T23:59:00Z"', r"time\.duration_s: 600 s from time\.start 9999-12-31T23:59:00Z end after "
                               r"9999-12-31T23:59:59Z"),
], ids=["year-0-in-utc", "toml-datetime", "year-10000-in-utc", "horizon-past-9999"])
def test_a_start_outside_the_years_a_timestamp_names_is_refused_when_read(tmp_path, start, match):
    """Converting such a start to UTC was an OverflowError traceback; a horizon ending after
    9999 passed the check and stopped `fol contacts` with one when it wrote the windows' times."""
    p = _write(tmp_path, DRONES.replace("[time]", f"[time]\nstart = {start}"))
    with pytest.raises(ContactError, match=r"\.toml: " + match):
        load_contact_scenario(p)


def test_a_horizon_past_9999_from_the_constellation_epoch_names_where_its_start_came_from(tmp_path):
    """Without time.start a Walker shell starts at its epoch; the refusal of a horizon past 9999
    said "from time.start", a field the file does not have."""
    p = _write(tmp_path, LEO.replace('epoch = "2025-03-01T00:00:00Z"', 'epoch = "9999-12-31T23:30:00Z"'))
    with pytest.raises(ContactError) as exc:
        load_contact_scenario(p)
    assert str(exc.value) == (f"{p}: time.duration_s: 3600 s from time.start (default: constellation.epoch) "
                              "9999-12-31T23:30:00Z end after 9999-12-31T23:59:59Z, the last time an ISO-8601 UTC "
                              "stamp names")


def _hdtn_pair(end: int) -> str:
    return json.dumps({"contacts": [{"source": a, "dest": b, "startTime": 0, "endTime": end, "rateBitsPerSec": 8000}
                                    for a, b in ((1, 2), (2, 1))]})


@pytest.mark.parametrize("name, text, time, message", [
    ("p.ion", "# fol-swarm contact plan\n# start 2030-01-01T00:00:00Z\na contact +0 +50 1 2 1000\n"
     "a contact +0 +50 2 1 1000\n", "duration_s = 3e11", "s.toml: time.duration_s: 3e+11 s from the start of "
     "contacts.plan_file ({plan}) 2030-01-01T00:00:00Z end after 9999-12-31T23:59:59Z, the last time an ISO-8601 UTC "
     "stamp names; shorten time.duration_s"),
    ("p.json", _hdtn_pair(3000), 'start = "9999-12-31T23:50:00Z"\nduration_s = 60.0', "s.toml: {plan}: contacts[0]: "
     "contact: 3000 s from the plan's start 9999-12-31T23:50:00Z end after 9999-12-31T23:59:59Z, the last time an "
     "ISO-8601 UTC stamp names"),
    ("p.ion", "# fol-swarm contact plan\n# start 9999-12-31T23:59:00Z\na contact +0 +3000 1 2 1000\n",
     "duration_s = 3600.0", "s.toml: {plan}:3: '+0' (0 s after the plan start) is after ION's latest time, "
     "2038-01-19T03:14:07Z (ionadmin's MAX_POSIX_TIME; the plan starts at 9999-12-31T23:59:00Z); expected times by then"),
], ids=["horizon-from-the-plans-start", "window-past-9999", "an-ion-plan-past-2038"])
def test_an_imported_plan_reaching_past_9999_is_refused_by_the_check(tmp_path, capsys, name, text, time, message):
    """An ION plan whose '# start' line gave t = 0 near the calendar's end, or whose windows end after
    it, passed `fol contacts --check`; writing contacts.csv then stopped with an OverflowError traceback.
    A contact ending after it is refused by the import, by the check of the horizon's end, naming its line or
    record. (An ION plan can no longer start near the calendar's end: a time past 2038 is refused by the import,
    as ionadmin refuses it, in one line too; the window past 9999 is an HDTN plan's now.)"""
    plan = tmp_path / name
    plan.write_text(text)
    p = _write(tmp_path, f'[contacts]\nplan_file = "{name}"\n[time]\n{time}\n')
    parser = argparse.ArgumentParser()
    add_contacts_parser(parser.add_subparsers())
    for extra in (["--check"], ["--no-plot", "--out", str(tmp_path / "out")]):
        assert run_contacts(parser.parse_args(["contacts", str(p), *extra])) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.endswith(f" contacts: error: {tmp_path}/" + message.format(plan=plan) + "\n"), err
    assert not (tmp_path / "out").exists()
    plan = tmp_path / "p.json"
    plan.write_text(_hdtn_pair(50))  # within the calendar
    p.write_text('[contacts]\nplan_file = "p.json"\n[time]\nstart = "9999-12-31T23:50:00Z"\nduration_s = 59.0\n')
    assert run_contacts(parser.parse_args(["contacts", str(p), "--no-plot", "--out", str(tmp_path / "out")])) == 0
    assert "9999-12-31T23:5" in (tmp_path / "out" / "contacts.csv").read_text()


def test_an_hdtn_plan_reaching_past_9999_is_refused_by_the_same_check_naming_its_record(tmp_path):
    """The check of a contact's end is the import's, for HDTN's JSON as for ION's text: the record named."""
    plan = tmp_path / "p.json"
    plan.write_text(json.dumps({"contacts": [
        {"source": 1, "dest": 2, "startTime": 0, "endTime": 60, "rateBitsPerSec": 8000},
        {"source": 2, "dest": 1, "startTime": 0, "endTime": 3000, "rateBitsPerSec": 8000}]}))
    start = dt.datetime(9999, 12, 31, 23, 50, tzinfo=dt.timezone.utc)
    with pytest.raises(ContactError) as exc:
        read_plan(plan, start=start)
    assert str(exc.value) == (f"{plan}: contacts[1]: contact: 3000 s from the plan's start 9999-12-31T23:50:00Z end "
                              "after 9999-12-31T23:59:59Z, the last time an ISO-8601 UTC stamp names")
    last = dt.datetime(9999, 12, 31, 23, 9, 59, tzinfo=dt.timezone.utc)  # its last contact then ends at 23:59:59
    assert read_plan(plan, start=last).windows.t_end_s.max() == 3000.0


def test_a_waypoint_far_outside_the_local_frame_is_refused(tmp_path):
    csv = tmp_path / "wp.csv"
    csv.write_text("node_id,t_s,x_km,y_km,z_km\na,0,0,0,0.1\na,10,1e200,0,0.1\n")
    with pytest.raises(ContactError, match=r"wp.csv:3: x_km, y_km, z_km must lie within 1000 km"):
        read_waypoints_csv(csv)


def test_drone_waypoint_times_count_toward_the_grid(tmp_path):
    """Random-waypoint drones add every turn to the grid: a long flight with a
    coarse step is refused on the waypoints, not attempted."""
    p = _write(tmp_path, """
        [drones]
        count = 12
        radio_range_km = 1.0
        area_km = 4.0
        speed_m_s = 15.0
        [time]
        duration_s = 1e10
        step_s = 1e9
        """)
    with pytest.raises(ContactError, match=r"time.duration_s: .* \(every waypoint time is a sample\)"):
        load_contact_scenario(p)
    with pytest.raises(ContactError, match=r"GiB for the trajectories and their window search"):
        random_waypoints(12, 4.0, 15.0, 1e10, seed=0)
    # the example's size passes, and the estimate is of the right order
    from contact_sim.drones import expected_turns

    wps = random_waypoints(12, 4.0, 15.0, 3600.0, seed=0)
    drawn = sum(w.t_s.size for w in wps)
    assert 0.5 * drawn < expected_turns(12, 4.0, 15.0, 3600.0) < 2.0 * drawn


def test_ground_station_names_are_unique(tmp_path):
    """Names key the plan's nodes (batteries, learners, ION headers): a station may share
    neither another station's name nor a satellite's."""
    gs = '\n[[ground_stations]]\nname = "{}"\nlat_deg = 0.0\nlon_deg = 0.0\n'
    p = _write(tmp_path, LEO + gs.format("Matera") + gs.format("Matera"))
    with pytest.raises(ContactError, match=r"ground_stations\[1\]\.name: 'Matera' is already the name of "
                                           r"ground_stations\[0\]"):
        load_contact_scenario(p)
    p = _write(tmp_path, LEO + gs.format("Matera") + gs.format("WD-P01-S02"))
    with pytest.raises(ContactError, match=r"ground_stations\[1\]\.name: 'WD-P01-S02' is also the name of "
                                           r"a satellite"):
        compute_contacts(load_contact_scenario(p))


def test_twenty_thousand_ground_stations_are_checked_for_twins_in_linear_time():
    """Each station's name was compared with every earlier one's: a scenario of 20,000 stations (1 MB)
    took 17 s to validate, 60,000 (3 MB, under the 4 MB a scenario may have) minutes."""
    doc = tomllib.loads(LEO)
    doc["ground_stations"] = [{"name": f"GS {i}", "lat_deg": 0.0, "lon_deg": 0.0} for i in range(20_000)]
    t0 = time.perf_counter()
    assert len(parse_contact_scenario(doc, ".").ground_stations) == 20_000
    assert time.perf_counter() - t0 < 2.0  # 0.1 s; 17 s when each name was compared with every earlier one
    doc["ground_stations"].append({"name": "GS 7", "lat_deg": 1.0, "lon_deg": 1.0})
    with pytest.raises(ContactError, match=r"ground_stations\[20000\]\.name: 'GS 7' is already the name of "
                                           r"ground_stations\[7\]"):
        parse_contact_scenario(doc, ".")


@pytest.mark.parametrize("name", ["", "  ", " Matera", "Matera ", "Mat  era", "Mat\\tera"])
def test_ground_station_name_must_survive_the_plan_headers(tmp_path, name):
    """An empty station name was accepted and its ION header '# node N  ground_station' read back
    as a learner named 'ground_station'; whitespace the header cannot carry failed only at
    --ion export, after the window search. Both are refused when the scenario is read."""
    gs = f'\n[[ground_stations]]\nname = "{name}"\nlat_deg = 0.0\nlon_deg = 0.0\n'
    with pytest.raises(ContactError, match=r"ground_stations\[0\]\.name: expected a name with single spaces "
                                           r"between words"):
        load_contact_scenario(_write(tmp_path, LEO + gs))
    ok = '\n[[ground_stations]]\nname = "Matera (ASI)"\nlat_deg = 0.0\nlon_deg = 0.0\n'
    assert [g.name for g in load_contact_scenario(_write(tmp_path, LEO + ok)).ground_stations] == ["Matera (ASI)"]


def test_a_node_name_over_200_characters_is_refused_where_it_is_read(tmp_path):
    """A ground station, a waypoint CSV's drone or an ION plan's header node named with 128 kB
    was accepted, and each table and message the run writes carried the name whole."""
    gs = '\n[[ground_stations]]\nname = "{}"\nlat_deg = 0.0\nlon_deg = 0.0\n'
    with pytest.raises(ContactError, match=r"s\.toml: ground_stations\[0\]\.name: expected a name of at most 200 "
                                           r"characters, got 131,072: 'xxx"):
        load_contact_scenario(_write(tmp_path, LEO + gs.format("x" * 131_072)))
    assert [g.name for g in load_contact_scenario(_write(tmp_path, LEO + gs.format("x" * 200))).ground_stations] \
        == ["x" * 200]
    csv_path = tmp_path / "w.csv"
    csv_path.write_text(f"node_id,t_s,x_km,y_km,z_km\n{'d' * 201},0,0,0,0\n")
    with pytest.raises(ContactError, match=r"w\.csv:2: node_id: expected a name of at most 200 characters, got 201"):
        read_waypoints_csv(csv_path)
    ion = "# fol-swarm contact plan\n# node 1 {} satellite\na contact +0 +60 1 2 1000\n"
    with pytest.raises(ContactError, match=r"^p\.ion:2: node 1: expected a name of at most 200 characters, got 201"):
        parse_ion(ion.format("n" * 201), "p.ion")
    assert parse_ion(ion.format("n" * 200), "p.ion").names == {1: "n" * 200}


def test_negative_drone_seed_is_one_line(tmp_path, capsys):
    """numpy's default_rng refuses a negative seed with a bare ValueError: it came out of
    `fol contacts --check` as a traceback; now the scenario check names drones.seed."""
    doc = {"drones": {"count": 3, "radio_range_km": 1.0, "seed": -1}, "time": {"duration_s": 600.0}}
    with pytest.raises(ContactError, match=r"drones\.seed: expected an integer >= 0, got -1"):
        parse_contact_scenario(doc, tmp_path)
    p = _write(tmp_path, "[drones]\ncount = 3\nradio_range_km = 1.0\nseed = -1\n[time]\nduration_s = 600.0\n")
    parser = argparse.ArgumentParser()
    add_contacts_parser(parser.add_subparsers())
    args = parser.parse_args(["contacts", str(p), "--check"])
    assert run_contacts(args) == 2
    err = capsys.readouterr().err
    assert "drones.seed" in err and len(err.strip().splitlines()) == 1


def test_scenario_needs_exactly_one_node_source():
    with pytest.raises(ContactError, match="exactly one of"):
        parse_contact_scenario({"time": {"duration_s": 10.0}}, ".")


def test_tle_scenario(tmp_path):
    from orbits import walker_delta, write_tle

    write_tle(tmp_path / "shell.tle", walker_delta(6, 2, 1, 550.0, 53.0, "2025-03-01T00:00:00Z"))
    p = _write(tmp_path, """
        [constellation]
        kind = "tle"
        tle_file = "shell.tle"
        [time]
        start = "2025-03-01T00:00:00Z"
        duration_s = 1800.0
        [link]
        max_range_km = 4000.0
        """)
    plan = compute_contacts(load_contact_scenario(p))
    assert plan.n_nodes == 6 and len(plan.windows) > 0
    # the TLE file's satellites are the Walker shell's: same names, same windows (TLE rounding: < 1 ms)
    walker = ('kind = "walker-delta"\ntotal = 6\nplanes = 2\nphasing = 1\naltitude_km = 550.0\n'
              'inclination_deg = 53.0\nepoch = "2025-03-01T00:00:00Z"')
    text = p.read_text()
    assert 'kind = "tle"\ntle_file = "shell.tle"' in text
    direct = compute_contacts(load_contact_scenario(
        _write(tmp_path, text.replace('kind = "tle"\ntle_file = "shell.tle"', walker), "direct.toml")))
    assert plan.node_names == direct.node_names == [f"WD-P0{i}-S0{k}" for i in range(2) for k in range(3)]
    w, d = plan.windows, direct.windows
    assert (w.a.tolist(), w.b.tolist()) == (d.a.tolist(), d.b.tolist())
    assert np.allclose(w.t_start_s, d.t_start_s, atol=1e-3) and np.allclose(w.t_end_s, d.t_end_s, atol=1e-3)
    # the grid is checked once the file says how many satellites there are, before propagation:
    # 2e7 samples of one node pass when the scenario is read; of six nodes they do not
    p.write_text(p.read_text().replace("duration_s = 1800.0", "duration_s = 2e7\nstep_s = 1.0"))
    with pytest.raises(ContactError, match=r"x 6 node\(s\) would need"):
        compute_contacts(load_contact_scenario(p))
    (tmp_path / "shell.tle").write_text("garbage\n")
    with pytest.raises(ContactError, match="shell.tle:1"):
        compute_contacts(load_contact_scenario(p))


def test_elements_far_from_the_horizon_are_warned_about(tmp_path, caplog):
    """A TLE years older than time.start still propagates (SGP4 reports no error) but its
    positions are fiction: a warning names the satellite and the age; recent elements give none."""
    import logging

    from orbits import walker_delta, write_tle

    write_tle(tmp_path / "shell.tle", walker_delta(6, 2, 1, 550.0, 53.0, "2020-03-01T00:00:00Z"))
    text = """
        [constellation]
        kind = "tle"
        tle_file = "shell.tle"
        [time]
        start = "2025-03-01T00:00:00Z"
        duration_s = 600.0
        [link]
        max_range_km = 4000.0
        """
    with caplog.at_level(logging.WARNING, logger="contact_sim.trajectory"):
        compute_contacts(load_contact_scenario(_write(tmp_path, text)))
    assert "6 of 6 satellites have elements more than 30 days from the horizon (WD-P00-S00: 1826 days)" \
        in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="contact_sim.trajectory"):
        compute_contacts(load_contact_scenario(_write(tmp_path, text.replace("2025-03-01", "2020-03-20"))))
    assert "elements more than" not in caplog.text


def _cli(argv):
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd")
    add_contacts_parser(sub)
    args = parser.parse_args(argv)
    return run_contacts(args)


def test_cli_writes_csv_png_and_summary(tmp_path, capsys):
    p = _write(tmp_path, LEO)
    out = tmp_path / "out"
    assert _cli(["contacts", str(p), "--out", str(out), "--json"]) == 0
    text = capsys.readouterr().out
    assert (out / "contacts.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the CSV and the JSON hold the same windows, and the summary states their figures
    import csv
    import json

    with open(out / "contacts.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    doc = json.loads((out / "contacts.json").read_text())
    assert len(rows) == len(doc["windows"]) > 10
    assert [(int(r["a"]), int(r["b"]), float(r["t_start_s"])) for r in rows] == [
        (w["a"], w["b"], pytest.approx(w["t_start_s"], abs=1e-3)) for w in doc["windows"]]
    per_node = np.bincount([int(r[k]) for r in rows for k in ("a", "b")], minlength=12)
    assert "(constellation, 12 nodes, 3600 s, 2 round(s))" in text
    assert f"windows    {len(rows)}  (" in text
    assert f"per node   mean {per_node.mean():.1f}, min {per_node.min()}, max {per_node.max()}" in text
    printed = float(text.split("duration   mean ", 1)[1].split(" s,", 1)[0])
    assert printed == pytest.approx(np.mean([float(r["duration_s"]) for r in rows]), abs=0.051)


def test_cli_user_error_is_one_line(tmp_path, capsys):
    p = _write(tmp_path, LEO.replace("step_s = 60.0", "step_s = -5.0"))
    assert _cli(["contacts", str(p), "--no-plot"]) == 2
    err = capsys.readouterr().err.strip()
    assert "contacts: error: " in err and f"{p}: time.step_s" in err and "\n" not in err


def test_a_waypoint_csv_the_csv_module_refuses_is_one_line(tmp_path):
    """A quote left open makes its field run past the csv module's limit: that was a
    _csv.Error traceback."""
    csv = tmp_path / "wp.csv"
    csv.write_text("node_id,t_s,x_km,y_km,z_km\na,0,0,0,0.1\n\"b" + "x" * 140_000 + "\n")
    with pytest.raises(ContactError, match=r"wp.csv:\d+: not a valid CSV record .*field limit") as exc:
        read_waypoints_csv(csv)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("kind, article", [("tle", "a TLE"), ("omm", "an OMM")])
def test_an_element_set_constellation_without_a_start_names_its_kind(tmp_path, kind, article):
    (tmp_path / f"shell.{kind}").write_text("")
    p = _write(tmp_path, f"""
        [constellation]
        kind = "{kind}"
        {kind}_file = "shell.{kind}"
        [time]
        duration_s = 1800.0
        """)
    with pytest.raises(ContactError) as exc:
        load_contact_scenario(p)
    assert str(exc.value).endswith(f"time.start: required with {article} constellation")


def test_every_message_names_the_file_through_brief(tmp_path, capsys):
    """A scenario's refusals named the file as it is (str(path)): a name holding a terminal escape went raw into
    the message (the CLI escaped the line it printed, a caller using the message did not) and a long path whole.
    Each now names it as brief() does, once, as orbits' and fol's readers do; the CLI prints it escaped once."""
    from swarmbase.tomlcheck import brief

    folder = tmp_path / ("d" * 80)
    folder.mkdir()
    bad_step = _write(folder, LEO.replace("step_s = 60.0", "step_s = -5.0"), name="s\x1b[2J" + "x" * 200 + ".toml")
    twin = _write(folder, LEO + '[[ground_stations]]\nname = "WD-P01-S02"\nlat_deg = 1.0\nlon_deg = 2.0\n',
                  name="t\x1b[2J" + "x" * 200 + ".toml")
    calls = [(bad_step, load_contact_scenario, "time.step_s: expected a positive"),
             (bad_step, lambda p: parse_contact_scenario({"time": {}}, ".", p), "expected exactly one of"),
             (twin, lambda p: check_contact_scenario(load_contact_scenario(p)), "ground_stations[0].name: ")]
    for path, call, fragment in calls:
        with pytest.raises(ContactError) as info:
            call(path)
        msg = str(info.value)
        assert msg.startswith(f"{brief(path)}: ") and fragment in msg, msg
        assert "\x1b" not in msg and len(msg) < 400, msg
    assert _cli(["contacts", str(bad_step), "--check"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"contacts: error: {brief(bad_step)}: time.step_s" in err, err
    assert "\\x1b" in err and "\\\\x1b" not in err, err  # escaped once


@pytest.mark.parametrize("kind", ["control", "long"])
def test_the_ok_and_summary_lines_name_the_files_through_brief(kind, tmp_path, capsys):
    """fol contacts printed the scenario (the --check OK line, the summary's 'scenario' line) and each file it
    wrote ('wrote ...') as given: a newline or a terminal's escape in a name went to stdout as it is, a path of
    3,000 characters made a 3 kB line. Each line names them through brief(), as the refusals do."""
    from swarmbase.tomlcheck import brief

    folder = odd_folder(tmp_path, kind)
    p = _write(folder, LEO)
    assert _cli(["contacts", str(p), "--check"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{brief(p)}: OK — 12 satellite(s)"), lines
    out = folder / "out"
    assert _cli(["contacts", str(p), "--out", str(out), "--no-plot"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"scenario   {brief(p)}  (constellation"), lines
    assert [line for line in lines if line.startswith("wrote")] == [
        f"wrote      {brief(out / name)}" for name in ("contacts.csv", "contacts.manifest.json")], lines
    assert all(line.isprintable() and len(line) < 300 for line in lines), lines
    read = _write(out, LEO, name="contacts.csv")  # a scenario the run would replace: refused, both named
    assert _cli(["contacts", str(read), "--out", str(out), "--no-plot"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 700 and f"the scenario file {brief(read)}: is contacts.csv in " \
        f"--out {brief(out)}, which" in err, err
