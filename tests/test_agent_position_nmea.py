"""The NMEA 0183 position source: GGA/RMC sentences from a replayed file and a TCP / gpsd stream give the
MAVLink source's fix dictionary; bad lines are skipped and counted; the [position] table accepts
source = "nmea" and refuses a bad one in one line."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import types
from pathlib import Path

import pytest

pytest.importorskip("pynmeagps")

from fol.agent.config import AgentConfig  # noqa: E402
from fol.agent.position import PositionConfig, PositionLog, fix_from_message, open_source  # noqa: E402
from fol.errors import ConfigError  # noqa: E402
from _waiting import wait_until as _wait  # noqa: E402

EPOCH_1 = [  # GPS + GLONASS receiver: GN talker
    "$GPGSV,3,1,11,03,03,111,00,04,15,270,00,06,01,010,00,13,06,292,00*74",  # not a fix sentence: ignored
    "$GNGGA,123519.00,4807.0380,N,01131.0000,E,1,08,0.9,545.4,M,46.9,M,,*77",
    "$GNRMC,123519.00,A,4807.0380,N,01131.0000,E,022.4,084.4,230394,003.1,W,A*37",
]
BAD = [
    "$GPGGA,123519.00,4807.0380,N,01131.0000,E,1,08,0.9,545.4,M,46.9,M,,*68",  # bad checksum (69)
    "$GPGGA,123521.00,,,,,0,00,99.9,,M,,M,,*59",  # fix quality 0: no fix
    "$GNRMC,123519.00,V,,,,,,,230394,,,N*61",  # status V: no fix
    "$GPGGA,123522.00,9500.0000,N,01131.0000,E,1,08,0.9,545.4,M,46.9,M,,*6D",  # latitude 95 degrees
    "$GPGGA,1235",  # truncated
]
EPOCH_2 = [  # BeiDou, RMC before GGA, course unknown
    "$GBRMC,123520.00,A,4807.0400,S,01131.0100,W,10.0,,230394,,,A*58",
    "$GBGGA,123520.00,4807.0400,S,01131.0100,W,2,12,0.8,546.0,M,46.9,M,,*7E",
]


def _mavlink_keys() -> set[str]:
    msg = types.SimpleNamespace(lat=0, lon=0, alt=0, relative_alt=0, vx=0, vy=0, vz=0, hdg=0, time_boot_ms=0,
                                get_srcSystem=lambda: 1)
    return set(fix_from_message(msg, 0.0))


def test_replayed_nmea_file_gives_the_fix_and_skips_bad_lines(tmp_path: Path) -> None:
    log = tmp_path / "gps.nmea"
    data = "\r\n".join(EPOCH_1 + BAD).encode() + b"\r\n\xff\xfe\x00garbage\r\n" + b"$GPGGA," + b"7" * 5000
    log.write_bytes(data + b"\r\n" + "\r\n".join(EPOCH_2).encode() + b"\r\n")
    source = open_source(PositionConfig(connection=str(log), source="nmea"))
    try:
        _wait(lambda: source.messages == 3, 5.0)  # GGA, RMC of epoch 1; GGA of epoch 2 (its RMC came first)
        fix = source.latest()
        assert source.skipped == 7  # the five BAD lines, the garbage bytes, the endless line
    finally:
        source.close()
    assert set(fix) == _mavlink_keys() | {"age_s", "stale"}
    assert fix["lat_deg"] == pytest.approx(-48.1173333) and fix["lon_deg"] == pytest.approx(-11.5168333)
    assert fix["alt_msl_m"] == 546.0 and fix["alt_rel_m"] is None and fix["heading_deg"] is None
    assert fix["fix_quality"] == 2 and fix["satellites"] == 12 and fix["utc"] == "1994-03-23T12:35:20Z"
    assert fix["vel_ned_m_s"] is None and fix["course_deg"] is None  # the RMC left the course empty
    assert fix["time_boot_ms"] is None and fix["system"] is None

    first = tmp_path / "first.nmea"
    first.write_text("\n".join(EPOCH_1) + "\n")
    source = open_source(PositionConfig(connection=str(first), source="nmea"))
    try:
        fix = _wait(lambda: source.messages == 2 and source.latest(), 5.0)
        entry = PositionLog(source, tmp_path, "d0").record("received", "d1", "m1")
    finally:
        source.close()
    assert fix["lat_deg"] == pytest.approx(48.1173) and fix["alt_msl_m"] == 545.4 and fix["course_deg"] == 84.4
    assert fix["vel_ned_m_s"] == pytest.approx([1.1245, 11.4686, None], abs=1e-3)  # 22.4 kn at 84.4 degrees
    assert fix["utc"] == "1994-03-23T12:35:19Z" and fix["satellites"] == 8
    assert json.loads((tmp_path / "positions.jsonl").read_text())["position"]["lat_deg"] == entry["position"]["lat_deg"]


@pytest.mark.parametrize("kind", ["tcp", "gpsd"])
def test_nmea_over_tcp_and_from_gpsd(kind: str) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    got: list[bytes] = []

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            if kind == "gpsd":
                got.append(conn.recv(256))
                conn.sendall(b'{"class":"VERSION","release":"3.25"}\n')
            conn.sendall(("\r\n".join(EPOCH_1) + "\r\n").encode())
            time.sleep(1.0)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    source = open_source(PositionConfig(connection=f"{kind}:127.0.0.1:{port}", source="nmea"))
    try:
        fix = _wait(lambda: source.messages == 2 and source.latest(), 5.0)
    finally:
        source.close()
        server.close()
    assert fix["lat_deg"] == pytest.approx(48.1173) and fix["course_deg"] == 84.4 and source.skipped == 0
    if kind == "gpsd":
        assert got and got[0].startswith(b"?WATCH=") and b'"nmea":true' in got[0]


def _doc(position: dict) -> dict:
    return {"node": {"id": "d0", "listen": "tcp://127.0.0.1:*", "secret_key": "k", "trust_dir": "t",
                     "state_dir": "s", "model": "m", "data": "dataset=synthetic-hurricane"},
            "position": position}


def test_agent_config_accepts_an_nmea_source(tmp_path: Path) -> None:
    (tmp_path / "gps.nmea").write_text("\n".join(EPOCH_1) + "\n")
    cfg = AgentConfig.from_dict(_doc({"source": "nmea", "connection": "gps.nmea"}), tmp_path, "node.toml")
    assert cfg.position.connection == str(tmp_path / "gps.nmea") and cfg.position.baud == 9600
    cfg = AgentConfig.from_dict(_doc({"source": "nmea", "connection": "gpsd:localhost"}), tmp_path, "node.toml")
    assert cfg.position.connection == "gpsd:localhost"
    assert PositionConfig(connection="udpin:0.0.0.0:14550").baud == 57600  # MAVLink's default is unchanged


@pytest.mark.parametrize("position, message", [
    ({"source": "gnss"}, r"node\.toml: position\.source: expected one of mavlink, nmea, got 'gnss'$"),
    ({"source": "nmea", "connection": "tcp:gps.local"}, r"node\.toml: position\.connection: expected a serial "
                                                        r"device, a file of NMEA sentences, 'tcp:HOST:PORT'"),
    ({"source": "nmea", "connection": "udpin:0.0.0.0:70000"}, r"position\.connection: expected a serial device"),
    ({"source": "nmea", "connection": "gps.nmea"}, r"node\.toml: position\.connection: .*gps\.nmea: no such file"),
    ({"source": "nmea", "connection": "tcp:gps.local:10110", "baud": "9600"},
     r"node\.toml: position\.baud: expected a positive integer, got '9600'"),
])
def test_nmea_position_table_errors_are_one_line(tmp_path: Path, position: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        AgentConfig.from_dict(_doc({"connection": "x:1", **position}), tmp_path, "node.toml")
    assert "\n" not in str(err.value)


def _nmea(body: str) -> str:
    checksum = 0
    for c in body.encode():
        checksum ^= c
    return f"${body}*{checksum:02X}"


def test_rmc_only_gives_a_2d_fix_with_one_warning_and_minutes_of_60_are_refused(tmp_path: Path, caplog) -> None:
    """A receiver sending RMC but no GGA gave no fix at all, without a word; it now gives 2-D fixes (altitude
    null) and one warning that GGA is needed. '4960.000' (60 minutes) was read as 50 degrees, not refused."""
    lines = [_nmea(f"GPRMC,1235{s:02d}.00,A,4807.{s:04d},N,01131.0000,E,010.0,090.0,230394,,,A") for s in range(3)]
    lines += [_nmea("GPRMC,123503.00,A,4960.000,N,01131.0000,E,010.0,090.0,230394,,,A"),
              _nmea("GPRMC,123504.00,A,4807.0000,N,01160.5000,E,010.0,090.0,230394,,,A")]
    log = tmp_path / "rmc.nmea"
    log.write_text("\r\n".join(lines) + "\r\n")
    with caplog.at_level("WARNING", logger="fol.agent.position"):
        source = open_source(PositionConfig(connection=str(log), source="nmea"))
        try:
            fix = _wait(lambda: source.messages == 3 and source.skipped == 2 and source.latest(), 5.0)
            time.sleep(0.1)
            assert source.messages == 3
        finally:
            source.close()
    assert fix["lat_deg"] == pytest.approx(48 + 7.0002 / 60) and fix["alt_msl_m"] is None
    assert fix["fix_quality"] is None and fix["satellites"] is None and fix["utc"] == "1994-03-23T12:35:02Z"
    assert fix["vel_ned_m_s"] == pytest.approx([0.0, 5.1444, None], abs=1e-3)
    warnings = [r.getMessage() for r in caplog.records if "GGA" in r.getMessage()]
    assert len(warnings) == 1 and "RMC sentences but no GGA" in warnings[0] and "no altitude" in warnings[0]
    ublox = tmp_path / "ublox.nmea"  # RMC before GGA in each epoch, as u-blox receivers send them: no warning
    ublox.write_text("\r\n".join(EPOCH_2 + [_nmea("GBRMC,123521.00,A,4807.0500,S,01131.0100,W,10.0,,230394,,,A"),
                                              _nmea("GBGGA,123521.00,4807.0500,S,01131.0100,W,2,12,0.8,547.0,M,"
                                                    "46.9,M,,")]) + "\r\n")
    caplog.clear()
    with caplog.at_level("WARNING", logger="fol.agent.position"):
        source = open_source(PositionConfig(connection=str(ublox), source="nmea"))
        try:
            fix = _wait(lambda: source.messages == 3 and source.latest(), 5.0)
        finally:
            source.close()
    assert fix["alt_msl_m"] == 547.0 and not [r for r in caplog.records if "GGA" in r.getMessage()]
    gga = tmp_path / "gga.nmea"  # a GGA with 60 minutes of longitude: skipped, not a fix
    gga.write_text(_nmea("GPGGA,123519.00,4807.0380,N,01160.0000,E,1,08,0.9,545.4,M,46.9,M,,") + "\r\n")
    source = open_source(PositionConfig(connection=str(gga), source="nmea"))
    try:
        _wait(lambda: source.skipped == 1, 5.0)
        assert source.latest() is None
    finally:
        source.close()



def test_sentences_cut_short_before_a_valid_checksum_are_skipped(tmp_path: Path) -> None:
    """pynmeagps parses '$GPGGA,123519.00*59' (its checksum is right) into a message without the fields
    the fix reads: the AttributeError ended the reader thread with a traceback, and no fix came again."""
    short = [_nmea("GPGGA,123519.00"), _nmea("GPRMC"), _nmea("GPRMC,123519.00,A"), _nmea("GNGGA,123519.00,4807.038,N")]
    log = tmp_path / "short.nmea"
    log.write_text("\r\n".join(short + EPOCH_1) + "\r\n")
    source = open_source(PositionConfig(connection=str(log), source="nmea"))
    try:
        fix = _wait(lambda: source.messages == 2 and source.latest(), 5.0)
        assert source.skipped == 4 and source._thread.is_alive()
    finally:
        source.close()
    assert fix["lat_deg"] == pytest.approx(48.1173) and fix["alt_msl_m"] == 545.4

def test_the_position_sources_are_listed_once() -> None:
    from fol.agent import position

    assert position.SOURCES == tuple(position.SOURCE_CLASSES) == ("mavlink", "nmea")
    assert PositionConfig(connection="x", source="mavlink").baud == 57600
    assert PositionConfig(connection="/dev/ttyUSB0", source="nmea").baud == 9600


def _pty() -> tuple[int, int, str]:
    """A pseudo-terminal: the master (the 'receiver' end we write to), the slave and its device path."""
    if not hasattr(os, "openpty"):
        pytest.skip("no pseudo-terminals on this platform")
    master, slave = os.openpty()
    return master, slave, os.ttyname(slave)


def test_nmea_from_a_serial_device(tmp_path: Path) -> None:
    """The serial path, read with pyserial from a pseudo-terminal as from a USB receiver: the configured baud
    rate reaches the port, a sentence split across reads is joined, garbage bytes are skipped."""
    pytest.importorskip("serial")
    termios = pytest.importorskip("termios")
    master, slave, device = _pty()
    try:
        source = open_source(PositionConfig(connection=device, source="nmea", baud=4800))
        try:
            ispeed, ospeed = termios.tcgetattr(slave)[4:6]
            assert ispeed == ospeed == termios.B4800
            data = ("\r\n".join(EPOCH_1) + "\r\n").encode()
            os.write(master, b"\xff\xfe\x00garbage\r\n" + data[:100])  # the GGA cut in the middle
            time.sleep(0.3)
            assert source.messages == 0
            os.write(master, data[100:])
            fix = _wait(lambda: source.messages == 2 and source.latest(), 5.0)
        finally:
            source.close()
    finally:
        os.close(master)
        os.close(slave)
    assert fix["lat_deg"] == pytest.approx(48.1173) and fix["alt_msl_m"] == 545.4 and fix["course_deg"] == 84.4
    assert source.skipped == 1  # the garbage line


def test_a_serial_device_that_disappears_is_reported_once_and_reopened(tmp_path: Path, caplog, monkeypatch) -> None:
    """A USB receiver unplugged: one warning naming the device (it was '[Errno 5] Input/output error' twice a
    second, forever), the last fix kept; plugged back (its udev link pointing at the new port), it is read
    again (it never was: the dead port was read forever)."""
    pytest.importorskip("serial")
    from fol.agent import position

    monkeypatch.setattr(position, "RETRY_S", 0.1)
    link = tmp_path / "gps-by-id"
    master, slave, device = _pty()
    link.symlink_to(device)
    os.close(slave)
    with caplog.at_level("INFO", logger="fol.agent.position"):
        source = open_source(PositionConfig(connection=str(link), source="nmea"))
        try:
            os.write(master, ("\r\n".join(EPOCH_1) + "\r\n").encode())
            _wait(lambda: source.messages == 2, 5.0)
            os.close(master)  # unplugged
            master = -1
            link.unlink()
            _wait(lambda: any("gps-by-id" in r.getMessage() for r in caplog.records), 5.0)
            time.sleep(0.35)  # a few retries
            warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
            assert len(warnings) == 1 and str(link) in warnings[0], warnings
            assert source.latest()["lat_deg"] == pytest.approx(48.1173)
            master, slave, device = _pty()  # plugged back
            link.symlink_to(device)
            os.close(slave)
            _wait(lambda: any("readable again" in r.getMessage() for r in caplog.records), 5.0)
            os.write(master, ("\r\n".join(EPOCH_2) + "\r\n").encode())
            fix = _wait(lambda: source.messages == 3 and source.latest(), 5.0)
        finally:
            source.close()
            if master >= 0:
                os.close(master)
    assert fix["lat_deg"] == pytest.approx(-48.1173333)


def test_a_baud_rate_the_serial_port_cannot_take_is_one_line() -> None:
    """baud = 1000000000000 passed the [position] check and then raised pyserial's OverflowError, a traceback."""
    pytest.importorskip("serial")
    master, slave, device = _pty()
    try:
        with pytest.raises(ConfigError, match=r"^position\.baud: 1000000000000 is not a baud rate .* accepts") as err:
            open_source(PositionConfig(connection=device, source="nmea", baud=10**12))
    finally:
        os.close(master)
        os.close(slave)
    assert "\n" not in str(err.value) and device in str(err.value)


