"""The safe model format: one ``.safetensors`` file per model, no pickle anywhere.

A model travels between nodes (and lives on disk) as a single safetensors file.
The tensors are the model's ``state_dict``; the safetensors header's
``__metadata__`` carries, under the key ``"fol"``, a JSON *model card*::

    {"format": "fol-model", "version": 2,
     "spec": {"arch": "cnn-small", "num_classes": 2, "in_channels": 3,
              "input_size": 32, "options": {}},
     "class_names": ["fire", "no_fire"], "input_shape": [3, 32, 32],
     "producer": "sat-12", "round": 0, "pruned": false,
     "sha256": "<hex digest of the card and the tensors, see model_digest>", "extra": {}}

The spec (:class:`fol.models.ModelSpec`) is enough to rebuild the dense module
tree; for a structurally pruned model (channels removed with torch-pruning) the
tensor shapes themselves define the smaller tree (:func:`fol.models.resize_to_state`).
That replaces torch-pruning's own save path, which is pickle.

Loading validates the whole payload before any of it reaches the pipeline,
cheapest checks first, and before any module is built; every failure is a
:class:`fol.errors.CheckpointError` whose one-line message names the source
(file path or ``<bytes>`` label, through :func:`swarmbase.tomlcheck.brief`: escaped
and cut as every message names a file) and what was expected. Nothing else leaves the
loader: an unexpected exception while validating untrusted bytes is reported
as a ``CheckpointError`` too. In order:

1. a regular file, links followed (``os.stat`` before it is opened: a FIFO or a device is refused
   unopened), of at most ``max_bytes`` (``os.fstat`` of the open file, before anything is read);
2. the safetensors header: length at most :data:`MAX_HEADER_BYTES`, JSON at most
   3 levels deep with no key given twice, at most :data:`MAX_TENSORS` tensors,
   each of dtype float32 / float16 / bfloat16 / int64;
3. the card: present, at most :data:`MAX_CARD_BYTES` characters, JSON at most
   :data:`MAX_CARD_DEPTH` levels deep with at most :data:`MAX_CARD_ITEMS`
   values and no key given twice, of this format and version, fields valid and consistent (class
   names vs ``num_classes``, input shape vs spec);
4. the architecture arguments within :data:`SPEC_LIMITS`, each option an
   integer or a list of integers (so a 500-byte card cannot ask for 10,000
   residual blocks);
5. the tensors: a well-formed safetensors payload (byte ranges that follow one
   another and each hold its shape's bytes, checked before any tensor is
   allocated; each tensor is then read straight into its own storage, so
   loading a file peaks near its size, ``benchmarks/load_memory.py``) whose :func:`model_digest`
   (sha256 over the card *and* the tensors) equals the card's ``sha256``, so
   a changed class name, producer or round is detected like a changed weight;
6. finite values (no NaN, +-Inf);
7. the module tree of the spec, built on the ``meta`` device (no memory)
   under a budget: building stops as soon as the tree needs more than the
   file's tensor count plus 16 (layers a builder replaces while building);
   then every tensor must exist with the shape the spec builds (for a pruned
   model: no larger than the dense layer, and shapes that form a working
   network, found with a shape-only forward pass), and batch-norm running
   variances must not be negative.

Format versions: version 2 (this one) covers the whole card by the digest.
Version 1 files (digest over the tensors only) are refused by the loader,
since their card could have been altered unnoticed; a version-1 file you
trust is converted with :func:`upgrade_model_file`.

Floating tensors are loaded into a float32 model (float16 / bfloat16 payloads
are cast up); the returned model is in eval mode.

This project's choices (not from the FOL paper): one file per model (the
optional ``<name>.json`` sidecar is for humans only and never read back), the
card layout above, the digest, and every limit named above.

Example::

    >>> import tempfile, pathlib, torch
    >>> from fol.models import ModelSpec, build_model
    >>> spec = ModelSpec("cnn-small", num_classes=2)
    >>> model = build_model(spec, seed=0).eval()
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "node-3.safetensors"
    >>> card = save_model(path, model, spec=spec, class_names=["fire", "no_fire"], producer="node-3")
    >>> loaded = load_model(path)
    >>> x = torch.zeros(1, 3, 32, 32)
    >>> torch.equal(loaded.model(x), model(x)), loaded.card.producer
    (True, 'node-3')
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple, Sequence

import torch
from torch import nn

from swarmbase.safejson import check_bounds
from swarmbase.safejson import loads as bounded_loads
from swarmbase.tomlcheck import brief, check_input_file, shown

from fol.defaults import DEFAULT_MAX_BYTES, MAX_ROUND, class_name
from fol.errors import CheckpointError, ConfigError
from fol.fileio import atomic_write_bytes
from fol.models import ModelSpec, arch_options, build_model, resize_to_state

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "DEFAULT_MAX_BYTES",
    "ModelCard",
    "LoadedModel",
    "save_model",
    "model_to_bytes",
    "load_model",
    "load_model_bytes",
    "read_card",
    "tensor_digest",
    "model_digest",
    "upgrade_model_file",
    "read_state_dict",
    "import_state_dict",
    "SPEC_LIMITS",
]

log = logging.getLogger(__name__)

FORMAT_NAME = "fol-model"
FORMAT_VERSION = 2
#: The previous version (digest over the tensors only); read by :func:`upgrade_model_file` only.
LEGACY_VERSION = 1

#: Largest model file (bytes) accepted by default: :data:`fol.defaults.DEFAULT_MAX_BYTES`, 200 MB (imported
#: from there, which needs no torch, with the commands' help and the node agent's config).

#: Largest safetensors JSON header (bytes). A ResNet-18 header is about 10 kB.
MAX_HEADER_BYTES = 8 * 1024 * 1024

#: Largest JSON model card (characters) inside the header.
MAX_CARD_BYTES = 256 * 1024

#: Deepest nesting of the card's JSON (containers) and most values in it.
MAX_CARD_DEPTH = 16
MAX_CARD_ITEMS = 20_000

#: Most tensors in one model file (ResNet-18 has 122, the largest spec
#: :data:`SPEC_LIMITS` allows about 3,200).
MAX_TENSORS = 4096

#: Upper bounds on the architecture arguments a card may ask for, checked
#: before any module is built: ``field: maximum`` for the spec's integers and
#: ``option: (maximum, most list entries)`` for its options. Far above the zoo's
#: presets (ResNet-18: 64-512 channels; resnet-small: 3 stages of 1 block).
SPEC_LIMITS: dict[str, Any] = {
    "num_classes": 10_000,
    "in_channels": 64,
    "input_size": 4096,
    "options": {"widths": (4096, 16), "hidden": (65_536, 1), "blocks": (16, 1)},
}

_METADATA_KEY = "fol"
_FLOAT_DTYPES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}
_INT_DTYPES = {torch.int64: "I64"}
_DTYPE_NAMES = {**_FLOAT_DTYPES, **_INT_DTYPES}
_DTYPES_EXPECTED = "expected float32, float16, bfloat16 or int64"
#: safetensors' names of the dtypes torch also has, as torch names them (the others are shown as written)
_SAFETENSORS_DTYPES = {"F64": "float64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8",
                       "U16": "uint16", "U32": "uint32", "U64": "uint64", "BOOL": "bool",
                       "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}
_CARD_FIELDS = {
    "format", "version", "spec", "class_names", "input_shape", "producer", "round", "pruned", "sha256", "extra",
}


# --------------------------------------------------------------------------- card


@dataclass(frozen=True)
class ModelCard:
    """What a model file says about its tensors.

    ``spec`` rebuilds the dense module tree; ``class_names`` label the outputs
    (one per class, in logit order; kept in Unicode NFC, :func:`fol.defaults.class_name`,
    so that cards from nodes whose file systems wrote a name in other forms compare
    equal); ``input_shape`` is ``(C, H, W)`` in pixels
    and must be (``None`` gives) ``(in_channels, input_size, input_size)`` of the spec;
    ``producer`` is the node that trained the model and ``round`` the FOL round
    it belongs to (0 = pretrained; at most :data:`fol.defaults.MAX_ROUND`, the
    largest an agent's OFFER names). ``pruned`` and ``sha256`` are filled in by
    :func:`save_model` / :func:`model_to_bytes` (whatever the caller passed is
    replaced by what the tensors show). ``extra`` is free JSON (metrics, notes).

    Invalid fields raise :class:`fol.errors.ConfigError`.
    """

    spec: ModelSpec
    class_names: tuple[str, ...]
    input_shape: tuple[int, int, int] | None = None
    producer: str = ""
    round: int = 0
    pruned: bool = False
    sha256: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def __hash__(self) -> int:
        # The generated frozen-dataclass hash would fail on the ``extra`` dict.
        return hash(self.to_json())

    def unusable_by(self, class_names: Sequence[str], input_shape: Sequence[int]) -> str | None:
        """Why a node of these classes (in this output order) and input shape ``(C, H, W)`` cannot
        use this model, or None when it can: the one rule of ``fol personalize``'s neighbours and
        of the agent's received models. Lists are shown cut (a card may name thousands of classes).

        >>> card = ModelCard(ModelSpec("cnn-small", 2), ["dry", "flood"])
        >>> card.unusable_by(["dry", "flood"], (3, 32, 32)) is None
        True
        >>> card.unusable_by(["flood", "dry"], (3, 32, 32))
        "classes ['dry', 'flood'] are the node's classes ['flood', 'dry'] in another order (the model's outputs are in another order)"
        >>> card.unusable_by(["dry", "flood"], (3, 64, 64))
        "input shape [3, 32, 32] differs from the node's [3, 64, 64]"
        """
        if list(self.class_names) != list(class_names):
            theirs, ours = shown(list(self.class_names), 200), shown(list(class_names), 200)
            if sorted(self.class_names) == sorted(class_names):  # a set that differs only in its order
                return (f"classes {theirs} are the node's classes {ours} in another order (the model's outputs "
                        f"are in another order)")
            return f"class set {theirs} differs from the node's {ours}"
        if list(self.input_shape or ()) != list(input_shape):
            return f"input shape {list(self.input_shape or ())} differs from the node's {list(input_shape)}"
        return None

    def __post_init__(self) -> None:
        if not isinstance(self.spec, ModelSpec):
            raise ConfigError(f"model card field 'spec' must be a ModelSpec, got {type(self.spec).__name__}")
        names = self.class_names
        if isinstance(names, str) or not isinstance(names, (list, tuple)):
            raise ConfigError(f"model card field 'class_names' must be a list of strings, got {type(names).__name__}")
        if not all(isinstance(n, str) and n for n in names):
            raise ConfigError("model card field 'class_names' must hold non-empty strings")
        bad = next((n for n in names if not _is_utf8(n)), None)
        if bad is not None:
            raise ConfigError(f"model card field 'class_names' has {shown(bad)}, which is not valid UTF-8 text "
                              f"(a non-UTF-8 folder name?)")
        names = tuple(class_name(n) for n in names)  # NFC: macOS's and Linux's 'café' are one class
        if len(set(names)) != len(names):
            raise ConfigError("model card field 'class_names' has duplicate names (in Unicode NFC)")
        if len(names) != self.spec.num_classes:
            raise ConfigError(
                f"model card field 'class_names' has {len(names)} names, expected {shown(self.spec.num_classes)} "
                f"(spec num_classes)"
            )
        object.__setattr__(self, "class_names", names)
        expected = (self.spec.in_channels, self.spec.input_size, self.spec.input_size)
        shape = expected if self.input_shape is None else self.input_shape
        if not isinstance(shape, (list, tuple)) or not all(_is_int(v) for v in shape) or tuple(shape) != expected:
            raise ConfigError(
                f"model card field 'input_shape' is {shown(shape)}, expected {shown(list(expected))} "
                f"(spec in_channels, input_size, input_size)"
            )
        object.__setattr__(self, "input_shape", expected)
        if not isinstance(self.producer, str):
            raise ConfigError(f"model card field 'producer' must be a string, got {type(self.producer).__name__}")
        if not _is_utf8(self.producer):
            raise ConfigError(f"model card field 'producer' is {shown(self.producer)}, not valid UTF-8 text")
        if not _is_int(self.round) or not 0 <= self.round <= MAX_ROUND:  # an agent's OFFER's bound too
            raise ConfigError(f"model card field 'round' must be an integer in [0, {MAX_ROUND:,}], "
                              f"got {shown(self.round)}")
        if not isinstance(self.pruned, bool):
            raise ConfigError(f"model card field 'pruned' must be true or false, got {shown(self.pruned)}")
        if not isinstance(self.sha256, str) or (
            self.sha256 and (len(self.sha256) != 64 or any(c not in "0123456789abcdef" for c in self.sha256))
        ):
            raise ConfigError(f"model card field 'sha256' must be 64 lowercase hex digits, got {shown(self.sha256)}")
        if not isinstance(self.extra, dict):
            raise ConfigError(f"model card field 'extra' must be a JSON object, got {type(self.extra).__name__}")
        try:
            check_bounds(self.extra, max_depth=MAX_CARD_DEPTH - 1, max_items=MAX_CARD_ITEMS)
            json.dumps(self.extra, allow_nan=False, ensure_ascii=False).encode()  # as model_digest writes it
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"model card field 'extra' is not plain JSON: {_one_line(exc)}") from None

    def to_dict(self) -> dict[str, Any]:
        """The card as JSON-ready data, including format name and version."""
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "spec": self.spec.to_dict(),
            "class_names": list(self.class_names),
            "input_shape": list(self.input_shape or ()),
            "producer": self.producer,
            "round": self.round,
            "pruned": self.pruned,
            "sha256": self.sha256,
            "extra": self.extra,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, allow_nan=False)

    @classmethod
    def from_dict(cls, data: Any) -> "ModelCard":
        """Parse and validate a card; :class:`fol.errors.ConfigError` on any problem."""
        if not isinstance(data, dict):
            raise ConfigError(f"model card must be a JSON object, got {type(data).__name__}")
        if data.get("format") != FORMAT_NAME:
            raise ConfigError(f"model card format is {shown(data.get('format'))}, expected {FORMAT_NAME!r}")
        if data.get("version") not in (FORMAT_VERSION, LEGACY_VERSION) or not _is_int(data.get("version")):
            raise ConfigError(
                f"model card version is {shown(data.get('version'))}, this toolkit reads version {FORMAT_VERSION}"
            )
        unknown = sorted(set(data) - _CARD_FIELDS)
        if unknown:
            raise ConfigError(f"model card has unknown field(s) {shown(unknown, 100)}")
        missing = sorted({"spec", "class_names", "sha256"} - set(data))
        if missing:
            raise ConfigError(f"model card is missing field(s) {', '.join(map(repr, missing))}")
        return cls(
            spec=ModelSpec.from_dict(data["spec"]),
            class_names=data["class_names"],
            input_shape=data.get("input_shape"),
            producer=data.get("producer", ""),
            round=data.get("round", 0),
            pruned=data.get("pruned", False),
            sha256=data["sha256"],
            extra=data.get("extra", {}),
        )


class LoadedModel(NamedTuple):
    """A validated model (eval mode, float32, CPU) and its card."""

    model: nn.Module
    card: ModelCard


# --------------------------------------------------------------------------- digest


def tensor_digest(state_dict: Mapping[str, torch.Tensor]) -> str:
    """Canonical sha256 (hex) of a set of named tensors.

    Tensors are taken in sorted name order; for each one the hash covers the
    name, the safetensors dtype name (``F32``, ``F16``, ``BF16``, ``I64``, else
    torch's name), the shape and the raw little-endian bytes, each
    length-prefixed so that no two different sets collide by concatenation.
    The digest depends only on the tensor contents, not on the file layout.

    >>> tensor_digest({"w": torch.zeros(2)}) == tensor_digest({"w": torch.zeros(2).clone()})
    True
    """
    h = hashlib.sha256()
    _hash_tensors(h, state_dict)
    return h.hexdigest()


def model_digest(card: "ModelCard | Mapping[str, Any]", state_dict: Mapping[str, torch.Tensor]) -> str:
    """The sha256 (hex) a version-2 card carries: it covers the card and the tensors.

    The card (a :class:`ModelCard`, or its :meth:`ModelCard.to_dict` form)
    minus its ``sha256`` field is written as canonical JSON (sorted keys, no
    spaces), length-prefixed and hashed, followed by the tensors exactly as
    in :func:`tensor_digest`. Changing any card field (a class name, the
    producer, the round, ``extra``) or any tensor changes the digest. The
    loader hashes the class names as the file holds them (a file written
    before names were kept in NFC may hold another form).

    >>> spec = ModelSpec("cnn-small", num_classes=2)
    >>> a = ModelCard(spec, ["fire", "no_fire"])
    >>> b = ModelCard(spec, ["fire", "no_firf"])
    >>> t = {"w": torch.zeros(2)}
    >>> model_digest(a, t) == model_digest(a.to_dict(), t), model_digest(a, t) == model_digest(b, t)
    (True, False)
    """
    data = dict(card.to_dict() if isinstance(card, ModelCard) else card)
    data.pop("sha256", None)
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    h = hashlib.sha256()
    h.update(b"fol-model-card\x00")
    h.update(struct.pack("<Q", len(text)))
    h.update(text)
    _hash_tensors(h, state_dict)
    return h.hexdigest()


def _hash_tensors(h: Any, state_dict: Mapping[str, torch.Tensor]) -> None:
    for name in sorted(state_dict):
        t = state_dict[name].detach().cpu().contiguous()
        meta = f"{name}\x00{_DTYPE_NAMES.get(t.dtype, str(t.dtype))}\x00{list(t.shape)}".encode()
        raw = t.reshape(-1).view(torch.uint8).numpy() if t.numel() else b""
        h.update(struct.pack("<Q", len(meta)))
        h.update(meta)
        h.update(struct.pack("<Q", t.numel() * t.element_size()))
        h.update(raw)


# --------------------------------------------------------------------------- save


def model_to_bytes(model: nn.Module, card: ModelCard, *, max_bytes: int = DEFAULT_MAX_BYTES,
                   source: str = "<bytes>") -> bytes:
    """Serialize ``model`` with ``card`` to the bytes of a model file.

    ``card.pruned`` and ``card.sha256`` are recomputed from the tensors. The
    model is checked exactly as the loader would (dtypes, finite values, shapes
    against ``card.spec``), so the bytes always load back; errors name ``source``
    (e.g. the file the bytes are to become), as :func:`load_model_bytes` does.
    """
    return _serialize(model, card, brief(source), max_bytes)[0]


def save_model(
    path: str | os.PathLike[str],
    model: nn.Module,
    card: ModelCard | None = None,
    *,
    spec: ModelSpec | None = None,
    class_names: list[str] | tuple[str, ...] | None = None,
    input_shape: tuple[int, int, int] | None = None,
    producer: str = "",
    round: int = 0,
    extra: dict[str, Any] | None = None,
    sidecar: bool = False,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> ModelCard:
    """Write ``model`` to ``path`` (a ``.safetensors`` file) and return its card.

    Pass either a complete ``card`` or the card fields (``spec`` and
    ``class_names`` at least). The write is atomic: the bytes go to a temporary
    file in the same folder, which is fsynced and then renamed over ``path``, so
    an existing file is never left half-written. A model that fails validation
    (non-finite weights, unsupported dtype, shapes that do not match the spec)
    is refused before anything is written. With ``sidecar=True`` the card is
    also written, for humans, to ``<path without suffix>.json``.
    """
    target = Path(path)
    source = brief(target)
    if card is None:
        if spec is None or class_names is None:
            raise CheckpointError(f"{source}: save_model needs either a card or at least spec= and class_names=")
        try:
            card = ModelCard(
                spec=spec, class_names=tuple(class_names), input_shape=input_shape,
                producer=producer, round=round, extra=dict(extra or {}),
            )
        except ConfigError as exc:
            raise CheckpointError(f"{source}: {exc}") from None
    elif (spec is not None or class_names is not None or input_shape is not None or extra is not None
          or producer != "" or round != 0):
        raise CheckpointError(f"{source}: pass either card= or the card fields to save_model, not both")
    if sidecar and target.with_suffix(".json") == target:
        raise CheckpointError(f"{source}: the sidecar card <name>.json would replace the model itself; "
                              f"expected a model file name such as *.safetensors")
    data, final_card = _serialize(model, card, source, max_bytes)
    _atomic_write(target, data)
    if sidecar:
        text = json.dumps(final_card.to_dict(), indent=2, sort_keys=True) + "\n"
        _atomic_write(target.with_suffix(".json"), text.encode())
    log.debug("saved %s (%d bytes, %s, pruned=%s)", source, len(data), card.spec.arch, final_card.pruned)
    return final_card


def _serialize(model: nn.Module, card: ModelCard, source: str, max_bytes: int) -> tuple[bytes, ModelCard]:
    from safetensors.torch import save

    if not isinstance(card, ModelCard):
        raise CheckpointError(f"{source}: card must be a ModelCard, got {type(card).__name__}")
    tensors = {name: t.detach().cpu().contiguous().clone() for name, t in model.state_dict().items()}
    _check_tensors(tensors, source)
    _check_spec_limits(card.spec, source)
    if len(tensors) > MAX_TENSORS:
        raise CheckpointError(f"{source}: model has {len(tensors)} tensors, over the limit of {MAX_TENSORS}")
    pruned, _ = _check_structure(card.spec, tensors, source, pruned=None)
    unsigned = replace(card, pruned=pruned, sha256="")
    final = replace(unsigned, sha256=model_digest(unsigned, tensors))
    data = save(tensors, metadata={_METADATA_KEY: final.to_json()})
    if len(data) > max_bytes:
        raise CheckpointError(f"{source}: model is {len(data)} bytes, over the size limit of {max_bytes} bytes")
    return data, final


def _atomic_write(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` atomically (:func:`fol.fileio.atomic_write_bytes`)."""
    try:
        atomic_write_bytes(target, data)
    except OSError as exc:
        raise CheckpointError(f"{brief(target)}: cannot write model file ({exc.strerror or exc})") from None


# --------------------------------------------------------------------------- load


def read_card(path: str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_BYTES, *, legacy: bool = True) -> ModelCard:
    """The card of the model file at ``path``, reading only the header.

    Cheap (no tensor is read), so it suits deciding whether a received model
    is worth loading. It checks the header and the card (steps 1-4 of the
    module docstring) and the tensors' byte ranges against the file's size (the
    layout of step 5: a file cut short or with bytes added is refused), but not
    the digest or the tensors' values: :func:`load_model` does. A version-1
    card is read too unless ``legacy`` is false: then it is refused as
    :func:`load_model` refuses it (a caller about to load the file).
    """
    source = brief(path)
    with _only_project_errors(source):
        with _opened(path, max_bytes, source) as (fh, size):
            header_len = _header_length(fh.read(8), size, source)
            raw = fh.read(header_len)
        header = _parse_header(raw, header_len, source)
        card, _ = _card_from_header(header, source, legacy=legacy)
        _check_spec_limits(card.spec, source)
        _tensor_layout(header, size - 8 - header_len, source)
        return card


def load_model(path: str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_BYTES, *,
               source: str | None = None) -> LoadedModel:
    """Validate and load the model file at ``path`` (see the module docstring).

    The size limit is checked with ``os.stat`` before the file is read.
    ``source`` names the file in error messages (default: the path; the agent
    passes a label so that no local path reaches a peer).
    """
    label = brief(path if source is None else source)
    with _only_project_errors(label):
        with _opened(path, max_bytes, label) as (fh, size):
            header_len = _header_length(fh.read(8), size, label)
            raw = fh.read(header_len)
            # the tensors are read one by one straight into their own storage (no copy of the whole file)
            return _load(raw, header_len, size, _FileTensors(fh, label), label, legacy=False)


def load_model_bytes(data: bytes, max_bytes: int = DEFAULT_MAX_BYTES, source: str = "<bytes>") -> LoadedModel:
    """Validate and load a model from the bytes of a model file (e.g. received
    from a peer); ``source`` names the payload in error messages.

    Never raises anything but :class:`fol.errors.CheckpointError` on bad bytes.
    """
    source = brief(source)
    with _only_project_errors(source):
        return _load_bytes(data, max_bytes, source, legacy=False)


def upgrade_model_file(path: str | os.PathLike[str], out: str | os.PathLike[str] | None = None,
                       max_bytes: int = DEFAULT_MAX_BYTES) -> ModelCard:
    """Rewrite a version-1 model file you trust as version 2 (to ``out``, default in place).

    Version 1 covered only the tensors by its digest; the tensors are checked
    against it and every other check of the loader runs, but the card itself
    cannot be verified: only upgrade files whose origin you trust. A file that
    is already version 2 is loaded (fully checked) and written unchanged.
    Returns the new card.
    """
    source = brief(path)
    with _only_project_errors(source):
        _checked_size(check_input_file(path, CheckpointError, "model file").stat().st_size, max_bytes, source)
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise CheckpointError(f"{source}: cannot read the model file ({exc.strerror or exc})") from None
        loaded = _load_bytes(data, max_bytes, source, legacy=True)
    return save_model(Path(out) if out is not None else Path(path), loaded.model, loaded.card, max_bytes=max_bytes)


#: What a pickle-based checkpoint starts with: a zip archive (``torch.save`` since PyTorch 1.6, numpy's
#: ``.npz``) or a pickle of protocol 2 to 5 (older ``torch.save``, ``pickle.dump``).
_PICKLE_MAGIC = (b"PK\x03\x04", b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05")
#: File name endings of pickle-based checkpoints (PyTorch, Lightning, Hugging Face's ``pytorch_model.bin``).
_PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt", ".pkl", ".pickle", ".tar", ".npz")


def read_state_dict(path: str | os.PathLike[str], max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, torch.Tensor]:
    """The tensors of a plain safetensors file (a ``state_dict`` saved elsewhere with
    ``safetensors.torch.save_file``), in name order, checked as the loader checks a
    model file's (size, header, layout, dtypes the format takes, and float64, which
    :func:`import_state_dict` converts) but without a card.

    A pickle-based checkpoint (a zip or a pickle inside, as ``torch.save`` writes) is
    refused by its first bytes, never unpickled; so is a file named like one (``.pt``,
    ``.pth``, ``.bin`` ...) unless its bytes are a safetensors file's (8 bytes of header
    length, then the header's ``{``): a safetensors file named ``model.bin`` is read.
    """
    source = brief(path)
    with _only_project_errors(source):
        with _opened(path, max_bytes, source, what="file") as (fh, size):
            prefix = fh.read(8)
            looks_safetensors = len(prefix) == 8 and fh.read(1) == b"{"
            fh.seek(8)
            if prefix.startswith(_PICKLE_MAGIC) or (
                    Path(path).suffix.lower() in _PICKLE_SUFFIXES and not looks_safetensors):
                raise CheckpointError(
                    f"{source}: a pickle-based checkpoint (PyTorch .pt/.pth/.bin), which this tool never "
                    f"unpickles (loading a pickle can run any code); convert it in your own environment "
                    f"with safetensors.torch.save_file(model.state_dict(), 'weights.safetensors')"
                )
            header_len = _header_length(prefix, size, source)
            raw = fh.read(header_len)
            header = _parse_header(raw, header_len, source, _IMPORT_DTYPES)
            meta = header.get("__metadata__")
            if isinstance(meta, dict) and _METADATA_KEY in meta:
                raise CheckpointError(f"{source}: already a FOL model file (it has a model card); "
                                      f"`fol model info` shows it, it needs no import")
            return _read_tensors(header, size - 8 - header_len, _FileTensors(fh, source), source, _IMPORT_DTYPES)


def _listed(names: list[str], limit: int = 4) -> str:
    shown_names = ", ".join(names[:limit])
    return shown_names + (f", ... {len(names) - limit} more" if len(names) > limit else "")


def import_state_dict(weights: str | os.PathLike[str], out: str | os.PathLike[str], card: ModelCard,
                      max_bytes: int = DEFAULT_MAX_BYTES, note: Callable[[str], None] | None = None) -> LoadedModel:
    """Turn the plain safetensors ``state_dict`` at ``weights`` (trained elsewhere) into a
    model file at ``out`` with ``card``, and return the written file loaded back by
    :func:`load_model`.

    The tensors are read by :func:`read_state_dict` (never unpickled); their names and
    shapes must be exactly those of the dense model ``card.spec`` builds (every missing,
    unexpected or differently shaped tensor is listed, a few of each, in one line); values
    must be finite. Tensors of another float dtype (float64, float16, bfloat16) are
    converted to float32, the models' dtype, and ``note`` is called with one line
    saying so; a float64 value beyond float32's range is refused. The file is written
    by :func:`save_model` (atomically) and then loaded back with every check of the loader.
    """
    source = brief(weights)
    tensors = read_state_dict(weights, max_bytes)
    say = note or (lambda line: None)
    with _only_project_errors(source):
        _check_spec_limits(card.spec, source)
        skeleton = _meta_model(card.spec, source)
        dense = {name: tuple(t.shape) for name, t in skeleton.state_dict().items()}
        tensors = _import_names(tensors, dense, source, say)
        missing = [n for n in dense if n not in tensors]  # network order
        unexpected = [n for n in tensors if n not in dense]
        differing = [f"{n} {list(tensors[n].shape)} (expected {list(dense[n])})"
                     for n in dense if n in tensors and tuple(tensors[n].shape) != dense[n]]
        if missing or unexpected or differing:
            spec = card.spec
            parts = [f"{len(missing)} missing: {_listed(missing)}" if missing else "",
                     f"{len(unexpected)} unexpected: {_listed([shown(n) for n in unexpected])}" if unexpected else "",
                     f"{len(differing)} of another shape: {_listed(differing)}" if differing else ""]
            options = ", ".join(f"{k} {shown(v)}" for k, v in spec.options.items())
            accepted = arch_options(spec.arch)
            raise CheckpointError(
                f"{source}: tensors do not match {spec.arch!r} with {spec.num_classes} classes, "
                f"{spec.in_channels} input channels, input size {spec.input_size}"
                + (f", {options}" if options else "") + ": "
                + "; ".join(p for p in parts if p)
                + ("; the zoo's resnet18 has torchvision's 7x7 stem only for input size 96 or more"
                   if spec.arch == "resnet18" and spec.input_size < 96 and any(d.startswith("conv1.") for d in differing)
                   else "")
                + (f"; {spec.arch!r} takes the option(s) {', '.join(accepted)}, which set its layers' sizes"
                   if differing and accepted else "")
            )
        _to_float32(tensors, source, say)
        _check_tensors(tensors, source)
        # integer / float kinds and running variances, as the loader checks them
        _, skeleton = _check_structure(card.spec, tensors, source, pruned=False)
        model = _materialize(skeleton, card.spec, tensors, source)
    save_model(out, model, card, max_bytes=max_bytes)
    return load_model(out, max_bytes)


def _import_names(tensors: dict[str, torch.Tensor], dense: Mapping[str, tuple[int, ...]], source: str,
                  say: Callable[[str], None]) -> dict[str, torch.Tensor]:
    """The tensors of an imported state dict under the names of the zoo's model ``dense``, when a prefix
    every name shares (``module.`` from DataParallel, ``model.`` from a wrapper) is all that keeps them
    from matching: stripped, saying so in one line. Batch-norm ``num_batches_tracked`` counters
    missing from it are set to 0, as torch's ``load_state_dict(strict=True)`` does for a state dict
    without version metadata (a safetensors file has none)."""
    counters = {n for n in dense if n.rsplit(".", 1)[-1] == "num_batches_tracked"}

    def fits(names: Iterable[str]) -> bool:
        names = set(names)
        return names <= dense.keys() and dense.keys() - names <= counters

    if tensors and not fits(tensors):
        first = next(iter(tensors)).split(".")
        for k in range(len(first) - 1, 0, -1):  # the longest shared prefix that makes the names match
            prefix = ".".join(first[:k]) + "."
            if all(n.startswith(prefix) for n in tensors) and fits(n[len(prefix):] for n in tensors):
                tensors = {n[len(prefix):]: t for n, t in tensors.items()}
                say(f"{source}: the prefix {shown(prefix)} every tensor name shares was removed "
                    f"(as DataParallel or a wrapper module adds it)")
                break
    absent = [n for n in dense if n in counters and n not in tensors]  # network order
    tensors.update({n: torch.tensor(0, dtype=torch.int64) for n in absent})  # not listed as missing either
    if absent and fits(tensors):
        say(f"{source}: {len(absent)} batch-norm num_batches_tracked counter(s) missing, set to 0 "
            f"(as torch's load_state_dict does)")
    return tensors


def _to_float32(tensors: dict[str, torch.Tensor], source: str, say: Callable[[str], None]) -> None:
    """Turn the float64 tensors of an imported state dict into float32 (the models' dtype), refusing
    NaN / Inf and values beyond float32's range; say in one line what was converted (float16 and
    bfloat16 are widened exactly when the model is built, :func:`_materialize`)."""
    converted: dict[str, int] = {}
    for name, t in tensors.items():
        if not t.is_floating_point() or t.dtype == torch.float32:
            continue
        kind = str(t.dtype).removeprefix("torch.")
        converted[kind] = converted.get(kind, 0) + 1
        if t.dtype != torch.float64:
            continue
        flat = t.reshape(-1)
        bad = sum(int((~torch.isfinite(part)).sum()) for part in flat.split(_FINITE_CHUNK))
        if bad:
            raise CheckpointError(f"{source}: tensor {shown(name)} has {bad} non-finite value(s) (NaN or Inf)")
        single = t.float()
        over = sum(int(torch.isinf(part).sum()) for part in single.reshape(-1).split(_FINITE_CHUNK))
        if over:
            raise CheckpointError(
                f"{source}: tensor {shown(name)} has {over} float64 value(s) beyond float32's range "
                f"(largest magnitude {float(flat.abs().max()):.3g}, float32 holds up to "
                f"{torch.finfo(torch.float32).max:.3g})")
        tensors[name] = single
    if converted:
        kinds = ", ".join(f"{n} {kind}" for kind, n in sorted(converted.items()))
        say(f"{source}: {kinds} tensor(s) converted to float32, the model's dtype")


class _only_project_errors:
    """Context manager: anything but a :class:`CheckpointError` raised while
    validating untrusted bytes (a bug, ``MemoryError``, ``RecursionError``)
    leaves as a one-line ``CheckpointError``; the traceback goes to the log."""

    def __init__(self, source: str) -> None:
        self.source = source

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> bool:
        if exc is None or isinstance(exc, CheckpointError) or not isinstance(exc, Exception):
            return False
        log.warning("%s: unexpected %s while validating a model", self.source, type(exc).__name__, exc_info=True)
        raise CheckpointError(
            f"{self.source}: model could not be validated ({type(exc).__name__}: {_one_line(exc)})"
        ) from None


def _load_bytes(data: Any, max_bytes: int, source: str, legacy: bool) -> LoadedModel:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CheckpointError(f"{source}: model payload must be bytes, got {type(data).__name__}")
    view = memoryview(data)
    view = (view if view.c_contiguous else memoryview(bytes(view))).cast("B")
    if view.nbytes > max_bytes:
        raise CheckpointError(f"{source}: model is {view.nbytes} bytes, over the size limit of {max_bytes} bytes")
    header_len = _header_length(view[:8], view.nbytes, source)
    raw = bytes(view[8 : 8 + header_len])
    return _load(raw, header_len, view.nbytes, _BytesTensors(view[8 + header_len :]), source, legacy)


class _BytesTensors:
    """The tensor bytes of a payload held in memory: each tensor's byte range is copied into it."""

    def __init__(self, payload: memoryview) -> None:
        self.payload = payload

    def fill(self, dst: memoryview, begin: int) -> None:
        dst[:] = self.payload[begin : begin + dst.nbytes]

    def finish(self) -> None:
        return None


class _FileTensors:
    """The tensor bytes of an open model file, read in file order (the byte ranges are checked to
    follow one another from the end of the header) into each tensor."""

    def __init__(self, fh: Any, source: str) -> None:
        self.fh = fh
        self.source = source

    def fill(self, dst: memoryview, begin: int) -> None:
        done = 0
        while done < dst.nbytes:
            got = self.fh.readinto(dst[done:])
            if not got:
                raise CheckpointError(f"{self.source}: truncated model file (it shrank while being read)")
            done += got

    def finish(self) -> None:
        if self.fh.read(1):
            raise CheckpointError(f"{self.source}: model file grew while being read, expected its size unchanged")


def _load(raw: bytes, header_len: int, total: int, payload: "_BytesTensors | _FileTensors", source: str,
          legacy: bool) -> LoadedModel:
    """Validate and load a model file of ``total`` bytes whose header is ``raw``; its
    tensors come from ``payload``, read only once the header and the card have passed."""
    header = _parse_header(raw, header_len, source)
    card, raw_card = _card_from_header(header, source, legacy=legacy)
    _check_spec_limits(card.spec, source)  # before any tensor is read or any module built
    tensors = _read_tensors(header, total - 8 - header_len, payload, source)
    if raw_card["version"] == LEGACY_VERSION:
        digest, covers = tensor_digest(tensors), "tensor"
    else:  # over the class names as the file holds them: one written before they were kept in NFC still loads
        digest, covers = model_digest({**card.to_dict(), "class_names": raw_card["class_names"]}, tensors), "model"
    if digest != card.sha256:
        raise CheckpointError(
            f"{source}: {covers} sha256 {digest[:16]}... does not match the card's {card.sha256[:16]}... "
            f"(corrupted or tampered payload)"
        )
    _check_tensors(tensors, source)
    _, skeleton = _check_structure(card.spec, tensors, source, pruned=card.pruned)
    model = _materialize(skeleton, card.spec, tensors, source)
    return LoadedModel(model, card)


@contextmanager
def _opened(path: str | os.PathLike[str], max_bytes: int, source: str,
            what: str = "model file") -> Iterator[tuple[Any, int]]:
    """``(binary file, its size)`` of ``path``: a regular file (links followed; checked before it is opened,
    :func:`swarmbase.tomlcheck.check_input_file`, its lines naming ``source``, the name as :func:`brief` gives
    it, as every message of this module) whose size limit is checked
    on the open file before anything is read; an ``OSError`` while it is open is one
    :class:`CheckpointError` line."""
    check_input_file(path, CheckpointError, "model file", name=source)  # a FIFO would block open()
    try:
        with open(path, "rb") as fh:
            yield fh, _checked_size(os.fstat(fh.fileno()).st_size, max_bytes, source)
    except OSError as exc:
        raise CheckpointError(f"{source}: cannot read the {what} ({exc.strerror or 'I/O error'})") from None


def _checked_size(size: int, max_bytes: int, source: str) -> int:
    """``size``, a model file's, unless it is over ``max_bytes``: then one :class:`CheckpointError` line."""
    if size > max_bytes:
        raise CheckpointError(f"{source}: model file is {size} bytes, over the size limit of {max_bytes} bytes")
    return size


def _header_length(prefix: bytes, total: int, source: str) -> int:
    if len(prefix) < 8 or total < 8:
        raise CheckpointError(f"{source}: truncated model file ({total} bytes, a safetensors file has at least 8)")
    (n,) = struct.unpack("<Q", prefix[:8])
    if n > MAX_HEADER_BYTES:
        raise CheckpointError(
            f"{source}: safetensors header length {n} is over the limit of {MAX_HEADER_BYTES} bytes "
            f"(not a model file or garbled)"
        )
    if 8 + n > total:
        raise CheckpointError(f"{source}: truncated model file (header needs {8 + n} bytes, file has {total})")
    return n


def _parse_header(raw: bytes, header_len: int, source: str, dtypes: Mapping[str, torch.dtype] | None = None
                  ) -> dict[str, Any]:
    """The checked header; tensor dtypes among ``dtypes`` (safetensors name -> torch dtype; by default
    :data:`_TORCH_DTYPES`, those of the format)."""
    dtypes = _TORCH_DTYPES if dtypes is None else dtypes
    if len(raw) != header_len:
        raise CheckpointError(f"{source}: truncated model file (header cut short)")
    try:
        # {name: {"dtype", "shape": [...], "data_offsets": [...]}, "__metadata__": {key: str}}: 3 levels.
        header = bounded_loads(raw, max_depth=3, max_items=12 * MAX_TENSORS + 64)
    except ValueError as exc:
        raise CheckpointError(f"{source}: safetensors header is not valid JSON ({_one_line(exc)})") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{source}: safetensors header must be a JSON object, got {type(header).__name__}")
    count = len(header) - ("__metadata__" in header)
    if count > MAX_TENSORS:
        raise CheckpointError(f"{source}: file lists {count} tensors, over the limit of {MAX_TENSORS}")
    for name, entry in header.items():  # a dtype torch has no name for (F4, F8_E8M0) said only 'not valid'
        dtype = entry.get("dtype") if isinstance(entry, dict) and name != "__metadata__" else None
        if isinstance(dtype, str) and dtype not in dtypes:
            raise CheckpointError(f"{source}: tensor {shown(name)} has dtype "
                                  f"{_SAFETENSORS_DTYPES.get(dtype, shown(dtype))}, "
                                  + ("expected float64, float32, float16, bfloat16 or int64"
                                     if dtypes is _IMPORT_DTYPES else _DTYPES_EXPECTED))
    return header


def _card_from_header(header: dict[str, Any], source: str, legacy: bool) -> tuple[ModelCard, dict[str, Any]]:
    """The validated card and its JSON object as read.
    ``legacy``: also accept a version-1 card (:func:`read_card`, :func:`upgrade_model_file`)."""
    meta = header.get("__metadata__")
    if not isinstance(meta, dict) or _METADATA_KEY not in meta:
        raise CheckpointError(
            f"{source}: not a FOL model file (no {_METADATA_KEY!r} card in the safetensors metadata)"
        )
    text = meta[_METADATA_KEY]
    if not isinstance(text, str):
        raise CheckpointError(f"{source}: model card must be a JSON string, got {type(text).__name__}")
    if len(text) > MAX_CARD_BYTES:
        raise CheckpointError(f"{source}: model card is {len(text)} characters, over the limit of {MAX_CARD_BYTES}")
    try:
        data = bounded_loads(text, max_depth=MAX_CARD_DEPTH, max_items=MAX_CARD_ITEMS)
    except ValueError as exc:
        raise CheckpointError(f"{source}: model card is not valid JSON ({_one_line(exc)})") from None
    try:
        card = ModelCard.from_dict(data)
    except ConfigError as exc:
        raise CheckpointError(f"{source}: {_one_line(exc)}") from None
    if data["version"] == LEGACY_VERSION and not legacy:
        raise CheckpointError(
            f"{source}: model card version 1 is not covered by the file's digest and is no longer loaded; "
            f"this toolkit reads version {FORMAT_VERSION} (convert a file you trust with "
            f"fol.checkpoint.upgrade_model_file)"
        )
    if not card.sha256:
        raise CheckpointError(f"{source}: model card has an empty 'sha256', expected 64 hex digits")
    return card, data


def _check_spec_limits(spec: ModelSpec, source: str) -> None:
    """The architecture arguments within :data:`SPEC_LIMITS` (no module is built)."""
    for name in ("num_classes", "in_channels", "input_size"):
        value, limit = getattr(spec, name), SPEC_LIMITS[name]
        if value > limit:
            raise CheckpointError(f"{source}: spec {name} is {shown(value)}, over the loader's limit of {limit}")
    for key, value in spec.options.items():
        if key not in SPEC_LIMITS["options"]:
            raise CheckpointError(f"{source}: spec option {key!r} has no loader limit; expected one of "
                                  f"{', '.join(sorted(SPEC_LIMITS['options']))}")
        maximum, entries = SPEC_LIMITS["options"][key]
        values = value if isinstance(value, list) else [value]
        if isinstance(value, list) and len(value) > entries:
            raise CheckpointError(
                f"{source}: spec option {key!r} has {len(value)} entries, over the loader's limit of {entries}"
            )
        # every option is an integer or a list of them: any other value (a string of lone surrogates, which
        # the digest cannot hash as UTF-8) is refused here, before the tensors are read and the digest taken
        if not all(_is_int(v) for v in values):
            raise CheckpointError(f"{source}: spec option {key!r} is {shown(value)}, expected an integer or a "
                                  f"list of integers")
        for v in values:
            if v > maximum:
                raise CheckpointError(f"{source}: spec option {key!r} is {shown(v)}, over the loader's limit of "
                                      f"{maximum}")


#: torch's dtype of each safetensors dtype name the format takes
_TORCH_DTYPES = {name: dtype for dtype, name in _DTYPE_NAMES.items()}
#: a plain state dict (:func:`read_state_dict`) may also hold float64, converted on import
_IMPORT_DTYPES = {**_TORCH_DTYPES, "F64": torch.float64}
#: the largest tensor dimension torch can hold (int64)
_MAX_DIM = 2**63 - 1
#: element counts reach this (usize overflow) and the safetensors library and torch refuse the shape
_COUNT_OVERFLOW = 2**64


def _tensor_layout(header: Mapping[str, Any], payload_len: int, source: str,
                   dtypes: Mapping[str, torch.dtype] | None = None) -> list[tuple[str, torch.dtype, list[int], int, int]]:
    """The tensors of a parsed header, in file order, as ``(name, dtype, shape, begin, end)``
    (byte range in the payload of ``payload_len`` bytes), checked as the safetensors library
    checks a payload before any of it is allocated: metadata values are strings; every entry
    has a dtype this format takes, a shape of non-negative integers and two offsets; in offset
    order the ranges follow one another from 0 with no gap or overlap up to the payload's end,
    and each holds exactly its shape's bytes; a shape whose element count passes 64 bits on
    the way is refused (even with a 0 after it), as the library refuses it. Ranges that are
    otherwise sound but end past the payload are a file cut short, and said so; a layout with a gap,
    an overlap or a range that does not hold its shape is damage no missing bytes explain (a cut
    keeps the header), refused as not valid whether it lies before the payload's end or past it."""

    def bad(why: str) -> CheckpointError:
        return CheckpointError(f"{source}: not a valid safetensors payload ({why})")

    dtypes = _TORCH_DTYPES if dtypes is None else dtypes
    meta = header.get("__metadata__", {})
    if not isinstance(meta, dict) or not all(isinstance(v, str) for v in meta.values()):
        raise bad("'__metadata__' must map names to strings")
    entries = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(entry, dict) or not {"dtype", "shape", "data_offsets"} <= entry.keys():
            raise bad(f"tensor {shown(name)} needs 'dtype', 'shape' and 'data_offsets'")
        dtype, shape, offsets = entry["dtype"], entry["shape"], entry["data_offsets"]
        if not isinstance(dtype, str):  # {} or [] was a TypeError, logged with a traceback as unexpected
            raise bad(f"tensor {shown(name)} has dtype {shown(dtype)}, expected a dtype name such as 'F32'")
        if dtype not in dtypes:  # a string outside them is refused by _parse_header, naming it
            raise bad(f"tensor {shown(name)} has dtype {shown(dtype)}")
        if not isinstance(shape, list) or not all(_is_int(d) and 0 <= d <= _MAX_DIM for d in shape):
            raise bad(f"tensor {shown(name)} has shape {shown(shape)}, expected non-negative integers")
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(_is_int(o) and 0 <= o < _COUNT_OVERFLOW for o in offsets)):
            raise bad(f"tensor {shown(name)} has data_offsets {shown(offsets)}, expected [begin, end], two byte "
                      f"offsets into the tensor data")
        count = 1
        for d in shape:  # stops at the overflow: multiplying out thousands of huge dimensions takes seconds
            count *= d
            if count >= _COUNT_OVERFLOW:
                raise bad(f"tensor {shown(name)} has shape {shown(shape)}, whose element count overflows 64 bits")
        torch_dtype = dtypes[dtype]
        entries.append((name, torch_dtype, shape, offsets[0], offsets[1], count * torch_dtype.itemsize))
    entries.sort(key=lambda e: (e[3], e[4]))
    at = 0
    for name, dtype, shape, begin, end, nbytes in entries:
        if begin != at or end < begin:
            raise bad(f"invalid offset for tensor {shown(name)}")
        if nbytes != end - begin:
            raise bad(f"tensor {shown(name)} holds {end - begin} bytes, its shape {shown(shape)} needs {nbytes}")
        at = end
    if at > payload_len:  # a consistent layout past the file's end: the file was cut short
        raise CheckpointError(f"{source}: truncated model file (cut short: its header describes {at} bytes of "
                              f"tensor data, the file holds {payload_len})")
    if at != payload_len:
        raise bad(f"the tensors cover {at} of the {payload_len} bytes of tensor data")
    return [entry[:5] for entry in entries]


def _read_tensors(header: Mapping[str, Any], payload_len: int, payload: "_BytesTensors | _FileTensors",
                  source: str, dtypes: Mapping[str, torch.dtype] | None = None) -> dict[str, torch.Tensor]:
    """The tensors of a checked layout (:func:`_tensor_layout`), each read straight into its
    own new storage: the whole payload is never held a second time, and no tensor is a view
    of the caller's bytes or of the file (which may change after loading)."""
    if sys.byteorder != "little":
        raise CheckpointError(f"{source}: model files (little-endian) are loaded on little-endian machines only")
    tensors: dict[str, torch.Tensor] = {}
    for name, dtype, shape, begin, _ in _tensor_layout(header, payload_len, source, dtypes):
        t = torch.empty(shape, dtype=dtype)
        if t.numel():
            payload.fill(memoryview(t.reshape(-1).view(torch.uint8).numpy()), begin)
        tensors[name] = t
    payload.finish()
    return dict(sorted(tensors.items()))  # name order (the digest sorts names itself; this is for readers)


def _check_tensors(tensors: Mapping[str, torch.Tensor], source: str) -> None:
    """Dtypes limited to float32/float16/bfloat16/int64, finite float values."""
    for name, t in tensors.items():
        if t.dtype not in _DTYPE_NAMES:
            raise CheckpointError(
                f"{source}: tensor {shown(name)} has dtype {str(t.dtype).removeprefix('torch.')}, {_DTYPES_EXPECTED}"
            )
        if t.dtype not in _FLOAT_DTYPES:
            continue
        # flat: torch reduces at most 64 dimensions, a file's tensor may have any number (refused for its shape);
        # in slices, since isfinite makes temporaries as large as its input
        flat = t.reshape(-1)
        if not all(bool(torch.isfinite(part).all()) for part in flat.split(_FINITE_CHUNK)):
            bad = sum(int((~torch.isfinite(part)).sum()) for part in flat.split(_FINITE_CHUNK))
            raise CheckpointError(f"{source}: tensor {shown(name)} has {bad} non-finite value(s) (NaN or Inf)")


#: Values checked for NaN / Inf at a time (a few MB of temporaries, whatever the tensor's size).
_FINITE_CHUNK = 1 << 20


class _OverBudget(Exception):
    """Raised from a registration hook to stop building a module tree."""


class _TensorBudget:
    """Count the parameters and buffers registered by modules built in this
    thread and stop the build, by raising :class:`_OverBudget`, once there are
    more than ``limit``. Counting goes through torch's global registration
    hooks, installed once at import (:func:`_count_registration`); installing
    and removing them per load could disturb another thread that is
    building modules at the same time."""

    _active = threading.local()

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.count = 0

    def __enter__(self) -> "_TensorBudget":
        self._active.budget = self
        return self

    def __exit__(self, *exc: Any) -> None:
        self._active.budget = None


def _count_registration(module: nn.Module, name: str, tensor: Any) -> None:
    budget = getattr(_TensorBudget._active, "budget", None)
    if budget is None or tensor is None:
        return
    budget.count += 1
    if budget.count > budget.limit:
        raise _OverBudget(budget.limit)


torch.nn.modules.module.register_module_parameter_registration_hook(_count_registration)
torch.nn.modules.module.register_module_buffer_registration_hook(_count_registration)


#: Extra registrations a builder may make beyond its final state dict
#: (torchvision models build a stem layer and then replace it).
_BUILD_SLACK = 16


def _meta_model(spec: ModelSpec, source: str, max_tensors: int | None = None) -> nn.Module:
    """The dense model of ``spec`` on the ``meta`` device (no memory, no init cost).

    With ``max_tensors`` (the number of tensors the file holds) the build stops
    as soon as the tree needs clearly more, so its cost is bounded by the file.
    """
    budget = _TensorBudget(max_tensors + _BUILD_SLACK) if max_tensors is not None else None
    try:
        with torch.device("meta"):
            if budget is None:
                return build_model(spec)
            with budget:
                return build_model(spec)
    except _OverBudget:
        raise CheckpointError(
            f"{source}: spec {spec.arch!r} with options {shown(spec.options)} needs more than "
            f"{budget.limit if budget else 0} tensors, the file holds {max_tensors} "
            f"(architecture arguments do not match the tensors)"
        ) from None
    except ConfigError as exc:  # build_model's refusal of an option's value, which it names, values shown cut
        raise CheckpointError(f"{source}: {_one_line(exc, 300)}") from None
    except Exception as exc:  # noqa: BLE001 - the spec is untrusted input (e.g. absurd option values)
        raise CheckpointError(f"{source}: cannot build {spec.arch!r} from the card ({_one_line(exc)})") from None


def _check_structure(
    spec: ModelSpec, tensors: Mapping[str, torch.Tensor], source: str, pruned: bool | None
) -> tuple[bool, nn.Module]:
    """Check that ``tensors`` fit ``spec`` (dense or pruned); return whether they
    are pruned and the matching module tree on the ``meta`` device. With
    ``pruned=None`` the flag is inferred (saving); with a bool it must agree with
    the shapes (loading)."""
    model = _meta_model(spec, source, max_tensors=len(tensors))
    dense = {name: t.detach() for name, t in model.state_dict().items()}
    missing = sorted(set(dense) - set(tensors))
    unexpected = sorted(set(tensors) - set(dense))
    if missing:
        raise CheckpointError(
            f"{source}: tensor {missing[0]!r} expected by {spec.arch!r} is missing ({len(missing)} missing in all)"
        )
    if unexpected:
        raise CheckpointError(
            f"{source}: unexpected tensor {shown(unexpected[0])} for {spec.arch!r} ({len(unexpected)} unexpected in all)"
        )
    shapes = {name: tuple(t.shape) for name, t in tensors.items()}
    differing = [n for n in dense if tuple(dense[n].shape) != shapes[n]]  # network order
    for name in sorted(dense):
        want, got = dense[name], tensors[name]
        if want.is_floating_point() != got.is_floating_point():
            raise CheckpointError(
                f"{source}: tensor {name!r} has dtype {str(got.dtype).removeprefix('torch.')}, "
                f"expected {str(want.dtype).removeprefix('torch.')}"
            )
    for module_name, module in model.named_modules():
        if isinstance(module, nn.modules.batchnorm._NormBase) and module.running_var is not None:
            name = f"{module_name}.running_var" if module_name else "running_var"
            negative = int((tensors[name] < 0).sum())
            if negative:  # finite, yet every output of the layer would be NaN
                raise CheckpointError(
                    f"{source}: tensor {name!r} has {negative} negative value(s), expected running variances >= 0"
                )
    if pruned is None:
        pruned = bool(differing)
    if not pruned:
        if differing:
            name = differing[0]
            raise CheckpointError(
                f"{source}: tensor {name!r} has shape {shown(list(shapes[name]))}, spec {spec.arch!r} expects "
                f"{list(dense[name].shape)} (and the card does not say pruned)"
            )
        return False, model
    if not differing:
        raise CheckpointError(f"{source}: card says pruned but every tensor shape equals the dense {spec.arch!r}")
    for name in differing:
        want = tuple(dense[name].shape)
        got = shapes[name]
        if len(got) != len(want) or any(g < 1 or g > w for g, w in zip(got, want)):
            raise CheckpointError(
                f"{source}: pruned tensor {name!r} has shape {shown(list(got))}, expected the same rank as the dense "
                f"{list(want)} with every dimension between 1 and the dense size"
            )
    try:
        resize_to_state(model, shapes)
    except (ValueError, TypeError, RuntimeError) as exc:
        raise CheckpointError(f"{source}: cannot rebuild the pruned {spec.arch!r} ({_one_line(exc)})") from None
    rebuilt = model.state_dict()
    for name in sorted(dense):
        if tuple(rebuilt[name].shape) != shapes[name]:
            raise CheckpointError(
                f"{source}: pruned tensor {name!r} has shape {shown(list(shapes[name]))}, but the rebuilt layer "
                f"expects {list(rebuilt[name].shape)}"
            )
    c, h, w = spec.in_channels, spec.input_size, spec.input_size
    try:
        with torch.no_grad():
            out = model.eval()(torch.empty(1, c, h, w, device="meta"))
    except (RuntimeError, ValueError, TypeError, IndexError) as exc:
        raise CheckpointError(
            f"{source}: pruned tensor shapes do not form a working {spec.arch!r} ({_one_line(exc)})"
        ) from None
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (1, spec.num_classes):
        raise CheckpointError(
            f"{source}: pruned {spec.arch!r} outputs shape {list(getattr(out, 'shape', []))}, "
            f"expected [1, {spec.num_classes}]"
        )
    return True, model


def _materialize(model: nn.Module, spec: ModelSpec, tensors: dict[str, torch.Tensor], source: str) -> nn.Module:
    """Assign the loaded tensors to the checked ``meta`` module tree ``model`` (``tensors`` is emptied)."""
    # float16 / bfloat16 are cast one tensor at a time, each half-precision copy dropped as it goes
    state = {name: (t.float() if t.is_floating_point() else t) for name, t in _drained(tensors)}
    try:
        model.load_state_dict(state, strict=True, assign=True)
    except RuntimeError as exc:  # checked above; kept so that a surprise is still one line
        raise CheckpointError(f"{source}: tensors do not fit {spec.arch!r} ({_one_line(exc)})") from None
    left = [n for n, t in [*model.named_parameters(), *model.named_buffers()] if t.is_meta]
    if left:
        raise CheckpointError(f"{source}: model tensor {left[0]!r} was not provided by the file")
    return model.eval()


def _drained(tensors: dict[str, torch.Tensor]) -> Any:
    """The items of ``tensors``, each removed from it as it is given."""
    while tensors:
        name = next(iter(tensors))
        yield name, tensors.pop(name)


# --------------------------------------------------------------------------- helpers


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_utf8(text: str) -> bool:
    """Whether ``text`` can be written as UTF-8 (no lone surrogates, which JSON
    escapes and non-UTF-8 file names produce); the digest hashes the card as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _one_line(exc: BaseException, limit: int = 200) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
