"""``fol model info`` and ``fol model import``: model files summarized through the
safe loader; a plain safetensors state dict trained elsewhere brought into the
format, pickle checkpoints refused without unpickling."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from fol.checkpoint import load_model, save_model
from fol.cli import main
from fol.models import ModelSpec, build_model

from _names import odd_folder

SPEC = ModelSpec("cnn-small", num_classes=2)


def _good(path: Path) -> torch.nn.Module:
    model = build_model(SPEC, seed=0).eval()
    save_model(path, model, spec=SPEC, class_names=["fire", "no_fire"], producer="node-3", round=2)
    return model


def test_info_reports_each_file_and_fails_on_a_corrupted_one(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = tmp_path / "good.safetensors", tmp_path / "bad.safetensors"
    _good(good)
    data = bytearray(good.read_bytes())
    data[-3] ^= 1  # one bit of one weight
    bad.write_bytes(bytes(data))
    assert main(["model", "info", str(bad), str(good)]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and str(bad) in err and "does not match the card" in err
    assert f"{good}: valid, format version 2, digest verified" in out
    for text in ("cnn-small", "dense (not pruned)", "7,378 parameters", "fire, no_fire", "3 x 32 x 32",
                 "node-3, round 2", f"{good.stat().st_size:,} bytes"):
        assert text in out
    assert main(["model", "info", "--json", str(good), str(bad)]) == 2
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [d["valid"] for d in lines] == [True, False]
    assert lines[0]["parameters"] == 7378 and lines[0]["digest_verified"] and lines[0]["producer"] == "node-3"
    assert str(bad) in lines[1]["error"]
    assert main(["model", "info", str(good)]) == 0
    capsys.readouterr()
    # over --max-bytes, or absent: one JSON line each, not a traceback
    assert main(["model", "info", "--json", "--max-bytes", "100", str(good), str(tmp_path / "none")]) == 2
    errors = [json.loads(line)["error"] for line in capsys.readouterr().out.splitlines()]
    assert "over the size limit of 100 bytes" in errors[0] and errors[1].endswith("model file not found")


def test_info_names_a_file_gone_after_loading_through_brief(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A model file that went away between its load and its stat was named as it is, where the loader's
    refusals name it through brief(): a name holding a terminal's escape went raw into the JSON error."""
    import fol.checkpoint
    from swarmbase.tomlcheck import brief

    path = tmp_path / ("m\x1b[2J" + "x" * 220 + ".safetensors")
    _good(path)

    def load_then_remove(where, max_bytes):
        loaded = load_model(where, max_bytes)
        Path(where).unlink()
        return loaded

    monkeypatch.setattr(fol.checkpoint, "load_model", load_then_remove)
    assert main(["model", "info", "--json", str(path)]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error.startswith(f"{brief(path)}: ") and "\x1b" not in error and len(error) < 300, error


def test_import_round_trips_a_safetensors_state_dict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = build_model(ModelSpec("resnet-small", num_classes=3), seed=1).eval()
    with torch.no_grad():  # trained-looking batch-norm statistics, not the initial ones
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-1, 1)
                m.running_var.uniform_(0.5, 2)
    save_file(model.state_dict(), str(tmp_path / "w.safetensors"))
    out = tmp_path / "sub" / "m.safetensors"
    assert main(["model", "import", str(tmp_path / "w.safetensors"), "--arch", "resnet-small",
                 "--classes", "a, b,c", "--producer", "lab", "--out", str(out)]) == 0
    assert "loaded back and verified" in capsys.readouterr().out
    loaded = load_model(out)
    assert loaded.card.class_names == ("a", "b", "c") and loaded.card.producer == "lab"
    # a new model: fol personalize and the agent split its node's data by the current rule (fol.nodedata)
    assert loaded.card.extra == {"imported_from": "w.safetensors", "split_seed": "node_seed"}
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(loaded.model(x), model(x))


