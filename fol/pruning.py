"""FOL's alignment-aware structured pruning of a received neighbour model.

Given a neighbour model phi_j (already fine-tuned on the node's ``D_train``;
its weights stay **frozen**) and the node's own current model theta_k, learn one
gate alpha per output channel (``Conv2d``) / output neuron (``Linear``) of every
prunable layer of phi_j by minimizing (paper: "Collect and Align", step 2)::

    CE(f_j(x; phi_j, alpha), y)
      + lambda_p       * sum_{(l,l') shared}  sum_i || alpha_{l,i} w^(j)_{l,i} - w^(k)_{l',i} ||_2
      + gamma_shared   * sum_{l shared}       sum_i || alpha_{l,i} w^(j)_{l,i} ||_2
      + gamma_unshared * sum_{u unshared}     sum_i || alpha_{u,i} w^(j)_{u,i} ||_2

then fold the gates into the weights and remove, in every prunable layer, the
share ``ratio`` of channels with the smallest *gated norms*
``|alpha_i| * ||w_i||_2``, structurally, with torch-pruning's dependency graph
(coupled layers - batch norms, residual additions, depthwise convolutions,
squeeze-excitation blocks, the classifier input - shrink together and the
model stays valid). The result is ready for FOL's post fine-tuning.

The alignment term pulls alpha_i towards the projection coefficient
``<w^(j)_i, w^(k)_i> / ||w^(j)_i||^2``: filters of the neighbour that agree
with the node's own filter keep a gate near 1, filters the own model does not
share (near-orthogonal or zero) are driven towards 0 and are removed first.

Choices of this project where the paper is silent
-------------------------------------------------
* **Prunable layers**: every ``nn.Conv2d`` and ``nn.Linear`` except the final
  classifier, which is the last such layer in registration order (true for
  every model of :mod:`fol.models`). Depthwise convolutions are gated like any
  other conv (their channel is tied to their input channel; torch-pruning
  removes the coupled channels together, and the group's importance sums the
  gated norms of the expand conv, the depthwise conv and, in MobileNet, the
  squeeze-excitation ``fc2``).
* **w_{l,i}** is row i of the layer's weight (the output channel's filter,
  flattened); biases and batch-norm affine parameters are not part of it.
* **Shared layers** (:func:`match_shared_layers`): prunable layers of the two
  models with the same qualified module name, the same type and the same
  weight shape ("same role and parameter shape"). Identical architectures
  share every prunable layer; different ones share the compatible subset,
  possibly none (``cnn-small`` vs ``resnet-small`` share nothing, ``cnn-small``
  vs ``cnn`` with widths ``[16, 64]`` share ``features.0``). Filter i of the
  two models is comparable because nodes of one architecture start from one
  seed-derived initialization.
* **Where a gate acts**: as a per-channel scale on the layer's output *after*
  its batch norm when an affine ``BatchNorm`` directly consumes the layer's
  output (alpha = 0 then truly silences the channel, BN in eval mode), else on
  the layer's output; implemented with forward hooks. Gates start at 1, are
  plain ``nn.Parameter`` tensors trained by :func:`fol.train.fit` (Adam,
  ``weight_decay = 0``) while the network stays in eval mode (weights and BN
  running statistics frozen).
* **Folding**: ``BN.weight, BN.bias *= alpha`` (or ``weight, bias *= alpha``
  when the gate sits on the layer itself), which keeps the gated function
  exactly, before channels are removed.
* **Importance** (:class:`GatedNormImportance`): channel i of a dependency
  group scores ``sum over the group's gated layers of |alpha_i| * ||w_i||_2``
  (norms of the weights *before* folding); coupled layers without a gate
  contribute nothing, and a group without any gated layer is left unpruned.
* **Ratio**: local pruning (``global_pruning=False``, ``round_to=None``): every
  dependency group, hence every prunable layer, keeps
  ``floor(n * (1 - ratio))`` of its ``n`` channels (torch-pruning's rounding),
  but at least one: where that floor is 0 the layer keeps one channel.
  Layers with a single channel are never pruned.
* **Defaults** (``lambda_p = 3e-3``, ``gamma_shared = gamma_unshared = 1e-3``,
  Adam ``gate_lr = 0.05``, 3 epochs). Adam rescales each gate's gradient, so
  what matters is the *per-gate* pull of each term. With PyTorch's default
  initialization a filter norm is about 0.6, so the group lasso pulls every
  gate towards 0 with a force ``gamma * ||w_i|| ~ 6e-4`` - about the median
  ``|dCE/dalpha_i|`` measured on fine-tuned small CNNs (1e-4 to 4e-3): channels
  the task needs resist, the others shrink. The alignment term pulls alpha_i
  towards its projection coefficient with a force up to ``lambda_p * ||w_i||``;
  ``lambda_p > gamma_shared`` holds a filter that matches the own model's at
  alpha ~ 1 against the group lasso, while a filter the own model does not
  share is pushed to 0 by both. In sums, for a fine-tuned ``cnn-small`` the
  weighted alignment term is about 0.015-0.02, the weighted group lasso about
  0.065 and the cross-entropy 0.02-0.7.

Example (one neighbour, a few random images; takes about a second)::

    >>> import torch
    >>> from fol.models import ModelSpec, build_model
    >>> spec = ModelSpec("cnn-small", num_classes=2)
    >>> own, neighbour = build_model(spec, seed=0), build_model(spec, seed=0)
    >>> x, y = torch.randn(64, 3, 32, 32), torch.randint(0, 2, (64,))
    >>> result = align_and_prune(neighbour, own, (x, y), PruneConfig(gate_epochs=1))
    >>> result.report["channels"]["features.0"]
    [16, 11]
    >>> result.model(x[:4]).shape
    torch.Size([4, 2])
"""

