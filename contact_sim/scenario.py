"""Scenario files (TOML): the contact-simulation sections and their validation.
Every field, with type, default and unit: ``docs/scenario.md``.

Sections owned here (every key checked; unknown keys are errors)::

    [constellation]            # or [drones], or [contacts] plan_file: exactly one of the three
    kind = "walker-delta"      # "walker-delta" | "walker-star" | "tle" | "omm" | "oem"
    total = 24                 # satellites (Walker)
    planes = 3
    phasing = 1
    altitude_km = 550.0
    inclination_deg = 53.0
    epoch = "2025-01-01T00:00:00Z"
    # tle_file = "shell.tle"   # kind = "tle" (path relative to the scenario file)
    # omm_file = "gp.json"     # kind = "omm": CCSDS OMM / CelesTrak GP as JSON, CSV, XML or KVN
    # oem_file = "eph.oem"     # kind = "oem": CCSDS OEM ephemerides (KVN or XML); time.start .. + duration_s inside them

    [drones]
    count = 12                 # random-waypoint model ...
    area_km = 5.0
    speed_m_s = 15.0
    altitude_km = 0.1
    pause_s = 0.0
    seed = 0
    radio_range_km = 1.5
    # waypoints_csv = "drone_waypoints.csv"   # ... or waypoints from a file
    # missions = ["a.plan", "b.waypoints"]     # ... or QGroundControl / Mission Planner missions
    # origin_lat_deg = 47.0                    # (their ENU origin; default: the first mission's home)
    # origin_lon_deg = 8.0
    # origin_alt_m = 0.0

    [[ground_stations]]        # optional, satellite scenarios only
    name = "Svalbard"
    lat_deg = 78.23
    lon_deg = 15.39
    elevation_m = 500.0

    [time]
    start = "2025-01-01T00:00:00Z"   # defaults to the constellation epoch
    duration_s = 86400.0
    step_s = 60.0              # screening grid; edges are refined inside cells
    # iers_finals = "finals2000A.all"  # [constellation] only: polar motion and UT1 (orbits.iers) for the ground
                                       # stations and OEM states in ITRF

    [link]
    model = "constant"         # or "shannon" (see contact_sim.link)
    rate_bps = 100e6
    max_range_km = 5000.0      # satellites; drones use drones.radio_range_km
    grazing_altitude_km = 80.0
    acquisition_s = 10.0
    min_elevation_deg = 10.0   # ground-station mask
    # tx_power_dbw, tx_gain_dbi, rx_gain_dbi, frequency_hz, bandwidth_hz,
    # noise_temperature_k, losses_db, max_rate_bps, station_max_range_km

    [rounds]
    count = 4                  # with duration_s (default: horizon / count)
    # duration_s = 21600.0
    # boundaries_s = [0, 3600, 7200]   # or explicit boundaries

    [energy]                   # optional: battery and solar power per node (off when absent)
    battery_wh = 40.0          # contact_sim.energy; sunlight from orbits.sunlight
    solar_w = 20.0
    idle_w = 5.0
    j_per_flop = 1e-9          # training
    j_per_byte = 1e-7          # sending a model
    initial_charge = 1.0       # fraction of the battery at the start
    sunlight_step_s = 60.0     # eclipse search grid (edges refined to 0.1 s); [constellation] only

    [contacts]                 # instead of [constellation]/[drones]: an imported plan
    plan_file = "plan.ion"     # ION contact-plan text, or HDTN JSON (.json; contact_sim.dtn); [time] duration_s
                               # required, [link] takes only acquisition_s (default 0 here)

Top-level tables owned by the learning side pass through untouched:
``scenario``, ``data``, ``models``, ``fol``, ``methods``, ``run``, ``output``.
Any other top-level key is an error. Relative paths resolve against the
scenario file's folder.
"""

from __future__ import annotations

import datetime as _dt
import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from orbits import (Constellation, Ephemeris, OrbitError, check_walker, orbital_planes, parse_utc, read_oem, read_omm,
                    read_tle, walker_delta, walker_star)
from orbits.iers import PolarMotion, read_iers_finals
from orbits.sunlight import check_sunlight_span, check_sunlight_steps, eclipse_intervals, ephemeris
from swarmbase.tomlcheck import Table, brief, check_name_length, is_finite_number, read_toml, shown
from swarmbase.units import format_count

from .drones import MAX_DRONES, MAX_LOCAL_KM, Waypoints, drone_trajectories, expected_turns, random_waypoints, read_waypoints_csv
from .dtn import read_plan
from .errors import ContactError
from .missions import MAX_SPEED_M_S, MIN_SPEED_M_S, read_missions
from .energy import Battery, EnergyModel
from .geometry import EARTH_RADIUS_KM, MAX_GRAZING_KM, MAX_RANGE_KM
from .link import MAX_RATE_BPS, SHANNON_RANGES, LinkModel
from .plan import ContactPlan, check_span_end
from .tracks import TRACK_SUFFIXES
from .trajectory import (GroundStation, Trajectories, check_trajectory_size, grid_samples, header_name_ok,
                         satellite_trajectories)
from .windows import LinkGeometry, find_windows

log = logging.getLogger(__name__)

