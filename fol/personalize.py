"""One FOL round on one node: collect-and-align, Top-K, ensemble, distill.

:func:`personalize` is the multi-round API: call it once per collection round
``e = 1..E`` with the models received in that round; the node's state carries
the distilled student from one round to the next (and, with
``FOLConfig.keep_received = "all"``, the aligned neighbours of earlier rounds,
which compete again). The simulation drives it from
contact windows, ``fol personalize`` from a folder and the node agent from its
inbox.

Variants (docs/fol-algorithm.md): ``fol`` deploys the distilled student; ``fol-a`` deploys
the aligned, weighted Top-K ensemble itself (the teacher; K forward passes per
prediction); ``fol-n`` / ``fol-an`` are the same without alignment pruning
(fine-tune only). In every variant the distilled student is the model the node
keeps, shares and starts the next round from (this project's reading: the "-a"
rows change what is deployed, not what is exchanged). ``local`` is the
pretrained model alone.

The round is two calls, usable on their own: :func:`align_candidates` (stage
2) and :func:`ensemble_and_distill` (stages Top-K, 3 and 4), so a benchmark can
compare stage-3/4 options on one alignment. :func:`transfer_share` and
:func:`swarm_transfer` measure how much of the ensemble's gain over local the
student keeps (``RoundReport.transfer``).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import torch
from torch import nn

from fol.accounting import forward_macs, inference_flops, training_flops
from fol.checkpoint import ModelCard, save_model
from fol.config import FOLConfig
from fol.data import NodeData
from fol.distill import augment_inputs, augment_views, distill
from fol.ensemble import WeightedEnsemble, ensemble_logits, fit_ensemble_weights
from fol.errors import ConfigError, DataError, TrainingError
from fol.fileio import make_dirs, remove_path, write_json_atomic
from fol.models import ModelSpec
from fol.stages import (Candidate, align_neighbour, candidate_train_logits, candidate_val_logits,
                        fall_back_to_received, finetune_freeze_problem, own_candidate, scored_candidate,
                        select_top_k)
from fol.train import evaluate, predict_logits
from fol.variants import ALL_VARIANTS, VARIANTS
from swarmbase.tomlcheck import brief, shown

__all__ = ["Received", "NodeState", "RoundReport", "personalize", "check_received", "save_ensemble",
           "save_pool_round", "load_pool",
           "align_candidates", "apply_align_fallback", "ensemble_and_distill", "distillation_inputs",
           "transfer_share", "swarm_transfer", "SWARM_SHARE_MIN_GAIN"]

log = logging.getLogger(__name__)


@dataclass
class Received:
    """A neighbour model as it arrived (already validated by the safe loader)."""

    name: str
    model: nn.Module
    card: ModelCard


@dataclass
class NodeState:
    """What a node keeps between rounds."""

    name: str
    spec: ModelSpec
    class_names: list[str]
    data: NodeData
    local_model: nn.Module  # the pretrained model (the ``local`` baseline)
    current_model: nn.Module  # the student the next round starts from
    deployed: nn.Module | None = None  # what the chosen variant serves
    round: int = 0
    reports: list["RoundReport"] = field(default_factory=list)
    #: neighbours' candidates of earlier rounds, as aligned when they arrived
    #: (filled only with ``FOLConfig.keep_received = "all"``; each named
    #: ``"<sender> (round <e>)"``)
    pool: list[Candidate] = field(default_factory=list)

    @classmethod
    def from_pretrained(cls, name: str, model: nn.Module, spec: ModelSpec, class_names: Sequence[str], data: NodeData) -> "NodeState":
        model.eval()
        return cls(name, spec, list(class_names), data, local_model=model, current_model=model, deployed=model)


@dataclass
class RoundReport:
    """Everything a round measured; ``to_dict`` is what ``report.json`` holds."""

    node: str
    round: int
    variant: str
    received: list[dict[str, Any]] = field(default_factory=list)
    candidates: list[dict[str, Any]] = field(default_factory=list)
    selected: list[str] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    distillation: dict[str, float] = field(default_factory=dict)
    accuracy: dict[str, dict[str, float]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    train_flops: int = 0
    kept_local: bool = False
    #: share of the ensemble's gain over local the student keeps, per split
    #: (:func:`transfer_share`; None where undefined; no entry at all when the node
    #: kept its model, ``kept_local``: no ensemble was built)
    transfer: dict[str, float | None] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def check_received(state: NodeState, item: Received) -> str | None:
    """Why ``item`` cannot be used by this node, or None when it can (:meth:`ModelCard.unusable_by`)."""
    return item.card.unusable_by(state.class_names, tuple(state.data.train.images.shape[1:]))


def _pooled_name(sender: str, round_: int) -> str:
    """The name a neighbour's candidate keeps in ``NodeState.pool`` after its round."""
    return f"{sender} (round {round_})"


