"""benchmarks/contacts_scale.py: a tiny run of the script (its memory probe: test_benchmark_probe.py)."""

from __future__ import annotations


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
