"""Drone missions as planned in QGroundControl or Mission Planner, turned into timed waypoints.

Two file kinds, told apart by their name's ending:

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
  first item is the home position.

Recorded flights (GPX, the agent's ``positions.jsonl``, MAVLink ``.tlog``, ArduPilot DataFlash ``.bin``) are
read by :mod:`contact_sim.tracks`; :func:`read_missions` reads a scenario's list of both, one drone a file. Both
become the drones' flat East-North-Up frame about one origin (:mod:`contact_sim.flightfiles`).

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

A mission of more than 100,000 items, counting the waypoints computed for its surveys and corridor scans
(MAVLink uploads at most 65,535), is refused in one line naming the item past the limit.
"""

from __future__ import annotations

import datetime as _dt
import logging
import math
import re
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from swarmbase.safejson import loads as bounded_loads
from swarmbase.tomlcheck import (DECIMAL_NUMBER, brief, decimal_number, is_decimal, read_text_file, shown,
                                 text_lines)

from .drones import MAX_LOCAL_KM, Waypoints
from .errors import ContactError
from .flightfiles import (FILE_KINDS, MAX_MISSION_BYTES, check_local, check_position, enu_km, json_number,
                          lat_lon_of_enu)
from .tracks import TRACK_SUFFIXES, drone_files, joined_position_log, read_track, timed_track
from .trajectory import header_name_ok

log = logging.getLogger(__name__)

#: A .plan's JSON limits: a corridor's stored waypoint is 8 levels deep (plan, mission, items, the complex
#: item, its transect settings, their Items, the item, its params); even the shortest items (type, command,
#: frame and 7 params) take over 6 bytes a value, so a plan within the size limit holds fewer than 3,000,000.
MAX_PLAN_JSON_DEPTH, MAX_PLAN_JSON_VALUES = 32, 4_000_000
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
#: A mission file's most items, counting the waypoints computed for its surveys and corridor scans as they are
#: computed: one corridor's most, above the 65,535 items MAVLink's mission protocol can upload (its count is 16
#: bits). Without it, 50 copies of one survey (20 kB) computed a million waypoints in half a minute, and a file
#: within the size limit could ask for a billion.
MAX_MISSION_ITEMS = MAX_CORRIDOR_WAYPOINTS
#: QGroundControl's Earth radius (m), QGeoCoordinate's sphere, on which it stretches a corridor's transects.
QT_EARTH_RADIUS_M = 6_371_007.2
_ANGLE = "degrees (the transects' compass bearing)"
#: Name endings of planned missions.
MISSION_SUFFIXES = (".plan", ".waypoints")

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

class _Item:
    """One mission item as both formats carry it; ``where`` names it in messages."""

    __slots__ = ("where", "command", "frame", "params", "stops")

    def __init__(self, where: str, command: int, frame: int, params: list[float], stops: bool = False) -> None:
        self.where, self.command, self.frame, self.params = where, command, frame, params
        self.stops = stops  # autocontinue off: PX4 holds here until told to go on, ArduPilot flies on


def _plan_items(path: Path, items: Any, where: str, nested: bool = False) -> Iterator[_Item]:
    if not isinstance(items, list):
        raise ContactError(f"{brief(path)}: {where}: expected a list of mission items")
    for i, obj in enumerate(items):
        here = f"{where}[{i}]"
        if not isinstance(obj, dict):
            raise ContactError(f"{brief(path)}: {here}: expected a mission item (JSON object)")
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
                    f"{brief(path)}: {here}: complex item {shown(obj.get('complexItemType'))} holds no computed "
                    "waypoints (TransectStyleComplexItem.Items) and is not a survey with a 'polygon' and grid "
                    "settings or a corridor scan with a 'polyline' and its settings, whose transects can be computed")
            continue
        if kind != "SimpleItem":
            allowed = "'SimpleItem'" if nested else "'SimpleItem' or 'ComplexItem'"
            raise ContactError(f"{brief(path)}: {here}: expected type {allowed}, got {shown(kind)}")
        command, frame, params = obj.get("command"), obj.get("frame"), obj.get("params")
        if not all(isinstance(v, int) and not isinstance(v, bool) for v in (command, frame)):
            raise ContactError(f"{brief(path)}: {here}: expected integer 'command' and 'frame'")
        try:
            if not isinstance(params, list) or len(params) != 7:
                raise ValueError
            values = [json_number(v) for v in params]
        except ValueError:
            raise ContactError(f"{brief(path)}: {here}: expected 'params' as 7 numbers (or null)") from None
        yield _Item(here, command, frame, values, stops=obj.get("autoContinue") is False)


