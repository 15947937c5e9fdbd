"""The safe model format: exact round trips (dense and torch-pruning-pruned, all
six architectures), every kind of bad payload rejected with a one-line
CheckpointError naming its source, a fuzzed loader that never raises anything
else, and atomic saves."""

from __future__ import annotations

import functools
import json
import os
import pickle
import struct
from pathlib import Path
from typing import Any, Callable

import pytest
import torch
import torch_pruning as tp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save
from torch import nn

from fol.checkpoint import (
    DEFAULT_MAX_BYTES,
    LoadedModel,
    ModelCard,
    load_model,
    load_model_bytes,
    model_to_bytes,
    model_digest,
    read_card,
    read_state_dict,
    save_model,
    tensor_digest,
)
from fol.errors import CheckpointError, ConfigError
from fol.models import ModelSpec, arch_options, architectures, build_model, count_parameters

SPEC = ModelSpec("cnn-small", num_classes=3, in_channels=3, input_size=16)
CLASSES = ["fire", "smoke", "clear"]


def _randomize_bn(model: nn.Module, seed: int = 0) -> nn.Module:
    """Give every BatchNorm non-trivial affine parameters and running statistics,
    so that a round trip that dropped a buffer would change the outputs."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                n = m.num_features
                m.weight.copy_(1 + 0.2 * torch.randn(n, generator=g))
                m.bias.copy_(0.1 * torch.randn(n, generator=g))
                m.running_mean.copy_(0.1 * torch.randn(n, generator=g))
                m.running_var.copy_(0.5 + torch.rand(n, generator=g))
                m.num_batches_tracked.fill_(17)
    return model.eval()


def _model(spec: ModelSpec = SPEC, seed: int = 0) -> nn.Module:
    return _randomize_bn(build_model(spec, seed=seed), seed)


def _inputs(spec: ModelSpec, n: int = 2) -> torch.Tensor:
    g = torch.Generator().manual_seed(42)
    return torch.randn(n, spec.in_channels, spec.input_size, spec.input_size, generator=g)


def _outputs(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model.eval()(x)


def _assert_rejected(call: Callable[[], Any], source: str, fragment: str) -> CheckpointError:
    with pytest.raises(CheckpointError) as info:
        call()
    msg = str(info.value)
    assert msg.startswith(f"{source}:"), msg
    assert "\n" not in msg and len(msg) < 400, msg
    assert fragment.lower() in msg.lower(), msg
    return info.value


def _header_len(data: bytes) -> int:
    return struct.unpack("<Q", data[:8])[0]


def _rebuild(
    data: bytes,
    card: Callable[[dict], Any] | None = None,
    tensors: Callable[[dict], Any] | None = None,
    fix_sha: bool = True,
) -> bytes:
    """Re-encode a valid payload after editing its card dict and / or tensors,
    refreshing the card's sha256 (over the edited card and tensors) unless
    ``fix_sha`` is False or the edit set the sha256 itself (so that each test
    hits exactly the check it is about)."""
    header = json.loads(data[8 : 8 + _header_len(data)])
    card_dict = json.loads(header["__metadata__"]["fol"])
    named = dict(st_load(data))
    if tensors is not None:
        tensors(named)
    original_sha = card_dict["sha256"]
    if card is not None:
        card(card_dict)
    if fix_sha and card_dict.get("sha256", None) == original_sha:
        try:  # the digest covers the card as the loader normalizes it
            card_dict["sha256"] = model_digest(ModelCard.from_dict(card_dict), named)
        except ConfigError:  # an invalid card: rejected before its digest is checked
            pass
    return st_save(named, metadata={"fol": json.dumps(card_dict)})


@functools.lru_cache(maxsize=None)
def _valid_payload() -> bytes:
    return model_to_bytes(_model(), ModelCard(SPEC, CLASSES, producer="sat-1", round=2))


@pytest.fixture
def saved(tmp_path: Path) -> tuple[Path, nn.Module, ModelCard]:
    model = _model()
    path = tmp_path / "sat-1.safetensors"
    card = save_model(path, model, spec=SPEC, class_names=CLASSES, producer="sat-1", round=2, extra={"val_acc": 0.75})
    return path, model, card


def _write(tmp_path: Path, data: bytes, name: str = "bad.safetensors") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


# ---------------------------------------------------------------- round trips


def test_dense_round_trip_is_exact_with_all_card_fields(saved: tuple[Path, nn.Module, ModelCard]) -> None:
    path, model, card = saved
    loaded = load_model(path)
    assert isinstance(loaded, LoadedModel)
    x = _inputs(SPEC, 4)
    assert torch.equal(_outputs(loaded.model, x), _outputs(model, x))
    assert not loaded.model.training
    assert all(p.requires_grad and p.dtype == torch.float32 for p in loaded.model.parameters())
    sd, ld = model.state_dict(), loaded.model.state_dict()
    assert sd.keys() == ld.keys() and all(torch.equal(sd[k], ld[k]) for k in sd)
    assert loaded.card == card
    assert card.spec == SPEC and card.class_names == tuple(CLASSES) and card.input_shape == (3, 16, 16)
    assert (card.producer, card.round, card.pruned, card.extra) == ("sat-1", 2, False, {"val_acc": 0.75})
    assert card.sha256 == model_digest(card, model.state_dict())
    # The card travels inside the safetensors header, as JSON under "fol".
    data = path.read_bytes()
    meta = json.loads(data[8 : 8 + _header_len(data)])["__metadata__"]
    assert json.loads(meta["fol"])["format"] == "fol-model" and json.loads(meta["fol"])["version"] == 2


def test_read_card_reads_only_the_header(saved: tuple[Path, nn.Module, ModelCard]) -> None:
    path, _, card = saved
    assert read_card(path) == card
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # corrupt a tensor byte: the header is untouched
    path.write_bytes(bytes(data))
    assert read_card(path) == card
    _assert_rejected(lambda: load_model(path), str(path), "sha256")


def test_read_card_refuses_a_file_cut_short_or_grown(saved: tuple[Path, nn.Module, ModelCard]) -> None:
    """read_card took a model file cut short (or with bytes added) after its header for a model: the
    header alone was read. The tensors' byte ranges are now checked against the file's size (no tensor is
    read), so a truncated pretrained checkpoint is refused by the cheap check before any slow work."""
    path, _, card = saved
    data = path.read_bytes()
    for damaged, fragment in ((data[:-100], "truncated model file (cut short"), (data + b"\0" * 4, "cover")):
        path.write_bytes(damaged)
        _assert_rejected(lambda: read_card(path), str(path), fragment)
    path.write_bytes(data)
    assert read_card(path) == card


def test_model_to_bytes_errors_name_the_given_source() -> None:
    """A model that would not load back is refused naming ``source`` (fol personalize names
    the file the bytes are to become), or ``<bytes>`` by default."""
    model = _model()
    with torch.no_grad():
        next(model.parameters()).view(-1)[0] = float("nan")
    card = ModelCard(SPEC, CLASSES)
    for kwargs, label in (({}, "<bytes>"), ({"source": "out/model.safetensors"}, "out/model.safetensors")):
        with pytest.raises(CheckpointError, match="non-finite") as info:
            model_to_bytes(model, card, **kwargs)
        assert str(info.value).startswith(label)


def test_bytes_round_trip_and_sidecar_is_not_needed(tmp_path: Path) -> None:
    model = _model(seed=3)
    card = ModelCard(SPEC, CLASSES, producer="uav-2")
    data = model_to_bytes(model, card)
    loaded = load_model_bytes(data, source="peer uav-2")
    x = _inputs(SPEC)
    assert torch.equal(_outputs(loaded.model, x), _outputs(model, x))
    assert loaded.card.sha256 == model_digest(loaded.card, model.state_dict()) and loaded.card.producer == "uav-2"

    path = tmp_path / "uav-2.safetensors"
    written = save_model(path, model, card, sidecar=True)
    sidecar = tmp_path / "uav-2.json"
    assert json.loads(sidecar.read_text()) == written.to_dict()
    assert path.read_bytes() == data  # serialization is deterministic
    sidecar.write_text("garbage, never read")
    assert load_model(path).card == written
    sidecar.unlink()
    assert load_model(path).card == written


def test_half_precision_payload_loads_as_float32(tmp_path: Path) -> None:
    model = _model().half()
    path = tmp_path / "half.safetensors"
    save_model(path, model, spec=SPEC, class_names=CLASSES)
    loaded = load_model(path).model
    for (name, t), (_, u) in zip(model.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert u.dtype == (torch.float32 if t.is_floating_point() else t.dtype), name
        assert torch.equal(u, t.float() if t.is_floating_point() else t), name


def test_loading_never_unpickles(monkeypatch: pytest.MonkeyPatch, saved: tuple[Path, nn.Module, ModelCard]) -> None:
    def forbidden(*_a: Any, **_k: Any) -> Any:
        raise AssertionError("unpickling attempted")

    monkeypatch.setattr(torch, "load", forbidden)
    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(pickle, "loads", forbidden)
    assert load_model(saved[0]).card == saved[2]


class _Planted:
    """Unpickling this object calls ``os.mkdir(path)``: what any hostile pickle can do with any call."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return os.mkdir, (str(self.path),)


