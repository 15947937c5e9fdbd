"""Recorded drone flights, replayed at their own UTC times: four kinds of track, told apart by
their name's ending,

- ``.gpx``: a GPX 1.1 or 1.0 track (``trk/trkseg/trkpt`` with ``lat``, ``lon``,
  ``ele`` in m above mean sea level and ``time``, every point with both), as
  any GPS logger or phone app writes; the segments (of every ``trk``) are
  joined in the order of their first times, and the times must then increase.
  Routes (``rte``) and waypoints (``wpt``) carry no times: a file with no track
  point is refused (plan such a flight as a mission), and waypoints beside a
  track are ignored. A document type declaration (``<!DOCTYPE``) is refused, so
  no entity is ever expanded;
- ``.jsonl``: the drone agent's own ``positions.jsonl`` (:mod:`fol.agent.position`):
  each fix (``lat_deg``, ``lon_deg``, ``alt_msl_m``) at the time it arrived
  (``received_at``, Unix seconds), a fix logged with several exchanges once,
  lines without a fix skipped, and a last line cut off while being written (no
  newline, not JSON) skipped with a warning. The drone is named after the file's folder (the
  agent's state folder; the log holds no node name); the pieces the agent renamed
  ``positions.<n>.jsonl`` when the log was full, listed with it, are one track with it
  (:func:`joined_position_log`: in the agent's order, each read with the same limits, their
  times following each other);
- ``.tlog``: a MAVLink telemetry log as MAVProxy, QGroundControl and Mission Planner save it,
  each MAVLink 1 or 2 packet preceded by the 8-byte big-endian time (microseconds since 1970,
  UTC) the ground station received it at. Each ``GLOBAL_POSITION_INT`` (latitude and longitude
  in 1e-7 degrees, altitude in mm above mean sea level) is a point at that time, decoded and
  its checksum checked by pymavlink (extra ``mavlink``, imported when such a file is read);
  those at latitude and longitude both 0 (what ArduPilot sends before its first position
  estimate) are skipped. The packets are framed here (the 8-byte time, then the length the
  packet's header gives, past a signed packet's signature, which is not verified) and only the
  position messages decoded; a last packet cut off by
  the end of the file (the ground station stopped while writing it) is skipped with a
  warning. Position messages of more than one vehicle (system and component id) are
  refused: one drone per file. The drone is named after the file's stem;
- ``.bin``: an ArduPilot DataFlash log (the flight controller's own), messages of 0xA3 0x95, a type
  byte and the fields the type's FMT message (type 128) lays out, framed here by those lengths; the
  ``GPS`` messages of the first GPS (``I`` 0, where logged) with a 3-D fix (``Status`` >= 3) are
  decoded with pymavlink's table of format characters (extra ``mavlink``): ``Lat``/``Lng`` in 1e-7
  degrees, ``Alt`` in cm above mean sea level, at GPS week ``GWk`` (``Week``) and milliseconds of the
  week ``GMS`` (``TimeMS``) converted to UTC with the leap seconds of that date (GPS - UTC = TAI -
  UTC - 19 s, :func:`orbits.utc_offset_s`, Skyfield's table). pymavlink's own reader is not run: it
  subtracts 18 s at any date and prints what it skips. Up to 528 bytes that are no message at the
  end (block logging's unwritten page) and a last message cut off are skipped with a warning. The
  drone is named after the file's stem.

A track's t = 0 is the scenario's ``[time] start`` when given (points before it
are dropped, the drone starting where the track is at that instant), else the
earliest time of all the scenario's tracks; a drone hovers at its first point
until its first time, and after its last point. Planned missions start at t = 0.

Their points become the drones' East-North-Up frame as planned missions' do
(:mod:`contact_sim.flightfiles`); a scenario's list of both is read by
:func:`contact_sim.missions.read_missions`.
"""

from __future__ import annotations

import datetime as _dt
import logging
import math
import re
import struct
from pathlib import Path
from typing import Any, Sequence
from xml.parsers import expat

import numpy as np

from orbits import OrbitError, parse_utc, utc_offset_s
from swarmbase.safejson import loads as bounded_loads
from swarmbase.tomlcheck import brief, check_input_file, decimal_number, read_at_most, read_text_file, shown, text_lines
from swarmbase.xmlguard import refuse_doctype

from .drones import Waypoints
from .errors import ContactError
from .flightfiles import FILE_KINDS, MAX_MISSION_BYTES, check_local, check_position, enu_km, json_number

