"""End to end on files: ``fol pretrain`` for four nodes, then ``fol personalize``
with a neighbours folder holding models of two architectures, plus the bad-input
paths (empty folder, non-model files, invalid payloads, other class sets)."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from fol.checkpoint import load_model, read_card
from fol.cli import main
from fol.nodedata import load_node_data, parse_node_data
from fol.train import evaluate

from _names import odd_folder

DATA = "dataset=synthetic-hurricane,nodes=4,node={k},psi=0.5,per_node=150,size=1600,seed=3"
FAST = """[fol]
finetune_epochs = 2
post_finetune_epochs = 1
gate_epochs = 1
distill_epochs = 3
top_k = 2
"""


@pytest.fixture(scope="module")
def swarm_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("swarm")
    archs = ["cnn-small", "cnn-small", "resnet-small", "cnn-medium"]
    for k, arch in enumerate(archs):
        rc = main(["pretrain", "--data", DATA.format(k=k), "--arch", arch, "--epochs", "4",
                   "--out", str(root / f"node{k}.safetensors")])
        assert rc == 0
    (root / "fol.toml").write_text(FAST)
    return root


def _personalize(root: Path, neighbours: Path, out: Path, *extra: str) -> int:
    return main(["personalize", "--model", str(root / "node0.safetensors"), "--data", DATA.format(k=0),
                 "--neighbors", str(neighbours), "--out", str(out), "--config", str(root / "fol.toml"), *extra])


def _first_fol_an_round(root: Path, tmp_path: Path) -> tuple[Path, Path, Callable[..., int]]:
    """A first fol-an round (--top-k 2) of node0 with node2 as its one neighbour, into tmp_path/out: the
    neighbours folder, --out, and the run again (extra options after those)."""
    neighbours = tmp_path / "received"
    neighbours.mkdir()
    shutil.copy(root / "node2.safetensors", neighbours)
    out = tmp_path / "out"

    def run(*extra: str) -> int:
        return _personalize(root, neighbours, out, "--variant", "fol-an", "--top-k", "2", *extra)

    assert run() == 0
    return neighbours, out, run


def test_personalize_with_heterogeneous_neighbours(swarm_files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    neighbours = tmp_path / "received"
    neighbours.mkdir()
    for k in (1, 2, 3):
        shutil.copy(swarm_files / f"node{k}.safetensors", neighbours)
    (neighbours / "notes.txt").write_text("not a model")
    out = tmp_path / "out"
    assert _personalize(swarm_files, neighbours, out) == 0
    printed = capsys.readouterr().out
    # the node is named by its model's producer, which `fol pretrain` set from the data spec (node=0)
    assert read_card(swarm_files / "node0.safetensors").producer == "node-0"
    assert printed.splitlines()[0] == "FOL round 1 on node-0 (variant fol)"
    assert "skipped file notes.txt" in printed

    report = json.loads((out / "report.json").read_text())
    archs = {c["arch"] for c in report["candidates"] if not c["own"]}
    assert archs == {"cnn-small", "resnet-small", "cnn-medium"}
    assert len(report["selected"]) == 2
    assert sum(report["weights"]) == pytest.approx(1.0, abs=1e-5)
    for c in report["candidates"]:
        if not c["own"]:
            assert c["params_after"] < c["params_before"]  # alignment pruning removed channels
            assert c["macs_after"] < c["macs_before"]
            assert c["score_before"] is not None
    assert set(report["accuracy"]) >= {"local", "student", "ensemble", "deployed"}
    assert {"finetune", "prune", "post_finetune", "ensemble", "distill"} <= set(report["seconds"])

    # The personalized model keeps the node's own architecture and loads through the safe format.
    loaded = load_model(out / "model.safetensors")
    assert loaded.card.spec.arch == "cnn-small"
    assert loaded.card.round == 1
    assert report["node"] == loaded.card.producer == "node-0" and report["variant"] == "fol"
    # Variant fol deploys the student: the saved model scores the student's (and the deployed) accuracy on
    # the node's own splits, and it is not the node's own model (whose accuracy may coincide at this size).
    data = load_node_data(parse_node_data(DATA.format(k=0)))
    model = loaded.model.eval()
    saved = {"val": evaluate(model, *data.val.tensors()).accuracy, "test": evaluate(model, *data.test.tensors()).accuracy}
    assert report["accuracy"]["student"] == saved and report["accuracy"]["deployed"] == saved
    own = load_model(swarm_files / "node0.safetensors").model.state_dict()
    assert any(not torch.equal(t, own[k]) for k, t in loaded.model.state_dict().items())
    dist = report["distillation"]
    assert dist["kl_after"] < dist["kl_before"] or (dist["reverted"] and dist["kl_after"] == dist["kl_before"])


def test_personalize_fol_a_writes_ensemble_members(swarm_files: Path, tmp_path: Path) -> None:
    _, out, _ = _first_fol_an_round(swarm_files, tmp_path)
    ens = json.loads((out / "ensemble.json").read_text())
    assert len(ens["members"]) == 2
    assert sum(m["weight"] for m in ens["members"]) == pytest.approx(1.0, abs=1e-5)
    own_classes = read_card(swarm_files / "node0.safetensors").class_names
    sources = set()
    for m in ens["members"]:
        loaded = load_model(out / m["file"])
        assert loaded.card.class_names == own_classes
        sources.add(loaded.card.extra["source"])
    assert sources == {m["source"] for m in ens["members"]}


def test_empty_neighbours_folder_is_one_clear_error(swarm_files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert _personalize(swarm_files, empty, tmp_path / "out") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is empty" in err[0] and str(empty) in err[0]
    assert not (tmp_path / "out").exists()


def test_local_variant_needs_no_neighbours_folder(swarm_files: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """--variant local deploys the pretrained model and collects nothing, yet --neighbors was a
    required argument and its folder had to hold a model file: the local row of a node that has
    received nothing could not be written. Now local reads no neighbour folder (one given is not
    read) and every other variant still needs one, said in one line naming the flag."""
    base = ["personalize", "--model", str(swarm_files / "node0.safetensors"), "--data", DATA.format(k=0),
            "--config", str(swarm_files / "fol.toml")]
    out = tmp_path / "out"
    assert main([*base, "--out", str(out), "--variant", "local"]) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["variant"] == "local" and report["received"] == [] and report["skipped_files"] == []
    own = load_model(swarm_files / "node0.safetensors").model.state_dict()
    deployed = load_model(out / "model.safetensors")
    assert deployed.card.round == 1 and all(torch.equal(own[k], v) for k, v in deployed.model.state_dict().items())
    empty = tmp_path / "empty"
    empty.mkdir()  # a folder given with local is not read: an empty one is no error
    assert main([*base, "--out", str(tmp_path / "out2"), "--variant", "local", "--neighbors", str(empty)]) == 0
    assert json.loads((tmp_path / "out2" / "report.json").read_text())["received"] == []
    capsys.readouterr()
    assert main([*base, "--out", str(tmp_path / "out3"), "--variant", "fol"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fol personalize: error: --neighbors: ") and "local" in err[0], err
    assert not (tmp_path / "out3").exists()


def test_only_invalid_payloads_fail_with_reasons(swarm_files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad"
    bad.mkdir()
    good = (swarm_files / "node1.safetensors").read_bytes()
    (bad / "truncated.safetensors").write_bytes(good[: len(good) // 2])
    tampered = bytearray(good)
    tampered[-10] ^= 0xFF
    (bad / "tampered.safetensors").write_bytes(bytes(tampered))
    (bad / "garbage.safetensors").write_bytes(b"\x00" * 64)
    assert _personalize(swarm_files, bad, tmp_path / "out") == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    # each file is named with the reason the loader refused it (not just listed), by its name in the folder
    for name, reason in (("truncated", r"truncated model file \(cut short: its header describes"),
                         ("tampered", r"model sha256 [0-9a-f]+\.\.\. does not match the card's [0-9a-f]+\.\.\. "
                                      r"\(corrupted or tampered payload\)"),
                         ("garbage", r"safetensors header is not valid JSON")):
        assert re.search(rf"(\(skipped: |; ){name}\.safetensors: ['\"]?{reason}", err), (name, err)  # quoted if cut
    assert err.count(str(bad)) == 1, err  # the folder, once
    assert not (tmp_path / "out").exists()


def test_model_with_other_class_set_is_skipped(swarm_files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = tmp_path / "other"
    other.mkdir()
    rc = main(["pretrain", "--data", "dataset=synthetic-wildfire,nodes=4,node=1,per_node=150,size=1600",
               "--epochs", "1", "--out", str(other / "wild.safetensors")])
    assert rc == 0
    shutil.copy(swarm_files / "node1.safetensors", other)
    out = tmp_path / "out"
    assert _personalize(swarm_files, other, out) == 0
    report = json.loads((out / "report.json").read_text())
    skipped = [r for r in report["received"] if not r["used"]]
    assert len(skipped) == 1 and "class set" in skipped[0]["reason"]
    assert "wild" in skipped[0]["name"]


def test_only_models_of_another_class_set_name_why_in_the_error(swarm_files: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Every model read but none usable: the one line says why (it said 'skipped: none')."""
    other = tmp_path / "other"
    other.mkdir()
    rc = main(["pretrain", "--data", "dataset=synthetic-wildfire,nodes=4,node=1,per_node=150,size=1600",
               "--epochs", "1", "--out", str(other / "wild.safetensors")])
    assert rc == 0
    capsys.readouterr()
    assert _personalize(swarm_files, other, tmp_path / "out") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "skipped: none" not in err[0]
    assert "wild.safetensors: class set ['nowildfire', 'wildfire'] differs" in err[0]
    assert not (tmp_path / "out").exists()


