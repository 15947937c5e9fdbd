"""Drone missions from QGroundControl .plan and QGC WPL 110 .waypoints files become
timed ENU waypoints (contact_sim.missions)."""

from __future__ import annotations

import json
import math
import logging
import warnings
from pathlib import Path

import numpy as np
import pytest

from contact_sim import missions
from contact_sim.errors import ContactError
from contact_sim.missions import enu_km, mission_waypoints, read_missions

HOME = (47.0, 8.0, 400.0)


def _item(command: int, lat: float = 0.0, lon: float = 0.0, alt: float = 0.0, p1: float = 0.0, p2: float = 0.0,
          frame: int = 3) -> dict:
    return {"type": "SimpleItem", "command": command, "frame": frame, "autoContinue": True,
            "params": [p1, p2, 0, None, lat, lon, alt]}


def _plan(path: Path, items: list, home=HOME, **mission) -> Path:
    doc = {"fileType": "Plan", "version": 1, "groundStation": "QGroundControl",
           "mission": {"version": 2, "firmwareType": 12, "vehicleType": 2, "hoverSpeed": 5, "cruiseSpeed": 15,
                       "plannedHomePosition": list(home), "items": items, **mission}}
    path.write_text(json.dumps(doc))
    return path


def _wpl(path: Path, home, items: list) -> Path:
    """The same items as a QGC WPL 110 file (home first, tab-separated)."""
    lines = ["QGC WPL 110", "\t".join(str(v) for v in (0, 1, 0, 16, 0, 0, 0, 0, *home, 1))]
    for i, it in enumerate(items, start=1):
        p = [0 if v is None else v for v in it["params"]]
        lines.append("\t".join(str(v) for v in (i, 0, it["frame"], it["command"], *p, 1)))
    path.write_text("\n".join(lines) + "\n")
    return path


# 0.001 deg north of home, then 0.001 deg east of that, 50 m above home; hover speed 5 m/s
MISSION = [_item(22, *HOME[:2], 50.0), _item(16, 47.001, 8.0, 50.0, p1=10.0), _item(178, p1=1, p2=10.0, frame=2),
           _item(16, 47.001, 8.001, 50.0)]


def _independent_enu(lat: float, lon: float, h: float, origin=HOME) -> np.ndarray:
    """Small offsets from the WGS-84 radii of curvature (meridian M, prime vertical N), in m."""
    a, f = 6378137.0, 1 / 298.257223563
    e2 = f * (2 - f)
    phi = math.radians(origin[0])
    w = 1 - e2 * math.sin(phi) ** 2
    m, n = a * (1 - e2) / w ** 1.5, a / math.sqrt(w)
    return np.array([(n + origin[2]) * math.cos(phi) * math.radians(lon - origin[1]),
                     (m + origin[2]) * math.radians(lat - origin[0]), h - origin[2]])


def test_enu_of_a_known_point() -> None:
    # a quarter turn east on the equator: x = a east of the origin, a below its horizon
    assert np.allclose(enu_km([0.0], [90.0], [0.0], (0.0, 0.0, 0.0)), [[6378.137, 0.0, -6378.137]], atol=1e-9)
    assert np.allclose(enu_km([90.0], [0.0], [0.0], (0.0, 0.0, 0.0)), [[0.0, 6356.752314, -6378.137]], atol=1e-6)


def test_a_plan_gives_its_positions_and_times(tmp_path: Path) -> None:
    w, origin = mission_waypoints(_plan(tmp_path / "alpha.plan", MISSION), None, 15.0)
    assert w.name == "alpha" and origin == HOME
    expect = [_independent_enu(*HOME), _independent_enu(*HOME[:2], 450.0), _independent_enu(47.001, 8.0, 450.0),
              _independent_enu(47.001, 8.0, 450.0), _independent_enu(47.001, 8.001, 450.0)]
    assert np.abs(w.xyz_km * 1000.0 - np.array(expect)).max() < 1.0  # metres
    north, east = expect[2][1], expect[4][0] - expect[2][0]
    assert north == pytest.approx(111.18, abs=0.05) and east == pytest.approx(75.82, abs=0.5)
    # climb 50 m at 5 m/s, fly north at 5 m/s, hold 10 s, fly east at the changed 10 m/s
    t1 = 10.0
    t2 = t1 + np.linalg.norm(w.xyz_km[2] - w.xyz_km[1]) * 1000 / 5.0
    t4 = t2 + 10.0 + np.linalg.norm(w.xyz_km[4] - w.xyz_km[3]) * 1000 / 10.0
    assert np.allclose(w.t_s, [0.0, t1, t2, t2 + 10.0, t4])
    assert t2 == pytest.approx(10 + north / 5, abs=0.01)


def test_a_condition_gate_is_skipped_as_the_flight_goes_on(tmp_path: Path) -> None:
    """QGroundControl 4.x stores MAV_CMD_CONDITION_GATE (4501: the camera trigger after it waits for
    the drone to cross a line) before each camera-triggering transect; such a plan was refused as an
    unsupported command. The gate delays no flight: the mission flies as without it."""
    gate = {"type": "SimpleItem", "command": 4501, "frame": 0, "autoContinue": True,
            "params": [0, 0, 0, 0, 47.0005, 8.0, 450.0]}
    plain, _ = mission_waypoints(_plan(tmp_path / "a.plan", MISSION), None, 15.0)
    gated, _ = mission_waypoints(_plan(tmp_path / "b.plan", [*MISSION[:2], gate, *MISSION[2:]]), None, 15.0)
    assert np.array_equal(gated.t_s, plain.t_s) and np.array_equal(gated.xyz_km, plain.xyz_km)


def test_autocontinue_off_is_flown_on_with_one_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """autocontinue off was read and dropped without a word: PX4 holds at such an item until told to go
    on, ArduPilot ignores it. The flight follows ArduPilot, and one warning names the first item (the
    last item ends the mission either way)."""
    plain, _ = mission_waypoints(_plan(tmp_path / "a.plan", MISSION), None, 15.0)
    held = [dict(it) for it in MISSION]
    for k in (1, 2, len(held) - 1):
        held[k]["autoContinue"] = False
    with caplog.at_level(logging.WARNING, logger="contact_sim.missions"):
        w, _ = mission_waypoints(_plan(tmp_path / "b.plan", held), None, 15.0)
    assert np.array_equal(w.t_s, plain.t_s) and np.array_equal(w.xyz_km, plain.xyz_km)
    msgs = [r.getMessage() for r in caplog.records]
    assert len(msgs) == 1 and "b.plan: mission.items[1] and 1 more item(s): autocontinue is off" in msgs[0], msgs
    caplog.clear()
    wpl = _wpl(tmp_path / "c.waypoints", HOME, MISSION)
    lines = wpl.read_text().splitlines()
    lines[2] = lines[2][: lines[2].rstrip().rfind("\t")] + "\t0"
    wpl.write_text("\n".join(lines) + "\n")
    with caplog.at_level(logging.WARNING, logger="contact_sim.missions"):
        mission_waypoints(wpl, None, 15.0)
    assert [r.getMessage().split(": autocontinue")[0] for r in caplog.records] == [f"{wpl}: line 3"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="contact_sim.missions"):
        mission_waypoints(_plan(tmp_path / "d.plan", MISSION), None, 15.0)
    assert not caplog.records


def test_a_waypoints_file_is_the_same_mission(tmp_path: Path) -> None:
    a, _ = mission_waypoints(_plan(tmp_path / "a.plan", MISSION), None, 15.0)
    b, _ = mission_waypoints(_wpl(tmp_path / "a.waypoints", HOME, MISSION), None, 5.0)  # no speed in the file
    assert np.allclose(a.t_s, b.t_s) and np.allclose(a.xyz_km, b.xyz_km)


def test_the_waypoints_reader_agrees_with_pymavlink(tmp_path: Path) -> None:
    mavwp = pytest.importorskip("pymavlink.mavwp")
    path = _wpl(tmp_path / "a.waypoints", HOME, MISSION)
    loader = mavwp.MAVWPLoader()
    loader.load(str(path))
    home, targets = missions.read_mission(path, 5.0)
    ref = [loader.wp(i) for i in range(loader.count())]
    assert home == (ref[0].x, ref[0].y, ref[0].z)
    nav = [w for w in ref[1:] if w.command == 16]
    assert [(t[0], t[1], t[2] - HOME[2], t[4]) for t in targets[2:]] == [(w.x, w.y, w.z, w.param1) for w in nav]


