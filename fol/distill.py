"""Stage 4, regularized knowledge distillation.

The student (the node's own architecture, starting from its current weights
``theta_prev``) minimizes, on D_train with the teacher's logits cached once::

    T^2 * KL( softmax(A_w(x) / T) || softmax(f_k(x; theta) / T) ) + lam * ||theta - theta_prev||^2

The ``T^2`` factor (Hinton et al.) keeps gradient magnitudes comparable across
temperatures; the proximal term keeps the student near the model it started
from, which is what lets a node keep what it learned locally.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from fol.train import History, TrainConfig, fit, predict_logits

__all__ = ["kd_loss", "proximal_term", "distill", "DistillResult"]


def kd_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float = 1.0,
            reduction: str = "batchmean") -> torch.Tensor:
    """``T^2 * KL(softmax(teacher/T) || softmax(student/T))``, mean over the batch
    (``reduction="none"``: one value per sample). FOL's distillation and the
    data-free baselines (DENSE's ``kldiv``) use this one loss.

    >>> z = torch.tensor([[2.0, -1.0]])
    >>> float(kd_loss(z, z, 4.0)), bool(kd_loss(z, -z, 1.0, reduction="none")[0] > 0)
    (0.0, True)
    """
    t = temperature
    if reduction not in ("batchmean", "none"):
        raise ValueError(f"reduction must be 'batchmean' or 'none', got {reduction!r}")
    kl = F.kl_div(F.log_softmax(student_logits / t, dim=1), F.log_softmax(teacher_logits / t, dim=1),
                  reduction="batchmean" if reduction == "batchmean" else "none", log_target=True)
    return (t * t) * (kl if reduction == "batchmean" else kl.sum(1))


def proximal_term(model: nn.Module, anchor: Sequence[torch.Tensor]) -> torch.Tensor:
    """``||theta - theta_prev||^2`` over all parameters (``anchor`` in parameter order)."""
    return sum(((p - a) ** 2).sum() for p, a in zip(model.parameters(), anchor))  # type: ignore[return-value]


@dataclass
class DistillResult:
    student: nn.Module
    history: History
    kl_before: float
    kl_after: float
    drift: float  # ||theta - theta_prev||_2 after distillation
    reverted: bool = False  # distillation did not lower the KL, so the starting model was kept


def distill(
    student: nn.Module,
    x: torch.Tensor,
    teacher_logits: torch.Tensor,
    cfg: TrainConfig,
    temperature: float,
    lam: float,
) -> DistillResult:
    """Distill cached ``teacher_logits`` (on inputs ``x``) into a copy of ``student``.

    If training does not lower the KL to the teacher on ``x`` (eval mode) — as
    happens when the Top-K ensemble is essentially the student itself — the
    starting model is returned unchanged (``reverted``): distillation never
    moves the node away from its teacher.
    """
    start = student
    student = copy.deepcopy(student)
    anchor = [p.detach().clone() for p in student.parameters()]

    def objective(model: nn.Module, batch: Sequence[torch.Tensor]) -> torch.Tensor:
        xb, tb = batch
        loss = kd_loss(model(xb), tb, temperature)
        if lam > 0:
            loss = loss + lam * proximal_term(model, anchor)
        return loss

    with torch.no_grad():
        kl_before = float(kd_loss(predict_logits(student, x), teacher_logits, temperature))
    history = fit(student, (x, teacher_logits.detach()), cfg, objective=objective)
    with torch.no_grad():
        kl_after = float(kd_loss(predict_logits(student, x), teacher_logits, temperature))
    reverted = kl_after >= kl_before
    if reverted:  # nothing to learn (the teacher is, in effect, the student): keep the start
        student = start
        kl_after = kl_before
    with torch.no_grad():
        drift = float(proximal_term(student, anchor).sqrt())
    return DistillResult(student, history, kl_before, kl_after, drift, reverted)