from __future__ import annotations

import copy
import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F
import torch_pruning as tp
from torch import nn

from fol.defaults import MAX_ITERATIONS, too_many
from fol.errors import ConfigError, DataError
from fol.train import MAX_FACTOR, TrainConfig, fit, too_large

__all__ = [
    "PruneConfig",
    "PruneResult",
    "GatedNormImportance",
    "prunable_layers",
    "classifier_name",
    "match_shared_layers",
    "alignment_term",
    "group_lasso_term",
    "gate_sites",
    "GateHooks",
    "fold_gates",
    "align_and_prune",
    "prune_by_importance",
]

log = logging.getLogger(__name__)

_LAYER_TYPES = (nn.Conv2d, nn.Linear)
# torch-pruning's handlers that remove *output* channels of a Conv2d / Linear.
_OUT_CHANNEL_FNS = (
    tp.prune_conv_out_channels,
    tp.prune_depthwise_conv_out_channels,
    tp.prune_linear_out_channels,
)


# --------------------------------------------------------------------- config


@dataclass
class PruneConfig:
    """Hyperparameters of :func:`align_and_prune`.

    ``lambda_p`` weighs the alignment term, ``gamma_shared`` /
    ``gamma_unshared`` the group lasso on shared / unshared layers (all >= 0,
    unitless multipliers of sums of L2 norms, at most
    :data:`fol.train.MAX_FACTOR` as ``gate_lr`` is). ``ratio`` is the share of
    output channels removed from every prunable layer, in ``[0, 1)``.
    ``gate_epochs`` passes of Adam with learning rate ``gate_lr`` over the
    training data in mini-batches of ``batch_size`` learn the gates; ``seed``
    fixes the batch order.
    """

    lambda_p: float = 3e-3
    gamma_shared: float = 1e-3
    gamma_unshared: float = 1e-3
    ratio: float = 0.3
    gate_epochs: int = 3
    gate_lr: float = 0.05
    batch_size: int = 32
    seed: int = 0
    progress: bool = False

    def __post_init__(self) -> None:
        for name in ("lambda_p", "gamma_shared", "gamma_unshared"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"prune config field {name!r} must be a finite number >= 0, got {value!r}")
        if not isinstance(self.ratio, (int, float)) or not 0.0 <= self.ratio < 1.0:
            raise ConfigError(f"prune config field 'ratio' must be in [0, 1), got {self.ratio!r}")
        for name, low in (("gate_epochs", 0), ("batch_size", 1)):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ConfigError(f"prune config field {name!r} must be an integer >= {low}, got {value!r}")
        if self.gate_epochs > MAX_ITERATIONS:
            raise ConfigError(f"prune config field {too_many(repr('gate_epochs'), self.gate_epochs)}")
        if not isinstance(self.gate_lr, (int, float)) or not (math.isfinite(self.gate_lr) and self.gate_lr > 0):
            raise ConfigError(f"prune config field 'gate_lr' must be a finite number > 0, got {self.gate_lr!r}")
        for name in ("lambda_p", "gamma_shared", "gamma_unshared", "gate_lr"):
            if getattr(self, name) > MAX_FACTOR:
                raise ConfigError(f"prune config field {too_large(repr(name), getattr(self, name))}")


