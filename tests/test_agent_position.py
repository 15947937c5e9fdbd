"""The drone position source: MAVLink GLOBAL_POSITION_INT (generated with pymavlink) over a
loopback UDP socket, logged with each model the agent receives; the [position] table is
validated; sd_notify readiness and watchdog datagrams."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("pymavlink")
from pymavlink import mavutil  # noqa: E402

from fol.agent.config import AgentConfig  # noqa: E402
from fol.agent.keys import load_keypair  # noqa: E402
from fol.agent.loopback import free_port, prepare_nodes  # noqa: E402
from fol.agent.node import Agent  # noqa: E402
from fol.agent.position import PositionConfig, open_source  # noqa: E402
from fol.agent.systemd import Watchdog, notify  # noqa: E402
from fol.agent.transfer import offer_for_file, send_model  # noqa: E402
from fol.checkpoint import save_model  # noqa: E402
from fol.errors import ConfigError  # noqa: E402
from fol.models import ModelSpec, build_model  # noqa: E402
from _waiting import wait_until as _wait  # noqa: E402

LAT_E7, LON_E7, ALT_MM = 407123456, 167654321, 512340  # 40.7123456 N, 16.7654321 E, 512.34 m


class Autopilot:
    """A fake flight controller: GLOBAL_POSITION_INT at 20 Hz to a UDP port on 127.0.0.1."""

    def __init__(self, port: int) -> None:
        self.conn = mavutil.mavlink_connection(f"udpout:127.0.0.1:{port}", source_system=7, source_component=1)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        t0 = time.monotonic()
        while not self.stop.is_set():
            boot_ms = int((time.monotonic() - t0) * 1000)
            self.conn.mav.global_position_int_send(boot_ms, LAT_E7, LON_E7, ALT_MM, 12000, 150, -20, 5, 9000)
            time.sleep(0.05)

    def __enter__(self) -> "Autopilot":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(2)
        self.conn.close()


def _tlog(path: Path) -> Path:
    """A telemetry log of three GLOBAL_POSITION_INT from system 7 (heading unknown)."""
    import struct

    from pymavlink.dialects.v20 import common as mav

    packer = mav.MAVLink(None, srcSystem=7, srcComponent=1)
    with path.open("wb") as fh:
        for i in range(3):
            msg = mav.MAVLink_global_position_int_message(100 * i, LAT_E7 + i, LON_E7, ALT_MM, 12000, 0, 0, 0, 65535)
            fh.write(struct.pack(">Q", int((time.time() + i) * 1e6)) + msg.pack(packer))
    return path


def test_position_source_decodes_global_position_int_over_udp() -> None:
    port = free_port()
    source = open_source(PositionConfig(connection=f"udpin:127.0.0.1:{port}", stale_s=1.0))
    try:
        with Autopilot(port):
            fix = _wait(source.latest, 10.0)
        assert fix["lat_deg"] == pytest.approx(40.7123456) and fix["lon_deg"] == pytest.approx(16.7654321)
        assert fix["alt_msl_m"] == pytest.approx(512.34) and fix["alt_rel_m"] == pytest.approx(12.0)
        assert fix["vel_ned_m_s"] == pytest.approx([1.5, -0.2, 0.05]) and fix["heading_deg"] == 90.0
        assert fix["system"] == 7 and not fix["stale"]
        time.sleep(1.2)  # the autopilot went silent: the last fix is kept and marked stale
        assert source.latest()["stale"]
    finally:
        source.close()


def test_position_source_reads_a_tlog_and_stops_promptly(tmp_path: Path) -> None:
    """A .tlog connection (documented): the last fix of the log is kept, and
    close() ends the reader at once; pymavlink's blocking read of a log at its
    end ignores the timeout, so a reader waiting in it held close() for the
    whole 2 s join and then had its file closed under it."""
    source = open_source(PositionConfig(connection=str(_tlog(tmp_path / "flight.tlog"))))
    try:
        fix = _wait(lambda: source.messages == 3 and source.latest(), 5.0)
        assert fix["lat_deg"] == pytest.approx(40.7123458) and fix["heading_deg"] is None
        assert fix["time_boot_ms"] == 200 and fix["system"] == 7
    finally:
        t0 = time.monotonic()
        source.close()
        took = time.monotonic() - t0
    assert took < 1.0 and not source._thread.is_alive()


def test_fix_age_ignores_wall_clock_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The age of a fix (and so ``stale``) is measured on the monotonic clock: a
    companion computer's wall clock set back (GPS or NTP time arriving after
    boot) must not make the fix of a silent autopilot look fresh."""
    import types

    import fol.agent.position as position

    source = open_source(PositionConfig(connection=str(_tlog(tmp_path / "flight.tlog")), stale_s=5.0))
    try:
        fix = _wait(lambda: source.messages == 3 and source.latest(), 5.0)
        assert not fix["stale"] and 0 <= fix["age_s"] < 5.0
        real = time.time, time.monotonic
        clock = types.SimpleNamespace(time=lambda: real[0]() - 3600.0,  # the clock is set back an hour ...
                                      monotonic=lambda: real[1]() + 10.0)  # ... and the autopilot is silent 10 s
        monkeypatch.setattr(position, "time", clock)
        late = source.latest()
        assert late["stale"] and 10.0 <= late["age_s"] < 15.0 and late["received_at"] == fix["received_at"]
    finally:
        monkeypatch.undo()
        source.close()


