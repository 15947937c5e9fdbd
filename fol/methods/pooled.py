"""Pooled training: the reference every personalization figure is read against.

Not a federated method and not something a swarm could deploy: every node
hands its raw images to one place. It answers the question a reviewer asks
of any personalization result, *how much could the nodes gain at all?*

* ``pooled`` ("centralized" in much of the literature): one model, from the
  swarm's shared initialization, trained on the union of every node's
  training split with the swarm's shared training settings (``ctx.train``:
  the nodes' pretraining settings, early stopping on the union of the
  validation splits); each node evaluates it on its own test split.
* ``pooled-ft``: that pooled model fine-tuned on each node's own training
  split with the same settings, early-stopped on the node's own validation
  split. Stopping after zero epochs is allowed: a node keeps the pooled model
  when no fine-tuned epoch beats it on the node's validation split (ties
  keep the pooled model). This is the personalized ceiling: all data for the
  features, the node's own data for its label mix.

Contact plans are ignored (all data are in one place by assumption). Both
variants share one pooled training per run (``ctx.cache``), so running both
costs one pooled training plus the per-node fine-tunes.

Accounting: each node uploads its training and validation images at one byte
per pixel and channel (8-bit imagery, as a node would store it) and
downloads the model once; the pooled training's FLOPs are charged to the
nodes in proportion to their training images, and each node's fine-tune to
that node.

>>> from fol.methods import get_method
>>> get_method("pooled").description.split(":")[0]
'Pooled training'
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, ClassVar

import torch

from fol.accounting import model_bytes
from fol.methods._common import Ledger, node_result, require_homogeneous, shared_init, state_of, train_flops_of
from fol.methods.base import Method, NodeResult, NodeSetup, SwarmContext, register
from fol.models import ModelSpec, build_model
from fol.seeds import node_seed
from fol.train import TrainConfig, evaluate, fit

__all__ = ["PooledMethod", "PooledFinetuneMethod", "finetune_node"]

_SEED_SALT = 0x9001  # the pooled run's shuffling seed: distinct from every node's pretraining seed


def _raw_bytes(node: NodeSetup) -> int:
    """Bytes of the node's training and validation images at 8 bits per value."""
    return sum(math.prod(split.images.shape) for split in (node.data.train, node.data.val))


def pooled_state(ctx: SwarmContext) -> tuple[dict[str, torch.Tensor], int]:
    """The pooled model's state dict and the training samples it saw (trained
    once per context, then shared through ``ctx.cache``)."""
    key = ("pooled", ctx.seed)
    if key not in ctx.cache:
        spec = require_homogeneous(ctx, "pooled", PooledMethod.one_architecture_reason)
        model = shared_init(ctx, spec)
        x = torch.cat([n.data.train.images for n in ctx.nodes])
        y = torch.cat([n.data.train.labels for n in ctx.nodes])
        vx = torch.cat([n.data.val.images for n in ctx.nodes])
        vy = torch.cat([n.data.val.labels for n in ctx.nodes])
        cfg = replace(ctx.train, seed=ctx.seed * 1000 + _SEED_SALT, progress=False)
        hist = fit(model, (x, y), cfg, val=(vx, vy))
        ctx.cache[key] = (state_of(model), hist.samples_seen)
    return ctx.cache[key]


def finetune_node(task: tuple[ModelSpec, dict[str, torch.Tensor], Any, TrainConfig]) -> tuple[dict[str, torch.Tensor], int, bool]:
    """Fine-tune the pooled state on one node's data (picklable, for executors).
    Returns the state the node keeps, the samples seen and whether it kept the
    pooled model (no fine-tuned epoch beat it on the node's validation split)."""
    spec, state, data, cfg = task
    start = build_model(spec)
    start.load_state_dict(state)
    start.eval()
    val = data.val.tensors()
    model = build_model(spec)
    model.load_state_dict(state)
    hist = fit(model, data.train.tensors(), cfg, val=val)
    if evaluate(model, *val).accuracy > evaluate(start, *val).accuracy:
        return state_of(model), hist.samples_seen, False
    return state, hist.samples_seen, True


@register
class PooledMethod(Method):
    """One model trained on every node's data pooled (a reference, not FL)."""

    name: ClassVar[str] = "pooled"
    description: ClassVar[str] = "Pooled training: one model on all nodes' data in one place (reference, not FL)"
    one_architecture: ClassVar[bool] = True
    one_architecture_reason: ClassVar[str] = "trains one model on every node's data"

    def _ledgers(self, ctx: SwarmContext, samples_seen: int) -> list[Ledger]:
        spec = ctx.nodes[0].spec
        n_train = sum(len(n.data.train) for n in ctx.nodes)
        size = model_bytes(build_model(spec))
        shape = tuple(ctx.nodes[0].data.train.images.shape[1:])
        flops = train_flops_of(spec, shape, samples_seen)
        return [Ledger(bytes_up=_raw_bytes(n), bytes_down=size, rounds=1,
                       train_flops=int(round(flops * len(n.data.train) / n_train))) for n in ctx.nodes]

    def run(self, ctx: SwarmContext) -> list[NodeResult]:
        state, seen = pooled_state(ctx)
        model = build_model(ctx.nodes[0].spec)
        model.load_state_dict(state)
        model.eval()
        return [node_result(node, self.name, model, ledger)
                for node, ledger in zip(ctx.nodes, self._ledgers(ctx, seen))]


@register
class PooledFinetuneMethod(PooledMethod):
    """The pooled model fine-tuned on each node's own data (the personalized ceiling)."""

    name: ClassVar[str] = "pooled-ft"
    description: ClassVar[str] = ("Pooled training, then fine-tuned on each node's own data "
                                  "(reference, not FL)")

    def run(self, ctx: SwarmContext) -> list[NodeResult]:
        state, seen = pooled_state(ctx)
        spec = ctx.nodes[0].spec
        shape = tuple(ctx.nodes[0].data.train.images.shape[1:])
        tasks = [(node.spec, state, node.data, replace(ctx.train, seed=node_seed(ctx.seed, k), progress=False))
                 for k, node in enumerate(ctx.nodes)]
        tuned = ctx.map(finetune_node, tasks, desc="pooled-ft")
        out = []
        for node, ledger, (st, ft_seen, kept) in zip(ctx.nodes, self._ledgers(ctx, seen), tuned):
            ledger.train_flops += train_flops_of(spec, shape, ft_seen)
            model = build_model(node.spec)
            model.load_state_dict(st)
            model.eval()
            out.append(node_result(node, self.name, model, ledger, extra={"kept_pooled": kept}))
        return out