@dataclass
class PruneResult:
    """The pruned copy of the neighbour model and a JSON-serialisable report.

    ``report`` keys: ``shared_layers`` (list of ``[neighbour_name, own_name]``),
    ``gate_sites`` (layer -> module the gate scales), ``params_before`` /
    ``params_after``, ``macs_before`` / ``macs_after`` (multiply-accumulates of
    one forward pass on one input), ``channels`` (layer -> ``[before, after]``),
    ``removed_channels`` (layer -> removed output-channel indices),
    ``gate_history`` (per gate-training epoch, the batch means of ``task``,
    ``alignment``, ``group_lasso_shared``, ``group_lasso_unshared`` - the
    unweighted terms - and ``total``, the weighted objective),
    ``use_alignment``, ``config``, ``seconds`` (wall time).
    """

    model: nn.Module
    report: dict[str, Any]


# --------------------------------------------------------------------- layers


def classifier_name(model: nn.Module) -> str:
    """Qualified name of ``model``'s final classifier: its last ``Conv2d`` /
    ``Linear`` in registration order (the last layer of every zoo model)."""
    names = [n for n, m in model.named_modules() if isinstance(m, _LAYER_TYPES)]
    if not names:
        raise ConfigError(f"model {type(model).__name__} has no Conv2d or Linear layer to prune")
    return names[-1]


def prunable_layers(model: nn.Module) -> dict[str, nn.Module]:
    """Every ``Conv2d`` and ``Linear`` of ``model`` except the final classifier,
    by qualified name, in registration order.

    >>> from fol.models import ModelSpec, build_model
    >>> list(prunable_layers(build_model(ModelSpec("cnn-small", num_classes=2))))
    ['features.0', 'features.4', 'classifier.1']
    """
    head = classifier_name(model)
    return {n: m for n, m in model.named_modules() if isinstance(m, _LAYER_TYPES) and n != head}


def _compatible(a: nn.Module, b: nn.Module) -> bool:
    if type(a) is not type(b) or a.weight.shape != b.weight.shape:
        return False
    return not isinstance(a, nn.Conv2d) or a.groups == b.groups


def match_shared_layers(neighbour: nn.Module, own: nn.Module) -> list[tuple[str, str]]:
    """Pairs ``(neighbour_layer, own_layer)`` of prunable layers with the same
    qualified name, type and weight shape (this project's reading of "same role
    and parameter shape"), in the neighbour's registration order.

    >>> from fol.models import ModelSpec, build_model
    >>> small = build_model(ModelSpec("cnn-small", num_classes=2))
    >>> other = build_model(ModelSpec("cnn", num_classes=2, options={"widths": [16, 64]}))
    >>> match_shared_layers(small, other)
    [('features.0', 'features.0')]
    """
    own_layers = prunable_layers(own)
    return [
        (name, name)
        for name, layer in prunable_layers(neighbour).items()
        if name in own_layers and _compatible(layer, own_layers[name])
    ]