def test_plan_speeds_rtl_land_and_default_speed(tmp_path: Path) -> None:
    items = [_item(16, 47.001, 8.0, 0.0), _item(20, frame=2)]
    w, _ = mission_waypoints(_plan(tmp_path / "a.plan", items, hoverSpeed=2.0), None, 15.0)
    d = np.linalg.norm(w.xyz_km[1] - w.xyz_km[0]) * 1000
    assert np.allclose(w.xyz_km[-1], 0.0) and w.t_s[-1] == pytest.approx(2 * d / 2.0)
    fixed, _ = mission_waypoints(_plan(tmp_path / "b.plan", items, vehicleType=1, cruiseSpeed=20.0), None, 15.0)
    assert fixed.t_s[-1] == pytest.approx(2 * d / 20.0)
    doc = json.loads((tmp_path / "b.plan").read_text())
    del doc["mission"]["cruiseSpeed"], doc["mission"]["hoverSpeed"]
    (tmp_path / "c.plan").write_text(json.dumps(doc))
    assert mission_waypoints(tmp_path / "c.plan", None, 4.0)[0].t_s[-1] == pytest.approx(2 * d / 4.0)
    # a multirotor flies at hoverSpeed: a plan without one takes the default, not cruiseSpeed
    doc["mission"]["vehicleType"], doc["mission"]["cruiseSpeed"] = 2, 20.0
    (tmp_path / "e.plan").write_text(json.dumps(doc))
    assert mission_waypoints(tmp_path / "e.plan", None, 4.0)[0].t_s[-1] == pytest.approx(2 * d / 4.0)
    # land at the item's position: fly there at altitude, then descend to home's altitude
    land = [_item(22, *HOME[:2], 30.0), _item(21, 47.001, 8.0, 0.0)]
    w, _ = mission_waypoints(_plan(tmp_path / "d.plan", land), None, 15.0)
    assert np.allclose(w.xyz_km[-1] * 1000, _independent_enu(47.001, 8.0, HOME[2]), atol=1.0)
    assert w.xyz_km[-2][2] * 1000 == pytest.approx(30.0, abs=0.01)


def test_survey_items_are_flown_and_an_uncomputed_one_refused(tmp_path: Path) -> None:
    survey = {"type": "ComplexItem", "complexItemType": "survey", "version": 5,
              "TransectStyleComplexItem": {"Items": [_item(206, p1=25, frame=2), _item(16, 47.001, 8.0, 50.0),
                                                     _item(16, 47.001, 8.001, 50.0)]}}
    w, _ = mission_waypoints(_plan(tmp_path / "a.plan", [survey]), None, 15.0)
    assert len(w.t_s) == 3
    bare = {"type": "ComplexItem", "complexItemType": "StructureScan", "polygon": []}
    with pytest.raises(ContactError, match=r"b.plan: mission.items\[1\]: complex item 'StructureScan' holds no"):
        mission_waypoints(_plan(tmp_path / "b.plan", [_item(22, *HOME[:2], 5.0), bare]), None, 15.0)


BAD_PLANS = [
    ("{", "invalid JSON"),
    ('{"fileType": "Mission"}', 'expected a JSON object with "fileType": "Plan"'),
    # a key given twice: JSON readers differ on which one counts, so neither does
    ('{"fileType": "Plan", "mission": {"items": []}, "mission": {"items": []}}',
     "not a QGroundControl plan (invalid JSON: duplicate key 'mission' in a JSON object)"),
    ("[" * 100_000 + "]" * 100_000, "not a QGroundControl plan (invalid JSON: nested deeper than 32 levels)"),
    ([_item(82, 47.001, 8.0, 50.0)], "mission.items[0]: unsupported command 82 (supported: 16 waypoint"),
    ([_item(177, p1=1, p2=3, frame=2)], "mission.items[0]: unsupported command 177"),
    ([_item(112, p1=30, frame=2)], "mission.items[0]: unsupported command 112"),
    # DO_ commands that move the drone, stop or delay its flight, or jump in the mission are not skipped
    *[([_item(c, 47.001, 8.0, 50.0, frame=3)], f"mission.items[0]: unsupported command {c} ")
      for c in (176, 185, 186, 190, 191, 192, 193, 213, 221, 222, 224, 246, 252)],
    ([_item(16, 47.001, 8.0, 50.0, frame=10)], "mission.items[0]: waypoint in unsupported frame 10"),
    ([_item(16, None, 8.0, 50.0)], "mission.items[0]: expected latitude -90..90"),
    ([_item(16, 91.0, 8.0, 50.0)], "mission.items[0]: expected latitude -90..90"),
    ([_item(16, 47.001, 8.0, 1e12)], "mission.items[0]: expected an altitude within"),
    ([_item(16, 57.0, 8.0, 50.0)], "mission.items[0]: lies more than 1000 km from the drones' origin"),
    ([_item(16, 47.001, 8.0, 50.0, p1=-5)], "mission.items[0]: waypoint hold time p1 must be"),
    ([_item(178, p1=1, p2=1e9, frame=2)], "mission.items[0] (change-speed p2): expected a speed of"),
    ([{"type": "SimpleItem", "command": 16, "frame": 3, "params": [0, 0]}], "expected 'params' as 7 numbers"),
    ([["not", "an", "item"]], "mission.items[0]: expected a mission item"),
    ([_item(16, 10 ** 400, 8.0, 50.0)], "mission.items[0]: expected 'params' as 7 numbers"),
    ([{"type": "ComplexItem", "complexItemType": "survey", "TransectStyleComplexItem": {"Items": [
        {"type": "ComplexItem", "TransectStyleComplexItem": {"Items": []}}]}}],
     "mission.items[0].Items[0]: expected type 'SimpleItem', got 'ComplexItem'"),
    ([{"type": "ComplexItem", "complexItemType": "x" * 10 ** 5}], "complex item 'xxxxx"),
]


@pytest.mark.parametrize("content, message", BAD_PLANS, ids=[m for _, m in BAD_PLANS])
def test_a_bad_plan_is_one_line_naming_file_and_item(tmp_path: Path, content, message: str) -> None:
    path = tmp_path / "bad.plan"
    if isinstance(content, str):
        path.write_text(content)
    else:
        _plan(path, content)
    with pytest.raises(ContactError) as exc:
        mission_waypoints(path, None, 15.0)
    assert str(exc.value).startswith(f"{path}") and message in str(exc.value) and "\n" not in str(exc.value)
    assert len(str(exc.value)) < 400


BAD_WPL = [
    ("QGC WPL 100\n0\t1\t0\t16\t0\t0\t0\t0\t47\t8\t400\t1\n", "expected a first line 'QGC WPL 110'"),
    ("QGC WPL 110\n", "no items"),
    ("QGC WPL 110\n0\t1\t0\t16\t0\t0\t0\t0\t47\t8\t400\t1\n1\t0\t3\t16\t0\t0\t0\t0\t47\t8\n", ":3: expected 12"),
    ("QGC WPL 110\n0\t1\t0\t16\t0\t0\t0\t0\t47\t8\t400\t1\n1\t0\t3\tWP\t0\t0\t0\t0\t47\t8\t5\t1\n",
     ":3: frame and command must be integers"),
    ("QGC WPL 110\n0\t1\t0\t16\t0\t0\t0\t0\t47\t8\t400\t1\n1\t0\t3\t16\t0\t0\t0\t0\tnan\t8\t5\t1\n",
     "line 3: expected latitude"),
    ("QGC WPL 110\n0\t1\t0\t16\t0\t0\t0\t0\t47\t8\t400\t1\n1\t0\t3\t31\t0\t0\t0\t0\t47\t8\t5\t1\n",
     "line 3: unsupported command 31"),
]


