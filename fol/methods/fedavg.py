"""FedAvg (McMahan et al., AISTATS 2017) through a virtual server.

Round ``r`` (``r < ctx.rounds``): the participating nodes (contact plan,
optionally sub-sampled by ``fraction``) download the global model, train
``local_epochs`` epochs on their training split with the swarm's shared
training settings, and upload it; the server replaces the global model by the
average weighted by training-set size (parameters and BatchNorm buffers).
After the last round the final global model is broadcast to every node once
(counted as one more download) and each node evaluates it on its own test set.
Until a round has aggregated (no node reached the server yet, or ever) there
is no global model but the untrained initialization: every node keeps its own
pretrained model (``kept_local``) and downloads nothing.

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

from typing import Any, ClassVar

import torch

from fol.accounting import model_bytes
from fol.methods._common import Ledger, shared_init, state_of, weighted_average
from fol.methods.base import SwarmContext, register
from fol.methods.server import ClientTask, ServerMethod, Traffic, train_client
from fol.train import TrainConfig

__all__ = ["FedAvgMethod", "ClientTask", "client_update"]

client_update = train_client  # the plain local update (kept under its historical name)


@register
class FedAvgMethod(ServerMethod):
    """FedAvg: global model averaged over sampled clients every round."""

    name: ClassVar[str] = "fedavg"
    description: ClassVar[str] = "FedAvg, one global model (multi-round, server)"
    rng_salt: ClassVar[int] = 0xFEDA

    def setup(self, ctx: SwarmContext) -> dict[str, Any]:
        model = shared_init(ctx, ctx.nodes[0].spec)
        return {"global": state_of(model), "size": model_bytes(model), "aggregated": False}

    def client_task(self, state: dict, ctx: SwarmContext, r: int, k: int, cfg: TrainConfig) -> ClientTask:
        return ClientTask(ctx.nodes[k].spec, state["global"], ctx.nodes[k].data, cfg)

    def aggregate(self, state: dict, ctx: SwarmContext, r: int, picked: list[int], updates: list) -> list[Traffic]:
        state["global"] = weighted_average([s for s, _ in updates], [len(ctx.nodes[k].data.train) for k in picked])
        state["aggregated"] = True
        return [Traffic(state["size"], state["size"], seen) for _, seen in updates]

    def node_state(self, state: dict, ctx: SwarmContext, k: int) -> dict[str, torch.Tensor]:
        if not state["aggregated"]:  # no global model yet: the node keeps its own
            return state_of(ctx.nodes[k].pretrained)
        return state["global"]

    def deploy_bytes(self, state: dict, ctx: SwarmContext, k: int, variant: str | None = None) -> int:
        return state["size"] if state["aggregated"] else 0  # final broadcast of the global model

    def kept_local(self, state: dict, ctx: SwarmContext, k: int, ledger: Ledger) -> bool:
        return not state["aggregated"]
