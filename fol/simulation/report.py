"""The simulation's output folder: ``results.csv`` / ``results.json``, a
paper-style ``report.md`` and PNG plots (ground tracks with the contact graph,
per-node accuracy by method, accuracy versus rounds and versus bytes
communicated; beyond ``PER_NODE_MAX`` nodes the per-node figure and tables
become distributions over the nodes), and the tables that compare the multi-round baselines' curves
with FOL's single exchange (also used by ``benchmarks/compare_methods.py``)."""

from __future__ import annotations

import csv
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from contact_sim.plotting import plot_contacts, save_figure
from fol.fileio import atomic_write_text, atomic_writer
from swarmbase.units import format_bytes

if TYPE_CHECKING:  # pragma: no cover
    from fol.simulation.result import SimulationResult
    from fol.simulation.scenario import SwarmScenario
    from contact_sim.trajectory import Trajectories

__all__ = ["write_report", "write_results_json", "summary_table", "transfer_table", "node_table",
           "node_distribution_table", "CSV_FIELDS",
           "round_curves", "reference_points",
           "exchange_curves", "rounds_to_match_table", "accuracy_at_rounds_table", "plot_accuracy_vs_rounds", "plot_accuracy_vs_bytes"]

# Per-node outputs (the per-node bar chart, the report's per-node accuracy and energy tables) are drawn for
# swarms of at most this many learning nodes; a larger swarm gets distributions over its nodes instead, and
# the per-node values stay in results.csv, results.json and energy.json.
PER_NODE_MAX = 48

CSV_FIELDS = ["seed", "node", "method", "test_accuracy", "val_accuracy", "bytes_up", "bytes_down", "train_flops",
              "rounds", "received_models", "kept_local", "seconds", "n_train", "n_val", "n_test"]


def _pm(values: Sequence[float], scale: float = 100.0, digits: int = 2) -> str:
    if not values:
        return "-"
    m = statistics.mean(values) * scale
    if len(values) == 1:
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} ± {statistics.stdev(values) * scale:.{digits}f}"


def _by(rows: Sequence[dict[str, Any]], *keys: str) -> dict[tuple[Any, ...], list[dict[str, Any]]]:
    out: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        out[tuple(r[k] for k in keys)].append(r)
    return out


def _method_order(rows: Sequence[dict[str, Any]]) -> list[str]:
    seen: list[str] = []
    for r in rows:
        if r["method"] not in seen:
            seen.append(r["method"])
    return seen


def _wall_time(result: Any) -> str:
    """The report's wall-time sentence; a resumed run's counts the interrupted sessions it recorded."""
    earlier = result.earlier_seconds
    if earlier is None:
        return (f"Wall time {result.seconds:.0f} s after --resume only (the interrupted part's time was not "
                "recorded).")
    if earlier > 0:
        return (f"Wall time {result.seconds:.0f} s: {earlier:.0f} s before --resume (up to the last saved result) "
                f"and {result.seconds - earlier:.0f} s after.")
    return f"Wall time {result.seconds:.0f} s."


def summary_table(rows: Sequence[dict[str, Any]], rounds_used: dict[str, int] | None = None) -> str:
    """Markdown: one line per method with the mean over nodes (mean ± std over seeds), and
    how many of its node runs (nodes x seeds) kept the local model (``5 of 36 node runs``)."""
    lines = ["| method | test accuracy (%) | bytes sent + received / node | training GFLOPs / node | rounds | kept the local model |",
             "|---|---|---|---|---|---|"]
    for m in _method_order(rows):
        mr = [r for r in rows if r["method"] == m]
        per_seed = _mean_accuracy_by(mr, "seed")
        bytes_node = statistics.mean(r["bytes_up"] + r["bytes_down"] for r in mr)
        flops = statistics.mean(r["train_flops"] for r in mr) / 1e9
        kept = sum(1 for r in mr if r["kept_local"])
        rounds = (rounds_used or {}).get(m, max(r["rounds"] for r in mr))
        lines.append(f"| {m} | {_pm(per_seed)} | {format_bytes(bytes_node)} | {flops:.2f} | {rounds} | {kept} of {len(mr)} node runs |")
    return "\n".join(lines)


