"""benchmarks/flight_files.py, whose figures docs/formats.md quotes: each file it generates is read back
by its reader as a valid flight file of the size asked for, holding every fix written, and it prints one
markdown row a kind of file."""

from __future__ import annotations

import re

import pytest

from contact_sim.drones import read_waypoints_csv
from contact_sim.missions import read_mission
from contact_sim.tracks import read_track

pytest.importorskip("pymavlink")


@pytest.mark.parametrize("kind", ["tlog", "bin", "gpx", "jsonl", "waypoints", "plan", "csv"])
def test_each_generated_file_reads_back_every_fix_within_its_size(benchmark_script, tmp_path, kind) -> None:
    bench = benchmark_script("flight_files")
    name, _, write = bench.KINDS[kind]
    path = tmp_path / name
    written = write(path, 100_000)
    size = path.stat().st_size
    assert 90_000 < size <= 100_000, size  # filled to the size asked for, never past it
    if kind in ("waypoints", "plan"):
        home, targets = read_mission(path, 5.0)
        assert len(targets) == written + 1 > 100 and home == bench.HOME
        lats = [t[0] for t in targets]
        assert max(lats) - min(lats) > 0.002 and targets[1][2] == pytest.approx(bench.HOME[2] + 100.0, abs=0.01)
    elif kind == "csv":
        drones = read_waypoints_csv(path)
        assert len(drones) == 20 and sum(len(d.t_s) for d in drones) == written
    else:
        points = read_track(path)
        assert len(points) == written > 100
        # the fixes of the circle, in their order and at their times (5 a second)
        assert (points[1][0] - points[0][0]).total_seconds() == pytest.approx(bench.STEP_S, abs=1e-3)
        lats = [p[1] for p in points]
        assert max(lats) - min(lats) > 0.002  # moving along the circle (0.0045 deg of latitude each way, 300 s a lap)


def test_it_prints_a_markdown_row_of_each_kind(benchmark_script, capsys) -> None:
    assert benchmark_script("flight_files").main(["--mib", "0.05", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    rows = re.findall(r"^\| ([^|]+) \| (0\.\d) \| ([\d,]+) \| ([\d.]+) \| ([\d.]+) \| (\d+) \| (\d+) \|$", out, re.M)
    assert len(rows) == 7, out
    for what, _, points, _, _, peak_mb, imports_mb in rows:
        assert int(points.replace(",", "")) > 0 and int(peak_mb) >= int(imports_mb) > 0, what


def test_a_size_past_the_readers_limit_is_refused_on_the_command_line(benchmark_script, capsys) -> None:
    with pytest.raises(SystemExit) as stop:
        benchmark_script("flight_files").main(["--mib", "17"])
    assert stop.value.code == 2
    assert "argument --mib: expected a size in MiB in (0, 16]" in capsys.readouterr().err