# ------------------------------------------------------------- penalty terms


def _rows(weight: torch.Tensor) -> torch.Tensor:
    """Weight as one row per output channel / neuron (w_{l,i} flattened)."""
    return weight.detach().flatten(1)


def _alignment(
    gates: Mapping[str, torch.Tensor], pairs: Sequence[tuple[str, torch.Tensor, torch.Tensor]]
) -> torch.Tensor:
    terms = [
        torch.linalg.vector_norm(gates[name].unsqueeze(1) * w_j - w_k, dim=1).sum() for name, w_j, w_k in pairs
    ]
    return torch.stack(terms).sum() if terms else torch.zeros(())


def _group_lasso(gates: Mapping[str, torch.Tensor], norms: Sequence[tuple[str, torch.Tensor]]) -> torch.Tensor:
    # ||alpha_i w_i||_2 = |alpha_i| * ||w_i||_2, with the norms precomputed (weights are frozen)
    terms = [(gates[name].abs() * norm).sum() for name, norm in norms]
    return torch.stack(terms).sum() if terms else torch.zeros(())


def alignment_term(
    neighbour: nn.Module,
    own: nn.Module,
    gates: Mapping[str, torch.Tensor],
    shared: Sequence[tuple[str, str]],
) -> torch.Tensor:
    """``sum_{(l,l') in shared} sum_i ||alpha_{l,i} w^(j)_{l,i} - w^(k)_{l',i}||_2``
    (differentiable in ``gates``; zero when nothing is shared).

    ``gates`` maps a neighbour layer name to its per-channel gate vector;
    ``shared`` is the output of :func:`match_shared_layers`.
    """
    pairs = []
    for name_j, name_k in shared:
        w_j = _rows(neighbour.get_submodule(name_j).weight)
        w_k = _rows(own.get_submodule(name_k).weight)
        if w_j.shape != w_k.shape or name_j not in gates:
            raise ConfigError(f"shared layer pair {name_j!r}/{name_k!r} has no gate or mismatched shapes")
        pairs.append((name_j, w_j, w_k))
    return _alignment(gates, pairs)


def group_lasso_term(model: nn.Module, gates: Mapping[str, torch.Tensor], layers: Sequence[str]) -> torch.Tensor:
    """``sum_{l in layers} sum_i ||alpha_{l,i} w_{l,i}||_2`` (the group-lasso
    norm ``||alpha_l ⊙ w_l||_{2,1}`` with one group per output channel)."""
    norms = [(n, _rows(model.get_submodule(n).weight).norm(dim=1)) for n in layers]
    return _group_lasso(gates, norms)


# ---------------------------------------------------------------------- gates


def gate_sites(
    model: nn.Module, example_input: torch.Tensor, layers: Mapping[str, nn.Module] | None = None
) -> dict[str, str]:
    """For each gated layer (default: :func:`prunable_layers`), the name of the
    module whose output its gate scales: the affine BatchNorm that directly
    consumes the layer's output, else the layer itself. Found by tracing one
    forward pass on ``example_input`` (no gradients, model mode unchanged).

    >>> from fol.models import ModelSpec, build_model
    >>> m = build_model(ModelSpec("cnn-small", num_classes=2))
    >>> gate_sites(m, torch.zeros(1, 3, 32, 32))
    {'features.0': 'features.1', 'features.4': 'features.5', 'classifier.1': 'classifier.1'}
    """
    if layers is None:
        layers = prunable_layers(model)
    layer_of_output: dict[int, str] = {}
    bn_inputs: dict[str, int] = {}
    keep: list[torch.Tensor] = []  # keeps traced tensors alive so that ids are not reused
    handles = []

    def on_layer(name: str):
        def hook(_m: nn.Module, _inp: Any, out: torch.Tensor) -> None:
            keep.append(out)
            layer_of_output[id(out)] = name

        return hook

    def on_bn(name: str):
        def hook(_m: nn.Module, inp: tuple[torch.Tensor, ...]) -> None:
            keep.append(inp[0])
            bn_inputs[name] = id(inp[0])

        return hook

    bns = {
        n: m for n, m in model.named_modules() if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.affine
    }
    try:
        for name, layer in layers.items():
            handles.append(layer.register_forward_hook(on_layer(name)))
        for name, bn in bns.items():
            handles.append(bn.register_forward_pre_hook(on_bn(name)))
        with torch.no_grad():
            model(example_input)
    finally:
        for h in handles:
            h.remove()
    sites = {name: name for name in layers}
    for bn_name, tensor_id in bn_inputs.items():
        layer_name = layer_of_output.get(tensor_id)
        if layer_name is not None:
            sites[layer_name] = bn_name
    return sites


