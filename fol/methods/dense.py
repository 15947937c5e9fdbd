"""DENSE (Zhang et al., NeurIPS 2022): data-free one-shot federated learning.

One exchange: every node that can reach the virtual server in round 0 uploads
its pretrained model; the server distills the ensemble of those models into
one global student without any data, and broadcasts the student to every node.
Each epoch of the server loop (the published ``AdvSynthesizer`` +
``kd_train``):

1. **Synthesis**: a fresh conv generator (re-initialized every epoch, as in the
   published code) and a fresh latent batch z are optimized with Adam
   (betas 0.5, 0.999) for ``g_steps`` steps on
   ``oh * CE(ensemble(G(z)), y) + bn * L_BN + adv * L_adv``, where y are
   random target classes, L_BN matches the batch mean / variance at the input
   of every BatchNorm of every ensemble member to its running statistics
   (DeepInversion), and L_adv = -mean(KL(ensemble || student) * [argmax
   disagree]) pushes towards samples on which student and ensemble disagree.
   The lowest-loss batch joins a growing pool of synthetic samples.
2. **Distillation**: one pass of the student over the whole pool with
   ``T^2 KL(softmax(ensemble / T) || softmax(student / T))``, SGD momentum 0.9.

The ensemble averages the members' logits (``Ensemble_A``). Members may have
different architectures; the student takes the most common architecture of
the participants (first in node order on ties) and starts from the swarm's
shared initialization.

Published defaults (README of github.com/zj-jayzhang/DENSE): 200 epochs,
g_steps 30, lr_g 1e-3, synthesis batch 256, distillation batch 256, nz 256,
generator width ngf 64, bn 1, oh 1, adv 1, T 20, KD lr 0.005 (SGD, momentum
0.9). The crop / flip augmentation of synthetic samples in the published code
(kornia) is left out. Three more differences from that code: L_BN is applied
as the paper describes it (the published hooks are registered on the modules
of an ensemble that keeps its members in a plain list, so they attach to no
BatchNorm and its L_BN is 0); the student is in eval mode while the generator
trains (the published one stays in training mode from the previous
distillation, so its L_adv sees batch statistics and its running statistics
follow the generator's batches); and after each distillation pass the
student's BatchNorm running statistics are recomputed over the pool (the
shared training loop's rule) instead of kept as a running average.

**Budget.** ``budget`` picks the synthesis budget: the number of epochs,
generator steps per epoch, synthesis / distillation batch and the generator
size (``nz``, ``ngf``); any of them given explicitly overrides the preset.
The budget is measured in generator samples = epochs x g_steps x synthesis
batch (published DENSE: 200 x 30 x 256 = 1,536,000; Co-Boosting:
200 x 30 x 128 = 768,000):

=========  ======  =======  =====  ========  ========  ==================  ========================
preset     epochs  g_steps  batch  nz / ngf  samples   share of DENSE's    share of Co-Boosting's
=========  ======  =======  =====  ========  ========  ==================  ========================
tiny       15      5        48     64 / 16   3,600     1/427 (0.23 %)      1/213 (0.47 %)
small      30      10       64     128 / 32  19,200    1/80 (1.25 %)       1/40 (2.5 %)
medium     60      15       128    256 / 64  115,200   1/13.3 (7.5 %)      1/6.7 (15 %)
paper      200     30       256*   256 / 64  = 1       1                   1
=========  ======  =======  =====  ========  ========  ==================  ========================

(*) 256 for DENSE, 128 for Co-Boosting. ``tiny`` (the default) also uses a
generator 4x narrower than the published one (ngf 16 against 64) with a
4x smaller latent (nz 64 against 256); ``small`` one 2x narrower. A 12-node
``tiny`` run takes about a minute on one CPU core; :func:`budget_share`
computes the shares.

Accounting: every participant uploads ``model_bytes`` of its model; every
node downloads the student once. The server's training FLOPs (generator and
distillation) are reported in ``extra["server_flops"]``; a node's own
``train_flops`` is its pretraining.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field, fields
from typing import Any, Callable, ClassVar, Sequence

import torch
import torch.nn.functional as F
from torch import nn

import fol.ensemble
from fol.accounting import inference_flops, model_bytes, training_flops
from fol.config import FOLConfig, check_temperature
from fol.defaults import MAX_SEED, is_seed
from fol.errors import ConfigError
from fol.methods._common import (
    Ledger, check_positive, check_positive_int, init_seed_of, most_common_spec, node_result,
)
from fol.methods.base import Method, NodeResult, SwarmContext, naming_server, register
from fol.models import build_model
from fol.train import TrainConfig, decay_problem, fit, seed_everything
from swarmbase.tomlcheck import shown

__all__ = ["BUDGETS", "budget_share", "generator_samples", "Generator", "DataFreeConfig", "DataFreeResult", "distill_data_free", "generator_loss", "ensemble_weight_steps", "kl_div", "DenseMethod", "WeightedEnsemble"]


class Generator(nn.Module):
    """DENSE's generator: linear projection of z to a (2 ngf, S/4, S/4) map,
    two (upsample x2, conv3x3, BN, LeakyReLU) stages, conv3x3 to ``channels``,
    sigmoid (images in [0, 1], like the toolkit's data). Sizes not divisible by
    4 are resized to ``image_size`` at the end."""

    def __init__(self, nz: int, image_size: int, channels: int = 3, ngf: int = 16) -> None:
        super().__init__()
        self.nz, self.image_size = nz, image_size
        self.init_size = max(1, image_size // 4)
        self.l1 = nn.Linear(nz, ngf * 2 * self.init_size ** 2)
        self.blocks = nn.Sequential(
            nn.BatchNorm2d(ngf * 2),
            nn.Upsample(scale_factor=2),
            nn.Conv2d(ngf * 2, ngf * 2, 3, 1, 1, bias=False), nn.BatchNorm2d(ngf * 2), nn.LeakyReLU(0.2),
            nn.Upsample(scale_factor=2),
            nn.Conv2d(ngf * 2, ngf, 3, 1, 1, bias=False), nn.BatchNorm2d(ngf), nn.LeakyReLU(0.2),
            nn.Conv2d(ngf, channels, 3, 1, 1),
            nn.Sigmoid(),
        )

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        out = self.blocks(self.l1(z).view(z.shape[0], -1, self.init_size, self.init_size))
        if out.shape[-1] != self.image_size:
            out = F.interpolate(out, size=(self.image_size, self.image_size), mode="bilinear", align_corners=False)
        return out

    def reset(self) -> None:
        """The published ``reset_model``: N(0, 0.02) conv / linear weights, N(1, 0.02) BN scales."""
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                nn.init.normal_(m.weight, 0.0, 0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.normal_(m.weight, 1.0, 0.02)
                nn.init.zeros_(m.bias)


class WeightedEnsemble(fol.ensemble.WeightedEnsemble):
    """FOL's :class:`fol.ensemble.WeightedEnsemble`, frozen: sum_i w_i f_i(x) / sum_i w_i
    over members that stay untrained and in eval mode (Co-Boosting's ``WEnsemble``;
    uniform weights give DENSE's ``Ensemble_A``). The weights are summed member by
    member, in member order, as the published code does (:meth:`combine`, also used on
    logits cached over the synthetic pool)."""

    def __init__(self, members: Sequence[nn.Module], weights: torch.Tensor | None = None) -> None:
        super().__init__(members, weights, frozen=True)

    def forward(self, x: torch.Tensor, weights: torch.Tensor | None = None) -> torch.Tensor:
        return self.combine([m(x) for m in self.members], weights)

    def combine(self, member_logits: Sequence[torch.Tensor], weights: torch.Tensor | None = None) -> torch.Tensor:
        """The ensemble's output from its members' logits (one tensor per
        member, in member order), e.g. logits cached on a synthetic pool."""
        w = self.weights if weights is None else weights
        total = sum(w[i] * logits for i, logits in enumerate(member_logits))
        return total / w.sum()


def kl_div(student_logits: torch.Tensor, teacher_logits: torch.Tensor, temperature: float = 1.0,
           reduction: str = "batchmean") -> torch.Tensor:
    """``T^2 KL(softmax(teacher / T) || softmax(student / T))`` (the published
    ``kldiv``); ``reduction="none"`` gives one value per sample."""
    t = temperature
    kl = F.kl_div(F.log_softmax(student_logits / t, 1), F.log_softmax(teacher_logits / t, 1),
                  reduction="none", log_target=True).sum(1) * (t * t)
    return kl if reduction == "none" else kl.mean()


class _BNStats:
    """DeepInversion hooks: ||running_var - var||_2 + ||running_mean - mean||_2 at
    the input of every BatchNorm2d of the members, summed."""

    def __init__(self, members: Sequence[nn.Module]) -> None:
        self.losses: list[torch.Tensor] = []
        self.active = False
        self.handles = []
        for m in members:
            for mod in m.modules():
                if isinstance(mod, nn.BatchNorm2d) and mod.running_mean is not None:
                    self.handles.append(mod.register_forward_hook(self._hook))

    def _hook(self, mod: nn.BatchNorm2d, inp, out) -> None:
        if not self.active:
            return
        x = inp[0]
        mean = x.mean((0, 2, 3))
        var = x.permute(1, 0, 2, 3).flatten(1).var(1, unbiased=False)
        self.losses.append(torch.linalg.vector_norm(mod.running_var - var) + torch.linalg.vector_norm(mod.running_mean - mean))

    def pop(self) -> torch.Tensor:
        total = torch.stack(self.losses).sum() if self.losses else torch.zeros(())
        self.losses = []
        return total

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


@dataclass
class DataFreeConfig:
    """Hyperparameters of the data-free server loop (see the module docstrings
    of :mod:`fol.methods.dense` and :mod:`fol.methods.co_boosting`)."""

    epochs: int = 15
    g_steps: int = 5
    lr_g: float = 1e-3
    synthesis_batch: int = 48
    kd_batch: int = 48
    nz: int = 64
    ngf: int = 16
    bn: float = 1.0
    oh: float = 1.0
    adv: float = 1.0
    temperature: float = 20.0
    kd_lr: float = 0.005
    kd_weight_decay: float = 0.0
    cosine_lr: bool = False
    grad_clip: float = 0.0  # generator gradient-norm clip (Co-Boosting: 10); 0 = off
    # Co-Boosting
    hard_sample_power: float = 0.0  # hs: CE weighted by (1 - p_y)^hs; 0 = plain CE (DENSE)
    adv_mask: bool = True  # DENSE masks L_adv to disagreeing samples; Co-Boosting does not
    adv_temperature: float = 1.0
    weight_steps: int = 0  # ensemble-weight updates per epoch (0 = fixed uniform weights)
    weight_lr: float = 0.01  # mu
    weight_decay_rate: float = 0.99  # wdc: step mu * wdc^epoch
    perturb: str = "none"  # "none", "ods" (published Co-Boosting) or "disagreement"
    epsilon: float = 8.0 / 255.0
    seed: int = 0

    def __post_init__(self) -> None:
        # The Python API's check (the methods' options are checked, named as written, by
        # checked_data_free_options first): a negative lr_g was a torch ValueError, a negative
        # temperature or epsilon, an unknown perturb or a weight_decay_rate above 1 ran silently.
        # epochs may be 0 here: FOL's distill_inputs = "synth" passes fol.distill_epochs.
        checked = checked_data_free_options({f.name: getattr(self, f.name) for f in fields(self) if f.name != "seed"},
                                            owner="DataFreeConfig", least_epochs=0)
        for name, value in checked.items():
            setattr(self, name, value)
        if not is_seed(self.seed):
            raise ConfigError(f"DataFreeConfig.seed must be an integer in 0..{MAX_SEED}, got {shown(self.seed)}")


#: The largest ``hard_sample_power`` (hs). Each generator sample's cross-entropy is weighted by
#: (1 - p_y)^hs in float32: for a sample the ensemble gives even odds (p_y = 0.5) that is 2^-hs,
#: a float32 below its smallest normal number past hs = 126 and exactly 0 from 150, so a large
#: hs silently removes the cross-entropy term (at 1e300 every weight but that of a sample with
#: p_y exactly 0 is 0). At 100 that sample's weight is 2^-100, about 8e-31.
MAX_HARD_SAMPLE_POWER = 100.0

#: The step sizes and the scale refused between 0 and :data:`fol.train.MIN_RATE` (1e-10), as a learning
#: rate is: each acts as 0 in float32 there (1e-300 is 0), which for ``grad_clip`` and ``weight_lr`` is
#: not what their accepted 0 means. ``{name: (why, what 0 means or None)}`` for :func:`check_positive`.
#: A step of 1e-10 changes no float32 value larger than 2e-3 (half a unit in its last place is larger).
TINY_STEPS = {
    "epsilon": ("the L-inf radius of the hard-sample step: a smaller step leaves every float32 pixel larger than "
                "2e-3 unchanged", None),
    "weight_lr": ("the signed step of the ensemble weights: a smaller step leaves every float32 weight larger than "
                  "2e-3 unchanged", "the weights are not fitted"),
    "grad_clip": ("the norm the generator's gradient is scaled down to: 1e-300 is 0 in float32 and stops the "
                  "generator, the opposite of no clipping", "no clipping"),
}

#: Perturbations of a distillation batch (:func:`_perturb`).
PERTURBS = ("none", "ods", "disagreement")


def checked_data_free_options(values: dict, *, method: str = "", owner: str | None = None,
                              least_epochs: int = 1) -> dict:
    """``values`` (fields of :class:`DataFreeConfig`, a method's options may leave some out)
    with every number checked and made a float or int, else a ConfigError naming
    ``methods.<method>.<field>`` (or ``<owner>.<field>``): the one check of the
    options of DENSE and Co-Boosting and of a ``DataFreeConfig``. ``epochs`` is at least
    ``least_epochs``, ``g_steps``, the batches, ``nz`` and ``ngf`` at least 1."""
    values = dict(values)
    where = owner or f"methods.{method}"
    for name in _BUDGET_FIELDS:
        values[name] = check_positive_int(method, name, values[name], count=name in ("epochs", "g_steps"),
                                          allow_zero=name == "epochs" and least_epochs == 0, owner=owner)
    factors = ("lr_g", "kd_lr", "bn", "oh", "adv", "weight_lr", "kd_weight_decay")  # rates and loss weights
    for name in ("lr_g", "kd_lr", "temperature", "adv_temperature", "epsilon"):
        if name in values:
            values[name] = check_positive(method, name, values[name], factor=name in factors,
                                          rate=name in ("lr_g", "kd_lr"), small=TINY_STEPS.get(name), owner=owner)
    if values.get("epsilon", 0.0) > 1.0:  # a radius past 1 moves every pixel to 0 or 1: the batch becomes binary
        raise ConfigError(f"{where}.epsilon must be at most 1 (the L-inf radius of the hard-sample step on images of "
                          f"values in [0, 1]; the published odseta 8 means 8/255 = {8 / 255:.4f}), "
                          f"got {shown(values['epsilon'])}")
    for name in ("temperature", "adv_temperature"):  # the float32 loss T^2 * KL, as FOL's fol.temperature
        if name in values:  # 1e30 passed --check, then ended the run with a "non-finite loss" blamed on kd_lr
            check_temperature(f"{where}.{name}", values[name])
    for name in ("bn", "oh", "adv", "hard_sample_power", "weight_lr", "kd_weight_decay", "grad_clip",
                 "weight_decay_rate"):
        if name in values:
            values[name] = check_positive(method, name, values[name], allow_zero=True, factor=name in factors,
                                          small=TINY_STEPS.get(name),
                                          at_most=1.0 if name == "weight_decay_rate" else None, owner=owner)
    if values.get("hard_sample_power", 0.0) > MAX_HARD_SAMPLE_POWER:  # 1e300 made every weight 0: no L_CE at all
        raise ConfigError(f"{where}.hard_sample_power must be at most {MAX_HARD_SAMPLE_POWER:g} (the float32 weight "
                          f"(1 - p_y)^hs of a sample the ensemble gives even odds is 2^-hs, 0 from 150; the published "
                          f"hs is 1), got {shown(values['hard_sample_power'])}")
    if "kd_lr" in values and (problem := decay_problem(values["kd_lr"], values.get("kd_weight_decay", 0.0))):
        raise ConfigError(f"{where}.kd_weight_decay {problem} ({where}.kd_lr)")
    if "weight_steps" in values:
        values["weight_steps"] = check_positive_int(method, "weight_steps", values["weight_steps"], allow_zero=True,
                                                    count=True, owner=owner)
    for name in ("adv_mask", "cosine_lr"):
        if name in values and not isinstance(values[name], bool):
            raise ConfigError(f"{where}.{name} must be true or false, got {shown(values[name])}")
    if values.get("perturb", "none") not in PERTURBS:
        raise ConfigError(f"{where}.perturb must be 'none', 'ods' or 'disagreement', got {shown(values['perturb'])}")
    return values


@dataclass
class DataFreeResult:
    student: nn.Module
    ensemble_weights: list[float]
    server_flops: int
    history: list[dict] = field(default_factory=list)
    pool: torch.Tensor | None = None  # the synthesized inputs, in synthesis order

    @property
    def pool_size(self) -> int:
        return 0 if self.pool is None else int(self.pool.shape[0])


def _perturb(x: torch.Tensor, ensemble: WeightedEnsemble, student: nn.Module, how: str, eps: float,
             gen: torch.Generator) -> torch.Tensor:
    """Hard-sample step inside an L-inf ball of radius ``eps``: ``ods`` follows
    the published Co-Boosting code (sign of the gradient of a random projection
    of the ensemble's softmax at T = 4, Output Diversified Sampling);
    ``disagreement`` follows the gradient of KL(ensemble || student)."""
    x = x.detach().clone().requires_grad_(True)
    t_out = ensemble(x)
    if how == "ods":
        w = torch.rand(t_out.shape, generator=gen) * 2 - 1
        obj = (w * F.softmax(t_out / 4, 1)).sum()
    else:
        obj = kl_div(student(x), t_out, 1.0)
    (grad,) = torch.autograd.grad(obj, x)
    return (x + eps * grad.sign()).clamp(0, 1).detach()


def generator_loss(t_out: torch.Tensor, y: torch.Tensor, loss_bn: torch.Tensor, student: nn.Module, x: torch.Tensor,
                   cfg: DataFreeConfig) -> torch.Tensor:
    """The generator's loss on one synthesized batch ``x``: ``bn * L_BN + oh *
    L_CE + adv * L_adv`` from the ensemble's logits ``t_out``, the target
    classes ``y``, the BatchNorm-statistics loss ``loss_bn`` and the
    ``student``'s logits on ``x``.
    L_CE is the cross-entropy, per sample weighted by (1 - p_y)^hs when
    ``hard_sample_power`` (hs) > 0 (Co-Boosting); L_adv = -mean(KL(ensemble ||
    student) at ``adv_temperature``), with ``adv_mask`` counting only samples on
    which the two disagree (DENSE)."""
    ce = F.cross_entropy(t_out, y, reduction="none")
    if cfg.hard_sample_power > 0:
        p = F.softmax(t_out, 1).gather(1, y[:, None]).squeeze(1).detach()
        ce = (1 - p).pow(cfg.hard_sample_power) * ce
    loss_oh = ce.mean()
    s_out = student(x)
    kl = kl_div(s_out, t_out, cfg.adv_temperature, reduction="none")
    if cfg.adv_mask:
        kl = kl * (s_out.argmax(1) != t_out.argmax(1)).float()
    loss_adv = -kl.mean()
    return cfg.bn * loss_bn + cfg.oh * loss_oh + cfg.adv * loss_adv


def ensemble_weight_steps(ensemble: WeightedEnsemble, px: torch.Tensor, py: torch.Tensor, step: float, steps: int,
                          batch: int) -> torch.Tensor:
    """Co-Boosting's ensemble-weight update: ``steps`` passes over the pool
    (``px``, labels ``py``) in batches of ``batch``, each batch one signed
    gradient-descent step of size ``step`` on the cross-entropy of the weighted
    ensemble, clipped to [0, 1] (all zero: reset to 1e-3 each). Returns the new weights."""
    w = ensemble.weights.clone()
    for _ in range(steps):
        for i in range(0, len(px), batch):
            wv = w.clone().requires_grad_(True)
            loss_w = F.cross_entropy(ensemble(px[i:i + batch], wv), py[i:i + batch])
            (gw,) = torch.autograd.grad(loss_w, wv)
            w = (w - step * gw.sign()).clamp(0.0, 1.0)
            if float(w.sum()) <= 0:
                w = torch.full_like(w, 1e-3)
    return w.detach()


def synthesis_bytes(epochs: int, synthesis_batch: int, nz: int, ngf: int, input_shape: Sequence[int]) -> int:
    """A lower bound on the float32 bytes of the synthesis loop: the generator's
    parameters, one synthesis batch through it (activations and their
    gradients) and the pool of ``epochs`` batches it keeps; exact, also for an option
    of 10**400 (TOML integers have no size limit)."""
    c, s = int(input_shape[0]), int(input_shape[-1])
    i = max(1, s // 4)
    params = nz * 2 * ngf * i * i + 9 * (2 * ngf) ** 2 + 9 * 2 * ngf * ngf + 9 * ngf * c
    per_sample = nz + 2 * (2 * 2 * ngf * i * i + 4 * 2 * ngf * (2 * i) ** 2 + 2 * ngf * (4 * i) ** 2
                           + 3 * ngf * (4 * i) ** 2 + 3 * c * s * s)
    return 4 * (params + synthesis_batch * per_sample + epochs * synthesis_batch * c * s * s)  # exact integers


def check_synthesis_size(epochs: int, synthesis_batch: int, nz: int, ngf: int, input_shape: Sequence[int],
                         where: str) -> None:
    """Refuse, before the generator is built, a synthesis that could not be held
    in :data:`fol.data.geo.MAX_POOL_BYTES`; ``where`` names the options that set it."""
    from fol.data.geo import MAX_POOL_BYTES, count_text, gib_text

    need = synthesis_bytes(epochs, synthesis_batch, nz, ngf, input_shape)
    if need > MAX_POOL_BYTES:
        s = int(input_shape[-1])
        raise ConfigError(f"{where}: a synthesis batch of {count_text(synthesis_batch)} images of {s}x{s} pixels "
                          f"(nz {shown(nz)}, ngf {shown(ngf)}, {epochs} epochs) would need {gib_text(need)} "
                          f"(limit {MAX_POOL_BYTES / 2**30:.0f} GiB)")


def distill_data_free(members: Sequence[nn.Module], student: nn.Module, input_shape: Sequence[int], num_classes: int,
                      cfg: DataFreeConfig, progress: bool = False,
                      on_epoch: Callable[[int, nn.Module], None] | None = None,
                      kd_lr_field: str = "DataFreeConfig.kd_lr",
                      kd_desc: str = "data-free distillation") -> DataFreeResult:
    """Train ``student`` (in place) from the ensemble of ``members`` with
    synthetic data only; returns the student, final ensemble weights and the
    server's training FLOPs. A synthesis that could not be held in memory
    (:func:`check_synthesis_size`) is refused before anything is built.
    ``kd_lr_field``: the setting ``cfg.kd_lr`` came from, named if the student diverges, with the stage
    (``kd_desc``) and the epoch of this loop it diverged in."""
    check_synthesis_size(cfg.epochs, cfg.synthesis_batch, cfg.nz, cfg.ngf, input_shape,
                         "DataFreeConfig: synthesis_batch / nz / ngf / epochs")
    c, s = int(input_shape[0]), int(input_shape[-1])
    members = [copy.deepcopy(m).eval() for m in members]
    ensemble = WeightedEnsemble(members)  # freezes the copies: backward reaches x only
    gen_rng = torch.Generator().manual_seed(cfg.seed)
    with torch.random.fork_rng(devices=[]):
        seed_everything(cfg.seed)
        generator = Generator(cfg.nz, s, c, cfg.ngf)
    hooks = _BNStats(members) if cfg.bn > 0 else None
    opt_s = torch.optim.SGD(student.parameters(), lr=cfg.kd_lr, momentum=0.9, weight_decay=cfg.kd_weight_decay)
    pool_x: list[torch.Tensor] = []
    pool_y: list[torch.Tensor] = []
    px: torch.Tensor | None = None  # the pool so far, concatenated once per epoch
    # The members' logits on each pooled batch, computed once: without input
    # perturbation the KD targets of a pooled sample are these logits combined
    # with the current weights, whatever the epoch.
    pool_logits: list[torch.Tensor] = []
    cache_teacher = cfg.perturb == "none"
    member_macs = sum(node_macs_of(m, input_shape) for m in members)
    student_macs = node_macs_of(student, input_shape)
    gen_macs = node_macs_of(generator, (cfg.nz,))
    flops = 0
    history = []
    student_grad = [p.requires_grad for p in student.parameters()]

    def student_trainable(on: bool) -> None:  # frozen while the generator trains: L_adv reaches x only
        for p, g in zip(student.parameters(), student_grad):
            p.requires_grad_(g and on)

    epochs = range(cfg.epochs)
    if progress:
        from tqdm.auto import tqdm

        epochs = tqdm(epochs, desc="data-free distillation", leave=False, disable=None)
    try:
        for epoch in epochs:
            # 1. synthesis
            student.eval()
            student_trainable(False)
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(cfg.seed * 100003 + epoch)
                generator.reset()
            z = torch.randn(cfg.synthesis_batch, cfg.nz, generator=gen_rng).requires_grad_(True)
            y = torch.randint(0, num_classes, (cfg.synthesis_batch,), generator=gen_rng)
            opt_g = torch.optim.Adam([{"params": generator.parameters()}, {"params": [z]}], lr=cfg.lr_g, betas=(0.5, 0.999))
            best, best_x = math.inf, None
            for _ in range(cfg.g_steps):
                generator.train()
                x = generator(z)
                if hooks is not None:
                    hooks.active = True
                t_out = ensemble(x)
                if hooks is not None:
                    hooks.active = False
                loss_bn = hooks.pop() if hooks is not None else torch.zeros(())
                loss = generator_loss(t_out, y, loss_bn, student, x, cfg)
                opt_g.zero_grad(set_to_none=True)
                loss.backward()
                if cfg.grad_clip > 0:
                    torch.nn.utils.clip_grad_norm_(generator.parameters(), cfg.grad_clip)
                opt_g.step()
                value = float(loss.detach())
                if value < best or best_x is None:
                    best, best_x = value, x.detach().clone()
            student_trainable(True)
            flops += training_flops(member_macs + student_macs + gen_macs, cfg.g_steps * cfg.synthesis_batch)
            pool_x.append(best_x)
            pool_y.append(y.clone())
            px, py = torch.cat(pool_x), torch.cat(pool_y)
            if cache_teacher:
                with torch.no_grad():
                    pool_logits.append(torch.stack([m(best_x) for m in members], 1))  # [B, K, C]
                flops += inference_flops(member_macs, len(best_x))

            # 2. ensemble weights (Co-Boosting): signed-gradient steps on CE over the pool
            if cfg.weight_steps > 0 and epoch > 0:
                step = cfg.weight_lr * cfg.weight_decay_rate ** epoch
                ensemble.weights = ensemble_weight_steps(ensemble, px, py, step, cfg.weight_steps, cfg.kd_batch)
                flops += inference_flops(member_macs, len(px)) * 3 * cfg.weight_steps

            # 3. distillation: one pass over the pool
            if cfg.cosine_lr:
                for g in opt_s.param_groups:
                    g["lr"] = 0.5 * cfg.kd_lr * (1 + math.cos(math.pi * epoch / max(1, cfg.epochs)))
            temperature, how, eps = cfg.temperature, cfg.perturb, cfg.epsilon

            w_now = ensemble.weights

            def objective(model: nn.Module, batch: Sequence[torch.Tensor]) -> torch.Tensor:
                xb = batch[0]
                if cache_teacher:  # ensemble(xb), from the cached member logits
                    t_out = ensemble.combine(batch[2].unbind(1), w_now)
                    return kl_div(model(xb), t_out, temperature)
                model.eval()
                xb = _perturb(xb, ensemble, model, how, eps, gen_rng)
                model.train()
                with torch.no_grad():
                    t_out = ensemble(xb)
                return kl_div(model(xb), t_out, temperature)

            kd_cfg = TrainConfig(epochs=1, batch_size=cfg.kd_batch, lr=cfg.kd_lr, seed=cfg.seed * 7 + epoch,
                                 weight_decay=cfg.kd_weight_decay, desc=kd_desc, lr_field=kd_lr_field)
            data = (px, py, torch.cat(pool_logits)) if cache_teacher else (px, py)
            hist = fit(student, data, kd_cfg, objective=objective, optimizer=opt_s, first_epoch=epoch)
            flops += training_flops(student_macs, hist.samples_seen)
            if not cache_teacher:  # the teacher on every perturbed batch, plus the two passes of the step
                flops += inference_flops(member_macs, hist.samples_seen * 3)
            history.append({"epoch": epoch, "synthesis_loss": best, "kd_loss": hist.train_loss[-1] if hist.train_loss else None,
                            "weights": [round(float(v), 4) for v in ensemble.weights]})
            if on_epoch is not None:
                on_epoch(epoch, student)
    finally:
        student_trainable(True)
        if hooks is not None:
            hooks.remove()
    student.eval()
    return DataFreeResult(student, [float(v) for v in ensemble.weights], int(flops), history, px)


def node_macs_of(model: nn.Module, input_shape: Sequence[int]) -> int:
    """Forward MACs of one input (torch-pruning's counter)."""
    from fol.accounting import forward_macs

    return forward_macs(model, tuple(input_shape))


#: Named synthesis budgets below the published one (see the module doc).
BUDGETS: dict[str, dict[str, int]] = {
    "tiny": dict(epochs=15, g_steps=5, synthesis_batch=48, kd_batch=48, nz=64, ngf=16),
    "small": dict(epochs=30, g_steps=10, synthesis_batch=64, kd_batch=64, nz=128, ngf=32),
    "medium": dict(epochs=60, g_steps=15, synthesis_batch=128, kd_batch=128, nz=256, ngf=64),
}
_BUDGET_FIELDS = ("epochs", "g_steps", "synthesis_batch", "kd_batch", "nz", "ngf")


def generator_samples(options: dict) -> int:
    """Synthesis budget in generator samples: epochs x g_steps x synthesis batch."""
    return int(options["epochs"]) * int(options["g_steps"]) * int(options["synthesis_batch"])


def budget_share(method: str, budget: str) -> float:
    """Share of ``method``'s published synthesis budget (in generator samples) that the preset ``budget`` spends.

    >>> round(1 / budget_share("dense", "tiny")), round(1 / budget_share("co-boosting", "tiny"))
    (427, 213)
    """
    from fol.methods.base import get_method

    cls = type(get_method(method))
    return generator_samples(cls.budget_options(budget)) / generator_samples(cls.paper_budget)


class _DataFreeMethod(Method):
    """Shared driver of DENSE and Co-Boosting: one upload, server-side
    data-free distillation, one broadcast."""

    multi_round: ClassVar[bool] = False
    defaults: ClassVar[dict] = {}
    paper_budget: ClassVar[dict] = {}

    @classmethod
    def budget_options(cls, budget: str) -> dict[str, int]:
        if budget == "paper":
            return dict(cls.paper_budget)
        if not isinstance(budget, str) or budget not in BUDGETS:  # an array or a table is no name either
            raise ConfigError(f"methods.{cls.name}.budget must be one of {', '.join(map(repr, [*BUDGETS, 'paper']))}, "
                              f"got {shown(budget)}")
        return dict(BUDGETS[budget])

    @classmethod
    def option_names(cls) -> list[str]:
        """``budget`` and the fields of :class:`DataFreeConfig` but its seed."""
        return ["budget", *(f for f in DataFreeConfig.__dataclass_fields__ if f != "seed")]

    @classmethod
    def used_options(cls, options: dict[str, Any]) -> dict[str, Any]:
        """:meth:`Method.used_options`: the budget (default ``"tiny"``) and every synthesis option as it
        sets them, those written over it."""
        budget = options.get("budget", "tiny")
        return {"budget": budget, **cls.defaults, **cls.budget_options(budget), **options}

    def __init__(self, budget: str = "tiny", **options) -> None:
        known = set(self.option_names()) - {"budget"}
        unknown = sorted(set(options) - known)
        if unknown:
            raise TypeError(f"unexpected option(s) {', '.join(unknown)}")
        values = {**self.defaults, **self.budget_options(budget), **options}
        self.budget = budget
        self.options = checked_data_free_options(values, method=self.name)

    def check_inputs(self, shape: tuple[int, ...], fol: FOLConfig | None = None) -> None:
        """Refuse options whose synthesis could not be held in memory for images
        of ``shape`` (channels, height, width); run by ``fol simulate --check``
        and again when the synthesis starts."""
        o = self.options
        check_synthesis_size(o["epochs"], o["synthesis_batch"], o["nz"], o["ngf"], shape,
                             f"methods.{self.name}: synthesis_batch / nz / ngf / epochs")

    def run(self, ctx: SwarmContext) -> list[NodeResult]:
        t0 = time.perf_counter()
        senders = ctx.participants_in(0) if ctx.rounds > 0 else []
        ledgers = [Ledger(train_flops=n.pretrain_flops) for n in ctx.nodes]
        if not senders:  # nothing reaches the server: every node keeps its own model
            return [node_result(n, self.name, n.pretrained, led, kept_local=True) for n, led in zip(ctx.nodes, ledgers)]
        members = [ctx.nodes[k].pretrained for k in senders]
        spec = most_common_spec([ctx.nodes[k] for k in senders])
        student = build_model(spec, seed=init_seed_of(ctx))
        shape = tuple(ctx.nodes[0].data.train.images.shape[1:])
        self.check_inputs(shape)
        cfg = DataFreeConfig(**self.options, seed=ctx.seed)
        with naming_server(f"{self.name}, round 1"):  # the one exchange: the uploads of contact round 1
            res = distill_data_free(members, student, shape, spec.num_classes, cfg, progress=ctx.train.progress,
                                    kd_lr_field=f"methods.{self.name}.kd_lr")
        size = model_bytes(res.student)
        for k in senders:
            ledgers[k].bytes_up += model_bytes(ctx.nodes[k].pretrained)
            ledgers[k].rounds = 1
        seconds = time.perf_counter() - t0
        out = []
        for node, led in zip(ctx.nodes, ledgers):
            led.bytes_down += size
            r = node_result(node, self.name, res.student, led,
                            extra={"server_flops": res.server_flops, "student_arch": spec.arch, "budget": self.budget,
                                   "generator_samples": generator_samples(self.options),
                                   "ensemble_weights": res.ensemble_weights, "members": len(members),
                                   "pool_size": res.pool_size})
            r.seconds = seconds / max(1, len(ctx.nodes))
            out.append(r)
        return out


@register
class DenseMethod(_DataFreeMethod):
    """DENSE: generator against the client ensemble, distilled into one global model."""

    name: ClassVar[str] = "dense"
    description: ClassVar[str] = "DENSE: data-free one-shot FL (generator + ensemble distillation)"
    defaults: ClassVar[dict] = dict(
        lr_g=1e-3, bn=1.0, oh=1.0, adv=1.0, temperature=20.0, kd_lr=0.005, adv_mask=True, adv_temperature=1.0,
        hard_sample_power=0.0, weight_steps=0, perturb="none",
    )
    paper_budget: ClassVar[dict] = dict(epochs=200, g_steps=30, synthesis_batch=256, kd_batch=256, nz=256, ngf=64)
