"""The model zoo: every network a node can hold, built from a :class:`ModelSpec`.

A spec is an architecture name plus constructor arguments; it is what travels in
the JSON part of the safe model format (:mod:`fol.checkpoint`), so a receiver can
rebuild the module tree before loading any tensor. Architectures:

========================  ==================================================
``cnn-small``             2 conv blocks (16, 32 channels), 64-unit head
``cnn-medium``            3 conv blocks (32, 64, 64), 128-unit head; the default
``cnn-large``             4 conv blocks (32, 64, 128, 128), 256-unit head
``cnn``                   the same family with any ``widths`` / ``hidden``
``resnet-small``          CIFAR-style ResNet (basic blocks, widths 16-32-64)
``resnet18``              torchvision ResNet-18, stem adapted to small inputs
``mobilenet_v3_small``    torchvision MobileNet-V3-small, stem adapted
========================  ==================================================

:data:`DEFAULT_ARCH` (from :mod:`fol.defaults`) names the default architecture.
Every builder takes ``num_classes``, ``in_channels`` and ``input_size`` (pixels,
square images).

>>> spec = ModelSpec("cnn-small", num_classes=2, in_channels=3, input_size=32)
>>> model = build_model(spec)
>>> model(torch.zeros(4, 3, 32, 32)).shape
torch.Size([4, 2])
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field
from typing import Any, Callable

import torch
from torch import nn
from torch.nn.modules.utils import _pair

from swarmbase.tomlcheck import shown

from fol.defaults import DEFAULT_ARCH
from fol.errors import ConfigError

__all__ = [
    "DEFAULT_ARCH",
    "ModelSpec",
    "build_model",
    "architectures",
    "arch_options",
    "ConvNet",
    "MaxPool2d",
    "SmallResNet",
    "count_parameters",
    "resize_to_state",
]



# --------------------------------------------------------------------------- nets


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _positive_ints(name: str, values: Any) -> tuple[int, ...]:
    """``values`` as a non-empty tuple of positive integers, else ValueError."""
    if not isinstance(values, (list, tuple)) or not values or not all(_is_int(v) and v >= 1 for v in values):
        raise ValueError(f"{name} must be a non-empty list of positive integers, got {shown(values)}")
    return tuple(values)


class _ChannelsLastMaxPool(torch.autograd.Function):
    """Max pooling computed on a channels-last copy, handed back in the input's
    default layout; the backward is torch's own, on the default layout, from
    the same indices (so gradients are the same bits as ``F.max_pool2d``'s)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, kernel: tuple[int, int], stride: tuple[int, int],
                padding: tuple[int, int], dilation: tuple[int, int], ceil_mode: bool) -> torch.Tensor:
        out, idx = torch.ops.aten.max_pool2d_with_indices(
            x.contiguous(memory_format=torch.channels_last), kernel, stride, padding, dilation, ceil_mode)
        idx = idx.contiguous()
        ctx.save_for_backward(x, idx)
        ctx.args = (kernel, stride, padding, dilation, ceil_mode)
        return out.contiguous()

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        x, idx = ctx.saved_tensors
        dx = torch.ops.aten.max_pool2d_with_indices_backward(grad.contiguous(), x, *ctx.args, idx)
        return dx, None, None, None, None, None


class MaxPool2d(nn.MaxPool2d):
    """``nn.MaxPool2d`` that pools a channels-last copy of its input and hands
    back the usual contiguous layout.

    Values, chosen indices and gradients are the same bits as torch's default
    pool (a maximum does not round; the backward is torch's own from the same
    indices), but on CPU torch's default-layout max-pool forward is several
    times slower than its channels-last one: in the default ``cnn-medium`` the
    three pools took about a quarter of a training step and longer than the
    three convolutions at inference.

    >>> x = torch.randn(2, 3, 8, 8)
    >>> bool(torch.equal(MaxPool2d(2)(x), nn.MaxPool2d(2)(x)))
    True
    """

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.return_indices or x.dim() != 4:
            return super().forward(x)
        if not (torch.is_grad_enabled() and x.requires_grad):
            return super().forward(x.contiguous(memory_format=torch.channels_last)).contiguous()
        return _ChannelsLastMaxPool.apply(x, _pair(self.kernel_size), _pair(self.stride), _pair(self.padding),
                                          _pair(self.dilation), bool(self.ceil_mode))


