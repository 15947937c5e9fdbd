"""The memory budget of ``fol contacts``: what the check counts against what a search allocates.

The check counted the trajectory table alone (72 bytes per node and time sample), while the window
search adds a packed copy of every node state and ground stations add Skyfield's rotation of them for
every time sample, so a scenario it accepted could need several times the 8 GiB it states.
"""

from __future__ import annotations

import re
import textwrap
import tracemalloc
from pathlib import Path

import pytest

from contact_sim import load_contact_scenario
from contact_sim.scenario import build_trajectories, plan_from_trajectories
from contact_sim.errors import ContactError
from contact_sim.trajectory import CONTACT_BYTES_PER_WINDOW, contact_search_bytes
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


# --------------------------------------------------------------------------- the windows found

_MANY_WINDOWS = _DRONES.replace("{duration_s}", "7200.0")  # 12 drones, 2 h: about 1,200 windows on 1,820 times


def _grid_and_windows(tmp_path: Path) -> tuple[float, int]:
    """The grid's counted bytes and the number of windows of :data:`_MANY_WINDOWS`."""
    scenario = load_contact_scenario(_write(tmp_path, _MANY_WINDOWS, "reference.toml"))
    traj = build_trajectories(scenario)
    return contact_search_bytes(traj.times_s.size, traj.n_nodes), len(plan_from_trajectories(traj, scenario).windows)


