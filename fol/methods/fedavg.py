"""FedAvg (McMahan et al., AISTATS 2017) through a virtual server.

Round ``r`` (``r < ctx.rounds``): the participating nodes (contact plan,
optionally sub-sampled by ``fraction``) download the global model, train
``local_epochs`` epochs on their training split with the swarm's shared
training settings, and upload it; the server replaces the global model by the
average weighted by training-set size (parameters and BatchNorm buffers).
After the last round the final global model is broadcast to every node once
(counted as one more download) and each node evaluates it on its own test set.

With ``ctx.rounds = E`` this is also the FOL paper's "one-shot FedAvg (E)"
row. The global model starts from the swarm's shared initialization (not
from the pretrained models: FedAvg trains a global model from scratch), so it
needs one architecture for all nodes.

Defaults: ``local_epochs = 5`` (McMahan et al.'s E = 5, also Hermes and
DM-PFL's setting), ``fraction = 1.0`` (every reachable node, as in the FOL
paper's small swarms), learning rate / batch size / momentum / weight decay
from ``ctx.train``.

Accounting: per participation ``model_bytes`` up and ``model_bytes`` down,
plus the final broadcast; training FLOPs = 3 x forward FLOPs x samples seen.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch

from fol.accounting import model_bytes
from fol.data import NodeData
from fol.methods._common import (
    Ledger, check_fraction, check_positive, check_positive_int, local_config, node_result, require_homogeneous,
    sample_round, shared_init, train_flops_of, weighted_average,
)
from fol.methods.base import NodeResult, ServerMethod, SwarmContext, register
from fol.models import ModelSpec, build_model
from fol.train import TrainConfig, fit

__all__ = ["FedAvgMethod", "ClientTask", "client_update"]


@dataclass
class ClientTask:
    """One node's local update (picklable for process / Ray executors)."""

    spec: ModelSpec
    state: dict[str, torch.Tensor]
    data: NodeData
    cfg: TrainConfig


def client_update(task: ClientTask) -> tuple[dict[str, torch.Tensor], int]:
    """Train the received global model locally; returns the new state and the
    number of samples seen."""
    model = build_model(task.spec)
    model.load_state_dict(task.state)
    hist = fit(model, task.data.train.tensors(), task.cfg)
    return {k: v.detach().clone() for k, v in model.state_dict().items()}, hist.samples_seen


@register
class FedAvgMethod(ServerMethod):
    """FedAvg: global model averaged over sampled clients every round."""

    name: ClassVar[str] = "fedavg"
    description: ClassVar[str] = "FedAvg, one global model (multi-round, server)"

    def __init__(self, local_epochs: int = 5, fraction: float = 1.0, lr: float | None = None) -> None:
        self.local_epochs = check_positive_int(self.name, "local_epochs", local_epochs)
        self.fraction = check_fraction(self.name, "fraction", fraction)
        self.lr = None if lr is None else check_positive(self.name, "lr", lr)

    def run(self, ctx: SwarmContext) -> list[NodeResult]:
        spec = require_homogeneous(ctx, self.name)
        model = shared_init(ctx, spec)
        size = model_bytes(model)
        shape = ctx.nodes[0].data.train.images.shape[1:]
        global_state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        ledgers = [Ledger() for _ in ctx.nodes]
        rng = np.random.default_rng([ctx.seed, 0xFEDA])
        t0 = time.perf_counter()
        for r in range(ctx.rounds):
            picked = sample_round(ctx, r, self.fraction, rng)
            if not picked:
                continue
            tasks = [
                ClientTask(spec, global_state, ctx.nodes[k].data,
                           local_config(ctx, self.local_epochs, ctx.seed * 7919 + r * 1009 + k, self.lr))
                for k in picked
            ]
            outs = ctx.map(client_update, tasks)
            for k, (_, seen) in zip(picked, outs):
                led = ledgers[k]
                led.bytes_down += size
                led.bytes_up += size
                led.rounds += 1
                led.train_flops += train_flops_of(spec, shape, seen)
            global_state = weighted_average([s for s, _ in outs], [len(ctx.nodes[k].data.train) for k in picked])
        model.load_state_dict(global_state)
        model.eval()
        seconds = time.perf_counter() - t0
        results = []
        for node, led in zip(ctx.nodes, ledgers):
            led.bytes_down += size  # final broadcast of the global model
            res = node_result(node, self.name, model, led, extra={"participations": led.rounds})
            res.seconds = seconds / max(1, len(ctx.nodes))
            results.append(res)
        return results
