"""Calibrate the synthetic geo-tagged datasets for the default model.

For one task (or both), draw a pool of synthetic images, give ``--nodes`` nodes
``--per-node`` images each with a Dirichlet label skew (``--psi``), split every
node 70/15/15 and train, with the pretraining settings of ``FOLConfig`` and the
default architecture (:data:`fol.models.DEFAULT_ARCH`):

* each node's own model on its train split (early stopping on its val split),
  evaluated on its test split ("local"), next to the rate of predicting the
  node's majority training class on that test split ("majority");
* one model on the union of all train splits (early stopping on the union of
  val splits), evaluated on the union of test splits ("pooled");
* the **far-region drop**: one model trained on images from the task's first
  region box (:data:`fol.data.TASK_REGIONS`, half of them events: balanced
  classes with ``--classes event``, the event forms sharing their half with
  ``--classes type``) and tested on
  held-out images of that box and of the box farthest from it; the drop is the
  accuracy lost on the far box.

Targets (24 nodes x 300 images, psi = 0.5): local >= majority + 5 points,
pooled >= 95 %, pooled - local >= 10 points, far-region drop >= 10 points. Run
from the repository root::

    OMP_NUM_THREADS=1 python benchmarks/calibrate_synthetic.py            # both tasks
    OMP_NUM_THREADS=1 python benchmarks/calibrate_synthetic.py --task hurricane
    OMP_NUM_THREADS=1 python benchmarks/calibrate_synthetic.py --task hurricane --seeds 3 --json hurricane.json
    OMP_NUM_THREADS=1 python benchmarks/calibrate_synthetic.py --task wildfire --by-form -v

With ``--by-form`` it also prints where the room between local and pooled
training is: the mean local and pooled accuracy of the nodes whose test split
is 90 % or more one class against the other nodes, and how many test images of
each event form (and of no event) the local models and the pooled model get
wrong (with ``-v`` per region box); ``--json`` keeps them as ``by_form``.

A seed draws everything anew: the pool and the partition (both with
``--seed`` itself), the splits (node k's 70/15/15 split with ``--seed + k``,
the region model's with ``--seed``), the region images (the first box's
with ``--seed + 101``, the far box's with ``--seed + 202``) and the models'
initialisation and training (``--seed``). With ``--seeds N`` the seeds
``--seed`` .. ``--seed + N - 1`` run one after the other, each printed as
above, then every figure and target check as mean ± std over the seeds with
each seed's value and the number of seeds that meet it (the targets are
judged seed by seed, as a single run judges them; the summary adds the
spread). ``--json`` writes every seed's figures, rewritten after each seed
so that a run cut short keeps the seeds it finished.

Measured on 2026-11-24 with the batch-norm fix (cnn-medium, seed 0, all 24
nodes, defaults lr 0.01, patience 10): wildfire local 91.6 % vs majority
82.2 %, pooled 97.3 %, far-region drop 22.9; hurricane local 90.6 % vs
82.3 %, pooled 97.9 %, drop 9.9. Not met: pooled - local on both (5.7, 7.3)
and the hurricane drop; docs/evaluation.md says why.

Re-measured on 2026-11-27 on an AVX-512 machine, seeds 0-2 (``--seeds 3``):
seed 0 gives wildfire 91.3 / 82.2 / 96.9 %, drop 15.1; hurricane 90.4 /
82.3 / 98.5 %, drop 10.7. Pooled - local is still not met at seed 0 (5.6,
8.1; hurricane meets it on seeds 1 and 2); the hurricane drop is met at
seed 0 there and missed on seed 1 (8.0). Over the three seeds the drop
moves by 4-7 points (std), the other figures by about a point.

With ``--classes type`` (the same images labelled by the event's form, 4 /
5 classes; measured later the same day): wildfire local 91.0 % vs majority
66.5 %, pooled 96.7 %, drop 15.2 (pooled - local 5.6: not met); hurricane
local 87.4 % vs 59.7 %, pooled 98.5 %, drop 22.3: all four targets met.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (ONE_CLASS_SHARE, fail, int_in, machine_line, per_core, positive_float, seed_range, set_threads,  # noqa: E402
                     unwritable_output, user_seed)

from fol.config import FOLConfig  # noqa: E402
from fol.data import DEFAULT_MIN_SAMPLES, TASK_REGIONS, TASK_TYPE_CLASSES, GeoDataset, dirichlet_partition, make_synthetic, split_node  # noqa: E402
from fol.errors import FOLError  # noqa: E402
from fol.fileio import write_json_atomic  # noqa: E402
from fol.models import DEFAULT_ARCH, ModelSpec, architectures, build_model  # noqa: E402
from fol.train import TrainConfig, evaluate, fit, logit_scores, predict_logits  # noqa: E402

TARGETS = {"local - majority": 5.0, "pooled": 95.0, "pooled - local": 10.0, "far-region drop": 10.0}


def train_model(arch: str, train: GeoDataset, val: GeoDataset, cfg: TrainConfig, seed: int) -> torch.nn.Module:
    c, h, _ = train.image_shape
    model = build_model(ModelSpec(arch, num_classes=train.num_classes, in_channels=c, input_size=h), seed=seed)
    fit(model, train.tensors(), cfg, val=val.tensors())
    return model


def train_eval(arch: str, train: GeoDataset, val: GeoDataset, tests: list[GeoDataset], cfg: TrainConfig,
               seed: int) -> list[float]:
    model = train_model(arch, train, val, cfg, seed)
    return [evaluate(model, *t.tensors()).accuracy for t in tests]


def accuracy_and_right(model: torch.nn.Module, ds: GeoDataset) -> tuple[float, np.ndarray]:
    """The model's accuracy on ``ds`` (as :func:`fol.train.evaluate` gives it) and whether it
    classifies each image right (bool array), from one pass over the images."""
    with torch.no_grad():
        logits = predict_logits(model, ds.images)
    return logit_scores(logits, ds.labels).accuracy, (logits.argmax(1) == ds.labels).numpy()


def room_by_form(task: str, nodes: list, local_right: list[np.ndarray], pooled_right: list[np.ndarray],
                 forms: np.ndarray, verbose: bool) -> dict:
    """Where the room between local and pooled training is: the nodes whose test split is nearly one
    class against the others, and each event form's errors (forms indexed by pool position,
    :data:`fol.data.TASK_TYPE_CLASSES` order), per region box with ``verbose``."""
    one = [float(nd.test.class_counts().max()) / len(nd.test) >= ONE_CLASS_SHARE for nd in nodes]
    groups = {}
    for name, keep in (("nearly one class", True), ("others", False)):
        idx = [k for k in range(len(nodes)) if one[k] == keep]
        groups[name] = {"nodes": len(idx), **{who: 100 * float(np.mean([r[k].mean() for k in idx])) if idx else None
                                               for who, r in (("local", local_right), ("pooled", pooled_right))}}
    pct = lambda v: "-" if v is None else f"{v:.1f} %"  # noqa: E731
    a, b = groups["nearly one class"], groups["others"]
    print(f"  where the room is    : the {a['nodes']} nodes whose test split is >= {100 * ONE_CLASS_SHARE:.0f} % one "
          f"class: local {pct(a['local'])}, pooled {pct(a['pooled'])}; the other {b['nodes']}: local "
          f"{pct(b['local'])}, pooled {pct(b['pooled'])}")
    form = np.concatenate([forms[[int(s) for s in nd.test.sources]] for nd in nodes])
    lr, pr = np.concatenate(local_right), np.concatenate(pooled_right)
    lat = np.concatenate([nd.test.lat for nd in nodes])
    lon = np.concatenate([nd.test.lon for nd in nodes])
    boxes = TASK_REGIONS[task]
    box = np.full(len(lat), -1)
    for i, b in enumerate(boxes):
        box[(box < 0) & (lat >= b.lat_min) & (lat <= b.lat_max) & (lon >= b.lon_min) & (lon <= b.lon_max)] = i
    names = TASK_TYPE_CLASSES[task]
    errors = {}
    print("  test images wrong, by the event's form: local / pooled of n")
    for f, name in enumerate(names):
        m = form == f
        errors[name] = {"n": int(m.sum()), "local": int((~lr[m]).sum()), "pooled": int((~pr[m]).sum()),
                        "by_region": {b.name: [int((~lr[m & (box == i)]).sum()), int((~pr[m & (box == i)]).sum()),
                                               int((m & (box == i)).sum())] for i, b in enumerate(boxes)}}
        e = errors[name]
        print(f"    {name:12s}: {e['local']:3d} / {e['pooled']:3d} of {e['n']}"
              + (" (" + ", ".join(f"{r}: {a} / {b} of {n}" for r, (a, b, n) in e["by_region"].items()) + ")"
                 if verbose else ""))
    return {"groups": groups, "errors": errors}


def _centre(box) -> tuple[float, float]:
    return (box.lat_min + box.lat_max) / 2, (box.lon_min + box.lon_max) / 2


def far_box(task: str):
    """(first box, the box whose centre is farthest from it on the sphere)."""
    boxes = TASK_REGIONS[task]
    la0, lo0 = map(math.radians, _centre(boxes[0]))

    def dist(b) -> float:
        la, lo = map(math.radians, _centre(b))
        return math.acos(min(1.0, math.sin(la0) * math.sin(la) + math.cos(la0) * math.cos(la) * math.cos(lo - lo0)))

    return boxes[0], max(boxes[1:], key=dist)


def region_drop(task: str, arch: str, n: int, cfg: TrainConfig, seed: int,
                classes: str = "event") -> tuple[float, float, str, str]:
    """Accuracy of a model trained on the first box, on that box and on the far box
    (``n`` images there, ``n // 4`` on the far box; half of each are events)."""
    near, far = far_box(task)
    box = lambda b: (b.lat_min, b.lat_max, b.lon_min, b.lon_max)  # noqa: E731
    a = make_synthetic(task, n, seed=seed + 101, region=box(near), positive_fraction=0.5, classes=classes)
    b = make_synthetic(task, n // 4, seed=seed + 202, region=box(far), positive_fraction=0.5, classes=classes)
    nd = split_node(a, seed=seed)
    acc_near, acc_far = train_eval(arch, nd.train, nd.val, [nd.test, b], cfg, seed)
    return acc_near, acc_far, near.name, far.name


def calibrate(task: str, args: argparse.Namespace, seed: int) -> dict[str, float]:
    """One task at one seed: print its figures and target checks, return them."""
    t0 = time.perf_counter()
    over = {k: v for k, v in (("pretrain_lr", args.lr), ("patience", args.patience)) if v is not None}
    cfg = FOLConfig(seed=seed, **over).pretrain_train()
    ds = make_synthetic(task, args.pool, seed=seed, classes=args.classes)
    forms = None
    if args.by_form:  # the pool positions travel with the images (as their sources) to look up each one's form
        forms = (ds.labels if args.classes == "type" else make_synthetic(task, args.pool, seed=seed, classes="type").labels).numpy()
        ds = dataclasses.replace(ds, sources=[str(i) for i in range(len(ds))])
    parts = dirichlet_partition(ds.labels.numpy(), args.nodes, args.psi, seed=seed,
                                samples_per_node=args.per_node)
    nodes = [split_node(ds.subset(p, name=f"node{k}"), seed=seed + k) for k, p in enumerate(parts)]
    local, majority, local_right = [], [], []
    for k, nd in enumerate(nodes[: args.local_nodes or None]):
        model = train_model(args.arch, nd.train, nd.val, cfg, seed=seed)
        acc, is_right = accuracy_and_right(model, nd.test)
        local.append(acc)
        if forms is not None:
            local_right.append(is_right)
        maj = int(np.argmax(nd.train.class_counts()))
        majority.append(float((nd.test.labels == maj).float().mean()))
        if args.verbose:
            print(f"  node {k:2d}: train mix={nd.train.class_counts().tolist()} test acc={acc:.3f} "
                  f"(majority {majority[-1]:.3f})", flush=True)
    pooled = [GeoDataset.concat([getattr(nd, s) for nd in nodes], name=f"pooled-{s}") for s in ("train", "val", "test")]
    pooled_model = train_model(args.arch, pooled[0], pooled[1], cfg, seed=seed)
    pooled_acc = evaluate(pooled_model, *pooled[2].tensors()).accuracy
    near_acc, far_acc, near_name, far_name = region_drop(task, args.arch, args.region_images, cfg, seed,
                                                         args.classes)
    loc, maj = 100 * float(np.mean(local)), 100 * float(np.mean(majority))
    out = {"local": loc, "local_std": 100 * float(np.std(local, ddof=1)) if len(local) > 1 else 0.0, "majority": maj, "pooled": 100 * pooled_acc,
           "near": 100 * near_acc, "far": 100 * far_acc, "seconds": time.perf_counter() - t0}
    checks = target_checks(out)
    out.update({"seed": seed, "dataset": ds.name, "near_region": near_name, "far_region": far_name,
                "local_per_node": [100 * a for a in local], "majority_per_node": [100 * m for m in majority]})
    print(f"\n{ds.name} ({ds.num_classes} classes): {args.nodes} nodes x {args.per_node} images, psi={args.psi}, seed={seed}, {args.arch}, "
          f"pretrain lr {cfg.lr}, <= {cfg.epochs} epochs, patience {cfg.patience}"
          + (f" (local over the first {len(local)} nodes)" if len(local) < len(nodes) else ""))
    print(f"  local test accuracy  : {loc:.1f} ± {out['local_std']:.1f} % (mean ± sample std over nodes)")
    print(f"  majority-class rate  : {maj:.1f} %")
    print(f"  pooled test accuracy : {out['pooled']:.1f} % ({len(pooled[0])} train images)")
    print(f"  far region           : trained on {near_name} ({args.region_images} images, half of them events): "
          f"{out['near']:.1f} % there, {out['far']:.1f} % on {far_name}")
    for name, value in checks.items():
        ok = value >= TARGETS[name]
        print(f"  {name:17s}: {value:5.1f} (target >= {TARGETS[name]:.0f}) {'met' if ok else 'NOT met'}")
    if forms is not None:
        shown_nodes = nodes[: len(local_right)]
        out["by_form"] = room_by_form(task, shown_nodes, local_right, [accuracy_and_right(pooled_model, nd.test)[1] for nd in shown_nodes],
                                      forms, args.verbose)
    print(f"  wall time {out['seconds']:.0f} s", flush=True)
    return out


def target_checks(fig: dict[str, float]) -> dict[str, float]:
    """The four calibration figures the targets are set on, from one run's figures."""
    return {"local - majority": fig["local"] - fig["majority"], "pooled": fig["pooled"],
            "pooled - local": fig["pooled"] - fig["local"], "far-region drop": fig["near"] - fig["far"]}


def summarize(runs: list[dict[str, float]]) -> list[str]:
    """Lines of the summary over several seeds of one task: every figure and
    every target check as mean ± std over the seeds, each seed's value, and for
    a check the number of seeds that meet its target.

    >>> runs = [{"seed": s, "local": l, "majority": 82.0, "pooled": 97.0, "near": 95.0, "far": f}
    ...         for s, l, f in ((0, 88.0, 86.0), (1, 86.0, 84.0))]
    >>> for line in summarize(runs): print(line)
      local            :  87.0 ± 1.4  (seeds 0, 1: 88.0, 86.0)
      majority         :  82.0 ± 0.0  (seeds 0, 1: 82.0, 82.0)
      near region      :  95.0 ± 0.0  (seeds 0, 1: 95.0, 95.0)
      far region       :  85.0 ± 1.4  (seeds 0, 1: 86.0, 84.0)
      local - majority :   5.0 ± 1.4  (seeds 0, 1: 6.0, 4.0; target >= 5: met on 1 of 2 seeds)
      pooled           :  97.0 ± 0.0  (seeds 0, 1: 97.0, 97.0; target >= 95: met on 2 of 2 seeds)
      pooled - local   :  10.0 ± 1.4  (seeds 0, 1: 9.0, 11.0; target >= 10: met on 1 of 2 seeds)
      far-region drop  :  10.0 ± 1.4  (seeds 0, 1: 9.0, 11.0; target >= 10: met on 1 of 2 seeds)
    """
    seeds = ", ".join(str(r["seed"]) for r in runs)

    def line(name: str, values: list[float], target: float | None = None) -> str:
        text = (f"  {name:17s}: {statistics.mean(values):5.1f} ± {statistics.stdev(values):.1f}  "
                f"(seeds {seeds}: {', '.join(f'{v:.1f}' for v in values)}")
        if target is not None:
            met = sum(v >= target for v in values)
            text += f"; target >= {target:.0f}: met on {met} of {len(values)} seeds"
        return text + ")"

    lines = [line(name, [r[k] for r in runs])
             for name, k in (("local", "local"), ("majority", "majority"), ("near region", "near"), ("far region", "far"))]
    checks = [target_checks(r) for r in runs]
    lines += [line(k, [c[k] for c in checks], TARGETS[k]) for k in TARGETS]
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", choices=["wildfire", "hurricane", "both"], default="both")
    ap.add_argument("--classes", choices=["event", "type"], default="event",
                    help="labels: the event or not (2 classes, default), or the form it takes (4 / 5 classes)")
    ap.add_argument("--arch", default=DEFAULT_ARCH, choices=architectures())
    ap.add_argument("--nodes", type=int_in(1), default=24)
    ap.add_argument("--local-nodes", type=int_in(0), default=0, help="train local models on the first N nodes only (0 = all)")
    ap.add_argument("--per-node", type=int_in(1), default=300)
    ap.add_argument("--pool", type=int, default=12000, help="synthetic images drawn before partitioning")
    # --region-images is only used after every local and the pooled model trained
    ap.add_argument("--region-images", type=int_in(DEFAULT_MIN_SAMPLES, why="the fewest a 70/15/15 split takes"),
                    default=2000, help="images of the first region box (far-region test)")
    ap.add_argument("--psi", type=positive_float("a Dirichlet concentration"), default=0.5, help="Dirichlet concentration")
    ap.add_argument("--seed", type=user_seed, default=0, help="the first seed")
    ap.add_argument("--seeds", type=int_in(1), default=1, help="how many seeds, from --seed on (default 1)")
    ap.add_argument("--json", type=Path, default=None,
                    help="also write every seed's figures to this file (rewritten after each seed)")
    ap.add_argument("--lr", type=positive_float("a learning rate"), help="pretraining lr (default: FOLConfig's pretrain_lr)")
    ap.add_argument("--patience", type=int_in(0), help="early-stopping patience (default: FOLConfig's)")
    ap.add_argument("--by-form", action="store_true",
                    help="also print where the room between local and pooled is: the nodes that are nearly one class "
                         "against the others, and each event form's errors (with -v per region box)")
    ap.add_argument("--threads", type=per_core, default=1)
    ap.add_argument("-v", "--verbose", action="store_true", help="print every node")
    args = ap.parse_args(argv)
    seeds = list(seed_range(ap, args.seed, args.seeds, "--seed / --seeds"))
    if unwritable_output(args.json):  # before the training, not after
        return 2
    set_threads(args.threads)
    print(machine_line(), flush=True)
    saved: dict[str, list[dict]] = {}
    for task in (["wildfire", "hurricane"] if args.task == "both" else [args.task]):
        runs = saved.setdefault(task, [])
        for seed in seeds:
            try:
                runs.append(calibrate(task, args, seed))
            except FOLError as exc:  # a setting the data or the training refuses (--psi, --pool, --lr, ...)
                return fail(str(exc))
            if args.json is not None:
                # the one non-JSON argument is the --json path itself: written as text; the
                # writer's own hook keeps turning any numpy number in the figures into a float
                write_json_atomic(args.json, {"args": {**vars(args), "json": str(args.json)}, "targets": TARGETS,
                                              "runs": saved})
        if len(runs) > 1:
            print(f"\n{runs[0]['dataset']}: mean ± std over seeds {seeds[0]}-{seeds[-1]} ({len(runs)} seeds)")
            print("\n".join(summarize(runs)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