class ConvNet(nn.Module):
    """Plain CNN: ``[conv3x3 -> BN -> ReLU -> maxpool2] * len(widths)``, global
    average pooling, one hidden fully connected layer, classifier.

    ``widths`` are the output channels of each conv block and ``hidden`` the
    width of the hidden dense layer (0 for none). All of them are prunable.
    """

    def __init__(
        self,
        num_classes: int,
        in_channels: int = 3,
        input_size: int = 32,
        widths: tuple[int, ...] | list[int] = (16, 32),
        hidden: int = 64,
    ) -> None:
        super().__init__()
        widths = _positive_ints("widths", widths)
        if not _is_int(hidden) or hidden < 0:
            raise ValueError(f"hidden must be a non-negative integer (0 for no hidden layer), got {shown(hidden)}")
        blocks: list[nn.Module] = []
        c, size = in_channels, input_size
        for w in widths:
            pool = size >= 2
            blocks += [nn.Conv2d(c, w, 3, padding=1, bias=False), nn.BatchNorm2d(w), nn.ReLU(inplace=True)]
            if pool:
                blocks.append(MaxPool2d(2))
                size //= 2
            c = w
        self.features = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        head: list[nn.Module] = [nn.Flatten()]
        if hidden > 0:
            head += [nn.Linear(c, hidden), nn.ReLU(inplace=True)]
            c = hidden
        head.append(nn.Linear(c, num_classes))
        self.classifier = nn.Sequential(*head)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.pool(self.features(x)))


class BasicBlock(nn.Module):
    """ResNet basic block with a 1x1 projection shortcut when shapes change."""

    def __init__(self, c_in: int, c_out: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.shortcut(x))


class SmallResNet(nn.Module):
    """CIFAR-style ResNet: 3x3 stem, one stage per entry of ``widths`` with
    ``blocks`` basic blocks each (stride 2 between stages), global pooling, linear
    classifier. The defaults give a ResNet-8 (about 78 k parameters)."""

    def __init__(
        self,
        num_classes: int,
        in_channels: int = 3,
        input_size: int = 32,
        widths: tuple[int, ...] | list[int] = (16, 32, 64),
        blocks: int = 1,
    ) -> None:
        super().__init__()
        widths = _positive_ints("widths", widths)
        if not _is_int(blocks) or blocks < 1:
            raise ValueError(f"blocks must be a positive integer, got {shown(blocks)}")
        self.stem = nn.Sequential(
            nn.Conv2d(in_channels, widths[0], 3, 1, 1, bias=False), nn.BatchNorm2d(widths[0]), nn.ReLU(inplace=True)
        )
        layers: list[nn.Module] = []
        c = widths[0]
        size = input_size
        for i, w in enumerate(widths):
            stride = 2 if (i > 0 and size >= 2) else 1
            size //= stride
            for b in range(blocks):
                layers.append(BasicBlock(c, w, stride if b == 0 else 1))
                c = w
        self.layers = nn.Sequential(*layers)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(c, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(self.layers(self.stem(x))), 1))


def _resnet18(num_classes: int, in_channels: int = 3, input_size: int = 32) -> nn.Module:
    """torchvision ResNet-18; for inputs under 96 px the 7x7/2 stem and the max
    pool are replaced by a 3x3/1 stem (the usual CIFAR adaptation)."""
    from torchvision.models import resnet18

    model = resnet18(weights=None, num_classes=num_classes)
    if input_size < 96:
        model.conv1 = nn.Conv2d(in_channels, 64, 3, 1, 1, bias=False)
        model.maxpool = nn.Identity()
    elif in_channels != 3:
        model.conv1 = nn.Conv2d(in_channels, 64, 7, 2, 3, bias=False)
    return model


