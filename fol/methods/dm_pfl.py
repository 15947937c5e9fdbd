"""DM-PFL and DM-PFL+ (Huang et al., KDD 2023): dual-masked personalized FL.

One dense architecture carries two sparse models per node (Eq. 4): the global
model theta_g = w_g * m_g and the personalized model
theta_c = w_g * (m_g & m_c) + w_c * (m_c - m_g). Masks are unstructured, over
the weights of every Conv2d and Linear layer; biases and BatchNorm values are
dense and shared (global) in both models.

Training is the paper's two-phase pipeline, with the ``ctx.rounds`` rounds
the contact plan allows split between the phases (``phase1_share`` of them,
at least one, to phase 1; one iteration of the two phases):

* **Phase 1, train dual masks** (Algorithm 1). A participant receives m_g and
  w_g * m_g, overwrites its personal weights at m_g & m_c with the global ones,
  trains ``local_epochs`` epochs under m_c, and in every ``readjust_interval``-th
  round (rounds 0, interval, 2 x interval, ...) readjusts m_c: prune the
  ``readjust_ratio`` share of m_c with the smallest |w|, then regrow as many
  positions with the largest dense-gradient magnitude (a position pruned in the
  same step may grow back; newly grown weights start at 0, as in RigL / FedDST).
  It uploads w_c * m_c and m_c. The server aggregates w_g with the mask-wise
  weighted average of **Eq. 5** (positions no participant covers keep their
  previous value) and takes as new m_g the top ``1 - sparsity`` share of each
  tensor's positions by |w_g|, **ignoring positions selected by no more than
  ``min_client_share`` (30 %) of the participants**.
* **Phase 2a, refine global weights** (Algorithm 2): FedAvg under the fixed m_g.
* **Phase 2b, refine personalized weights** (Algorithm 3): every node receives
  m_g and w_g * m_g once, sets its shared positions to the global weights and
  trains only m_c - m_g locally (no upload).

``dm-pfl`` deploys theta_c. ``dm-pfl+`` adds the adaptive inference of
Algorithm 4: per test sample, with entropies E_c, E_g of the two models'
softmax outputs, their cosine similarity Sim and the base entropies BE_c, BE_g
(mean entropy on the node's validation split), predict with theta_c when
E_c - (1 - Sim) BE_c < E_g - (1 - Sim) BE_g, else with theta_g. Both come from
one training run (shared through ``ctx.cache``).

Defaults: ``sparsity = 0.5`` (S, paper A.1.4), ``readjust_ratio = 0.01`` and
``readjust_interval = 10`` (alpha_s and the interval, paper A.1.4, taken from
FedDST), ``min_client_share = 0.3`` (Sec. 3.3.2), ``local_epochs = 5``
(A.1.4: E = 5). Project choices, not in the paper: uniform per-layer sparsity
(the paper uses ERK), initial m_c = top-(1 - S) magnitude mask of the node's
pretrained weights and w_c = those weights, w_g = the swarm's shared
initialization with an empty m_g before the first aggregation, the readjust
interval counted in phase-1 rounds, cosine similarity of probabilities.

Accounting: values at one float each plus masks at one bit per position;
training FLOPs scaled by the share of conv/linear MACs the mask keeps (the
dense-gradient pass of a readjustment counts as dense).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import ClassVar, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from fol.accounting import mask_bytes
from fol.data import NodeData
from fol.methods._common import (
    Ledger, check_fraction, check_positive, check_positive_int, check_unit, local_config, masked_fit,
    masked_macs_ratio, node_result, require_homogeneous, sample_round, shared_init, state_of, train_flops_of,
    weighted_average,
)
from fol.methods.base import NodeResult, ServerMethod, SwarmContext, register
from fol.models import ModelSpec, build_model
from fol.train import TrainConfig, predict_logits

__all__ = [
    "DMPFLMethod", "DMPFLPlusMethod", "masked_keys", "magnitude_mask", "eq5_aggregate", "global_mask",
    "compose_personal", "readjust_mask", "adaptive_predict", "DMPFLRun",
]


# ------------------------------------------------------------------ masks


def masked_keys(model: nn.Module) -> list[str]:
    """State-dict keys carrying a mask: the weights of every Conv2d and Linear."""
    return [f"{n}.weight" for n, m in model.named_modules() if isinstance(m, (nn.Conv2d, nn.Linear))]


def magnitude_mask(t: torch.Tensor, keep: float, eligible: torch.Tensor | None = None) -> torch.Tensor:
    """Boolean mask of the ``round(keep * numel)`` largest-|t| entries (at least
    one), chosen among ``eligible`` entries only when given (fewer if fewer are eligible)."""
    n = t.numel()
    k = max(1, int(round(keep * n)))
    score = t.detach().abs().flatten().to(torch.float64)
    if eligible is not None:
        elig = eligible.flatten()
        k = min(k, int(elig.sum()))
        score = torch.where(elig, score, torch.full_like(score, -1.0))
    mask = torch.zeros(n, dtype=torch.bool)
    if k > 0:
        mask[torch.argsort(score, descending=True, stable=True)[:k]] = True
    return mask.view_as(t)


def eq5_aggregate(prev: Mapping[str, torch.Tensor], states: Sequence[Mapping[str, torch.Tensor]],
                  masks: Sequence[Mapping[str, torch.Tensor]], sizes: Sequence[float]) -> dict[str, torch.Tensor]:
    """Eq. 5: w_g on the union of the participants' masks becomes
    sum |D_c| w_c m_c / sum |D_c| m_c; other positions keep ``prev``. Unmasked
    (dense, shared) tensors get the plain size-weighted average."""
    out = dict(prev)
    dense = [k for k in states[0] if k not in masks[0]]
    out.update(weighted_average(states, sizes, dense) if dense else {})
    for key in masks[0]:
        num = sum(float(n) * s[key].to(torch.float64) * m[key] for s, m, n in zip(states, masks, sizes))
        den = sum(float(n) * m[key].to(torch.float64) for m, n in zip(masks, sizes))
        out[key] = torch.where(den > 0, num / den.clamp_min(1e-300), prev[key].to(torch.float64)).to(prev[key].dtype)
    return out


def global_mask(w_g: Mapping[str, torch.Tensor], client_masks: Sequence[Mapping[str, torch.Tensor]],
                sparsity: float, min_client_share: float) -> dict[str, torch.Tensor]:
    """New m_g: per tensor, the top (1 - S) positions by |w_g| among those
    selected by more than ``min_client_share`` of the clients."""
    n = len(client_masks)
    out = {}
    for key in client_masks[0]:
        count = torch.stack([m[key] for m in client_masks]).sum(0)
        eligible = count.to(torch.float64) > min_client_share * n + 1e-9
        out[key] = magnitude_mask(w_g[key], 1.0 - sparsity, eligible)
    return out


def compose_personal(w_c: Mapping[str, torch.Tensor], m_c: Mapping[str, torch.Tensor],
                     w_g: Mapping[str, torch.Tensor] | None, m_g: Mapping[str, torch.Tensor] | None) -> dict[str, torch.Tensor]:
    """Dense personal weights with the shared positions m_g & m_c (and every
    unmasked tensor) taken from w_g (Algorithm 1 line 6, Algorithm 3 line 3)."""
    out = {k: v.clone() for k, v in w_c.items()}
    if w_g is None or m_g is None:
        return out
    for key in out:
        if key in m_c:
            out[key] = torch.where(m_g[key] & m_c[key], w_g[key], out[key])
        else:
            out[key] = w_g[key].clone()
    return out


def sparse_view(w: Mapping[str, torch.Tensor], m: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """w * m for masked tensors, the rest unchanged (theta of Eq. 4)."""
    return {k: (v * m[k].to(v.dtype) if k in m else v.clone()) for k, v in w.items()}


def values_bytes(w: Mapping[str, torch.Tensor], m: Mapping[str, torch.Tensor]) -> int:
    """Bytes of the values at the mask's positions plus every unmasked tensor."""
    return sum((int(m[k].sum()) if k in m else v.numel()) * v.element_size() for k, v in w.items())


