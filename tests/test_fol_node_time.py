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


def test_prints_each_stage_and_a_total_that_covers_them(capsys, benchmark_script) -> None:
    script = benchmark_script("fol_node_time")
    argv = ["--q", "2", "--train-images", "40", "--fol", *TINY, "distill_inputs=train", "distill_epochs=2"]
    assert script.main(argv) == 0
    printed = capsys.readouterr().out
    assert "Q = 2" in printed and "distill_inputs=train distill_epochs=2" in printed
    stages = _stages(printed)
    total = stages.pop("**total**")  # printed in bold
    assert {"distill", "ensemble"} <= set(stages)
    assert 0 < sum(stages.values()) <= total + 0.02  # two decimals per printed stage
    assert re.search(r"target total < 30 s: (met|NOT met)", printed)


def test_a_bad_override_is_one_line_and_exit_2(capsys, benchmark_script) -> None:
    script = benchmark_script("fol_node_time")
    assert script.main(["--fol", "distill_inputs=telepathy"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "distill_inputs" in err and "telepathy" in err
