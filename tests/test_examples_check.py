"""Every scenario in examples/ passes the pre-run check (``fol simulate --check``;
contact-only scenarios through the contact side's own validator), and the check
refuses in seconds what used to fail after pretraining."""

from __future__ import annotations

import time
import tomllib
from pathlib import Path

import pytest

from contact_sim.scenario import RESERVED_TABLES, check_contact_scenario, load_contact_scenario
from fol.cli import main
from fol.errors import ConfigError, DataError
from fol.simulation import load_scenario
from fol.simulation.check import check_scenario
from swarmbase.cli import parallelism_problem

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.toml"))
REAL_DATASETS = ("wildfire", "hurricane", "cifar10", "cifar100", "svhn", "imagefolder")


def test_there_are_examples() -> None:
    assert len(EXAMPLES) >= 5


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_passes_the_check(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)  # output.dir is relative to the working directory
    doc = tomllib.loads(path.read_text())
    if not set(doc) & set(RESERVED_TABLES):  # a contact-only scenario
        names, _, _ = check_contact_scenario(load_contact_scenario(path))
        assert len(names) >= 2
        return
    scn = load_scenario(path)
    if scn.data.dataset in REAL_DATASETS:
        try:
            check_scenario(scn)
        except DataError as exc:  # the real data is not unpacked on this machine: said in one line
            expected = "image folder" if scn.data.dataset == "imagefolder" else f"dataset {scn.data.dataset!r}"
            assert f"{expected} " in str(exc) and " not found" in str(exc) and "\n" not in str(exc)
        report = check_scenario(scn, check_data=False)
    else:
        assert main(["simulate", "--check", str(path)]) == 0
        assert "OK" in capsys.readouterr().out
        report = check_scenario(scn)
    assert len(report.nodes) == len(report.archs) >= 2



def test_every_data_file_of_the_examples_is_named_by_an_example() -> None:
    """A shipped data file that no scenario names (even in a comment) is dead weight."""
    tomls = "".join(p.read_text() for p in EXAMPLES)
    data = sorted(p.name for p in (ROOT / "examples").iterdir() if p.is_file() and p.suffix != ".toml")
    assert data and all(f'"{name}"' in tomls for name in data), data


def test_drone_tracks_replays_the_agents_own_positions_log() -> None:
    """``drone_tracks.toml`` flies a drone from a shipped ``positions.jsonl`` as the agent writes it
    (a line before the first fix, a fix logged with two exchanges): the drone is named after its
    folder and flies each fix once, at the time it arrived."""
    import datetime as dt

    from contact_sim.tracks import read_track

    path = ROOT / "examples" / "drone_tracks.toml"
    log = ROOT / "examples" / "charlie" / "positions.jsonl"
    assert '"charlie/positions.jsonl"' in path.read_text()
    names, _, _ = check_contact_scenario(load_contact_scenario(path))
    assert names == ["track_alpha", "track_bravo", "charlie"]
    lines = log.read_text().splitlines()
    points = read_track(log)
    assert len(lines) == 50 and len(points) == 47  # less the null position and the two fixes logged twice
    assert points[0][0] == dt.datetime(2025, 6, 1, 10, 0, 40, tzinfo=dt.timezone.utc)
    assert (points[-1][0] - points[0][0]).total_seconds() == 230.0
    assert min(p[3] for p in points) == 489.0 and max(p[3] for p in points) == 529.0

def test_drone_telemetry_replays_a_ground_stations_tlog() -> None:
    """``drone_telemetry.toml`` flies a drone from a shipped MAVLink telemetry log: named after its stem,
    its positions before the autopilot had one (latitude and longitude 0) skipped, it crosses
    ``track_alpha``'s path and the two meet."""
    import datetime as dt

    from contact_sim.tracks import read_track
    from contact_sim.scenario import compute_contacts

    path = ROOT / "examples" / "drone_telemetry.toml"
    names, _, _ = check_contact_scenario(load_contact_scenario(path))
    assert names == ["track_alpha", "track_delta"]
    points = read_track(ROOT / "examples" / "track_delta.tlog")
    assert len(points) == 101 and points[0][4] == "message 7 (byte 260)"  # 104 positions, the first 3 at 0, 0
    assert points[0][0] == dt.datetime(2025, 6, 1, 10, 0, 46, tzinfo=dt.timezone.utc)
    assert (points[-1][0] - points[0][0]).total_seconds() == 200.0
    assert (points[0][2], points[-1][2]) == (8.54, 8.55) and max(p[3] for p in points) == 520.0
    plan = compute_contacts(load_contact_scenario(path))
    assert plan.start == dt.datetime(2025, 6, 1, 10, 0, 0, tzinfo=dt.timezone.utc)  # track_alpha's first time
    assert [(plan.node_names[w.a], plan.node_names[w.b]) for w in plan.windows] == [("track_alpha", "track_delta")]
    # track_delta passes under alpha's track (lon 8.545) at 10:02:16, alpha then 256 m north: in range
    assert plan.windows[0].t_start_s < 136.0 < plan.windows[0].t_end_s


