"""Hermes (Li et al., MobiCom 2021): structured-pruned personalized subnetworks.

Each node learns a channel-sparse subnetwork and the virtual server averages
only the parameters where the subnetworks intersect (a
:class:`~fol.methods.server.ServerMethod`):

* **Local training with structured sparsity** (Sec. 3.2, Eq. 2-3): the loss is
  cross-entropy + ``lam`` x group lasso over the filters *and* input channels
  of every conv layer and the rows *and* columns of every linear layer.
* **Pruning** (Algorithm 1, lines 9-11): at the start of a round the node
  evaluates its current subnetwork on its validation split; if the accuracy
  exceeds ``acc_threshold`` and it has not reached r_target (``target``, read
  as in ``target_share`` below), it removes the lowest-L1-norm output channels
  of every prunable layer (each Conv2d / hidden Linear, never the classifier)
  so that the pruned share of channels grows by ``prune_rate`` (capped at
  r_target). A pruned channel is zeroed in the layer *and* in the BatchNorm
  that normalizes it, so it outputs exactly 0. Masks only ever shrink.
* **Training under the mask** (line 15): ``local_epochs`` epochs with the
  gradients of pruned entries masked to zero.
* **Communication**: the node uploads the parameters inside its subnetwork
  plus its binary mask at one bit per masked position; the server sends back
  the updated subnetwork (no mask: the node knows it).
* **Personalization-preserving aggregation** (Sec. 3.3, Fig. 5): per entry,
  the values kept by *every* participant of the round (the intersection) are
  replaced by their training-set-size weighted average; all other entries of
  each participant's model are left untouched. ``intersection`` sets what an
  entry's mask is:

  - ``"parameter"`` (default, the paper: "only the parameters that are
    intersected across the subnetworks are averaged", Sec. 3.1 and 3.3,
    Fig. 5): a pruned channel removes its filter, its BatchNorm entries
    *and* its outgoing connections: the next layer's input slice and, for
    the last hidden layer, the classifier's column. The dependencies are
    traced with torch-pruning's ``DependencyGraph`` (flatten, residual and
    depthwise couplings included), so those outgoing weights stay personal
    to the nodes that kept the channel;
  - ``"channel"``: only the pruned layer's own output-channel tensors carry a
    mask; every other tensor (next-layer inputs, the classifier) is averaged
    over all participants, as in Plato's re-implementation (this toolkit's
    earlier behaviour).

  Tensors without a mask (the classifier's bias, BatchNorm of unmasked
  layers) are averaged over all participants.

Options and defaults (paper Sec. 5.2): ``prune_rate = 0.2`` (r_p),
``acc_threshold = 0.5``, ``target = 0.3`` (r_target), ``local_epochs = 5``.
``target_share`` says what r_target measures. Algorithm 1 (line 10) compares
the current *pruning* rate with r_target, which reads r_target as the pruned
share (``"pruned"``; also Plato's reading). Sec. 5.6 (Table 2: "a smaller
r_target results in a more compact subnetwork", communication cost 0.54 at
0.3 versus 1 at 0.8) and Sec. 5.7 (Table 3, r_target = 0.3: 161 MB against
537 MB dense, 30 %) read it as the *kept* share, which is the default
(``"kept"``): nodes prune until at most ``target`` of their prunable channels
remain. ``init`` is where every node starts: ``"global"`` (default, the
paper: the server initializes one dense model with random parameters and
distributes it, Sec. 3.1 and Algorithm 1 line 1; here the swarm's shared
seed-derived initialization, downloaded once at a node's first round) or
``"pretrained"`` (each node's own pretrained model). A node that never takes
part keeps its pretrained model. A node that first takes part in a later
round starts from the initial model too (Algorithm 1, line 6, hands it the
current global model under its mask; the aggregation here keeps one model per
node, so there is no single current global model to hand it). ``lam`` (lambda of Eq. 3) is not published:
1e-4 is this project's choice for the small CNNs used on CPU.

Training FLOPs are scaled by the share of conv/linear MACs the mask keeps.
Bytes: the values inside the subnetwork up and down each round plus the
mask at one bit per masked position up (and, with ``init = "global"``, the
dense initial model down once).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Sequence

import copy

import torch
import torch.nn.functional as F
import torch_pruning as tp
from torch import nn

from fol.accounting import mask_bytes, model_bytes
from fol.data import NodeData
from fol.errors import ConfigError
from fol.methods._common import (
    Ledger, check_fraction, check_positive, check_unit, masked_fit, masked_macs_ratio, normalized_weights, shared_init,
    state_of,
)
from fol.methods.base import SwarmContext, register
from fol.methods.server import ServerMethod, Traffic
from fol.models import ModelSpec, build_model
from fol.pruning import gate_sites, prunable_layers
from fol.train import TrainConfig, evaluate, layer_modes_kept
from swarmbase.tomlcheck import shown

__all__ = [
    "HermesMethod", "channel_groups", "channel_slices", "element_masks", "group_lasso", "prune_channels",
    "intersection_aggregate", "HermesTask", "hermes_client_update",
]


def channel_groups(model: nn.Module, input_shape: Sequence[int]) -> dict[str, list[str]]:
    """For every prunable layer (Conv2d / hidden Linear), the state-dict keys
    whose first dimension indexes its output channels: its own weight / bias
    and those of the affine BatchNorm fed directly by its output (the same
    tracing FOL's gates use, :func:`fol.pruning.gate_sites`)."""
    layers = prunable_layers(model)
    with layer_modes_kept(model):
        model.eval()  # the trace must not touch BatchNorm statistics
        sites = gate_sites(model, torch.zeros(1, *input_shape), layers)
    state = model.state_dict()
    groups: dict[str, list[str]] = {}
    for name, mod in layers.items():
        keys = [f"{name}.weight"] + ([f"{name}.bias"] if getattr(mod, "bias", None) is not None else [])
        bn = sites[name]
        if bn != name:
            keys += [f"{bn}.{s}" for s in ("weight", "bias", "running_mean", "running_var") if f"{bn}.{s}" in state]
        groups[name] = keys
    return groups


#: One tensor slice a channel lives in: (state-dict key, dimension, indices along it).
Slice = tuple[str, int, list[int]]


def channel_slices(model: nn.Module, input_shape: Sequence[int], level: str = "parameter") -> dict[str, list[list[Slice]]]:
    """For every prunable layer and each of its output channels, the tensor
    slices that belong to that channel.

    ``level = "channel"``: the layer's own weight / bias rows and its
    BatchNorm's entries (:func:`channel_groups`). ``level = "parameter"``:
    also every parameter that reads the channel (the next layer's input
    slice, the classifier's column, coupled residual branches), found with
    torch-pruning's dependency graph.

    >>> from fol.models import ModelSpec, build_model
    >>> s = channel_slices(build_model(ModelSpec("cnn-small", 2, 3, 16)), (3, 16, 16))
    >>> [sl for sl in s["classifier.1"][5] if sl[0].startswith("classifier.3")]
    [('classifier.3.weight', 1, [5])]
    """
    if level not in ("parameter", "channel"):
        raise ConfigError(f"intersection must be 'parameter' or 'channel', got {shown(level)}")
    layers = prunable_layers(model)
    if level == "channel":
        groups = channel_groups(model, input_shape)
        return {name: [[(key, 0, [c]) for key in groups[name]] for c in range(int(mod.weight.shape[0]))]
                for name, mod in layers.items()}
    traced = copy.deepcopy(model).eval()
    names = {id(m): n for n, m in traced.named_modules()}
    keys = set(traced.state_dict())
    graph = tp.DependencyGraph().build_dependency(traced, example_inputs=torch.zeros(1, *input_shape))
    out: dict[str, list[list[Slice]]] = {}
    for name, mod in layers.items():
        layer = traced.get_submodule(name)
        fn = tp.prune_conv_out_channels if isinstance(layer, nn.Conv2d) else tp.prune_linear_out_channels
        per_channel = []
        for c in range(int(mod.weight.shape[0])):
            slices: list[Slice] = []
            for item in graph.get_pruning_group(layer, fn, idxs=[c]):
                target = item.dep.target.module
                prefix = names.get(id(target))
                if prefix is None:
                    continue
                idxs = sorted({int(getattr(i, "idx", i)) for i in item.idxs})
                reads = getattr(item.dep.handler, "__name__", "") == "prune_in_channels"
                if isinstance(target, (nn.Conv2d, nn.Linear)) and reads and not (
                        isinstance(target, nn.Conv2d) and target.groups > 1):
                    slices.append((f"{prefix}.weight", 1, idxs))
                    continue
                for part in ("weight", "bias", "running_mean", "running_var"):
                    if f"{prefix}.{part}" in keys:
                        slices.append((f"{prefix}.{part}", 0, idxs))
            per_channel.append(slices)
        out[name] = per_channel
    return out


def element_masks(channel_masks: Mapping[str, torch.Tensor], slices: Mapping[str, list[list[Slice]]],
                  state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Per-entry boolean masks of every tensor a channel lives in: an entry is
    kept unless a pruned channel covers it (:func:`channel_slices`)."""
    out = {key: torch.ones(state[key].shape, dtype=torch.bool)
           for per in slices.values() for ch in per for key, _, _ in ch}
    for layer, cm in channel_masks.items():
        for c in (~cm).nonzero().flatten().tolist():
            for key, dim, idxs in slices[layer][c]:
                out[key].index_fill_(dim, torch.tensor(idxs, dtype=torch.long), False)
    return out


def _gnorm(t: torch.Tensor, dims: tuple[int, ...]) -> torch.Tensor:
    # sqrt(sum w^2 + eps): differentiable at an all-zero (pruned) group
    return torch.sqrt((t * t).sum(dim=dims) + 1e-12)


def group_lasso(model: nn.Module) -> torch.Tensor:
    """Eq. 2: sum of L2 norms of the filters and input channels of every conv
    layer and of the rows and columns of every linear layer."""
    terms = []
    for mod in model.modules():
        if isinstance(mod, nn.Conv2d):
            w = mod.weight
            terms += [_gnorm(w, (1, 2, 3)).sum(), _gnorm(w, (0, 2, 3)).sum()]
        elif isinstance(mod, nn.Linear):
            w = mod.weight
            terms += [_gnorm(w, (1,)).sum(), _gnorm(w, (0,)).sum()]
    return torch.stack(terms).sum() if terms else torch.zeros(())


def pruned_share(channel_masks: Mapping[str, torch.Tensor]) -> float:
    """Share of prunable output channels removed so far."""
    total = sum(int(m.numel()) for m in channel_masks.values())
    kept = sum(int(m.sum()) for m in channel_masks.values())
    return 1.0 - kept / total if total else 0.0


def prune_channels(model: nn.Module, channel_masks: Mapping[str, torch.Tensor], share: float) -> dict[str, torch.Tensor]:
    """New channel masks with ``share`` of every prunable layer's channels removed
    (at least one kept): the alive channels with the smallest L1 norm go first.
    The result is always a subset of ``channel_masks``."""
    mods = dict(model.named_modules())
    out = {}
    for name, cm in channel_masks.items():
        w = mods[name].weight.detach()
        n = int(cm.numel())
        n_pruned = min(n - 1, int(round(share * n)))
        already = n - int(cm.sum())
        extra = max(0, n_pruned - already)
        new = cm.clone()
        if extra:
            norms = w.abs().flatten(1).sum(1)
            norms = torch.where(cm, norms, torch.full_like(norms, float("inf")))
            drop = torch.argsort(norms, stable=True)[:extra]
            new[drop] = False
        out[name] = new
    return out


def intersection_aggregate(states: Sequence[Mapping[str, torch.Tensor]],
                           masks: Sequence[Mapping[str, torch.Tensor]],
                           weights: Sequence[float]) -> list[dict[str, torch.Tensor]]:
    """Hermes' personalization-preserving aggregation.

    For a tensor with per-entry masks, the entries kept by every participant
    get the weighted average over participants; every other entry keeps each
    participant's own value. Tensors without a mask are averaged over all
    participants (integer buffers rounded). Returns one new state per participant.
    """
    w = normalized_weights(weights)
    out = [dict(s) for s in states]
    for key in states[0]:
        stacked = torch.stack([s[key].to(torch.float64) for s in states])
        mean = (stacked * w.view(-1, *([1] * (stacked.dim() - 1)))).sum(0)
        ref = states[0][key]
        if key in masks[0]:
            inter = torch.stack([m[key] for m in masks]).all(0)
            for i, s in enumerate(states):
                out[i][key] = torch.where(inter, mean.to(ref.dtype), s[key])
        else:
            avg = mean.round().to(ref.dtype) if not ref.is_floating_point() else mean.to(ref.dtype)
            for i in range(len(states)):
                out[i][key] = avg.clone()
    return out


@dataclass
class HermesTask:
    """One node's Hermes round (picklable)."""

    spec: ModelSpec
    state: dict[str, torch.Tensor]
    channel_masks: dict[str, torch.Tensor]
    slices: dict[str, list[list[Slice]]]
    data: NodeData
    cfg: TrainConfig
    prune_rate: float
    acc_threshold: float
    max_pruned: float  # pruned-share cap: r_target, or 1 - r_target when r_target is the kept share
    lam: float


@dataclass
class HermesUpdate:
    state: dict[str, torch.Tensor]
    channel_masks: dict[str, torch.Tensor]
    val_accuracy_before: float
    pruned: bool
    samples_seen: int
    macs_ratio: float


def hermes_client_update(task: HermesTask) -> HermesUpdate:
    """Algorithm 1, ClientUpdate: evaluate, maybe prune, train under the mask."""
    model = build_model(task.spec)
    model.load_state_dict(task.state)
    acc = evaluate(model, *task.data.val.tensors()).accuracy
    masks = task.channel_masks
    share = pruned_share(masks)
    did_prune = False
    if acc > task.acc_threshold and share < task.max_pruned - 1e-9:
        masks = prune_channels(model, masks, min(task.max_pruned, share + task.prune_rate))
        did_prune = True
    elem = element_masks(masks, task.slices, task.state)
    with torch.no_grad():  # W_k <- W_k * M_k
        for key, param in model.state_dict().items():
            if key in elem:
                param.mul_(elem[key].to(param.dtype))
    lam = task.lam

    def objective(net: nn.Module, batch: Sequence[torch.Tensor]) -> torch.Tensor:
        loss = F.cross_entropy(net(batch[0]), batch[1])
        return loss + lam * group_lasso(net) if lam > 0 else loss

    hist = masked_fit(model, task.data.train.tensors(), task.cfg, elem, objective=objective)
    with torch.no_grad():  # running statistics of removed channels: keep them at 0 as well
        for key, param in model.state_dict().items():
            if key in elem:
                param.mul_(elem[key].to(param.dtype))
    shape = task.data.train.images.shape[1:]
    ratio = masked_macs_ratio(model, {k: v for k, v in elem.items() if k.endswith(".weight")}, shape)
    return HermesUpdate(state_of(model), masks, acc, did_prune, hist.samples_seen, ratio)


def subnetwork_bytes(state: Mapping[str, torch.Tensor], elem: Mapping[str, torch.Tensor]) -> int:
    """Bytes of the values inside the subnetwork: kept entries of masked
    tensors plus every unmasked tensor."""
    total = 0
    for key, t in state.items():
        if key in elem:
            total += int(elem[key].sum()) * t.element_size()
        else:
            total += t.numel() * t.element_size()
    return total


@register
class HermesMethod(ServerMethod):
    """Hermes: structured-pruned personalized subnetworks, intersection-only averaging."""

    name: ClassVar[str] = "hermes"
    description: ClassVar[str] = "Hermes: structured-sparse personal subnetworks (multi-round, server)"
    rng_salt: ClassVar[int] = 0x4E2

    def __init__(self, prune_rate: float = 0.2, acc_threshold: float = 0.5, target: float = 0.3,
                 lam: float = 1e-4, intersection: str = "parameter", target_share: str = "kept",
                 init: str = "global", **common) -> None:
        super().__init__(**common)
        self.prune_rate = check_fraction(self.name, "prune_rate", prune_rate)
        self.acc_threshold = check_unit(self.name, "acc_threshold", acc_threshold)
        self.target = check_unit(self.name, "target", target, closed=False)
        self.lam = check_positive(self.name, "lam", lam, allow_zero=True, factor=True)
        for opt, value, choices in (("intersection", intersection, ("parameter", "channel")),
                                    ("target_share", target_share, ("kept", "pruned")),
                                    ("init", init, ("global", "pretrained"))):
            if value not in choices:
                raise ConfigError(f"methods.{self.name}.{opt} must be one of {', '.join(map(repr, choices))}, got {shown(value)}")
        if target_share == "kept" and self.target == 0.0:
            raise ConfigError(f"methods.{self.name}.target must be > 0 when target_share = 'kept' (some channels must remain)")
        self.intersection, self.target_share, self.init = intersection, target_share, init

    @property
    def max_pruned(self) -> float:
        """Pruned share at which a node stops pruning."""
        return self.target if self.target_share == "pruned" else 1.0 - self.target

    def setup(self, ctx: SwarmContext) -> dict[str, Any]:
        spec = ctx.nodes[0].spec
        shape = ctx.nodes[0].data.train.images.shape[1:]
        model = build_model(spec)
        slices = channel_slices(model, shape, self.intersection)
        full = {name: torch.ones(len(per), dtype=torch.bool) for name, per in slices.items()}
        if self.init == "global":
            init = shared_init(ctx, spec)
            states = [state_of(init) for _ in ctx.nodes]
            dense = model_bytes(init)
        else:
            states = [state_of(n.pretrained) for n in ctx.nodes]
            dense = 0
        masked = element_masks(full, slices, model.state_dict())
        return {"slices": slices, "states": states, "masks": [dict(full) for _ in ctx.nodes], "dense": dense,
                "joined": [False] * len(ctx.nodes), "n_masked": sum(m.numel() for m in masked.values())}

    def client_fn(self, state: dict, round_index: int):
        return hermes_client_update

    def client_task(self, state: dict, ctx: SwarmContext, r: int, k: int, cfg: TrainConfig) -> HermesTask:
        return HermesTask(ctx.nodes[k].spec, state["states"][k], state["masks"][k], state["slices"],
                          ctx.nodes[k].data, cfg, self.prune_rate, self.acc_threshold, self.max_pruned, self.lam)

    def aggregate(self, state: dict, ctx: SwarmContext, r: int, picked: list[int],
                  ups: list[HermesUpdate]) -> list[Traffic]:
        elems = [element_masks(u.channel_masks, state["slices"], u.state) for u in ups]
        new_states = intersection_aggregate([u.state for u in ups], elems, [len(ctx.nodes[k].data.train) for k in picked])
        traffic = []
        for k, up, elem, new in zip(picked, ups, elems, new_states):
            sub = subnetwork_bytes(up.state, elem)
            first = 0 if state["joined"][k] else state["dense"]  # the initial global model, once
            traffic.append(Traffic(sub + mask_bytes(state["n_masked"]), sub + first, up.samples_seen, up.macs_ratio,
                                   note={"pruned_share": pruned_share(up.channel_masks), "pruned_now": up.pruned,
                                         "val_before": up.val_accuracy_before}))
            state["states"][k], state["masks"][k], state["joined"][k] = new, up.channel_masks, True
        return traffic

    def node_state(self, state: dict, ctx: SwarmContext, k: int) -> dict[str, torch.Tensor]:
        if not state["joined"][k]:  # never reached the server: keeps its own pretrained model
            return state_of(ctx.nodes[k].pretrained)
        return state["states"][k]

    def initial_flops(self, ctx: SwarmContext, k: int) -> int:
        return ctx.nodes[k].pretrain_flops if self.init == "pretrained" else 0

    def kept_local(self, state: dict, ctx: SwarmContext, k: int, ledger: Ledger) -> bool:
        return ledger.rounds == 0

    def result_extra(self, state: dict, ctx: SwarmContext, k: int, ledger: Ledger) -> dict[str, Any]:
        return {"pruned_share": pruned_share(state["masks"][k]), "history": ledger.history}
