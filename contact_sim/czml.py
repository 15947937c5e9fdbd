"""CZML export of a satellite scenario, for Cesium (CesiumJS / Cesium ion).

One JSON array of packets:

* ``document``: CZML version, name and a clock over the scenario horizon;
* one packet per node: satellites as sampled Earth-fixed positions
  (``cartesian`` in metres, ``referenceFrame`` ``FIXED``, Lagrange
  interpolation) with a point, a label and a trailing path; ground stations
  as a fixed position with a billboard-free point and label;
* one packet per contact window: a polyline between the two nodes'
  positions (``references`` to ``<id>#position``), shown only during the
  window (``availability``), with the window's capacity in its description.

Positions come from the trajectories the window finder used (TEME rotated
into ITRS with Skyfield), so the picture and the contact plan agree. With the
polar motion and UT1 of ``[time] iers_finals`` (``polar_motion``), the rotation
back into ITRS is the one the ground stations were turned into TEME with, so
they are written at their surveyed points and the satellites in that ITRS.

CZML is plain JSON with a published schema; the packets here are a handful of
dictionaries, so no CZML library is needed (``czml3`` would only wrap the same
keys in classes).

Example:
    >>> from orbits import walker_delta
    >>> from contact_sim.scenario import parse_contact_scenario, plan_from_trajectories, build_trajectories
    >>> doc = {"constellation": {"kind": "walker-delta", "total": 4, "planes": 2, "altitude_km": 550.0,
    ...        "inclination_deg": 53.0, "epoch": "2025-01-01T00:00:00Z"},
    ...        "time": {"duration_s": 1800.0, "step_s": 60.0}, "link": {"max_range_km": 5000.0}}
    >>> scn = parse_contact_scenario(doc, ".")
    >>> traj = build_trajectories(scn)
    >>> packets = czml_packets(plan_from_trajectories(traj, scn), traj)
    >>> packets[0]["id"], packets[1]["id"], len(packets) == 1 + 4 + len(plan_from_trajectories(traj, scn).windows)
    ('document', 'node-0', True)
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path

import numpy as np

from orbits import teme_to_itrs, utc_text
from orbits.iers import PolarMotion
from swarmbase.fileio import atomic_write_text

from .errors import ContactError
from .plan import ContactPlan
from .trajectory import STATION, Trajectories

_SAT_COLOR = [255, 200, 40, 255]
_STATION_COLOR = [80, 220, 255, 255]
_LINK_COLOR = [120, 255, 120, 200]


def _iso(start: _dt.datetime, t_s: float) -> str:
    """``start`` + ``t_s`` as CZML's ISO-8601 UTC, cut to the millisecond, the year in four digits."""
    return utc_text(start + _dt.timedelta(seconds=float(t_s)), "milliseconds")


def czml_packets(plan: ContactPlan, traj: Trajectories, name: str = "fol-swarm contacts",
                 trail_s: float = 600.0, polar_motion: PolarMotion | None = None) -> list[dict]:
    """The CZML packets (document, one per node, one per window) as Python dicts; the Earth-fixed positions on
    Skyfield's ITRS with ``polar_motion`` when given (the one ``traj`` was built with), else without."""
    if traj.frame != "TEME" or traj.start is None:
        raise ContactError("CZML export needs a satellite scenario ([constellation]); drone positions are "
                           "in a local frame with no place on the globe")
    if list(traj.names) != list(plan.node_names):
        raise ContactError("CZML export: the plan and the trajectories have different nodes")
    start = traj.start
    horizon = float(traj.times_s[-1])
    interval = f"{_iso(start, 0.0)}/{_iso(start, horizon)}"
    packets: list[dict] = [{
        "id": "document", "name": name, "version": "1.0",
        "clock": {"interval": interval, "currentTime": _iso(start, 0.0), "multiplier": 60,
                  "range": "LOOP_STOP", "step": "SYSTEM_CLOCK_MULTIPLIER"},
    }]
    itrs_m = teme_to_itrs(traj.pos.transpose(1, 0, 2), start, traj.times_s, polar_motion) * 1e3  # (node, time, 3)
    # sample times count from the epoch as written (to the millisecond), not from a start between two
    epoch = _iso(start, 0.0)
    shift_s = (start - _dt.datetime.fromisoformat(epoch.replace("Z", "+00:00"))).total_seconds()
    sample_t = np.round(traj.times_s + shift_s, 6)
    for i, node in enumerate(traj.names):
        pid = f"node-{i}"
        if traj.kinds[i] == STATION:
            packets.append({
                "id": pid, "name": node, "availability": interval,
                "description": f"ground station {node}",
                "position": {"cartesian": [round(float(x), 1) for x in itrs_m[i, 0]]},
                "point": {"pixelSize": 10, "color": {"rgba": _STATION_COLOR}},
                "label": {"text": node, "font": "11pt sans-serif", "pixelOffset": {"cartesian2": [12, 0]},
                          "fillColor": {"rgba": _STATION_COLOR}},
            })
            continue
        samples = np.column_stack([sample_t, itrs_m[i].round(1)]).ravel().tolist()  # positions to 0.1 m
        packets.append({
            "id": pid, "name": node, "availability": interval,
            "description": f"satellite {node}",
            "position": {"epoch": epoch, "referenceFrame": "FIXED", "interpolationAlgorithm": "LAGRANGE",
                         "interpolationDegree": 5, "cartesian": samples},
            "point": {"pixelSize": 6, "color": {"rgba": _SAT_COLOR}},
            "label": {"text": node, "font": "9pt sans-serif", "pixelOffset": {"cartesian2": [8, 0]},
                      "show": False},
            "path": {"leadTime": 0, "trailTime": float(trail_s), "width": 1,
                     "material": {"solidColor": {"color": {"rgba": [255, 255, 255, 90]}}}},
        })
    w = plan.windows
    for k in range(len(w)):
        a, b = int(w.a[k]), int(w.b[k])
        packets.append({
            "id": f"window-{k}", "name": f"{plan.node_names[a]} - {plan.node_names[b]}",
            "availability": f"{_iso(start, w.t_start_s[k])}/{_iso(start, w.t_end_s[k])}",
            "description": (f"contact {w.t_start_s[k]:.1f}..{w.t_end_s[k]:.1f} s, "
                            f"{int(w.capacity_bytes[k])} bytes"
                            + ("", f", one way {plan.node_names[a]} -> {plan.node_names[b]}",
                               f", one way {plan.node_names[b]} -> {plan.node_names[a]}")[int(w.direction[k])]),
            "polyline": {"positions": {"references": [f"node-{a}#position", f"node-{b}#position"]},
                         "width": 1.5, "arcType": "NONE",
                         "material": {"solidColor": {"color": {"rgba": _LINK_COLOR}}}},
        })
    return packets


def write_czml(path: str | Path, plan: ContactPlan, traj: Trajectories, name: str = "fol-swarm contacts",
               polar_motion: PolarMotion | None = None) -> Path:
    """Write the CZML document of ``plan`` / ``traj`` to ``path`` (``polar_motion``: :func:`czml_packets`)."""
    path = Path(path)
    packets = czml_packets(plan, traj, name, polar_motion=polar_motion)
    atomic_write_text(path, json.dumps(packets, separators=(",", ":")))  # crash-safe
    return path