log = logging.getLogger(__name__)

#: A positions.jsonl line's limits (the agent writes ``{event, peer, model_id, t, position: {...}}``).
MAX_LOG_LINE_DEPTH, MAX_LOG_LINE_VALUES = 8, 1_000
#: The names of a drone agent's position log and of its full pieces, ``positions.<n>.jsonl`` (n from 1, the
#: oldest first; ``fol.agent.position.LOG_FILE`` and ``ROTATED_LOG``, written twice as ``fol.agent`` does not
#: import ``contact_sim``; a test keeps them equal): pieces of one folder given together are one drone's track.
POSITION_LOG, ROTATED_POSITION_LOG = "positions.jsonl", re.compile(r"positions\.([1-9][0-9]*)\.jsonl")
#: Name endings of recorded tracks.
TRACK_SUFFIXES = (".gpx", ".jsonl", ".tlog", ".bin")
#: The namespaces of GPX 1.1 and 1.0 (and none, as some converters write).
GPX_NAMESPACES = ("http://www.topografix.com/GPX/1/1", "http://www.topografix.com/GPX/1/0", "")

#: A recorded point: UTC time, lat deg, lon deg, alt m above mean sea level, where (for messages).
TrackPoint = tuple[_dt.datetime, float, float, float, str]


#: The GPX elements read, by the element they are read in: each open element's state is the name of a GPX
#: element below (the ``trk`` of ``gpx``, its ``trkseg``, their ``trkpt``, its ``ele`` and ``time``; a route
#: ``rte`` and waypoint ``wpt`` only counted), or None for any other (an extension, a foreign namespace's)
#: and everything in it. One look-up an element, whatever its depth, so that a file nested thousands deep
#: takes no longer than a flat one, and no tuple of the open elements is built for each.
_GPX_CHILDREN: dict[str, tuple[str, ...]] = {"gpx": ("trk", "rte", "wpt"), "trk": ("trkseg",), "trkseg": ("trkpt",),
                                             "trkpt": ("ele", "time")}


def _gpx_points(path: Path) -> list[TrackPoint]:
    """The timed points of a GPX file's tracks, segments joined in the order of their first times."""
    path = check_input_file(path, ContactError, "GPX file", MAX_MISSION_BYTES)
    data = _track_bytes(path, "GPX file")
    refuse_doctype(data, brief(path), ContactError)  # before any entity could expand; named as every message names it
    parser = expat.ParserCreate(namespace_separator=" ")
    parser.buffer_text = True  # a text in one call, not one a line or entity
    segments: list[list[TrackPoint]] = []
    states: list[str | None] = []  # of the open elements, as _GPX_CHILDREN gives them
    children: dict[str, dict[str, str]] = {}  # _GPX_CHILDREN by expat's names of the file's (``NAMESPACE trk``)
    point: list[Any] = []  # of the open trkpt: lat, lon and where, then the text of its ele and time (or None)
    text: list[str] | None = None
    counts = {"trk": -1, "rte": 0, "wpt": 0}

    def start(tag: str, attrs: dict[str, str]) -> None:
        nonlocal text
        if not states:
            ns, _, local = tag.rpartition(" ")
            if local != "gpx" or ns not in GPX_NAMESPACES:
                raise ContactError(f"{brief(path)}: not a GPX file (expected a <gpx> root element of GPX 1.1 or 1.0, "
                                   f"got the element {shown(local)}{' in namespace ' + shown(ns) if ns else ''})")
            children.update((parent, {f"{ns} {n}" if ns else n: n for n in kids})
                            for parent, kids in _GPX_CHILDREN.items())
            states.append("gpx")
            return
        kids = children.get(states[-1])  # type: ignore[arg-type]
        state = kids.get(tag) if kids is not None else None
        states.append(state)
        if state is None:
            return
        if state == "trkpt":
            point[:] = (attrs.get("lat", ""), attrs.get("lon", ""),
                        f"line {parser.CurrentLineNumber} (trk {counts['trk']}, trkseg {len(segments) - 1}, "
                        f"trkpt {len(segments[-1])})", None, None)
        elif state == "ele" or state == "time":
            text = []
        elif state == "trkseg":
            segments.append([])
        else:  # trk, rte, wpt
            counts[state] += 1

    def end(tag: str) -> None:
        nonlocal text
        state = states.pop()
        if state == "trkpt":
            segments[-1].append(_gpx_point(path, *point))
        elif text is not None and (state == "ele" or state == "time"):
            point[3 if state == "ele" else 4] = "".join(text).strip()
            text = None

    def chars(data: str) -> None:
        if text is not None:
            text.append(data)

    parser.StartElementHandler, parser.EndElementHandler, parser.CharacterDataHandler = start, end, chars
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise ContactError(f"{brief(path)}: invalid XML ({exc})") from None
    finally:  # start refers to the parser, which holds it: a cycle that kept every point until a collection
        parser.StartElementHandler = parser.EndElementHandler = parser.CharacterDataHandler = None
    segments = sorted((seg for seg in segments if seg), key=lambda seg: seg[0][0])
    points = [p for seg in segments for p in seg]
    if not points:
        other = [f"{n} {k}" for k, n in counts.items() if k != "trk" and n]
        raise ContactError(f"{brief(path)}: no track points (trk/trkseg/trkpt)"
                           + (f"; its {' and '.join(other)} points have no times: plan such a flight as a .plan "
                              "or .waypoints mission" if other else ""))
    return points