def _seed(cfg: FOLConfig, round_: int, name: str) -> int:
    return (cfg.seed * 1_000_003 + round_ * 10_007 + zlib.crc32(name.encode())) % (2**31)


def personalize(
    state: NodeState,
    received: Sequence[Received],
    round: int,
    cfg: FOLConfig,
    variant: str = "fol",
    progress: bool = False,
) -> RoundReport:
    """Run FOL round ``round`` on ``state`` with the models ``received`` in it.

    Updates ``state`` in place (current model, deployed model, round, reports)
    and returns the round's report. Unusable models are skipped and listed with
    their reason; if nothing usable arrived, or every usable model failed its
    alignment, the node keeps its model (``kept_local``). A node with an empty
    split raises :class:`fol.errors.DataError`.
    """
    if variant not in ALL_VARIANTS:
        raise ConfigError(f"variant {variant!r} is unknown; expected one of {', '.join(ALL_VARIANTS)}")
    empty = [split for split, n in zip(("train", "val", "test"), state.data.sizes()) if n == 0]
    if empty:  # fol.data.split_node never gives one; a NodeData built otherwise can
        raise DataError(f"{state.name}: its {' and '.join(empty)} split{'s are' if len(empty) > 1 else ' is'} empty; a "
                        f"FOL round fine-tunes on D_train, ranks and weighs on D_val and reports on D_test")
    report = RoundReport(node=state.name, round=round, variant=variant)
    val, test = state.data.val.tensors(), state.data.test.tensors()
    t_round = time.perf_counter()

    usable: list[Received] = []
    for item in received:
        reason = check_received(state, item)
        if reason is None and variant == "local":  # not a fault of the model: nothing is used
            report.received.append({"name": item.name, "producer": item.card.producer, "arch": item.card.spec.arch,
                                    "used": False, "reason": "variant 'local' deploys the pretrained model and "
                                                              "uses no neighbour model"})
            continue
        if reason is None and (freeze := finetune_freeze_problem(  # the node agent: what fol personalize refuses
                cfg.finetune_freeze, {item.name: item.model}, f"a {item.card.spec.arch}")):
            reason = freeze  # its fine-tuning would freeze all of it: not the neighbour the option means to adapt
        if reason is None and len(usable) >= cfg.max_neighbours:
            reason = f"over the per-round limit Q = {cfg.max_neighbours}"
        report.received.append({"name": item.name, "producer": item.card.producer, "arch": item.card.spec.arch,
                                "used": reason is None, "reason": reason})
        if reason is None:
            usable.append(item)
        else:
            log.warning("%s: skipping %s: %s", state.name, item.name, reason)

    def keep_model() -> RoundReport:
        report.kept_local = True
        if variant == "local":
            state.deployed = state.local_model
        _record_accuracy(report, state, val, test, {})
        state.round = round
        state.reports.append(report)
        return report

    if variant == "local" or not usable:
        return keep_model()

    use_pruning, deploy_ensemble = VARIANTS[variant]
    candidates = align_candidates(state, usable, round, cfg, use_pruning, report, progress)
    fresh = candidates[1:]
    if cfg.keep_received == "all":  # earlier rounds' neighbours compete again, as aligned then
        candidates = [candidates[0], *state.pool, *fresh]
    if len(candidates) == 1:  # every usable neighbour failed its alignment: nothing was used
        return keep_model()
    ensemble, student = ensemble_and_distill(state, candidates, round, cfg, report)
    if cfg.keep_received == "all":
        specs = {item.name: item.card.spec for item in usable}
        state.pool.extend(dataclasses.replace(c, name=_pooled_name(c.name, round), round=round, spec=specs[c.name],
                                              val_logits=None, train_logits=None,  # shared within a round
                                              received_val_logits=None)
                          for c in fresh)
    state.current_model = student
    state.deployed = ensemble if deploy_ensemble else state.current_model
    _record_accuracy(report, state, val, test, {"student": state.current_model, "ensemble": ensemble})
    report.transfer = {split: transfer_share(report.accuracy["local"][split], report.accuracy["student"][split],
                                             report.accuracy["ensemble"][split], min_gain=1.0 / n)
                       for split, n in (("val", len(val[1])), ("test", len(test[1])))}
    report.seconds["round_total"] = time.perf_counter() - t_round
    state.round = round
    state.reports.append(report)
    return report


