"""benchmarks/contacts_scale.py: a tiny run of the script (its memory probe: test_benchmark_probe.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_contacts_scale_runs_at_a_tiny_size(benchmark_script, capsys):
    cs = benchmark_script("contacts_scale")
    assert cs.main(["--sizes", "1584", "--hours", "0.1", "--workers", "2", "--check-edges", "20"]) == 0
    out = capsys.readouterr().out
    assert "0 pairs with a different window count" in out
    assert "not evaluated (0.1 h, 60 s grid)" in out
    row = next(line for line in out.splitlines() if line.startswith("| 1,584 |"))
    cells = row.split("|")
    err, edges, windows = float(cells[9]), int(cells[8]), int(cells[7].replace(",", ""))
    # the error bound means something only over the edges asked for (with none compared it is 1.000 too)
    assert err <= 1.0 and edges >= 20 and windows > 0
    assert f"{edges} edges, 0 pairs with a different window count" in out


def test_bad_arguments_are_one_line_before_any_work(benchmark_script, capsys):
    """Each was a traceback (numpy's for --plan-nodes 1 or --plan-windows -5, the contact
    side's for --step 0 or --workers 0 after building the constellation), and
    --check-edges -1 ran and judged the edges on none. --workers is held to the rule of fol contacts
    --workers and the other benchmarks' (1..4 per core, swarmbase.cli.parallelism_problem), in its words;
    it took any number >= 1 ('expected an integer >= 1 (processes)'), --workers 10000 too."""
    cs = benchmark_script("contacts_scale")
    per_core = f"expected 1..{4 * (os.cpu_count() or 1)} on this machine of {os.cpu_count() or 1} core(s) (4 per core)"
    for argv, needle in ((["--hours", "-1"], "argument --hours: expected a number of hours > 0, got -1"),
                         (["--hours", "nan"], "argument --hours: expected a number of hours > 0, got nan"),
                         (["--step", "0"], "argument --step: expected a grid step in seconds > 0, got 0"),
                         (["--workers", "0"], f"argument --workers: {per_core}, got 0"),
                         (["--workers", "10000"], f"argument --workers: {per_core}, got 10000"),
                         (["--fork-overhead", "--sizes", "1584", "--workers", "10000"],
                          f"argument --workers: {per_core}, got 10000"),
                         (["--check-edges", "-1"], "argument --check-edges: expected an integer >= 1 (edges to check)"),
                         (["--naive-pairs", "-2"], "argument --naive-pairs: expected an integer >= 0 (0: off), got -2"),
                         (["--plan-windows", "-5"], "argument --plan-windows: expected an integer >= 0 (0: off)"),
                         (["--plan-windows", "10", "--plan-nodes", "1"],
                          "argument --plan-nodes: expected an integer >= 2 (nodes of the plan), got 1")):
        with pytest.raises(SystemExit) as stop:
            cs.main(argv)
        assert stop.value.code == 2
        out = capsys.readouterr()
        assert needle in out.err and "Traceback" not in out.err and "machine:" not in out.out, (argv, out)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="the search forks at most one worker per core")
def test_fork_overhead_gives_what_a_forked_worker_adds_to_the_scans_true_peak(benchmark_script, capsys):
    """--fork-overhead runs a search in one process and with two forked workers, each in a fresh process, and
    gives the difference of their true peaks per forked worker: positive (a forked worker is a process of
    its own, with its kernels), the row's figures those of the runs, compared with what the memory check
    counts for a forked worker."""
    cs = benchmark_script("contacts_scale")
    assert cs.main(["--fork-overhead", "--scenarios", str(EXAMPLES / "drone_missions.toml"), "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "--workers 2: 2 forked" in out
    one, forked, raw, own = (float(v) for v in re.search(
        r"run 1 \(load [0-9.]+\): scan's true peak ([0-9.]+) MiB in one process, ([0-9.]+) MiB forked: "
        r"\+([0-9.]+) MiB a forked worker; the check counts [0-9.]+ and [0-9.]+ MiB for the windows and pairs held: "
        r"\+([0-9.]+) MiB a forked worker beyond them", out).groups())
    assert forked > one and raw == pytest.approx((forked - one) / 2, abs=0.06) and 1.0 < own <= raw + 0.1
    row = next(line for line in out.splitlines() if line.startswith(f"| {EXAMPLES / 'drone_missions.toml'} |"))
    assert f"| {raw:.1f} / {raw:.1f} / {raw:.1f} | {own:.1f} / {own:.1f} / {own:.1f} |" in row
    from contact_sim.windows import _FORKED_WORKER_BYTES

    counted = _FORKED_WORKER_BYTES / 2**20
    assert f"largest beyond what the check counts for the windows and pairs held: {own:.1f} MiB a forked worker; it counts " \
           f"{counted:g} MiB for each" in out
    assert out.rstrip().endswith("NOT covered" if own > counted else ": covered")


def test_fork_overhead_arguments_are_one_line_before_any_work(benchmark_script, capsys, tmp_path):
    """What --fork-overhead takes is checked before any search: its options, and each scenario file (read as
    fol contacts reads it; a missing or invalid one is one line naming it)."""
    cs = benchmark_script("contacts_scale")
    bad = tmp_path / "bad.toml"
    bad.write_text("[time]\nduration_s = -1\n")
    for argv, needle in ((["--scenarios", str(bad)], "--scenarios: expected with --fork-overhead"),
                         (["--fork-overhead"], "--fork-overhead: expected --sizes or --scenarios"),
                         (["--fork-overhead", "--sizes", "1584", "--workers", "1"],
                          "--fork-overhead: expected --workers >= 2, got 1"),
                         (["--fork-overhead", "--sizes", "1584", "--repeat", "0"],
                          "argument --repeat: expected an integer >= 1 (runs of each search), got 0"),
                         (["--fork-overhead", "--scenarios", str(tmp_path / "missing.toml")], "missing.toml"),
                         (["--fork-overhead", "--scenarios", str(bad)], "bad.toml")):
        with pytest.raises(SystemExit) as stop:
            cs.main(argv)
        assert stop.value.code == 2
        out = capsys.readouterr()
        err = out.err.strip().splitlines()
        # argparse's usage, then its one error line; a scenario file's refusal: that line alone
        assert needle in err[-1] and "Traceback" not in out.err and "machine:" not in out.out, (argv, out)
        assert len(err) == 1 or err[0].startswith("usage:"), (argv, out)


def test_fork_overhead_refuses_a_measuring_process_that_gives_no_result(benchmark_script, capsys, monkeypatch):
    """--fork-overhead reads each fresh process's result from the last line it prints: one that exits 0
    without it (its script file cut short while it was being rewritten, as happened in a measurement) or
    with a line that is not one JSON object was an IndexError or JSONDecodeError traceback; it is now one
    line naming the search and what the process printed, exit 1."""
    import subprocess

    cs = benchmark_script("contacts_scale")
    spec = {"scenario": "x.toml", "name": "x.toml"}
    for stdout, shown in (("", "no result"), ("numba: a warning\n", "numba: a warning")):
        monkeypatch.setattr(cs.subprocess, "run",
                            lambda argv, **kw: subprocess.CompletedProcess(argv, 0, stdout, ""))
        with pytest.raises(SystemExit) as stop:
            cs._measured(spec, 2)
        assert stop.value.code == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "x.toml: the search with --workers 2 gave no result" in err and shown in err, err
