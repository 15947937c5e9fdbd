"""Drone missions as planned in QGroundControl or Mission Planner, and recorded flights, turned
into timed waypoints.

Six file kinds, told apart by their name's ending: two planned missions,

- ``.plan``: QGroundControl's JSON (``"fileType": "Plan"``; ``mission.items`` of
  ``SimpleItem`` entries, ``command``, ``frame`` and ``params`` [p1, p2, p3, p4,
  lat, lon, alt]; ``mission.plannedHomePosition`` [lat, lon, alt]; survey and
  corridor-scan ``ComplexItem`` entries are read from the waypoints QGroundControl
  computed and stored with them, ``TransectStyleComplexItem.Items``; a survey saved
  with its ``polygon`` and grid settings but no waypoints, by QGroundControl 3.2-3.3
  (item ``"version": 3``, a ``grid`` object) or by a script (an absent or empty
  ``Items``), is flown as the lawnmower described below, and a corridor scan saved with its ``polyline``
  and settings but no waypoints along QGroundControl's corridor transects, also below);
- ``.waypoints``: the text format QGroundControl and Mission Planner both write,
  first line ``QGC WPL 110``, then one item a line with 12 tab-separated fields
  (index, current, frame, command, p1..p4, lat, lon, alt, autocontinue); the
  first item is the home position;

and four recorded tracks, replayed at their own UTC times:

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
  (:func:`_joined_position_log`: in the agent's order, each read with the same limits, their
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

Geodetic positions become the drones' flat East-North-Up frame (km) about an
origin (the scenario's ``origin_lat_deg``/``origin_lon_deg``/``origin_alt_m``, else
the first file's home: a mission's home, a track's first point), through WGS-84 Earth-fixed coordinates
(:func:`orbits.ground_points_itrs`, Skyfield). Altitudes of frame 3 are above home,
of frame 0 above mean sea level, like the home altitude.

Each drone stands at home at t = 0; takeoff (22) climbs straight up from home;
waypoints (16) and loiter-for-time items (19) are flown to in straight legs,
then held for their p1 seconds; return-to-launch (20) flies back over home at
the current altitude and descends to it; land (21) descends to home's altitude
at the item's position (its current one when the item gives 0, 0). Legs take
their 3-D length over the speed: the plan's ``hoverSpeed`` (``cruiseSpeed``
for a fixed-wing plan, ``vehicleType`` 1), changed by DO_CHANGE_SPEED (178)
items' p2, else the scenario's default. After its last item a drone hovers. An item whose
autocontinue is off is flown on without a stop, as ArduPilot flies it (PX4 would hold there until told
to go on), with one warning per file.
Commands that neither move the drone nor delay it (camera, gimbal, servo,
relay and other DO_ commands, and CONDITION_GATE, 4501, which holds back a camera trigger until the
drone crosses a line) are skipped; any other command is refused, as are
frames other than 0/3 (and their _INT twins 5/6) for moving items.

A survey without waypoints (polygon and ``grid``: ``angle``, ``spacing``, ``altitude``,
``relativeAltitude``, ``turnAroundDistance``, ``entryLocation``; in the current format ``angle``,
``entryLocation``, ``flyAlternateTransects`` and ``TransectStyleComplexItem``'s
``TurnAroundDistance``, ``Refly90Degrees``, ``HoverAndCapture`` and ``CameraCalc``'s
``AdjustedFootprintSide`` (the spacing), ``DistanceToSurface`` (the altitude) and ``DistanceMode`` 1
(above home) or 2 (above mean sea level; above terrain is refused)) is flown along the transects
QGroundControl computes for it, at ``altitude`` (above home when ``relativeAltitude``, else above mean
sea level). In metres east and north of the polygon's first vertex, ``angle``, folded once into
-90..90 as QGroundControl does (180 flies as 0), is the compass bearing of lines ``spacing`` apart (a
spacing under 0.5 m counts as 100 km, QGroundControl's guard),
each as long as the larger side of the polygon's bounding box plus 2 km, the first lying half that
length left of the box's centre (facing along the bearing). Each line that crosses the polygon's
edges at two points or more gives a transect between its two farthest crossings (across the gaps of a
concave polygon); when fewer than two lines do, the line through the box's centre gives the only one.
The transects are taken leftmost first, all in the direction of the first (from its crossing with the
edge listed first); ``entryLocation`` (0..3; a version 3 ``grid`` without one is 1, a current survey
without one 0) then picks the start: 1 and 3 reverse their order, 2 and 3 fly each from its other
end. ``flyAlternateTransects`` flies every other transect, then the skipped ones back. They are flown
back and forth in turn, each stretched by ``turnAroundDistance`` at both ends. ``refly90Degrees`` adds
a second pass at the folded bearing plus 90 degrees, begun at whichever of its first transect's two
ends or its last transect's first end lies nearest the end of the first pass (the three corners
QGroundControl compares). A polygon of 3 to 10,000 vertices enclosing an area, with up to 10,000
transects a pass, is computed; ``hoverAndCapture`` (a stop at each photo) or a bad field is refused
in one line. ``splitConcavePolygons`` (QGroundControl does not split them either) and the camera
settings do not move the drone and are not read. The flat frame is QGroundControl's: the WGS-84
tangent plane at the polygon's first vertex.

A corridor scan without waypoints (``polyline``, ``CorridorWidth``, ``EntryPoint`` and
``TransectStyleComplexItem``'s ``TurnAroundDistance``, ``HoverAndCapture`` and ``CameraCalc``, read as
a survey's) is flown along the transects QGroundControl computes for it, in the WGS-84 tangent plane
at the polyline's first vertex: ceil(``CorridorWidth`` / spacing) of them (one when the width is 0; a
spacing under 0.5 m counts as 100 km, as in QGroundControl), the k-th (from 0) the polyline moved
``CorridorWidth`` / 2 - spacing / 2 - k spacing metres to its left (facing along it; a single one is
the polyline itself), so the transects are not centred when the width is not a multiple of the
spacing. Each segment is moved sideways; the ends are those of the first and last moved segments and
each inner vertex is where the moved segments on either side of it cross. ``EntryPoint`` (0..3, 0 when
absent) 1 and 3 reverse their order, 2 and 3 fly each from the polyline's last vertex. They are flown
back and forth in turn, each stretched by ``TurnAroundDistance`` along its first and last segments,
on QGroundControl's sphere (QGeoCoordinate's, radius 6371.0072 km) as it does.
QGroundControl's corridor has no second pass, so ``Refly90Degrees`` is not read. A polyline of 2 to
10,000 vertices, each segment 1 mm or longer, whose sides stay within 1,000 km (a polyline turning back
almost onto itself sends them far away), with up to 10,000 transects and 100,000 waypoints, is
computed; ``HoverAndCapture``, above terrain or a bad field is refused in one line. A corridor whose
polyline has fewer than 2 vertices and an empty list of waypoints (``Items``: [], as QGroundControl saves
it) is flown as nothing, as QGroundControl uploads it; without ``Items`` it is refused.
"""

from __future__ import annotations

import datetime as _dt
import logging
import math
import re
import struct
from pathlib import Path
from typing import Any, Iterator, Sequence
from xml.parsers import expat

import numpy as np

from orbits import OrbitError, geodetic_from_itrs, ground_points_itrs, parse_utc, utc_offset_s
from swarmbase.safejson import loads as bounded_loads
from swarmbase.tomlcheck import check_input_file, read_text_file, shown
from swarmbase.xmlguard import refuse_doctype

from .drones import MAX_LOCAL_KM, Waypoints
from .dtn import header_name_ok
from .errors import ContactError

log = logging.getLogger(__name__)

#: Larger mission and track files are refused unread (bytes).
MAX_MISSION_BYTES = 16 * 1024 * 1024
#: A .plan's JSON limits: a corridor's stored waypoint is 8 levels deep (plan, mission, items, the complex
#: item, its transect settings, their Items, the item, its params); even the shortest items (type, command,
#: frame and 7 params) take over 6 bytes a value, so a plan within the size limit holds fewer than 3,000,000.
MAX_PLAN_JSON_DEPTH, MAX_PLAN_JSON_VALUES = 32, 4_000_000
#: A positions.jsonl line's limits (the agent writes ``{event, peer, model_id, t, position: {...}}``).
MAX_LOG_LINE_DEPTH, MAX_LOG_LINE_VALUES = 8, 1_000
#: The names of a drone agent's position log and of its full pieces, ``positions.<n>.jsonl`` (n from 1, the
#: oldest first; ``fol.agent.position.LOG_FILE`` and ``ROTATED_LOG``, written twice as ``fol.agent`` does not
#: import ``contact_sim``; a test keeps them equal): pieces of one folder given together are one drone's track.
POSITION_LOG, ROTATED_POSITION_LOG = "positions.jsonl", re.compile(r"positions\.([1-9][0-9]*)\.jsonl")
#: Flight speeds a mission may set (m/s).
MIN_SPEED_M_S, MAX_SPEED_M_S = 0.01, 1000.0
#: Longest hold at a waypoint (s): 30 days.
MAX_HOLD_S = 30 * 86400.0
#: A survey's (polygon and grid settings, no stored waypoints) most transects per pass and polygon vertices, and
#: longest turnaround (m).
MAX_SURVEY_TRANSECTS = 10_000
MAX_SURVEY_VERTICES = 10_000
MAX_TURNAROUND_M = 10_000.0
#: A corridor scan's (polyline and settings, no stored waypoints) most waypoints: transects x (vertices + 2).
MAX_CORRIDOR_WAYPOINTS = 100_000
#: QGroundControl's Earth radius (m), QGeoCoordinate's sphere, on which it stretches a corridor's transects.
QT_EARTH_RADIUS_M = 6_371_007.2
_ANGLE = "degrees (the transects' compass bearing)"
#: Name endings of planned missions and of recorded tracks.
MISSION_SUFFIXES, TRACK_SUFFIXES = (".plan", ".waypoints"), (".gpx", ".jsonl", ".tlog", ".bin")
#: The namespaces of GPX 1.1 and 1.0 (and none, as some converters write).
GPX_NAMESPACES = ("http://www.topografix.com/GPX/1/1", "http://www.topografix.com/GPX/1/0", "")
_KINDS = ("expected a QGroundControl .plan, a QGC WPL 110 .waypoints, a GPX track (.gpx), a drone agent's "
          "positions.jsonl, a MAVLink telemetry log (.tlog) or an ArduPilot DataFlash log (.bin)")