def align_candidates(state: NodeState, usable: Sequence[Received], round: int, cfg: FOLConfig, use_pruning: bool,
                     report: RoundReport, progress: bool = False) -> list[Candidate]:
    """Stage 2 of round ``round``: the own candidate and every usable received
    model aligned to the node (fine-tune, alignment pruning unless
    ``use_pruning`` is false, post fine-tune, score; with
    ``cfg.align_fallback = "received"`` a neighbour whose aligned model scores
    below the model as received competes as received). A neighbour whose
    fine-tuning fails (:class:`fol.errors.TrainingError`, e.g. a non-finite loss
    from huge weights) is left out and marked unused in ``report.received``
    with the reason. An own model whose outputs on D_val are not all finite
    raises :class:`fol.errors.TrainingError` before any neighbour is aligned.
    Adds FLOPs and seconds to ``report``."""
    own = state.current_model
    candidates: list[Candidate] = [own_candidate(f"{state.name} (own)", own, state.data)]
    if not bool(torch.isfinite(candidates[0].val_logits).all()):  # before any neighbour is blamed for it
        raise TrainingError(f"{state.name}: the node's own model gives non-finite outputs on its validation images "
                            f"(finite but huge weights); it can be neither ranked nor distilled into")
    from tqdm.auto import tqdm

    for item in tqdm(usable, desc=f"{state.name} align", disable=None if progress else True, leave=False):
        seed = _seed(cfg, round, item.name)
        try:
            cand = align_neighbour(
                item.name, item.model, own, state.data,
                finetune=cfg.finetune_train(cfg.finetune_epochs, seed, "fine-tune"),
                post_finetune=cfg.finetune_train(cfg.post_finetune_epochs, seed + 1, "post fine-tune"),
                prune=cfg.prune(seed + 2) if use_pruning else None,
                arch=item.card.spec.arch,
                freeze=cfg.finetune_freeze,
            )
        except TrainingError as exc:  # a neighbour's weights (e.g. finite but huge) must not end the round
            reason = f"alignment failed: {exc}"
            log.warning("%s: skipping %s: %s", state.name, item.name, reason)
            entry = next((e for e in report.received if e["name"] == item.name and e["used"]), None)
            if entry is not None:
                entry.update(used=False, reason=reason)
            continue
        report.train_flops += cand.train_flops
        for stage, secs in cand.seconds.items():
            report.seconds[stage] = report.seconds.get(stage, 0.0) + secs
        candidates.append(cand)
    if cfg.align_fallback == "received":
        return apply_align_fallback(candidates, usable, state.data)
    return candidates


def apply_align_fallback(candidates: Sequence[Candidate], usable: Sequence[Received],
                         data: NodeData) -> list[Candidate]:
    """``FOLConfig.align_fallback = "received"`` on the candidates of
    :func:`align_candidates` (the own one first, then the aligned neighbours,
    each matched by name to its ``usable`` item; a neighbour left out by the
    alignment has no candidate): every neighbour whose aligned model scores
    below the model as received competes as received
    (:func:`fol.stages.fall_back_to_received`). A new list; the aligned
    candidates are not changed."""
    received = {item.name: item.model for item in usable}
    if len(received) != len(usable):
        raise ValueError("apply_align_fallback: the received models' names must be unique")
    return [candidates[0]] + [fall_back_to_received(cand, received[cand.name], data) for cand in candidates[1:]]


