"""Stage 3, the weighted Top-K ensemble: ``A_w(x) = sum_i w_i f_i(x)`` over member
logits, with ``w`` on the probability simplex.

The weights are fitted by minimizing cross-entropy of the combined logits on
labelled data: D_train in the paper, or held-out D_val
(``FOLConfig.ensemble_fit``). Member logits are computed once (:func:`fol.train.predict_logits`) and
cached, so fitting touches no network: a few hundred full-batch Adam steps on a
softmax parameterisation ``w = softmax(v)`` starting from uniform weights. This
project adds one optional safeguard the paper does not spell out
(``vertex=True``, the ``paper`` preset): the fitted weights are compared with
every single member (each simplex vertex) and the best of them is kept, so the
ensemble's fitting loss is never worse than its best member's.

>>> import torch
>>> y = torch.tensor([0, 1, 1, 0])
>>> good = torch.tensor([[2., 0.], [0., 2.], [0., 2.], [2., 0.]])
>>> bad = -good
>>> w = fit_ensemble_weights([good, bad], y)
>>> bool(w[0] > 0.9) and abs(float(w.sum()) - 1.0) < 1e-6
True
"""

from __future__ import annotations

import math
from typing import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from fol.train import MAX_FACTOR

__all__ = ["WeightedEnsemble", "fit_ensemble_weights", "ensemble_logits"]


def ensemble_logits(member_logits: Sequence[torch.Tensor], weights: torch.Tensor) -> torch.Tensor:
    """``sum_i weights[i] * member_logits[i]`` (stacked over members)."""
    stacked = torch.stack(list(member_logits))  # [K, N, C]
    return torch.einsum("k,knc->nc", weights.to(stacked.dtype), stacked)


def fit_ensemble_weights(
    member_logits: Sequence[torch.Tensor],
    labels: torch.Tensor,
    steps: int = 200,
    lr: float = 0.1,
    vertex: bool = True,
) -> torch.Tensor:
    """Simplex weights minimizing the cross-entropy of the weighted logits
    (``vertex``: fall back to the best single member when it fits better).

    Returns a 1-D float tensor, non-negative, summing to 1. Deterministic
    (full-batch, zero initialization of the softmax parameters).
    """
    if not (math.isfinite(lr) and 0 < lr <= MAX_FACTOR):  # Adam's step is lr / 0.1 in float32 at first
        raise ValueError(f"fit_ensemble_weights: lr must be in (0, {MAX_FACTOR:g}], got {lr!r}")
    k = len(member_logits)
    if k == 0:
        raise ValueError("fit_ensemble_weights needs at least one member")
    logits = [t.detach().float() for t in member_logits]
    if k == 1:
        return torch.ones(1)

    def loss_of(w: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(ensemble_logits(logits, w), labels)

    v = torch.zeros(k, requires_grad=True)
    opt = torch.optim.Adam([v], lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_of(torch.softmax(v, 0))
        loss.backward()
        opt.step()
    with torch.no_grad():
        best_w = torch.softmax(v, 0)
        best = float(loss_of(best_w))
        for i in range(k if vertex else 0):
            vertex = F.one_hot(torch.tensor(i), k).float()
            loss_i = float(loss_of(vertex))
            if loss_i < best:
                best, best_w = loss_i, vertex
    return best_w.detach()


class WeightedEnsemble(nn.Module):
    """``sum_i w_i f_i(x) / sum_i w_i`` over the members' logits.

    FOL-A deploys this module itself (K forward passes per prediction, simplex
    weights from :func:`fit_ensemble_weights`). Uniform weights by default
    (DENSE's ``Ensemble_A``); ``frozen=True`` keeps the members untrained and
    in eval mode; weights can be passed per call. The weights given here must
    be finite, non-negative and of positive sum (``ValueError`` otherwise).
    (The data-free baselines' teacher, :class:`fol.methods.dense.WeightedEnsemble`, is this class frozen,
    summing the members' logits one by one as the published code does.)

    >>> lin = nn.Linear(2, 2)
    >>> ens = WeightedEnsemble([lin, lin], torch.tensor([1.0, 3.0]))
    >>> x = torch.ones(1, 2)
    >>> bool(torch.allclose(ens(x), lin(x)))
    True
    """

    def __init__(self, members: Sequence[nn.Module], weights: torch.Tensor | None = None, *,
                 frozen: bool = False) -> None:
        super().__init__()
        n = len(members)
        if weights is None:
            weights = torch.full((n,), 1.0 / max(n, 1))
        if n != int(weights.numel()):
            raise ValueError(f"{n} members but {int(weights.numel())} weights")
        w = weights.detach().double()
        if n == 0 or not bool(torch.isfinite(w).all()) or bool((w < 0).any()) or not float(w.sum()) > 0:
            # the output divides by the weights' sum: zero, negative or NaN weights give NaN or a sign flip
            raise ValueError(f"an ensemble needs at least one member and finite weights >= 0 of positive sum, "
                             f"got {w.tolist()[:8]}")
        self.members = nn.ModuleList(members)
        self.frozen = frozen
        if frozen:
            for p in self.members.parameters():
                p.requires_grad_(False)
        self.register_buffer("weights", weights.detach().float().clone())

    def train(self, mode: bool = True) -> "WeightedEnsemble":
        return super().train(False if self.frozen else mode)

    def forward(self, x: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
        w = self.weights if weights is None else weights
        return ensemble_logits([m(x) for m in self.members], w) / w.sum()
