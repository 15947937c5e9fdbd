"""Drone missions as planned in QGroundControl or Mission Planner, turned into timed waypoints.

Two file kinds, told apart by their name's ending:

- ``.plan``: QGroundControl's JSON (``"fileType": "Plan"``; ``mission.items`` of
  ``SimpleItem`` entries, ``command``, ``frame`` and ``params`` [p1, p2, p3, p4,
  lat, lon, alt]; ``mission.plannedHomePosition`` [lat, lon, alt]; survey and
  corridor-scan ``ComplexItem`` entries are read from the waypoints QGroundControl
  computed and stored with them, ``TransectStyleComplexItem.Items``);
- ``.waypoints``: the text format QGroundControl and Mission Planner both write,
  first line ``QGC WPL 110``, then one item a line with 12 tab-separated fields
  (index, current, frame, command, p1..p4, lat, lon, alt, autocontinue); the
  first item is the home position.

Geodetic positions become the drones' flat East-North-Up frame (km) about an
origin (the scenario's ``origin_lat_deg``/``origin_lon_deg``/``origin_alt_m``, else
the first mission's home), through WGS-84 Earth-fixed coordinates
(:func:`orbits.ground_points_itrs`, Skyfield). Altitudes of frame 3 are above home,
of frame 0 above mean sea level, like the home altitude.

Each drone stands at home at t = 0; takeoff (22) climbs straight up from home;
waypoints (16) and loiter-for-time items (19) are flown to in straight legs,
then held for their p1 seconds; return-to-launch (20) flies back over home at
the current altitude and descends to it; land (21) descends to home's altitude
at the item's position (its current one when the item gives 0, 0). Legs take
their 3-D length over the speed: the plan's ``hoverSpeed`` (``cruiseSpeed``
for a fixed-wing plan, ``vehicleType`` 1), changed by DO_CHANGE_SPEED (178)
items' p2, else the scenario's default. After its last item a drone hovers.
Commands that neither move the drone nor delay it (camera, gimbal, servo,
relay and other DO_ commands) are skipped; any other command is refused, as are
frames other than 0/3 (and their _INT twins 5/6) for moving items.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from orbits import ground_points_itrs
from swarmbase.tomlcheck import read_text_file, shown

from .drones import MAX_LOCAL_KM, Waypoints
from .dtn import header_name_ok
from .errors import ContactError

#: Larger mission files are refused unread (bytes).
MAX_MISSION_BYTES = 16 * 1024 * 1024
#: Flight speeds a mission may set (m/s).
MIN_SPEED_M_S, MAX_SPEED_M_S = 0.01, 1000.0
#: Longest hold at a waypoint (s): 30 days.
MAX_HOLD_S = 30 * 86400.0

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
              "(camera, gimbal, servo ...), camera commands 530..532, 2000..2001, 2500..2501")


def _skipped(command: int) -> bool:
    """Commands that neither move the drone nor change its timing."""
    return ((176 <= command <= 252 and command not in _NOT_SKIPPED)
            or 530 <= command <= 532 or 2000 <= command <= 2001 or 2500 <= command <= 2501)


def enu_km(lat_deg: Sequence[float], lon_deg: Sequence[float], alt_m: Sequence[float],
           origin: tuple[float, float, float]) -> np.ndarray:
    """East-North-Up km of WGS-84 points about ``origin`` (lat deg, lon deg, alt m), shape ``(n, 3)``.

    Example:
        >>> enu_km([0.0], [90.0], [0.0], (0.0, 0.0, 0.0)).round(3).tolist()
        [[6378.137, 0.0, -6378.137]]
    """
    xyz = ground_points_itrs(lat_deg, lon_deg, alt_m)
    x0 = ground_points_itrs([origin[0]], [origin[1]], [origin[2]])[0]
    lat, lon = math.radians(origin[0]), math.radians(origin[1])
    sl, cl, sp, cp = math.sin(lon), math.cos(lon), math.sin(lat), math.cos(lat)
    rot = np.array([[-sl, cl, 0.0], [-sp * cl, -sp * sl, cp], [cp * cl, cp * sl, sp]])
    return (xyz - x0) @ rot.T


class _Item:
    """One mission item as both formats carry it; ``where`` names it in messages."""

    __slots__ = ("where", "command", "frame", "params")

    def __init__(self, where: str, command: int, frame: int, params: list[float]) -> None:
        self.where, self.command, self.frame, self.params = where, command, frame, params


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
            if not isinstance(inner, dict) or not isinstance(inner.get("Items"), list):
                raise ContactError(
                    f"{path}: {here}: complex item {shown(obj.get('complexItemType'))} holds no computed waypoints "
                    "(TransectStyleComplexItem.Items); only surveys and corridor scans saved by "
                    "QGroundControl carry them")
            yield from _plan_items(path, inner["Items"], f"{here}.Items", nested=True)
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
        yield _Item(here, command, frame, values)


def _read_plan(path: Path, text: str) -> tuple[tuple[float, float, float], float | None, list[_Item]]:
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise ContactError(f"{path}: not a QGroundControl plan (invalid JSON: {exc})") from None
    except RecursionError:
        raise ContactError(f"{path}: not a QGroundControl plan (JSON nested too deeply)") from None
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
        items.append(_Item(where, command, frame, params))
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
    if suffix not in (".plan", ".waypoints"):
        raise ContactError(f"{path}: expected a QGroundControl .plan or a QGC WPL 110 .waypoints file")
    text = read_text_file(path, ContactError, "mission file", MAX_MISSION_BYTES)
    home, speed, items = (_read_plan if suffix == ".plan" else _read_wpl)(path, text)
    where_home = "mission.plannedHomePosition" if suffix == ".plan" else "home (first item)"
    _check_position(path, where_home, *home)
    speed = speed or default_speed_m_s
    targets: list[tuple] = [(home[0], home[1], home[2], speed, 0.0, where_home)]
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


def mission_waypoints(path: str | Path, origin: tuple[float, float, float] | None,
                      default_speed_m_s: float) -> tuple[Waypoints, tuple[float, float, float]]:
    """One mission file as :class:`~contact_sim.drones.Waypoints` named after the file's stem,
    in the ENU frame about ``origin`` (the mission's home when None), and the origin used."""
    path = Path(path)
    if not header_name_ok(path.stem):
        raise ContactError(f"{path}: a drone is named after its mission file, so the name {path.stem!r} must have "
                           "single spaces between words (no leading, trailing or other whitespace)")
    home, targets = read_mission(path, default_speed_m_s)
    origin = home if origin is None else origin
    lat, lon, alt = (np.array([t[k] for t in targets]) for k in range(3))
    xyz = enu_km(lat, lon, alt, origin)
    far = np.flatnonzero(~(np.abs(xyz).max(axis=1) <= MAX_LOCAL_KM))
    if far.size:
        raise ContactError(f"{path}: {targets[far[0]][5]}: lies more than {MAX_LOCAL_KM:g} km from the drones' "
                           f"origin ({origin[0]:g}, {origin[1]:g}); the local frame is flat")
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
    return Waypoints(path.stem, np.array(ts), np.array(ps)), origin


def read_missions(paths: Sequence[str | Path], origin: tuple[float, float, float] | None,
                  default_speed_m_s: float) -> list[Waypoints]:
    """One drone per mission file (named after the file's stem); the origin is ``origin`` or,
    when None, the first mission's home."""
    out: list[Waypoints] = []
    seen: dict[str, Path] = {}
    for p in paths:
        p = Path(p)
        if p.stem in seen:
            raise ContactError(f"{p}: drone name {p.stem!r} (the file's stem) is also that of {seen[p.stem]}; "
                               "drone names must be unique")
        seen[p.stem] = p
        w, origin = mission_waypoints(p, origin, default_speed_m_s)
        out.append(w)
    return out
