"""``fol demo`` never deletes a folder it did not create in this run."""

from __future__ import annotations

from pathlib import Path

import pytest

import fol.simulation.runner as runner
from fol.cli import main


class _Stop(Exception):
    pass


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Replace the (minutes-long) simulation by a stub recording its output folder."""
    seen: list[Path] = []

    def fake_run(scn, out, **kw):
        seen.append(Path(out))
        raise _Stop()

    monkeypatch.setattr(runner, "run_simulation", fake_run)
    return seen


def _finished_run(folder: Path) -> None:
    folder.mkdir(parents=True)
    (folder / "report.md").write_text("# a finished simulation the user keeps\n")
    (folder / "results.csv").write_text("seed,node\n")


def test_demo_out_with_a_finished_run_is_kept(tmp_path: Path, captured: list[Path]) -> None:
    out = tmp_path / "precious"
    _finished_run(out)
    assert main(["demo", "--out", str(out)]) == 2  # refused before the run starts
    assert captured == []
    assert sorted(p.name for p in out.iterdir()) == ["report.md", "results.csv"]
    assert (out / "report.md").read_text().startswith("# a finished simulation")


def test_demo_default_folder_moves_on_instead_of_deleting(tmp_path: Path, captured: list[Path],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _finished_run(tmp_path / "fol-demo-out")
    with pytest.raises(_Stop):
        main(["demo"])
    assert captured == [Path("fol-demo-out-2")]
    assert (tmp_path / "fol-demo-out" / "report.md").exists()


def test_demo_refuses_a_non_empty_out_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "precious"
    _finished_run(out)
    (out / "scenario.resolved.json").write_text("{}")  # the record every run writes first
    assert main(["demo", "--out", str(out)]) == 2  # the real run: its pre-run check refuses
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not empty" in err[-1] and "Traceback" not in err[-1]
    # the way to continue it names a command that has the option (`fol demo` has no --resume)
    assert f"fol simulate --resume {out}" in err[-1]
    assert (out / "report.md").exists()
    # a folder that holds no run is not offered a --resume that would refuse it
    (out / "scenario.resolved.json").unlink()
    assert main(["demo", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds no run to continue; give another --out" in err[0] and "--resume" not in err[0], err


@pytest.mark.parametrize("kind", ["file", "full folder"])
def test_demo_refuses_a_bad_out_before_its_banner(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   captured: list[Path]) -> None:
    """``fol demo --out FILE`` printed its 'contacts, data, pretraining...' banner and then the
    error: the command seemed to start. Now --out is checked first and the error is alone."""
    out = tmp_path / "taken"
    if kind == "file":
        out.write_text("not a folder")
    else:
        _finished_run(out)
    assert main(["demo", "--out", str(out)]) == 2
    captured_io = capsys.readouterr()
    assert captured_io.out == "" and captured == []
    err = captured_io.err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"fol demo: error: output folder {out}"), err
