"""The one training loop of the toolkit, shared by FOL's stages and every baseline.

Node datasets are small (hundreds of images), so they live in memory as tensors
and batches are drawn by indexing a permutation: no ``DataLoader`` workers, no
per-sample Python. A stage that needs another objective (gate learning,
distillation, a baseline's regularizer) passes an ``objective`` callable and,
if it trains something other than the model's own parameters, ``params``.

>>> import torch
>>> from fol.models import ModelSpec, build_model
>>> g = torch.Generator().manual_seed(0)
>>> y = torch.randint(0, 2, (64,), generator=g)
>>> x = torch.randn(64, 3, 32, 32, generator=g) + y.view(-1, 1, 1, 1)  # class 1 is brighter
>>> model = build_model(ModelSpec("cnn-small", num_classes=2), seed=0)
>>> history = fit(model, (x, y), TrainConfig(epochs=3, seed=0))
>>> len(history.train_loss), history.train_loss[-1] < history.train_loss[0]
(3, True)
>>> evaluate(model, x, y).accuracy  # chance is 0.5
1.0
"""

from __future__ import annotations

import contextlib
import copy
import math
import random
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from fol.defaults import MAX_ITERATIONS, too_many
from fol.errors import ConfigError, TrainingError
from swarmbase.tomlcheck import is_finite_number, shown

__all__ = [
    "TrainConfig",
    "History",
    "EvalResult",
    "Objective",
    "fit",
    "evaluate",
    "logit_scores",
    "predict_logits",
    "cross_entropy_objective",
    "seed_everything",
    "recompute_bn_stats",
    "layer_modes_kept",
    "MAX_FACTOR",
    "MIN_RATE",
]

#: The largest learning rate or loss weight (weight decay, a penalty's multiplier) accepted
#: anywhere in FOL. The optimizers and losses multiply these into float32 tensors (Adam by up
#: to ten times at its first step), which overflow past 3.4e38 (a traceback from inside
#: torch, or a loss of inf); every default is 1 or less (DENSE's loss weights are 1, the rates
#: 0.1 or less), so a value above 1e6 is refused as a typing mistake.
MAX_FACTOR = 1e6


def too_large(name: str, value: object) -> str:
    """The message refusing ``value`` of the field ``name`` above :data:`MAX_FACTOR`."""
    return (f"{name} must be at most {MAX_FACTOR:g} (it multiplies float32 tensors; every default is 1 or less), "
            f"got {shown(value)}")


#: The smallest learning rate accepted anywhere in FOL. A step of size s changes a float32
#: weight w only when s is more than half a unit in w's last place (about |w| x 2**-24): an SGD
#: step lr x g at lr = 1e-10 and a gradient of 1, or any Adam step at lr = 1e-10 (Adam's step
#: is about lr), leaves every weight larger than 2e-3 exactly as it was, and a rate below
#: 1.4e-45 is 0 in float32. Every default is 1e-3 or more.
MIN_RATE = 1e-10


#: Why a learning rate below :data:`MIN_RATE` is refused (the default reason of :func:`too_small_rate`).
RATE_REASON = "a learning rate: a smaller step leaves every float32 weight larger than 2e-3 unchanged"


def too_small_rate(name: str, value: object, reason: str = RATE_REASON, zero: str | None = None) -> str:
    """The message refusing ``value`` of the field ``name`` below :data:`MIN_RATE`: a learning rate,
    or another step size or scale that acts as 0 in float32 there (``reason`` says which and why).
    ``zero``: what a value of exactly 0 means, for a field that accepts it."""
    allowed = f"0 ({zero}) or at least" if zero else "at least"
    return f"{name} must be {allowed} {MIN_RATE:g} ({reason}), got {shown(value)}"


def decay_problem(lr: float, weight_decay: float) -> str | None:
    """Why an SGD learning rate ``lr`` and ``weight_decay`` cannot go together, or None: the decay
    part of a step (all of plain SGD's, and of the first step with momentum, whose buffer then holds
    that step alone) multiplies every weight by 1 - lr x weight_decay, so at a product of 1 or more
    the decay overshoots zero (at 2 or more the weights grow without bound).
    The one check of the pair: ``[fol]``'s rates, a baseline's ``lr`` and DENSE's ``kd_lr``."""
    if lr * weight_decay >= 1.0:
        return (f"must be below 1 / the learning rate (an SGD step's decay multiplies every weight by 1 - lr x "
                f"weight_decay: at lr x weight_decay >= 1 the decay overshoots zero), got "
                f"{shown(weight_decay)} with a learning rate of {shown(lr)}")
    return None

