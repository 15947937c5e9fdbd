"""Accuracy against rounds and bytes: the curves, the rounds-to-match table and
the plots of the simulation report (from hand-made result rows)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fol.simulation.report import (
    accuracy_at_rounds_table, exchange_curves, plot_accuracy_vs_bytes, plot_accuracy_vs_rounds, reference_points, round_curves,
    rounds_to_match_table,
)


def _row(seed, node, method, acc, rounds=1, bytes_=1000, curve=None):
    return {"seed": seed, "node": node, "method": method, "test_accuracy": acc, "val_accuracy": acc,
            "bytes_up": bytes_ // 2, "bytes_down": bytes_ - bytes_ // 2, "train_flops": 1, "rounds": rounds,
            "received_models": 0, "kept_local": False, "seconds": 0.0,
            "extra": {"curve": curve} if curve is not None else {}}


def _curve(accs, per_round_bytes=100):
    return [{"round": i + 1, "test_accuracy": a, "val_accuracy": a, "bytes": per_round_bytes * (i + 1)}
            for i, a in enumerate(accs)]


ROWS = (
    [_row(s, n, "fol", 0.8, bytes_=5000) for s in (0, 1) for n in "ab"]
    + [_row(s, n, "fol-a", 0.9, bytes_=5000) for s in (0, 1) for n in "ab"]
    + [_row(s, n, "local", 0.6, rounds=0, bytes_=0) for s in (0, 1) for n in "ab"]
    # fedavg: node a climbs faster than node b; the mean over nodes crosses 0.8 after round 3
    + [_row(s, "a", "fedavg", 0.9, rounds=4, curve=_curve([0.5, 0.7, 0.85, 0.9])) for s in (0, 1)]
    + [_row(s, "b", "fedavg", 0.8, rounds=4, curve=_curve([0.5, 0.6, 0.75, 0.8])) for s in (0, 1)]
    + [_row(s, n, "mtfl", 0.5, rounds=4, curve=_curve([0.3, 0.4, 0.5, 0.5], 10)) for s in (0, 1) for n in "ab"]
)


def test_curves_average_nodes_then_seeds_and_reference_points_are_single_values():
    curves = round_curves(ROWS)
    assert set(curves) == {"fedavg", "mtfl"}
    assert [round(p["test_accuracy"], 6) for p in curves["fedavg"]] == [0.5, 0.65, 0.8, 0.85]
    assert curves["fedavg"][2]["bytes"] == 300
    refs = reference_points(ROWS)
    assert set(refs) == {"fol", "fol-a", "local"} and refs["fol"]["test_accuracy"] == 0.8


def test_rounds_to_match_fol_or_not_within_r():
    table = rounds_to_match_table(ROWS)
    fedavg = next(line for line in table.splitlines() if line.startswith("| fedavg |"))
    mtfl = next(line for line in table.splitlines() if line.startswith("| mtfl |"))
    assert fedavg.split("|")[2].strip() == "3"  # reaches FOL's 80 % after round 3 ...
    assert fedavg.split("|")[4].strip() == "not within 4"  # ... never FOL-A's 90 %
    assert "not within 4" in mtfl.split("|")[2]
    at = accuracy_at_rounds_table(ROWS, at=(1, 3, 10))
    assert "after 10 rounds" not in at and "after 4 rounds" in at  # R = 4 < 10
    assert "| fedavg | 50.0 | 80.0 | 85.0 | 4 |" in at
    one_shot = accuracy_at_rounds_table([r for r in ROWS if r["method"] in ("fol", "local")])
    assert "| test accuracy (%) |" in one_shot and "| fol | 80.0 | 1 |" in one_shot  # no curves: one column


def _drawn(monkeypatch, plot, rows, path: Path):
    """Draw ``plot`` of ``rows`` to ``path``; the file must be a PNG of the documented
    8.5 x 4.5 in at 110 dpi. Returns the figure's axes, caught as it is saved."""
    import fol.simulation.report as report
    from PIL import Image

    caught = []
    real = report.save_figure

    def spy(fig, target):
        caught.append(fig.axes)
        return real(fig, target)

    monkeypatch.setattr(report, "save_figure", spy)
    plot(rows, path)
    monkeypatch.setattr(report, "save_figure", real)
    ((ax,),) = caught
    with Image.open(path) as im:
        im.verify()
    with Image.open(path) as im:
        assert im.format == "PNG" and im.size == (935, 495)
    return ax


