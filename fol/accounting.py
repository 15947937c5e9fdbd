"""Communication and computation accounting shared by FOL and every baseline.

Bytes are what would cross a link: tensors at their stored dtype size, binary
masks at one bit per position (rounded up to whole bytes). Training FLOPs use
the usual estimate of 3 forward passes per training sample (forward + backward
~ 2x forward), 2 FLOPs per multiply-accumulate. Only the gradient steps are
counted (plus, where a method labels inputs with a teacher, the teacher's
forward passes), by the same rule for every method: the forward passes that
only evaluate (early stopping on D_val, Top-K scoring) and the pass per epoch
that re-estimates batch-norm statistics are not (with them, a pretraining
epoch costs 3 + 1 + 15/70 forward passes per training image instead of 3:
about 1.4 times the figure).

>>> import torch
>>> tensor_bytes({"w": torch.zeros(10, 10), "b": torch.zeros(10)})
440
>>> mask_bytes(17)
3
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping

import torch
from torch import nn

__all__ = ["tensor_bytes", "model_bytes", "mask_bytes", "training_flops", "inference_flops", "forward_macs"]


def tensor_bytes(tensors: Mapping[str, torch.Tensor] | Iterable[torch.Tensor]) -> int:
    """Bytes of the raw tensor data (``numel * element_size``), no framing."""
    values = tensors.values() if isinstance(tensors, Mapping) else tensors
    return int(sum(t.numel() * t.element_size() for t in values))


def model_bytes(model: nn.Module) -> int:
    """Bytes of a model's full state dict (parameters and buffers)."""
    return tensor_bytes(model.state_dict())


def mask_bytes(n_positions: int) -> int:
    """Bytes of a binary mask over ``n_positions`` entries sent as a bitmap."""
    return int(math.ceil(n_positions / 8))


def forward_macs(model: nn.Module, input_shape: Iterable[int]) -> int:
    """Multiply-accumulates of one forward pass on one input of shape (C, H, W),
    as torch-pruning's counter gives them: those of the convolution and
    linear weights (``k * k * C_in / groups`` per convolution output element,
    ``in_features`` per linear output), plus one operation per output element
    of each bias and ReLU, two per batch-norm element and one per input
    element of an average pool (2.0 % of ``cnn-medium``'s count at 32 px,
    4.5 % of ``cnn-small``'s); the zoo's max-pool
    (:class:`fol.models.MaxPool2d`) is not counted."""
    import torch_pruning as tp

    from fol.train import layer_modes_kept

    with layer_modes_kept(model):
        model.eval()
        macs, _ = tp.utils.count_ops_and_params(model, torch.zeros(1, *input_shape))
    return int(macs)


def inference_flops(macs: int, samples: int) -> int:
    """FLOPs of ``samples`` forward passes at ``macs`` each."""
    return 2 * int(macs) * int(samples)


def training_flops(macs: int, samples_seen: int) -> int:
    """FLOPs of training on ``samples_seen`` samples (forward + backward ~ 3 forwards)."""
    return 3 * inference_flops(macs, samples_seen)
