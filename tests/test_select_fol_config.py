"""benchmarks/select_fol_config.py --merge: the rule's table from saved runs, and
the refusal to merge runs of different settings (here: a run of the picks
together, ``--defaults-only``, with a run of every option)."""

from __future__ import annotations

import json

import pytest

KEYS = ("local_sel", "fol_sel", "fola_sel", "local_test", "fol_test", "fola_test")


@pytest.fixture(scope="module")
def script(benchmark_script):
    return benchmark_script("select_fol_config")


@pytest.fixture
def no_run(script, monkeypatch):
    """A test of a refused setting: running the swarm fails it (the refusal must come first)."""
    monkeypatch.setattr(script, "run_swarm", lambda *a, **k: pytest.fail("ran before the settings were checked"))


def _run(path, task, args, rows):
    base = {"nodes": 2, "per_node": 300, "psi": 0.5, "q": 5, "k": 3, "arch": "cnn-medium", "select_fraction": 0.15,
            "synth": True, "more": True, "stage2": True}
    results = {name: {key: list(values) for key, values in zip(KEYS, cols)} for name, cols in rows.items()}
    path.write_text(json.dumps({"args": {**base, **args}, "done": [f"{task} seed 0"], "results": results,
                                "picks": {}}))
    return str(path)


def test_merge_of_defaults_only_runs_compares_paper_and_default(script, tmp_path, capsys) -> None:
    rows = {"paper": [(0.8, 0.8)] * 6, "default (current)": [(0.8, 0.9)] * 6}
    a = _run(tmp_path / "h.json", "hurricane", {"defaults_only": True}, rows)
    b = _run(tmp_path / "w.json", "wildfire", {"defaults_only": True}, rows)
    assert script.main(["--merge", a, b]) == 0
    out = capsys.readouterr().out
    table = [line.split()[0] for line in out.splitlines() if line.startswith(("paper", "default"))]
    assert table == ["paper", "default"]
    assert "option (vs paper)" in out  # runs saved before --base existed compared against the paper preset
    assert "default (current)                 85.00" in out  # mean of 0.8 and 0.9 over the 4 node runs
    # node run by node run against the base: +10 points on 2 of the 4 runs, a tie on the others
    paired = next(line for line in out.splitlines() if line.startswith("  default (current)"))
    assert paired.split(None, 2)[2] == "+5.00 points, 2 above / 0 below of 4 runs, p = 0.5"


def test_merge_refuses_a_defaults_only_run_with_a_run_of_every_option(script, tmp_path, capsys) -> None:
    rows = {"paper": [(0.8,)] * 6, "default (current)": [(0.8,)] * 6}
    a = _run(tmp_path / "all.json", "hurricane", {}, rows)  # saved before the flag existed: no key
    b = _run(tmp_path / "combo.json", "hurricane", {"defaults_only": True}, rows)
    assert script.main(["--merge", a, b]) == 2
    assert "differ in defaults_only" in capsys.readouterr().err


def _args(*argv):
    import argparse
    ns = argparse.Namespace(q=5, k=None, base="default")  # the command line's defaults
    for text in argv:
        key, value = text.split("=")
        setattr(ns, key, None if value == "None" else (int(value) if value.isdigit() else
                                                      float(value) if value.replace(".", "", 1).isdigit() else value))
    return ns


def test_a_top_k_option_keeps_its_own_k_and_k_given_sets_every_config(script) -> None:
    options = [script._parse_option("top_k=5"), script._parse_option("distill_inputs=train+aug")]
    configs = script.build_configs(_args(), options)
    assert {name: cfg.top_k for name, cfg in configs.items()} == {
        "paper": 3, "default (current)": 3, "top_k=5": 5, "distill_inputs=train+aug": 3}
    assert all(cfg.max_neighbours == 5 for cfg in configs.values())
    assert configs["top_k=5"].replace(top_k=3) == configs["default (current)"]  # K is the only change
    forced = script.build_configs(_args("k=2", "q=4"), [])
    assert [(c.top_k, c.max_neighbours) for c in forced.values()] == [(2, 4), (2, 4)]


def test_an_option_may_not_change_q(script, capsys, no_run) -> None:
    assert script.main(["--option", "max_neighbours=3"]) == 2
    assert "set it with --q" in capsys.readouterr().err


def test_align_pruning_false_aligns_the_same_config_without_pruning_in_its_own_group(script, capsys, no_run) -> None:
    options = [script._parse_option("align_pruning=false"), script._parse_option("top_k_rule=greedy"),
               script._parse_option("finetune_lr=0.001")]
    configs = script.build_configs(_args(), options)
    assert configs["align_pruning=False"] == configs["default (current)"]  # not a FOLConfig field: the pipeline
    no_pruning = script.without_pruning(options)
    assert no_pruning == {"align_pruning=False"}
    groups = script.stage2_groups(configs, no_pruning)
    assert sorted((key[0], names) for key, names in groups.items()) == [
        (False, ["align_pruning=False"]), (True, ["finetune_lr=0.001"]),
        (True, ["paper", "default (current)", "top_k_rule=greedy"])]
    assert script.main(["--option", "align_pruning=sometimes"]) == 2
    err = capsys.readouterr().err
    assert "align_pruning must be true or false" in err and "Traceback" not in err


