"""Sunlight (eclipse intervals against a brute-force is_sunlit scan) and the energy model
(a battery that cannot afford a transfer delays it)."""

from __future__ import annotations

import numpy as np
import pytest

from contact_sim import ContactError, ContactPlan, LinkModel, WindowTable, parse_contact_scenario
from contact_sim.energy import Battery, EnergyModel
from fol.simulation.runner import plan_deliveries
from orbits import OrbitError, walker_delta
from orbits.sunlight import eclipse_intervals, sunlit_samples


def test_eclipses_match_a_brute_force_scan_at_10s() -> None:
    c = walker_delta(4, 2, 1, 550.0, 53.0, "2025-03-01T00:00:00Z")
    duration, step = 21600.0, 10.0
    fast = eclipse_intervals(c, c.epoch, duration)  # 60 s grid, edges bisected
    grid = np.arange(0.0, duration + step / 2, step)
    lit = sunlit_samples(c, c.epoch, grid)
    for k, intervals in enumerate(fast):
        change = np.flatnonzero(lit[k, 1:] != lit[k, :-1])
        brute = grid[change] + step / 2  # each edge lies within +-step/2 of this
        edges = sorted(x for iv in intervals for x in iv if 0.0 < x < duration)
        assert len(edges) == len(brute) > 0
        assert np.max(np.abs(np.array(edges) - brute)) <= step
        # inside every interval the scan agrees: in shadow
        for a, b in intervals:
            inside = (grid > a + 1.0) & (grid < b - 1.0)
            assert not lit[k, inside].any()


def _plan() -> ContactPlan:
    # nodes 0 and 1 in contact 0..3000 s at 8 kbit/s (1,000 bytes/s), one round of an hour
    w = WindowTable([0], [1], [0.0], [3000.0], [1.0], [1.0], [0.0])
    return ContactPlan(["sat-0", "sat-1"], w, LinkModel("constant", 8e3, 0.0), [0.0, 3600.0])


def test_a_transfer_the_battery_cannot_afford_is_delayed_until_charged() -> None:
    free = _plan()
    assert plan_deliveries(free, [0, 1], [1000, 1000], 1, 1)[0] == {0: [1], 1: [0]}
    assert [t.t_start_s for t in free.transfers] == [0.0, 0.0]

    # sat-0 is in eclipse for the first 1,000 s with an empty battery; sending 1,000 bytes costs 50 J;
    # in sunlight it gains 12 - 2 = 10 W, so it can pay at 1,000 + 50 / 10 = 1,005 s.
    model = EnergyModel(battery_wh=1.0, solar_w=12.0, idle_w=2.0, j_per_byte=0.05, initial_charge=0.0)
    batteries = {0: Battery(model, [(0.0, 1000.0)]), 1: Battery(model, [])}
    plan, waits = _plan(), []
    deliveries = plan_deliveries(plan, [0, 1], [1000, 1000], 1, 1, batteries, waits)
    assert deliveries[0] == {0: [1], 1: [0]}
    by_src = {t.src: t for t in plan.transfers}
    assert by_src[0].t_start_s == pytest.approx(1005.0)
    assert by_src[1].t_start_s == pytest.approx(5.0)  # sat-1 is sunlit from the start: 50 J at 10 W
    assert {(w["src"], round(w["start_s"], 3), w["sunlit_at_wanted"]) for w in waits} == {
        ("sat-0", 1005.0, False), ("sat-1", 5.0, True)}
    assert batteries[0].level_at(1005.0) == pytest.approx(0.0, abs=1e-6)

    # a battery that can never hold the 50 J (solar = idle): no transfer at all, recorded as such
    dark = {0: Battery(EnergyModel(1.0, 2.0, 2.0, j_per_byte=0.05, initial_charge=0.0), [])}
    plan, waits = _plan(), []
    assert plan_deliveries(plan, [0, 1], [1000, 1000], 1, 1, dark, waits)[0] == {0: [1], 1: []}  # receiver -> senders
    assert waits == [{"src": "sat-0", "dst": "sat-1", "round": 0, "wanted_start_s": 0.0, "start_s": None,
                      "joules": 50.0}]


