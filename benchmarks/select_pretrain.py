"""Choose the pretraining learning rate and early-stopping patience on validation data only.

The paper reports SGD with momentum 0.9, weight decay 1e-3 and batch 32 (a
reproducibility report quotes lr 1e-3); this project used lr 0.05. For every
candidate lr this script pretrains each node's model exactly as
:func:`fol.nodes.build_nodes` does (``FOLConfig.pretrain_train()`` with only
``pretrain_lr`` changed) on synthetic nodes (``--nodes`` x ``--per-node``
images, Dirichlet ``--psi``), but splits each node's D_val in two halves:
early stopping watches the first half, the score is the accuracy on the
second half, so the score is not the quantity early stopping maximized.
Test splits are never evaluated. The candidate with the best mean score
(over tasks, nodes and seeds) wins; among the candidates within one standard
error of it, the one that runs the fewest epochs is picked (cheaper).

    OMP_NUM_THREADS=1 python benchmarks/select_pretrain.py --nodes 4

The run behind today's defaults (lr 0.01, patience 10; its table and the
earlier 4-node run are in docs/evaluation.md, section 3)::

    OMP_NUM_THREADS=1 python benchmarks/select_pretrain.py --lrs 0.001 0.003 0.01 --patiences 10 --nodes 8 --seeds 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import int_in, machine_line, per_core, pool_fits, positive_float, set_threads  # noqa: E402

from fol.config import FOLConfig  # noqa: E402
from fol.data import DEFAULT_MIN_SAMPLES, dirichlet_partition, make_synthetic, split_node  # noqa: E402
from fol.data.synthetic import TASK_CLASSES  # noqa: E402
from fol.defaults import DEFAULT_ARCH  # noqa: E402
from fol.models import ModelSpec, architectures, build_model  # noqa: E402
from fol.seeds import node_seed  # noqa: E402
from fol.train import evaluate, fit  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lrs", nargs="+", type=positive_float("a learning rate"), default=[1e-3, 1e-2, 5e-2])
    ap.add_argument("--patiences", nargs="+", type=int_in(0), default=[5, 10],
                    help="early-stopping patience candidates (epochs without a D_val improvement)")
    # every name and value is checked here: a task is only drawn when its turn comes, after every task before it trained
    ap.add_argument("--tasks", nargs="+", default=["wildfire", "hurricane"], choices=sorted(TASK_CLASSES))
    ap.add_argument("--nodes", type=int_in(1), default=6)
    ap.add_argument("--per-node", type=int_in(DEFAULT_MIN_SAMPLES, why="the fewest a 70/15/15 split takes"),
                    default=300)
    ap.add_argument("--psi", type=positive_float("a Dirichlet concentration"), default=0.5)
    ap.add_argument("--seeds", type=int_in(1), default=1)
    ap.add_argument("--arch", default=DEFAULT_ARCH, choices=architectures())
    ap.add_argument("--threads", type=per_core, default=1)
    args = ap.parse_args(argv)
    pool_fits(ap, args.nodes * args.per_node * 2, 32, "--nodes x --per-node x 2 synthetic images")
    set_threads(args.threads)
    print(machine_line(), flush=True)
    cands = [(lr, p) for p in args.patiences for lr in args.lrs]
    scores: dict[tuple[float, int], list[float]] = {c: [] for c in cands}
    epochs: dict[tuple[float, int], list[int]] = {c: [] for c in cands}
    t0 = time.perf_counter()
    for task in args.tasks:
        for seed in range(args.seeds):
            pool = make_synthetic(task, args.nodes * args.per_node * 2, seed=100 + seed)  # not the benchmarks' pools
            shards = dirichlet_partition(pool.labels.numpy(), args.nodes, args.psi, seed=100 + seed,
                                         samples_per_node=args.per_node)
            for k, shard in enumerate(shards):
                nd = split_node(pool.subset(shard), seed=node_seed(seed, k))
                xv, yv = nd.val.tensors()
                half = len(yv) // 2
                stop, score = (xv[:half], yv[:half]), (xv[half:], yv[half:])
                for lr, patience in cands:
                    cfg = FOLConfig(pretrain_lr=lr, patience=patience, seed=node_seed(seed, k)).pretrain_train()
                    c, h, _ = nd.train.image_shape
                    model = build_model(ModelSpec(args.arch, nd.train.num_classes, c, h), seed=seed)
                    hist = fit(model, nd.train.tensors(), cfg, val=stop)
                    scores[(lr, patience)].append(evaluate(model, *score).accuracy)
                    epochs[(lr, patience)].append(len(hist.train_loss))
            print(f"after {task} seed {seed} (running means): " + ", ".join(f"lr {c[0]:g} patience {c[1]}: "
                                                       f"{100 * statistics.mean(scores[c]):.1f}" for c in cands)
                  + f" ({time.perf_counter() - t0:.0f} s)", flush=True)
    cfg0 = FOLConfig()
    print(f"\n{args.arch}, {args.nodes} nodes x {args.per_node} images per task and seed, psi {args.psi}, "
          f"SGD momentum {cfg0.momentum}, wd {cfg0.weight_decay}, batch {cfg0.batch_size}, "
          f"<= {cfg0.pretrain_epochs} epochs; early stopping on half of D_val, score on the other half")
    runs = f"{len(args.tasks) * args.seeds * args.nodes} node runs: {len(args.tasks)} tasks x {args.seeds} seeds x " \
        f"{args.nodes} nodes"  # every run one sample of the mean and the standard error
    print(f"| lr | patience | held-out D_val accuracy % (mean ± s.e. over {runs}) | epochs run (mean) |\n"
          "|---|---|---|---|")
    stats = {}
    for c in cands:
        m = 100 * statistics.mean(scores[c])
        se = 100 * statistics.stdev(scores[c]) / len(scores[c]) ** 0.5 if len(scores[c]) > 1 else 0.0
        stats[c] = (m, se)
        print(f"| {c[0]:g} | {c[1]} | {m:.1f} ± {se:.1f} | {statistics.mean(epochs[c]):.1f} |")
    best = max(cands, key=lambda c: stats[c][0])
    # Within one standard error of the best, prefer the cheaper setting: fewer epochs run.
    pick = min((c for c in cands if stats[c][0] >= stats[best][0] - stats[best][1]),
               key=lambda c: statistics.mean(epochs[c]))
    print(f"\nbest mean: lr {best[0]:g}, patience {best[1]}; picked (fewest epochs within one s.e. of the best): "
          f"lr {pick[0]:g}, patience {pick[1]}; current defaults lr {cfg0.pretrain_lr:g}, patience {cfg0.patience}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