def _mobilenet_v3_small(num_classes: int, in_channels: int = 3, input_size: int = 32) -> nn.Module:
    """torchvision MobileNet-V3-small; for inputs under 96 px the stem runs at
    stride 1 so that the feature map is not reduced to 1x1 too early."""
    from torchvision.models import mobilenet_v3_small

    model = mobilenet_v3_small(weights=None, num_classes=num_classes)
    stem = model.features[0][0]
    stride = 1 if input_size < 96 else 2
    model.features[0][0] = nn.Conv2d(in_channels, stem.out_channels, 3, stride, 1, bias=False)
    return model


def _cnn_preset(widths: tuple[int, ...], hidden: int) -> Callable[..., nn.Module]:
    def build(num_classes: int, in_channels: int = 3, input_size: int = 32, **kw: Any) -> nn.Module:
        kw.setdefault("widths", widths)
        kw.setdefault("hidden", hidden)
        return ConvNet(num_classes, in_channels, input_size, **kw)

    build.__doc__ = f"ConvNet preset: widths={list(widths)}, hidden={hidden} (both overridable)."
    build.__signature__ = inspect.signature(ConvNet)  # type: ignore[attr-defined]
    return build


_REGISTRY: dict[str, Callable[..., nn.Module]] = {
    "cnn": ConvNet,
    "cnn-small": _cnn_preset((16, 32), 64),
    "cnn-medium": _cnn_preset((32, 64, 64), 128),
    "cnn-large": _cnn_preset((32, 64, 128, 128), 256),
    "resnet-small": SmallResNet,
    "resnet18": _resnet18,
    "mobilenet_v3_small": _mobilenet_v3_small,
}


def architectures() -> list[str]:
    """Names accepted by :class:`ModelSpec`."""
    return sorted(_REGISTRY)


def arch_options(arch: str) -> list[str]:
    """The options (``ModelSpec.options`` keys) the architecture ``arch`` takes, sorted."""
    params = inspect.signature(_REGISTRY[arch]).parameters
    return sorted(n for n in params if n not in ("num_classes", "in_channels", "input_size", "kw"))


# --------------------------------------------------------------------------- spec


