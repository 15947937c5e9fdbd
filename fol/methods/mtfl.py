"""MTFL (Mills, Hu & Min, IEEE TPDS 2021): FedAvg with private batch-norm patches.

Every node keeps its BatchNorm layers' values private ("patches"): they are
never uploaded, and after each download the node puts its own patch values
back into the global model before training (Algorithm 1, lines 7-9 and
13-15). What is private is the ``private`` option:

* ``"params"`` - the trained BN parameters (gamma, beta). Default: the
  paper's recommended setting (Table 2: fewest rounds to target accuracy;
  the comparison of Sec. 4.4 uses it).
* ``"stats"`` - the BN running statistics (mu, sigma^2, num_batches_tracked).
* ``"all"`` - both.

Two optimisation strategies (Sec. 3.3), registered as two methods:

* ``mtfl`` - FedAvg: local SGD (the swarm's shared settings), server averages
  the non-private values weighted by training-set size.
* ``mtfl-adam`` - FedAvg-Adam: clients run Adam; the Adam first and second
  moments (and step counts) of the federated parameters are uploaded with the
  weights and averaged by the server alongside them ("3x the communication of
  FedAvg per round"); the moments of the private parameters stay on the node.
  Default Adam learning rate 1e-3 (Kingma & Ba's default; the paper tunes it
  per scenario and publishes no single value).

The global model starts from the swarm's shared initialization; the patches
start from it too (FL starts untrained). Defaults: ``local_epochs = 1`` (the
paper fixes E = 1 local epoch, Sec. 4.1 / 4.4), ``fraction = 1.0``.
After the last round each node downloads the final global model once more and
evaluates it with its own patches.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
import torch
from torch import nn

from fol.accounting import tensor_bytes
from fol.data import NodeData
from fol.errors import ConfigError
from fol.methods._common import (
    Ledger, check_fraction, check_positive, check_positive_int, local_config, node_result,
    require_homogeneous, sample_round, shared_init, train_flops_of, weighted_average,
)
from fol.methods.base import NodeResult, ServerMethod, SwarmContext, register
from fol.models import ModelSpec, build_model
from fol.train import TrainConfig, fit

__all__ = ["MTFLMethod", "MTFLAdamMethod", "private_keys", "MTFLTask", "mtfl_client_update", "PRIVATE_CHOICES"]

PRIVATE_CHOICES = ("params", "stats", "all")
_MOMENTS = ("exp_avg", "exp_avg_sq", "step")


def private_keys(model: nn.Module, private: str) -> set[str]:
    """State-dict keys of ``model``'s BatchNorm patches under the ``private`` setting."""
    keys: set[str] = set()
    for name, mod in model.named_modules():
        if isinstance(mod, nn.modules.batchnorm._BatchNorm):
            p = f"{name}." if name else ""
            if private in ("params", "all"):
                keys |= {p + "weight", p + "bias"} & set(mod.state_dict(prefix=p).keys())
            if private in ("stats", "all"):
                keys |= {p + "running_mean", p + "running_var", p + "num_batches_tracked"} & set(
                    mod.state_dict(prefix=p).keys())
    return keys


@dataclass
class MTFLTask:
    """One node's MTFL round (picklable)."""

    spec: ModelSpec
    global_state: dict[str, torch.Tensor]  # non-private values only
    patches: dict[str, torch.Tensor]  # this node's private values
    data: NodeData
    cfg: TrainConfig
    adam: bool = False
    adam_lr: float = 1e-3
    global_moments: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)
    private_moments: dict[str, dict[str, torch.Tensor]] = field(default_factory=dict)


@dataclass
class MTFLUpload:
    """What a node sends to the server (non-private values only) and what it keeps."""

    state: dict[str, torch.Tensor]
    moments: dict[str, dict[str, torch.Tensor]]
    patches: dict[str, torch.Tensor]
    private_moments: dict[str, dict[str, torch.Tensor]]
    samples_seen: int


def mtfl_client_update(task: MTFLTask) -> MTFLUpload:
    """Algorithm 1, lines 5-17: download, apply patches, train, save patches, upload the rest."""
    model = build_model(task.spec)
    state = dict(task.global_state)
    state.update(task.patches)
    model.load_state_dict(state)
    private = set(task.patches)
    optimizer = None
    named = dict(model.named_parameters())
    if task.adam:
        optimizer = torch.optim.Adam(model.parameters(), lr=task.adam_lr, weight_decay=task.cfg.weight_decay)
        for name, p in named.items():
            src = task.private_moments if name in private else task.global_moments
            if name in src:
                optimizer.state[p] = {k: v.clone() for k, v in src[name].items()}
    hist = fit(model, task.data.train.tensors(), task.cfg, optimizer=optimizer)
    new = {k: v.detach().clone() for k, v in model.state_dict().items()}
    moments: dict[str, dict[str, torch.Tensor]] = {}
    priv_moments: dict[str, dict[str, torch.Tensor]] = {}
    if optimizer is not None:
        for name, p in named.items():
            st = optimizer.state.get(p)
            if st:
                entry = {k: st[k].detach().clone() for k in _MOMENTS if k in st}
                (priv_moments if name in private else moments)[name] = entry
    return MTFLUpload(
        state={k: v for k, v in new.items() if k not in private},
        moments=moments,
        patches={k: v for k, v in new.items() if k in private},
        private_moments=priv_moments,
        samples_seen=hist.samples_seen,
    )