@pytest.mark.parametrize("kind", ["pickle", "torch.save"])
def test_a_pickled_model_file_is_refused_without_being_unpickled(kind: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The test above loads a valid file, which no loader would unpickle; what must never be
    unpickled is a pickle (a legacy ``torch.save`` file, or a peer's payload): every entry point
    refuses it, and the object planted in it never runs (the folder it would create is absent)."""
    from fol.checkpoint import upgrade_model_file

    marker = tmp_path / "unpickled"
    payload = {"features.0.weight": torch.zeros(1), "planted": _Planted(marker)}
    path = tmp_path / "model.pt"
    if kind == "pickle":
        path.write_bytes(pickle.dumps(payload))
    else:
        torch.save(payload, path)
    data = path.read_bytes()
    calls: list[str] = []
    for module, name in ((torch, "load"), (pickle, "load"), (pickle, "loads")):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _n=name, _r=real, **k: (calls.append(_n), _r(*a, **k))[1])
    for load in (lambda: load_model(path), lambda: read_card(path), lambda: load_model_bytes(data, source="peer"),
                 lambda: upgrade_model_file(path, tmp_path / "upgraded.safetensors")):
        with pytest.raises(CheckpointError):
            load()
    assert calls == [] and not marker.exists()
    assert not (tmp_path / "upgraded.safetensors").exists()
    monkeypatch.undo()
    # the check can fail: unpickling the file does run the planted call
    if kind == "pickle":
        pickle.loads(data)
    else:
        torch.load(path, weights_only=False)
    assert marker.is_dir()


def test_tensor_digest_is_canonical() -> None:
    a = {"w": torch.arange(6.0).reshape(2, 3), "n": torch.tensor(3)}
    base = tensor_digest(a)
    assert tensor_digest(dict(reversed(list(a.items())))) == base  # insertion order does not matter
    assert tensor_digest({"w": a["w"].t().contiguous().t(), "n": a["n"]}) == base  # nor memory layout
    assert tensor_digest({"w": a["w"].reshape(3, 2), "n": a["n"]}) != base  # shape counts
    assert tensor_digest({"v": a["w"], "n": a["n"]}) != base  # names count
    assert tensor_digest({"w": a["w"], "n": torch.tensor(3.0, dtype=torch.float64)}) != base  # dtype counts
    b = {"w": a["w"].clone(), "n": a["n"]}
    b["w"][1, 2] = 5.5
    assert tensor_digest(b) != base


#: a value other than its default for every option of the zoo (fol.models.arch_options)
ZOO_OPTIONS = {"widths": [3, 5], "hidden": 6, "blocks": 2}


@pytest.mark.parametrize("arch", architectures())
def test_every_arch_with_every_option_it_takes_loads_back_as_a_peer_sends_it(arch: str, tmp_path: Path) -> None:
    """Every option the zoo accepts, as save_model writes it, passes the loader's checks of a peer's card
    (step 4: within SPEC_LIMITS, an integer or a list of integers) and loads back exactly through
    load_model_bytes, load_model and read_card. An option added to the zoo needs a value here, and the
    loader a rule for its kind (a float or a string is refused today)."""
    assert set(arch_options(arch)) <= set(ZOO_OPTIONS), f"{arch} takes an option this test has no value for"
    options = {name: ZOO_OPTIONS[name] for name in arch_options(arch)}
    spec = ModelSpec(arch, 3, in_channels=2, input_size=32 if arch in ("resnet18", "mobilenet_v3_small") else 8,
                     options=options)
    model = _model(spec)
    path = tmp_path / "peer.safetensors"
    card = save_model(path, model, spec=spec, class_names=CLASSES, producer="peer", round=1)
    x = _inputs(spec)
    for loaded in (load_model_bytes(path.read_bytes(), source="peer"), load_model(path)):
        assert loaded.card == card == read_card(path) and loaded.card.spec.options == options
        assert torch.equal(_outputs(loaded.model, x), _outputs(model, x))


# ---------------------------------------------------- torch-pruning round trip

PRUNE_CASES = [
    ModelSpec("cnn-small", 4, 3, 32),
    ModelSpec("cnn-medium", 4, 1, 28),
    ModelSpec("cnn-large", 4, 3, 32),
    ModelSpec("resnet-small", 4, 3, 32),
    ModelSpec("mobilenet_v3_small", 4, 3, 32),
    ModelSpec("resnet18", 4, 3, 32),
]


@pytest.mark.parametrize("spec", PRUNE_CASES, ids=[s.arch for s in PRUNE_CASES])
def test_torch_pruning_model_round_trips_exactly(spec: ModelSpec, tmp_path: Path) -> None:
    model = _model(spec, seed=1)
    dense_params = count_parameters(model)
    x = _inputs(spec)
    classifier = [m for m in model.modules() if isinstance(m, nn.Linear)][-1]
    pruner = tp.pruner.BasePruner(
        model, x, importance=tp.importance.MagnitudeImportance(p=2), pruning_ratio=0.4, ignored_layers=[classifier]
    )
    pruner.step()
    assert count_parameters(model) < 0.8 * dense_params
    expected = _outputs(model, x)

    path = tmp_path / f"{spec.arch}.safetensors"
    card = save_model(path, model, spec=spec, class_names=[f"c{i}" for i in range(4)])
    assert card.pruned
    loaded = load_model(path)
    assert loaded.card == card and loaded.card.pruned
    assert count_parameters(loaded.model) == count_parameters(model)
    assert torch.equal(_outputs(loaded.model, x), expected)
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    assert {k: tuple(v.shape) for k, v in loaded.model.state_dict().items()} == shapes

    # The same tensors under a card that does not admit pruning are rejected.
    tampered = _rebuild(path.read_bytes(), card=lambda c: c.update(pruned=False))
    err = _assert_rejected(lambda: load_model_bytes(tampered, source="peer"), "peer", "shape")
    assert "does not say pruned" in str(err)


# --------------------------------------------------------------- bad payloads


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        (lambda c: c["spec"].update(arch="vgg99"), "vgg99"),
        (lambda c: c["spec"].update(arch=["cnn"]), "unknown"),
        (lambda c: c["spec"].update(options={"depth": 3}), "depth"),
        (lambda c: c["spec"].update(options={"widths": [-4, 32]}), "widths"),
        (lambda c: c["spec"].update(options={"hidden": 10**30}), "over the loader's limit of 65536"),
        (lambda c: c.update(format="onnx"), "format"),
        (lambda c: c.update(version=3), "version"),
        (lambda c: c.update(version=True), "version"),
        (lambda c: c.update(class_names=["a", "b"]), "class_names"),
        (lambda c: c.update(class_names=["a", "a", "b"]), "duplicate"),
        (lambda c: c.update(class_names="abc"), "class_names"),
        (lambda c: c.update(input_shape=[3, 32, 32]), "input_shape"),
        (lambda c: c.update(input_shape=[[3], 16, 16]), "input_shape"),
        (lambda c: c.update(round=-1), "round"),
        # a huge integer is shown by its first digits and its length, as in every other message
        (lambda c: c.update(round=-(10**400)), "got -1000000000000000000... (401 digits)"),
        (lambda c: c.update(pruned="yes"), "pruned"),
        (lambda c: c.update(producer=7), "producer"),
        (lambda c: c.update(extra=[1]), "extra"),
        (lambda c: c.update(sha256="xyz"), "sha256"),
        (lambda c: c.update(sha256=""), "sha256"),
        (lambda c: c.pop("sha256"), "sha256"),
        (lambda c: c.pop("spec"), "spec"),
        (lambda c: c.update(colour="red"), "colour"),
        (lambda c: c.update(sha256="0" * 64), "does not match"),
        (lambda c: c.update(pruned=True), "card says pruned"),
    ],
)
def test_bad_card_fields_are_rejected(edit: Callable[[dict], Any], fragment: str, tmp_path: Path) -> None:
    path = _write(tmp_path, _rebuild(_valid_payload(), card=edit))
    _assert_rejected(lambda: load_model(path), str(path), fragment)


def test_duplicate_json_keys_are_refused_in_the_card_and_the_header() -> None:
    """A key given twice is ambiguous (Python keeps the last, other readers the
    first or refuse): a card with two producers is refused, even signed over
    the one Python keeps, and so is a header that lists a tensor twice."""
    data = _valid_payload()
    header_text = data[8 : 8 + _header_len(data)].decode().rstrip()
    header = json.loads(header_text)
    card = json.loads(header["__metadata__"]["fol"])
    card["producer"] = "sat-9"
    named = dict(st_load(data))
    card["sha256"] = model_digest(ModelCard.from_dict(card), named)
    text = json.dumps(card).replace('"producer": "sat-9"', '"producer": "sat-1", "producer": "sat-9"')
    assert text.count('"producer"') == 2
    _assert_rejected(lambda: load_model_bytes(st_save(named, metadata={"fol": text}), source="peer"), "peer",
                     "duplicate key 'producer'")
    name = next(k for k in header if k != "__metadata__")
    twice = header_text[:-1] + "," + json.dumps(name) + ":" + json.dumps(header[name]) + "}"
    raw = twice.encode()
    payload = struct.pack("<Q", len(raw)) + raw + data[8 + _header_len(data):]
    _assert_rejected(lambda: load_model_bytes(payload, source="peer"), "peer", f"duplicate key {name!r}")


@pytest.mark.parametrize(
    ("field", "value"),
    [("class_names", ["fire", "smoke", "caf\udce9"]), ("producer", "sat-\ud800"), ("extra", {"note": "\udce9"})],
)
def test_text_that_is_not_utf8_is_refused_naming_the_field(field: str, value: Any, tmp_path: Path) -> None:
    """A lone surrogate (what Python makes of a non-UTF-8 folder name) cannot be
    written as UTF-8 JSON: the card refuses it by field, at save and at load."""
    with pytest.raises(ConfigError, match=field):
        ModelCard(SPEC, **{"class_names": CLASSES, field: value})
    path = tmp_path / "m.safetensors"
    fields = {"class_names": CLASSES, field: value}
    _assert_rejected(lambda: save_model(path, _model(), spec=SPEC, **fields), str(path), field)
    assert not path.exists()
    # a peer's card: JSON escapes can spell a lone surrogate
    escaped = json.dumps(value)
    data = _rebuild(_valid_payload(), card=lambda c: c.update({field: json.loads(escaped)}), fix_sha=False)
    _assert_rejected(lambda: load_model_bytes(data, source="peer"), "peer", field)


@pytest.mark.parametrize(
    ("metadata", "fragment"),
    [
        (None, "not a FOL model file"),
        ({"format": "pt"}, "not a FOL model file"),
        ({"fol": "{oops"}, "not valid JSON"),
        ({"fol": "[1, 2]"}, "JSON object"),
        ({"fol": '{"format": "fol-model", "version": 1, "extra": {"x": NaN}}'}, "not valid JSON"),
        ({"fol": "[" * 100_000}, "not valid JSON"),
    ],
)
def test_foreign_or_broken_card_metadata_is_rejected(metadata: dict | None, fragment: str, tmp_path: Path) -> None:
    path = _write(tmp_path, st_save(dict(st_load(_valid_payload())), metadata=metadata))
    _assert_rejected(lambda: load_model(path), str(path), fragment)
    _assert_rejected(lambda: read_card(path), str(path), fragment)


def _nan(t: dict) -> None:
    t["features.0.weight"][0, 0, 0, 0] = float("nan")


def _inf(t: dict) -> None:
    t["classifier.1.bias"][3] = float("-inf")


def _drop(t: dict) -> None:
    del t["classifier.3.bias"]


def _add(t: dict) -> None:
    t["backdoor.weight"] = torch.zeros(2)


def _widen(t: dict) -> None:  # shapes of a wider net under the cnn-small card
    t["classifier.3.weight"] = torch.zeros(4, 64)
    t["classifier.3.bias"] = torch.zeros(4)


def _to_double(t: dict) -> None:
    t["features.0.weight"] = t["features.0.weight"].double()


def _to_int32(t: dict) -> None:
    t["features.1.num_batches_tracked"] = t["features.1.num_batches_tracked"].int()


def _counter_as_float(t: dict) -> None:
    t["features.1.num_batches_tracked"] = t["features.1.num_batches_tracked"].float()


def _weight_as_int(t: dict) -> None:
    t["classifier.3.bias"] = torch.zeros(3, dtype=torch.int64)


def _negative_variance(t: dict) -> None:  # finite, but no input normalizes to a number: sqrt(-1 + eps)
    t["features.5.running_var"][2] = -1.0


@pytest.mark.parametrize(
    ("edit", "fragment"),
    [
        (_nan, "non-finite"),
        (_inf, "non-finite"),
        (_drop, "'classifier.3.bias' expected by 'cnn-small' is missing"),
        (_add, "unexpected tensor 'backdoor.weight'"),
        (_widen, "'classifier.3.weight' has shape [4, 64], spec 'cnn-small' expects [3, 64]"),
        (_to_double, "float64"),
        (_to_int32, "int32"),
        (_counter_as_float, "expected int64"),
        (_weight_as_int, "expected float32"),
        (_negative_variance, "'features.5.running_var' has 1 negative value(s)"),
    ],
)
def test_bad_tensors_are_rejected_even_with_a_matching_sha256(
    edit: Callable[[dict], Any], fragment: str, tmp_path: Path
) -> None:
    path = _write(tmp_path, _rebuild(_valid_payload(), tensors=edit))
    _assert_rejected(lambda: load_model(path), str(path), fragment)


_LONG = "w" * 100_000  # a tensor name: the header allows names of any length


def _long_extra(dtype: torch.dtype = torch.float32, value: float = 0.0) -> Callable[[dict], None]:
    def edit(t: dict) -> None:
        t[_LONG] = torch.full((2,), value, dtype=dtype)

    return edit


def _many_dims(ones: int, name: str = "classifier.3.bias") -> Callable[[dict], None]:
    """The right values of tensor ``name``, in a tensor of ``ones`` more dimensions of size 1."""

    def edit(t: dict) -> None:
        t[name] = t[name].reshape(list(t[name].shape) + [1] * ones)

    return edit


@pytest.mark.parametrize("name", ["classifier.3.bias", "features.1.running_var"])
def test_a_tensor_of_more_than_64_dimensions_is_a_shape_mismatch(name: str, tmp_path: Path) -> None:
    """Torch reduces tensors of at most 64 dimensions: the finite-values check of such a
    tensor (safetensors reads any rank) failed inside torch, which reached the user as
    'model could not be validated (RuntimeError ...)' and a logged traceback; it is
    checked like any tensor and refused for its shape."""
    path = _write(tmp_path, _rebuild(_valid_payload(), tensors=_many_dims(65, name)))
    err = _assert_rejected(lambda: load_model(path), str(path), f"{name!r} has shape [")
    assert "could not be validated" not in str(err)


@pytest.mark.parametrize(
    ("edit", "pruned", "fragment"),
    [
        (_long_extra(), False, "unexpected tensor 'wwwww"),
        (_long_extra(torch.float64), False, "has dtype float64"),
        (_long_extra(value=float("nan")), False, "non-finite"),
        (_many_dims(3000), False, "'classifier.3.bias' has shape [3, 1, 1,"),
        (_many_dims(3000), True, "pruned tensor 'classifier.3.bias' has shape [3, 1, 1,"),
    ],
)
def test_a_huge_tensor_name_or_shape_is_shown_bounded(edit: Callable[[dict], Any], pruned: bool, fragment: str,
                                                      tmp_path: Path) -> None:
    """Tensor names and shapes come from the file: a 100,000-character name or a
    3,001-dimension shape is shown cut, not copied whole into the one-line error
    (which the agent logs, remembers and records, and personalize writes to its report)."""
    data = _rebuild(_valid_payload(), tensors=edit, card=(lambda c: c.update(pruned=True)) if pruned else None)
    path = _write(tmp_path, data)
    _assert_rejected(lambda: load_model(path), str(path), fragment)


def test_spec_tensor_mismatch_names_the_tensor_and_both_shapes(tmp_path: Path) -> None:
    """A card whose spec differs from the network the tensors came from."""
    path = _write(tmp_path, _rebuild(_valid_payload(), card=lambda c: c["spec"].update(options={"widths": [16, 40]})))
    err = _assert_rejected(lambda: load_model(path), str(path), "shape")
    assert "'features.4.weight' has shape [32, 16, 3, 3]" in str(err) and "[40, 16, 3, 3]" in str(err)


def _pruned_tensors(bn_channels: int) -> Callable[[dict], None]:
    """Prune block 1 of cnn-small to 12 conv channels, its BN to ``bn_channels``."""

    def edit(t: dict) -> None:
        t["features.0.weight"] = t["features.0.weight"][:12].clone()
        t["features.4.weight"] = t["features.4.weight"][:, :12].clone()
        for k in ("weight", "bias", "running_mean", "running_var"):
            t[f"features.1.{k}"] = t[f"features.1.{k}"][:bn_channels].clone()

    return edit


def test_pruned_shapes_must_form_a_working_network(tmp_path: Path) -> None:
    ok = _rebuild(_valid_payload(), tensors=_pruned_tensors(12), card=lambda c: c.update(pruned=True))
    assert count_parameters(load_model_bytes(ok).model) < count_parameters(_model())
    bad = _rebuild(_valid_payload(), tensors=_pruned_tensors(10), card=lambda c: c.update(pruned=True))
    path = _write(tmp_path, bad)
    _assert_rejected(lambda: load_model(path), str(path), "do not form a working 'cnn-small'")

    def grow(t: dict) -> None:  # "pruned" but larger than the dense layer
        t["classifier.1.weight"] = torch.zeros(80, 32)
        t["classifier.1.bias"] = torch.zeros(80)
        t["classifier.3.weight"] = torch.zeros(3, 80)

    path = _write(tmp_path, _rebuild(_valid_payload(), tensors=grow, card=lambda c: c.update(pruned=True)))
    _assert_rejected(lambda: load_model(path), str(path), "between 1 and the dense size")


def test_tampered_tensor_bytes_fail_the_sha256_check(tmp_path: Path) -> None:
    data = bytearray(_valid_payload())
    start = 8 + _header_len(data)
    data[start + (len(data) - start) // 2] ^= 0x01  # one bit of one weight
    path = _write(tmp_path, bytes(data))
    _assert_rejected(lambda: load_model(path), str(path), "sha256")


@pytest.mark.parametrize("where", ["0", "1", "7", "8", "9", "mid-header", "header-end", "mid-data", "last"])
def test_truncated_files_are_rejected(where: str, tmp_path: Path) -> None:
    data = _valid_payload()
    n = _header_len(data)
    cut = {"mid-header": 8 + n // 2, "header-end": 8 + n, "mid-data": (8 + n + len(data)) // 2,
           "last": len(data) - 1}.get(where) or int(where)
    path = _write(tmp_path, data[:cut])
    _assert_rejected(lambda: load_model(path), str(path), "")


def test_a_file_cut_short_says_so_on_every_path_that_reads_it(tmp_path: Path) -> None:
    """A model file cut short in its tensor data was refused as "not a valid safetensors payload (tensor
    ... has data_offsets [...], expected [begin, end] within the N bytes of tensor data)", which does not
    say the file is truncated. Every reader (load_model, load_model_bytes, read_card, read_state_dict) now
    says it is cut short, with the bytes its header describes and the bytes the file holds."""
    data = _valid_payload()
    plain = st_save({"w": torch.ones(3, 5), "b": torch.zeros(7)})  # read_state_dict refuses a model file
    for payload, readers in ((data, ("load_model", "read_card", "load_model_bytes")), (plain, ("read_state_dict",))):
        described = len(payload) - 8 - _header_len(payload)
        for cut in (1, 17, described - 1):
            short = payload[:-cut]
            path = _write(tmp_path, short)
            fragment = (f"truncated model file (cut short: its header describes {described} bytes of tensor data, "
                        f"the file holds {described - cut})")
            calls = {"load_model": (lambda: load_model(path), str(path)),
                     "read_card": (lambda: read_card(path), str(path)),
                     "read_state_dict": (lambda: read_state_dict(path), str(path)),
                     "load_model_bytes": (lambda: load_model_bytes(short, source="peer"), "peer")}
            for reader in readers:
                _assert_rejected(*calls[reader], fragment)


def test_every_message_names_the_file_through_brief(tmp_path: Path) -> None:
    """The loader's messages named the file through brief() in three places (unreadable, over the size
    limit) and as it is in every other one: a name holding a terminal escape was written raw into the
    line, and a long one whole. Every message now names it as brief() does (escaped, cut)."""
    from swarmbase.tomlcheck import brief

    name = "m\x1b[2J" + "x" * 200 + ".safetensors"  # 217 bytes: a file name, a path of over 200 characters
    data = _valid_payload()
    files = {"cut": data[:-10], "garbage header": struct.pack("<Q", 4) + b"abcd",
             "plain": st_save({"w": torch.ones(2)}), "pickle": pickle.dumps({"w": 1}, protocol=4)}
    paths = {kind: tmp_path / kind / name for kind in files}
    for kind, path in paths.items():
        path.parent.mkdir()
        path.write_bytes(files[kind])
    bad = _model()
    with torch.no_grad():
        next(bad.parameters()).fill_(float("nan"))
    label = "peer\n2026-01-01 INFO forged " + "y" * 300
    calls = [
        (paths["cut"], lambda: load_model(paths["cut"]), "truncated model file (cut short"),
        (paths["cut"], lambda: read_card(paths["cut"]), "truncated model file (cut short"),
        (paths["garbage header"], lambda: load_model(paths["garbage header"]), "header is not valid JSON"),
        (paths["plain"], lambda: load_model(paths["plain"]), "not a FOL model file"),
        (paths["plain"], lambda: load_model(paths["plain"], max_bytes=10), "over the size limit"),
        (paths["pickle"], lambda: read_state_dict(paths["pickle"]), "a pickle-based checkpoint"),
        (paths["cut"], lambda: save_model(paths["cut"], bad, spec=SPEC, class_names=CLASSES), "non-finite"),
        (label, lambda: load_model_bytes(data[:-10], source=label), "truncated model file (cut short"),
        (label, lambda: model_to_bytes(bad, ModelCard(SPEC, CLASSES), source=label), "non-finite"),
    ]
    for source, call, fragment in calls:
        with pytest.raises(CheckpointError) as info:
            call()
        msg = str(info.value)
        assert msg.startswith(f"{brief(source)}: ") and fragment in msg, msg
        assert "\x1b" not in msg and "\n" not in msg and len(msg) < 500, msg


def test_a_garbled_layout_past_the_files_end_is_not_called_cut_short() -> None:
    """A file cut short keeps its header, whose byte ranges follow one another: only such a layout that
    ends past the data is "truncated model file (cut short: ...)". A layout with a gap or a range that
    does not hold its shape is damage no missing bytes explain (a copy made again is as unreadable):
    "not a valid safetensors payload (<what is wrong>)", whether the damaged range comes before the
    file's end or after it."""
    sound = {"dtype": "F32", "shape": [25], "data_offsets": [0, 100]}
    for entries, fragment in (
            # the damaged range first, then a sound one past the end
            ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]},
              "b": {"dtype": "F32", "shape": [24], "data_offsets": [4, 100]}}, "tensor 'a' holds 4 bytes"),
            # a sound range past the end first, then a damaged one
            ({"a": sound, "b": {"dtype": "F32", "shape": [2], "data_offsets": [100, 104]}}, "tensor 'b' holds 4 bytes"),
            ({"a": sound, "b": {"dtype": "F32", "shape": [1], "data_offsets": [104, 108]}}, "invalid offset for tensor 'b'"),
    ):
        data = _layout(entries, bytes(8), {"fol": _CARD})
        error = _assert_rejected(lambda: load_model_bytes(data, source="p"), "p", fragment)
        assert "not a valid safetensors payload (" in str(error) and "truncated" not in str(error)
    data = _layout({"a": sound}, bytes(8), {"fol": _CARD})  # the same file, its layout sound: cut short
    _assert_rejected(lambda: load_model_bytes(data, source="p"), "p", "truncated model file (cut short: its header "
                     "describes 100 bytes of tensor data, the file holds 8)")