def test_the_256_byte_line_limit_does_not_count_the_line_end(tmp_path: Path) -> None:
    """A line "longer than 256 bytes" is skipped; a 256-byte sentence ended by CR LF (as receivers end
    them) was skipped too, its CR counted in the line."""
    def padded(total: int) -> str:  # a GGA whose altitude has trailing zeros, ``total`` bytes long
        base = "GNGGA,123519.00,4807.0380,N,01131.0000,E,1,08,0.9,545.4{},M,46.9,M,,"
        return _nmea(base.format("0" * (total - len(_nmea(base.format(""))))))

    assert len(padded(256)) == 256 and len(padded(257)) == 257
    log = tmp_path / "long.nmea"
    log.write_bytes(f"{padded(257)}\r\n{padded(256)}\r\n".encode())
    source = open_source(PositionConfig(connection=str(log), source="nmea"))
    try:
        fix = _wait(lambda: source.messages == 1 and source.latest(), 5.0)
        assert source.skipped == 1
    finally:
        source.close()
    assert fix["alt_msl_m"] == 545.4


def _sentence(body: str) -> str:
    """``$body*XX`` with the checksum NMEA asks for."""
    checksum = 0
    for c in body:
        checksum ^= ord(c)
    return f"${body}*{checksum:02X}"


