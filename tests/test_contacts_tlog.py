"""MAVLink telemetry logs (.tlog, as MAVProxy, QGroundControl and Mission Planner save a flight) in a drone
scenario's ``missions`` list are replayed like a GPX track of the same points (contact_sim.tracks)."""

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

from _tracks import block_pymavlink, drone_scenario, write_gpx

pytest.importorskip("pymavlink")

HOME = (47.0, 8.0, 400.0)
T0 = _dt.datetime(2025, 6, 1, 10, 0, 0, tzinfo=_dt.timezone.utc)
#: (t s after T0, lat, lon, alt m): a climb, a leg north, a leg east
PATH = [(0.0, *HOME), (20.0, 47.0005, 8.0, 420.0), (50.0, 47.001, 8.0005, 430.0), (80.25, 47.0012345, 8.0009876, 431.5)]


def _us(t: float) -> int:
    """Microseconds since 1970 of T0 + t, as MAVProxy logs it (the low two bits hold the link, 0 here)."""
    return ((T0 - tracks._UNIX_EPOCH) // _dt.timedelta(microseconds=1) + round(t * 1e6)) & ~3


def _packets(points, version: int = 2, system: int = 1, component: int = 1,
             signed: bool = False) -> list[tuple[int, bytes]]:
    """(time us, packet) of a heartbeat just before each GLOBAL_POSITION_INT of ``points``, encoded by pymavlink
    (``signed``: MAVLink 2 packets ending in a 13-byte signature)."""
    if version == 2:
        from pymavlink.dialects.v20 import common as mav
    else:
        from pymavlink.dialects.v10 import common as mav
    link = mav.MAVLink(None, srcSystem=system, srcComponent=component)
    if signed:
        link.signing.secret_key, link.signing.link_id, link.signing.timestamp = bytes(range(32)), 0, 1
        link.signing.sign_outgoing = True
    out = []
    for t, lat, lon, alt in points:
        out.append((_us(t) - 4000, link.heartbeat_encode(2, 3, 0, 0, 4).pack(link)))
        msg = link.global_position_int_encode(round(t * 1000), round(lat * 1e7), round(lon * 1e7), round(alt * 1000),
                                              round((alt - HOME[2]) * 1000), 0, 0, 0, 65535)
        out.append((_us(t), msg.pack(link)))
    return out


def _tlog(path: Path, packets: list[tuple[int, bytes]]) -> Path:
    path.write_bytes(b"".join(struct.pack(">Q", us) + bytes(packet) for us, packet in packets))
    return path


@pytest.mark.parametrize("version", [2, 1])
def test_a_tlog_replays_as_the_gpx_track_of_the_same_points(tmp_path: Path, version: int) -> None:
    from contact_sim.scenario import _read_drone_files, load_contact_scenario

    _tlog(tmp_path / "alpha.tlog", _packets(PATH, version))
    write_gpx(tmp_path / "bravo.gpx", T0, PATH)
    (tlog,), start = _read_drone_files(load_contact_scenario(drone_scenario(tmp_path, '["alpha.tlog"]')))
    (gpx,), gpx_start = _read_drone_files(load_contact_scenario(drone_scenario(tmp_path, '["bravo.gpx"]')))
    assert tlog.name == "alpha" and start == gpx_start == T0
    assert np.array_equal(np.round(tlog.t_s * 1000), np.round(gpx.t_s * 1000))  # exact to the millisecond
    assert np.array_equal(np.round(tlog.t_s * 1000), [0, 20_000, 50_000, 80_250])
    assert np.abs(tlog.xyz_km - gpx.xyz_km).max() * 1000 < 1.0  # within 1 m
    pts = read_track(tmp_path / "alpha.tlog")
    assert [p[4] for p in pts] == ["message 1 (byte 25)" if version == 1 else "message 1 (byte 29)",
                                   *(p[4] for p in pts[1:])] and len(pts) == 4
    assert [p[1:4] for p in pts] == [(lat, lon, alt) for _, lat, lon, alt in PATH]


def test_signed_packets_are_framed_past_their_signature(tmp_path: Path) -> None:
    plain = read_track(_tlog(tmp_path / "plain.tlog", _packets(PATH)))
    signed = read_track(_tlog(tmp_path / "signed.tlog", _packets(PATH, signed=True)))
    assert [p[:4] for p in signed] == [p[:4] for p in plain] and signed[1][4] == "message 3 (byte 145)"


def test_tlogs_in_one_scenario_give_the_contact_window_of_their_gpx_tracks(tmp_path: Path) -> None:
    from contact_sim.scenario import compute_contacts, load_contact_scenario

    east = (HOME[0], HOME[1] + 0.02, HOME[2])
    west_path, east_path = [(10.0, *HOME), (160.0, *east)], [(10.0, *east), (160.0, *HOME)]
    _tlog(tmp_path / "west.tlog", _packets(west_path))
    _tlog(tmp_path / "east.tlog", _packets(east_path, system=2))
    write_gpx(tmp_path / "west.gpx", T0, west_path)
    write_gpx(tmp_path / "east.gpx", T0, east_path)
    by_tlog = compute_contacts(load_contact_scenario(drone_scenario(tmp_path, '["west.tlog", "east.tlog"]')))
    by_gpx = compute_contacts(load_contact_scenario(drone_scenario(tmp_path, '["west.gpx", "east.gpx"]')))
    assert len(by_tlog.windows) == 1 and by_tlog.start == by_gpx.start == T0 + _dt.timedelta(seconds=10)
    a, b = by_tlog.windows[0], by_gpx.windows[0]
    assert (a.a, a.b) == (b.a, b.b) and abs(a.t_start_s - b.t_start_s) < 1e-3 and abs(a.t_end_s - b.t_end_s) < 1e-3


def test_positions_before_the_first_estimate_and_other_messages_are_passed_over(tmp_path: Path) -> None:
    """ArduPilot sends GLOBAL_POSITION_INT at latitude and longitude 0 before it has a position; a message
    of an id no dialect here knows is framed by its header and passed over undecoded."""
    later = [(t + 5.0, *rest) for t, *rest in PATH]
    packets = _packets([(0.0, 0.0, 0.0, 0.0)] + later)
    unknown = bytes([0xFD, 3, 0, 0, 7, 1, 1]) + (60_000).to_bytes(3, "little") + b"abc" + b"\x00\x00"
    path = _tlog(tmp_path / "a.tlog", packets[:2] + [(_us(1.0), unknown)] + packets[2:])
    pts = read_track(path)
    assert [p[0] for p in pts] == [T0 + _dt.timedelta(seconds=t) for t, *_ in later]
    assert [p[1:4] for p in pts] == [p[1:] for p in later] and pts[0][4] == "message 4 (byte 129)"


def test_a_tlog_cut_off_in_its_last_message_replays_the_complete_ones(tmp_path: Path, caplog) -> None:
    whole = _tlog(tmp_path / "whole.tlog", _packets(PATH)).read_bytes()
    path = tmp_path / "cut.tlog"
    path.write_bytes(whole[:-7])  # the ground station stopped while writing the last position
    with caplog.at_level(logging.WARNING, logger="contact_sim.tracks"):
        pts = read_track(path)
    assert len(pts) == 3 and [p[1:4] for p in pts] == [p[1:] for p in PATH[:3]]
    assert "cut.tlog: message 7 (byte" in caplog.text and "cut off by the end of the file" in caplog.text


def _swap_times(packets):
    (t1, p1), (t3, p3) = packets[1], packets[3]
    return [packets[0], (t3, p1), packets[2], (t1, p3), *packets[4:]]


def _bad_crc(packets):
    t, p = packets[3]
    return [*packets[:3], (t, p[:-1] + bytes([p[-1] ^ 0xFF])), *packets[4:]]


@pytest.mark.parametrize("make, message", [
    (lambda: b"not a telemetry log at all, a text file renamed", "message 0 (byte 0): expected a MAVLink packet "
     "(0xFE or 0xFD) after the record's 8-byte time, got 0x6C; not a MAVLink telemetry log (.tlog)"),
    (lambda: b"\x00" * 7, "no GLOBAL_POSITION_INT with a position among its 0 MAVLink messages"),
    (lambda: _packets(PATH)[:1], "no GLOBAL_POSITION_INT with a position among its 1 MAVLink messages"),
    (lambda: _packets(PATH)[:2] + [(_us(1.0), b"\x00" * 30)], "message 2 (byte 77): expected a MAVLink packet"),
    (lambda: _swap_times(_packets(PATH)), "message 3 (byte "),
    (lambda: _bad_crc(_packets(PATH)), "message 3 (byte 106): GLOBAL_POSITION_INT that pymavlink cannot decode "
     "('invalid MAVLink CRC"),
    (lambda: _packets(PATH[:2]) + _packets(PATH[2:], system=2), "message 5 (byte 183): GLOBAL_POSITION_INT of "
     "system 2 component 1, after those of system 1 component 1 (message 1 (byte 29)); one vehicle a file"),
    (lambda: _packets([(0.0, 91.0, 8.0, 400.0)]), "message 1 (byte 29): expected latitude -90..90"),
    (lambda: _packets([(0.0, 47.0, 8.0, 2e6)]), "message 1 (byte 29): expected an altitude within 1e+06 m"),
    (lambda: [(2**64 - 4, p) for _, p in _packets(PATH[:1])], "message 1 (byte 29): time 18446744073709551612 "
     "microseconds since 1970 is past the year 9999"),
], ids=["garbage", "shorter-than-a-record", "no-position", "garbage-after-good", "decreasing-times", "bad-crc",
        "two-vehicles", "latitude", "altitude", "time"])
def test_a_bad_tlog_is_one_line_naming_file_and_message(tmp_path: Path, make, message: str) -> None:
    content = make()
    path = tmp_path / "bad.tlog"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        _tlog(path, content)
    with pytest.raises(ContactError) as exc:
        read_missions([path], None, 15.0)
    assert str(exc.value).startswith(f"{path}: {message}") and "\n" not in str(exc.value), str(exc.value)


def test_decreasing_times_name_both_messages(tmp_path: Path) -> None:
    path = _tlog(tmp_path / "back.tlog", _swap_times(_packets(PATH)))
    with pytest.raises(ContactError, match=r"back.tlog: message 3 \(byte 106\): time 2025-06-01T10:00:00\+00:00 is "
                                           r"not after the previous point's 2025-06-01T10:00:20\+00:00 \(message 1 "
                                           r"\(byte 29\)\); a track's times must increase"):
        read_track(path)


def test_an_oversized_tlog_is_refused_unread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _tlog(tmp_path / "big.tlog", _packets(PATH))
    monkeypatch.setattr(tracks, "MAX_MISSION_BYTES", 100)
    monkeypatch.setattr("builtins.open", lambda *a, **k: pytest.fail("opened before its size was checked"))
    with pytest.raises(ContactError, match=r"big.tlog: \d+ bytes; a MAVLink telemetry log may have at most 100$"):
        read_track(path)


def test_without_pymavlink_a_tlog_is_refused_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _tlog(tmp_path / "a.tlog", _packets(PATH))
    block_pymavlink(monkeypatch)
    with pytest.raises(ContactError) as exc:
        read_missions([path], None, 15.0)
    assert str(exc.value) == (f"{path}: reading a MAVLink telemetry log needs pymavlink: "
                              "pip install 'fol-swarm[mavlink]'")
