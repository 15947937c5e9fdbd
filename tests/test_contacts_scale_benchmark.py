"""benchmarks/contacts_scale.py: a tiny run of the script (its memory probe: test_benchmark_probe.py)."""

from __future__ import annotations

import pytest


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
    --check-edges -1 ran and judged the edges on none."""
    cs = benchmark_script("contacts_scale")
    for argv, needle in ((["--hours", "-1"], "argument --hours: expected a number of hours > 0, got -1"),
                         (["--hours", "nan"], "argument --hours: expected a number of hours > 0, got nan"),
                         (["--step", "0"], "argument --step: expected a grid step in seconds > 0, got 0"),
                         (["--workers", "0"], "argument --workers: expected an integer >= 1 (processes), got 0"),
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