@pytest.mark.parametrize("seed", range(4))
def test_garbled_headers_are_rejected(seed: int, tmp_path: Path) -> None:
    g = torch.Generator().manual_seed(seed)
    data = bytearray(_valid_payload())
    n = _header_len(data)
    start = int(torch.randint(8, 8 + n - 16, (1,), generator=g))
    data[start : start + 16] = torch.randint(0, 256, (16,), generator=g, dtype=torch.uint8).numpy().tobytes()
    path = _write(tmp_path, bytes(data))
    _assert_rejected(lambda: load_model(path), str(path), "")


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        (b"", "truncated"),
        (b"\x00" * 8, "not valid JSON"),
        (struct.pack("<Q", 2**63) + b"{}", "header length"),
        (struct.pack("<Q", 100) + b"{}", "truncated"),
        (struct.pack("<Q", 2) + b"{}", "not a FOL model file"),
        (struct.pack("<Q", 4) + b"\xff\xfe{}", "not valid JSON"),
        (b"PK\x03\x04" + b"\x00" * 60, "header length"),  # a zip / torch.save file
        (pickle.dumps({"w": [1.0]}), ""),
    ],
)
def test_non_model_bytes_are_rejected(data: bytes, fragment: str, tmp_path: Path) -> None:
    path = _write(tmp_path, data)
    _assert_rejected(lambda: load_model(path), str(path), fragment)
    _assert_rejected(lambda: load_model_bytes(data, source="peer 9"), "peer 9", fragment)


