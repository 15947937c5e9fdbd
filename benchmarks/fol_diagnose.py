"""Why did FOL's ensemble (not) gain? One FOL round of the protocol's swarm, node by node.

Builds the swarm of ``benchmarks/paper_tables.py`` (same pool, Dirichlet
partition, splits and pretraining for a given dataset, psi and seed), runs one
FOL round (FOL-A: alignment pruning on, the default ``FOLConfig`` unless
``--fol`` overrides it) and prints, per node, what its round report holds:

* images and the majority-class share of the node's data, and the rate of
  predicting the node's majority class on its validation split;
* the own model's validation accuracy, and every received neighbour's as
  received and after alignment (fine-tune, pruning, post fine-tune);
* the weight the ensemble gives the own model, and the ensemble's and the
  student's test accuracy minus the local model's.

and a summary: how many received neighbours score no better than the constant
majority-class prediction on the node's validation split before and after
alignment, how many beat the own model after alignment, and the mean weight
of the own model. Run from the repository root::

    OMP_NUM_THREADS=1 python benchmarks/fol_diagnose.py --data synthetic-hurricane --psi 0.5 --seed 0
    OMP_NUM_THREADS=1 python benchmarks/fol_diagnose.py --data synthetic-wildfire --json wildfire.json

The per-node rows go to ``--json`` as well. docs/evaluation.md (section 4)
quotes its output.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import key_values, machine_line  # noqa: E402

from fol.errors import FOLError  # noqa: E402
from fol.fileio import write_json_atomic  # noqa: E402
from fol.methods.fol_method import run_fol_pipeline  # noqa: E402
from fol.reproduce import ProtocolConfig, load_pool, partition_pool, pretrained_swarm  # noqa: E402


def _majority(labels) -> float:
    """The share of the most frequent class (any number of classes).

    >>> import torch
    >>> _majority(torch.tensor([0, 2, 2, 1, 2])), _majority(torch.tensor([1, 1, 0, 1]))
    (0.6, 0.75)
    """
    return float(torch.bincount(labels).max()) / len(labels) if len(labels) else 0.0


def diagnose(cfg: ProtocolConfig, dataset: str, psi: float, seed: int) -> list[dict]:
    """One row per node of one FOL-A round on the protocol's swarm."""
    pool = load_pool(dataset, cfg)
    shards = partition_pool(pool, cfg, psi)
    ctx = pretrained_swarm(pool, shards, cfg, seed)
    run = run_fol_pipeline(ctx, use_pruning=True)
    rows = []
    for k, node in enumerate(ctx.nodes):
        rep = run.reports[k][0]
        own = next(c for c in rep.candidates if c["own"])
        others = [c for c in rep.candidates if not c["own"]]
        acc = rep.accuracy
        rows.append({
            "node": node.name, "images": int(len(shards[k])),
            "majority_share": round(_majority(pool.labels[shards[k]]), 4),
            "val_majority_rate": round(_majority(node.data.val.labels), 4),
            "own_val": own["score_after"],
            "neighbours_val_received": [c["score_before"] for c in others],
            "neighbours_val_aligned": [c["score_after"] for c in others],
            "own_weight": rep.weights[rep.selected.index(own["name"])] if own["name"] in rep.selected else 0.0,
            "ensemble_minus_local": acc["ensemble"]["test"] - acc["local"]["test"] if "ensemble" in acc else 0.0,
            "student_minus_local": acc["student"]["test"] - acc["local"]["test"] if "student" in acc else 0.0,
        })
    return rows


def summary(rows: list[dict]) -> dict[str, float]:
    eps = 1e-9
    pairs = [(r, b, a) for r in rows for b, a in zip(r["neighbours_val_received"], r["neighbours_val_aligned"])]
    return {
        "neighbours": len(pairs),
        "received_at_most_majority": sum(b is not None and b <= r["val_majority_rate"] + eps for r, b, _ in pairs),
        "aligned_at_most_majority": sum(a <= r["val_majority_rate"] + eps for r, _, a in pairs),
        "aligned_above_own": sum(a > r["own_val"] + eps for r, _, a in pairs),
        "mean_own_weight": statistics.mean(r["own_weight"] for r in rows),
        "nodes_ensemble_differs": sum(abs(r["ensemble_minus_local"]) > eps for r in rows),
        "nodes": len(rows),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="synthetic-hurricane")
    ap.add_argument("--psi", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--nodes", type=int, default=24)
    ap.add_argument("--pool", type=int, default=7200)
    ap.add_argument("--image-size", type=int, default=32)
    ap.add_argument("--fol", nargs="*", default=[], metavar="KEY=VALUE", help="FOLConfig overrides")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        cfg = ProtocolConfig(datasets=(args.data,), psis=(args.psi,), seeds=(args.seed,), nodes=args.nodes,
                             pool=args.pool, image_size=args.image_size, rounds=1, methods=("fol",),
                             fol=key_values(args.fol, "--fol"))
        print(machine_line())
        rows = diagnose(cfg, args.data, args.psi, args.seed)
    except FOLError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    fmt = lambda v: "-" if v is None else f"{100 * v:.0f}"  # noqa: E731
    print(f"{args.data}, psi = {args.psi}, seed {args.seed}: one FOL-A round, accuracies in %")
    print("| node | images | majority share | val majority rate | own val | neighbours val, received "
          "| neighbours val, aligned | own weight | ensemble - local (test, points) | student - local |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['node']} | {r['images']} | {fmt(r['majority_share'])} | {fmt(r['val_majority_rate'])} "
              f"| {fmt(r['own_val'])} | {' '.join(map(fmt, r['neighbours_val_received']))} "
              f"| {' '.join(map(fmt, r['neighbours_val_aligned']))} | {r['own_weight']:.2f} "
              f"| {100 * r['ensemble_minus_local']:+.1f} | {100 * r['student_minus_local']:+.1f} |")
    s = summary(rows)
    print(f"received neighbours no better than the node's majority-class rate on val: "
          f"{s['received_at_most_majority']} of {s['neighbours']} as received, "
          f"{s['aligned_at_most_majority']} after alignment; better than the own model after alignment: "
          f"{s['aligned_above_own']}; mean weight of the own model {s['mean_own_weight']:.2f}; "
          f"the ensemble's test accuracy differs from local on {s['nodes_ensemble_differs']} of {s['nodes']} nodes "
          f"({time.perf_counter() - t0:.0f} s)")
    if args.json is not None:
        write_json_atomic(args.json, {"config": cfg.to_dict(), "rows": rows, "summary": s})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