def transfer_table(rows: Sequence[dict[str, Any]]) -> str:
    """Markdown: for each FOL pipeline (``fol`` and ``fol-n`` rows), the share
    of the ensemble's test-accuracy gain over local that the distilled student
    keeps, computed on the swarm means of each seed (mean ± std over seeds;
    a seed whose ensemble gains under half a point on the swarm mean is left
    out, :func:`fol.personalize.swarm_transfer`, and the cell then says over
    how many seeds the share is taken), and how many node shares
    were defined (ensemble gain of at least one test image). Empty when no
    FOL row is present."""
    from fol.personalize import swarm_transfer

    lines = ["| pipeline | student's share of the ensemble's gain | nodes with a defined share |", "|---|---|---|"]
    found = False
    for m, teacher in (("fol", "fol-a"), ("fol-n", "fol-an")):
        mr = [r for r in rows if r["method"] == m and "accuracy" in r.get("extra", {})]
        if not mr:
            continue
        found = True
        shares, defined, total = [], 0, 0
        seeds = _by(mr, "seed")
        for group in seeds.values():
            acc = [r["extra"]["accuracy"] for r in group]
            t = swarm_transfer([a["local"] for a in acc], [a["student"] for a in acc], [a["ensemble"] for a in acc])
            if t["of_means"] is not None:
                shares.append(t["of_means"])
            defined += sum(1 for r in group if r["extra"].get("transfer") is not None)
            total += len(group)
        if not shares:
            share = "undefined (mean gain under half a point)"
        else:  # a mean over the seeds it is defined in: say so when that is not every seed
            share = _pm(shares, digits=0) + " %" + (
                f" (over {len(shares)} of {len(seeds)} seeds: the others' ensembles gained under half a point)"
                if len(shares) < len(seeds) else "")
        lines.append(f"| {m} (student) / {teacher} (ensemble) | {share} | {defined} / {total} |")
    return "\n".join(lines) if found else ""


def node_table(rows: Sequence[dict[str, Any]]) -> str:
    """Markdown, paper style: methods x nodes, mean ± std over seeds, plus the per-method average."""
    nodes = _nodes(rows)
    cells = _by(rows, "method", "node")
    lines = ["| method | " + " | ".join(nodes) + " | average |", "|---" * (len(nodes) + 2) + "|"]
    for m in _method_order(rows):
        vals = [_pm([r["test_accuracy"] for r in cells[(m, n)]], digits=1) for n in nodes]
        per_seed = _mean_accuracy_by([r for r in rows if r["method"] == m], "seed")
        lines.append(f"| {m} | " + " | ".join(vals) + f" | {_pm(per_seed, digits=1)} |")
    if all("n_test" in r for r in rows):  # how many images each accuracy is of (a few test images: coarse steps)
        counts = [sorted({r["n_test"] for r in rows if r["node"] == n}) for n in nodes]
        span = lambda lo, hi: str(lo) if lo == hi else f"{lo}-{hi}"  # noqa: E731 - over seeds, when they differ
        lines.append("| test images | " + " | ".join(span(c[0], c[-1]) for c in counts)
                     + f" | total {_test_total(rows)} |")
    return "\n".join(lines)


