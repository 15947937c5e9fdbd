"""benchmarks/dtn_import.py, whose figures docs/formats.md quotes: the plan it generates reads back as it
says (two lines or records a two-way window), and it prints one line a format."""

from __future__ import annotations

import re

from contact_sim.dtn import read_plan


def test_the_generated_plans_read_back_two_lines_a_window(benchmark_script, tmp_path) -> None:
    bench = benchmark_script("dtn_import")
    for fmt, name in (("ion", "plan.ion"), ("hdtn", "plan.json")):
        path = tmp_path / name
        count = bench.write_plan(path, fmt, 200_000, 30)
        assert path.stat().st_size >= 200_000
        plan = read_plan(path)
        assert len(plan.windows) == count // 2 and count % 2 == 0, (fmt, count, len(plan.windows))
        assert len(plan.node_names) == 30


def test_it_prints_the_figures_of_each_format(benchmark_script, capsys) -> None:
    assert benchmark_script("dtn_import").main(["--mib", "1", "--nodes", "20"]) == 0
    out = capsys.readouterr().out
    for fmt in ("ion", "hdtn"):
        line = re.search(rf"^{fmt}: 1\.0 MiB, ([\d,]+) (?:lines|records), 20 nodes, ([\d,]+) windows: ([\d.]+) s CPU "
                         rf"\(([\d.]+) s of it the read\), [\d.]+ s wall, peak resident [\d.]+ GB", out, re.M)
        assert line, out
        assert int(line[1].replace(",", "")) == 2 * int(line[2].replace(",", ""))
        assert 0 < float(line[4]) <= float(line[3]) + 0.05  # the read is part of the child's CPU (both rounded)
