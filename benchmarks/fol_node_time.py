"""Wall time of one node's FOL personalization on 2 CPU cores.

Q = 5 received neighbour models (the default architecture), about 300
training images of 32x32 pixels on the node, the default FOLConfig (or
``--preset paper``, and ``--fol KEY=VALUE`` overrides on either, to time an
option before it becomes a default); prints the time of each stage (summed
over the five neighbours for the per-neighbour stages), then the local and the
deployed model's test and validation accuracy with the images behind them
(one node's test split, 64 images by default: an illustration, not a
measurement of accuracy). The header states the
seeds (0 for the data, the partition and the pretraining; FOLConfig's
``seed`` for the round) and torch's thread count, which follows
``OMP_NUM_THREADS`` (the README's runs set 2).

    python benchmarks/fol_node_time.py [--preset paper] [--fol distill_inputs=function-matching distill_epochs=60]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import fail, int_in, key_values, machine_line, pool_fits  # noqa: E402

from fol.checkpoint import ModelCard  # noqa: E402
from fol.config import PRESET_NAMES, FOLConfig  # noqa: E402
from fol.defaults import DEFAULT_ARCH  # noqa: E402
from fol.errors import FOLError  # noqa: E402
from fol.data import DEFAULT_MIN_SAMPLES, dirichlet_partition, make_synthetic  # noqa: E402
from fol.models import architectures  # noqa: E402
from fol.personalize import NodeState, Received, RoundReport, personalize  # noqa: E402
from fol.train import predict_logits  # noqa: E402
from fol.variants import ALL_VARIANTS, VARIANTS  # noqa: E402
from fol.nodes import build_nodes  # noqa: E402

DATA_SEED = 0  # of the pool, the partition and the pretraining (the FOL round takes FOLConfig's seed)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--q", type=int_in(1), default=5)
    least = math.ceil(0.7 * DEFAULT_MIN_SAMPLES)  # the node's images, train / 0.7, must take a 70/15/15 split
    ap.add_argument("--train-images", type=int_in(least, why="70 % of the fewest a 70/15/15 split takes"),
                    default=300, help="training images on the node (70 %% of its data)")
    ap.add_argument("--arch", default=DEFAULT_ARCH, choices=architectures())
    ap.add_argument("--variant", default="fol", choices=ALL_VARIANTS)
    ap.add_argument("--preset", default="default", choices=PRESET_NAMES)
    ap.add_argument("--fol", nargs="*", default=[], metavar="KEY=VALUE", help="FOLConfig overrides on the preset")
    args = ap.parse_args(argv)
    per_node = round(args.train_images / 0.7)
    n = args.q + 1
    pool_fits(ap, n * per_node * 2, 32, "--q + 1 nodes x --train-images / 0.7 x 2 synthetic images")
    try:
        cfg = FOLConfig.from_dict({"preset": args.preset, **key_values(args.fol, "--fol"), "max_neighbours": args.q})
    except FOLError as exc:
        return fail(str(exc))
    print(machine_line())

    pool = make_synthetic("hurricane", n * per_node * 2, seed=DATA_SEED)
    shards = dirichlet_partition(pool.labels.numpy(), n, 0.5, DATA_SEED, samples_per_node=per_node)
    nodes = build_nodes(pool, shards, [args.arch], cfg.pretrain_train(), seed=DATA_SEED)
    me = nodes[0]
    shape = list(me.data.train.images.shape[1:])
    received = [Received(nb.name, nb.pretrained, ModelCard(spec=nb.spec, class_names=nb.class_names,
                                                          input_shape=shape, producer=nb.name, round=0))
                for nb in nodes[1:]]
    state = NodeState.from_pretrained(me.name, me.pretrained, me.spec, me.class_names, me.data)
    t0 = time.perf_counter()
    report = personalize(state, received, 1, cfg, args.variant)
    total = time.perf_counter() - t0

    print(f"\none node, {len(me.data.train)} training images, Q = {args.q} x {args.arch}, variant {args.variant}, "
          f"preset {args.preset}" + (f", {' '.join(args.fol)}" if args.fol else "")
          + f"; seeds: data, partition and pretraining {DATA_SEED}, FOL round {cfg.seed}; "
          f"{torch.get_num_threads()} torch threads")
    print("| stage | seconds |\n|---|---|")
    for stage, secs in report.seconds.items():
        if stage != "round_total":
            print(f"| {stage} | {secs:.2f} |")
    print(f"| **total** | **{total:.2f}** |")
    print("\n" + accuracy_line(state, report))
    print(f"target total < 30 s: {'met' if total < 30 else 'NOT met'}")
    return 0


def deployed_what(report: RoundReport) -> str:
    """Which model the round deployed, in words."""
    if report.kept_local:
        return "the node's own model (no neighbour model was used)"
    if VARIANTS[report.variant][1]:
        return "the weighted ensemble"
    if report.distillation.get("reverted"):
        return "the node's own model (the distillation's revert rule kept it)"
    return "the distilled student"


def accuracy_line(state: NodeState, report: RoundReport) -> str:
    """The local and the deployed model's accuracy on the node's test and validation splits, with the
    images behind each figure: with the default 300 training images the node's test split is 64
    images (one image is 1.6 points) and there is one seed, so a gap of a few points is a few images
    (the protocol runs of ``paper_tables.py`` measure accuracy). The test images "lost" are those the
    local model gets right and the deployed one wrong, "gained" the reverse."""
    acc = report.accuracy
    parts = []
    for split in ("test", "val"):
        n = len(getattr(state.data, split))
        right = {who: round(acc[who][split] * n) for who in ("local", "deployed")}
        parts.append(f"{split} {100 * acc['local'][split]:.1f} % ({right['local']}/{n}) -> "
                     f"{100 * acc['deployed'][split]:.1f} % ({right['deployed']}/{n})")
    x, y = state.data.test.tensors()
    local_ok = predict_logits(state.local_model, x).argmax(1) == y
    deployed_ok = predict_logits(state.deployed, x).argmax(1) == y
    lost, gained = int((local_ok & ~deployed_ok).sum()), int((~local_ok & deployed_ok).sum())
    return (f"local -> deployed ({deployed_what(report)}): {parts[0]}, {lost} test images lost and {gained} "
            f"gained; {parts[1]} (the split that early-stopped the local model and ranked the ensemble's members). "
            f"One node, one seed, one test image = {100 / len(y):.1f} points: an illustration, not a "
            f"measurement of accuracy")


if __name__ == "__main__":
    sys.exit(main())