NAV_WAYPOINT, NAV_LOITER_TIME, NAV_RETURN_TO_LAUNCH, NAV_LAND, NAV_TAKEOFF = 16, 19, 20, 21, 22
DO_JUMP, DO_CHANGE_SPEED, DO_SET_HOME = 177, 178, 179
#: Commands that move the drone, with the names messages give them.
MOVING = {NAV_WAYPOINT: "waypoint", NAV_LOITER_TIME: "loiter-time", NAV_RETURN_TO_LAUNCH: "return-to-launch",
          NAV_LAND: "land", NAV_TAKEOFF: "takeoff"}
#: Frames of moving items: absolute (0, 5) and relative to home (3, 6) altitude.
FRAMES = {0: False, 5: False, 3: True, 6: True}
#: Commands of 176..252 that move the drone, stop, pause or redirect its flight, or change where the
#: mission goes on (MAV_CMD enum): refused, not skipped. DO_SET_MODE (176) may switch to a return or
#: land mode, 185 terminates the flight, 186 changes altitude, 190 / 191 land or abort a landing,
#: 192 repositions, 193 pauses, 213 sets a yaw and speed, 221 / 222 hand over or limit guided
#: flight, 224 sets the current item, 246 reboots or shuts down, 252 pauses or goes to a position.
_NOT_SKIPPED = frozenset({176, DO_JUMP, DO_CHANGE_SPEED, DO_SET_HOME, 185, 186, 190, 191, 192, 193, 213, 221,
                          222, 224, 246, 252})
_SUPPORTED = ("supported: 16 waypoint, 19 loiter-time, 20 return-to-launch, 21 land, 22 takeoff, "
              "178 change-speed, and commands 176..252 that do not move, stop or redirect the drone "
              "(camera, gimbal, servo ...), camera commands 530..532, 2000..2001, 2500..2501, "
              "4501 condition-gate")
#: MAV_CMD_CONDITION_GATE: holds back the commands after it (a camera trigger) until the drone crosses a
#: line; QGroundControl 4.x stores one before each camera-triggering transect. The flight goes on.
CONDITION_GATE = 4501


def _skipped(command: int) -> bool:
    """Commands that neither move the drone nor change its timing."""
    return ((176 <= command <= 252 and command not in _NOT_SKIPPED) or command == CONDITION_GATE
            or 530 <= command <= 532 or 2000 <= command <= 2001 or 2500 <= command <= 2501)


def enu_km(lat_deg: Sequence[float], lon_deg: Sequence[float], alt_m: Sequence[float],
           origin: tuple[float, float, float]) -> np.ndarray:
    """East-North-Up km of WGS-84 points about ``origin`` (lat deg, lon deg, alt m), shape ``(n, 3)``.

    Example:
        >>> enu_km([0.0], [90.0], [0.0], (0.0, 0.0, 0.0)).round(3).tolist()
        [[6378.137, 0.0, -6378.137]]
    """
    x0, rot = _enu_frame(origin)
    return (ground_points_itrs(lat_deg, lon_deg, alt_m) - x0) @ rot.T


def _enu_frame(origin: tuple[float, float, float]) -> tuple[np.ndarray, np.ndarray]:
    """Earth-fixed km of ``origin`` and the rotation from Earth-fixed to its East-North-Up axes."""
    x0 = ground_points_itrs([origin[0]], [origin[1]], [origin[2]])[0]
    lat, lon = math.radians(origin[0]), math.radians(origin[1])
    sl, cl, sp, cp = math.sin(lon), math.cos(lon), math.sin(lat), math.cos(lat)
    return x0, np.array([[-sl, cl, 0.0], [-sp * cl, -sp * sl, cp], [cp * cl, cp * sl, sp]])


def _lat_lon_of_enu(enu_km: np.ndarray, origin: tuple[float, float, float]) -> tuple[np.ndarray, np.ndarray]:
    """Latitudes and longitudes (deg) of East-North-Up km about ``origin``: :func:`enu_km` reversed."""
    x0, rot = _enu_frame(origin)
    lat, lon, _ = geodetic_from_itrs(x0 + np.asarray(enu_km) @ rot)
    return lat, lon


class _Item:
    """One mission item as both formats carry it; ``where`` names it in messages."""

    __slots__ = ("where", "command", "frame", "params", "stops")

    def __init__(self, where: str, command: int, frame: int, params: list[float], stops: bool = False) -> None:
        self.where, self.command, self.frame, self.params = where, command, frame, params
        self.stops = stops  # autocontinue off: PX4 holds here until told to go on, ArduPilot flies on


def _number(v: Any) -> float:
    """A JSON number; ``null`` (how QGroundControl writes NaN) is NaN."""
    if v is None:
        return math.nan
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError
    try:
        return float(v)
    except OverflowError:  # an integer of hundreds of digits
        raise ValueError from None


def _plan_items(path: Path, items: Any, where: str, nested: bool = False) -> Iterator[_Item]:
    if not isinstance(items, list):
        raise ContactError(f"{path}: {where}: expected a list of mission items")
    for i, obj in enumerate(items):
        here = f"{where}[{i}]"
        if not isinstance(obj, dict):
            raise ContactError(f"{path}: {here}: expected a mission item (JSON object)")
        kind = obj.get("type")
        if kind == "ComplexItem" and not nested:
            inner = obj.get("TransectStyleComplexItem")
            stored = inner.get("Items") if isinstance(inner, dict) else None
            polygon, polyline = obj.get("polygon"), obj.get("polyline")
            survey = (obj.get("complexItemType") == "survey" and polygon is not None
                      and ("grid" in obj or isinstance(inner, dict)))
            corridor = obj.get("complexItemType") == "CorridorScan" and polyline is not None and isinstance(inner, dict)
            unfilled = ((survey and isinstance(polygon, list) and len(polygon) < 3)
                        or (corridor and isinstance(polyline, list) and len(polyline) < 2))
            if isinstance(stored, list) and (stored or not (survey or corridor) or unfilled):
                # the waypoints QGroundControl computed (none for a polygon or polyline it could not fill)
                yield from _plan_items(path, stored, f"{here}.Items", nested=True)
            elif survey:
                yield from _survey_items(path, obj, here)
            elif corridor:
                yield from _corridor_items(path, obj, here)
            else:
                raise ContactError(
                    f"{path}: {here}: complex item {shown(obj.get('complexItemType'))} holds no computed waypoints "
                    "(TransectStyleComplexItem.Items) and is not a survey with a 'polygon' and grid settings or a "
                    "corridor scan with a 'polyline' and its settings, whose transects can be computed")
            continue
        if kind != "SimpleItem":
            allowed = "'SimpleItem'" if nested else "'SimpleItem' or 'ComplexItem'"
            raise ContactError(f"{path}: {here}: expected type {allowed}, got {shown(kind)}")
        command, frame, params = obj.get("command"), obj.get("frame"), obj.get("params")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (command, frame)):
            raise ContactError(f"{path}: {here}: expected integer 'command' and 'frame'")
        try:
            if not isinstance(params, list) or len(params) != 7:
                raise ValueError
            values = [_number(v) for v in params]
        except ValueError:
            raise ContactError(f"{path}: {here}: expected 'params' as 7 numbers (or null)") from None
        yield _Item(here, command, frame, values, stops=obj.get("autoContinue") is False)


def _setting(path: Path, where: str, table: Any, key: str, what: str, low: float, high: float,
             above: bool = False) -> float:
    """``table[key]``, a number in ``low..high`` (``low`` excluded when ``above``); ``where`` names the table."""
    try:
        value = _number(table.get(key) if isinstance(table, dict) else None)
    except ValueError:
        value = math.nan
    if not (low < value <= high if above else low <= value <= high):
        got = shown(table[key]) if isinstance(table, dict) and key in table else "nothing"
        raise ContactError(f"{path}: {where}.{key}: expected a number of {what}, got {got}")
    return value


def _flag(path: Path, where: str, table: dict, key: str, default: bool | None = None) -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise ContactError(f"{path}: {where}.{key}: expected true or false, got {shown(value)}")
    return value


def _qgc_spacing(spacing_m: float) -> float:
    """QGroundControl's guard against too many transects, in its surveys and corridor scans alike: a
    spacing under 0.5 m is taken as 100 km, which flies one transect."""
    return spacing_m if spacing_m >= 0.5 else 100_000.0


