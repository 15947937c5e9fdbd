"""benchmarks/fol_node_time.py: one node's round, stage by stage, for a preset
with ``--fol`` overrides. At a tiny size the printed stages must add up to no
more than the total, the overrides must reach the config, and a bad override
must stop the script with one line."""

from __future__ import annotations

import re

TINY = ["pretrain_epochs=1", "finetune_epochs=1", "post_finetune_epochs=1", "gate_epochs=1", "ensemble_steps=5",
        "top_k=2"]


def _stages(printed: str) -> dict[str, float]:
    return {m[1]: float(m[2]) for m in re.finditer(r"^\| (\S[^|]*?) \| \**([0-9.]+)\** \|$", printed, re.M)}


def test_prints_each_stage_and_a_total_that_covers_them(capsys, monkeypatch, benchmark_script) -> None:
    script = benchmark_script("fol_node_time")
    timed = []  # the round the script times: its received models and its config

    def recording(state, received, round_, cfg, variant):
        timed.append((len(received), cfg, variant))
        return personalize(state, received, round_, cfg, variant)

    personalize = script.personalize
    monkeypatch.setattr(script, "personalize", recording)
    argv = ["--q", "2", "--train-images", "40", "--fol", *TINY, "distill_inputs=train", "distill_epochs=2"]
    assert script.main(argv) == 0
    printed = capsys.readouterr().out
    assert "Q = 2" in printed and "distill_inputs=train distill_epochs=2" in printed
    # the header only echoes the command line: the overrides must reach the config of the timed round
    [(n_received, cfg, variant)] = timed
    assert (n_received, cfg.max_neighbours, variant) == (2, 2, "fol")
    assert (cfg.distill_inputs, cfg.distill_epochs, cfg.top_k, cfg.ensemble_steps) == ("train", 2, 2, 5)
    assert (cfg.pretrain_epochs, cfg.finetune_epochs, cfg.post_finetune_epochs, cfg.gate_epochs) == (1, 1, 1, 1)
    stages = _stages(printed)
    total = stages.pop("**total**")  # printed in bold
    assert {"distill", "ensemble"} <= set(stages)
    assert 0 < sum(stages.values()) <= total + 0.02  # two decimals per printed stage
    assert re.search(r"target total < 30 s: (met|NOT met)", printed)


def test_the_header_states_the_seeds_and_the_torch_threads(capsys, benchmark_script) -> None:
    """The seeds were fixed and never printed, and the thread count (the README runs it with
    OMP_NUM_THREADS=2) was not beside the figures it sets."""
    import torch

    script = benchmark_script("fol_node_time")
    argv = ["--q", "1", "--train-images", "30", "--fol", *TINY, "top_k=1", "distill_inputs=train",
            "distill_epochs=1", "seed=7"]
    assert script.main(argv) == 0
    header = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("one node,"))
    assert "seeds: data, partition and pretraining 0, FOL round 7" in header
    assert header.endswith(f"; {torch.get_num_threads()} torch threads")


def test_a_bad_override_is_one_line_and_exit_2(capsys, benchmark_script) -> None:
    script = benchmark_script("fol_node_time")
    assert script.main(["--fol", "distill_inputs=telepathy"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "distill_inputs" in err and "telepathy" in err


def test_bad_settings_stop_before_any_training(capsys, monkeypatch, benchmark_script) -> None:
    """An unknown --variant was refused only after the node and its neighbours had been pretrained;
    an unknown --arch and a --train-images too few for a split were tracebacks."""
    import pytest

    script = benchmark_script("fol_node_time")
    monkeypatch.setattr(script, "make_synthetic", lambda *a, **k: pytest.fail("data drawn before the check"))
    for argv, words in ((["--variant", "nope"], "argument --variant: invalid choice: 'nope'"),
                        (["--arch", "nope"], "argument --arch: invalid choice: 'nope'"),
                        (["--q", "0"], "argument --q: expected an integer >= 1, got 0"),
                        (["--train-images", "-5"], "argument --train-images: expected an integer >= 14 (70 % of the "
                                                   "fewest a 70/15/15 split takes), got -5"),
                        # a Q that sizes a pool past the limit: refused by the pool's size, as compare_methods does
                        (["--q", "100000000"], "error: --q + 1 nodes x --train-images / 0.7 x 2 synthetic images: "
                                               "85,800,000,858 images of 32x32 pixels would need")):
        with pytest.raises(SystemExit) as stop:
            script.main(argv)
        err = capsys.readouterr().err
        assert stop.value.code == 2 and words in err and "Traceback" not in err


def test_the_accuracy_line_gives_the_images_behind_each_figure(capsys, monkeypatch, benchmark_script) -> None:
    """The script printed only ``local test 92.2 % -> deployed test 85.9 %``: a 6-point drop read as a
    measurement, where it was one node's 64 test images (5 lost, 1 gained) and one seed, with identical
    validation accuracy. The line must give each split's counts, agreeing with the report's accuracies,
    the test images lost and gained (their difference is the change in right answers), which model was
    deployed, and that it is an illustration."""
    script = benchmark_script("fol_node_time")
    reports = []

    def recording(state, received, round_, cfg, variant):
        reports.append((state, personalize(state, received, round_, cfg, variant)))
        return reports[-1][1]

    personalize = script.personalize
    monkeypatch.setattr(script, "personalize", recording)
    argv = ["--q", "2", "--train-images", "40", "--fol", *TINY, "distill_inputs=train", "distill_epochs=2"]
    assert script.main(argv) == 0
    line = next(text for text in capsys.readouterr().out.splitlines() if text.startswith("local -> deployed"))
    [(state, report)] = reports
    n_test, n_val = len(state.data.test), len(state.data.val)
    right = {(who, split): round(report.accuracy[who][split] * n)
             for who in ("local", "deployed") for split, n in (("test", n_test), ("val", n_val))}
    for split, n in (("test", n_test), ("val", n_val)):
        assert f"({right['local', split]}/{n}) -> " in line and f"({right['deployed', split]}/{n})" in line
    lost, gained = map(int, re.search(r"(\d+) test images lost and (\d+) gained", line).groups())
    assert lost - gained == right["local", "test"] - right["deployed", "test"]
    expected = ("the distilled student" if not report.distillation["reverted"]
                else "the node's own model (the distillation's revert rule kept it)")
    assert f"({expected})" in line
    assert f"one test image = {100 / n_test:.1f} points: an illustration, not a measurement of accuracy" in line