def _same(a, b) -> bool:
    """Nested lists / dicts of numbers equal up to float rounding."""
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(np.isclose(a, b, rtol=1e-9, atol=1e-9))


def _xy(points, x="round"):
    return [[float(p[x]) for p in points], [100 * p["test_accuracy"] for p in points]]


def _line(line):
    return [[float(v) for v in line.get_xdata()], [float(v) for v in line.get_ydata()]]


def _check_rounds_plot(ax, rows):
    """What plot_accuracy_vs_rounds draws is the prepared data: a line per round curve, a dashed line
    per FOL run of several exchanges, a star per single-shot method at its rounds, local's level."""
    curves, refs, ex = round_curves(rows), reference_points(rows), exchange_curves(rows)
    lines = {line.get_label(): line for line in ax.get_lines()}
    for m, pts in curves.items():
        assert _same(_line(lines[m]), _xy(pts)), m
    assert _same(list(lines["local (no exchange)"].get_ydata()), [100 * refs["local"]["test_accuracy"]] * 2)
    dashed = [_line(line) for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert _same(dashed, [_xy(ex[m]) for m in refs if m != "local" and len(ex.get(m, [])) > 1])
    stars = {c.get_label(): c.get_offsets().tolist() for c in ax.collections}
    assert _same(stars, {f"{m} ({p['rounds']} exchange{'s' * (p['rounds'] != 1)})":
                         [[max(1, p["rounds"]), 100 * p["test_accuracy"]]]
                         for m, p in refs.items() if m != "local"})


def _check_bytes_plot(ax, rows):
    """What plot_accuracy_vs_bytes draws: every node run's (bytes, accuracy), a star at each method's
    mean, and the round curves (FOL's exchanges, dashed) against bytes per node."""
    curves, ex = round_curves(rows), exchange_curves(rows)
    methods = list(dict.fromkeys(r["method"] for r in rows))
    runs = {m: [[max(1.0, r["bytes_up"] + r["bytes_down"]), 100 * r["test_accuracy"]] for r in rows
                if r["method"] == m] for m in methods}
    labelled = {c.get_label(): c.get_offsets().tolist() for c in ax.collections if not c.get_label().startswith("_")}
    assert _same(labelled, {m: [np.mean(runs[m], axis=0).tolist()] for m in methods})
    dots = sorted(p for c in ax.collections if c.get_label().startswith("_") for p in c.get_offsets().tolist())
    assert _same(dots, sorted(p for m in methods for p in runs[m]))
    drawn = sorted(_line(line) for line in ax.get_lines())
    expected = [[[max(1.0, x) for x in xs], ys] for xs, ys in
                [_xy(pts, "bytes") for pts in curves.values()]
                + [_xy(pts, "bytes") for m, pts in ex.items() if m not in curves and len(pts) > 1]]
    assert _same(drawn, sorted(expected))


def test_plots_are_written(tmp_path: Path, monkeypatch):
    _check_rounds_plot(_drawn(monkeypatch, plot_accuracy_vs_rounds, ROWS, tmp_path / "r.png"), ROWS)
    _check_bytes_plot(_drawn(monkeypatch, plot_accuracy_vs_bytes, ROWS, tmp_path / "b.png"), ROWS)


def _fol_row(seed, node, accs, per_exchange_bytes=500):
    row = _row(seed, node, "fol", accs[-1], rounds=len(accs), bytes_=per_exchange_bytes * len(accs))
    row["extra"]["exchanges"] = [{"round": i + 1, "test_accuracy": a, "bytes_up": per_exchange_bytes * (i + 1) // 2,
                                  "bytes_down": per_exchange_bytes * (i + 1) - per_exchange_bytes * (i + 1) // 2}
                                 for i, a in enumerate(accs)]
    return row


def test_a_fol_run_of_e_exchanges_shows_each_exchange(tmp_path: Path, monkeypatch):
    rows = ([_fol_row(s, n, accs) for s in (0, 1) for n, accs in (("a", [0.6, 0.7, 0.8]), ("b", [0.6, 0.8, 0.9]))]
            + [r for r in ROWS if r["method"] in ("fedavg", "local")])
    ex = exchange_curves(rows)
    assert set(ex) == {"fol"} and [round(p["test_accuracy"], 6) for p in ex["fol"]] == [0.6, 0.75, 0.85]
    assert [p["bytes"] for p in ex["fol"]] == [500, 1000, 1500]
    at = accuracy_at_rounds_table(rows, at=(1, 3))  # fedavg's R = 4: columns after 1, 3 and 4 rounds
    assert "| fol | 60.0 | 85.0 | 85.0 | 3 |" in at  # after min(r, E) exchanges
    assert "| local | 60.0 | 60.0 | 60.0 | 0 |" in at
    ax = _drawn(monkeypatch, plot_accuracy_vs_rounds, rows, tmp_path / "r.png")
    _check_rounds_plot(ax, rows)
    assert len([line for line in ax.get_lines() if line.get_linestyle() == "--"]) == 1  # FOL's three exchanges
    _check_bytes_plot(_drawn(monkeypatch, plot_accuracy_vs_bytes, rows, tmp_path / "b.png"), rows)


def test_node_table_says_how_many_test_images_each_accuracy_is_of() -> None:
    """A node at 100 % of 3 test images and one at 90 % of 200 read differently; the table
    says so (per node, a range where seeds' partitions differ), and results.csv has the sizes."""
    from fol.simulation.report import CSV_FIELDS, node_table

    rows = [{"seed": s, "node": n, "method": "local", "test_accuracy": acc, "n_train": 10 * t, "n_val": 2, "n_test": t}
            for s, n, acc, t in [(0, "a", 1.0, 3), (1, "a", 1.0, 4), (0, "b", 0.9, 200), (1, "b", 0.9, 200)]]
    table = node_table(rows).splitlines()
    assert table[0] == "| method | a | b | average |"
    assert table[-1] == "| test images | 3-4 | 200 | total 203-204 |"
    assert node_table([{k: v for k, v in r.items() if k != "n_test"} for r in rows]).count("test images") == 0
    assert CSV_FIELDS[-3:] == ["n_train", "n_val", "n_test"]


def test_plots_go_through_the_crash_safe_writer(tmp_path: Path, monkeypatch) -> None:
    """A plot that fails while it is written leaves the previous file as it was
    (docs/architecture.md, "One crash-safe writer": plots included);
    accuracy_vs_rounds.png was written in place and left truncated."""
    import matplotlib.figure
    import pytest

    def broken_savefig(self, target, *args, **kwargs):
        if isinstance(target, (str, Path)):
            Path(target).write_bytes(b"partial")
        else:
            target.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", broken_savefig)
    for plot, name in ((plot_accuracy_vs_rounds, "accuracy_vs_rounds.png"),
                       (plot_accuracy_vs_bytes, "accuracy_vs_bytes.png")):
        target = tmp_path / name
        target.write_bytes(b"previous plot")
        with pytest.raises(OSError, match="disk full"):
            plot(ROWS, target)
        assert target.read_bytes() == b"previous plot", name
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # no temporary file left


def test_node_table_total_test_images_is_the_swarm_total_of_each_seed():
    """Seeds that deal the test images out differently: the total is 30 in both,
    not the sum of each node's smallest and largest count (20-40)."""
    from fol.simulation.report import node_table

    rows = [dict(_row(s, n, "local", 0.5, rounds=0, bytes_=0), n_test=t)
            for s, n, t in [(0, "a", 10), (0, "b", 20), (1, "a", 20), (1, "b", 10)]]
    rows += [dict(_row(s, n, "fol", 0.5), n_test=t) for s, n, t in [(0, "a", 10), (0, "b", 20), (1, "a", 20), (1, "b", 10)]]
    assert node_table(rows).splitlines()[-1] == "| test images | 10-20 | 10-20 | total 30 |"
    rows = [dict(r, n_test=r["n_test"] + 5 * r["seed"]) for r in rows]  # seed 1 holds 10 more in all
    assert node_table(rows).splitlines()[-1] == "| test images | 10-25 | 15-20 | total 30-40 |"


def test_a_gain_of_one_test_image_defines_the_share_despite_float32_accuracies():
    """Accuracies are float32 fractions: 11/15 -> 12/15 is a gain of one of 15 test
    images, though 0.8000000119 - 0.7333333492 falls 4e-9 short of 1/15. The node's
    share is defined (it was None: 'the ensemble gained less than one test image')
    and counted in the report's transfer table."""
    import numpy as np

    from fol.personalize import transfer_share
    from fol.simulation.report import transfer_table

    local, student, ensemble = (float(np.float32(k / 15)) for k in (11, 11, 12))
    assert transfer_share(local, student, ensemble, min_gain=1 / 15) == 0.0
    assert transfer_share(local, student, float(np.float32(11.5 / 15)), min_gain=1 / 15) is None  # half an image
    for n, k in ((3, 2), (5, 4), (7, 6), (9, 3)):  # and the other sizes where float32 rounds the gain down
        assert transfer_share(*(float(np.float32(i / n)) for i in (k, k + 1, k + 1)), min_gain=1 / n) == 1.0
    rows = [dict(_row(0, n, "fol", 0.8), extra={"accuracy": {"local": local, "student": ensemble, "ensemble": ensemble},
                                                "transfer": transfer_share(local, ensemble, ensemble, 1 / 15)})
            for n in "ab"]
    assert transfer_table(rows).splitlines()[-1].endswith("| 2 / 2 |")


def test_summary_table_counts_the_node_runs_that_kept_the_local_model():
    """Five of nine node runs (three nodes, three seeds) kept the local model: the column
    printed the per-seed average 1.66667 under a header that said "nodes"."""
    from fol.simulation.report import summary_table

    kept = {(0, "a"), (0, "b"), (1, "a"), (2, "b"), (2, "c")}
    rows = [{**_row(s, n, "fol", 0.8), "kept_local": (s, n) in kept} for s in (0, 1, 2) for n in "abc"]
    head, _, fol = summary_table(rows).splitlines()
    assert head.endswith("| kept the local model |") and fol.endswith("| 5 of 9 node runs |")


def test_the_transfer_share_says_over_how_many_seeds_it_is_taken():
    """Seed 0's ensemble gains 10 points (the student keeps 60 %), seed 1's none: the share is
    seed 0's alone, and the cell says so instead of passing for a mean over both seeds."""
    from fol.simulation.report import transfer_table

    acc = {0: {"local": 0.5, "student": 0.56, "ensemble": 0.6}, 1: {"local": 0.5, "student": 0.5, "ensemble": 0.5}}
    rows = [dict(_row(s, n, "fol", acc[s]["student"]), extra={"accuracy": acc[s], "transfer": None})
            for s in (0, 1) for n in "ab"]
    cell = transfer_table(rows).splitlines()[-1].split("|")[2].strip()
    assert cell == "60 % (over 1 of 2 seeds: the others' ensembles gained under half a point)"
    both = [dict(r, extra={"accuracy": acc[0], "transfer": 0.6}) for r in rows]
    assert transfer_table(both).splitlines()[-1].split("|")[2].strip() == "60 ± 0 %"