def test_battery_keeps_later_bookings_affordable() -> None:
    b = Battery(EnergyModel(battery_wh=0.1, solar_w=1.0, idle_w=0.0, initial_charge=0.0))  # 360 J, 1 W
    b.spend(300.0, 300.0, "late")
    assert b.earliest(0.0, 100.0) == pytest.approx(400.0)  # spending before 300 s would starve the booking
    with pytest.raises(ContactError, match="exceeds what the battery holds"):
        b.spend(100.0, 50.0)
    assert b.earliest(0.0, 400.0) is None  # more than the capacity



def test_battery_earliest_does_not_stall_on_rounding() -> None:
    """A 10 kWh battery whose level, summed over 240 orbital steps, ended 2e-9 J short of the
    charge sought (below one unit in the last place, above the old fixed 1e-9 J tolerance): the
    charging step could not move the time any more and the search gave up after 10,000 passes,
    returning None, i.e. "the battery can never afford it", for an affordable activity."""
    m = EnergyModel(battery_wh=10000.0, solar_w=38.470583999210184, idle_w=1.0, initial_charge=0.0010530266755553463)
    b = Battery(m, [(k * 5400.0 + 3000.0, k * 5400.0 + 5000.0) for k in range(200)])
    for t, joules in ((385373.9379017957, 9015272.543687783), (622662.9904743215, 5505947.984581334),
                      (1234959.935023021, 16403124.813306034), (1293998.858679527, 2212222.9480940653)):
        b.spend(t, joules)
    t = b.earliest(1295142.4713925915, 17014216.43701187)
    assert t is not None and b.can_spend(t, 17014216.43701187)
    assert b.level_at(t) == pytest.approx(17014216.43701187, abs=1e-3)


def test_energy_table_is_validated() -> None:
    base = {"drones": {"count": 2, "radio_range_km": 1.0}, "time": {"duration_s": 60.0, "step_s": 10.0}}
    scn = parse_contact_scenario({**base, "energy": {"battery_wh": 10.0, "solar_w": 5.0, "idle_w": 1.0}}, ".")
    assert scn.energy.capacity_j == 36000.0 and scn.energy.j_per_byte == 0.0
    assert parse_contact_scenario(base, ".").energy is None
    with pytest.raises(ContactError, match=r"energy\.battery_wh: missing"):
        parse_contact_scenario({**base, "energy": {"solar_w": 5.0, "idle_w": 1.0}}, ".")
    with pytest.raises(ContactError, match=r"energy\.initial_charge: expected a fraction"):
        parse_contact_scenario({**base, "energy": {"battery_wh": 1.0, "solar_w": 5.0, "idle_w": 1.0,
                                                   "initial_charge": 2.0}}, ".")


@pytest.mark.parametrize("battery_wh", [1e13, 1e308])
def test_a_battery_beyond_a_terawatt_hour_is_refused_when_read(battery_wh) -> None:
    """1e308 Wh passed --check, but its capacity in joules is inf: an empty start (inf x 0 = NaN)
    left the node never able to pay for its pretraining, silently."""
    base = {"drones": {"count": 2, "radio_range_km": 1.0}, "time": {"duration_s": 60.0, "step_s": 10.0}}
    energy = {"battery_wh": battery_wh, "solar_w": 5.0, "idle_w": 1.0, "initial_charge": 0.0}
    with pytest.raises(ContactError, match=r"^s\.toml: energy\.battery_wh: expected a positive capacity of at most "
                                           r"1e\+12 Wh"):
        parse_contact_scenario({**base, "energy": energy}, ".", "s.toml")
    energy["battery_wh"] = 1e12
    assert parse_contact_scenario({**base, "energy": energy}, ".").energy.capacity_j == 3.6e15


