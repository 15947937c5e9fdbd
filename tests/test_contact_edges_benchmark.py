"""benchmarks/contact_edges.py: its matching of found windows with the reference, and a tiny run."""

from __future__ import annotations

import pytest


def test_windows_are_matched_missed_split_and_spurious_as_documented(benchmark_script):
    ce = benchmark_script("contact_edges")
    ref = {(0, 1): [(0.0, 50.0), (100.0, 200.0), (300.0, 400.0), (500.0, 600.0), (700.0, 1000.0)]}
    got = {(0, 1): [(0.0, 49.0),                    # cut at the start: only its end compared (1 s)
                    (102.0, 197.0),                 # matched: 2 s and 3 s
                    (300.0, 340.0), (360.0, 400.0),  # one reference window split in two
                    (610.0, 650.0),                 # spurious: overlaps nothing
                    (690.0, 1000.0)]}               # cut at the end: only its start compared (10 s)
    got[(0, 1)].sort()
    r = ce.compare(ref, got, 1000.0)
    assert (r["ref"], r["got"], r["missed"], r["split"], r["spurious"], r["edges"]) == (5, 6, 1, 1, 1, 4)
    assert r["max"] == pytest.approx(10.0) and r["median"] == pytest.approx(2.5)


def test_contact_edges_runs_at_a_tiny_size(benchmark_script, capsys):
    ce = benchmark_script("contact_edges")
    assert ce.main(["--hours", "1", "--stations", "1", "--steps", "30", "1200", "--masks", "10"]) == 0
    out = capsys.readouterr().out
    rows = {tuple(c.strip() for c in line.split("|")[1:3]): [c.strip() for c in line.split("|")[3:-1]]
            for line in out.splitlines() if line.startswith("| s")}
    fine, coarse = rows[("satellite-satellite", "30")], rows[("satellite-satellite", "1200")]
    # at 30 s every window is found and its edges are within a millisecond of the bisected ones
    assert int(fine[0]) > 0 and fine[2:5] == ["0", "0", "0"] and int(fine[5]) > 0 and float(fine[7]) < 1e-3
    # at 1,200 s the cubic model is far off: the comparison sees it
    assert int(coarse[2]) > 0 or float(coarse[7]) > 10.0
    station = rows[("station, 10 deg mask", "30")]
    assert int(station[0]) > 0 and station[2:5] == ["0", "0", "0"] and float(station[7]) < 1e-2


@pytest.mark.parametrize("argv, needle", [
    (["--steps", "0"], "argument --steps: expected a grid step in seconds > 0, got 0"),
    (["--masks", "90"], "argument --masks: expected an elevation mask in 0..90 deg, 90 excluded, got 90"),
    (["--hours", "100"], "argument --hours: expected a number of hours in (0, 48], got 100"),
    (["--stations", "9"], "argument --stations: expected an integer in 0..5"),
    (["--tol", "0"], "argument --tol: expected a tolerance in (0, 0.1] s, got 0"),
    (["--total", "1000", "--hours", "48", "--scan", "0.01"],  # checked before any position is computed
     "expected at most 5,000,000 node samples for the reference's scan, got 17,331,841,003"),
])
def test_a_bad_argument_is_one_line_before_any_work(benchmark_script, capsys, argv, needle):
    with pytest.raises(SystemExit) as stop:
        benchmark_script("contact_edges").main(argv)
    out = capsys.readouterr()
    # argparse's usage, then its one error line: no traceback, nothing printed on stdout (no work began)
    assert stop.value.code == 2 and needle in out.err.splitlines()[-1] and "Traceback" not in out.err, out
    assert not out.out, out