def _setting(path: Path, where: str, table: Any, key: str, what: str, low: float, high: float,
             above: bool = False) -> float:
    """``table[key]``, a number in ``low..high`` (``low`` excluded when ``above``); ``where`` names the table."""
    try:
        value = json_number(table.get(key) if isinstance(table, dict) else None)
    except ValueError:
        value = math.nan
    if not (low < value <= high if above else low <= value <= high):
        got = shown(table[key]) if isinstance(table, dict) and key in table else "nothing"
        raise ContactError(f"{brief(path)}: {where}.{key}: expected a number of {what}, got {got}")
    return value


def _flag(path: Path, where: str, table: dict, key: str, default: bool | None = None) -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise ContactError(f"{brief(path)}: {where}.{key}: expected true or false, got {shown(value)}")
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
            raise ContactError(f"{brief(path)}: {at}: expected an object (angle, spacing, altitude, relativeAltitude, "
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
        raise ContactError(f"{brief(path)}: {entry_at}.entryLocation: expected 0, 1, 2 or 3 (the corner the survey "
                           f"starts at), got {shown(entry)}")
    if hover:
        raise ContactError(f"{brief(path)}: {where}: hoverAndCapture: a survey that stops at each photo has no timing "
                           "without its computed waypoints; open and save the plan in QGroundControl to store them")
    tangent, pts = _plane_vertices(path, f"{where}.polygon", obj["polygon"], 3)
    edges = np.roll(pts, -1, axis=0) - pts
    spread = np.linalg.svd(pts - pts.mean(axis=0), compute_uv=False)  # across the widest line through them
    if spread[1] <= 1e-9 * spread[0]:  # (not the signed area: a self-crossing polygon's lobes may cancel)
        raise ContactError(f"{brief(path)}: {where}.polygon: encloses no area (its vertices lie on one line)")
    flown: list[np.ndarray] = []  # each pass's transects (n, 2 ends, 2), in flight order, metres east / north
    try:  # every pass's lines counted before any is computed
        for pass_angle in _survey_angles(angle, refly):
            _pass_lines(pts, pass_angle, _qgc_spacing(spacing))
    except _TooManyTransects as many:
        raise ContactError(f"{brief(path)}: {spacing_at}: {spacing:g} m gives {many.args[0]} transects over the "
                           f"polygon (at most {MAX_SURVEY_TRANSECTS})") from None
    for pass_angle in _survey_angles(angle, refly):
        transects = _survey_pass(pts, edges, pass_angle, _qgc_spacing(spacing))
        if not len(transects):
            continue
        if entry in (2, 3):  # QGroundControl's entry corners: 2 and 3 start at the other end of the transects,
            transects = transects[:, ::-1]
        if entry in (1, 3):  # 1 and 3 with the last transect
            transects = transects[::-1]
        if flown:  # the second pass starts at the corner nearest the end of the first
            last = flown[-1][-1, -1]
            distances = [np.hypot(*(transects[i][j] - last)) for i, j in ((0, 0), (0, -1), (-1, 0))]
            nearest = int(np.argmin(distances))  # (QGroundControl compares three of the four corners)
            if nearest > 1:
                transects = transects[::-1]
            if nearest & 1:
                transects = transects[:, ::-1]
        if alternate:  # every other transect, then back along the ones skipped
            transects = np.concatenate([transects[0::2], transects[1::2][::-1]])
        back = (np.arange(len(transects)) % 2 == 1)[:, None, None]  # back and forth in turn
        ends = np.where(back, transects[:, ::-1], transects)
        step = ends[:, 1] - ends[:, 0]
        unit = step / np.hypot(step[:, 0], step[:, 1])[:, None]
        flown.append(np.stack([ends[:, 0] - turn * unit, ends[:, 1] + turn * unit], axis=1))
    if flown:
        yield from _transect_waypoints(np.concatenate(flown), tangent, alt, relative, where)


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
        raise ContactError(f"{brief(path)}: {at}.CameraCalc.DistanceMode: expected 1 (altitude above home) or 2 (above "
                           f"mean sea level), got {shown(calc.get('DistanceMode'))}; a {kind} above terrain "
                           "needs the waypoints QGroundControl stores (open and save the plan in it)")
    return alt, relative, turn, _flag(path, at, inner, "HoverAndCapture", False)


def _plane_vertices(path: Path, where: str, vertices: Any,
                    fewest: int) -> tuple[tuple[float, float, float], np.ndarray]:
    """A polygon's or polyline's ``[lat, lon]`` vertices (``fewest`` to :data:`MAX_SURVEY_VERTICES`) in
    QGroundControl's flat frame, metres east and north in the WGS-84 tangent plane at the first vertex, and
    that tangent point (lat, lon deg, 0 m)."""
    if not isinstance(vertices, list) or not fewest <= len(vertices) <= MAX_SURVEY_VERTICES:
        raise ContactError(f"{brief(path)}: {where}: expected {fewest} or more [lat, lon] vertices (at most "
                           f"{MAX_SURVEY_VERTICES})")
    geo = []
    for k, vertex in enumerate(vertices):
        try:
            if not isinstance(vertex, list) or len(vertex) < 2:
                raise ValueError
            lat, lon = json_number(vertex[0]), json_number(vertex[1])
        except ValueError:
            lat = lon = math.nan
        if math.isnan(lat) or math.isnan(lon):
            raise ContactError(f"{brief(path)}: {where}[{k}]: expected [lat, lon] in degrees, got {shown(vertex)}")
        check_position(path, f"{where}[{k}]", lat, lon, 0.0)
        geo.append((lat, lon))
    tangent = (geo[0][0], geo[0][1], 0.0)
    lat_v, lon_v = np.array(geo).T
    return tangent, enu_km(lat_v, lon_v, np.zeros(len(geo)), tangent)[:, :2] * 1000.0


def _transect_waypoints(flown: np.ndarray, tangent: tuple[float, float, float], alt: float, relative: bool,
                        where: str) -> Iterator[_Item]:
    """Waypoints at ``alt`` through the ends of each transect in ``flown`` (``(n, 2, 2)``, metres east / north of
    ``tangent``)."""
    plane = flown.reshape(-1, 2) / 1000.0
    lat, lon = lat_lon_of_enu(np.column_stack([plane, np.zeros(len(plane))]), tangent)
    yield from _geo_waypoints(np.column_stack([lat, lon]).reshape(flown.shape), alt, relative, where)


def _geo_waypoints(flown: Sequence[np.ndarray], alt: float, relative: bool, where: str) -> Iterator[_Item]:
    """Waypoints at ``alt`` through the [lat, lon] points (deg) of each transect in ``flown``."""
    frame = 3 if relative else 0
    for k, transect in enumerate(flown, start=1):
        here = f"{where} (transect {k})"
        for lat, lon in transect.tolist():
            yield _Item(here, NAV_WAYPOINT, frame, [0.0, 0.0, 0.0, math.nan, lat, lon, alt])


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


def _survey_pass(pts: np.ndarray, edges: np.ndarray, bearing: float, spacing: float) -> np.ndarray:
    """One pass of QGroundControl's transects over the polygon ``pts`` (metres east / north), shape
    ``(transects, 2 ends, 2)``, leftmost first (facing along ``bearing``), all in the direction of the first.

    As QGroundControl computes them: lines ``spacing`` apart at the bearing, 2 km longer than the polygon's
    bounding box is wide or high, the first at half that length left of the box's centre; each line's
    transect joins the two farthest of its crossings with the polygon's edges, from the one on the edge
    listed first; with fewer than two such transects, the one line through the box's centre. The lines are
    taken a block at a time against the edges near the block, all of their crossings at once (numpy)."""
    along, across, centre, half, off, run, k_low, k_high = _pass_lines(pts, bearing, spacing)
    off_next = np.roll(off, -1)
    lo, hi = np.minimum(off, off_next), np.maximum(off, off_next)  # each edge's least and greatest offset
    table = np.column_stack([lo, hi, off, off_next, run, edges @ along])  # per edge, what a crossing takes
    line_frame = (along, across, centre, half)
    found = []
    for first in range(k_low, k_high + 1, _LINES_PER_BLOCK):
        offsets = -half + np.arange(first, min(first + _LINES_PER_BLOCK, k_high + 1)) * spacing
        near = table[(lo <= offsets[-1]) & (hi >= offsets[0])]
        step = max(1, _PAIRS_PER_BLOCK // max(len(near), 1))  # fewer lines at once where many edges are near
        found += [_line_transects(line_frame, offsets[i:i + step], near) for i in range(0, offsets.size, step)]
    transects = np.concatenate(found) if found else np.empty((0, 2, 2))
    if len(transects) < 2:
        transects = _line_transects(line_frame, np.zeros(1), table)
    if not len(transects):
        return transects
    ahead = (transects[:, 1] - transects[:, 0]) @ along > 0
    return np.where((ahead == ahead[0])[:, None, None], transects, transects[:, ::-1])


#: Lines of a survey pass matched against the polygon's edges near them at a time, and the most line-edge pairs
#: computed at once (fewer lines where many edges are near: about 100 bytes a pair).
_LINES_PER_BLOCK, _PAIRS_PER_BLOCK = 256, 1 << 14


def _line_transects(line_frame: tuple, offsets: np.ndarray, near: np.ndarray) -> np.ndarray:
    """The transects ``(n, 2, 2)`` of the lines ``offsets`` (metres right of the centre, increasing) that cross
    the polygon, among the edges ``near`` (rows ``lo, hi, off, off_next, run, run_edge`` in the order the
    edges are listed; every edge a line meets): each line's two farthest crossings with the edges, first the
    one on the edge listed first. A line lying along an edge does not cross it; a line through a vertex
    meets both edges there (one crossing, found twice); crossings beyond the line's ends, or a line whose
    crossings lie within 1e-9 of its half-length of one another, give no transect. Every line against every
    edge near, as a (line, edge) table."""
    along, across, centre, half = line_frame
    lo, hi, off, off_next, run, run_edge = near.T
    o = offsets[:, None]
    d, d_next = off - o, off_next - o
    meets = (lo <= o) & (hi >= o) & (d != d_next)  # (an edge lying on the line is not crossed)
    with np.errstate(divide="ignore", invalid="ignore"):  # (the pairs that do not meet: not used)
        t = run + d / (d - d_next) * run_edge  # how far ahead of the centre the line crosses the edge
    meets &= np.abs(t) <= half  # (not beyond the line's ends)
    low = np.where(meets, t, np.inf).min(axis=1, initial=np.inf)
    high = np.where(meets, t, -np.inf).max(axis=1, initial=-np.inf)
    tol = 1e-9 * half  # one crossing found on the two edges that meet on the line
    keep = (np.count_nonzero(meets, axis=1) >= 2) & ~(high - low <= tol)
    if not keep.any():
        return np.empty((0, 2, 2))
    if not keep.all():
        meets, t, low, high = meets[keep], t[keep], low[keep], high[keep]
    first_low = np.argmax(meets & (t <= low[:, None] + tol), axis=1)  # in the order the edges are listed
    first_high = np.argmax(meets & (t >= high[:, None] - tol), axis=1)
    swap = first_low > first_high  # the farthest crossing on the edge listed first starts the transect
    ends = np.stack([np.where(swap, high, low), np.where(swap, low, high)], axis=1)
    base = centre + offsets[keep, None] * across  # the lines' centres
    return base[:, None, :] + ends[:, :, None] * along


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
        raise ContactError(f"{brief(path)}: {where}.EntryPoint: expected 0, 1, 2 or 3 (the corner the corridor scan "
                           f"starts at), got {shown(entry)}")
    if hover:
        raise ContactError(f"{brief(path)}: {where}: HoverAndCapture: a corridor scan that stops at each photo has no "
                           "timing without its computed waypoints; open and save the plan in QGroundControl to "
                           "store them")
    spacing = _qgc_spacing(side)
    count = max(1, math.ceil(width / spacing))  # one when the width is 0 (or so small its ratio underflows)
    if count > MAX_SURVEY_TRANSECTS:
        raise ContactError(f"{brief(path)}: {at}.CameraCalc.AdjustedFootprintSide: {side:g} m gives {count} transects "
                           f"over a {width:g} m wide corridor (at most {MAX_SURVEY_TRANSECTS})")
    tangent, pts = _plane_vertices(path, f"{where}.polyline", obj["polyline"], 2)
    if count * (len(pts) + 2) > MAX_CORRIDOR_WAYPOINTS:
        raise ContactError(f"{brief(path)}: {where}.polyline: {len(pts)} vertices over {count} transects give more "
                           f"than {MAX_CORRIDOR_WAYPOINTS} waypoints")
    base, slide = _corridor_offsets(path, f"{where}.polyline", pts)
    half = width / 2.0
    offsets = [0.0] if count == 1 else [half - spacing / 2.0 - i * spacing for i in range(count)]  # leftmost first
    lines = base[None] + np.array(offsets)[:, None, None] * slide[None]
    far = np.flatnonzero(~(np.abs(lines).max(axis=(0, 2)) <= MAX_LOCAL_KM * 1000.0))
    if far.size:
        raise ContactError(f"{brief(path)}: {where}.polyline[{far[0]}]: the corridor's side at this vertex lies more "
                           f"than {MAX_LOCAL_KM:g} km away (the polyline turns back almost onto itself)")
    plane = lines.reshape(-1, 2) / 1000.0
    lat, lon = lat_lon_of_enu(np.column_stack([plane, np.zeros(len(plane))]), tangent)
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
        raise ContactError(f"{brief(path)}: {where}[{short[0] + 1}]: lies within 1 mm of the vertex before it (each of "
                           "a corridor's segments needs a length and a direction)")
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
        raise ContactError(f"{brief(path)}: not a QGroundControl plan (invalid JSON: {exc})") from None
    if not isinstance(doc, dict) or doc.get("fileType") != "Plan" or not isinstance(doc.get("mission"), dict):
        raise ContactError(f"{brief(path)}: not a QGroundControl plan (expected a JSON object with \"fileType\": "
                           "\"Plan\" and a \"mission\" object)")
    mission = doc["mission"]
    home = mission.get("plannedHomePosition")
    try:
        if not isinstance(home, list) or len(home) != 3:
            raise ValueError
        lat, lon, alt = (json_number(v) for v in home)
    except ValueError:
        raise ContactError(f"{brief(path)}: mission.plannedHomePosition: expected [lat, lon, alt]") from None
    key = "cruiseSpeed" if mission.get("vehicleType") == 1 else "hoverSpeed"
    speed = None
    if key in mission:
        try:
            speed = json_number(mission[key])
        except ValueError:
            speed = math.nan
        _check_speed(path, f"mission.{key}", speed)
    items: list[_Item] = []
    for it in _plan_items(path, mission.get("items"), "mission.items"):
        _check_item_count(path, it.where, len(items))
        items.append(it)
    return (lat, lon, alt), speed, items


def _check_item_count(path: Path, where: str, before: int) -> None:
    """Refuse the item at ``where`` when ``before`` items (computed waypoints counted) come before it already."""
    if before >= MAX_MISSION_ITEMS:
        raise ContactError(f"{brief(path)}: {where}: the mission holds more than {MAX_MISSION_ITEMS:,} items, counting "
                           "the waypoints computed for its surveys and corridor scans (MAVLink uploads at most "
                           "65,535)")


#: What separates a .waypoints line's fields, and surrounds them: spaces and tabs (no other whitespace).
_BLANK, _FIELD_GAP = " \t", re.compile("[ \t]+")
#: A .waypoints item line (stripped of spaces and tabs) as nearly every file writes it, matched whole: index,
#: current, frame and command (integers of up to 5 digits), p1..p4, lat, lon, alt (numbers as
#: :func:`~swarmbase.tomlcheck.decimal_number` takes them) and autocontinue. Every line it matches passes the
#: field checks of :func:`_wpl_item_fields`, which read (or refuse, naming the line) any other.
_WPL_ITEM = re.compile("[^ \t]+[ \t]+[^ \t]+[ \t]+(-?[0-9]{1,5})[ \t]+(-?[0-9]{1,5})"
                       + f"[ \t]+({DECIMAL_NUMBER.pattern})" * 7 + "[ \t]+([^ \t]+)")


def _wpl_item_fields(path: Path, number: int, line: str) -> tuple[int, int, list[float], str]:
    """Frame, command, p1..p4, lat, lon, alt and autocontinue of the item on line ``number`` (``line`` stripped of
    spaces and tabs), or the one line refusing it."""
    m = _WPL_ITEM.fullmatch(line)
    if m is not None:
        return int(m[1]), int(m[2]), [float(v) for v in m.group(3, 4, 5, 6, 7, 8, 9)], m[10]
    fields = _FIELD_GAP.split(line)
    if len(fields) != 12:
        raise ContactError(f"{brief(path)}:{number}: expected 12 tab-separated fields (index, current, frame, "
                           f"command, p1..p4, lat, lon, alt, autocontinue), got {len(fields)}")
    try:
        if not all(is_decimal(v, 5, signed=True) for v in fields[2:4]):
            raise ValueError
        frame, command = int(fields[2]), int(fields[3])
    except ValueError:
        raise ContactError(f"{brief(path)}:{number}: frame and command must be integers") from None
    try:
        params = [decimal_number(v) for v in fields[4:11]]
    except ValueError:
        raise ContactError(f"{brief(path)}:{number}: p1..p4, lat, lon, alt must be numbers") from None
    return frame, command, params, fields[11]


def _read_wpl(path: Path, text: str) -> tuple[tuple[float, float, float], None, list[_Item]]:
    lines = text_lines(text)  # numbered as an editor shows them; fields split at spaces and tabs only
    first = next((n for n, line in enumerate(lines) if line.strip(_BLANK)), None)
    if first is None or lines[first].strip(_BLANK) != "QGC WPL 110":
        got = lines[first].strip(_BLANK)[:40] if first is not None else "an empty file"
        raise ContactError(f"{brief(path)}: expected a first line 'QGC WPL 110' (a Mission Planner / QGroundControl "
                           f"waypoint file), got {got!r}")
    home = None
    items: list[_Item] = []
    for n in range(first + 1, len(lines)):
        line = lines[n].strip(_BLANK)
        if not line or line.startswith("#"):
            continue
        frame, command, params, autocontinue = _wpl_item_fields(path, n + 1, line)
        if home is None:  # the first item is the home position
            home = (params[4], params[5], params[6])
            continue
        where = f"line {n + 1}"
        _check_item_count(path, where, len(items))
        items.append(_Item(where, command, frame, params, stops=autocontinue in ("0", "0.0")))
    if home is None:
        raise ContactError(f"{brief(path)}: no items (expected the home position on the line after 'QGC WPL 110')")
    return home, None, items


def _check_speed(path: Path, where: str, speed: float) -> None:
    if not MIN_SPEED_M_S <= speed <= MAX_SPEED_M_S:
        raise ContactError(f"{brief(path)}: {where}: expected a speed of {MIN_SPEED_M_S:g}..{MAX_SPEED_M_S:g} m/s, "
                           f"got {speed}")


def read_mission(path: str | Path, default_speed_m_s: float) -> tuple[tuple[float, float, float], list[tuple]]:
    """Home (lat, lon, alt m) and the flight of one mission file: a list of
    ``(lat, lon, alt m, speed m/s, hold s, where)`` targets in flight order, starting at home."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in MISSION_SUFFIXES:  # a name as typed in the scenario, not a file read: cut when long
        raise ContactError(f"{brief(path, 100, keep_end=40)}: {FILE_KINDS}")
    text = read_text_file(path, ContactError, "mission file", MAX_MISSION_BYTES)
    home, speed, items = (_read_plan if suffix == ".plan" else _read_wpl)(path, text)
    where_home = "mission.plannedHomePosition" if suffix == ".plan" else "home (first item)"
    check_position(path, where_home, *home)
    speed = speed or default_speed_m_s
    targets: list[tuple] = [(home[0], home[1], home[2], speed, 0.0, where_home)]
    stops = [it.where for it in items[:-1] if it.stops]  # the last item ends the mission either way
    if stops:
        log.warning("%s: %s%s: autocontinue is off; PX4 would hold there until told to go on, ArduPilot ignores "
                    "it: flown on without a stop, as ArduPilot flies it", brief(path), stops[0],
                    f" and {len(stops) - 1} more item(s)" if len(stops) > 1 else "")
    for it in items:
        p = it.params
        if it.command == DO_CHANGE_SPEED:
            if p[1] > 0:  # -1 / 0: no change
                _check_speed(path, f"{it.where} (change-speed p2)", p[1])
                speed = p[1]
            elif math.isnan(p[1]):
                raise ContactError(f"{brief(path)}: {it.where}: change-speed p2 (speed) must be a number")
            continue
        if _skipped(it.command):
            continue
        if it.command not in MOVING:
            raise ContactError(f"{brief(path)}: {it.where}: unsupported command {it.command} ({_SUPPORTED})")
        name = MOVING[it.command]
        cur = targets[-1]
        if it.command == NAV_RETURN_TO_LAUNCH:
            targets.append((home[0], home[1], cur[2], speed, 0.0, it.where))
            targets.append((home[0], home[1], home[2], speed, 0.0, it.where))
            continue
        if it.frame not in FRAMES:
            raise ContactError(f"{brief(path)}: {it.where}: {name} in unsupported frame {it.frame} (supported: 0 and 5 "
                               "absolute altitude, 3 and 6 altitude relative to home)")
        alt = p[6] + (home[2] if FRAMES[it.frame] else 0.0)
        if it.command == NAV_TAKEOFF:
            check_position(path, it.where, home[0], home[1], alt)
            targets.append((home[0], home[1], alt, speed, 0.0, it.where))
        elif it.command == NAV_LAND:
            lat, lon = (cur[0], cur[1]) if p[4] == 0 and p[5] == 0 else (p[4], p[5])
            check_position(path, it.where, lat, lon, cur[2])
            targets.append((lat, lon, cur[2], speed, 0.0, it.where))
            targets.append((lat, lon, home[2], speed, 0.0, it.where))
        else:
            check_position(path, it.where, p[4], p[5], alt)
            hold = 0.0 if math.isnan(p[0]) else p[0]
            if not 0.0 <= hold <= MAX_HOLD_S:
                raise ContactError(f"{brief(path)}: {it.where}: {name} hold time p1 must be 0..{MAX_HOLD_S:g} s, got "
                                   f"{hold}")
            targets.append((p[4], p[5], alt, speed, hold, it.where))
    return home, targets


def _drone_name(path: Path) -> str:
    """A mission, GPX, .tlog or .bin file names its drone by its stem, a positions.jsonl by its folder."""
    name = path.parent.name if path.suffix.lower() == ".jsonl" else path.stem
    if not header_name_ok(name):
        after = "folder" if path.suffix.lower() == ".jsonl" else "file"
        raise ContactError(f"{brief(path)}: a drone is named after its {after}, so the name {name!r} must have "
                           "single spaces between words (no leading, trailing or other whitespace)")
    return name


def _timed_mission(path: Path, name: str, targets: list[tuple], origin: tuple[float, float, float]) -> Waypoints:
    lat, lon, alt = (np.array([t[k] for t in targets]) for k in range(3))
    xyz = enu_km(lat, lon, alt, origin)
    check_local(path, xyz, [t[5] for t in targets], origin)
    # Each leg's length from the target before it, all at once: a stack of 1 x 3 by 3 x 1 products takes the
    # dot product np.linalg.norm takes of each (the same bits); one call a leg took most of a 100,000-item
    # mission's time. A leg from a target passed over (within 1e-9 km of the one before it) is measured
    # from the last target flown to, as it is flown.
    step = np.diff(xyz, axis=0)
    legs = np.sqrt((step[:, None, :] @ step[:, :, None]).ravel()).tolist()
    ts, at = [0.0], [0]  # the times and the targets' indices of the waypoints
    t = 0.0
    for k in range(1, len(targets)):
        _, _, _, speed, hold, _ = targets[k]
        d = legs[k - 1] if at[-1] == k - 1 else float(np.linalg.norm(xyz[k] - xyz[at[-1]]))
        if d > 1e-9:
            t += max(d * 1000.0 / speed, 1e-3)
            ts.append(t)
            at.append(k)
        if hold >= 1e-3:
            t += hold
            ts.append(t)
            at.append(k)
    return Waypoints(name, np.array(ts), xyz[at])


def mission_waypoints(path: str | Path, origin: tuple[float, float, float] | None,
                      default_speed_m_s: float) -> tuple[Waypoints, tuple[float, float, float]]:
    """One mission file as :class:`~contact_sim.drones.Waypoints` named after the file's stem,
    in the ENU frame about ``origin`` (the mission's home when None), and the origin used."""
    path = Path(path)
    name = _drone_name(path)
    home, targets = read_mission(path, default_speed_m_s)
    origin = home if origin is None else origin
    return _timed_mission(path, name, targets, origin), origin


def read_missions(paths: Sequence[str | Path], origin: tuple[float, float, float] | None,
                  default_speed_m_s: float, start: _dt.datetime | None = None
                  ) -> tuple[list[Waypoints], _dt.datetime | None]:
    """One drone per mission or track file (named after a file's stem, a positions.jsonl's folder; the
    pieces of one folder's rotated position log given together are one drone, :func:`contact_sim.tracks.drone_files`)
    and the UTC instant of t = 0: ``start``, else the earliest time of the tracks (None without
    any). The origin is ``origin`` or, when None, the first file's home (a track's first point)."""
    read: list[tuple[Path, str, Any, bool]] = []
    seen: dict[str, Path] = {}
    for p, pieces in drone_files([Path(p) for p in paths]):
        name = _drone_name(pieces[0])
        if name in seen:
            named = "its folder" if pieces[0].suffix.lower() == ".jsonl" else "the file's stem"
            first, again = (brief(q, 120, keep_end=40) for q in (pieces[0], seen[name]))  # long names cut
            joined = " (a folder's positions.jsonl and positions.<n>.jsonl are one drone's, joined)" \
                if named == "its folder" else ""
            raise ContactError(f"{first}: drone name {shown(name, 40)} ({named}) is also that of {again}; drone names "
                               f"must be unique{joined}")
        seen[name] = p
        is_track = pieces[0].suffix.lower() in TRACK_SUFFIXES
        if is_track:
            points = read_track(p) if len(pieces) == 1 else joined_position_log(p, pieces)
            home = points[0][1:4]
        else:
            home, points = read_mission(p, default_speed_m_s)
        origin = home if origin is None else origin
        read.append((p, name, points, is_track))
    tracks = [pts for _, _, pts, is_track in read if is_track]
    epoch = start if start is not None or not tracks else min(pts[0][0] for pts in tracks)
    out = [timed_track(p, name, pts, origin, epoch) if is_track else _timed_mission(p, name, pts, origin)
           for p, name, pts, is_track in read]
    return out, epoch