def test_size_limit_is_checked_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "huge.safetensors"
    with open(path, "wb") as fh:  # sparse: no disk space, but stat() says 300 MB
        fh.truncate(DEFAULT_MAX_BYTES + 100_000_000)
    _assert_rejected(lambda: load_model(path), str(path), "over the size limit of 200000000 bytes")
    _assert_rejected(lambda: read_card(path), str(path), "size limit")

    data = _valid_payload()
    small = _write(tmp_path, data, "small.safetensors")
    limit = len(data) - 1
    _assert_rejected(lambda: load_model(small, max_bytes=limit), str(small), "size limit")
    _assert_rejected(lambda: load_model_bytes(data, max_bytes=limit, source="x"), "x", "size limit")
    assert load_model(small, max_bytes=len(data)).card.sha256


@pytest.mark.parametrize("limit", [10**15, 2**64])
def test_a_generous_size_limit_reads_only_what_the_file_holds(limit: int, tmp_path: Path) -> None:
    """The limit caps the file; the read asks for the file's size, so a limit
    far above the memory (``--max-bytes 1e15``) still loads a small file."""
    data = _valid_payload()
    path = _write(tmp_path, data, "small.safetensors")
    assert load_model(path, max_bytes=limit).card.sha256


def test_missing_paths_and_folders_are_rejected(tmp_path: Path) -> None:
    _assert_rejected(lambda: load_model(tmp_path / "nope.safetensors"), str(tmp_path / "nope.safetensors"), "not found")
    _assert_rejected(lambda: read_card(tmp_path), str(tmp_path), "is a directory; expected a model file")
    _assert_rejected(lambda: load_model_bytes("text", source="s"), "s", "bytes")  # type: ignore[arg-type]



