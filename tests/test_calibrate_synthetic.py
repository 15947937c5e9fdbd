"""benchmarks/calibrate_synthetic.py at a tiny size: the summary is the mean of
the node lines, the label set follows --classes, and every target is judged."""

from __future__ import annotations

import re

import pytest


@pytest.mark.parametrize("classes, name, k", [("event", "synthetic-wildfire (2 classes)", 2),
                                              ("type", "synthetic-wildfire-types (4 classes)", 4)])
def test_summary_is_the_mean_of_the_nodes(classes, name, k, capsys, benchmark_script) -> None:
    script = benchmark_script("calibrate_synthetic")
    argv = ["--task", "wildfire", "--classes", classes, "--nodes", "3", "--per-node", "40", "--pool", "600",
            "--region-images", "80", "-v"]
    assert script.main(argv) == 0
    out = capsys.readouterr().out
    nodes = re.findall(r"node +\d+: train mix=\[([\d, ]+)\] test acc=([\d.]+) \(majority ([\d.]+)\)", out)
    assert len(nodes) == 3
    assert all(len(mix.split(",")) == k for mix, _, _ in nodes)
    assert all(sum(map(int, mix.split(","))) == 28 for mix, _, _ in nodes)  # 70 % of 40 images train
    local = 100 * sum(float(a) for _, a, _ in nodes) / 3
    majority = 100 * sum(float(m) for _, _, m in nodes) / 3
    assert name in out
    printed_local = float(re.search(r"local test accuracy  : ([\d.]+)", out).group(1))
    printed_majority = float(re.search(r"majority-class rate  : ([\d.]+)", out).group(1))
    assert abs(printed_local - local) < 0.2 and abs(printed_majority - majority) < 0.2
    assert abs(float(re.search(r"local - majority : +(-?[\d.]+)", out).group(1)) - (printed_local - printed_majority)) < 0.2
    assert len(re.findall(r"\(target >= \d+\) (met|NOT met)", out)) == 4
