"""Building a swarm of learning nodes: shards of a dataset, per-node splits,
architectures and pretrained models. Shared by the simulation runner, the
benchmarks and the method tests, so every method starts from the same nodes.

>>> from fol.data import make_synthetic
>>> pool = make_synthetic("hurricane", 400, seed=0)
>>> nodes = build_nodes(pool, [range(0, 200), range(200, 400)], ["cnn-small"],
...                     TrainConfig(epochs=1), seed=0)
>>> [n.name for n in nodes], len(nodes[0].data.train)
(['node-0', 'node-1'], 140)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np
import torch

from fol.accounting import forward_macs, training_flops
from fol.data import GeoDataset, NodeData, split_node
from fol.methods.base import NodeSetup, naming_node, serial_map
from fol.models import ModelSpec, build_model
from fol.seeds import node_seed
from fol.train import TrainConfig, fit

__all__ = ["build_nodes", "node_specs", "PretrainTask", "pretrain_node"]


def node_specs(archs: Sequence[str | ModelSpec], n_nodes: int, num_classes: int, in_channels: int, input_size: int) -> list[ModelSpec]:
    """One spec per node: ``archs`` is cycled (one name = homogeneous swarm)."""
    specs = []
    for k in range(n_nodes):
        a = archs[k % len(archs)]
        specs.append(a if isinstance(a, ModelSpec) else ModelSpec(a, num_classes, in_channels, input_size))
    return specs


@dataclass
class PretrainTask:
    """Everything one node's pretraining needs (picklable, for process/Ray executors)."""

    index: int
    name: str
    spec: ModelSpec
    data: NodeData
    train: TrainConfig
    init_seed: int


def pretrain_node(task: PretrainTask) -> tuple[dict[str, torch.Tensor], int]:
    """Pretrain one node from the shared initialization of its architecture;
    returns the state dict and the training FLOPs spent."""
    model = build_model(task.spec, seed=task.init_seed)
    with naming_node(task.name, "pretraining"):  # a divergence says which node's
        hist = fit(model, task.data.train.tensors(), task.train, val=task.data.val.tensors())
    macs = forward_macs(model, task.data.train.images.shape[1:])
    return model.state_dict(), training_flops(macs, hist.samples_seen)


def build_nodes(
    pool: GeoDataset,
    shards: Sequence[Sequence[int] | np.ndarray],
    archs: Sequence[str | ModelSpec],
    train: TrainConfig,
    seed: int,
    *,
    names: Sequence[str] | None = None,
    init_seed: int | None = None,
    map: Callable[[Callable[[Any], Any], Sequence[Any]], list[Any]] = serial_map,
) -> list[NodeSetup]:
    """Split every shard 70/15/15 (stratified, seeded per node) and pretrain each
    node's model. Nodes of one architecture share one initialization
    (``init_seed``, default ``seed``), as in federated learning."""
    c, h, _ = pool.images.shape[1:]
    specs = node_specs(archs, len(shards), len(pool.class_names), c, h)
    names = list(names) if names is not None else [f"node-{k}" for k in range(len(shards))]
    tasks = []
    for k, idx in enumerate(shards):
        shard = pool.subset(np.asarray(list(idx), dtype=np.int64), name=f"{pool.name}/{names[k]}")
        data = split_node(shard, seed=node_seed(seed, k))
        cfg = TrainConfig(**{**train.__dict__, "seed": node_seed(seed, k), "progress": False})
        tasks.append(PretrainTask(k, names[k], specs[k], data, cfg, seed if init_seed is None else init_seed))
    results = map(pretrain_node, tasks)
    nodes = []
    for task, (state, flops) in zip(tasks, results):
        model = build_model(task.spec)
        model.load_state_dict(state)
        model.eval()
        nodes.append(NodeSetup(task.index, task.name, task.spec, list(pool.class_names), task.data, model, flops,
                               task.init_seed))
    return nodes
