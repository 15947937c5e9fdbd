"""User mistakes on the command line end in one line naming the command and
what is wrong, exit status 2, no traceback; outputs are checked before any long
work."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import pytest

from fol.cli import main
from orbits import walker_delta
from orbits.tle import format_tle, tle_checksum

from _names import deep_folder
from _processes import repo_env

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
DATA = "dataset=synthetic-hurricane,nodes=2,node=0,size=200"


def _tle_with(line: int, start: int, text: str) -> str:
    """A valid 2-satellite TLE with columns ``start..`` (0-based) of element line
    ``line`` of the first set replaced by ``text`` and the checksum recomputed."""
    lines = format_tle(walker_delta(2, 1, 0, 550.0, 53.0, "2025-03-01T00:00:00Z")).splitlines()
    k = 1 if line == 1 else 2
    s = lines[k]
    s = s[:start] + text + s[start + len(text):]
    lines[k] = s[:68] + str(tle_checksum(s))
    return "\n".join(lines) + "\n"


def _tle_scenario(tmp: Path, tle_text: str | None = None, tle_dir: bool = False) -> Path:
    if tle_dir:
        (tmp / "shell.tle").mkdir()
    else:
        (tmp / "shell.tle").write_text(tle_text or "")
    path = tmp / "tle.toml"
    path.write_text('[constellation]\nkind = "tle"\ntle_file = "shell.tle"\n'
                    '[time]\nstart = "2025-03-01T00:00:00Z"\nduration_s = 3600.0\n'
                    '[link]\nmax_range_km = 5000.0\n')
    return path


def _waypoint_dir_scenario(tmp: Path) -> Path:
    (tmp / "wp.csv").mkdir()
    path = tmp / "drones.toml"
    path.write_text('[drones]\nradio_range_km = 1.0\nwaypoints_csv = "wp.csv"\n[time]\nduration_s = 600.0\n')
    return path


def _personalize(tmp: Path, out: str) -> list[str]:
    return ["personalize", "--model", str(tmp / "m.safetensors"), "--data", DATA, "--neighbors", str(tmp),
            "--out", out]


def _existing_file(tmp: Path) -> str:
    (tmp / "taken").write_text("x")
    return str(tmp / "taken")


def _a_dir(tmp: Path) -> str:
    (tmp / "adir").mkdir()
    return str(tmp / "adir")


WALKER = ('[constellation]\nkind = "walker-delta"\ntotal = 4\nplanes = 2\nphasing = 1\naltitude_km = 550.0\n'
          'inclination_deg = 53.0\nepoch = "2026-06-01T00:00:00Z"\n[time]\nduration_s = 3600.0\nstep_s = 60.0\n'
          '[link]\nmax_range_km = 5000.0\n')


def _walker_scenario(tmp: Path) -> str:
    (tmp / "walker.toml").write_text(WALKER)
    return str(tmp / "walker.toml")


def _out_with_folder(tmp: Path, name: str) -> str:
    (tmp / "out" / name).mkdir(parents=True)
    return str(tmp / "out")


def _learning_scenario(tmp: Path, seeds: str, fol: str = "", extra: str = "") -> str:
    """The demo scenario with another ``seeds`` line, the lines ``fol`` added to its [fol] table and
    the lines ``extra`` at its end."""
    from importlib import resources

    text = resources.files("fol.simulation").joinpath("demo.toml").read_text().replace("seeds = [0]", seeds, 1)
    (tmp / "learn.toml").write_text(text.replace("\n[fol]\n", f"\n[fol]\n{fol}\n", 1) + f"\n{extra}\n")
    return str(tmp / "learn.toml")


def _big_number_file(tmp: Path, name: str, text: str, old: str, key: str) -> str:
    """``text`` with line ``old`` replaced by (or, when ``old`` is empty, ending with) ``key = 10**400``."""
    line = f"{key} = {10**400}"
    (tmp / name).write_text(text.replace(old, line) if old else text + line + "\n")
    return str(tmp / name)


def _omm_scenario(tmp: Path, key: str, value: object) -> str:
    import json

    from orbits import write_omm

    write_omm(tmp / "gp.json", walker_delta(2, 1, 0, 550.0, 53.0, "2025-03-01T00:00:00Z"))
    records = json.loads((tmp / "gp.json").read_text())
    records[0][key] = value
    (tmp / "gp.json").write_text(json.dumps(records))
    (tmp / "omm.toml").write_text('[constellation]\nkind = "omm"\nomm_file = "gp.json"\n[time]\n'
                                  'start = "2025-03-01T00:00:00Z"\nduration_s = 3600.0\n[link]\nmax_range_km = 5000.0\n')
    return str(tmp / "omm.toml")


CASES: dict[str, tuple[Callable[[Path], list[str]], str]] = {
    "pretrain --lr 1e9": (lambda t: ["pretrain", "--data", DATA, "--lr", "1e9", "--out", str(t / "m.safetensors")],
                          "--lr: must be at most 1e+06 (it multiplies float32 tensors"),  # FOLConfig's pretrain_lr check
    "pretrain --lr nan": (lambda t: ["pretrain", "--data", DATA, "--lr", "nan", "--out", str(t / "m.safetensors")],
                          "--lr: must be a finite number, got nan"),
    "pretrain --epochs 0": (lambda t: ["pretrain", "--data", DATA, "--epochs", "0", "--out", str(t / "m.st")],
                            "--epochs"),
    # an OverflowError traceback from the progress bar (a range longer than sys.maxsize)
    "pretrain --epochs 10**20": (lambda t: ["pretrain", "--data", DATA, "--epochs", str(10**20), "--out",
                                            str(t / "m.st")], "--epochs: must be at most 100,000, got 1000"),
    "pretrain: pool too small for the spec": (lambda t: ["pretrain", "--data", "dataset=synthetic-hurricane,nodes=2,"
                                                         "node=0,size=200", "--out", str(t / "m.st")],
                                              "--data: 200 images of synthetic-hurricane cannot give nodes=2 "
                                              "per_node=300 images each"),
    "pretrain --data psi=inf": (lambda t: ["pretrain", "--data", "dataset=synthetic-hurricane,nodes=2,node=0,psi=inf",
                                           "--out", str(t / "m.st")], "--data: psi=inf must be a finite number > 0"),
    "pretrain --out DIR": (lambda t: ["pretrain", "--data", DATA, "--out", _a_dir(t)], "is a folder"),
    "pretrain --batch-size 0": (lambda t: ["pretrain", "--data", DATA, "--batch-size", "0", "--out", str(t / "m.st")],
                                "--batch-size: must be at least 2 (batch norm cannot train on one image"),
    # FOLConfig refuses batch_size = 1; pretrain took it and ended in torch's "Expected more than 1 value per
    # channel when training" traceback (a model of 1 x 1 maps) or trained batch norm on single images
    "pretrain --batch-size 1": (lambda t: ["pretrain", "--data", DATA, "--batch-size", "1", "--out", str(t / "m.st")],
                                "--batch-size: must be at least 2 (batch norm cannot train on one image, e.g. "
                                "mobilenet_v3_small on 16 x 16 images), got 1"),
    # refused where it does not apply, as --coords, --splits and --bands are; a file, /dev/null or a FIFO was taken
    "data info synthetic --data-root FILE": (
        lambda t: ["data", "info", "synthetic-hurricane", "--data-root", _existing_file(t)],
        "--data-root: only applies to datasets read from files (a real dataset's <root>/<name>/, an imagefolder "
        "path relative to it), not 'synthetic-hurricane', which is generated from no folder"),
    "pretrain --data-root /dev/null": (
        lambda t: ["pretrain", "--data", DATA, "--data-root", "/dev/null", "--out", str(t / "m.st")],
        "--data-root: only applies to datasets read from files"),
    "personalize --data-root DIR": (lambda t: _personalize(t, str(t / "o")) + ["--data-root", str(t)],
                                    "--data-root: only applies to datasets read from files"),
    "pretrain --patience -1": (lambda t: ["pretrain", "--data", DATA, "--patience", "-1", "--out", str(t / "m.st")],
                               "--patience: must be >= 0, got -1"),
    "personalize --out /proc/x": (lambda t: _personalize(t, "/proc/x/out"), "--out /proc/x/out"),
    "personalize --out FILE": (lambda t: _personalize(t, _existing_file(t)), "exists and is not a folder"),
    "personalize --out DIR holding a folder report.json": (
        lambda t: _personalize(t, _out_with_folder(t, "report.json")), "report.json: is a folder"),
    "personalize --out DIR holding a folder ensemble.json": (
        lambda t: _personalize(t, _out_with_folder(t, "ensemble.json")) + ["--variant", "fol-a"],
        "ensemble.json: is a folder"),
    "pretrain --data partition=region with too many nodes": (
        lambda t: ["pretrain", "--data", "dataset=synthetic-hurricane,size=200,nodes=300,node=0,partition=region",
                   "--out", str(t / "m.safetensors")], "--data: 200 images of synthetic-hurricane cannot give nodes=300"),
    "personalize --max-bytes 0": (lambda t: _personalize(t, str(t / "o")) + ["--max-bytes", "0"],
                                  "--max-bytes: expected a number of bytes in 1..4,000,000,000 (4 GB), got 0"),
    # the node agent's bound of [limits] max_payload_bytes; 10**400 was taken, exit 0
    "personalize --max-bytes 10**400": (lambda t: _personalize(t, str(t / "o")) + ["--max-bytes", str(10**400)],
                                        "--max-bytes: expected a number of bytes in 1..4,000,000,000 (4 GB), got 1000"),
    "pretrain --batch-size 10**400": (lambda t: ["pretrain", "--data", DATA, "--batch-size", str(10**400), "--out",
                                                 str(t / "m.st")], "--batch-size: must be at most 1,000,000 (a batch "
                                                                   "is at most its whole split), got 1000"),
    # named as the flag the user typed, not as the config field it overrides (fol.top_k)
    "personalize --top-k 0": (lambda t: _personalize(t, str(t / "o")) + ["--top-k", "0"],
                              "--top-k: expected an ensemble size K >= 1, got 0"),
    "personalize --config DIR": (lambda t: _personalize(t, str(t / "o")) + ["--config", _a_dir(t)],
                                 "is a directory"),
    "contacts --out DIR holding a folder contacts.czml": (
        lambda t: ["contacts", _walker_scenario(t), "--czml", "--out", _out_with_folder(t, "contacts.czml")],
        "contacts.czml: is a folder"),
    "contacts --out DIR holding a folder orbits.omm.json": (
        lambda t: ["contacts", _walker_scenario(t), "--export-orbits", "omm", "--no-plot", "--out",
                   _out_with_folder(t, "orbits.omm.json")], "orbits.omm.json: is a folder"),
    "contacts --out DIR holding a folder orbits.oem.xml": (
        lambda t: ["contacts", _walker_scenario(t), "--export-orbits", "oem", "--orbits-format", "xml", "--no-plot",
                   "--out", _out_with_folder(t, "orbits.oem.xml")], "orbits.oem.xml: is a folder"),
    "contacts DIR": (lambda t: ["contacts", _a_dir(t)], "is a directory"),
    # fol simulate's rule for the same flag (4 per core); 10**400 was taken and capped to the cores
    "contacts --workers 10**400": (lambda t: ["contacts", _walker_scenario(t), "--workers", str(10**400)],
                                   "--workers: expected 1.."),
    "contacts --workers 0": (lambda t: ["contacts", _walker_scenario(t), "--workers", "0"],
                             "(4 per core), got 0"),
    # said OK at --check, and stopped only after the window search
    "contacts --czml of drones": (lambda t: ["contacts", str(EXAMPLES / "drone_contacts.toml"), "--czml", "--check",
                                             "--out", str(t / "o")],
                                  "drone_contacts.toml: --czml needs a satellite scenario ([constellation])"),
    "simulate DIR": (lambda t: ["simulate", _a_dir(t)], "is a directory"),
    "agent --config DIR": (lambda t: ["agent", "--config", _a_dir(t)], "is a directory"),
    "tle_file = DIR": (lambda t: ["contacts", str(_tle_scenario(t, tle_dir=True))], "is a directory"),
    "waypoints_csv = DIR": (lambda t: ["contacts", str(_waypoint_dir_scenario(t))], "is a directory"),
    "TLE letters in epoch": (lambda t: ["contacts", str(_tle_scenario(t, _tle_with(1, 20, "25O60.0")))],
                             "epoch day"),
    "TLE letters in B*": (lambda t: ["contacts", str(_tle_scenario(t, _tle_with(1, 53, " 1x345-3")))],
                          "B* drag term"),
    "TLE epoch day 999": (lambda t: ["contacts", str(_tle_scenario(t, _tle_with(1, 20, "999.00000000")))],
                          "epoch day"),
    "TLE inclination 999": (lambda t: ["contacts", str(_tle_scenario(t, _tle_with(2, 8, "999.0000")))],
                            "inclination"),
    "pretrain --data seed=10**26": (lambda t: ["pretrain", "--data", DATA + f",seed={10**26}", "--out", str(t / "m.st")],
                                    "--data: seed=100000000000000000000000000: expected an integer in 0..4294967295"),
    # a missing dataset folder named the folder, not the flag that gave it
    "pretrain --data missing image folder": (
        lambda t: ["pretrain", "--data", f"dataset=imagefolder,path={t / 'gone'},nodes=2,node=0", "--out",
                   str(t / "m.st")], "fol pretrain: error: --data: image folder "),
    "data info imagefolder:MISSING": (lambda t: ["data", "info", f"imagefolder:{t / 'gone'}"],
                                      "error: imagefolder:"),
    "pretrain --init-seed 10**26": (lambda t: ["pretrain", "--data", DATA, "--init-seed", str(10**26),
                                               "--out", str(t / "m.st")],
                                    "--init-seed: expected an integer in 0..4294967295"),
    # 10**19 epochs passed the check and ended in an OverflowError traceback from the progress bar
    # batch_size 0 was "must be > 0", which 1 is too, and then "must be at least 2": one rule, one message
    "simulate [fol] batch_size = 0": (
        lambda t: ["simulate", _learning_scenario(t, "seeds = [0]", fol="batch_size = 0"), "--check"],
        "learn.toml: fol.batch_size must be at least 2 (batch norm cannot train on one image"),
    "simulate [fol] distill_epochs = 10**19": (
        lambda t: ["simulate", _learning_scenario(t, "seeds = [0]", fol="distill_epochs = 10000000000000000000"),
                   "--check"], "learn.toml: fol.distill_epochs must be at most 100,000, got 10000000000000000000"),
    # no bound before (10**400 passed the check): Q is at most 1,024, refused before anything is built
    "simulate [fol] max_neighbours = 10**400": (
        lambda t: ["simulate", _big_number_file(t, "learn.toml", Path(_learning_scenario(t, "seeds = [0]")).read_text(),
                                                "max_neighbours = 3", "max_neighbours"), "--check"],
        "learn.toml: fol.max_neighbours must be at most 1,024 (neighbour models per round, as the node agent's "
        "trigger.models), got 1000"),
    "simulate [methods.fedavg] local_epochs = 10**12": (
        lambda t: ["simulate", _learning_scenario(t, "seeds = [0]", extra="[methods.fedavg]\nlocal_epochs = 1000000000000"),
                   "--check"], "methods.fedavg.local_epochs must be at most 100,000, got 1000000000000"),
    "pretrain --patience 10**20": (lambda t: ["pretrain", "--data", DATA, "--patience", str(10**20), "--out",
                                              str(t / "m.st")], "--patience: must be at most 100,000, got 1000"),
    "simulate seeds = [10**30]": (lambda t: ["simulate", _learning_scenario(t, f"seeds = [{10**30}]"), "--check"],
                                  "scenario.seeds: expected a non-empty list of integers in 0..4294967295"),
    "keys list --store FILE": (lambda t: ["keys", "list", "--store", _existing_file(t)],
                               "taken: trust store folder exists and is not a folder"),
    # TOML and JSON integers have no size limit; one beyond the float range is not a number of the range
    "altitude_km = 10**400": (lambda t: ["contacts", _big_number_file(t, "walker.toml", WALKER, "altitude_km = 550.0",
                                                                      "altitude_km")],
                              "constellation.altitude_km: expected a number, got 1000"),
    "personalize --config finetune_lr = 10**400": (
        lambda t: _personalize(t, str(t / "o")) + ["--config", _big_number_file(t, "fol.toml", "", "", "finetune_lr")],
        "fol.finetune_lr must be a finite number, got 1000"),
    "OMM MEAN_MOTION = 10**400": (lambda t: ["contacts", _omm_scenario(t, "MEAN_MOTION", 10**400)],
                                  "MEAN_MOTION: expected a finite number, got 1000"),
    "contacts error names command and file": (
        lambda t: ["contacts", str(_tle_scenario(t, "garbage\n"))], "fol contacts: error: "),
}


@pytest.mark.parametrize("case", list(CASES))
def test_cli_user_error_is_one_line(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    build, needle = CASES[case]
    argv = build(tmp_path)
    code = main(argv)
    captured = capsys.readouterr()
    lines = [ln for ln in captured.err.splitlines() if ln.strip()]
    assert code == 2, (code, captured.err)
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert lines[0].startswith(f"fol {argv[0]}: error: ") and needle in lines[0], lines[0]
    # a value read from the user is shown bounded (a huge integer by its first digits and its length)
    assert len(lines[0].replace(str(tmp_path), "T")) < 300, lines[0]
    if argv[0] == "contacts" and "scenario" not in case:
        # the scenario file first, then the file it points to that holds the mistake
        assert lines[0].startswith(f"fol contacts: error: {argv[1]}: "), lines[0]
        for data_file in ("shell.tle", "wp.csv", "gp.json"):
            if (tmp_path / data_file).exists():
                assert f"{argv[1]}: {tmp_path / data_file}" in lines[0], lines[0]


def test_training_that_diverges_is_a_project_error() -> None:
    import torch

    from fol.errors import TrainingError
    from fol.train import TrainConfig, fit

    model = torch.nn.Linear(2, 2)
    x = torch.randn(32, 2) * 1e20
    y = torch.randint(0, 2, (32,))
    with pytest.raises(TrainingError, match="non-finite"):
        fit(model, (x, y), TrainConfig(epochs=3, lr=9.0, weight_decay=0.0))


def test_contacts_output_that_cannot_be_written_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """An OSError while writing the tables (a full disk) is one line naming the file, not a traceback."""
    import errno

    import contact_sim.dtn

    def full(path: Path, *args: object, **kwargs: object) -> Path:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(contact_sim.dtn, "write_ion", full)
    assert main(["contacts", _walker_scenario(tmp_path), "--ion", "--no-plot", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "contacts.ion" in err[0] and "No space left" in err[0], err


def test_simulate_output_that_cannot_be_written_later_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The disk fills after the output check passed: one line naming the file and the reason, status 2."""
    import errno

    import fol.simulation.runner

    def full(path: Path, data: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(fol.simulation.runner, "_write_json", full)
    code = main(["simulate", _learning_scenario(tmp_path, "seeds = [0]"), "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, (code, err)
    assert len(err) == 1 and err[0].startswith("fol simulate: error: ") and "scenario.resolved.json" in err[0] \
        and "No space left on device" in err[0], err


@pytest.mark.parametrize("stop", [KeyboardInterrupt, OSError(28, "No space left on device")])
def test_contacts_stopped_while_writing_keeps_the_old_set(stop: BaseException, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C (or a full disk) after contacts.csv is written but before contacts.ion: the folder
    still holds the previous run's whole set, not a new table beside an old plan, and no temporaries."""
    import contact_sim.dtn

    out = tmp_path / "o"
    out.mkdir()
    (out / "contacts.csv").write_text("old csv")
    (out / "contacts.ion").write_text("old ion")
    (out / "notes.txt").write_text("the user's")

    def stopped(path: Path, *args: object, **kwargs: object) -> Path:
        raise stop

    monkeypatch.setattr(contact_sim.dtn, "write_ion", stopped)
    code = main(["contacts", _walker_scenario(tmp_path), "--ion", "--no-plot", "--out", str(out)])
    assert code == (130 if stop is KeyboardInterrupt else 2)
    assert sorted(p.name for p in out.iterdir()) == ["contacts.csv", "contacts.ion", "notes.txt"]
    assert (out / "contacts.csv").read_text() == "old csv" and (out / "contacts.ion").read_text() == "old ion"


def test_contacts_replaces_the_set_it_writes(tmp_path: Path) -> None:
    """A completed run replaces the files it writes and leaves no temporaries."""
    out = tmp_path / "o"
    out.mkdir()
    (out / "contacts.csv").write_text("old csv")
    assert main(["contacts", _walker_scenario(tmp_path), "--ion", "--no-plot", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["contacts.csv", "contacts.ion", "contacts.manifest.json"]
    assert (out / "contacts.csv").read_text() != "old csv" and (out / "contacts.ion").stat().st_size > 0


@pytest.mark.parametrize("longer", [5, 20], ids=["the-manifest", "the-table-too"])
def test_contacts_says_in_one_line_that_an_output_path_is_too_long_and_keeps_the_previous_set(
        longer: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An --out whose path the file system takes for contacts.csv's temporary file in the staging folder but
    not for the manifest's (22 characters longer): the run ended 'cannot write .contacts.manifest.json.<hex>.tmp
    (File name too long)', a temporary file's name and nothing to do. The line names the manifest in --out and
    what was expected; an --out longer still names contacts.csv, not its temporary file. The previous set stays,
    byte for byte, and no staging folder."""
    import os

    from swarmbase.tomlcheck import brief

    scenario = _walker_scenario(tmp_path)
    stage = len(f"/.staged-{os.getpid()}-{'0' * 12}.tmp")
    length = 4095 - stage - len("/.contacts.manifest.json.0123456789ab.tmp") + longer  # longer: 10 more for the table
    out = deep_folder(tmp_path, length)
    (out / "contacts.csv").write_text("the previous table")
    (out / "contacts.manifest.json").write_text('{"files": {}, "format": 1}')
    before = _contents(out)
    capsys.readouterr()
    assert main(["contacts", scenario, "--no-plot", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    said = (f"{brief(out / 'contacts.manifest.json', keep_end=40)}: cannot write the manifest of fol contacts (File "
            f"name too long); expected a shorter path: the file system refuses the manifest's, or its temporary "
            f"file's beside it, as too long; give a shorter output folder" if longer < 10 else
            f"--out {brief(out)}: cannot write contacts.csv (File name too long)")
    assert err == [f"fol contacts: error: {scenario}: {said}"], err
    assert _contents(out) == before


def _contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("first, second, kept", [
    (["--json", "--czml", "--ion", "--hdtn", "--export-orbits", "oem"], ["--export-orbits", "oem", "--orbits-format",
                                                                         "xml"], ["orbits.oem.xml"]),
    (["--export-orbits", "omm"], ["--export-orbits", "omm", "--orbits-format", "csv", "--json"],
     ["contacts.json", "orbits.omm.csv"]),
    (["--export-orbits", "tle", "--czml"], ["--export-orbits", "omm"], ["orbits.omm.json"]),
], ids=["oem-kvn-then-xml", "omm-json-then-csv", "tle-then-omm"])
def test_contacts_replaces_the_whole_set_of_the_previous_run(first: list[str], second: list[str], kept: list[str],
                                                             tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run's outputs replace the previous run's whole set: an export of another layout (orbits.oem beside a new
    orbits.oem.xml, orbits.omm.json beside orbits.omm.csv) or an option left out this time (contacts.czml) is removed,
    and said so; a file the command never writes (notes.txt) is left alone. Before, they stayed, stale."""
    out = tmp_path / "o"
    scenario = _walker_scenario(tmp_path)
    assert main(["contacts", scenario, "--no-plot", *first, "--out", str(out)]) == 0
    (out / "notes.txt").write_text("the user's")
    earlier = set(_contents(out)) - {"notes.txt", "contacts.csv", "contacts.manifest.json", *kept}
    assert earlier
    capsys.readouterr()
    assert main(["contacts", scenario, "--no-plot", *second, "--out", str(out)]) == 0
    assert sorted(_contents(out)) == sorted(["contacts.csv", "contacts.manifest.json", "notes.txt", *kept])
    said = capsys.readouterr().out
    for name in earlier:
        assert f"removed    {out / name} (an earlier run's; not an output of this one)" in said, said
    assert (out / "notes.txt").read_text() == "the user's"


@pytest.mark.parametrize("stop", [KeyboardInterrupt, OSError(28, "No space left on device")])
def test_contacts_stopped_while_writing_keeps_the_earlier_export_of_another_layout(
        stop: BaseException, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The removal of the previous run's other outputs is part of the swap: a run stopped while writing its
    orbits.oem.xml leaves the folder as it was, the earlier orbits.oem and contacts.czml included."""
    import orbits

    out = tmp_path / "o"
    scenario = _walker_scenario(tmp_path)
    assert main(["contacts", scenario, "--no-plot", "--czml", "--export-orbits", "oem", "--out", str(out)]) == 0
    before = _contents(out)
    assert sorted(before) == ["contacts.csv", "contacts.czml", "contacts.manifest.json", "orbits.oem"]

    def stopped(path: Path, *args: object, **kwargs: object) -> Path:
        raise stop

    monkeypatch.setattr(orbits, "write_oem", stopped)
    code = main(["contacts", scenario, "--no-plot", "--export-orbits", "oem", "--orbits-format", "xml",
                 "--out", str(out)])
    assert code == (130 if stop is KeyboardInterrupt else 2)
    assert _contents(out) == before  # no temporaries either


@pytest.mark.parametrize("second", [[], ["--export-orbits", "tle"]], ids=["removes", "replaces"])
@pytest.mark.parametrize("check", [["--check"], []], ids=["check", "run"])
def test_contacts_refuses_to_replace_or_remove_a_file_its_scenario_reads(
        second: list[str], check: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A scenario reading the orbits.tle an earlier run exported into --out: the run would remove it (no export)
    or replace it (the same export), so it is refused in one line before the search, and the folder kept."""
    out = tmp_path / "o"
    assert main(["contacts", _walker_scenario(tmp_path), "--no-plot", "--export-orbits", "tle", "--out", str(out)]) == 0
    scenario = tmp_path / "from-tle.toml"
    scenario.write_text('[constellation]\nkind = "tle"\ntle_file = "o/orbits.tle"\n[time]\n'
                        'start = "2026-06-01T00:00:00Z"\nduration_s = 3600.0\nstep_s = 60.0\n[link]\nmax_range_km = 5000.0\n')
    before = _contents(out)
    capsys.readouterr()
    assert main(["contacts", str(scenario), "--no-plot", *second, *check, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"fol contacts: error: {scenario}: constellation.tle_file {out / 'orbits.tle'}: is orbits.tle in "
                   f"--out {out}, which this run replaces or removes (a run's outputs replace the previous run's); "
                   "copy it elsewhere or give another --out"]
    assert _contents(out) == before
    assert main(["contacts", str(scenario), "--no-plot", *second, *check, "--out", str(tmp_path / "elsewhere")]) == 0


def test_contacts_leaves_a_link_or_a_folder_named_as_an_output_it_does_not_write(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The command writes regular files only, so a link of an output's name is the user's: a link named
    contacts.czml to the user's own file and one that leads nowhere named orbits.oem stay, as a folder named
    contacts.ion does, and none is said to be removed; an earlier run's contacts.json is removed and said so.
    Before, the link to the user's file was removed and the dangling one said removed though it stayed."""
    import os

    out = tmp_path / "o"
    scenario = _walker_scenario(tmp_path)
    assert main(["contacts", scenario, "--no-plot", "--json", "--out", str(out)]) == 0
    mine = tmp_path / "mine.czml"
    mine.write_text("the user's")
    os.symlink(mine, out / "contacts.czml")
    os.symlink(tmp_path / "gone", out / "orbits.oem")
    (out / "contacts.ion").mkdir()
    capsys.readouterr()
    assert main(["contacts", scenario, "--no-plot", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert [line for line in said.splitlines() if line.startswith("removed")] == [
        f"removed    {out / 'contacts.json'} (an earlier run's; not an output of this one)"]
    assert os.readlink(out / "contacts.czml") == str(mine) and mine.read_text() == "the user's"
    assert os.readlink(out / "orbits.oem") == str(tmp_path / "gone")
    assert (out / "contacts.ion").is_dir()
    assert sorted(p.name for p in out.iterdir()) == ["contacts.csv", "contacts.czml", "contacts.ion",
                                                     "contacts.manifest.json", "orbits.oem"]


def test_contacts_reads_a_link_named_as_an_output_it_leaves_alone(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A scenario reading o/orbits.tle, a link to the user's TLE file: a run that exports no TLE leaves the link
    (so it is not refused), one that exports a TLE would replace it (refused, the folder kept)."""
    import os

    out = tmp_path / "o"
    assert main(["contacts", _walker_scenario(tmp_path), "--no-plot", "--export-orbits", "tle", "--out",
                 str(tmp_path / "first")]) == 0
    out.mkdir()
    os.symlink(tmp_path / "first" / "orbits.tle", out / "orbits.tle")
    scenario = tmp_path / "from-tle.toml"
    scenario.write_text('[constellation]\nkind = "tle"\ntle_file = "o/orbits.tle"\n[time]\n'
                        'start = "2026-06-01T00:00:00Z"\nduration_s = 3600.0\nstep_s = 60.0\n[link]\nmax_range_km = 5000.0\n')
    assert main(["contacts", str(scenario), "--no-plot", "--out", str(out)]) == 0
    assert (out / "orbits.tle").is_symlink() and (out / "contacts.csv").is_file()
    capsys.readouterr()
    assert main(["contacts", str(scenario), "--no-plot", "--export-orbits", "tle", "--out", str(out)]) == 2
    assert "which this run replaces or removes" in capsys.readouterr().err
    assert (out / "orbits.tle").is_symlink()


def _said(text: str, word: str) -> list[str]:
    """The lines of a run's stdout that start with ``word`` (``removed``, ``kept``)."""
    return [line for line in text.splitlines() if line.startswith(word)]


@pytest.mark.parametrize("manifest", [False, True], ids=["first-run", "after-a-run"])
def test_contacts_keeps_the_users_own_file_named_as_an_output_it_does_not_write(
        manifest: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The user's own contacts.png and hand-made orbits.oem in --out, files fol contacts never wrote: a run that
    writes neither keeps both byte for byte and says so, whether the folder holds no manifest (a first run, or
    an older version's outputs) or one of a run that wrote neither. Before, both were removed as stale."""
    out = tmp_path / "o"
    scenario = _walker_scenario(tmp_path)
    if manifest:
        assert main(["contacts", scenario, "--no-plot", "--out", str(out)]) == 0
        assert set(_contents(out)) == {"contacts.csv", "contacts.manifest.json"}
    else:
        out.mkdir()
    (out / "contacts.png").write_bytes(b"the user's picture")
    (out / "orbits.oem").write_text("the user's states\n")
    capsys.readouterr()
    for _ in range(2):  # and again, once this run's manifest is there
        assert main(["contacts", scenario, "--no-plot", "--out", str(out)]) == 0
        said = capsys.readouterr().out
        assert _said(said, "removed") == []
        assert _said(said, "kept") == [
            f"kept       {out / name} (not an output of this run; no contacts.manifest.json there says fol "
            "contacts wrote it)" for name in ("contacts.png", "orbits.oem")]
        assert (out / "contacts.png").read_bytes() == b"the user's picture"
        assert (out / "orbits.oem").read_text() == "the user's states\n"
    assert json.loads((out / "contacts.manifest.json").read_text())["files"].keys() == {"contacts.csv"}


def test_contacts_keeps_an_earlier_output_changed_since_and_rewrites_one_it_writes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An earlier run's contacts.czml the user edited (bytes added) and its orbits.oem changed at the same size
    (the sha256 tells, not the size) are not this run's outputs: kept byte for byte and said so, not removed, and
    the new manifest does not list them, so a later run keeps them too. Its untouched contacts.json is removed.
    An output this run writes again is rewritten even if edited (contacts.csv), as a run without a manifest
    rewrites one: the run's outputs are the run's."""
    out = tmp_path / "o"
    scenario = _walker_scenario(tmp_path)
    assert main(["contacts", scenario, "--no-plot", "--json", "--czml", "--export-orbits", "oem",
                 "--out", str(out)]) == 0
    fresh_csv = (out / "contacts.csv").read_bytes()
    with open(out / "contacts.czml", "ab") as fh:
        fh.write(b"\n// my note\n")
    oem = (out / "orbits.oem").read_bytes()
    (out / "orbits.oem").write_bytes(oem.replace(b"TEME", b"XXXX", 1))
    (out / "contacts.csv").write_bytes(b"my edit of the table")
    edited = {name: (out / name).read_bytes() for name in ("contacts.czml", "orbits.oem")}
    assert len(edited["orbits.oem"]) == len(oem) and edited["orbits.oem"] != oem
    capsys.readouterr()
    said = []
    for _ in range(2):  # and again: the edited files are the user's now, no manifest lists them
        assert main(["contacts", scenario, "--no-plot", "--export-orbits", "oem", "--orbits-format", "xml",
                     "--out", str(out)]) == 0
        said.append(capsys.readouterr().out)
        assert {name: (out / name).read_bytes() for name in edited} == edited
        assert (out / "contacts.csv").read_bytes() == fresh_csv
        assert not (out / "contacts.json").exists()
        assert json.loads((out / "contacts.manifest.json").read_text())["files"].keys() == {"contacts.csv",
                                                                                            "orbits.oem.xml"}
    for text, why in zip(said, ("changed since fol contacts wrote it",
                                "no contacts.manifest.json there says fol contacts wrote it")):
        assert _said(text, "kept") == [f"kept       {out / name} (not an output of this run; {why})"
                                       for name in ("contacts.czml", "orbits.oem")], text
    assert _said(said[0], "removed") == [
        f"removed    {out / 'contacts.json'} (an earlier run's; not an output of this one)"]
    assert _said(said[1], "removed") == []


def test_contacts_keeps_an_earlier_output_edited_while_the_run_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The manifest is compared again at the swap: an earlier contacts.czml edited after the run checked the
    folder (here while it writes its ION plan) is kept and said changed, not removed with the untouched
    contacts.json."""
    import contact_sim.dtn

    out = tmp_path / "o"
    scenario = _walker_scenario(tmp_path)
    assert main(["contacts", scenario, "--no-plot", "--json", "--czml", "--out", str(out)]) == 0
    write_ion = contact_sim.dtn.write_ion

    def edit_then_write(path: Path, *args: object, **kwargs: object) -> Path:
        (out / "contacts.czml").write_text("edited meanwhile")
        return write_ion(path, *args, **kwargs)

    monkeypatch.setattr(contact_sim.dtn, "write_ion", edit_then_write)
    capsys.readouterr()
    assert main(["contacts", scenario, "--no-plot", "--ion", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert _said(said, "removed") == [f"removed    {out / 'contacts.json'} (an earlier run's; not an output of this one)"]
    assert _said(said, "kept") == [
        f"kept       {out / 'contacts.czml'} (not an output of this run; changed since fol contacts wrote it)"]
    assert (out / "contacts.czml").read_text() == "edited meanwhile"


_SHA = "0" * 64


@pytest.mark.parametrize("text, problem", [
    (b"garbage", "not a manifest of fol contacts (Expecting value: line 1 column 1 (char 0))"),
    (b"\xff\xfe{}", "not a UTF-8 text file; expected a manifest of fol contacts"),
    (b" " * (64 * 1024 + 1), f"{64 * 1024 + 1} bytes; a manifest of fol contacts may have at most {64 * 1024}"),
    (b"[]", "top level: expected a JSON object, got []"),
    (b'{"format": 2, "files": {}}', "format: expected 1, got 2"),
    (b'{"format": 1}', "files: missing (required)"),
    (f'{{"format": 1, "files": {{"../notes.txt": {{"bytes": 10, "sha256": "{_SHA}"}}}}}}'.encode(),
     "files: unknown key '../notes.txt' (allowed: contacts.csv, "),
    (f'{{"format": 1, "files": {{"/etc/hostname": {{"bytes": 10, "sha256": "{_SHA}"}}}}}}'.encode(),
     "files: unknown key '/etc/hostname' (allowed: contacts.csv, "),
    (f'{{"format": 1, "files": {{"sub/contacts.czml": {{"bytes": 10, "sha256": "{_SHA}"}}}}}}'.encode(),
     "files: unknown key 'sub/contacts.czml' (allowed: contacts.csv, "),
    (b'{"format": 1, "files": {"contacts.json": {"bytes": -1, "sha256": "x"}}}',
     "files.contacts.json.bytes: expected an integer >= 0, got -1"),
    (b'{"format": 1, "files": {"contacts.json": {"bytes": 1, "sha256": "ABC"}}}',
     "files.contacts.json.sha256: expected 64 lowercase hex digits, got 'ABC'"),
    (b'{"format": 1, "files": {"contacts.json": [1]}}', "files.contacts.json: expected a JSON object, got [1]"),
], ids=["not-json", "not-utf8", "oversized", "a-list", "format-2", "no-files", "dot-dot", "absolute",
        "separator", "negative-size", "bad-sha256", "entry-a-list"])
@pytest.mark.parametrize("check", [["--check"], []], ids=["check", "run"])
def test_contacts_refuses_a_garbage_manifest_in_one_line_before_the_search_and_removes_nothing(
        text: bytes, problem: str, check: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A manifest that is not one fol contacts writes (garbage, too large, or naming a path outside --out) is
    never trusted: one line naming it and what is wrong, status 2, before the window search, and the folder
    (the earlier outputs, the user's notes.txt beside it, the manifest itself) left byte for byte."""
    import contact_sim.scenario

    out = tmp_path / "o"
    scenario = _walker_scenario(tmp_path)
    assert main(["contacts", scenario, "--no-plot", "--json", "--out", str(out)]) == 0
    (out / "contacts.manifest.json").write_bytes(text)
    (tmp_path / "notes.txt").write_text("the user's")
    before = _contents(out)

    def no_search(*args: object, **kwargs: object) -> None:
        raise AssertionError("the window search ran")

    monkeypatch.setattr(contact_sim.scenario, "plan_from_trajectories", no_search)
    capsys.readouterr()
    assert main(["contacts", scenario, "--no-plot", *check, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    manifest = out / "contacts.manifest.json"
    assert len(err) == 1 and err[0].startswith(f"fol contacts: error: {scenario}: {manifest}: {problem}"), err
    assert err[0].endswith("; it records which files in --out fol contacts wrote: remove it (the files it lists "
                           "are then kept) or give another --out"), err
    assert _contents(out) == before and (tmp_path / "notes.txt").read_text() == "the user's"


@pytest.mark.parametrize("check", [["--check"], []], ids=["check", "run"])
def test_contacts_refuses_a_manifest_that_is_a_link_and_removes_nothing(
        check: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """contacts.manifest.json as a link to another folder's manifest (here a copy of this folder's own) is
    not read: one line, status 2, the link, what it leads to and the earlier outputs left as they were.
    Before, the run read the manifest through the link and removed contacts.json as listed there."""
    out = tmp_path / "o"
    scenario = _walker_scenario(tmp_path)
    assert main(["contacts", scenario, "--no-plot", "--json", "--out", str(out)]) == 0
    elsewhere = tmp_path / "elsewhere.json"
    (out / "contacts.manifest.json").rename(elsewhere)
    (out / "contacts.manifest.json").symlink_to(elsewhere)
    before, listed = _contents(out), elsewhere.read_bytes()
    capsys.readouterr()
    assert main(["contacts", scenario, "--no-plot", *check, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    manifest = out / "contacts.manifest.json"
    assert err == [f"fol contacts: error: {scenario}: {manifest}: is a link to {elsewhere}, not the regular file "
                   "fol contacts writes; it records which files in --out fol contacts wrote: remove it (the files it "
                   "lists are then kept) or give another --out"], err
    assert manifest.is_symlink() and _contents(out) == before and elsewhere.read_bytes() == listed


def test_contacts_check_writes_and_removes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--check validates and exits: an earlier run's outputs it would not write stay, and no manifest is
    written into a folder that has none."""
    out = tmp_path / "o"
    scenario = _walker_scenario(tmp_path)
    assert main(["contacts", scenario, "--no-plot", "--czml", "--out", str(out)]) == 0
    before = _contents(out)
    assert main(["contacts", scenario, "--no-plot", "--check", "--out", str(out)]) == 0
    assert _contents(out) == before
    (out / "contacts.manifest.json").unlink()
    assert main(["contacts", scenario, "--no-plot", "--check", "--out", str(out)]) == 0
    assert set(_contents(out)) == {"contacts.csv", "contacts.czml"}


@pytest.mark.parametrize("entry, argv, unbuffered", [
    ("fol.cli", ["--help"], False), ("fol.cli", ["contacts", "SCENARIO", "--check"], False),
    ("fol.cli", ["contacts", "SCENARIO", "--check"], True),
    ("contact_sim.cli", ["contacts", "SCENARIO", "--check"], False)])  # the documented standalone entry point
def test_output_reader_gone_is_quiet(entry: str, argv: list[str], unbuffered: bool, tmp_path: Path) -> None:
    """`fol ... | head -1`: the reader closes the pipe before fol writes; fol stops quietly with
    the status of a command ended by SIGPIPE (141), no traceback, no 'Exception ignored'."""
    import os
    import subprocess
    import sys

    argv = [_walker_scenario(tmp_path) if a == "SCENARIO" else a for a in argv]
    env = repo_env(drop=("PYTHONUNBUFFERED",), **({"PYTHONUNBUFFERED": "1"} if unbuffered else {}))
    r, w = os.pipe()
    os.close(r)  # the reader is gone
    try:
        proc = subprocess.run([sys.executable, "-c", f"import sys; from {entry} import main; sys.exit(main())", *argv],
                              stdout=w, stderr=subprocess.PIPE, text=True, env=env, timeout=60)
    finally:
        os.close(w)
    assert proc.returncode == 141 and proc.stderr == "", (proc.returncode, proc.stderr)


@pytest.mark.parametrize("entry, prog, argv, unbuffered", [
    ("fol.cli", "fol", ["contacts", "SCENARIO", "--check"], False),
    ("fol.cli", "fol", ["contacts", "SCENARIO", "--check"], True),
    ("fol.cli", "fol", ["--help"], False),  # argparse alone would drop the error and exit 0
    ("contact_sim.cli", "contact_sim", ["contacts", "SCENARIO", "--check"], False)])
def test_output_that_cannot_be_written_is_one_line(entry: str, prog: str, argv: list[str], unbuffered: bool,
                                                   tmp_path: Path) -> None:
    """`fol ... > /dev/full`: writing stdout fails (ENOSPC, not a closed pipe); one line on stderr
    naming standard output and the reason, exit status 1, no traceback, no 'Exception ignored'."""
    import os
    import subprocess
    import sys

    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    argv = [_walker_scenario(tmp_path) if a == "SCENARIO" else a for a in argv]
    env = repo_env(drop=("PYTHONUNBUFFERED",), **({"PYTHONUNBUFFERED": "1"} if unbuffered else {}))
    with open("/dev/full", "w") as full:
        proc = subprocess.run([sys.executable, "-c", f"import sys; from {entry} import main; sys.exit(main())", *argv],
                              stdout=full, stderr=subprocess.PIPE, text=True, env=env, timeout=60)
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert proc.stderr == f"{prog}: cannot write to standard output: No space left on device\n", proc.stderr


def test_interrupt_while_starting_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Ctrl-C in the first second (the sub-commands' modules are still being imported): one line, 130."""
    import fol.cli

    def interrupted() -> list:
        raise KeyboardInterrupt

    monkeypatch.setattr(fol.cli, "_registrars", interrupted)
    assert main(["contacts", "x.toml"]) == 130
    captured = capsys.readouterr()
    assert captured.err == "fol: interrupted\n" and captured.out == "", captured


def test_contact_sim_standalone_interrupt_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """``python -m contact_sim.cli contacts ...`` (documented for large searches): Ctrl-C is one line, 130."""
    import contact_sim.cli

    def interrupted(args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(contact_sim.cli, "run_contacts", interrupted)
    assert contact_sim.cli.main(["contacts", _walker_scenario(tmp_path)]) == 130
    captured = capsys.readouterr()
    assert captured.err == "contact_sim: interrupted\n" and captured.out == "", captured


def test_position_stale_s_beyond_the_float_range_is_a_config_error() -> None:
    """[position] stale_s = 10**400 in an agent's TOML: a ConfigError, not an OverflowError."""
    from fol.agent.position import PositionConfig
    from fol.errors import ConfigError

    with pytest.raises(ConfigError, match="position.stale_s: expected a positive number of seconds"):
        PositionConfig(connection="udpin:127.0.0.1:14550", stale_s=10**400)


def test_training_whose_last_step_diverges_is_a_project_error() -> None:
    """The loss is checked before each step, so a step that sends the weights to
    inf after the last finite loss went unseen: fit returned a model of infinite
    weights (a distilled student then replaced the node's model and scored from
    NaN logits)."""
    import torch

    from fol.errors import TrainingError
    from fol.train import TrainConfig, fit

    model = torch.nn.Linear(2, 2)
    x, y = torch.full((8, 2), 1e33), torch.tensor([0, 1] * 4)  # a loss of about 1e33, finite in float32
    with pytest.raises(TrainingError, match="the weights became non-finite at epoch 0"):  # one step of 1e6 x 1e33
        fit(model, (x, y), TrainConfig(epochs=1, batch_size=8, lr=1e6, momentum=0.0, weight_decay=0.0))


def test_an_error_naming_a_hostile_file_name_is_one_escaped_line(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """An error line names the user's file, and a file or folder name may hold a newline or a
    terminal escape: 'fol data info' on a folder whose class 'no<newline>fire' held a broken image
    printed its error over two lines with the escape raw ('fol model info' and 'fol contacts' too).
    Every error line is now printed through swarmbase.cli.printable: one line, the escapes shown."""
    from PIL import Image

    root = tmp_path / "top\x1b[2J"
    for name in ("fire", "no\nfire"):
        (root / name).mkdir(parents=True)
        Image.new("RGB", (8, 8), (9, 9, 9)).save(root / name / "1.png")
    (root / "no\nfire" / "bad.png").write_bytes(b"not an image")
    missing = tmp_path / "gone\n\x1b]0;x\x07.safetensors"
    for argv in (["data", "info", f"imagefolder:{root}"], ["model", "info", str(missing)],
                 ["contacts", str(tmp_path / "no\nscenario.toml")]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.endswith("\n") and err[:-1].isprintable(), err
        assert err.startswith(f"fol {argv[0]}") and "\\n" in err, err


def test_a_warning_naming_a_hostile_file_name_is_one_escaped_line(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Warnings name a user's files too ('skipped 1 unreadable image(s): <file>', a skipped
    neighbour model): the log line printed a name's newline and terminal escape raw. fol's log
    lines now show the message escaped."""
    import logging

    from PIL import Image

    root = tmp_path / "top\x1b[2J"
    for name in ("fire", "no\nfire"):
        (root / name).mkdir(parents=True)
        for i in range(2):
            Image.new("RGB", (8, 8), (9 * i, 9, 9)).save(root / name / f"{i}.png")
    (root / "no\nfire" / "bad.png").write_bytes(b"not an image")
    logger = logging.getLogger()
    saved = logger.handlers[:], logger.level
    logger.handlers.clear()  # as in a shell: fol's own handler, not pytest's capture
    try:
        assert main(["data", "info", f"imagefolder:{root}", "--skip-corrupt"]) == 0
    finally:
        for handler in logger.handlers:
            handler.close()
        logger.handlers[:], logger.level = saved
    err = capsys.readouterr().err
    # the loader names it escaped, as its refusals do (ae99ee6), each character once and unquoted, as the line
    # itself is escaped: a name is shown one way in a run
    assert err == f"WARNING fol.data.loaders: skipped 1 unreadable image(s): {tmp_path}/top\\x1b[2J/no\\nfire/bad.png\n"


@pytest.mark.parametrize("argv", [
    ["keys", "list", "--store", ""],  # was a TypeError traceback (an empty --store read as no store)
    ["keys", "gen", "x", "--dir", ""],  # wrote the key pair into the current folder
    ["demo", "--out", ""],  # ran into the default folder, as if --out was left out
    ["simulate", "--resume", ""],  # started a fresh run
    ["contacts", "scenario.toml", "--out", " "],
    ["pretrain", "--data", "x", "--out", ""],
    ["personalize", "--model", "m", "--data", "x", "--neighbors", "", "--out", "o"],
    ["model", "info", ""],
    ["agent", "ctl", "", "status"],
])
def test_an_empty_file_or_folder_name_is_refused_by_argparse(argv: list[str], tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """An unset shell variable (``--out "$OUT"``) gives an empty name: it was taken as the
    current folder (``Path('')``) or as the argument left out; nothing is written."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "expected a file or folder name, got an empty string" in err, err
    assert "Traceback" not in err and not any(tmp_path.iterdir())


_LONG = "x" * 100_000
_HUGE = 10**4000  # TOML integers up to 4,300 digits are read
_DRONES, _LEO = "drone_swarm.toml", "leo_hurricane.toml"


@pytest.mark.parametrize("example, old, new", [
    (_DRONES, "seeds = [0, 1]", "seeds = [" + ", ".join(["0"] * 100_000) + "]"),
    (_DRONES, "size = 6000", f"size = 6000\nmin_samples = {_HUGE}"),
    (_DRONES, "per_node = 300", f"per_node = {_HUGE}"),
    (_DRONES, 'executor = "process"', f'executor = "process"\nworkers = {_HUGE}'),
    (_DRONES, 'executor = "process"', f'executor = "process"\nthreads = {_HUGE}'),
    (_DRONES, "[rounds]\ncount = 2", f"[rounds]\ncount = {_HUGE}"),
    (_DRONES, 'archs = ["cnn-medium"]', f'archs = ["cnn-medium"]\nnodes = {{ "{_LONG}" = "cnn-small" }}'),
    (_LEO, "[[ground_stations]]", 2 * f'[[ground_stations]]\nname = "{_LONG}"\nlat_deg = 0.0\nlon_deg = 0.0\n'
     + "[[ground_stations]]"),
    (_LEO, 'name = "Miami"', f'name = "{_LONG} "'),
    (_LEO, "planes = 3", f"planes = {_HUGE}"),
    (_LEO, "phasing = 1", f"phasing = {_HUGE}"),
    (_LEO, "total = 24", f"total = {_HUGE}"),
], ids=["repeated-seeds", "min_samples", "per_node", "workers", "threads", "rounds.count", "models.nodes",
        "station-name-twice", "station-name-spaces", "planes", "phasing", "total"])
def test_a_scenario_refusal_shows_a_long_value_shortened(example: str, old: str, new: str, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """The refusal is one line meant to be read: a value of the file (a list of 100,000 seeds, a
    4,000-digit count, a 100,000-character name) is shown shortened, not whole (3 MB for the seeds)."""
    text = (EXAMPLES / example).read_text()
    assert old in text
    scenario = tmp_path / "s.toml"
    scenario.write_text(text.replace(old, new, 1))
    assert main(["simulate", str(scenario), "--check", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and len(err) < 600, err[:300]


_NAME = "a" * 5000  # longer than any file system takes (255 bytes a name, 4,096 a path)


@pytest.mark.parametrize("argv, says", [
    (lambda n: ["data", "info", f"imagefolder:{n}"], "fol data: error: 'imagefolder:"),
    (lambda n: ["data", "info", f"cifar10:{n}"], "NAME:PATH only applies to imagefolder:PATH"),
    (lambda n: ["data", "info", n], "fol data: error: unknown dataset '"),
    (lambda n: ["personalize", "--model", "m.safetensors", "--data", DATA, "--neighbors", n, "--out", "out"],
     "fol personalize: error: --neighbors '"),
    # the loader's line named the path cut, not the option that gave it, as --neighbors' and --out's do
    (lambda n: ["personalize", "--model", n, "--data", DATA, "--neighbors", ".", "--out", "out"],
     "fol personalize: error: --model '"),
    (lambda n: ["personalize", "--model", "m.safetensors", "--config", n, "--data", DATA, "--neighbors", ".",
                "--out", "out"], "fol personalize: error: --config '"),
    (lambda n: ["personalize", "--model", "m.safetensors", "--data", DATA, "--neighbors", ".", "--out", n],
     "fol personalize: error: --out '"),
    (lambda n: ["simulate", n], "cannot read the scenario file (File name too long)"),
    (lambda n: ["simulate", "--check", n], "cannot read the scenario file (File name too long)"),
    (lambda n: ["simulate", "--resume", n], "fol simulate: error: --resume '"),
    (lambda n: ["contacts", n], "cannot read the scenario file (File name too long)"),
    (lambda n: ["pretrain", "--data", DATA, "--out", n], "fol pretrain: error: --out '"),
    (lambda n: ["pretrain", "--data", DATA, "--config", n, "--out", "m.safetensors"],
     "fol pretrain: error: --config '"),
    (lambda n: ["model", "info", n], "cannot read the model file (File name too long)"),
    # an OSError past the checks named the path cut ("fol keys: error: 'aaa...': File name too long"), not the option
    (lambda n: ["keys", "gen", "n1", "--dir", n], "fol keys: error: --dir '"),
    (lambda n: ["keys", "list", "--store", n], "fol keys: error: --store '"),
], ids=["data-info-imagefolder", "data-info-name-path", "data-info-name", "personalize-neighbors",
        "personalize-model", "personalize-config", "personalize-out", "simulate", "simulate-check", "simulate-resume", "contacts",
        "pretrain-out", "pretrain-config", "model-info", "keys-gen-dir", "keys-list-store"])
@pytest.mark.parametrize("absolute", [False, True], ids=["relative", "absolute"])
def test_a_path_argument_too_long_for_the_file_system_is_one_short_line(
        argv: Callable[[str], list[str]], says: str, absolute: bool, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A 5,000-character path argument: fol data info imagefolder:NAME wrote it whole after 'fol data: error:'
    (a 5 kB line), fol contacts twice, fol simulate, personalize and pretrain whole in their 'cannot read' or
    'cannot be checked' lines, and an absolute one (imagefolder:/.../NAME, --neighbors, --resume, pretrain
    --out) reached the CLI as OSError (File name too long), written with the name whole. Each is now one line
    of bounded length naming the argument cut (swarmbase.tomlcheck.brief), exit 2, no traceback, nothing
    written."""
    monkeypatch.chdir(tmp_path)
    name = str(tmp_path / _NAME) if absolute else _NAME
    assert main(argv(name)) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and len(err) < 400 and "Traceback" not in err, err[:300]
    assert says in err and "a" * 300 not in err, err[:300]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no output folder or file begun


def test_pretrain_on_a_folder_of_one_class_names_the_class_before_training(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """fol pretrain on an image folder of one class folder said '--data one: model num_classes must be
    at least 2, got 1', in the model's terms. The line names the folder's one class and why two are
    needed, before any training; fol data info still shows such a folder (exit 0)."""
    from PIL import Image

    import fol.stages

    root = tmp_path / "one"
    (root / "burnt").mkdir(parents=True)
    for i in range(24):  # a split needs 20
        Image.new("RGB", (8, 8), (10 * i, 9, 9)).save(root / "burnt" / f"{i}.png")
    monkeypatch.setattr(fol.stages, "pretrain", lambda *a, **k: pytest.fail("trained on one class"))
    out = tmp_path / "m.safetensors"
    assert main(["pretrain", "--data", str(root), "--epochs", "1", "--out", str(out)]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"fol pretrain: error: --data {root}: image folder {root} has one class folder, 'burnt'; a classifier "
        f"needs at least two classes (one sub-folder of images per class)"]
    assert not out.exists()
    assert main(["data", "info", f"imagefolder:{root}"]) == 0
    assert "classes (1):" in capsys.readouterr().out


@pytest.mark.parametrize("text", [
    "[fol]\nmomentum = 1.5\n",  # a bad value
    "[fol]\nmomentun = 0.5\n",  # an unknown key
    "[fol]\npretrain_lr = 'fast'\n",
    "pretrain_epochs = 5\n[fol]\nmomentum = 0.5\n",  # a FOL key outside the [fol] table
    "[fol\nmomentum = 0.5\n",  # not TOML
    None,  # no such file
    "",  # a folder
])
def test_pretrain_config_is_refused_as_personalize_refuses_it(
        text: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """fol pretrain --config reads the file as fol personalize --config does: a bad file or field is
    the same one line (naming the file, and the field), exit 2, before any data is loaded."""
    import fol.nodedata
    import fol.stages

    config = tmp_path / "fol.toml"
    if text == "":
        config.mkdir()
    elif text is not None:
        config.write_text(text)
    monkeypatch.setattr(fol.nodedata, "load_node_data", lambda *a, **k: pytest.fail("data loaded"))
    monkeypatch.setattr(fol.stages, "pretrain", lambda *a, **k: pytest.fail("trained"))
    out = tmp_path / "m.safetensors"
    assert main(["pretrain", "--data", DATA, "--config", str(config), "--epochs", "1", "--out", str(out)]) == 2
    pretrain_err = capsys.readouterr().err.splitlines()
    assert main(_personalize(tmp_path, str(tmp_path / "o")) + ["--config", str(config)]) == 2
    personalize_err = capsys.readouterr().err.splitlines()
    named = f"--config {config}" if text in (None, "") else str(config)  # a file not there to read: said of the option
    assert len(pretrain_err) == 1 and pretrain_err[0].startswith(f"fol pretrain: error: {named}: "), pretrain_err
    assert pretrain_err[0].removeprefix("fol pretrain: ") == personalize_err[0].removeprefix("fol personalize: ")
    assert not out.exists()


def test_pretrain_config_of_no_epochs_is_refused_naming_the_field(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """pretrain_epochs = 0 is a valid [fol] table (fol simulate accepts it), but fol pretrain would write
    an untrained model: refused as --epochs 0 is, naming the file and the field; --epochs overrides it."""
    import fol.nodedata

    config = tmp_path / "fol.toml"
    config.write_text("[fol]\npretrain_epochs = 0\n")
    monkeypatch.setattr(fol.nodedata, "load_node_data", lambda *a, **k: pytest.fail("data loaded"))
    argv = ["pretrain", "--data", DATA, "--config", str(config), "--out", str(tmp_path / "m.safetensors")]
    assert main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"fol pretrain: error: {config}: fol.pretrain_epochs: expected >= 1 (pretraining with 0 epochs gives an "
        f"untrained model), got 0"]
    with pytest.raises(pytest.fail.Exception, match="data loaded"):  # --epochs 1 passes every check
        main(argv + ["--epochs", "1"])


def test_python_dash_m_fol_is_the_fol_command(tmp_path: Path) -> None:
    """``python -m fol`` runs the ``fol`` command (an environment whose scripts folder is not on
    PATH): the same one-line refusal and exit status; importing ``fol.__main__`` runs nothing."""
    import subprocess
    import sys

    env = repo_env()
    proc = subprocess.run([sys.executable, "-m", "fol", "model", "info", str(tmp_path / "none.safetensors")],
                          capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.startswith("fol model info: error: ") and proc.stderr.count("\n") == 1, proc.stderr
    quiet = subprocess.run([sys.executable, "-c", "import fol.__main__"], capture_output=True, text=True, env=env,
                           timeout=60)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")


def test_a_child_process_imports_this_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests' one subprocess environment (tests/_processes.repo_env): a child Python started in another
    folder imports the packages of this repository, not another copy the environment holds (an editable
    install of another clone), its own modules' folders first; the run's PYTHONPATH comes after, without an
    empty entry (one puts the child's working folder on its path) and without the repository twice."""
    import os
    import subprocess
    import sys

    from _processes import REPO

    monkeypatch.delenv("PYTHONPATH", raising=False)  # a run without it: the environment's copy would be taken
    code = "import contact_sim as c, fol as f, orbits as o, swarmbase as s; print(*(m.__file__ for m in (c, f, o, s)))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=repo_env(), capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert all(Path(file).is_relative_to(REPO) for file in proc.stdout.split()), (proc.stdout, REPO)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["", str(tmp_path / "later"), str(REPO), ""]))
    env = repo_env(tmp_path / "own", OMP_NUM_THREADS="1")
    assert env["PYTHONPATH"] == os.pathsep.join([str(tmp_path / "own"), str(REPO), str(tmp_path / "later")])
    assert env["OMP_NUM_THREADS"] == "1" and "PYTHONUNBUFFERED" not in repo_env(drop=("PYTHONUNBUFFERED",))


def test_a_path_that_is_not_utf8_printed_on_a_strict_utf8_output_is_escaped(tmp_path: Path) -> None:
    """``fol pretrain --out`` a file named b'p\\xff.safetensors' where the locale's UTF-8 output is strict
    (en_US.UTF-8; PYTHONIOENCODING=utf-8 here): the model was saved, then printing its path ended the
    command in a UnicodeEncodeError traceback, exit status 1. Standard output now writes what its encoding
    cannot with it escaped, as standard error does."""
    import os
    import subprocess
    import sys

    out = os.path.join(os.fsencode(tmp_path), b"p\xff.safetensors")
    env = repo_env(PYTHONIOENCODING="utf-8")
    proc = subprocess.run([sys.executable, "-c", "import sys; from fol.cli import main; sys.exit(main())", "pretrain",
                           "--data", "dataset=synthetic-hurricane,nodes=3,node=0,per_node=60,size=600,seed=3",
                           "--arch", "cnn-small", "--epochs", "1", "--out", out],
                          capture_output=True, env=env, timeout=300)
    assert proc.returncode == 0 and b"Traceback" not in proc.stderr, proc.stderr.decode(errors="replace")
    assert proc.stdout.rstrip().endswith(b"-> " + os.fsencode(tmp_path) + b"/p\\udcff.safetensors"), proc.stdout
    assert os.path.isfile(out)


def test_contacts_export_refused_names_the_output_not_the_staging_folder(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A refused ION export (every window slower than 1 byte/s) is one line naming --out's contacts.ion, and the
    earlier set is kept. Failed before: the line named the run's hidden staging folder, gone once it ends
    ('o/.staged-1234-....tmp/contacts.ion: no window to write: ...')."""
    scenario = tmp_path / "d.toml"
    scenario.write_text("[drones]\ncount = 4\narea_km = 1.0\nspeed_m_s = 10.0\nseed = 7\nradio_range_km = 1.5\n"
                        "[time]\nduration_s = 300.0\nstep_s = 10.0\n[link]\nrate_bps = 4.0\nacquisition_s = 0.0\n")
    out = tmp_path / "o"
    out.mkdir()
    (out / "contacts.ion").write_text("old ion")
    assert main(["contacts", str(scenario), "--ion", "--no-plot", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{out / 'contacts.ion'}: no window to write: " in err[0], err
    assert ".staged-" not in err[0], err
    assert sorted(p.name for p in out.iterdir()) == ["contacts.ion"] and (out / "contacts.ion").read_text() == "old ion"
    new = tmp_path / "new" / "o"  # folders the run made for the set it did not write are removed again (they were left)
    assert main(["contacts", str(scenario), "--ion", "--no-plot", "--out", str(new)]) == 2
    assert not (tmp_path / "new").exists()


_CONTACTS = ["contacts", "s.toml"]


@pytest.mark.parametrize("entry, argv, says", [
    ("fol", ["pretrain", "--data", DATA, "--out", "m.safetensors", "--epochs", "9" * 5000],
     "argument --epochs: invalid int value: '999"),
    ("fol", ["demo", "--executor", "x" * 5000], "argument --executor: invalid choice: 'xxx"),
    ("fol", ["simulate", "--workers", "9" * 5000], "argument --workers: expected a whole number >= 1, got '999"),
    ("fol", ["keys", "list", "--store", "s", "a\nb\x1b[2J"], r"unrecognized arguments: a\nb\x1b[2J"),
    ("fol", ["keys", "list", "--store", "s", "y" * 5000], "unrecognized arguments: 'yyy"),
    ("contact_sim", [*_CONTACTS, "--workers", "9" * 5000], "argument --workers: invalid int value: '999"),
    ("contact_sim", [*_CONTACTS, "--orbits-format", "x" * 5000], "argument --orbits-format: invalid choice: 'xxx"),
    ("contact_sim", [*_CONTACTS, "a\nb\x1b[2J"], r"unrecognized arguments: a\nb\x1b[2J"),
], ids=["int", "choice", "workers", "escape", "unrecognized", "contacts-int", "contacts-choice", "contacts-escape"])
def test_an_argparse_refusal_of_a_long_or_unprintable_argument_is_one_short_line(
        entry: str, argv: list[str], says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """argparse's usage error wrote what was typed as it is: a 5,000-character value made a 5 kB line, an
    unrecognized argument holding a newline or a terminal escape split the line or rewrote the terminal.
    Each is now one line of bounded length (swarmbase.cli.ArgumentParser), the value cut (brief) and escaped
    (printable), exit 2, nothing written; the standalone contact_sim's parser too."""
    import contact_sim.cli

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        (main if entry == "fol" else contact_sim.cli.main)(argv)
    err = capsys.readouterr().err
    line = err.splitlines()[-1]
    assert exit_.value.code == 2 and "Traceback" not in err, err[:300]
    assert line.startswith(f"{entry}") and says in line and len(line) < 400, line[:300]
    assert "\x1b" not in err and "y" * 300 not in err and "9" * 300 not in err
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("flag, value, says", [
    ("--arch", "x" * 5000, "--arch: unknown architecture 'xxx"),
    ("--init-seed", "1" * 4000, "--init-seed: expected an integer in 0..4294967295, got 11111111111111111111... (4,000 digits)"),
    ("--threads", "1" * 4000, "got 11111111111111111111... (4,000 digits)"),
])
def test_pretrain_refusal_of_a_long_value_shows_it_cut(flag: str, value: str, says: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """fol pretrain wrote a 5,000-character --arch (repr) and a 4,000-digit --init-seed or --threads whole:
    a 5 kB or 4 kB error line. The value is now shown as a scenario's refusal shows it (tomlcheck.shown)."""
    assert main(["pretrain", "--data", DATA, flag, value, "--out", str(tmp_path / "m.safetensors")]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and len(err) < 400 and says in err, err[:300]
    assert not any(tmp_path.iterdir())


def test_a_failure_past_the_checks_names_the_option_whose_path_failed() -> None:
    """The OSError line names the option whose value is the failing path or the deepest folder holding it;
    a path no option gave (or one under '.', which holds every relative path) names none."""
    from fol.cli import _option_of, build_parser

    parser = build_parser()
    args = parser.parse_args(["personalize", "--model", "runs/o/m.safetensors", "--data", DATA, "--neighbours", ".",
                              "--out", "runs/o"])
    assert _option_of(parser, args, "runs/o/report.json") == "--out"
    assert _option_of(parser, args, "runs/o/m.safetensors") == "--model"  # deeper than --out
    assert _option_of(parser, args, "elsewhere/x") is None and _option_of(parser, args, None) is None
    assert _option_of(parser, args, "runs") is None
    args = parser.parse_args(["personalize", "--model", "m", "--data", DATA, "--neighbours", "got", "--out", "o"])
    assert _option_of(parser, args, "got/a.safetensors") == "--neighbors"  # the option's first name


def test_a_relative_out_from_a_working_folder_past_the_path_limit_is_one_line_naming_the_option(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """--out out, given from a working folder whose absolute path passes the system's 4,096 characters: the
    output-folder check stats the path's absolute parents, and the run ended with a bare OSError
    ('[Errno 36] File name too long: <the absolute path>'), naming neither the option nor what was expected.
    It is one line naming --out and asking for a shorter path, exit 2, and nothing is written."""
    import os

    scenario = _walker_scenario(tmp_path)
    monkeypatch.chdir(deep_folder(tmp_path, 4000))  # restored after the test
    os.mkdir("d" * 200)  # relative: the whole, 4,201 characters, is too long to name
    os.chdir("d" * 200)
    capsys.readouterr()
    assert main(["contacts", scenario, "--no-plot", "--out", "out"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"fol contacts: error: {scenario}: --out out: cannot be checked (File "
                                               "name too long: from the working folder it is a path of "), err
    assert err[0].endswith(" characters, more than the system takes); expected a shorter path: give one outside "
                           "this folder, or run from a shorter one"), err
    assert os.listdir(".") == []
