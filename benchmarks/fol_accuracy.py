"""FOL's accuracy against local training on synthetic hurricane imagery.

12 nodes, Dirichlet label skew psi = 0.5, every node receiving Q = 5 neighbour
models (fully connected swarm, senders drawn per node), K = 3, E = 1, 3 seeds.
Prints mean ± std (over seeds of the per-seed mean over nodes) of the test
accuracy of local, fol, fol-a, fol-n and fol-an.

    python benchmarks/fol_accuracy.py            # the defaults above, 300 images per node
    python benchmarks/fol_accuracy.py --seeds 1 --nodes 6   # quick look
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import int_in, machine_line, mean_std, pool_fits, positive_float  # noqa: E402

from fol.config import FOLConfig  # noqa: E402
from fol.defaults import DEFAULT_ARCH  # noqa: E402
from fol.data import DEFAULT_MIN_SAMPLES, dirichlet_partition, make_synthetic  # noqa: E402
from fol.methods import SwarmContext, get_method  # noqa: E402
from fol.models import architectures  # noqa: E402
from fol.nodes import build_nodes  # noqa: E402

METHODS = ("local", "fol", "fol-a", "fol-n", "fol-an")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", default="hurricane", choices=["hurricane", "wildfire"])
    ap.add_argument("--nodes", type=int_in(2), default=12)
    ap.add_argument("--per-node", type=int_in(DEFAULT_MIN_SAMPLES, why="the fewest a 70/15/15 split takes"),
                    default=300)
    ap.add_argument("--psi", type=positive_float("a Dirichlet concentration"), default=0.5)
    ap.add_argument("--seeds", type=int_in(1), default=3)
    ap.add_argument("--q", type=int_in(1), default=5)
    ap.add_argument("--k", type=int_in(1), default=3)
    ap.add_argument("--arch", default=DEFAULT_ARCH, choices=architectures())
    args = ap.parse_args(argv)
    pool_fits(ap, args.nodes * args.per_node * 2, 32, "--nodes x --per-node x 2 synthetic images")

    print(machine_line())
    per_seed: dict[str, list[float]] = {m: [] for m in METHODS}
    t_start = time.perf_counter()
    for seed in range(args.seeds):
        fol_cfg = FOLConfig(max_neighbours=args.q, top_k=args.k, rounds=1, seed=seed)
        pool = make_synthetic(args.task, args.nodes * args.per_node * 2, seed=seed)
        shards = dirichlet_partition(pool.labels.numpy(), args.nodes, args.psi, seed, samples_per_node=args.per_node)
        nodes = build_nodes(pool, shards, [args.arch], fol_cfg.pretrain_train(), seed)
        ctx = SwarmContext(nodes=nodes, train=fol_cfg.pretrain_train(), fol=fol_cfg, seed=seed)
        for m in METHODS:
            results = get_method(m).run(ctx)
            per_seed[m].append(statistics.mean(r.test_accuracy for r in results))
        print(f"seed {seed}: " + ", ".join(f"{m} {100 * per_seed[m][-1]:.2f}" for m in METHODS)
              + f"  ({time.perf_counter() - t_start:.0f} s)", flush=True)

    print(f"\nsynthetic {args.task}, {args.nodes} nodes x {args.per_node} images, psi = {args.psi}, "
          f"Q = {args.q}, K = {args.k}, E = 1, {args.arch}, {args.seeds} seeds")
    print("| method | test accuracy (%) |\n|---|---|")
    for m in METHODS:
        print(f"| {m} | {mean_std(per_seed[m])} |")
    gain = statistics.mean(per_seed["fol"]) - statistics.mean(per_seed["local"])
    print(f"\nfol - local: {100 * gain:+.2f} points (target >= +3); "
          f"fol-a - fol: {100 * (statistics.mean(per_seed['fol-a']) - statistics.mean(per_seed['fol'])):+.2f} points "
          f"(target >= 0); wall time {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