#: Top-level tables reserved for the learning side (passed through unchecked).
RESERVED_TABLES = ("scenario", "data", "models", "fol", "methods", "run", "output")
#: Tables validated here.
CONTACT_TABLES = ("constellation", "drones", "ground_stations", "time", "link", "rounds", "contacts", "energy")

_CONSTELLATION_KEYS = {"kind", "total", "planes", "phasing", "altitude_km", "inclination_deg",
                       "epoch", "tle_file", "omm_file", "oem_file"}
#: ``[constellation]`` kinds read from a file, and the file each reads (``<kind>_file``).
FILE_KINDS = ("tle", "omm", "oem")
_DRONE_KEYS = {"count", "area_km", "speed_m_s", "altitude_km", "pause_s", "seed", "radio_range_km",
               "waypoints_csv", "missions", "origin_lat_deg", "origin_lon_deg", "origin_alt_m"}
_STATION_KEYS = {"name", "lat_deg", "lon_deg", "elevation_m"}
_TIME_KEYS = {"start", "duration_s", "step_s", "iers_finals"}
_LINK_KEYS = {"model", "rate_bps", "max_range_km", "grazing_altitude_km", "acquisition_s",
              "min_elevation_deg", "station_max_range_km", "tx_power_dbw", "tx_gain_dbi",
              "rx_gain_dbi", "frequency_hz", "bandwidth_hz", "noise_temperature_k", "losses_db",
              "max_rate_bps"}
#: ``[link]`` fields of the Shannon model only.
_SHANNON_KEYS = {"tx_power_dbw", "tx_gain_dbi", "rx_gain_dbi", "frequency_hz", "bandwidth_hz",
                 "noise_temperature_k", "losses_db"}
_ROUND_KEYS = {"count", "duration_s", "boundaries_s"}
#: Most rounds a scenario may define (each round keeps per-node state in the plan and the simulation).
MAX_ROUNDS = 10_000
_CONTACTS_KEYS = {"plan_file"}
_ENERGY_KEYS = {"battery_wh", "solar_w", "idle_w", "j_per_flop", "j_per_byte", "initial_charge", "sunlight_step_s"}


@dataclass
class ConstellationConfig:
    kind: str
    total: int | None = None
    planes: int | None = None
    phasing: int = 0
    altitude_km: float | None = None
    inclination_deg: float | None = None
    epoch: _dt.datetime | None = None
    tle_file: Path | None = None
    omm_file: Path | None = None
    oem_file: Path | None = None


@dataclass
class DroneConfig:
    radio_range_km: float
    count: int | None = None
    area_km: float = 5.0
    speed_m_s: float = 15.0
    altitude_km: float = 0.1
    pause_s: float = 0.0
    seed: int = 0
    waypoints_csv: Path | None = None
    missions: list[Path] | None = None
    origin: tuple[float, float, float] | None = None


@dataclass
class TimeConfig:
    start: _dt.datetime | None
    duration_s: float
    step_s: float = 60.0
    iers_finals: Path | None = None


@dataclass
class RoundConfig:
    count: int | None = None
    duration_s: float | None = None
    boundaries_s: list[float] | None = None


@dataclass
class ContactScenario:
    """A validated scenario (contact part) plus the learning side's tables, untouched."""

    path: Path | None
    base_dir: Path
    time: TimeConfig
    link: LinkModel
    geometry: LinkGeometry
    rounds: RoundConfig
    constellation: ConstellationConfig | None = None
    drones: DroneConfig | None = None
    ground_stations: list[GroundStation] = field(default_factory=list)
    reserved: dict[str, Any] = field(default_factory=dict)
    plan_file: Path | None = None
    energy: EnergyModel | None = None
    sunlight_step_s: float = 60.0
    #: ``time.iers_finals`` once read (:func:`load_polar_motion`).
    _polar_motion: PolarMotion | None = field(default=None, init=False, repr=False, compare=False)
    #: The drones of ``drones.waypoints_csv`` / ``drones.missions`` and t = 0's UTC instant once read, with the
    #: fields they were read with (:func:`_read_drone_files`): the check and the window search of one run read
    #: each file once.
    _drone_files: tuple[tuple, list[Waypoints], _dt.datetime | None] | None = field(
        default=None, init=False, repr=False, compare=False)
    #: The satellites of ``[constellation]`` once built, with the fields they were built with
    #: (:func:`build_constellation`): the check, the orbit partition, the trajectories and the batteries of one run
    #: build (or read the file of) them once.
    _satellites: tuple[tuple, Constellation | Ephemeris] | None = field(
        default=None, init=False, repr=False, compare=False)

    @property
    def kind(self) -> str:
        if self.plan_file is not None:
            return "plan"
        return "constellation" if self.constellation is not None else "drones"


# ---------------------------------------------------------------------------- field helpers

class _Table(Table):
    """:class:`swarmbase.tomlcheck.Table` raising :class:`ContactError`, plus UTC times."""

    def __init__(self, data: Any, where: str, allowed: set[str], source: str | None = None) -> None:
        super().__init__(data, where, allowed, error=ContactError, source=source)

    def time(self, key: str, required: bool = False) -> _dt.datetime | None:
        v = self.raw(key, None, required)
        if v is None:
            return None
        if not isinstance(v, (str, _dt.datetime)):
            # a bare TOML date or time of day reads as what is asked for: say what it lacks
            lacks = (f" (a TOML date, no time of day: write {v.isoformat()}T00:00:00Z, or quote the date)"
                     if isinstance(v, _dt.date) else " (a TOML time of day, no date)" if isinstance(v, _dt.time) else "")
            self.fail(key, f"expected an ISO-8601 UTC time string, got {shown(v)}{lacks}")
        try:  # a TOML date-time too: its offset may leave the calendar (0001-01-01T00:00:00+01:00)
            return parse_utc(v, field=f"{self.where}.{key}")
        except OrbitError as exc:
            self._raise(str(exc))


