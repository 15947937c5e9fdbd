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

* ``mtfl`` - FedAvg: local SGD (the swarm's shared settings, momentum and
  weight decay included; the authors' published client SGD has neither),
  server averages the non-private values weighted by training-set size.
* ``mtfl-adam`` - FedAvg-Adam: clients run Adam; the Adam first and second
  moments (and step counts) of the federated parameters are uploaded with the
  weights and averaged by the server alongside them ("3x the communication of
  FedAvg per round"); the moments of the private parameters stay on the node.
  Default Adam learning rate 1e-3 (Kingma & Ba's default; the paper tunes it
  per scenario and publishes no single value), set by ``adam_lr``; the common
  option ``lr`` is refused here (it would not reach the Adam optimiser).
  Adam runs with torch's eps (1e-8; the published client Adam uses 1e-7) and
  the swarm's shared ``weight_decay`` as its L2 term (published: 0).

The global model starts from the swarm's shared initialization; the patches
start from it too (FL starts untrained). Defaults: ``local_epochs = 1`` (the
paper fixes E = 1 local epoch, Sec. 4.1 and 4.4), ``fraction = 1.0``.
``rounds`` (default: every round the contact plan allows) sets how many
server rounds run: the paper counts rounds to a target accuracy and runs up
to 200 (Sec. 4.4) or 500 (Tables 2-3) of them, so a few rounds of one epoch
from scratch are far from its operating point; give ``rounds`` (and, to
trade rounds for local work, ``local_epochs``) accordingly.
After the last round each node downloads the final global model once more and
evaluates it with its own patches. Until a round has aggregated (no node
reached the server yet, or ever) every node keeps its own pretrained model
(``kept_local``) and downloads nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import ClassVar

import torch
from torch import nn

from fol.accounting import tensor_bytes
from fol.data import NodeData
from fol.errors import ConfigError
from fol.methods._common import Ledger, check_positive, shared_init, state_of, weighted_average
from fol.methods.base import SwarmContext, register
from fol.methods.server import ServerMethod, Traffic
from fol.models import ModelSpec, build_model
from fol.train import TrainConfig, fit
from swarmbase.tomlcheck import shown

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
    cfg = task.cfg
    named = dict(model.named_parameters())
    if task.adam:
        cfg = replace(cfg, lr=task.adam_lr)  # the rate the steps run at (what a divergence error reports)
        optimizer = torch.optim.Adam(model.parameters(), lr=task.adam_lr, weight_decay=task.cfg.weight_decay)
        for name, p in named.items():
            src = task.private_moments if name in private else task.global_moments
            if name in src:
                optimizer.state[p] = {k: v.clone() for k, v in src[name].items()}
    hist = fit(model, task.data.train.tensors(), cfg, optimizer=optimizer)
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
    rng_salt: ClassVar[int] = 0x3F1
    default_local_epochs: ClassVar[int] = 1

    def __init__(self, private: str = "params", adam_lr: float = 1e-3, **common) -> None:
        super().__init__(**common)
        if private not in PRIVATE_CHOICES:
            raise ConfigError(f"methods.{self.name}.private must be one of {', '.join(PRIVATE_CHOICES)}, got {shown(private)}")
        self.private = private
        self.adam_lr = check_positive(self.name, "adam_lr", adam_lr, factor=True, rate=True)
        if self.adam and self.lr is not None:  # the local Adam steps run at adam_lr: lr would be ignored
            raise ConfigError(f"methods.{self.name}.lr is not used: the local Adam learning rate is "
                              f"methods.{self.name}.adam_lr (default 1e-3)")

    def setup(self, ctx: SwarmContext) -> dict:
        model = shared_init(ctx, ctx.nodes[0].spec)
        init = state_of(model)
        priv = private_keys(model, self.private)
        return {"global": {k: v for k, v in init.items() if k not in priv}, "moments": {},
                "patches": [{k: init[k].clone() for k in priv} for _ in ctx.nodes],
                "private_moments": [{} for _ in ctx.nodes], "aggregated": False}

    def client_fn(self, state: dict, round_index: int):
        return mtfl_client_update

    def client_task(self, state: dict, ctx: SwarmContext, r: int, k: int, cfg: TrainConfig) -> MTFLTask:
        if self.adam:  # the steps run at adam_lr (mtfl_client_update): a divergence error names it
            cfg = replace(cfg, lr_field=f"methods.{self.name}.adam_lr")
        return MTFLTask(ctx.nodes[k].spec, state["global"], state["patches"][k], ctx.nodes[k].data, cfg,
                        adam=self.adam, adam_lr=self.adam_lr, global_moments=state["moments"],
                        private_moments=state["private_moments"][k])

    def aggregate(self, state: dict, ctx: SwarmContext, r: int, picked: list[int],
                  uploads: list[MTFLUpload]) -> list[Traffic]:
        down = tensor_bytes(state["global"]) + _moments_bytes(state["moments"])
        traffic = []
        for k, up in zip(picked, uploads):
            state["patches"][k], state["private_moments"][k] = up.patches, up.private_moments
            traffic.append(Traffic(tensor_bytes(up.state) + _moments_bytes(up.moments), down, up.samples_seen))
        weights = [float(len(ctx.nodes[k].data.train)) for k in picked]
        state["global"] = weighted_average([u.state for u in uploads], weights)
        if self.adam:
            state["moments"] = average_moments([u.moments for u in uploads], weights)
        state["aggregated"] = True
        return traffic

    def node_state(self, state: dict, ctx: SwarmContext, k: int) -> dict[str, torch.Tensor]:
        if not state["aggregated"]:  # no global model yet: the node keeps its own
            return state_of(ctx.nodes[k].pretrained)
        return {**state["global"], **state["patches"][k]}  # the global model with the node's own patches

    def deploy_bytes(self, state: dict, ctx: SwarmContext, k: int, variant: str | None = None) -> int:
        return tensor_bytes(state["global"]) if state["aggregated"] else 0  # final global model

    def kept_local(self, state: dict, ctx: SwarmContext, k: int, ledger: Ledger) -> bool:
        return not state["aggregated"]

    def result_extra(self, state: dict, ctx: SwarmContext, k: int, ledger: Ledger) -> dict:
        return {"participations": ledger.rounds, "private": self.private,
                "private_bytes": tensor_bytes(state["patches"][k])}


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