def distillation_inputs(state: NodeState, cfg: FOLConfig, round: int) -> torch.Tensor:
    """The inputs stage 4 distils on (``cfg.distill_inputs``; ``"train+synth"``
    adds its synthetic inputs inside :func:`ensemble_and_distill`). Only images:
    the teacher labels them, no stored label is read or changed."""
    x = state.data.train.images
    if cfg.distill_inputs == "train+aug":
        extra = augment_inputs(x, cfg.distill_aug_copies, cfg.distill_mix, seed=_seed(cfg, round, "augment"))
        return torch.cat([x, extra])
    if cfg.distill_inputs == "train+val":
        return torch.cat([x, state.data.val.images])
    return x


def ensemble_and_distill(state: NodeState, candidates: Sequence[Candidate], round: int, cfg: FOLConfig,
                         report: RoundReport) -> tuple[WeightedEnsemble, nn.Module]:
    """Stages 3 and 4 of round ``round`` on aligned ``candidates`` (the own one
    first): Top-K, the weighted ensemble (the teacher) and the distilled
    student, both returned (eval mode); ``state`` is not changed. Fills the
    selection, weights and distillation fields of ``report``."""
    train, val = state.data.train.tensors(), state.data.val.tensors()
    own = state.current_model
    t0 = time.perf_counter()
    first = candidates[0]
    own_val_logits = candidate_val_logits(first, val[0]) if first.model is own else predict_logits(own, val[0])
    top = select_top_k(candidates, cfg.top_k, own_val_logits, val[0], cfg.own_in_top_k, cfg.tie_break,
                       rule=cfg.top_k_rule, val_y=val[1])
    report.candidates = [c.summary() for c in candidates]
    report.selected = [c.name for c in top]
    report.seconds["select"] = time.perf_counter() - t0

    # Stage 3: weighted ensemble on cached logits of the fitting split (never test): those the
    # candidates kept from stage 2 where they have them.
    t0 = time.perf_counter()
    fit_x, fit_y = train if cfg.ensemble_fit == "train" else val
    on_fit = candidate_val_logits if cfg.ensemble_fit == "val" else candidate_train_logits
    fit_logits = [on_fit(c, fit_x) for c in top]
    weights = fit_ensemble_weights(fit_logits, fit_y, steps=cfg.ensemble_steps, lr=cfg.ensemble_lr,
                                   vertex=cfg.ensemble_vertex)
    ensemble = WeightedEnsemble([c.model for c in top], weights).eval()
    report.weights = [float(w) for w in weights]
    report.seconds["ensemble"] = time.perf_counter() - t0

    # Stage 4: regularized distillation into the node's own architecture.
    t0 = time.perf_counter()
    x = distillation_inputs(state, cfg, round)
    shape = tuple(train[0].shape[1:])
    start = own
    if cfg.distill_inputs in ("synth", "train+synth"):
        start, synth_x, synth_flops = _synthetic_warm_start(own, ensemble, shape, len(state.class_names), cfg, round)
        report.train_flops += synth_flops
        if cfg.distill_inputs == "train+synth" and synth_x is not None:
            x = torch.cat([x, synth_x])
    reuse = cfg.ensemble_fit == "train" and x is train[0]
    if reuse:  # the paper's path: the teacher's logits are the cached fitting logits
        teacher_logits = ensemble_logits(fit_logits, weights)
    elif x is train[0]:  # exactly D_train's images: the logits the candidates kept from stage 2
        teacher_logits = ensemble_logits([candidate_train_logits(c, x) for c in top], weights)
    else:
        teacher_logits = ensemble_logits([predict_logits(c.model, x) for c in top], weights)
    # The algorithm's logical passes (the fitting split's and the teacher's on x), whether or not
    # their logits were kept from stage 2's finiteness check.
    logit_passes = int(fit_x.shape[0]) + (0 if reuse else int(x.shape[0]))
    views = None
    if cfg.distill_inputs == "function-matching":  # a fresh view of every image at every step
        gen = torch.Generator().manual_seed(_seed(cfg, round, "augment"))
        views = functools.partial(augment_views, mix=cfg.distill_mix, gen=gen)
    macs = forward_macs(own, shape)
    result = distill(start, x, teacher_logits, cfg.distill_train(_seed(cfg, round, "distill")),
                     cfg.temperature, cfg.lam, revert=cfg.distill_revert, val=val, start=own,
                     teacher=ensemble if views is not None else None, views=views)
    report.distillation = {"kl_before": result.kl_before, "kl_after": result.kl_after, "drift_l2": result.drift,
                           "reverted": result.reverted, "inputs": int(x.shape[0])}
    report.train_flops += training_flops(macs, result.history.samples_seen)
    if views is not None:  # the teacher labels every view it is shown
        logit_passes += result.history.samples_seen
    report.train_flops += sum(inference_flops(c.macs_after, logit_passes) for c in top)  # teacher logits
    report.seconds["distill"] = time.perf_counter() - t0
    return ensemble, result.student.eval()