def node_distribution_table(rows: Sequence[dict[str, Any]]) -> str:
    """Markdown for a swarm too large for :func:`node_table`: per method, the lowest, 10th
    percentile, median, 90th percentile and highest of the nodes' test accuracies (each
    node's mean over seeds), and the average of :func:`node_table`; then the same
    statistics of the nodes' test images (over seeds and nodes) and the swarm's total."""
    cols = "| lowest node | 10th percentile | median | 90th percentile | highest node |"
    lines = ["| method " + cols + " average |", "|---" * 7 + "|"]
    stats = lambda v: [np.min(v), np.percentile(v, 10), np.median(v), np.percentile(v, 90), np.max(v)]  # noqa: E731
    for m in _method_order(rows):
        mr = [r for r in rows if r["method"] == m]
        per_node = _mean_accuracy_by(mr, "node")
        per_seed = _mean_accuracy_by(mr, "seed")
        lines.append(f"| {m} | " + " | ".join(f"{100 * v:.1f}" for v in stats(per_node))
                     + f" | {_pm(per_seed, digits=1)} |")
    if all("n_test" in r for r in rows):
        first = [r for r in rows if r["method"] == _method_order(rows)[0]]
        lines.append("| test images | " + " | ".join(f"{v:.0f}" for v in stats([r["n_test"] for r in first]))
                     + f" | total {_test_total(rows)} |")
    return "\n".join(lines)


def _mean_accuracy_by(rows: Sequence[dict[str, Any]], key: str) -> list[float]:
    """The mean test accuracy of each group of ``rows`` by ``key`` (e.g. each seed's mean over nodes)."""
    return [statistics.mean(r["test_accuracy"] for r in g) for g in _by(rows, key).values()]


def _test_total(rows: Sequence[dict[str, Any]]) -> str:
    """The swarm's test images in each seed (one row per node: the first method's), not the sum of
    per-node extremes: ``888``, or ``880-890`` when the seeds differ."""
    first = _method_order(rows)[0]
    totals = sorted(sum(r["n_test"] for r in g) for g in _by([r for r in rows if r["method"] == first], "seed").values())
    return str(totals[0]) if totals[0] == totals[-1] else f"{totals[0]}-{totals[-1]}"


def _nodes(rows: Sequence[dict[str, Any]]) -> list[str]:
    """The nodes in the order of their first row."""
    return list(dict.fromkeys(r["node"] for r in rows))


def _plot_accuracy(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """Bars per node and method (mean over seeds); beyond :data:`PER_NODE_MAX` nodes, each method's
    empirical distribution over nodes (share of nodes at or below each accuracy), one line per method."""
    plt = _plt()
    methods = _method_order(rows)
    nodes = _nodes(rows)
    cells = _by(rows, "method", "node")
    if len(nodes) > PER_NODE_MAX:
        colors = _colors(rows)
        fig, ax = plt.subplots(figsize=(8.5, 4.5), dpi=110)
        for m in methods:
            ys = np.sort([100 * statistics.mean(r["test_accuracy"] for r in cells[(m, n)]) for n in nodes if (m, n) in cells])
            share = np.arange(1, ys.size + 1) / ys.size
            ax.step(np.concatenate([[0.0], ys, [100.0]]), np.concatenate([[0.0], share, [1.0]]), where="post",
                    color=colors[m], lw=1.2, label=f"{m} (median {np.median(ys):.1f} %)")
        ax.set_xlim(0, 100)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("test accuracy of a node (%, mean over seeds)")
        ax.set_ylabel("share of nodes at or below")
        ax.set_title(f"Per-node test accuracy by method: distribution over {len(nodes)} nodes")
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
        fig.tight_layout()
        save_figure(fig, path)
        return
    fig, ax = plt.subplots(figsize=(max(8, 0.45 * len(nodes) * max(1, len(methods)) / 2), 4.5), dpi=110)
    width = 0.8 / len(methods)
    x = np.arange(len(nodes))
    for i, m in enumerate(methods):
        ys = [100 * statistics.mean(r["test_accuracy"] for r in cells[(m, n)]) for n in nodes]
        ax.bar(x + i * width - 0.4 + width / 2, ys, width, label=m)
    ax.set_xticks(x, nodes, rotation=60, ha="right", fontsize=7)
    ax.set_ylabel("test accuracy (%)")
    ax.set_ylim(0, 100)
    ax.legend(ncol=min(len(methods), 6), fontsize=8, loc="lower right")
    ax.set_title("Per-node test accuracy by method (mean over seeds)")
    fig.tight_layout()
    save_figure(fig, path)


def _curve(row: dict[str, Any]) -> list[dict[str, Any]] | None:
    extra = row.get("extra")
    return extra.get("curve") if isinstance(extra, dict) and extra.get("curve") else None


def _mean_curves(rows: Sequence[dict[str, Any]], points: Callable[[dict[str, Any]], list[dict[str, Any]] | None],
                 bytes_of: Callable[[dict[str, Any]], float]) -> dict[str, list[dict[str, float]]]:
    """Per method whose rows have ``points(row)``, one point per index (as far as
    every row reaches): its round, test accuracy (mean over nodes, then over
    seeds) and ``bytes_of(point)`` (mean over nodes and seeds)."""
    out: dict[str, list[dict[str, float]]] = {}
    for m in _method_order(rows):
        mr = [r for r in rows if r["method"] == m and points(r)]
        if not mr:
            continue
        n = min(len(points(r)) for r in mr)
        out[m] = [{"round": points(mr[0])[i]["round"],
                   "test_accuracy": statistics.mean(statistics.mean(points(r)[i]["test_accuracy"] for r in g)
                                                    for g in _by(mr, "seed").values()),
                   "bytes": statistics.mean(bytes_of(points(r)[i]) for r in mr)}
                  for i in range(n)]
    return out


def round_curves(rows: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, float]]]:
    """Per multi-round method (rows carrying ``extra["curve"]``), one point per
    round: test accuracy (mean over nodes, then over seeds) and bytes sent +
    received per node so far, including what a node must still download to
    deploy its model after that round (mean over nodes and seeds)."""
    return _mean_curves(rows, _curve, lambda p: p["bytes"])


