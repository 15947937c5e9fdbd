"""The simulation's output folder: ``results.csv`` / ``results.json``, a
paper-style ``report.md`` and PNG plots (ground tracks with the contact graph,
per-node accuracy by method, accuracy versus bytes communicated)."""

from __future__ import annotations

import csv
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from contact_sim.plotting import plot_contacts, save_figure
from fol.fileio import atomic_write_text, atomic_writer
from swarmbase.units import format_bytes

if TYPE_CHECKING:  # pragma: no cover
    from fol.simulation.result import SimulationResult
    from fol.simulation.scenario import SwarmScenario
    from contact_sim.trajectory import Trajectories

__all__ = ["write_report", "summary_table", "CSV_FIELDS"]

CSV_FIELDS = ["seed", "node", "method", "test_accuracy", "val_accuracy", "bytes_up", "bytes_down", "train_flops",
              "rounds", "received_models", "kept_local", "seconds"]


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


def summary_table(rows: Sequence[dict[str, Any]], rounds_used: dict[str, int] | None = None) -> str:
    """Markdown: one line per method with the mean over nodes (mean ± std over seeds)."""
    lines = ["| method | test accuracy (%) | bytes sent + received / node | training GFLOPs / node | rounds | nodes that kept the local model |",
             "|---|---|---|---|---|---|"]
    for m in _method_order(rows):
        mr = [r for r in rows if r["method"] == m]
        per_seed = [statistics.mean(r["test_accuracy"] for r in g) for g in _by(mr, "seed").values()]
        bytes_node = statistics.mean(r["bytes_up"] + r["bytes_down"] for r in mr)
        flops = statistics.mean(r["train_flops"] for r in mr) / 1e9
        kept = sum(1 for r in mr if r["kept_local"]) / len({r["seed"] for r in mr})
        rounds = (rounds_used or {}).get(m, max(r["rounds"] for r in mr))
        lines.append(f"| {m} | {_pm(per_seed)} | {format_bytes(bytes_node)} | {flops:.2f} | {rounds} | {kept:g} |")
    return "\n".join(lines)


def node_table(rows: Sequence[dict[str, Any]]) -> str:
    """Markdown, paper style: methods x nodes, mean ± std over seeds, plus the per-method average."""
    nodes: list[str] = []
    for r in rows:
        if r["node"] not in nodes:
            nodes.append(r["node"])
    cells = _by(rows, "method", "node")
    lines = ["| method | " + " | ".join(nodes) + " | average |", "|---" * (len(nodes) + 2) + "|"]
    for m in _method_order(rows):
        vals = [_pm([r["test_accuracy"] for r in cells[(m, n)]], digits=1) for n in nodes]
        per_seed = [statistics.mean(r["test_accuracy"] for r in g) for g in _by([r for r in rows if r["method"] == m], "seed").values()]
        lines.append(f"| {m} | " + " | ".join(vals) + f" | {_pm(per_seed, digits=1)} |")
    return "\n".join(lines)


def _plot_accuracy(rows: Sequence[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = _method_order(rows)
    nodes: list[str] = []
    for r in rows:
        if r["node"] not in nodes:
            nodes.append(r["node"])
    cells = _by(rows, "method", "node")
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


def _plot_accuracy_vs_bytes(rows: Sequence[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.5), dpi=110)
    for m in _method_order(rows):
        mr = [r for r in rows if r["method"] == m]
        xs = [max(1.0, r["bytes_up"] + r["bytes_down"]) for r in mr]
        ys = [100 * r["test_accuracy"] for r in mr]
        ax.scatter(xs, ys, s=10, alpha=0.35)
        ax.scatter([statistics.mean(xs)], [statistics.mean(ys)], s=90, marker="*", edgecolor="k", label=m,
                   color=ax.collections[-1].get_facecolor()[0])
    ax.set_xscale("log")
    ax.set_xlabel("bytes sent + received per node (log; 1 = none)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title("Accuracy versus communication (dots: nodes, stars: means)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)


def energy_section(energy: dict[str, Any]) -> list[str]:
    """Markdown lines: energy per node and the transfers that waited for the battery (first seed)."""
    m = energy["model"]
    lines = ["## Energy (first seed)", "",
             f"Battery {m['battery_wh']:g} Wh (start at {100 * m['initial_charge']:.0f} %), solar {m['solar_w']:g} W "
             f"in sunlight, idle {m['idle_w']:g} W, {m['j_per_flop']:g} J/FLOP, {m['j_per_byte']:g} J/byte sent. "
             "Transfers and pretraining are scheduled only when the battery can pay for them; the FOL stages' "
             "training energy (last columns) is booked from the methods' measured FLOPs, after the fact.", ""]
    methods = sorted({k for n in energy["nodes"] for k in n.get("method_training_j", {})})
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
        lines += ["| round | from | to | window opened (s) | sent at (s) | waited (s) | sunlit when the window opened |",
                  "|---|---|---|---|---|---|---|"]
        for w in waits:
            sent = "never (round ended)" if w["start_s"] is None else f"{w['start_s']:.1f}"
            waited = "-" if w["start_s"] is None else f"{w['start_s'] - w['wanted_start_s']:.1f}"
            lit = {True: "yes", False: "no"}.get(w.get("sunlit_at_wanted"), "-")
            lines.append(f"| {w['round']} | {w['src']} | {w['dst']} | {w['wanted_start_s']:.1f} | {sent} | "
                         f"{waited} | {lit} |")
    return lines + [""]


def write_report(scn: "SwarmScenario", result: "SimulationResult", traj: "Trajectories | None") -> Path:
    """Write results.csv/json, report.md and the plots into ``result.out``; return report.md's path."""
    out, rows = result.out, result.results
    with atomic_writer(out / "results.csv", text=True) as fh:
        w = csv.DictWriter(fh, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    atomic_write_text(out / "results.json", json.dumps(rows, indent=1, default=str))

    plots = {
        "accuracy_by_node.png": lambda p: _plot_accuracy(rows, p),
        "accuracy_vs_bytes.png": lambda p: _plot_accuracy_vs_bytes(rows, p),
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
        f"{s['windows_per_node_mean']:.1f} windows per node on average, mean duration {s['mean_duration_s']:.0f} s, "
        f"{len(result.transfers)} model transfers recorded over {len(scn.seeds)} seed(s) (transfers.json).",
        f"Wall time {result.seconds:.0f} s.",
        "",
        "## Summary",
        "",
        summary_table(rows, result.rounds_used),
        "",
        "Accuracy: mean over nodes, then mean ± std over seeds. Multi-round methods used as many rounds as the "
        "contact plan allows (the *rounds* column); FOL's bytes are the models actually delivered in contact windows.",
        "",
        "## Test accuracy per node (%, mean ± std over seeds)",
        "",
        node_table(rows),
        "",
        "## Figures",
        "",
        *(["![contacts](contacts.png)", ""] if traj is not None else []),
        "![accuracy by node](accuracy_by_node.png)",
        "",
        "![accuracy vs bytes](accuracy_vs_bytes.png)",
        "",
    ]
    if result.energy is not None:
        lines += energy_section(result.energy)
    path = out / "report.md"
    atomic_write_text(path, "\n".join(lines))
    return path