def _survey_items(path: Path, obj: dict, where: str) -> Iterator[_Item]:
    """The waypoints of a survey saved with its polygon and grid settings but no computed waypoints: the
    lawnmower of the module docstring, from QGroundControl 3.2-3.3's ``grid`` object (item ``"version": 3``)
    or from the current format's ``angle`` and ``TransectStyleComplexItem`` (its ``CameraCalc``)."""
    alternate = False
    if "grid" in obj:
        grid, at = obj["grid"], f"{where}.grid"
        if not isinstance(grid, dict):
            raise ContactError(f"{path}: {at}: expected an object (angle, spacing, altitude, relativeAltitude, "
                               "turnAroundDistance)")
        angle = _setting(path, at, grid, "angle", _ANGLE, -360.0, 360.0)
        spacing_at = f"{at}.spacing"
        spacing = _setting(path, at, grid, "spacing", "metres above 0", 0.0, MAX_LOCAL_KM * 1000.0, above=True)
        turn = _setting(path, at, grid, "turnAroundDistance", f"metres 0..{MAX_TURNAROUND_M:g}", 0.0,
                        MAX_TURNAROUND_M)
        alt = _setting(path, at, grid, "altitude", "metres", -math.inf, math.inf)
        relative = _flag(path, at, grid, "relativeAltitude")
        hover = _flag(path, where, obj, "hoverAndCapture", False)
        refly = _flag(path, where, obj, "refly90Degrees", False)
        entry_at, entry = at, grid.get("entryLocation", 1)  # QGroundControl reads a missing one as 1
    else:
        at = f"{where}.TransectStyleComplexItem"
        angle = _setting(path, where, obj, "angle", _ANGLE, -360.0, 360.0)
        spacing_at = f"{at}.CameraCalc.AdjustedFootprintSide"
        spacing = _setting(path, f"{at}.CameraCalc", obj["TransectStyleComplexItem"].get("CameraCalc"),
                           "AdjustedFootprintSide", "metres above 0", 0.0, MAX_LOCAL_KM * 1000.0, above=True)
        alt, relative, turn, hover = _transect_settings(path, obj, where, "survey")
        refly = _flag(path, at, obj["TransectStyleComplexItem"], "Refly90Degrees", False)
        alternate = _flag(path, where, obj, "flyAlternateTransects", False)
        entry_at, entry = where, obj.get("entryLocation", 0)  # a new survey's in QGroundControl
    if entry not in (0, 1, 2, 3) or isinstance(entry, bool):
        raise ContactError(f"{path}: {entry_at}.entryLocation: expected 0, 1, 2 or 3 (the corner the survey starts "
                           f"at), got {shown(entry)}")
    if hover:
        raise ContactError(f"{path}: {where}: hoverAndCapture: a survey that stops at each photo has no timing "
                           "without its computed waypoints; open and save the plan in QGroundControl to store them")
    tangent, pts = _plane_vertices(path, f"{where}.polygon", obj["polygon"], 3)
    edges = np.roll(pts, -1, axis=0) - pts
    spread = np.linalg.svd(pts - pts.mean(axis=0), compute_uv=False)  # across the widest line through them
    if spread[1] <= 1e-9 * spread[0]:  # (not the signed area: a self-crossing polygon's lobes may cancel)
        raise ContactError(f"{path}: {where}.polygon: encloses no area (its vertices lie on one line)")
    flown: list[np.ndarray] = []  # the ends of every transect, in flight order, metres east / north
    try:  # every pass's lines counted before any is computed
        for pass_angle in _survey_angles(angle, refly):
            _pass_lines(pts, pass_angle, _qgc_spacing(spacing))
    except _TooManyTransects as many:
        raise ContactError(f"{path}: {spacing_at}: {spacing:g} m gives {many.args[0]} transects over the "
                           f"polygon (at most {MAX_SURVEY_TRANSECTS})") from None
    for pass_angle in _survey_angles(angle, refly):
        transects = _survey_pass(pts, edges, pass_angle, _qgc_spacing(spacing))
        if not transects:
            continue
        if entry in (2, 3):  # QGroundControl's entry corners: 2 and 3 start at the other end of the transects,
            transects = [t[::-1] for t in transects]
        if entry in (1, 3):  # 1 and 3 with the last transect
            transects = transects[::-1]
        if flown:  # the second pass starts at the corner nearest the end of the first
            last = flown[-1][-1]
            distances = [np.hypot(*(transects[i][j] - last)) for i, j in ((0, 0), (0, -1), (-1, 0))]
            nearest = int(np.argmin(distances))  # (QGroundControl compares three of the four corners)
            if nearest > 1:
                transects = transects[::-1]
            if nearest & 1:
                transects = [t[::-1] for t in transects]
        if alternate:  # every other transect, then back along the ones skipped
            transects = transects[0::2] + transects[1::2][::-1]
        for k, ends in enumerate(transects):
            ends = ends if k % 2 == 0 else ends[::-1]
            unit = (ends[1] - ends[0]) / np.hypot(*(ends[1] - ends[0]))
            flown.append(np.array([ends[0] - turn * unit, ends[1] + turn * unit]))
    yield from _transect_waypoints(flown, tangent, alt, relative, where)


def _transect_settings(path: Path, obj: dict, where: str, kind: str) -> tuple[float, bool, float, bool]:
    """The altitude (m), whether above home, the turnaround (m) and ``HoverAndCapture`` of a current-format
    survey's or corridor scan's ``TransectStyleComplexItem`` (and its ``CameraCalc``); ``kind`` names it."""
    inner, at = obj["TransectStyleComplexItem"], f"{where}.TransectStyleComplexItem"
    calc = inner.get("CameraCalc")
    alt = _setting(path, f"{at}.CameraCalc", calc, "DistanceToSurface", "metres", -math.inf, math.inf)
    turn = _setting(path, at, inner, "TurnAroundDistance", f"metres 0..{MAX_TURNAROUND_M:g}", 0.0, MAX_TURNAROUND_M)
    if "DistanceToSurfaceRelative" in calc:  # CameraCalc version 1
        relative = _flag(path, f"{at}.CameraCalc", calc, "DistanceToSurfaceRelative")
    elif calc.get("DistanceMode") in (1, 2) and not isinstance(calc.get("DistanceMode"), bool):
        relative = calc["DistanceMode"] == 1
    else:
        raise ContactError(f"{path}: {at}.CameraCalc.DistanceMode: expected 1 (altitude above home) or 2 (above "
                           f"mean sea level), got {shown(calc.get('DistanceMode'))}; a {kind} above terrain "
                           "needs the waypoints QGroundControl stores (open and save the plan in it)")
    return alt, relative, turn, _flag(path, at, inner, "HoverAndCapture", False)


def _plane_vertices(path: Path, where: str, vertices: Any,
                    fewest: int) -> tuple[tuple[float, float, float], np.ndarray]:
    """A polygon's or polyline's ``[lat, lon]`` vertices (``fewest`` to :data:`MAX_SURVEY_VERTICES`) in
    QGroundControl's flat frame, metres east and north in the WGS-84 tangent plane at the first vertex, and
    that tangent point (lat, lon deg, 0 m)."""
    if not isinstance(vertices, list) or not fewest <= len(vertices) <= MAX_SURVEY_VERTICES:
        raise ContactError(f"{path}: {where}: expected {fewest} or more [lat, lon] vertices (at most "
                           f"{MAX_SURVEY_VERTICES})")
    geo = []
    for k, vertex in enumerate(vertices):
        try:
            if not isinstance(vertex, list) or len(vertex) < 2:
                raise ValueError
            lat, lon = _number(vertex[0]), _number(vertex[1])
        except ValueError:
            lat = lon = math.nan
        if math.isnan(lat) or math.isnan(lon):
            raise ContactError(f"{path}: {where}[{k}]: expected [lat, lon] in degrees, got {shown(vertex)}")
        _check_position(path, f"{where}[{k}]", lat, lon, 0.0)
        geo.append((lat, lon))
    tangent = (geo[0][0], geo[0][1], 0.0)
    lat_v, lon_v = np.array(geo).T
    return tangent, enu_km(lat_v, lon_v, np.zeros(len(geo)), tangent)[:, :2] * 1000.0


def _transect_waypoints(flown: list[np.ndarray], tangent: tuple[float, float, float], alt: float, relative: bool,
                        where: str) -> Iterator[_Item]:
    """Waypoints at ``alt`` through the points of each transect in ``flown`` (metres east / north of ``tangent``)."""
    if not flown:
        return
    plane = np.concatenate(flown) / 1000.0
    lat, lon = _lat_lon_of_enu(np.column_stack([plane, np.zeros(len(plane))]), tangent)
    yield from _geo_waypoints(np.split(np.column_stack([lat, lon]), np.cumsum([len(t) for t in flown])[:-1]), alt,
                              relative, where)


def _geo_waypoints(flown: list[np.ndarray], alt: float, relative: bool, where: str) -> Iterator[_Item]:
    """Waypoints at ``alt`` through the [lat, lon] points (deg) of each transect in ``flown``."""
    frame = 3 if relative else 0
    for k, transect in enumerate(flown, start=1):
        for lat, lon in transect:
            yield _Item(f"{where} (transect {k})", NAV_WAYPOINT, frame, [0.0, 0.0, 0.0, math.nan, float(lat),
                                                                         float(lon), alt])


class _TooManyTransects(Exception):
    """More than :data:`MAX_SURVEY_TRANSECTS` lines would cross a survey's polygon (their count)."""