# ---------------------------------------------------------------------------- parsing

def parse_contact_scenario(data: dict, base_dir: str | Path, path: str | Path | None = None
                           ) -> ContactScenario:
    """Validate the contact sections of a parsed TOML document.

    ``base_dir`` resolves relative paths; ``path`` is only used in messages,
    every one of which names it first, as :func:`~swarmbase.tomlcheck.brief` writes it (escaped, a long
    path cut): ``<path>: <table>.<key>: ...``.
    """
    src = brief(path) if path is not None else "scenario"
    try:
        return _parse_contact_scenario(data, Path(base_dir), path, src)
    except ContactError as exc:
        if str(exc).startswith(f"{src}: "):
            raise
        raise ContactError(f"{src}: {exc}") from None


def _parse_contact_scenario(data: dict, base_dir: Path, path: str | Path | None, src: str) -> ContactScenario:
    if not isinstance(data, dict):
        raise ContactError(f"{src}: expected a TOML document (table)")
    for key in data:
        if key not in RESERVED_TABLES and key not in CONTACT_TABLES:
            raise ContactError(
                f"{src}: unknown top-level key {shown(key)} (contact tables: {', '.join(CONTACT_TABLES)}; "
                f"reserved: {', '.join(RESERVED_TABLES)})")
    has_c, has_d, has_p = "constellation" in data, "drones" in data, "contacts" in data
    if has_c + has_d + has_p != 1:
        raise ContactError(f"{src}: expected exactly one of [constellation], [drones] or [contacts] plan_file")

    constellation = drones = plan_file = None
    if has_p:
        plan_file = _Table(data["contacts"], "contacts", _CONTACTS_KEYS, src).path("plan_file", base_dir, required=True)
        if "ground_stations" in data:
            raise ContactError("ground_stations: not used with [contacts] plan_file (the plan names its nodes)")
        if "link" in data and set(data["link"]) - {"acquisition_s"}:
            extra = sorted(set(data["link"]) - {"acquisition_s"})[0]
            raise ContactError(f"link.{extra}: not used with [contacts] plan_file (rates come from the plan)")
    elif has_c:
        t = _Table(data["constellation"], "constellation", _CONSTELLATION_KEYS, src)
        kind = t.str("kind", required=True, choices=("walker-delta", "walker-star") + FILE_KINDS)
        if kind in FILE_KINDS:
            others = tuple(f"{k}_file" for k in FILE_KINDS if k != kind)
            for k in ("total", "planes", "phasing", "altitude_km", "inclination_deg", "epoch") + others:
                if t.has(k):
                    raise ContactError(f"constellation.{k}: not used with kind = '{kind}'")
            constellation = ConstellationConfig(kind, **{f"{kind}_file": t.path(f"{kind}_file", base_dir,
                                                                                 required=True)})
        else:
            for k in (f"{k}_file" for k in FILE_KINDS):
                if t.has(k):
                    raise ContactError(f"constellation.{k}: only used with kind = '{k[:3]}'")
            constellation = ConstellationConfig(
                kind, total=t.int("total", required=True, minimum=1),
                planes=t.int("planes", required=True, minimum=1),
                phasing=t.int("phasing", 0, minimum=0),
                altitude_km=t.num("altitude_km", required=True, positive=True),
                inclination_deg=t.num("inclination_deg", required=True),
                epoch=t.time("epoch", required=True))
            try:  # the ranges walker() takes (total, altitude, ...), checked before anything is sized or built
                check_walker(constellation.total, constellation.planes, constellation.phasing,
                             constellation.altitude_km, constellation.inclination_deg)
            except OrbitError as exc:
                raise ContactError(str(exc)) from None
    elif has_d:
        t = _Table(data["drones"], "drones", _DRONE_KEYS, src)
        drones = DroneConfig(
            radio_range_km=t.num("radio_range_km", required=True, positive=True, maximum=MAX_LOCAL_KM),
            count=t.int("count", None, minimum=1, maximum=MAX_DRONES),
            area_km=t.num("area_km", 5.0, positive=True, maximum=MAX_LOCAL_KM),
            speed_m_s=t.num("speed_m_s", 15.0, minimum=MIN_SPEED_M_S, maximum=MAX_SPEED_M_S),
            altitude_km=t.num("altitude_km", 0.1, minimum=-MAX_LOCAL_KM, maximum=MAX_LOCAL_KM),
            pause_s=t.num("pause_s", 0.0, nonneg=True),
            seed=t.int("seed", 0, minimum=0),
            waypoints_csv=t.path("waypoints_csv", base_dir),
            missions=t.path_list("missions", base_dir))
        given = [k for k in ("count", "waypoints_csv", "missions") if t.has(k)]
        if len(given) != 1:
            raise ContactError("drones: give exactly one of count (random waypoints), waypoints_csv or missions")
        if drones.count is None:
            for k in ("area_km", "pause_s", "seed", "altitude_km") + (("speed_m_s",) if drones.missions is None else ()):
                if t.has(k):
                    raise ContactError(f"drones.{k}: not used with {given[0]}")
        if drones.missions is None:
            for k in ("origin_lat_deg", "origin_lon_deg", "origin_alt_m"):
                if t.has(k):
                    raise ContactError(f"drones.{k}: only used with missions")
        elif t.has("origin_lat_deg") or t.has("origin_lon_deg") or t.has("origin_alt_m"):
            if not (t.has("origin_lat_deg") and t.has("origin_lon_deg")):
                raise ContactError("drones: give origin_lat_deg and origin_lon_deg together")
            drones.origin = (t.num("origin_lat_deg", minimum=-90.0, maximum=90.0),
                             t.num("origin_lon_deg", minimum=-180.0, maximum=360.0),
                             t.num("origin_alt_m", 0.0, minimum=-MAX_LOCAL_KM * 1000.0, maximum=MAX_LOCAL_KM * 1000.0))
        if drones.missions is not None and t.has("speed_m_s"):
            if all(Path(m).suffix.lower() in TRACK_SUFFIXES for m in drones.missions):  # it would be ignored
                raise ContactError("drones.speed_m_s: not used when every file of missions is a recorded track "
                                   f"({', '.join(TRACK_SUFFIXES)}: flown at its own times)")

    stations: list[GroundStation] = []
    gs = data.get("ground_stations", [])
    if not isinstance(gs, list):  # before its truth: ground_stations = 0 (or false, "", {}) was taken as none
        raise ContactError(f"ground_stations: expected an array of tables [[ground_stations]], got {shown(gs)}")
    if gs:
        if not has_c:
            raise ContactError("ground_stations: only supported with a [constellation]")
        first: dict[str, int] = {}  # each name's station: a dict, as a scenario may list tens of thousands
        for i, entry in enumerate(gs):
            st = _Table(entry, f"ground_stations[{i}]", _STATION_KEYS, src)
            lat = st.num("lat_deg", required=True)
            lon = st.num("lon_deg", required=True)
            if not -90 <= lat <= 90:
                raise ContactError(f"ground_stations[{i}].lat_deg: expected -90..90, got {lat}")
            if not -180 <= lon <= 360:
                raise ContactError(f"ground_stations[{i}].lon_deg: expected -180..360, got {lon}")
            name = st.str("name", f"GS-{i}")
            if not header_name_ok(name):  # what a plan's '# node N NAME KIND' header carries
                raise ContactError(f"ground_stations[{i}].name: expected a name with single spaces between words "
                                   f"(no leading, trailing or other whitespace), got {shown(name)}")
            check_name_length(name, f"ground_stations[{i}].name", ContactError)
            twin = first.setdefault(name, i)
            if twin != i:
                raise ContactError(f"ground_stations[{i}].name: {shown(name)} is already the name of "
                                   f"ground_stations[{twin}]; node names must be unique")
            stations.append(GroundStation(name, lat, lon, st.num("elevation_m", 0.0, minimum=-1000.0, maximum=10000.0)))

    if "time" not in data:
        raise ContactError(f"{src}: missing [time] table (start, duration_s, step_s)")
    t = _Table(data["time"], "time", _TIME_KEYS, src)
    start = t.time("start")
    if start is None and constellation is not None:
        start = constellation.epoch
    if start is None and constellation is not None and constellation.kind in FILE_KINDS:
        article = "a" if constellation.kind == "tle" else "an"
        raise ContactError(f"time.start: required with {article} {constellation.kind.upper()} constellation")
    duration_s = t.num("duration_s", required=True, positive=True)
    if plan_file is not None and t.has("step_s"):  # it would be ignored
        raise ContactError("time.step_s: not used with [contacts] plan_file (the plan lists the windows; "
                           "no grid is searched)")
    default_step = min(60.0, duration_s)  # a run shorter than a minute searches one cell, not a refused grid
    time = TimeConfig(start, duration_s, t.num("step_s", default_step, positive=True), t.path("iers_finals", base_dir))
    if time.iers_finals is not None and constellation is None:  # it would be ignored
        raise ContactError("time.iers_finals: only used with a [constellation] (polar motion turns the Earth-fixed "
                           "positions of satellites and ground stations; drones and the nodes of an imported plan "
                           "have none)")
    if time.step_s > time.duration_s:
        raise ContactError(f"time.step_s: {time.step_s} s exceeds time.duration_s ({time.duration_s} s)")
    # the start as the refusals name it: the constellation's epoch when the file gives no time.start
    start_field = "time.start" if t.has("start") else "time.start (default: constellation.epoch)"
    if start is not None:  # before anything adds the horizon to the start (the Sun's span of [energy])
        check_span_end(start, duration_s, "time.duration_s", start_field)

    lt = _Table(data.get("link", {}), "link", _LINK_KEYS, src)
    model_kw: dict[str, Any] = {"model": lt.str("model", "constant", choices=("constant", "shannon"))}
    for key in sorted(_SHANNON_KEYS) if model_kw["model"] == "constant" else ():
        if lt.has(key):  # the other model's field would be silently ignored
            raise ContactError(f"link.{key}: only used with model = 'shannon' (the constant model carries "
                               "rate_bps)")
    if model_kw["model"] == "shannon" and lt.has("rate_bps"):
        raise ContactError("link.rate_bps: not used with model = 'shannon' (the rate follows from the range; "
                           "max_rate_bps caps it)")
    for key in ("rate_bps", "max_rate_bps"):
        if lt.has(key):
            model_kw[key] = lt.num(key, positive=True, maximum=MAX_RATE_BPS)
    for key, (lo, hi) in SHANNON_RANGES.items():
        if lt.has(key):
            model_kw[key] = lt.num(key, minimum=lo, maximum=hi)
    if lt.has("acquisition_s"):
        model_kw["acquisition_s"] = lt.num("acquisition_s", nonneg=True)
    if plan_file is not None:
        model_kw = {"model": "plan", "acquisition_s": model_kw.get("acquisition_s", 0.0)}
    link = LinkModel(**model_kw)
    if plan_file is not None:
        # unused (the plan lists the windows); kept so every scenario has a geometry
        geometry = LinkGeometry(max_range_km=EARTH_RADIUS_KM * 1e3, occlusion=False)
    elif drones is not None:
        for key in ("max_range_km", "grazing_altitude_km", "min_elevation_deg", "station_max_range_km"):
            if lt.has(key):
                hint = " (use drones.radio_range_km)" if key == "max_range_km" else ""
                raise ContactError(f"link.{key}: not used in drone scenarios{hint}")
        geometry = LinkGeometry(max_range_km=drones.radio_range_km, occlusion=False)
    else:
        geometry = LinkGeometry(
            max_range_km=lt.num("max_range_km", required=True, positive=True, maximum=MAX_RANGE_KM),
            grazing_altitude_km=lt.num("grazing_altitude_km", 80.0, nonneg=True, maximum=MAX_GRAZING_KM),
            min_elevation_deg=lt.num("min_elevation_deg", 10.0),
            station_max_range_km=lt.num("station_max_range_km", None, positive=True, maximum=MAX_RANGE_KM))

    rt = _Table(data.get("rounds", {}), "rounds", _ROUND_KEYS, src)
    rounds = RoundConfig(rt.int("count", None, minimum=1), rt.num("duration_s", None, positive=True))
    if rounds.count is not None and rounds.count > MAX_ROUNDS:
        raise ContactError(f"rounds.count: expected at most {MAX_ROUNDS:,} rounds, got {shown(rounds.count)}")
    if rt.has("boundaries_s"):
        b = rt.data["boundaries_s"]
        if rounds.duration_s is not None:
            raise ContactError("rounds: give either duration_s or boundaries_s, not both")
        if not isinstance(b, list) or len(b) < 2 or not all(is_finite_number(x) for x in b):
            # NaN compares False, so it would pass every check below
            raise ContactError("rounds.boundaries_s: expected a list of at least two finite numbers (s)")
        if any(y <= x for x, y in zip(b, b[1:])):
            raise ContactError("rounds.boundaries_s: expected strictly increasing times")
        if b[0] < 0 or b[-1] > time.duration_s + 1e-9:
            raise ContactError(
                f"rounds.boundaries_s: expected times within 0..{time.duration_s} s (time.duration_s)")
        if len(b) - 1 > MAX_ROUNDS:
            raise ContactError(f"rounds.boundaries_s: expected at most {MAX_ROUNDS:,} rounds, got {len(b) - 1:,}")
        if rounds.count is not None and rounds.count != len(b) - 1:
            raise ContactError(
                f"rounds.count: {rounds.count} does not match {len(b) - 1} rounds in boundaries_s")
        rounds.boundaries_s = [float(x) for x in b]
    elif rounds.duration_s is not None:
        fit = np.floor(time.duration_s / rounds.duration_s + 1e-9)  # a float: 1e308 / 1e-10 s is no integer
        if rounds.count is None and fit > MAX_ROUNDS:
            raise ContactError(f"rounds.duration_s: {rounds.duration_s} s makes {format_count(fit)} rounds of "
                               f"time.duration_s, expected at most {MAX_ROUNDS:,}")
        n = rounds.count or int(fit)
        if n < 1 or n * rounds.duration_s > time.duration_s + 1e-6:
            raise ContactError(
                f"rounds: {n} rounds of {rounds.duration_s} s exceed time.duration_s ({time.duration_s} s)")
        rounds.count = n

    energy, sunlight_step_s = None, 60.0
    if "energy" in data:
        et = _Table(data["energy"], "energy", _ENERGY_KEYS, src)
        energy = EnergyModel(
            battery_wh=et.num("battery_wh", required=True, positive=True),
            solar_w=et.num("solar_w", required=True, nonneg=True),
            idle_w=et.num("idle_w", required=True, nonneg=True),
            j_per_flop=et.num("j_per_flop", 0.0, nonneg=True),
            j_per_byte=et.num("j_per_byte", 0.0, nonneg=True),
            initial_charge=et.num("initial_charge", 1.0, nonneg=True))
        if constellation is None and et.has("sunlight_step_s"):  # it would be ignored
            raise ContactError("energy.sunlight_step_s: only used with a [constellation] (drones and the nodes "
                               "of an imported plan have no orbit and are taken as always sunlit)")
        sunlight_step_s = et.num("sunlight_step_s", 60.0, positive=True)
        try:
            if constellation is not None:  # satellites' eclipses: a search grid and the Sun over the horizon
                check_sunlight_steps(time.duration_s, sunlight_step_s, "energy.sunlight_step_s")
                check_sunlight_span(time.start, time.duration_s, start_field)
        except OrbitError as exc:
            raise ContactError(str(exc)) from None

    reserved = {k: v for k, v in data.items() if k in RESERVED_TABLES}
    scenario = ContactScenario(Path(path) if path else None, base_dir, time, link, geometry, rounds,
                               constellation, drones, stations, reserved, plan_file, energy, sunlight_step_s)
    if plan_file is None:
        # the node count is known here for Walker shells and random-waypoint drones; files
        # (TLE, OMM, OEM, waypoints) are checked once read, still before anything is propagated
        known = constellation is not None and constellation.kind.startswith("walker")
        _check_grid(scenario, constellation.total + len(stations) if known else 1)
    return scenario