def test_energy_refuses_a_horizon_the_ephemeris_does_not_cover() -> None:
    """DE421 ends in 2053: a later satellite scenario with [energy] is refused when read (it was a
    Skyfield EphemerisRangeError traceback once the contacts had been computed). A start taken from the
    constellation's epoch is named so, as the horizon's end check names it: the refusal named time.start, a
    field the file did not have."""
    doc = {"constellation": {"kind": "walker-delta", "total": 2, "planes": 1, "altitude_km": 550.0,
                             "inclination_deg": 53.0, "epoch": "2060-03-01T00:00:00Z"},
           "time": {"duration_s": 6000.0}, "link": {"max_range_km": 5000.0},
           "energy": {"battery_wh": 10.0, "solar_w": 5.0, "idle_w": 1.0}}
    with pytest.raises(ContactError, match=r"time\.start \(default: constellation\.epoch\): the horizon from "
                                           r"2060-03-01T00:00:00Z over 6000 s leaves 1899-07-30\.\.2053-10-08, the "
                                           r"span of the de421\.bsp"):
        parse_contact_scenario(doc, ".")
    given = {**doc, "time": {"start": "2060-03-01T00:00:00Z", "duration_s": 6000.0}}
    with pytest.raises(ContactError, match=r"time\.start: the horizon from 2060-03-01T00:00:00Z over 6000 s"):
        parse_contact_scenario(given, ".")
    with pytest.raises(OrbitError, match=r"time\.start: the horizon from 2053-10-07T23:00:00Z"):
        eclipse_intervals(walker_delta(2, 1, 0, 550.0, 53.0, "2053-10-07T23:00:00Z"), "2053-10-07T23:00:00Z",
                          86400.0)
    del doc["energy"]
    assert parse_contact_scenario(doc, ".").energy is None  # without [energy] no Sun is needed


def test_batteries_of_a_satellite_scenario_see_their_eclipses() -> None:
    from contact_sim import compute_contacts
    from contact_sim.scenario import build_batteries

    doc = {"constellation": {"kind": "walker-delta", "total": 2, "planes": 1, "altitude_km": 550.0,
                             "inclination_deg": 53.0, "epoch": "2025-03-01T00:00:00Z"},
           "ground_stations": [{"name": "gs", "lat_deg": 40.0, "lon_deg": 16.0}],
           "time": {"duration_s": 6000.0, "step_s": 60.0}, "link": {"max_range_km": 5000.0},
           "energy": {"battery_wh": 10.0, "solar_w": 5.0, "idle_w": 1.0}}
    scn = parse_contact_scenario(doc, ".")
    plan = compute_contacts(scn)
    batteries = build_batteries(scn, plan)
    assert sorted(batteries) == [0, 1]  # the ground station has no battery
    expected = eclipse_intervals(walker_delta(2, 1, 0, 550.0, 53.0, "2025-03-01T00:00:00Z"),
                                 "2025-03-01T00:00:00Z", 6000.0)
    for k in (0, 1):
        assert list(batteries[k].eclipses) == expected[k] and expected[k]
        a, b = expected[k][0]
        assert not batteries[k].sunlit(0.5 * (a + b)) and batteries[k].sunlit(b + 60.0)


