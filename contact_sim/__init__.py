"""Contact simulation: line of sight, contact windows, link capacity, contact plans.

Torch-free. Satellites come from :mod:`orbits`; drones from waypoint files,
QGroundControl / Mission Planner missions or a random-waypoint model; both go
through the same window finder.

Typical use::

    from contact_sim import load_contact_scenario, compute_contacts
    plan = compute_contacts(load_contact_scenario("examples/leo_contacts.toml"))
    plan.deliverable(node=3, round=0, size_bytes=2_000_000)

The names below are imported from their modules when first used (PEP 562), so
``import contact_sim`` (and ``from contact_sim.errors import ContactError``, as
every ``fol`` command does to catch user errors) does not load numba and scipy
before a window is searched: ``fol --help`` and ``fol agent ctl`` start at once.
"""

from __future__ import annotations

import importlib
from typing import Any

#: exported name -> the module of this package that defines it
_EXPORTS: dict[str, str] = {
    **dict.fromkeys([
        "Waypoints", "drone_trajectories", "random_waypoints", "read_waypoints_csv", "write_waypoints_csv"],
        "drones"),
    **dict.fromkeys([
        "czml_packets", "write_czml"],
        "czml"),
    **dict.fromkeys([
        "format_ion", "hdtn_contacts", "parse_hdtn", "parse_ion", "read_hdtn", "read_ion", "read_plan",
        "write_hdtn", "write_ion"],
        "dtn"),
    **dict.fromkeys([
        "Battery", "EnergyModel"],
        "energy"),
    **dict.fromkeys([
        "ContactError"],
        "errors"),
    **dict.fromkeys([
        "DEFAULT_GRAZING_KM", "EARTH_RADIUS_KM", "elevation_deg", "line_of_sight", "los_limit_km",
        "max_los_range_km", "range_km", "segment_clearance_km", "space_visible"],
        "geometry"),
    **dict.fromkeys([
        "LinkModel"],
        "link"),
    **dict.fromkeys([
        "enu_km"],
        "flightfiles"),
    **dict.fromkeys([
        "read_missions"],
        "missions"),
    **dict.fromkeys([
        "ContactPlan", "Transfer"],
        "plan"),
    **dict.fromkeys([
        "RESERVED_TABLES", "ContactScenario", "build_constellation", "build_trajectories",
        "compute_contacts", "load_contact_scenario", "load_plan_file", "parse_contact_scenario",
        "plan_from_trajectories", "round_boundaries"],
        "scenario"),
    **dict.fromkeys([
        "GroundStation", "Trajectories", "satellite_trajectories", "time_grid"],
        "trajectory"),
    **dict.fromkeys([
        "LinkGeometry", "Window", "WindowTable", "find_windows", "windows_from_samples"],
        "windows"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # once loaded, a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
