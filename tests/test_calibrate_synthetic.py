"""benchmarks/calibrate_synthetic.py at a tiny size: the summary is the mean of
the node lines, the label set follows --classes, and every target is judged."""

from __future__ import annotations

import re
import statistics

import pytest


@pytest.mark.parametrize("classes, name, k", [("event", "synthetic-wildfire (2 classes)", 2),
                                              ("type", "synthetic-wildfire-types (4 classes)", 4)])
def test_summary_is_the_mean_of_the_nodes(classes, name, k, capsys, benchmark_script) -> None:
    script = benchmark_script("calibrate_synthetic")
    argv = ["--task", "wildfire", "--classes", classes, "--nodes", "3", "--per-node", "40", "--pool", "600",
            "--region-images", "80", "-v"]
    assert script.main(argv) == 0
    out = capsys.readouterr().out
    nodes = re.findall(r"node +\d+: train mix=\[([\d, ]+)\] test acc=([\d.]+) \(majority ([\d.]+)\)", out)
    assert len(nodes) == 3
    assert all(len(mix.split(",")) == k for mix, _, _ in nodes)
    assert all(sum(map(int, mix.split(","))) == 28 for mix, _, _ in nodes)  # 70 % of 40 images train
    local = 100 * sum(float(a) for _, a, _ in nodes) / 3
    majority = 100 * sum(float(m) for _, _, m in nodes) / 3
    assert name in out
    printed_local = float(re.search(r"local test accuracy  : ([\d.]+)", out).group(1))
    printed_majority = float(re.search(r"majority-class rate  : ([\d.]+)", out).group(1))
    assert abs(printed_local - local) < 0.2 and abs(printed_majority - majority) < 0.2
    spread = float(re.search(r"local test accuracy  : [\d.]+ ± ([\d.]+) % \(mean ± sample std over nodes\)", out).group(1))
    assert abs(spread - 100 * statistics.stdev(float(a) for _, a, _ in nodes)) < 0.06  # n - 1, as every other table
    assert abs(float(re.search(r"local - majority : +(-?[\d.]+)", out).group(1)) - (printed_local - printed_majority)) < 0.2
    assert len(re.findall(r"\(target >= \d+\) (met|NOT met)", out)) == 4


def test_seeds_are_summarized_and_saved(tmp_path, capsys, benchmark_script) -> None:
    """--seeds 2: each seed is its own full run (another pool, partition and
    model); the summary is the mean over the seeds' printed figures, counts the
    seeds that meet each target, and --json holds the same figures."""
    import doctest
    import json
    import statistics

    script = benchmark_script("calibrate_synthetic")
    assert doctest.testmod(script).failed == 0  # summarize's example (benchmarks/ is not collected)
    path = tmp_path / "cal.json"
    argv = ["--task", "hurricane", "--nodes", "3", "--per-node", "40", "--pool", "600", "--region-images", "80",
            "--seeds", "2", "--seed", "4", "--json", str(path)]
    assert script.main(argv) == 0
    out = capsys.readouterr().out
    assert re.findall(r"psi=0.5, seed=(\d+),", out) == ["4", "5"]
    local = [float(v) for v in re.findall(r"local test accuracy  : ([\d.]+)", out)]
    drops = [float(v) for v in re.findall(r"far-region drop  : +(-?[\d.]+) \(target", out)]
    met = re.findall(r"far-region drop  : +-?[\d.]+ \(target >= 10\) (met|NOT met)", out)
    assert len(local) == 2 and len(drops) == 2
    summary = out.split("mean ± std over seeds 4-5 (2 seeds)")[1]
    m = re.search(r"local +: +([\d.]+) ± ([\d.]+) +\(seeds 4, 5: ([\d.]+), ([\d.]+)\)", summary)
    assert m and [float(m.group(3)), float(m.group(4))] == local
    assert abs(float(m.group(1)) - statistics.mean(local)) < 0.06
    d = re.search(r"far-region drop +: +(-?[\d.]+) ± [\d.]+ +\(seeds 4, 5: (-?[\d.]+), (-?[\d.]+); "
                  r"target >= 10: met on (\d) of 2 seeds\)", summary)
    assert d and abs(float(d.group(2)) - drops[0]) < 0.06 and abs(float(d.group(3)) - drops[1]) < 0.06
    assert int(d.group(4)) == met.count("met")
    saved = json.loads(path.read_text())
    runs = saved["runs"]["hurricane"]
    assert [r["seed"] for r in runs] == [4, 5] and saved["args"]["seeds"] == 2
    assert all(abs(r["local"] - v) < 0.06 for r, v in zip(runs, local))
    assert all(len(r["local_per_node"]) == 3 for r in runs)
    assert runs[0]["local"] != runs[1]["local"] or runs[0]["pooled"] != runs[1]["pooled"]


