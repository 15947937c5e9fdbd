"""The drone's own position, read from its autopilot over MAVLink, logged with every exchange.

Optional ``[position]`` table of the agent configuration::

    [position]
    source = "mavlink"                      # the only source so far
    connection = "udpin:127.0.0.1:14550"    # any pymavlink connection string
                                            # (a serial port "/dev/ttyACM0" (needs pyserial), "tcp:host:port",
                                            # a .tlog file; a path is relative to the config's folder)
    baud = 57600                            # serial ports only
    stale_s = 5.0                           # a fix older than this is logged as stale

A background thread reads ``GLOBAL_POSITION_INT`` messages with ``pymavlink``
(extra ``mavlink``) and keeps the latest fix: latitude/longitude in degrees
(the message carries degE7), altitude above mean sea level and above home in
metres (mm in the message), ground velocity in m/s (cm/s) and heading in
degrees (cdeg; ``None`` when the autopilot sends 65535 for "unknown"). Each
model sent or received is appended with the fix to ``<state_dir>/positions.jsonl``
and logged.

Example (no autopilot needed to decode a message):
    >>> from pymavlink.dialects.v20 import common as mav
    >>> msg = mav.MAVLink_global_position_int_message(1000, 407123456, 167654321, 512340, 12000, 150, -20, 0, 9000)
    >>> fix_from_message(msg, received_at=0.0)["lat_deg"]
    40.7123456
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fol.errors import ConfigError
from swarmbase.tomlcheck import is_finite_number

__all__ = ["PositionConfig", "PositionSource", "MavlinkSource", "PositionLog", "fix_from_message", "open_source"]

log = logging.getLogger(__name__)

SOURCES = ("mavlink",)
LOG_FILE = "positions.jsonl"


@dataclass(frozen=True)
class PositionConfig:
    """Where the drone's position comes from (see the module docstring)."""

    connection: str
    source: str = "mavlink"
    baud: int = 57600
    stale_s: float = 5.0

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ConfigError(f"position.source: expected one of {', '.join(SOURCES)}, got {self.source!r}")
        if not isinstance(self.connection, str) or not self.connection.strip():
            raise ConfigError(f"position.connection: expected a pymavlink connection string like "
                              f"'udpin:127.0.0.1:14550', got {self.connection!r}")
        if isinstance(self.baud, bool) or not isinstance(self.baud, int) or self.baud <= 0:
            raise ConfigError(f"position.baud: expected a positive integer, got {self.baud!r}")
        if not is_finite_number(self.stale_s) or self.stale_s <= 0:
            raise ConfigError(f"position.stale_s: expected a positive number of seconds, got {self.stale_s!r}")


def fix_from_message(msg: Any, received_at: float) -> dict[str, Any]:
    """A GLOBAL_POSITION_INT message in SI units and degrees."""
    return {
        "lat_deg": msg.lat / 1e7, "lon_deg": msg.lon / 1e7,
        "alt_msl_m": msg.alt / 1000.0, "alt_rel_m": msg.relative_alt / 1000.0,
        "vel_ned_m_s": [msg.vx / 100.0, msg.vy / 100.0, msg.vz / 100.0],
        "heading_deg": None if msg.hdg == 65535 else msg.hdg / 100.0,
        "time_boot_ms": int(msg.time_boot_ms), "system": int(msg.get_srcSystem()), "received_at": received_at,
    }


class PositionSource:
    """A link to a position device read in a background thread; :meth:`latest` is the newest fix (or ``None``).

    A source opens its link in :meth:`_open` and returns the next fix from :meth:`_read` (``None`` when
    nothing is waiting); this class keeps the newest fix, its age and staleness, and stops the thread.
    :func:`open_source` picks the class for ``config.source``."""

    def __init__(self, config: PositionConfig) -> None:
        self.config = config
        self._open()
        self._lock = threading.Lock()
        self._fix: dict[str, Any] | None = None
        self._fix_mono = 0.0  # time.monotonic() when self._fix arrived
        self.messages = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fol-position", daemon=True)
        self._thread.start()

    def _open(self) -> None:
        raise NotImplementedError

    def _read(self) -> dict[str, Any] | None:
        raise NotImplementedError

    def _close_link(self) -> None:
        raise NotImplementedError

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                fix = self._read()
            except (OSError, ValueError) as exc:  # a broken link: keep the last fix, try again
                log.warning("position: %s", exc)
                self._stop.wait(0.5)
                continue
            if fix is None:
                self._stop.wait(0.05)
                continue
            with self._lock:
                self._fix, self._fix_mono = fix, time.monotonic()
                self.messages += 1

    def latest(self) -> dict[str, Any] | None:
        """The newest fix with ``age_s`` (seconds since it arrived, on the monotonic
        clock) and ``stale`` added; ``None`` before the first one."""
        with self._lock:
            fix = None if self._fix is None else dict(self._fix)
            received = self._fix_mono
        if fix is not None:  # on the monotonic clock: a wall clock set back or forward does not age a fix
            fix["age_s"] = round(time.monotonic() - received, 3)
            fix["stale"] = fix["age_s"] > self.config.stale_s
        return fix

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2.0)
        self._close_link()


class MavlinkSource(PositionSource):
    """``GLOBAL_POSITION_INT`` from an autopilot through pymavlink."""

    def _open(self) -> None:
        try:
            from pymavlink import mavutil
        except ImportError:
            raise ConfigError("position: reading MAVLink needs pymavlink: pip install 'fol-swarm[mavlink]'") from None
        config = self.config
        try:
            self._conn = mavutil.mavlink_connection(config.connection, baud=config.baud, autoreconnect=True)
        except Exception as exc:  # noqa: BLE001 - pymavlink raises many types for a bad connection string
            raise ConfigError(f"position.connection: cannot open {config.connection!r} ({exc})") from None

    def _read(self) -> dict[str, Any] | None:
        # Not pymavlink's blocking read: on a log file at its end it waits forever, past any timeout.
        msg = self._conn.recv_match(type="GLOBAL_POSITION_INT", blocking=False)
        return None if msg is None else fix_from_message(msg, time.time())

    def _close_link(self) -> None:
        self._conn.close()


def open_source(config: PositionConfig) -> PositionSource:
    """The reader for ``config.source``, its thread started."""
    return SOURCE_CLASSES[config.source](config)


SOURCE_CLASSES: dict[str, type[PositionSource]] = {"mavlink": MavlinkSource}


class PositionLog:
    """Appends ``{event, peer, model_id, t, position}`` lines to ``positions.jsonl`` and logs them."""

    def __init__(self, source: PositionSource, state_dir: Path, node_id: str) -> None:
        self.source = source
        self.path = Path(state_dir) / LOG_FILE
        self.node_id = node_id

    def record(self, event: str, peer: str, model_id: str) -> dict[str, Any]:
        fix = self.source.latest()
        entry = {"event": event, "peer": peer, "model_id": model_id, "t": time.time(), "position": fix}
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")
        if fix is None:
            log.info("%s: %s %s (%s), no position fix yet", self.node_id, event, peer, model_id)
        else:
            log.info("%s: %s %s (%s) at %.7f, %.7f, %.1f m%s", self.node_id, event, peer, model_id, fix["lat_deg"],
                     fix["lon_deg"], fix["alt_msl_m"], " (stale)" if fix["stale"] else "")
        return entry

    def close(self) -> None:
        self.source.close()
