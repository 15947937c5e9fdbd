"""Contact simulation: line of sight, contact windows, link capacity, contact plans.

Torch-free. Satellites come from :mod:`orbits`; drones from waypoint files or
a random-waypoint model; both go through the same window finder.

Typical use::

    from contact_sim import load_contact_scenario, compute_contacts
    plan = compute_contacts(load_contact_scenario("examples/leo_contacts.toml"))
    plan.deliverable(node=3, round=0, size_bytes=2_000_000)
"""

from .drones import (Waypoints, drone_trajectories, random_waypoints, read_waypoints_csv,
                     write_waypoints_csv)
from .czml import czml_packets, write_czml
from .dtn import format_ion, hdtn_contacts, parse_hdtn, parse_ion, read_hdtn, read_ion, read_plan, write_hdtn, write_ion
from .energy import Battery, EnergyModel
from .errors import ContactError
from .geometry import (DEFAULT_GRAZING_KM, EARTH_RADIUS_KM, elevation_deg, line_of_sight,
                       los_limit_km, max_los_range_km, range_km, segment_clearance_km, space_visible)
from .link import LinkModel
from .plan import ContactPlan, Transfer
from .scenario import (RESERVED_TABLES, ContactScenario, build_constellation, build_trajectories,
                       compute_contacts, load_contact_scenario, load_plan_file, parse_contact_scenario,
                       plan_from_trajectories, round_boundaries)
from .trajectory import GroundStation, Trajectories, satellite_trajectories, time_grid
from .windows import LinkGeometry, Window, WindowTable, find_windows, windows_from_samples

__all__ = [
    "DEFAULT_GRAZING_KM", "EARTH_RADIUS_KM", "RESERVED_TABLES", "ContactError", "ContactPlan",
    "ContactScenario", "GroundStation", "LinkGeometry", "LinkModel", "Trajectories", "Transfer",
    "Waypoints", "Window", "WindowTable", "build_constellation", "build_trajectories",
    "compute_contacts", "drone_trajectories", "elevation_deg", "find_windows", "line_of_sight",
    "load_contact_scenario", "los_limit_km", "max_los_range_km", "parse_contact_scenario",
    "plan_from_trajectories", "random_waypoints", "range_km", "read_waypoints_csv",
    "round_boundaries", "satellite_trajectories", "segment_clearance_km", "space_visible",
    "time_grid", "windows_from_samples", "write_waypoints_csv",
    "Battery", "EnergyModel", "czml_packets", "write_czml", "format_ion", "hdtn_contacts", "load_plan_file", "parse_hdtn", "parse_ion", "read_hdtn", "read_ion", "read_plan", "write_hdtn", "write_ion",
]
