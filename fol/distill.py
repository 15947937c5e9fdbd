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
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from fol.train import History, TrainConfig, evaluate, fit, predict_logits

__all__ = ["kd_loss", "proximal_term", "distill", "DistillResult", "augment_inputs", "augment_views",
           "REVERT_RULES"]

#: When :func:`distill` hands back the starting model instead of the student.
REVERT_RULES = ("kl", "val", "none")


def augment_views(x: torch.Tensor, mix: str, gen: torch.Generator) -> torch.Tensor:
    """One label-free augmented view of each image of ``x`` ([N, C, H, W]),
    drawn from ``gen``: a horizontal flip with probability 1/2, a random crop
    of a reflect-padded image (pad = H // 8), then a mix with another image of
    ``x`` (a random permutation): ``"mixup"`` blends pixels with a Beta(1, 1)
    weight per image, ``"cutmix"`` pastes a random box, ``"none"`` leaves it.
    No label is produced or read. ``x`` is not modified.

    >>> x = torch.rand(4, 3, 8, 8)
    >>> augment_views(x, "mixup", torch.Generator().manual_seed(0)).shape
    torch.Size([4, 3, 8, 8])
    """
    if mix not in ("mixup", "cutmix", "none"):
        raise ValueError(f"mix must be 'mixup', 'cutmix' or 'none', got {mix!r}")
    n, _, h, w = x.shape
    if n == 0:
        return x.clone()
    pad = max(1, h // 8)
    flip = torch.rand(n, generator=gen) < 0.5
    xc = torch.where(flip[:, None, None, None], x.flip(-1), x)
    padded = F.pad(xc, (pad, pad, pad, pad), mode="reflect")
    dy = torch.randint(0, 2 * pad + 1, (n,), generator=gen)
    dx = torch.randint(0, 2 * pad + 1, (n,), generator=gen)
    xc = torch.stack([padded[i, :, dy[i]:dy[i] + h, dx[i]:dx[i] + w] for i in range(n)])
    partner = xc[torch.randperm(n, generator=gen)]
    if mix == "mixup":
        lam = torch.rand(n, generator=gen)  # Beta(1, 1) is uniform on [0, 1]
        xc = lam[:, None, None, None] * xc + (1 - lam[:, None, None, None]) * partner
    elif mix == "cutmix":
        ratio = torch.rand(n, generator=gen).sqrt()  # side ratio: box area ~ U(0, 1)
        xc = xc.clone()
        for i in range(n):
            bh, bw = int(round(float(ratio[i]) * h)), int(round(float(ratio[i]) * w))
            y0 = int(torch.randint(0, h - bh + 1, (1,), generator=gen))
            x0 = int(torch.randint(0, w - bw + 1, (1,), generator=gen))
            xc[i, :, y0:y0 + bh, x0:x0 + bw] = partner[i, :, y0:y0 + bh, x0:x0 + bw]
    return xc


def augment_inputs(x: torch.Tensor, copies: int, mix: str = "mixup", seed: int = 0) -> torch.Tensor:
    """``copies`` label-free augmented copies of the images ``x`` ([N, C, H, W]),
    stacked: :func:`augment_views` ``copies`` times from one generator seeded
    with ``seed``. The distillation teacher labels these inputs, so labels used
    elsewhere never change. ``x`` is not modified.

    >>> x = torch.rand(4, 3, 8, 8)
    >>> augment_inputs(x, 2, "cutmix").shape
    torch.Size([8, 3, 8, 8])
    """
    if mix not in ("mixup", "cutmix", "none"):
        raise ValueError(f"mix must be 'mixup', 'cutmix' or 'none', got {mix!r}")
    if copies <= 0 or x.shape[0] == 0:
        return x.new_zeros((0, *x.shape[1:]))
    gen = torch.Generator().manual_seed(seed)
    return torch.cat([augment_views(x, mix, gen) for _ in range(copies)])


def kd_loss(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float = 1.0,
            reduction: str = "batchmean") -> torch.Tensor:
    """``T^2 * KL(softmax(teacher/T) || softmax(student/T))``, mean over the batch
    (``reduction="none"``: one value per sample). FOL's distillation uses it; the
    data-free baselines keep their own copy of the same formula
    (:func:`fol.methods.dense.kl_div`, DENSE's ``kldiv``).

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
    *,
    revert: str = "kl",
    val: tuple[torch.Tensor, torch.Tensor] | None = None,
    start: nn.Module | None = None,
    teacher: nn.Module | None = None,
    views: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> DistillResult:
    """Distill cached ``teacher_logits`` (on inputs ``x``) into a copy of ``student``.

    With ``views`` (and the ``teacher`` module), every mini-batch is replaced
    by a fresh view ``views(batch)`` that the teacher labels then and there, so
    the student matches the teacher on the same view, never twice on the same
    one (function matching, Beyer et al., "Knowledge distillation: A good
    teacher is patient and consistent", CVPR 2022). ``teacher_logits`` (on the
    plain ``x``) then serve only the ``"kl"`` revert rule.

    ``start`` (default ``student``) is the node's model before this stage: the
    proximal anchor ``theta_prev`` and what a revert hands back (a caller that
    pre-trained ``student`` on other inputs passes the node's model here).
    ``revert`` is the rule that keeps ``start`` instead of the student:
    ``"kl"`` when training did not lower the KL to the teacher on ``x`` (eval
    mode; as happens when the Top-K ensemble is essentially the student
    itself, so distillation never moves the node away from its teacher),
    ``"val"`` when the student's accuracy on ``val`` is below ``start``'s,
    ``"none"`` never.
    """
    if revert not in REVERT_RULES:
        raise ValueError(f"revert must be one of {REVERT_RULES}, got {revert!r}")
    if revert == "val" and val is None:
        raise ValueError("revert='val' needs val=(x, y)")
    if views is not None and teacher is None:
        raise ValueError("views need the teacher module to label each view")
    if teacher is not None:
        teacher.eval()
    start = student if start is None else start
    student = copy.deepcopy(student)
    anchor = [p.detach().clone() for p in start.parameters()]

    def objective(model: nn.Module, batch: Sequence[torch.Tensor]) -> torch.Tensor:
        xb, tb = batch
        if views is not None:
            assert teacher is not None
            xb = views(xb)
            with torch.no_grad():
                tb = teacher(xb)
        loss = kd_loss(model(xb), tb, temperature)
        if lam > 0:
            loss = loss + lam * proximal_term(model, anchor)
        return loss

    with torch.no_grad():
        kl_before = float(kd_loss(predict_logits(start, x), teacher_logits, temperature))
    history = fit(student, (x, teacher_logits.detach()), cfg, objective=objective)
    with torch.no_grad():
        kl_after = float(kd_loss(predict_logits(student, x), teacher_logits, temperature))
    if revert == "kl":
        reverted = kl_after >= kl_before
    elif revert == "val":
        assert val is not None
        reverted = evaluate(student, *val).accuracy < evaluate(start, *val).accuracy
    else:
        reverted = False
    if reverted:  # the rule says the student is no better: keep the start
        student = start
        kl_after = kl_before
    with torch.no_grad():
        drift = float(proximal_term(student, anchor).sqrt())
    return DistillResult(student, history, kl_before, kl_after, drift, reverted)
