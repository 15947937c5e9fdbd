"""benchmarks/simulate_scale.py --partition at a tiny size (the scaling runs take minutes per node count)."""

from __future__ import annotations


def test_partition_counts_covering_pairs_within_images_times_satellites(benchmark_script, capsys):
    ss = benchmark_script("simulate_scale")
    ss.partition([8])
    row = capsys.readouterr().out.strip().splitlines()[-1]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[0] == "8" and cells[1] == "3,600"
    pairs = int(cells[2].split()[0].replace(",", ""))
    assert 0 < pairs <= 3600 * 8
    assert float(cells[2].split("(")[1].rstrip(")")) == round(pairs / (3600 * 8), 2)