def test_import_refuses_a_pickle_without_unpickling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    state = build_model(SPEC, seed=0).state_dict()
    torch.save(state, tmp_path / "w.pt")
    (tmp_path / "w.safetensors").write_bytes(pickle.dumps(dict(state)))  # a pickle under a safetensors name

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("unpickled")

    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, forbidden)
    monkeypatch.setattr(torch, "load", forbidden)
    for src in ("w.pt", "w.safetensors"):
        assert main(["model", "import", str(tmp_path / src), "--arch", "cnn-small", "--classes", "a,b",
                     "--out", str(tmp_path / "m.safetensors")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "never unpickles" in err and "safetensors.torch.save_file" in err
    assert not (tmp_path / "m.safetensors").exists()
    # the name alone decides nothing: a safetensors file called model.bin (as Hugging Face names
    # weights) is read; it was refused as a pickle by its name
    save_file(state, str(tmp_path / "model.bin"))
    assert main(["model", "import", str(tmp_path / "model.bin"), "--arch", "cnn-small", "--classes", "a,b",
                 "--out", str(tmp_path / "m.safetensors")]) == 0
    assert load_model(tmp_path / "m.safetensors").card.class_names == ("a", "b")


def test_import_lists_mismatched_tensors_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = dict(build_model(SPEC, seed=0).state_dict())
    state["extra.weight"] = torch.zeros(2)
    del state["classifier.3.bias"]
    state["features.0.weight"] = torch.zeros(16, 3, 5, 5)
    save_file(state, str(tmp_path / "w.safetensors"))
    assert main(["model", "import", str(tmp_path / "w.safetensors"), "--arch", "cnn-small", "--classes", "a,b",
                 "--out", str(tmp_path / "m.safetensors")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "1 missing: classifier.3.bias" in err and "1 unexpected: 'extra.weight'" in err
    assert "features.0.weight [16, 3, 5, 5] (expected [16, 3, 3, 3])" in err
    # torchvision's ResNet-18 (its 7x7 stem) fits the zoo's only at 96 px or more: said so
    save_file({"conv1.weight": torch.zeros(64, 3, 7, 7)}, str(tmp_path / "r.safetensors"))
    assert main(["model", "import", str(tmp_path / "r.safetensors"), "--arch", "resnet18", "--classes", "a,b",
                 "--out", str(tmp_path / "m.safetensors")]) == 2
    assert "7x7 stem only for input size 96 or more" in capsys.readouterr().err
    assert not (tmp_path / "m.safetensors").exists()


def test_import_refuses_weights_whose_file_name_is_not_utf8_before_reading_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The card records the weights file's name (imported_from) as UTF-8 text: a name of bytes that are not
    UTF-8 (b'w\\xff.safetensors') was recorded with them escaped, a name of no file. It is refused before
    the weights are read, in one line asking for a UTF-8 file name (before: exit 0); a folder of such a
    name holding a UTF-8 one is not (the card records the file's name only)."""
    import os

    import fol.checkpoint

    state = build_model(SPEC, seed=0).state_dict()
    weights = tmp_path / os.fsdecode(b"w\xff.safetensors")
    save_file(state, str(weights))
    read: list[int] = []
    real = fol.checkpoint.import_state_dict
    monkeypatch.setattr(fol.checkpoint, "import_state_dict", lambda *a, **k: read.append(1) or real(*a, **k))
    out = tmp_path / "m.safetensors"
    assert main(["model", "import", str(weights), "--arch", "cnn-small", "--classes", "a,b", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"fol model: error: {tmp_path}/w\\udcff.safetensors: its file "
                                               f"name holds bytes that are not UTF-8"), err
    assert "(imported_from); expected a UTF-8 file name" in err[0] and not read and not out.exists(), err
    folder = tmp_path / os.fsdecode(b"dir\xfe")
    folder.mkdir()
    save_file(state, str(folder / "w.safetensors"))
    assert main(["model", "import", str(folder / "w.safetensors"), "--arch", "cnn-small", "--classes", "a,b",
                 "--out", str(out)]) == 0, capsys.readouterr().err
    assert read == [1] and load_model(out).card.extra["imported_from"] == "w.safetensors"


def test_import_output_checked_first_and_replaced_like_pretrain(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    save_file(build_model(SPEC, seed=0).state_dict(), str(tmp_path / "w.safetensors"))
    args = ["model", "import", str(tmp_path / "w.safetensors"), "--arch", "cnn-small", "--classes", "a,b", "--out"]
    (tmp_path / "file").write_text("x")
    assert main([*args, str(tmp_path / "file" / "m.safetensors")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--out" in err and "cannot be created" in err
    assert main([*args, str(tmp_path / "w.safetensors")]) == 2  # the input itself
    assert "is the weights file itself" in capsys.readouterr().err
    assert main([*args, str(tmp_path / "file")]) == 0  # an existing file is replaced, as fol pretrain --out does
    assert load_model(tmp_path / "file").card.class_names == ("a", "b")


def test_import_converts_float64_and_half_precision_to_float32_saying_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A state dict fine-tuned in double precision was refused (dtype float64); now it is converted to
    float32 with one note line, and a float64 value float32 cannot hold (or NaN) is one error line."""
    model = build_model(ModelSpec("resnet-small", num_classes=2), seed=1).eval()
    state = model.state_dict()
    doubled = {k: v.double() if v.is_floating_point() else v for k, v in state.items()}
    save_file(doubled, str(tmp_path / "w64.safetensors"))
    out = tmp_path / "m.safetensors"
    args = ["--arch", "resnet-small", "--classes", "a,b", "--out", str(out)]
    assert main(["model", "import", str(tmp_path / "w64.safetensors"), *args]) == 0
    lines = capsys.readouterr().out.splitlines()
    floats = sum(v.is_floating_point() for v in state.values())
    assert lines[0] == f"note: {tmp_path / 'w64.safetensors'}: {floats} float64 tensor(s) converted to float32, the model's dtype"
    assert len(lines) == 2 and lines[1].endswith("loaded back and verified")
    loaded = load_model(out)
    assert all(torch.equal(loaded.model.state_dict()[k], v) for k, v in state.items())  # float32 values: exact
    save_file({k: v.half() if v.is_floating_point() else v for k, v in state.items()}, str(tmp_path / "w16.safetensors"))
    assert main(["model", "import", str(tmp_path / "w16.safetensors"), *args]) == 0
    assert capsys.readouterr().out.startswith(f"note: {tmp_path / 'w16.safetensors'}: {floats} float16 tensor(s) converted")
    out.unlink()
    for value, why in ((1e39, "1 float64 value(s) beyond float32's range (largest magnitude 1e+39"),
                       (float("nan"), "1 non-finite value(s) (NaN or Inf)")):
        bad = dict(doubled)
        bad["fc.weight"] = bad["fc.weight"].clone()
        bad["fc.weight"][0, 0] = value
        save_file(bad, str(tmp_path / "bad.safetensors"))
        assert main(["model", "import", str(tmp_path / "bad.safetensors"), *args]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "bad.safetensors: tensor 'fc.weight' has " + why in err, err
    assert not out.exists()


def test_import_strips_a_shared_prefix_and_sets_missing_batch_norm_counters(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A DataParallel state dict (every name under ``module.``) was refused with every tensor missing
    and unexpected, and one without the batch-norm ``num_batches_tracked`` counters (which torch's
    load_state_dict(strict=True) accepts) with the counters missing; now the prefix is removed and
    the counters set to 0, one note line each."""
    model = build_model(ModelSpec("resnet-small", num_classes=2), seed=1).eval()
    state = model.state_dict()
    counters = [k for k in state if k.endswith("num_batches_tracked")]
    save_file({f"module.model.{k}": v for k, v in state.items() if k not in counters},
              str(tmp_path / "dp.safetensors"))
    out = tmp_path / "m.safetensors"
    assert main(["model", "import", str(tmp_path / "dp.safetensors"), "--arch", "resnet-small", "--classes", "a,b",
                 "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    src = tmp_path / "dp.safetensors"
    assert lines[:2] == [f"note: {src}: the prefix 'module.model.' every tensor name shares was removed "
                         "(as DataParallel or a wrapper module adds it)",
                         f"note: {src}: {len(counters)} batch-norm num_batches_tracked counter(s) missing, set to 0 "
                         "(as torch's load_state_dict does)"]
    loaded = load_model(out).model
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(loaded(x), model(x))
    assert all(int(loaded.state_dict()[k]) == 0 for k in counters)
    # a prefix that does not make the names match is left, and the mismatch listed as before
    save_file({f"module.{k}": v for k, v in state.items() if k != "fc.bias"}, str(tmp_path / "short.safetensors"))
    assert main(["model", "import", str(tmp_path / "short.safetensors"), "--arch", "resnet-small", "--classes", "a,b",
                 "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "unexpected: 'module.fc.weight'" in captured.err
    # counters are never listed as missing: torch does not require them
    save_file({k: v for k, v in state.items() if k not in counters and k != "fc.bias"},
              str(tmp_path / "nobias.safetensors"))
    assert main(["model", "import", str(tmp_path / "nobias.safetensors"), "--arch", "resnet-small", "--classes", "a,b",
                 "--out", str(out)]) == 2
    assert ": 1 missing: fc.bias\n" in capsys.readouterr().err


def test_import_takes_the_architecture_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A cnn-small trained with other widths could not be imported (the zoo's options were not
    reachable); now --widths / --hidden / --blocks build the arch with them, a mismatch says which
    options the arch takes, and a shape no option gives (a pruned block) is refused listing the tensors."""
    spec = ModelSpec("cnn-small", num_classes=2, options={"widths": [8, 12], "hidden": 0})
    model = build_model(spec, seed=3).eval()
    save_file(model.state_dict(), str(tmp_path / "w.safetensors"))
    out = tmp_path / "m.safetensors"
    base = ["model", "import", str(tmp_path / "w.safetensors"), "--arch", "cnn-small", "--classes", "a,b",
            "--out", str(out)]
    assert main(base) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "features.0.weight [8, 3, 3, 3] (expected [16, 3, 3, 3])" in err
    assert err.rstrip().endswith("'cnn-small' takes the option(s) hidden, widths, which set its layers' sizes")
    assert main([*base, "--widths", "8, 12", "--hidden", "0"]) == 0
    assert "cnn-small (widths=[8, 12], hidden=0), 2 classes" in capsys.readouterr().out
    loaded = load_model(out)
    assert loaded.card.spec.options == {"widths": [8, 12], "hidden": 0}
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        assert torch.equal(loaded.model(x), model(x))
    out.unlink()
    for extra, why in ((["--widths", "8,x"], "--widths 8,x: expected whole numbers separated by commas from 1 to"),
                       (["--hidden", "-1"], "--hidden -1: expected a whole number from 0 to"),
                       (["--blocks", "2"], "--blocks: not an option of --arch cnn-small, which takes --hidden, --widths")):
        assert main([*base, *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and why in err, err
    # a resnet-small whose first block was pruned inside: no option gives those shapes
    state = dict(build_model(ModelSpec("resnet-small", num_classes=2), seed=0).state_dict())
    state["layers.0.conv1.weight"] = state["layers.0.conv1.weight"][:12].clone()
    for key in ("weight", "bias", "running_mean", "running_var"):
        state[f"layers.0.bn1.{key}"] = state[f"layers.0.bn1.{key}"][:12].clone()
    state["layers.0.conv2.weight"] = state["layers.0.conv2.weight"][:, :12].clone()
    save_file(state, str(tmp_path / "p.safetensors"))
    assert main(["model", "import", str(tmp_path / "p.safetensors"), "--arch", "resnet-small", "--classes", "a,b",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "6 of another shape: layers.0.conv1.weight [12, 16, 3, 3] (expected [16, 16, 3, 3])" in err
    assert not out.exists()


def test_info_escapes_control_characters_of_a_peers_card(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A card's producer and class names (a peer's text) went to the terminal as they were: a newline
    forged summary lines and an escape sequence could clear or rewrite the screen. Now every
    unprintable character is shown escaped, and the summary keeps its six lines."""
    path = tmp_path / "peer.safetensors"
    save_model(path, build_model(SPEC, seed=0), spec=SPEC, class_names=["fire\u202e", "x" * 300],
               producer="node\x1b[2J\n  file       forged")
    assert main(["model", "info", str(path)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert len(lines) == 6 and "\x1b" not in out and "\u202e" not in out
    assert lines[2] == "  classes    2: fire\\u202e, " + "x" * 300
    assert lines[4] == "  producer   node\\x1b[2J\\n  file       forged, round 0"
    assert main(["model", "info", "--json", str(path)]) == 0  # JSON keeps the text as it is
    assert json.loads(capsys.readouterr().out)["producer"] == "node\x1b[2J\n  file       forged"


@pytest.mark.parametrize("flag, value, says", [
    ("--arch", "x" * 5000, "--arch: unknown architecture 'xxx"),
    ("--classes", "x" * 5000, "--classes 'xxx"),
    ("--classes", "a," * 3000, "--classes 'a,a,"),
    ("--classes", "", "--classes '': expected non-empty names"),  # was "--classes : expected ...", the value unseen
    ("--classes", " ", "--classes ' ': expected non-empty names"),
    ("--input-size", "1" * 4000, "--input-size: expected 1..4096 (the loader's limit), got 1111"),
    ("--in-channels", "1" * 4000, "--in-channels: expected 1..64 (the loader's limit), got 1111"),
    ("--widths", "x" * 5000, "--widths 'xxx"),
    ("--hidden", "x" * 5000, "--hidden 'xxx"),
    ("--blocks", "x" * 5000, "--blocks 'xxx"),
])
def test_import_refusal_of_a_long_value_shows_it_cut(flag: str, value: str, says: str, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """fol model import wrote the refused value whole: a 5,000-character --arch, --classes, --widths,
    --hidden or --blocks, or a 4,000-digit --input-size or --in-channels, made a 4-5 kB error line. It is
    now cut (brief) or shown by its first digits (shown), before the weights are read."""
    args = {"--arch": "cnn-small", "--classes": "a,b", flag: value}
    argv = ["model", "import", str(tmp_path / "w.safetensors"), *[x for kv in args.items() for x in kv],
            "--out", str(tmp_path / "m.safetensors")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and len(err) < 400 and says in err, err[:300]
    assert not any(tmp_path.iterdir())


def test_import_refusal_of_the_producer_names_producer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A --producer of bytes that are not UTF-8 was refused as '--classes a,b: model card field 'producer'
    ...': the line named the wrong flag."""
    save_file(build_model(SPEC, seed=1).state_dict(), str(tmp_path / "w.safetensors"))
    argv = ["model", "import", str(tmp_path / "w.safetensors"), "--arch", "cnn-small", "--classes", "a,b",
            "--producer", "lab\udcff", "--out", str(tmp_path / "m.safetensors")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("fol model: error: --producer: model card field 'producer' is 'lab\\udcff', not valid "
                          "UTF-8 text") and len(err.splitlines()) == 1, err
    assert not (tmp_path / "m.safetensors").exists()
    assert main([*argv[:-4], "--producer", "lab", *argv[-2:]]) == 0  # the card takes a UTF-8 producer
    assert load_model(tmp_path / "m.safetensors").card.producer == "lab"


@pytest.mark.parametrize("value", ["0", str(4 * 10**9 + 1), str(10**400)])
def test_info_max_bytes_is_bounded_as_the_agents_payload_limit(value: str, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """--max-bytes is at most the node agent's bound of [limits] max_payload_bytes (4 GB), as fol personalize's:
    10**400 was taken (exit 0)."""
    _good(tmp_path / "m.safetensors")
    assert main(["model", "info", "--max-bytes", value, str(tmp_path / "m.safetensors")]) == 2
    out, err = capsys.readouterr()
    assert not out and err.startswith("fol model: error: --max-bytes: expected a number of bytes in "
                                      "1..4,000,000,000 (4 GB), got ") and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("kind", ["control", "long"])
def test_import_and_info_name_the_files_through_brief(kind: str, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """fol model import's summary printed '<weights> -> <out>: ...' and fol model info's first line the file
    as given or only escaped: a newline or a terminal's escape went to stdout as it is (import), a path of
    3,000 characters made a 3 kB line (both). Each names the file through brief(), as their refusals do."""
    from swarmbase.tomlcheck import brief

    folder = odd_folder(tmp_path, kind)
    weights, out = folder / "w.safetensors", folder / "m.safetensors"
    save_file(build_model(SPEC, seed=0).state_dict(), str(weights))
    assert main(["model", "import", str(weights), "--arch", "cnn-small", "--classes", "a,b", "--out", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{brief(weights)} -> {brief(out)}: cnn-small, 2 classes"), lines
    assert lines[0].isprintable() and len(lines[0]) < 600, lines
    assert main(["model", "info", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 6 and lines[0].startswith(f"{brief(out)}: valid, format version"), lines
    assert all(line.isprintable() and len(line) < 300 for line in lines), lines