def _survey_angles(angle: float, refly: bool) -> tuple[float, ...]:
    """The bearings of a survey's passes: QGroundControl folds ``angle`` once into -90..90 (an angle
    over 270 or under -270 stays over 90 or under -90) and reflies at that plus 90."""
    angle = angle - 180.0 if angle > 90.0 else angle + 180.0 if angle < -90.0 else angle
    return (angle, angle + 90.0) if refly else (angle,)


def _pass_lines(pts: np.ndarray, bearing: float, spacing: float) -> tuple:
    """A survey pass's frame over the polygon ``pts`` (metres east / north): the unit vectors ``along`` the
    bearing and ``across`` it (to the right), the bounding box's centre, half a line's length, each vertex's
    offset right of the centre and run ahead of it, and the first and last of the lines that can cross the
    polygon (:class:`_TooManyTransects` when they are too many)."""
    a = math.radians(bearing)
    along, across = np.array([math.sin(a), math.cos(a)]), np.array([math.cos(a), -math.sin(a)])
    low, high = pts.min(axis=0), pts.max(axis=0)
    centre, half = (low + high) / 2.0, (float((high - low).max()) + 2000.0) / 2.0
    rel = pts - centre
    off, run = rel @ across, rel @ along  # each vertex's distance right of the centre, and ahead of it
    # line k lies -half + k * spacing right of the centre (k = 0, 1, ... while that is below half):
    # only the lines between the polygon's leftmost and rightmost vertices can cross it
    k_low = max(0, math.ceil((float(off.min()) + half) / spacing))
    k_high = min(math.floor((float(off.max()) + half) / spacing), math.ceil(2.0 * half / spacing) - 1)
    if k_high - k_low + 1 > MAX_SURVEY_TRANSECTS:
        raise _TooManyTransects(k_high - k_low + 1)
    return along, across, centre, half, off, run, k_low, k_high


def _survey_pass(pts: np.ndarray, edges: np.ndarray, bearing: float, spacing: float) -> list[np.ndarray]:
    """One pass of QGroundControl's transects over the polygon ``pts`` (metres east / north), each its two
    ends (2, 2), leftmost first (facing along ``bearing``), all in the direction of the first.

    As QGroundControl computes them: lines ``spacing`` apart at the bearing, 2 km longer than the polygon's
    bounding box is wide or high, the first at half that length left of the box's centre; each line's
    transect joins the two farthest of its crossings with the polygon's edges, from the one on the edge
    listed first; with fewer than two such transects, the one line through the box's centre."""
    along, across, centre, half, off, run, k_low, k_high = _pass_lines(pts, bearing, spacing)
    run_edge = edges @ along
    off_next = np.roll(off, -1)  # each edge's ends' offsets, and the least and greatest of them
    lo, hi = np.minimum(off, off_next), np.maximum(off, off_next)

    def transect(offset: float, near: np.ndarray) -> np.ndarray | None:
        at = near[(lo[near] <= offset) & (hi[near] >= offset)]  # the edges (of those near) the line meets
        d, d_next = off[at] - offset, off_next[at] - offset
        cross = d != d_next  # (an edge lying on the line is not crossed)
        t = run[at[cross]] + d[cross] / (d[cross] - d_next[cross]) * run_edge[at[cross]]
        t = t[np.abs(t) <= half]  # beyond the line's ends
        if t.size < 2 or t.max() - t.min() <= 1e-9 * half:
            return None
        tol = 1e-9 * half  # one crossing found on the two edges that meet on the line
        ends = (t.min(), t.max())
        if np.flatnonzero(t <= ends[0] + tol)[0] > np.flatnonzero(t >= ends[1] - tol)[0]:
            ends = ends[::-1]
        return np.array([centre + offset * across + e * along for e in ends])

    found = []
    for first in range(k_low, k_high + 1, 256):  # lines a block at a time, among the edges near the block
        block = range(first, min(first + 256, k_high + 1))
        near = np.flatnonzero((lo <= -half + block[-1] * spacing) & (hi >= -half + block[0] * spacing))
        found += [t for k in block if (t := transect(-half + k * spacing, near)) is not None]
    if len(found) < 2:
        one = transect(0.0, np.arange(len(off)))
        found = [] if one is None else [one]
    forward = found and np.dot(found[0][1] - found[0][0], along) > 0
    return [t if (np.dot(t[1] - t[0], along) > 0) == forward else t[::-1] for t in found]


def _corridor_items(path: Path, obj: dict, where: str) -> Iterator[_Item]:
    """The waypoints of a corridor scan saved with its ``polyline``, ``CorridorWidth``, ``EntryPoint`` and
    ``TransectStyleComplexItem`` settings but no computed waypoints, as QGroundControl computes them (its
    CorridorScanComplexItem): the polyline offset sideways once per transect, in its flat frame."""
    at = f"{where}.TransectStyleComplexItem"
    side = _setting(path, f"{at}.CameraCalc", obj["TransectStyleComplexItem"].get("CameraCalc"),
                    "AdjustedFootprintSide", f"metres 0..{MAX_LOCAL_KM * 1000:g}", 0.0, MAX_LOCAL_KM * 1000.0)
    alt, relative, turn, hover = _transect_settings(path, obj, where, "corridor scan")
    width = _setting(path, where, obj, "CorridorWidth", f"metres 0..{MAX_LOCAL_KM * 1000:g}", 0.0,
                     MAX_LOCAL_KM * 1000.0)
    entry = obj.get("EntryPoint", 0)  # a new corridor's in QGroundControl
    if entry not in (0, 1, 2, 3) or isinstance(entry, bool):
        raise ContactError(f"{path}: {where}.EntryPoint: expected 0, 1, 2 or 3 (the corner the corridor scan "
                           f"starts at), got {shown(entry)}")
    if hover:
        raise ContactError(f"{path}: {where}: HoverAndCapture: a corridor scan that stops at each photo has no "
                           "timing without its computed waypoints; open and save the plan in QGroundControl to "
                           "store them")
    spacing = _qgc_spacing(side)
    count = max(1, math.ceil(width / spacing))  # one when the width is 0 (or so small its ratio underflows)
    if count > MAX_SURVEY_TRANSECTS:
        raise ContactError(f"{path}: {at}.CameraCalc.AdjustedFootprintSide: {side:g} m gives {count} transects "
                           f"over a {width:g} m wide corridor (at most {MAX_SURVEY_TRANSECTS})")
    tangent, pts = _plane_vertices(path, f"{where}.polyline", obj["polyline"], 2)
    if count * (len(pts) + 2) > MAX_CORRIDOR_WAYPOINTS:
        raise ContactError(f"{path}: {where}.polyline: {len(pts)} vertices over {count} transects give more than "
                           f"{MAX_CORRIDOR_WAYPOINTS} waypoints")
    base, slide = _corridor_offsets(path, f"{where}.polyline", pts)
    half = width / 2.0
    offsets = [0.0] if count == 1 else [half - spacing / 2.0 - i * spacing for i in range(count)]  # leftmost first
    lines = base[None] + np.array(offsets)[:, None, None] * slide[None]
    far = np.flatnonzero(~(np.abs(lines).max(axis=(0, 2)) <= MAX_LOCAL_KM * 1000.0))
    if far.size:
        raise ContactError(f"{path}: {where}.polyline[{far[0]}]: the corridor's side at this vertex lies more than "
                           f"{MAX_LOCAL_KM:g} km away (the polyline turns back almost onto itself)")
    plane = lines.reshape(-1, 2) / 1000.0
    lat, lon = _lat_lon_of_enu(np.column_stack([plane, np.zeros(len(plane))]), tangent)
    transects = []
    for line in np.column_stack([lat, lon]).reshape(count, len(pts), 2):
        if turn > 0.0:  # QGroundControl stretches them on its sphere, along the first and last segments
            line = np.vstack([_qt_beyond(line[0], line[1], turn), line, _qt_beyond(line[-1], line[-2], turn)])
        transects.append(line)
    if entry in (1, 3):  # QGroundControl's entry points: 1 and 3 start with the other side's transect,
        transects = transects[::-1]
    if entry in (2, 3):  # 2 and 3 at the polyline's other end
        transects = [t[::-1] for t in transects]
    flown = [t if k % 2 == 0 else t[::-1] for k, t in enumerate(transects)]  # back and forth in turn
    yield from _geo_waypoints(flown, alt, relative, where)


def _qt_beyond(point: np.ndarray, toward: np.ndarray, distance_m: float) -> np.ndarray:
    """[lat, lon] (deg) ``distance_m`` from ``point`` away from ``toward``: QGroundControl's corridor turnaround,
    QGeoCoordinate's ``atDistanceAndAzimuth(-distance, azimuthTo(toward))`` on its sphere (due south when the
    two points are one)."""
    lat1, lon1, lat2, lon2 = (math.radians(float(v)) for v in (*point, *toward))
    azimuth = math.atan2(math.sin(lon2 - lon1) * math.cos(lat2),
                         math.cos(lat1) * math.sin(lat2) - math.sin(lat1) * math.cos(lat2) * math.cos(lon2 - lon1))
    ratio = -distance_m / QT_EARTH_RADIUS_M
    sin_lat = math.sin(lat1) * math.cos(ratio) + math.cos(lat1) * math.sin(ratio) * math.cos(azimuth)
    lat = math.asin(min(1.0, max(-1.0, sin_lat)))  # a rounding past 1 at a pole
    lon = lon1 + math.atan2(math.sin(azimuth) * math.sin(ratio) * math.cos(lat1),
                            math.cos(ratio) - math.sin(lat1) * math.sin(lat))
    lon_deg = math.degrees(lon)
    return np.array([math.degrees(lat), lon_deg - 360.0 if lon_deg > 180.0 else lon_deg + 360.0 if lon_deg < -180.0
                     else lon_deg])