def _check_grid(scenario: ContactScenario, n_nodes: int, turns: float = 0.0) -> None:
    """Refuse a time grid whose contact search (trajectories, window search, ground stations' rotations)
    would be too large, before it is built.
    Random-waypoint drones add their expected waypoint times to the grid."""
    t, d = scenario.time, scenario.drones
    if d is not None and d.count is not None:
        n_nodes = d.count
        turns = expected_turns(d.count, d.area_km, d.speed_m_s, t.duration_s, d.pause_s)
    check_trajectory_size(grid_samples(t.duration_s, t.step_s) + turns, n_nodes, waypoint_times=turns,
                          stations=bool(scenario.ground_stations))


def _check_station_names(scenario: ContactScenario, constellation: Constellation) -> None:
    """A ground station may not share a satellite's name (names key the plan's nodes)."""
    sats = set(constellation.names)
    for i, station in enumerate(scenario.ground_stations):
        if station.name in sats:  # found once the satellites are read: the message names the file as the reader's do
            where = brief(scenario.path) if scenario.path else "scenario"
            raise ContactError(f"{where}: ground_stations[{i}].name: {station.name!r} is also the name of a "
                               "satellite; node names must be unique")


def load_contact_scenario(path: str | Path) -> ContactScenario:
    """Read and validate a scenario TOML file."""
    path = Path(path)
    data, _ = read_toml(path, ContactError, "scenario file")
    return parse_contact_scenario(data, path.resolve().parent, path)