def _gpx_point(path: Path, lat_text: str, lon_text: str, where: str, ele: str | None,
               time: str | None) -> TrackPoint:
    try:
        lat, lon = decimal_number(lat_text), decimal_number(lon_text)
    except ValueError:
        raise ContactError(f"{brief(path)}: {where}: expected numbers lat and lon, got {shown(lat_text)}, "
                           f"{shown(lon_text)}") from None
    if time is None:
        raise ContactError(f"{brief(path)}: {where}: no <time>; a track without times cannot be replayed")
    if ele is None:
        raise ContactError(f"{brief(path)}: {where}: no <ele>; a drone's track needs its altitude")
    try:
        alt = decimal_number(ele)
    except ValueError:
        raise ContactError(f"{brief(path)}: {where}: <ele> must be a number of metres, got {shown(ele)}") from None
    try:
        when = parse_utc(time, field="<time>")
    except OrbitError as exc:
        raise ContactError(f"{brief(path)}: {where}: {exc}") from None
    check_position(path, where, lat, lon, alt)
    return when, lat, lon, alt, where


def _position_log_points(path: Path, none_ok: bool = False) -> list[TrackPoint]:
    """The fixes of a drone agent's positions.jsonl, each once, at the time it arrived (a file without
    any refused, unless ``none_ok``: a piece of a rotated log, whose other pieces may hold them)."""
    text = read_text_file(path, ContactError, "position log", MAX_MISSION_BYTES)
    lines = text_lines(text)  # a JSON string may hold U+2028: only LF / CR LF / CR end a line
    cut = len(lines) if text and not text.endswith(("\n", "\r")) else 0  # an unterminated last line's number
    points: list[TrackPoint] = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = bounded_loads(line, max_depth=MAX_LOG_LINE_DEPTH, max_items=MAX_LOG_LINE_VALUES, allow_nan=True)
        except ValueError as exc:
            if n == cut:  # the agent was cut off while appending it (power lost): the complete lines stand
                log.warning("%s:%d: skipping the last line, cut off (no newline, not JSON)", brief(path), n)
                continue
            raise ContactError(f"{brief(path)}:{n}: expected a JSON object with a \"position\" (a line of a drone "
                               f"agent's positions.jsonl), got invalid JSON ({exc})") from None
        if not isinstance(entry, dict) or "position" not in entry:
            raise ContactError(f"{brief(path)}:{n}: expected a JSON object with a \"position\" (a line of a drone "
                               "agent's positions.jsonl)")
        fix = entry["position"]
        if fix is None:  # no fix yet when the exchange happened
            continue
        if isinstance(fix, dict) and "alt_msl_m" in fix and fix["alt_msl_m"] is None:
            raise ContactError(f"{brief(path)}:{n}: position has no altitude (alt_msl_m is null, as in the 2-D fixes "
                               "of a GPS receiver sending RMC without GGA); a replay needs each fix's altitude")
        try:
            if not isinstance(fix, dict):
                raise ValueError
            lat, lon, alt, received = (json_number(fix[k]) for k in ("lat_deg", "lon_deg", "alt_msl_m", "received_at"))
            when = _dt.datetime.fromtimestamp(received, _dt.timezone.utc)
        except (KeyError, ValueError, OverflowError, OSError):
            raise ContactError(f"{brief(path)}:{n}: position: expected numbers lat_deg, lon_deg, alt_msl_m and "
                               "received_at (Unix seconds)") from None
        where = f"line {n}"
        check_position(path, where, lat, lon, alt)
        if points and points[-1][:4] == (when, lat, lon, alt):  # the same fix, logged with another exchange
            continue
        points.append((when, lat, lon, alt, where))
    if not points and not none_ok:
        raise ContactError(f"{brief(path)}: no position fix (every {'complete ' if cut else ''}line's \"position\" is "
                           "null)")
    return points