@dataclass(frozen=True)
class ModelSpec:
    """Architecture name + constructor arguments: enough to rebuild a model.

    ``options`` holds the architecture-specific arguments (``widths``,
    ``hidden``, ``blocks``); they are checked against the builder's signature.
    """

    arch: str
    num_classes: int
    in_channels: int = 3
    input_size: int = 32
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.arch, str) or self.arch not in _REGISTRY:
            raise ConfigError(f"model arch {shown(self.arch)} is unknown; expected one of {', '.join(architectures())}")
        if not isinstance(self.options, dict):
            raise ConfigError(f"model options must be a table/object, got {type(self.options).__name__}")
        for name in ("num_classes", "in_channels", "input_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"model {name} must be a positive integer, got {shown(value)}")
        if self.num_classes < 2:
            raise ConfigError(f"model num_classes must be at least 2, got {self.num_classes}")
        allowed = set(arch_options(self.arch))
        unknown = sorted((set(self.options) - allowed), key=str)
        if unknown:
            raise ConfigError(
                f"model option(s) {shown(unknown, 100)} not accepted by {self.arch!r}; "
                f"expected a subset of {sorted(allowed) or 'no options'}"
            )
        # Normalise list-like options to lists so that JSON round trips compare equal.
        object.__setattr__(
            self, "options", {k: list(v) if isinstance(v, tuple) else v for k, v in self.options.items()}
        )

    def __hash__(self) -> int:
        # The generated frozen-dataclass hash would fail on the ``options`` dict.
        return hash(json.dumps(self.to_dict(), sort_keys=True, default=repr))

    def to_dict(self) -> dict[str, Any]:
        return {
            "arch": self.arch,
            "num_classes": self.num_classes,
            "in_channels": self.in_channels,
            "input_size": self.input_size,
            "options": dict(self.options),
        }

    @classmethod
    def from_dict(cls, data: Any) -> "ModelSpec":
        if not isinstance(data, dict):
            raise ConfigError(f"model spec must be a table/object, got {type(data).__name__}")
        unknown = sorted(set(data) - {"arch", "num_classes", "in_channels", "input_size", "options"})
        if unknown:
            raise ConfigError(f"model spec has unknown field(s) {shown(unknown, 100)}")
        if "arch" not in data or "num_classes" not in data:
            raise ConfigError("model spec needs at least 'arch' and 'num_classes'")
        options = data.get("options", {})
        if not isinstance(options, dict):
            raise ConfigError(f"model spec field 'options' must be a table/object, got {type(options).__name__}")
        return cls(
            arch=data["arch"],
            num_classes=data["num_classes"],
            in_channels=data.get("in_channels", 3),
            input_size=data.get("input_size", 32),
            options=options,
        )


def build_model(spec: ModelSpec, seed: int | None = None) -> nn.Module:
    """Build the (dense, untrained) model described by ``spec``.

    With ``seed`` the initialization is drawn from a private generator, so two
    nodes that build the same spec with the same seed start from identical
    weights (the shared initialization FOL's alignment term relies on) without
    touching the global RNG.
    """
    builder = _REGISTRY[spec.arch]
    try:
        if seed is None:
            return builder(spec.num_classes, spec.in_channels, spec.input_size, **spec.options)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return builder(spec.num_classes, spec.in_channels, spec.input_size, **spec.options)
    except (TypeError, ValueError, IndexError) as exc:
        raise ConfigError(f"cannot build {spec.arch!r} with options {shown(spec.options)}: {exc}") from None


def count_parameters(model: nn.Module) -> int:
    """Number of parameters (trainable or not) in ``model``."""
    return sum(p.numel() for p in model.parameters())


# ------------------------------------------------------- pruned module rebuilding


def resize_to_state(model: nn.Module, shapes: dict[str, tuple[int, ...]]) -> nn.Module:
    """Shrink the layers of a freshly built ``model`` to the tensor ``shapes`` of
    a structurally pruned state dict (channels removed by torch-pruning).

    Structured pruning only ever changes channel counts of ``Conv2d``,
    ``BatchNorm2d`` and ``Linear`` layers (depthwise convolutions keep
    ``groups == channels``), so the tensor shapes alone determine the pruned
    module tree: each such layer is replaced by one of the recorded size. The
    model is modified in place and returned; names not in ``shapes`` are left
    alone (the caller checks the full key set).
    """
    for name, module in list(model.named_modules()):
        prefix = f"{name}." if name else ""
        wkey = prefix + "weight"
        if wkey not in shapes:
            continue
        new = None
        shape = tuple(shapes[wkey])
        # New layers live where the old ones did (e.g. the ``meta`` device of a
        # skeleton that the safe loader fills with ``load_state_dict(assign=True)``).
        factory = {"device": module.weight.device, "dtype": module.weight.dtype} if hasattr(module, "weight") else {}
        if isinstance(module, nn.Conv2d) and len(shape) == 4 and shape != tuple(module.weight.shape):
            depthwise = module.groups > 1 and module.groups == module.in_channels == module.out_channels
            out_c = shape[0]
            if depthwise:
                in_c, groups = out_c, out_c
            else:
                if module.groups != 1:
                    raise ValueError(f"{name}: grouped convolutions other than depthwise cannot be resized")
                in_c, groups = shape[1], 1
            new = nn.Conv2d(
                in_c, out_c, module.kernel_size, module.stride, module.padding, module.dilation,
                groups, module.bias is not None, module.padding_mode, **factory,
            )
        elif isinstance(module, nn.Linear) and len(shape) == 2 and shape != tuple(module.weight.shape):
            new = nn.Linear(shape[1], shape[0], bias=module.bias is not None, **factory)
        elif isinstance(module, nn.BatchNorm2d) and len(shape) == 1 and shape[0] != module.num_features:
            new = nn.BatchNorm2d(
                shape[0], module.eps, module.momentum, module.affine, module.track_running_stats, **factory
            )
        if new is not None:
            _set_submodule(model, name, new)
    return model


def _set_submodule(root: nn.Module, dotted: str, new: nn.Module) -> None:
    parent_name, _, child = dotted.rpartition(".")
    parent = root.get_submodule(parent_name) if parent_name else root
    setattr(parent, child, new)