@pytest.mark.parametrize("swarm", [["--per-node", "80"], ["--swarm", "protocol", "--pool", "150"]])
def test_rounds_mode_runs_every_config_through_the_simulation_loop(script, capsys, tmp_path, monkeypatch,
                                                                   swarm) -> None:
    """``--rounds 2``: each config runs the swarm's two rounds; keep_received,
    an option that acts only from round 2 on, gets its own row, and the
    saved figures are one per node and config (on equal nodes, and on the
    protocol's swarm)."""
    build = script.build_configs
    short = dict(finetune_epochs=1, post_finetune_epochs=1, gate_epochs=1, distill_epochs=1, ensemble_steps=20)
    monkeypatch.setattr(script, "build_configs",  # one epoch per stage: the loop is tested, not the figures
                        lambda *a: {name: cfg.replace(**short) for name, cfg in build(*a).items()})
    pipeline, rounds_run = script.run_fol_pipeline, []

    def counted(ctx, *args, **kwargs):  # the simulation's loop, run as it is; what it did is recorded
        run = pipeline(ctx, *args, **kwargs)
        rounds_run.append((ctx.fol.keep_received, [[r.round for r in reports] for reports in run.reports]))
        return run

    monkeypatch.setattr(script, "run_fol_pipeline", counted)
    out = tmp_path / "sel.json"
    argv = ["--tasks", "hurricane", "--nodes", "3", *swarm, "--seeds", "1", "--q", "1", "--k", "2",
            "--arch", "cnn-small", "--rounds", "2", "--option", "keep_received=all", "--base", "default",
            "--json", str(out)]
    assert script.main(argv) == 0
    text = capsys.readouterr().out
    assert "E = 2" in text and "keep_received=all" in text and "option (vs default (current))" in text
    assert ("from 150 images (the protocol's swarm)" in text) == ("protocol" in swarm)
    saved = json.loads(out.read_text())
    assert saved["args"]["rounds"] == 2
    # every config really ran the swarm's two rounds on each of the 3 nodes, keep_received=all with its option
    assert sorted(rounds_run) == [("all", [[1, 2]] * 3), ("round", [[1, 2]] * 3), ("round", [[1, 2]] * 3)]
    assert set(saved["results"]) == {"paper", "default (current)", "keep_received=all"}
    for rows in saved["results"].values():
        assert all(len(rows[key]) == 3 for key in KEYS)
        assert all(0.0 <= v <= 1.0 for key in KEYS for v in rows[key])
    # the local model is the same pretrained node in every config
    assert saved["results"]["paper"]["local_test"] == saved["results"]["keep_received=all"]["local_test"]