def average_moments(uploads: list[dict[str, dict[str, torch.Tensor]]], weights: list[float]) -> dict[str, dict[str, torch.Tensor]]:
    """FedAvg-Adam's GlobalOptimUpdate: weighted mean of each Adam moment (and step count)."""
    out: dict[str, dict[str, torch.Tensor]] = {}
    names = set().union(*[u.keys() for u in uploads]) if uploads else set()
    for name in sorted(names):
        have = [(u[name], w) for u, w in zip(uploads, weights) if name in u]
        out[name] = weighted_average([h for h, _ in have], [w for _, w in have])
    return out


def _moments_bytes(moments: dict[str, dict[str, torch.Tensor]]) -> int:
    return sum(tensor_bytes(m) for m in moments.values())


class _MTFLBase(ServerMethod):
    adam: ClassVar[bool] = False

    def __init__(self, private: str = "params", local_epochs: int = 1, fraction: float = 1.0,
                 lr: float | None = None, adam_lr: float = 1e-3) -> None:
        if private not in PRIVATE_CHOICES:
            raise ConfigError(f"methods.{self.name}.private must be one of {', '.join(PRIVATE_CHOICES)}, got {private!r}")
        self.private = private
        self.local_epochs = check_positive_int(self.name, "local_epochs", local_epochs)
        self.fraction = check_fraction(self.name, "fraction", fraction)
        self.lr = None if lr is None else check_positive(self.name, "lr", lr)
        self.adam_lr = check_positive(self.name, "adam_lr", adam_lr)

    def run(self, ctx: SwarmContext) -> list[NodeResult]:
        return self.run_with_global(ctx)[0]

    def run_with_global(self, ctx: SwarmContext) -> tuple[list[NodeResult], dict[str, torch.Tensor], Any]:
        """:meth:`run`, also returning the final global state and (MTFL-Adam) global Adam moments."""
        spec = require_homogeneous(ctx, self.name)
        model = shared_init(ctx, spec)
        init = {k: v.detach().clone() for k, v in model.state_dict().items()}
        priv = private_keys(model, self.private)
        global_state = {k: v for k, v in init.items() if k not in priv}
        global_moments: dict[str, dict[str, torch.Tensor]] = {}
        patches = [{k: init[k].clone() for k in priv} for _ in ctx.nodes]
        priv_moments: list[dict[str, dict[str, torch.Tensor]]] = [{} for _ in ctx.nodes]
        shape = ctx.nodes[0].data.train.images.shape[1:]
        ledgers = [Ledger() for _ in ctx.nodes]
        rng = np.random.default_rng([ctx.seed, 0x3F1])
        t0 = time.perf_counter()
        for r in range(ctx.rounds):
            picked = sample_round(ctx, r, self.fraction, rng)
            if not picked:
                continue
            down = tensor_bytes(global_state) + _moments_bytes(global_moments)
            tasks = [
                MTFLTask(spec, global_state, patches[k], ctx.nodes[k].data,
                         local_config(ctx, self.local_epochs, ctx.seed * 7919 + r * 1009 + k, self.lr),
                         adam=self.adam, adam_lr=self.adam_lr, global_moments=global_moments,
                         private_moments=priv_moments[k])
                for k in picked
            ]
            uploads: list[MTFLUpload] = ctx.map(mtfl_client_update, tasks)
            for k, up in zip(picked, uploads):
                patches[k], priv_moments[k] = up.patches, up.private_moments
                led = ledgers[k]
                led.bytes_down += down
                led.bytes_up += tensor_bytes(up.state) + _moments_bytes(up.moments)
                led.rounds += 1
                led.train_flops += train_flops_of(spec, shape, up.samples_seen)
            weights = [float(len(ctx.nodes[k].data.train)) for k in picked]
            global_state = weighted_average([u.state for u in uploads], weights)
            if self.adam:
                global_moments = average_moments([u.moments for u in uploads], weights)
        seconds = time.perf_counter() - t0
        results = []
        final = tensor_bytes(global_state)
        for k, (node, led) in enumerate(zip(ctx.nodes, ledgers)):
            led.bytes_down += final  # final global model, evaluated with the node's own patches
            personal = build_model(spec)
            personal.load_state_dict({**global_state, **patches[k]})
            personal.eval()
            res = node_result(node, self.name, personal, led,
                              extra={"participations": led.rounds, "private": self.private,
                                     "private_bytes": tensor_bytes(patches[k])})
            res.seconds = seconds / max(1, len(ctx.nodes))
            results.append(res)
        return results, global_state, global_moments


@register
class MTFLMethod(_MTFLBase):
    """MTFL with FedAvg: private BN patches, SGD locally, weights averaged."""

    name: ClassVar[str] = "mtfl"
    description: ClassVar[str] = "MTFL(FedAvg): private batch-norm patches (multi-round, server)"
    adam: ClassVar[bool] = False


@register
class MTFLAdamMethod(_MTFLBase):
    """MTFL with FedAvg-Adam: Adam locally, weights and Adam moments averaged."""

    name: ClassVar[str] = "mtfl-adam"
    description: ClassVar[str] = "MTFL(FedAvg-Adam): private BN patches, Adam moments averaged (multi-round, server)"
    adam: ClassVar[bool] = True
