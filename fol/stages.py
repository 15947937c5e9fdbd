"""FOL's stages 1 and 2, one function per step of the paper.

1. :func:`pretrain` the node's own model on D_train (early stopping on D_val).
2. For every received neighbour model, :func:`align_neighbour`:
   fine-tune on D_train -> alignment-aware structured pruning
   (:func:`fol.pruning.align_and_prune`) -> post fine-tune -> score on D_val.
   Then :func:`select_top_k` ranks the aligned neighbours together with the own
   model by score, ties broken by the cosine similarity of their D_val logits
   to the own model's (the paper); or, without favouring the own model, keeps
   the own model and ranks only the neighbours, ties broken by D_val loss
   (``FOLConfig.own_in_top_k = "always"``, ``tie_break = "val-loss"``); or
   fills the seats after the first by forward ensemble selection on D_val
   (``FOLConfig.top_k_rule = "greedy"``).

Stages 3 and 4 are :mod:`fol.ensemble` and :mod:`fol.distill`; the round that
chains all four is :func:`fol.personalize.personalize`.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from fol.accounting import forward_macs, training_flops
from fol.data import NodeData
from fol.ensemble import ensemble_logits
from fol.errors import ConfigError, TrainingError
from fol.models import ModelSpec, build_model, count_parameters
from fol.pruning import PruneConfig, align_and_prune
from fol.train import History, TrainConfig, evaluate, fit, logit_scores, predict_logits
from swarmbase.tomlcheck import shown

__all__ = [
    "Candidate",
    "pretrain",
    "fine_tune",
    "align_neighbour",
    "score",
    "logit_cosine",
    "select_top_k",
    "frozen_prefix",
    "fall_back_to_received",
]

log = logging.getLogger(__name__)


@dataclass
class Candidate:
    """A model competing for the Top-K ensemble, with what happened to it."""

    name: str
    model: nn.Module
    own: bool = False
    arch: str = ""
    score_before: float | None = None  # D_val accuracy as received (before fine-tuning)
    score: float = float("nan")  # D_val accuracy after alignment (the ranking key)
    cosine: float = float("nan")  # cosine similarity of D_val logits to the own model's
    val_loss: float = float("nan")  # D_val cross-entropy after alignment (the "val-loss" tie-break)
    params_before: int = 0
    params_after: int = 0
    macs_before: int = 0
    macs_after: int = 0
    pruning: dict[str, Any] = field(default_factory=dict)
    train_flops: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    round: int = 0  # the round it was aligned in, once it is kept for later rounds (0: this round's)
    #: the model card's spec, kept with a neighbour's candidate once it is kept for later rounds
    #: (its round's received models, which named it, are gone by then)
    spec: ModelSpec | None = None
    # its logits on the node's D_val from the pass that scored it, which the Top-K
    # selection and the ensemble fit share (None: not scored here, computed there)
    val_logits: torch.Tensor | None = field(default=None, repr=False, compare=False)
    # an aligned neighbour's: its logits on the node's D_train images from the pass that checked them
    # finite (:func:`fol.train.predict_logits`, its default batching), which stage 3 (``ensemble_fit =
    # "train"``) and stage 4 (the teacher's logits on D_train) share (None: computed there)
    train_logits: torch.Tensor | None = field(default=None, repr=False, compare=False)
    # a neighbour's: the received model's logits on D_val from the pass that gave ``score_before``,
    # which the ``align_fallback = "received"`` candidate reuses (None: computed there)
    received_val_logits: torch.Tensor | None = field(default=None, repr=False, compare=False)

    def summary(self) -> dict[str, Any]:
        """JSON-ready description (no tensors)."""
        return {
            "name": self.name,
            "own": self.own,
            "arch": self.arch,
            "score_before": self.score_before,
            "score_after": self.score,
            "cosine_to_own": self.cosine,
            "val_loss": self.val_loss,
            "params_before": self.params_before,
            "params_after": self.params_after,
            "macs_before": self.macs_before,
            "macs_after": self.macs_after,
            "pruning": self.pruning,
            "train_flops": self.train_flops,
            "seconds": self.seconds,
            "round": self.round,
        }


def pretrain(spec: ModelSpec, node: NodeData, cfg: TrainConfig, init_seed: int = 0) -> nn.Module:
    """Stage 1: train the node's model from the shared, seed-derived
    initialization on D_train, early-stopping on D_val."""
    model = build_model(spec, seed=init_seed)
    fit(model, node.train.tensors(), cfg, val=node.val.tensors())
    return model


def freezable_layers(model: nn.Module) -> list[nn.Module]:
    """The convolution / linear layers of ``model`` in module order: what
    ``fol.finetune_freeze`` counts (:func:`frozen_prefix`)."""
    return [m for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]


def check_finetune_freeze(freeze: int, archs: Iterable[str], input_size: int) -> None:
    """Refuse ``fol.finetune_freeze`` above the convolution / linear layer count of
    the shallowest of ``archs`` (built untrained at ``input_size`` pixels), before any
    training: a neighbour of that architecture has no such layer to freeze."""
    if freeze:
        models = {a: build_model(ModelSpec(a, num_classes=2, input_size=input_size)) for a in sorted(set(archs))}
        if problem := finetune_freeze_problem(freeze, models, "the swarm's model"):
            raise ConfigError(problem)


def finetune_freeze_problem(freeze: int, models: dict[str, nn.Module], what: str) -> str | None:
    """Why ``fol.finetune_freeze = freeze`` cannot apply to every one of ``models`` (named), or
    None: the one check of the count against the models (``what`` names their kind in the message;
    with one model, that model)."""
    if not freeze or not models:
        return None
    counts = {name: len(freezable_layers(m)) for name, m in models.items()}
    name = min(counts, key=counts.__getitem__)
    if freeze <= counts[name]:
        return None
    which = f"{what} with the fewest" if len(models) > 1 else what
    return (f"fol.finetune_freeze must be at most {counts[name]} (the convolution / linear layers of {name}, "
            f"{which}), got {shown(freeze)}")


def frozen_prefix(model: nn.Module, n_layers: int) -> list[nn.Parameter]:
    """The parameters of ``model`` outside its first ``n_layers`` convolution /
    linear layers (in module order): what fine-tuning with that many frozen
    early layers trains.

    >>> net = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(2, 2))
    >>> len(frozen_prefix(net, 0)), len(frozen_prefix(net, 1)), len(frozen_prefix(net, 2))
    (4, 2, 0)
    """
    frozen: set[int] = set()
    for layer in freezable_layers(model)[:n_layers]:
        frozen.update(id(p) for p in layer.parameters(recurse=False))
    return [p for p in model.parameters() if id(p) not in frozen]


def fine_tune(model: nn.Module, train: tuple[torch.Tensor, torch.Tensor], cfg: TrainConfig,
              freeze: int = 0) -> tuple[nn.Module, History]:
    """Train a copy of ``model`` on the node's D_train with cross-entropy,
    leaving its first ``freeze`` convolution / linear layers unchanged."""
    model = copy.deepcopy(model)
    return model, fit(model, train, cfg, params=frozen_prefix(model, freeze) if freeze else None)


def score(model: nn.Module, val: tuple[torch.Tensor, torch.Tensor]) -> float:
    """The paper's validation score: accuracy on D_val."""
    return evaluate(model, *val).accuracy