def test_too_small_data_is_one_clear_error(swarm_files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["pretrain", "--data", "dataset=synthetic-hurricane,nodes=4,node=0,per_node=8,size=400",
               "--out", str(tmp_path / "m.safetensors")])
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "samples" in err


def test_preset_flag_and_transfer_in_report(swarm_files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    import fol.personalize

    real_record = fol.personalize._record_accuracy

    def known_accuracies(report, state, val, test, extra) -> None:
        """At this size every model scores alike (no ensemble gain: the share is always undefined and
        the check below was vacuous); the round's recorded accuracies are set to known values, from
        which the round computes its transfer: on test the ensemble gains 3 images and the student
        keeps 1 (a share of 1/3), on val the ensemble gains half an image (under one: undefined)."""
        real_record(report, state, val, test, extra)
        for split, n, gain, kept in (("val", len(val[1]), 0.5, 0.0), ("test", len(test[1]), 3, 1)):
            report.accuracy["local"][split] = 0.5
            report.accuracy["student"][split] = 0.5 + kept / n
            report.accuracy["ensemble"][split] = 0.5 + gain / n

    monkeypatch.setattr(fol.personalize, "_record_accuracy", known_accuracies)
    neighbours = tmp_path / "received"
    neighbours.mkdir()
    for k in (1, 2):
        shutil.copy(swarm_files / f"node{k}.safetensors", neighbours)
    out = tmp_path / "out"
    assert _personalize(swarm_files, neighbours, out, "--preset", "paper") == 0
    assert ("transfer (student's share of the ensemble's gain over local): val undefined (ensemble gain ~0), "
            "test 33 %") in capsys.readouterr().out
    report = json.loads((out / "report.json").read_text())
    assert report["config"]["distill_inputs"] == "train" and report["config"]["own_in_top_k"] == "ranked"
    assert report["config"]["finetune_epochs"] == 2  # the --config table still applies on the preset
    assert report["transfer"]["val"] is None and report["transfer"]["test"] == pytest.approx(1 / 3, abs=1e-9)
    with pytest.raises(SystemExit) as exc:  # argparse rejects an unknown preset before any work
        main(["personalize", "--model", str(swarm_files / "node0.safetensors"), "--data", DATA.format(k=0),
              "--neighbors", str(neighbours), "--out", str(out), "--preset", "fast"])
    assert exc.value.code != 0
    assert "invalid choice: 'fast'" in capsys.readouterr().err


def test_keep_received_all_is_refused_in_one_line(swarm_files: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """``fol personalize`` runs one round from files: a pool of earlier rounds'
    models cannot exist there, so the option is an error, not silently ignored."""
    neighbours = tmp_path / "received"
    neighbours.mkdir()
    shutil.copy(swarm_files / "node1.safetensors", neighbours)
    config = tmp_path / "keep.toml"
    config.write_text(FAST + 'keep_received = "all"\n')
    out = tmp_path / "out"
    rc = main(["personalize", "--model", str(swarm_files / "node0.safetensors"), "--data", DATA.format(k=0),
               "--neighbors", str(neighbours), "--out", str(out), "--config", str(config)])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(config) in err[0] and "keep_received" in err[0] and "'round'" in err[0]
    assert not out.exists()


def test_pretrain_out_in_a_folder_not_yet_made_creates_it(tmp_path: Path) -> None:
    """``--out`` passes the output check when its folders can be created; they
    are, rather than the save failing after the training."""
    out = tmp_path / "received" / "deeper" / "node1.safetensors"
    rc = main(["pretrain", "--data", "dataset=synthetic-hurricane,nodes=2,node=1,per_node=60,size=400",
               "--arch", "cnn-small", "--epochs", "1", "--out", str(out)])
    assert rc == 0
    assert load_model(out).card.producer == "node-1"


@pytest.mark.parametrize("fallback", ["none", "received"])
def test_a_neighbour_whose_fine_tuning_diverges_is_skipped_not_fatal(swarm_files: Path, tmp_path: Path,
                                                                     fallback: str) -> None:
    """Finite but huge weights pass the loader (every value is finite) and make
    the fine-tuning loss non-finite: that neighbour is left out with the reason,
    the round goes on with the others (also when the others may fall back to
    their models as received, which pairs each candidate with its own model)."""
    import torch

    from fol.checkpoint import save_model

    neighbours = tmp_path / "received"
    neighbours.mkdir()
    shutil.copy(swarm_files / "node1.safetensors", neighbours)
    loaded = load_model(swarm_files / "node2.safetensors")
    with torch.no_grad():
        for p in loaded.model.parameters():
            if p.dim() > 1:
                p.fill_(1e30)
    save_model(neighbours / "huge.safetensors", loaded.model, loaded.card)
    out = tmp_path / "out"
    config = tmp_path / "fallback.toml"
    config.write_text(FAST + f'align_fallback = "{fallback}"\n')
    assert main(["personalize", "--model", str(swarm_files / "node0.safetensors"), "--data", DATA.format(k=0),
                 "--neighbors", str(neighbours), "--out", str(out), "--config", str(config)]) == 0
    report = json.loads((out / "report.json").read_text())
    used = {r["name"]: r for r in report["received"]}
    assert used["node1"]["used"] and not used["huge"]["used"]
    assert "alignment failed" in used["huge"]["reason"] and "non-finite" in used["huge"]["reason"]
    assert [c["name"] for c in report["candidates"]] == ["node-0 (own)", "node1"]
    assert load_model(out / "model.safetensors").card.round == 1


def test_entries_named_like_models_that_are_not_files_are_named(swarm_files: Path, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A folder or a link loop called *.safetensors is not an empty neighbours folder:
    the error names each entry and why it was not read."""
    folder = tmp_path / "received"
    folder.mkdir()
    (folder / "sub.safetensors").mkdir()
    (folder / "loop.safetensors").symlink_to(folder / "loop2")
    (folder / "loop2").symlink_to(folder / "loop.safetensors")
    assert _personalize(swarm_files, folder, tmp_path / "out") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is empty" not in err[0] and "no usable neighbour model" in err[0]
    for name in ("sub.safetensors", "loop.safetensors"):
        assert f"{name}: not a regular file" in err[0]


def test_a_failed_ensemble_save_leaves_the_previous_ensemble_whole(swarm_files: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """save_ensemble wrote member-<i> over the previous members, then ensemble.json:
    a write failing after them left the old ensemble.json naming the new members
    with the old weights. Now the previous ensemble stays whole, and the next save
    removes the members no longer listed."""
    import fol.personalize

    neighbours, out, run = _first_fol_an_round(swarm_files, tmp_path)

    def snapshot() -> dict[str, bytes]:
        ens = json.loads((out / "ensemble.json").read_text())
        return {m["file"]: (out / m["file"]).read_bytes() for m in ens["members"]}

    before = snapshot()
    real_write = fol.personalize.write_json_atomic

    def failing_write(path, *args, **kwargs):  # the disk fills up once the members are written
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(fol.personalize, "write_json_atomic", failing_write)
    for old in neighbours.iterdir():  # another neighbour: other members
        old.unlink()
    shutil.copy(swarm_files / "node3.safetensors", neighbours)
    assert run() == 2  # one line naming the file (the CLI's write error)
    assert snapshot() == before  # the previous ensemble.json and every member it names, unchanged
    monkeypatch.setattr(fol.personalize, "write_json_atomic", real_write)
    assert run() == 0
    after = json.loads((out / "ensemble.json").read_text())
    assert sorted(p.name for p in out.glob("member-*.safetensors")) == sorted(m["file"] for m in after["members"])
    assert all(load_model(out / m["file"]).card.round == 1 for m in after["members"])


def test_a_manifest_that_cannot_be_written_is_one_line_saying_what_was_expected(
        swarm_files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The manifest's writer let the system's error out as it was ('--out <out>: cannot write
    personalize.manifest.json (No space left on device)', here; a traceback from a caller that did not catch it):
    it is the manifest writer's one line, naming the manifest in --out and what was expected, and --out keeps
    every previous output."""
    import swarmbase.manifest
    from swarmbase.tomlcheck import brief

    _, out, run = _first_fol_an_round(swarm_files, tmp_path)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real_write = swarmbase.manifest.write_json_atomic

    def full_disk(path, *args, **kwargs):
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(swarmbase.manifest, "write_json_atomic", full_disk)
    capsys.readouterr()
    assert run() == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"fol personalize: error: {brief(out / 'personalize.manifest.json', keep_end=40)}: cannot write the "
                   f"manifest of fol personalize (No space left on device); expected room for it on the disk: free "
                   f"some space"], err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    monkeypatch.setattr(swarmbase.manifest, "write_json_atomic", real_write)
    assert run() == 0


@pytest.mark.parametrize("failing", ["report.json", "ensemble.json"])
def test_a_failed_write_leaves_the_previous_outputs_together(swarm_files: Path, tmp_path: Path, failing: str,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """model.safetensors was replaced before ensemble.json and report.json were written: a
    write failing after it left the new model next to the previous report. Now --out keeps
    every previous output, and no temporary file."""
    import fol.fileio
    import fol.personalize

    _, out, run = _first_fol_an_round(swarm_files, tmp_path)
    (out / "model.safetensors").write_bytes(b"the previous model")  # so that any new model differs
    (out / "report.json").write_text('{"the": "previous report"}')
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real_write = fol.fileio.write_json_atomic

    def failing_write(path, *args, **kwargs):
        if Path(path).name == failing or Path(path).name.startswith(f".{failing}."):
            raise OSError(28, "No space left on device", str(path))
        real_write(path, *args, **kwargs)

    monkeypatch.setattr(fol.fileio, "write_json_atomic", failing_write)
    monkeypatch.setattr(fol.personalize, "write_json_atomic", failing_write)
    capsys.readouterr()
    assert run() == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--out {out}: cannot write {failing} (No space left on device)" in err[0], err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    monkeypatch.setattr(fol.fileio, "write_json_atomic", real_write)
    monkeypatch.setattr(fol.personalize, "write_json_atomic", real_write)
    assert run() == 0
    assert load_model(out / "model.safetensors").card.round == 1
    assert json.loads((out / "report.json").read_text())["outputs"] == {"model": "model.safetensors",
                                                                        "ensemble": "ensemble.json"}
    assert not [p.name for p in out.iterdir() if p.name.startswith(".")]


def test_data_that_splits_otherwise_than_the_models_pretraining_is_refused(
        swarm_files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """node0's model was pretrained on node=0's shard; with node=1's (or another seed's) split, its
    'test' images could be ones it trained on and its accuracies would be inflated without a word.
    A personalized model's card keeps the spec, so the next round is checked too."""
    neighbours = tmp_path / "received"
    neighbours.mkdir()
    shutil.copy(swarm_files / "node1.safetensors", neighbours)
    for other in (DATA.format(k=1), DATA.format(k=0).replace("seed=3", "seed=4")):
        rc = main(["personalize", "--model", str(swarm_files / "node0.safetensors"), "--data", other,
                   "--neighbors", str(neighbours), "--out", str(tmp_path / "out"), "--config",
                   str(swarm_files / "fol.toml")])
        assert rc == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(swarm_files / "node0.safetensors") in err[0], err
        assert f"pretrained on --data {DATA.format(k=0)}" in err[0] and other in err[0], err
        assert not (tmp_path / "out").exists()
    # the same shard written otherwise (keys in another order, a data root) is the same split
    same = ",".join(reversed(DATA.format(k=0).split(","))) + f",root={tmp_path}"
    assert _personalize(swarm_files, neighbours, tmp_path / "out") == 0
    assert read_card(tmp_path / "out" / "model.safetensors").extra["data"] == DATA.format(k=0)
    shutil.copy(tmp_path / "out" / "model.safetensors", tmp_path / "round1.safetensors")
    (tmp_path / "e2.toml").write_text(FAST + "rounds = 2\n")  # round 2 of E = 2
    rc = main(["personalize", "--model", str(tmp_path / "round1.safetensors"), "--data", same,
               "--neighbors", str(neighbours), "--out", str(tmp_path / "out2"), "--config",
               str(tmp_path / "e2.toml")])
    assert rc == 0
    rc = main(["personalize", "--model", str(tmp_path / "round1.safetensors"), "--data", DATA.format(k=2),
               "--neighbors", str(neighbours), "--out", str(tmp_path / "out3"), "--config",
               str(tmp_path / "e2.toml")])
    assert rc == 2 and "pretrained on --data" in capsys.readouterr().err


def test_a_round_beyond_fol_rounds_is_refused_before_the_data_is_loaded(
        swarm_files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """fol.rounds (E) was read and ignored by fol personalize: a model of round E was personalized
    into round E + 1 whatever the config said. It is the last round, as on the node agent (whose
    on-demand personalize answers "all E round(s) are done"): a --model of round E or later is refused
    in one line naming the model, the round and where E came from."""
    from fol.checkpoint import save_model

    own = load_model(swarm_files / "node0.safetensors")
    for round_, config, e in ((1, None, 1), (1, "fol.toml", 1), (3, "e3.toml", 3)):
        model = tmp_path / f"round{round_}.safetensors"
        save_model(model, own.model, spec=own.card.spec, class_names=list(own.card.class_names),
                   producer="node-0", round=round_, extra=own.card.extra)
        (tmp_path / "e3.toml").write_text(FAST + "rounds = 3\n")
        given = [] if config is None else ["--config", str(swarm_files / config if config == "fol.toml" else tmp_path / config)]
        rc = main(["personalize", "--model", str(model), "--data", "dataset=no-such-dataset",
                   "--neighbors", str(tmp_path), "--out", str(tmp_path / "out"), *given])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1, err
        assert err[0].startswith(f"fol personalize: error: --model {model}: is the model of round {round_}, and "
                                 f"fol.rounds = {e} ("), err
        assert f"all {e} round(s) are done; set a larger rounds in the [fol] table of --config to run round " \
               f"{round_ + 1}" in err[0], err
        assert ("the default, no --config" if config is None else f"in {given[1]}") in err[0], err
        assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", ["control", "long"])
def test_every_line_names_the_model_config_and_out_through_brief(kind: str, swarm_files: Path, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """fol personalize named --model (a round past fol.rounds, another shard, other classes), --config (a
    keep_received or a finetune_freeze refusal, 'in <config>') and --out (the 'wrote ...' line) as given: a
    path of 3,000 characters made a 3 kB line, and the 'wrote' line printed a newline or a terminal's escape
    as it is. Each is one bounded line naming the file through brief(), as the neighbours' files are named."""
    from fol.checkpoint import save_model
    from swarmbase.tomlcheck import brief

    folder = odd_folder(tmp_path, kind)
    own = load_model(swarm_files / "node0.safetensors")
    model = folder / "round1.safetensors"
    save_model(model, own.model, spec=own.card.spec, class_names=list(own.card.class_names), producer="node-0",
               round=1, extra=own.card.extra)
    neighbours = tmp_path / "received"
    neighbours.mkdir()
    shutil.copy(swarm_files / "node1.safetensors", neighbours)  # cnn-small: 4 layers
    config = folder / "fol.toml"

    def one_line(argv: list[str], *files: Path) -> str:
        assert main(["personalize", "--neighbors", str(neighbours), "--out", str(tmp_path / "out"), *argv]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and len(err) < 900 and all(brief(f) in err for f in files), err
        assert not (tmp_path / "out").exists()
        return err

    config.write_text(FAST + "rounds = 1\n")
    assert "is the model of round 1" in one_line(["--model", str(model), "--data", DATA.format(k=0),
                                                  "--config", str(config)], model, config)
    config.write_text(FAST + "rounds = 2\n")
    assert "pretrained on --data" in one_line(["--model", str(model), "--data", DATA.format(k=1),
                                               "--config", str(config)], model)
    config.write_text(FAST + "topk = 2\n")  # the config reader's own refusal (FOLConfig.from_toml)
    assert "fol: unknown key 'topk'" in one_line(["--model", str(model), "--data", DATA.format(k=0),
                                                  "--config", str(config)], config)
    config.write_text("top_k = 2\n" + FAST)
    assert "top_k: a FOL key at top level" in one_line(["--model", str(model), "--data", DATA.format(k=0),
                                                        "--config", str(config)], config)
    config.write_text(FAST + "keep_received = 'all'\n")
    assert "fol.keep_received = 'all'" in one_line(["--model", str(model), "--data", DATA.format(k=0),
                                                    "--config", str(config)], config)
    config.write_text(FAST + "rounds = 2\nfinetune_freeze = 5\n")
    assert "fol.finetune_freeze must be at most 4" in one_line(["--model", str(model), "--data", DATA.format(k=0),
                                                                "--config", str(config)], config)
    out = folder / "out"
    assert main(["personalize", "--model", str(swarm_files / "node0.safetensors"), "--data", DATA.format(k=0),
                 "--variant", "local", "--out", str(out), "--config", str(swarm_files / "fol.toml")]) == 0
    wrote = _said(capsys.readouterr().out, "wrote")
    assert wrote == [f"wrote {brief(out / 'model.safetensors')}; report: {brief(out / 'report.json')}"], wrote
    assert wrote[0].isprintable() and len(wrote[0]) < 500, wrote


def _image_folder(root: Path, names: list[str], per_class: int = 12, seed: int = 0) -> Path:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    for ci, name in enumerate(names):
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            pixels = rng.integers(0, 80, (16, 16, 3)).astype(np.uint8)
            pixels[..., ci % 3] += 150
            Image.fromarray(pixels).save(root / name / f"{i}.png")
    return root


def test_image_folders_from_macos_and_linux_are_one_class_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A class folder 'café' that macOS keeps decomposed (NFD) and Linux as typed (NFC) is one class:
    a Linux node uses the model a macOS node pretrained (it was refused as another class set)."""
    import unicodedata

    for form, node in (("NFC", "linux"), ("NFD", "mac")):
        data = _image_folder(tmp_path / node, [unicodedata.normalize(form, n) for n in ("café", "caff", "tea")])
        assert main(["pretrain", "--data", str(data), "--arch", "cnn-small", "--epochs", "1",
                     "--out", str(tmp_path / f"{node}.safetensors")]) == 0
    neighbours = tmp_path / "received"
    neighbours.mkdir()
    shutil.copy(tmp_path / "mac.safetensors", neighbours)
    (tmp_path / "fol.toml").write_text(FAST.replace("top_k = 2", "top_k = 1"))
    rc = main(["personalize", "--model", str(tmp_path / "linux.safetensors"), "--data", str(tmp_path / "linux"),
               "--neighbors", str(neighbours), "--out", str(tmp_path / "out"), "--config", str(tmp_path / "fol.toml")])
    assert rc == 0, capsys.readouterr().err
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert [r["used"] for r in report["received"]] == [True]
    assert read_card(tmp_path / "out" / "model.safetensors").class_names == ("caff", "café", "tea")


def test_a_neighbours_folder_without_model_files_says_what_it_holds(swarm_files: Path, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Only a sidecar card and a sub-folder of models: the one line said 'is empty' (it is not)
    or 'no usable neighbour model (skipped: none)'; it names what is there and that no model file is."""
    for layout in ("sidecar", "sub-folder", "both"):
        folder = tmp_path / layout
        folder.mkdir()
        if layout != "sub-folder":
            (folder / "node1.json").write_text("{}")
        if layout != "sidecar":
            (folder / "round-1").mkdir()
            shutil.copy(swarm_files / "node1.safetensors", folder / "round-1")
        assert _personalize(swarm_files, folder, tmp_path / "out") == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "is empty" not in err[0] and "skipped: none" not in err[0], err
        assert f"neighbours folder {folder} holds no model file (*.safetensors)" in err[0], err
        assert ("node1.json" in err[0]) == (layout != "sub-folder")
        assert ("round-1/ (sub-folders are not read)" in err[0]) == (layout != "sidecar")
        assert not (tmp_path / "out").exists()


def test_a_neighbours_folder_without_model_files_names_its_entries_in_a_bounded_line(
        swarm_files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The "holds no model file" line listed five entries with their names in full: five notes of
    250-character names made a line of 1,422 characters (a file system taking longer names, a longer
    one still). Each name is now cut as the "no usable neighbour model" line cuts a file's (past
    SHOWN_NAME_CHARS, its end kept), escaped as that line's are, the others counted."""
    import os

    from fol.personalize_cli import SHOWN_NAME_CHARS, SHOWN_REASONS

    folder = tmp_path / "received"
    folder.mkdir()
    for i in range(7):  # 250 characters: Linux takes names of at most 255 bytes
        (folder / (f"notes-{i}-" + "x" * 240 + ".txt")).write_text("x")
    os.mkdir(os.fsencode(folder) + b"/a\n\x1b[2J\xff")  # a newline, a terminal escape, a byte that is not UTF-8
    assert _personalize(swarm_files, folder, tmp_path / "out") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    line = err[0]
    head = f"fol personalize: error: neighbours folder {folder} holds no model file (*.safetensors), only "
    # escaped once (brief, as printable() writes every line): the byte that is not UTF-8 too, not the
    # text utf8_text makes of it, whose backslash was escaped in turn (naming a file holding a backslash)
    assert line.startswith(head + "a\\n\\x1b[2J\\udcff/ (sub-folders are not read), 'notes-0-xxx"), line
    for i in range(SHOWN_REASONS - 1):  # each told apart by its start, its end kept
        assert line.count(f"'notes-{i}-xxx") == 1, line
    assert line.count("xxx.txt'") == SHOWN_REASONS - 1 and "notes-4-" not in line, line
    assert line.endswith(" and 3 more; put the received models in it"), line
    bound = len(head) + SHOWN_REASONS * (SHOWN_NAME_CHARS + len("/ (sub-folders are not read), ")) + 50
    assert len(line) <= bound < 700, (len(line), bound)
    assert not (tmp_path / "out").exists()


def test_a_data_folder_or_model_file_whose_name_is_not_utf8_is_refused_before_any_work(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A --data folder named b'set\\xff' (class folders of UTF-8 names) was recorded in the card with that
    byte escaped ('set\\udcff'), a path naming no folder: fol personalize then passed over its check of the
    shard, and a model pretrained on the whole folder was personalized on a Dirichlet shard of it (measured:
    exit 0). A card records --data and --model's file name as typed, so a path of bytes that are not UTF-8
    is now refused before any work, in one line naming the flag and asking for a UTF-8 path (a link to the
    folder under a UTF-8 name does): fol pretrain trained, fol personalize ran its round, before."""
    import os

    import fol.stages

    data = _image_folder(tmp_path / os.fsdecode(b"set\xff"), ["dry", "wet"])
    link = tmp_path / "set"  # what the refusal suggests: the folder under a UTF-8 name
    link.symlink_to(data)
    escaped = str(data).encode("utf-8", "backslashreplace").decode()
    trained: list[int] = []
    pretrain = fol.stages.pretrain
    monkeypatch.setattr(fol.stages, "pretrain", lambda *a, **k: trained.append(1) or pretrain(*a, **k))
    model = tmp_path / "m.safetensors"
    rc = main(["pretrain", "--data", str(data), "--arch", "cnn-small", "--epochs", "1", "--out", str(model)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1, err
    assert err[0] == (f"fol pretrain: error: --data {escaped}: holds bytes that are not UTF-8 (shown escaped), and "
                      f"the model card records the spec as UTF-8 text; expected a UTF-8 path (rename the file or "
                      f"folder, or give a link to it whose name is UTF-8)"), err
    assert not trained and not model.exists()

    rc = main(["pretrain", "--data", str(link), "--arch", "cnn-small", "--epochs", "1", "--out", str(model)])
    assert rc == 0 and trained == [1], capsys.readouterr().err
    assert read_card(model).extra["data"] == str(link)  # as typed: fol personalize reads it back
    out = tmp_path / "out"
    own = tmp_path / os.fsdecode(b"own\xfd.safetensors")
    shutil.copy(model, own)
    for flags, named in ((["--model", str(model), "--data", str(data)], f"--data {escaped}: holds bytes"),
                         (["--model", str(own), "--data", str(link)],
                          f"--model {tmp_path}/own\\udcfd.safetensors: its file name holds bytes")):
        rc = main(["personalize", *flags, "--out", str(out), "--variant", "local"])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1 and err[0].startswith(f"fol personalize: error: {named}"), err
        assert "expected a UTF-8 " in err[0] and not out.exists(), err
    # the card's spec is read back: another shard of the same folder is refused, the folder itself taken
    shard = f"dataset=imagefolder,path={link},partition=dirichlet,nodes=2,node=1,per_node=none"
    rc = main(["personalize", "--model", str(model), "--data", shard, "--out", str(out), "--variant", "local"])
    err = capsys.readouterr().err
    assert rc == 2 and "gives another shard or split" in err and not out.exists(), err
    rc = main(["personalize", "--model", str(model), "--data", str(link), "--out", str(out), "--variant", "local"])
    assert rc == 0, capsys.readouterr().err
    extra = read_card(out / "model.safetensors").extra
    assert (extra["personalized_from"], extra["data"]) == ("m.safetensors", str(link))


def test_pretrain_refuses_a_class_name_no_model_card_can_hold_before_training(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A class folder whose name is not UTF-8 (copied from an old Windows or Latin-1 disk) cannot be
    written into the model card: the one line came after the whole training, naming no folder."""
    import os

    import fol.stages

    data = _image_folder(tmp_path / "imgs", ["a", "b"])
    os.rename(os.fsencode(data / "b"), os.fsencode(data) + b"/caf\xe9")
    trained = []
    monkeypatch.setattr(fol.stages, "pretrain", lambda *a, **k: trained.append(1))
    assert main(["pretrain", "--data", str(data), "--epochs", "1", "--out", str(tmp_path / "m.safetensors")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"--data {data}" in err[0] and "not valid UTF-8" in err[0], err
    assert not trained and not (tmp_path / "m.safetensors").exists()


def test_ctrl_c_after_the_ensemble_is_written_keeps_the_previous_outputs(swarm_files: Path, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The ensemble was switched into --out before the model and the report were renamed in:
    Ctrl-C (or an error) between the two left the new ensemble.json beside the previous model
    and report. Now the whole set is staged and swapped in together (swarmbase's
    staged_outputs): --out keeps every previous output, byte for byte, and no staging folder."""
    import fol.personalize

    neighbours, out, run = _first_fol_an_round(swarm_files, tmp_path)
    (out / "notes.txt").write_text("the user's own file")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real_save = fol.personalize.save_ensemble

    def interrupted_save(*args, **kwargs):  # Ctrl-C as soon as the ensemble is written
        real_save(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(fol.personalize, "save_ensemble", interrupted_save)
    for old in neighbours.iterdir():  # another neighbour: other members
        old.unlink()
    shutil.copy(swarm_files / "node3.safetensors", neighbours)
    capsys.readouterr()
    assert run() == 130
    assert capsys.readouterr().err.strip().splitlines() == ["fol personalize: interrupted"]
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_round_without_ensemble_removes_the_previous_rounds_ensemble(swarm_files: Path, tmp_path: Path) -> None:
    """A --variant fol run into the --out of an earlier fol-an run left that run's
    ensemble.json and member files beside the new model and report (a stale ensemble
    that no longer matches the model). Now they go with the swap (that run's manifest
    lists them, unchanged); other files stay."""
    neighbours, out, _ = _first_fol_an_round(swarm_files, tmp_path)
    assert (out / "ensemble.json").exists() and list(out.glob("member-*.safetensors"))
    (out / "notes.txt").write_text("the user's own file")
    assert _personalize(swarm_files, neighbours, out, "--variant", "fol") == 0
    assert sorted(p.name for p in out.iterdir()) == ["model.safetensors", "notes.txt", "personalize.manifest.json",
                                                     "report.json"]
    assert json.loads((out / "report.json").read_text())["outputs"] == {"model": "model.safetensors"}


def _local(root: Path, out: Path, *extra: str) -> int:
    """A round of --variant local: no neighbour, no training (the cheap run that writes no ensemble)."""
    return main(["personalize", "--model", str(root / "node0.safetensors"), "--data", DATA.format(k=0),
                 "--variant", "local", "--out", str(out), "--config", str(root / "fol.toml"), *extra])


def _said(printed: str, word: str) -> list[str]:
    return [line for line in printed.splitlines() if line.startswith(f"{word} ")]


def test_the_users_own_ensemble_files_in_out_survive_a_run_that_does_not_write_them(
        swarm_files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run that deploys no ensemble removed every ensemble.json and member-*.safetensors in --out,
    the user's own too (--out . in a folder of ensembles). Now only the files the previous run's manifest
    lists, unchanged, are removed: the user's are kept byte for byte and named in a "kept" line, in a
    folder with no manifest (a first run) and in one whose manifest does not list them."""
    out = tmp_path / "out"
    out.mkdir()
    mine = {"member-9.safetensors": b"the user's own member", "ensemble.json": b'{"the": "user\'s own"}'}
    for name, data in mine.items():
        (out / name).write_bytes(data)
    for run in range(2):  # a first run, then one after it (its manifest lists neither)
        capsys.readouterr()
        assert _local(swarm_files, out) == 0
        printed = capsys.readouterr().out
        assert {name: (out / name).read_bytes() for name in mine} == mine
        why = "no personalize.manifest.json there says fol personalize wrote it"
        assert _said(printed, "kept") == [f"kept       {out / name} (not an output of this run; {why})"
                                          for name in ("ensemble.json", "member-9.safetensors")], printed
        assert _said(printed, "removed") == []
        assert sorted(p.name for p in out.iterdir()) == ["ensemble.json", "member-9.safetensors", "model.safetensors",
                                                         "personalize.manifest.json", "report.json"]
        assert json.loads((out / "personalize.manifest.json").read_text())["files"].keys() == {"model.safetensors",
                                                                                             "report.json"}


def test_an_earlier_runs_members_are_removed_when_untouched_and_kept_when_edited(
        swarm_files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A fol-an run writes its members and ensemble.json and lists them, with their sizes and sha256, in
    personalize.manifest.json. The next run that writes fewer members (none: --variant local) removes
    the listed ones it finds unchanged, each in a "removed" line, and keeps one edited since (a "kept"
    line: changed since); from then on that one is the user's, listed by no manifest."""
    _, out, _ = _first_fol_an_round(swarm_files, tmp_path)
    members = sorted(p.name for p in out.glob("member-*.safetensors"))
    assert len(members) == 2
    listed = json.loads((out / "personalize.manifest.json").read_text())["files"]
    assert listed.keys() == {"model.safetensors", "report.json", "ensemble.json", *members}
    assert listed[members[0]]["bytes"] == (out / members[0]).stat().st_size
    edited, untouched = members
    with (out / edited).open("ab") as fh:
        fh.write(b"\0")  # one byte more: the user's now
    kept_bytes = (out / edited).read_bytes()
    capsys.readouterr()
    assert _local(swarm_files, out) == 0
    printed = capsys.readouterr().out
    assert sorted(_said(printed, "removed")) == sorted(
        f"removed    {out / name} (an earlier run's; not an output of this one)" for name in ("ensemble.json", untouched))
    assert _said(printed, "kept") == [
        f"kept       {out / edited} (not an output of this run; changed since fol personalize wrote it)"]
    assert sorted(p.name for p in out.iterdir()) == sorted([edited, "model.safetensors", "personalize.manifest.json",
                                                            "report.json"])
    assert (out / edited).read_bytes() == kept_bytes
    assert json.loads((out / "personalize.manifest.json").read_text())["files"].keys() == {"model.safetensors",
                                                                                         "report.json"}


def test_a_member_no_manifest_lists_is_read_as_model_not_refused_and_kept(swarm_files: Path, tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """--model out/member-...safetensors was refused as a file the run removes whatever its origin; a run
    removes only the members the previous run's manifest lists, so the user's own member file (here a copy
    of the node's model, no manifest) is a model like any other: read, and kept."""
    out = tmp_path / "out"
    out.mkdir()
    mine = out / "member-0-00000000.safetensors"
    shutil.copy(swarm_files / "node0.safetensors", mine)
    capsys.readouterr()
    assert main(["personalize", "--model", str(mine), "--data", DATA.format(k=0), "--variant", "local",
                 "--out", str(out), "--config", str(swarm_files / "fol.toml")]) == 0
    assert _said(capsys.readouterr().out, "kept") == [
        f"kept       {mine} (not an output of this run; no personalize.manifest.json there says fol personalize "
        f"wrote it)"]
    assert mine.read_bytes() == (swarm_files / "node0.safetensors").read_bytes()
    assert read_card(out / "model.safetensors").extra["personalized_from"] == mine.name


_SHA = "0" * 64


@pytest.mark.parametrize("text, problem", [
    (b"garbage", "not a manifest of fol personalize (Expecting value: line 1 column 1 (char 0))"),
    (b" " * (256 * 1024 + 1), f"{256 * 1024 + 1} bytes; a manifest of fol personalize may have at most {256 * 1024}"),
    (b'{"format": 1, "files": {}, "more": 1}', "top level: unknown key 'more' (allowed: files, format)"),
    (f'{{"format": 1, "files": {{"member-/../../notes.safetensors": {{"bytes": 10, "sha256": "{_SHA}"}}}}}}'.encode(),
     "files: unknown key 'member-/../../notes.safetensors' (allowed: ensemble.json, member-*.safetensors, "
     "model.safetensors, report.json)"),
    (b'{"format": 1, "files": {"ensemble.json": {"bytes": 1, "sha256": "ABC"}}}',
     "files.ensemble.json.sha256: expected 64 lowercase hex digits, got 'ABC'"),
], ids=["not-json", "oversized", "other-key", "a-path", "bad-sha256"])
def test_a_garbage_manifest_is_one_line_before_any_work_and_nothing_is_removed_or_written(
        text: bytes, problem: str, swarm_files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The manifest in --out decides what a run may remove, so it is read as untrusted input before the
    model or the data: one that is not one fol personalize writes is one line naming it, status 2, and
    --out (the earlier outputs, the user's notes beside it, the manifest) stays byte for byte."""
    import fol.checkpoint

    out = tmp_path / "out"
    out.mkdir()
    for name in ("model.safetensors", "report.json", "ensemble.json", "member-0-00000000.safetensors"):
        (out / name).write_bytes(f"an earlier {name}".encode())
    (tmp_path / "notes.safetensors").write_text("the user's")
    (out / "personalize.manifest.json").write_bytes(text)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    monkeypatch.setattr(fol.checkpoint, "load_model", lambda *a, **k: pytest.fail("read before the manifest"))
    assert _local(swarm_files, out) == 2
    err = capsys.readouterr().err.strip().splitlines()
    manifest = out / "personalize.manifest.json"
    assert len(err) == 1 and err[0].startswith(f"fol personalize: error: {manifest}: {problem}"), err
    assert err[0].endswith("; it records which files in --out fol personalize wrote: remove it (the files it "
                           "lists are then kept) or give another --out"), err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert (tmp_path / "notes.safetensors").read_text() == "the user's"


def test_the_manifest_of_the_largest_ensemble_written_is_one_the_next_run_reads(tmp_path: Path) -> None:
    """The manifest lists every member: the most a run writes (MAX_MEMBERS, at the longest member-<i>-<tag>
    names and sizes of a terabyte) plus the model, the report and ensemble.json fit the limits its reader
    has, so no run writes a manifest the next one refuses."""
    from fol.personalize_cli import MANIFEST, MAX_MEMBERS

    names = ["model.safetensors", "report.json", "ensemble.json",
             *(f"member-{i}-ffffffff.safetensors" for i in range(MAX_MEMBERS))]
    for name in names:
        (tmp_path / name).write_bytes(b"x")
    MANIFEST.write(tmp_path / MANIFEST.name, [tmp_path / name for name in names])
    manifest = tmp_path / MANIFEST.name
    text = manifest.read_text().replace('"bytes": 1,', f'"bytes": {10 ** 12},')
    manifest.write_text(text)
    assert len(text.encode()) <= MANIFEST.max_bytes
    assert len(MANIFEST.read(tmp_path)) == MAX_MEMBERS + 3


@pytest.mark.parametrize("top_k, in_config, said", [
    (1025, False, "--top-k: must be at most 1,024 (ensemble members), got 1025"),
    (10**400, False, "--top-k: must be at most 1,024 (ensemble members), got 10000000000000000000... (401 digits)"),
    (1025, True, "fol.top_k must be at most 1,024 (ensemble members), got 1025"),
], ids=["flag", "flag-10**400", "config"])
def test_an_ensemble_larger_than_a_manifest_lists_is_refused_before_the_round(
        top_k: int, in_config: bool, said: str, swarm_files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """K beyond MAX_MEMBERS (fol.top_k's bound, FOLConfig's, a scenario's too) with as many neighbours allowed
    would train, then fail to record its members: said in one line before the model is read, naming the flag or
    the config's field; with the default Q too (10**400 was taken, exit 0)."""
    import fol.checkpoint
    from fol.personalize_cli import MAX_MEMBERS

    config = tmp_path / "fol.toml"
    fast = FAST.replace("top_k = 2", f"top_k = {top_k}") if in_config else FAST
    config.write_text(fast + f"max_neighbours = {MAX_MEMBERS}\n")
    monkeypatch.setattr(fol.checkpoint, "load_model", lambda *a, **k: pytest.fail("read before the check"))
    received = tmp_path / "received"
    received.mkdir()
    argv = ["personalize", "--model", str(swarm_files / "node0.safetensors"), "--data", DATA.format(k=0),
            "--neighbors", str(received), "--out", str(tmp_path / "out"), "--variant", "fol-an",
            "--config", str(config)] + ([] if in_config else ["--top-k", str(top_k)])
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("fol personalize: error: ") and err[0].endswith(said), err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_a_bad_neighbours_folder_is_refused_before_the_data_is_loaded(kind: str, swarm_files: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """A missing (mistyped) --neighbors was found only after the model and the node's whole
    dataset had been loaded (minutes for a large image folder). Now it is checked with
    --out, before any long work, and the line says which of the two it is."""
    import fol.nodedata

    def no_load(*args, **kwargs):
        raise AssertionError("the node's data was loaded before --neighbors was checked")

    monkeypatch.setattr(fol.nodedata, "load_node_data", no_load)
    folder = tmp_path / "received"
    if kind == "file":
        folder.write_text("not a folder")
    assert _personalize(swarm_files, folder, tmp_path / "out") == 2
    err = capsys.readouterr().err.strip().splitlines()
    what = "does not exist" if kind == "missing" else "exists and is not a folder"
    assert err == [f"fol personalize: error: --neighbors {folder}: {what}"], err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("spelling", ["same", "dot", "link"])
def test_out_in_the_neighbours_folder_is_refused_before_any_work(spelling: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """--out the --neighbors folder wrote the student and the ensemble members among the received
    models, and the next run read them back as neighbours. It is refused in one line, before the
    model or the data is read, however the folder is spelled. (--out inside --neighbors is fine:
    sub-folders of --neighbors are not read.)"""
    import fol.checkpoint

    monkeypatch.setattr(fol.checkpoint, "load_model", lambda *a, **k: pytest.fail("read before --out was checked"))
    received = tmp_path / "received"
    received.mkdir()
    (received / "node1.safetensors").write_bytes(b"never read")
    (tmp_path / "alias").symlink_to(received)
    out = {"same": received, "dot": received / ".", "link": tmp_path / "alias"}[spelling]
    assert main(["personalize", "--model", str(tmp_path / "own.safetensors"), "--data", DATA.format(k=0),
                 "--neighbors", str(received), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"fol personalize: error: --out {Path(out)}: is the --neighbors "
                                               f"folder"), err
    assert sorted(p.name for p in received.iterdir()) == ["node1.safetensors"]


def test_a_neighbour_of_other_classes_is_skipped_for_a_bounded_reason() -> None:
    """A neighbour's card may name up to the loader's 10,000 classes: the reason it is of
    no use quoted the whole list (here 96 kB), in the warning, the report and the error
    when no neighbour is usable; the lists are now shown cut."""
    from types import SimpleNamespace

    from fol.checkpoint import ModelCard
    from fol.models import ModelSpec
    from fol.personalize import check_received

    names = [f"a-class-of-a-long-name-{i:05d}" for i in range(3000)]
    card = ModelCard(ModelSpec("cnn-small", 3000), names)
    state = SimpleNamespace(class_names=["fire", "smoke"],
                            data=SimpleNamespace(train=SimpleNamespace(images=torch.zeros(1, 3, 32, 32))))
    reason = check_received(state, SimpleNamespace(card=card))
    assert reason is not None and reason.startswith("class set ['a-class-of-a-long-name-00000', ")
    assert "differs from the node's ['fire', 'smoke']" in reason and len(reason) < 500, len(reason)


def test_a_model_the_run_would_replace_in_out_is_refused_before_any_work(swarm_files: Path, tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """``--model out/model.safetensors --out out`` (the previous round's output as the next round's
    input) ran the whole round and replaced the input model with its output: the earlier round's
    model was lost. A --model that is a file the run replaces or removes in --out (its model, an
    ensemble member, also through a link) is now refused in one line, and the file is kept."""
    neighbours = tmp_path / "nb"
    neighbours.mkdir()
    shutil.copy(swarm_files / "node1.safetensors", neighbours)
    out = tmp_path / "out"
    assert _personalize(swarm_files, neighbours, out, "--variant", "fol-an", "--top-k", "2") == 0
    member = sorted(out.glob("member-*.safetensors"))[0]
    (tmp_path / "link.safetensors").symlink_to(out / "model.safetensors")
    for model in (out / "model.safetensors", member, tmp_path / "link.safetensors"):
        before = {p.name: p.read_bytes() for p in out.iterdir()}
        capsys.readouterr()
        rc = main(["personalize", "--model", str(model), "--data", DATA.format(k=0), "--neighbors", str(neighbours),
                   "--out", str(out), "--config", str(swarm_files / "fol.toml")])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1, err
        name = "model.safetensors" if model.name != member.name else member.name
        assert err[0] == (f"fol personalize: error: --model {model}: is {name} in --out {out}, which this run "
                          f"replaces or removes; copy it elsewhere or give another --out"), err
        assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_folder_of_many_unusable_files_gives_a_bounded_error(swarm_files: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """With no usable model the one-line error named every skipped file with its reason: a
    folder of 1,000 corrupt files made a line of over 100 kB. It names the first five and
    counts the others (the warnings above it still name each)."""
    bad = tmp_path / "bad"
    bad.mkdir()
    for i in range(40):
        (bad / f"junk-{i:02d}.safetensors").write_bytes(b"\x00" * 64)
    assert _personalize(swarm_files, bad, tmp_path / "out") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    line = err[0]
    assert line.startswith(f"fol personalize: error: no usable neighbour model in {bad} (skipped: junk-00.safetensors: ")
    assert line.count("safetensors header is not valid JSON") == 5 and "junk-04.safetensors" in line
    assert "junk-05.safetensors" not in line and line.endswith("; and 35 more file(s))"), line


def test_the_no_usable_model_error_names_files_with_long_names_in_a_bounded_line(swarm_files: Path, tmp_path: Path,
                                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """The "no usable neighbour model" line gave each of its five files with its name and again with its full
    path (the loader's reason starts with it): five files of 222-character names in a folder of a 30-character
    path made a line of 3,044 characters (893 now). Each file is now named once, by its name in --neighbors (cut in the middle past 60
    characters, its end kept), each reason cut past 120 characters; the folder is named once."""
    from fol.personalize_cli import SHOWN_NAME_CHARS, SHOWN_REASON_CHARS, SHOWN_REASONS

    bad = tmp_path / "neighbours"
    bad.mkdir()
    good = (swarm_files / "node1.safetensors").read_bytes()
    names = [f"{'model-received-from-drone-' * 8}{i:02d}.safetensors" for i in range(5)]
    for i, name in enumerate(names):
        (bad / name).write_bytes(good[: len(good) // 2] if i % 2 else b"\x00" * 64)
    assert _personalize(swarm_files, bad, tmp_path / "out") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    line = err[0]
    assert line.startswith(f"fol personalize: error: no usable neighbour model in {bad} (skipped: 'model-received"), line
    assert line.count(str(bad)) == 1 and "; and" not in line, line
    for i in range(5):  # every file told apart by the end of its name, with its own reason
        assert line.count(f"drone-{i:02d}.safetensors': ") == 1, line
    assert line.count("safetensors header is not valid JSON") == 3 and line.count("truncated model file (cut short") == 2
    bound = len(f"fol personalize: error: no usable neighbour model in {bad} (skipped: )")
    bound += SHOWN_REASONS * (SHOWN_NAME_CHARS + SHOWN_REASON_CHARS + 4)
    assert len(line) <= bound < 1200, (len(line), bound)
    assert not (tmp_path / "out").exists()


def test_the_no_usable_model_error_escapes_each_file_name_once(swarm_files: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The "no usable neighbour model" line named a file by brief() of its name as the report records it
    (utf8_text: a byte that is not UTF-8 written as the text '\\udcff'): a name holding such a byte and a
    newline was quoted with that backslash escaped again ('a\\n\\\\udcff.txt'), naming a file holding a
    backslash. Each name is now escaped once, as brief() writes the name itself; the report keeps
    the escaped text. Failed before."""
    import os

    bad = tmp_path / "neighbours"
    bad.mkdir()
    os.close(os.open(os.fsencode(bad) + b"/a\n\xff.txt", os.O_CREAT | os.O_WRONLY))  # not a model file
    with open(os.fsencode(bad) + b"/m\n\xfe.safetensors", "wb") as fh:  # a model file that is not one
        fh.write(b"\x00" * 64)
    assert _personalize(swarm_files, bad, tmp_path / "out") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0] == (f"fol personalize: error: no usable neighbour model in {bad} (skipped: "
                      "a\\n\\udcff.txt: not a model file (expected *.safetensors); "
                      "m\\n\\udcfe.safetensors: safetensors header is not valid JSON (Expecting value: line 1 "
                      "column 1 (char 0)))"), err[0]
    assert not (tmp_path / "out").exists()


def test_the_summary_shows_names_from_files_and_peers_escaped() -> None:
    """A neighbour's file name (a candidate's name), the node's producer and a skip reason come
    from files and peers' cards: a name holding a newline split the summary's row, an escape
    reached the terminal raw. Each line of the summary is now shown escaped."""
    from fol.personalize_cli import format_summary

    report = {
        "round": 1, "node": "node\x1b[2J", "variant": "fol", "selected": ["own"], "weights": [1.0],
        "candidates": [{"name": "own", "arch": None, "score_before": None, "score_after": 0.5, "params_before": 1,
                        "params_after": 1, "macs_before": 1, "macs_after": 1},
                       {"name": "n\nb\x1b]0;x\x07", "arch": "cnn-small", "score_before": 0.4, "score_after": 0.5,
                        "params_before": 2, "params_after": 1, "macs_before": 2, "macs_after": 1}],
        "received": [{"name": "evil\u202e", "used": False, "reason": "classes ['a\\nb'] differ"}],
        "skipped_files": [{"file": "x\ny.bin", "reason": "not a model file"}],
        "accuracy": {"local": {"val": 0.5, "test": 0.5}},
    }
    lines = format_summary(report).splitlines()
    assert all(line.isprintable() for line in lines), lines
    assert lines[0] == "FOL round 1 on node\\x1b[2J (variant fol)"
    assert lines[5].startswith("n\\nb\\x1b]0;x\\x07 ") and lines[6] == "  skipped evil\\u202e: classes ['a\\nb'] differ"
    assert lines[7] == "  skipped file x\\ny.bin: not a model file" and len(lines) == 10, lines


def _split_of(spec_text: str, seed: int):  # noqa: ANN202 - fol.data.NodeData
    """Node data of ``spec_text`` split with ``seed``, built here from the loader, the partition and
    split_node (not through fol.nodedata), to check which split a command used."""
    import fol.data
    from fol.data import dirichlet_partition, split_node

    spec = parse_node_data(spec_text)
    pool = fol.data.load_dataset(spec.dataset, n=spec.size, seed=spec.seed)
    parts = dirichlet_partition(pool.labels.numpy(), spec.nodes, spec.psi, spec.seed, samples_per_node=spec.per_node)
    return split_node(pool.subset(parts[spec.node]), seed=seed)


def test_personalize_re_splits_by_the_rule_the_model_card_records(
        swarm_files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A spec's node K split with seed S + K, fol simulate's with node_seed(S, K) = S * 1000 + K. Models
    pretrained now record the rule (extra.split_seed = "node_seed") and split by node_seed; a model whose
    card records none was pretrained by S + K, and fol personalize still re-splits its data so, round after
    round (its D_val / D_test unchanged, none of its training images in them). A rule this toolkit does
    not know is refused in one line, before the data is read."""
    import dataclasses

    import fol.nodedata
    from fol.checkpoint import save_model

    import fol.data

    pools: dict = {}  # one pool drawn once (seconds each on a busy machine), not by every command of the test
    draw = fol.data.load_dataset
    monkeypatch.setattr(fol.data, "load_dataset", lambda *a, **k: pools.get(repr((a, sorted(k.items()))))
                        or pools.setdefault(repr((a, sorted(k.items()))), draw(*a, **k)))
    used: list = []
    real = fol.nodedata.load_node_data
    monkeypatch.setattr(fol.nodedata, "load_node_data", lambda *a, **k: used.append(real(*a, **k)) or used[-1])
    (tmp_path / "e2.toml").write_text(FAST + "rounds = 2\n")
    spec = DATA.format(k=0)  # seed=3, node=0: S + K = 3, node_seed = 3000

    def personalize(model: Path, out: Path) -> int:
        return main(["personalize", "--model", str(model), "--data", spec, "--variant", "local",
                     "--out", str(out), "--config", str(tmp_path / "e2.toml")])

    def same_test_split(data, expected) -> bool:  # noqa: ANN001
        return torch.equal(data.test.images, expected.test.images) and torch.equal(data.val.images, expected.val.images)

    new, old = _split_of(spec, 3000), _split_of(spec, 3)
    assert not same_test_split(new, old)
    pretrained = load_model(swarm_files / "node0.safetensors")
    assert pretrained.card.extra["split_seed"] == "node_seed"  # fol pretrain records its rule
    assert personalize(swarm_files / "node0.safetensors", tmp_path / "new") == 0
    assert same_test_split(used[-1], new)
    assert read_card(tmp_path / "new" / "model.safetensors").extra["split_seed"] == "node_seed"

    # a model pretrained before the rule was recorded (its card as fol pretrain wrote it then)
    extra = {k: v for k, v in pretrained.card.extra.items() if k != "split_seed"}
    save_model(tmp_path / "old.safetensors", pretrained.model, dataclasses.replace(pretrained.card, extra=extra))
    assert personalize(tmp_path / "old.safetensors", tmp_path / "round1") == 0
    assert same_test_split(used[-1], old)
    assert read_card(tmp_path / "round1" / "model.safetensors").extra["split_seed"] == "seed+node"  # passed on
    assert personalize(tmp_path / "round1" / "model.safetensors", tmp_path / "round2") == 0
    assert same_test_split(used[-1], old)

    capsys.readouterr()
    count = len(used)
    for bad in ("node_seed_v2", 3000):
        model = tmp_path / f"unknown-{bad}.safetensors"
        save_model(model, pretrained.model, dataclasses.replace(pretrained.card, extra={**extra, "split_seed": bad}))
        assert personalize(model, tmp_path / "out") == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"fol personalize: error: {model}: model card extra.split_seed is {bad!r}; this toolkit "
                       f"splits a node's data by 'node_seed' or 'seed+node' (a model made by a newer toolkit?); "
                       f"use that toolkit, or a model whose card records one of these"], err
        assert len(used) == count and not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["personalize", "pretrain"])
def test_an_out_that_is_a_link_leading_nowhere_is_refused_before_any_work(
        command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``--out`` a link to a folder that is gone passed the output check (``exists()`` is False for
    it): fol personalize ran the whole round and then failed with 'cannot be created (File exists)',
    fol pretrain replaced the link with its model file. Both refuse it now, before the model or
    the data is read, and the link is left as it was."""
    import fol.checkpoint
    import fol.nodedata

    monkeypatch.setattr(fol.checkpoint, "load_model", lambda *a, **k: pytest.fail("model read before --out"))
    monkeypatch.setattr(fol.nodedata, "load_node_data", lambda *a, **k: pytest.fail("data read before --out"))
    out = tmp_path / "out"
    out.symlink_to(tmp_path / "gone")
    received = tmp_path / "received"
    received.mkdir()
    args = (["personalize", "--model", str(tmp_path / "own.safetensors"), "--neighbors", str(received)]
            if command == "personalize" else ["pretrain", "--epochs", "1"])
    assert main([*args, "--data", DATA.format(k=0), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"fol {command}: error: --out {out}: is a link to {tmp_path / 'gone'}, which does not exist; "
                   f"remove the link or give another path"], err
    assert out.is_symlink() and not (tmp_path / "gone").exists()


def test_a_neighbour_of_the_same_classes_in_another_order_is_said_to_be_so() -> None:
    """A neighbour whose card lists the node's classes in another order was said to have a class
    set that 'differs from the node's', naming the same classes twice: the reason now says they
    are the same classes in another order (its outputs are), naming both orders. A set that
    differs in a class is still said to differ."""
    from types import SimpleNamespace

    from fol.checkpoint import ModelCard
    from fol.models import ModelSpec
    from fol.personalize import check_received

    state = SimpleNamespace(class_names=["dry", "flood"],
                            data=SimpleNamespace(train=SimpleNamespace(images=torch.zeros(1, 3, 32, 32))))

    def reason(names: list[str]) -> str | None:
        return check_received(state, SimpleNamespace(card=ModelCard(ModelSpec("cnn-small", len(names)), names)))

    assert reason(["flood", "dry"]) == ("classes ['flood', 'dry'] are the node's classes ['dry', 'flood'] in "
                                        "another order (the model's outputs are in another order)")
    assert reason(["dry", "fire"]) == "class set ['dry', 'fire'] differs from the node's ['dry', 'flood']"
    assert reason(["dry", "flood"]) is None


def test_a_freeze_count_past_a_neighbours_layers_is_refused_before_training(swarm_files: Path, tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """fol.finetune_freeze counts a neighbour's convolution / linear layers: a count past those of a received
    model (node1, cnn-small: 4) was accepted and froze what freezing them all does. ``fol personalize``, which
    holds the received models, refuses it naming the config file and the model, before any training."""
    neighbours = tmp_path / "received"
    neighbours.mkdir()
    for k in (1, 2):  # cnn-small (4 layers) and resnet-small (10)
        shutil.copy(swarm_files / f"node{k}.safetensors", neighbours)
    config = tmp_path / "freeze.toml"
    out = tmp_path / "out"
    config.write_text(FAST + "finetune_freeze = 5\n")
    rc = main(["personalize", "--model", str(swarm_files / "node0.safetensors"), "--data", DATA.format(k=0),
               "--neighbors", str(neighbours), "--out", str(out), "--config", str(config)])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"fol personalize: error: {config}: fol.finetune_freeze must be at most 4 (the convolution / "
                   f"linear layers of node1.safetensors, the usable neighbour model with the fewest), got 5"], err
    assert not out.exists()
    config.write_text(FAST + "finetune_freeze = 4\n")
    assert main(["personalize", "--model", str(swarm_files / "node0.safetensors"), "--data", DATA.format(k=0),
                 "--neighbors", str(neighbours), "--out", str(out), "--config", str(config)]) == 0


def test_one_file_is_shown_one_way_in_a_run(swarm_files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            caplog: pytest.LogCaptureFixture) -> None:
    """brief() quoted a name holding a tab, a no-break space or a zero-width space ('a\\tb', repr-style)
    while the log's "skipping" warning and the summary printed the same name unquoted (escaped by the
    printable() every line goes through), so one run named one file two ways; a name also holding a byte
    that is not UTF-8 was escaped twice in a cut ('\\\\udcff'). Every message now escapes a name once, as
    printable() does, unquoted: the warnings, the error line and the summary name each file alike."""
    import logging
    import os

    from fol.cli import _PrintableFormatter
    from swarmbase.tomlcheck import brief

    folder = tmp_path / "received"
    folder.mkdir()
    names = ["tab\there.safetensors", "nbsp\xa0here.safetensors", "zero\u200bwidth.safetensors"]
    for name in names:
        (folder / name).write_bytes(b"\x00" * 64)  # a damaged model file: skipped, named
    os.close(os.open(os.fsencode(folder) + b"/both\t\xff.txt", os.O_CREAT | os.O_WRONLY))  # not a model file
    shown_as = {"tab\\there.safetensors", "nbsp\\xa0here.safetensors", "zero\\u200bwidth.safetensors",
                "both\\t\\udcff.txt"}
    assert {brief(n) for n in names} | {brief("both\t\udcff.txt")} == shown_as
    with caplog.at_level(logging.WARNING, logger="fol.personalize_cli"):
        assert _personalize(swarm_files, folder, tmp_path / "out") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    warned = [_PrintableFormatter("%(message)s").format(r) for r in caplog.records if "skipping" in r.getMessage()]
    assert len(warned) == 4, warned
    for shown_name in shown_as:  # the same text in the error line and in the file's own warning
        assert f"{shown_name}: " in err[0] and f"'{shown_name}" not in err[0], (shown_name, err[0])
        assert sum(line.startswith(f"skipping {shown_name}: ") for line in warned) == 1, (shown_name, warned)
    from fol.personalize_cli import format_summary

    summary = format_summary({"round": 1, "node": "n", "variant": "fol",
                              "skipped_files": [{"file": "tab\there.safetensors", "reason": "r"},
                                                {"file": "both\t\\udcff.txt", "reason": "r"}]})  # as the report writes
    assert "skipped file tab\\there.safetensors: r" in summary and "skipped file both\\t\\udcff.txt: r" in summary


@pytest.mark.parametrize("content", ["empty", "notes only"])
def test_a_neighbours_folder_without_models_is_refused_before_the_data_is_read(
        content: str, swarm_files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty --neighbors folder, or one holding no model file, was refused only after the node's data
    was read and split (20 s for a 40,000-image synthetic pool), since the folder was listed with the
    models. Its listing is now checked first, with the --model file: the same one line, no data read."""
    import fol.nodedata

    folder = tmp_path / "received"
    folder.mkdir()
    if content == "notes only":
        (folder / "notes.txt").write_text("x")

    def no_data(*args: object, **kwargs: object) -> None:
        raise AssertionError("the node's data was read before the neighbours folder was refused")

    monkeypatch.setattr(fol.nodedata, "load_node_data", no_data)
    assert _personalize(swarm_files, folder, tmp_path / "out") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"neighbours folder {folder} " in err[0], err
    assert ("is empty" if content == "empty" else "holds no model file") in err[0], err
    assert not (tmp_path / "out").exists()


def test_a_failed_member_write_names_the_member_in_out_not_the_staging_folder(
        swarm_files: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """An ensemble member is written by save_model, whose refusal (a full disk: 'cannot write model file') names
    the file it was given: in fol personalize that is in --out's hidden staging folder, removed as the run ends,
    so the line read '<out>/.staged-<pid>-<hex>.tmp/member-0-<tag>.safetensors: ...', a path that does not exist.
    It names the member in --out now, and --out keeps its previous outputs. Failed before (the staging path)."""
    import errno

    import fol.checkpoint

    _, out, run = _first_fol_an_round(swarm_files, tmp_path)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    real_write = fol.checkpoint.atomic_write_bytes

    def full_disk(path, data):  # as the crash-safe writer says a full disk: naming the file it was given
        if Path(path).name.startswith("member-"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
        real_write(path, data)

    monkeypatch.setattr(fol.checkpoint, "atomic_write_bytes", full_disk)
    capsys.readouterr()
    assert run() == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ".staged" not in err[0], err
    assert re.search(rf"{re.escape(str(out))}/member-0-[0-9a-f]{{8}}\.safetensors: cannot write model file "
                     r"\(No space left on device\)", err[0]), err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


@pytest.mark.parametrize("kind", ["control", "long"])
def test_the_local_variants_neighbours_line_names_the_folder_through_brief(kind: str, swarm_files: Path,
                                                                           tmp_path: Path, caplog) -> None:
    """--variant local logs that the --neighbors folder given is not read, naming it as given: a folder of
    3,000 characters made a 3 kB log line, a newline or a terminal's escape went into the record raw. It
    names the folder through brief(), as every other line of fol personalize names it."""
    import logging

    from swarmbase.tomlcheck import brief

    folder = odd_folder(tmp_path, kind)
    with caplog.at_level(logging.INFO, logger="fol"):
        assert main(["personalize", "--model", str(swarm_files / "node0.safetensors"), "--data", DATA.format(k=0),
                     "--config", str(swarm_files / "fol.toml"), "--out", str(tmp_path / "out"), "--variant", "local",
                     "--neighbors", str(folder)]) == 0
    said = [r.getMessage() for r in caplog.records if "is not read" in r.getMessage()]
    assert said == [f"--variant local reads no neighbour model; --neighbors {brief(folder)} is not read"], said
    assert said[0].isprintable() and len(said[0]) < 300, said
