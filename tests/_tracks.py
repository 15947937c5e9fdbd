"""Recorded-track fixtures shared by the tests of the binary track readers (``.tlog``,
DataFlash ``.bin``): the same flight written as a GPX track, and a drone scenario that
replays a list of track files, pymavlink made unimportable, and the check that a read leaves no
reference cycle behind."""

from __future__ import annotations

import datetime as _dt
import gc
import sys
from pathlib import Path


def write_gpx(path: Path, t0: _dt.datetime, points) -> Path:
    """``points`` ``(seconds after t0, lat_deg, lon_deg, ele_m)`` as a GPX 1.1 track, times to the ms."""
    pts = "".join(f'<trkpt lat="{lat}" lon="{lon}"><ele>{ele}</ele><time>'
                  f'{(t0 + _dt.timedelta(seconds=t)).isoformat(timespec="milliseconds").replace("+00:00", "Z")}'
                  f"</time></trkpt>" for t, lat, lon, ele in points)
    path.write_text('<?xml version="1.0"?>\n<gpx version="1.1" creator="t" xmlns="http://www.topografix.com/GPX/1/1">'
                    f"<trk><trkseg>{pts}</trkseg></trk></gpx>\n")
    return path


def drone_scenario(tmp_path: Path, missions_list: str) -> Path:
    """A 200 s drone scenario (10 s steps, 0.5 km radio range) replaying ``missions_list`` (TOML)."""
    path = tmp_path / "s.toml"
    path.write_text(f"[drones]\nradio_range_km = 0.5\nmissions = {missions_list}\n[time]\nduration_s = 200.0\n"
                    "step_s = 10.0\n")
    return path


def block_pymavlink(monkeypatch) -> None:
    """Importing pymavlink (or any of its modules) raises ImportError for the rest of the test, as when
    the ``mavlink`` extra is not installed."""
    for name in [m for m in sys.modules if m == "pymavlink" or m.startswith("pymavlink.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "pymavlink", None)


def unreachable_after(read) -> int:
    """The objects ``read()`` (its result dropped) leaves unreachable in reference cycles, which only the
    cyclic collector frees: 0 when everything it made goes as it returns."""
    gc.collect()
    gc.disable()
    try:
        read()
        return gc.collect()
    finally:
        gc.enable()