def test_sunlight_step_is_refused_where_no_eclipse_is_searched(tmp_path) -> None:
    """Only satellites get eclipses (drones and an imported plan's nodes are always sunlit): in those
    scenarios energy.sunlight_step_s would be ignored, so it is refused in one line naming it."""
    energy = {"battery_wh": 10.0, "solar_w": 5.0, "idle_w": 1.0, "sunlight_step_s": 30.0}
    drones = {"drones": {"count": 2, "radio_range_km": 1.0}, "time": {"duration_s": 60.0, "step_s": 10.0}}
    (tmp_path / "plan.ion").write_text("a contact +0 +600 1 2 125000\n")
    plan = {"contacts": {"plan_file": "plan.ion"}, "time": {"duration_s": 600.0}}
    for base in (drones, plan):
        with pytest.raises(ContactError, match=r"energy\.sunlight_step_s: only used with a \[constellation\]") as e:
            parse_contact_scenario({**base, "energy": energy}, tmp_path)
        assert "\n" not in str(e.value)
        rest = {k: v for k, v in energy.items() if k != "sunlight_step_s"}
        assert parse_contact_scenario({**base, "energy": rest}, tmp_path).energy.solar_w == 5.0
        # nor does the eclipse grid's size limit (2,000,000 steps of 60 s, 1.2e8 s) apply to them (1.5e8 s: inside the
        # contact search's own budget, 256 bytes per node and sample)
        long = {**base, "time": {**base["time"], "duration_s": 1.5e8}, "energy": rest}
        assert parse_contact_scenario(long, tmp_path).energy.solar_w == 5.0
    satellites = {"constellation": {"kind": "walker-delta", "total": 2, "planes": 1, "altitude_km": 550.0,
                                    "inclination_deg": 53.0, "epoch": "2025-03-01T00:00:00Z"},
                  "time": {"duration_s": 6000.0}, "link": {"max_range_km": 5000.0}}
    assert parse_contact_scenario({**satellites, "energy": energy}, ".").sunlight_step_s == 30.0


@pytest.mark.parametrize("j_per_byte", [0.0, 0.05])
def test_a_node_sends_its_model_only_after_paying_for_its_pretraining(j_per_byte) -> None:
    """sat-0 starts with 50 J in a 1,000 s eclipse (2 W idle: empty at 25 s, then nothing to lose) and
    pays for its 1,000 J pretraining at 1,000 + 1,000 / 10 = 1,100 s: its model exists only then, so
    its transfer starts then (plus 5 s to collect the 50 J it costs at 10 W when sending costs energy),
    not at the window's opening (0 s) as the battery alone would allow."""
    model = EnergyModel(battery_wh=1.0, solar_w=12.0, idle_w=2.0, j_per_flop=1.0, j_per_byte=j_per_byte,
                        initial_charge=50.0 / 3600.0)
    batteries = {0: Battery(model, [(0.0, 1000.0)]), 1: Battery(model, [])}
    batteries[0].spend(batteries[0].earliest(0.0, 1000.0), 1000.0, "pretraining")
    assert batteries[0].spends[0][0] == pytest.approx(1100.0)
    plan, waits = _plan(), []
    assert plan_deliveries(plan, [0, 1], [1000, 1000], 1, 1, batteries, waits)[0] == {0: [1], 1: [0]}
    by_src = {t.src: t for t in plan.transfers}
    sent = 1105.0 if j_per_byte else 1100.0
    assert by_src[0].t_start_s == pytest.approx(sent)
    assert by_src[1].t_start_s == 0.0  # sat-1 (no pretraining booked) holds its 50 J from the start
    assert [(w["src"], round(w["start_s"], 3)) for w in waits if w["src"] == "sat-0"] == [("sat-0", sent)]


@pytest.mark.parametrize("j_per_byte", [0.0, 0.05])
def test_energy_summary_counts_every_transfer_even_when_sending_is_free(j_per_byte) -> None:
    """The per-node 'transfers' of energy.json / the report's Energy table are the node's model
    transfers, also when they cost no energy (j_per_byte = 0)."""
    from types import SimpleNamespace

    from fol.simulation.runner import _energy_summary

    model = EnergyModel(battery_wh=1.0, solar_w=12.0, idle_w=2.0, j_per_byte=j_per_byte)
    batteries = {0: Battery(model, []), 1: Battery(model, [])}
    plan = _plan()
    assert plan_deliveries(plan, [0, 1], [1000, 1000], 1, 1, batteries, [])[0] == {0: [1], 1: [0]}
    scn = SimpleNamespace(contact=SimpleNamespace(energy=model))
    nodes = _energy_summary(scn, plan, batteries, [0, 1], [])["nodes"]
    assert [(n["node"], n["transfers"], n["transfer_j"]) for n in nodes] == [
        ("sat-0", 1, 1000 * j_per_byte), ("sat-1", 1, 1000 * j_per_byte)]