#: A .tlog record's time: 8 bytes, big-endian, microseconds since 1970-01-01 UTC (MAVProxy puts the link's
#: number in the lowest two bits, a few microseconds at most).
_TLOG_TIME = struct.Struct(">Q")
#: MAVLink packet start markers: version 1 (header 6 bytes) and version 2 (header 10 bytes; a signed
#: packet, incompatibility flag 1, ends in a 13-byte signature).
_MAVLINK1, _MAVLINK2 = 0xFE, 0xFD
#: MAVLink message id of GLOBAL_POSITION_INT.
_GLOBAL_POSITION_INT = 33
_UNIX_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _needs_pymavlink(path: Path, kind: str) -> ContactError:
    """The one line refusing a ``kind`` of log (``"a MAVLink telemetry log"``) read without pymavlink, which
    the extra ``mavlink`` installs."""
    return ContactError(f"{brief(path)}: reading {kind} needs pymavlink: pip install 'fol-swarm[mavlink]'")


def _track_bytes(path: Path, what: str) -> bytes:
    """A track file's bytes (a GPX file's, a MAVLink telemetry or DataFlash log's; ``what`` names the kind, as
    the error line does), at most MAX_MISSION_BYTES: the size was checked, but the file may have grown since (a
    log still written), and no more than one byte past the limit is read."""
    try:
        with open(path, "rb") as fh:
            data = read_at_most(fh, MAX_MISSION_BYTES)
    except OSError as exc:
        raise ContactError(f"{brief(path)}: cannot read the {what} ({exc.strerror})") from None
    if len(data) > MAX_MISSION_BYTES:
        raise ContactError(f"{brief(path)}: grew past {MAX_MISSION_BYTES} bytes while it was read; a {what} may have "
                           f"at most {MAX_MISSION_BYTES}")
    return data


def _message_at(index: int, pos: int) -> str:
    """Where a message of a binary log is, as its messages name it: ``message 12 (byte 4096)``; made for a
    message that is read or refused only, not for every message the reader passes over."""
    return f"message {index} (byte {pos})"


