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

from contact_sim.plotting import plot_contacts

if TYPE_CHECKING:  # pragma: no cover
    from fol.simulation.result import SimulationResult
    from fol.simulation.scenario import SwarmScenario
    from contact_sim.trajectory import Trajectories

__all__ = ["write_report", "summary_table", "transfer_table", "CSV_FIELDS"]

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
        lines.append(f"| {m} | {_pm(per_seed)} | {_human_bytes(bytes_node)} | {flops:.2f} | {rounds} | {kept:g} |")
    return "\n".join(lines)


def transfer_table(rows: Sequence[dict[str, Any]]) -> str:
    """Markdown: for each FOL pipeline (``fol`` and ``fol-n`` rows), the share
    of the ensemble's test-accuracy gain over local that the distilled student
    keeps, computed on the swarm means of each seed (mean ± std over seeds),
    and how many node shares were defined (ensemble gain of at least one test
    image). Empty when no FOL row is present."""
    from fol.personalize import swarm_transfer

    lines = ["| pipeline | student's share of the ensemble's gain | nodes with a defined share |", "|---|---|---|"]
    found = False
    for m, teacher in (("fol", "fol-a"), ("fol-n", "fol-an")):
        mr = [r for r in rows if r["method"] == m and "accuracy" in r.get("extra", {})]
        if not mr:
            continue
        found = True
        shares, defined, total = [], 0, 0
        for group in _by(mr, "seed").values():
            acc = [r["extra"]["accuracy"] for r in group]
            t = swarm_transfer([a["local"] for a in acc], [a["student"] for a in acc], [a["ensemble"] for a in acc])
            if t["of_means"] is not None:
                shares.append(t["of_means"])
            defined += sum(1 for r in group if r["extra"].get("transfer") is not None)
            total += len(group)
        lines.append(f"| {m} (student) / {teacher} (ensemble) | "
                     f"{_pm(shares, digits=0) + ' %' if shares else 'undefined (no mean gain)'} | {defined} / {total} |")
    return "\n".join(lines) if found else ""


def _human_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"  # pragma: no cover


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
    fig.savefig(path)
    plt.close(fig)


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
    fig.savefig(path)
    plt.close(fig)


def write_report(scn: "SwarmScenario", result: "SimulationResult", traj: "Trajectories") -> Path:
    """Write results.csv/json, report.md and the plots into ``result.out``; return report.md's path."""
    out, rows = result.out, result.results
    with open(out / "results.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=CSV_FIELDS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    (out / "results.json").write_text(json.dumps(rows, indent=1, default=str))

    w = result.plan.windows
    starts, ends = np.sort(w.t_start_s), np.sort(w.t_end_s)
    active = np.searchsorted(starts, traj.times_s, side="right") - np.searchsorted(ends, traj.times_s, side="left")
    busiest = float(traj.times_s[int(np.argmax(active))]) if len(w) else None
    plots = {
        "contacts.png": lambda p: plot_contacts(result.plan, traj, p, t_s=busiest,
                                                title=f"{scn.name}: tracks and contacts at the busiest instant"),
        "accuracy_by_node.png": lambda p: _plot_accuracy(rows, p),
        "accuracy_vs_bytes.png": lambda p: _plot_accuracy_vs_bytes(rows, p),
    }
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
        f"{len(result.plan.transfers)} model transfers recorded (last seed).",
        f"Wall time {result.seconds:.0f} s.",
        "",
        "## Summary",
        "",
        summary_table(rows, result.rounds_used),
        "",
        "Accuracy: mean over nodes, then mean ± std over seeds. Multi-round methods used as many rounds as the "
        "contact plan allows (the *rounds* column); FOL's bytes are the models actually delivered in contact windows.",
        "",
        *(["## Transfer: what the distilled student keeps", "",
            "(student - local) / (ensemble - local) on test accuracy, from the swarm means of each seed; "
            "per-node shares are in results.json (`extra.transfer`, null where the ensemble gained less than one "
            "test image).", "", transfer_table(rows), ""] if transfer_table(rows) else []),
        "## Test accuracy per node (%, mean ± std over seeds)",
        "",
        node_table(rows),
        "",
        "## Figures",
        "",
        "![contacts](contacts.png)",
        "",
        "![accuracy by node](accuracy_by_node.png)",
        "",
        "![accuracy vs bytes](accuracy_vs_bytes.png)",
        "",
    ]
    path = out / "report.md"
    path.write_text("\n".join(lines))
    return path