def logit_cosine(logits: torch.Tensor, reference: torch.Tensor) -> float:
    """Cosine similarity between two logit matrices, flattened."""
    return float(F.cosine_similarity(logits.flatten(), reference.flatten(), dim=0))


def align_neighbour(
    name: str,
    received: nn.Module,
    own: nn.Module,
    node: NodeData,
    *,
    finetune: TrainConfig,
    post_finetune: TrainConfig,
    prune: PruneConfig | None,
    arch: str = "",
    freeze: int = 0,
) -> Candidate:
    """Stage 2 for one neighbour model: fine-tune, prune with the alignment
    objective (skipped when ``prune`` is None: the "-n" variants), post
    fine-tune, score. ``freeze`` early convolution / linear layers keep their
    received weights in both fine-tunings. ``received`` is never modified.

    Raises :class:`fol.errors.TrainingError` when a training step diverges or
    when the aligned model's outputs on the node's D_train or D_val are not
    all finite (finite but huge weights that no training step touched, e.g.
    with no fine-tuning epoch): such a model cannot be ranked, weighted or
    distilled from."""
    train, val = node.train.tensors(), node.val.tensors()
    shape = tuple(train[0].shape[1:])
    cand = Candidate(name=name, model=received, arch=arch)
    cand.received_val_logits = predict_logits(received, val[0])  # what score() computes, kept for the fallback
    cand.score_before = logit_scores(cand.received_val_logits, val[1]).accuracy
    cand.params_before = count_parameters(received)
    cand.macs_before = forward_macs(received, shape)

    n = int(train[0].shape[0])
    t0 = time.perf_counter()
    model, hist = fine_tune(received, train, finetune, freeze)
    cand.train_flops += training_flops(cand.macs_before, hist.samples_seen)
    cand.seconds["finetune"] = time.perf_counter() - t0

    if prune is not None:
        t0 = time.perf_counter()
        result = align_and_prune(model, own, train, prune)
        model = result.model
        cand.pruning = result.report
        # Gate learning runs full forward/backward passes of the frozen network.
        cand.train_flops += training_flops(cand.macs_before, prune.gate_epochs * n)
        cand.seconds["prune"] = time.perf_counter() - t0

    cand.macs_after = forward_macs(model, shape)
    if prune is not None:
        t0 = time.perf_counter()
        hist = fit(model, train, post_finetune, params=frozen_prefix(model, freeze) if freeze else None)
        cand.train_flops += training_flops(cand.macs_after, hist.samples_seen)
        cand.seconds["post_finetune"] = time.perf_counter() - t0

    cand.model = model.eval()
    val_logits = predict_logits(model, val[0])  # the one pass over D_val: checked, scored, kept
    train_logits = predict_logits(model, train[0])  # the one pass over D_train: checked, kept
    if not bool(torch.isfinite(train_logits).all()) or not bool(torch.isfinite(val_logits).all()):
        raise TrainingError(f"{name}: the aligned model's outputs on the node's data are not finite")
    cand.params_after = count_parameters(model)
    result = logit_scores(val_logits, val[1])
    cand.score, cand.val_loss = result.accuracy, result.loss
    cand.val_logits, cand.train_logits = val_logits, train_logits
    return cand