@functools.lru_cache(maxsize=None)
def _one_mb_payload() -> bytes:
    spec = ModelSpec("cnn", num_classes=2, options={"widths": [32, 64, 128, 128], "hidden": 64})
    return model_to_bytes(build_model(spec, seed=0), ModelCard(spec, ["a", "b"]))


def test_loading_holds_no_second_copy_of_the_tensor_data(tmp_path: Path) -> None:
    """The tensors are read straight into their own storage: neither the file's bytes nor a
    per-tensor copy of a payload is held as Python bytes while loading (the loader read the
    whole file, then copied every tensor out of it: about 2x the file in Python objects).
    tracemalloc sees Python's allocations, not torch's storage: what remains is the header,
    the card and the module tree's bookkeeping."""
    import tracemalloc

    data = _one_mb_payload()
    path = _write(tmp_path, data, "m.safetensors")
    for load in (lambda: load_model(path), lambda: load_model_bytes(data)):
        load()  # imports and caches outside the measurement
        tracemalloc.start()
        try:
            load()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < len(data) / 4, (peak, len(data))


def test_loaded_tensors_are_their_own_memory(tmp_path: Path) -> None:
    """No loaded tensor is a view of the caller's buffer or of the file: changing
    either after loading leaves the model as validated, and its weights can be trained in place."""
    data = _valid_payload()
    x = _inputs(SPEC)
    want = _outputs(load_model_bytes(data).model, x)
    buffer = bytearray(data)
    path = _write(tmp_path, data)
    for loaded in (load_model_bytes(buffer), load_model_bytes(memoryview(buffer)), load_model(path)):
        start = 8 + _header_len(data)
        buffer[start:] = bytes(len(buffer) - start)  # zero every tensor byte
        path.write_bytes(bytes(buffer))
        assert torch.equal(_outputs(loaded.model, x), want)
        buffer[:] = data
        with torch.no_grad():
            next(loaded.model.parameters()).add_(1.0)  # writable, as training needs


def _layout(entries: dict[str, dict], payload: bytes, metadata: dict | None = None) -> bytes:
    """A safetensors file with the header ``entries`` (and ``__metadata__``) written as given."""
    header = {**({"__metadata__": metadata} if metadata is not None else {}), **entries}
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + payload


_CARD = json.dumps({"format": "fol-model", "version": 2, "spec": {"arch": "cnn-small", "num_classes": 2},
                    "class_names": ["a", "b"], "sha256": "0" * 64})


@pytest.mark.parametrize(
    ("entries", "payload", "metadata", "fragment"),
    [
        ({"a": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}, 12, None, "invalid offset for tensor 'a'"),
        ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
          "b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, 4, None, "invalid offset"),
        ({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}, 8, None, "its shape [3] needs 12"),
        ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, 8, None, "cover 4 of the 8 bytes"),
        ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 40]}}, 8, None,
         "holds 40 bytes, its shape [1] needs 4"),
        ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 2**64]}}, 8, None,
         "expected [begin, end], two byte offsets"),
        ({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, 4, None, "non-negative integers"),
        ({"a": {"dtype": "F32", "shape": [2.0], "data_offsets": [0, 8]}}, 8, None, "non-negative integers"),
        ({"a": {"dtype": "F32", "shape": [2**64, 0], "data_offsets": [0, 0]}}, 0, None, "non-negative integers"),
        # an empty tensor whose element count overflows 64 bits on the way (safetensors: "overflow")
        ({"a": {"dtype": "F32", "shape": [2**31] * 4 + [0], "data_offsets": [0, 0]}}, 0, None, "overflows 64 bits"),
        ({"a": {"dtype": "F32", "data_offsets": [0, 4]}}, 4, None, "needs 'dtype', 'shape' and 'data_offsets'"),
        ({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, 4, {"fol": _CARD, "n": 1},
         "'__metadata__' must map names to strings"),
    ],
)
def test_tensor_layouts_are_checked_before_any_tensor_is_read(entries: dict, payload: int, metadata: dict | None,
                                                              fragment: str, tmp_path: Path) -> None:
    """Byte ranges with gaps or overlaps, ranges that do not hold their shape or run past the data,
    bad shapes: refused as safetensors refuses them, before a tensor is allocated."""
    data = _layout(entries, bytes(payload), metadata if metadata is not None else {"fol": _CARD})
    path = _write(tmp_path, data)
    for call, source in ((lambda: load_model(path), str(path)), (lambda: load_model_bytes(data, source="p"), "p")):
        assert "not a valid safetensors payload (" in str(_assert_rejected(call, source, fragment))


def test_the_tensor_reader_agrees_with_the_safetensors_library() -> None:
    """The loader reads tensors itself (into their own storage, byte ranges checked first);
    on payloads the safetensors library writes, with every dtype the format takes, a scalar,
    an empty tensor and several dimensions, it gives exactly the library's tensors."""
    from safetensors.torch import load as st_load, save as st_save

    import fol.checkpoint as ck

    g = torch.Generator().manual_seed(0)
    state = {"w": torch.randn(3, 4, 5, generator=g), "h": torch.randn(7, generator=g).half(),
             "b": torch.randn(2, 3, generator=g).bfloat16(), "n": torch.tensor(12, dtype=torch.int64),
             "e": torch.empty(0, 3), "z": torch.arange(6, dtype=torch.int64).reshape(1, 2, 3)}
    data = st_save(state, metadata={"k": "v"})
    header_len = ck._header_length(data[:8], len(data), "p")
    header = ck._parse_header(data[8:8 + header_len], header_len, "p")
    ours = ck._read_tensors(header, len(data) - 8 - header_len, ck._BytesTensors(memoryview(data)[8 + header_len:]), "p")
    theirs = st_load(data)
    assert sorted(ours) == sorted(theirs) == sorted(state)
    for name, t in theirs.items():
        assert ours[name].dtype == t.dtype and ours[name].shape == t.shape and torch.equal(ours[name], t), name