def _tlog_points(path: Path) -> list[TrackPoint]:
    """The ``GLOBAL_POSITION_INT`` positions of a MAVLink telemetry log at the times the ground station
    logged them; each message named ``message N (byte B)``, N counting every packet of the log from 0."""
    path = check_input_file(path, ContactError, "MAVLink telemetry log", MAX_MISSION_BYTES)
    try:
        from pymavlink.dialects.v20 import common as mavlink  # MAVLink 2's parser decodes version 1 packets too
    except ImportError:
        raise _needs_pymavlink(path, "a MAVLink telemetry log") from None
    data = _track_bytes(path, "MAVLink telemetry log")
    parser = mavlink.MAVLink(None)
    points: list[TrackPoint] = []
    source: tuple[int, int, str] | None = None
    pos = index = 0
    while pos < len(data):  # "message N (byte B)" is formatted for a position message or a message refused only
        if len(data) < pos + 9:
            size = None
        else:
            magic = data[pos + 8]
            if magic == _MAVLINK1:
                size = 6 + data[pos + 9] + 2 if len(data) >= pos + 10 else None
            elif magic == _MAVLINK2:
                size = 10 + data[pos + 9] + 2 + (13 if data[pos + 10] & 1 else 0) if len(data) >= pos + 11 else None
            else:
                raise ContactError(f"{brief(path)}: {_message_at(index, pos)}: expected a MAVLink packet (0xFE or "
                                   f"0xFD) after the record's 8-byte time, got 0x{magic:02X}; not a MAVLink telemetry "
                                   "log (.tlog)")
        if size is None or pos + 8 + size > len(data):
            log.warning("%s: %s: skipping the last message, cut off by the end of the file (%d bytes)", brief(path),
                        _message_at(index, pos), len(data) - pos)
            break
        head = pos + 8  # the packet's first byte; only a position message's packet is copied out
        msgid = data[head + 5] if data[head] == _MAVLINK1 else int.from_bytes(data[head + 7:head + 10], "little")
        if msgid != _GLOBAL_POSITION_INT:
            pos += 8 + size
            index += 1
            continue
        packet = data[head:head + size]
        stamp_us = _TLOG_TIME.unpack_from(data, pos)[0]
        where = _message_at(index, pos)
        pos += 8 + size
        index += 1
        try:
            msg = parser.decode(bytearray(packet))
        except Exception as exc:  # noqa: BLE001 - pymavlink raises MAVError, struct.error and others for a bad packet
            raise ContactError(f"{brief(path)}: {where}: GLOBAL_POSITION_INT that pymavlink cannot decode "
                               f"({shown(str(exc))})") from None
        if msg.lat == 0 and msg.lon == 0:  # ArduPilot's before its first position estimate
            continue
        sender = (msg.get_srcSystem(), msg.get_srcComponent())
        if source is None:
            source = (*sender, where)
        elif sender != source[:2]:
            raise ContactError(f"{brief(path)}: {where}: GLOBAL_POSITION_INT of system {sender[0]} component "
                               f"{sender[1]}, after those of system {source[0]} component {source[1]} ({source[2]}); "
                               "one vehicle a file (split the log, e.g. mavlogdump.py --source-system N -o FILE)")
        try:
            when = _UNIX_EPOCH + _dt.timedelta(microseconds=stamp_us)
        except OverflowError:
            raise ContactError(f"{brief(path)}: {where}: time {stamp_us} microseconds since 1970 is past the year "
                               "9999") from None
        lat, lon, alt = msg.lat / 1e7, msg.lon / 1e7, msg.alt / 1000.0
        check_position(path, where, lat, lon, alt)
        points.append((when, lat, lon, alt, where))
    if not points:
        raise ContactError(f"{brief(path)}: no GLOBAL_POSITION_INT with a position among its {index} MAVLink messages; "
                           "a recorded track needs the vehicle's positions")
    return points


#: DataFlash: each message starts with these two bytes and its type; FMT messages (type 128, 89 bytes in
#: all) define the types: type, length (with the 3-byte header), name (4 chars), format (16), columns (64).
_DF_HEAD, _DF_FMT = b"\xa3\x95", 0x80
_DF_FMT_BODY = struct.Struct("<BB4s16s64s")
#: Bytes at the end of a log ArduPilot's block logging may leave unwritten (a page, 256 bytes, less its
#: header); pymavlink's DFReader passes over 528 of them. Bytes that are no message there end the log.
_DF_TAIL = 528
#: GPS columns read, with their older names (ArduPilot before 3.2 logged ``TimeMS`` and ``Week``).
_DF_GPS_COLUMNS = {"Status": ("Status",), "GMS": ("GMS", "TimeMS"), "GWk": ("GWk", "Week"),
                   "Lat": ("Lat",), "Lng": ("Lng",), "Alt": ("Alt",)}
#: The format characters of the position columns, as ArduPilot logs them: latitude and longitude 'L'
#: (int32, 1e-7 degrees), altitude 'e' (int32, centimetres above mean sea level).
_DF_POSITION_FORMATS = {"Lat": "L", "Lng": "L", "Alt": "e"}
#: The format characters of unscaled integers, for the fix status, the GPS time and the instance.
_DF_INTEGER_FORMATS = "bBhHiIqQ"
_DF_3D_FIX = 3
_GPS_EPOCH = _dt.datetime(1980, 1, 6)
_MS_PER_WEEK = 7 * 86_400_000