def fall_back_to_received(cand: Candidate, received: nn.Module, node: NodeData) -> Candidate:
    """``FOLConfig.align_fallback = "received"``: when the aligned model
    ``cand`` scores lower on D_val than the neighbour model as it was received,
    return a candidate holding ``received`` itself (unchanged, its as-received
    score and size; the alignment's FLOPs and seconds stay counted, they were
    spent); otherwise ``cand``. Ties keep the aligned model, and so does a
    received model whose outputs on the node's data are not all finite.

    The score compared is the same D_val accuracy every candidate is ranked
    by, so the fallback never reads the test split.
    """
    if cand.score_before is None or not cand.score_before > cand.score:
        return cand
    val = node.val.tensors()
    train_logits = predict_logits(received, node.train.images)  # checked finite, kept: the candidate's own
    if not bool(torch.isfinite(train_logits).all()):
        return cand
    val_logits = cand.received_val_logits if cand.received_val_logits is not None else predict_logits(received, val[0])
    if not bool(torch.isfinite(val_logits).all()):
        return cand
    return dataclasses.replace(
        cand, model=received.eval(), score=cand.score_before, val_loss=logit_scores(val_logits, val[1]).loss,
        val_logits=val_logits, train_logits=train_logits, params_after=cand.params_before,
        macs_after=cand.macs_before,
        pruning={**cand.pruning, "fallback": "received"},
    )


def scored_candidate(name: str, model: nn.Module, node: NodeData, **recorded: Any) -> Candidate:
    """``model`` as a Top-K candidate as it is (not re-trained): scored on
    ``node``'s D_val, its size measured; ``recorded`` sets the other fields
    (what happened to it before, e.g. ``score_before``, ``params_before``).
    Without them it is unchanged: the "before" fields equal the "after" ones."""
    shape = tuple(node.train.images.shape[1:])
    params, macs = count_parameters(model), forward_macs(model, shape)
    val_logits = predict_logits(model, node.val.images)
    result = logit_scores(val_logits, node.val.labels)
    fields = dict(score_before=result.accuracy, params_before=params, macs_before=macs) | recorded
    return Candidate(name=name, model=model, score=result.accuracy, val_loss=result.loss, params_after=params,
                     macs_after=macs, val_logits=val_logits, **fields)


