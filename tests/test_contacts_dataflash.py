"""ArduPilot DataFlash logs (.bin, the flight controller's own log) in a drone scenario's ``missions`` list are
replayed like a GPX track of the same points, at GPS times converted to UTC with the leap seconds of their
date (contact_sim.tracks)."""

from __future__ import annotations

import datetime as _dt
import logging
import struct
from pathlib import Path

import numpy as np
import pytest

from contact_sim import tracks
from contact_sim.errors import ContactError
from contact_sim.missions import read_missions
from contact_sim.tracks import read_track

from _tracks import block_pymavlink, drone_scenario, unreachable_after, write_gpx

pytest.importorskip("pymavlink")

HEAD = b"\xa3\x95"
GPS_TYPE = 130
GPS_EPOCH = _dt.datetime(1980, 1, 6, tzinfo=_dt.timezone.utc)
#: ArduPilot 4.x's GPS message, and ArduCopter 3.1's (no instance, TimeMS and Week for GMS and GWk).
CURRENT = ("QBBIHBcLLeffffB", "TimeUS,I,Status,GMS,GWk,NSats,HDop,Lat,Lng,Alt,Spd,GCrs,VZ,Yaw,U")
OLD = ("BIHBcLLeeEefI", "Status,TimeMS,Week,NSats,HDop,Lat,Lng,RelAlt,Alt,Spd,GCrs,VZ,T")
#: GPS - UTC: 17 s from 2015-07-01, 18 s from 2017-01-01 (the leap second at the end of 2016-12-31).
T2016, T2025 = _dt.datetime(2016, 6, 1, 10, tzinfo=_dt.timezone.utc), _dt.datetime(2025, 6, 1, 10, tzinfo=_dt.timezone.utc)
#: (t s, lat, lon, alt m): a climb, a leg north, a leg east
PATH = [(0.0, 47.0, 8.0, 400.0), (20.0, 47.0005, 8.0, 420.0), (50.0, 47.001, 8.0005, 430.0),
        (80.25, 47.0012345, 8.0009876, 431.5)]


def _struct(fmt: str) -> struct.Struct:
    from pymavlink.DFReader import FORMAT_TO_STRUCT

    return struct.Struct("<" + "".join(FORMAT_TO_STRUCT[c][0] for c in fmt))


def _fmt(mtype: int, name: str, fmt: str, columns: str, length: int | None = None) -> bytes:
    length = 3 + _struct(fmt).size if length is None else length
    return HEAD + bytes([0x80]) + struct.pack("<BB4s16s64s", mtype, length, name.encode(), fmt.encode(),
                                              columns.encode())