def input_files(scenario: ContactScenario) -> dict[str, Path]:
    """The files the scenario reads, by field (``contacts.plan_file``, ``constellation.tle_file``,
    ``time.iers_finals``, ``drones.waypoints_csv``, ``drones.missions[1]``, ...); the fields not given
    are left out."""
    files: dict[str, Path | None] = {"contacts.plan_file": scenario.plan_file,
                                     "time.iers_finals": scenario.time.iers_finals}
    if scenario.constellation is not None:
        files |= {f"constellation.{k}_file": getattr(scenario.constellation, f"{k}_file") for k in FILE_KINDS}
    if scenario.drones is not None:
        files["drones.waypoints_csv"] = scenario.drones.waypoints_csv
        files |= {f"drones.missions[{k}]": path for k, path in enumerate(scenario.drones.missions or [])}
    return {key: Path(path) for key, path in files.items() if path is not None}


# ---------------------------------------------------------------------------- building

def round_boundaries(scenario: ContactScenario) -> np.ndarray:
    """Round boundaries (s from start); one round over the horizon by default."""
    r, horizon = scenario.rounds, scenario.time.duration_s
    if r.boundaries_s is not None:
        return np.asarray(r.boundaries_s, dtype=float)
    if r.duration_s is not None:
        return np.arange(r.count + 1) * r.duration_s
    n = r.count or 1
    return np.linspace(0.0, horizon, n + 1)