def test_a_shape_of_many_huge_dimensions_is_refused_at_once(tmp_path: Path) -> None:
    """A header of some 40,000 dimensions of 2**63 - 1 (about 800 kB, under the header limit) is refused
    as soon as the element count passes 64 bits, in one short line: multiplying them all out took seconds."""
    import time

    data = _layout({"a": {"dtype": "F32", "shape": [2**63 - 1] * 40_000, "data_offsets": [0, 4]}}, bytes(4),
                   {"fol": _CARD})
    start = time.perf_counter()
    _assert_rejected(lambda: load_model_bytes(data, source="p"), "p", "overflows 64 bits")
    assert time.perf_counter() - start < 0.5


def test_a_model_file_is_checked_by_the_shared_input_file_check_links_followed(tmp_path: Path) -> None:
    """The loader's own stat-and-regular-file check was replaced by swarmbase.tomlcheck.check_input_file:
    a link to a model still loads (links followed), a link to a FIFO is refused unopened, a folder is said to be
    one (it was 'not a regular file, expected a .safetensors model file'), the size limit holds through a link,
    and the agent's label (``source``) still names the file, never its local path."""
    from fol.checkpoint import upgrade_model_file

    data = _valid_payload()
    real = _write(tmp_path, data, "real.safetensors")
    (tmp_path / "link.safetensors").symlink_to(real)
    assert load_model(tmp_path / "link.safetensors").card.producer == "sat-1"
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "to-pipe.safetensors").symlink_to(tmp_path / "pipe")
    _assert_rejected(lambda: read_card(tmp_path / "to-pipe.safetensors"), str(tmp_path / "to-pipe.safetensors"),
                     "not a regular file; expected a model file")
    _assert_rejected(lambda: load_model(tmp_path / "link.safetensors", max_bytes=len(data) - 1),
                     str(tmp_path / "link.safetensors"), f"model file is {len(data)} bytes, over the size limit")
    (tmp_path / "folder.safetensors").mkdir()
    for call in (lambda: load_model(tmp_path / "folder.safetensors", source="model n1:r0:ab"),
                 lambda: load_model(tmp_path / "none.safetensors", source="model n1:r0:ab")):
        error = _assert_rejected(call, "model n1:r0:ab", "")
        assert str(tmp_path) not in str(error), error
    _assert_rejected(lambda: upgrade_model_file(tmp_path / "folder.safetensors"), str(tmp_path / "folder.safetensors"),
                     "is a directory; expected a model file")


@pytest.mark.parametrize("change", ["grew", "shrank"])
def test_a_file_changed_since_its_size_was_read_is_refused(change: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import fol.checkpoint as ck

    data = _valid_payload()
    path = _write(tmp_path, data + b"\0" if change == "grew" else data[:-10])
    monkeypatch.setattr(ck, "_checked_size", lambda *args, **kwargs: len(data))  # the size before the change
    _assert_rejected(lambda: load_model(path), str(path), change)


# ------------------------------------------- hostile cards: bounds, nesting, digest


def _hostile_file(spec: dict, extra_json: str = "{}", tensors: dict | None = None) -> bytes:
    """A tiny, otherwise well-formed file whose card asks for ``spec``; its
    sha256 is right (an attacker can compute it), so only the bounds stop it."""
    named = tensors if tensors is not None else {"w": torch.zeros(1)}
    card = {"format": "fol-model", "version": 2, "spec": spec, "class_names": ["a", "b"], "input_shape": [3, 32, 32],
            "producer": "x", "round": 0, "pruned": False, "sha256": "0" * 64, "extra": {}}
    card["input_shape"] = [spec.get("in_channels", 3), spec.get("input_size", 32), spec.get("input_size", 32)]
    if extra_json == "{}":
        card["sha256"] = model_digest(ModelCard.from_dict(card), named)
    text = json.dumps(card).replace('"extra": {}', f'"extra": {extra_json}')
    return st_save(named, metadata={"fol": text})


def _cost(call: Callable[[], Any]) -> tuple[float, float]:
    """Wall time (s) of ``call`` (best of 3: the machine is shared), and its
    peak traced allocation (MB) in a further run."""
    import time
    import tracemalloc

    seconds = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        call()
        seconds = min(seconds, time.perf_counter() - t0)
    tracemalloc.start()
    try:
        call()
        peak_mb = tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()
    return seconds, peak_mb


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"arch": "resnet-small", "options": {"blocks": 10_000}}, "'blocks' is 10000, over the loader's limit of 16"),
        ({"arch": "resnet-small", "options": {"blocks": 200}}, "'blocks' is 200, over the loader's limit"),
        ({"arch": "cnn", "options": {"widths": [50_000]}}, "'widths' is 50000, over the loader's limit of 4096"),
        ({"arch": "cnn", "options": {"widths": [1] * 500}}, "'widths' has 500 entries, over the loader's limit"),
        ({"arch": "cnn", "options": {"hidden": 10**9}}, "'hidden' is 1000000000, over the loader's limit"),
        ({"arch": "cnn-small", "num_classes": 2, "input_size": 10**6}, "input_size is 1000000, over the loader's"),
    ],
)
def test_huge_architecture_in_a_tiny_file_is_rejected_before_building(options: dict, fragment: str) -> None:
    spec = {"arch": "cnn", "num_classes": 2, "in_channels": 3, "input_size": 32, **options}
    data = _hostile_file(spec)
    assert len(data) < 2000  # the reported files were 460 bytes; the 500-widths one is ~1.9 kB

    def load() -> None:
        _assert_rejected(lambda: load_model_bytes(data, source="peer"), "peer", fragment)

    seconds, peak_mb = _cost(load)
    assert seconds < 0.05 and peak_mb < 50, (seconds, peak_mb)


def test_a_tensor_dtype_is_refused_with_the_header_before_the_card_is_read() -> None:
    """docs/security.md's step 2: a dtype the format does not take is refused with the
    header, before the card (step 3) and its architecture bounds (step 4) are looked at."""
    spec = {"arch": "resnet-small", "num_classes": 2, "in_channels": 3, "input_size": 32,
            "options": {"blocks": 10_000}}
    data = _hostile_file(spec, tensors={"w": torch.zeros(1, dtype=torch.float64)})
    error = _assert_rejected(lambda: load_model_bytes(data, source="peer"), "peer", "tensor 'w' has dtype float64")
    assert "blocks" not in str(error)
    no_card = st_save({"w": torch.zeros(1, dtype=torch.int32)})  # no card at all: the dtype still comes first
    _assert_rejected(lambda: load_model_bytes(no_card, source="peer"), "peer", "tensor 'w' has dtype int32")


def test_architecture_within_bounds_is_checked_against_the_file_while_building() -> None:
    """The largest spec the bounds allow (16 stages of 16 residual blocks) with one
    tensor in the file: the build stops after a few layers, not 256 blocks."""
    spec = {"arch": "resnet-small", "num_classes": 2, "in_channels": 3, "input_size": 32,
            "options": {"blocks": 16, "widths": [16] * 16}}
    data = _hostile_file(spec)

    def load() -> None:
        _assert_rejected(lambda: load_model_bytes(data, source="peer"), "peer", "the file holds 1")

    seconds, peak_mb = _cost(load)
    assert seconds < 0.5 and peak_mb < 50, (seconds, peak_mb)


def _nested(depth: int) -> str:
    return '{"a": ' * depth + "1" + "}" * depth


@pytest.mark.parametrize("depth", [17, 980, 990, 5000])
def test_deeply_nested_card_is_a_checkpoint_error(depth: int, tmp_path: Path) -> None:
    spec = {"arch": "cnn-small", "num_classes": 2, "in_channels": 3, "input_size": 32, "options": {}}
    data = _hostile_file(spec, extra_json=_nested(depth))
    _assert_rejected(lambda: load_model_bytes(data, source="peer"), "peer", "nested deeper than 16 levels")
    path = _write(tmp_path, data)
    _assert_rejected(lambda: read_card(path), str(path), "nested deeper")
    _assert_rejected(lambda: load_model(path), str(path), "nested deeper")