def _df_gps_layout(path: Path, where: str, fmt: str, columns: list[str], length: int,
                   format_to_struct: dict) -> tuple[struct.Struct, dict[str, int], list]:
    """The GPS message's unpacker, the index of each column read (and ``I``, the instance, when logged)
    and each column's multiplier, from its FMT message."""
    unknown = [c for c in fmt if c not in format_to_struct]
    if unknown:
        raise ContactError(f"{brief(path)}: {where}: FMT of GPS has the format character {shown(unknown[0])}, which "
                           "DataFlash logs do not use")
    if len(columns) != len(fmt):
        raise ContactError(f"{brief(path)}: {where}: FMT of GPS has {len(columns)} column labels for the "
                           f"{len(fmt)} characters of its format {shown(fmt)}")
    unpack = struct.Struct("<" + "".join(format_to_struct[c][0] for c in fmt))
    if unpack.size + 3 != length:
        raise ContactError(f"{brief(path)}: {where}: FMT of GPS gives a length of {length} bytes, but its format "
                           f"{shown(fmt)} takes {unpack.size + 3} with the header")
    index: dict[str, int] = {}
    for key, names in _DF_GPS_COLUMNS.items():
        found = [columns.index(n) for n in names if n in columns]
        if not found:
            raise ContactError(f"{brief(path)}: {where}: FMT of GPS has no column {' or '.join(names)} (columns "
                               f"{shown(','.join(columns))})")
        index[key] = found[0]
    for key, char in _DF_POSITION_FORMATS.items():
        if fmt[index[key]] != char:
            raise ContactError(f"{brief(path)}: {where}: FMT of GPS logs {key} with the format character "
                               f"{shown(fmt[index[key]])}; expected {char!r}, as ArduPilot logs it")
    if "I" in columns:
        index["I"] = columns.index("I")
    for key in ("Status", "GMS", "GWk", "I"):
        if key in index and fmt[index[key]] not in _DF_INTEGER_FORMATS:
            raise ContactError(f"{brief(path)}: {where}: FMT of GPS logs {columns[index[key]]} with the format "
                               f"character {shown(fmt[index[key]])}; expected an integer ({_DF_INTEGER_FORMATS})")
    return unpack, index, [format_to_struct[c][1] for c in fmt]


def _dataflash_points(path: Path) -> list[TrackPoint]:
    """The 3-D fixes of the first GPS of an ArduPilot DataFlash log at their GPS times, converted to UTC;
    each message named ``message N (byte B)``, N counting every message of the log from 0."""
    path = check_input_file(path, ContactError, "DataFlash log", MAX_MISSION_BYTES)
    try:
        from pymavlink.DFReader import FORMAT_TO_STRUCT  # the struct code and multiplier of each format character
    except ImportError:
        raise _needs_pymavlink(path, "an ArduPilot DataFlash log") from None
    data = _track_bytes(path, "DataFlash log")
    lengths = {_DF_FMT: 3 + _DF_FMT_BODY.size}
    gps_type: int | None = None
    gps: tuple[struct.Struct, dict[str, int], list] | None = None
    fixes: list[tuple[_dt.datetime, float, float, float, str]] = []  # GPS time (naive), lat, lon, alt, where
    pos = index = 0
    while pos < len(data):  # "message N (byte B)" is formatted for a FMT, a fix or a message refused only
        if not data.startswith(_DF_HEAD, pos) and data[pos:pos + 2] != _DF_HEAD[:len(data) - pos]:
            where = _message_at(index, pos)
            if index and len(data) - pos < _DF_TAIL:  # block logging's unwritten end of a page
                log.warning("%s: %s: %d bytes at the end are no DataFlash message; the log ends before them",
                            brief(path), where, len(data) - pos)
                break
            raise ContactError(f"{brief(path)}: {where}: expected a DataFlash message (0xA3 0x95), got "
                               f"{data[pos:pos + 2].hex(' ').upper()}; not an ArduPilot DataFlash log (.bin)")
        length = lengths.get(data[pos + 2]) if pos + 2 < len(data) else 3
        if length is None:
            raise ContactError(f"{brief(path)}: {_message_at(index, pos)}: message type {data[pos + 2]} has no FMT "
                               "message before it")
        if pos + length > len(data):
            log.warning("%s: %s: skipping the last message, cut off by the end of the file (%d bytes)", brief(path),
                        _message_at(index, pos), len(data) - pos)
            break
        mtype = data[pos + 2]
        if mtype == _DF_FMT:
            where, body = _message_at(index, pos), data[pos + 3:pos + length]
            ftype, flen, name, fmt, columns = (v.rstrip(b"\0").decode("ascii", "replace") if isinstance(v, bytes)
                                               else v for v in _DF_FMT_BODY.unpack(body))
            if flen < 3 or (ftype == _DF_FMT and flen != lengths[_DF_FMT]):
                raise ContactError(f"{brief(path)}: {where}: FMT of type {ftype} ({shown(name)}) gives a length of "
                                   f"{flen} bytes; expected {lengths[_DF_FMT] if ftype == _DF_FMT else 'at least 3'}")
            lengths[ftype] = flen
            if name == "GPS":
                gps_type = ftype
                gps = _df_gps_layout(path, where, fmt, columns.split(",") if columns else [], flen,
                                     FORMAT_TO_STRUCT)
            elif ftype == gps_type:
                gps_type = gps = None
        elif mtype == gps_type and gps is not None:
            unpack, col, mults = gps
            values = unpack.unpack_from(data, pos + 3)
            status = values[col["Status"]]
            if ("I" not in col or values[col["I"]] == 0) and status >= _DF_3D_FIX:
                where = _message_at(index, pos)
                week, ms = values[col["GWk"]], values[col["GMS"]]
                if not (0 <= ms < _MS_PER_WEEK and week >= 0):
                    raise ContactError(f"{brief(path)}: {where}: GPS week {week}, {ms} ms; expected a week of 0 or "
                                       f"more and 0..{_MS_PER_WEEK - 1} ms of the week")
                try:
                    when = _GPS_EPOCH + _dt.timedelta(weeks=week, milliseconds=ms)
                except OverflowError:
                    raise ContactError(f"{brief(path)}: {where}: GPS week {week} is past the year 9999") from None
                # scaled as pymavlink's DFReader does: divided by 1e7 (lat, lon) and 100 (alt)
                lat, lon, alt = (values[col[k]] / round(1 / mults[col[k]]) for k in ("Lat", "Lng", "Alt"))
                check_position(path, where, lat, lon, alt)
                fixes.append((when, lat, lon, alt, where))
        pos += length
        index += 1
    if not fixes:
        raise ContactError(f"{brief(path)}: no GPS message of the first GPS with a 3-D fix (Status 3 or more) among "
                           f"its {index} DataFlash messages; a recorded track needs the vehicle's positions")
    return _gps_to_utc(fixes)


