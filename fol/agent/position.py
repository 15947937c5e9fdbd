"""The drone's own position, read from its autopilot over MAVLink or from a GPS receiver's NMEA 0183 sentences,
logged with every exchange.

Optional ``[position]`` table of the agent configuration::

    [position]
    source = "mavlink"                      # or "nmea"
    connection = "udpin:127.0.0.1:14550"    # mavlink: any pymavlink connection string
                                            # (a serial port "/dev/ttyACM0" (needs pyserial), "tcp:host:port",
                                            # a .tlog file; a path is relative to the config's folder)
    baud = 57600                            # serial ports only (default 57600 for mavlink, 9600 for nmea)
    stale_s = 5.0                           # a fix older than this is logged as stale

A background thread reads ``GLOBAL_POSITION_INT`` messages with ``pymavlink``
(extra ``mavlink``) and keeps the latest fix: latitude/longitude in degrees
(the message carries degE7), altitude above mean sea level and above home in
metres (mm in the message), ground velocity in m/s (cm/s) and heading in
degrees (cdeg; ``None`` when the autopilot sends 65535 for "unknown"). Each
model sent or received is appended with the fix to ``<state_dir>/positions.jsonl``
and logged; before a line would take the file past the 16 MiB its readers take, it is
renamed ``positions.<n>.jsonl`` and a new one started (:class:`PositionLog`).

With ``source = "nmea"`` (extra ``nmea``: pynmeagps, pyserial) the connection is
a serial device, a file of logged sentences (replayed), ``"tcp:HOST:PORT"`` (a
GPS-to-network bridge), ``"udpin:HOST:PORT"`` or ``"gpsd:HOST[:PORT]"`` (gpsd's
raw NMEA, port 2947 by default). GGA sentences of any talker (GP, GN, GL, GA, GB,
BD, ...) give latitude, longitude, altitude above mean sea level, ``fix_quality``
and ``satellites``; the RMC of the same epoch adds the ground velocity (north,
east; down is ``None``) and ``course_deg`` from the speed and course over ground,
and ``utc`` (ISO 8601, from RMC's date and GGA's time). NMEA has no altitude above
home, heading (the course is the track, not the yaw), boot time or system id:
those keys are ``None``, as ``fix_quality``, ``satellites``, ``course_deg`` and
``utc`` are in a MAVLink fix, so both sources give the same keys. A receiver sending
RMC but no GGA gives 2-D fixes (``alt_msl_m``, ``fix_quality`` and ``satellites``
``None``), with one warning. A line longer than 256 bytes, garbage, a bad checksum,
a fix quality of 0 or an RMC status ``V``, or a position out of range (a
hemisphere other than N/S, E/W, an altitude beyond the 1,000 km a recorded
track may hold) or with minutes of 60 or more is skipped and counted
(``NmeaSource.skipped``); so is a MAVLink fix out of range. A link
that fails (a serial device unplugged, a network bridge gone) is reported in one
warning and tried again every 0.5 s, the last fix kept; a serial device is opened
again when it (or its udev link) is back.

Example (no autopilot needed to decode a message):
    >>> from pymavlink.dialects.v20 import common as mav
    >>> msg = mav.MAVLink_global_position_int_message(1000, 407123456, 167654321, 512340, 12000, 150, -20, 0, 9000)
    >>> fix_from_message(msg, received_at=0.0)["lat_deg"]
    40.7123456
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fol.errors import ConfigError
from fol.fileio import fsync_dir
from swarmbase.safejson import loads as bounded_loads
from swarmbase.tomlcheck import brief, is_finite_number, shown

__all__ = ["PositionConfig", "PositionSource", "MavlinkSource", "NmeaSource", "PositionLog", "fix_from_message",
           "fix_from_nmea", "open_source"]

log = logging.getLogger(__name__)

LOG_FILE = "positions.jsonl"
#: The name a full ``positions.jsonl`` is renamed to (:class:`PositionLog`): ``positions.<n>.jsonl``, ``n`` from 1, the
#: oldest first. ``contact_sim.tracks`` joins the pieces of one folder in this order (its ``ROTATED_POSITION_LOG``,
#: written twice as ``fol.agent`` does not import ``contact_sim``; a test keeps them equal).
ROTATED_LOG = re.compile(r"positions\.([1-9][0-9]*)\.jsonl")
#: Largest altitude (m) a logged fix may have: the bound of a recorded track in ``fol contacts``
#: (``contact_sim.drones.MAX_LOCAL_KM``, which ``fol.agent`` does not import; a test keeps them equal).
MAX_ALTITUDE_M = 1_000_000.0
#: How the readers of ``positions.jsonl`` in ``fol contacts`` take it (``contact_sim.tracks``: a log file of
#: at most ``MAX_MISSION_BYTES``, each line parsed by :func:`swarmbase.safejson.loads` with ``MAX_LOG_LINE_DEPTH``
#: and ``MAX_LOG_LINE_VALUES``); :class:`PositionLog` keeps a newline-less last line by the same rule. Written
#: twice, as ``fol.agent`` does not import ``contact_sim``; a test keeps them equal.
MAX_LOG_BYTES = 16 * 1024 * 1024
MAX_LOG_LINE_DEPTH, MAX_LOG_LINE_VALUES = 8, 1_000
NMEA_MAX_LINE = 256  # bytes; NMEA 0183 limits a sentence to 82 characters, proprietary ones run longer
KNOT_M_S = 1852.0 / 3600.0
GPSD_PORT = 2947
RETRY_S = 0.5  # seconds between two tries of a broken link
_NMEA_NETWORK = re.compile(r"(tcp|udpin|gpsd):([^:\s]+)(?::(\d{1,5}))?")


@dataclass(frozen=True)
class PositionConfig:
    """Where the drone's position comes from (see the module docstring)."""

    connection: str
    source: str = "mavlink"
    baud: int | None = None  # None: 57600 for mavlink, 9600 for nmea
    stale_s: float = 5.0

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ConfigError(f"position.source: expected one of {', '.join(SOURCES)}, got {shown(self.source)}")
        if self.source == "nmea":
            if not isinstance(self.connection, str) or not self.connection.strip() or (
                    ":" in self.connection and nmea_network_address(self.connection) is None):
                raise ConfigError(f"position.connection: expected a serial device, a file of NMEA sentences, "
                                  f"'tcp:HOST:PORT', 'udpin:HOST:PORT' or 'gpsd:HOST[:PORT]', got {shown(self.connection)}")
        elif not isinstance(self.connection, str) or not self.connection.strip():
            raise ConfigError(f"position.connection: expected a pymavlink connection string like "
                              f"'udpin:127.0.0.1:14550', got {shown(self.connection)}")
        if self.baud is None:
            object.__setattr__(self, "baud", SOURCE_CLASSES[self.source].default_baud)
        if isinstance(self.baud, bool) or not isinstance(self.baud, int) or self.baud <= 0:
            raise ConfigError(f"position.baud: expected a positive integer, got {shown(self.baud)}")
        if not is_finite_number(self.stale_s) or self.stale_s <= 0:
            raise ConfigError(f"position.stale_s: expected a positive number of seconds, got {shown(self.stale_s)}")