@pytest.mark.parametrize("workers", [1, 2])
def test_windows_past_the_budget_are_refused_before_the_table_is_built(
        tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, workers: int) -> None:
    """A scenario inside the grid's budget whose windows pass it (the limit lowered to the grid's cost plus
    CONTACT_BYTES_PER_WINDOW for every window but one) is refused in one line giving the count, exit status 2,
    before the table is built: the temporary parts are removed, a fresh --out is not left behind (nor the
    parents it made; the folder that held them stays), and the
    outputs of an earlier run in --out stay as they were. With the limit one byte higher, the same scenario
    passes. Parts of 7 windows, serially and in two workers: the count, summed over the parts as they are
    written (a window continued from the part before counted once), is the table's exactly. Before the
    windows were counted, both limits gave a table. (The forked workers' own 160 MiB each, counted while
    they scan, is set aside here: the limit is far below it.)"""
    grid, n = _grid_and_windows(tmp_path)
    assert n > 1000
    monkeypatch.setattr("contact_sim.windows._PART_WINDOWS", 7)
    monkeypatch.setattr("contact_sim.windows._FORKED_WORKER_BYTES", 0)
    parts = tmp_path / "tmp"
    parts.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(parts))
    path = _write(tmp_path, _MANY_WINDOWS)
    out = tmp_path / "out"
    monkeypatch.setattr("contact_sim.trajectory.MAX_TRAJECTORY_BYTES", grid + n * CONTACT_BYTES_PER_WINDOW)
    assert main(["contacts", str(path), "--no-plot", "--out", str(out), "--workers", str(workers)]) == 0
    assert f"windows    {n}" in capsys.readouterr().out
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert "contacts.csv" in before and not list(parts.iterdir())

    monkeypatch.setattr("contact_sim.trajectory.MAX_TRAJECTORY_BYTES", grid + n * CONTACT_BYTES_PER_WINDOW - 1)
    fresh = tmp_path / "new" / "sub" / "fresh"  # parents made for it too
    for target in (out, fresh):
        assert main(["contacts", str(path), "--no-plot", "--out", str(target), "--workers", str(workers)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "Traceback" not in err[0], err
        # the count passes the limit only with the last window found, at the part that holds it
        assert str(path) in err[0] and re.search(f"contact windows: {n:,} found in [0-9,]+ s of the 7,200 s "
                                                 "horizon would need ", err[0]), err
        # drones: their range is drones.radio_range_km (link.max_range_km is refused in a drone scenario)
        assert err[0].endswith("; shorten time.duration_s, lower drones.radio_range_km or use fewer nodes"), err
        assert not list(parts.iterdir())
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert not (tmp_path / "new").exists() and tmp_path.is_dir()


@pytest.mark.parametrize("workers", [1, 2])
def test_the_search_stops_once_its_windows_pass_the_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: int) -> None:
    """With room for a third of the windows, the search stops at the first part written past it: the count
    and the seconds searched that it gives are short of the whole horizon's, and no temporary part is left.
    (A third, not less: the grid's check, before the search, counts the drones' expected waypoint times, 13
    samples more than the grid has here, which must fit too. The forked workers' own 160 MiB each is set
    aside, as above.)"""
    grid, n = _grid_and_windows(tmp_path)
    monkeypatch.setattr("contact_sim.windows._PART_WINDOWS", 20)
    monkeypatch.setattr("contact_sim.windows._FORKED_WORKER_BYTES", 0)
    monkeypatch.setattr("contact_sim.trajectory.MAX_TRAJECTORY_BYTES", grid + n // 3 * CONTACT_BYTES_PER_WINDOW)
    parts = tmp_path / "tmp"
    parts.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(parts))
    scenario = load_contact_scenario(_write(tmp_path, _MANY_WINDOWS))
    traj = build_trajectories(scenario)
    with pytest.raises(ContactError) as exc:
        plan_from_trajectories(traj, scenario, workers=workers)
    found, searched = re.match(r"contact windows: ([\d,]+) found in ([\d,]+) s of the 7,200 s horizon",
                               str(exc.value)).groups()
    assert n // 3 < int(found.replace(",", "")) < n // 2, str(exc.value)
    assert int(searched.replace(",", "")) < 7200 * 3 // 4 and "where the search stopped" in str(exc.value)
    assert not list(parts.iterdir())


_SIMULATE_DRONES = _DRONES.replace("{duration_s}", "43200.0") + """
[scenario]
name = "held-windows"
seeds = [0]
[rounds]
count = 1
[data]
dataset = "synthetic-wildfire"
size = 1200
image_size = 8
partition = "dirichlet"
per_node = 100
[fol]
pretrain_epochs = 0
[methods]
run = ["local"]
[run]
executor = "local"
workers = 1
"""


def test_simulate_counts_the_windows_its_search_holds_before_writing_them(
        tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """``fol simulate`` over 12 drones for 12 h (7,013 windows, one part: the search holds every window
    until its chunk ends) with the limit lowered to the grid's cost plus CONTACT_BYTES_PER_WINDOW for every
    window, which the windows' count alone accepts: the buffers the search holds for the windows it has not
    yet written (grown past their first 4,096 rows, and 96 bytes a window to write them) pass it, so the run
    is refused in one line, exit status 2, before any training, with no temporary part left. Before they
    were counted, the run went on (``fol simulate --workers 2`` held about 0.6 GiB so on 1,000 satellites,
    beyond the 0.4 GiB its 3.9 million windows were counted at)."""
    contact = _write(tmp_path, _DRONES.replace("{duration_s}", "43200.0"), "contacts.toml")
    scenario = load_contact_scenario(contact)
    traj = build_trajectories(scenario)
    grid = contact_search_bytes(traj.times_s.size, traj.n_nodes)
    n = len(plan_from_trajectories(traj, scenario).windows)
    assert 4096 * 2 > n > 4096  # more windows than the search's first buffers hold
    monkeypatch.setattr("contact_sim.trajectory.MAX_TRAJECTORY_BYTES", grid + n * CONTACT_BYTES_PER_WINDOW)
    parts = tmp_path / "tmp"
    parts.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(parts))

    def trained(*args, **kwargs):
        pytest.fail("the nodes were pretrained after the search passed its budget")

    monkeypatch.setattr("fol.simulation.runner._pretrained_nodes", trained)
    path = _write(tmp_path, _SIMULATE_DRONES)
    assert main(["simulate", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    # the scenario file named first, as fol contacts names it, and sizes under a GiB in MiB or KiB (they read
    # "0.00 GiB", "0.0 GiB" and "limit 0 GiB" before)
    size = r"[1-9][0-9]*\.[0-9] (KiB|MiB)"
    assert re.fullmatch(
        rf"fol simulate: error: {re.escape(str(path))}: contact windows: the search's workers would hold {size} for the "
        rf"windows they have not yet written to parts and the candidate pairs they scan, {size} with the grid's "
        rf"{size} \(limit {size}\), where the "
        r"search stopped; shorten time\.duration_s, lower drones\.radio_range_km or use fewer "
        r"nodes$", err[0]), err
    assert not list(parts.iterdir())


def test_the_docs_give_the_window_budget_the_code_holds() -> None:
    """docs/scenario.md states the bytes counted per window and the figures they give (the 1,584-satellite
    shell's 9.5 million windows over 24 h at 60 s; the five-shell constellation's 94.1 million, refused past
    about 67 million) from :data:`CONTACT_BYTES_PER_WINDOW`, :func:`contact_search_bytes` and the limit;
    docs/scale.md and docs/results.md give the same bytes and figures."""
    from contact_sim.trajectory import MAX_TRAJECTORY_BYTES, grid_samples

    def read(name: str) -> str:
        return " ".join((Path(__file__).parents[1] / "docs" / name).read_text(encoding="utf-8").split())

    text = read("scenario.md")
    assert f"held to the same 8 GiB together with the grid, at {CONTACT_BYTES_PER_WINDOW} bytes each" in text
    shell = contact_search_bytes(grid_samples(86_400.0, 60.0), 1584) + 9.5e6 * CONTACT_BYTES_PER_WINDOW
    assert f"(9.5 million windows) is counted at {shell / 1e9:.1f} GB in all" in text
    grid = contact_search_bytes(grid_samples(86_400.0, 60.0), 4408)
    five = grid + 94.1e6 * CONTACT_BYTES_PER_WINDOW
    past = (MAX_TRAJECTORY_BYTES - grid) / CONTACT_BYTES_PER_WINDOW
    assert f"would be counted at {five / 1e9:.1f} GB and is refused once about {past / 1e6:.1f} million" in text
    assert five > MAX_TRAJECTORY_BYTES and "so it still does not fit" in text
    scale = read("scale.md")
    assert f"and hold them at {CONTACT_BYTES_PER_WINDOW} bytes each" in scale
    assert (f"at {CONTACT_BYTES_PER_WINDOW} bytes a window, what `fol contacts` was measured to need per window, "
            f"they and the grid would need {five / 1e9:.1f} GB, past the contact search's 8 GiB once about "
            f"{past / 1e6:.1f} million windows") in scale
    assert f"counting {CONTACT_BYTES_PER_WINDOW} bytes a window" in read("results.md")
    assert MAX_TRAJECTORY_BYTES == 8 * 2**30


def test_a_single_process_search_past_the_budget_is_not_told_to_use_fewer_workers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Review: the refusal of what the search's workers hold advised 'use fewer --workers' whatever their
    number; a search run in one process (--workers 1, the default) cannot use fewer, and a user following
    the advice changed nothing. The advice is given only where workers were forked; the figures and the
    other advice are the same either way."""
    contact = _write(tmp_path, _DRONES.replace("{duration_s}", "43200.0"), "contacts.toml")
    scenario = load_contact_scenario(contact)
    traj = build_trajectories(scenario)
    grid = contact_search_bytes(traj.times_s.size, traj.n_nodes)
    n = len(plan_from_trajectories(traj, scenario).windows)
    monkeypatch.setattr("contact_sim.trajectory.MAX_TRAJECTORY_BYTES", grid + n * CONTACT_BYTES_PER_WINDOW)
    with pytest.raises(ContactError) as one:
        plan_from_trajectories(traj, scenario, workers=1)
    assert "the search's workers would hold" in str(one.value), one.value
    assert "--workers" not in str(one.value), one.value
    assert str(one.value).endswith("; shorten time.duration_s, lower drones.radio_range_km or use fewer nodes")
    # forked: fewer of them hold less at once (a worker counted at a quarter of the room beside the grid,
    # so that the search, held to forks_within_budget, still forks two under this small limit)
    monkeypatch.setattr("contact_sim.windows._FORKED_WORKER_BYTES", n * CONTACT_BYTES_PER_WINDOW // 4)
    with pytest.raises(ContactError) as two:
        plan_from_trajectories(traj, scenario, workers=2)
    assert "where the search stopped; use fewer --workers, shorten time.duration_s" in str(two.value), two.value


def test_a_forked_worker_is_counted_at_no_less_than_the_docs_measured() -> None:
    """docs/scale.md's table of ``contacts_scale.py --fork-overhead`` (every shipped example's search and two
    Walker shells): the most a forked worker held beyond what the check counts for its windows is within
    :data:`_FORKED_WORKER_BYTES`, and docs/scale.md and docs/scenario.md give the code's figure. It was
    64 MiB, measured once on one 120-satellite search; the table has up to 149.8 MiB at 4,408 satellites."""
    from contact_sim.windows import _FORKED_WORKER_BYTES

    def read(name: str) -> str:
        return (Path(__file__).parents[1] / "docs" / name).read_text(encoding="utf-8")

    scale = read("scale.md")
    section = scale.split("### A forked worker's own memory (2026-12-07)", 1)[1].split("\n### ", 1)[0]
    rows = [line.split("|") for line in section.splitlines() if line.startswith("| examples/")
            or line.startswith("| Walker ")]
    assert len(rows) >= 13, rows
    beyond = [float(cells[-2].split("/")[-1]) for cells in rows]  # the max of the last column
    mib = _FORKED_WORKER_BYTES / 2**20
    assert max(beyond) <= mib, (max(beyond), mib)
    assert f"and {mib:g} MiB for a forked worker itself" in " ".join(scale.split())
    assert f"and {mib:g} MiB for each forked worker" in " ".join(read("scenario.md").split())


def test_a_search_forks_no_more_workers_than_its_budget_holds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Review: with a forked worker counted at 160 MiB, a machine of 52 cores or more forked workers that
    passed the 8 GiB budget together whatever the search, so every search they scanned at once was refused
    ('use fewer --workers') where fewer would have finished it. The search now forks at most as many
    workers as leave half the budget beside the grid to the windows (forks_within_budget), and finds the
    same windows as in one process. Here the limit leaves room for one worker only, and two were asked for:
    before, the search was refused."""
    import logging

    from contact_sim.windows import _FORKED_WORKER_BYTES, forks_within_budget

    contact = _write(tmp_path, _DRONES.replace("{duration_s}", "3600.0"), "contacts.toml")
    scenario = load_contact_scenario(contact)
    traj = build_trajectories(scenario)
    alone = plan_from_trajectories(traj, scenario, workers=1).windows
    grid = contact_search_bytes(traj.times_s.size, traj.n_nodes)
    limit = grid + 3 * _FORKED_WORKER_BYTES  # room for one worker and its half for the windows, not two
    monkeypatch.setattr("contact_sim.trajectory.MAX_TRAJECTORY_BYTES", limit)
    assert forks_within_budget(2, grid) == 1 and forks_within_budget(2, grid - _FORKED_WORKER_BYTES) == 2
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    with caplog.at_level(logging.INFO, logger="contact_sim.windows"):
        forked = plan_from_trajectories(traj, scenario, workers=2).windows
    assert "forking 1 workers, not 2" in caplog.text, caplog.text
    assert len(forked) == len(alone) > 0
    assert list(forked) == list(alone)


@pytest.mark.parametrize("workers", [1, 2])
def test_the_candidate_pairs_a_worker_scans_are_counted(monkeypatch: pytest.MonkeyPatch, workers: int) -> None:
    """Review: what a worker holds while it scans was counted for its windows alone, not for the k-d tree's
    candidate pairs of the grid step (``query_pairs``: 16 bytes a pair in a vector that doubles, ~1.8 million
    at 4,408 satellites), which every worker holds at once. A search of few windows and many candidate pairs
    (a 100 km range screened over 600 s steps) whose pairs alone pass the limit beside the grid is now refused
    naming the workers' bytes, serially and in two forked workers; before, it passed (its windows far below)."""
    from scipy.spatial import cKDTree

    from contact_sim import LinkGeometry, find_windows, satellite_trajectories
    from contact_sim.windows import _PAIR_BYTES, _Scanner
    from orbits import walker_delta

    c = walker_delta(120, 12, 1, 550.0, 53.0, "2025-03-01T00:00:00Z")
    traj = satellite_trajectories(c, c.epoch, 3600.0, 600.0)
    geometry = LinkGeometry(max_range_km=100.0)
    scanner = _Scanner(traj, geometry, None)
    dt = float(traj.times_s[1] - traj.times_s[0])
    pairs = min(len(cKDTree(traj.pos[k]).query_pairs(scanner.reach + scanner.v_rel * dt))
                for k in range(traj.times_s.size - 1))  # every step's, the fewest
    n = len(find_windows(traj, geometry))
    grid = contact_search_bytes(traj.times_s.size, traj.n_nodes)
    # the windows (written or held) need a twentieth of what a step's pairs hold
    assert pairs > 1000 and 20 * n * max(CONTACT_BYTES_PER_WINDOW, 96 + 80) < pairs * _PAIR_BYTES
    monkeypatch.setattr("contact_sim.windows._FORKED_WORKER_BYTES", 0)
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    monkeypatch.setattr("contact_sim.trajectory.MAX_TRAJECTORY_BYTES", grid + pairs * _PAIR_BYTES * 0.9)
    with pytest.raises(ContactError) as refused:
        find_windows(traj, geometry, workers=workers, budget=True)
    msg = str(refused.value)
    assert "\n" not in msg and re.match(r"contact windows: the search's workers would hold [0-9.]+ KiB for the "
                                        r"windows they have not yet written to parts and the candidate pairs "
                                        r"they scan, ", msg), msg
    held = float(re.search(r"would hold ([0-9.]+) KiB", msg).group(1)) * 2**10
    assert held >= pairs * _PAIR_BYTES * 0.9, (held, pairs)
    # with room for every step's pairs, all of the search's workers at once, it passes
    monkeypatch.setattr("contact_sim.trajectory.MAX_TRAJECTORY_BYTES", grid + 2**26)
    assert len(find_windows(traj, geometry, workers=workers, budget=True)) == n