def candidate_val_logits(cand: Candidate, val_x: torch.Tensor) -> torch.Tensor:
    """``cand``'s logits on the node's D_val images ``val_x``: those kept by
    the pass that scored it, else computed now (:func:`fol.train.predict_logits`,
    the same pass, so the same values)."""
    return cand.val_logits if cand.val_logits is not None else predict_logits(cand.model, val_x)


def candidate_train_logits(cand: Candidate, train_x: torch.Tensor) -> torch.Tensor:
    """``cand``'s logits on the node's D_train images ``train_x`` (exactly
    those, in their order): those kept by the pass that checked them, else
    computed now (:func:`fol.train.predict_logits` with the same batching, so
    the same values, bit for bit)."""
    return cand.train_logits if cand.train_logits is not None else predict_logits(cand.model, train_x)


def own_candidate(name: str, model: nn.Module, node: NodeData) -> Candidate:
    """The node's own current model as a Top-K candidate (not re-trained)."""
    return scored_candidate(name, model, node, own=True)


def select_top_k(candidates: Sequence[Candidate], k: int, own_val_logits: torch.Tensor, val_x: torch.Tensor,
                 own_in_top_k: str = "ranked", tie_break: str = "cosine", rule: str = "score",
                 val_y: torch.Tensor | None = None) -> list[Candidate]:
    """The Top-K ensemble members.

    ``own_in_top_k = "ranked"`` (the paper): every candidate competes on its
    D_val score (higher first). ``"always"``: the own candidate takes the first
    seat and only the others are ranked for the remaining ``k - 1``.
    Ties are broken by ``tie_break``: ``"cosine"`` (the paper: cosine
    similarity of the candidate's D_val logits to the own model's, higher
    first) or ``"val-loss"`` (D_val cross-entropy, lower first), then by name
    for full determinism. Sets ``cosine`` on every candidate.

    ``rule = "score"`` (the paper) fills the seats in that order.
    ``rule = "greedy"`` (forward ensemble selection, Caruana et al., ICML
    2004) fills only the first seat so (the own model with ``"always"``);
    every next seat goes to the candidate whose addition gives the members'
    averaged logits the lowest cross-entropy on D_val (``val_y``), ties in
    that order again. Logits, not probabilities, are averaged because stage 3
    combines the members' logits (uniform weights are where its weight fit
    starts), so the seats are judged by the combination that is deployed. A
    second copy of what the ensemble already knows then loses to a weaker
    model that is right where it is wrong.

    A candidate's ``val_logits`` (its logits on ``val_x``, kept by the pass
    that scored it) are used as they are; only the others are computed.
    """
    logits = {id(c): candidate_val_logits(c, val_x) for c in candidates}
    for cand in candidates:
        cand.cosine = logit_cosine(logits[id(cand)], own_val_logits)

    def key(c: Candidate) -> tuple[float, float, str]:
        tie = -c.cosine if tie_break == "cosine" else c.val_loss
        return (-c.score, tie, c.name)

    if own_in_top_k == "always":
        own = [c for c in candidates if c.own]
        ranked = own + sorted((c for c in candidates if not c.own), key=key)
    else:
        ranked = sorted(candidates, key=key)
    if rule == "score" or k <= 1 or len(ranked) <= 1:
        return ranked[:k]
    if val_y is None:
        raise ValueError("select_top_k(rule='greedy') needs the D_val labels (val_y)")
    chosen, rest = ranked[:1], ranked[1:]
    while rest and len(chosen) < k:
        def loss_with(c: Candidate) -> float:
            members = [logits[id(m)].float() for m in (*chosen, c)]
            uniform = torch.full((len(members),), 1.0 / len(members))
            return float(F.cross_entropy(ensemble_logits(members, uniform), val_y))
        best = min(rest, key=lambda c: round(loss_with(c), 9))  # min keeps the first of equals: ranked order
        chosen.append(best)
        rest.remove(best)
    return chosen
