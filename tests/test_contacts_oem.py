"""An OEM file as a scenario source ([constellation] kind = "oem"): the contacts, eclipses and ground
tracks of examples/leo_oem.oem equal those of the TLE file it was made from (examples/leo_oem.tle), and
what needs mean elements, or more ephemeris than the file holds, is refused in one line before any search."""

from __future__ import annotations

import datetime as dt
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest

from contact_sim import ContactError
from contact_sim.cli import main as contacts_main
from contact_sim.scenario import (build_batteries, build_constellation, build_trajectories, check_contact_scenario,
                                  compute_contacts, parse_contact_scenario, plan_from_trajectories, plane_numbers)
from orbits import (Ephemeris, OrbitError, format_omm, ground_track, orbital_planes, parse_oem_text, parse_omm_text,
                    propagate_offsets, read_oem, read_tle, utc_text, walker_delta, walker_star)

from _scenarios import tiny_fol

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
EXAMPLE = EXAMPLES / "leo_oem.toml"
OEM = {"kind": "oem", "oem_file": "leo_oem.oem"}
TLE = {"kind": "tle", "tle_file": "leo_oem.tle"}


def _doc(constellation: dict, **time) -> dict:
    doc = tomllib.loads(EXAMPLE.read_text())
    doc["constellation"] = dict(constellation)
    doc["time"] = {**doc["time"], **time}
    return doc


def _scenario(constellation: dict, **time):
    return parse_contact_scenario(_doc(constellation, **time), EXAMPLES, EXAMPLE)


# measured (off the OEM's 60 s data points: start 12:30:20, 45 s grid): 10 windows each, the same pairs,
# starts within 8.3e-5 s and ends within 4.8e-5 s; 0.8 s from the OEM (interpolation), 0.2 s from the TLE
def test_contacts_from_the_oem_equal_those_from_its_tle_within_a_second() -> None:
    time = {"start": "2008-09-20T12:30:20Z", "step_s": 45.0}
    from_oem = compute_contacts(_scenario(OEM, **time))
    from_tle = compute_contacts(_scenario(TLE, **time))
    a, b = from_oem.windows, from_tle.windows
    assert from_oem.node_names == from_tle.node_names == ["ALPHA", "BRAVO", "CHARLIE", "Santiago", "Hartebeesthoek"]
    assert len(a) == len(b) >= 8
    assert {(int(x), int(y)) for x, y in zip(a.a, a.b)} >= {(0, 2), (0, 4), (1, 4), (2, 3), (2, 4)}  # stations too
    assert np.array_equal(a.a, b.a) and np.array_equal(a.b, b.b)
    assert np.abs(a.t_start_s - b.t_start_s).max() < 1.0 and np.abs(a.t_end_s - b.t_end_s).max() < 1.0
    assert np.abs(a.t_start_s - b.t_start_s).max() < 1e-3  # what it measures: Hermite 5 on 60 s points, in GCRF


@pytest.mark.parametrize("frame", ["GCRF", "ITRF"])
def test_contacts_from_an_xml_oem_equal_those_from_the_kvn_oem_of_the_same_states(tmp_path: Path,
                                                                                   frame: str) -> None:
    """kind = "oem" takes an OEM in NDM/XML (oem_file = "....xml") as it takes KVN: the same states, written in
    both layouts, give the same contact windows to the last bit."""
    from orbits import write_oem

    sats = read_tle(EXAMPLES / "leo_oem.tle")
    start = dt.datetime(2008, 9, 20, 12, 30, tzinfo=dt.timezone.utc)
    kvn = write_oem(tmp_path / "leo.oem", sats, start, 7200.0, 60.0, frame=frame)
    xml = write_oem(tmp_path / "leo.xml", sats, start, 7200.0, 60.0, frame=frame)
    assert xml.read_text().startswith("<?xml") and kvn.read_text().startswith("CCSDS_OEM_VERS")
    time = {"start": "2008-09-20T12:30:20Z", "duration_s": 7000.0, "step_s": 45.0}
    from_kvn = compute_contacts(_scenario({"kind": "oem", "oem_file": str(kvn)}, **time))
    from_xml = compute_contacts(_scenario({"kind": "oem", "oem_file": str(xml)}, **time))
    a, b = from_xml.windows, from_kvn.windows
    assert from_xml.node_names == from_kvn.node_names == ["ALPHA", "BRAVO", "CHARLIE", "Santiago", "Hartebeesthoek"]
    assert len(a) == len(b) >= 4
    for key in ("a", "b", "t_start_s", "t_end_s"):
        assert np.array_equal(getattr(a, key), getattr(b, key)), key


def test_eclipses_ground_tracks_and_czml_come_from_the_oem_positions(tmp_path: Path) -> None:
    from contact_sim.czml import write_czml

    oem, tle = _scenario(OEM, duration_s=6000.0), _scenario(TLE, duration_s=6000.0)
    eph = build_constellation(oem)
    assert isinstance(eph, Ephemeris) and eph.names == ["ALPHA", "BRAVO", "CHARLIE"]
    traj = build_trajectories(oem)
    plan = plan_from_trajectories(traj, oem)
    got, want = build_batteries(oem, plan), build_batteries(tle, compute_contacts(tle))
    assert sorted(got) == sorted(want) == [0, 1, 2]  # the satellites; stations have none
    for node in got:
        assert len(got[node].eclipses) == len(want[node].eclipses) >= 1
        assert np.allclose(got[node].eclipses, want[node].eclipses, atol=0.2)  # the search's 0.1 s tolerance
    offsets = np.arange(0.0, 6000.0, 97.0)
    gt_oem, gt_tle = ground_track(eph, oem.time.start, offsets), ground_track(read_tle(EXAMPLES / "leo_oem.tle"),
                                                                              oem.time.start, offsets)
    assert np.abs(gt_oem.lat_deg - gt_tle.lat_deg).max() < 1e-4 and gt_oem.names == gt_tle.names
    czml = write_czml(tmp_path / "c.czml", plan, traj).read_text()
    assert '"id":"node-2"' in czml and "CHARLIE" in czml