def test_check_refuses_energy_on_satellites_without_the_ephemeris(monkeypatch) -> None:
    """Without the skyfield-data package (extra 'energy') a satellite scenario with [energy] is refused
    by fol simulate's checks (--check, and before the window search), not after the contacts;
    fol contacts, which draws no battery, still accepts it."""
    import sys
    from pathlib import Path

    from contact_sim.scenario import check_contact_scenario
    from fol.simulation.check import check_scenario
    from fol.simulation.scenario import parse_scenario
    from orbits import sunlight

    doc = {"constellation": {"kind": "walker-delta", "total": 2, "planes": 1, "altitude_km": 550.0,
                             "inclination_deg": 53.0, "epoch": "2025-03-01T00:00:00Z"},
           "time": {"duration_s": 6000.0}, "link": {"max_range_km": 5000.0},
           "energy": {"battery_wh": 10.0, "solar_w": 5.0, "idle_w": 1.0}}
    root = Path(__file__).resolve().parents[1]
    sunlight.ephemeris.cache_clear()
    monkeypatch.setitem(sys.modules, "skyfield_data", None)  # as if not installed
    try:
        scn = parse_scenario(doc, root, "s.toml")
        assert check_contact_scenario(scn.contact)[0] == ["WD-P00-S00", "WD-P00-S01"]  # fol contacts --check
        with pytest.raises(ContactError, match=r"sunlight needs the ephemeris package skyfield-data"):
            check_scenario(scn, check_data=False)
        del doc["energy"]
        assert check_scenario(parse_scenario(doc, root, "s.toml"), check_data=False).nodes == [
            "WD-P00-S00", "WD-P00-S01"]
    finally:
        sunlight.ephemeris.cache_clear()


def test_a_node_inside_any_of_overlapping_eclipses_is_in_eclipse() -> None:
    """Eclipses 0-100 s and 20-50 s (nested): at 70 s the node is still inside the first one, but only
    the interval starting last before 70 s was looked at, so it was taken as sunlit and charged."""
    model = EnergyModel(battery_wh=1.0, solar_w=12.0, idle_w=2.0, initial_charge=0.0)
    b = Battery(model, [(0.0, 100.0), (20.0, 50.0)])
    assert not b.sunlit(70.0) and b.sunlit(100.0)
    assert b.level_at(100.0) == 0.0
    assert b.earliest(0.0, 50.0) == pytest.approx(105.0)  # 50 J at 10 W once the longer eclipse ends


def test_a_battery_delayed_sender_takes_the_earliest_finishing_window_it_can_pay_for() -> None:
    """Pair 0-1 has a slow window over the whole round (1 B/s) and a fast one from 61 s (1,000 B/s);
    100 bytes cost sat-0 50 J, which it holds from 50 s (1 W net in sunlight) to 60 s (eclipse from
    55 s, -1 W), then again only at 250 s. The search jumped from the fast window's start (61 s) to
    the next moment the battery allowed, 250 s, on the slow window (ends at 350 s), passing over the
    slow window from 50 s (ends at 150 s), which the battery could pay for."""
    w = WindowTable([0, 0], [1, 1], [0.0, 61.0], [1000.0, 70.0], [1, 1], [1, 1], [8.0 * 1000, 8000.0 * 9])
    plan = ContactPlan(["sat-0", "sat-1"], w, LinkModel("plan", acquisition_s=0.0), [0.0, 1000.0])
    model = EnergyModel(battery_wh=1.0, solar_w=2.0, idle_w=1.0, j_per_byte=0.5, initial_charge=0.0)
    batteries = {0: Battery(model, [(55.0, 200.0)])}
    assert plan_deliveries(plan, [0, 1], [100, 100], 1, 1, batteries, [])[0] == {0: [1], 1: [0]}
    sent = next(t for t in plan.transfers if t.src == 0)
    assert (sent.t_start_s, sent.t_end_s, sent.window_index) == (50.0, 150.0, 0)
    assert batteries[0].spends == [(50.0, 50.0, "send sat-0->sat-1")]
