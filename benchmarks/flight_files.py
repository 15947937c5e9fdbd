"""Time and peak memory of reading the drone flight files of a scenario's ``missions`` list.

A file of about ``--mib`` MiB of each kind is generated in a temporary folder, a drone circling
at 5 fixes a second over Zurich:

* ``.tlog``: MAVLink 2 packets encoded by pymavlink, a HEARTBEAT, an ATTITUDE and a
  GLOBAL_POSITION_INT a fix, each after MAVProxy's 8-byte time (``contact_sim.tracks.read_track``);
* ``.bin``: an ArduPilot DataFlash log, ArduPilot 4.x's GPS message of two receivers and an ATT
  message a fix, after their FMT messages (``read_track``);
* ``.gpx``: a GPX 1.1 track, one ``trkpt`` with ``ele`` and ``time`` a fix (``read_track``);
* ``.jsonl``: a drone agent's ``positions.jsonl``, a line a fix as the agent writes it, the fix made
  by ``fol.agent.position.fix_from_message`` (``read_track``);
* ``.waypoints``: a ``QGC WPL 110`` mission, a waypoint a fix, at most the 100,000 items a mission
  may hold (``contact_sim.missions.read_mission``), so smaller than ``--mib`` past about 5 MiB;
* ``.plan``: a QGroundControl plan as QGroundControl saves one (its JSON indented by 4, keys sorted, each
  ``SimpleItem`` waypoint with ``Altitude``, ``AltitudeMode``, ``doJumpId`` ... beside ``params``), a
  waypoint a fix, at most the 100,000 items a mission may hold (``read_mission``);
* ``.csv``: a waypoint CSV of 20 drones written by ``contact_sim.drones.write_waypoints_csv``
  (``read_waypoints_csv``).

Each file is read ``--repeat`` times in a child process of its own (the modules of the reader,
pymavlink's among them, imported first); the best CPU time (user + system) and wall time of one read
and the child's peak resident set over all of them (``VmHWM`` of ``/proc/self/status``, the kernel's
record of its true peak; and that peak before the first read, its imports) are printed as a markdown
table with the file's size and the points or waypoints read.

Run from the repository root::

    python benchmarks/flight_files.py --mib 16
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import checked, comma_names, int_in, machine_line  # noqa: E402
from contact_sim.flightfiles import MAX_MISSION_BYTES  # noqa: E402
from contact_sim.missions import MAX_MISSION_ITEMS  # noqa: E402

#: Where the drone circles (lat, lon, alt m) and when it starts; 5 fixes a second.
HOME = (47.397, 8.545, 488.0)
T0 = _dt.datetime(2025, 6, 1, 10, 0, 0, tzinfo=_dt.timezone.utc)
STEP_S = 0.2
#: The largest file of a kind: the 16 MiB of a track or mission (the CSV may have 64 MiB; the same is used).
MAX_MIB = MAX_MISSION_BYTES / 2**20

#: The child's reads: it imports the reader's modules, reads the file ``repeat`` times and prints the points,
#: the best CPU and wall seconds of one read, its own peak resident kB (the kernel's ``VmHWM``, where Linux's
#: ``ru_maxrss`` keeps the parent's resident size when the child was forked from it) and that peak before the
#: first read (its imports).
_READ = """
import sys, time
from benchmarks._common import own_peak_kb as peak_kb
from contact_sim.tracks import read_track
from contact_sim.missions import read_mission
from contact_sim.drones import read_waypoints_csv
kind, path, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
if kind in ("tlog", "bin"):
    import pymavlink.dialects.v20.common, pymavlink.DFReader  # noqa: F401  (imported lazily by the reader)
read = {"waypoints": lambda p: read_mission(p, 5.0)[1], "plan": lambda p: read_mission(p, 5.0)[1],
        "csv": lambda p: [row for d in read_waypoints_csv(p) for row in d.t_s]}.get(kind, read_track)
imports_kb = peak_kb()
cpu = wall = float("inf")
for _ in range(repeat):
    c, w = time.process_time(), time.perf_counter()
    n = len(read(path))
    cpu, wall = min(cpu, time.process_time() - c), min(wall, time.perf_counter() - w)