def test_the_waypoint_variant_of_drone_contacts_passes_the_check() -> None:
    """``drone_contacts.toml`` offers, in a comment, to fly ``drone_waypoints.csv``
    instead of random waypoints: that variant, made as the comment says, is valid
    and flies the CSV's drones (the CSV is exercised by no other scenario)."""
    from contact_sim.scenario import parse_contact_scenario

    path = ROOT / "examples" / "drone_contacts.toml"
    text = path.read_text()
    line = next(ln for ln in text.splitlines() if ln.startswith("# waypoints_csv = "))
    dropped = line.split("then drop ", 1)[1].split(")", 1)[0].split("/")
    assert dropped == ["count", "area_km", "speed_m_s", "altitude_km", "pause_s", "seed"]
    doc = tomllib.loads(text)
    doc["drones"] = {k: v for k, v in doc["drones"].items() if k not in dropped}
    doc["drones"]["waypoints_csv"] = tomllib.loads(line[2:])["waypoints_csv"]
    names, planes, _ = check_contact_scenario(parse_contact_scenario(doc, path.parent, path))
    assert names == ["alpha", "bravo", "charlie", "delta"] and planes is None


MIXED = """
[scenario]
name = "mixed"
[constellation]
kind = "walker-delta"
total = 6
planes = 2
phasing = 1
altitude_km = 550.0
inclination_deg = 53.0
epoch = "2026-06-01T00:00:00Z"
[time]
duration_s = 3600.0
[link]
max_range_km = 5000.0
[data]
dataset = "synthetic-hurricane"
size = 2000
partition = "orbit"
[models]
archs = ["cnn-small", "cnn-medium"]
rule = "plane"
[methods]
run = ["local", "fol", "fedavg"]
"""