def load_polar_motion(scenario: ContactScenario) -> PolarMotion | None:
    """The polar motion and UT1 of ``[time] iers_finals`` (None without it), read once per scenario and checked
    to cover the horizon (``time.start`` .. ``+ duration_s``): an OEM's ITRF states are turned into TEME with it
    (:func:`build_constellation`), and the ground stations (:func:`build_trajectories`);
    ``fol contacts --export-orbits oem --oem-frame ITRF`` writes with it."""
    if scenario.time.iers_finals is None:
        return None
    if scenario._polar_motion is None:
        try:
            polar_motion = read_iers_finals(scenario.time.iers_finals)
            polar_motion.check_covers(scenario.time.start, scenario.time.duration_s, "time.iers_finals")
        except OrbitError as exc:
            raise ContactError(str(exc)) from None
        scenario._polar_motion = polar_motion
    return scenario._polar_motion


def build_constellation(scenario: ContactScenario) -> Constellation | Ephemeris:
    """The scenario's satellites: mean elements (Walker shell, TLE file or OMM file) or the states of an OEM
    file, whose useable spans must hold the horizon (checked here, before anything is propagated; its ITRF
    states turned with the polar motion and UT1 of ``[time] iers_finals`` when given, which is read and checked
    here for every kind). Both go to :func:`orbits.propagate_offsets` and :func:`orbits.sunlight.eclipse_intervals`;
    only element sets have ``satrecs`` (TLE/OMM export) and, for Walker shells, orbital planes.
    Built (the file read) the first time only and kept in the scenario, for as long as the fields they were built
    with stay as they were: the callers of one run share them and change none of them."""
    c = scenario.constellation
    if c is None:
        raise ContactError("scenario has no [constellation]")
    fields = (replace(c), scenario.time.start, scenario.time.duration_s, scenario.time.iers_finals)
    if scenario._satellites is None or scenario._satellites[0] != fields:
        scenario._satellites = (fields, _build_constellation(scenario))
    return scenario._satellites[1]