@pytest.mark.parametrize("content, message", BAD_WPL, ids=[m for _, m in BAD_WPL])
def test_a_bad_waypoints_file_is_one_line_naming_file_and_line(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.waypoints"
    path.write_text(content)
    with pytest.raises(ContactError) as exc:
        mission_waypoints(path, None, 15.0)
    assert str(exc.value).startswith(f"{path}") and message in str(exc.value) and "\n" not in str(exc.value)


def test_oversized_unknown_and_twin_files_are_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _plan(tmp_path / "a.plan", MISSION)
    monkeypatch.setattr(missions, "MAX_MISSION_BYTES", 100)
    with pytest.raises(ContactError, match=r"a.plan: \d+ bytes; a mission file may have at most 100"):
        mission_waypoints(path, None, 15.0)
    monkeypatch.undo()
    (tmp_path / "a.txt").write_text("x")
    with pytest.raises(ContactError, match=r"a.txt: expected a QGroundControl .plan, a QGC WPL 110 .waypoints, a GPX"):
        mission_waypoints(tmp_path / "a.txt", None, 15.0)
    twin = _wpl(tmp_path / "a.waypoints", HOME, MISSION)
    with pytest.raises(ContactError, match=r"a.waypoints: drone name 'a' \(the file's stem\) is also that of .*a.plan"):
        read_missions([path, twin], None, 15.0)


def test_every_mission_shares_the_first_home_or_the_given_origin(tmp_path: Path) -> None:
    a = _plan(tmp_path / "a.plan", [_item(16, 47.001, 8.0, 0.0)])
    b = _plan(tmp_path / "b.plan", [_item(16, 47.0, 8.0, 0.0)], home=(47.001, 8.0, 400.0))
    (wa, wb), start = read_missions([a, b], None, 15.0)
    assert start is None
    assert np.allclose(wb.xyz_km[0], wa.xyz_km[1]) and np.allclose(wb.xyz_km[1], 0.0, atol=1e-9)
    (wa2, _), _ = read_missions([a, b], (47.0, 8.0, 0.0), 15.0)
    assert np.allclose(wa2.xyz_km[:, :2], wa.xyz_km[:, :2], atol=1e-9)
    assert np.allclose(wa2.xyz_km[:, 2], wa.xyz_km[:, 2] + 0.4, atol=1e-6)


def _scenario(tmp_path: Path, drones: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(f"[drones]\nradio_range_km = 0.5\n{drones}\n[time]\nduration_s = 200.0\nstep_s = 10.0\n")
    return path


def test_two_drones_flying_head_on_meet_as_their_csv_track_does(tmp_path: Path) -> None:
    from contact_sim.drones import write_waypoints_csv
    from contact_sim.scenario import compute_contacts, load_contact_scenario

    east = (HOME[0], HOME[1] + 0.02, HOME[2])  # about 1.52 km east
    _plan(tmp_path / "west.plan", [_item(16, *east[:2], 0.0)], hoverSpeed=10.0)
    _wpl(tmp_path / "east.waypoints", east, [_item(16, *HOME[:2], 0.0)])
    plan = compute_contacts(load_contact_scenario(
        _scenario(tmp_path, 'missions = ["west.plan", "east.waypoints"]\nspeed_m_s = 10.0')))
    assert len(plan.windows) == 1
    w = plan.windows[0]
    d = enu_km([east[0]], [east[1]], [east[2]], HOME)[0, 0] * 1000  # the chord, m
    # closing at 20 m/s from d m, in range (500 m) until they are 500 m apart again
    assert w.t_start_s == pytest.approx((d - 500) / 20, abs=1e-3) and w.t_end_s == pytest.approx((d + 500) / 20, abs=1e-3)
    wps, _ = read_missions([tmp_path / "west.plan", tmp_path / "east.waypoints"], None, 10.0)
    write_waypoints_csv(tmp_path / "wp.csv", wps)
    csv_plan = compute_contacts(load_contact_scenario(_scenario(tmp_path, 'waypoints_csv = "wp.csv"')))
    c = csv_plan.windows[0]
    assert len(csv_plan.windows) == 1 and c.t_start_s == pytest.approx(w.t_start_s, abs=1e-2)
    assert c.t_end_s == pytest.approx(w.t_end_s, abs=1e-2) and plan.node_names == csv_plan.node_names


@pytest.mark.parametrize("drones, message", [
    ('missions = ["a.plan"]\ncount = 2', "drones: give exactly one of count (random waypoints), waypoints_csv or missions"),
    ('missions = ["a.plan"]\narea_km = 2.0', "drones.area_km: not used with missions"),
    ('count = 2\norigin_lat_deg = 47.0\norigin_lon_deg = 8.0', "drones.origin_lat_deg: only used with missions"),
    ('missions = ["a.plan"]\norigin_lat_deg = 47.0', "drones: give origin_lat_deg and origin_lon_deg together"),
    ('missions = ["a.plan"]\norigin_lat_deg = 95.0\norigin_lon_deg = 8.0', "drones.origin_lat_deg: expected a number in"),
    ('missions = ["a.plan"]\nspeed_m_s = 5000.0', "drones.speed_m_s: expected a number in 0.01..1000"),
    ('missions = []', "drones.missions: expected a non-empty list of paths"),
    ('missions = ["a\\u0000.plan"]', "drones.missions: expected non-empty paths without a NUL character"),
])
def test_bad_mission_fields_are_one_line(tmp_path: Path, drones: str, message: str) -> None:
    from contact_sim.scenario import load_contact_scenario

    _plan(tmp_path / "a.plan", MISSION)
    with pytest.raises(ContactError) as exc:
        load_contact_scenario(_scenario(tmp_path, drones))
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_a_missing_mission_file_is_named_by_the_check(tmp_path: Path) -> None:
    from contact_sim.scenario import check_contact_scenario, load_contact_scenario

    _plan(tmp_path / "a.plan", MISSION)
    sc = load_contact_scenario(_scenario(tmp_path, 'missions = ["a.plan", "b.plan"]\norigin_lat_deg = 47.0\n'
                                                  'origin_lon_deg = 8.0'))
    assert sc.drones.origin == (47.0, 8.0, 0.0)
    with pytest.raises(ContactError, match=r"b.plan: mission file not found"):
        check_contact_scenario(sc)
    _wpl(tmp_path / "b.waypoints", HOME, MISSION)
    sc.drones.missions[1] = tmp_path / "b.waypoints"
    assert check_contact_scenario(sc) == (["a", "b"], None, None)


def test_the_docs_waypoints_example_is_the_shipped_one() -> None:
    """docs/formats.md shows examples/mission_south.waypoints (flown by examples/drone_missions.toml,
    which tests/test_examples_check.py checks)."""
    root = Path(__file__).resolve().parents[1]
    text = (root / "docs" / "formats.md").read_text(encoding="utf-8")
    block = text.split("```text\nQGC WPL 110\n", 1)[1].split("```", 1)[0]
    assert "QGC WPL 110\n" + block == (root / "examples" / "mission_south.waypoints").read_text()
    home, targets = missions.read_mission(root / "examples" / "mission_south.waypoints", 6.0)
    assert home == (47.397, 8.545, 488.0) and [t[4] for t in targets] == [0.0, 0.0, 5.0, 0.0, 0.0]


def _local_to_geo(east_m: float, north_m: float) -> tuple[float, float]:
    """A point metres east and north of HOME (WGS-84 radii of curvature there)."""
    lat0 = math.radians(HOME[0])
    a, e2 = 6378137.0, 6.69437999014e-3
    w = 1.0 - e2 * math.sin(lat0) ** 2
    m, n = a * (1 - e2) / w ** 1.5, a / math.sqrt(w)
    return HOME[0] + math.degrees(north_m / m), HOME[1] + math.degrees(east_m / (n * math.cos(lat0)))


def _survey_v3(polygon_m: list, angle: float, spacing: float, turnaround: float = 0.0, **extra) -> dict:
    """A survey as QGroundControl 3.2-3.3 saved it: polygon and grid, no computed waypoints."""
    return {"type": "ComplexItem", "complexItemType": "survey", "version": 3, "manualGrid": True,
            "fixedValueIsAltitude": True, "cameraTriggerDistance": 25,
            "polygon": [list(_local_to_geo(e, n)) for e, n in polygon_m],
            "grid": {"altitude": 50, "relativeAltitude": True, "angle": angle, "spacing": spacing,
                     "turnAroundDistance": turnaround}, **extra}


def _flown_m(path: Path) -> np.ndarray:
    """The mission's targets after home, metres east / north / up of HOME."""
    home, targets = missions.read_mission(path, 15.0)
    lat, lon, alt = (np.array([t[k] for t in targets[1:]]) for k in range(3))
    return enu_km(lat, lon, alt, home) * 1000.0


def test_an_old_survey_without_stored_waypoints_is_flown_as_a_lawnmower(tmp_path: Path) -> None:
    """A QGroundControl 3.2-3.3 survey ('version': 3) stores its polygon and grid, not its waypoints: it is
    flown along the transects QGroundControl computes for it. Its lines lie 'spacing' apart from a point
    half their length (the bounding box's largest side + 2 km) left of the box's centre, not centred on
    the polygon; a version 3 grid without 'entryLocation' starts at entry corner 1, the last transect."""
    rect = [(0, 0), (90, 0), (90, 200), (0, 200)]  # 90 m east by 200 m north, box centre 45 m east
    flown = _flown_m(_plan(tmp_path / "rect.plan", [_survey_v3(rect, 0.0, 25.0, 10.0)]))
    # lines at 45 - 1100 + 25 k m east: 20, 45 and 70 m cross the polygon, each from its crossing with
    # the first edge (south) to the third (north); entry corner 1 reverses their order
    assert np.allclose(flown[:, :2], [(70, -10), (70, 210), (45, 210), (45, -10), (20, -10), (20, 210)], atol=0.05)
    assert np.allclose(flown[:, 2], 50.0, atol=0.01)  # relativeAltitude: 50 m above home

    triangle = [(0, 0), (100, 0), (0, 100)]  # transects east-west (bearing 90), 40 m apart
    flown = _flown_m(_plan(tmp_path / "tri.plan", [_survey_v3(triangle, 90.0, 40.0)]))
    # lines 50 - (-1050 + 40 k) m north: 60 and 20 cross, flown west (the hypotenuse, edge 1, comes first)
    assert np.allclose(flown[:, :2], [(80, 20), (0, 20), (0, 60), (40, 60)], atol=0.05)

    wide = [(0, 0), (100, 0), (100, 190), (0, 190)]  # lines 30 m apart at 5, 35, 65 and 95 m east
    refly = _flown_m(_plan(tmp_path / "refly.plan", [_survey_v3(wide, 0.0, 30.0, refly90Degrees=True)]))
    assert np.allclose(refly[:8:2, 0], [95, 65, 35, 5], atol=0.05)
    assert len(refly) == 8 + 12  # then at 90 degrees: 6 east-west transects, 20 .. 170 m north
    # the first pass ends at (5, 0): the second starts at the nearest of the corners QGroundControl weighs
    assert np.allclose(refly[8:12, :2], [(0, 20), (100, 20), (100, 50), (0, 50)], atol=0.05)
    w, _ = mission_waypoints(tmp_path / "rect.plan", None, 15.0)
    assert w.t_s[-1] == pytest.approx((math.hypot(70, 10, 50) + 3 * 220 + 2 * 25) / 5.0, rel=1e-4)  # 5 m/s


def test_a_survey_starts_at_its_entry_corner(tmp_path: Path) -> None:
    """The survey's 'entryLocation' (QGroundControl's 'rotate entry point') was ignored, and transects were
    centred on the polygon: the drone started at another corner of another grid than QGroundControl's."""
    rect = [(0, 0), (90, 0), (90, 200), (0, 200)]
    starts = []
    for entry in range(4):
        item = _survey_v5(rect, 0.0, 25.0, 0.0, None)
        item["entryLocation"] = entry
        starts.append(_flown_m(_plan(tmp_path / f"e{entry}.plan", [item]))[:2, :2])
    # 0: the first transect as computed; 1: the last one; 2 and 3: the same from their other end
    assert np.allclose(starts, [[(20, 0), (20, 200)], [(70, 0), (70, 200)], [(20, 200), (20, 0)],
                                [(70, 200), (70, 0)]], atol=0.05)
    # QGroundControl folds the angle into -90..90: 180 flies as 0
    folded = _survey_v5(rect, 180.0, 25.0, 0.0, None)
    assert np.allclose(_flown_m(_plan(tmp_path / "f.plan", [folded])), _flown_m(tmp_path / "e0.plan"), atol=1e-6)
    wide = _survey_v5([(0, 0), (140, 0), (140, 200), (0, 200)], 0.0, 25.0, 0.0, None, flyAlternateTransects=True)
    flown = _flown_m(_plan(tmp_path / "alt.plan", [wide]))  # lines at 20, 45, 70, 95, 120 m east
    assert np.allclose(flown[::2, 0], [20, 70, 120, 95, 45], atol=0.05)  # every other one, then back
    assert np.allclose(flown[:, 1], [0, 200, 200, 0, 0, 200, 200, 0, 0, 200], atol=0.05)
    concave = [(0, 0), (90, 0), (90, 200), (60, 200), (60, 100), (30, 100), (30, 200), (0, 200)]  # a U
    flown = _flown_m(_plan(tmp_path / "u.plan", [_survey_v5(concave, 0.0, 25.0, 0.0, None)]))
    # as QGroundControl, each line from its farthest crossings: the one at 45 m east across the notch
    assert np.allclose(flown[:, :2], [(20, 0), (20, 200), (45, 100), (45, 0), (70, 0), (70, 200)], atol=0.05)
    bad = _survey_v5(rect, 0.0, 25.0, 0.0, None)
    bad["entryLocation"] = 4
    with pytest.raises(ContactError, match=r"items\[0\]\.entryLocation: expected 0, 1, 2 or 3"):
        missions.read_mission(_plan(tmp_path / "bad.plan", [bad]), 15.0)


def test_a_survey_spacing_under_half_a_metre_flies_one_transect_as_in_qgroundcontrol(tmp_path: Path) -> None:
    """QGroundControl takes a spacing under 0.5 m as 100 km (one transect through the polygon's centre);
    it was computed as given, so 0.001 m over a 100 m polygon was refused for its 100,000 transects."""
    rect = [(0, 0), (100, 0), (100, 200), (0, 200)]
    one = _flown_m(_plan(tmp_path / "wide.plan", [_survey_v3(rect, 0.0, 100_000.0)]))
    assert len(one) == 2 and np.allclose(one[:, 0], 50.0, atol=0.01)  # the centre line, south to north
    for spacing in (0.001, 0.49):
        assert np.array_equal(_flown_m(_plan(tmp_path / "fine.plan", [_survey_v3(rect, 0.0, spacing)])), one)
    assert len(_flown_m(_plan(tmp_path / "half.plan", [_survey_v3(rect, 0.0, 0.5)]))) == 2 * 200  # 0.5 m is kept
    big = [(0, 0), (6000, 0), (6000, 200), (0, 200)]
    with pytest.raises(ContactError, match=r"grid\.spacing: 0\.5 m gives \d+ transects over the polygon \(at most 10000\)"):
        missions.read_mission(_plan(tmp_path / "big.plan", [_survey_v3(big, 0.0, 0.5)]), 15.0)


_GONE = object()


@pytest.mark.parametrize("key, value, message", [
    ("polygon", [[47.0, 8.0], [47.001, 8.0]], r"polygon: expected 3 or more \[lat, lon\] vertices"),
    ("polygon", [[47.0, 8.0], [47.001, 8.0], [47.002, 8.0]], r"polygon: encloses no area"),
    ("polygon", [[47.0, 8.0], [95.0, 8.0], [47.0, 8.01]], r"polygon\[1\]: expected latitude -90..90"),
    ("polygon", [[47.0, 8.0], [47.0, None], [47.001, 8.01]], r"polygon\[1\]: expected \[lat, lon\]"),
    ("grid.spacing", _GONE, r"grid\.spacing: expected a number of metres above 0"),
    ("grid.angle", float("nan"), r"grid\.angle: expected a number of degrees"),
    ("grid.turnAroundDistance", -5, r"grid\.turnAroundDistance: expected a number of metres 0\.\.10000"),
    ("grid.relativeAltitude", "yes", r"grid\.relativeAltitude: expected true or false"),
    ("grid.altitude", 1e9, r"expected an altitude within"),
    ("hoverAndCapture", True, r"hoverAndCapture: a survey that stops at each photo"),
    ("grid", _GONE, r"complex item 'survey' holds no computed waypoints \(TransectStyleComplexItem\.Items\) and "
                    r"is not a survey with a 'polygon' and grid settings"),
])
def test_an_old_survey_that_cannot_be_computed_is_one_line(tmp_path: Path, key: str, value, message: str) -> None:
    _refused_with(tmp_path / "s.plan", _survey_v3([(0, 0), (100, 0), (100, 200), (0, 200)], 0.0, 25.0), key, value,
                  r"s\.plan: mission\.items\[0\].*" + message)


def _refused_with(path: Path, item: dict, key: str, value, pattern: str) -> None:
    """``item`` with its field ``key`` (dotted: ``grid.spacing``) set to ``value`` (removed for ``_GONE``),
    in a plan at ``path``: refused in one line matching ``pattern``."""
    *parents, last = key.split(".")
    table = item
    for name in parents:
        table = table[name]
    if value is _GONE:
        del table[last]
    else:
        table[last] = value
    with pytest.raises(ContactError, match=pattern) as err:
        missions.read_mission(_plan(path, [item]), 15.0)
    assert "\n" not in str(err.value)


def _survey_v5(polygon_m: list, angle: float, spacing: float, turnaround: float, items, flyAlternateTransects=False,
               **calc) -> dict:
    """A survey in the current format with its settings but no (or no stored) waypoints, as scripts write them."""
    transect = {"CameraCalc": {"AdjustedFootprintSide": spacing, "AdjustedFootprintFrontal": 25,
                               "DistanceToSurface": 50, "DistanceMode": 1, "version": 2, **calc},
                "TurnAroundDistance": turnaround, "HoverAndCapture": False, "Refly90Degrees": False, "version": 2}
    if items is not None:
        transect["Items"] = items
    return {"type": "ComplexItem", "complexItemType": "survey", "version": 5, "angle": angle, "entryLocation": 0,
            "flyAlternateTransects": flyAlternateTransects, "splitConcavePolygons": False,
            "polygon": [list(_local_to_geo(e, n)) for e, n in polygon_m], "TransectStyleComplexItem": transect}


def test_a_current_survey_without_its_waypoints_is_computed_like_an_old_one(tmp_path: Path) -> None:
    """A survey written by a script with its polygon and settings but without 'Items' (or with an empty list)
    was refused (or, with [], flown as nothing); QGroundControl's own empty survey (no polygon) still is."""
    rect = [(0, 0), (100, 0), (100, 200), (0, 200)]
    v3 = _survey_v3(rect, 30.0, 25.0, 10.0)
    v3["grid"]["entryLocation"] = 0  # the current format's (a version 3 grid without one starts at 1)
    old = _flown_m(_plan(tmp_path / "v3.plan", [v3]))
    for k, items in enumerate((None, [])):
        new = _flown_m(_plan(tmp_path / f"v5-{k}.plan", [_survey_v5(rect, 30.0, 25.0, 10.0, items)]))
        assert np.allclose(new, old, atol=1e-6)
    amsl = _flown_m(_plan(tmp_path / "amsl.plan", [_survey_v5(rect, 30.0, 25.0, 10.0, [], DistanceMode=2)]))
    assert np.allclose(amsl[:, 2], 50.0 - HOME[2], atol=0.01)
    empty = _survey_v5([(0, 0)], 0.0, 25.0, 0.0, [])
    _, targets = missions.read_mission(_plan(tmp_path / "empty.plan", [empty]), 15.0)
    assert len(targets) == 1  # home only: QGroundControl uploads nothing for it either
    terrain = _survey_v5(rect, 0.0, 25.0, 0.0, None, DistanceMode=3)
    with pytest.raises(ContactError, match=r"items\[0\]\.TransectStyleComplexItem\.CameraCalc\.DistanceMode: "
                                           r"expected 1 \(altitude above home\) or 2"):
        missions.read_mission(_plan(tmp_path / "terrain.plan", [terrain]), 15.0)


def _corridor(line_m: list, width: float, side: float, turnaround: float, items=None, entry=0, **calc) -> dict:
    """A corridor scan as QGroundControl saves it (version 2), with ``items`` (None: no 'Items' at all)."""
    transect = {"CameraCalc": {"AdjustedFootprintSide": side, "AdjustedFootprintFrontal": 25, "DistanceToSurface": 50,
                               "DistanceMode": 1, "version": 2, **calc},
                "TurnAroundDistance": turnaround, "HoverAndCapture": False, "Refly90Degrees": False,
                "CameraTriggerInTurnAround": True, "version": 2}
    if items is not None:
        transect["Items"] = items
    return {"type": "ComplexItem", "complexItemType": "CorridorScan", "version": 2, "CorridorWidth": width,
            "EntryPoint": entry, "polyline": [list(_local_to_geo(e, n)) for e, n in line_m],
            "TransectStyleComplexItem": transect}


# An L: 200 m north, then 150 m east. 60 m wide, transects 25 m apart: ceil(60 / 25) = 3 of them, QGroundControl's
# offsets 30 - 12.5 - 25 k = 17.5, -7.5 and -32.5 m to the left (facing along the polyline), not centred; each
# corner where the offset segments cross; 10 m turnarounds along the first and last segments (10.03 m east on
# QGroundControl's sphere); back and forth.
L_LINE = [(0, 0), (0, 200), (150, 200)]
L_FLOWN = [(-17.5, -10), (-17.5, 0), (-17.5, 217.5), (150, 217.5), (160, 217.5),
           (160, 192.5), (150, 192.5), (7.5, 192.5), (7.5, 0), (7.5, -10),
           (32.5, -10), (32.5, 0), (32.5, 167.5), (150, 167.5), (160, 167.5)]


def test_a_corridor_without_stored_waypoints_is_flown_as_qgroundcontrol_computes_it(tmp_path: Path) -> None:
    """A corridor scan saved with its polyline and settings but no computed waypoints was refused; it is flown
    along QGroundControl's transects: the same path (within 5 cm) and time as the plan storing them."""
    # the plan QGroundControl saves: each point a waypoint, the camera started at each entry and stopped at exit
    stored = []
    for k in range(3):
        points = L_FLOWN[5 * k:5 * k + 5]
        for j, (e, n) in enumerate(points):
            stored.append(_item(16, *_local_to_geo(e, n), 50.0))
            if j in (1, 3):
                stored.append(_item(206, p1=25.0 if j == 1 else 0.0, frame=2))
    with_items = _flown_m(_plan(tmp_path / "stored.plan", [_corridor(L_LINE, 60, 25, 10, stored)]))
    assert np.allclose(with_items[:, :2], L_FLOWN, atol=0.02)
    for k, items in enumerate((None, [])):  # no 'Items', or an empty list, as scripts write them
        path = _plan(tmp_path / f"c{k}.plan", [_corridor(L_LINE, 60, 25, 10, items)])
        flown = _flown_m(path)
        assert np.allclose(flown, with_items, atol=0.05)
        assert np.allclose(flown[:, 2], 50.0, atol=0.01)  # DistanceMode 1: 50 m above home
        w, _ = mission_waypoints(path, None, 15.0)
        w_stored, _ = mission_waypoints(tmp_path / "stored.plan", None, 15.0)
        assert w.t_s[-1] == pytest.approx(w_stored.t_s[-1], abs=0.02)
    # EntryPoint 1 starts with the other side's transect, 2 at the polyline's other end, 3 both
    starts = [_flown_m(_plan(tmp_path / f"e{e}.plan", [_corridor(L_LINE, 60, 25, 0, entry=e)]))[:3, :2]
              for e in range(4)]
    assert np.allclose(starts, [[(-17.5, 0), (-17.5, 217.5), (150, 217.5)], [(32.5, 0), (32.5, 167.5), (150, 167.5)],
                                [(150, 217.5), (-17.5, 217.5), (-17.5, 0)], [(150, 167.5), (32.5, 167.5), (32.5, 0)]],
                       atol=0.05)
    # no width, or a spacing under QGroundControl's 0.5 m floor: one transect, along the polyline itself
    for name, width, side in (("narrow", 0, 25), ("fine", 60, 0.2)):
        flown = _flown_m(_plan(tmp_path / f"{name}.plan", [_corridor(L_LINE, width, side, 0)]))
        assert np.allclose(flown[:, :2], L_LINE, atol=0.05)
    # a turn to the right (and a straight run) offsets the same way: the first transect on the left
    zig = _flown_m(_plan(tmp_path / "zig.plan", [_corridor([(0, 0), (100, 0), (200, 0), (200, -100)], 40, 20, 0)]))
    assert np.allclose(zig[:, :2], [(0, 10), (100, 10), (210, 10), (210, -100),
                                    (190, -100), (190, -10), (100, -10), (0, -10)], atol=0.05)
    # the turnarounds are stretched on QGroundControl's sphere (QGeoCoordinate's, radius 6371.0072 km): 1000 m
    # west of the start is 0.0131866 deg of longitude at 47 N, 2.9 m farther than 1000 m on WGS-84
    far = _plan(tmp_path / "far.plan", [_corridor([(0, 0), (100, 0)], 0, 25, 1000)])
    _, targets = missions.read_mission(far, 15.0)
    assert targets[1][1] == pytest.approx(HOME[1] - math.degrees(1000 / (6371007.2 * math.cos(math.radians(47)))),
                                          abs=1e-9)
    assert targets[1][0] == pytest.approx(HOME[0], abs=1e-6)
    # a corridor QGroundControl could not fill (under 2 vertices) and saved with no waypoints flies nothing
    _, targets = missions.read_mission(_plan(tmp_path / "one.plan", [_corridor([(0, 0)], 60, 25, 0, [])]), 15.0)
    assert len(targets) == 1


@pytest.mark.parametrize("key, value, message", [
    ("CorridorWidth", _GONE, r"CorridorWidth: expected a number of metres 0\.\.1e\+06, got nothing$"),
    ("CorridorWidth", -5, r"CorridorWidth: expected a number of metres 0\.\.1e\+06, got -5"),
    ("EntryPoint", 4, r"EntryPoint: expected 0, 1, 2 or 3"),
    ("TransectStyleComplexItem.CameraCalc.AdjustedFootprintSide", None,
     r"TransectStyleComplexItem\.CameraCalc\.AdjustedFootprintSide: expected a number of metres"),
    ("TransectStyleComplexItem.CameraCalc.AdjustedFootprintSide", 0.5,
     r"AdjustedFootprintSide: 0\.5 m gives 120000 transects over a 60000 m wide corridor \(at most 10000\)"),
    ("TransectStyleComplexItem.CameraCalc.DistanceMode", 3,
     r"DistanceMode: expected 1 .*a corridor scan above terrain"),
    ("TransectStyleComplexItem.TurnAroundDistance", 1e9, r"TurnAroundDistance: expected a number of metres 0\.\.10000"),
    ("TransectStyleComplexItem.HoverAndCapture", True, r"HoverAndCapture: a corridor scan that stops at each photo"),
    ("polyline", [[47.0, 8.0]], r"polyline: expected 2 or more \[lat, lon\] vertices"),
    ("polyline", [[47.0, 8.0], [47.0, "8"]], r"polyline\[1\]: expected \[lat, lon\] in degrees"),
    ("polyline", [[47.0, 8.0], [47.001, 8.0], [47.001, 8.0]], r"polyline\[2\]: lies within 1 mm of the vertex before"),
    ("polyline", [[47.0, 8.0], [47.002, 8.0], [47.0, 8.0000001]], r"polyline\[1\]: the corridor's side at this vertex "
                                                                  r"lies more than 1000 km away"),
    ("polyline", [[47.0 + k * 1e-4, 8.0] for k in range(40)], r"polyline: 40 vertices over 3000 transects give more "
                                                               r"than 100000 waypoints"),
])
def test_a_corridor_that_cannot_be_computed_is_one_line(tmp_path: Path, key: str, value, message: str) -> None:
    item = _corridor(L_LINE, 60, 25, 10)
    if key == "polyline" and len(value) == 40:
        item["CorridorWidth"] = 60_000
        item["TransectStyleComplexItem"]["CameraCalc"]["AdjustedFootprintSide"] = 20
    if "AdjustedFootprintSide" in key and value == 0.5:
        item["CorridorWidth"] = 60_000
    _refused_with(tmp_path / "c.plan", item, key, value, r"c\.plan: mission\.items\[0\]\.?.*" + message)


def test_mission_bounds_are_the_documented_ones(tmp_path: Path) -> None:
    """docs/formats.md: a speed of 0.01..1,000 m/s, a hold of 0..30 days, files of at most 16 MiB,
    and each East-North-Up coordinate within 1,000 km of the origin (a point 794 km east and
    951 km north, 1,244 km away in a straight line, is flown; one 1,113 km north is not)."""
    assert missions.MAX_MISSION_BYTES == 16 * 2**20

    def flies(items: list, **mission) -> bool:
        try:
            mission_waypoints(_plan(tmp_path / "m.plan", items, **mission), None, 8.0)
        except ContactError:
            return False
        return True

    step = [_item(16, 47.001, 8.0, 50.0)]
    assert [flies(step, hoverSpeed=v) for v in (0.01, 1000.0, 0.0099, 1000.001)] == [True, True, False, False]
    assert [flies([_item(16, 47.001, 8.0, 50.0, p1=v)]) for v in (0.0, 30 * 86400.0, 30 * 86400.0 + 1)] == [
        True, True, False]
    far = enu_km([55.0], [20.5], [HOME[2] + 40.0], HOME)[0]
    assert max(abs(far)) < 1000.0 < float(np.linalg.norm(far))
    assert [flies([_item(16, 55.0, 20.5, 40.0)]), flies([_item(16, 57.0, 8.0, 40.0)])] == [True, False]


def test_a_corridor_width_whose_ratio_to_the_spacing_underflows_flies_one_transect(tmp_path: Path) -> None:
    """A width so small (5e-324 m, the least subnormal) that width / spacing rounds to 0 gave zero transects and a
    numpy ValueError (traceback) instead of the one transect along the polyline that a width of 0 flies."""
    narrow = _flown_m(_plan(tmp_path / "zero.plan", [_corridor(L_LINE, 0, 25, 0)]))
    tiny = _flown_m(_plan(tmp_path / "tiny.plan", [_corridor(L_LINE, 5e-324, 25, 0)]))
    assert np.array_equal(tiny, narrow) and np.allclose(tiny[:, :2], L_LINE, atol=0.05)


def test_a_corridor_turning_back_at_a_hair_is_the_polyline_itself_when_zero_wide(tmp_path: Path) -> None:
    """A polyline turning back onto itself at an angle of 1e-8 rad: 1 + cos rounded to 0, so the vertex's
    sideways slide divided by zero (a numpy RuntimeWarning), and 0 x inf refused a zero-wide corridor (one
    transect, the polyline itself) as lying more than 1000 km away. It is flown; a wide one is still refused."""
    back = [(0, 0), (100, 0), (0, 1e-6)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        flown = _flown_m(_plan(tmp_path / "line.plan", [_corridor(back, 0, 25, 0)]))
        assert np.allclose(flown[:, :2], back, atol=0.01)
        with pytest.raises(ContactError, match=r"polyline\[1\]: the corridor's side at this vertex lies more than"):
            missions.read_mission(_plan(tmp_path / "wide.plan", [_corridor(back, 60, 25, 0)]), 15.0)


def test_a_refly_pass_with_too_many_transects_is_refused_before_any_pass_is_computed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second pass's transects were counted only after the first pass was computed (seconds for a
    polygon of 10,000 vertices): every pass is now counted first, and none computed when one has too many."""
    # 5 m east by 6000 m north: at 0.5 m apart, 10 north-south lines cross it, about 12,000 east-west ones
    item = _survey_v3([(0, 0), (5, 0), (5, 6000), (0, 6000)], 0.0, 0.5, refly90Degrees=True)
    passes = []
    compute = missions._survey_pass
    monkeypatch.setattr(missions, "_survey_pass", lambda *args: passes.append(args[2]) or compute(*args))
    with pytest.raises(ContactError, match=r"grid\.spacing: 0\.5 m gives 1200[01] transects over the polygon"):
        missions.read_mission(_plan(tmp_path / "refly.plan", [item]), 15.0)
    assert passes == []


def test_a_self_crossing_survey_polygon_whose_lobes_cancel_is_flown(tmp_path: Path) -> None:
    """A bow-tie polygon's two lobes have opposite signed areas that sum to 0, so it was refused as 'encloses
    no area (its vertices lie on one line)', which they do not; QGroundControl flies it (its transects join
    each line's farthest crossings). Only vertices on one line are refused."""
    bow = [(0, 0), (100, 100), (100, 0), (0, 100)]  # lines at 50 - 1050 + 24 k m east: 8, 32, 56 and 80 m
    flown = _flown_m(_plan(tmp_path / "bow.plan", [_survey_v5(bow, 0.0, 24.0, 0.0, None)]))
    assert np.allclose(flown[:, :2], [(8, 8), (8, 92), (32, 68), (32, 32), (56, 44), (56, 56), (80, 80), (80, 20)],
                       atol=0.05)


def test_a_corridor_turnaround_ending_at_the_pole_is_flown(tmp_path: Path) -> None:
    """A turnaround stretched from 89.9926 N due north by its distance to the pole (822.8433 m on
    QGroundControl's sphere) put the sine of its latitude a rounding above 1: math.asin raised a
    ValueError (a traceback). It ends at the pole."""
    item = _corridor([(0, 0)], 0, 25, 822.8433)
    item["polyline"] = [[89.9926, 0.0], [89.9916, 0.0]]  # due south: the turnaround before it goes north
    _, targets = missions.read_mission(_plan(tmp_path / "pole.plan", [item], home=(89.9926, 0.0, 0.0)), 15.0)
    assert targets[1][0] == pytest.approx(90.0, abs=1e-9)
    assert np.isfinite([t[:3] for t in targets]).all()


def test_survey_lines_along_edges_and_through_vertices_join_the_edges_they_meet() -> None:
    """A pass's lines are matched against the edges near them, a block of lines at a time: a line lying
    along an edge (not crossed) or through a vertex (met by both its edges) still gives the transect
    between its farthest crossings, as when every edge was tested against every line."""
    pts = np.array([(0.0, 0.0), (100.0, 0.0), (100.0, 200.0), (0.0, 200.0)])  # lines at 0, 25, .. 100 m east
    transects = missions._survey_pass(pts, np.roll(pts, -1, axis=0) - pts, 0.0, 25.0)
    assert np.allclose(transects, [[(x, 0.0), (x, 200.0)] for x in (0, 25, 50, 75, 100)], atol=1e-9)
    comb = np.array([(0.0, 0.0), (600.0, 0.0)] + [(600.0 - 10.0 * k, 50.0 + 50.0 * (k % 2)) for k in range(61)])
    transects = missions._survey_pass(comb, np.roll(comb, -1, axis=0) - comb, 0.0, 1.0)  # 601 lines, 3 blocks
    assert len(transects) == 601 and all(t[0][1] == 0.0 and 50.0 <= t[1][1] <= 100.0 for t in transects)


def test_a_waypoints_line_is_the_editors_whatever_unicode_separators_it_holds(tmp_path: Path) -> None:
    """str.splitlines() also ends a line at U+2028 / U+2029, NEL, \\x1c..\\x1e, \\v and \\f, and str.split()
    splits fields there: a comment holding U+2028 moved every later line number one down (an error named
    line 4 for the editor's 6), and a field holding one was cut into two fields. Only LF, CR LF and CR end
    a line; only spaces and tabs separate fields."""
    head = "QGC WPL 110\n0\t1\t0\t16\t0\t0\t0\t0\t47\t8\t400\t1\n"
    good = "1\t0\t3\t22\t0\t0\t0\t0\t47\t8\t40\t1\n2\t0\t3\t16\t5\t0\t0\t0\t47.001\t8\t40\t1\n"
    for sep in ("\u2028", "\u2029", "\x85", "\x1c", "\x1d", "\x1e", "\x0b", "\x0c"):
        comment = f"# leg one{sep}leg two\n"
        path = tmp_path / "sep.waypoints"
        path.write_text(head + comment + good + "3\t0\t3\t31\t0\t0\t0\t0\t47\t8\t5\t1\n", encoding="utf-8")
        with pytest.raises(ContactError, match=r"sep\.waypoints: line 6: unsupported command 31"):
            mission_waypoints(path, None, 5.0)
        path.write_text(head + comment + good + f"3\t0\t3\t16\t0\t0\t0\t0\t47.0{sep}02\t8\t40\t1\n", encoding="utf-8")
        with pytest.raises(ContactError, match=r"sep\.waypoints:6: p1\.\.p4, lat, lon, alt must be numbers$"):
            mission_waypoints(path, None, 5.0)
        path.write_text(head + comment + good, encoding="utf-8")
        assert mission_waypoints(path, None, 5.0)[0].t_s.size == 4  # home, takeoff, the waypoint and its hold
    # Windows, Unix and classic Mac line ends are read alike, and spaces may separate fields
    plain = (head + good).replace("\t", " ")
    times = {end: mission_waypoints(_written(tmp_path / "e.waypoints", plain.replace("\n", end)), None, 5.0)[0].t_s
             for end in ("\n", "\r\n", "\r")}
    assert all(np.array_equal(t, times["\n"]) for t in times.values()) and times["\n"].size == 4


def _written(path: Path, text: str) -> Path:
    path.write_bytes(text.encode())
    return path


def test_one_run_reads_each_mission_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """fol contacts (and fol simulate) checked the scenario (check_contact_scenario), then built the
    trajectories (build_trajectories), each reading every mission file: a 100,000-item mission was parsed
    twice (1.3 s of the 3.8 s of CPU of `fol contacts`). The drones read by the check are kept in the
    scenario and reused, read again only when the fields they were read with change."""
    from contact_sim.scenario import build_trajectories, check_contact_scenario, load_contact_scenario
    from fol.cli import main

    reads: list[str] = []
    read_text_file = missions.read_text_file

    def counted(path, *args, **kwargs):
        reads.append(Path(path).name)
        return read_text_file(path, *args, **kwargs)

    monkeypatch.setattr(missions, "read_text_file", counted)
    east = (HOME[0], HOME[1] + 0.005, HOME[2])
    _plan(tmp_path / "west.plan", [_item(16, *east[:2], 0.0)], hoverSpeed=10.0)
    _wpl(tmp_path / "east.waypoints", east, [_item(16, *HOME[:2], 0.0)])
    path = _scenario(tmp_path, 'missions = ["west.plan", "east.waypoints"]\nspeed_m_s = 10.0')
    assert main(["contacts", str(path), "--no-plot", "--out", str(tmp_path / "out")]) == 0
    assert sorted(reads) == ["east.waypoints", "west.plan"]
    assert (tmp_path / "out" / "contacts.csv").read_text().count("\n") == 2  # the header and the one window

    reads.clear()
    sc = load_contact_scenario(path)
    assert check_contact_scenario(sc)[0] == ["west", "east"]
    first = build_trajectories(sc)
    assert sorted(reads) == ["east.waypoints", "west.plan"]
    sc.drones.speed_m_s = 5.0  # the .waypoints mission's speed: read again, flown at half the speed
    slower = build_trajectories(sc)
    assert sorted(reads) == ["east.waypoints", "east.waypoints", "west.plan", "west.plan"]
    at = lambda traj: traj.pos[np.searchsorted(traj.times_s, 20.0), 1]  # noqa: E731 - east's position at 20 s
    home_east = enu_km([east[0]], [east[1]], [east[2]], HOME)[0]
    assert np.linalg.norm(at(first) - home_east) == pytest.approx(0.2, rel=1e-6)  # 10 m/s for 20 s
    assert np.linalg.norm(at(slower) - home_east) == pytest.approx(0.1, rel=1e-6)  # 5 m/s


def _survey_pass_per_line(pts: np.ndarray, edges: np.ndarray, bearing: float, spacing: float) -> list:
    """The survey pass as it was computed before it was vectorised (a Python call per line, ~37 us a
    waypoint): the reference the numpy version must match exactly."""
    along, across, centre, half, off, run, k_low, k_high = missions._pass_lines(pts, bearing, spacing)
    run_edge = edges @ along
    off_next = np.roll(off, -1)
    lo, hi = np.minimum(off, off_next), np.maximum(off, off_next)

    def transect(offset: float, near: np.ndarray):
        at = near[(lo[near] <= offset) & (hi[near] >= offset)]
        d, d_next = off[at] - offset, off_next[at] - offset
        cross = d != d_next
        t = run[at[cross]] + d[cross] / (d[cross] - d_next[cross]) * run_edge[at[cross]]
        t = t[np.abs(t) <= half]
        if t.size < 2 or t.max() - t.min() <= 1e-9 * half:
            return None
        tol = 1e-9 * half
        ends = (t.min(), t.max())
        if np.flatnonzero(t <= ends[0] + tol)[0] > np.flatnonzero(t >= ends[1] - tol)[0]:
            ends = ends[::-1]
        return np.array([centre + offset * across + e * along for e in ends])

    found = []
    for first in range(k_low, k_high + 1, 256):
        block = range(first, min(first + 256, k_high + 1))
        near = np.flatnonzero((lo <= -half + block[-1] * spacing) & (hi >= -half + block[0] * spacing))
        found += [t for k in block if (t := transect(-half + k * spacing, near)) is not None]
    if len(found) < 2:
        one = transect(0.0, np.arange(len(off)))
        found = [] if one is None else [one]
    forward = found and np.dot(found[0][1] - found[0][0], along) > 0
    return [t if (np.dot(t[1] - t[0], along) > 0) == forward else t[::-1] for t in found]


def _survey_flight_per_transect(path: Path, polygon: list, angle: float, spacing: float, turn: float, entry: int,
                                refly: bool, alternate: bool) -> list[tuple[float, float]]:
    """A survey's waypoints [lat, lon] as they were flown before the vectorised pass: the reference pass, then
    each transect ordered and stretched by its own turn of a Python loop."""
    tangent, pts = missions._plane_vertices(path, "polygon", polygon, 3)
    edges = np.roll(pts, -1, axis=0) - pts
    flown: list[np.ndarray] = []
    for pass_angle in missions._survey_angles(angle, refly):
        transects = _survey_pass_per_line(pts, edges, pass_angle, missions._qgc_spacing(spacing))
        if not transects:
            continue
        if entry in (2, 3):
            transects = [t[::-1] for t in transects]
        if entry in (1, 3):
            transects = transects[::-1]
        if flown:
            last = flown[-1][-1]
            nearest = int(np.argmin([np.hypot(*(transects[i][j] - last)) for i, j in ((0, 0), (0, -1), (-1, 0))]))
            if nearest > 1:
                transects = transects[::-1]
            if nearest & 1:
                transects = [t[::-1] for t in transects]
        if alternate:
            transects = transects[0::2] + transects[1::2][::-1]
        for k, ends in enumerate(transects):
            ends = ends if k % 2 == 0 else ends[::-1]
            unit = (ends[1] - ends[0]) / np.hypot(*(ends[1] - ends[0]))
            flown.append(np.array([ends[0] - turn * unit, ends[1] + turn * unit]))
    if not flown:
        return []
    plane = np.concatenate(flown) / 1000.0
    lat, lon = missions.lat_lon_of_enu(np.column_stack([plane, np.zeros(len(plane))]), tangent)
    return list(zip(lat.tolist(), lon.tolist()))


SURVEY_SHAPES = {  # metres east / north of HOME
    "rectangle (lines along two edges, through its corners)": [(0, 0), (100, 0), (100, 200), (0, 200)],
    "concave (two runs of crossings a line)": [(0, 0), (400, 0), (400, 300), (200, 100), (0, 300)],
    "self-crossing bow tie": [(0, 0), (300, 300), (300, 0), (0, 300)],
    "comb (601 lines at 1 m, three blocks of lines)":
        [(0.0, 0.0), (600.0, 0.0)] + [(600.0 - 10.0 * k, 50.0 + 50.0 * (k % 2)) for k in range(61)],
    "narrower than the spacing (the centre line only)": [(0, 0), (1, 0), (1, 500), (0, 500)],
    "triangle (a vertex on a line)": [(0, 0), (250, 0), (0, 250)],
    "zigzag (200 edges across every line: fewer lines a block)": [(100.0 * (k % 2), 0.5 * k) for k in range(200)],
    "star": [(round(r * math.cos(a), 1), round(r * math.sin(a), 1))
             for a, r in zip(np.linspace(0, 2 * np.pi, 17, endpoint=False), [300, 120] * 8 + [250])],
}


@pytest.mark.parametrize("shape", SURVEY_SHAPES)
def test_the_vectorised_survey_flies_the_waypoints_of_the_per_line_computation(tmp_path: Path, shape: str) -> None:
    """_survey_pass computes a block of lines against the edges near them with numpy (it cost ~37 us a
    waypoint as a Python call per line, ~5 us now with the items around it): every waypoint is the same
    float as the per-line computation's, over polygon edge cases, bearings (folded ones too), entry corners,
    the second pass, alternate transects and turnarounds."""
    polygon_m = SURVEY_SHAPES[shape]
    for angle, spacing in ((0.0, 10.0), (30.0, 25.0), (90.0, 1.0), (-45.0, 7.0), (200.0, 25.0), (300.0, 0.3)):
        for entry, refly, alternate, turn in ((0, False, False, 0.0), (1, True, False, 7.5), (2, False, True, 0.0),
                                              (3, True, True, 12.0)):
            item = _survey_v5(polygon_m, angle, spacing, turn, None, flyAlternateTransects=alternate)
            item["entryLocation"] = entry
            item["TransectStyleComplexItem"]["Refly90Degrees"] = refly
            path = _plan(tmp_path / "s.plan", [item])
            _, targets = missions.read_mission(path, 5.0)
            want = _survey_flight_per_transect(path, item["polygon"], angle, spacing, turn, entry, refly, alternate)
            assert [t[:2] for t in targets[1:]] == want, (angle, entry)
            assert len(want) >= 2
    pts = np.array(polygon_m, dtype=float)
    for bearing in (0.0, 30.0, 90.0, 135.0):
        new = missions._survey_pass(pts, np.roll(pts, -1, axis=0) - pts, bearing, 0.5)
        assert np.array_equal(new, np.array(_survey_pass_per_line(pts, np.roll(pts, -1, axis=0) - pts, bearing, 0.5)))


def test_legs_are_timed_as_flown_from_the_last_target_flown_to(tmp_path: Path) -> None:
    """The legs are measured all at once now; the times and positions are those of the rule written out
    (each leg's length np.linalg.norm from the last target flown to, a target within 1e-9 km of it passed
    over unless held), bit for bit, on targets that pass over runs of near repeats, hold at one, and
    drift by less than 1e-9 km per target."""
    rng = np.random.default_rng(5)
    lat = 47.0 + np.cumsum(rng.normal(0.0, 1e-4, 400))
    lat[100:110] = lat[99]  # repeats passed over
    lat[200:205] = lat[199] + np.arange(1, 6) * 2e-15  # a drift of femtodegrees: each within 1e-9 km
    holds = np.where(np.arange(400) % 37 == 0, 5.0, 0.0)
    holds[103] = 2.0  # a repeat held at
    targets = [(float(la), 8.0 + k * 1e-5, 400.0 + k % 3, 5.0 + k % 4, float(h), f"line {k}")
               for k, (la, h) in enumerate(zip(lat, holds))]
    got = missions._timed_mission(tmp_path / "a.waypoints", "a", targets, HOME)
    xyz = enu_km(lat, [t[1] for t in targets], [t[2] for t in targets], HOME)
    ts, ps, t = [0.0], [xyz[0]], 0.0
    for k in range(1, len(targets)):
        d = float(np.linalg.norm(xyz[k] - ps[-1]))
        if d > 1e-9:
            t += max(d * 1000.0 / targets[k][3], 1e-3)
            ts.append(t)
            ps.append(xyz[k])
        if targets[k][4] >= 1e-3:
            t += targets[k][4]
            ts.append(t)
            ps.append(xyz[k])
    assert got.t_s.tobytes() == np.array(ts).tobytes() and got.xyz_km.tobytes() == np.array(ps).tobytes()
    assert len(ts) < len(targets) + int((holds > 0).sum())  # some targets were passed over


def test_a_waypoints_line_matched_whole_reads_as_its_fields_checked_one_by_one(tmp_path: Path) -> None:
    """A .waypoints item line is matched whole by one pattern now (one regex call a line, not ten checks);
    on lines of fields drawn from numbers, near-numbers and non-numbers, it gives the frame, command, params
    and autocontinue of the checks written out (split at spaces and tabs, is_decimal, decimal_number), or
    the same one-line refusal."""
    from swarmbase.tomlcheck import decimal_number, is_decimal

    path = tmp_path / "m.waypoints"

    def by_fields(line: str):
        fields = line.replace("\t", " ").split()
        if len(fields) != 12:
            return ("expected 12 tab-separated fields (index, current, frame, command, p1..p4, lat, lon, alt, "
                    f"autocontinue), got {len(fields)}")
        if not all(is_decimal(v, 5, signed=True) for v in fields[2:4]):
            return "frame and command must be integers"
        try:
            params = [decimal_number(v) for v in fields[4:11]]
        except ValueError:
            return "p1..p4, lat, lon, alt must be numbers"
        return int(fields[2]), int(fields[3]), params, fields[11]

    ints = ["3", "-3", "003", "0000000016", "-00000", "99999"], ["123456", "3.0", "+3", "٣", "1_0", "-"]
    numbers = (["0", "47.5", "-8.25", ".5", "5.", "1e5", "1E-05", "+1", "-0", "nan", "NaN", "inf", "-Infinity",
                "1e999"], ["1_000", "4\U0001d7df.5", ".", "e5", "nan5", "0x10", "47.5.1", "--1", "１0"])
    rng = np.random.default_rng(3)

    def drawn(words: tuple[list[str], list[str]], n: int) -> list[str]:  # a bad one one time in 20
        return [str(rng.choice(words[rng.random() < 0.05])) for _ in range(n)]

    counts = {"read": 0, "refused": 0}
    for _ in range(3000):
        fields = ["1", "0", *drawn(ints, 2), *drawn(numbers, 7), str(rng.choice(["1", "0", "0.0"]))]
        if rng.random() < 0.05:
            fields = fields[:int(rng.integers(1, 12))] if rng.random() < 0.5 else [*fields, "x"]
        gaps = rng.choice(["\t", " ", "\t\t", " \t "], len(fields))
        line = "".join(f + g for f, g in zip(fields, gaps)).strip(" \t")
        expected = by_fields(line)
        try:
            got = missions._wpl_item_fields(path, 7, line)
        except ContactError as exc:
            assert isinstance(expected, str) and str(exc) == f"{path}:7: {expected}", (line, expected)
            counts["refused"] += 1
            continue
        assert not isinstance(expected, str), (line, got)
        assert got[:2] == expected[:2] and got[3] == expected[3], line
        assert np.array(got[2]).tobytes() == np.array(expected[2]).tobytes(), line
        counts["read"] += 1
    assert min(counts.values()) > 500, counts


@pytest.mark.parametrize("word", ["\u0131nf", "-\u0130NF", "\u0131nf\u0131n\u0131ty", "\u0130nfinity"])
def test_a_waypoints_number_spelt_with_a_dotless_or_dotted_i_is_refused_in_one_line(tmp_path: Path, word: str) -> None:
    """The whole-line pattern of a .waypoints item took DECIMAL_NUMBER's 'inf' / 'infinity' case-insensitively
    in Unicode, where 'i' matches the Turkish dotless 'ı' and dotted 'İ': 'ınf' matched, then float() raised a
    bare ValueError (a traceback out of read_mission) where the field checks refuse it in one line."""
    from swarmbase.tomlcheck import DECIMAL_NUMBER, decimal_number

    path = tmp_path / "m.waypoints"
    path.write_text("QGC WPL 110\n0\t1\t0\t16\t0\t0\t0\t0\t47.397\t8.545\t488.0\t1\n"
                    f"1\t0\t3\t16\t0\t0\t0\t{word}\t47.4\t8.545\t40.0\t1\n", encoding="utf-8")
    with pytest.raises(ContactError) as err:
        missions.read_mission(path, 5.0)
    assert str(err.value) == f"{path}:3: p1..p4, lat, lon, alt must be numbers"
    assert DECIMAL_NUMBER.fullmatch(word) is None
    with pytest.raises(ValueError, match="not a decimal number"):
        decimal_number(word)
