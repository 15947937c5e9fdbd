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


def test_merge_refuses_a_defaults_only_run_with_a_run_of_every_option(script, tmp_path, capsys) -> None:
    rows = {"paper": [(0.8,)] * 6, "default (current)": [(0.8,)] * 6}
    a = _run(tmp_path / "all.json", "hurricane", {}, rows)  # saved before the flag existed: no key
    b = _run(tmp_path / "combo.json", "hurricane", {"defaults_only": True}, rows)
    assert script.main(["--merge", a, b]) == 2
    assert "differ in defaults_only" in capsys.readouterr().err
