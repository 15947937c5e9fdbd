"""benchmarks/model_zoo.py: every setting is checked before any data is drawn or
any model trained, and --json is written with the crash-safe writer."""

from __future__ import annotations

import json

import pytest


@pytest.mark.parametrize("argv, words", [
    (["--threads", "0"], "argument --threads: expected 1.."),
    (["--archs", "cnn-small,nope"], "argument --archs: expected a comma-separated list of cnn, "),
    (["--tasks", "wildfire,nope"], "argument --tasks: expected a comma-separated list of wildfire, hurricane, position, "
                                   "got wildfire,nope"),
    (["--pool", "10"], "argument --pool: expected an integer >= 20 (the fewest a 70/15/15 split takes), got 10"),
    (["--epochs", "0"], "argument --epochs: expected an integer >= 1, got 0"),
    (["--lr", "-0.1"], "argument --lr: expected a learning rate > 0, got -0.1"),
    (["--seed", "-1"], "argument --seed: expected a seed in 0..4294967295, got -1"),
])
def test_bad_settings_stop_before_any_work(argv, words, capsys, monkeypatch, benchmark_script) -> None:
    script = benchmark_script("model_zoo")
    monkeypatch.setattr(script, "task_dataset", lambda *a, **k: pytest.fail("data drawn before the settings were checked"))
    monkeypatch.setattr(script, "epoch_seconds", lambda *a, **k: pytest.fail("trained before the settings were checked"))
    with pytest.raises(SystemExit) as stop:  # argparse: usage, then the one line
        script.main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and words in err and "Traceback" not in err


def test_unwritable_json_fails_before_training(tmp_path, capsys, monkeypatch, benchmark_script) -> None:
    script = benchmark_script("model_zoo")
    monkeypatch.setattr(script, "task_dataset", lambda *a, **k: pytest.fail("data drawn before --json was checked"))
    assert script.main(["--json", str(tmp_path)]) == 2  # a folder, not a file name
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--json" in err and "is a folder" in err


def test_tiny_run_writes_its_rows(tmp_path, capsys, benchmark_script) -> None:
    script = benchmark_script("model_zoo")
    out = tmp_path / "sub" / "zoo.json"
    argv = ["--archs", "cnn-small", "--tasks", "wildfire", "--pool", "40", "--epochs", "1", "--json", str(out)]
    assert script.main(argv) == 0
    saved = json.loads(out.read_text())
    assert saved["args"]["json"] == str(out) and saved["args"]["seed"] == 0
    row = saved["rows"]["cnn-small"]
    assert row["wildfire"]["n_train"] == 28 and 0.0 <= row["wildfire"]["train"] <= 1.0
    assert "seed 0" in capsys.readouterr().out