def _gps_week_ms(utc: _dt.datetime) -> tuple[int, int]:
    leap_s = 17 if utc < _dt.datetime(2017, 1, 1, tzinfo=_dt.timezone.utc) else 18
    return divmod((utc + _dt.timedelta(seconds=leap_s) - GPS_EPOCH) // _dt.timedelta(milliseconds=1), 604_800_000)


def _gps(layout, utc: _dt.datetime, lat: float, lon: float, alt: float, status: int = 3, instance: int = 0) -> bytes:
    fmt, columns = layout
    week, ms = _gps_week_ms(utc)
    values = {"TimeUS": 1_000_000, "I": instance, "Status": status, "GMS": ms, "GWk": week, "TimeMS": ms,
              "Week": week, "NSats": 12, "HDop": 70, "Lat": round(lat * 1e7), "Lng": round(lon * 1e7),
              "Alt": round(alt * 100), "RelAlt": 0, "T": 1000}
    return HEAD + bytes([GPS_TYPE]) + _struct(fmt).pack(*(values.get(c, 0) for c in columns.split(",")))


def _log(path: Path, layout=CURRENT, t0: _dt.datetime = T2025, points=PATH, extra: bytes = b"") -> Path:
    """A DataFlash log: the FMT of FMT, a PARM's FMT and one PARM, the GPS's FMT, then for each point a PARM
    and the point's GPS message (and, with the current layout, a second GPS's at another place)."""
    parm = _fmt(129, "PARM", "QNf", "TimeUS,Name,Value")
    out = [_fmt(0x80, "FMT", "BBnNZ", "Type,Length,Name,Format,Columns"), parm, _fmt(GPS_TYPE, "GPS", *layout)]
    for t, lat, lon, alt in points:
        when = t0 + _dt.timedelta(seconds=t)
        out.append(HEAD + bytes([129]) + struct.pack("<Q16sf", 1, b"LOG_BITMASK", 1.0))
        out.append(_gps(layout, when, lat, lon, alt))
        if layout is CURRENT:
            out.append(_gps(layout, when, lat + 0.5, lon, alt, instance=1))
    path.write_bytes(b"".join(out) + extra)
    return path


@pytest.mark.parametrize("layout", [CURRENT, OLD], ids=["current", "old"])
@pytest.mark.parametrize("t0", [T2016, T2025], ids=["2016", "2025"])
def test_a_dataflash_log_replays_as_the_gpx_track_of_the_same_points(tmp_path: Path, layout, t0, capsys) -> None:
    from contact_sim.scenario import _read_drone_files, load_contact_scenario

    _log(tmp_path / "alpha.bin", layout, t0)
    write_gpx(tmp_path / "bravo.gpx", t0, PATH)
    (df,), start = _read_drone_files(load_contact_scenario(drone_scenario(tmp_path, '["alpha.bin"]')))
    (gpx,), gpx_start = _read_drone_files(load_contact_scenario(drone_scenario(tmp_path, '["bravo.gpx"]')))
    assert df.name == "alpha" and start == gpx_start == t0  # the leap seconds of the date: 17 s in 2016, 18 in 2025
    assert np.array_equal(np.round(df.t_s * 1000), [0, 20_000, 50_000, 80_250])  # exact to the millisecond
    assert np.array_equal(df.xyz_km, gpx.xyz_km)
    pts = read_track(tmp_path / "alpha.bin")
    assert [p[1:4] for p in pts] == [(lat, lon, alt) for _, lat, lon, alt in PATH]  # the first GPS only
    assert [p[0] for p in pts] == [t0 + _dt.timedelta(seconds=t) for t, *_ in PATH]
    assert pts[0][4] == "message 4 (byte 298)" and capsys.readouterr() == ("", "")


def test_a_track_across_the_2016_leap_second(tmp_path: Path) -> None:
    """61 s of GPS time from 23:59:30 on 2016-12-31 end at 00:00:30 UTC: a leap second lies between."""
    before = _dt.datetime(2016, 12, 31, 23, 59, 30, tzinfo=_dt.timezone.utc)
    log = tmp_path / "a.bin"
    out = [_fmt(0x80, "FMT", "BBnNZ", "Type,Length,Name,Format,Columns"), _fmt(GPS_TYPE, "GPS", *CURRENT),
           _gps(CURRENT, before, 47.0, 8.0, 400.0), _gps(CURRENT, before + _dt.timedelta(seconds=60), 47.0, 8.0, 400.0)]
    log.write_bytes(b"".join(out))
    first, second = read_track(log)
    (ms0, week0), (ms1, week1) = (struct.unpack_from("<QBBIH", m, 3)[3:] for m in out[2:])
    assert (week1 - week0) * 604_800_000 + ms1 - ms0 == 61_000  # the receiver counts 61 s
    assert (first[0], second[0]) == (before, _dt.datetime(2017, 1, 1, 0, 0, 30, tzinfo=_dt.timezone.utc))


def test_the_points_are_those_pymavlink_reads(tmp_path: Path, capsys) -> None:
    """pymavlink's own DataFlash reader decodes the same positions from the test's log (the layouts are
    ArduPilot's as pymavlink knows them)."""
    from pymavlink.DFReader import DFReader_binary

    path = _log(tmp_path / "a.bin")
    reader = DFReader_binary(str(path))
    theirs = []
    while (m := reader.recv_match(type="GPS")) is not None:
        if m.I == 0:
            theirs.append((m.Lat, m.Lng, m.Alt))
    reader.close()
    capsys.readouterr()
    assert len(theirs) == 4
    assert np.allclose([p[1:4] for p in read_track(path)], theirs, rtol=0, atol=1e-9)


def test_fixes_below_3d_and_a_cut_off_end_are_passed_over(tmp_path: Path, caplog) -> None:
    head = [_fmt(0x80, "FMT", "BBnNZ", "Type,Length,Name,Format,Columns"), _fmt(GPS_TYPE, "GPS", *CURRENT)]
    gps = [_gps(CURRENT, T2025 + _dt.timedelta(seconds=t), lat, lon, alt, status=2 if t == 20.0 else 3)
           for t, lat, lon, alt in PATH]
    path = tmp_path / "cut.bin"
    path.write_bytes(b"".join(head + gps)[:-5])  # the flight controller lost power while writing the last
    with caplog.at_level(logging.WARNING, logger="contact_sim.tracks"):
        pts = read_track(path)
    assert [p[0] for p in pts] == [T2025, T2025 + _dt.timedelta(seconds=50)]
    assert "cut.bin: message 5 (byte 331): skipping the last message, cut off by the end of the file" in caplog.text


def test_unwritten_bytes_at_the_end_of_a_block_log_end_it(tmp_path: Path, caplog) -> None:
    path = _log(tmp_path / "a.bin", extra=b"\xff" * 249)
    with caplog.at_level(logging.WARNING, logger="contact_sim.tracks"):
        assert len(read_track(path)) == 4
    assert "249 bytes at the end are no DataFlash message" in caplog.text


def _replace(data: bytes, old: bytes, new: bytes) -> bytes:
    assert data.count(old) >= 1
    return data.replace(old, new, 1)


FMT_FMT = _fmt(0x80, "FMT", "BBnNZ", "Type,Length,Name,Format,Columns")


@pytest.mark.parametrize("make, message", [
    (lambda p: b"a text file renamed .bin, long enough to be no log" * 20, "message 0 (byte 0): expected a DataFlash "
     "message (0xA3 0x95), got 61 20; not an ArduPilot DataFlash log (.bin)"),
    (lambda p: b"", "no GPS message of the first GPS with a 3-D fix (Status 3 or more) among its 0 DataFlash"),
    (lambda p: _log(p, points=[]).read_bytes(), "no GPS message of the first GPS with a 3-D fix"),
    (lambda p: FMT_FMT + HEAD + bytes([GPS_TYPE]) + b"\x00" * 40, "message 1 (byte 89): message type 130 has no FMT "
     "message before it"),
    (lambda p: _log(p).read_bytes()[:298] + b"\x00" * 600 + _log(p).read_bytes()[298:], "message 4 (byte 298): "
     "expected a DataFlash message (0xA3 0x95), got 00 00"),
    (lambda p: FMT_FMT + _fmt(GPS_TYPE, "GPS", CURRENT[0], CURRENT[1], length=50), "message 1 (byte 89): FMT of GPS "
     "gives a length of 50 bytes, but its format 'QBBIHBcLLeffffB' takes 51 with the header"),
    (lambda p: FMT_FMT + _fmt(GPS_TYPE, "GPS", "QBBIHBcLLeffff", CURRENT[1]), "message 1 (byte 89): FMT of GPS has "
     "15 column labels for the 14 characters"),
    (lambda p: FMT_FMT + _fmt(GPS_TYPE, "GPS", "QBBIHBcLLeffffB", CURRENT[1].replace("GWk", "Wk")), "message 1 "
     "(byte 89): FMT of GPS has no column GWk or Week"),
    (lambda p: FMT_FMT + _fmt(GPS_TYPE, "GPS", "QBBIHBciieffffB", CURRENT[1]), "message 1 (byte 89): FMT of GPS logs "
     "Lat with the format character 'i'; expected 'L', as ArduPilot logs it"),
    (lambda p: FMT_FMT + _fmt(GPS_TYPE, "GPS", "QBBnHBcLLeffffB", CURRENT[1]), "message 1 (byte 89): FMT of GPS logs "
     "GMS with the format character 'n'; expected an integer (bBhHiIqQ)"),
    (lambda p: FMT_FMT + _fmt(GPS_TYPE, "GPS", "QBBIHBcLLeffffX", CURRENT[1], length=51), "message 1 (byte 89): FMT "
     "of GPS has the format character 'X'"),
    (lambda p: FMT_FMT + _fmt(0x80, "FMT", "BBnNZ", "Type,Length,Name,Format,Columns", length=12), "message 1 (byte "
     "89): FMT of type 128 ('FMT') gives a length of 12 bytes; expected 89"),
    (lambda p: _log(p, points=[(0.0, 91.0, 8.0, 400.0)]).read_bytes(), "message 4 (byte 298): expected latitude "
     "-90..90"),
    (lambda p: _log(p, points=[(0.0, 47.0, 8.0, 2e6)]).read_bytes(), "message 4 (byte 298): expected an altitude"),
    (lambda p: _log(p, points=[PATH[1], PATH[0]]).read_bytes(), "message 7 (byte 431): time 2025-06-01T10:00:00+00:00 "
     "is not after the previous point's 2025-06-01T10:00:20+00:00 (message 4 (byte 298)); a track's times must "
     "increase"),
    (lambda p: _replace(_log(p, points=PATH[:1]).read_bytes(), struct.pack("<IH", *_gps_week_ms(T2025)[::-1]),
                        struct.pack("<IH", 700_000_000, 2000)), "message 4 (byte 298): GPS week 2000, 700000000 ms; "
     "expected a week of 0 or more and 0..604799999 ms of the week"),
    (lambda p: FMT_FMT + _fmt(GPS_TYPE, "GPS", "QBBIIBcLLeffffB", CURRENT[1])
     + HEAD + bytes([GPS_TYPE]) + _struct("QBBIIBcLLeffffB").pack(0, 0, 3, 0, 2**32 - 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
     "message 2 (byte 178): GPS week 4294967295 is past the year 9999"),
], ids=["garbage", "empty", "no-gps", "type-before-fmt", "garbage-inside", "gps-length", "gps-columns",
        "gps-no-week", "gps-lat-format", "gps-time-format", "gps-format-char", "fmt-length", "latitude", "altitude", "decreasing-times",
        "time-of-week", "year-9999"])
def test_a_bad_dataflash_log_is_one_line_naming_file_and_message(tmp_path: Path, make, message: str, capsys) -> None:
    data = make(tmp_path / "make.bin")
    path = tmp_path / "bad.bin"
    path.write_bytes(data)
    with pytest.raises(ContactError) as exc:
        read_missions([path], None, 15.0)
    assert str(exc.value).startswith(f"{path}: {message}") and "\n" not in str(exc.value), str(exc.value)
    assert capsys.readouterr() == ("", "")


def test_an_oversized_dataflash_log_is_refused_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _log(tmp_path / "big.bin")
    monkeypatch.setattr(tracks, "MAX_MISSION_BYTES", 100)
    monkeypatch.setattr("builtins.open", lambda *a, **k: pytest.fail("opened before its size was checked"))
    with pytest.raises(ContactError, match=r"big.bin: \d+ bytes; a DataFlash log may have at most 100$"):
        read_track(path)


def test_without_pymavlink_a_dataflash_log_is_refused_in_one_line(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    path = _log(tmp_path / "a.bin")
    block_pymavlink(monkeypatch)
    with pytest.raises(ContactError) as exc:
        read_missions([path], None, 15.0)
    assert str(exc.value) == (f"{path}: reading an ArduPilot DataFlash log needs pymavlink: "
                              "pip install 'fol-swarm[mavlink]'")


def test_every_fix_of_a_log_across_the_leap_second_gets_its_own_count(tmp_path: Path) -> None:
    """Fixes every 7 s from 23:50 to 00:10 UTC: those before the leap second 17 s behind GPS time, after 18 s."""
    t0 = _dt.datetime(2016, 12, 31, 23, 50, tzinfo=_dt.timezone.utc)
    points = [(7.0 * k, 47.0 + k * 1e-6, 8.0, 400.0) for k in range(172)]
    pts = read_track(_log(tmp_path / "a.bin", t0=t0, points=points))
    assert [p[0] for p in pts] == [t0 + _dt.timedelta(seconds=t) for t, *_ in points]


def test_a_dataflash_read_leaves_no_cycle_holding_its_times(tmp_path: Path) -> None:
    """The GPS-to-UTC conversion split the times with a recursive closure, which held itself and with it
    every GPS time and its offset until a cyclic collection. Now they go when the read returns."""
    path = _log(tmp_path / "a.bin", t0=_dt.datetime(2016, 12, 31, 23, 50, tzinfo=_dt.timezone.utc),
                points=[(7.0 * k, 47.0, 8.0, 400.0) for k in range(172)])
    assert len(read_track(path)) == 172  # and skyfield's tables loaded
    assert unreachable_after(lambda: read_track(path)) == 0