#: ``objective(model, batch) -> scalar loss``; ``batch`` is the tuple of tensors
#: given to :func:`fit` (e.g. ``(x, y)`` or ``(x, y, teacher_logits)``) sliced to
#: one mini-batch.
Objective = Callable[[nn.Module, Sequence[torch.Tensor]], torch.Tensor]


@dataclass
class TrainConfig:
    """Hyperparameters of one call to :func:`fit`.

    ``lr`` is the learning rate, ``momentum`` the SGD momentum (ignored by Adam),
    ``patience`` the number of epochs without a validation-accuracy improvement
    before stopping early (0 disables early stopping; needs ``val``). With early
    stopping the best-validation weights are restored at the end; only a
    strictly higher accuracy counts as an improvement, so among epochs of equal
    validation accuracy the earliest is kept (``History.best_epoch``).
    ``lr_field`` names the setting ``lr`` came from (``fol.distill_lr``,
    ``methods.fedavg.lr``, ...): a divergence error tells the user to lower it.
    """

    epochs: int = 10
    batch_size: int = 32
    lr: float = 0.05
    optimizer: str = "sgd"
    momentum: float = 0.9
    weight_decay: float = 1e-3
    patience: int = 0
    seed: int = 0
    progress: bool = False
    desc: str = "train"
    lr_field: str = "lr"

    def __post_init__(self) -> None:
        if self.optimizer not in ("sgd", "adam"):
            raise ConfigError(f"optimizer must be 'sgd' or 'adam', got {shown(self.optimizer)}")
        for name, least in (("epochs", 0), ("batch_size", 1), ("patience", 0)):  # a float or bool is no count
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ConfigError(f"{name} must be an integer >= {least}, got {shown(value)}")
        for name in ("epochs", "patience"):  # 10**12 epochs would loop for ages, 10**19 overflowed in tqdm
            if getattr(self, name) > MAX_ITERATIONS:
                raise ConfigError(too_many(name, getattr(self, name)))
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**64:
            raise ConfigError(f"seed must be an integer in 0..2**64 - 1 (torch's generators), got {shown(self.seed)}")
        if not (is_finite_number(self.lr) and self.lr > 0):
            raise ConfigError(f"lr must be a finite number > 0, got {shown(self.lr)}")
        if not (is_finite_number(self.weight_decay) and self.weight_decay >= 0):
            raise ConfigError(f"weight_decay must be a finite number >= 0, got {shown(self.weight_decay)}")
        for name in ("lr", "weight_decay"):
            if getattr(self, name) > MAX_FACTOR:
                raise ConfigError(too_large(name, getattr(self, name)))
        if self.lr < MIN_RATE:
            raise ConfigError(too_small_rate("lr", self.lr))
        if not (is_finite_number(self.momentum) and 0 <= self.momentum < 1):  # at 1 or more SGD diverges
            raise ConfigError(f"momentum must be a number in [0, 1) (SGD momentum), got {shown(self.momentum)}")


@dataclass
class History:
    """Per-epoch record of one :func:`fit` call."""

    train_loss: list[float] = field(default_factory=list)
    val_accuracy: list[float] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    best_epoch: int | None = None
    stopped_early: bool = False
    steps: int = 0
    samples_seen: int = 0


