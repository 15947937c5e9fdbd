"""Why did FOL's ensemble (not) gain? One FOL round of the protocol's swarm, node by node.

Builds the swarm of ``benchmarks/paper_tables.py`` (same pool, Dirichlet
partition, splits and pretraining for a given dataset, psi and seed), runs one
FOL round (FOL-A: alignment pruning on, the default ``FOLConfig`` unless
``--fol`` overrides it) and prints, per node, what its round report holds:

* images and the majority-class share of the node's data, and the share of
  its validation split's own most frequent class (the accuracy of the best
  constant prediction there, the "val majority rate");
* the own model's validation accuracy, and every received neighbour's as
  received and after alignment (fine-tune, pruning, post fine-tune);
* the weight the ensemble gives the own model, and the ensemble's and the
  student's test accuracy minus the local model's;
* a training-free alternative to the alignment, for comparison: every
  received model with only its class prior corrected (a bias vector added to
  its logits, fitted by cross-entropy on the node's D_train; its features and
  weights untouched), its D_val accuracy, and the test accuracy minus local of
  the equal-weight ensemble of the own model and the K - 1 prior-corrected
  neighbours that score best on D_val (ties by arrival order).

and a summary: how many received neighbours score no better than the constant
majority-class prediction on the node's validation split before and after
alignment (and after the prior correction), how many beat the own model after
alignment (and after the prior correction), and the mean weight of the own
model. Run from the repository root::

    OMP_NUM_THREADS=1 python benchmarks/fol_diagnose.py --data synthetic-hurricane --psi 0.5 --seed 0
    OMP_NUM_THREADS=1 python benchmarks/fol_diagnose.py --data synthetic-wildfire --json wildfire.json

The per-node rows go to ``--json`` as well. docs/evaluation.md (section 4)
quotes its output.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import fail, key_values, machine_line, positive_float  # noqa: E402

from fol.errors import ConfigError, FOLError  # noqa: E402
from fol.fileio import check_output_file, write_json_atomic  # noqa: E402
from fol.methods.fol_method import run_fol_pipeline  # noqa: E402
from fol.reproduce import ProtocolConfig, load_pool, partition_pool, pretrained_swarm  # noqa: E402
from fol.train import predict_logits  # noqa: E402


def _majority(labels) -> float:
    """The share of the most frequent class (any number of classes).

    >>> import torch
    >>> _majority(torch.tensor([0, 2, 2, 1, 2])), _majority(torch.tensor([1, 1, 0, 1]))
    (0.6, 0.75)
    """
    return float(torch.bincount(labels).max()) / len(labels) if len(labels) else 0.0


def prior_bias(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """The bias vector b minimizing the cross-entropy of ``logits + b`` on
    ``labels`` (L-BFGS from zero): a model's class prior moved to the data's.

    >>> logits = torch.tensor([[2.0, 0.0], [1.0, 0.0], [0.5, 0.0], [3.0, 0.0]])
    >>> b = prior_bias(logits, torch.tensor([1, 1, 1, 0]))
    >>> ((logits + b).argmax(1) == torch.tensor([1, 1, 1, 0])).tolist()
    [True, True, True, True]
    """
    bias = torch.zeros(logits.shape[1], requires_grad=True)
    opt = torch.optim.LBFGS([bias], max_iter=200, line_search_fn="strong_wolfe")

    def closure() -> torch.Tensor:
        opt.zero_grad()
        loss = F.cross_entropy(logits + bias, labels)
        loss.backward()
        return loss

    opt.step(closure)
    return bias.detach()


def _accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    return float((logits.argmax(1) == labels).float().mean()) if len(labels) else 0.0


def prior_corrected(ctx, k: int, senders: list[int], top_k: int) -> tuple[list[float], float]:
    """Node ``k``'s received models with their class prior corrected on its
    D_train: their D_val accuracies, and the test accuracy minus local of the
    equal-weight ensemble of the own model and the ``top_k - 1`` of them that
    score best on D_val. The test split only gives the reported figure."""
    data = ctx.nodes[k].data
    (x_tr, y_tr), (x_va, y_va), (x_te, y_te) = data.train.tensors(), data.val.tensors(), data.test.tensors()
    own = ctx.nodes[k].pretrained
    members = []
    for j in senders:
        model = ctx.nodes[j].pretrained
        bias = prior_bias(predict_logits(model, x_tr), y_tr)
        val_logits = predict_logits(model, x_va) + bias
        members.append((_accuracy(val_logits, y_va), predict_logits(model, x_te) + bias))
    ranked = sorted(members, key=lambda m: -m[0])[:max(top_k - 1, 0)]  # stable: ties keep arrival order
    own_test = predict_logits(own, x_te)
    probs = (F.softmax(own_test, 1) + sum(F.softmax(t, 1) for _, t in ranked)) / (1 + len(ranked))
    return [m[0] for m in members], _accuracy(probs, y_te) - _accuracy(own_test, y_te)


def diagnose(cfg: ProtocolConfig, dataset: str, psi: float, seed: int) -> list[dict]:
    """One row per node of one FOL-A round on the protocol's swarm."""
    pool = load_pool(dataset, cfg)
    shards = partition_pool(pool, cfg, psi)
    ctx = pretrained_swarm(pool, shards, cfg, seed)
    run = run_fol_pipeline(ctx, use_pruning=True)
    rows = []
    for k, node in enumerate(ctx.nodes):
        prior_val, prior_gain = prior_corrected(ctx, k, ctx.senders_to(0, k, ctx.fol.max_neighbours), ctx.fol.top_k)
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
            "neighbours_val_prior": prior_val,
            "own_weight": rep.weights[rep.selected.index(own["name"])] if own["name"] in rep.selected else 0.0,
            "ensemble_minus_local": acc["ensemble"]["test"] - acc["local"]["test"] if "ensemble" in acc else 0.0,
            "student_minus_local": acc["student"]["test"] - acc["local"]["test"] if "student" in acc else 0.0,
            "prior_ensemble_minus_local": prior_gain,
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
        "prior_at_most_majority": sum(p <= r["val_majority_rate"] + eps for r in rows for p in r["neighbours_val_prior"]),
        "prior_above_own": sum(p > r["own_val"] + eps for r in rows for p in r["neighbours_val_prior"]),
        "mean_ensemble_minus_local": statistics.mean(r["ensemble_minus_local"] for r in rows),
        "mean_prior_ensemble_minus_local": statistics.mean(r["prior_ensemble_minus_local"] for r in rows),
        "mean_own_weight": statistics.mean(r["own_weight"] for r in rows),
        "nodes_ensemble_differs": sum(abs(r["ensemble_minus_local"]) > eps for r in rows),
        "nodes": len(rows),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="synthetic-hurricane")
    ap.add_argument("--psi", type=positive_float("a Dirichlet concentration psi"), default=0.5)
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
        if args.json is not None:
            check_output_file(args.json, ConfigError, what="--json")  # before the round, not after
        print(machine_line())
        rows = diagnose(cfg, args.data, args.psi, args.seed)
    except FOLError as exc:
        return fail(str(exc))
    fmt = lambda v: "-" if v is None else f"{100 * v:.0f}"  # noqa: E731
    print(f"{args.data}, psi = {args.psi}, seed {args.seed}: one FOL-A round, accuracies in %")
    print("| node | images | majority share | val majority rate | own val | neighbours val, received "
          "| neighbours val, aligned | neighbours val, prior-corrected | own weight "
          "| ensemble - local (test, points) | student - local | prior-corrected ensemble - local |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['node']} | {r['images']} | {fmt(r['majority_share'])} | {fmt(r['val_majority_rate'])} "
              f"| {fmt(r['own_val'])} | {' '.join(map(fmt, r['neighbours_val_received']))} "
              f"| {' '.join(map(fmt, r['neighbours_val_aligned']))} | {' '.join(map(fmt, r['neighbours_val_prior']))} "
              f"| {r['own_weight']:.2f} | {100 * r['ensemble_minus_local']:+.1f} | {100 * r['student_minus_local']:+.1f} "
              f"| {100 * r['prior_ensemble_minus_local']:+.1f} |")
    s = summary(rows)
    print(f"received neighbours no better than the node's majority-class rate on val: "
          f"{s['received_at_most_majority']} of {s['neighbours']} as received, "
          f"{s['aligned_at_most_majority']} after alignment; better than the own model after alignment: "
          f"{s['aligned_above_own']}; mean weight of the own model {s['mean_own_weight']:.2f}; "
          f"the ensemble's test accuracy differs from local on {s['nodes_ensemble_differs']} of {s['nodes']} nodes "
          f"({time.perf_counter() - t0:.0f} s)")
    print(f"prior-corrected instead of aligned (no training): {s['prior_at_most_majority']} of {s['neighbours']} "
          f"no better than the majority-class rate, {s['prior_above_own']} better than the own model; mean test "
          f"accuracy minus local: FOL-A's ensemble {100 * s['mean_ensemble_minus_local']:+.2f} points, the own model "
          f"with the best {cfg.fol_config(args.seed).top_k - 1} prior-corrected neighbours, equal weights, "
          f"{100 * s['mean_prior_ensemble_minus_local']:+.2f}")
    if args.json is not None:
        write_json_atomic(args.json, {"config": cfg.to_dict(), "rows": rows, "summary": s})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
