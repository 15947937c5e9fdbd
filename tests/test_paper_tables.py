"""The paper's protocol as one command: the --quick path at a tiny size runs every
row, writes markdown / CSV / JSON with the paper's cells beside ours, and the
node columns come from a size rule fixed before training."""

from __future__ import annotations

import csv
import json

import pytest

from fol.data import DEFAULT_MIN_SAMPLES
from fol.errors import ConfigError
from fol.reproduce import PAPER_CELLS, ProtocolConfig, column_nodes, rows_for

from _names import odd_folder

ROWS = rows_for(3, ProtocolConfig.quick().methods)  # the paper's rows; --quick leaves out the pooled references


TINY = ["--nodes", "3", "--pool", "150", "--image-size", "16", "--data", "synthetic-hurricane",
        "--fol", "pretrain_epochs=2", "finetune_epochs=1", "post_finetune_epochs=1", "gate_epochs=1",
        "distill_epochs=1", "ensemble_steps=5", "max_neighbours=2", "top_k=2",
        "--option", "dense.epochs=1", "dense.g_steps=1", "co-boosting.epochs=1", "co-boosting.g_steps=1",
        "fedavg.local_epochs=1", "--executor", "local", "-q"]


def test_quick_path_at_tiny_size_writes_every_row(tmp_path, capsys, benchmark_script) -> None:
    assert benchmark_script("paper_tables").main(["--quick", *TINY, "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    md = (tmp_path / "tables.md").read_text()
    for row in ROWS:  # every row of the paper, E = 1..3
        assert f"| {row} |" in md and f"| {row} |" in printed
    assert "Pooled" not in md and len(ROWS) == 18
    assert "paper, satellite #8" in md  # hurricane psi 0.5: the paper's satellite 8
    assert "95.87" in md  # ... and its FOL-A (E=3) cell beside ours
    data = json.loads((tmp_path / "tables.json").read_text())
    assert data["config"]["psis"] == [0.5] and data["config"]["seeds"] == [0]
    raw = data["raw"][0]
    assert len(raw["sizes"]) == 3 and sum(raw["sizes"]) == 150
    assert raw["columns"] == column_nodes(raw["sizes"])
    accs = raw["acc"]["0"]
    assert set(accs) == set(ROWS) and all(len(v) == 3 and all(0 <= a <= 1 for a in v) for v in accs.values())
    with open(tmp_path / "tables.csv", newline="") as fh:
        recs = list(csv.DictReader(fh))
    assert len(recs) == len(ROWS) * 4  # 3 node columns + the mean
    mean_local = [r for r in recs if r["row"] == "Local" and r["column"] == "mean"][0]
    assert abs(float(mean_local["mean"]) - 100 * sum(accs["Local"]) / 3) < 0.01
    assert float(mean_local["paper_mean"]) == PAPER_CELLS[("hurricane", 0.5)]["Local"][0]


def test_methods_restrict_the_rows_and_the_work(tmp_path, capsys, benchmark_script) -> None:
    argv = ["--quick", *TINY, "--rounds", "1", "--methods", "fol", "--out", str(tmp_path)]
    assert benchmark_script("paper_tables").main(argv) == 0
    printed = capsys.readouterr().out
    accs = json.loads((tmp_path / "tables.json").read_text())["raw"][0]["acc"]["0"]
    assert set(accs) == {"Local", "FOL-A (E=1)", "FOL (E=1)"} == set(rows_for(1, ("fol",)))
    md = (tmp_path / "tables.md").read_text()
    assert "| FOL (E=1) |" in md and "DENSE" not in md and "FedAvg" not in md and "FOL-N" not in md
    # the one-model gain and the share of the ensemble's gain the student keeps, from the same numbers
    gain = 100 * (sum(accs["FOL (E=1)"]) - sum(accs["Local"])) / 3
    assert f"FOL - Local = {gain:+.1f}" in printed and "the student keeps" in printed
    with pytest.raises(ConfigError, match="protocol methods: expected one or more of"):
        ProtocolConfig(methods=("fol", "hermes"))


def test_local_only_run_checks_a_saved_runs_pretraining(tmp_path, capsys, benchmark_script) -> None:
    """--methods local pretrains and reports Local only; merged with a saved run of
    the same swarm and seed it passes when this machine pretrains alike, and is
    refused, naming Local, when one node's Local differs."""
    script = benchmark_script("paper_tables")
    saved, check = tmp_path / "saved", tmp_path / "check"
    assert script.main(["--quick", *TINY, "--rounds", "1", "--methods", "fol", "--out", str(saved)]) == 0
    assert script.main(["--quick", *TINY, "--rounds", "1", "--methods", "local", "--out", str(check)]) == 0
    capsys.readouterr()
    data = json.loads((check / "tables.json").read_text())
    assert set(data["raw"][0]["acc"]["0"]) == {"Local"} == set(rows_for(1, ("local",)))
    assert data["raw"][0]["acc"]["0"]["Local"] == json.loads((saved / "tables.json").read_text())["raw"][0]["acc"]["0"]["Local"]
    assert script.main(["--merge", str(saved / "tables.json"), str(check / "tables.json"), "--out", str(tmp_path / "m")]) == 0
    capsys.readouterr()
    local = data["raw"][0]["acc"]["0"]["Local"]
    local[1] = 0.0 if local[1] > 0 else 1.0  # one node pretrained otherwise
    (check / "tables.json").write_text(json.dumps(data))
    assert script.main(["--merge", str(saved / "tables.json"), str(check / "tables.json")]) == 2
    err = capsys.readouterr().err
    assert "Local row differs" in err and len(err.strip().splitlines()) == 1


def test_pooled_references_measure_the_room(tmp_path, capsys, benchmark_script) -> None:
    argv = ["--quick", *TINY, "--rounds", "1", "--methods", "fol", "pooled", "--out", str(tmp_path)]
    assert benchmark_script("paper_tables").main(argv) == 0
    printed = capsys.readouterr().out
    accs = json.loads((tmp_path / "tables.json").read_text())["raw"][0]["acc"]["0"]
    assert set(accs) == set(rows_for(1, ("fol", "pooled"))) and {"Pooled", "Pooled + FT"} <= set(accs)
    room = 100 * (sum(accs["Pooled + FT"]) - sum(accs["Local"])) / 3
    assert f"Pooled + FT - Local = {room:+.1f} points" in printed
    assert "| Pooled + FT |" in (tmp_path / "tables.md").read_text()


def test_the_room_for_one_exchange_is_asked_for_by_name(tmp_path, capsys, benchmark_script) -> None:
    """``--methods ... nbr-pooled-ft`` adds its row and the summary's line; with
    every other node a sender (3 nodes, Q = 2) each node's group is the swarm, so
    the row is Pooled + FT's to the last node. Not in the default groups."""
    argv = ["--quick", *TINY, "--rounds", "1", "--methods", "fol", "pooled", "nbr-pooled-ft",
            "--out", str(tmp_path)]
    assert benchmark_script("paper_tables").main(argv) == 0
    printed = capsys.readouterr().out
    accs = json.loads((tmp_path / "tables.json").read_text())["raw"][0]["acc"]["0"]
    assert set(accs) == set(rows_for(1, ("fol", "pooled", "nbr-pooled-ft"))) and "Nbr-pooled + FT" in accs
    assert accs["Nbr-pooled + FT"] == accs["Pooled + FT"]
    nbr = 100 * (sum(accs["Nbr-pooled + FT"]) - sum(accs["Local"])) / 3
    assert f"Nbr-pooled + FT - Local = {nbr:+.1f} points (mean over nodes)" in printed
    if nbr > 0:
        share = 100 * (sum(accs["FOL-A (E=1)"]) - sum(accs["Local"])) / 3 / nbr
        assert f"FOL-A (E=1) gains {share:.0f} % of it" in printed
    assert "| Nbr-pooled + FT |" in (tmp_path / "tables.md").read_text()
    assert "nbr-pooled-ft" not in ProtocolConfig().methods and "nbr-pooled-ft" not in ProtocolConfig.quick().methods


def test_columns_are_fixed_by_size_quantiles() -> None:
    sizes = [300, 40, 120, 900, 75, 75, 500, 210]
    cols = column_nodes(sizes)
    ranked = sorted(range(len(sizes)), key=lambda k: (sizes[k], k))
    assert cols == [ranked[2], ranked[4], ranked[5]]  # round(q * 7) for q = 0.25, 0.5, 0.75
    assert [sizes[c] for c in cols] == sorted(sizes[c] for c in cols)


def test_bad_protocol_settings_are_clear_errors(tmp_path, capsys, benchmark_script) -> None:
    with pytest.raises(ConfigError, match="unknown key"):
        ProtocolConfig(fol={"no_such_key": 1})
    with pytest.raises(ConfigError, match="pool"):
        ProtocolConfig(nodes=24, pool=100)
    # a node below the split's minimum stopped the run only when its setting was pretrained (after the others)
    for low in (-1, 0, DEFAULT_MIN_SAMPLES - 1):
        with pytest.raises(ConfigError, match=f"min_samples must be >= {DEFAULT_MIN_SAMPLES}.*got {low}"):
            ProtocolConfig(min_samples=low)
    assert ProtocolConfig(min_samples=DEFAULT_MIN_SAMPLES).min_samples == DEFAULT_MIN_SAMPLES
    # a negative seed ran until FedAvg seeded its generator with it, after the FOL rows' training
    for over in ({"seeds": (0, -2)}, {"data_seed": -1}, {"seeds": (0, 10**30)}, {"data_seed": 2**32}):
        with pytest.raises(ConfigError, match=r"seeds and data_seed must be integers in 0\.\.4294967295"):
            ProtocolConfig(**over)
    missing = tmp_path / "nowhere"
    assert benchmark_script("paper_tables").main(["--quick", "--data", f"imagefolder:{missing}",
                                                  "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "nowhere" in err and "Traceback" not in err


def test_a_split_first_image_folder_runs_the_protocol_through_splits(tmp_path, capsys, benchmark_script) -> None:
    """imagefolder:PATH of a folder laid out by split first (PATH/<split>/<class>/) is refused
    naming --splits, which pools the named split folders; splits without such a dataset are refused."""
    import numpy as np
    from PIL import Image

    from fol.reproduce import load_pool

    root = tmp_path / "kaggle"
    for split, n, shade in (("train", 3, 0), ("valid", 2, 100)):
        for c, channel in (("fire", 0), ("nofire", 1)):
            (root / split / c).mkdir(parents=True)
            for i in range(n):  # every image distinct (copies across splits are used once)
                pixels = np.zeros((8, 8, 3), np.uint8)
                pixels[..., channel], pixels[..., 2] = 200, shade + i
                Image.fromarray(pixels).save(root / split / c / f"{i}.png")
    data = f"imagefolder:{root}"
    assert benchmark_script("paper_tables").main(["--quick", "--data", data, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "laid out by split first" in err[0] and "--splits train valid in benchmarks" in err[0]
    pool = load_pool(data, ProtocolConfig(datasets=(data,), splits=("train", "valid"), pool=0, image_size=8))
    assert pool.class_names == ["fire", "nofire"] and pool.class_counts().tolist() == [5, 5]
    with pytest.raises(ConfigError, match=r"protocol splits: only for an imagefolder:PATH dataset"):
        ProtocolConfig(splits=("train",))


def test_baseline_options_are_checked_before_any_training(tmp_path, capsys, benchmark_script, monkeypatch) -> None:
    """--option of an unknown method, or a key or value the method refuses, is one line before
    pretraining starts (a typo such as coboosting.epochs=5 used to run hours with the defaults)."""
    import fol.reproduce

    def no_training(*args, **kwargs):  # a refusal after pretraining also leaves --out unmade: this tells them apart
        raise AssertionError("the swarm was pretrained before the options were checked")

    monkeypatch.setattr(fol.reproduce, "pretrained_swarm", no_training)
    script = benchmark_script("paper_tables")
    for option, words in (("coboosting.epochs=5", "'coboosting' takes no options here"),
                          ("fol.top_k=3", "'fol' takes no options here"),
                          ("dense.no_such_option=1", "methods.dense: invalid option(s)"),
                          ("fedavg.local_epochs=-2", "methods.fedavg.local_epochs must be an integer >= 1")):
        assert script.main(["--quick", *TINY, "--option", option, "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
        assert not (tmp_path / "o").exists()
    assert ProtocolConfig(method_options={"dense": {"epochs": 2}}).method_options == {"dense": {"epochs": 2}}


def test_a_synthesis_too_large_is_refused_before_any_training(tmp_path, capsys, benchmark_script, monkeypatch) -> None:
    """A DENSE / Co-Boosting synthesis batch, or FOL's "synth" distillation batch, too large
    for memory was refused only when its synthesis started, after every node had pretrained."""
    import fol.reproduce

    def no_training(*args, **kwargs):
        raise AssertionError("the swarm was pretrained before the options were checked")

    monkeypatch.setattr(fol.reproduce, "pretrained_swarm", no_training)
    script = benchmark_script("paper_tables")
    for argv, words in ((["--option", "co-boosting.synthesis_batch=1000000000"],
                         "methods.co-boosting: synthesis_batch / nz / ngf / epochs: a synthesis batch of 1,000,000,000"),
                        (["--fol", "distill_inputs=synth", "batch_size=1000000"],
                         "fol.batch_size (the synthesis batch of distill_inputs = 'synth'): a synthesis batch of")):
        assert script.main(["--quick", *TINY, *argv, "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert words in err and "GiB" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
        assert not (tmp_path / "o").exists()


def test_a_setting_given_twice_is_refused_before_any_training(tmp_path, capsys, benchmark_script) -> None:
    """--psi 0.5 0.5 ran the setting twice, the second run silently replacing the first."""
    script = benchmark_script("paper_tables")
    for argv, words in ((["--psi", "0.5", "0.5"], "protocol psis: each value once, got [0.5, 0.5]"),
                        (["--data", "synthetic-hurricane", "synthetic-hurricane"], "protocol datasets: each value once"),
                        (["--methods", "fol", "fol"], "protocol methods: each value once")):
        assert script.main(["--quick", *TINY, *argv, "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
        assert not (tmp_path / "o").exists()


def test_threads_and_workers_are_checked_before_any_work(tmp_path, capsys, benchmark_script) -> None:
    """--threads 0 and --workers -1 were tracebacks; --workers 10000 started a process (each loading torch)
    per task in flight, as many as the swarm's nodes."""
    import os

    script = benchmark_script("paper_tables")
    cap = 4 * (os.cpu_count() or 1)
    for argv, words in ((["--threads", "0"], f"error: argument --threads: expected 1..{cap}"),
                        (["--workers", "-1"], f"error: argument --workers: expected 1..{cap}"),
                        (["--workers", "10000"],
                         f"error: argument --workers: expected 1..{cap} on this machine of {os.cpu_count() or 1} "
                         f"core(s) (4 per core), got 10000")):
        with pytest.raises(SystemExit) as stop:  # argparse: usage, then the one line
            script.main(["--quick", *TINY, *argv, "--out", str(tmp_path / "o")])
        err = capsys.readouterr().err
        assert stop.value.code == 2 and words in err and "Traceback" not in err
        assert not (tmp_path / "o").exists()


def test_a_run_writes_its_tables_after_every_seed(tmp_path, capsys, benchmark_script) -> None:
    from fol.reproduce import run_protocol

    fol = {"pretrain_epochs": 2, "finetune_epochs": 1, "post_finetune_epochs": 1, "gate_epochs": 1,
           "distill_epochs": 1, "ensemble_steps": 5, "max_neighbours": 2, "top_k": 2}
    cfg = ProtocolConfig.quick(nodes=3, pool=150, image_size=16, datasets=("synthetic-hurricane",), seeds=(0, 1),
                               rounds=1, methods=("fol",), fol=fol)
    seen = []

    def snapshot(partial) -> None:
        partial.write(tmp_path)
        seen.append((partial.complete, json.loads((tmp_path / "tables.json").read_text()),
                     (tmp_path / "tables.md").read_text()))

    result = run_protocol(cfg, progress=lambda m: None, on_seed=snapshot)
    assert [complete for complete, _, _ in seen] == [False, True]
    first, last = seen[0][1], seen[1][1]
    assert not first["complete"] and list(first["raw"][0]["acc"]) == ["0"]  # seed 0 kept before seed 1 runs
    assert "Partial" in seen[0][2] and "1 seed(s)" in seen[0][2]
    assert last["complete"] and list(last["raw"][0]["acc"]) == ["0", "1"] and "Partial" not in seen[1][2]
    assert last["raw"][0]["acc"]["0"] == first["raw"][0]["acc"]["0"] == result.settings[
        ("synthetic-hurricane", 0.5)]["acc"][0]
    # every node's distillation of every seed: reverted or not (None: it distilled nothing)
    rev = last["raw"][0]["reverted"]
    assert set(rev) == {"0", "1"} and all(set(r) == {"FOL (E=1)"} for r in rev.values())
    flags = [f for r in rev.values() for f in r["FOL (E=1)"]]
    assert len(flags) == 6 and all(f in (True, False, None) for f in flags)
    reverted, distilled = sum(f is True for f in flags), sum(f is not None for f in flags)
    assert distilled >= 1 and result.reverts("synthetic-hurricane", 0.5) == {"FOL (E=1)": (reverted, distilled)}
    assert f"FOL (E=1) {reverted} of {distilled} node runs" in seen[1][2]
    # an --out that cannot receive the tables is refused before any training, in one line
    blocker = tmp_path / "a-file"
    blocker.write_text("keep me")
    assert benchmark_script("paper_tables").main(["--quick", *TINY, "--out", str(blocker)]) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "not a folder" in err and "Traceback" not in err
    assert blocker.read_text() == "keep me"


def _fake_run(tmp_path, name, dataset, seeds, rounds=1, sizes=(60, 120, 90, 45), methods=("fol",)):
    """A protocol result with known accuracies (Local the same in every run of
    a seed) and distillation reverts (node 0 reverted, node 1 distilled
    nothing), no training, written as a run writes it."""
    from fol.reproduce import ProtocolResult

    cfg = ProtocolConfig(datasets=(dataset,), psis=(0.5,), seeds=tuple(seeds), nodes=len(sizes), pool=0,
                         rounds=rounds, methods=tuple(methods))
    rows = rows_for(rounds, methods)
    acc = {s: {row: [round(0.5 + 0.1 * k + 0.01 * i + 0.001 * s, 4) for k in range(len(sizes))]
               for i, row in enumerate(rows)} for s in seeds}
    reverted = {s: {row: [True, None] + [False] * (len(sizes) - 2) for row in rows if row.startswith("FOL (")}
                for s in seeds}
    res = ProtocolResult(cfg, settings={(dataset, 0.5): {"sizes": list(sizes), "columns": column_nodes(list(sizes)),
                                                         "acc": acc, "reverted": reverted}}, seconds=10.0)
    res.write(tmp_path / name)
    return tmp_path / name / "tables.json", acc


def test_merge_joins_separate_runs_without_running_anything(tmp_path, capsys, benchmark_script) -> None:
    a, acc_a = _fake_run(tmp_path, "a", "synthetic-hurricane", [0, 1])
    b, acc_b = _fake_run(tmp_path, "b", "synthetic-hurricane", [2])
    c, _ = _fake_run(tmp_path, "c", "synthetic-wildfire", [0])
    script = benchmark_script("paper_tables")
    assert script.main(["--merge", str(a), str(b), str(c), "--out", str(tmp_path / "both")]) == 0
    printed = capsys.readouterr().out
    merged = json.loads((tmp_path / "both" / "tables.json").read_text())
    assert merged["config"]["seeds"] == [0, 1, 2] and merged["config"]["datasets"] == [
        "synthetic-hurricane", "synthetic-wildfire"]
    hur = next(r for r in merged["raw"] if r["dataset"] == "synthetic-hurricane")
    assert hur["acc"] == {str(s): v for s, v in {**acc_a, **acc_b}.items()}
    assert "synthetic-hurricane, psi = 0.5: 4 nodes (45-120 images), cnn-medium, 3 seed(s)" in printed
    assert "Paired with Local" in printed and "| FOL (E=1) |" in printed
    # FOL is 0.02 above Local on every node and seed: +2.0 points, 12 of 12 pairs above
    assert "| FOL (E=1) | +2.0 ± 0.0 | 12 / 0 of 12 |" in printed
    assert sorted(hur["reverted"]) == ["0", "1", "2"]  # the reverts of every run, joined
    assert "FOL (E=1) 3 of 9 node runs" in printed  # node 0 of 3 seeds; node 1 distilled nothing
    old = json.loads(c.read_text())
    del old["raw"][0]["reverted"]  # a run made before reverts were recorded still merges
    c.write_text(json.dumps(old))
    assert script.main(["--merge", str(a), str(c)]) == 0
    assert "Distillation reverted" in capsys.readouterr().out
    # the same file listed twice is refused; a copy of a run holds every row again, the same to the
    # last node (a repeat of the same code and seed): each seed counts once
    assert script.main(["--merge", str(a), str(tmp_path / "a" / ".." / "a" / "tables.json")]) == 2
    err = capsys.readouterr().err
    assert "listed twice" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    copy = tmp_path / "copy.json"
    copy.write_text(a.read_text())
    assert script.main(["--merge", str(a), str(copy), "--out", str(tmp_path / "self")]) == 0
    capsys.readouterr()
    again = json.loads((tmp_path / "self" / "tables.json").read_text())
    assert again["raw"] == json.loads(a.read_text())["raw"]
    # a row held twice with other accuracies (another code or seed) is refused
    changed = json.loads(a.read_text())
    changed["raw"][0]["acc"]["1"]["FOL (E=1)"][2] = 0.25
    (tmp_path / "changed.json").write_text(json.dumps(changed))
    assert script.main(["--merge", str(a), str(tmp_path / "changed.json")]) == 2
    err = capsys.readouterr().err
    assert "seed 1 already has the rows ['FOL (E=1)'] from the runs before it, with other accuracies" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_merge_of_a_stopped_run_and_its_missing_seed_is_complete(tmp_path, capsys, benchmark_script) -> None:
    """A run stopped after seeds 0-1 of a planned 0-2 is partial; joined with a run of seed 2
    it holds every planned seed, and the tables no longer say they are partial."""
    stopped, _ = _fake_run(tmp_path, "stopped", "synthetic-hurricane", [0, 1])
    doc = json.loads(stopped.read_text())
    doc["config"]["seeds"], doc["complete"] = [0, 1, 2], False  # as a run stopped during seed 2 leaves it
    stopped.write_text(json.dumps(doc))
    rest, _ = _fake_run(tmp_path, "rest", "synthetic-hurricane", [2])
    other, _ = _fake_run(tmp_path, "other", "synthetic-wildfire", [0])
    script = benchmark_script("paper_tables")
    for argv, partial in (([stopped], True), ([stopped, rest], False), ([stopped, other], True),
                          ([stopped, rest, other], True)):  # wildfire planned seeds 0-2 from the merge: has 0
        assert script.main(["--merge", *map(str, argv), "--out", str(tmp_path / "m")]) == 0
        printed = capsys.readouterr().out
        assert ("_Partial:" in printed) is partial, argv
        assert json.loads((tmp_path / "m" / "tables.json").read_text())["complete"] is (not partial)


def test_merge_joins_runs_of_different_method_groups_on_the_same_seeds(tmp_path, capsys, benchmark_script) -> None:
    """One process per method group (FOL at E = 1; the baselines at E = 1..3)
    gives one table; a seed's Local row must agree to the last node."""
    fol, acc_fol = _fake_run(tmp_path, "fol", "synthetic-hurricane", [0, 1])
    base, acc_base = _fake_run(tmp_path, "base", "synthetic-hurricane", [0, 1], rounds=3, methods=("dense", "fedavg"))
    script = benchmark_script("paper_tables")
    assert script.main(["--merge", str(base), str(fol), "--out", str(tmp_path / "joined")]) == 0
    printed = capsys.readouterr().out
    merged = json.loads((tmp_path / "joined" / "tables.json").read_text())
    assert merged["config"]["methods"] == ["fol", "dense", "fedavg"] and merged["config"]["rounds"] == 3
    rows = ["Local", "FOL-A (E=1)", "FOL (E=1)", "DENSE", "FedAvg (E=1)", "FedAvg (E=2)", "FedAvg (E=3)"]
    for seed in ("0", "1"):
        assert sorted(merged["raw"][0]["acc"][seed]) == sorted(rows)
        for row in rows:
            assert merged["raw"][0]["acc"][seed][row] == {**acc_base[int(seed)], **acc_fol[int(seed)]}[row]
    table = [ln.split(" |")[0] for ln in printed.splitlines() if ln.startswith("| ") and " img)" not in ln]
    assert table[:7] == [f"| {r}" for r in rows]  # the paper's order, whichever run came first
    assert "FOL-A (E=2)" not in printed and "synthetic-hurricane psi=0.5, E=1: FOL - Local" in printed
    # the merged file is a run like any other: it merges again with a new seed of both groups
    fol2, _ = _fake_run(tmp_path, "fol2", "synthetic-hurricane", [2])
    base2, _ = _fake_run(tmp_path, "base2", "synthetic-hurricane", [2], rounds=3, methods=("dense", "fedavg"))
    assert script.main(["--merge", str(tmp_path / "joined" / "tables.json"), str(fol2), str(base2)]) == 0
    assert "3 seed(s)" in capsys.readouterr().out
    # another pretraining of the same seed, or a seed that lacks the other group's rows, is refused
    tampered = json.loads(base.read_text())
    tampered["raw"][0]["acc"]["1"]["Local"][3] = 0.123
    other = tmp_path / "other.json"
    other.write_text(json.dumps(tampered))
    for argv, words in (([fol, other], "seed 1: its Local row differs"),
                        ([fol, base, fol2], "seeds 0 and 2 hold different rows")):
        assert script.main(["--merge", *map(str, argv)]) == 2
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_merge_refuses_runs_of_another_protocol_and_bad_files(tmp_path, capsys, benchmark_script) -> None:
    a, _ = _fake_run(tmp_path, "a", "synthetic-hurricane", [0])
    r3, _ = _fake_run(tmp_path, "r3", "synthetic-hurricane", [1], rounds=3)
    other, _ = _fake_run(tmp_path, "other", "synthetic-hurricane", [1], sizes=(60, 120, 90, 46))
    garbage = tmp_path / "garbage.json"
    garbage.write_bytes(b"\x00not json")
    tampered = json.loads(a.read_text())
    tampered["raw"][0]["acc"]["0"]["FOL (E=1)"][1] = 7.5  # not an accuracy
    bad_acc = tmp_path / "bad.json"
    bad_acc.write_text(json.dumps(tampered))
    tampered = json.loads(a.read_text())
    tampered["raw"][0]["reverted"]["0"]["FOL (E=1)"] = [True, "yes", False, False]
    bad_rev = tmp_path / "bad-rev.json"
    bad_rev.write_text(json.dumps(tampered))
    bad_time = tmp_path / "bad-time.json"
    bad_time.write_text(json.dumps({**json.loads(a.read_text()), "seconds": "an hour"}))
    script = benchmark_script("paper_tables")
    for argv, words in (([a, r3], "seeds 0 and 1 hold different rows"), ([a, other], "different swarm"),
                        ([garbage], "cannot read it as JSON"), ([bad_acc], "acc['0']['FOL (E=1)']"),
                        ([bad_time], "seconds: expected a number"),
                        ([bad_rev], "reverted['0']['FOL (E=1)']: expected 4 entries true / false / null"),
                        ([tmp_path / "missing.json"], "missing.json")):
        assert script.main(["--merge", *map(str, argv)]) == 2
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_merge_refuses_raw_data_that_does_not_match_its_config(tmp_path, capsys, benchmark_script) -> None:
    """A hand-edited tables.json whose node list, seed or setting is not its config's was read as it
    stood: 3 nodes printed under a config of 4, a seed outside config.seeds, a setting given twice (the
    second silently replaced the first), a seed given twice as 0 and 00 (the same)."""
    a, _ = _fake_run(tmp_path, "a", "synthetic-hurricane", [0])
    data = json.loads(a.read_text())

    def edited(name, change):
        d = json.loads(json.dumps(data))
        change(d)
        (tmp_path / name).write_text(json.dumps(d))
        return tmp_path / name

    def three_nodes(d):
        raw = d["raw"][0]
        raw["sizes"] = raw["sizes"][:3]
        raw["columns"] = column_nodes(raw["sizes"])
        raw["acc"] = {s: {row: v[:3] for row, v in rows.items()} for s, rows in raw["acc"].items()}
        raw["reverted"] = {s: {row: v[:3] for row, v in rows.items()} for s, rows in raw["reverted"].items()}

    script = benchmark_script("paper_tables")
    for path, words in ((edited("nodes.json", three_nodes), "raw[0].sizes: expected a list of positive image counts, "
                                                            "one per node (config.nodes = 4)"),
                        (edited("seed.json", lambda d: d["raw"][0]["acc"].update({"7": d["raw"][0]["acc"]["0"]})),
                         "raw[0].acc['7']: expected a seed of config.seeds [0]"),
                        (edited("super.json", lambda d: d["raw"][0]["acc"].update({"\u00b2": d["raw"][0]["acc"]["0"]})),
                         "raw[0].acc['\u00b2']: expected a seed of config.seeds [0]"),  # isdigit(), which int() refuses
                        (edited("digits.json", lambda d: d["raw"][0]["acc"].update({"9" * 5000: d["raw"][0]["acc"]["0"]})),
                         "expected a seed of config.seeds [0]"),  # int() refuses over 4,300 digits
                        (edited("zeros.json", lambda d: d["raw"][0]["acc"].update({"00": d["raw"][0]["acc"]["0"]})),
                         "raw[0].acc['00']: expected a seed of config.seeds [0], each once"),  # int("00") is 0
                        (edited("zeros_rev.json", lambda d: d["raw"][0]["reverted"].update(
                            {"-0": d["raw"][0]["reverted"]["0"]})),
                         "raw[0].reverted['-0']: expected a seed of 'acc', each once"),
                        (edited("twice.json", lambda d: d["raw"].append(d["raw"][0])),
                         "raw[1]: expected a setting of config.datasets and config.psis"),
                        (edited("psi.json", lambda d: d["raw"][0].update(psi=0.3)),
                         "raw[0]: expected a setting of config.datasets and config.psis [0.5]"),
                        (edited("bool.json", lambda d: d["raw"][0]["acc"]["0"]["Local"].__setitem__(0, True)),
                         "raw[0].acc['0']['Local']: expected 4 accuracies in [0, 1], one per node")):
        assert script.main(["--merge", str(path)]) == 2
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert script.main(["--merge", str(a)]) == 0


def test_paired_difference_is_the_wilcoxon_test_over_nodes() -> None:
    from scipy.stats import wilcoxon

    from fol.reproduce import paired_difference

    base = {0: [0.8, 0.7, 0.9, 0.6, 0.75], 1: [0.8, 0.6, 0.9, 0.65, 0.7]}
    meth = {0: [0.9, 0.7, 0.95, 0.7, 0.7], 1: [0.85, 0.7, 0.9, 0.75, 0.72], 2: [1.0] * 5}  # seed 2: no pair
    r = paired_difference(meth, base)
    per_node = [((meth[0][k] - base[0][k]) + (meth[1][k] - base[1][k])) / 2 for k in range(5)]
    nonzero = [d for d in per_node if abs(d) > 1e-12]
    assert r.pairs == 10 and r.nonzero == len(nonzero) == 5
    assert r.above == 7 and r.below == 1  # two ties
    assert abs(r.p - wilcoxon(nonzero).pvalue) < 1e-12
    assert abs(r.diff[0] - 100 * sum(per_node) / 5) < 1e-9
    assert paired_difference(base, base).p is None  # no node differs: no test
    with pytest.raises(ConfigError, match="share no seed"):
        paired_difference({5: [0.1]}, {0: [0.1]})


def test_paired_difference_ranks_equal_differences_as_ties() -> None:
    """Six nodes gain 0.1 and one loses 0.1: all seven differences tie in rank. In floats
    0.9 - 0.8 and 0.8 - 0.7 differ in the last bit, which ranked the loss lowest (p 0.094
    instead of 0.125)."""
    from scipy.stats import wilcoxon

    from fol.reproduce import paired_difference

    base = {0: [0.8, 0.7, 0.6, 0.5, 0.3, 0.2, 0.9]}
    meth = {0: [0.9, 0.8, 0.7, 0.6, 0.4, 0.3, 0.8]}
    r = paired_difference(meth, base)
    assert (r.above, r.below, r.nonzero) == (6, 1, 7)
    assert r.p == pytest.approx(wilcoxon([0.1] * 6 + [-0.1]).pvalue)


def test_share_leaves_out_a_seed_whose_ensemble_gains_under_half_a_point() -> None:
    """A seed where the ensemble's swarm mean gains one test image on one node (+0.07
    points) makes the share a ratio to that one image (here -100 %; a real hurricane seed
    printed -998 %): it is left out, and the seeds counted say so."""
    from fol.personalize import SWARM_SHARE_MIN_GAIN, swarm_transfer
    from fol.reproduce import ProtocolResult

    local = [0.9] * 24
    tiny = {"Local": local, "FOL-A (E=1)": [0.9 + 1 / 60] + [0.9] * 23, "FOL (E=1)": [0.9 - 1 / 60] + [0.9] * 23}
    clear = {"Local": local, "FOL-A (E=1)": [0.95] * 24, "FOL (E=1)": [0.93] * 24}
    assert swarm_transfer(tiny["Local"], tiny["FOL (E=1)"], tiny["FOL-A (E=1)"])["of_means"] is None
    assert swarm_transfer(clear["Local"], clear["FOL (E=1)"], clear["FOL-A (E=1)"])["of_means"] == pytest.approx(0.6)
    # at twice the floor (one point) the share is defined
    edge = [0.9 + 2 * SWARM_SHARE_MIN_GAIN] * 24
    assert swarm_transfer(local, local, edge)["of_means"] == 0.0
    cfg = ProtocolConfig(datasets=("synthetic-hurricane",), psis=(0.5,), seeds=(0, 1), nodes=24, pool=0,
                         rounds=1, methods=("fol",))
    res = ProtocolResult(cfg, settings={("synthetic-hurricane", 0.5): {
        "sizes": [60] * 24, "columns": column_nodes([60] * 24), "acc": {0: tiny, 1: clear}}})
    t = res.transfer("synthetic-hurricane", 0.5, rounds=1)
    assert t["kept_seeds"] == (1, 2)
    assert t["kept"][0] == pytest.approx(60.0)


def test_compare_pairs_two_runs_of_the_same_swarms_that_differ_in_options(tmp_path, capsys, benchmark_script) -> None:
    base, acc = _fake_run(tmp_path, "base", "synthetic-hurricane", [0, 1])
    data = json.loads(base.read_text())
    data["config"]["fol"] = {"preset": "paper"}  # another FOL configuration on the same pretrained swarm
    for seed in ("0", "1"):
        data["raw"][0]["acc"][seed]["FOL (E=1)"][0] += 0.1  # node 0 gains 10 points on both seeds, the rest tie
    other = tmp_path / "paper.json"
    other.write_text(json.dumps(data))
    script = benchmark_script("paper_tables")
    assert script.main(["--compare", str(base), str(other), "--out", str(tmp_path / "cmp")]) == 0
    out = capsys.readouterr().out
    assert "{'preset': 'paper'}" in out and "seeds [0, 1]" in out
    assert (tmp_path / "cmp" / "compare.md").read_text() in out  # the printed table, written as it was printed
    local = 100 * sum(sum(acc[s]["Local"]) / 4 for s in (0, 1)) / 2
    assert f"Local {local:.1f}" in out
    fol = next(line for line in out.splitlines() if line.startswith("| FOL (E=1) |"))
    assert "| +2.5 ± 0.0 | 2 / 0 of 8 |" in fol  # 10 points on one node of four, on both seeds
    fola = next(line for line in out.splitlines() if line.startswith("| FOL-A (E=1) |"))
    assert "| +0.0 ± 0.0 | 0 / 0 of 8 | - |" in fola  # no node differs: no test
    # only the seeds both ran are paired
    later, _ = _fake_run(tmp_path, "later", "synthetic-hurricane", [1, 2])
    assert script.main(["--compare", str(base), str(later)]) == 0
    one = capsys.readouterr().out
    assert "seeds [1]" in one and "± 0.0" not in one  # one seed paired: one value per cell, no spread


def test_compare_refuses_runs_that_are_not_the_same_swarms(tmp_path, capsys, benchmark_script) -> None:
    base, _ = _fake_run(tmp_path, "base", "synthetic-hurricane", [0])
    data = json.loads(base.read_text())
    data["raw"][0]["acc"]["0"]["Local"][2] = 0.3
    retrained = tmp_path / "retrained.json"
    retrained.write_text(json.dumps(data))
    data = json.loads(base.read_text())
    data["config"]["arch"] = "cnn-small"
    small = tmp_path / "small.json"
    small.write_text(json.dumps(data))
    elsewhere, _ = _fake_run(tmp_path, "elsewhere", "synthetic-hurricane", [5])
    script = benchmark_script("paper_tables")
    for other, words in ((retrained, "seed 0: Local differs"), (small, "differ in arch"),
                         (elsewhere, "share no setting and seed"), (base, "listed twice")):
        assert script.main(["--compare", str(base), str(other)]) == 2
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    a_file = tmp_path / "a-file"
    a_file.write_text("kept")
    paper, _ = _fake_run(tmp_path, "paper", "synthetic-hurricane", [0])
    assert script.main(["--compare", str(base), str(paper), "--out", str(a_file)]) == 2  # not a folder
    err = capsys.readouterr().err
    assert "--out" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert a_file.read_text() == "kept"


def test_compare_lists_rows_in_the_paper_order_even_from_a_run_in_memory() -> None:
    """run_setting records FOL-A (E=1), FOL (E=1), FOL-A (E=2), ...; compare_results
    promises the paper's order (every E of FOL-A, then of FOL), as from tables.json."""
    from fol.reproduce import ProtocolConfig, ProtocolResult, compare_results, rows_for

    cfg = ProtocolConfig(datasets=("d",), psis=(0.5,), seeds=(0,), nodes=2, pool=0, rounds=2, methods=("fol",))
    interleaved = ["Local", "FOL-A (E=1)", "FOL (E=1)", "FOL-A (E=2)", "FOL (E=2)"]
    run = lambda v: ProtocolResult(cfg, settings={("d", 0.5): {  # noqa: E731
        "sizes": [50, 60], "columns": [0, 1], "acc": {0: {row: [0.8, 0.7 if row == "Local" else v]
                                                         for row in interleaved}}}})
    rows = [c.row for c in compare_results(run(0.8), run(0.9))]
    assert rows == rows_for(2, ("fol",))[1:] == ["FOL-A (E=1)", "FOL-A (E=2)", "FOL (E=1)", "FOL (E=2)"]


@pytest.mark.parametrize("psi", ["inf", "nan", "0", "-0.5"])
def test_psi_must_be_a_finite_positive_number(psi, tmp_path, capsys, benchmark_script) -> None:
    """psi = inf passed the protocol's check (only ``> 0`` was asked) and reached the Dirichlet draw."""
    with pytest.raises(ConfigError, match=r"protocol: psi values must be finite numbers > 0, got \[0\.5, "):
        ProtocolConfig(psis=(0.5, float(psi)))
    for name in ("paper_tables", "fol_diagnose"):
        with pytest.raises(SystemExit) as stop:  # argparse: usage, then the one line, before any work
            benchmark_script(name).main(["--psi", psi, "--nodes", "3", "--pool", "150"])
        err = capsys.readouterr().err
        assert stop.value.code == 2 and f"argument --psi: expected a Dirichlet concentration psi > 0, got {psi}" in err
        assert "Traceback" not in err


def test_a_run_never_overwrites_the_tables_of_an_earlier_run(tmp_path, capsys, benchmark_script) -> None:
    """An --out that already holds a run's tables (e.g. a stopped three-seed run, whose
    missing seed is then run with the default --out by mistake) is refused before any
    training, in one line naming the file: the run would rewrite it with its own seeds
    after its first one. Runs are joined with --merge (whose --out may be rewritten: a
    merge is made again from its inputs), never by writing into one folder."""
    saved, _ = _fake_run(tmp_path, "saved", "synthetic-hurricane", [0, 1])
    before = saved.read_bytes()
    script = benchmark_script("paper_tables")
    argv = ["--quick", *TINY, "--rounds", "1", "--methods", "local", "--out", str(saved.parent)]
    assert script.main(argv) == 2
    err = capsys.readouterr().err
    assert "--out" in err and "tables.json" in err and "--merge" in err and len(err.strip().splitlines()) == 1
    assert saved.read_bytes() == before


def test_first_seed_alone_moves_the_seeds(tmp_path, capsys, benchmark_script) -> None:
    """--first-seed without --seeds runs the preset's number of seeds from it (one with
    --quick): it was ignored, and the run recorded seed 0 for a request of seed 5."""
    out = tmp_path / "s5"
    argv = ["--quick", *TINY, "--rounds", "1", "--methods", "local", "--first-seed", "5", "--out", str(out)]
    assert benchmark_script("paper_tables").main(argv) == 0
    capsys.readouterr()
    data = json.loads((out / "tables.json").read_text())
    assert data["config"]["seeds"] == [5] and list(data["raw"][0]["acc"]) == ["5"]


def test_tables_md_says_what_its_cells_are(tmp_path) -> None:
    """tables.md stands alone: each setting says its cells are mean ± sample std (n - 1)
    over which seeds, of a node's accuracy or of the mean over nodes, and how the node
    columns were picked; the std in a cell is that sample std."""
    import statistics

    path, acc = _fake_run(tmp_path, "a", "synthetic-hurricane", [0, 1, 3])
    md = (path.parent / "tables.md").read_text()
    assert "mean ± std over seeds [0, 1, 3] (sample std, n − 1)" in md
    assert "25 / 50 / 75 % quantiles of local data size" in md and "mean over all nodes" in md
    node = column_nodes([60, 120, 90, 45])[0]
    vals = [100 * acc[s]["FOL (E=1)"][node] for s in (0, 1, 3)]
    cell = f"{statistics.mean(vals):.1f} ± {statistics.stdev(vals):.1f}"
    assert f"| FOL (E=1) | {cell} |" in md and f"{statistics.stdev(vals):.1f}" != f"{statistics.pstdev(vals):.1f}"
    one, _ = _fake_run(tmp_path, "b", "synthetic-hurricane", [2])
    assert "seed [2] (one value per cell, no spread)" in (one.parent / "tables.md").read_text()


def test_a_spread_over_one_value_is_not_shown_as_zero(benchmark_script) -> None:
    """A share counted on one seed of two (the other's ensemble gained under half a point),
    and every difference of a one-seed run, are one value each: no '± 0' spread, which
    would read as seeds that agree; two seeds that agree still show '± 0.0'."""
    from fol.reproduce import ProtocolResult

    local = [0.9] * 24
    tiny = {"Local": local, "FOL-A (E=1)": [0.9 + 1 / 60] + [0.9] * 23, "FOL (E=1)": [0.9 - 1 / 60] + [0.9] * 23}
    clear = {"Local": local, "FOL-A (E=1)": [0.95] * 24, "FOL (E=1)": [0.93] * 24}

    def result(acc):
        cfg = ProtocolConfig(datasets=("synthetic-hurricane",), psis=(0.5,), seeds=tuple(acc), nodes=24, pool=0,
                             rounds=1, methods=("fol",))
        return ProtocolResult(cfg, settings={("synthetic-hurricane", 0.5): {
            "sizes": [60] * 24, "columns": column_nodes([60] * 24), "acc": acc}})

    summary = benchmark_script("paper_tables").summary
    text = "\n".join(summary(result({0: tiny, 1: clear})))
    assert "keeps 60 % (over the 1 of 2 seeds" in text and "60 ± 0" not in text
    one = "\n".join(summary(result({0: clear})))
    assert "FOL - Local = +3.0, FOL-A - Local = +5.0 points; the student keeps 60 % of" in one
    assert "| FOL (E=1) | +3.0 | 24 / 0 of 24 |" in one and "± 0.0" not in one
    two = "\n".join(summary(result({0: clear, 1: clear})))
    assert "FOL - Local = +3.0 ± 0.0" in two and "keeps 60 ± 0 %" in two and "| FOL (E=1) | +3.0 ± 0.0 |" in two


def test_a_huge_round_count_is_refused_before_any_work(tmp_path, capsys, benchmark_script) -> None:
    """E sizes the table (rows_for builds rows x E names) and the FOL run (per-node lists of E
    entries): --rounds 1000000000 pretrained every node and then hung building the table,
    and a tables.json naming such a count hung --merge. Both are one line now: at most
    contact_sim's MAX_ROUNDS, the most rounds a scenario may define."""
    from contact_sim.scenario import MAX_ROUNDS
    from fol.reproduce import MAX_ROUNDS as protocol_max_rounds

    assert protocol_max_rounds == MAX_ROUNDS  # one bound, written in both layers
    with pytest.raises(ConfigError, match="rounds"):
        ProtocolConfig(rounds=MAX_ROUNDS + 1)
    assert ProtocolConfig(rounds=MAX_ROUNDS).rounds == MAX_ROUNDS
    path, _ = _fake_run(tmp_path, "a", "synthetic-hurricane", [0])
    doc = json.loads(path.read_text())
    doc["config"]["rounds"] = MAX_ROUNDS + 1
    path.write_text(json.dumps(doc))
    script = benchmark_script("paper_tables")
    assert script.main(["--merge", str(path)]) == 2
    err = capsys.readouterr().err
    assert "rounds" in err and len(err.strip().splitlines()) == 1
    assert script.main(["--quick", *TINY, "--rounds", "1000000000", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "rounds" in err and len(err.strip().splitlines()) == 1 and not (tmp_path / "o").exists()


def test_each_setting_states_its_own_seeds_in_a_merged_summary(tmp_path, capsys, benchmark_script) -> None:
    """A merge of hurricane seeds 0-1 and wildfire seed 0: the summary labelled every cell
    'mean ± std over seeds [0, 1]' (the union), which wildfire's cells are not; each
    setting's caption states its own seeds, and nothing claims the union."""
    a, _ = _fake_run(tmp_path, "a", "synthetic-hurricane", [0, 1])
    b, _ = _fake_run(tmp_path, "b", "synthetic-wildfire", [0])
    assert benchmark_script("paper_tables").main(["--merge", str(a), str(b)]) == 0
    printed = capsys.readouterr().out
    assert "over seeds [0, 1] (sample std, n − 1)" in printed and "seed [0] (one value per cell" in printed
    assert printed.count("seeds [0, 1]") == 1


@pytest.mark.parametrize("size", [4, 7, 1025, 10**400, 2.5, "32", True],
                         ids=["4", "7", "1025", "huge", "float", "str", "bool"])
def test_image_size_is_checked_by_the_protocol_naming_the_field(size, tmp_path, capsys, benchmark_script) -> None:
    """ProtocolConfig did not check image_size: a bad one was refused only when the first pool was
    loaded, in a message naming the dataset ("synthetic wildfire: image_size ..."), and a string or
    a huge integer passed the config. It is now refused with the same bounds as the loaders."""
    with pytest.raises(ConfigError, match=r"^protocol: image_size must be an integer of 8\.\.1024 pixels, got "):
        ProtocolConfig(image_size=size)
    assert ProtocolConfig(image_size=8).image_size == 8 and ProtocolConfig(image_size=1024).image_size == 1024
    assert benchmark_script("paper_tables").main(["--quick", "--image-size", "4", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "error: protocol: image_size must be an integer of 8..1024 pixels, got 4" in err and "Traceback" not in err


def test_by_skew_splits_each_rows_gain_by_how_one_class_a_node_is(tmp_path, capsys, benchmark_script) -> None:
    """--by-skew rebuilds every node's split (no training) and gives each row's gain over Local on
    the nodes whose test split is >= 90 % one class and on the others; a run whose recorded node
    sizes are not those of its config's partition is refused in one line."""
    from fol.data import split_node
    from fol.reproduce import ProtocolResult, load_pool, partition_pool
    from fol.seeds import node_seed

    cfg = ProtocolConfig(datasets=("synthetic-hurricane",), psis=(0.5,), seeds=(0, 1), nodes=6, pool=600,
                         min_samples=20, rounds=1, methods=("fol",))
    pool = load_pool("synthetic-hurricane", cfg)
    shards = partition_pool(pool, cfg, 0.5)
    sizes = [len(s) for s in shards]
    rows = rows_for(1, ("fol",))
    acc = {s: {row: [0.5 + 0.04 * k + (0.005 * (i + 1) * (k + 1) if row != "Local" else 0.0) for k in range(6)]
               for i, row in enumerate(rows)} for s in (0, 1)}
    res = ProtocolResult(cfg, settings={("synthetic-hurricane", 0.5): {"sizes": sizes, "columns": column_nodes(sizes),
                                                                      "acc": acc}})
    res.write(tmp_path / "run")
    script = benchmark_script("paper_tables")
    assert script.main(["--by-skew", str(tmp_path / "run" / "tables.json")]) == 0
    out = capsys.readouterr().out
    one = {s: [max(split_node(pool.subset(sh), seed=node_seed(s, k)).test.class_counts().tolist())
               / len(split_node(pool.subset(sh), seed=node_seed(s, k)).test) >= 0.9 for k, sh in enumerate(shards)]
           for s in (0, 1)}
    assert any(any(v) for v in one.values()) and not all(all(v) for v in one.values())  # both groups appear

    def expected(row: str, keep: bool) -> str:
        per_seed = [[acc[s][row][k] - (acc[s]["Local"][k] if row != "Local" else 0.0)
                     for k in range(6) if one[s][k] == keep] for s in (0, 1)]
        per_seed = [100 * sum(v) / len(v) for v in per_seed if v]
        return f"{sum(per_seed) / len(per_seed):{'.1f' if row == 'Local' else '+.1f'}}" if per_seed else "-"

    counts = {keep: "/".join(str(sum(1 for v in one[s] if v == keep)) for s in (0, 1)) for keep in (True, False)}
    assert f"| row | nearly one class ({counts[True]} nodes) | others ({counts[False]} nodes) |" in out
    for row in rows:
        label = row if row == "Local" else f"{row} - Local"
        assert f"| {label} | {expected(row, True)} | {expected(row, False)} |" in out, (row, out)

    res.settings[("synthetic-hurricane", 0.5)]["sizes"] = [n + 1 for n in sizes]  # another partition, same columns
    res.write(tmp_path / "other")
    assert script.main(["--by-skew", str(tmp_path / "other" / "tables.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "node sizes differ" in err[0] and "Traceback" not in err[0]


@pytest.mark.parametrize("kind", ["control", "long"])
def test_the_refusal_of_an_out_holding_tables_names_it_through_brief(kind: str, tmp_path) -> None:
    """check_fresh_output named --out as given: a newline or a terminal's escape in a folder's name went into
    the message as it is, a folder of 3,000 characters made a 3 kB line. It names it through brief()."""
    from fol.reproduce import check_fresh_output
    from swarmbase.tomlcheck import brief

    out = odd_folder(tmp_path, kind)
    (out / "tables.json").write_text("{}")
    with pytest.raises(ConfigError) as refused:
        check_fresh_output(out)
    message = str(refused.value)
    assert message.startswith(f"--out {brief(out)}: already holds tables.json of an earlier run"), message
    assert message.isprintable() and len(message) < 400, message