def _corridor_offsets(path: Path, where: str, pts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For the polyline ``pts`` (metres east / north), ``base`` and ``slide`` (both ``(n, 2)``) such that
    ``base + d * slide`` is QGroundControl's polyline offset ``d`` metres to the left (facing along it).

    As QGroundControl's QGCMapPolyline.offsetPolyline: each segment moved ``d`` to its left; the ends are the
    first and last moved segments' ends; each inner vertex is where the moved segments on either side of it
    cross (a linear function of ``d``). When they do not cross (the polyline runs straight on, or turns right
    back) it is the moved vertex of a straight run, or QGroundControl's choice for a reversal: the end of the
    moved segment after the vertex."""
    seg = np.diff(pts, axis=0)
    length = np.hypot(seg[:, 0], seg[:, 1])
    short = np.flatnonzero(~(length > 1e-3))
    if short.size:
        raise ContactError(f"{path}: {where}[{short[0] + 1}]: lies within 1 mm of the vertex before it (each of a "
                           "corridor's segments needs a length and a direction)")
    unit = seg / length[:, None]
    left = np.column_stack([-unit[:, 1], unit[:, 0]])
    base, slide = pts.copy(), np.empty_like(pts)
    slide[0], slide[-1] = left[0], left[-1]
    for k in range(1, len(pts) - 1):
        u, v = unit[k - 1], unit[k]
        cos, sin = float(u @ v), float(u[0] * v[1] - u[1] * v[0])
        if abs(sin) > 1e-9:  # 1 + cos, without rounding to 0 when the polyline turns almost right back
            slide[k] = (left[k - 1] + left[k]) / (1.0 + cos if cos >= 0.0 else sin * sin / (1.0 - cos))
        elif cos > 0.0:
            slide[k] = left[k]
        else:
            base[k], slide[k] = pts[k + 1], left[k]
    return base, slide


def _read_plan(path: Path, text: str) -> tuple[tuple[float, float, float], float | None, list[_Item]]:
    try:
        doc = bounded_loads(text, max_depth=MAX_PLAN_JSON_DEPTH, max_items=MAX_PLAN_JSON_VALUES, allow_nan=True)
    except ValueError as exc:
        raise ContactError(f"{path}: not a QGroundControl plan (invalid JSON: {exc})") from None
    if not isinstance(doc, dict) or doc.get("fileType") != "Plan" or not isinstance(doc.get("mission"), dict):
        raise ContactError(f"{path}: not a QGroundControl plan (expected a JSON object with \"fileType\": "
                           "\"Plan\" and a \"mission\" object)")
    mission = doc["mission"]
    home = mission.get("plannedHomePosition")
    try:
        if not isinstance(home, list) or len(home) != 3:
            raise ValueError
        lat, lon, alt = (_number(v) for v in home)
    except ValueError:
        raise ContactError(f"{path}: mission.plannedHomePosition: expected [lat, lon, alt]") from None
    key = "cruiseSpeed" if mission.get("vehicleType") == 1 else "hoverSpeed"
    speed = None
    if key in mission:
        try:
            speed = _number(mission[key])
        except ValueError:
            speed = math.nan
        _check_speed(path, f"mission.{key}", speed)
    return (lat, lon, alt), speed, list(_plan_items(path, mission.get("items"), "mission.items"))


def _read_wpl(path: Path, text: str) -> tuple[tuple[float, float, float], None, list[_Item]]:
    lines = text.splitlines()
    first = next((n for n, line in enumerate(lines) if line.strip()), None)
    if first is None or lines[first].strip() != "QGC WPL 110":
        got = lines[first].strip()[:40] if first is not None else "an empty file"
        raise ContactError(f"{path}: expected a first line 'QGC WPL 110' (a Mission Planner / QGroundControl "
                           f"waypoint file), got {got!r}")
    home = None
    items: list[_Item] = []
    for n in range(first + 1, len(lines)):
        line = lines[n].strip()
        if not line or line.startswith("#"):
            continue
        where = f"line {n + 1}"
        fields = line.split()
        if len(fields) != 12:
            raise ContactError(f"{path}:{n + 1}: expected 12 tab-separated fields (index, current, frame, command, "
                               f"p1..p4, lat, lon, alt, autocontinue), got {len(fields)}")
        try:
            frame, command = int(fields[2]), int(fields[3])
        except ValueError:
            raise ContactError(f"{path}:{n + 1}: frame and command must be integers") from None
        try:
            params = [float(v) for v in fields[4:11]]
        except ValueError:
            raise ContactError(f"{path}:{n + 1}: p1..p4, lat, lon, alt must be numbers") from None
        if home is None:  # the first item is the home position
            home = (params[4], params[5], params[6])
            continue
        items.append(_Item(where, command, frame, params, stops=fields[11] in ("0", "0.0")))
    if home is None:
        raise ContactError(f"{path}: no items (expected the home position on the line after 'QGC WPL 110')")
    return home, None, items


def _check_speed(path: Path, where: str, speed: float) -> None:
    if not MIN_SPEED_M_S <= speed <= MAX_SPEED_M_S:
        raise ContactError(f"{path}: {where}: expected a speed of {MIN_SPEED_M_S:g}..{MAX_SPEED_M_S:g} m/s, "
                           f"got {speed}")


def _check_position(path: Path, where: str, lat: float, lon: float, alt: float) -> None:
    if not (-90.0 <= lat <= 90.0 and -180.0 <= lon <= 360.0):
        raise ContactError(f"{path}: {where}: expected latitude -90..90 and longitude -180..360 deg, "
                           f"got {lat}, {lon}")
    if not abs(alt) <= MAX_LOCAL_KM * 1000.0:
        raise ContactError(f"{path}: {where}: expected an altitude within {MAX_LOCAL_KM * 1000:g} m, got {alt}")


def read_mission(path: str | Path, default_speed_m_s: float) -> tuple[tuple[float, float, float], list[tuple]]:
    """Home (lat, lon, alt m) and the flight of one mission file: a list of
    ``(lat, lon, alt m, speed m/s, hold s, where)`` targets in flight order, starting at home."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in MISSION_SUFFIXES:
        raise ContactError(f"{path}: {_KINDS}")
    text = read_text_file(path, ContactError, "mission file", MAX_MISSION_BYTES)
    home, speed, items = (_read_plan if suffix == ".plan" else _read_wpl)(path, text)
    where_home = "mission.plannedHomePosition" if suffix == ".plan" else "home (first item)"
    _check_position(path, where_home, *home)
    speed = speed or default_speed_m_s
    targets: list[tuple] = [(home[0], home[1], home[2], speed, 0.0, where_home)]
    stops = [it.where for it in items[:-1] if it.stops]  # the last item ends the mission either way
    if stops:
        log.warning("%s: %s%s: autocontinue is off; PX4 would hold there until told to go on, ArduPilot ignores "
                    "it: flown on without a stop, as ArduPilot flies it", path, stops[0],
                    f" and {len(stops) - 1} more item(s)" if len(stops) > 1 else "")
    for it in items:
        p = it.params
        if it.command == DO_CHANGE_SPEED:
            if p[1] > 0:  # -1 / 0: no change
                _check_speed(path, f"{it.where} (change-speed p2)", p[1])
                speed = p[1]
            elif math.isnan(p[1]):
                raise ContactError(f"{path}: {it.where}: change-speed p2 (speed) must be a number")
            continue
        if _skipped(it.command):
            continue
        if it.command not in MOVING:
            raise ContactError(f"{path}: {it.where}: unsupported command {it.command} ({_SUPPORTED})")
        name = MOVING[it.command]
        cur = targets[-1]
        if it.command == NAV_RETURN_TO_LAUNCH:
            targets.append((home[0], home[1], cur[2], speed, 0.0, it.where))
            targets.append((home[0], home[1], home[2], speed, 0.0, it.where))
            continue
        if it.frame not in FRAMES:
            raise ContactError(f"{path}: {it.where}: {name} in unsupported frame {it.frame} (supported: 0 and 5 "
                               "absolute altitude, 3 and 6 altitude relative to home)")
        alt = p[6] + (home[2] if FRAMES[it.frame] else 0.0)
        if it.command == NAV_TAKEOFF:
            _check_position(path, it.where, home[0], home[1], alt)
            targets.append((home[0], home[1], alt, speed, 0.0, it.where))
        elif it.command == NAV_LAND:
            lat, lon = (cur[0], cur[1]) if p[4] == 0 and p[5] == 0 else (p[4], p[5])
            _check_position(path, it.where, lat, lon, cur[2])
            targets.append((lat, lon, cur[2], speed, 0.0, it.where))
            targets.append((lat, lon, home[2], speed, 0.0, it.where))
        else:
            _check_position(path, it.where, p[4], p[5], alt)
            hold = 0.0 if math.isnan(p[0]) else p[0]
            if not 0.0 <= hold <= MAX_HOLD_S:
                raise ContactError(f"{path}: {it.where}: {name} hold time p1 must be 0..{MAX_HOLD_S:g} s, got {hold}")
            targets.append((p[4], p[5], alt, speed, hold, it.where))
    return home, targets


def _check_local(path: Path, xyz: np.ndarray, wheres: Sequence[str], origin: tuple[float, float, float]) -> None:
    far = np.flatnonzero(~(np.abs(xyz).max(axis=1) <= MAX_LOCAL_KM))
    if far.size:
        raise ContactError(f"{path}: {wheres[far[0]]}: lies more than {MAX_LOCAL_KM:g} km from the drones' "
                           f"origin ({origin[0]:g}, {origin[1]:g}); the local frame is flat")


def _drone_name(path: Path) -> str:
    """A mission, GPX, .tlog or .bin file names its drone by its stem, a positions.jsonl by its folder."""
    name = path.parent.name if path.suffix.lower() == ".jsonl" else path.stem
    if not header_name_ok(name):
        after = "folder" if path.suffix.lower() == ".jsonl" else "file"
        raise ContactError(f"{path}: a drone is named after its {after}, so the name {name!r} must have "
                           "single spaces between words (no leading, trailing or other whitespace)")
    return name


def _timed_mission(path: Path, name: str, targets: list[tuple], origin: tuple[float, float, float]) -> Waypoints:
    lat, lon, alt = (np.array([t[k] for t in targets]) for k in range(3))
    xyz = enu_km(lat, lon, alt, origin)
    _check_local(path, xyz, [t[5] for t in targets], origin)
    ts, ps = [0.0], [xyz[0]]
    t = 0.0
    for k in range(1, len(targets)):
        _, _, _, speed, hold, _ = targets[k]
        d = float(np.linalg.norm(xyz[k] - ps[-1]))
        if d > 1e-9:
            t += max(d * 1000.0 / speed, 1e-3)
            ts.append(t)
            ps.append(xyz[k])
        if hold >= 1e-3:
            t += hold
            ts.append(t)
            ps.append(xyz[k])
    return Waypoints(name, np.array(ts), np.array(ps))


def mission_waypoints(path: str | Path, origin: tuple[float, float, float] | None,
                      default_speed_m_s: float) -> tuple[Waypoints, tuple[float, float, float]]:
    """One mission file as :class:`~contact_sim.drones.Waypoints` named after the file's stem,
    in the ENU frame about ``origin`` (the mission's home when None), and the origin used."""
    path = Path(path)
    name = _drone_name(path)
    home, targets = read_mission(path, default_speed_m_s)
    origin = home if origin is None else origin
    return _timed_mission(path, name, targets, origin), origin


# ---------------------------------------------------------------------------- recorded tracks

#: A recorded point: UTC time, lat deg, lon deg, alt m above mean sea level, where (for messages).
TrackPoint = tuple[_dt.datetime, float, float, float, str]


#: The deepest GPX element read: gpx/trk/trkseg/trkpt/ele (or time). Deeper ones are passed over without
#: looking at the elements above them, so that a file nested thousands deep takes no longer than a flat one.
_GPX_DEPTH = 5


def _gpx_points(path: Path) -> list[TrackPoint]:
    """The timed points of a GPX file's tracks, segments joined in the order of their first times."""
    path = check_input_file(path, ContactError, "GPX file", MAX_MISSION_BYTES)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ContactError(f"{path}: cannot read the GPX file ({exc.strerror})") from None
    refuse_doctype(data, str(path), ContactError)  # before any entity could expand
    parser = expat.ParserCreate(namespace_separator=" ")
    segments: list[list[TrackPoint]] = []
    stack: list[str | None] = []  # local names of the open GPX elements (None: another namespace)
    point: dict[str, Any] = {}
    text: list[str] | None = None
    counts = {"trk": -1, "rte": 0, "wpt": 0}
    gpx_ns = ""

    def start(tag: str, attrs: dict[str, str]) -> None:
        nonlocal text, gpx_ns
        ns, _, local = tag.rpartition(" ")
        if not stack:
            if local != "gpx" or ns not in GPX_NAMESPACES:
                raise ContactError(f"{path}: not a GPX file (expected a <gpx> root element of GPX 1.1 or 1.0, got "
                                   f"the element {shown(local)}{' in namespace ' + shown(ns) if ns else ''})")
            gpx_ns = ns
        stack.append(local if ns == gpx_ns else None)
        if len(stack) > _GPX_DEPTH:  # inside a point's <ele> or <time>, or an extension: nothing read there
            return
        where = tuple(stack)
        if where in (("gpx", "rte"), ("gpx", "wpt")):
            counts[local] += 1
        elif where == ("gpx", "trk"):
            counts["trk"] += 1
        elif where == ("gpx", "trk", "trkseg"):
            segments.append([])
        elif where == ("gpx", "trk", "trkseg", "trkpt"):
            point.clear()
            point.update(lat=attrs.get("lat", ""), lon=attrs.get("lon", ""), where=f"line {parser.CurrentLineNumber} (trk {counts['trk']}, trkseg "
                                      f"{len(segments) - 1}, trkpt {len(segments[-1])})")
        elif where in (("gpx", "trk", "trkseg", "trkpt", "ele"), ("gpx", "trk", "trkseg", "trkpt", "time")):
            text = []

    def end(tag: str) -> None:
        nonlocal text
        if len(stack) > _GPX_DEPTH:
            stack.pop()
            return
        where = tuple(stack)
        if text is not None and len(where) == 5:
            point[where[-1]] = "".join(text).strip()
            text = None
        elif where == ("gpx", "trk", "trkseg", "trkpt"):
            segments[-1].append(_gpx_point(path, point))
        stack.pop()

    def chars(data: str) -> None:
        if text is not None:
            text.append(data)

    parser.StartElementHandler, parser.EndElementHandler, parser.CharacterDataHandler = start, end, chars
    try:
        parser.Parse(data, True)
    except expat.ExpatError as exc:
        raise ContactError(f"{path}: invalid XML ({exc})") from None
    segments = sorted((seg for seg in segments if seg), key=lambda seg: seg[0][0])
    points = [p for seg in segments for p in seg]
    if not points:
        other = [f"{n} {k}" for k, n in counts.items() if k != "trk" and n]
        raise ContactError(f"{path}: no track points (trk/trkseg/trkpt)"
                           + (f"; its {' and '.join(other)} points have no times: plan such a flight as a .plan "
                              "or .waypoints mission" if other else ""))
    return points


def _gpx_point(path: Path, point: dict[str, Any]) -> TrackPoint:
    where = point["where"]
    try:
        lat, lon = float(point["lat"]), float(point["lon"])
    except ValueError:
        raise ContactError(f"{path}: {where}: expected numbers lat and lon, got {shown(point['lat'])}, "
                           f"{shown(point['lon'])}") from None
    if "time" not in point:
        raise ContactError(f"{path}: {where}: no <time>; a track without times cannot be replayed")
    if "ele" not in point:
        raise ContactError(f"{path}: {where}: no <ele>; a drone's track needs its altitude")
    try:
        alt = float(point["ele"])
    except ValueError:
        raise ContactError(f"{path}: {where}: <ele> must be a number of metres, got {shown(point['ele'])}") from None
    try:
        when = parse_utc(point["time"], field="<time>")
    except OrbitError as exc:
        raise ContactError(f"{path}: {where}: {exc}") from None
    _check_position(path, where, lat, lon, alt)
    return when, lat, lon, alt, where


def _position_log_points(path: Path) -> list[TrackPoint]:
    """The fixes of a drone agent's positions.jsonl, each once, at the time it arrived."""
    text = read_text_file(path, ContactError, "position log", MAX_MISSION_BYTES)
    lines = text.splitlines()
    cut = len(lines) if text and not text.endswith(("\n", "\r")) else 0  # an unterminated last line's number
    points: list[TrackPoint] = []
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = bounded_loads(line, max_depth=MAX_LOG_LINE_DEPTH, max_items=MAX_LOG_LINE_VALUES, allow_nan=True)
        except ValueError as exc:
            if n == cut:  # the agent was cut off while appending it (power lost): the complete lines stand
                log.warning("%s:%d: skipping the last line, cut off (no newline, not JSON)", path, n)
                continue
            raise ContactError(f"{path}:{n}: expected a JSON object with a \"position\" (a line of a drone agent's "
                               f"positions.jsonl), got invalid JSON ({exc})") from None
        if not isinstance(entry, dict) or "position" not in entry:
            raise ContactError(f"{path}:{n}: expected a JSON object with a \"position\" (a line of a drone agent's "
                               "positions.jsonl)")
        fix = entry["position"]
        if fix is None:  # no fix yet when the exchange happened
            continue
        if isinstance(fix, dict) and "alt_msl_m" in fix and fix["alt_msl_m"] is None:
            raise ContactError(f"{path}:{n}: position has no altitude (alt_msl_m is null, as in the 2-D fixes of a "
                               "GPS receiver sending RMC without GGA); a replay needs each fix's altitude")
        try:
            if not isinstance(fix, dict):
                raise ValueError
            lat, lon, alt, received = (_number(fix[k]) for k in ("lat_deg", "lon_deg", "alt_msl_m", "received_at"))
            when = _dt.datetime.fromtimestamp(received, _dt.timezone.utc)
        except (KeyError, ValueError, OverflowError, OSError):
            raise ContactError(f"{path}:{n}: position: expected numbers lat_deg, lon_deg, alt_msl_m and "
                               "received_at (Unix seconds)") from None
        where = f"line {n}"
        _check_position(path, where, lat, lon, alt)
        if points and points[-1][:4] == (when, lat, lon, alt):  # the same fix, logged with another exchange
            continue
        points.append((when, lat, lon, alt, where))
    if not points:
        raise ContactError(f"{path}: no position fix (every {'complete ' if cut else ''}line's \"position\" is null)")
    return points


def _position_log_piece(path: Path) -> float | None:
    """Where a file stands among the pieces of a drone agent's rotated position log, by the agent's
    numbering (n of ``positions.<n>.jsonl``, the oldest first; ``positions.jsonl``, the newest, last), or
    None for a file of another name."""
    if path.name == POSITION_LOG:
        return math.inf
    m = ROTATED_POSITION_LOG.fullmatch(path.name)
    return int(m[1]) if m else None


def _drone_files(paths: Sequence[Path]) -> list[tuple[Path, list[Path]]]:
    """The files of ``missions`` by drone, in the order of each drone's first file: a drone agent's position
    log pieces (``positions.jsonl``, ``positions.<n>.jsonl``) of one folder are one drone, its pieces in the
    agent's order (oldest first); any other file is a drone of its own. Each entry is the path naming the
    drone (a piece's folder for several pieces, else the file) and its files."""
    groups: dict[Path, list[Path]] = {}
    out: list[tuple[Path, list[Path]]] = []
    for p in paths:
        if _position_log_piece(p) is not None:
            pieces = groups.get(p.parent.resolve())
            if pieces is not None:
                if any(q.resolve() == p.resolve() for q in pieces):
                    raise ContactError(f"{p}: given twice in missions")
                pieces.append(p)
                continue
            groups[p.parent.resolve()] = pieces = [p]
            out.append((p, pieces))
        else:
            out.append((p, [p]))
    for k, (p, pieces) in enumerate(out):
        if len(pieces) > 1:
            pieces.sort(key=lambda q: _position_log_piece(q) or 0.0)
            out[k] = (p.parent, pieces)
    return out


def _joined_position_log(folder: Path, pieces: list[Path]) -> list[TrackPoint]:
    """The points of a drone's position log pieces (each read by :func:`read_track`, with its limits) as one
    track, oldest piece first: a piece's first fix equal to the one before it (the same fix logged on both
    sides of a rotation) counts once; a piece starting at or before the end of the one before is refused."""
    points: list[TrackPoint] = []
    before: Path | None = None
    for piece in pieces:
        read = [(when, lat, lon, alt, f"{piece.name} {where}") for when, lat, lon, alt, where in read_track(piece)]
        if points and read[0][:4] == points[-1][:4]:
            read = read[1:]
        if points and read and not read[0][0] > points[-1][0]:
            assert before is not None
            raise ContactError(f"{folder}: {read[0][4]}: time {read[0][0].isoformat()} is not after the last point of "
                               f"{before.name} ({points[-1][0].isoformat()}, {points[-1][4]}); the pieces of one "
                               f"drone's position log must follow each other in time (positions.1.jsonl, "
                               f"positions.2.jsonl, ..., positions.jsonl)")
        points += read
        before = piece
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
_NEEDS_PYMAVLINK = "reading a MAVLink telemetry log needs pymavlink: pip install 'fol-swarm[mavlink]'"


def _log_bytes(path: Path, what: str) -> bytes:
    """A binary log's bytes, at most MAX_MISSION_BYTES (the size was checked; the file may have grown since)."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_MISSION_BYTES + 1)
    except OSError as exc:
        raise ContactError(f"{path}: cannot read the {what} ({exc.strerror})") from None
    if len(data) > MAX_MISSION_BYTES:
        raise ContactError(f"{path}: over {MAX_MISSION_BYTES} bytes; a {what} may have at most {MAX_MISSION_BYTES}")
    return data


def _tlog_points(path: Path) -> list[TrackPoint]:
    """The ``GLOBAL_POSITION_INT`` positions of a MAVLink telemetry log at the times the ground station
    logged them; each message named ``message N (byte B)``, N counting every packet of the log from 0."""
    path = check_input_file(path, ContactError, "MAVLink telemetry log", MAX_MISSION_BYTES)
    try:
        from pymavlink.dialects.v20 import common as mavlink  # MAVLink 2's parser decodes version 1 packets too
    except ImportError:
        raise ContactError(f"{path}: {_NEEDS_PYMAVLINK}") from None
    data = _log_bytes(path, "MAVLink telemetry log")
    parser = mavlink.MAVLink(None)
    points: list[TrackPoint] = []
    source: tuple[int, int, str] | None = None
    pos = index = 0
    while pos < len(data):
        where = f"message {index} (byte {pos})"
        if len(data) < pos + 9:
            size = None
        else:
            magic = data[pos + 8]
            if magic == _MAVLINK1:
                size = 6 + data[pos + 9] + 2 if len(data) >= pos + 10 else None
            elif magic == _MAVLINK2:
                size = 10 + data[pos + 9] + 2 + (13 if data[pos + 10] & 1 else 0) if len(data) >= pos + 11 else None
            else:
                raise ContactError(f"{path}: {where}: expected a MAVLink packet (0xFE or 0xFD) after the record's "
                                   f"8-byte time, got 0x{magic:02X}; not a MAVLink telemetry log (.tlog)")
        if size is None or pos + 8 + size > len(data):
            log.warning("%s: %s: skipping the last message, cut off by the end of the file (%d bytes)", path,
                        where, len(data) - pos)
            break
        packet = data[pos + 8:pos + 8 + size]
        msgid = packet[5] if packet[0] == _MAVLINK1 else int.from_bytes(packet[7:10], "little")
        stamp_us = _TLOG_TIME.unpack_from(data, pos)[0]
        pos += 8 + size
        index += 1
        if msgid != _GLOBAL_POSITION_INT:
            continue
        try:
            msg = parser.decode(bytearray(packet))
        except Exception as exc:  # noqa: BLE001 - pymavlink raises MAVError, struct.error and others for a bad packet
            raise ContactError(f"{path}: {where}: GLOBAL_POSITION_INT that pymavlink cannot decode "
                               f"({shown(str(exc))})") from None
        if msg.lat == 0 and msg.lon == 0:  # ArduPilot's before its first position estimate
            continue
        sender = (msg.get_srcSystem(), msg.get_srcComponent())
        if source is None:
            source = (*sender, where)
        elif sender != source[:2]:
            raise ContactError(f"{path}: {where}: GLOBAL_POSITION_INT of system {sender[0]} component {sender[1]}, "
                               f"after those of system {source[0]} component {source[1]} ({source[2]}); one "
                               "vehicle a file (split the log, e.g. mavlogdump.py --source-system N -o FILE)")
        try:
            when = _UNIX_EPOCH + _dt.timedelta(microseconds=stamp_us)
        except OverflowError:
            raise ContactError(f"{path}: {where}: time {stamp_us} microseconds since 1970 is past the year "
                               "9999") from None
        lat, lon, alt = msg.lat / 1e7, msg.lon / 1e7, msg.alt / 1000.0
        _check_position(path, where, lat, lon, alt)
        points.append((when, lat, lon, alt, where))
    if not points:
        raise ContactError(f"{path}: no GLOBAL_POSITION_INT with a position among its {index} MAVLink messages; "
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
_NEEDS_PYMAVLINK_DF = "reading an ArduPilot DataFlash log needs pymavlink: pip install 'fol-swarm[mavlink]'"


def _df_gps_layout(path: Path, where: str, fmt: str, columns: list[str], length: int,
                   format_to_struct: dict) -> tuple[struct.Struct, dict[str, int], list]:
    """The GPS message's unpacker, the index of each column read (and ``I``, the instance, when logged)
    and each column's multiplier, from its FMT message."""
    unknown = [c for c in fmt if c not in format_to_struct]
    if unknown:
        raise ContactError(f"{path}: {where}: FMT of GPS has the format character {shown(unknown[0])}, which "
                           "DataFlash logs do not use")
    if len(columns) != len(fmt):
        raise ContactError(f"{path}: {where}: FMT of GPS has {len(columns)} column labels for the "
                           f"{len(fmt)} characters of its format {shown(fmt)}")
    unpack = struct.Struct("<" + "".join(format_to_struct[c][0] for c in fmt))
    if unpack.size + 3 != length:
        raise ContactError(f"{path}: {where}: FMT of GPS gives a length of {length} bytes, but its format "
                           f"{shown(fmt)} takes {unpack.size + 3} with the header")
    index: dict[str, int] = {}
    for key, names in _DF_GPS_COLUMNS.items():
        found = [columns.index(n) for n in names if n in columns]
        if not found:
            raise ContactError(f"{path}: {where}: FMT of GPS has no column {' or '.join(names)} (columns "
                               f"{shown(','.join(columns))})")
        index[key] = found[0]
    for key, char in _DF_POSITION_FORMATS.items():
        if fmt[index[key]] != char:
            raise ContactError(f"{path}: {where}: FMT of GPS logs {key} with the format character "
                               f"{shown(fmt[index[key]])}; expected {char!r}, as ArduPilot logs it")
    if "I" in columns:
        index["I"] = columns.index("I")
    for key in ("Status", "GMS", "GWk", "I"):
        if key in index and fmt[index[key]] not in _DF_INTEGER_FORMATS:
            raise ContactError(f"{path}: {where}: FMT of GPS logs {columns[index[key]]} with the format character "
                               f"{shown(fmt[index[key]])}; expected an integer ({_DF_INTEGER_FORMATS})")
    return unpack, index, [format_to_struct[c][1] for c in fmt]


def _dataflash_points(path: Path) -> list[TrackPoint]:
    """The 3-D fixes of the first GPS of an ArduPilot DataFlash log at their GPS times, converted to UTC;
    each message named ``message N (byte B)``, N counting every message of the log from 0."""
    path = check_input_file(path, ContactError, "DataFlash log", MAX_MISSION_BYTES)
    try:
        from pymavlink.DFReader import FORMAT_TO_STRUCT  # the struct code and multiplier of each format character
    except ImportError:
        raise ContactError(f"{path}: {_NEEDS_PYMAVLINK_DF}") from None
    data = _log_bytes(path, "DataFlash log")
    lengths = {_DF_FMT: 3 + _DF_FMT_BODY.size}
    gps_type: int | None = None
    gps: tuple[struct.Struct, dict[str, int], list] | None = None
    fixes: list[tuple[_dt.datetime, float, float, float, str]] = []  # GPS time (naive), lat, lon, alt, where
    pos = index = 0
    while pos < len(data):
        where = f"message {index} (byte {pos})"
        if data[pos:pos + 2] != _DF_HEAD[:len(data) - pos]:
            if index and len(data) - pos < _DF_TAIL:  # block logging's unwritten end of a page
                log.warning("%s: %s: %d bytes at the end are no DataFlash message; the log ends before them", path,
                            where, len(data) - pos)
                break
            raise ContactError(f"{path}: {where}: expected a DataFlash message (0xA3 0x95), got "
                               f"{data[pos:pos + 2].hex(' ').upper()}; not an ArduPilot DataFlash log (.bin)")
        length = lengths.get(data[pos + 2]) if pos + 2 < len(data) else 3
        if length is None:
            raise ContactError(f"{path}: {where}: message type {data[pos + 2]} has no FMT message before it")
        if pos + length > len(data):
            log.warning("%s: %s: skipping the last message, cut off by the end of the file (%d bytes)", path,
                        where, len(data) - pos)
            break
        mtype, body = data[pos + 2], data[pos + 3:pos + length]
        if mtype == _DF_FMT:
            ftype, flen, name, fmt, columns = (v.rstrip(b"\0").decode("ascii", "replace") if isinstance(v, bytes)
                                               else v for v in _DF_FMT_BODY.unpack(body))
            if flen < 3 or (ftype == _DF_FMT and flen != lengths[_DF_FMT]):
                raise ContactError(f"{path}: {where}: FMT of type {ftype} ({shown(name)}) gives a length of {flen} "
                                   f"bytes; expected {lengths[_DF_FMT] if ftype == _DF_FMT else 'at least 3'}")
            lengths[ftype] = flen
            if name == "GPS":
                gps_type = ftype
                gps = _df_gps_layout(path, where, fmt, columns.split(",") if columns else [], flen,
                                     FORMAT_TO_STRUCT)
            elif ftype == gps_type:
                gps_type = gps = None
        elif mtype == gps_type and gps is not None:
            unpack, col, mults = gps
            values = unpack.unpack(body)
            status = values[col["Status"]]
            if ("I" not in col or values[col["I"]] == 0) and status >= _DF_3D_FIX:
                week, ms = values[col["GWk"]], values[col["GMS"]]
                if not (0 <= ms < _MS_PER_WEEK and week >= 0):
                    raise ContactError(f"{path}: {where}: GPS week {week}, {ms} ms; expected a week of 0 or more and "
                                       f"0..{_MS_PER_WEEK - 1} ms of the week")
                try:
                    when = _GPS_EPOCH + _dt.timedelta(weeks=week, milliseconds=ms)
                except OverflowError:
                    raise ContactError(f"{path}: {where}: GPS week {week} is past the year 9999") from None
                # scaled as pymavlink's DFReader does: divided by 1e7 (lat, lon) and 100 (alt)
                lat, lon, alt = (values[col[k]] / round(1 / mults[col[k]]) for k in ("Lat", "Lng", "Alt"))
                _check_position(path, where, lat, lon, alt)
                fixes.append((when, lat, lon, alt, where))
        pos += length
        index += 1
    if not fixes:
        raise ContactError(f"{path}: no GPS message of the first GPS with a 3-D fix (Status 3 or more) among its "
                           f"{index} DataFlash messages; a recorded track needs the vehicle's positions")
    return _gps_to_utc(fixes)


def _gps_to_utc(fixes: list[tuple[_dt.datetime, float, float, float, str]]) -> list[TrackPoint]:
    """GPS times to UTC: minus GPS - UTC = TAI - UTC - 19 s, the leap seconds (Skyfield's table) at each.
    The count only grows, so fixes between two that share it share it too: the times in order are split
    in halves until each span's ends agree, a few dozen look-ups for a log across a leap second."""
    times = sorted({f[0] for f in fixes})
    offsets: dict[_dt.datetime, float] = {}

    def fill(lo: int, hi: int, at_lo: float, at_hi: float) -> None:
        if at_lo == at_hi or hi - lo <= 1:
            offsets.update((t, at_lo) for t in times[lo:hi])
            offsets[times[hi]] = at_hi
            return
        mid = (lo + hi) // 2
        at_mid = utc_offset_s("GPS", times[mid])
        fill(lo, mid, at_lo, at_mid)
        fill(mid, hi, at_mid, at_hi)

    fill(0, len(times) - 1, utc_offset_s("GPS", times[0]), utc_offset_s("GPS", times[-1]))
    return [(when.replace(tzinfo=_dt.timezone.utc) - _dt.timedelta(seconds=offsets[when]), lat, lon, alt, where)
            for when, lat, lon, alt, where in fixes]


def read_track(path: str | Path) -> list[TrackPoint]:
    """The points of one recorded track (``.gpx``, a ``positions.jsonl``, a ``.tlog`` or a ``.bin``) in time order,
    times increasing."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in TRACK_SUFFIXES:
        raise ContactError(f"{path}: {_KINDS}")
    points = {".gpx": _gpx_points, ".jsonl": _position_log_points, ".tlog": _tlog_points,
              ".bin": _dataflash_points}[suffix](path)
    for prev, cur in zip(points, points[1:]):
        if not cur[0] > prev[0]:
            raise ContactError(f"{path}: {cur[4]}: time {cur[0].isoformat()} is not after the previous point's "
                               f"{prev[0].isoformat()} ({prev[4]}); a track's times must increase")
    return points


def _timed_track(path: Path, name: str, points: list[TrackPoint], origin: tuple[float, float, float],
                 epoch: _dt.datetime) -> Waypoints:
    xyz = enu_km([p[1] for p in points], [p[2] for p in points], [p[3] for p in points], origin)
    _check_local(path, xyz, [p[4] for p in points], origin)
    t = np.array([(p[0] - epoch) / _dt.timedelta(seconds=1) for p in points])
    if t[-1] < 0:
        raise ContactError(f"{path}: the track ends at {points[-1][0].isoformat()}, before time.start "
                           f"({epoch.isoformat()})")
    k = int(np.searchsorted(t, 0.0))  # the first point at or after t = 0
    if k > 0:  # start where the track is at t = 0
        at0 = np.array([np.interp(0.0, t[k - 1:k + 1], xyz[k - 1:k + 1, j]) for j in range(3)])
        t, xyz = np.concatenate([[0.0], t[k:]]), np.vstack([at0, xyz[k:]])
        if t.size > 1 and t[1] == 0.0:
            t, xyz = t[1:], xyz[1:]
    return Waypoints(name, t, xyz)


def read_missions(paths: Sequence[str | Path], origin: tuple[float, float, float] | None,
                  default_speed_m_s: float, start: _dt.datetime | None = None
                  ) -> tuple[list[Waypoints], _dt.datetime | None]:
    """One drone per mission or track file (named after a file's stem, a positions.jsonl's folder; the
    pieces of one folder's rotated position log given together are one drone, :func:`_drone_files`)
    and the UTC instant of t = 0: ``start``, else the earliest time of the tracks (None without
    any). The origin is ``origin`` or, when None, the first file's home (a track's first point)."""
    read: list[tuple[Path, str, Any, bool]] = []
    seen: dict[str, Path] = {}
    for p, pieces in _drone_files([Path(p) for p in paths]):
        name = _drone_name(pieces[0])
        if name in seen:
            named = "its folder" if pieces[0].suffix.lower() == ".jsonl" else "the file's stem"
            raise ContactError(f"{pieces[0]}: drone name {name!r} ({named}) is also that of {seen[name]}; drone names "
                               "must be unique (the pieces of one drone's position log, positions.jsonl and "
                               "positions.<n>.jsonl of one folder, are joined)")
        seen[name] = p
        is_track = pieces[0].suffix.lower() in TRACK_SUFFIXES
        if is_track:
            points = read_track(p) if len(pieces) == 1 else _joined_position_log(p, pieces)
            home = points[0][1:4]
        else:
            home, points = read_mission(p, default_speed_m_s)
        origin = home if origin is None else origin
        read.append((p, name, points, is_track))
    tracks = [pts for _, _, pts, is_track in read if is_track]
    epoch = start if start is not None or not tracks else min(pts[0][0] for pts in tracks)
    out = [_timed_track(p, name, pts, origin, epoch) if is_track else _timed_mission(p, name, pts, origin)
           for p, name, pts, is_track in read]
    return out, epoch