def check_synthesized_inputs(cfg: FOLConfig, shape: Sequence[int]) -> None:
    """Refuse a ``distill_inputs = "synth"`` / ``"train+synth"`` whose synthesis
    (``batch_size`` images per step, ``distill_epochs`` batches kept) could not be
    held in memory for images of ``shape``; other inputs need no check. Run by
    ``fol simulate --check`` and again when the synthesis starts."""
    if cfg.distill_inputs not in ("synth", "train+synth"):
        return
    from fol.methods.dense import DataFreeConfig, check_synthesis_size

    check_synthesis_size(cfg.distill_epochs, cfg.batch_size, DataFreeConfig.nz, DataFreeConfig.ngf, shape,
                         f"fol.batch_size (the synthesis batch of distill_inputs = {cfg.distill_inputs!r})")


def _synthetic_warm_start(own: nn.Module, ensemble: WeightedEnsemble, shape: tuple[int, ...], num_classes: int,
                          cfg: FOLConfig, round: int) -> tuple[nn.Module, torch.Tensor | None, int]:
    """``distill_inputs = "synth"`` / ``"train+synth"``: distil the teacher into
    a copy of ``own`` on inputs synthesized from the teacher by DENSE's
    generator and loop (:func:`fol.methods.dense.distill_data_free`, with the
    weighted ensemble as its single member), before the distillation on D_train
    (and, for ``"train+synth"``, on the synthesized inputs it returns)."""
    import copy

    from fol.methods.dense import DataFreeConfig, distill_data_free

    check_synthesized_inputs(cfg, shape)
    dcfg = DataFreeConfig(epochs=cfg.distill_epochs, temperature=cfg.temperature, kd_lr=cfg.distill_lr,
                          synthesis_batch=cfg.batch_size, kd_batch=cfg.batch_size, seed=_seed(cfg, round, "synth"))
    result = distill_data_free([ensemble], copy.deepcopy(own), shape, num_classes, dcfg, kd_lr_field="fol.distill_lr",
                               kd_desc="distill (warm start on synthesized inputs)")
    return result.student, result.pool, result.server_flops


def transfer_share(local: float, student: float, ensemble: float, min_gain: float = 1e-6) -> float | None:
    """The share of the ensemble's gain over ``local`` that the distilled
    ``student`` keeps: ``(student - local) / (ensemble - local)``.

    Undefined (None) when the ensemble gained less than ``min_gain`` (e.g. one
    test image) over local: a ratio to a gain of about zero says nothing. The
    share can be negative (the student lost accuracy) or above 1 (the student
    beat its teacher).

    >>> transfer_share(0.60, 0.66, 0.70)
    0.6
    >>> transfer_share(0.60, 0.62, 0.60) is None
    True
    """
    gain = ensemble - local
    # accuracies are float32 fractions: a gain of exactly one test image can come out a few 1e-8
    # below 1 / n (11/15 -> 12/15 gains 0.06666666), which is not "less than one image"
    if gain < min_gain * (1 - 1e-4):
        return None
    return round((student - local) / gain, 10)


