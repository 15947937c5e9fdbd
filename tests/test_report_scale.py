"""The simulation report of a large swarm (fabricated result rows): per-node outputs
turn into distributions over the nodes beyond ``PER_NODE_MAX`` nodes, so the figures
and report.md stay readable and quick to build; small swarms keep their per-node
bars and tables as they were."""

from __future__ import annotations

from pathlib import Path

import pytest

import fol.simulation.report as report

METHODS = ("local", "fol", "fedavg")


def _rows(n_nodes: int, seeds=(0,), methods=METHODS) -> list[dict]:
    return [{"seed": s, "node": f"sat-{i:04d}", "method": m, "test_accuracy": ((i * 37 + s * 11 + j * 5) % 100) / 100,
             "val_accuracy": 0.5, "bytes_up": 10 * j, "bytes_down": 10 * j, "train_flops": 1e9, "rounds": j,
             "received_models": 1, "kept_local": m == "local", "seconds": 1.0,
             "n_train": 100, "n_val": 20, "n_test": 30 + i % 3, "extra": {}}
            for s in seeds for j, m in enumerate(methods) for i in range(n_nodes)]


def _figure(monkeypatch, rows, path: Path):
    caught = []
    real = report.save_figure

    def spy(fig, target):
        caught.append((fig.get_size_inches() * fig.dpi, fig.axes[0]))
        return real(fig, target)

    monkeypatch.setattr(report, "save_figure", spy)
    report._plot_accuracy(rows, path)
    assert path.stat().st_size > 0
    return caught[0]


def test_per_node_bars_become_a_distribution_over_nodes_beyond_the_threshold(tmp_path: Path, monkeypatch):
    """2,000 nodes drew 6,000 bars on a figure 297,000 pixels wide (a 2.5 MB PNG that image
    libraries refuse as a decompression bomb, 13 s to draw); now one line per method."""
    size, ax = _figure(monkeypatch, _rows(2000), tmp_path / "big.png")
    assert size[0] <= 1000 and len(ax.patches) == 0
    assert len(ax.get_lines()) == len(METHODS)
    assert [t.get_text().split(" (")[0] for t in ax.get_legend().get_texts()] == list(METHODS)
    line = ax.get_lines()[0]  # local's: the share of nodes at or below each accuracy, from 0 to 1
    assert line.get_ydata()[0] == 0.0 and line.get_ydata()[-1] == 1.0 and list(line.get_xdata()) == sorted(line.get_xdata())


def test_a_swarm_at_the_threshold_keeps_its_bars(tmp_path: Path, monkeypatch):
    n = report.PER_NODE_MAX
    size, ax = _figure(monkeypatch, _rows(n), tmp_path / "small.png")
    assert len(ax.patches) == n * len(METHODS)
    assert [t.get_text() for t in ax.get_xticklabels()] == [f"sat-{i:04d}" for i in range(n)]
    assert size[0] == pytest.approx(0.45 * n * len(METHODS) / 2 * 110)


def _energy(nodes: list[str], waits: int) -> dict:
    return {"model": {"battery_wh": 20.0, "initial_charge": 0.8, "solar_w": 10.0, "idle_w": 2.0, "j_per_flop": 1e-10,
                      "j_per_byte": 1e-6},
            "nodes": [{"node": n, "eclipse_fraction": 0.3 + (i % 5) / 20, "battery_start_wh": 16.0,
                       "battery_end_wh": 12.0 + i % 7, "pretraining_j": 20.0 + i % 3, "transfer_j": 3.0 + i % 4,
                       "transfers": i % 4, "method_training_j": {m: 20.0 + i % 2 for m in METHODS}}
                      for i, n in enumerate(nodes)],
            "waits": [{"src": nodes[i % len(nodes)], "dst": nodes[(i + 1) % len(nodes)], "round": i % 2,
                       "wanted_start_s": 100.0 + i, "start_s": None if i % 3 == 0 else 160.0 + 2 * i, "joules": 1.0,
                       "sunlit_at_wanted": i % 2 == 0} for i in range(waits)]}