@pytest.mark.parametrize("item", [b"{}", b"[]", b"0"])
def test_a_header_of_many_small_values_is_refused_before_it_is_parsed(item: bytes) -> None:
    """The header's value count (at most 12 per tensor) was measured after parsing: a 1 MB
    header of ``{},{},...`` made 350,000 Python objects (about 50 MB, half a second; an 8 MiB
    header 400 MB and 6 s) before it was refused. Its commas outside strings are a lower bound
    of its values, counted first; a legitimate header (commas in its names and card) still loads."""
    body = b'{"a":[' + b",".join([item] * 350_000) + b"]}"
    data = struct.pack("<Q", len(body)) + body

    def load() -> None:
        _assert_rejected(lambda: load_model_bytes(data, source="peer"), "peer", "holds more than")

    seconds, peak_mb = _cost(load)
    assert peak_mb < 6 * len(data) / 1e6 and seconds < 0.2, (seconds, peak_mb)  # it was 50x the size
    # commas inside strings (the card, itself a string of the header) are not values: the header is read
    spec = {"arch": "cnn-small", "num_classes": 2, "in_channels": 3, "input_size": 32, "options": {}}
    commas = _hostile_file(spec, extra_json='{"note": "' + "," * 60_000 + '", "x": "\\\\\\",,"}')
    assert commas[8 : 8 + _header_len(commas)].count(b",") > 60_000
    _assert_rejected(lambda: load_model_bytes(commas, source="peer"), "peer", "does not match the card's")


def test_deeply_nested_extra_is_a_config_error_when_built_in_code() -> None:
    extra: dict = {}
    inner = extra
    for _ in range(3000):
        inner["a"] = {}
        inner = inner["a"]
    with pytest.raises(ConfigError, match="nested deeper"):
        ModelCard(SPEC, CLASSES, extra=extra)


def test_unexpected_errors_inside_the_loader_leave_as_checkpoint_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    import fol.checkpoint as ck

    def boom(*_a: Any, **_k: Any) -> Any:
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(ck, "_check_tensors", boom)
    _assert_rejected(lambda: load_model_bytes(_valid_payload(), source="peer"), "peer", "RecursionError")


def test_personalize_skips_a_neighbour_with_a_nested_card(tmp_path: Path) -> None:
    from fol.personalize_cli import scan_neighbours

    folder = tmp_path / "neighbours"
    folder.mkdir()
    save_model(folder / "good.safetensors", _model(), spec=SPEC, class_names=CLASSES, producer="good")
    spec = {"arch": "cnn-small", "num_classes": 2, "in_channels": 3, "input_size": 32, "options": {}}
    _write(folder, _hostile_file(spec, extra_json=_nested(980)), "nested.safetensors")
    received, skipped = scan_neighbours(folder)
    assert [r.name for r in received] == ["good"]
    assert [s["file"] for s in skipped] == ["nested.safetensors"] and "nested deeper" in skipped[0]["reason"]