def _build_constellation(scenario: ContactScenario) -> Constellation | Ephemeris:
    """:func:`build_constellation`'s satellites, built or read."""
    c = scenario.constellation
    polar_motion = load_polar_motion(scenario)
    try:
        if c.kind == "tle":
            return read_tle(c.tle_file)
        if c.kind == "omm":
            return read_omm(c.omm_file)
        if c.kind == "oem":
            eph = read_oem(c.oem_file, polar_motion=polar_motion)
            eph.check_covers(scenario.time.start, scenario.time.duration_s, "time")
            return eph
        build = walker_delta if c.kind == "walker-delta" else walker_star
        return build(c.total, c.planes, c.phasing, c.altitude_km, c.inclination_deg, c.epoch)
    except OrbitError as exc:
        raise ContactError(str(exc)) from None


def load_plan_file(scenario: ContactScenario) -> ContactPlan:
    """The imported contact plan of a ``[contacts] plan_file`` scenario, on the scenario's rounds."""
    if scenario.plan_file is None:
        raise ContactError("scenario has no [contacts] plan_file")
    plan = read_plan(scenario.plan_file, round_boundaries(scenario), scenario.link.acquisition_s,
                     scenario.time.start)
    if plan.start is not None and scenario.time.start is None:
        # the start is the plan file's: the horizon from it checked here (its contacts' ends by the import)
        check_span_end(plan.start, scenario.time.duration_s, "time.duration_s",
                       f"the start of contacts.plan_file ({brief(scenario.plan_file)})", "; shorten time.duration_s")
    late = int(np.count_nonzero(plan.windows.t_start_s >= scenario.time.duration_s))
    if late:  # a plan of a longer horizon, or of Unix times read as relative ones
        log.warning("%s: %d of %d windows start after time.duration_s = %g s and are not used",
                    brief(scenario.plan_file), late, len(plan.windows.t_start_s), scenario.time.duration_s)
    return plan


def build_batteries(scenario: ContactScenario, plan: ContactPlan) -> dict[int, Battery]:
    """One :class:`~contact_sim.energy.Battery` per plan node that has one (ground stations have
    none), with eclipses from the orbit for satellites; empty when ``[energy]`` is absent."""
    if scenario.energy is None:
        return {}
    eclipses: dict[str, list[tuple[float, float]]] = {}
    if scenario.constellation is not None:
        constellation = build_constellation(scenario)
        try:
            per_sat = eclipse_intervals(constellation, scenario.time.start, scenario.time.duration_s,
                                        scenario.sunlight_step_s)
        except OrbitError as exc:
            raise ContactError(str(exc)) from None
        eclipses = dict(zip(constellation.names, per_sat))
    return {i: Battery(scenario.energy, eclipses.get(name, ()))
            for i, (name, kind) in enumerate(zip(plan.node_names, plan.node_kinds)) if kind != "ground_station"}


def check_contact_scenario(scenario: ContactScenario, derive_planes: bool = False
                           ) -> tuple[list[str], list[int] | None, Constellation | Ephemeris | None]:
    """Read every file the scenario names (TLE / OMM / OEM, waypoints, an imported
    plan; an OEM checked against the horizon) and return the moving nodes' names, for satellites
    their orbital planes (a Walker shell's; those of a TLE, OMM or OEM file's satellites derived from
    their orbit normals at ``time.start`` with ``derive_planes`` (:func:`plane_numbers`), else ``-1``,
    unknown), and the satellites built (:func:`build_constellation`; None for drones or an imported
    plan), so that a caller checking more of them does not read their file again. No window search:
    seconds. Ground stations are not included (they relay, they do not learn)."""
    if scenario.plan_file is not None:
        plan = load_plan_file(scenario)
        return [n for n, k in zip(plan.node_names, plan.node_kinds) if k != "ground_station"], None, None
    if scenario.constellation is not None:
        constellation = build_constellation(scenario)
        _check_station_names(scenario, constellation)
        _check_grid(scenario, len(constellation.names) + len(scenario.ground_stations))
        planes = plane_numbers(constellation, scenario.time.start if derive_planes else None)
        return list(constellation.names), planes, constellation
    d = scenario.drones
    if d.count is None:
        wps, _ = _read_drone_files(scenario)
    else:
        wps = random_waypoints(d.count, d.area_km, d.speed_m_s, min(scenario.time.duration_s, 1.0), d.seed,
                               d.altitude_km, d.pause_s)
    return [w.name for w in wps], None, None


