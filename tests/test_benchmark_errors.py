"""Every benchmark script prints its errors in one style, argparse's: ``<script>: error: <what>``.

Argparse's own refusals of a script's command line read ``<script>: error: ...``; the script's
later checks (an unwritable output, a bad override, a merge of runs that do not fit) printed a
bare ``error: ...`` or only the flag, so the same script spoke in two voices."""

from __future__ import annotations

import pytest


def _run(script, argv, monkeypatch, name):
    """``script.main(argv)`` run as ``benchmarks/<name>.py`` would be: its exit code (a return or a SystemExit)."""
    monkeypatch.setattr("sys.argv", [f"benchmarks/{name}.py", *argv])
    try:
        return script.main() if name == "compare_methods" else script.main(argv)  # it reads sys.argv
    except SystemExit as stop:
        return stop.code


@pytest.mark.parametrize("name, argv, code, words", [
    ("calibrate_synthetic", ["--task", "wildfire", "--json", "{tmp}"], 2, "--json"),  # a folder, not a file
    ("model_zoo", ["--json", "{tmp}"], 2, "--json"),
    ("fol_node_time", ["--fol", "distill_inputs=telepathy"], 2, "telepathy"),
    ("fol_diagnose", ["--nodes", "3", "--pool", "150", "--fol", "oops"], 2, "--fol: expected KEY=VALUE, got 'oops'"),
    ("fol_diagnose", ["--nodes", "3", "--pool", "150", "--json", "{tmp}"], 2, "--json"),
    ("paper_tables", ["--quick", "--option", "oops"], 2, "--option: expected METHOD.KEY=VALUE, got 'oops'"),
    ("paper_tables", ["--merge", "{tmp}/none.json"], 2, "none.json"),
    ("select_fol_config", ["--option", "rounds=2"], 2, "--option: E is the same for every option"),
    ("select_fol_config", ["--merge", "{tmp}/none.json"], 2, "cannot read it as JSON"),
    ("compare_methods", ["--methods", "nope"], 2, "unknown method(s): nope"),
    ("compare_methods", ["--quick", "--methods", "local", "--json", "{tmp}"], 2, "--json"),
    ("contact_edges", ["--total", "7", "--planes", "3"], 2, "constellation.planes: 3 planes do not divide 7 satellites"),
])
def test_a_scripts_own_error_reads_like_its_argparse_errors(name, argv, code, words, tmp_path, capsys, monkeypatch,
                                                           benchmark_script) -> None:
    script = benchmark_script(name)
    for attr in ("train_eval", "task_dataset", "diagnose", "build_nodes", "run_protocol"):  # nothing may train
        if hasattr(script, attr):
            monkeypatch.setattr(script, attr, lambda *a, **k: pytest.fail("ran before the settings were checked"))
    assert _run(script, [a.replace("{tmp}", str(tmp_path)) for a in argv], monkeypatch, name) == code
    err = capsys.readouterr().err
    assert err.startswith(f"{name}.py: error: ") and words in err and err.count("\n") == 1, err
    # argparse's refusal of the same script's command line: the same prefix
    assert _run(script, ["--no-such-flag"], monkeypatch, name) == 2
    assert f"{name}.py: error: unrecognized arguments: --no-such-flag" in capsys.readouterr().err