def _channels(layer: nn.Module) -> int:
    return int(layer.weight.shape[0])


class GateHooks:
    """Forward hooks that scale each gated layer's output channels by its gate
    (``gates``: layer name -> vector, ``sites``: from :func:`gate_sites`).
    A context manager; the hooks go away on exit or :meth:`remove`.

    >>> from fol.models import ModelSpec, build_model
    >>> m = build_model(ModelSpec("cnn-small", num_classes=2)).eval()
    >>> x = torch.randn(2, 3, 32, 32)
    >>> gates = {n: torch.zeros(l.weight.shape[0]) for n, l in prunable_layers(m).items()}
    >>> with GateHooks(m, gates, gate_sites(m, x)):
    ...     silent = m(x)
    >>> torch.allclose(silent[0], m.classifier[-1].bias)
    True
    """

    def __init__(self, model: nn.Module, gates: Mapping[str, torch.Tensor], sites: Mapping[str, str]) -> None:
        self.handles = []
        for layer_name, site_name in sites.items():
            gate = gates[layer_name]

            def hook(_m: nn.Module, _inp: Any, out: torch.Tensor, gate: torch.Tensor = gate) -> torch.Tensor:
                return out * gate.view(1, -1, *([1] * (out.dim() - 2)))

            self.handles.append(model.get_submodule(site_name).register_forward_hook(hook))

    def remove(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles.clear()

    def __enter__(self) -> "GateHooks":
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


class _FrozenNet(nn.Module):
    """Wraps a network whose weights are frozen: ``train()`` keeps it in eval
    mode (batch-norm statistics and dropout fixed) while :func:`fit` trains
    only the gates."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.net = net

    def train(self, mode: bool = True) -> "_FrozenNet":
        self.training = mode
        self.net.eval()
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


@torch.no_grad()
def fold_gates(model: nn.Module, gates: Mapping[str, torch.Tensor], sites: Mapping[str, str]) -> None:
    """Multiply each gate into the parameters of the module it scales (in
    place): ``BN.weight, BN.bias *= alpha`` or ``weight, bias *= alpha``, so the
    model without hooks computes the gated function (eval mode)."""
    for layer_name, site_name in sites.items():
        alpha = gates[layer_name].detach()
        site = model.get_submodule(site_name)
        site.weight.mul_(alpha.view(-1, *([1] * (site.weight.dim() - 1))))
        if site.bias is not None:
            site.bias.mul_(alpha)


# ----------------------------------------------------------------- importance


class GatedNormImportance(tp.importance.Importance):
    """torch-pruning importance: channel i of a dependency group scores
    ``sum over the group's gated layers of |alpha_i| * ||w_i||_2``.

    ``gates`` maps a ``Conv2d`` / ``Linear`` module to its per-output-channel
    gate vector. The gated norms are computed from the modules' weights when
    the importance is *constructed*, so build it before folding the gates into
    the weights. Layers of a group without a gate (batch norms, the next
    layer's input channels, ungated layers) contribute nothing; a group with no
    gated layer gets no score and torch-pruning leaves it alone.

    >>> conv = nn.Conv2d(1, 3, 1, bias=False)
    >>> with torch.no_grad():
    ...     _ = conv.weight.copy_(torch.tensor([1.0, 2.0, 3.0]).view(3, 1, 1, 1))
    >>> imp = GatedNormImportance({conv: torch.tensor([1.0, 1.0, 0.1])})
    >>> imp.scores[conv]
    tensor([1.0000, 2.0000, 0.3000])
    """

    def __init__(self, gates: Mapping[nn.Module, torch.Tensor]) -> None:
        self.scores: dict[nn.Module, torch.Tensor] = {}
        for layer, alpha in gates.items():
            norms = _rows(layer.weight).norm(dim=1)
            alpha = torch.as_tensor(alpha).detach().to(norms)
            if alpha.shape != norms.shape:
                raise ConfigError(
                    f"gate of {type(layer).__name__} has shape {tuple(alpha.shape)}, expected {tuple(norms.shape)}"
                )
            self.scores[layer] = alpha.abs() * norms

    @torch.no_grad()
    def __call__(self, group: Any) -> torch.Tensor | None:
        n = len(group[0].idxs)
        total = torch.zeros(n)
        seen: set[int] = set()
        for i, (dep, idxs) in enumerate(group):
            layer = dep.layer
            if dep.pruning_fn not in _OUT_CHANNEL_FNS or layer not in self.scores or id(layer) in seen:
                continue
            seen.add(id(layer))  # a depthwise conv appears as in- and out-channel pruning
            root = torch.as_tensor(list(group[i].root_idxs), dtype=torch.long)
            total.scatter_add_(0, root, self.scores[layer][torch.as_tensor(list(idxs), dtype=torch.long)])
        return total if seen else None


def _one_channel_ratios(model: nn.Module, ratio: float) -> dict[nn.Module, float]:
    """Per-layer ratios for the prunable layers of ``model`` whose ``n`` channels
    torch-pruning would cut to ``int(n * (1 - ratio)) = 0``: a ratio that keeps
    exactly one. (torch-pruning refuses to empty a layer and then leaves it
    whole, so a higher ratio would prune less.)"""
    ratios = {}
    for layer in prunable_layers(model).values():
        n = _channels(layer)
        if n > 1 and int(n * (1 - ratio)) < 1:
            ratios[layer] = 1.0 - 1.5 / n  # int(n * 1.5 / n) = 1, safe from rounding
    return ratios


def _run_pruner(
    model: nn.Module, importance: tp.importance.Importance, ratio: float, example_input: torch.Tensor
) -> dict[str, list[int]]:
    names = {m: n for n, m in model.named_modules()}
    head = model.get_submodule(classifier_name(model))
    model.eval()
    pruner = tp.pruner.MetaPruner(
        model,
        example_input,
        importance=importance,
        pruning_ratio=ratio,
        pruning_ratio_dict=_one_channel_ratios(model, ratio) or None,
        global_pruning=False,
        ignored_layers=[head],
        round_to=None,
    )
    removed: dict[str, list[int]] = {}
    for group in pruner.step(interactive=True):
        for dep, idxs in group:
            if dep.pruning_fn in _OUT_CHANNEL_FNS and dep.layer in names:
                removed.setdefault(names[dep.layer], sorted(int(i) for i in idxs))
        group.prune()
    return removed


def _structural_prune(
    model: nn.Module, importance: tp.importance.Importance, ratio: float, example_input: torch.Tensor
) -> dict[str, list[int]]:
    """Remove ``ratio`` of the output channels of every dependency group of
    ``model`` (in place) ranked by ``importance``; returns layer -> removed
    output-channel indices. torch-pruning traces the graph through autograd,
    so every parameter is made trainable (``requires_grad=True``) first and
    stays so."""
    if ratio <= 0:
        return {}
    for p in model.parameters():
        p.requires_grad_(True)
    with torch.enable_grad():
        return _run_pruner(model, importance, ratio, example_input)


def prune_by_importance(
    model: nn.Module, importance: tp.importance.Importance, ratio: float, example_input: torch.Tensor
) -> nn.Module:
    """Structurally remove the share ``ratio`` (in ``[0, 1)``) of output
    channels with the lowest ``importance`` from every prunable layer of
    ``model`` (in place; returned for convenience). The final classifier keeps
    its outputs; coupled layers shrink together (torch-pruning dependency
    graph traced on ``example_input``, e.g. one input of shape ``(1, C, H, W)``).
    Every parameter of the returned model is trainable (``requires_grad``).

    >>> from fol.models import ModelSpec, build_model
    >>> m = build_model(ModelSpec("cnn-small", num_classes=2), seed=0)
    >>> m = prune_by_importance(m, tp.importance.MagnitudeImportance(), 0.5, torch.zeros(1, 3, 32, 32))
    >>> m.features[0].out_channels, m(torch.zeros(2, 3, 32, 32)).shape
    (8, torch.Size([2, 2]))
    """
    if not 0.0 <= ratio < 1.0:
        raise ConfigError(f"pruning ratio must be in [0, 1), got {ratio!r}")
    _structural_prune(model, importance, ratio, example_input)
    return model


# ------------------------------------------------------------------- pipeline


def _check_data(model: nn.Module, train: Any) -> tuple[torch.Tensor, torch.Tensor]:
    if not isinstance(train, (tuple, list)) or len(train) != 2:
        raise DataError("align_and_prune: train must be a pair (images, labels) of tensors")
    x, y = train
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
        raise DataError("align_and_prune: train images and labels must be torch tensors")
    if x.dim() < 2 or y.dim() != 1 or x.shape[0] != y.shape[0] or x.shape[0] == 0:
        raise DataError(
            f"align_and_prune: expected N >= 1 images (N, ...) and N labels (N,), got shapes "
            f"{tuple(x.shape)} and {tuple(y.shape)}"
        )
    if not x.is_floating_point() or y.dtype != torch.long:
        raise DataError(f"align_and_prune: expected float images and int64 labels, got {x.dtype} and {y.dtype}")
    classes = _channels(model.get_submodule(classifier_name(model)))
    if int(y.min()) < 0 or int(y.max()) >= classes:
        raise DataError(f"align_and_prune: labels must lie in [0, {classes}), got [{int(y.min())}, {int(y.max())}]")
    return x, y


def _ops_and_params(model: nn.Module, example: torch.Tensor) -> tuple[int, int]:
    macs, params = tp.utils.count_ops_and_params(model, example)
    return int(macs), int(params)


def align_and_prune(
    neighbour: nn.Module,
    own: nn.Module,
    train: tuple[torch.Tensor, torch.Tensor],
    cfg: PruneConfig,
    *,
    use_alignment: bool = True,
) -> PruneResult:
    """Learn gates on a copy of ``neighbour`` (frozen weights) against the
    node's ``own`` model on ``train = (images, labels)``, fold them, and remove
    ``cfg.ratio`` of the channels of every prunable layer by gated norm.

    Neither argument model is modified. ``use_alignment=False`` drops the
    alignment term (lambda_p = 0: group lasso only, an ablation). Returns the
    pruned model (eval mode, every parameter trainable, ready for post
    fine-tuning) and a report (see :class:`PruneResult`).
    """
    start = time.perf_counter()
    if not isinstance(cfg, PruneConfig):
        raise ConfigError(f"align_and_prune: cfg must be a PruneConfig, got {type(cfg).__name__}")
    x, y = _check_data(neighbour, train)
    example = x[:1].detach()

    model = copy.deepcopy(neighbour).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    layers = prunable_layers(model)
    shared = match_shared_layers(model, own)
    shared_names = {a for a, _ in shared}
    lambda_p = cfg.lambda_p if use_alignment else 0.0

    channels_before = {n: _channels(m) for n, m in layers.items()}
    macs_before, params_before = _ops_and_params(model, example)
    sites = gate_sites(model, example, layers)

    gates = {n: nn.Parameter(torch.ones(_channels(m))) for n, m in layers.items()}
    pairs = [
        (a, _rows(layers[a].weight).clone(), _rows(own.get_submodule(b).weight).clone()) for a, b in shared
    ]
    norms = {n: _rows(m.weight).norm(dim=1) for n, m in layers.items()}
    norms_shared = [(n, v) for n, v in norms.items() if n in shared_names]
    norms_unshared = [(n, v) for n, v in norms.items() if n not in shared_names]
    log.debug("align_and_prune: %d prunable layers, %d shared", len(layers), len(shared))

    history: dict[str, list[float]] = {
        k: [] for k in ("task", "alignment", "group_lasso_shared", "group_lasso_unshared", "total")
    }
    running: dict[str, list[float]] = {k: [] for k in history}

    def objective(net: nn.Module, batch: Sequence[torch.Tensor]) -> torch.Tensor:
        task = F.cross_entropy(net(batch[0]), batch[1])
        if lambda_p > 0:
            align = _alignment(gates, pairs)
        else:  # recorded for the ablation's report, not optimized
            with torch.no_grad():
                align = _alignment(gates, pairs)
        gl_s = _group_lasso(gates, norms_shared)
        gl_u = _group_lasso(gates, norms_unshared)
        total = task + lambda_p * align + cfg.gamma_shared * gl_s + cfg.gamma_unshared * gl_u
        for key, value in zip(running, (task, align, gl_s, gl_u, total)):
            running[key].append(float(value.detach()))
        return total

    hooks = GateHooks(model, gates, sites)
    try:
        if cfg.gate_epochs > 0:
            wrapper = _FrozenNet(model)
            opt = torch.optim.Adam(list(gates.values()), lr=cfg.gate_lr)
            epochs: Any = range(cfg.gate_epochs)
            if cfg.progress:
                from tqdm.auto import tqdm

                epochs = tqdm(epochs, desc="gates", leave=False, disable=None)
            for epoch in epochs:
                tcfg = TrainConfig(
                    epochs=1, batch_size=cfg.batch_size, lr=cfg.gate_lr, optimizer="adam",
                    weight_decay=0.0, seed=cfg.seed + epoch, desc="gates", lr_field="fol.gate_lr",
                )
                fit(wrapper, (x, y), tcfg, objective=objective, params=list(gates.values()), optimizer=opt)
                for key, values in running.items():
                    history[key].append(sum(values) / len(values))
                    values.clear()
                log.debug("gate epoch %d: %s", epoch, {k: round(v[-1], 5) for k, v in history.items()})
    finally:
        hooks.remove()

    # Importance from the gated norms of the unfolded weights, then fold.
    importance = GatedNormImportance({layers[n]: g.detach() for n, g in gates.items()})
    fold_gates(model, gates, sites)
    removed = _structural_prune(model, importance, cfg.ratio, example)

    for p in model.parameters():
        p.requires_grad_(True)
    model.eval()
    macs_after, params_after = _ops_and_params(model, example)
    after = {n: _channels(model.get_submodule(n)) for n in layers}
    report: dict[str, Any] = {
        "shared_layers": [[a, b] for a, b in shared],
        "gate_sites": dict(sites),
        "params_before": params_before,
        "params_after": params_after,
        "macs_before": macs_before,
        "macs_after": macs_after,
        "channels": {n: [channels_before[n], after[n]] for n in layers},
        "removed_channels": removed,
        "gate_history": history,
        "use_alignment": bool(use_alignment),
        "config": asdict(cfg),
        "seconds": time.perf_counter() - start,
    }
    log.info(
        "aligned and pruned %s: params %d -> %d, MACs %d -> %d, %d shared layers (%.2f s)",
        type(neighbour).__name__, params_before, params_after, macs_before, macs_after, len(shared),
        report["seconds"],
    )
    return PruneResult(model, report)