print(n, cpu, wall, peak_kb(), imports_kb)
"""


def _circle(count: int) -> Iterator[tuple[float, float, float, float]]:
    """``count`` fixes ``(t s, lat_deg, lon_deg, alt_m)``: a 500 m circle at 100 m above home, one lap in 300 s."""
    for i in range(count):
        t = i * STEP_S
        a = 2 * math.pi * t / 300.0
        yield t, HOME[0] + 0.0045 * math.sin(a), HOME[1] + 0.0066 * math.cos(a), HOME[2] + 100.0 + 5 * math.sin(3 * a)


def _fill(path: Path, target_bytes: int, records: Callable[[int, float, float, float, float], bytes],
          head: bytes = b"", tail: bytes = b"", limit: int | None = None) -> int:
    """Write ``head``, the records of fix after fix while they fit in ``target_bytes`` (with ``tail``), then
    ``tail``; return the fixes written (at most ``limit``)."""
    out, size, count = [head], len(head) + len(tail), 0
    for t, lat, lon, alt in _circle(limit if limit is not None else 10**9):
        rec = records(count, t, lat, lon, alt)
        if size + len(rec) > target_bytes:
            break
        out.append(rec)
        size += len(rec)
        count += 1
    out.append(tail)
    path.write_bytes(b"".join(out))
    return count


def _unix_us(t: float) -> int:
    return round((T0.timestamp() + t) * 1e6)


def write_tlog(path: Path, target_bytes: int) -> int:
    from pymavlink.dialects.v20 import common as mav

    link = mav.MAVLink(None, srcSystem=1, srcComponent=1)

    def records(i: int, t: float, lat: float, lon: float, alt: float) -> bytes:
        us = _unix_us(t) & ~3  # MAVProxy keeps the link in the low two bits (0 here)
        beat = link.heartbeat_encode(2, 3, 0, 0, 4).pack(link)
        att = link.attitude_encode(round(t * 1000), 0.01, -0.02, 0.5, 0.0, 0.0, 0.1).pack(link)
        pos = link.global_position_int_encode(round(t * 1000), round(lat * 1e7), round(lon * 1e7), round(alt * 1000),
                                              round((alt - HOME[2]) * 1000), 120, -30, 0, 9000).pack(link)
        return b"".join(struct.pack(">Q", us - d) + bytes(p) for d, p in ((8000, beat), (4000, att), (0, pos)))

    return _fill(path, target_bytes, records)


_DF_HEAD = b"\xa3\x95"
#: ArduPilot 4.x's GPS and ATT messages (format characters, columns).
_DF_GPS = ("QBBIHBcLLeffffB", "TimeUS,I,Status,GMS,GWk,NSats,HDop,Lat,Lng,Alt,Spd,GCrs,VZ,Yaw,U")
_DF_ATT = ("QccccCCCC", "TimeUS,DesRoll,Roll,DesPitch,Pitch,DesYaw,Yaw,ErrRP,ErrYaw")


def write_dataflash(path: Path, target_bytes: int) -> int:
    from pymavlink.DFReader import FORMAT_TO_STRUCT

    def body(fmt: str) -> struct.Struct:
        return struct.Struct("<" + "".join(FORMAT_TO_STRUCT[c][0] for c in fmt))

    def fmt_message(mtype: int, name: str, fmt: str, columns: str) -> bytes:
        return _DF_HEAD + bytes([0x80]) + struct.pack("<BB4s16s64s", mtype, 3 + body(fmt).size, name.encode(),
                                                      fmt.encode(), columns.encode())

    gps, att = body(_DF_GPS[0]), body(_DF_ATT[0])
    head = b"".join((fmt_message(0x80, "FMT", "BBnNZ", "Type,Length,Name,Format,Columns"),
                     fmt_message(130, "GPS", *_DF_GPS), fmt_message(131, "ATT", *_DF_ATT)))
    gps_epoch = _dt.datetime(1980, 1, 6, tzinfo=_dt.timezone.utc)
    week, ms0 = divmod((T0 + _dt.timedelta(seconds=18) - gps_epoch) // _dt.timedelta(milliseconds=1), 604_800_000)

    def records(i: int, t: float, lat: float, lon: float, alt: float) -> bytes:
        us = 60_000_000 + round(t * 1e6)
        fixes = (_DF_HEAD + bytes([130]) + gps.pack(us, k, 3, ms0 + round(t * 1000), week, 14, 70,
                                                    round((lat + 1e-6 * k) * 1e7), round(lon * 1e7),
                                                    round(alt * 100), 5.2, 90.0, 0.0, 0.0, 1) for k in (0, 1))
        return b"".join(fixes) + _DF_HEAD + bytes([131]) + att.pack(us, 1, 1, -2, -2, 4500, 4500, 1, 1)

    return _fill(path, target_bytes, records, head=head)


def _iso(t: float) -> str:
    return (T0 + _dt.timedelta(seconds=t)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def write_gpx(path: Path, target_bytes: int) -> int:
    head = (b'<?xml version="1.0" encoding="UTF-8"?>\n<gpx version="1.1" creator="GPS logger" '
            b'xmlns="http://www.topografix.com/GPX/1/1">\n  <trk>\n    <name>bench</name>\n    <trkseg>\n')
    tail = b"    </trkseg>\n  </trk>\n</gpx>\n"

    def records(i: int, t: float, lat: float, lon: float, alt: float) -> bytes:
        return (f'      <trkpt lat="{lat:.7f}" lon="{lon:.7f}"><ele>{alt:.2f}</ele><time>{_iso(t)}</time>'
                "</trkpt>\n").encode()

    return _fill(path, target_bytes, records, head=head, tail=tail)


def write_position_log(path: Path, target_bytes: int) -> int:
    from pymavlink.dialects.v20 import common as mav

    from fol.agent.position import fix_from_message

    link = mav.MAVLink(None, srcSystem=1, srcComponent=1)

    def records(i: int, t: float, lat: float, lon: float, alt: float) -> bytes:
        msg = link.global_position_int_encode(round(t * 1000), round(lat * 1e7), round(lon * 1e7), round(alt * 1000),
                                              round((alt - HOME[2]) * 1000), 120, -30, 0, 9000)
        msg.pack(link)  # sets the source system the fix names
        when = T0.timestamp() + t
        entry = {"event": "sent" if i % 2 else "received", "peer": f"drone-{i % 7}", "model_id": f"{i:016x}",
                 "t": when, "position": fix_from_message(msg, received_at=when)}
        return (json.dumps(entry) + "\n").encode()

    return _fill(path, target_bytes, records)


def write_wpl(path: Path, target_bytes: int) -> int:
    """A QGC WPL 110 mission: home, then a waypoint a fix (at most the items a mission may hold)."""
    head = f"QGC WPL 110\n0\t1\t0\t16\t0\t0\t0\t0\t{HOME[0]}\t{HOME[1]}\t{HOME[2]}\t1\n".encode()

    def records(i: int, t: float, lat: float, lon: float, alt: float) -> bytes:
        return f"{i + 1}\t0\t3\t16\t0\t0\t0\t0\t{lat:.7f}\t{lon:.7f}\t{alt - HOME[2]:.2f}\t1\n".encode()

    return _fill(path, target_bytes, records, head=head, limit=MAX_MISSION_ITEMS)


def write_plan(path: Path, target_bytes: int) -> int:
    """A QGroundControl plan as QGroundControl saves one: home, then a waypoint a fix (at most the items a
    mission may hold), its JSON indented by 4 with the keys sorted (Qt's QJsonDocument writes them so)."""
    indent = " " * 12  # of mission.items' entries
    doc = {"fileType": "Plan", "geoFence": {"circles": [], "polygons": [], "version": 2},
           "groundStation": "QGroundControl",
           "mission": {"cruiseSpeed": 15, "firmwareType": 12, "globalPlanAltitudeMode": 1, "hoverSpeed": 5,
                       "items": ["ITEMS"], "plannedHomePosition": list(HOME), "vehicleType": 2, "version": 2},
           "rallyPoints": {"points": [], "version": 2}, "version": 1}
    head, tail = (json.dumps(doc, indent=4, sort_keys=True) + "\n").split('"ITEMS"')  # Qt ends it in a newline

    def records(i: int, t: float, lat: float, lon: float, alt: float) -> bytes:
        rel = round(alt - HOME[2], 2)
        item = {"AMSLAltAboveTerrain": None, "Altitude": rel, "AltitudeMode": 1, "autoContinue": True, "command": 16,
                "doJumpId": i + 1, "frame": 3, "params": [0, 0, 0, None, round(lat, 7), round(lon, 7), rel],
                "type": "SimpleItem"}
        return ((",\n" + indent if i else "") + json.dumps(item, indent=4, sort_keys=True).replace("\n", "\n" + indent)
                ).encode()

    return _fill(path, target_bytes, records, head=head.encode(), tail=tail.encode(), limit=MAX_MISSION_ITEMS)


def write_csv(path: Path, target_bytes: int) -> int:
    """A waypoint CSV of 20 drones (``write_waypoints_csv``), each flying the circle shifted east by its number."""
    import numpy as np

    from contact_sim.drones import Waypoints, write_waypoints_csv

    drones = 20
    per_drone = max(1, target_bytes // (drones * 40))  # a row is about 40 bytes: fitted below
    while True:
        t = np.arange(per_drone) * STEP_S
        a = 2 * np.pi * t / 300.0
        fleet = [Waypoints(f"drone-{k:02d}", t, np.stack([0.5 * np.cos(a) + k, 0.5 * np.sin(a), 0.1 + 0 * a], 1))
                 for k in range(drones)]
        write_waypoints_csv(path, fleet)
        size = path.stat().st_size
        if size <= target_bytes or per_drone == 1:
            return drones * per_drone
        per_drone = max(1, int(per_drone * target_bytes / size) - 1)


#: kind: (file name, what the docs call it, writer)
KINDS: dict[str, tuple[str, str, Callable[[Path, int], int]]] = {
    "tlog": ("flight.tlog", "MAVLink telemetry log", write_tlog),
    "bin": ("flight.bin", "DataFlash log", write_dataflash),
    "gpx": ("track.gpx", "GPX track", write_gpx),
    "jsonl": ("positions.jsonl", "agent position log", write_position_log),
    "waypoints": ("mission.waypoints", "QGC WPL mission", write_wpl),
    "plan": ("mission.plan", "QGroundControl plan", write_plan),
    "csv": ("drones.csv", "waypoint CSV", write_csv),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=checked(float, lambda v: 0 < v <= MAX_MIB, f"a size in MiB in (0, {MAX_MIB:g}]"),
                    default=MAX_MIB, help=f"size of each generated file in MiB (default {MAX_MIB:g}, the limit)")
    ap.add_argument("--kinds", type=comma_names(list(KINDS), unique=True), default=",".join(KINDS),
                    help=f"comma-separated kinds of file (default all: {','.join(KINDS)})")
    ap.add_argument("--repeat", type=int_in(1, 20), default=3, help="reads of each file; the best is shown (default 3)")
    args = ap.parse_args(argv)
    root = Path(__file__).resolve().parents[1]
    print(f"| file | size MiB | points | CPU s (best of {args.repeat}) | wall s (best of {args.repeat}) "
          "| peak resident MB | of which imports |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.kinds.split(","):
            name, what, write = KINDS[kind]
            path = Path(tmp) / name
            written = write(path, int(args.mib * 2**20))
            started = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", _READ, kind, str(path), str(args.repeat)],
                                  capture_output=True, text=True, cwd=root)
            if done.returncode:
                print(f"{kind}: the read failed after {time.perf_counter() - started:.1f} s: "
                      f"{done.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
                return 1
            points, cpu, wall, peak_kb, imports_kb = done.stdout.split()
            if int(points) != written + (kind in ("waypoints", "plan")):  # a mission's targets start at its home
                print(f"{kind}: {written:,} fixes written, {int(points):,} read", file=sys.stderr)
                return 1
            print(f"| {what} ({name}) | {path.stat().st_size / 2**20:.1f} | {int(points):,} | {float(cpu):.2f} | "
                  f"{float(wall):.2f} | {int(peak_kb) / 1e3:.0f} | {int(imports_kb) / 1e3:.0f} |")
    print(machine_line())  # after the reads: torch in this process would count in a child's peak
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
