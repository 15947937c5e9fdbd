"""The model zoo measured: can each architecture fit its data, and what does it cost?

For every architecture: parameters, multiply-accumulates of one forward pass at
32 px (:func:`fol.accounting.forward_macs`), seconds per training epoch on 300
images, and training / test accuracy when trained on a *pooled* dataset (all
data in one place, 70 / 15 / 15 split, fixed epochs, no early stopping: the
question is whether the model can fit, not how well it generalizes), with the
optimizer settings of the nodes' pretraining (``FOLConfig``: SGD, lr 0.01,
momentum 0.9, weight decay 1e-3, batch 32) and the one training loop
(:func:`fol.train.fit`). Tasks:

* ``wildfire`` / ``hurricane``: the embedded synthetic generator
  (:func:`fol.data.make_synthetic`);
* ``position``: a generated 4-class **image folder** (PNG files written to a
  temporary ``<root>/<class>/`` tree and read back with
  ``load_dataset("imagefolder", path=...)``, the path a user's own data takes)
  whose class is the quadrant holding a small square
  (:func:`fol.data.synthetic.make_position_task`).

The default architecture (:data:`fol.models.DEFAULT_ARCH`) is chosen by the rule
printed at the end: the cheapest architecture (fewest MACs) that reaches
>= 98 % pooled training accuracy on every task (the FOL-round time limit is
checked separately with ``benchmarks/fol_node_time.py``). Run from the
repository root::

    OMP_NUM_THREADS=1 python benchmarks/model_zoo.py
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (comma_names, fail, int_in, machine_line, per_core, positive_float, set_threads,  # noqa: E402
                     unwritable_output, user_seed)

from fol.accounting import forward_macs  # noqa: E402
from fol.config import FOLConfig  # noqa: E402
from fol.data import DEFAULT_MIN_SAMPLES, GeoDataset, load_dataset, make_synthetic, split_node  # noqa: E402
from fol.fileio import write_json_atomic  # noqa: E402
from fol.data.synthetic import make_position_task  # noqa: E402
from fol.models import DEFAULT_ARCH, ModelSpec, architectures, build_model, count_parameters  # noqa: E402
from fol.train import TrainConfig, evaluate, fit  # noqa: E402

FIT_TARGET = 0.98
TASKS = ("wildfire", "hurricane", "position")


def write_image_folder(ds: GeoDataset, root: Path) -> Path:
    """Write ``ds`` as ``root/<class>/<i>.png`` (8-bit RGB) and return ``root``."""
    from PIL import Image

    for name in ds.class_names:
        (root / name).mkdir(parents=True, exist_ok=True)
    pixels = (ds.images.clamp(0, 1) * 255).round().to(torch.uint8).permute(0, 2, 3, 1).numpy()
    for i, (img, y) in enumerate(zip(pixels, ds.labels.tolist())):
        Image.fromarray(img).save(root / ds.class_names[y] / f"{i:05d}.png")
    return root


def task_dataset(task: str, n: int, seed: int, tmp: Path) -> GeoDataset:
    if task in ("wildfire", "hurricane"):
        return make_synthetic(task, n, seed=seed)
    if task == "position":
        folder = write_image_folder(make_position_task(n, seed=seed), tmp / "position")
        return load_dataset("imagefolder", path=str(folder), image_size=32)
    raise SystemExit(fail(f"unknown task {task!r}", 1))


def epoch_seconds(arch: str, num_classes: int, epochs: int = 2) -> float:
    """CPU seconds per epoch of :func:`fit` on 300 random 32 px images (process
    CPU time: with one torch thread this is the wall time on an idle core, and
    it does not grow when other jobs share the machine)."""
    g = torch.Generator().manual_seed(0)
    x, y = torch.rand(300, 3, 32, 32, generator=g), torch.randint(0, num_classes, (300,), generator=g)
    model = build_model(ModelSpec(arch, num_classes), seed=0)
    fit(model, (x, y), TrainConfig(epochs=1))  # warm-up
    t0 = time.process_time()
    fit(model, (x, y), TrainConfig(epochs=epochs))
    return (time.process_time() - t0) / epochs


def pooled_fit(arch: str, ds: GeoDataset, cfg: TrainConfig, seed: int) -> dict[str, float]:
    """Train ``arch`` on the pooled 70 % split; train / test accuracy."""
    nd = split_node(ds, seed=seed)
    c, h, _ = ds.image_shape
    model = build_model(ModelSpec(arch, ds.num_classes, c, h), seed=seed)
    t0 = time.perf_counter()
    fit(model, nd.train.tensors(), cfg)
    return {"train": evaluate(model, *nd.train.tensors()).accuracy,
            "test": evaluate(model, *nd.test.tensors()).accuracy,
            "seconds": time.perf_counter() - t0, "n_train": len(nd.train)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--archs", type=comma_names(architectures()), default="cnn-small,cnn-medium,cnn-large,resnet-small")
    ap.add_argument("--tasks", type=comma_names(TASKS), default="wildfire,hurricane,position")
    ap.add_argument("--pool", type=int_in(DEFAULT_MIN_SAMPLES, why="the fewest a 70/15/15 split takes"), default=3000,
                    help="images per task before the 70/15/15 split")
    ap.add_argument("--epochs", type=int_in(1), default=20)
    ap.add_argument("--lr", type=positive_float("a learning rate"), default=FOLConfig().pretrain_lr,
                    help="SGD learning rate (default: the pretraining default, chosen on validation data)")
    ap.add_argument("--seed", type=user_seed, default=0)
    ap.add_argument("--threads", type=per_core, default=1)
    ap.add_argument("--json", type=Path, help="also write the measurements here")
    args = ap.parse_args(argv)
    archs, tasks = args.archs.split(","), args.tasks.split(",")
    if unwritable_output(args.json):  # before the training, not after
        return 2
    set_threads(args.threads)
    print(machine_line(), flush=True)
    base = FOLConfig()  # batch size, momentum and weight decay as the nodes' pretraining uses them
    cfg = TrainConfig(epochs=args.epochs, batch_size=base.batch_size, lr=args.lr, momentum=base.momentum,
                      weight_decay=base.weight_decay, seed=args.seed)
    rows: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        data = {t: task_dataset(t, args.pool, args.seed, Path(tmp)) for t in tasks}
        for arch in archs:
            model = build_model(ModelSpec(arch, 2), seed=0)
            row = {"params": count_parameters(model), "macs": forward_macs(model, (3, 32, 32)),
                   "s_per_epoch_300": epoch_seconds(arch, 2)}
            for t in tasks:
                row[t] = pooled_fit(arch, data[t], cfg, args.seed)
                print(f"{arch:14s} {t:9s} train {100 * row[t]['train']:.1f} % test {100 * row[t]['test']:.1f} % "
                      f"({row[t]['seconds']:.0f} s)", flush=True)
            rows[arch] = row
    head = "| arch | params | MACs @ 32 px | CPU s / epoch (300 img) | " + " | ".join(
        f"{t} train / test %" for t in tasks) + " |"
    print("\n" + head + "\n|" + "---|" * (4 + len(tasks)))
    for arch, row in rows.items():
        cells = " | ".join(f"{100 * row[t]['train']:.1f} / {100 * row[t]['test']:.1f}" for t in tasks)
        print(f"| {arch} | {row['params']:,} | {row['macs'] / 1e6:.2f} M | {row['s_per_epoch_300']:.2f} | {cells} |")
    fits = [a for a in rows if all(rows[a][t]["train"] >= FIT_TARGET for t in tasks)]
    pick = min(fits, key=lambda a: rows[a]["macs"]) if fits else None
    print(f"\npooled {args.pool} images per task ({rows[archs[0]][tasks[0]]['n_train']} train), {args.epochs} epochs, "
          f"SGD lr {args.lr}, seed {args.seed}")
    print(f"rule: cheapest (MACs) architecture with >= {100 * FIT_TARGET:.0f} % pooled train accuracy on every task "
          f"-> {pick or 'none of them'}; current default: {DEFAULT_ARCH}")
    if args.json:
        write_json_atomic(args.json, {"args": vars(args) | {"json": str(args.json)}, "rows": rows})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
