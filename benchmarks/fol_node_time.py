"""Wall time of one node's FOL personalization on 2 CPU cores.

Q = 5 received neighbour models (the default architecture), about 300
training images of 32x32 pixels on the node, the default FOLConfig (or
``--preset paper``, and ``--fol KEY=VALUE`` overrides on either, to time an
option before it becomes a default); prints the time of each stage (summed
over the five neighbours for the per-neighbour stages). The header states the
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
from fol.personalize import NodeState, Received, personalize  # noqa: E402
from fol.variants import ALL_VARIANTS  # noqa: E402
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
    acc = report.accuracy
    print(f"\nlocal test {100 * acc['local']['test']:.1f} % -> deployed test {100 * acc['deployed']['test']:.1f} %; "
          f"target total < 30 s: {'met' if total < 30 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
