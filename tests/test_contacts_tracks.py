"""Recorded drone flights (GPX tracks, the drone agent's positions.jsonl) in a drone scenario's
``missions`` list are replayed at their own UTC times (contact_sim.tracks)."""

from __future__ import annotations

import datetime as _dt
import importlib.util
import json
import time
from pathlib import Path

import numpy as np
import pytest

from contact_sim import tracks
from contact_sim.errors import ContactError
from contact_sim.missions import enu_km, mission_waypoints, read_missions
from contact_sim.tracks import read_track

from _memory import traced_peak
from _names import odd_folder
from _tracks import unreachable_after

HOME = (47.0, 8.0, 400.0)
T0 = _dt.datetime(2025, 6, 1, 10, 0, 0, tzinfo=_dt.timezone.utc)
NS = "http://www.topografix.com/GPX/1/1"


def _iso(seconds: float) -> str:
    return (T0 + _dt.timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def _gpx(path: Path, *segments: list[tuple], ns: str = NS, extra: str = "") -> Path:
    """A GPX file of one track; each segment a list of (t s after T0, lat, lon, ele m)."""
    segs = "".join("<trkseg>" + "".join(
        f'<trkpt lat="{lat}" lon="{lon}"><ele>{ele}</ele><time>{_iso(t)}</time></trkpt>' for t, lat, lon, ele in seg)
        + "</trkseg>" for seg in segments)
    path.write_text(f'<?xml version="1.0" encoding="UTF-8"?>\n<gpx version="1.1" creator="test" xmlns="{ns}">'
                    f'{extra}<trk><name>t</name>{segs}</trk></gpx>\n')
    return path


def _scenario(tmp_path: Path, drones: str, time: str = "") -> Path:
    path = tmp_path / "s.toml"
    path.write_text(f"[drones]\nradio_range_km = 0.5\n{drones}\n[time]\n{time}duration_s = 200.0\nstep_s = 10.0\n")
    return path


def test_a_gpx_track_gives_the_mission_paths_positions_and_its_times(tmp_path: Path) -> None:
    pts = [(0.0, *HOME), (40.0, 47.001, 8.0, 450.0), (100.0, 47.001, 8.001, 450.0)]
    gpx = _gpx(tmp_path / "logger.gpx", pts[:2], [pts[2]])  # two segments, joined
    (w,), start = read_missions([gpx], None, 15.0)
    assert w.name == "logger" and start == T0
    assert np.array_equal(w.t_s, [0.0, 40.0, 100.0])
    # the same points as a planned mission (waypoints at absolute altitudes), through the same geodetic path
    plan = tmp_path / "same.plan"
    items = [{"type": "SimpleItem", "command": 16, "frame": 0, "params": [0, 0, 0, None, lat, lon, ele]}
             for _, lat, lon, ele in pts[1:]]
    plan.write_text(json.dumps({"fileType": "Plan", "mission": {"plannedHomePosition": list(HOME), "items": items,
                                                                "hoverSpeed": 5}}))
    mw, _ = mission_waypoints(plan, None, 15.0)
    assert np.abs(w.xyz_km - mw.xyz_km).max() * 1000 < 1.0
    assert np.allclose(w.xyz_km[1], enu_km([47.001], [8.0], [450.0], HOME)[0], atol=1e-9)
    # GPX 1.0 and a time zone offset read alike
    gpx10 = tmp_path / "v10.gpx"
    gpx10.write_text(gpx.read_text().replace(NS, "http://www.topografix.com/GPX/1/0")
                     .replace(_iso(40.0), "2025-06-01T12:00:40+02:00"))
    (w10,), _ = read_missions([gpx10], None, 15.0)
    assert np.array_equal(w10.t_s, w.t_s) and np.allclose(w10.xyz_km, w.xyz_km)


def test_times_align_on_time_start_or_the_earliest_track(tmp_path: Path) -> None:
    a = _gpx(tmp_path / "a.gpx", [(0.0, *HOME), (100.0, 47.0, 8.002, 400.0)])
    b = _gpx(tmp_path / "b.gpx", [(30.0, *HOME), (60.0, 47.001, 8.0, 400.0)])
    (wa, wb), start = read_missions([a, b], None, 15.0)
    assert start == T0 and np.array_equal(wb.t_s, [30.0, 60.0])
    # time.start 50 s in: a's earlier point is dropped, a starts where it is then (halfway)
    (wa, wb), start = read_missions([a, b], None, 15.0, T0 + _dt.timedelta(seconds=50))
    assert start == T0 + _dt.timedelta(seconds=50)
    assert np.array_equal(wa.t_s, [0.0, 50.0]) and np.allclose(wa.xyz_km[0], wa.xyz_km[1] / 2, atol=1e-6)
    assert np.array_equal(wb.t_s, [0.0, 10.0])
    with pytest.raises(ContactError, match=r"b.gpx: the track ends at 2025-06-01T10:01:00\+00:00, before time.start"):
        read_missions([a, b], None, 15.0, T0 + _dt.timedelta(seconds=70))


def test_two_gpx_tracks_crossing_give_the_expected_contact_window(tmp_path: Path) -> None:
    from contact_sim.scenario import compute_contacts, load_contact_scenario

    east = (HOME[0], HOME[1] + 0.02, HOME[2])
    d = enu_km([east[0]], [east[1]], [east[2]], HOME)[0, 0] * 1000  # the chord, m (about 1.52 km)
    _gpx(tmp_path / "west.gpx", [(10.0, *HOME), (10.0 + d / 10, *east)])
    _gpx(tmp_path / "east.gpx", [(10.0, *east), (10.0 + d / 10, *HOME)])
    plan = compute_contacts(load_contact_scenario(_scenario(
        tmp_path, 'missions = ["west.gpx", "east.gpx"]', 'start = "2025-06-01T09:59:50Z"\n')))
    assert len(plan.windows) == 1 and plan.start == T0 - _dt.timedelta(seconds=10)
    w = plan.windows[0]
    # hovering apart for 20 s, then closing at 20 m/s; in range (500 m) until 500 m apart again
    assert w.t_start_s == pytest.approx(20 + (d - 500) / 20, abs=1e-3)
    assert w.t_end_s == pytest.approx(20 + (d + 500) / 20, abs=1e-3)
    # without time.start, the earliest track time is t = 0 and the plan's start
    plan = compute_contacts(load_contact_scenario(_scenario(tmp_path, 'missions = ["west.gpx", "east.gpx"]')))
    assert plan.start == T0 + _dt.timedelta(seconds=10) and plan.windows[0].t_start_s == pytest.approx(w.t_start_s - 20, abs=1e-3)
    # a speed for tracks flown at their own times would be ignored: refused, as every unused field is
    with pytest.raises(ContactError, match=r"s\.toml: drones\.speed_m_s: not used when every file of missions is a recorded"):
        load_contact_scenario(_scenario(tmp_path, 'missions = ["west.gpx", "east.gpx"]\nspeed_m_s = 5.0'))


class _Source:
    """Stands in for PositionSource: the fixes an autopilot would give, as PositionSource.latest() does."""

    def __init__(self) -> None:
        self.fix = None

    def latest(self):
        return None if self.fix is None else dict(self.fix, age_s=0.0, stale=False)


def test_the_agents_position_log_replays(tmp_path: Path) -> None:
    from pymavlink.dialects.v20 import common as mav

    from fol.agent.position import PositionLog, fix_from_message

    state = tmp_path / "drone 7"
    state.mkdir()
    source = _Source()
    log = PositionLog(source, state, "drone 7")
    log.record("sent", "peer", "m0")  # no fix yet: skipped
    fixes = [(0.0, *HOME), (20.0, 47.0005, 8.0, 420.0), (50.0, 47.001, 8.0005, 430.0)]
    for t, lat, lon, alt in fixes:
        msg = mav.MAVLink_global_position_int_message(1000, round(lat * 1e7), round(lon * 1e7), round(alt * 1000),
                                                      12000, 0, 0, 0, 0)
        source.fix = fix_from_message(msg, received_at=T0.timestamp() + t)
        log.record("sent", "peer", "m1")
        log.record("received", "peer", "m2")  # the same fix, logged twice
    (w,), start = read_missions([log.path], None, 15.0)
    assert w.name == "drone 7" and start == T0 and np.allclose(w.t_s, [0.0, 20.0, 50.0])
    want = enu_km([f[1] for f in fixes], [f[2] for f in fixes], [f[3] for f in fixes], HOME)
    assert np.allclose(w.xyz_km, want, atol=1e-6)


def test_the_gpx_reader_refuses_a_dtd_before_expanding_an_entity(tmp_path: Path) -> None:
    # expat (Python 3.11, expat 2.5) expands internal entities: 390 bytes of declarations make 3 MB of
    # text; its own amplification limit only acts past 8 MiB. The reader refuses the DOCTYPE first.
    lol = "".join(f'<!ENTITY l{i} "{"".join(f"&l{i - 1};" for _ in range(10))}">' for i in range(1, 10))
    path = tmp_path / "lol.gpx"
    path.write_text(f'<?xml version="1.0"?><!DOCTYPE gpx [<!ENTITY l0 "lol">{lol}]>'
                    f'<gpx xmlns="{NS}"><trk><name>&l9;</name></trk></gpx>')
    with pytest.raises(ContactError) as exc:
        read_track(path)
    assert str(exc.value) == (f"{path}:1: a document type declaration (<!DOCTYPE); this file kind has none, and "
                              "entities are not expanded")



def test_a_gpx_nested_thousands_deep_reads_as_fast_as_a_flat_one(tmp_path: Path) -> None:
    """The reader copied its path of open elements at each element: 40,000 elements nested in a point's
    <extensions> (a 300 kB file) took seconds, 200,000 three minutes. Deeper elements are passed over."""
    gpx = _gpx(tmp_path / "deep.gpx", [(0.0, *HOME), (40.0, 47.001, 8.0, 450.0)])
    depth = 40_000
    gpx.write_text(gpx.read_text().replace("</time></trkpt>", "</time><extensions>" + "<x>" * depth
                                           + "</x>" * depth + "</extensions></trkpt>", 1))
    t0 = time.perf_counter()
    points = read_track(gpx)
    assert time.perf_counter() - t0 < 1.0  # milliseconds; about 7 s when each element copied the path
    assert [p[1:4] for p in points] == [HOME, (47.001, 8.0, 450.0)]


def test_a_gpx_reads_only_its_tracks_points_with_every_field(tmp_path: Path) -> None:
    """Only gpx/trk/trkseg/trkpt of the GPX namespace are points: a track, segment or point of another
    namespace, a point inside an extension and a nested <gpx> are passed over, text around a foreign
    element inside <ele> is the value, a second <ele> replaces the first; each point names its line,
    track, segment and index (the foreign ones not counted)."""
    x = 'xmlns:x="urn:x"'
    gpx = tmp_path / "mixed.gpx"
    gpx.write_text(
        f'<?xml version="1.0"?>\n<gpx xmlns="{NS}" {x}><wpt lat="1" lon="1"/><rte/>\n'
        '<x:trk><trkseg><trkpt lat="9" lon="9"><ele>1</ele><time>2025-01-01T00:00:00Z</time></trkpt></trkseg></x:trk>\n'
        '<trk><gpx><trk><trkseg><trkpt lat="9" lon="9"><ele>1</ele><time>2025-01-01T00:00:09Z</time></trkpt>'
        '</trkseg></trk></gpx><x:trkseg/><trkseg>\n'
        '<trkpt lat=" 47.5 " lon="8e0"><ele>4<x:e>0</x:e>0</ele><x:ele>7</x:ele><time> 2025-01-01T00:00:01z </time>'
        '<extensions><x:a><trkpt lat="9" lon="9"><ele>1</ele><time>2025-01-01T00:00:05Z</time></trkpt></x:a>'
        '</extensions></trkpt>\n'
        '<trkpt\n lat="47.6" lon="8.1"><time>2025-01-01T01:00:02+01:00</time><ele>nan</ele><ele>5.5</ele></trkpt>'
        '</trkseg></trk>\n<trk><x:trkpt lat="9" lon="9"/><trkseg><trkpt lat="47.7" lon="8.2"><ele>6</ele>'
        '<time>2025-01-01T00:00:03Z</time></trkpt></trkseg></trk></gpx>\n')
    utc = _dt.timezone.utc
    assert read_track(gpx) == [
        (_dt.datetime(2025, 1, 1, 0, 0, 1, tzinfo=utc), 47.5, 8.0, 400.0, "line 5 (trk 0, trkseg 0, trkpt 0)"),
        (_dt.datetime(2025, 1, 1, 0, 0, 2, tzinfo=utc), 47.6, 8.1, 5.5, "line 6 (trk 0, trkseg 0, trkpt 1)"),
        (_dt.datetime(2025, 1, 1, 0, 0, 3, tzinfo=utc), 47.7, 8.2, 6.0, "line 8 (trk 1, trkseg 1, trkpt 0)")]


def test_a_gpx_read_leaves_no_cycle_holding_its_points(tmp_path: Path) -> None:
    """The parser held its element handler, which held the parser and every point read: a cycle that only
    the cyclic collector frees. The benchmark's reader of a 16 MiB GPX kept 50 MB more after each read
    (resident 91, 159, 209 MB after three). Now the points go when the caller drops them."""
    gpx = _gpx(tmp_path / "t.gpx", [(0.0, *HOME), (40.0, 47.001, 8.0, 450.0)])
    assert len(read_track(gpx)) == 2
    assert unreachable_after(lambda: read_track(gpx)) == 0


@pytest.mark.parametrize("when", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:30:00-01:00"])
def test_a_gpx_time_beyond_the_calendar_in_utc_is_one_line(tmp_path: Path, when: str) -> None:
    """A time whose offset takes it before year 1 or past 9999 in UTC was an OverflowError traceback."""
    gpx = _gpx(tmp_path / "far.gpx", [(0.0, *HOME)])
    gpx.write_text(gpx.read_text().replace(_iso(0.0), when))
    with pytest.raises(ContactError) as exc:
        read_track(gpx)
    assert str(exc.value) == (f"{gpx}: line 2 (trk 0, trkseg 0, trkpt 0): <time>: expected a time within the years "
                              f"1..9999 in UTC, got {when!r}")


def test_tracks_dated_at_the_calendars_end_refuse_a_span_past_it(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Without time.start, t = 0 is the tracks' earliest time: tracks of 9999-12-31T23:58 with a
    200 s span passed --check and the window search, then writing contacts.csv stopped with an
    OverflowError traceback (date value out of range). A span that fits is still replayed."""
    from contact_sim.scenario import compute_contacts, load_contact_scenario
    from fol.cli import main

    end = _dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=_dt.timezone.utc)
    for name in ("a", "b"):
        gpx = _gpx(tmp_path / f"{name}.gpx", [(0.0, *HOME), (30.0, 47.0001, 8.0, 400.0)])
        gpx.write_text(gpx.read_text().replace(_iso(0.0), "9999-12-31T23:58:00Z").replace(_iso(30.0), "9999-12-31T23:58:30Z"))
    path = _scenario(tmp_path, 'missions = ["a.gpx", "b.gpx"]')
    for argv in (["contacts", str(path), "--check"], ["contacts", str(path), "--out", str(tmp_path / "out")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err == (f"fol contacts: error: {path}: time.duration_s: 200 s from t = 0, the earliest time of the "
                       "tracks in drones.missions, 9999-12-31T23:58:00Z end after 9999-12-31T23:59:59Z, the last "
                       "time an ISO-8601 UTC stamp names; shorten time.duration_s\n"), err
    assert not (tmp_path / "out").exists()
    path.write_text(path.read_text().replace("duration_s = 200.0", "duration_s = 119.0"))
    plan = compute_contacts(load_contact_scenario(path))
    assert plan.start == end - _dt.timedelta(seconds=119) and len(plan.windows) == 1
    assert main(["contacts", str(path), "--no-plot", "--out", str(tmp_path / "out")]) == 0
    assert "9999-12-31T23:59:59.000Z" in (tmp_path / "out" / "contacts.csv").read_text()


@pytest.mark.parametrize("change, shown", [
    (lambda s: _edit(s, 'lat="47.0001"', f'lat="{"4x" * 50_000}"'), "got '4x4x4x4x4x"),
    (lambda s: _edit(s, "<ele>400.0</ele>", f"<ele>{'m' * 100_000}</ele>"), "got 'mmmmmmmmmm"),
    (lambda s: _edit(s, _iso(10.0), "T" * 100_000), "got 'TTTTTTTTTT"),
    (lambda s: s.replace("<gpx ", f"<{'g' * 100_000} ").replace("</gpx>", f"</{'g' * 100_000}>"), "got the element 'ggggg"),
    (lambda s: s.replace(NS, NS + "/x" * 50_000), "in namespace 'http://www.topografix.com/GPX/1/1/x/x"),
])
def test_a_huge_value_in_a_gpx_is_shown_bounded(tmp_path: Path, change, shown: str) -> None:
    """A GPX value is quoted in the error as every other message quotes one, cut after some 60 characters;
    the whole value was written (a line of 100,000 characters)."""
    path = _gpx(tmp_path / "big.gpx", GOOD)
    path.write_text(change(path.read_text()))
    with pytest.raises(ContactError) as exc:
        read_track(path)
    msg = str(exc.value)
    assert msg.startswith(f"{path}: ") and shown in msg and len(msg) < 300, msg[:300]


def test_gpx_declaring_an_unknown_encoding_is_one_line(tmp_path: Path) -> None:
    """expat raised a bare LookupError ("unknown encoding: UTF-0"), a traceback."""
    path = tmp_path / "odd.gpx"
    path.write_bytes(f'<?xml version="1.0" encoding="UTF-0"?><gpx xmlns="{NS}"><trk/></gpx>'.encode())
    with pytest.raises(ContactError) as exc:
        read_track(path)
    assert str(exc.value) == f"{path}:1: the XML declaration names an encoding Python does not know ('UTF-0')"


@pytest.mark.parametrize("encoding", ["Shift_JIS", "UTF-32"])
def test_gpx_declaring_a_multi_byte_encoding_is_one_line(tmp_path: Path, encoding: str) -> None:
    """expat reads UTF-8, UTF-16 and 8-bit encodings; the others were a bare ValueError ("multi-byte
    encodings are not supported"), a traceback."""
    path = tmp_path / "jp.gpx"
    path.write_bytes(f'<?xml version="1.0" encoding="{encoding}"?><gpx xmlns="{NS}"><trk/></gpx>'.encode())
    with pytest.raises(ContactError) as exc:
        read_track(path)
    assert str(exc.value) == (f"{path}:1: the XML declaration names a multi-byte encoding the XML parser cannot "
                              f"read ('{encoding}'); save the file as UTF-8")

def _edit(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


GOOD = [(0.0, *HOME), (10.0, 47.0001, 8.0, 400.0), (20.0, 47.0002, 8.0, 400.0)]


@pytest.mark.parametrize("change, message", [
    (lambda s: _edit(s, f"<time>{_iso(10.0)}</time>", ""),
     "line 2 (trk 0, trkseg 0, trkpt 1): no <time>; a track without times cannot be replayed"),
    (lambda s: _edit(s, _iso(10.0), "10:00 yesterday"),
     "line 2 (trk 0, trkseg 0, trkpt 1): <time>: expected an ISO-8601 UTC time like 2025-03-01T00:00:00Z, "
     "got '10:00 yesterday'"),
    (lambda s: _edit(s, _iso(20.0), _iso(5.0)),
     "line 2 (trk 0, trkseg 0, trkpt 2): time 2025-06-01T10:00:05+00:00 is not after the previous point's "
     "2025-06-01T10:00:10+00:00 (line 2 (trk 0, trkseg 0, trkpt 1)); a track's times must increase"),
    (lambda s: _edit(s, '<ele>400.0</ele>', '<ele>nan</ele>'),
     "line 2 (trk 0, trkseg 0, trkpt 0): expected an altitude within 1e+06 m, got nan"),
    (lambda s: _edit(s, 'lat="47.0001"', 'lat="north"'),
     "line 2 (trk 0, trkseg 0, trkpt 1): expected numbers lat and lon, got 'north', '8.0'"),
    (lambda s: _edit(s, 'lat="47.0002" lon="8.0"', 'lat="57.0" lon="8.0"'),
     "line 2 (trk 0, trkseg 0, trkpt 2): lies more than 1000 km from the drones' origin (47, 8)"),
    (lambda s: _edit(s, "<trk>", "<trk><trkseg><trkpt").replace("</gpx>", ""), "invalid XML (not well-formed (invalid token): line 2"),
    (lambda s: _edit(s, f'xmlns="{NS}"', 'xmlns="http://example.com/kml"'),
     "not a GPX file (expected a <gpx> root element of GPX 1.1 or 1.0, got the element 'gpx' in namespace "
     "'http://example.com/kml')"),
    (lambda s: s.split("<trk>")[0] + '<rte><rtept lat="47" lon="8"/></rte><wpt lat="47" lon="8"/></gpx>',
     "no track points (trk/trkseg/trkpt); its 1 rte and 1 wpt points have no times: plan such a flight as a "
     ".plan or .waypoints mission"),
])
def test_a_bad_gpx_is_one_line_naming_file_and_point(tmp_path: Path, change, message: str) -> None:
    path = _gpx(tmp_path / "bad.gpx", GOOD)
    path.write_text(change(path.read_text()))
    with pytest.raises(ContactError) as exc:
        read_missions([path], None, 15.0)
    assert str(exc.value).startswith(f"{path}: {message}") and "\n" not in str(exc.value)


@pytest.mark.parametrize("lines, message", [
    (['{"event": "sent", "position": null}'], 'no position fix (every line\'s "position" is null)'),
    (['not json'], '1: expected a JSON object with a "position" (a line of a drone agent\'s positions.jsonl)'),
    (['{"position": null, "position": {"lat_deg": 47.0}}'], '1: expected a JSON object with a "position" (a line '
     'of a drone agent\'s positions.jsonl), got invalid JSON (duplicate key \'position\' in a JSON object)'),
    (['{"position": null}', "[" * 100_000 + "]" * 100_000], '2: expected a JSON object with a "position" (a line '
     "of a drone agent's positions.jsonl), got invalid JSON (nested deeper than 8 levels)"),
    (['{"position": {"lat_deg": 47.0, "lon_deg": 8.0, "alt_msl_m": 400.0}}'],
     "1: position: expected numbers lat_deg, lon_deg, alt_msl_m and received_at (Unix seconds)"),
    (['{"position": {"lat_deg": 47.0, "lon_deg": 8.0, "alt_msl_m": null, "received_at": 100.0}}'],
     "1: position has no altitude (alt_msl_m is null, as in the 2-D fixes of a GPS receiver sending RMC without "
     "GGA); a replay needs each fix's altitude"),
    (['{"position": {"lat_deg": 47.0, "lon_deg": 8.0, "alt_msl_m": 400.0, "received_at": 1e300}}'],
     "1: position: expected numbers lat_deg, lon_deg, alt_msl_m and received_at (Unix seconds)"),
    (['{"position": {"lat_deg": 47.0, "lon_deg": 8.0, "alt_msl_m": 400.0, "received_at": 100.0}}',
      '{"position": {"lat_deg": 47.1, "lon_deg": 8.0, "alt_msl_m": 400.0, "received_at": 90.0}}'],
     "line 2: time 1970-01-01T00:01:30+00:00 is not after the previous point's 1970-01-01T00:01:40+00:00 (line 1)"),
])
def test_a_bad_position_log_is_one_line(tmp_path: Path, lines: list[str], message: str) -> None:
    (tmp_path / "d1").mkdir()
    path = tmp_path / "d1" / "positions.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ContactError) as exc:
        read_missions([path], None, 15.0)
    sep = ":" if message[0].isdigit() else ": "
    assert str(exc.value).startswith(f"{path}{sep}{message}") and "\n" not in str(exc.value)


def test_an_oversized_track_is_refused_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _gpx(tmp_path / "big.gpx", GOOD)
    monkeypatch.setattr(tracks, "MAX_MISSION_BYTES", 100)
    with pytest.raises(ContactError, match=r"big.gpx: \d+ bytes; a GPX file may have at most 100"):
        read_track(path)


_NO_PYMAVLINK = pytest.mark.skipif(importlib.util.find_spec("pymavlink") is None, reason="pymavlink not installed")


@pytest.mark.parametrize("name, what", [("grows.gpx", "GPX file"),
                                        pytest.param("grows.tlog", "MAVLink telemetry log", marks=_NO_PYMAVLINK),
                                        pytest.param("grows.bin", "DataFlash log", marks=_NO_PYMAVLINK)])
def test_a_track_that_grows_past_the_limit_after_its_size_check_is_refused_not_read_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, what: str) -> None:
    """The size is checked, then the file read: one appended to in between (a log still written) is read
    no further than the limit and refused in one line. A GPX file was read whole (path.read_bytes()): 1 MiB
    appended past a limit of a few hundred bytes was held and the track replayed. Failed before (and the
    binary logs' refusal said "over N bytes", not that the file grew)."""
    if what != "GPX file":  # the binary logs' readers import pymavlink first: not traced below
        for module in ("pymavlink.DFReader", "pymavlink.dialects.v20.common"):
            importlib.import_module(module)
    path = _gpx(tmp_path / name, GOOD)
    limit, appended = path.stat().st_size + 10, b" " * (1 << 20)
    checked = tracks.check_input_file

    def grows_after_the_check(*args, **kwargs):
        result = checked(*args, **kwargs)
        with path.open("ab") as stream:
            stream.write(appended)
        return result

    monkeypatch.setattr(tracks, "MAX_MISSION_BYTES", limit)
    monkeypatch.setattr(tracks, "check_input_file", grows_after_the_check)
    caught: list[ContactError] = []

    def read() -> None:
        with pytest.raises(ContactError) as info:
            read_track(path)
        caught.append(info.value)

    assert traced_peak(read) < 64 * 1024  # not the 1 MiB the file holds now
    assert str(caught[0]) == f"{path}: grew past {limit} bytes while it was read; a {what} may have at most {limit}"


def test_a_position_log_cut_off_in_its_last_line_replays_the_complete_lines(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "d1").mkdir()
    path = tmp_path / "d1" / "positions.jsonl"
    fixes = [f'{{"position": {{"lat_deg": 47.0, "lon_deg": 8.0, "alt_msl_m": 400.0, "received_at": {t}}}}}'
             for t in (100.0, 110.0)]
    path.write_text("\n".join(fixes) + "\n" + fixes[1][:30])  # power lost while the third line was written
    with caplog.at_level("WARNING", logger="contact_sim.tracks"):
        points = read_track(path)
    assert [p[0].timestamp() for p in points] == [100.0, 110.0]
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}:3: skipping the last line, cut off (no newline, not JSON)"]
    path.write_text("\n".join(fixes) + "\n" + fixes[1][:30] + "\n")  # terminated: not a cut-off write
    with pytest.raises(ContactError, match=r"positions.jsonl:3: expected a JSON object"):
        read_track(path)
    path.write_text(fixes[0][:30] + "\n" + fixes[1])  # a bad line before the last one stays refused
    with pytest.raises(ContactError, match=r"positions.jsonl:1: expected a JSON object"):
        read_track(path)
    path.write_text(fixes[0][:30])
    with pytest.raises(ContactError, match=r"no position fix \(every complete line's"):
        read_track(path)


@pytest.mark.parametrize("tail, kept", [(17, 2), (None, 3)], ids=["cut-off-fragment", "only-the-newline-missing"])
def test_the_agent_restarting_after_a_cut_off_line_keeps_its_log_readable(tmp_path: Path, tail, kept: int,
                                                                          caplog: pytest.LogCaptureFixture) -> None:
    """Power lost while the agent appended a line leaves it without its newline; the readers skip it
    as the last line. The restarted agent appended its next line right after it, gluing both into one
    malformed line in the middle, and the whole log was refused. It now cuts the fragment off first
    (one warning naming the file and the bytes dropped), or ends a line that only lacks its newline."""
    from pymavlink.dialects.v20 import common as mav

    from fol.agent.position import PositionLog, fix_from_message

    state = tmp_path / "drone 7"
    state.mkdir()
    source = _Source()
    before = PositionLog(source, state, "drone 7")
    lines = []
    for t, lat in ((0.0, 47.0), (20.0, 47.0005), (40.0, 47.001)):
        msg = mav.MAVLink_global_position_int_message(1000, round(lat * 1e7), 80000000, 400000, 12000, 0, 0, 0, 0)
        source.fix = fix_from_message(msg, received_at=T0.timestamp() + t)
        lines.append(json.dumps(before.record("sent", "peer", "m1")))
    third = lines[2] if tail is None else lines[2][:tail]
    before.path.write_text(f"{lines[0]}\n{lines[1]}\n{third}")  # the third line cut off
    msg = mav.MAVLink_global_position_int_message(1000, 470015000, 80000000, 400000, 12000, 0, 0, 0, 0)
    source.fix = fix_from_message(msg, received_at=T0.timestamp() + 60.0)
    with caplog.at_level("WARNING", logger="fol.agent.position"):
        new = json.dumps(PositionLog(source, state, "drone 7").record("received", "peer", "m2"))
    assert before.path.read_text() == "\n".join([*lines[:kept], new]) + "\n"
    points = read_track(before.path)
    assert [p[1] for p in points] == [47.0, 47.0005, 47.001, 47.0015][:kept] + [47.0015]
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert warned == ([] if tail is None else [f"drone 7: {before.path}: dropped {tail} bytes of a last line cut off "
                                               f"while it was written (no newline, not JSON)"])


def _fix_line(source: _Source, log, t: float, lat: float, peer: str = "peer") -> str:
    from pymavlink.dialects.v20 import common as mav

    from fol.agent.position import fix_from_message

    msg = mav.MAVLink_global_position_int_message(1000, round(lat * 1e7), 80000000, 400000, 12000, 0, 0, 0, 0)
    source.fix = fix_from_message(msg, received_at=T0.timestamp() + t)
    return json.dumps(log.record("sent", peer, "m1"))


@pytest.mark.parametrize("last", [
    '{"position": null, "a": [[[[[[[[0]]]]]]]]}',  # a whole JSON object, nested deeper than the reader takes
    '{"position": null, "position": null}',  # a whole JSON object the reader refuses: a key given twice
    '{"position": null, "a": [' + ",".join(["0"] * 2000) + ']}',  # more values than a line may hold
], ids=["too-deep", "duplicate-key", "too-many-values"])
def test_a_last_line_the_reader_refuses_is_not_ended_but_cut_off(tmp_path: Path, last: str) -> None:
    """The agent ended a newline-less last line whenever it parsed (json.loads) as an object, by its own
    rule; the track reader parses each line with the bounded reader (depth, values, unique keys). A last
    line only the agent took became, once ended, a malformed line in the middle: the whole log refused.
    The agent now uses the reader's rule, so the line is cut off and the log stays readable."""
    from fol.agent.position import PositionLog

    state = tmp_path / "drone 7"
    state.mkdir()
    source = _Source()
    log = PositionLog(source, state, "drone 7")
    first = _fix_line(source, log, 0.0, 47.0)
    log.path.write_text(f"{first}\n{last}")
    second = _fix_line(source, PositionLog(source, state, "drone 7"), 20.0, 47.0005)
    assert log.path.read_text() == f"{first}\n{second}\n"
    assert [p[1] for p in read_track(log.path)] == [47.0, 47.0005]


def test_a_long_whole_last_line_the_reader_takes_is_kept(tmp_path: Path) -> None:
    """The agent looked at a newline-less last line only up to 64 KiB and cut off anything longer, although
    the reader takes a line of any length within its file limit: a whole fix (here with a 100,000-character
    peer name) was lost. The agent now keeps and ends every last line the reader would take."""
    from fol.agent.position import PositionLog

    state = tmp_path / "drone 7"
    state.mkdir()
    source = _Source()
    log = PositionLog(source, state, "drone 7")
    first = _fix_line(source, log, 0.0, 47.0, peer="p" * 100_000)
    log.path.write_text(first)  # its newline lost
    second = _fix_line(source, PositionLog(source, state, "drone 7"), 20.0, 47.0005)
    assert log.path.read_text() == f"{first}\n{second}\n"
    assert [p[1] for p in read_track(log.path)] == [47.0, 47.0005]


def test_the_position_logs_line_limits_are_the_track_readers() -> None:
    """fol.agent may not import contact_sim (the layering): the limits by which the agent decides whether a
    last line its readers would take is written twice; this keeps them one."""
    from fol.agent import position

    assert position.MAX_LOG_LINE_DEPTH == tracks.MAX_LOG_LINE_DEPTH
    assert position.MAX_LOG_LINE_VALUES == tracks.MAX_LOG_LINE_VALUES
    assert position.MAX_LOG_BYTES == tracks.MAX_MISSION_BYTES
    assert position.LOG_FILE == tracks.POSITION_LOG
    assert position.ROTATED_LOG.pattern == tracks.ROTATED_POSITION_LOG.pattern


def test_an_append_that_fails_part_way_does_not_glue_the_next_line_onto_its_fragment(tmp_path: Path) -> None:
    """A disk that filled while the running agent appended a line left part of it (no newline) in the log;
    the agent's next line, once there was room again, was appended right after it: one malformed line in
    the middle, and the whole log refused by its readers. The next append now cuts the fragment off first."""
    import resource
    import signal

    from pymavlink.dialects.v20 import common as mav

    from fol.agent.position import PositionLog, fix_from_message

    state = tmp_path / "drone 7"
    state.mkdir()
    source = _Source()
    log = PositionLog(source, state, "drone 7")
    for t, lat in ((0.0, 47.0), (20.0, 47.0005), (40.0, 47.001)):
        msg = mav.MAVLink_global_position_int_message(1000, round(lat * 1e7), 80000000, 400000, 12000, 0, 0, 0, 0)
        source.fix = fix_from_message(msg, received_at=T0.timestamp() + t)
        if t == 20.0:  # this line meets a full disk part-way
            limits = resource.getrlimit(resource.RLIMIT_FSIZE)
            handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (log.path.stat().st_size + 20, limits[1]))
            try:
                with pytest.raises(OSError):
                    log.record("sent", "peer", "m1")
            finally:
                resource.setrlimit(resource.RLIMIT_FSIZE, limits)
                signal.signal(signal.SIGXFSZ, handler)
            assert not log.path.read_text().endswith("\n")  # a fragment of the line was written
        else:
            log.record("sent", "peer", "m1")
    assert [p[1] for p in read_track(log.path)] == [47.0, 47.001]
    assert all(json.loads(line) for line in log.path.read_text().splitlines())


def test_the_agents_position_log_is_rotated_before_it_passes_the_readers_limit(tmp_path: Path, monkeypatch,
                                                                                caplog: pytest.LogCaptureFixture) -> None:
    """The agent appended to positions.jsonl without a bound, and the track reader refuses a log over 16 MiB
    (about 38,000 exchanges) whole: a long-lived drone's log became unreadable. When the next line would
    pass the limit the file is now renamed positions.<n>.jsonl (n from 1, the oldest first) and the line
    starts a new one: every file within the limit and readable on its own, every line in one of them, in
    order. The limit is taken down to 4 KiB here (in both modules: they are kept equal) to stay fast."""
    limit = 4096
    state, source, log = _small_position_log(tmp_path, monkeypatch, limit)
    with caplog.at_level("INFO", logger="fol.agent.position"):
        lines = [_fix_line(source, log, 10.0 * i, 47.0 + 1e-5 * i) for i in range(40)]
    rotated = sorted((p for p in state.iterdir() if p.name != "positions.jsonl"), key=lambda p: int(p.name.split(".")[1]))
    assert [p.name for p in rotated] == [f"positions.{n}.jsonl" for n in range(1, len(rotated) + 1)]
    assert len(rotated) >= 3
    files = [*rotated, log.path]
    assert all(p.stat().st_size <= limit for p in files)
    for full, after in zip(files, files[1:]):  # renamed only when its next line would not have fitted
        assert full.stat().st_size + len(after.read_text().splitlines()[0]) + 1 > limit
    assert [line for p in files for line in p.read_text().splitlines()] == lines  # none lost, in order
    points = [p for path in files for p in read_track(path)]
    assert [p[1] for p in points] == [47.0 + 1e-5 * i for i in range(40)]
    (w,), _ = read_missions([rotated[1]], None, 15.0)
    assert w.name == "drone 7"
    renamed = [r.getMessage() for r in caplog.records if "renamed" in r.getMessage()]
    assert len(renamed) == len(rotated) and all(r.levelname == "INFO" for r in caplog.records if "renamed" in
                                                 r.getMessage())
    assert renamed[0].startswith(f"drone 7: {log.path}: ") and "renamed positions.1.jsonl" in renamed[0]


def _small_position_log(tmp_path: Path, monkeypatch, limit: int):
    """A drone agent's position log in ``tmp_path / "drone 7"`` whose files hold at most ``limit`` bytes
    (the agent's limit and the reader's, kept equal, both taken down): ``(folder, source, log)``."""
    from fol.agent import position

    monkeypatch.setattr(position, "MAX_LOG_BYTES", limit)
    monkeypatch.setattr(tracks, "MAX_MISSION_BYTES", limit)
    state = tmp_path / "drone 7"
    state.mkdir()
    source = _Source()
    return state, source, position.PositionLog(source, state, "drone 7")


def _log_line(t: float, lat: float) -> str:
    fix = {"lat_deg": lat, "lon_deg": 8.0, "alt_msl_m": 400.0, "received_at": T0.timestamp() + t}
    return json.dumps({"event": "sent", "peer": "p", "model_id": "m1", "t": T0.timestamp() + t + 0.2,
                       "position": fix}) + "\n"


def test_the_pieces_of_a_rotated_position_log_replay_as_one_drone(tmp_path: Path, monkeypatch) -> None:
    """A drone is named after its position log's folder, so the rotated pieces of one drone's log
    (positions.<n>.jsonl, positions.jsonl) could not be listed together: "drone name 'drone 7' (its folder)
    is also that of .../positions.1.jsonl", and only one piece of the flight could be replayed. The pieces
    of one folder given together are now one drone's track, joined in the agent's order whatever the
    list's, the same as the whole log read as one file."""
    limit = 4096
    state, source, log = _small_position_log(tmp_path, monkeypatch, limit)
    for i in range(40):
        _fix_line(source, log, 10.0 * i, 47.0 + 1e-5 * i)
    pieces = sorted(state.glob("positions.*.jsonl"), key=lambda p: int(p.name.split(".")[1]))
    assert len(pieces) >= 3
    gpx = _gpx(tmp_path / "alpha.gpx", [(0.0, 47.0, 8.0, 400.0), (400.0, 47.001, 8.0, 400.0)])
    listed = [pieces[1], gpx, log.path, *pieces[2:], pieces[0]]  # any order, another drone between them
    drones, epoch = read_missions(listed, None, 15.0)
    assert [w.name for w in drones] == ["drone 7", "alpha"] and epoch == T0
    whole = tmp_path / "whole" / "drone 7" / "positions.jsonl"
    whole.parent.mkdir(parents=True)
    monkeypatch.setattr(tracks, "MAX_MISSION_BYTES", 10 * limit)
    whole.write_text("".join(p.read_text() for p in [*pieces, log.path]))
    (one, _), _ = read_missions([whole, gpx], None, 15.0)
    assert one.t_s.size == 40 and np.array_equal(drones[0].t_s, one.t_s)
    assert np.array_equal(drones[0].xyz_km, one.xyz_km)


def test_joined_position_log_pieces_must_follow_each_other_in_time(tmp_path: Path) -> None:
    """The same fix logged on both sides of a rotation counts once; a piece that starts before the end of
    the one before it (overlapping or misnumbered files) is refused in one line naming both; a piece given
    twice, or another .jsonl of the same folder, is refused as before (one drone per name)."""
    state = tmp_path / "drone-1"
    state.mkdir()
    old, new = state / "positions.1.jsonl", state / "positions.jsonl"
    old.write_text(_log_line(0.0, 47.0) + _log_line(10.0, 47.0001))
    new.write_text(_log_line(10.0, 47.0001) + _log_line(20.0, 47.0002))  # its first line: the same fix
    (w,), _ = read_missions([new, old], None, 15.0)
    assert w.name == "drone-1" and list(w.t_s) == [0.0, 10.0, 20.0]
    new.write_text(_log_line(5.0, 47.0003) + _log_line(30.0, 47.0004))
    with pytest.raises(ContactError) as info:
        read_missions([old, new], None, 15.0)
    msg = str(info.value)
    assert msg.startswith(f"{state}: positions.jsonl line 1: time 2025-06-01T10:00:05+00:00 is not after the last "
                          "point of positions.1.jsonl (2025-06-01T10:00:10+00:00, positions.1.jsonl line 2)"), msg
    assert "\n" not in msg and len(msg) < 400
    with pytest.raises(ContactError, match="positions.1.jsonl: given twice in missions"):
        read_missions([old, new, old], None, 15.0)
    other = state / "copy.jsonl"
    other.write_text(_log_line(40.0, 47.0))
    with pytest.raises(ContactError, match="drone name 'drone-1' \\(its folder\\) is also that of"):
        read_missions([old, other], None, 15.0)


def test_many_pieces_of_one_position_log_are_grouped_in_linear_time(tmp_path: Path) -> None:
    """Each piece of a rotated log was compared with every piece before it, both paths resolved again each
    time: 1,000 pieces took 34 s, 2,000 140 s. Each is resolved once now: a piece given twice
    at the end of 3,000 is still refused naming it, within seconds."""
    from contact_sim.tracks import drone_files

    from _waiting import raised_within

    state = tmp_path / "drone-1"
    pieces = [state / f"positions.{n}.jsonl" for n in range(3000, 0, -1)]  # newest first: sorted into order
    exc = raised_within(lambda: drone_files([*pieces, state / "positions.7.jsonl"]), timeout=10.0)
    assert isinstance(exc, ContactError) and str(exc) == f"{state / 'positions.7.jsonl'}: given twice in missions"
    ((named, files),) = drone_files([*pieces, state / "positions.jsonl"])
    assert named == state and files == [*pieces[::-1], state / "positions.jsonl"]


def test_a_piece_of_a_rotated_position_log_without_a_fix_is_passed_over(tmp_path: Path, caplog) -> None:
    """The newest piece of a rotated log may hold no fix yet (its lines' "position" null, or one line cut
    off while being written): the drone is replayed from the pieces that have fixes, with a warning naming
    the piece, where the whole drone was refused ("no position fix"); pieces that together hold none are
    refused in one line naming the folder and the pieces."""
    state = tmp_path / "drone-1"
    state.mkdir()
    old, new = state / "positions.1.jsonl", state / "positions.jsonl"
    old.write_text(_log_line(0.0, 47.0) + _log_line(10.0, 47.0001))
    new.write_text(json.dumps({"event": "sent", "peer": "p", "model_id": "m2", "t": T0.timestamp() + 30.0,
                               "position": None}) + "\n" + '{"event": "sent", "pe')
    with caplog.at_level("WARNING", logger="contact_sim.tracks"):
        (w,), epoch = read_missions([old, new], None, 15.0)
    assert w.name == "drone-1" and list(w.t_s) == [0.0, 10.0] and epoch == T0
    assert f"{new}: no position fix; passed over" in caplog.text
    with pytest.raises(ContactError, match="no position fix"):  # alone, such a file is still refused
        read_missions([new], None, 15.0)
    old.write_text(json.dumps({"event": "sent", "position": None}) + "\n")
    with pytest.raises(ContactError) as info:
        read_missions([old, new], None, 15.0)
    assert str(info.value) == (f"{state}: no position fix in any of positions.1.jsonl, positions.jsonl (every "
                               "line's \"position\" is null)")


def test_the_position_log_is_rotated_only_past_the_readers_16_mib(tmp_path: Path, monkeypatch) -> None:
    """At the real limit: a line that brings the log to exactly 16 MiB is appended (the reader takes a
    file of at most MAX_MISSION_BYTES), the next one starts a new file; the full one is kept whole."""
    import types

    from fol.agent import position
    from swarmbase.tomlcheck import check_input_file

    monkeypatch.setattr(position, "time", types.SimpleNamespace(time=lambda: T0.timestamp()))  # lines of one size
    state = tmp_path / "drone 7"
    state.mkdir()
    source = _Source()
    log = position.PositionLog(source, state, "drone 7")
    line = _fix_line(source, log, 0.0, 47.0) + "\n"
    pad = position.MAX_LOG_BYTES - 3 * len(line)  # then room for exactly two more lines
    head, tail = '{"event": "pad", "position": null, "peer": "', '"}\n'
    filler = head + "x" * (pad - len(head) - len(tail)) + tail
    log.path.write_text(line + filler)
    assert log.path.stat().st_size == position.MAX_LOG_BYTES - 2 * len(line)
    for _ in range(2):
        _fix_line(source, log, 0.0, 47.0)
    assert log.path.stat().st_size == position.MAX_LOG_BYTES == tracks.MAX_MISSION_BYTES
    assert not (state / "positions.1.jsonl").exists()
    _fix_line(source, log, 0.0, 47.0)
    full = state / "positions.1.jsonl"
    assert full.stat().st_size == tracks.MAX_MISSION_BYTES and full.read_text().startswith(line + filler)
    check_input_file(full, ContactError, "position log", tracks.MAX_MISSION_BYTES)  # the reader's size rule
    assert log.path.read_text() == line and len(read_track(log.path)) == 1


def test_a_position_log_already_over_the_limit_is_renamed_with_a_warning(tmp_path: Path, monkeypatch,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    """An older agent's log past the limit (the readers refuse it) is renamed untouched before the next line,
    numbered after the rotated files already there (a gap left by a file the user removed is not reused)."""
    from fol.agent import position

    monkeypatch.setattr(position, "MAX_LOG_BYTES", 4096)
    state = tmp_path / "drone 7"
    state.mkdir()
    (state / "positions.3.jsonl").write_text("kept\n")
    source = _Source()
    log = position.PositionLog(source, state, "drone 7")
    first = _fix_line(source, log, 0.0, 47.0)
    old = (first + "\n") * (5000 // len(first) + 1)
    log.path.write_text(old)
    with caplog.at_level("INFO", logger="fol.agent.position"):
        new = _fix_line(source, position.PositionLog(source, state, "drone 7"), 20.0, 47.0005)
    assert (state / "positions.4.jsonl").read_text() == old and log.path.read_text() == new + "\n"
    assert (state / "positions.3.jsonl").read_text() == "kept\n"
    (warning,) = [r for r in caplog.records if "renamed" in r.getMessage()]
    assert warning.levelname == "WARNING" and f"{len(old)} bytes, over the 4096 bytes" in warning.getMessage()


def test_a_track_is_placed_about_the_origin_the_scenario_gives(tmp_path: Path) -> None:
    """docs/formats.md: tracks take the missions' origin, origin_lat_deg / origin_lon_deg / origin_alt_m
    when given (the track's first point then lies away from it), else the first file's first point."""
    gpx = _gpx(tmp_path / "logger.gpx", [(0.0, 47.001, 8.0, 450.0), (40.0, 47.002, 8.0, 450.0)])
    (own,), _ = read_missions([gpx], None, 15.0)
    (given,), _ = read_missions([gpx], HOME, 15.0)
    assert np.allclose(own.xyz_km[0], 0.0, atol=1e-12)
    assert np.allclose(given.xyz_km[0], enu_km([47.001], [8.0], [450.0], HOME)[0], atol=1e-12)


def test_a_position_log_line_holding_a_unicode_line_separator_is_one_record(tmp_path: Path) -> None:
    """str.splitlines() cut a line at a raw U+2028, U+2029 or NEL (\\x85), each valid inside a JSON string:
    a record whose peer name held one was refused as invalid JSON, at a line number the editor does not
    show. Only LF, CR LF and CR end a line."""
    (tmp_path / "d1").mkdir()
    path = tmp_path / "d1" / "positions.jsonl"
    for sep in ("\u2028", "\u2029", "\x85"):
        peer = json.dumps(f"peer{sep}b", ensure_ascii=False).encode()
        fixes = [json.loads(_log_line(t, lat)) for t, lat in ((0.0, 47.0), (30.0, 47.001))]
        text = b"".join(json.dumps(f).replace('"p"', peer.decode()).encode() + b"\n" for f in fixes)
        assert sep.encode() in text
        path.write_bytes(text + b'{"position": {"lat_deg": 47.0}}\n')
        with pytest.raises(ContactError, match=r"positions\.jsonl:3: position: expected numbers lat_deg"):
            read_missions([path], None, 15.0)
        path.write_bytes(text)
        (w,), start = read_missions([path], None, 15.0)
        assert start == T0 and np.allclose(w.t_s, [0.0, 30.0])


@pytest.mark.parametrize("kind", ["control", "long"])
def test_the_position_logs_lines_name_it_through_brief(kind: str, tmp_path: Path, monkeypatch,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    """The agent's lines of its position log (a last line cut off and dropped at a restart; the log renamed
    before it passes the readers' limit) named <state_dir>/positions.jsonl as it is: a state folder of 3,000
    characters made a 3 kB log line, a newline or a terminal's escape went into the record raw. They name it
    through brief(), as the track reader's refusals name it."""
    from fol.agent import position
    from swarmbase.tomlcheck import brief

    monkeypatch.setattr(position, "MAX_LOG_BYTES", 4096)
    state = odd_folder(tmp_path, kind)
    source = _Source()
    log = position.PositionLog(source, state, "drone 7")
    lines = [_fix_line(source, log, 10.0 * i, 47.0 + 1e-5 * i) for i in range(3)]
    log.path.write_text(f"{lines[0]}\n{lines[1][:17]}")  # the second line cut off
    with caplog.at_level("INFO", logger="fol.agent.position"):
        log = position.PositionLog(source, state, "drone 7")
        for i in range(40):
            _fix_line(source, log, 10.0 * i, 47.0 + 1e-5 * i)
    said = [r.getMessage() for r in caplog.records]
    assert said[0] == f"drone 7: {brief(log.path)}: dropped 17 bytes of a last line cut off while it was written " \
        "(no newline, not JSON)", said
    renamed = [line for line in said if "renamed positions." in line]
    assert renamed and all(line.startswith(f"drone 7: {brief(log.path)}: ") for line in renamed), said
    assert all(line.isprintable() and len(line) < 500 for line in said), said


@pytest.mark.parametrize("kind", ["control", "long"])
def test_the_gpx_readers_dtd_refusal_names_the_file_through_brief(kind: str, tmp_path: Path) -> None:
    """The GPX reader's refusal of a document type declaration named the file as it is, where its other
    refusals name it through brief(): a newline or a terminal's escape in a folder's name went into the
    message as it is, a folder of 3,000 characters made a 3 kB line."""
    from swarmbase.tomlcheck import brief

    folder = odd_folder(tmp_path, kind)
    path = folder / "lol.gpx"
    path.write_text(f'<?xml version="1.0"?><!DOCTYPE gpx [<!ENTITY l0 "lol">]><gpx xmlns="{NS}"></gpx>')
    with pytest.raises(ContactError) as exc:
        read_track(path)
    assert str(exc.value) == (f"{brief(path)}:1: a document type declaration (<!DOCTYPE); this file kind has "
                              "none, and entities are not expanded")
    assert str(exc.value).isprintable() and len(str(exc.value)) < 400