def _report(tmp_path: Path, monkeypatch, rows: list[dict], energy: dict | None, plots: bool = False) -> str:
    """report.md of a satellite run of ``rows`` with an imported plan (no tracks to draw)."""
    from types import SimpleNamespace

    import numpy as np

    from contact_sim.link import LinkModel
    from contact_sim.plan import ContactPlan
    from contact_sim.windows import WindowTable
    from fol.simulation.result import SimulationResult

    if not plots:
        for name in ("_plot_accuracy", "plot_accuracy_vs_bytes", "plot_accuracy_vs_rounds"):
            monkeypatch.setattr(report, name, lambda rows, path: None)
    nodes = list(dict.fromkeys(r["node"] for r in rows))
    windows = WindowTable(np.array([0], np.int32), np.array([1], np.int32), np.array([10.0]), np.array([70.0]),
                          np.array([900.0], np.float32), np.array([1000.0], np.float32), np.zeros(1))
    plan = ContactPlan(nodes, windows, LinkModel(), [0.0, 3600.0])
    seeds = sorted({r["seed"] for r in rows})
    scn = SimpleNamespace(name="fabricated", contact=SimpleNamespace(kind="constellation"), seeds=seeds,
                          data=SimpleNamespace(dataset="synthetic", partition="orbit"),
                          fol=SimpleNamespace(max_neighbours=4, top_k=2, rounds=1))
    result = SimulationResult(tmp_path, rows, plan, {m: j for j, m in enumerate(METHODS)}, 12.0, [], energy)
    return report.write_report(scn, result, None).read_text()


def test_report_md_of_2000_nodes_has_no_per_node_columns(tmp_path: Path, monkeypatch):
    """The per-node accuracy table of 1,584 nodes was one 21,790-character line per method;
    now a distribution over the nodes, with the per-node values left to results.csv."""
    n = 2000
    md = _report(tmp_path, monkeypatch, _rows(n), None)
    lines = md.splitlines()
    assert len(lines) < 120 and max(map(len, lines)) < 600
    assert "sat-0001" not in md and "results.csv" in md
    table = lines[lines.index("| method | lowest node | 10th percentile | median | 90th percentile | highest node "
                              "| average |"):]
    assert table[2].startswith("| local | 0.0 | 9.9 | 49.5 | 89.1 | 99.0 | 49.5 |")
    assert table[len(METHODS) + 2] == "| test images | 30 | 30 | 31 | 32 | 32 | total 61999 |"
    assert sum(1 for r in (tmp_path / "results.csv").read_text().splitlines()) == 1 + n * len(METHODS)


def test_the_energy_section_of_2000_nodes_has_no_per_node_or_per_wait_rows(tmp_path: Path, monkeypatch):
    """The energy tables of 1,584 nodes had one row per node and one per transfer that waited for the
    battery (9,500 lines); now the lowest, median and highest node and the swarm's total of each figure,
    and the waits in numbers, with every node's figures and every wait left to energy.json."""
    n = 2000
    md = _report(tmp_path, monkeypatch, _rows(n), _energy([f"sat-{i:04d}" for i in range(n)], 5 * n))
    lines = md.splitlines()
    assert len(lines) < 120 and max(map(len, lines)) < 600
    assert "sat-0001" not in md and "energy.json" in md and "(last rows)" in md
    energy = lines[lines.index("| per node | lowest | median | highest | swarm total |"):]
    assert energy[2:6] == ["| in eclipse (%) | 30 | 40 | 50 | - |", "| battery end (Wh) | 12.00 | 15.00 | 18.00 | 29995.00 |",
                           "| pretraining (J) | 20 | 21 | 22 | 4.2e+04 |", "| transfers | 0 | 2 | 3 | 3000 |"]
    assert len([line for line in energy if line.endswith("training (J) | 20 | 20.5 | 21 | 4.1e+04 |")]) == len(METHODS)
    assert energy[6 + 1 + len(METHODS) + 1] == (
        "10000 transfer(s) waited for the battery (charging needs sunlight): 3334 never sent (the round ended), "
        "the others waited 5059.5 s (median), 10058.0 s at most; 5000 could have started in sunlight.")