#: The least gain of the ensemble's swarm mean over local's (0.5 points) for which a swarm's share
#: is reported: below it the ratio divides by a handful of test images (one image on one of 24
#: nodes moves a swarm mean by about 0.1 point) and can print any value. The selection script's
#: transfer columns use the same floor.
SWARM_SHARE_MIN_GAIN = 0.005


def swarm_transfer(local: Sequence[float], student: Sequence[float], ensemble: Sequence[float],
                   min_gain: float = 1e-6, mean_min_gain: float = SWARM_SHARE_MIN_GAIN) -> dict[str, Any]:
    """The transfer over a swarm (one value per node in each sequence):
    ``per_node`` shares (:func:`transfer_share`, None where undefined),
    ``mean_of_nodes`` (mean of the defined per-node shares, None if none is)
    and ``of_means``: the share computed on the swarm means (the figure to
    quote: it weights every node's gain the same), defined when the
    ensemble's mean gain is at least ``mean_min_gain``
    (:data:`SWARM_SHARE_MIN_GAIN`, half a point), with ``defined`` the number
    of nodes with a defined share (``min_gain`` per node).

    >>> out = swarm_transfer([0.5, 0.6], [0.6, 0.6], [0.7, 0.6])
    >>> out["per_node"], out["of_means"], out["defined"]
    ([0.5, None], 0.5, 1)
    """
    if not (len(local) == len(student) == len(ensemble)):
        raise ValueError("swarm_transfer needs one value per node in each sequence")
    per_node = [transfer_share(a, b, c, min_gain) for a, b, c in zip(local, student, ensemble)]
    defined = [v for v in per_node if v is not None]
    n = max(1, len(local))
    of_means = transfer_share(sum(local) / n, sum(student) / n, sum(ensemble) / n, mean_min_gain) if local else None
    return {"per_node": per_node, "mean_of_nodes": sum(defined) / len(defined) if defined else None,
            "of_means": of_means, "defined": len(defined)}


def _record_accuracy(report: RoundReport, state: NodeState, val: Any, test: Any, extra: dict[str, nn.Module]) -> None:
    models = {"local": state.local_model, **extra, "deployed": state.deployed}
    for key, model in models.items():
        assert model is not None
        report.accuracy[key] = {"val": evaluate(model, *val).accuracy, "test": evaluate(model, *test).accuracy}


def save_pool_round(folder: Path, state: NodeState, round: int, received: Sequence[Received]) -> list[Path]:
    """``keep_received = "all"`` for a caller that rebuilds the node's state
    every round (the node agent): write the candidates that joined
    ``state.pool`` in ``round`` to ``folder/round-<round>/``, one safe-format
    file each (``candidate-<i>.safetensors``), the candidate's name and what
    alignment did to it in the card's ``extra``. The folder is emptied first,
    so a round run again after a crash leaves exactly its own candidates;
    the caller reads it back only in later rounds, after this round is
    committed. Under a :func:`fol.fileio.publish_gate` that refuses (the agent's
    abandoned round), the folder is neither emptied nor written. Returns the
    files written."""
    out = folder / f"round-{round}"
    remove_path(out)
    make_dirs(out)
    shape = list(state.data.train.images.shape[1:])
    specs = {_pooled_name(r.name, round): r.card.spec for r in received}
    written = []
    for i, cand in enumerate(c for c in state.pool if c.round == round):
        card = ModelCard(spec=specs[cand.name], class_names=list(state.class_names), input_shape=shape,
                         producer=state.name, round=round,
                         extra={"candidate": cand.name, "score_before": cand.score_before,
                                "params_before": cand.params_before, "macs_before": cand.macs_before,
                                "pruning": cand.pruning})
        path = out / f"candidate-{i}.safetensors"
        save_model(path, cand.model, card)
        written.append(path)
    return written