def readjust_mask(mask: torch.Tensor, weight: torch.Tensor, grad: torch.Tensor, ratio: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Prune the ``ratio`` share of ``mask`` with the smallest |weight|, then
    regrow as many positions with the largest |grad| among those outside the
    pruned mask (the just-pruned ones included). Returns (new mask, grown-new),
    where grown-new marks positions that were outside ``mask`` before."""
    n_alive = int(mask.sum())
    n_adj = int(round(ratio * n_alive))
    if n_adj == 0:
        return mask.clone(), torch.zeros_like(mask)
    flat_m = mask.flatten()
    w = weight.detach().abs().flatten().to(torch.float64)
    w = torch.where(flat_m, w, torch.full_like(w, math.inf))
    pruned = flat_m.clone()
    pruned[torch.argsort(w, stable=True)[:n_adj]] = False
    g = grad.detach().abs().flatten().to(torch.float64)
    g = torch.where(pruned, torch.full_like(g, -1.0), g)
    new = pruned.clone()
    new[torch.argsort(g, descending=True, stable=True)[:n_adj]] = True
    return new.view_as(mask), (new & ~flat_m).view_as(mask)


# ------------------------------------------------------------ client work


@dataclass
class Phase1Task:
    spec: ModelSpec
    w_c: dict[str, torch.Tensor]
    m_c: dict[str, torch.Tensor]
    w_g: dict[str, torch.Tensor] | None
    m_g: dict[str, torch.Tensor] | None
    data: NodeData
    cfg: TrainConfig
    readjust: bool
    readjust_ratio: float


@dataclass
class Phase1Update:
    w_c: dict[str, torch.Tensor]
    m_c: dict[str, torch.Tensor]
    samples_seen: int
    dense_samples: int
    macs_ratio: float


def _dense_grad(model: nn.Module, data: tuple[torch.Tensor, torch.Tensor], batch_size: int) -> tuple[dict[str, torch.Tensor], int]:
    model.train()
    model.zero_grad(set_to_none=True)
    x, y = data
    n = int(y.shape[0])
    for i in range(0, n, batch_size):
        xb, yb = x[i:i + batch_size], y[i:i + batch_size]
        if xb.shape[0] < 2:
            continue
        (F.cross_entropy(model(xb), yb, reduction="sum") / n).backward()
    grads = {f"{name}.weight": mod.weight.grad.detach().clone() if mod.weight.grad is not None else torch.zeros_like(mod.weight)
             for name, mod in model.named_modules() if isinstance(mod, (nn.Conv2d, nn.Linear))}
    model.zero_grad(set_to_none=True)
    model.eval()
    return grads, n


def phase1_client(task: Phase1Task) -> Phase1Update:
    """Algorithm 1, lines 4-13 for one client."""
    w = compose_personal(task.w_c, task.m_c, task.w_g, task.m_g)
    model = build_model(task.spec)
    model.load_state_dict(sparse_view(w, task.m_c))
    hist = masked_fit(model, task.data.train.tensors(), task.cfg, task.m_c)
    trained = state_of(model)
    w_c = {k: (torch.where(task.m_c[k], trained[k], w[k]) if k in task.m_c else trained[k]) for k in trained}
    m_c = {k: v.clone() for k, v in task.m_c.items()}
    dense = 0
    if task.readjust and task.readjust_ratio > 0:
        grads, dense = _dense_grad(model, task.data.train.tensors(), task.cfg.batch_size)
        for key in m_c:
            new, grown = readjust_mask(m_c[key], trained[key], grads[key], task.readjust_ratio)
            w_c[key] = torch.where(grown, torch.zeros_like(w_c[key]), w_c[key])
            m_c[key] = new
    ratio = masked_macs_ratio(model, task.m_c, task.data.train.images.shape[1:])
    return Phase1Update(w_c, m_c, hist.samples_seen, dense, ratio)


@dataclass
class Phase2Task:
    spec: ModelSpec
    state: dict[str, torch.Tensor]  # starting weights (already sparse where needed)
    grad_masks: dict[str, torch.Tensor]  # which entries train
    data: NodeData
    cfg: TrainConfig
    frozen_dense: bool = False


def masked_train(task: Phase2Task) -> tuple[dict[str, torch.Tensor], int]:
    """Train ``state`` with gradients restricted to ``grad_masks`` (Algorithms 2
    and 3); with ``frozen_dense`` the unmasked (shared) tensors are frozen too."""
    model = build_model(task.spec)
    model.load_state_dict(task.state)
    masks = dict(task.grad_masks)
    if task.frozen_dense:
        for name, p in model.named_parameters():
            if name not in masks:
                masks[name] = torch.zeros_like(p, dtype=torch.bool)
    hist = masked_fit(model, task.data.train.tensors(), task.cfg, masks)
    return state_of(model), hist.samples_seen


# ------------------------------------------------------------ inference


def entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy (nats) of softmax(logits), per row."""
    logp = F.log_softmax(logits, dim=1)
    return -(logp.exp() * logp).sum(1)


def adaptive_predict(logits_c: torch.Tensor, logits_g: torch.Tensor, base_c: float, base_g: float) -> torch.Tensor:
    """Algorithm 4: per sample, theta_c's prediction when
    E_c - (1 - Sim) BE_c < E_g - (1 - Sim) BE_g, else theta_g's."""
    sim = F.cosine_similarity(F.softmax(logits_c, 1), F.softmax(logits_g, 1), dim=1)
    use_c = entropy(logits_c) - (1 - sim) * base_c < entropy(logits_g) - (1 - sim) * base_g
    return torch.where(use_c, logits_c.argmax(1), logits_g.argmax(1))


# ------------------------------------------------------------ the method


@dataclass
class DMPFLRun:
    """Everything one DM-PFL training run produced (shared by dm-pfl and dm-pfl+)."""

    w_g: dict[str, torch.Tensor]
    m_g: dict[str, torch.Tensor] | None
    w_c: list[dict[str, torch.Tensor]]
    m_c: list[dict[str, torch.Tensor]]
    personal: list[dict[str, torch.Tensor]]  # theta_c states after Algorithm 3
    ledgers: list[Ledger]
    phase1_rounds: int
    phase2_rounds: int
    seconds: float
    m_g_history: list[float] = field(default_factory=list)


class _DMPFLBase(ServerMethod):
    adaptive: ClassVar[bool] = False

    def __init__(self, sparsity: float = 0.5, readjust_ratio: float = 0.01, readjust_interval: int = 10,
                 min_client_share: float = 0.3, local_epochs: int = 5, phase1_share: float = 0.5,
                 fraction: float = 1.0, lr: float | None = None) -> None:
        self.sparsity = check_unit(self.name, "sparsity", sparsity, closed=False)
        self.readjust_ratio = check_unit(self.name, "readjust_ratio", readjust_ratio)
        self.readjust_interval = check_positive_int(self.name, "readjust_interval", readjust_interval)
        self.min_client_share = check_unit(self.name, "min_client_share", min_client_share, closed=False)
        self.local_epochs = check_positive_int(self.name, "local_epochs", local_epochs)
        self.phase1_share = check_fraction(self.name, "phase1_share", phase1_share)
        self.fraction = check_fraction(self.name, "fraction", fraction)
        self.lr = None if lr is None else check_positive(self.name, "lr", lr)

    def _key(self) -> tuple:
        return ("dm-pfl", self.sparsity, self.readjust_ratio, self.readjust_interval, self.min_client_share,
                self.local_epochs, self.phase1_share, self.fraction, self.lr)

    def train(self, ctx: SwarmContext) -> DMPFLRun:
        """The two-phase training (cached in ``ctx.cache`` for the other variant)."""
        key = self._key()
        if key not in ctx.cache:
            ctx.cache[key] = self._train(ctx)
        return ctx.cache[key]

    def _train(self, ctx: SwarmContext) -> DMPFLRun:
        spec = require_homogeneous(ctx, self.name)
        shape = ctx.nodes[0].data.train.images.shape[1:]
        init = shared_init(ctx, spec)
        keys = masked_keys(init)
        n_pos = sum(init.state_dict()[k].numel() for k in keys)
        keep = 1.0 - self.sparsity
        w_g = state_of(init)
        m_g: dict[str, torch.Tensor] | None = None
        w_c = [state_of(n.pretrained) for n in ctx.nodes]
        m_c = [{k: magnitude_mask(w[k], keep) for k in keys} for w in w_c]
        ledgers = [Ledger(train_flops=n.pretrain_flops) for n in ctx.nodes]
        sizes = [float(len(n.data.train)) for n in ctx.nodes]
        rounds = int(ctx.rounds)
        r1 = min(rounds, max(1, math.ceil(rounds * self.phase1_share))) if rounds else 0
        rng = np.random.default_rng([ctx.seed, 0xD3])
        history = []
        t0 = time.perf_counter()

        def cfg(r: int, k: int, salt: int = 0) -> TrainConfig:
            return local_config(ctx, self.local_epochs, ctx.seed * 7919 + r * 1009 + k + salt, self.lr)

        for r in range(r1):  # Phase 1: train dual masks
            picked = sample_round(ctx, r, self.fraction, rng)
            if not picked:
                continue
            readjust = r % self.readjust_interval == 0
            tasks = [Phase1Task(spec, w_c[k], m_c[k], w_g if m_g else None, m_g, ctx.nodes[k].data, cfg(r, k),
                                readjust, self.readjust_ratio) for k in picked]
            ups: list[Phase1Update] = ctx.map(phase1_client, tasks)
            down = values_bytes(w_g, m_g) + mask_bytes(n_pos) if m_g else 0
            for k, up in zip(picked, ups):
                w_c[k], m_c[k] = up.w_c, up.m_c
                led = ledgers[k]
                led.bytes_down += down
                led.bytes_up += values_bytes(up.w_c, up.m_c) + mask_bytes(n_pos)
                led.rounds += 1
                led.train_flops += train_flops_of(spec, shape, up.samples_seen, up.macs_ratio)
                led.train_flops += train_flops_of(spec, shape, up.dense_samples)
            psizes = [sizes[k] for k in picked]
            w_g = eq5_aggregate(w_g, [sparse_view(u.w_c, u.m_c) for u in ups], [u.m_c for u in ups], psizes)
            m_g = global_mask(w_g, [u.m_c for u in ups], self.sparsity, self.min_client_share)
            history.append(sum(int(v.sum()) for v in m_g.values()) / n_pos)

        r2 = 0
        for r in range(r1, rounds):  # Phase 2a: refine global weights under m_g
            if m_g is None:
                break
            picked = sample_round(ctx, r, self.fraction, rng)
            if not picked:
                continue
            start = sparse_view(w_g, m_g)
            outs = ctx.map(masked_train, [Phase2Task(spec, start, m_g, ctx.nodes[k].data, cfg(r, k)) for k in picked])
            ratio = masked_macs_ratio(init, m_g, shape)
            down = values_bytes(w_g, m_g) + mask_bytes(n_pos)
            for k, (state, seen) in zip(picked, outs):
                led = ledgers[k]
                led.bytes_down += down
                led.bytes_up += values_bytes(state, m_g)
                led.rounds += 1
                led.train_flops += train_flops_of(spec, shape, seen, ratio)
            avg = weighted_average([s for s, _ in outs], [sizes[k] for k in picked])
            w_g = {k: (torch.where(m_g[k], avg[k], w_g[k]) if k in m_g else avg[k]) for k in avg}
            r2 += 1

        personal = []
        if m_g is not None:  # Phase 2b: every node refines its personal positions m_c - m_g
            tasks = []
            for k, node in enumerate(ctx.nodes):
                start = sparse_view(compose_personal(w_c[k], m_c[k], w_g, m_g), m_c[k])
                only_personal = {key: m_c[k][key] & ~m_g[key] for key in keys}
                tasks.append(Phase2Task(spec, start, only_personal, node.data, cfg(rounds, k, 0x51), frozen_dense=True))
            outs = ctx.map(masked_train, tasks)
            down = values_bytes(w_g, m_g) + mask_bytes(n_pos)
            for k, (state, seen) in enumerate(outs):
                led = ledgers[k]
                led.bytes_down += down
                ratio = masked_macs_ratio(init, m_c[k], shape)
                led.train_flops += train_flops_of(spec, shape, seen, ratio)
                personal.append(state)
                w_c[k] = {key: (torch.where(m_c[k][key] & ~m_g[key], state[key], w_c[k][key]) if key in m_c[k] else state[key])
                          for key in state}
        else:
            personal = [state_of(n.pretrained) for n in ctx.nodes]
        return DMPFLRun(w_g, m_g, w_c, m_c, personal, ledgers, r1, r2, time.perf_counter() - t0, history)

    def run(self, ctx: SwarmContext) -> list[NodeResult]:
        return self.evaluate(ctx, self.train(ctx))

    def evaluate(self, ctx: SwarmContext, run: DMPFLRun) -> list[NodeResult]:
        """Per-node results of a finished :meth:`train`."""
        spec = ctx.nodes[0].spec
        global_model = build_model(spec)
        global_model.load_state_dict(sparse_view(run.w_g, run.m_g) if run.m_g else run.w_g)
        global_model.eval()
        results = []
        for k, node in enumerate(ctx.nodes):
            model = build_model(spec)
            model.load_state_dict(run.personal[k])
            model.eval()
            led = Ledger(run.ledgers[k].bytes_up, run.ledgers[k].bytes_down, run.ledgers[k].train_flops,
                         run.ledgers[k].rounds)
            extra = {"phase1_rounds": run.phase1_rounds, "phase2_rounds": run.phase2_rounds,
                     "global_density": run.m_g_history[-1] if run.m_g_history else None,
                     "personal_density": float(sum(int(v.sum()) for v in run.m_c[k].values())
                                               / sum(v.numel() for v in run.m_c[k].values()))}
            if self.adaptive and run.m_g is not None:
                accs = []
                for split in (node.data.test, node.data.val):
                    x, y = split.tensors()
                    bc = float(entropy(predict_logits(model, node.data.val.images)).mean())
                    bg = float(entropy(predict_logits(global_model, node.data.val.images)).mean())
                    pred = adaptive_predict(predict_logits(model, x), predict_logits(global_model, x), bc, bg)
                    accs.append(float((pred == y).float().mean()) if len(y) else float("nan"))
                res = node_result(node, self.name, None, led, test_accuracy=accs[0], val_accuracy=accs[1], extra=extra)
            else:
                res = node_result(node, self.name, model, led, extra=extra, kept_local=run.m_g is None)
            res.seconds = run.seconds / max(1, len(ctx.nodes))
            results.append(res)
        return results


@register
class DMPFLMethod(_DMPFLBase):
    """DM-PFL: dual masks, two-phase sparse training; deploys the personalized model."""

    name: ClassVar[str] = "dm-pfl"
    description: ClassVar[str] = "DM-PFL: dual-masked sparse personalized FL (multi-round, server)"


@register
class DMPFLPlusMethod(_DMPFLBase):
    """DM-PFL+: DM-PFL with the adaptive global / personalized inference of Algorithm 4."""

    name: ClassVar[str] = "dm-pfl+"
    description: ClassVar[str] = "DM-PFL+: DM-PFL with adaptive inference (multi-round, server)"
    adaptive: ClassVar[bool] = True
