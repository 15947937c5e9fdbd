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

* ``nbr-pooled-ft``: the room ONE exchange can reach. For each node k, a model
  from the swarm's shared initialization trained, as ``pooled`` trains the
  swarm's, on the union of the training splits of k's *group*: k and the
  nodes whose model reaches k in FOL's first round
  (``ctx.senders_to(0, k, ctx.fol.max_neighbours)``: Q drawn nodes without a
  contact plan, round 0's deliveries with one), early-stopped on the union of
  the group's validation splits and shuffled with the seed ``pooled`` uses
  (so with every other node a sender each group's model *is* the pooled
  model); then fine-tuned on k's own training split exactly as ``pooled-ft``
  (:func:`finetune_node`, seed :func:`fol.seeds.node_seed`). It is what k
  could reach had its neighbours sent their data instead of their models: a
  reference for FOL at E = 1, not a deployable method. The group's test
  splits are never used.

Accounting: each node uploads its training and validation images at one byte
per pixel and channel (8-bit imagery, as a node would store it) and
downloads the model once; the pooled training's FLOPs are charged to the
nodes in proportion to their training images, and each node's fine-tune to
that node. For ``nbr-pooled-ft`` the images travel the way FOL's models do:
each sender j uploads its training and validation images (same byte count)
once per node it sends to (``bytes_up`` on j), node k downloads its senders'
(``bytes_down`` on k); k trains its group's model and its fine-tune, so
both trainings' FLOPs are charged to k and nothing is downloaded after.

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
from fol.methods._common import (Ledger, init_seed_of, node_result, require_homogeneous, shared_init, state_of,
                                 train_flops_of)
from fol.data import NodeData
from fol.methods.base import Method, NodeResult, NodeSetup, SwarmContext, map_nodes, naming_server, register
from fol.models import ModelSpec, build_model
from fol.seeds import node_seed
from fol.train import TrainConfig, evaluate, fit

__all__ = ["PooledMethod", "PooledFinetuneMethod", "NeighbourhoodPooledMethod", "finetune_node",
           "neighbourhood", "train_neighbourhood"]

_SEED_SALT = 0x9001  # the pooled run's shuffling seed: distinct from every node's pretraining seed


def _raw_bytes(node: NodeSetup) -> int:
    """Bytes of the node's training and validation images at 8 bits per value."""
    return sum(math.prod(split.images.shape) for split in (node.data.train, node.data.val))


def pooled_state(ctx: SwarmContext, method: str = "pooled") -> tuple[dict[str, torch.Tensor], int]:
    """The pooled model's state dict and the training samples it saw (trained
    once per context, then shared through ``ctx.cache``); a divergence names the
    server and ``method``, the one that asked first."""
    key = ("pooled", ctx.seed)
    if key not in ctx.cache:
        spec = require_homogeneous(ctx, "pooled", PooledMethod.one_architecture_reason)
        model = shared_init(ctx, spec)
        train, val = _union([n.data for n in ctx.nodes])
        with naming_server(method):
            hist = fit(model, train, _pooled_config(ctx), val=val)
        ctx.cache[key] = (state_of(model), hist.samples_seen)
    return ctx.cache[key]


def _union(datas: list[NodeData]) -> tuple[tuple[torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """The union of the training splits of ``datas`` and of their validation
    splits, in the order given: ``((x, y), (vx, vy))``. Test splits are never read."""
    x = torch.cat([d.train.images for d in datas])
    y = torch.cat([d.train.labels for d in datas])
    vx = torch.cat([d.val.images for d in datas])
    vy = torch.cat([d.val.labels for d in datas])
    return (x, y), (vx, vy)


def _pooled_config(ctx: SwarmContext) -> TrainConfig:
    """The swarm's training settings with the pooled run's shuffling seed (a divergence says
    ``pooled training``, not the ``pretrain`` the settings were made for)."""
    return replace(ctx.train, seed=ctx.seed * 1000 + _SEED_SALT, progress=False, desc="pooled training")


def _finetune_config(ctx: SwarmContext, k: int) -> TrainConfig:
    """The swarm's training settings for node ``k``'s fine-tune of a pooled model."""
    return replace(ctx.train, seed=node_seed(ctx.seed, k), progress=False, desc="fine-tune")


def neighbourhood(ctx: SwarmContext, k: int) -> list[int]:
    """Node ``k``'s group for ``nbr-pooled-ft``: ``k`` and the nodes whose model
    reaches it in FOL's first round (the senders FOL takes, at most
    ``ctx.fol.max_neighbours``), in node order."""
    return sorted({k, *ctx.senders_to(0, k, ctx.fol.max_neighbours)})


def train_neighbourhood(task: tuple[ModelSpec, int, list[NodeData], TrainConfig, NodeData, TrainConfig]) -> tuple:
    """One node's ``nbr-pooled-ft`` (picklable, for executors): from the shared
    initialization (``spec``, ``init_seed``), train on the union of the group's
    training splits early-stopped on the union of its validation splits (built
    here, so an executor holds one group's union at a time), then fine-tune on
    the node's own ``data`` (:func:`finetune_node`). Returns the group's state
    and samples seen, then :func:`finetune_node`'s three."""
    spec, init_seed, group, cfg, data, ft_cfg = task
    model = build_model(spec, seed=init_seed)
    train, val = _union(group)
    hist = fit(model, train, cfg, val=val)
    state = state_of(model)
    return (state, hist.samples_seen, *finetune_node((spec, state, data, ft_cfg)))


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
        state, seen = pooled_state(ctx, self.name)
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
        state, seen = pooled_state(ctx, self.name)
        spec = ctx.nodes[0].spec
        shape = tuple(ctx.nodes[0].data.train.images.shape[1:])
        tasks = [(node.spec, state, node.data, _finetune_config(ctx, k)) for k, node in enumerate(ctx.nodes)]
        tuned = map_nodes(ctx, finetune_node, [node.name for node in ctx.nodes], tasks, self.name, desc="pooled-ft")
        out = []
        for node, ledger, (st, ft_seen, kept) in zip(ctx.nodes, self._ledgers(ctx, seen), tuned):
            ledger.train_flops += train_flops_of(spec, shape, ft_seen)
            model = build_model(node.spec)
            model.load_state_dict(st)
            model.eval()
            out.append(node_result(node, self.name, model, ledger, extra={"kept_pooled": kept}))
        return out


@register
class NeighbourhoodPooledMethod(Method):
    """Each node's model trained on its own and its first-round senders' data,
    fine-tuned on its own (the room one exchange can reach; a reference, not FL)."""

    name: ClassVar[str] = "nbr-pooled-ft"
    description: ClassVar[str] = ("Pooled training on each node's and its round-1 senders' data, then "
                                  "fine-tuned on its own (one exchange's room; reference, not FL)")
    one_architecture: ClassVar[bool] = True
    one_architecture_reason: ClassVar[str] = "trains each node's model on its neighbours' data"

    def run(self, ctx: SwarmContext) -> list[NodeResult]:
        spec = require_homogeneous(ctx, self.name, self.one_architecture_reason)
        init_seed = init_seed_of(ctx)
        cfg = _pooled_config(ctx)
        groups = [neighbourhood(ctx, k) for k in range(len(ctx.nodes))]
        tasks = [(spec, init_seed, [ctx.nodes[j].data for j in group], cfg, ctx.nodes[k].data, _finetune_config(ctx, k))
                 for k, group in enumerate(groups)]
        done = map_nodes(ctx, train_neighbourhood, [node.name for node in ctx.nodes], tasks, self.name, desc=self.name)
        shape = tuple(ctx.nodes[0].data.train.images.shape[1:])
        ledgers = [Ledger(rounds=1) for _ in ctx.nodes]
        for k, group in enumerate(groups):
            for j in group:
                if j != k:
                    ledgers[j].bytes_up += _raw_bytes(ctx.nodes[j])
                    ledgers[k].bytes_down += _raw_bytes(ctx.nodes[j])
        out = []
        for node, ledger, group, (_, seen, st, ft_seen, kept) in zip(ctx.nodes, ledgers, groups, done):
            ledger.train_flops = train_flops_of(spec, shape, seen) + train_flops_of(spec, shape, ft_seen)
            model = build_model(spec)
            model.load_state_dict(st)
            model.eval()
            out.append(node_result(node, self.name, model, ledger,
                                   extra={"group": [ctx.nodes[j].name for j in group], "kept_pooled": kept}))
        return out