def test_a_horizon_outside_the_useable_span_is_refused_in_one_line_before_any_search(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    scn = tmp_path / "late.toml"
    text = EXAMPLE.read_text().replace('oem_file = "leo_oem.oem"', f'oem_file = "{EXAMPLES / "leo_oem.oem"}"')
    scn.write_text(text.replace('start = "2008-09-20T12:30:00Z"', 'start = "2008-09-20T13:30:00Z"'))
    monkeypatch.setattr("contact_sim.scenario.satellite_trajectories", lambda *a, **k: pytest.fail("built"))
    for extra in (["--check"], []):
        assert contacts_main(["contacts", str(scn), "--no-plot", "--out", str(tmp_path / "o"), *extra]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1, err
        assert ("time: the horizon 2008-09-20T13:30:00Z + 10800 s is not inside the useable span of ALPHA in "
                f"{EXAMPLES / 'leo_oem.oem'} (2008-09-20T12:00:00Z..2008-09-20T16:00:00Z); no ephemeris from "
                "2008-09-20T16:00:00Z") in err[0]
    assert not (tmp_path / "o").exists()
    with pytest.raises(ContactError, match=r"time: the horizon 2008-09-20T11:59:00Z \+ 600 s is not inside"):
        check_contact_scenario(_scenario(OEM, start="2008-09-20T11:59:00Z", duration_s=600.0))


def test_what_needs_mean_elements_or_a_start_is_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for option in ("omm", "tle"):
        assert contacts_main(["contacts", str(EXAMPLE), "--check", "--export-orbits", option,
                              "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and (f"--export-orbits {option} writes mean elements (a Walker shell's, or a TLE or OMM "
                                  "file's); constellation.kind = 'oem' gives states only, and none are fitted to them "
                                  "(--export-orbits oem writes the states)") in err[0], err
    doc = _doc(OEM)
    del doc["time"]["start"]
    with pytest.raises(ContactError, match=r"time.start: required with an OEM constellation$"):
        parse_contact_scenario(doc, EXAMPLES, EXAMPLE)
    for constellation, message in (({**OEM, "tle_file": "x.tle"}, "constellation.tle_file: not used with kind = 'oem'"),
                                   ({**TLE, "oem_file": "x.oem"}, "constellation.oem_file: not used with kind = 'tle'"),
                                   ({"kind": "walker-delta", "total": 4, "planes": 2, "altitude_km": 550.0,
                                     "inclination_deg": 53.0, "epoch": "2008-09-20T12:00:00Z", "oem_file": "x.oem"},
                                    "constellation.oem_file: only used with kind = 'oem'")):
        with pytest.raises(ContactError, match=message):
            parse_contact_scenario(_doc(constellation), EXAMPLES, EXAMPLE)


def test_the_example_reads_as_its_nodes_with_the_planes_of_its_tle() -> None:
    names, planes, _ = check_contact_scenario(_scenario(OEM))
    assert names == read_oem(EXAMPLES / "leo_oem.oem").names == ["ALPHA", "BRAVO", "CHARLIE"]
    assert planes == [-1, -1, -1]  # not derived unless asked (models.rule = "plane")
    # ALPHA and BRAVO share RAAN 247.46 deg (51.64 deg inclination), CHARLIE's is 25 deg further
    assert (check_contact_scenario(_scenario(OEM), derive_planes=True)[1]
            == check_contact_scenario(_scenario(TLE), derive_planes=True)[1] == [0, 0, 1])
    assert (EXAMPLES / "leo_oem.oem").stat().st_size < 200_000


def _oem_of(shell, start: dt.datetime, span_s: float, step_s: float = 60.0) -> str:
    """An OEM (TEME, UTC) of a shell's SGP4 states, one segment per satellite."""
    offsets = np.arange(0.0, span_s + step_s / 2, step_s)
    r, v = propagate_offsets(shell, start, offsets)
    iso = [utc_text(start + dt.timedelta(seconds=float(s)), "microseconds", zone="") for s in offsets]
    out = ["CCSDS_OEM_VERS = 2.0\nCREATION_DATE = 2026-06-01T00:00:00\nORIGINATOR = TESTS\n"]
    for k, name in enumerate(shell.names):
        out.append(f"META_START\nOBJECT_NAME = {name}\nOBJECT_ID = 2026-001{chr(65 + k)}\nCENTER_NAME = EARTH\n"
                   f"REF_FRAME = TEME\nTIME_SYSTEM = UTC\nSTART_TIME = {iso[0]}\nSTOP_TIME = {iso[-1]}\n"
                   "INTERPOLATION = HERMITE\nINTERPOLATION_DEGREE = 5\nMETA_STOP\n")
        out += [f"{t} " + " ".join(f"{x:.9f}" for x in (*r[k, i], *v[k, i])) + "\n" for i, t in enumerate(iso)]
    return "".join(out)


@pytest.mark.parametrize("build, total, planes", [(walker_delta, 12, 4), (walker_star, 12, 6)])
def test_an_oem_of_a_walker_shell_gets_the_shells_planes(build, total: int, planes: int) -> None:
    start = dt.datetime(2026, 6, 1, tzinfo=dt.timezone.utc)
    shell = build(total, planes, 1, 550.0, 53.0, start)
    eph = parse_oem_text(_oem_of(shell, start, 1200.0), "shell.oem")
    at = start + dt.timedelta(seconds=330.0)  # between data points: interpolated states
    assert plane_numbers(eph, at) == orbital_planes(eph, at) == shell.planes == sorted(shell.planes)
    assert len(set(shell.planes)) == planes and plane_numbers(eph) == [-1] * total
    omm = parse_omm_text(format_omm(shell), "json")  # an OMM / GP file of the shell: the same path
    assert plane_numbers(omm, at) == shell.planes and omm.planes == [-1] * total


@pytest.mark.parametrize("year", [2026, 26])  # the year 26 was named '26-06-01T00:01:00Z' (strftime): failed before
def test_a_state_with_no_orbit_normal_is_refused_in_one_line(year: int) -> None:
    start = dt.datetime(year, 6, 1, tzinfo=dt.timezone.utc)
    text = _oem_of(walker_delta(2, 1, 0, 550.0, 53.0, start), start, 600.0)
    head, rows = text.split("META_STOP\n", 1)
    rows = rows.split("META_START", 1)
    still = "".join(" ".join(line.split()[:4] + ["0.0"] * 3) + "\n" for line in rows[0].splitlines())
    eph = parse_oem_text(f"{head}META_STOP\n{still}META_START{rows[1]}", "still.oem")  # WD-P00-S00 stands still
    with pytest.raises(ContactError, match=rf"^WD-P00-S00: no orbit normal at {year:04d}-06-01T00:01:00Z \(its "
                                           r"position and velocity are parallel\), so no orbital plane$"):
        plane_numbers(eph, start + dt.timedelta(seconds=60.0))


def test_the_orbit_partition_sweeps_the_oem_satellites_swaths_as_the_tles() -> None:
    from fol.simulation.partition import orbit_assignment

    rng = np.random.default_rng(0)
    lat, lon = rng.uniform(-52.0, 52.0, 3000), rng.uniform(-180.0, 180.0, 3000)
    scn = _scenario(OEM)
    got = orbit_assignment(lat, lon, build_constellation(scn), scn.time.start, 5400.0, 200.0, rule="first")
    want = orbit_assignment(lat, lon, read_tle(EXAMPLES / "leo_oem.tle"), scn.time.start, 5400.0, 200.0, rule="first")
    assert (got >= 0).sum() > 100 and set(np.unique(got)) == {-1, 0, 1, 2}
    assert np.array_equal(got, want)



def test_the_partition_of_element_sets_and_inertial_states_keeps_the_teme_route_to_the_bit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Element sets and an OEM's GCRF states are still turned from TEME onto Skyfield's ITRS (without polar motion)
    and then WGS-84: their ground tracks and the partition are, to the bit, those of that route written out here,
    though ITRF states now skip it."""
    import fol.simulation.partition as partition
    from orbits import GroundTrack, geodetic_from_itrs, teme_to_itrs

    def teme_route(sats, start, offsets_s):
        offsets = np.asarray(offsets_s, dtype=float)
        r_teme, _ = propagate_offsets(sats, start, offsets)
        lat, lon, height = geodetic_from_itrs(teme_to_itrs(r_teme, start, offsets))
        return GroundTrack(list(sats.names), offsets, lat, lon, height)

    rng = np.random.default_rng(1)
    lat, lon = rng.uniform(-52.0, 52.0, 3000), rng.uniform(-180.0, 180.0, 3000)
    start = dt.datetime(2008, 9, 20, 12, 30, tzinfo=dt.timezone.utc)
    for sats in (read_tle(EXAMPLES / "leo_oem.tle"), read_oem(EXAMPLES / "leo_oem.oem")):
        track, route = ground_track(sats, start, np.arange(0.0, 5400.0, 12.5)), teme_route(sats, start,
                                                                                          np.arange(0.0, 5400.0, 12.5))
        for key in ("lat_deg", "lon_deg", "height_km"):
            assert np.array_equal(getattr(track, key), getattr(route, key)), key
        for rule in ("first", "uniform"):
            got = partition.orbit_assignment(lat, lon, sats, start, 5400.0, 200.0, rule=rule, seed=2)
            with monkeypatch.context() as m:
                m.setattr(partition, "ground_track", teme_route)
                want = partition.orbit_assignment(lat, lon, sats, start, 5400.0, 200.0, rule=rule, seed=2)
            assert (got >= 0).sum() > 100 and np.array_equal(got, want), rule

LEARNING = f"""
[data]
dataset = "synthetic-hurricane"
size = 600
image_size = 16
partition = "orbit"
swath_km = 400.0
acquisition_s = 20000.0
per_node = 60
min_samples = 20
{tiny_fol(distill_epochs=1, pretrain_epochs=1)}[methods]
run = ["local"]
[run]
executor = "local"
threads = 1
"""


@pytest.mark.parametrize("check", [["--check"], []], ids=["check", "run"])
def test_an_acquisition_period_past_the_oem_is_refused_in_one_line_by_the_check_and_before_pretraining(
        check: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fol.cli import main

    text = EXAMPLE.read_text().replace('oem_file = "leo_oem.oem"', f'oem_file = "{EXAMPLES / "leo_oem.oem"}"')
    (tmp_path / "s.toml").write_text('[scenario]\nname = "oem"\nseeds = [0]\n' + text + LEARNING)
    assert main(["simulate", str(tmp_path / "s.toml"), *check, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and (f"{tmp_path / 's.toml'}: data.acquisition_s: the horizon 2008-09-20T12:30:00Z + 20000 s "
                              "is not inside the useable span of ALPHA") in err[0], err
    assert not (tmp_path / "out").exists()


def test_an_acquisition_period_inside_the_oem_passes_the_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from fol.cli import main

    text = EXAMPLE.read_text().replace('oem_file = "leo_oem.oem"', f'oem_file = "{EXAMPLES / "leo_oem.oem"}"')
    (tmp_path / "s.toml").write_text('[scenario]\nname = "oem"\nseeds = [0]\n' + text
                                     + LEARNING.replace("acquisition_s = 20000.0", "acquisition_s = 12600.0"))
    assert main(["simulate", str(tmp_path / "s.toml"), "--check", "--out", str(tmp_path / "out")]) == 0
    assert ": OK — 3 learning nodes" in capsys.readouterr().out


# --- fol contacts --export-orbits oem ----------------------------------------------------------------------------

def _scenario_file(tmp_path: Path, constellation: str, **time: str) -> Path:
    """examples/leo_oem.toml in tmp_path with another [constellation] body and [time] lines, files absolute."""
    text = EXAMPLE.read_text().replace('kind = "oem"\noem_file = "leo_oem.oem"', constellation)
    for key, value in time.items():
        text = re.sub(rf"^{key} = .*$", f"{key} = {value}", text, count=1, flags=re.M)
    path = tmp_path / "scenario.toml"
    path.write_text(text)
    return path


# measured (start 12:30:20, 3 h, 45 s search grid, the export's default 60 s states): the same 10 windows as
# from the TLE, starts within 6.4e-5 s and ends within 7.3e-5 s of them (the OEM's 0.3 m between its states)
def test_contacts_of_the_exported_oem_of_tle_satellites_equal_the_tles_within_a_millisecond(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    time = {"start": "2008-09-20T12:30:20Z", "step_s": 45.0}
    scn = _scenario_file(tmp_path, f'kind = "tle"\ntle_file = "{EXAMPLES / "leo_oem.tle"}"',
                         start='"2008-09-20T12:30:20Z"', step_s="45.0")
    out = tmp_path / "out"
    assert contacts_main(["contacts", str(scn), "--no-plot", "--export-orbits", "oem", "--out", str(out)]) == 0
    assert f"wrote      {out / 'orbits.oem'}" in capsys.readouterr().out
    eph = read_oem(out / "orbits.oem")
    assert eph.names == ["ALPHA", "BRAVO", "CHARLIE"] and eph.segments[0].epochs_s.size == 10800 // 60 + 1
    from_oem = compute_contacts(_scenario({"kind": "oem", "oem_file": str(out / "orbits.oem")}, **time))
    from_tle = compute_contacts(_scenario(TLE, **time))
    a, b = from_oem.windows, from_tle.windows
    assert len(a) == len(b) >= 8 and np.array_equal(a.a, b.a) and np.array_equal(a.b, b.b)
    start_s, end_s = np.abs(a.t_start_s - b.t_start_s).max(), np.abs(a.t_end_s - b.t_end_s).max()
    assert start_s < 1e-3 and end_s < 1e-3, (start_s, end_s)


# measured (start 12:30:20, 3 h, 45 s search grid, 60 s states): the 10 windows of the EME2000 and of the ITRF
# export are the TEME export's, starts within 7.4e-7 s and 1.4e-6 s, ends within 1.6e-6 s and 3.0e-6 s of them
# (GCRF and ICRF: 1.7e-6 s, 1.4e-6 s; the files, read back, are 1.6 mm apart at most)
@pytest.mark.parametrize("frame", ["EME2000", "ITRF"])
def test_contacts_of_an_export_in_another_frame_equal_those_of_the_teme_export(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], frame: str) -> None:
    time = {"start": "2008-09-20T12:30:20Z", "step_s": 45.0}
    scn = _scenario_file(tmp_path, f'kind = "tle"\ntle_file = "{EXAMPLES / "leo_oem.tle"}"',
                         start='"2008-09-20T12:30:20Z"', step_s="45.0")
    plans = {}
    for each in ("TEME", frame):
        out = tmp_path / each
        option = ["--oem-frame", each] if each != "TEME" else []  # TEME: the default
        assert contacts_main(["contacts", str(scn), "--no-plot", "--export-orbits", "oem", *option,
                              "--out", str(out)]) == 0
        assert f"wrote      {out / 'orbits.oem'}" in capsys.readouterr().out
        text = (out / "orbits.oem").read_text()
        assert re.findall(r"^REF_FRAME = (.*)$", text, flags=re.M) == [each] * 3
        plans[each] = compute_contacts(_scenario({"kind": "oem", "oem_file": str(out / "orbits.oem")}, **time))
    a, b = plans[frame].windows, plans["TEME"].windows
    assert len(a) == len(b) >= 8 and np.array_equal(a.a, b.a) and np.array_equal(a.b, b.b)
    start_s, end_s = np.abs(a.t_start_s - b.t_start_s).max(), np.abs(a.t_end_s - b.t_end_s).max()
    assert start_s < 1e-4 and end_s < 1e-4, (start_s, end_s)


# measured (3,600 s from 12:30:20, states every 30 s re-sampled from the example's GCRF states every 60 s,
# 330 times off both grids): 0.09 m at most from the example's own interpolated positions
def test_an_oem_source_is_re_sampled_over_the_horizon(tmp_path: Path) -> None:
    scn = _scenario_file(tmp_path, f'kind = "oem"\noem_file = "{EXAMPLES / "leo_oem.oem"}"',
                         start='"2008-09-20T12:30:20Z"', duration_s="3600.0")
    out = tmp_path / "out"
    assert contacts_main(["contacts", str(scn), "--no-plot", "--export-orbits", "oem", "--oem-step-s", "30",
                          "--out", str(out)]) == 0
    text = (out / "orbits.oem").read_text()
    assert "COMMENT TEME states (re-sampled from the interpolated ephemeris of leo_oem.oem), km and km/s" in text
    got, source = read_oem(out / "orbits.oem"), read_oem(EXAMPLES / "leo_oem.oem")
    start = dt.datetime(2008, 9, 20, 12, 30, 20, tzinfo=dt.timezone.utc)
    assert [s.object_id for s in got.segments] == [s.object_id for s in source.segments]
    assert got.useable_spans()["ALPHA"] == [(start, start + dt.timedelta(seconds=3600.0))]
    assert got.segments[0].epochs_s.tolist() == np.arange(0.0, 3601.0, 30.0).tolist()
    offsets = np.arange(3.7, 3600.0, 10.9)
    err_m = np.linalg.norm(got.positions_teme_km(start, offsets) - source.positions_teme_km(start, offsets), axis=-1)
    assert err_m.max() * 1e3 < 0.5, err_m.max() * 1e3


# measured: the two layouts carry the same decimals (km to 1e-6, km/s to 1e-9), so the XML export read back is the
# KVN export's ephemeris to the last bit (epochs, positions, velocities, metadata; TEME and ITRF), and kind = "oem"
# on either file gives the same 10 windows to the last bit
@pytest.mark.parametrize("frame", ["TEME", "ITRF"])
def test_orbits_format_xml_writes_the_states_of_the_kvn_export_in_ndm_xml(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], frame: str) -> None:
    time = {"start": "2008-09-20T12:30:20Z", "step_s": 45.0}
    scn = _scenario_file(tmp_path, f'kind = "tle"\ntle_file = "{EXAMPLES / "leo_oem.tle"}"',
                         start='"2008-09-20T12:30:20Z"', step_s="45.0")
    files = {}
    for fmt, name in (("kvn", "orbits.oem"), ("xml", "orbits.oem.xml")):
        out = tmp_path / fmt
        layout = ["--orbits-format", "xml"] if fmt == "xml" else []  # KVN: the default
        assert contacts_main(["contacts", str(scn), "--no-plot", "--export-orbits", "oem", *layout, "--oem-frame",
                              frame, "--out", str(out)]) == 0
        assert f"wrote      {out / name}" in capsys.readouterr().out
        assert sorted(p.name for p in out.iterdir()) == ["contacts.csv", "contacts.manifest.json", name]
        files[fmt] = out / name
    assert files["xml"].read_text().startswith('<?xml version="1.0" encoding="UTF-8"?>\n<oem id="CCSDS_OEM_VERS"')
    assert files["kvn"].read_text().startswith("CCSDS_OEM_VERS = 2.0\n")
    kvn, xml = read_oem(files["kvn"]), read_oem(files["xml"])
    assert xml.names == kvn.names == ["ALPHA", "BRAVO", "CHARLIE"]
    for a, b in zip(xml.segments, kvn.segments, strict=True):
        assert (a.object_name, a.object_id, a.ref_frame, a.time_system, a.interpolation, a.degree, a.epoch0) == \
               (b.object_name, b.object_id, frame, "UTC", "HERMITE", 5, b.epoch0)
        assert a.epochs_s.size == 10800 // 60 + 1 and np.array_equal(a.epochs_s, b.epochs_s)
        assert np.array_equal(a.pos_km, b.pos_km) and np.array_equal(a.vel_km_s, b.vel_km_s)
    plans = {fmt: compute_contacts(_scenario({"kind": "oem", "oem_file": str(path)}, **time))
             for fmt, path in files.items()}
    a, b = plans["xml"].windows, plans["kvn"].windows
    assert len(a) == len(b) >= 8
    for column in ("a", "b", "t_start_s", "t_end_s"):
        assert np.array_equal(getattr(a, column), getattr(b, column)), column


def test_an_xml_export_that_fails_while_written_keeps_the_previous_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The disk fills half-way through orbits.oem.xml: one line naming the file, and the folder still holds the
    previous run's orbits.oem.xml and contacts.csv, byte for byte, and no part of the new ones."""
    import errno

    import orbits.oem

    scn = _scenario_file(tmp_path, f'kind = "tle"\ntle_file = "{EXAMPLES / "leo_oem.tle"}"', duration_s="600.0")
    out = tmp_path / "out"
    argv = ["contacts", str(scn), "--no-plot", "--export-orbits", "oem", "--orbits-format", "xml", "--out", str(out)]
    assert contacts_main(argv) == 0
    capsys.readouterr()
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert set(before) == {"contacts.csv", "contacts.manifest.json", "orbits.oem.xml"}
    states_text, calls = orbits.oem._states_text, []

    def full(fmt, epochs, states):
        calls.append(len(epochs))  # check_oem_export sizes one state; each satellite's are written at once
        if len(epochs) > 1 and calls.count(len(epochs)) > 1:  # the first satellite's written, then a full disk
            raise OSError(errno.ENOSPC, "No space left on device")
        return states_text(fmt, epochs, states)

    monkeypatch.setattr(orbits.oem, "_states_text", full)
    (tmp_path / "scenario.toml").write_text(scn.read_text().replace("duration_s = 600.0", "duration_s = 900.0"))
    assert contacts_main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "orbits.oem.xml" in err[0] and "No space left on device" in err[0], err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert calls.count(16) == 2  # 900 s at 60 s: the second satellite's 16 states were refused


@pytest.mark.parametrize("options, message", [
    (["--export-orbits", "oem", "--oem-step-s", "0"],
     "--export-orbits oem: --oem-step-s: expected a step of at least 0.001 s, got 0.0"),
    (["--export-orbits", "oem", "--oem-step-s", "0.01"],
     "--export-orbits oem: --oem-step-s: 0.01 s over 10800 s makes 3 x 1,080,001 states, more than the 500,000 data "
     "lines an OEM file read here holds; expected at least 0.065 s"),
    (["--export-orbits", "omm", "--oem-step-s", "30"], "--oem-step-s: only used with --export-orbits oem"),
    (["--export-orbits", "omm", "--oem-frame", "EME2000"], "--oem-frame: only used with --export-orbits oem"),
    (["--oem-frame", "GCRF"], "--oem-frame: only used with --export-orbits oem"),
    (["--orbits-format", "xml"], "--orbits-format: only used with --export-orbits omm or oem"),
    (["--export-orbits", "tle", "--orbits-format", "kvn"],
     "--orbits-format: only used with --export-orbits omm or oem (a TLE has one layout)"),
    (["--export-orbits", "oem", "--orbits-format", "json"],
     "--orbits-format: --export-orbits oem writes kvn or xml, got json"),
    # 3 x 120,001 states: 360,003 data lines, which KVN holds in 64 MiB and XML's longer state vectors do not
    (["--export-orbits", "oem", "--orbits-format", "xml", "--oem-step-s", "0.09"],
     "--export-orbits oem: --oem-step-s: 3 objects x 120,001 states make an OEM of more than 72,002,085 bytes, "
     "past the 67,108,864 read_oem reads; export fewer satellites"),
], ids=["zero", "too-many-states", "without-the-oem-export", "frame-with-omm", "frame-without-an-export",
        "format-without-an-export", "format-with-tle", "omm-format-with-oem", "xml-past-the-bytes-read"])
@pytest.mark.parametrize("check", [["--check"], []], ids=["check", "run"])
def test_a_bad_oem_step_or_frame_is_refused_in_one_line_before_the_search(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], options: list[str],
        message: str, check: list[str]) -> None:
    scn = _scenario_file(tmp_path, f'kind = "tle"\ntle_file = "{EXAMPLES / "leo_oem.tle"}"')
    monkeypatch.setattr("contact_sim.scenario.satellite_trajectories", lambda *a, **k: pytest.fail("searched"))
    assert contacts_main(["contacts", str(scn), *check, *options, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"contact_sim contacts: error: {scn}: {message}"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("frame", ["TEME", "EME2000", "GCRF", "ICRF", "ITRF"])
def test_oem_frame_takes_every_frame_write_oem_writes(frame: str) -> None:
    """--oem-frame's choices are write_oem's frames, and its help names each of them."""
    import argparse

    from contact_sim.cli import add_contacts_parser

    sub = argparse.ArgumentParser(prog="contact_sim").add_subparsers(dest="command")
    parser = add_contacts_parser(sub)
    assert parser.parse_args(["s.toml", "--export-orbits", "oem", "--oem-frame", frame]).oem_frame == frame
    action = next(a for a in parser._actions if "--oem-frame" in a.option_strings)
    assert frame in action.help.replace(",", " ").replace("(", " ").split()


def test_a_frame_oem_frame_does_not_write_is_argparses_one_line(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    scn = _scenario_file(tmp_path, f'kind = "tle"\ntle_file = "{EXAMPLES / "leo_oem.tle"}"')
    with pytest.raises(SystemExit) as exc:
        contacts_main(["contacts", str(scn), "--export-orbits", "oem", "--oem-frame", "ITRF2014", "--out",
                       str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "Traceback" not in err
    # argparse quotes the choices ('TEME', ...) on some Python versions and not on others (TEME, ...: str(), not
    # repr(), since a change of 2024 to its 'invalid choice' line, in 3.12 and 3.13 patch releases)
    choices = ", ".join(f"'?{frame}'?" for frame in ("TEME", "EME2000", "GCRF", "ICRF", "ITRF"))
    assert re.fullmatch(rf"contact_sim contacts: error: argument --oem-frame: invalid choice: 'ITRF2014' "
                        rf"\(choose from {choices}\)", err.strip().splitlines()[-1]), err
    assert not (tmp_path / "out").exists()


def test_a_layout_no_export_writes_is_argparses_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scn = _scenario_file(tmp_path, f'kind = "tle"\ntle_file = "{EXAMPLES / "leo_oem.tle"}"')
    with pytest.raises(SystemExit) as exc:
        contacts_main(["contacts", str(scn), "--export-orbits", "oem", "--orbits-format", "ndm", "--out",
                       str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "Traceback" not in err
    choices = ", ".join(f"'?{fmt}'?" for fmt in ("json", "csv", "xml", "kvn"))  # quoted or not: see above
    assert re.fullmatch(rf"contact_sim contacts: error: argument --orbits-format: invalid choice: 'ndm' "
                        rf"\(choose from {choices}\)", err.strip().splitlines()[-1]), err
    assert not (tmp_path / "out").exists()


def test_the_default_step_is_named_when_it_gives_too_few_states(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    scn = _scenario_file(tmp_path, f'kind = "tle"\ntle_file = "{EXAMPLES / "leo_oem.tle"}"', duration_s="60.0")
    assert contacts_main(["contacts", str(scn), "--check", "--export-orbits", "oem"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"contact_sim contacts: error: {scn}: --export-orbits oem: --oem-step-s (default 60): 60 s gives 2 states over "
        "60 s; HERMITE interpolation of degree 5 needs at least 3: expected a step shorter than the span"]


def test_the_check_reads_the_oem_once_when_the_acquisition_period_passes_the_horizon(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """check_acquisition_span built the satellites again, reading the OEM file a second time, because
    check_contact_scenario did not hand over those it had built: it now does, and --check reads the file once."""
    import contact_sim.scenario as scenario
    from fol.cli import main

    reads: list[Path] = []
    monkeypatch.setattr(scenario, "read_oem", lambda path, **kw: reads.append(path) or read_oem(path, **kw))
    text = EXAMPLE.read_text().replace('oem_file = "leo_oem.oem"', f'oem_file = "{EXAMPLES / "leo_oem.oem"}"')
    (tmp_path / "s.toml").write_text('[scenario]\nname = "oem"\nseeds = [0]\n' + text
                                     + LEARNING.replace("acquisition_s = 20000.0", "acquisition_s = 12600.0"))
    assert tomllib.loads(text)["time"]["duration_s"] < 12600.0  # the period passes the horizon: checked apart
    assert main(["simulate", str(tmp_path / "s.toml"), "--check", "--out", str(tmp_path / "out")]) == 0
    assert ": OK — 3 learning nodes" in capsys.readouterr().out
    assert reads == [EXAMPLES / "leo_oem.oem"]


def test_fol_contacts_reads_the_satellites_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`fol contacts --export-orbits tle` built the satellites four times from their file (the check, the TLE
    form check, the trajectories, the export): the satellites the check built serve the rest."""
    import contact_sim.scenario as scenario
    from orbits import read_tle

    reads: list[Path] = []
    monkeypatch.setattr(scenario, "read_tle", lambda path: reads.append(path) or read_tle(path))
    scn = _scenario_file(tmp_path, f'kind = "tle"\ntle_file = "{EXAMPLES / "leo_oem.tle"}"', duration_s="600.0")
    out = tmp_path / "out"
    assert contacts_main(["contacts", str(scn), "--no-plot", "--export-orbits", "tle", "--out", str(out)]) == 0
    assert reads == [EXAMPLES / "leo_oem.tle"]
    assert read_tle(out / "orbits.tle").names == read_tle(EXAMPLES / "leo_oem.tle").names


# --- [time] iers_finals: polar motion for the OEM states in ITRF ------------------------------------------------

def _iers_scenario(tmp_path: Path, constellation: str, finals: str | None) -> Path:
    """examples/leo_oem.toml in tmp_path with ``constellation`` and ``finals`` (IERS finals text) written as
    finals2000A.all next to it, named by a relative ``[time] iers_finals``."""
    scn = _scenario_file(tmp_path, constellation)
    if finals is not None:
        (tmp_path / "finals2000A.all").write_text(finals)
    scn.write_text(scn.read_text().replace("step_s = 60.0\n", 'step_s = 60.0\niers_finals = "finals2000A.all"\n', 1))
    return scn


def test_fol_contacts_writes_and_reads_itrf_states_with_the_polar_motion_of_time_iers_finals(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """--export-orbits oem --oem-frame ITRF writes the states write_oem writes with the file's polar motion (the
    path relative to the scenario, read once), and kind = "oem" reads that file back with it into SGP4's TEME
    states."""
    import contact_sim.scenario as scenario_module
    from _iers import finals_text
    from orbits import write_oem
    from orbits.iers import read_iers_finals

    reads: list[Path] = []
    monkeypatch.setattr(scenario_module, "read_iers_finals", lambda path: reads.append(path) or read_iers_finals(path))
    tle = f'kind = "tle"\ntle_file = "{EXAMPLES / "leo_oem.tle"}"'
    scn = _iers_scenario(tmp_path, tle, finals_text())
    out = tmp_path / "out"
    assert contacts_main(["contacts", str(scn), "--no-plot", "--export-orbits", "oem", "--oem-frame", "ITRF",
                          "--out", str(out)]) == 0
    assert reads == [tmp_path / "finals2000A.all"]
    assert f"wrote      {out / 'orbits.oem'}" in capsys.readouterr().out
    assert "(polar motion and UT1 of finals2000A.all)" in (out / "orbits.oem").read_text().splitlines()[2]
    sats = read_tle(EXAMPLES / "leo_oem.tle")
    start = dt.datetime(2008, 9, 20, 12, 30, tzinfo=dt.timezone.utc)
    expected = read_oem(write_oem(tmp_path / "expected.oem", sats, start, 10800.0, 60.0, frame="ITRF",
                                  polar_motion=read_iers_finals(tmp_path / "finals2000A.all")))
    got = read_oem(out / "orbits.oem")
    for seg, want in zip(got.segments, expected.segments):
        assert np.array_equal(seg.pos_km, want.pos_km) and np.array_equal(seg.vel_km_s, want.vel_km_s)
    scenario = parse_contact_scenario(tomllib.loads(scn.read_text().replace(tle, f'kind = "oem"\noem_file = '
                                                                               f'"{out / "orbits.oem"}"')),
                                      tmp_path, scn)
    eph = build_constellation(scenario)
    assert eph.polar_motion is not None and eph.polar_motion.source == str(tmp_path / "finals2000A.all")
    offsets = np.arange(0.0, 10801.0, 60.0)
    r, _ = propagate_offsets(eph, start, offsets)
    truth, _ = propagate_offsets(sats, start, offsets)
    assert np.linalg.norm(r - truth, axis=-1).max() < 1e-6  # km: the 6 decimals written (13 m without the file)


# measured (examples/leo_oem.toml's element sets and stations, the pole of tests/_iers.py, 0.41 arcsec): with the
# file the stations are written at their WGS-84 points, to the 0.1 m written, as without it; before, with the file,
# they were turned into TEME with the pole and back without it: 12.6 m (Santiago) and 5.5 m (Hartebeesthoek) off.
# The satellites' samples move by 0.5 to 13.5 m from the CZML without the file, r x the pole's angle
def test_fol_contacts_czml_turns_back_with_the_polar_motion_of_time_iers_finals(tmp_path: Path) -> None:
    import json

    from _iers import finals_text
    from orbits import ground_points_itrs, propagate_offsets, teme_to_itrs
    from orbits.iers import read_iers_finals

    scn = _iers_scenario(tmp_path, f'kind = "tle"\ntle_file = "{EXAMPLES / "leo_oem.tle"}"', finals_text())
    plain = tmp_path / "without" / scn.name  # the same name: the CZML document is named after it
    plain.parent.mkdir()
    plain.write_text(scn.read_text().replace('iers_finals = "finals2000A.all"\n', "", 1))
    packets = {}
    for name, path in (("file", scn), ("plain", plain)):
        assert contacts_main(["contacts", str(path), "--no-plot", "--czml", "--out", str(tmp_path / name)]) == 0
        packets[name] = {p["name"]: p for p in json.loads((tmp_path / name / "contacts.czml").read_text())}
    assert packets["file"].keys() == packets["plain"].keys()
    stations = _scenario(TLE).ground_stations
    surveyed_m = ground_points_itrs([s.lat_deg for s in stations], [s.lon_deg for s in stations],
                                    [s.elevation_m for s in stations]) * 1e3
    for station, point in zip(stations, surveyed_m):
        for run in ("file", "plain"):  # before, with the file: 12.6 m and 5.5 m off
            assert np.abs(np.array(packets[run][station.name]["position"]["cartesian"]) - point).max() <= 0.05 + 1e-6
    start = dt.datetime(2008, 9, 20, 12, 30, tzinfo=dt.timezone.utc)
    sats, pm = read_tle(EXAMPLES / "leo_oem.tle"), read_iers_finals(tmp_path / "finals2000A.all")
    for k, name in enumerate(sats.names):
        got, before = (np.array(packets[c][name]["position"]["cartesian"]).reshape(-1, 4) for c in ("file", "plain"))
        r_teme, _ = propagate_offsets(sats, start, got[:, 0])
        want = teme_to_itrs(r_teme[k:k + 1], start, got[:, 0], pm)[0] * 1e3
        assert np.abs(got[:, 1:] - want).max() < 0.06  # m: the 0.1 m written
        moved_m = np.linalg.norm(got[:, 1:] - before[:, 1:], axis=-1)
        assert moved_m.max() > 12.0  # the pole's 0.41 arcsec at 7,000 km: 13 m
    assert packets["file"][scn.stem] == packets["plain"][scn.stem]  # the document: the same

@pytest.mark.parametrize("finals, message", [
    ("last-day", "time.iers_finals: {finals} gives polar motion for 2008-09-19T00:00:00Z..2008-09-20T00:00:00Z, not "
                 "for 2008-09-20T12:30:00Z..2008-09-20T15:30:00Z; expected an IERS finals file covering those times "
                 "(finals2000A.all from the IERS Rapid Service reaches a year ahead)"),
    ("malformed", "{finals}:2: expected I (IERS) or P (prediction) in column 17, got 'X'"),
    ("empty", "{finals}: no polar motion; expected a line of an IERS finals2000A.all or finals.all file: the date in "
              "columns 1-6, MJD 8-15, I or P 17, the pole's x 19-27 and y 38-46 (arcsec), I or P 58, UT1-UTC 59-68 (s)"),
    (None, "{finals}: IERS finals file not found"),
], ids=["short", "malformed", "empty", "missing"])
@pytest.mark.parametrize("kind", ["tle", "oem"])
@pytest.mark.parametrize("check", [["--check"], []], ids=["check", "run"])
def test_a_bad_or_short_iers_finals_is_refused_in_one_line_before_the_search(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], finals: str | None,
        message: str, kind: str, check: list[str]) -> None:
    from _iers import POLE, finals_text

    text = {"last-day": finals_text({day: pole for day, pole in POLE.items() if day.day <= 20}),
            "malformed": finals_text().replace(" I  0.2", " X  0.2", 1), "empty": "", None: None}[finals]
    scn = _iers_scenario(tmp_path, f'kind = "{kind}"\n{kind}_file = "{EXAMPLES / f"leo_oem.{kind}"}"', text)
    monkeypatch.setattr("contact_sim.scenario.satellite_trajectories", lambda *a, **k: pytest.fail("searched"))
    assert contacts_main(["contacts", str(scn), *check, "--export-orbits", "oem", "--oem-frame", "ITRF",
                          "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"contact_sim contacts: error: {scn}: " + message.format(finals=tmp_path / "finals2000A.all")]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("case, problem", [
    ("oem-span", "time: the horizon 2008-09-20T13:30:00Z + 10800 s is not inside the useable span of ALPHA in "
                 "{oem} (2008-09-20T12:00:00Z..2008-09-20T16:00:00Z); no ephemeris from 2008-09-20T16:00:00Z"),
    ("iers-short", "time.iers_finals: {finals} gives polar motion for 2008-09-19T00:00:00Z..2008-09-20T00:00:00Z, "
                   "not for 2008-09-20T12:30:00Z..2008-09-20T15:30:00Z;"),
    ("iers-malformed", "{finals}:2: expected I (IERS) or P (prediction) in column 17, got 'X'"),
], ids=["oem-span", "iers-short", "iers-malformed"])
def test_fol_simulate_names_the_scenario_first_in_a_bad_file_of_it_as_fol_contacts_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], case: str,
        problem: str) -> None:
    """An OEM whose span does not hold the horizon, a short or malformed [time] iers_finals: one line, the scenario
    file, then the field (or the file named, with its line), then the problem, the same after the command's name in
    fol contacts (--check or not), fol simulate --check and fol simulate, which stops before any search or training.
    Before, fol simulate left the scenario file out of these lines (the contact side's errors were not prefixed)."""
    from _iers import POLE, finals_text
    from fol.cli import main

    text = EXAMPLE.read_text().replace('oem_file = "leo_oem.oem"', f'oem_file = "{EXAMPLES / "leo_oem.oem"}"')
    if case == "oem-span":
        text = text.replace('start = "2008-09-20T12:30:00Z"', 'start = "2008-09-20T13:30:00Z"')
    else:
        (tmp_path / "finals2000A.all").write_text(
            finals_text({day: pole for day, pole in POLE.items() if day.day <= 20}) if case == "iers-short"
            else finals_text().replace(" I  0.2", " X  0.2", 1))
        text = text.replace("step_s = 60.0\n", 'step_s = 60.0\niers_finals = "finals2000A.all"\n', 1)
    scn = tmp_path / "s.toml"
    scn.write_text('[scenario]\nname = "oem"\nseeds = [0]\n' + text
                   + LEARNING.replace("acquisition_s = 20000.0", "acquisition_s = 10800.0"))
    monkeypatch.setattr("contact_sim.scenario.satellite_trajectories", lambda *a, **k: pytest.fail("searched"))
    monkeypatch.setattr("fol.simulation.runner.build_trajectories", lambda *a, **k: pytest.fail("run"))
    lines = {}
    for command in (["contacts", "--check"], ["contacts"], ["simulate", "--check"], ["simulate"]):
        assert main([command[0], str(scn), *command[1:], "--out", str(tmp_path / "out")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"fol {command[0]}: error: "), err
        lines[" ".join(command)] = err[0][len(f"fol {command[0]}: error: "):]
    assert len(set(lines.values())) == 1, lines
    expected = f"{scn}: " + problem.format(oem=EXAMPLES / "leo_oem.oem", finals=tmp_path / "finals2000A.all")
    assert lines["simulate"].startswith(expected), lines["simulate"]
    assert not (tmp_path / "out").exists()


def test_resume_compares_the_contents_of_the_iers_finals_file(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """[time] iers_finals turns the ground stations (so the contacts) and an OEM's ITRF states: a finals file edited
    between the run and --resume is refused naming it, as the other files the contact side reads are. Before, the
    run's record (state/inputs.json) left it out, and the resumed run mixed two contact plans. A record made before
    it was kept resumes without comparing it."""
    import json

    from _iers import POLE, finals_text
    from fol.cli import main
    from fol.simulation import load_scenario
    from fol.simulation.check import INPUTS_FILE, input_digests

    text = EXAMPLE.read_text().replace('oem_file = "leo_oem.oem"', f'oem_file = "{EXAMPLES / "leo_oem.oem"}"')
    finals = tmp_path / "finals2000A.all"
    finals.write_text(finals_text())
    (tmp_path / "s.toml").write_text('[scenario]\nname = "oem"\nseeds = [0]\n' + text.replace(
        "step_s = 60.0\n", 'step_s = 60.0\niers_finals = "finals2000A.all"\n', 1)
        + LEARNING.replace("acquisition_s = 20000.0", "acquisition_s = 10800.0"))
    scn = load_scenario(tmp_path / "s.toml")
    out = tmp_path / "out"
    (out / "state").mkdir(parents=True)
    (out / "scenario.resolved.json").write_text(json.dumps(scn.resolved(), default=str))
    record = input_digests(scn)
    assert set(record) == {"constellation.oem_file", "time.iers_finals"}
    (out / INPUTS_FILE).write_text(json.dumps(record))
    argv = ["simulate", str(tmp_path / "s.toml"), "--resume", str(out), "--check"]
    assert main(argv) == 0
    finals.write_text(finals_text({**POLE, min(POLE): (0.19, 0.39)}))  # another pole on the first day: still read
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--resume {out}: the contents of time.iers_finals ({finals}) differ" in err[0], err
    (out / INPUTS_FILE).write_text(json.dumps({k: v for k, v in record.items() if k != "time.iers_finals"}))
    assert main(argv) == 0


def test_iers_finals_is_refused_where_no_satellite_would_use_it() -> None:
    doc = {"drones": {"count": 3, "radio_range_km": 1.0}, "time": {"duration_s": 600.0, "iers_finals": "f.all"}}
    with pytest.raises(ContactError, match=r"^s.toml: time.iers_finals: only used with a \[constellation\] \(polar "
                                           r"motion turns the Earth-fixed positions of satellites and ground "
                                           r"stations; drones and the nodes of an imported plan have none\)$"):
        parse_contact_scenario(doc, EXAMPLES, "s.toml")


# measured (Santiago and Hartebeesthoek every 60 s over 3 h from 2008-09-20 12:30:20, the pole of tests/_iers.py,
# 0.41 arcsec): 12.5 to 12.6 m and 5.5 m from their positions without polar motion, the small turn (y, x, 0) x r
# to 0.12 mm, and within 2e-12 km of Skyfield's
# wgs84.latlon(...).at(t).frame_xyz(TEME) on the time scale with the table; the scenario's 10 windows (start
# 12:30:20, 45 s grid): the 6 between satellites the same to the bit, the 4 to the stations moved by 1.2 ms at most
def test_ground_stations_are_turned_with_the_polar_motion_too(tmp_path: Path) -> None:
    from skyfield.api import wgs84
    from skyfield.sgp4lib import TEME

    from _iers import finals_text
    from contact_sim.trajectory import station_positions_teme
    from orbits import ground_points_itrs
    from orbits.iers import read_iers_finals
    from orbits.timeutil import skyfield_times

    (tmp_path / "finals2000A.all").write_text(finals_text())
    pm = read_iers_finals(tmp_path / "finals2000A.all")
    scenario = _scenario(TLE, start="2008-09-20T12:30:20Z", step_s=45.0)
    stations, start = scenario.ground_stations, scenario.time.start
    grid = np.arange(0.0, 10801.0, 60.0)
    with_pm, _ = station_positions_teme(stations, start, grid, pm)
    without, _ = station_positions_teme(stations, start, grid)
    times = skyfield_times(start, grid, pm.timescale)
    table = pm.timescale.polar_motion_table
    pole_rad = np.stack([np.interp(times.tt, table[0], table[2]), np.interp(times.tt, table[0], table[1]),
                         np.zeros(grid.size)], -1) * np.pi / 180 / 3600  # (y, x, 0): the small turn's vector
    fixed_km = ground_points_itrs([s.lat_deg for s in stations], [s.lon_deg for s in stations],
                                  [s.elevation_m for s in stations])
    moved_km = np.linalg.norm(with_pm - without, axis=-1)
    expected_km = np.linalg.norm(np.cross(pole_rad[:, None, :], fixed_km[None]), axis=-1)
    assert np.abs(moved_km - expected_km).max() < 1e-6 and moved_km.max() > 0.012  # km: 12 m
    for k, s in enumerate(stations):
        theirs = wgs84.latlon(s.lat_deg, s.lon_deg, s.elevation_m).at(times).frame_xyz(TEME).km.T
        assert np.abs(with_pm[:, k] - theirs).max() < 1e-8  # km
    with pytest.raises(OrbitError, match=r"^ITRS positions: .*finals2000A.all gives polar motion for "
                                         r"2008-09-19T00:00:00Z\.\.2008-09-21T00:00:00Z, not for "
                                         r"2008-09-20T12:30:20Z\.\.2008-09-21T12:30:20Z;"):
        station_positions_teme(stations, start, np.array([0.0, 86400.0]), pm)
    plain = compute_contacts(scenario)
    scenario.time.iers_finals = tmp_path / "finals2000A.all"
    turned = compute_contacts(scenario)
    a, b = turned.windows, plain.windows
    assert len(a) == len(b) >= 8 and np.array_equal(a.a, b.a) and np.array_equal(a.b, b.b)
    station = (a.b >= 3) & (a.a < 3)  # node 3 and 4: the stations
    assert 0 < station.sum() < len(a)
    for key in ("t_start_s", "t_end_s"):
        assert np.array_equal(getattr(a, key)[~station], getattr(b, key)[~station])
        shift = np.abs(getattr(a, key) - getattr(b, key))[station]
        assert 1e-4 < shift.max() < 1e-2, shift  # s


def _itrf_oem_scenario(tmp_path: Path, finals_days: range, start: str, duration_s: float, oem_hours: float) -> Path:
    """examples/leo_oem.toml in tmp_path, from ``start`` over ``duration_s``, on an ITRF OEM of its element sets
    (written from 0 h UTC of ``start``'s day for ``oem_hours``, without polar motion: its numbers do not matter
    here), with ``[time] iers_finals`` the pole of tests/_iers.py on the September 2008 days ``finals_days``."""
    from _iers import POLE, finals_text
    from orbits import write_oem

    day = dt.datetime.fromisoformat(start.replace("Z", "+00:00")).replace(hour=0, minute=0)
    oem = write_oem(tmp_path / "itrf.oem", read_tle(EXAMPLES / "leo_oem.tle"), day, oem_hours * 3600.0, 60.0,
                    frame="ITRF")
    (tmp_path / "finals2000A.all").write_text(finals_text({d: p for d, p in POLE.items() if d.day in finals_days}))
    text = EXAMPLE.read_text().replace('oem_file = "leo_oem.oem"', f'oem_file = "{oem}"')
    text = re.sub(r'^start = "[^"]*"', f'start = "{start}"', text, count=1, flags=re.M)
    text = re.sub(r"^duration_s = .*$", f"duration_s = {duration_s}", text, count=1, flags=re.M)
    scn = tmp_path / "s.toml"
    scn.write_text(text.replace("step_s = 60.0\n", 'step_s = 60.0\niers_finals = "finals2000A.all"\n', 1))
    return scn


def test_an_acquisition_period_past_the_iers_finals_is_accepted_as_the_partition_turns_no_itrf_state(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The orbit partition's ground tracks take an OEM's ITRF states Earth-fixed as they are, so [time] iers_finals
    need not cover data.acquisition_s, which may pass the horizon. Before, they were turned into TEME with the file
    (and back without it) over that period, and a period past the file was refused by --check and by the run; the
    partition now gives the same satellites with the file as without it."""
    from fol.cli import main
    from fol.simulation.partition import orbit_assignment

    scn = _itrf_oem_scenario(tmp_path, range(19, 22), "2008-09-20T12:30:00Z", 10800.0, 26.0)
    eph = build_constellation(parse_contact_scenario(tomllib.loads(scn.read_text()), tmp_path, scn))
    learning = '[scenario]\nname = "oem"\nseeds = [0]\n' + LEARNING.replace("acquisition_s = 20000.0",
                                                                            "acquisition_s = 45000.0")
    scn.write_text(learning + scn.read_text())
    assert main(["simulate", str(scn), "--check", "--out", str(tmp_path / "out")]) == 0
    assert ": OK — 3 learning nodes" in capsys.readouterr().out
    rng = np.random.default_rng(0)
    lat, lon = rng.uniform(-52.0, 52.0, 3000), rng.uniform(-180.0, 180.0, 3000)
    start = dt.datetime(2008, 9, 20, 12, 30, tzinfo=dt.timezone.utc)  # to 2008-09-21 01:00, past the file's last day
    assert eph.polar_motion is not None and eph.all_itrf
    with_file = orbit_assignment(lat, lon, eph, start, 45000.0, 400.0, rule="first")
    eph.polar_motion = None
    assert (with_file >= 0).sum() > 300 and np.array_equal(with_file, orbit_assignment(lat, lon, eph, start, 45000.0,
                                                                                        400.0, rule="first"))


@pytest.mark.parametrize(("frame", "refused"), [("GCRF", "ground tracks every 1 s"),
                                                ("ITRF", "is not inside the useable span of ALPHA")])
def test_the_ground_track_budget_counts_the_earth_rotation_only_where_one_is_built(
        frame: str, refused: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The orbit partition's ground tracks need Skyfield's Earth rotation (24 KiB per time sample) for TEME and
    inertial states, not for ITRF states, taken Earth-fixed as they are: 400,002 samples (16 km swaths, 4e5 s) of 3
    satellites are 9.4 GiB with it, past the 8 GiB budget, and 177 MiB without. The GCRF file is refused for its
    budget, the ITRF file (which counted the rotation too before) passes it and meets the next check, its span."""
    from fol.cli import main
    from orbits import write_oem

    oem = write_oem(tmp_path / f"{frame}.oem", read_tle(EXAMPLES / "leo_oem.tle"),
                    dt.datetime(2008, 9, 20, 12, 0, tzinfo=dt.timezone.utc), 4 * 3600.0, 60.0, frame=frame)
    text = EXAMPLE.read_text().replace('oem_file = "leo_oem.oem"', f'oem_file = "{oem}"')
    learning = LEARNING.replace("swath_km = 400.0\nacquisition_s = 20000.0", "swath_km = 16.0\nacquisition_s = 4e5")
    (tmp_path / "s.toml").write_text('[scenario]\nname = "oem"\nseeds = [0]\n' + text + learning)
    assert main(["simulate", str(tmp_path / "s.toml"), "--check"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{tmp_path / 's.toml'}: data.acquisition_s: " in err[0] and refused in err[0], err


def test_nothing_of_fol_contacts_or_the_batteries_turns_earth_fixed_positions_past_the_horizon(tmp_path: Path) -> None:
    """The finals file is checked to cover the horizon only: whatever turns positions with it (the ITRF states of
    the OEM for the window search and the eclipses of [energy], the ground stations, the CZML, the ITRF export)
    stays inside the horizon, so a file whose first and last days are the horizon's ends is enough for all of it."""
    scn = _itrf_oem_scenario(tmp_path, range(20, 22), "2008-09-20T00:00:00Z", 86400.0, 24.0)
    out = tmp_path / "out"
    assert contacts_main(["contacts", str(scn), "--no-plot", "--czml", "--export-orbits", "oem", "--oem-frame",
                          "ITRF", "--out", str(out)]) == 0
    assert {"contacts.czml", "orbits.oem"} <= {p.name for p in out.iterdir()}
    scenario = parse_contact_scenario(tomllib.loads(scn.read_text()), tmp_path, scn)
    eph = build_constellation(scenario)
    assert eph.polar_motion is not None and {s.ref_frame for s in eph.segments} == {"ITRF"}
    batteries = build_batteries(scenario, plan_from_trajectories(build_trajectories(scenario, eph), scenario))
    assert sorted(batteries) == [0, 1, 2] and all(b.eclipses for b in batteries.values())  # a day: eclipses each


# measured (the element sets of examples/leo_oem.tle over 3 h from 2008-09-20 12:30, the pole of tests/_iers.py,
# 100,000 images spread evenly over the globe): of the 9,480 that 400 km swaths cover, the file changes the satellite
# of 1 ("first"; none with "uniform"), halving the coverage step that of 309
def test_the_orbit_partition_stays_without_the_iers_finals_as_it_moves_the_swaths_far_less_than_their_sampling(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The swaths are sampled every max(1, swath_km / 16) s, kilometres of ground track apart; the polar motion of a
    finals file moves the sub-satellite points by metres. Turned with it, the partition would give at most 2 images
    another satellite; halving the coverage step, a sampling as valid, gives a hundred times as many another. So
    the partition stays on Skyfield's ITRS without the file, as docs/formats.md says."""
    import fol.simulation.partition as partition
    from _iers import finals_text
    from orbits.iers import read_iers_finals

    (tmp_path / "finals2000A.all").write_text(finals_text())
    pm = read_iers_finals(tmp_path / "finals2000A.all")
    sats = read_tle(EXAMPLES / "leo_oem.tle")
    start = dt.datetime(2008, 9, 20, 12, 30, tzinfo=dt.timezone.utc)
    rng = np.random.default_rng(0)
    lat, lon = np.degrees(np.arcsin(rng.uniform(-1.0, 1.0, 100_000))), rng.uniform(-180.0, 180.0, 100_000)
    swath_km, step_s = 400.0, partition.coverage_step_s(400.0)
    plain = partition.orbit_assignment(lat, lon, sats, start, 10800.0, swath_km, rule="first")
    halved = partition.orbit_assignment(lat, lon, sats, start, 10800.0, swath_km, rule="first", step_s=step_s / 2)
    monkeypatch.setattr(partition, "ground_track", lambda *a, **k: ground_track(*a, **k, polar_motion=pm))
    turned = partition.orbit_assignment(lat, lon, sats, start, 10800.0, swath_km, rule="first")
    by_pole, by_step = int((turned != plain).sum()), int((halved != plain).sum())
    assert 9000 < (plain >= 0).sum() < 10000 and by_pole <= 2 and by_step >= 100 * max(by_pole, 1), (by_pole, by_step)