def test_unwritable_json_fails_before_training(tmp_path, capsys, benchmark_script) -> None:
    script = benchmark_script("calibrate_synthetic")
    assert script.main(["--task", "wildfire", "--json", str(tmp_path)]) == 2  # a folder, not a file name
    err = capsys.readouterr()
    assert err.err.count("\n") == 1 and "--json" in err.err and "is a folder" in err.err
    assert "machine:" not in err.out  # nothing ran


def test_bad_settings_are_one_line_and_region_images_is_checked_before_training(tmp_path, capsys, monkeypatch,
                                                                                benchmark_script) -> None:
    """Each was a traceback; a --region-images below the split's minimum only after every local model and
    the pooled one had trained; an unknown --arch only after the pool had been drawn."""
    script = benchmark_script("calibrate_synthetic")
    small = ["--task", "hurricane", "--nodes", "2", "--per-node", "40", "--pool", "400"]
    monkeypatch.setattr(script, "train_eval", lambda *a, **k: pytest.fail("trained before the settings were checked"))
    monkeypatch.setattr(script, "make_synthetic", lambda *a, **k: pytest.fail("data drawn before the settings were checked"))
    for argv, words in ((["--region-images", "3"], "argument --region-images: expected an integer >= 20 (the fewest a "
                                                   "70/15/15 split takes), got 3"),
                        (["--local-nodes", "-1"], "argument --local-nodes: expected an integer >= 0, got -1"),
                        (["--seeds", "0"], "argument --seeds: expected an integer >= 1, got 0"),
                        (["--seed", "-1"], "argument --seed: expected a seed in 0..4294967295, got -1"),
                        (["--psi", "0"], "argument --psi: expected a Dirichlet concentration > 0, got 0"),
                        (["--lr", "-1"], "argument --lr: expected a learning rate > 0, got -1"),
                        (["--lr", "nan"], "argument --lr: expected a learning rate > 0, got nan"),
                        (["--arch", "nope"], "argument --arch: invalid choice: 'nope'"),
                        # seed 2**32 draws seed 0's pool again (the generators use 32 bits), counted as a new seed
                        (["--seed", str(2**32 - 1), "--seeds", "2"], "error: --seed / --seeds: expected seeds in "
                                                                       "0..4294967295, got 4294967295..4294967296")):
        with pytest.raises(SystemExit) as exc:  # argparse: usage, then the one line
            script.main(small + argv)
        assert exc.value.code == 2 and words in capsys.readouterr().err
    monkeypatch.undo()
    monkeypatch.setattr(script, "train_eval", lambda *a, **k: pytest.fail("trained before the settings were checked"))
    for argv, words in ((["--pool", "30"], "error: 30 samples cannot give 2 nodes 40 samples each"),):
        assert script.main(small + argv) == 2
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("classes", ["event", "type"])
def test_by_form_accounts_for_every_test_image(classes, tmp_path, capsys, benchmark_script) -> None:
    """--by-form: the forms' counts add up to every node's test images, their local and pooled
    errors to the printed local and pooled accuracies, and the two node groups to all nodes
    (the same with --classes type, where an image's label is its form)."""
    import json

    script = benchmark_script("calibrate_synthetic")
    path = tmp_path / "cal.json"
    argv = ["--task", "hurricane", "--classes", classes, "--nodes", "3", "--per-node", "40", "--pool", "600",
            "--region-images", "80", "--by-form", "--json", str(path)]
    assert script.main(argv) == 0
    out = capsys.readouterr().out
    run = json.loads(path.read_text())["runs"]["hurricane"][0]
    errors, groups = run["by_form"]["errors"], run["by_form"]["groups"]
    names = ["no_damage", "flood", "roof_damage", "blue_tarp", "debris"]
    assert sorted(errors) == sorted(names)  # the JSON writer sorts keys; the printout keeps the class order
    assert [out.index(f"    {name}") for name in names] == sorted(out.index(f"    {name}") for name in names)
    n = sum(e["n"] for e in errors.values())
    assert n == 3 * 6  # 15 % of 40 images per node
    assert sum(sum(r[2] for r in e["by_region"].values()) for e in errors.values()) == n
    local_wrong = sum(e["local"] for e in errors.values())
    pooled_wrong = sum(e["pooled"] for e in errors.values())
    assert abs(100 * (1 - local_wrong / n) - run["local"]) < 1e-4  # equal test splits: the mean over nodes (float32 accuracies)
    assert abs(100 * (1 - pooled_wrong / n) - run["pooled"]) < 1e-4
    assert sum(g["nodes"] for g in groups.values()) == 3
    mean = sum(g["local"] * g["nodes"] for g in groups.values() if g["nodes"]) / 3
    assert abs(mean - run["local"]) < 1e-4
    for name, e in errors.items():
        assert re.search(rf"{name} *: +{e['local']} / +{e['pooled']} of {e['n']}\b", out)
    assert "where the room is" in out
