"""Helpers shared by the baseline methods (private module: not a method).

Everything here is the plumbing every server-based baseline needs in this
serverless swarm: a virtual server aggregates, round ``r`` involves the nodes
``ctx.participants_in(r)`` (optionally sub-sampled with a seeded generator),
local training goes through :func:`fol.train.fit`, and every byte a node sends
or receives and every training FLOP it spends is counted.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Iterable, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from fol.accounting import forward_macs, training_flops
from fol.defaults import MAX_ITERATIONS, too_many
from fol.errors import ConfigError
from fol.methods.base import NodeResult, NodeSetup, SwarmContext
from fol.models import ModelSpec, build_model
from fol.train import MAX_FACTOR, MIN_RATE, TrainConfig, evaluate, layer_modes_kept, too_large, too_small_rate
from swarmbase.tomlcheck import is_finite_number, shown

log = logging.getLogger(__name__)

__all__ = [
    "Ledger",
    "require_homogeneous",
    "shared_init",
    "init_seed_of",
    "sample_round",
    "local_config",
    "normalized_weights",
    "weighted_average",
    "node_macs",
    "masked_macs_ratio",
    "node_result",
    "check_fraction",
    "check_positive_int",
    "check_unit",
    "grad_mask_hooks",
    "masked_fit",
]


@dataclass
class Ledger:
    """Per-node accounting of one method run."""

    bytes_up: int = 0
    bytes_down: int = 0
    train_flops: int = 0
    rounds: int = 0
    history: list = field(default_factory=list)


# ---------------------------------------------------------------- validation


def check_fraction(method: str, name: str, value: float) -> float:
    """``value`` in (0, 1], else a ConfigError naming ``methods.<method>.<name>``."""
    if not is_finite_number(value) or not 0.0 < float(value) <= 1.0:
        raise ConfigError(f"methods.{method}.{name} must be a number in (0, 1], got {shown(value)}")
    return float(value)


def check_unit(method: str, name: str, value: float, *, closed: bool = True) -> float:
    """``value`` in [0, 1] (``closed``) or [0, 1)."""
    ok = is_finite_number(value) and (0.0 <= float(value) <= 1.0 if closed else 0.0 <= float(value) < 1.0)
    if not ok:
        raise ConfigError(f"methods.{method}.{name} must be a number in [0, 1{']' if closed else ')'}, got {shown(value)}")
    return float(value)


def check_positive_int(method: str, name: str, value: int, *, allow_zero: bool = False, count: bool = False,
                       owner: str | None = None) -> int:
    """An integer >= 1 (>= 0 with ``allow_zero``); a count of epochs, steps or
    rounds (``count``) at most :data:`fol.defaults.MAX_ITERATIONS` as well, as
    FOLConfig's are. The message names ``methods.<method>.<name>``, or
    ``<owner>.<name>`` when ``owner`` is given (a config class's own check)."""
    low = 0 if allow_zero else 1
    where = owner or f"methods.{method}"
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ConfigError(f"{where}.{name} must be an integer >= {low}, got {shown(value)}")
    if count and value > MAX_ITERATIONS:
        raise ConfigError(f"{where}.{too_many(name, value)}")
    return int(value)


def check_positive(method: str, name: str, value: float, *, allow_zero: bool = False, factor: bool = False,
                   rate: bool = False, small: tuple[str, str | None] | None = None, at_most: float | None = None,
                   owner: str | None = None) -> float:
    """``value`` > 0 (>= 0 with ``allow_zero``); a learning rate or loss weight
    (``factor``) at most :data:`fol.train.MAX_FACTOR` as well, as FOLConfig's are; a
    learning rate (``rate``) at least :data:`fol.train.MIN_RATE` too, and so another step
    size or scale that acts as 0 in float32 below it (``small``: why, and what 0 means
    when ``allow_zero``: 0 itself stays accepted then);
    at most ``at_most`` when given (a decay factor: 1). Named as by :func:`check_positive_int`."""
    where = owner or f"methods.{method}"
    ok = is_finite_number(value) and (float(value) >= 0 if allow_zero else float(value) > 0)
    if not ok:
        raise ConfigError(f"{where}.{name} must be a {'non-negative' if allow_zero else 'positive'} number, got {shown(value)}")
    if factor and float(value) > MAX_FACTOR:
        raise ConfigError(f"{where}.{too_large(name, value)}")
    if (rate or small is not None) and 0 < float(value) < MIN_RATE:  # 0 itself: refused above unless allowed
        raise ConfigError(f"{where}.{too_small_rate(name, value, *(small or ()))}")
    if at_most is not None and float(value) > at_most:
        raise ConfigError(f"{where}.{name} must be at most {at_most:g}, got {shown(value)}")
    return float(value)


# ------------------------------------------------------------ swarm helpers


def require_homogeneous(ctx: SwarmContext, method: str, why: str = "averages parameters") -> ModelSpec:
    """The one architecture of the swarm; a ConfigError naming ``method`` (and
    ``why`` it needs one) when the nodes hold different architectures."""
    if not ctx.nodes:
        raise ConfigError(f"method {method!r} needs at least one node")
    spec = ctx.nodes[0].spec
    others = sorted({n.spec.arch for n in ctx.nodes if n.spec != spec})
    if others:
        raise ConfigError(
            f"method {method!r} {why} and needs one architecture for every node; "
            f"got {spec.arch!r} and {', '.join(map(repr, others))}"
        )
    return spec


def init_seed_of(ctx: SwarmContext) -> int:
    """Seed of the swarm's shared initialization (``NodeSetup.init_seed``)."""
    seeds = {n.init_seed for n in ctx.nodes}
    if len(seeds) != 1:
        raise ConfigError(f"nodes were initialized from different seeds {sorted(seeds)}; a global model needs one")
    return seeds.pop()


def shared_init(ctx: SwarmContext, spec: ModelSpec) -> nn.Module:
    """The shared, seed-derived initialization of ``spec`` (FedAvg's starting point)."""
    return build_model(spec, seed=init_seed_of(ctx))


def sample_round(ctx: SwarmContext, round_index: int, fraction: float, rng: np.random.Generator) -> list[int]:
    """Nodes taking part in round ``round_index``: the contact plan's participants,
    sub-sampled to ``max(1, round(fraction * n))`` of them (sorted) when
    ``fraction < 1``."""
    avail = ctx.participants_in(round_index)
    if fraction >= 1.0 or len(avail) <= 1:
        return sorted(avail)
    k = max(1, int(round(fraction * len(avail))))
    return sorted(int(i) for i in rng.choice(avail, size=k, replace=False))


def local_config(ctx: SwarmContext, epochs: int, seed: int, lr: float | None = None, **over) -> TrainConfig:
    """The swarm's shared training settings with this method's local epochs,
    learning rate and a per-(node, round) seed; early stopping off (federated
    local updates run a fixed number of epochs). A divergence names the stage
    'local update', not the swarm's 'pretrain' its other settings come from."""
    fields = dict(epochs=epochs, seed=seed, patience=0, progress=False, desc="local update")
    if lr is not None:
        fields["lr"] = lr
    fields.update(over)
    return replace(ctx.train, **fields)


def normalized_weights(weights: Sequence[float]) -> torch.Tensor:
    """``weights`` scaled to sum to 1 (float64); equal weights when they sum to 0
    (every participant trained on an empty split, so each update is the model
    it downloaded), never a division by zero."""
    w = torch.tensor([float(x) for x in weights], dtype=torch.float64)
    total = w.sum()
    return w / total if total > 0 else torch.full_like(w, 1.0 / max(1, len(w)))


def weighted_average(states: Sequence[Mapping[str, torch.Tensor]], weights: Sequence[float],
                     keys: Iterable[str] | None = None) -> dict[str, torch.Tensor]:
    """Weighted mean of the tensors ``keys`` (default: all) of ``states``
    (weights as :func:`normalized_weights` scales them); integer tensors
    (BatchNorm's ``num_batches_tracked``) are rounded back."""
    w = normalized_weights(weights)
    out = {}
    for key in keys if keys is not None else states[0].keys():
        stacked = torch.stack([s[key].to(torch.float64) for s in states])
        mean = (stacked * w.view(-1, *([1] * (stacked.dim() - 1)))).sum(0)
        ref = states[0][key]
        out[key] = mean.round().to(ref.dtype) if not ref.is_floating_point() else mean.to(ref.dtype)
    return out


_MACS_CACHE: dict[str, int] = {}


def node_macs(spec: ModelSpec, input_shape: Sequence[int]) -> int:
    """Forward MACs of one dense ``spec`` model on one input (cached per spec)."""
    key = f"{spec.to_dict()}|{tuple(input_shape)}"
    if key not in _MACS_CACHE:
        _MACS_CACHE[key] = forward_macs(build_model(spec), tuple(input_shape))
    return _MACS_CACHE[key]


def masked_macs_ratio(model: nn.Module, masks: Mapping[str, torch.Tensor], input_shape: Sequence[int]) -> float:
    """Share of the Conv2d / Linear multiply-accumulates that survive the weight
    ``masks`` (key ``<layer>.weight``; a layer's MACs are its non-zero weights
    times its output positions). Used to scale training FLOPs of sparse models."""
    spatial: dict[str, int] = {}
    hooks = []
    for name, mod in model.named_modules():
        if isinstance(mod, (nn.Conv2d, nn.Linear)):
            def hook(m, inp, out, name=name):
                spatial[name] = int(out[0, 0].numel()) if isinstance(m, nn.Conv2d) else 1
            hooks.append(mod.register_forward_hook(hook))
    try:
        with layer_modes_kept(model), torch.no_grad():
            model.eval()
            model(torch.zeros(1, *input_shape))
    finally:
        for h in hooks:
            h.remove()
    dense = kept = 0.0
    mods = dict(model.named_modules())
    for name, pos in spatial.items():
        w = mods[name].weight
        dense += w.numel() * pos
        m = masks.get(f"{name}.weight")
        kept += (float(m.sum()) if m is not None else w.numel()) * pos
    return kept / dense if dense else 1.0


def train_flops_of(spec: ModelSpec, input_shape: Sequence[int], samples_seen: int, ratio: float = 1.0) -> int:
    """Training FLOPs of ``samples_seen`` samples on ``spec`` at ``ratio`` of its dense MACs."""
    return training_flops(int(round(node_macs(spec, input_shape) * ratio)), samples_seen)


def node_result(node: NodeSetup, method: str, model: nn.Module | None, ledger: Ledger, *,
                test_accuracy: float | None = None, val_accuracy: float | None = None,
                extra: dict | None = None, kept_local: bool = False) -> NodeResult:
    """Evaluate ``model`` on the node's test and validation splits (unless the
    accuracies are given) and wrap the ledger into a NodeResult."""
    if test_accuracy is None:
        test_accuracy = evaluate(model, *node.data.test.tensors()).accuracy
    if val_accuracy is None:
        val_accuracy = evaluate(model, *node.data.val.tensors()).accuracy
    return NodeResult(
        node=node.name, method=method, test_accuracy=float(test_accuracy), val_accuracy=float(val_accuracy),
        bytes_up=int(ledger.bytes_up), bytes_down=int(ledger.bytes_down), train_flops=int(ledger.train_flops),
        rounds=int(ledger.rounds), kept_local=kept_local, extra=dict(extra or {}),
    )


def most_common_spec(nodes: Sequence[NodeSetup]) -> ModelSpec:
    """The architecture most nodes hold (ties: the one that appears first)."""
    counts = Counter(json_key(n.spec) for n in nodes)
    best = max(counts.values())
    for n in nodes:
        if counts[json_key(n.spec)] == best:
            return n.spec
    raise ConfigError("no nodes")  # pragma: no cover


def json_key(spec: ModelSpec) -> str:
    import json

    return json.dumps(spec.to_dict(), sort_keys=True)


class grad_mask_hooks:
    """Context manager multiplying the gradient of each parameter named in
    ``masks`` by its 0/1 mask. The optimizer's own weight decay still moves
    non-zero masked-out entries: use :func:`masked_fit` to freeze them exactly."""

    def __init__(self, model: nn.Module, masks: Mapping[str, torch.Tensor]) -> None:
        self.model, self.masks, self.handles = model, masks, []

    def __enter__(self) -> "grad_mask_hooks":
        params = dict(self.model.named_parameters())
        for name, mask in self.masks.items():
            if name in params:
                m = mask.to(params[name].dtype)
                self.handles.append(params[name].register_hook(lambda g, m=m: g * m))
        return self

    def __exit__(self, *exc) -> None:
        for h in self.handles:
            h.remove()


def masked_fit(model: nn.Module, data: Sequence[torch.Tensor], cfg: TrainConfig, masks: Mapping[str, torch.Tensor],
               objective=None):
    """:func:`fol.train.fit` with the parameters named in ``masks`` updated only
    where their mask is 1; every other entry keeps its value exactly.

    Gradients are masked by hooks and the weight decay of ``cfg`` is applied as
    the equivalent L2 term ``wd / 2 * ||m * p||^2`` on the trainable entries
    only (SGD's built-in weight decay would also shrink the frozen ones)."""
    from fol.train import cross_entropy_objective, fit

    base = objective or cross_entropy_objective
    wd = float(cfg.weight_decay)
    params = dict(model.named_parameters())
    mask_t = {n: masks[n].to(params[n].dtype) for n in masks if n in params}

    def masked_objective(net: nn.Module, batch: Sequence[torch.Tensor]) -> torch.Tensor:
        loss = base(net, batch)
        if wd > 0:
            reg = sum(((p * mask_t[n]) ** 2).sum() if n in mask_t else (p ** 2).sum() for n, p in params.items())
            loss = loss + 0.5 * wd * reg
        return loss

    cfg0 = replace(cfg, weight_decay=0.0)
    with grad_mask_hooks(model, masks):
        return fit(model, data, cfg0, objective=masked_objective)


def state_of(model: nn.Module) -> dict[str, torch.Tensor]:
    """A detached copy of ``model``'s state dict."""
    return {k: v.detach().clone() for k, v in model.state_dict().items()}
