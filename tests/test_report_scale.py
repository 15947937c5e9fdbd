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
