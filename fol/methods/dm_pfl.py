"""DM-PFL and DM-PFL+ (Huang et al., KDD 2023): dual-masked personalized FL.

One dense architecture carries two sparse models per node (Eq. 4): the global
model theta_g = w_g * m_g and the personalized model
theta_c = w_g * (m_g & m_c) + w_c * (m_c - m_g). Masks are unstructured, over
the weights of every Conv2d and Linear layer; biases and BatchNorm values are
dense and shared (global) in both models, except that phase 2b leaves the
personalized model with the BatchNorm running statistics of its own training
split (the shared training loop recomputes them after training, and that
training changed the personal weights they normalize).

Training is the paper's two-phase pipeline (Sec. 3.3.1), run on the server
skeleton of :mod:`fol.methods.server`. The server rounds (``rounds``, default
every round the contact plan allows) are split into ``iterations`` cycles
(Sec. 4.3.2 iterates the two phases; default 1), and each cycle gives
``phase1_share`` of its rounds (at least one) to phase 1 and the rest to
phase 2a, followed by phase 2b:

* **Phase 1, train dual masks** (Algorithm 1). A participant receives m_g and
  w_g * m_g, overwrites its personal weights at m_g & m_c with the global ones,
  trains ``local_epochs`` epochs under m_c, and in every ``readjust_interval``-th
  round (rounds 0, interval, 2 x interval, ...) readjusts m_c: prune the
  ``readjust_ratio`` share of m_c with the smallest |w|, then regrow as many
  positions with the largest dense-gradient magnitude (a position pruned in the
  same step may grow back; newly grown weights start at 0, as in RigL / FedDST).
  It uploads w_c * m_c and m_c. The server aggregates w_g with the mask-wise
  weighted average of **Eq. 5** (positions no participant covers keep their
  previous value) and takes as new m_g the top ``1 - sparsity`` share (ERK: the
  tensor's own density) of each tensor's positions by |w_g|, **ignoring positions selected by no more than
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
(A.1.4: E = 5). ``distribution``: how the sparsity is spread over layers,
``"erk"`` (default, the paper's Erdos-Renyi-Kernel distribution, Sec. 4.3.1,
:func:`erk_densities`) or ``"uniform"`` (every layer at S). ``init``:
``"global"`` (default, the paper trains from scratch: every node starts from
the swarm's shared initialization, downloaded once at its first round) or
``"pretrained"`` (each node's own pretrained model, this toolkit's earlier
behaviour). Project choices, not in the paper: initial m_c = the top
magnitude mask (at the layer's density) of the node's starting weights,
w_g = the shared initialization with an empty m_g before the first
aggregation, the readjust interval counted in phase-1 rounds, cosine
similarity of probabilities, phase 2b for every node, and a node whose
swarm never aggregated keeping its pretrained model.

Accounting: values at one float each plus masks at one bit per position;
training FLOPs scaled by the share of conv/linear MACs the mask keeps (the
dense-gradient pass of a readjustment counts as dense).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from fol.accounting import mask_bytes, model_bytes
from fol.data import NodeData
from fol.errors import ConfigError
from fol.methods._common import (
    Ledger, check_fraction, check_positive_int, check_unit, masked_fit, masked_macs_ratio, shared_init, state_of,
    train_flops_of, weighted_average,
)
from fol.methods.base import SwarmContext, map_nodes, register
from fol.methods.server import ServerMethod, Traffic
from fol.models import ModelSpec, build_model
from fol.train import TrainConfig, evaluate, predict_logits
from swarmbase.tomlcheck import shown

__all__ = [
    "DMPFLMethod", "DMPFLPlusMethod", "masked_keys", "magnitude_mask", "eq5_aggregate", "global_mask",
    "compose_personal", "readjust_mask", "adaptive_predict",
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
    (dense, shared) tensors get the plain size-weighted average. Sizes that
    sum to 0 (every participant trained on an empty split) count as equal."""
    if sum(float(n) for n in sizes) <= 0:
        sizes = [1.0] * len(sizes)
    out = dict(prev)
    dense = [k for k in states[0] if k not in masks[0]]
    out.update(weighted_average(states, sizes, dense) if dense else {})
    for key in masks[0]:
        num = sum(float(n) * s[key].to(torch.float64) * m[key] for s, m, n in zip(states, masks, sizes))
        den = sum(float(n) * m[key].to(torch.float64) for m, n in zip(masks, sizes))
        out[key] = torch.where(den > 0, num / den.clamp_min(1e-300), prev[key].to(torch.float64)).to(prev[key].dtype)
    return out


