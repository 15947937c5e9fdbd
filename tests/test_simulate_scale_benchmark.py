"""benchmarks/simulate_scale.py --partition at a tiny size (the scaling runs take minutes per node count)."""

from __future__ import annotations

import pytest


def test_partition_counts_covering_pairs_within_images_times_satellites(benchmark_script, capsys):
    ss = benchmark_script("simulate_scale")
    ss.partition([8])
    row = capsys.readouterr().out.strip().splitlines()[-1]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[0] == "8" and cells[1] == "3,600"
    pairs = int(cells[2].split()[0].replace(",", ""))
    assert 0 < pairs <= 3600 * 8
    assert float(cells[2].split("(")[1].rstrip(")")) == round(pairs / (3600 * 8), 2)


def test_light_budget_changes_only_the_training_budget(benchmark_script):
    ss = benchmark_script("simulate_scale")
    full, light = ss._scenario(8, "local"), ss._scenario(8, "local", budget="light")
    assert full.fol.pretrain_epochs == 30 and full.fol.distill_inputs == "function-matching"  # the defaults
    assert (light.fol.pretrain_epochs, light.fol.finetune_epochs, light.fol.distill_epochs) == (2, 1, 1)
    assert light.fol.distill_inputs == "train"
    # the constellation, contacts, data, methods and executor are the same: only [fol] differs
    assert {k: v for k, v in light.raw.items() if k != "fol"} == {k: v for k, v in full.raw.items() if k != "fol"}
    assert (light.data, light.run, light.methods) == (full.data, full.run, full.methods)
    assert light.fol.replace(**{k: getattr(full.fol, k) for k in ss.LIGHT_FOL}) == full.fol


def test_bad_arguments_are_one_line_before_any_work(benchmark_script, capsys):
    """A node count the scenario's 4 planes cannot hold was a traceback from the
    scenario (in the scaling loop: after the runs before it), --cores 0 a division by zero."""

    ss = benchmark_script("simulate_scale")
    for argv, needle in ((["--nodes", "24", "6"], "argument --nodes: expected a node count that is a positive multiple "
                                                  "of 4 (the scenario's 4 planes), got 6"),
                         (["--partition", "0"], "argument --partition: expected a node count"),
                         (["--profile", "-4"], "argument --profile: expected 0 (off) or a node count"),
                         (["--profile", "12", "--cores", "0"], "argument --cores: expected an integer >= 1, got 0"),
                         (["--profile", "12", "--machines", "4", "0"], "argument --machines: expected an integer >= 1")):
        with pytest.raises(SystemExit) as stop:
            ss.main(argv)
        assert stop.value.code == 2
        out = capsys.readouterr()
        assert needle in out.err and "Traceback" not in out.err and "machine:" not in out.out, (argv, out)


def test_a_run_that_gives_no_result_line_is_one_line_naming_it(benchmark_script, capsys, monkeypatch):
    """The scaling runs read each fresh process's wall time and FOL round from the last line it prints;
    one that exits 0 without that line (its script cut short while being rewritten, a stray print
    after it) was an IndexError or JSONDecodeError traceback; it is one line naming the executor and
    the node count and what the process printed, exit 1."""
    import subprocess

    ss = benchmark_script("simulate_scale")
    monkeypatch.setattr(ss, "_load", lambda: "0.00 0.00 0.00")
    for stdout, shown in (("", "it printed nothing"), ("a warning\n", "its last line: a warning")):
        monkeypatch.setattr(ss.subprocess, "run", lambda argv, **kw: subprocess.CompletedProcess(argv, 0, stdout, ""))
        with pytest.raises(SystemExit) as stop:
            ss.scaling([8], ["local"])
        assert stop.value.code == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "local, 8 nodes: the run gave no result" in err and shown in err, err