def test_agent_logs_its_position_with_each_received_model(tmp_path: Path) -> None:
    spec = ModelSpec("cnn-small", num_classes=4)
    model = tmp_path / "m.safetensors"
    save_model(model, build_model(spec, seed=0), spec=spec, class_names=["a", "b", "c", "d"], producer="x")
    nodes = prepare_nodes(tmp_path, 2, models={"drone-0": model, "drone-1": model},
                          trigger={"on_board": False, "auto_send": False})
    receiver, sender = nodes
    port = free_port()
    config = dict(receiver.config, position={"source": "mavlink", "connection": f"udpin:127.0.0.1:{port}"})
    cfg = AgentConfig.from_dict(config, base_dir=receiver.folder, source="drone-0 config")
    with Autopilot(port):
        agent = Agent(cfg, load_fol=False).start()
        try:
            _wait(lambda: agent._position.source.latest(), 10.0)
            res = send_model(agent.listen_endpoint, sender.model, offer_for_file(sender.node, sender.model, 65536),
                             keys=load_keypair(sender.secret_key), server_key=agent.keys.public, timeout_s=20)
            assert res.status == "delivered"
            log = cfg.state_dir / "positions.jsonl"
            _wait(lambda: log.exists() and log.read_text().strip(), 5.0)
        finally:
            agent.stop()
    (entry,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert entry["event"] == "received" and entry["peer"] == "drone-1"
    assert entry["position"]["lat_deg"] == pytest.approx(40.7123456)


@pytest.mark.parametrize("table, message", [
    ({"source": "gps"}, "position.source: expected one of mavlink"),
    ({"connection": ""}, "position.connection: expected a pymavlink connection string"),
    ({"connection": "udpin:127.0.0.1:14550", "baud": -1}, "position.baud: expected a positive integer"),
    ({"connection": "udpin:127.0.0.1:14550", "rate": 5}, r"position: unknown key 'rate'"),
])
def test_position_table_is_validated(tmp_path: Path, table: dict, message: str) -> None:
    doc = {"node": {"id": "d0", "listen": "tcp://127.0.0.1:*", "secret_key": "k", "trust_dir": "t",
                    "state_dir": "s", "model": "m", "data": "dataset=synthetic-hurricane"},
           "position": {"connection": "udpin:127.0.0.1:1", **table}}
    with pytest.raises(ConfigError, match=message):
        AgentConfig.from_dict(doc, tmp_path, "node.toml")


def test_sd_notify_ready_and_watchdog(tmp_path: Path) -> None:
    path = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as server:
        server.bind(path)
        server.settimeout(2)
        env = {"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "2000000"}
        assert notify("READY=1", env)
        assert server.recv(64) == b"READY=1"
        dog = Watchdog(env)
        assert dog.interval_s == 2.0
        assert dog.ping(100.0) and server.recv(64) == b"WATCHDOG=1"
        assert not dog.ping(100.5)  # within half an interval
        assert dog.ping(101.0) and server.recv(64) == b"WATCHDOG=1"
    assert not notify("READY=1", {}) and Watchdog({"WATCHDOG_USEC": "5", "WATCHDOG_PID": "1"}).interval_s is None


def test_a_mavlink_fix_out_of_range_is_skipped_and_counted(tmp_path: Path) -> None:
    """A GLOBAL_POSITION_INT whose latitude is past 90 degrees (int32 degE7 reaches 214) or altitude past
    1,000 km is skipped and counted, as NMEA's are; the good fix after it is taken."""
    from pymavlink.dialects.v20 import common as mav

    link = mav.MAVLink(None, srcSystem=1)
    log = tmp_path / "flight.tlog"
    with log.open("wb") as f:
        for lat, alt_mm in [(950000000, 512340), (407123456, 2_000_000_000), (407123456, 512340)]:
            msg = mav.MAVLink_global_position_int_message(1000, lat, 167654321, alt_mm, 12000, 0, 0, 0, 9000)
            f.write(bytes(8) + msg.pack(link))  # a tlog: each message after its 8-byte timestamp
    source = open_source(PositionConfig(connection=str(log)))
    try:
        fix = _wait(lambda: source.messages == 1 and source.latest(), 5.0)
        assert source.skipped == 2
    finally:
        source.close()
    assert fix["lat_deg"] == pytest.approx(40.7123456) and fix["alt_msl_m"] == 512.34