def test_rounds_must_be_positive_and_not_an_option(script, capsys, no_run) -> None:
    with pytest.raises(SystemExit) as stop:  # argparse: usage, then the one line
        script.main(["--rounds", "0"])
    assert stop.value.code == 2 and "error: argument --rounds: expected an integer >= 1, got 0" in capsys.readouterr().err
    assert script.main(["--option", "rounds=3"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.endswith(": error: --option: E is the same for every option; set it with --rounds\n")


def test_protocol_swarm_has_the_protocols_varying_sizes_and_disjoint_selection_slices(script) -> None:
    """``--swarm protocol`` partitions the protocol's pool (``fol.reproduce``),
    with the run's seed as the data seed; every selection slice is carved off
    its node's shard, disjoint from what the node keeps."""
    from fol.reproduce import ProtocolConfig, load_pool, partition_pool

    args = _args("swarm=protocol", "nodes=6", "pool=600", "psi=0.5", "select_fraction=0.3")
    pool, kept, selection = script.swarm_shards("hurricane", 4, args)
    proto = ProtocolConfig(nodes=6, pool=600, data_seed=4)
    expected = partition_pool(load_pool("synthetic-hurricane", proto), proto, 0.5)
    assert len(pool) == 600 and len(kept) == len(selection) == 6
    for k, (keep, sel, shard) in enumerate(zip(kept, selection, expected, strict=True)):
        assert sorted(keep.tolist() + sel.tolist()) == sorted(shard.tolist())  # the protocol's shard, split in two
        assert not set(keep.tolist()) & set(sel.tolist())
        assert len(sel) == round(0.3 * len(shard))
    assert len({len(s) for s in expected}) > 1  # sizes vary, unlike --swarm equal
    equal = script.swarm_shards("hurricane", 4, _args("swarm=equal", "nodes=6", "per_node=50", "psi=0.5",
                                                     "select_fraction=0.3"))
    assert {len(k) + len(s) for k, s in zip(equal[1], equal[2])} == {50}


def test_protocol_swarm_too_small_a_pool_is_one_line(script, capsys, no_run) -> None:
    assert script.main(["--swarm", "protocol", "--nodes", "24", "--pool", "100"]) == 2
    err = capsys.readouterr().err
    assert err.partition(": error: ")[2].startswith("--swarm protocol: protocol: pool must be 0 (all) or >= nodes x "
                                                    "min_samples") and \
        "Traceback" not in err


def test_merge_refuses_a_task_and_seed_in_two_runs_and_unreadable_files(script, tmp_path, capsys) -> None:
    """The same run listed twice (or two runs of one task and seed) counted every node run twice:
    the same means, but a Wilcoxon p over twice the runs."""
    rows = {"paper": [(0.8, 0.8)] * 6, "default (current)": [(0.8, 0.9)] * 6}
    a = _run(tmp_path / "h.json", "hurricane", {"defaults_only": True}, rows)
    again = _run(tmp_path / "h2.json", "hurricane", {"defaults_only": True}, rows)
    garbage = tmp_path / "garbage.json"
    garbage.write_text("{not json")
    listed = tmp_path / "list.json"
    listed.write_text("[]")
    for argv, words in (([a, a], "hurricane seed 0 is also in"), ([a, again], "hurricane seed 0 is also in"),
                        ([str(garbage)], "cannot read it as JSON"), ([str(tmp_path / "missing.json")], "missing.json"),
                        ([str(listed)], "expected a --json file of this script")):
        assert script.main(["--merge", *argv]) == 2
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_a_json_path_that_cannot_be_written_is_refused_before_training(script, tmp_path, monkeypatch, capsys) -> None:
    """--json naming a folder stopped with a traceback after the first node had run."""
    def no_training(*args, **kwargs):
        raise AssertionError("trained before checking --json")

    monkeypatch.setattr(script, "run_swarm", no_training)
    assert script.main(["--tasks", "hurricane", "--nodes", "2", "--seeds", "1", "--defaults-only",
                        "--json", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"--json {tmp_path}: is a folder" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("argv, needle", [
    (["--seeds", "0"], "error: argument --seeds: expected an integer >= 1, got 0"),
    (["--nodes", "1"], "error: argument --nodes: expected an integer >= 2 (a swarm), got 1"),
    (["--first-seed", "-1"], "error: argument --first-seed: expected a seed in 0..4294967295, got -1"),
    (["--psi", "-1"], "error: argument --psi: expected a Dirichlet concentration > 0, got -1"),
    (["--q", "0"], "error: argument --q: expected an integer >= 1, got 0"),
    (["--k", "0"], "error: argument --k: expected an integer >= 1, got 0"),
    (["--select-fraction", "1"],
     "error: argument --select-fraction: expected a share of each node's images strictly between 0 and 1, got 1"),
    (["--tasks", "hurricane,fire"], "error: argument --tasks: expected a comma-separated list of hurricane, wildfire, "
                                    "each once, got hurricane,fire"),
    (["--arch", "nope"], "error: argument --arch: invalid choice: 'nope'"),  # a traceback once the pool was drawn
    (["--tasks", "hurricane,hurricane"], "error: argument --tasks: expected a comma-separated list of hurricane, "
                                         "wildfire, each once"),
    # seed 2**32 draws seed 0's pool again (the generators use 32 bits), counted as a new seed
    (["--first-seed", str(2**32 - 1)], "error: --first-seed / --seeds: expected seeds in 0..4294967295, got "
                                       "4294967295..4294967296"),
    # the pool is drawn whole: refused by its size before the run, not by the renderer
    (["--nodes", "100000", "--per-node", "100000"], "error: --nodes x --per-node x 2 synthetic images: "
                                                    "20,000,000,000 images of 32x32 pixels would need"),
])
def test_bad_values_are_argparse_lines_before_any_work(script, capsys, no_run, argv, needle) -> None:
    """Each value alone is checked as it is read (--seeds 0 was a run of nothing that exited 0, --q 0
    an error blamed on --option)."""
    with pytest.raises(SystemExit) as stop:
        script.main(["--defaults-only", *argv])
    out = capsys.readouterr()
    assert stop.value.code == 2 and needle in out.err and "Traceback" not in out.err
    assert "machine:" not in out.out


@pytest.mark.parametrize("argv, needle", [
    (["--per-node", "20"], "--per-node / --select-fraction: expected the smallest node to keep >= 20 images"),
    (["--swarm", "protocol", "--select-fraction", "0.6"], "--per-node / --select-fraction"),
])
def test_bad_swarm_arguments_are_one_line_before_any_work(script, capsys, argv, needle) -> None:
    """Each was a traceback from the partition or the split, a swarm of one node
    that ran."""
    assert script.main(["--defaults-only", *argv]) == 2
    out = capsys.readouterr()
    err = out.err.strip().splitlines()
    assert len(err) == 1 and err[0].partition(": error: ")[2].startswith(needle), err
    assert "machine:" not in out.out  # stopped before the run started