def test_personalize_reads_no_more_neighbours_than_the_round_takes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files are read in name order until Q usable models are in hand; an unusable one
    does not count, and later files are listed as skipped without being read."""
    from fol import checkpoint as ck
    from fol.personalize_cli import scan_neighbours

    folder = tmp_path / "neighbours"
    folder.mkdir()
    for name in ("a", "b", "c", "d", "e"):
        save_model(folder / f"{name}.safetensors", _model(), spec=SPEC, class_names=CLASSES, producer=name)
    (folder / "e.safetensors").write_bytes(b"garbage")  # past the limit: never opened, so never judged
    reads: list[str] = []
    real = ck.load_model

    def counting(path, *a, **k):
        reads.append(Path(path).name)
        return real(path, *a, **k)

    monkeypatch.setattr(ck, "load_model", counting)
    received, skipped = scan_neighbours(folder, usable=lambda r: "wrong" if r.name == "b" else None, limit=2)
    assert reads == ["a.safetensors", "b.safetensors", "c.safetensors"]
    assert [r.name for r in received] == ["a", "b", "c"]  # b is kept: personalize reports its reason
    weights = {r.name: [p.is_meta for p in r.model.parameters()] for r in received}
    assert not any(weights["a"]) and not any(weights["c"])
    assert all(weights["b"])  # kept for its card only: a folder of unusable models does not fill the memory
    assert [s["file"] for s in skipped] == ["d.safetensors", "e.safetensors"]
    assert all("not read: the per-round limit Q = 2" in s["reason"] for s in skipped)


def test_an_unreadable_neighbours_folder_is_one_data_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fol.errors import DataError
    from fol.personalize_cli import scan_neighbours

    folder = tmp_path / "neighbours"
    folder.mkdir()

    def denied(self: Path):  # what listing a folder without read permission does (the tests may run as root)
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "iterdir", denied)
    with pytest.raises(DataError, match=r"neighbours folder .* cannot be listed \(Permission denied\)"):
        scan_neighbours(folder)


def _flip_in_card(data: bytes, old: bytes, new: bytes) -> bytes:
    """Replace one occurrence of ``old`` inside the card (same length: the header length stays)."""
    assert len(old) == len(new)
    n = _header_len(data)
    header = data[8 : 8 + n]
    assert header.count(old) == 1, old
    return data[:8] + header.replace(old, new) + data[8 + n :]


@pytest.mark.parametrize(
    ("old", "new"),
    [(b"fire", b"fise"), (b"smoke", b"smoka"), (b"sat-1", b"sat-7"), (b'round\\": 2', b'round\\": 3'),
     (b"0.75", b"0.95")],
)
def test_a_changed_card_byte_fails_the_digest(old: bytes, new: bytes, saved: tuple[Path, nn.Module, ModelCard]) -> None:
    path, _, _ = saved
    path.write_bytes(_flip_in_card(path.read_bytes(), old, new))
    _assert_rejected(lambda: load_model(path), str(path), "model sha256")


def _v1_file(path: Path, model: nn.Module, class_names: list[str]) -> Path:
    named = {k: v.detach().clone().contiguous() for k, v in model.state_dict().items()}
    card = {**ModelCard(SPEC, class_names, producer="old").to_dict(), "version": 1, "sha256": tensor_digest(named)}
    path.write_bytes(st_save(named, metadata={"fol": json.dumps(card)}))
    return path


def test_version_1_files_are_refused_and_can_be_upgraded(tmp_path: Path) -> None:
    from fol.checkpoint import upgrade_model_file

    model = _model(seed=4)
    old = _v1_file(tmp_path / "old.safetensors", model, CLASSES)
    _assert_rejected(lambda: load_model(old), str(old), "version 1 is not covered by the file's digest")
    assert read_card(old).producer == "old"  # the header can still be inspected
    new = tmp_path / "new.safetensors"
    card = upgrade_model_file(old, new)
    loaded = load_model(new)
    assert loaded.card == card and card.sha256 == model_digest(card, model.state_dict())
    x = _inputs(SPEC)
    assert torch.equal(_outputs(loaded.model, x), _outputs(model, x))
    # Upgrading still checks the tensors against the version-1 digest.
    bad = bytearray(old.read_bytes())
    bad[-3] ^= 0x40
    broken = _write(tmp_path, bytes(bad), "broken.safetensors")
    _assert_rejected(lambda: upgrade_model_file(broken, tmp_path / "x.safetensors"), str(broken), "tensor sha256")


# ------------------------------------------------------------------------ fuzz

FUZZ = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@functools.lru_cache(maxsize=None)
def _tiny_payload() -> bytes:
    spec = ModelSpec("cnn", 2, 1, 8, options={"widths": [2], "hidden": 0})
    return model_to_bytes(_model(spec), ModelCard(spec, ["a", "b"]))


def _load_or_reject(data: bytes) -> None:
    try:
        result = load_model_bytes(data, max_bytes=1 << 20, source="fuzz")
    except CheckpointError as exc:
        assert str(exc).startswith("fuzz: ") and "\n" not in str(exc)
        return
    assert isinstance(result, LoadedModel) and isinstance(result.model, nn.Module)
    assert result.card.sha256 == model_digest(result.card, result.model.state_dict())  # float32: digest survives


@FUZZ
@given(st.binary(max_size=4096))
def test_fuzz_random_bytes(data: bytes) -> None:
    _load_or_reject(data)


@FUZZ
@given(st.binary(max_size=2048))
def test_fuzz_random_headers(body: bytes) -> None:
    _load_or_reject(struct.pack("<Q", len(body)) + body)  # passes the length check, exercises the JSON paths


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@FUZZ
@given(st.dictionaries(st.sampled_from(["spec", "class_names", "input_shape", "producer", "round", "pruned",
                                        "sha256", "extra", "arch", "num_classes", "options"]), _json))
def test_fuzz_card_fields(overrides: dict) -> None:
    def edit(card: dict) -> None:
        for k, v in overrides.items():
            if k in ("arch", "num_classes", "options"):
                if isinstance(card.get("spec"), dict):
                    card["spec"][k] = v
            else:
                card[k] = v

    _load_or_reject(_rebuild(_tiny_payload(), card=edit))


@FUZZ
@given(st.data())
def test_fuzz_truncations_and_bit_flips(data: st.DataObject) -> None:
    payload = bytearray(_tiny_payload())
    cut = data.draw(st.integers(0, len(payload) - 1), label="cut")
    _load_or_reject(bytes(payload[:cut]))
    for pos, bit in data.draw(st.lists(st.tuples(st.integers(0, len(payload) - 1), st.integers(0, 7)),
                                       min_size=1, max_size=4), label="flips"):
        payload[pos] ^= 1 << bit
    _load_or_reject(bytes(payload))


# ------------------------------------------------------------------- saving


def _broken(model: nn.Module) -> nn.Module:
    with torch.no_grad():
        model.features[0].weight[0, 0, 0, 0] = float("nan")
    return model


def test_save_refuses_non_finite_weights_and_keeps_the_old_file(saved: tuple[Path, nn.Module, ModelCard]) -> None:
    path, _, _ = saved
    before = path.read_bytes()
    _assert_rejected(lambda: save_model(path, _broken(_model()), spec=SPEC, class_names=CLASSES), str(path),
                     "non-finite")
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no temp file left behind


def test_failed_write_keeps_the_old_file(monkeypatch: pytest.MonkeyPatch, saved: tuple[Path, nn.Module, ModelCard]) -> None:
    path, _, card = saved
    before = path.read_bytes()

    def failing_replace(*_a: Any) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "replace", failing_replace)
    _assert_rejected(lambda: save_model(path, _model(seed=9), spec=SPEC, class_names=CLASSES), str(path),
                     "cannot write")
    monkeypatch.undo()
    assert path.read_bytes() == before and load_model(path).card == card
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_sidecar_never_replaces_the_model_it_describes(tmp_path: Path) -> None:
    path = tmp_path / "model.json"
    save_model(path, _model(), spec=SPEC, class_names=CLASSES)
    before = path.read_bytes()
    _assert_rejected(lambda: save_model(path, _model(), spec=SPEC, class_names=CLASSES, sidecar=True),
                     str(path), "would replace the model")
    assert path.read_bytes() == before and load_model(path).card.spec == SPEC


def test_save_validates_its_arguments(tmp_path: Path) -> None:
    path = tmp_path / "m.safetensors"
    model = _model()
    _assert_rejected(lambda: save_model(path, model), str(path), "spec= and class_names=")
    _assert_rejected(lambda: save_model(path, model, spec=SPEC, class_names=["a"]), str(path), "class_names")
    _assert_rejected(lambda: save_model(path, model, ModelCard(SPEC, CLASSES), spec=SPEC), str(path), "not both")
    for field in ({"producer": "sat-9"}, {"round": 3}):  # not silently dropped in favour of the card's
        _assert_rejected(lambda: save_model(path, model, ModelCard(SPEC, CLASSES), **field), str(path), "not both")
    other = ModelSpec("cnn-medium", 3, 3, 16)
    _assert_rejected(lambda: save_model(path, model, spec=other, class_names=CLASSES), str(path), "missing")
    _assert_rejected(lambda: save_model(path, model, spec=SPEC, class_names=CLASSES, max_bytes=1000), str(path),
                     "size limit")
    _assert_rejected(lambda: save_model(tmp_path / "no" / "dir.safetensors", model, spec=SPEC, class_names=CLASSES),
                     str(tmp_path / "no" / "dir.safetensors"), "cannot write")
    assert not path.exists()
    with pytest.raises(ConfigError, match="extra"):
        ModelCard(SPEC, CLASSES, extra={"bad": {1, 2}})


def test_class_names_are_compared_in_unicode_nfc(tmp_path: Path) -> None:
    """A model pretrained on macOS (folder 'café' kept decomposed, NFD) and one from
    Linux (NFC) name the same classes: both cards give the NFC names. A file written
    before names were normalized (its digest over the NFD names it holds) still loads."""
    import unicodedata

    nfd, nfc = unicodedata.normalize("NFD", "café"), unicodedata.normalize("NFC", "café")
    assert nfd != nfc
    assert ModelCard(SPEC, [nfd, "smoke", "clear"]) == ModelCard(SPEC, [nfc, "smoke", "clear"])
    assert ModelCard(SPEC, CLASSES).class_names == tuple(CLASSES)  # ASCII names unchanged

    def written_decomposed(card: dict) -> None:  # as a writer that kept the folder's NFD name wrote it
        card["class_names"] = [nfd, "smoke", "clear"]
        unsigned = {k: v for k, v in card.items() if k != "sha256"}
        card["sha256"] = model_digest(unsigned, dict(st_load(_valid_payload())))

    path = _write(tmp_path, _rebuild(_valid_payload(), card=written_decomposed), "mac.safetensors")
    assert load_model(path).card.class_names == (nfc, "smoke", "clear")
    assert read_card(path).class_names == (nfc, "smoke", "clear")
    # two forms of one name are one name twice
    with pytest.raises(ConfigError, match="duplicate"):
        ModelCard(SPEC, [nfd, nfc, "clear"])


def test_personalize_reads_each_model_of_a_neighbours_folder_once(tmp_path: Path) -> None:
    """A model under two names (a copy kept as 'node1_copy.safetensors') or the node's own model
    dropped among the received ones took a Top-K seat twice, or competed with itself, and filled
    the per-round limit Q; the node agent's inbox skips such copies. Each is skipped, with why."""
    import shutil

    from fol.personalize_cli import scan_neighbours

    folder = tmp_path / "neighbours"
    folder.mkdir()
    own = save_model(folder / "0-own.safetensors", _model(seed=0), spec=SPEC, class_names=CLASSES, producer="me")
    save_model(folder / "node1.safetensors", _model(seed=1), spec=SPEC, class_names=CLASSES, producer="node1")
    shutil.copy(folder / "node1.safetensors", folder / "node1_copy.safetensors")
    save_model(folder / "node2.safetensors", _model(seed=2), spec=SPEC, class_names=CLASSES, producer="node2")
    received, skipped = scan_neighbours(folder, own_sha256=own.sha256, limit=2)
    assert [r.name for r in received] == ["node1", "node2"]  # the copy does not count towards Q = 2
    assert skipped == [
        {"file": "0-own.safetensors", "reason": "the node's own model (--model), not a neighbour's"},
        {"file": "node1_copy.safetensors", "reason": "the same model as node1.safetensors (equal sha256), used once"},
    ]


def _with_dtype(dtype: Any) -> tuple[str, bytes]:
    """A valid model file whose first tensor's header names ``dtype``; the tensor's name and the bytes."""
    data = _valid_payload()
    n = _header_len(data)
    header = json.loads(data[8:8 + n])
    name = next(k for k in header if k != "__metadata__")
    header[name]["dtype"] = dtype
    raw = json.dumps(header).encode()
    return name, struct.pack("<Q", len(raw)) + raw + data[8 + n:]


@pytest.mark.parametrize(("dtype", "shown_as"), [("F8_E8M0", "'F8_E8M0'"), ("F4", "'F4'"), ("F64", "float64"),
                                                 ("U8", "uint8")])
def test_a_dtype_torch_cannot_read_is_named_with_the_ones_expected(dtype: str, shown_as: str) -> None:
    """A tensor of a dtype safetensors knows but torch does not load (F4, F8_E8M0) was refused as
    'not a valid safetensors payload ('F4')', naming neither the tensor nor what was expected."""
    name, forged = _with_dtype(dtype)
    _assert_rejected(lambda: load_model_bytes(forged, source="peer.safetensors"), "peer.safetensors",
                     f"tensor '{name}' has dtype {shown_as}, expected float32, float16, bfloat16 or int64")


@pytest.mark.parametrize("dtype", [{}, [], 7, None, True])
def test_a_dtype_that_is_not_a_name_is_refused_without_a_logged_traceback(dtype, caplog) -> None:
    """A header's dtype of {} or [] raised a TypeError inside the validation, which the loader logged
    with its traceback as an unexpected error before refusing the file."""
    name, forged = _with_dtype(dtype)
    with caplog.at_level("WARNING", logger="fol.checkpoint"):
        _assert_rejected(lambda: load_model_bytes(forged, source="peer.safetensors"), "peer.safetensors",
                         f"tensor '{name}' has dtype")
    assert not caplog.records, [r.getMessage() for r in caplog.records]
