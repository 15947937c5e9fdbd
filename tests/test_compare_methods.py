"""benchmarks/compare_methods.py: merging runs saved with --json refuses runs that
disagree, and FOL's E < max rows are read off the per-exchange points."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def script(benchmark_script):
    return benchmark_script("compare_methods")


def _rec(method, node, acc, seed=0):
    return {"task": "hurricane", "psi": 0.5, "seed": seed, "method": method, "node": node, "test_accuracy": acc,
            "seconds": 1.0, "method_seconds": 2.0, "bytes_up": 10, "bytes_down": 20, "train_flops": 30, "rounds": 1}


def test_merge_keeps_agreeing_duplicates_once_and_refuses_disagreeing_ones(script) -> None:
    a = [_rec("local", "n0", 0.8), _rec("fol", "n0", 0.9)]
    b = [_rec("local", "n0", 0.8), _rec("fedavg", "n0", 0.85), _rec("local", "n0", 0.8, seed=1)]
    merged = script.merge_records([(Path("a.json"), a), (Path("b.json"), b)])
    assert [(r["method"], r["seed"]) for r in merged] == [("local", 0), ("fol", 0), ("fedavg", 0), ("local", 1)]
    with pytest.raises(ValueError, match=r"b\.json and a\.json disagree on hurricane/0\.5/0/local/n0"):
        script.merge_records([(Path("a.json"), a), (Path("b.json"), [_rec("local", "n0", 0.7)])])
    with pytest.raises(ValueError, match=r"c\.json: a record has no 'node'"):
        script.merge_records([(Path("c.json"), [{"task": "t", "psi": 0.5, "seed": 0, "method": "m"}])])
    # hand-edited records of the wrong type or range ended in a traceback inside the report
    for change in ({"test_accuracy": "0.9"}, {"test_accuracy": True}, {"test_accuracy": 1.5}, {"seed": "0"},
                   {"bytes_up": None}, {"node": 3}, {"seconds": float("nan")}):
        with pytest.raises(ValueError, match=r"d\.json: the record hurricane/0\.5/.*wrong type or range"):
            script.merge_records([(Path("d.json"), [{**_rec("local", "n0", 0.8), **change}])])


def test_after_exchanges_reads_the_shorter_run_off_the_points(script) -> None:
    points = [{"round": 1, "test_accuracy": 0.7, "val_accuracy": 0.6, "student": 0.7, "ensemble": 0.8, "transfer": 0.5,
               "kept_local": False, "bytes_up": 10, "bytes_down": 20, "train_flops": 100, "seconds": 1.0},
              {"round": 2, "test_accuracy": 0.75, "val_accuracy": 0.65, "student": 0.75, "ensemble": 0.9,
               "transfer": 0.4, "kept_local": False, "bytes_up": 30, "bytes_down": 50, "train_flops": 250,
               "seconds": 2.5}]
    final = {"node": "n0", "method": "fol", "test_accuracy": 0.75, "val_accuracy": 0.65, "bytes_up": 30,
             "bytes_down": 50, "train_flops": 1250, "rounds": 2, "seconds": 2.5, "kept_local": False,
             "extra": {"exchanges": points, "selected": [["a"], ["b"]], "weights": [[1.0], [1.0]],
                       "accuracy": {"local": 0.6, "student": 0.75, "ensemble": 0.9}, "transfer": 0.4}}
    one = script.after_exchanges(final, 1)
    assert (one["test_accuracy"], one["bytes_up"], one["bytes_down"], one["rounds"]) == (0.7, 10, 20, 1)
    assert one["train_flops"] == 1100  # pretraining (1000) + the first exchange's 100
    assert one["extra"]["selected"] == [["a"]] and one["extra"]["accuracy"] == {"local": 0.6, "student": 0.7,
                                                                               "ensemble": 0.8}
    assert "exchanges" not in one["extra"] and one["extra"]["transfer"] == 0.5
    two = script.after_exchanges(final, 2)
    assert {k: two[k] for k in ("test_accuracy", "bytes_up", "bytes_down", "train_flops", "rounds")} == {
        k: final[k] for k in ("test_accuracy", "bytes_up", "bytes_down", "train_flops", "rounds")}


def test_budgets_get_their_own_rows_and_table(script) -> None:
    assert script._label("dense", 1, "tiny") == "dense" and script._label("fol", 3) == "fol (E=3)"
    assert script._label("co-boosting", 1, "small") == "co-boosting [small]"
    assert script.paper_figure("hurricane", 0.3, "dense [small]", 1) == script.paper_figure("hurricane", 0.3, "dense", 1)
    rows = [{"method": label, "seed": seed, "node": node, "test_accuracy": acc,
             "extra": {"budget": budget, "generator_samples": samples, "server_flops": 2e9}}
            for label, budget, samples, accs in (("dense", "tiny", 3600, (0.5, 0.7)),
                                                 ("dense [small]", "small", 19200, (0.6, 0.8)))
            for seed, acc in enumerate(accs) for node in ("n0", "n1")]
    table = script.budget_table(rows).splitlines()
    assert table[2] == "| dense | tiny | 3,600 | 1/427 | 2 | 60.00 ± 14.14 |"
    assert table[3].startswith("| dense | small | 19,200 | 1/80 | 2 | 70.00 ± 14.14")


def test_the_difference_to_local_is_paired_by_seed_and_node(script) -> None:
    rows = [{"method": m, "seed": seed, "node": node, "test_accuracy": acc}
            for m, seed, node, acc in (("local", 0, "n0", 0.80), ("local", 0, "n1", 0.90),
                                       ("local", 1, "n0", 0.60), ("local", 1, "n1", 0.70),
                                       ("fol", 0, "n0", 0.85), ("fol", 0, "n1", 0.90),
                                       ("fol", 1, "n0", 0.65), ("fol", 1, "n1", 0.60),
                                       ("fedavg", 2, "n0", 0.99))]
    # seed 0: +0.05 and 0 -> +2.5 points; seed 1: +0.05 and -0.10 -> -2.5 points
    assert script.versus_local(rows, "fol") == ("+0.00 ± 3.54", "2 / 1")
    assert script.versus_local(rows, "local") == ("-", "-")
    assert script.versus_local(rows, "fedavg") == ("-", "-")  # no local row on seed 2
    one_seed = [r for r in rows if r["seed"] == 0]
    assert script.versus_local(one_seed, "fol") == ("+2.50", "1 / 0")


def test_a_json_path_that_cannot_be_written_is_refused_before_training(script, tmp_path, monkeypatch, capsys) -> None:
    """--json naming a folder stopped with a traceback after the first method had trained."""
    def no_training(*args, **kwargs):
        raise AssertionError("trained before checking --json")

    monkeypatch.setattr(script, "build_nodes", no_training)
    monkeypatch.setattr("sys.argv", ["compare_methods.py", "--quick", "--methods", "local", "--json", str(tmp_path)])
    assert script.main() == 2
    err = capsys.readouterr().err
    assert f"--json {tmp_path}: is a folder" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv, words", [
    (["--budget", "bogus", "--methods", "local", "dense"], "error: methods.dense.budget must be one of"),
    (["--per-node", "1000000000"], "12,000,000,000 images of 16x16 pixels would need"),
    (["--image-size", "4"], "image_size must be an integer of 8..1024"),
    (["--nodes", "0"], "error: argument --nodes: expected an integer >= 2, got 0"),
    (["--seeds", "0"], "error: argument --seeds: expected an integer >= 1, got 0"),
    (["--fol-rounds", "1", "0"], "error: argument --fol-rounds: expected an integer >= 1, got 0"),
    (["--psi", "0.5", "0"], "error: argument --psi: expected a Dirichlet concentration > 0, got 0"),
    # FedAvg's generator refused a negative one, after training
    (["--first-seed", "-1"], "error: argument --first-seed: expected a seed in 0..4294967295, got -1"),
    (["--first-seed", str(2**32)], f"error: argument --first-seed: expected a seed in 0..4294967295, got {2**32}"),
    (["--arch", "nope"], "error: argument --arch: invalid choice: 'nope'"),  # a traceback once the pool was drawn
    # seed 2**32 draws seed 0's pool again (the generators use 32 bits), counted as a new seed
    (["--first-seed", str(2**32 - 1), "--seeds", "2"],
     "error: --first-seed / --seeds: expected seeds in 0..4294967295, got 4294967295..4294967296 (at most 1 seeds"),
])
def test_bad_settings_are_one_line_before_training(script, monkeypatch, capsys, argv, words) -> None:
    """Each stopped with a traceback, --budget only after the swarm was pretrained and the methods
    before it had run; --per-node 10^9 reached the synthetic renderer."""
    def no_training(*args, **kwargs):
        raise AssertionError("trained before checking the settings")

    monkeypatch.setattr(script, "build_nodes", no_training)
    monkeypatch.setattr(script, "load_dataset", no_training)
    monkeypatch.setattr("sys.argv", ["compare_methods.py", "--quick", "--methods", "local", *argv])
    try:
        rc = script.main()
    except SystemExit as exc:  # argparse's error: usage, then one line
        rc = exc.code
    err = capsys.readouterr().err
    assert rc == 2 and words in err and "Traceback" not in err


def test_the_above_below_column_is_named_for_what_it_counts(script, capsys) -> None:
    """Two nodes over three seeds: fol is above local on all six (node, seed) pairs, so
    the column shows 6 / 0, which a header of "nodes above / below" misnamed (2 nodes)."""
    import argparse

    recs = [_rec(m, node, acc + (0.05 if m == "fol" else 0.0), seed=seed)
            for m in ("local", "fol") for seed, acc in enumerate((0.7, 0.8, 0.9)) for node in ("n0", "n1")]
    script.report(recs, argparse.Namespace(plots=None))
    lines = capsys.readouterr().out.splitlines()
    head = next(line for line in lines if line.startswith("| method | test acc."))
    fol = next(line for line in lines if line.startswith("| fol |"))
    column = head.split(" | ").index("(node, seed) pairs above / below local")
    assert fol.split(" | ")[column] == "6 / 0"


def test_merge_refuses_seeds_with_different_node_counts_in_one_line(script, tmp_path, monkeypatch, capsys) -> None:
    """Runs of 2 and 3 nodes merged: the report stopped with a traceback in the paired difference to local."""
    import json

    a = [_rec(m, node, 0.8) for m in ("local", "fol") for node in ("n0", "n1")]
    b = [_rec(m, node, 0.8, seed=1) for m in ("local", "fol") for node in ("n0", "n1", "n2")]
    (tmp_path / "a.json").write_text(json.dumps(a))
    (tmp_path / "b.json").write_text(json.dumps(b))
    monkeypatch.setattr("sys.argv", ["compare_methods.py", "--merge", str(tmp_path / "a.json"),
                                     str(tmp_path / "b.json")])
    assert script.main() == 2
    err = capsys.readouterr().err
    assert f"b.json: hurricane psi 0.5 seed 1 local has 3 node(s), but seed 0 local ({tmp_path / 'a.json'}) has 2" \
        in err and "same --nodes" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    # within one seed too (a method run on fewer nodes)
    with pytest.raises(ValueError, match=r"c\.json: hurricane psi 0\.5 seed 0 fol has 1 node"):
        script.merge_records([(Path("c.json"), a[:3])])
    fedavg = [_rec("fedavg", node, 0.7) for node in ("n0", "n1")]
    assert len(script.merge_records([(Path("a.json"), a), (Path("d.json"), fedavg)])) == 6


@pytest.mark.parametrize("merge", [False, True])
def test_a_plots_folder_that_cannot_be_made_is_refused_before_any_work(script, tmp_path, monkeypatch, capsys,
                                                                      merge) -> None:
    """--plots under a regular file stopped with a NotADirectoryError traceback in the report, after
    every method had trained (and, with --merge, after the tables were printed)."""
    import json

    def no_training(*args, **kwargs):
        raise AssertionError("trained before checking --plots")

    monkeypatch.setattr(script, "build_nodes", no_training)
    monkeypatch.setattr(script, "load_dataset", no_training)
    (tmp_path / "file").write_text("x")
    plots = tmp_path / "file" / "plots"
    runs = tmp_path / "a.json"
    runs.write_text(json.dumps([_rec(m, node, 0.8) for m in ("local", "fol") for node in ("n0", "n1")]))
    argv = ["--merge", str(runs)] if merge else ["--quick", "--methods", "local"]
    monkeypatch.setattr("sys.argv", ["compare_methods.py", *argv, "--plots", str(plots)])
    assert script.main() == 2
    captured = capsys.readouterr()
    assert f"--plots {plots}" in captured.err and "Traceback" not in captured.err
    assert len(captured.err.strip().splitlines()) == 1 and "| method |" not in captured.out