def check_fix_position(lat_deg: float, lon_deg: float, alt_msl_m: float | None) -> None:
    """Raise ``ValueError`` for a position a recorded track cannot hold (``fol contacts`` refuses
    such a line of ``positions.jsonl``): a latitude outside -90..90 or a longitude outside
    -180..180 degrees, or an altitude beyond :data:`MAX_ALTITUDE_M`."""
    if not (abs(lat_deg) <= 90 and abs(lon_deg) <= 180):
        raise ValueError(f"position out of range ({lat_deg!r}, {lon_deg!r})")
    if alt_msl_m is not None and not abs(alt_msl_m) <= MAX_ALTITUDE_M:
        raise ValueError(f"altitude {alt_msl_m!r} m beyond {MAX_ALTITUDE_M:g} m")


def fix_from_message(msg: Any, received_at: float) -> dict[str, Any]:
    """A GLOBAL_POSITION_INT message in SI units and degrees. Raises ``ValueError`` for a
    position out of range (:func:`check_fix_position`)."""
    check_fix_position(msg.lat / 1e7, msg.lon / 1e7, msg.alt / 1000.0)
    return {
        "lat_deg": msg.lat / 1e7, "lon_deg": msg.lon / 1e7,
        "alt_msl_m": msg.alt / 1000.0, "alt_rel_m": msg.relative_alt / 1000.0,
        "vel_ned_m_s": [msg.vx / 100.0, msg.vy / 100.0, msg.vz / 100.0],
        "heading_deg": None if msg.hdg == 65535 else msg.hdg / 100.0,
        "time_boot_ms": int(msg.time_boot_ms), "system": int(msg.get_srcSystem()), "received_at": received_at,
        "fix_quality": None, "satellites": None, "course_deg": None, "utc": None,
    }