@pytest.mark.parametrize("body", [
    "GPGGA,123519.00,4807.0380,N,01131.0000,E,1,08,0.9,1e300,M,46.9,M,,",  # an altitude no track holds
    "GPGGA,123519.00,4807.0380,N,01131.0000,E,1,08,0.9,1000001,M,46.9,M,,",  # just past fol contacts' bound
    "GPGGA,123519.00,4807.0380,X,01131.0000,E,1,08,0.9,545.4,M,46.9,M,,",  # pynmeagps reads X as N
    "GPGGA,123519.00,4807.0380,N,01131.0000,Q,1,08,0.9,545.4,M,46.9,M,,",  # and Q as E
    "GPRMC,123519.00,A,4807.0380,Y,01131.0000,E,022.4,084.4,230394,003.1,W,A",
])
def test_a_fix_a_recorded_track_cannot_hold_is_skipped_not_logged(body: str) -> None:
    """Each sentence has a valid checksum; before, its fix was logged as read (``positions.jsonl`` then
    refused by ``fol contacts`` at that line, or a wrong hemisphere taken as N / E)."""
    from pynmeagps import NMEAReader

    from fol.agent.position import fix_from_nmea

    msg = NMEAReader.parse(_sentence(body))
    with pytest.raises(ValueError):
        fix_from_nmea(msg, None, 0.0) if msg.msgID == "GGA" else fix_from_nmea(None, msg, 0.0)
    good = NMEAReader.parse(_sentence(body.replace("1e300", "545.4").replace("1000001", "999999")
                                      .replace(",X,", ",N,").replace(",Q,", ",E,").replace(",Y,", ",N,")))
    fix = fix_from_nmea(good, None, 0.0) if good.msgID == "GGA" else fix_from_nmea(None, good, 0.0)
    assert fix["lat_deg"] == pytest.approx(48.1173)


def test_the_altitude_bound_is_the_recorded_track_readers() -> None:
    """fol.agent may not import contact_sim (the layering), so the bound is written twice; this keeps them one."""
    from contact_sim.drones import MAX_LOCAL_KM
    from fol.agent.position import MAX_ALTITUDE_M

    assert MAX_ALTITUDE_M == MAX_LOCAL_KM * 1000.0