def _gps_to_utc(fixes: list[tuple[_dt.datetime, float, float, float, str]]) -> list[TrackPoint]:
    """GPS times to UTC: minus GPS - UTC = TAI - UTC - 19 s, the leap seconds (Skyfield's table) at each.
    The count only grows, so fixes between two that share it share it too: the times in order are split
    in halves until each span's ends agree, a few dozen look-ups for a log across a leap second."""
    times = sorted({f[0] for f in fixes})
    offsets: dict[_dt.datetime, float] = {}
    # (first, last index, their offsets) of the spans left, the first span on top; a loop, not a recursive
    # closure, which held itself and so these times until a cyclic collection
    spans = [(0, len(times) - 1, utc_offset_s("GPS", times[0]), utc_offset_s("GPS", times[-1]))]
    while spans:
        lo, hi, at_lo, at_hi = spans.pop()
        if at_lo == at_hi or hi - lo <= 1:
            offsets.update((t, at_lo) for t in times[lo:hi])
            offsets[times[hi]] = at_hi
            continue
        mid = (lo + hi) // 2
        at_mid = utc_offset_s("GPS", times[mid])
        spans += [(mid, hi, at_mid, at_hi), (lo, mid, at_lo, at_mid)]
    return [(when.replace(tzinfo=_dt.timezone.utc) - _dt.timedelta(seconds=offsets[when]), lat, lon, alt, where)
            for when, lat, lon, alt, where in fixes]