# report.md of two nodes, two seeds, three methods and three waits for the battery, as written before
# the distributions for large swarms were added (commit 6f3d45f): small swarms' reports must not change
SMALL_REPORT = """\
# Swarm simulation: fabricated

2 learning nodes (constellation), dataset `synthetic` (orbit partition), seeds [0, 1], FOL: Q = 4, K = 2, E = 1.
Contact plan: 1 windows over 1.0 h in 1 round(s), 1.0 windows per plan node on average (ground stations included), mean duration 60 s, 0 model transfers recorded over 2 seed(s) (transfers.json).
Wall time 12 s.

## Summary

| method | test accuracy (%) | bytes sent + received / node | training GFLOPs / node | rounds | kept the local model |
|---|---|---|---|---|---|
| local | 24.00 ± 7.78 | 0 B | 1.00 | 0 | 4 of 4 node runs |
| fol | 29.00 ± 7.78 | 20 B | 1.00 | 1 | 0 of 4 node runs |
| fedavg | 34.00 ± 7.78 | 40 B | 1.00 | 2 | 0 of 4 node runs |

Accuracy: mean over nodes, then mean ± std over seeds (std: the sample standard deviation, n - 1 in the denominator; one seed gives the mean alone). Multi-round methods used as many rounds as the contact plan allows (the *rounds* column); FOL's bytes are the models actually delivered in contact windows.

## Accuracy against rounds

Multi-round methods are evaluated on every node after every round of the same run (the contact plan decides who takes part); the other methods appear with their single value.

| method | test accuracy (%) | rounds used | bytes / node |
|---|---|---|---|
| local | 24.0 | 0 | 0 B |
| fol | 29.0 | 1 | 20 B |
| fedavg | 34.0 | 2 | 40 B |

Rounds (and bytes per node by then) each multi-round method needs to reach FOL's and FOL-A's accuracy:

(needs a multi-round method and fol in the run)

## Test accuracy per node (%, mean ± std over seeds)

| method | sat-0000 | sat-0001 | average |
|---|---|---|---|
| local | 5.5 ± 7.8 | 42.5 ± 7.8 | 24.0 ± 7.8 |
| fol | 10.5 ± 7.8 | 47.5 ± 7.8 | 29.0 ± 7.8 |
| fedavg | 15.5 ± 7.8 | 52.5 ± 7.8 | 34.0 ± 7.8 |
| test images | 30 | 31 | total 61 |

## Figures

![accuracy by node](accuracy_by_node.png)

![accuracy vs bytes](accuracy_vs_bytes.png)

![accuracy vs rounds](accuracy_vs_rounds.png)

## Energy (first seed)

Battery 20 Wh (start at 80 %), solar 10 W in sunlight, idle 2 W, 1e-10 J/FLOP, 1e-06 J/byte sent. FOL's model transfers and pretraining are scheduled only when the battery can pay for them (the server-based baselines' uploads are not charged); each method's training energy (last columns) is computed from its measured FLOPs after the run, not drawn from the battery (the battery at the end leaves it out).

| node | in eclipse | battery end (Wh) | pretraining (J) | transfers | transfer energy (J) | fedavg training (J) | fol training (J) | local training (J) |
|---|---|---|---|---|---|---|---|---|
| sat-0000 | 30 % | 12.00 | 20 | 0 | 3 | 20 | 20 | 20 |
| sat-0001 | 35 % | 13.00 | 21 | 1 | 4 | 21 | 21 | 21 |

3 transfer(s) waited for the battery (charging needs sunlight):

| round | from | to | could start (s) | sent at (s) | waited (s) | sunlit when it could start |
|---|---|---|---|---|---|---|
| 0 | sat-0000 | sat-0001 | 100.0 | never (round ended) | - | yes |
| 1 | sat-0001 | sat-0000 | 101.0 | 162.0 | 61.0 | no |
| 0 | sat-0000 | sat-0001 | 102.0 | 164.0 | 62.0 | yes |
"""


def test_a_small_swarm_report_is_unchanged(tmp_path: Path, monkeypatch):
    md = _report(tmp_path, monkeypatch, _rows(2, seeds=(0, 1)), _energy(["sat-0000", "sat-0001"], 3))
    assert md == SMALL_REPORT


def _drone_plot(monkeypatch, tmp_path: Path, n: int, title: str | None = None):
    """contacts.png of ``n`` drones on a three-sample grid with two links at t = 10 s: its axes."""
    import numpy as np

    import contact_sim.plotting as plotting
    from contact_sim.link import LinkModel
    from contact_sim.plan import ContactPlan
    from contact_sim.trajectory import Trajectories
    from contact_sim.windows import WindowTable

    pos = np.random.default_rng(0).uniform(0, 10, (3, n, 3))
    traj = Trajectories([f"d{i}" for i in range(n)], np.zeros(n), np.array([0.0, 10.0, 20.0]), pos, pos, pos,
                        None, "ENU", False)
    windows = WindowTable(np.array([0, 1], np.int32), np.array([1, 2], np.int32), np.array([5.0, 5.0]),
                          np.array([15.0, 15.0]), np.ones(2, np.float32), np.ones(2, np.float32), np.zeros(2))
    caught = []
    real = plotting.save_figure
    monkeypatch.setattr(plotting, "save_figure", lambda fig, path: (caught.append(fig.axes[0]), real(fig, path))[1])
    plotting.plot_contacts(ContactPlan(traj.names, windows, LinkModel(), [0.0, 20.0]), traj, tmp_path / "c.png", t_s=10.0,
                           title=title)
    return caught[0]