@dataclass(frozen=True)
class EvalResult:
    accuracy: float
    loss: float
    n: int


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch RNGs (CPU runs are then repeatable)."""
    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def cross_entropy_objective(model: nn.Module, batch: Sequence[torch.Tensor]) -> torch.Tensor:
    """Default objective: mean cross-entropy of ``model(x)`` against ``y``."""
    x, y = batch[0], batch[1]
    return F.cross_entropy(model(x), y)


def _make_optimizer(params: Iterable[nn.Parameter], cfg: TrainConfig) -> torch.optim.Optimizer:
    params = [p for p in params if p.requires_grad]
    if cfg.optimizer == "adam":
        return torch.optim.Adam(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    return torch.optim.SGD(params, lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)


def _lower_rate(cfg: TrainConfig) -> str:
    """The hint of a divergence error: the rate, and the setting to lower."""
    return f"learning rate {cfg.lr:g}; a smaller {cfg.lr_field} usually fixes this"


def fit(
    model: nn.Module,
    data: Sequence[torch.Tensor],
    cfg: TrainConfig,
    *,
    val: Sequence[torch.Tensor] | None = None,
    objective: Objective = cross_entropy_objective,
    params: Iterable[nn.Parameter] | None = None,
    optimizer: torch.optim.Optimizer | None = None,
    first_epoch: int = 0,
) -> History:
    """Train ``model`` in place on the in-memory tensors ``data`` and return the
    history.

    ``data`` is a tuple of tensors with the same first dimension; each step
    gives ``objective`` one mini-batch of all of them. ``val = (x, y)`` enables
    per-epoch validation and, with ``cfg.patience > 0``, early stopping that
    restores the best weights. ``params`` restricts what is optimized (default:
    all of ``model``'s parameters). A caller that keeps optimizer state across
    calls (FedAvg-Adam) passes its own ``optimizer``. ``first_epoch`` is the number
    its first epoch has in a divergence error (a caller that runs one epoch of
    its own loop per call, DENSE's KD step, names that loop's epoch).

    Shuffling uses a private generator seeded with ``cfg.seed``, so the same
    inputs give the same result on CPU. A non-finite loss, or trained weights
    or recomputed batch-norm statistics that are not all finite at the end of
    an epoch, raise :class:`fol.errors.TrainingError`.
    """
    if not data:
        raise ConfigError("fit() needs at least one data tensor")
    n = int(data[0].shape[0])
    if any(int(t.shape[0]) != n for t in data):
        raise ConfigError("fit() data tensors must share their first dimension")
    history = History()
    if n == 0 or cfg.epochs == 0:
        return history
    opt = optimizer or _make_optimizer(params if params is not None else model.parameters(), cfg)
    gen = torch.Generator().manual_seed(cfg.seed)
    best_acc, best_state, bad_epochs = -1.0, None, 0
    bs = min(cfg.batch_size, n)
    # Drop a trailing batch of one sample: BatchNorm cannot train on it.
    n_batches = max(1, n // bs if n % bs == 1 else math.ceil(n / bs))

    epochs: Iterable[int] = range(cfg.epochs)
    bar = None
    if cfg.progress:
        from tqdm.auto import tqdm

        bar = tqdm(epochs, desc=cfg.desc, leave=False, disable=None)
        epochs = bar
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)  # dropout etc. inside the objective
        for epoch in epochs:
            model.train()
            bns = _training_batchnorms(model)
            perm = torch.randperm(n, generator=gen)
            total = 0.0
            for b in range(n_batches):
                idx = perm[b * bs : (b + 1) * bs]
                batch = [t[idx] for t in data]
                loss = objective(model, batch)
                if not torch.isfinite(loss):
                    raise TrainingError(f"{cfg.desc}: the loss became non-finite at epoch {first_epoch + epoch} "
                                        f"({_lower_rate(cfg)})")
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                total += float(loss.detach()) * len(idx)
                history.steps += 1
                history.samples_seen += len(idx)
            history.train_loss.append(total / min(n, n_batches * bs))
            if not all(bool(torch.isfinite(p).all()) for g in opt.param_groups for p in g["params"]):
                # the loss is checked before each step, so the epoch's last step is checked here
                raise TrainingError(f"{cfg.desc}: the weights became non-finite at epoch {first_epoch + epoch} "
                                    f"({_lower_rate(cfg)})")
            if bns and (val is not None or epoch == cfg.epochs - 1):
                # Statistics of the weights as they are now, before they are
                # evaluated or kept (see recompute_bn_stats).
                recompute_bn_stats(model, data[0], layers=bns)
                if not all(bool(torch.isfinite(m.running_var).all() and torch.isfinite(m.running_mean).all())
                           for m in bns):  # finite but huge weights: the activations' variance overflows float32
                    raise TrainingError(f"{cfg.desc}: the batch-norm statistics became non-finite at epoch {first_epoch + epoch} "
                                        f"(finite but huge weights; {_lower_rate(cfg)})")
            if val is not None:
                res = evaluate(model, val[0], val[1])
                history.val_accuracy.append(res.accuracy)
                history.val_loss.append(res.loss)
                if res.accuracy > best_acc:
                    best_acc, bad_epochs = res.accuracy, 0
                    history.best_epoch = epoch
                    if cfg.patience:
                        best_state = copy.deepcopy(model.state_dict())
                else:
                    bad_epochs += 1
                    if cfg.patience and bad_epochs >= cfg.patience:
                        history.stopped_early = True
                        break
            if bar is not None:
                bar.set_postfix(loss=f"{history.train_loss[-1]:.3f}")
    if bar is not None:
        bar.close()
    if best_state is not None:
        model.load_state_dict(best_state)
    model.eval()
    return history


def _training_batchnorms(model: nn.Module) -> list[nn.modules.batchnorm._BatchNorm]:
    """The batch-norm layers of ``model`` that update running statistics in its
    current mode (a wrapper that keeps a frozen network in eval mode has none)."""
    return [m for m in model.modules()
            if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.training and m.track_running_stats]


@torch.no_grad()
def recompute_bn_stats(model: nn.Module, x: torch.Tensor, batch_size: int = 512,
                       layers: Sequence[nn.modules.batchnorm._BatchNorm] | None = None) -> None:
    """Replace the running mean and variance of ``layers`` (default: every
    batch-norm layer of ``model``) by their average over one pass of ``x`` in
    training mode, as ``torch.optim.swa_utils.update_bn`` does, but only for
    those layers: other layers' statistics are left as they are. The model's
    mode is restored.

    :func:`fit` calls it on the training inputs: PyTorch's running statistics
    are an exponential average over the last few dozen batches, taken while the
    weights were still moving, so in eval mode a network trained at a usual
    learning rate can score far below what its weights compute (``cnn-medium``
    trained 60 epochs on pooled synthetic hurricane: 88.4 % training accuracy
    with the running statistics, 100.0 % with recomputed ones;
    docs/evaluation.md, section 1).

    >>> bn = nn.BatchNorm1d(2)
    >>> recompute_bn_stats(bn, torch.tensor([[0.0, 1.0], [2.0, 5.0]]))
    >>> bn.running_mean.tolist(), bn.running_var.tolist(), bn.training
    ([1.0, 3.0], [2.0, 8.0], True)
    """
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)] if layers is None else list(layers)
    bns = [m for m in bns if m.track_running_stats]
    if not bns or int(x.shape[0]) == 0:
        return
    momenta = {m: m.momentum for m in bns}
    with layer_modes_kept(model):
        for m in bns:
            m.reset_running_stats()
            m.momentum = None  # a cumulative average over the batches of this pass
            m.train()
        try:
            n = int(x.shape[0])
            step = batch_size if n % batch_size != 1 else batch_size - 1  # no batch of one sample ...
            starts = list(range(0, n, step))
            if len(starts) > 1 and n - starts[-1] == 1:
                starts.pop()  # ... even when n % (batch_size - 1) is 1 too: the last sample joins the batch before
            for i, j in zip(starts, starts[1:] + [n]):
                model(x[i:j])
        finally:
            for m, momentum in momenta.items():
                m.momentum = momentum


@contextlib.contextmanager
def layer_modes_kept(model: nn.Module) -> Iterator[None]:
    """Restore the train / eval mode of every layer of ``model`` on leaving, also when
    the body raises (a layer the caller froze in eval mode inside a training model
    stays so, which ``model.train(was)`` would undo)."""
    modes = {m: m.training for m in model.modules()}
    try:
        yield
    finally:
        for m, mode in modes.items():
            m.training = mode


@torch.no_grad()
def predict_logits(model: nn.Module, x: torch.Tensor, batch_size: int = 512) -> torch.Tensor:
    """Logits of ``model`` on ``x`` in eval mode (the cache FOL's ensemble and
    distillation stages train against), ``batch_size`` inputs at a time; the
    mode of every layer is restored afterwards, also when the forward raises
    (a layer the caller froze in eval mode inside a training model stays so)."""
    with layer_modes_kept(model):
        model.eval()
        out = [model(x[i : i + batch_size]) for i in range(0, int(x.shape[0]), batch_size)]
    if not out:
        return torch.empty(0)
    return torch.cat(out)


def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = 512) -> EvalResult:
    """Accuracy (fraction in [0, 1]) and mean cross-entropy of ``model`` on
    ``(x, y)``, in eval mode (:func:`predict_logits`: the caller's modes are
    restored)."""
    if int(y.shape[0]) == 0:
        return EvalResult(float("nan"), float("nan"), 0)
    return logit_scores(predict_logits(model, x, batch_size), y)


def logit_scores(logits: torch.Tensor, y: torch.Tensor) -> EvalResult:
    """What :func:`evaluate` reports of a model whose logits on the inputs of
    ``y`` are ``logits`` (for a caller that has them already): accuracy and
    mean cross-entropy, NaN for no labels."""
    n = int(y.shape[0])
    if n == 0:
        return EvalResult(float("nan"), float("nan"), 0)
    return EvalResult(
        accuracy=float((logits.argmax(1) == y).float().mean()),
        loss=float(F.cross_entropy(logits, y)),
        n=n,
    )