def read_track(path: str | Path) -> list[TrackPoint]:
    """The points of one recorded track (``.gpx``, a ``positions.jsonl``, a ``.tlog`` or a ``.bin``) in time order,
    times increasing."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in TRACK_SUFFIXES:  # a name as typed in the scenario, not a file read: cut when long
        raise ContactError(f"{brief(path, 100, keep_end=40)}: {FILE_KINDS}")
    points = {".gpx": _gpx_points, ".jsonl": _position_log_points, ".tlog": _tlog_points,
              ".bin": _dataflash_points}[suffix](path)
    return _increasing(path, points)


def _increasing(path: Path, points: list[TrackPoint]) -> list[TrackPoint]:
    """``points``, once their times are checked to increase."""
    for prev, cur in zip(points, points[1:]):
        if not cur[0] > prev[0]:
            raise ContactError(f"{brief(path)}: {cur[4]}: time {cur[0].isoformat()} is not after the previous point's "
                               f"{prev[0].isoformat()} ({prev[4]}); a track's times must increase")
    return points


def timed_track(path: Path, name: str, points: list[TrackPoint], origin: tuple[float, float, float],
                epoch: _dt.datetime) -> Waypoints:
    """A track's points as :class:`~contact_sim.drones.Waypoints` in the East-North-Up frame about ``origin``,
    t = 0 at ``epoch`` (points before it dropped, the first where the track is then)."""
    xyz = enu_km([p[1] for p in points], [p[2] for p in points], [p[3] for p in points], origin)
    check_local(path, xyz, [p[4] for p in points], origin)
    t = np.array([(p[0] - epoch) / _dt.timedelta(seconds=1) for p in points])
    if t[-1] < 0:
        raise ContactError(f"{brief(path)}: the track ends at {points[-1][0].isoformat()}, before time.start "
                           f"({epoch.isoformat()})")
    k = int(np.searchsorted(t, 0.0))  # the first point at or after t = 0
    if k > 0:  # start where the track is at t = 0
        at0 = np.array([np.interp(0.0, t[k - 1:k + 1], xyz[k - 1:k + 1, j]) for j in range(3)])
        t, xyz = np.concatenate([[0.0], t[k:]]), np.vstack([at0, xyz[k:]])
        if t.size > 1 and t[1] == 0.0:
            t, xyz = t[1:], xyz[1:]
    return Waypoints(name, t, xyz)


def _position_log_piece(path: Path) -> float | None:
    """Where a file stands among the pieces of a drone agent's rotated position log, by the agent's
    numbering (n of ``positions.<n>.jsonl``, the oldest first; ``positions.jsonl``, the newest, last), or
    None for a file of another name."""
    if path.name == POSITION_LOG:
        return math.inf
    m = ROTATED_POSITION_LOG.fullmatch(path.name)
    return int(m[1]) if m else None


def drone_files(paths: Sequence[Path]) -> list[tuple[Path, list[Path]]]:
    """The files of ``missions`` by drone, in the order of each drone's first file: a drone agent's position
    log pieces (``positions.jsonl``, ``positions.<n>.jsonl``) of one folder are one drone, its pieces in the
    agent's order (oldest first); any other file is a drone of its own. Each entry is the path naming the
    drone (a piece's folder for several pieces, else the file) and its files."""
    groups: dict[Path, tuple[list[Path], set[Path]]] = {}  # a folder's pieces, and the paths they resolve to
    out: list[tuple[Path, list[Path]]] = []
    for p in paths:
        if _position_log_piece(p) is not None:
            folder, resolved = p.parent.resolve(), p.resolve()  # once a piece: comparing each with every
            group = groups.get(folder)  # piece before it, resolved again each time, was quadratic
            if group is not None:
                if resolved in group[1]:
                    raise ContactError(f"{brief(p, keep_end=40)}: given twice in missions")
                group[0].append(p)
                group[1].add(resolved)
                continue
            groups[folder] = ([p], {resolved})
            out.append((p, groups[folder][0]))
        else:
            out.append((p, [p]))
    for k, (p, pieces) in enumerate(out):
        if len(pieces) > 1:
            pieces.sort(key=lambda q: _position_log_piece(q) or 0.0)
            out[k] = (p.parent, pieces)
    return out


def joined_position_log(folder: Path, pieces: list[Path]) -> list[TrackPoint]:
    """The points of a drone's position log pieces (each read as :func:`read_track` reads one, with its limits)
    as one track, oldest piece first: a piece's first fix equal to the one before it (the same fix logged on
    both sides of a rotation) counts once; a piece starting at or before the end of the one before is refused.
    A piece without any fix (every line's ``position`` null, or only a line cut off while being written) is
    passed over with a warning; pieces that together hold none are refused."""
    points: list[TrackPoint] = []
    before: Path | None = None
    for piece in pieces:
        read = [(when, lat, lon, alt, f"{piece.name} {where}")
                for when, lat, lon, alt, where in _increasing(piece, _position_log_points(piece, none_ok=True))]
        if not read:
            log.warning("%s: no position fix; passed over (the other pieces of %s are read)", brief(piece),
                        brief(folder))
            continue
        if points and read[0][:4] == points[-1][:4]:
            read = read[1:]
        if points and read and not read[0][0] > points[-1][0]:
            assert before is not None
            raise ContactError(f"{brief(folder)}: {read[0][4]}: time {read[0][0].isoformat()} is not after the last "
                               f"point of {before.name} ({points[-1][0].isoformat()}, {points[-1][4]}); the pieces of "
                               "one drone's position log must follow each other in time (positions.1.jsonl, "
                               "positions.2.jsonl, ..., positions.jsonl)")
        points += read
        before = piece
    if not points:
        raise ContactError(f"{brief(folder)}: no position fix in any of {', '.join(p.name for p in pieces)} (every "
                           "line's \"position\" is null)")
    return points
