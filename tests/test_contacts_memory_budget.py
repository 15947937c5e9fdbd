"""The memory budget of ``fol contacts``: what the check counts against what a search allocates.

The check counted the trajectory table alone (72 bytes per node and time sample), while the window
search adds a packed copy of every node state and ground stations add Skyfield's rotation of them for
every time sample, so a scenario it accepted could need several times the 8 GiB it states.
"""

from __future__ import annotations

import textwrap
import tracemalloc
from pathlib import Path

import pytest

from contact_sim import load_contact_scenario
from contact_sim.scenario import build_trajectories, plan_from_trajectories
from contact_sim.trajectory import contact_search_bytes
from fol.cli import main

_WALKER = """
[constellation]
kind = "walker-delta"
total = {total}
planes = {planes}
altitude_km = 550.0
inclination_deg = 53.0
epoch = "2025-03-01T00:00:00Z"
{stations}
[time]
duration_s = {duration_s}
step_s = 1.0

[link]
max_range_km = 5000.0
"""
_STATION = '[[ground_stations]]\nname = "Matera"\nlat_deg = 40.65\nlon_deg = 16.70\n'


def _write(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


@pytest.mark.parametrize("total, planes, stations, accepted_s, needs", [
    # 12 satellites: 256 bytes per node and sample, 8 GiB at 2,796,202.7 samples (the table alone, 2.2 GiB)
    (12, 3, "", 2_796_200.0, "2,796,203 time samples x 12 node(s) would need 8.0 GiB"),
    # 2 satellites and a station: 24 KiB per sample turn the station, 8 GiB at 338,933.6 samples (the
    # table alone, 70 MiB)
    (2, 1, _STATION, 338_931.0, "338,934 time samples x 3 node(s) would need 8.0 GiB"),
])
def test_a_search_just_over_the_budget_is_refused_before_any_propagation(
        tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch,
        total: int, planes: int, stations: str, accepted_s: float, needs: str) -> None:
    """One second more of horizon (one more time sample) than the budget allows is refused in one line
    giving the estimate, exit status 2, before any satellite or station is propagated; one second less
    is accepted. Before the window search's copy and the stations' rotations were counted, both were
    accepted and propagated."""
    def propagated(*args, **kwargs):
        pytest.fail("propagated before the budget refused the scenario")

    monkeypatch.setattr("contact_sim.trajectory.propagate_offsets", propagated)
    monkeypatch.setattr("contact_sim.trajectory.station_positions_teme", propagated)
    ok = _write(tmp_path, _WALKER.format(total=total, planes=planes, stations=stations, duration_s=accepted_s),
                "ok.toml")
    assert load_contact_scenario(ok).time.duration_s == accepted_s  # checked when read: just within
    over = _write(tmp_path, _WALKER.format(total=total, planes=planes, stations=stations,
                                           duration_s=accepted_s + 1.0))
    out = tmp_path / "out"
    assert main(["contacts", str(over), "--no-plot", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    assert str(over) in err[0] and f"time.step_s: {needs} for the trajectories and their window search " \
                                   "(limit 8 GiB); raise time.step_s or shorten time.duration_s" in err[0], err
    assert not out.exists()


_DRONES = """
[drones]
count = 12
area_km = 4.0
speed_m_s = 15.0
pause_s = 20.0
radio_range_km = 1.2

[time]
duration_s = {duration_s}
step_s = 10.0
"""


@pytest.mark.parametrize("text, duration_s", [
    (_DRONES, 36_000.0),  # 12 drones, 9,000 time samples with their turns
    (_WALKER.replace("step_s = 1.0", "step_s = 10.0").replace("{stations}", _STATION)
     .replace("{total}", "8").replace("{planes}", "2"), 10_800.0),  # 8 satellites and a station, 1,081 times
])
def test_the_budget_covers_what_a_search_allocates(tmp_path: Path, text: str, duration_s: float) -> None:
    """The bytes a search allocates (traced by ``tracemalloc``: numpy's arrays, from the trajectories
    through the window search) stay within :func:`contact_search_bytes` of its grid. They took 0.88 (drones)
    and 0.85 (satellites) of it here; the trajectory table alone (72 bytes per node and sample), which was
    all the check counted, is a third of what the drones took and a thirty-fifth of what the satellites
    and the station took."""
    warm = load_contact_scenario(_write(tmp_path, text.format(duration_s=600.0), "warm.toml"))
    plan_from_trajectories(build_trajectories(warm), warm)  # compiled kernels and caches: not the search's
    scenario = load_contact_scenario(_write(tmp_path, text.format(duration_s=duration_s)))
    tracemalloc.start()
    try:
        traj = build_trajectories(scenario)
        plan = plan_from_trajectories(traj, scenario)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(plan.windows) > 0
    budget = contact_search_bytes(traj.times_s.size, traj.n_nodes, stations=bool(scenario.ground_stations))
    assert peak <= budget, f"{peak / 1e6:.1f} MB allocated, {budget / 1e6:.1f} MB counted"