def global_mask(w_g: Mapping[str, torch.Tensor], client_masks: Sequence[Mapping[str, torch.Tensor]],
                sparsity: float, min_client_share: float,
                densities: Mapping[str, float] | None = None) -> dict[str, torch.Tensor]:
    """New m_g: per tensor, the top (1 - S) positions by |w_g| (or the
    tensor's own density from ``densities``, e.g. ERK) among those selected
    by more than ``min_client_share`` of the clients."""
    n = len(client_masks)
    out = {}
    for key in client_masks[0]:
        count = torch.stack([m[key] for m in client_masks]).sum(0)
        eligible = count.to(torch.float64) > min_client_share * n + 1e-9
        keep = densities[key] if densities is not None else 1.0 - sparsity
        out[key] = magnitude_mask(w_g[key], keep, eligible)
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


def erk_densities(shapes: Mapping[str, Sequence[int]], density: float) -> dict[str, float]:
    """Erdos-Renyi-Kernel per-layer densities (Evci et al., RigL, ICML 2020; the
    distribution DM-PFL uses, Sec. 4.3.1): layer l keeps a share proportional to
    sum(shape_l) / prod(shape_l), scaled so that ``density`` of all positions
    are kept; layers that would exceed 1 are dense and the rest rescaled.

    >>> d = erk_densities({"conv": (16, 3, 3, 3), "fc": (10, 64)}, 0.5)
    >>> round(sum(d[k] * n for k, n in (("conv", 432), ("fc", 640))) / 1072, 6)
    0.5
    """
    dense: set[str] = set()
    sizes = {k: float(np.prod(s)) for k, s in shapes.items()}
    while True:
        rhs, divisor, raw = 0.0, 0.0, {}
        for k, shape in shapes.items():
            if k in dense:
                rhs -= sizes[k] * (1.0 - density)
            else:
                rhs += sizes[k] * density
                raw[k] = float(sum(shape)) / sizes[k]
                divisor += raw[k] * sizes[k]
        if not raw:
            return {k: 1.0 for k in shapes}
        eps = rhs / divisor
        top = max(raw.values())
        if top * eps <= 1.0:
            return {k: (1.0 if k in dense else eps * raw[k]) for k in shapes}
        dense |= {k for k, v in raw.items() if v == top}


def dm_pfl_schedule(rounds: int, iterations: int, phase1_share: float) -> list[tuple[str, bool]]:
    """Per server round, its phase (``"1"``: train dual masks, ``"2"``: refine
    global weights) and whether the local refinement of the personalized
    weights (Algorithm 3) follows it: the ``rounds`` are split as evenly as
    possible into ``iterations`` cycles, each starting with
    ``max(1, ceil(phase1_share * cycle))`` phase-1 rounds.

    >>> dm_pfl_schedule(6, 2, 0.5)
    [('1', False), ('1', False), ('2', True), ('1', False), ('1', False), ('2', True)]
    """
    out: list[tuple[str, bool]] = []
    cycles = min(iterations, rounds)
    for c in range(cycles):
        n = rounds // cycles + (1 if c < rounds % cycles else 0)
        r1 = min(n, max(1, math.ceil(n * phase1_share)))
        out += [("1", False)] * r1 + [("2", False)] * (n - r1)
        out[-1] = (out[-1][0], True)
    return out


