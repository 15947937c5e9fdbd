"""Co-Boosting (Dai et al., ICLR 2024): data and ensemble boosted together.

The DENSE server loop (:mod:`fol.methods.dense`: one upload per node, a
generator trained against the client ensemble, distillation of the ensemble
into one global student, one broadcast) with the three changes of the
published code (github.com/rong-dai/Co-Boosting, ``COBOOSTSynthesizer`` and
``cb_kd_train``):

* **hard-sample synthesis**: the generator's cross-entropy is weighted per
  sample by (1 - p_y)^hs, p_y the ensemble's probability of the target
  class, and the adversarial term -KL(ensemble || student) (T = 3) acts on
  every sample, not only the disagreeing ones;
* **ensemble-weight updates**: from the second epoch on, the member weights
  take ``weight_steps`` signed-gradient steps of size mu x wdc^epoch on the
  cross-entropy of the weighted ensemble over the synthetic pool (labels =
  the targets the samples were synthesized for), clipped to [0, 1]; the
  ensemble is sum_i w_i f_i / sum_i w_i;
* **hard samples in distillation**: each distillation batch is perturbed by
  one signed-gradient step inside an L-inf ball of radius epsilon = 8/255.
  ``perturb = "ods"`` (default) follows the published code (Output
  Diversified Sampling: gradient of a random projection of the ensemble's
  softmax at T = 4); ``perturb = "disagreement"`` moves towards larger
  ensemble-student KL instead.

Published defaults (``datafree_kd.py`` / ``co_boosting.sh``): 200 epochs,
g_steps 30, lr_g 1e-3, batch 128, nz 256, ngf 64, adv 1, oh 1, bn 0, hs 1,
mu 0.01, wdc 0.99, wa_steps 1, odseta 8 (/255), kd_T 4, kd_lr 0.01, SGD
momentum 0.9, weight decay 1e-4, cosine schedule, gradient-norm clip 10.
The synthesis budget is the ``budget`` option shared with DENSE
(:data:`fol.methods.dense.BUDGETS`; ``"paper"`` is 200 x 30 x 128 = 768,000
generator samples, the default ``"tiny"`` 15 x 5 x 48 = 3,600, 1/213 of it,
with a generator 4x narrower); the other hyperparameters are the published
ones, except that the student's gradient-norm clip is not applied (the shared
training loop has no clipping hook; the generator's clip is kept), that the
ensemble weights of an epoch are fitted on the pool including that epoch's
synthesized batch (the published code fits them before adding it), and that
the student's BatchNorm running statistics are recomputed over the pool after
each distillation pass (the shared training loop's rule).
"""

from __future__ import annotations

from typing import ClassVar

from fol.methods.base import register
from fol.methods.dense import _DataFreeMethod

__all__ = ["CoBoostingMethod"]


@register
class CoBoostingMethod(_DataFreeMethod):
    """Co-Boosting: DENSE + hard samples + ensemble-weight boosting."""

    name: ClassVar[str] = "co-boosting"
    description: ClassVar[str] = "Co-Boosting: data-free one-shot FL with hard samples and ensemble re-weighting"
    paper_budget: ClassVar[dict] = dict(epochs=200, g_steps=30, synthesis_batch=128, kd_batch=128, nz=256, ngf=64)
    defaults: ClassVar[dict] = dict(
        lr_g=1e-3, bn=0.0, oh=1.0, adv=1.0, temperature=4.0, kd_lr=0.01, kd_weight_decay=1e-4, cosine_lr=True,
        grad_clip=10.0, hard_sample_power=1.0, adv_mask=False, adv_temperature=3.0,
        weight_steps=1, weight_lr=0.01, weight_decay_rate=0.99, perturb="ods", epsilon=8.0 / 255.0,
    )