def test_a_drone_swarm_plot_draws_at_most_max_tracks_paths(tmp_path: Path, monkeypatch):
    """2,000 drones drew 2,000 paths, a grey blanket over the whole area; like satellites' ground
    tracks, at most MAX_TRACKS paths are drawn now (every drone's position still is), and fewer
    drones draw every path as before."""
    from contact_sim.plotting import MAX_TRACKS

    for n, paths in ((MAX_TRACKS + 300, MAX_TRACKS), (12, 12)):
        ax = _drone_plot(monkeypatch, tmp_path, n)
        assert len(ax.get_lines()) == paths + 2  # the paths and the two links
        assert len(ax.collections[0].get_offsets()) == n



def test_results_json_is_streamed_not_built_in_memory(tmp_path: Path, monkeypatch):
    """results.json of 2,000 nodes, 5 seeds and 15 methods is 234 MB; it was built in memory before
    writing (the list of its pieces, the joined string, its UTF-8 copy: 9 times the file's size
    here), and the run's peak memory went from 1.2 to 2.5 GB. Now it is written piece by piece: the
    report's allocations stay well under the file's size."""
    import json
    import tracemalloc

    rows = _rows(60, seeds=(0, 1))
    for r in rows:
        r["extra"] = {"curve": [{"round": k, "test_accuracy": 0.5, "val_accuracy": 0.5, "bytes": 1000 * k}
                                for k in range(1, 21)]}
    tracemalloc.start()
    try:
        _report(tmp_path, monkeypatch, rows, None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    text = (tmp_path / "results.json").read_text()
    assert json.loads(text) == rows and len(text.splitlines()) == len(rows) + 2  # one row a line beyond 48 nodes
    assert peak < len(text) / 2, (peak, len(text))


def test_a_contact_plot_says_when_its_links_are_a_subsample(tmp_path: Path, monkeypatch):
    """The simulation's contacts.png of 1,584 satellites drew 1,500 of the busiest instant's links under
    a title that did not say so; a plot that shows every link keeps its title."""
    import contact_sim.plotting as plotting

    assert _drone_plot(monkeypatch, tmp_path, 12, "swarm").get_title() == "swarm"
    assert _drone_plot(monkeypatch, tmp_path, 12).get_title() == "12 nodes, 2 windows; 2 links shown at t = 10 s"
    monkeypatch.setattr(plotting, "MAX_EDGES", 1)
    assert _drone_plot(monkeypatch, tmp_path, 12, "swarm").get_title() == "swarm (1 of 2 links shown)"
    assert _drone_plot(monkeypatch, tmp_path, 12).get_title() == "12 nodes, 2 windows; 1 of 2 links shown at t = 10 s"


def test_results_json_beyond_the_threshold_is_one_compact_record_per_line(tmp_path: Path, monkeypatch):
    """results.json of 1,584 nodes x 3 seeds x 8 methods was 47 MB of one-space indentation (a row of
    a 20-round baseline spread over 130 lines); beyond ``PER_NODE_MAX`` nodes it is now one compact
    record per line, the same JSON list of rows (json.load gives the same rows), about a quarter
    smaller; at the threshold the indented bytes are unchanged."""
    import json

    def rows_with_curves(n):
        rows = _rows(n)
        for r in rows:
            r["extra"] = {"curve": [{"round": k, "test_accuracy": 0.5 + k / 97, "val_accuracy": 0.5, "bytes": 1000 * k}
                                    for k in range(1, 21)]}
        return rows

    small, big = rows_with_curves(report.PER_NODE_MAX), rows_with_curves(report.PER_NODE_MAX + 1)
    (tmp_path / "small").mkdir(), (tmp_path / "big").mkdir()
    _report(tmp_path / "small", monkeypatch, small, None)
    assert (tmp_path / "small" / "results.json").read_text() == json.dumps(small, indent=1, default=str)
    _report(tmp_path / "big", monkeypatch, big, None)
    text = (tmp_path / "big" / "results.json").read_text()
    lines = text.splitlines()
    assert json.loads(text) == big and len(lines) == len(big) + 2 and lines[0] == "[" and lines[-1] == "]"
    assert [json.loads(line.rstrip(",")) for line in lines[1:-1]] == big
    assert len(text) < 0.8 * len(json.dumps(big, indent=1, default=str))