class _DMPFLBase(ServerMethod):
    adaptive: ClassVar[bool] = False
    rng_salt: ClassVar[int] = 0xD3

    def __init__(self, sparsity: float = 0.5, readjust_ratio: float = 0.01, readjust_interval: int = 10,
                 min_client_share: float = 0.3, phase1_share: float = 0.5, iterations: int = 1,
                 distribution: str = "erk", init: str = "global", **common) -> None:
        super().__init__(**common)
        self.sparsity = check_unit(self.name, "sparsity", sparsity, closed=False)
        self.readjust_ratio = check_unit(self.name, "readjust_ratio", readjust_ratio)
        self.readjust_interval = check_positive_int(self.name, "readjust_interval", readjust_interval)
        self.min_client_share = check_unit(self.name, "min_client_share", min_client_share, closed=False)
        self.phase1_share = check_fraction(self.name, "phase1_share", phase1_share)
        self.iterations = check_positive_int(self.name, "iterations", iterations, count=True)
        for opt, value, choices in (("distribution", distribution, ("erk", "uniform")),
                                    ("init", init, ("global", "pretrained"))):
            if value not in choices:
                raise ConfigError(f"methods.{self.name}.{opt} must be one of {', '.join(map(repr, choices))}, got {shown(value)}")
        self.distribution, self.init = distribution, init

    def cache_key(self) -> tuple:
        return ("dm-pfl", self.sparsity, self.readjust_ratio, self.readjust_interval, self.min_client_share,
                self.local_epochs, self.phase1_share, self.iterations, self.distribution, self.init, self.fraction,
                self.lr, self.rounds)

    # ------------------------------------------------------------ state

    def setup(self, ctx: SwarmContext) -> dict[str, Any]:
        spec = ctx.nodes[0].spec
        init = shared_init(ctx, spec)
        keys = masked_keys(init)
        sd = init.state_dict()
        keep = 1.0 - self.sparsity
        if self.distribution == "erk":
            density = erk_densities({k: tuple(sd[k].shape) for k in keys}, keep)
        else:
            density = {k: keep for k in keys}
        w_c = [state_of(init) if self.init == "global" else state_of(n.pretrained) for n in ctx.nodes]
        schedule = dm_pfl_schedule(self.total_rounds(ctx), self.iterations, self.phase1_share)
        return {"init": init, "keys": keys, "n_pos": sum(sd[k].numel() for k in keys), "w_g": state_of(init),
                "m_g": None, "w_c": w_c, "m_c": [{k: magnitude_mask(w[k], density[k]) for k in keys} for w in w_c],
                "density": density,
                "personal": [None] * len(ctx.nodes), "joined": [False] * len(ctx.nodes),
                "fresh": [False] * len(ctx.nodes),  # node holds the server's latest w_g and m_g
                "dense": model_bytes(init) if self.init == "global" else 0, "schedule": schedule,
                "phase1_done": 0, "phase2_done": 0, "history": [], "current": {}}

    def _phase(self, state: dict, r: int) -> str:
        phase = state["schedule"][r][0] if r < len(state["schedule"]) else "1"
        return "1" if state["m_g"] is None else phase  # no global mask yet: keep training masks

    def initial_flops(self, ctx: SwarmContext, k: int) -> int:
        return ctx.nodes[k].pretrain_flops if self.init == "pretrained" else 0

    # ------------------------------------------------------------ rounds

    def client_fn(self, state: dict, r: int):
        return phase1_client if self._phase(state, r) == "1" else masked_train

    def client_task(self, state: dict, ctx: SwarmContext, r: int, k: int, cfg: TrainConfig):
        spec, data = ctx.nodes[k].spec, ctx.nodes[k].data
        w_g, m_g = state["w_g"], state["m_g"]
        if self._phase(state, r) == "1":
            readjust = state["phase1_done"] % self.readjust_interval == 0
            return Phase1Task(spec, state["w_c"][k], state["m_c"][k], w_g if m_g else None, m_g, data, cfg,
                              readjust, self.readjust_ratio)
        return Phase2Task(spec, sparse_view(w_g, m_g), m_g, data, cfg)

    def aggregate(self, state: dict, ctx: SwarmContext, r: int, picked: list[int], ups: list) -> list[Traffic]:
        spec, shape = ctx.nodes[0].spec, ctx.nodes[0].data.train.images.shape[1:]
        w_g, m_g, n_pos = state["w_g"], state["m_g"], state["n_pos"]
        sizes = [float(len(ctx.nodes[k].data.train)) for k in picked]
        traffic = []
        if self._phase(state, r) == "1":
            down = values_bytes(w_g, m_g) + mask_bytes(n_pos) if m_g else 0
            for k, up in zip(picked, ups):
                state["w_c"][k], state["m_c"][k], state["personal"][k] = up.w_c, up.m_c, None
                first = 0 if state["joined"][k] else state["dense"]
                traffic.append(Traffic(values_bytes(up.w_c, up.m_c) + mask_bytes(n_pos), down + first,
                                       up.samples_seen, up.macs_ratio,
                                       extra_flops=train_flops_of(spec, shape, up.dense_samples)))
            state["w_g"] = eq5_aggregate(w_g, [sparse_view(u.w_c, u.m_c) for u in ups], [u.m_c for u in ups], sizes)
            state["m_g"] = global_mask(state["w_g"], [u.m_c for u in ups], self.sparsity, self.min_client_share,
                                       state["density"])
            state["history"].append(sum(int(v.sum()) for v in state["m_g"].values()) / n_pos)
            state["phase1_done"] += 1
        else:
            ratio = masked_macs_ratio(state["init"], m_g, shape)
            down = values_bytes(w_g, m_g) + mask_bytes(n_pos)
            for k, (st, seen) in zip(picked, ups):
                first = 0 if state["joined"][k] else state["dense"]
                traffic.append(Traffic(values_bytes(st, m_g), down + first, seen, ratio))
            avg = weighted_average([st for st, _ in ups], sizes)
            state["w_g"] = {key: (torch.where(m_g[key], avg[key], w_g[key]) if key in m_g else avg[key]) for key in avg}
            state["phase2_done"] += 1
        state["fresh"] = [False] * len(ctx.nodes)  # a new global model (either phase): on the server only
        for k in picked:
            state["joined"][k] = True
        return traffic

    def after_round(self, state: dict, ctx: SwarmContext, r: int, ledgers: list[Ledger]) -> None:
        """Algorithm 3 at the end of a cycle: every node receives m_g and w_g * m_g
        once, sets its shared positions to the global weights and trains only
        m_c - m_g locally (no upload)."""
        if r >= len(state["schedule"]) or not state["schedule"][r][1] or state["m_g"] is None:
            return
        spec, shape = ctx.nodes[0].spec, ctx.nodes[0].data.train.images.shape[1:]
        w_g, m_g, keys = state["w_g"], state["m_g"], state["keys"]
        tasks = []
        for k, node in enumerate(ctx.nodes):
            w_c, m_c = state["w_c"][k], state["m_c"][k]
            start = sparse_view(compose_personal(w_c, m_c, w_g, m_g), m_c)
            only_personal = {key: m_c[key] & ~m_g[key] for key in keys}
            tasks.append(Phase2Task(spec, start, only_personal, node.data, self.local_cfg(ctx, r + 1, k, 0x51),
                                    frozen_dense=True))
        outs = map_nodes(ctx, masked_train, [node.name for node in ctx.nodes], tasks, f"{self.name}, round {r + 1}")
        down = values_bytes(w_g, m_g) + mask_bytes(state["n_pos"])
        for k, (st, seen) in enumerate(outs):
            m_c = state["m_c"][k]
            # a node that never reached the server starts m_c - m_g from the initial model: downloaded now, once
            ledgers[k].bytes_down += down + (0 if state["joined"][k] else state["dense"])
            state["joined"][k] = state["fresh"][k] = True
            ledgers[k].train_flops += train_flops_of(spec, shape, seen, masked_macs_ratio(state["init"], m_c, shape))
            state["personal"][k] = st
            state["w_c"][k] = {key: (torch.where(m_c[key] & ~m_g[key], st[key], state["w_c"][k][key])
                                     if key in m_c else st[key]) for key in st}

    # ------------------------------------------------------------ models

    def node_state(self, state: dict, ctx: SwarmContext, k: int) -> dict[str, torch.Tensor]:
        if state["m_g"] is None:  # nothing aggregated: the node keeps its own model
            return state_of(ctx.nodes[k].pretrained)
        if state["personal"][k] is not None:
            return state["personal"][k]
        return sparse_view(compose_personal(state["w_c"][k], state["m_c"][k], state["w_g"], state["m_g"]),
                           state["m_c"][k])

    def deploy_bytes(self, state: dict, ctx: SwarmContext, k: int, variant: str | None = None) -> int:
        """The server's latest global weights and mask, when the deployed model
        needs them and node ``k`` does not hold them: before the cycle's phase 2b
        (the personalized model is composed with the latest global weights) and,
        for DM-PFL+, whenever the global model changed after the node's last
        download (its adaptive inference runs the global model too). A node that
        never reached the server also needs the initial model (``init =
        "global"``). Nothing once phase 2b has sent the final global model."""
        if state["m_g"] is None or state["fresh"][k]:
            return 0
        if (variant or self.name) != "dm-pfl+" and state["personal"][k] is not None:
            return 0
        return (values_bytes(state["w_g"], state["m_g"]) + mask_bytes(state["n_pos"])
                + (0 if state["joined"][k] else state["dense"]))

    def evaluate_node(self, state: dict, ctx: SwarmContext, k: int) -> dict[str, tuple[float, float]]:
        node = ctx.nodes[k]
        model = self.node_model(state, ctx, k)
        plain = tuple(evaluate(model, *split.tensors()).accuracy for split in (node.data.test, node.data.val))
        if state["m_g"] is None:
            return {"dm-pfl": plain, "dm-pfl+": plain}
        global_model = build_model(node.spec)
        global_model.load_state_dict(sparse_view(state["w_g"], state["m_g"]))
        global_model.eval()
        bc = float(entropy(predict_logits(model, node.data.val.images)).mean())
        bg = float(entropy(predict_logits(global_model, node.data.val.images)).mean())
        accs = []
        for split in (node.data.test, node.data.val):
            x, y = split.tensors()
            pred = adaptive_predict(predict_logits(model, x), predict_logits(global_model, x), bc, bg)
            accs.append(float((pred == y).float().mean()) if len(y) else float("nan"))
        return {"dm-pfl": plain, "dm-pfl+": (accs[0], accs[1])}

    def kept_local(self, state: dict, ctx: SwarmContext, k: int, ledger: Ledger) -> bool:
        return state["m_g"] is None

    def result_extra(self, state: dict, ctx: SwarmContext, k: int, ledger: Ledger) -> dict[str, Any]:
        m_c = state["m_c"][k]
        return {"phase1_rounds": state["phase1_done"], "phase2_rounds": state["phase2_done"],
                "global_density": state["history"][-1] if state["history"] else None,
                "personal_density": float(sum(int(v.sum()) for v in m_c.values()) / sum(v.numel() for v in m_c.values())),
                "distribution": self.distribution, "init": self.init}


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
