"""Benchmarks that draw one synthetic pool sized by their node-count arguments refuse a pool past
fol.data.geo's limit while the command line is read (argparse's one line, exit 2), before anything
is drawn or trained, as compare_methods does; they were tracebacks from the renderer."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("name, argv, words", [
    ("select_pretrain", ["--nodes", "100000000"],
     "error: --nodes x --per-node x 2 synthetic images: 60,000,000,000 images of 32x32 pixels would need"),
    ("fol_accuracy", ["--nodes", "100000000"],
     "error: --nodes x --per-node x 2 synthetic images: 60,000,000,000 images of 32x32 pixels would need"),
])
def test_a_pool_past_the_limit_is_one_argparse_line_before_any_work(name, argv, words, benchmark_script, monkeypatch,
                                                                    capsys) -> None:
    script = benchmark_script(name)
    monkeypatch.setattr(script, "make_synthetic", lambda *a, **k: pytest.fail("data drawn before the check"))
    with pytest.raises(SystemExit) as stop:
        script.main(argv)
    out = capsys.readouterr()
    assert stop.value.code == 2 and words in out.err and "Traceback" not in out.err
    assert "machine:" not in out.out  # nothing ran