def load_pool(folder: Path, state: NodeState, before_round: int, max_bytes: int) -> list[Candidate]:
    """The candidates :func:`save_pool_round` wrote for rounds ``1 ..
    before_round - 1``, in round and file order, read with the safe loader
    and scored again on the node's D_val (the ranking key is recomputed, not
    trusted from the file). A missing round folder is a round that kept
    nothing. :class:`CheckpointError` names a file that cannot be used: one
    whose card is not of a candidate of that round, or of a model the node
    cannot run (:meth:`~fol.checkpoint.ModelCard.unusable_by`: another class
    set or input shape, as a received model is refused)."""
    from fol.checkpoint import load_model
    from fol.errors import CheckpointError

    shape = tuple(state.data.train.images.shape[1:])
    pool: list[Candidate] = []
    for e in range(1, before_round):
        files = sorted((folder / f"round-{e}").glob("candidate-*.safetensors"),
                       key=lambda p: (len(p.name), p.name))  # candidate-2 before candidate-10
        for path in files:
            loaded = load_model(path, max_bytes=max_bytes)
            extra = loaded.card.extra
            name = extra.get("candidate")
            if not isinstance(name, str) or loaded.card.round != e:
                raise CheckpointError(f"{brief(path)}: not a candidate this node kept in round {e} (card: candidate name "
                                      f"{shown(name)}, round {loaded.card.round})")
            unusable = loaded.card.unusable_by(state.class_names, shape)
            if unusable is not None:
                raise CheckpointError(f"{brief(path)}: not a candidate this node kept in round {e}: its {unusable}")
            number = {key: value for key in ("score_before", "params_before", "macs_before")  # what alignment
                      if isinstance(value := extra.get(key), (int, float)) and not isinstance(value, bool)}  # recorded
            pool.append(scored_candidate(
                name, loaded.model.eval(), state.data, arch=loaded.card.spec.arch,
                score_before=number.get("score_before"), params_before=int(number.get("params_before", 0)),
                macs_before=int(number.get("macs_before", 0)),
                pruning=extra["pruning"] if isinstance(extra.get("pruning"), dict) else {}, round=e,
                spec=loaded.card.spec))
    return pool


def save_ensemble(folder: Path, state: NodeState, report: RoundReport, received: Sequence[Received]) -> Path:
    """Write the ensemble a ``fol-a`` / ``fol-an`` round deployed: one safe-format
    file per member (``member-<i>-<tag>.safetensors``, its source in the card)
    and ``ensemble.json`` with the weights; returns the JSON's path.

    Write-then-switch: the members go to names no earlier save used (``<tag>``
    is fresh for each save), ``ensemble.json`` is replaced atomically once they
    are all written, and only then are the member files no longer listed
    removed. A save that fails part-way leaves the previous ``ensemble.json``
    and every member it names intact, and removes the members it wrote. Its
    removals pass :func:`fol.fileio.publish_gate` like its writes: the agent's
    abandoned round removes nothing (start-up recovery removes the folder of an
    unrecorded round)."""
    import secrets

    ensemble = state.deployed
    if not isinstance(ensemble, WeightedEnsemble):
        raise ConfigError(f"{state.name}: round {report.round} deployed no ensemble (variant {report.variant})")
    make_dirs(folder)
    specs = {c.name: c.spec for c in state.pool if c.spec is not None}  # kept from earlier rounds
    specs.update({r.name: r.card.spec for r in received})
    shape = list(state.data.train.images.shape[1:])
    tag = secrets.token_hex(4)
    members = []
    path = folder / "ensemble.json"
    try:
        for i, (member, source) in enumerate(zip(ensemble.members, report.selected)):
            card = ModelCard(spec=specs.get(source, state.spec), class_names=list(state.class_names),
                             input_shape=shape, producer=state.name, round=report.round, extra={"source": source})
            name = f"member-{i}-{tag}.safetensors"
            save_model(folder / name, member, card)  # save_model records 'pruned'
            members.append({"file": name, "source": source, "weight": float(ensemble.weights[i])})
        write_json_atomic(path, {"members": members, "combine": "sum_i w_i * logits_i"})
    except BaseException:  # this save's members are named nowhere: removed, not left behind
        for m in members:
            remove_path(folder / m["file"])  # (refused in an abandoned round: start-up recovery removes them)
        raise
    listed = {m["file"] for m in members}
    for old in sorted(folder.glob("member-*.safetensors")):  # earlier saves' members, no longer listed
        if old.name not in listed:
            remove_path(old)
    return path