def test_fedavg_on_mixed_architectures_is_refused_before_any_work(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "mixed.toml"
    path.write_text(MIXED)
    out = tmp_path / "out"
    t0 = time.perf_counter()
    assert main(["simulate", str(path), "--out", str(out)]) == 2
    assert time.perf_counter() - t0 < 60  # seconds, not a pretraining run
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'fedavg' averages parameters" in err[0] and "cnn-medium, cnn-small" in err[0]
    assert not out.exists()  # nothing was started
    path.write_text(MIXED.replace('"fedavg"', '"dense"'))
    assert main(["simulate", "--check", str(path), "--out", str(out)]) == 0
    # the references do not average parameters: their refusal said they did
    path.write_text(MIXED.replace('"fedavg"', '"pooled-ft"'))
    assert main(["simulate", "--check", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'pooled-ft' trains one model on every node's data and needs one architecture" in err[0]


@pytest.mark.parametrize("patch, needle", [
    (('dataset = "synthetic-hurricane"\nsize = 2000', 'dataset = "hurricane"\nroot = "nowhere"'),
     "dataset 'hurricane' not found"),
    (('dataset = "synthetic-hurricane"', 'dataset = "hurricane"'), "data.size: only applies to synthetic"),
    (('dataset = "synthetic-hurricane"', 'dataset = "hurricanes"'), "data.dataset: unknown dataset 'hurricanes'"),
    (('run = ["local", "fol", "dense"]', 'run = ["fol"]\n[methods.fol]\nbogus = 1'), "methods.fol"),
    # server rounds past the plan's have no participant: a typo re-evaluated every node a hundred thousand times
    (('run = ["local", "fol", "dense"]', 'run = ["fol", "mtfl"]\n[methods.mtfl]\nrounds = 100000'),
     "methods.mtfl.rounds: 100000 server rounds but the contact plan has 1 [rounds]"),
    (('archs = ["cnn-small", "cnn-medium"]', 'archs = ["cnn-small"]\nnodes = {"nope" = "cnn-small"}'),
     "models.nodes: no learning node is named 'nope'"),
    # a few characters must not make the run draw terabytes of images
    (('size = 2000', 'size = 1000000000000'), "data.size: 1,000,000,000,000 images of 32x32 pixels would need"),
    (('size = 2000', 'size = 2000\nimage_size = 100000'), "data.image_size: expected an integer of 8..1024"),
    (('size = 2000', 'size = 2000\nimage_size = 0'), "data.image_size: expected an integer of 8..1024"),
    # one process per node, each loading torch, from a typo; in the line of fol contacts --workers, the same rule
    (('[methods]', '[run]\nexecutor = "process"\nworkers = 100000\n[methods]'),
     f"run.workers (or --workers): {parallelism_problem(100000)}"),
    (('[methods]', '[run]\nthreads = 100000\n[methods]'), f"run.threads: {parallelism_problem(100000)}"),
    # "local" is a new Ray instance on this machine, as no address is: its workers are this machine's processes
    (('[methods]', '[run]\nexecutor = "ray"\nray_address = "local"\nworkers = 100000\n[methods]'),
     f"run.workers (or --workers): {parallelism_problem(100000)}"),
])
def test_check_finds_data_method_and_node_mistakes(tmp_path: Path, patch: tuple[str, str], needle: str) -> None:
    path = tmp_path / "s.toml"
    path.write_text(MIXED.replace('"fedavg"', '"dense"').replace(*patch))
    with pytest.raises((ConfigError, DataError), match="^.*$") as exc:
        check_scenario(load_scenario(path))
    assert needle in str(exc.value) and "\n" not in str(exc.value)
    if needle.startswith(("data.", "methods.", "models.")):  # a field of the file: the file is named first
        assert str(exc.value).startswith(f"{path}: "), str(exc.value)


@pytest.mark.parametrize("kind", ["walker-delta", "walker-star"])
def test_plane_rule_gives_a_walker_shell_written_as_tle_its_own_planes(tmp_path: Path, kind: str) -> None:
    """Satellites read from a TLE file had no known plane (-1), and rule = "plane" was refused for them;
    their planes now come from the orbit normals at time.start: a Walker shell written out as TLE (and
    read back in another order) gets the plane assignment, hence the architectures, of the shell itself."""
    from orbits import orbital_planes, parse_utc, read_tle, walker_delta, walker_star, write_tle

    build = walker_delta if kind == "walker-delta" else walker_star
    shell = build(6, 2, 1, 550.0, 53.0, "2026-06-01T00:00:00Z")
    write_tle(tmp_path / "shell.tle", shell)
    walker = ('kind = "walker-delta"\ntotal = 6\nplanes = 2\nphasing = 1\naltitude_km = 550.0\n'
              'inclination_deg = 53.0\nepoch = "2026-06-01T00:00:00Z"')
    base = MIXED.replace('"fedavg"', '"dense"').replace('kind = "walker-delta"', f'kind = "{kind}"')
    text = (base.replace(walker.replace("walker-delta", kind), 'kind = "tle"\ntle_file = "shell.tle"')
            .replace("[time]\n", '[time]\nstart = "2026-06-01T06:00:00Z"\n'))
    assert 'tle_file = "shell.tle"' in text and 'rule = "plane"' in text
    (tmp_path / "walker.toml").write_text(base)
    (tmp_path / "s.toml").write_text(text)
    want = check_scenario(load_scenario(tmp_path / "walker.toml"))
    got = check_scenario(load_scenario(tmp_path / "s.toml"))
    assert got.nodes == want.nodes == shell.names and got.archs == want.archs
    assert want.archs == ["cnn-small"] * 3 + ["cnn-medium"] * 3  # by plane, not cycled
    (tmp_path / "s.toml").write_text(text.replace('rule = "plane"', 'rule = "cycle"'))
    assert check_scenario(load_scenario(tmp_path / "s.toml")).archs == ["cnn-small", "cnn-medium"] * 3

    order = [5, 0, 3, 1, 4, 2]  # another order: the planes are numbered as their first satellites come
    lines = (tmp_path / "shell.tle").read_text().splitlines()
    (tmp_path / "mixed.tle").write_text("".join("\n".join(lines[3 * k:3 * k + 3]) + "\n" for k in order))
    planes = orbital_planes(read_tle(tmp_path / "mixed.tle"), parse_utc("2026-06-01T06:00:00Z"))
    assert planes == [0 if shell.planes[k] == shell.planes[order[0]] else 1 for k in order]


@pytest.mark.parametrize("partition, field, value, needs", [
    ("dirichlet", "swath_km", "100.0", "orbit"), ("dirichlet", "assign", '"first"', "orbit"),
    ("region", "acquisition_s", "100.0", "orbit"), ("orbit", "psi", "0.1", "dirichlet"),
    ("region", "psi", "0.1", "dirichlet"),
])
def test_a_field_of_another_partition_is_refused(tmp_path: Path, partition: str, field: str, value: str,
                                                 needs: str) -> None:
    """A partition's own field given with another partition was silently ignored (psi = 0.1 with
    the orbit partition ran at the orbit's skew); it is refused in one line when read."""
    def scenario(part: str) -> Path:
        path = tmp_path / f"{part}.toml"
        path.write_text(MIXED.replace('"fedavg"', '"dense"').replace('partition = "orbit"', f'partition = "{part}"')
                        .replace("[models]", f"{field} = {value}\n[models]"))
        return path

    with pytest.raises(ConfigError) as exc:
        load_scenario(scenario(partition))
    assert str(exc.value) == (f"{scenario(partition)}: data.{field}: only applies to partition = '{needs}', "
                              f"not '{partition}'")
    load_scenario(scenario(needs))


def test_check_refuses_an_output_that_is_a_file_or_not_empty(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(MIXED.replace('"fedavg"', '"dense"'))
    scn = load_scenario(path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ConfigError, match="is not a folder"):
        check_scenario(scn, tmp_path / "file")
    with pytest.raises(ConfigError, match="not empty"):
        check_scenario(scn, tmp_path)
    with pytest.raises(ConfigError, match="cannot be created"):
        check_scenario(scn, tmp_path / "file" / "sub")
    check_scenario(scn, tmp_path / "new" / "deeper")


def test_a_pool_too_small_for_a_large_shell_is_refused_before_the_shell_is_built(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 339,999-satellite shell took 2 s and 400 MB to build, only for the check to say then that
    the default pool of 12,000 images cannot give every satellite its images; a Walker shell's
    (or random-waypoint drones') node count is in the file, and the pool is checked first."""
    import contact_sim.scenario as contact_scenario

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the shell was built before the pool was checked")

    monkeypatch.setattr(contact_scenario, "walker_delta", never)
    path = tmp_path / "big.toml"
    path.write_text('[constellation]\nkind = "walker-delta"\ntotal = 339999\nplanes = 1\naltitude_km = 550.0\n'
                    'inclination_deg = 53.0\nepoch = "2025-01-01T00:00:00Z"\n[time]\nduration_s = 1.0\n'
                    '[link]\nmax_range_km = 1000.0\n')
    with pytest.raises(DataError, match=r"data\.size \(default 12000\): 12000 images cannot give 339999 nodes "):
        check_scenario(load_scenario(path))


@pytest.mark.parametrize("name, movers", [("leo_contacts.toml", "48 satellite(s) and 1 ground station(s), 49 nodes"),
                                          ("drone_contacts.toml", "12 drone(s) and 0 ground station(s), 12 nodes")])
def test_contacts_check_counts_the_nodes_as_the_run_does(name: str, movers: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """``fol contacts --check`` names what moves and the ground stations, and counts the plan's
    nodes as the run's summary does (ground stations are nodes of the plan); it said
    "12 drones nodes" and "48 constellation nodes" where the run said 49."""
    from contact_sim.cli import main as contacts_main

    path = ROOT / "examples" / name
    assert contacts_main(["contacts", str(path), "--check"]) == 0
    assert f": OK — {movers} in the contact plan" in capsys.readouterr().out
    names, _, _ = check_contact_scenario(load_contact_scenario(path))
    stations = len(load_contact_scenario(path).ground_stations)
    assert f"{len(names) + stations} nodes" in movers