def _exchanges(row: dict[str, Any]) -> list[dict[str, Any]] | None:
    extra = row.get("extra")
    if _curve(row) or not isinstance(extra, dict):
        return None
    return extra.get("exchanges") or None


def exchange_curves(rows: Sequence[dict[str, Any]]) -> dict[str, list[dict[str, float]]]:
    """Per FOL variant whose rows carry ``extra["exchanges"]`` (a run of E
    exchanges records its models after each one), one point per exchange:
    test accuracy (mean over nodes, then seeds) and bytes sent + received per
    node so far (mean over nodes and seeds)."""
    return _mean_curves(rows, _exchanges, lambda p: p["bytes_up"] + p["bytes_down"])


def reference_points(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Methods without a per-round curve (FOL's exchanges, the one-shot
    baselines, local): rounds used, test accuracy (mean over nodes, then
    seeds) and bytes sent + received per node."""
    out = {}
    for m in _method_order(rows):
        mr = [r for r in rows if r["method"] == m]
        if any(_curve(r) for r in mr):
            continue
        per_seed = _mean_accuracy_by(mr, "seed")
        out[m] = {"rounds": max(r["rounds"] for r in mr), "test_accuracy": statistics.mean(per_seed),
                  "bytes": statistics.mean(r["bytes_up"] + r["bytes_down"] for r in mr)}
    return out


def rounds_to_match_table(rows: Sequence[dict[str, Any]], targets: Sequence[str] = ("fol", "fol-a")) -> str:
    """Markdown: for each multi-round method, the first round after which its
    accuracy (:func:`round_curves`) reaches each target method's accuracy, and
    the bytes per node spent by then, or "not within R"."""
    curves, refs = round_curves(rows), reference_points(rows)
    targets = [t for t in targets if t in refs]
    if not curves or not targets:
        return "(needs a multi-round method and " + " or ".join(targets or ["fol"]) + " in the run)"
    head = "| method | " + " | ".join(
        f"rounds to {t} ({100 * refs[t]['test_accuracy']:.1f} %, {format_bytes(refs[t]['bytes'])}) | bytes / node"
        for t in targets) + " |"
    lines = [head, "|---|" + "---|---|" * len(targets)]
    for m, pts in curves.items():
        cells = []
        for t in targets:
            hit = next((p for p in pts if p["test_accuracy"] >= refs[t]["test_accuracy"]), None)
            cells += [str(hit["round"]), format_bytes(hit["bytes"])] if hit else [f"not within {len(pts)}", "-"]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def accuracy_at_rounds_table(rows: Sequence[dict[str, Any]], at: Sequence[int] = (1, 3, 10)) -> str:
    """Markdown: every method's test accuracy after the rounds ``at`` and after
    its last round R, with bytes per node after R; methods without a curve
    (one-shot baselines) appear with their single value, and a FOL run of E
    exchanges with its value after min(r, E) exchanges."""
    curves, refs, exchanges = round_curves(rows), reference_points(rows), exchange_curves(rows)
    last = max((len(p) for p in curves.values()), default=0)
    cols = [r for r in at if r < last] + ([last] if last else [])
    heads = [f"after {r} round{'s' * (r > 1)} (%)" for r in cols] or ["test accuracy (%)"]
    lines = ["| method | " + " | ".join(heads) + " | rounds used | bytes / node |", "|---|" + "---|" * (len(heads) + 2)]
    for m, pts in curves.items():
        vals = [f"{100 * pts[r - 1]['test_accuracy']:.1f}" if r <= len(pts) else "-" for r in cols]
        lines.append(f"| {m} | " + " | ".join(vals) + f" | {len(pts)} | {format_bytes(pts[-1]['bytes'])} |")
    for m, p in refs.items():
        if m in exchanges and cols:
            ex = exchanges[m]
            vals = [f"{100 * ex[min(r, len(ex)) - 1]['test_accuracy']:.1f}" for r in cols]
        else:
            vals = [f"{100 * p['test_accuracy']:.1f}"] * len(heads)
        lines.append(f"| {m} | " + " | ".join(vals) + f" | {p['rounds']} | {format_bytes(p['bytes'])} |")
    return "\n".join(lines)


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _colors(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One distinct colour per method (tab10, or tab20 beyond ten methods)."""
    import matplotlib

    methods = _method_order(rows)
    cmap = matplotlib.colormaps["tab10" if len(methods) <= 10 else "tab20"]
    return {m: cmap(i % cmap.N) for i, m in enumerate(methods)}


def plot_accuracy_vs_rounds(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """Lines: multi-round methods after every round; markers: FOL's exchanges
    (at E, with a dashed line through its models after each exchange when
    E > 1) and the other single-shot methods (at their round count)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8.5, 4.5), dpi=110)
    from matplotlib.ticker import MaxNLocator

    colors = _colors(rows)
    last = 1
    for m, pts in round_curves(rows).items():
        ax.plot([p["round"] for p in pts], [100 * p["test_accuracy"] for p in pts], marker=".", label=m,
                color=colors[m])
        last = max([last] + [p["round"] for p in pts])
    exchanges = exchange_curves(rows)
    for m, p in reference_points(rows).items():
        if m == "local":
            ax.axhline(100 * p["test_accuracy"], color="grey", ls=":", lw=1, label="local (no exchange)")
        else:
            last = max(last, p["rounds"])
            if len(exchanges.get(m, [])) > 1:  # the run's models after each exchange
                ax.plot([q["round"] for q in exchanges[m]], [100 * q["test_accuracy"] for q in exchanges[m]],
                        ls="--", lw=1, marker=".", color=colors[m])
            ax.scatter([max(1, p["rounds"])], [100 * p["test_accuracy"]], s=90, marker="*", edgecolor="k", zorder=3,
                       color=colors[m], label=f"{m} ({p['rounds']} exchange{'s' * (p['rounds'] != 1)})")
    ax.set_xlabel("communication rounds")
    ax.xaxis.set_major_locator(MaxNLocator(nbins=min(last, 10), integer=True, min_n_ticks=1))  # whole rounds
    ax.set_xlim(0.5, last + 0.5)
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("Accuracy versus rounds (mean over nodes and seeds)")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    save_figure(fig, path)


def plot_accuracy_vs_bytes(rows: Sequence[dict[str, Any]], path: Path) -> None:
    """Dots: nodes; stars: method means; lines: multi-round methods after
    every round, dashed: FOL after each exchange (bytes per node so far)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8.5, 4.5), dpi=110)
    curves, colors, exchanges = round_curves(rows), _colors(rows), exchange_curves(rows)
    for m in _method_order(rows):
        color = colors[m]
        mr = [r for r in rows if r["method"] == m]
        xs = [max(1.0, r["bytes_up"] + r["bytes_down"]) for r in mr]
        ys = [100 * r["test_accuracy"] for r in mr]
        ax.scatter(xs, ys, s=10, alpha=0.3, color=color)
        ax.scatter([statistics.mean(xs)], [statistics.mean(ys)], s=90, marker="*", edgecolor="k", label=m, color=color,
                   zorder=3)
        if m in curves:
            pts = curves[m]
            ax.plot([max(1.0, p["bytes"]) for p in pts], [100 * p["test_accuracy"] for p in pts], color=color, lw=1.2)
        elif len(exchanges.get(m, [])) > 1:  # a FOL run after each exchange
            pts = exchanges[m]
            ax.plot([max(1.0, p["bytes"]) for p in pts], [100 * p["test_accuracy"] for p in pts], color=color,
                    lw=1, ls="--")
    ax.set_xscale("log")
    ax.set_xlabel("bytes sent + received per node (log; 1 = none)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("Accuracy vs bytes (dots: nodes, stars: means, lines: rounds)")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    save_figure(fig, path)


def energy_section(energy: dict[str, Any]) -> list[str]:
    """Markdown lines: energy per node and the transfers that waited for the battery (first seed)."""
    m = energy["model"]
    lines = ["## Energy (first seed)", "",
             f"Battery {m['battery_wh']:g} Wh (start at {100 * m['initial_charge']:.0f} %), solar {m['solar_w']:g} W "
             f"in sunlight, idle {m['idle_w']:g} W, {m['j_per_flop']:g} J/FLOP, {m['j_per_byte']:g} J/byte sent. "
             "FOL's model transfers and pretraining are scheduled only when the battery can pay for them (the "
             "server-based baselines' uploads are not charged); each method's "
             f"training energy (last {'rows' if len(energy['nodes']) > PER_NODE_MAX else 'columns'}) is computed from its measured FLOPs after the run, not drawn from the "
             "battery (the battery at the end leaves it out).", ""]
    methods = sorted({k for n in energy["nodes"] for k in n.get("method_training_j", {})})
    if len(energy["nodes"]) > PER_NODE_MAX:
        return lines + _energy_distribution(energy, methods)
    lines.append("| node | in eclipse | battery end (Wh) | pretraining (J) | transfers | transfer energy (J) | "
                 + " | ".join(f"{k} training (J)" for k in methods) + " |")
    lines.append("|---" * (6 + len(methods)) + "|")
    for n in energy["nodes"]:
        train = [f"{n.get('method_training_j', {}).get(k, 0.0):.3g}" for k in methods]
        lines.append(f"| {n['node']} | {100 * n['eclipse_fraction']:.0f} % | {n['battery_end_wh']:.2f} | "
                     f"{n['pretraining_j']:.3g} | {n['transfers']} | {n['transfer_j']:.3g} | " + " | ".join(train) + " |")
    waits = energy["waits"]
    lines += ["", f"{len(waits)} transfer(s) waited for the battery (charging needs sunlight):", ""]
    if waits:
        lines += ["| round | from | to | could start (s) | sent at (s) | waited (s) | sunlit when it could start |",
                  "|---|---|---|---|---|---|---|"]
        for w in waits:
            sent = "never (round ended)" if w["start_s"] is None else f"{w['start_s']:.1f}"
            waited = "-" if w["start_s"] is None else f"{w['start_s'] - w['wanted_start_s']:.1f}"
            lit = {True: "yes", False: "no"}.get(w.get("sunlit_at_wanted"), "-")
            lines.append(f"| {w['round']} | {w['src']} | {w['dst']} | {w['wanted_start_s']:.1f} | {sent} | "
                         f"{waited} | {lit} |")
    return lines + [""]


def _energy_distribution(energy: dict[str, Any], methods: list[str]) -> list[str]:
    """:func:`energy_section`'s tables for a swarm of more than :data:`PER_NODE_MAX` nodes: the
    lowest, median and highest node and the swarm's total of each figure, and the waits in numbers."""
    nodes, waits = energy["nodes"], energy["waits"]
    figures = [("in eclipse (%)", lambda n: 100 * n["eclipse_fraction"], ".0f", False),
               ("battery end (Wh)", lambda n: n["battery_end_wh"], ".2f", True),
               ("pretraining (J)", lambda n: n["pretraining_j"], ".3g", True),
               ("transfers", lambda n: n["transfers"], ".0f", True),
               ("transfer energy (J)", lambda n: n["transfer_j"], ".3g", True)]
    figures += [(f"{k} training (J)", lambda n, k=k: n.get("method_training_j", {}).get(k, 0.0), ".3g", True)
                for k in methods]
    lines = [f"Over the {len(nodes)} nodes (every node's figures and every wait are in energy.json):", "",
             "| per node | lowest | median | highest | swarm total |", "|---|---|---|---|---|"]
    for name, get, fmt, summed in figures:
        v = np.array([get(n) for n in nodes], dtype=float)
        lines.append(f"| {name} | {np.min(v):{fmt}} | {np.median(v):{fmt}} | {np.max(v):{fmt}} | "
                     + (f"{v.sum():{fmt}} |" if summed else "- |"))
    sent = [w["start_s"] - w["wanted_start_s"] for w in waits if w["start_s"] is not None]
    lit = sum(1 for w in waits if w.get("sunlit_at_wanted") is True)
    lines += ["", f"{len(waits)} transfer(s) waited for the battery (charging needs sunlight)"
              + (f": {len(waits) - len(sent)} never sent (the round ended), "
                 + (f"the others waited {np.median(sent):.1f} s (median), {max(sent):.1f} s at most; " if sent else "")
                 + f"{lit} could have started in sunlight." if waits else ".")]
    return lines + [""]


def write_results_json(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """``results.json``: the JSON list of ``rows``, written piece by piece (a large run's rows are
    hundreds of MB as text). Up to :data:`PER_NODE_MAX` nodes it is indented (one space); beyond, one
    compact row per line (no indentation to store, and line tools see one row a line)."""
    with atomic_writer(path, text=True) as fh:
        if len(_nodes(rows)) <= PER_NODE_MAX:
            json.dump(rows, fh, indent=1, default=str)
            return
        fh.write("[")
        for i, row in enumerate(rows):
            fh.write(("\n" if i == 0 else ",\n") + json.dumps(row, separators=(",", ":"), default=str))
        fh.write("\n]\n")


def write_report(scn: "SwarmScenario", result: "SimulationResult", traj: "Trajectories | None") -> Path:
    """Write results.csv/json, report.md and the plots into ``result.out``; return report.md's path."""
    out, rows = result.out, result.results
    with atomic_writer(out / "results.csv", text=True) as fh:
        w = csv.DictWriter(fh, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    write_results_json(out / "results.json", rows)

    plots = {
        "accuracy_by_node.png": lambda p: _plot_accuracy(rows, p),
        "accuracy_vs_bytes.png": lambda p: plot_accuracy_vs_bytes(rows, p),
        "accuracy_vs_rounds.png": lambda p: plot_accuracy_vs_rounds(rows, p),
    }
    if traj is not None:  # an imported contact plan has no positions to draw
        w = result.plan.windows
        starts, ends = np.sort(w.t_start_s), np.sort(w.t_end_s)
        active = np.searchsorted(starts, traj.times_s, side="right") - np.searchsorted(ends, traj.times_s, side="left")
        busiest = float(traj.times_s[int(np.argmax(active))]) if len(w) else None
        plots["contacts.png"] = lambda p: plot_contacts(result.plan, traj, p, t_s=busiest,
                                                        title=f"{scn.name}: tracks and contacts at the busiest instant")
    for name, draw in plots.items():
        draw(out / name)

    s = result.plan.summary()
    n_nodes = len({r["node"] for r in rows})
    lines = [
        f"# Swarm simulation: {scn.name}",
        "",
        f"{n_nodes} learning nodes ({scn.contact.kind}), dataset `{scn.data.dataset}` ({scn.data.partition} partition), "
        f"seeds {scn.seeds}, FOL: Q = {scn.fol.max_neighbours}, K = {scn.fol.top_k}, E = {scn.fol.rounds}.",
        f"Contact plan: {s['windows']} windows over {s['horizon_s'] / 3600:.1f} h in {s['rounds']} round(s), "
        f"{s['windows_per_node_mean']:.1f} windows per plan node on average (ground stations included), mean duration {s['mean_duration_s']:.0f} s, "
        f"{len(result.transfers)} model transfers recorded over {len(scn.seeds)} seed(s) (transfers.json).",
        _wall_time(result),
        "",
        "## Summary",
        "",
        summary_table(rows, result.rounds_used),
        "",
        "Accuracy: mean over nodes, then mean ± std over seeds (std: the sample standard deviation, n - 1 in "
        "the denominator; one seed gives the mean alone). Multi-round methods used as many rounds as the "
        "contact plan allows (the *rounds* column); FOL's bytes are the models actually delivered in contact windows.",
        "",
        "## Accuracy against rounds",
        "",
        "Multi-round methods are evaluated on every node after every round of the same run (the contact plan "
        "decides who takes part); the other methods appear with their single value.",
        "",
        accuracy_at_rounds_table(rows),
        "",
        "Rounds (and bytes per node by then) each multi-round method needs to reach FOL's and FOL-A's accuracy:",
        "",
        rounds_to_match_table(rows),
        "",
        *(["## Transfer: what the distilled student keeps", "",
            "(student - local) / (ensemble - local) on test accuracy, from the swarm means of each seed (mean ± "
            "std over the seeds whose ensemble gained at least half a point on the swarm mean); "
            "per-node shares are in results.json (`extra.transfer`, null where the ensemble gained less than one "
            "test image).", "", transfer_table(rows), ""] if transfer_table(rows) else []),
        *(["## Test accuracy per node (%, mean ± std over seeds)", "", node_table(rows), ""] if n_nodes <= PER_NODE_MAX
          else [f"## Test accuracy over the {n_nodes} nodes (%)", "",
                "Each node's accuracy is its mean over seeds; *average*: mean over nodes, then mean ± std over seeds. "
                f"More than {PER_NODE_MAX} nodes: the per-node values are in results.csv (one row per seed, node "
                "and method) and results.json.", "", node_distribution_table(rows), ""]),
        "## Figures",
        "",
        *(["![contacts](contacts.png)", ""] if traj is not None else []),
        "![accuracy by node](accuracy_by_node.png)",
        "",
        "![accuracy vs bytes](accuracy_vs_bytes.png)",
        "",
        "![accuracy vs rounds](accuracy_vs_rounds.png)",
        "",
    ]
    if result.energy is not None:
        lines += energy_section(result.energy)
    path = out / "report.md"
    atomic_write_text(path, "\n".join(lines))
    return path