def plane_numbers(constellation: Constellation | Ephemeris, start: _dt.datetime | None = None) -> list[int]:
    """Each satellite's orbital plane: a Walker shell's; for TLE, OMM and OEM files, those
    :func:`orbits.orbital_planes` groups by the orbit normals at ``start`` (within
    :data:`orbits.PLANE_TOLERANCE_DEG`; numbered in the order of the file), or ``-1`` (unknown)
    without ``start``."""
    if isinstance(constellation, Constellation) and all(p >= 0 for p in constellation.planes):
        return [int(p) for p in constellation.planes]
    if start is None:
        return [-1] * len(constellation.names)
    try:
        return orbital_planes(constellation, start)
    except OrbitError as exc:
        raise ContactError(str(exc)) from None


def _read_drone_files(scenario: ContactScenario) -> tuple[list[Waypoints], _dt.datetime | None]:
    """The drones of a waypoint CSV or of mission and track files, once the grid they make is
    checked, and the UTC instant of t = 0 (``time.start``, else the recorded tracks' first time).
    The files are read the first time only (kept in the scenario, for as long as the fields they were read
    with stay as they were): :func:`check_contact_scenario` and :func:`build_trajectories` of one run share
    them."""
    d = scenario.drones
    fields = (d.waypoints_csv, tuple(d.missions or ()), d.origin, d.speed_m_s, scenario.time.start,
              scenario.time.duration_s)
    if scenario._drone_files is None or scenario._drone_files[0] != fields:
        start = scenario.time.start
        if d.waypoints_csv is not None:
            wps = read_waypoints_csv(d.waypoints_csv)
        else:
            wps, start = read_missions(d.missions, d.origin, d.speed_m_s, start)
            if start is not None and scenario.time.start is None:  # t = 0 read from the files: the span checked here
                check_span_end(start, scenario.time.duration_s, "time.duration_s",
                               "t = 0, the earliest time of the tracks in drones.missions,",
                               "; shorten time.duration_s")
        scenario._drone_files = (fields, wps, start)
    _, wps, start = scenario._drone_files
    _check_grid(scenario, len(wps), sum(w.t_s.size for w in wps))
    return wps, start


def check_energy_inputs(scenario: ContactScenario) -> None:
    """Load the Sun's ephemeris (package ``skyfield-data``, extra ``energy``) when
    :func:`build_batteries` will need it, a satellite scenario with ``[energy]``, so
    that a missing package stops a simulation before its window search."""
    if scenario.energy is not None and scenario.constellation is not None:
        try:
            ephemeris()
        except OrbitError as exc:
            raise ContactError(str(exc)) from None


def build_trajectories(scenario: ContactScenario,
                       constellation: Constellation | Ephemeris | None = None) -> Trajectories:
    """Node trajectories of the scenario on its time grid (a satellite scenario's from ``constellation``
    when given, else from :func:`build_constellation`'s, the satellites the check built)."""
    if scenario.plan_file is not None:
        raise ContactError("contacts.plan_file: an imported plan has no trajectories (no positions)")
    t = scenario.time
    if scenario.constellation is not None:
        if constellation is None:
            constellation = build_constellation(scenario)
        _check_station_names(scenario, constellation)
        _check_grid(scenario, len(constellation.names) + len(scenario.ground_stations))
        return satellite_trajectories(constellation, t.start, t.duration_s, t.step_s,
                                      scenario.ground_stations or None, load_polar_motion(scenario))
    d = scenario.drones
    start = t.start
    if d.count is None:
        wps, start = _read_drone_files(scenario)
    else:
        wps = random_waypoints(d.count, d.area_km, d.speed_m_s, t.duration_s, d.seed,
                               d.altitude_km, d.pause_s)
    traj = drone_trajectories(wps, t.duration_s, t.step_s)
    traj.start = start
    return traj


def plan_from_trajectories(traj: Trajectories, scenario: ContactScenario, workers: int = 1) -> ContactPlan:
    """Windows + capacities + rounds for already built trajectories; windows that would pass the contact
    search's memory budget with the grid are refused as they are found
    (:func:`~contact_sim.trajectory.check_window_budget`)."""
    rate_fn = scenario.link.rate_at if scenario.link.needs_integration else None
    windows = find_windows(traj, scenario.geometry, rate_fn=rate_fn, workers=workers, budget=True)
    kinds = ["ground_station" if k else ("satellite" if traj.frame == "TEME" else "drone")
             for k in traj.kinds]
    meta = {"scenario": str(scenario.path) if scenario.path else None, "kind": scenario.kind,
            "step_s": scenario.time.step_s, "duration_s": scenario.time.duration_s,
            "max_range_km": scenario.geometry.max_range_km,
            "grazing_altitude_km": scenario.geometry.grazing_altitude_km}
    if scenario.drones is not None and scenario.drones.count is not None:
        meta["seed"] = scenario.drones.seed
    return ContactPlan(traj.names, windows, scenario.link, round_boundaries(scenario),
                       traj.start, kinds, meta)


def compute_contacts(scenario: ContactScenario, workers: int = 1) -> ContactPlan:
    """Build trajectories, find windows and return the :class:`ContactPlan`
    (or read the imported plan of a ``[contacts] plan_file`` scenario)."""
    if scenario.plan_file is not None:
        return load_plan_file(scenario)
    traj = build_trajectories(scenario)
    log.info("%d nodes, %d grid times", traj.n_nodes, traj.times_s.size)
    return plan_from_trajectories(traj, scenario, workers)