def nmea_network_address(connection: str) -> tuple[str, str, int] | None:
    """``(kind, host, port)`` of an NMEA network connection (``tcp:``/``udpin:`` with a port, ``gpsd:`` with
    an optional one), or ``None`` when ``connection`` is not one."""
    m = _NMEA_NETWORK.fullmatch(connection)
    if m is None or (m[3] is None and m[1] != "gpsd"):
        return None
    port = GPSD_PORT if m[3] is None else int(m[3])
    return (m[1], m[2], port) if 0 < port < 65536 else None


def _nmea_float(value: Any) -> float | None:
    """An NMEA number field as parsed (a number, or ``''`` when empty) as a finite float or ``None``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _nmea_position(msg: Any) -> tuple[float, float]:
    """Latitude and longitude of a GGA or RMC sentence, in degrees (their range is checked with the
    altitude, :func:`check_fix_position`). Raises ``ValueError`` for an empty position, a hemisphere letter
    other than N/S, E/W, or a field whose minutes are not below 60 (``4960.000``, which pynmeagps reads as
    50 degrees)."""
    first = 1 if msg.msgID == "GGA" else 2  # the latitude field: after the time (and RMC's status)
    payload = getattr(msg, "payload", None) or []
    for raw in payload[first:first + 3:2]:
        try:
            value = float(raw)
        except (TypeError, ValueError):
            continue  # an empty field: no position, refused below
        if value % 100 >= 60:
            raise ValueError(f"position field {raw!r} has minutes of 60 or more (expected (d)ddmm.mmmm)")
    hemispheres = payload[first + 1:first + 4:2]
    if len(hemispheres) == 2 and (hemispheres[0] not in ("N", "S") or hemispheres[1] not in ("E", "W")):
        # pynmeagps reads any letter but S and W as N and E
        raise ValueError(f"hemisphere {hemispheres[0]!r}, {hemispheres[1]!r} (expected N or S, E or W)")
    lat, lon = _nmea_float(msg.lat), _nmea_float(msg.lon)
    if lat is None or lon is None:
        raise ValueError(f"position out of range ({msg.lat!r}, {msg.lon!r})")
    return lat, lon


def fix_from_nmea(gga: Any | None, rmc: Any | None, received_at: float) -> dict[str, Any]:
    """A fix from a GGA sentence (parsed by pynmeagps) and the RMC of the same epoch (or ``None``): the keys of
    :func:`fix_from_message`, ``None`` where NMEA has no value. With no GGA (``gga`` ``None``), a 2-D fix from
    the RMC alone: ``alt_msl_m``, ``fix_quality`` and ``satellites`` are ``None``. Raises ``ValueError`` for
    a GGA without a fix (quality 0) or a position out of range or with minutes of 60 or more."""
    if gga is None:
        if rmc is None:
            raise ValueError("no GGA or RMC sentence")
        lat, lon = _nmea_position(rmc)
        quality = alt = sats = None
    else:
        quality = gga.quality
        if not isinstance(quality, int) or quality <= 0:
            raise ValueError(f"no fix (quality {quality!r})")
        lat, lon = _nmea_position(gga)
        alt, sats = _nmea_float(gga.alt), gga.numSV
    check_fix_position(lat, lon, alt)
    vel = course = utc = None
    if rmc is not None:
        speed, course = _nmea_float(rmc.spd), _nmea_float(rmc.cog)
        if speed is not None and course is not None:
            v = speed * KNOT_M_S
            vel = [round(v * math.cos(math.radians(course)), 3), round(v * math.sin(math.radians(course)), 3), None]
        epoch = (gga or rmc).time
        if hasattr(rmc.date, "isoformat") and hasattr(epoch, "isoformat"):
            utc = f"{rmc.date.isoformat()}T{epoch.isoformat()}Z"
    return {
        "lat_deg": lat, "lon_deg": lon, "alt_msl_m": alt, "alt_rel_m": None,
        "vel_ned_m_s": vel, "heading_deg": None, "time_boot_ms": None, "system": None, "received_at": received_at,
        "fix_quality": quality, "satellites": sats if isinstance(sats, int) else None, "course_deg": course,
        "utc": utc,
    }


class PositionSource:
    """A link to a position device read in a background thread; :meth:`latest` is the newest fix (or ``None``).

    A source opens its link in :meth:`_open` and returns the next fix from :meth:`_read` (``None`` when
    nothing is waiting); this class keeps the newest fix, its age and staleness, and stops the thread.
    :func:`open_source` picks the class for ``config.source`` from :data:`SOURCE_CLASSES`."""

    default_baud = 9600  # on a serial port, when the configuration gives none

    def __init__(self, config: PositionConfig) -> None:
        self.config = config
        self.skipped = 0  # messages read but not taken as a fix (no fix, out of range, malformed)
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
        broken = False  # the link failed and has not been read since: the failure is reported once
        while not self._stop.is_set():
            try:
                fix = self._read()
            except (OSError, ValueError) as exc:  # a broken link: keep the last fix, try again
                if broken:
                    log.debug("position: %s", exc)
                else:
                    log.warning("position: %s (the last fix is kept; retrying every %g s)", exc, RETRY_S)
                broken = True
                self._stop.wait(RETRY_S)
                continue
            if broken:
                broken = False
                log.info("position: %s is readable again", self.config.connection)
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

    default_baud = 57600

    def _open(self) -> None:
        try:
            from pymavlink import mavutil
        except ImportError:
            raise ConfigError("position: reading MAVLink needs pymavlink: pip install 'fol-swarm[mavlink]'") from None
        config = self.config
        try:
            self._conn = mavutil.mavlink_connection(config.connection, baud=config.baud, autoreconnect=True)
        except Exception as exc:  # noqa: BLE001 - pymavlink raises many types for a bad connection string
            raise ConfigError(f"position.connection: cannot open {shown(config.connection)} ({exc})") from None

    def _read(self) -> dict[str, Any] | None:
        # Not pymavlink's blocking read: on a log file at its end it waits forever, past any timeout.
        msg = self._conn.recv_match(type="GLOBAL_POSITION_INT", blocking=False)
        if msg is None:
            return None
        try:
            return fix_from_message(msg, time.time())
        except ValueError as exc:  # a message, not the link: skipped and counted, the last fix kept
            log.debug("position: skipped GLOBAL_POSITION_INT (%s)", exc)
            self.skipped += 1
            return None

    def _close_link(self) -> None:
        self._conn.close()


#: The fields of each sentence :func:`fix_from_nmea` reads (pynmeagps leaves out those a short sentence lacks).
_NMEA_FIELDS = {"GGA": ("time", "lat", "lon", "quality", "alt", "numSV"),
                "RMC": ("time", "status", "lat", "lon", "spd", "cog", "date")}


class NmeaSource(PositionSource):
    """GGA and RMC sentences (any talker: GP, GN, GL, GA, GB, BD, ...) from a GPS receiver, parsed by pynmeagps.

    A fix is published for each GGA with a fix and refined by the RMC of the same epoch (the same UTC time,
    in either order). Until a GGA has been read, each RMC with a fix gives a 2-D fix (altitude ``None``), and
    an epoch that ends without a GGA logs a warning, once: a receiver sending RMC only gives no altitude. A line that is too
    long, garbage, fails its checksum, lacks fields (a sentence cut short before a valid checksum), or reports
    no fix or a position out of range (or minutes of 60 or more) is skipped and counted in :attr:`skipped`."""

    def _open(self) -> None:
        try:
            import pynmeagps
        except ImportError:
            raise ConfigError("position: reading NMEA needs pynmeagps: pip install 'fol-swarm[nmea]'") from None
        self._nmea = pynmeagps
        self._buffer = b""
        self._discarding = False  # inside a line longer than NMEA_MAX_LINE
        self._epoch: Any = None  # the UTC time of the sentences in _gga / _rmc
        self._gga: Any = None
        self._rmc: Any = None
        self._seen_gga = False  # a GGA has been read: an RMC waits for its epoch's GGA
        self._warned_2d = False
        self._sock: socket.socket | None = None
        self._file: Any = None
        connection = self.config.connection
        self._network = nmea_network_address(connection) if ":" in connection else None
        if self._network is not None:
            return  # connected (and reconnected) by the reader thread: the bridge may start after the agent
        self._serial: Any = None  # pyserial, for a serial port
        try:
            if Path(connection).is_file():
                self._file = open(connection, "rb")  # noqa: SIM115 - closed in _close_link
            else:
                try:
                    import serial
                except ImportError:
                    raise ConfigError(f"position.connection: {shown(connection)} is a serial port, read only with "
                                      f"pyserial: pip install pyserial") from None
                self._serial = serial
                self._file = serial.Serial(connection, self.config.baud, timeout=0.2)
        except OverflowError as exc:  # pyserial, for a custom rate that does not fit the port's C int
            raise ConfigError(f"position.baud: {self.config.baud} is not a baud rate {shown(connection)} accepts "
                              f"({exc})") from None
        except (OSError, ValueError) as exc:
            raise ConfigError(f"position.connection: cannot open {shown(connection)} ({exc})") from None

    def _chunk(self) -> bytes:
        """The bytes waiting on the link (``b''`` when none)."""
        if self._network is None:
            if self._serial is None:
                return self._file.read(4096)  # a file: b'' at its end (it may still grow)
            # A serial port: wait up to its 0.2 s timeout for a byte. A port that fails (a USB receiver
            # unplugged) is closed and opened again on the next read, when it (or its udev link) is back.
            connection = self.config.connection
            try:
                if self._file is None:
                    self._file = self._serial.Serial(connection, self.config.baud, timeout=0.2)
                return self._file.read(max(1, self._file.in_waiting))
            except OSError as exc:
                self._drop_serial()
                message = str(exc)
                raise OSError(message if connection in message else f"{connection}: {message}") from None
        kind, host, port = self._network
        if self._sock is None:
            if kind == "udpin":
                sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                try:
                    sock.bind((host, port))
                except OSError:
                    sock.close()
                    raise
            else:
                sock = socket.create_connection((host, port), timeout=5.0)
                if kind == "gpsd":  # raw NMEA from gpsd
                    sock.sendall(b'?WATCH={"enable":true,"nmea":true}\n')
            sock.settimeout(0.2)
            self._sock = sock
        try:
            data = self._sock.recv(4096)
        except socket.timeout:
            return b""
        except OSError:
            self._drop_socket()
            raise
        if not data and kind != "udpin":
            self._drop_socket()
            raise OSError(f"{host}:{port} closed the connection")
        return data

    def _drop_socket(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock, self._buffer, self._discarding = None, b"", False

    def _line(self) -> bytes | None:
        """The next whole line (without its line end), or ``None`` when none is waiting."""
        while True:
            end = self._buffer.find(b"\n")
            if end < 0:
                if len(self._buffer) > NMEA_MAX_LINE + 1:  # an endless line (its CR aside): drop it up to its newline
                    if not self._discarding:
                        self.skipped += 1
                    self._buffer, self._discarding = b"", True
                chunk = self._chunk()
                if not chunk:
                    return None
                self._buffer += chunk
                continue
            line, self._buffer = self._buffer[:end].removesuffix(b"\r"), self._buffer[end + 1:]  # CR LF or LF
            if self._discarding:
                self._discarding = False
                continue
            if len(line) > NMEA_MAX_LINE:
                self.skipped += 1
                continue
            return line.strip()

    def _sentence(self, line: bytes) -> dict[str, Any] | None:
        """The fix after this line, or ``None`` when the line brings none."""
        if not line or (self._network is not None and self._network[0] == "gpsd" and line.startswith(b"{")):
            return None  # a blank line, or gpsd's JSON reports beside the NMEA
        try:
            msg = self._nmea.NMEAReader.parse(line, validate=self._nmea.VALCKSUM)
        except (self._nmea.NMEAParseError, self._nmea.NMEAMessageError, self._nmea.NMEATypeError,
                ValueError, TypeError, IndexError) as exc:
            log.debug("position: skipped NMEA line %r (%s)", line[:NMEA_MAX_LINE], exc)
            msg = None
        if msg is None:  # garbage, a bad checksum or a truncated line
            self.skipped += 1
            return None
        if msg.msgID not in ("GGA", "RMC"):
            return None
        missing = [name for name in _NMEA_FIELDS[msg.msgID] if not hasattr(msg, name)]
        if missing:  # a sentence cut short before its checksum: pynmeagps parses the fields it has
            log.debug("position: skipped NMEA line %r (no %s)", line[:NMEA_MAX_LINE], ", ".join(missing))
            self.skipped += 1
            return None
        epoch = msg.time if hasattr(msg.time, "isoformat") else None
        if epoch != self._epoch or epoch is None:
            if self._rmc is not None and self._gga is None and not self._seen_gga and not self._warned_2d:
                self._warned_2d = True  # a whole epoch without GGA (many receivers send RMC before GGA)
                log.warning("position: %s sends RMC sentences but no GGA: positions are 2-D, with no altitude "
                            "(alt_msl_m null; replaying them in fol contacts needs one); enable GGA on the "
                            "receiver", self.config.connection)
            self._epoch, self._gga, self._rmc = epoch, None, None
        if msg.msgID == "RMC":
            if msg.status != "A":  # V: the receiver has no fix
                self.skipped += 1
                return None
            self._rmc = msg
            if self._gga is None and self._seen_gga:
                return None
        else:
            self._gga, self._seen_gga = msg, True
        try:
            fix = fix_from_nmea(self._gga, self._rmc, time.time())
        except ValueError as exc:
            log.debug("position: skipped NMEA line %r (%s)", line, exc)
            self.skipped += 1
            self._gga = self._rmc = None
            return None
        return fix

    def _read(self) -> dict[str, Any] | None:
        while not self._stop.is_set():
            line = self._line()
            if line is None:
                return None
            fix = self._sentence(line)
            if fix is not None:
                return fix
        return None

    def _drop_serial(self) -> None:
        if self._file is not None:
            try:
                self._file.close()
            except OSError:
                pass  # the device is gone already
            self._file, self._buffer, self._discarding = None, b"", False

    def _close_link(self) -> None:
        self._drop_socket()
        if self._file is not None:
            self._file.close()


def open_source(config: PositionConfig) -> PositionSource:
    """The reader for ``config.source``, its thread started."""
    return SOURCE_CLASSES[config.source](config)


#: The position sources by their ``source`` name: the one list of them (:data:`SOURCES` is its keys).
SOURCE_CLASSES: dict[str, type[PositionSource]] = {"mavlink": MavlinkSource, "nmea": NmeaSource}
SOURCES = tuple(SOURCE_CLASSES)


class PositionLog:
    """Appends ``{event, peer, model_id, t, position}`` lines to ``positions.jsonl`` and logs them.

    Before its first line, a last line the log's readers would skip as cut off
    (power lost while an earlier run appended it: no newline at its end, not
    JSON as they read it) is cut off the file, with one warning; appended to, it
    would become a malformed line in the middle of the file, refused by the
    readers. A last line that is a whole JSON object without its newline is kept
    and ended, by the readers' rule (:data:`MAX_LOG_BYTES`, :data:`MAX_LOG_LINE_DEPTH`,
    :data:`MAX_LOG_LINE_VALUES`, no key given twice): one they would refuse is
    cut off, one they take is kept at any length. So is the fragment an append
    that failed part-way (a full disk) left cut off, before the next line is appended.

    The readers refuse a log over :data:`MAX_LOG_BYTES` (16 MiB: about 37,000 exchanges, a line with a MAVLink fix taking about 445 bytes) whole, so when the
    next line would take the file past it, the file is renamed ``positions.<n>.jsonl`` (``n`` one more than
    the highest such file in the folder, from 1) and the line starts a new ``positions.jsonl``, with one info
    line; each file stays readable on its own, no line is lost, and the old files are kept (removing them is
    the user's). A log already over the limit (an older agent's) is renamed the same way, with a warning.
    """

    def __init__(self, source: PositionSource, state_dir: Path, node_id: str) -> None:
        self.source = source
        self.path = Path(state_dir) / LOG_FILE
        self.node_id = node_id
        self._ended = False  # whether the file's last line is known to end in a newline

    def _end_last_line(self) -> None:
        """Make the file end with a complete line (or be empty) before the first append."""
        try:
            fh = self.path.open("r+b")
        except FileNotFoundError:
            return
        with fh:
            size = fh.seek(0, os.SEEK_END)
            if size == 0:
                return
            fh.seek(size - 1)
            if fh.read(1) in (b"\n", b"\r"):  # the readers' line ends
                return
            start, end = 0, size  # the start of the last line: read backwards, one block at a time
            while end > 0:
                low = max(0, end - 65536)
                fh.seek(low)
                block = fh.read(end - low)
                cut = max(block.rfind(b"\n"), block.rfind(b"\r"))
                if cut >= 0:
                    start = low + cut + 1
                    break
                end = low
            entry = None
            if size - start <= MAX_LOG_BYTES:  # a longer line is in a file the readers refuse whole
                fh.seek(start)
                try:  # as the readers parse a line (a first line without the byte-order mark they drop)
                    entry = bounded_loads(fh.read(size - start).decode("utf-8-sig" if start == 0 else "utf-8"),
                                          max_depth=MAX_LOG_LINE_DEPTH, max_items=MAX_LOG_LINE_VALUES,
                                          allow_nan=True)
                except ValueError:  # UnicodeDecodeError is a ValueError
                    entry = None
            if isinstance(entry, dict):  # the whole line was written, only its newline is missing
                fh.seek(size)
                fh.write(b"\n")
            else:
                fh.truncate(start)
                os.fsync(fh.fileno())  # the cut is on disk before anything is appended after it
                log.warning("%s: %s: dropped %d bytes of a last line cut off while it was written "
                            "(no newline, not JSON)", self.node_id, brief(self.path), size - start)

    def _rotate_before(self, line_bytes: int) -> None:
        """Rename the log to ``positions.<n>.jsonl`` if a line of ``line_bytes`` would take it past
        :data:`MAX_LOG_BYTES` (a file already holding lines only: a line alone over the limit goes nowhere)."""
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        if size == 0 or size + line_bytes <= MAX_LOG_BYTES:
            return
        folder = self.path.parent
        numbers = [int(m[1]) for p in folder.iterdir() if (m := ROTATED_LOG.fullmatch(p.name))]
        target = folder / f"positions.{max(numbers, default=0) + 1}.jsonl"
        os.rename(self.path, target)  # atomic: every line is in one of the two names, whenever power is lost
        fsync_dir(folder)
        if size > MAX_LOG_BYTES:
            log.warning("%s: %s: %d bytes, over the %d bytes a recorded track may have (fol contacts, fol "
                        "simulate; written before logs were rotated): renamed %s, new lines go to a new %s",
                        self.node_id, brief(self.path), size, MAX_LOG_BYTES, target.name, LOG_FILE)
        else:
            log.info("%s: %s: %d bytes, the next line would pass the %d bytes a recorded track may have (fol "
                     "contacts, fol simulate): renamed %s, new lines go to a new %s", self.node_id, brief(self.path), size,
                     MAX_LOG_BYTES, target.name, LOG_FILE)

    def record(self, event: str, peer: str, model_id: str) -> dict[str, Any]:
        fix = self.source.latest()
        entry = {"event": event, "peer": peer, "model_id": model_id, "t": time.time(), "position": fix}
        line = (json.dumps(entry) + "\n").encode("utf-8")
        if not self._ended:
            self._end_last_line()
            self._ended = True
        self._rotate_before(len(line))
        try:
            with self.path.open("ab") as fh:
                fh.write(line)
        except OSError:  # e.g. a full disk: part of the line may be written, cut off before the next append
            self._ended = False
            raise
        if fix is None:
            log.info("%s: %s %s (%s), no position fix yet", self.node_id, event, peer, model_id)
        else:
            alt = "" if fix["alt_msl_m"] is None else f", {fix['alt_msl_m']:.1f} m"
            log.info("%s: %s %s (%s) at %.7f, %.7f%s%s", self.node_id, event, peer, model_id, fix["lat_deg"],
                     fix["lon_deg"], alt, " (stale)" if fix["stale"] else "")
        return entry

    def close(self) -> None:
        self.source.close()
