"""benchmarks/fol_diagnose.py: one FOL round of the protocol's swarm, node by node.
At a tiny size its rows must be the round reports' own numbers, and the
summary must count from them."""

from __future__ import annotations

import json

from fol.reproduce import ProtocolConfig

TINY_FOL = ["pretrain_epochs=2", "finetune_epochs=1", "post_finetune_epochs=1", "gate_epochs=1",
            "distill_epochs=1", "ensemble_steps=5", "max_neighbours=2", "top_k=2"]


def test_rows_and_summary_at_tiny_size(tmp_path, capsys, monkeypatch, benchmark_script) -> None:
    script = benchmark_script("fol_diagnose")
    seen = {}  # the swarm, its shards and the FOL run the script builds, to read the round reports

    def spy(name):
        real = getattr(script, name)

        def wrapped(*args, **kwargs):
            seen[name] = result = real(*args, **kwargs)
            return result
        monkeypatch.setattr(script, name, wrapped)

    for name in ("load_pool", "partition_pool", "pretrained_swarm", "run_fol_pipeline"):
        spy(name)
    real_run = script.run_fol_pipeline

    def distinct_reports(*args, **kwargs):
        """At this size many report figures coincide (own score before = after, student = ensemble,
        the own model first in the selection...): give every figure the rows read its own value,
        so a row reading the wrong one shows."""
        run = real_run(*args, **kwargs)
        for k, (rep,) in enumerate(run.reports):
            for i, c in enumerate(rep.candidates):
                c["score_before"], c["score_after"] = 0.01 * (10 * k + i + 1), 0.01 * (10 * k + i + 1) + 0.005
            weights = [0.1 * (i + 1) + 0.01 * k for i in range(len(rep.selected))]
            rep.selected, rep.weights = rep.selected[::-1], weights[::-1]  # the own model is not first
            for j, variant in enumerate(("local", "student", "ensemble", "deployed")):
                rep.accuracy[variant] = {"val": 0.05 * (j + 1) + 0.01 * k, "test": 0.1 * (j + 1) + 0.01 * k}
        return run
    monkeypatch.setattr(script, "run_fol_pipeline", distinct_reports)
    out = tmp_path / "d.json"
    argv = ["--nodes", "3", "--pool", "150", "--image-size", "16", "--fol", *TINY_FOL, "--json", str(out)]
    assert script.main(argv) == 0
    printed = capsys.readouterr().out
    data = json.loads(out.read_text())
    rows, s = data["rows"], data["summary"]
    assert [r["node"] for r in rows] == ["node-0", "node-1", "node-2"]
    assert sum(r["images"] for r in rows) == 150
    pool, shards, ctx, run = (seen[n] for n in ("load_pool", "partition_pool", "pretrained_swarm", "run_fol_pipeline"))
    for k, r in enumerate(rows):
        # the data figures: the node's shard of the pool and its validation split
        labels = pool.labels[shards[k]].tolist()
        assert r["images"] == len(labels)
        assert r["majority_share"] == round(max(labels.count(c) for c in set(labels)) / len(labels), 4)
        val = ctx.nodes[k].data.val.labels.tolist()
        assert r["val_majority_rate"] == round(max(val.count(c) for c in set(val)) / len(val), 4)
        # the FOL figures: node k's own round-1 report
        (rep,) = run.reports[k]
        assert rep.node == r["node"] == ctx.nodes[k].name
        own = [c for c in rep.candidates if c["own"]]
        others = [c for c in rep.candidates if not c["own"]]
        assert len(own) == 1 and len(others) == 2  # Q = 2 of 2 others
        assert r["own_val"] == own[0]["score_after"]
        assert r["neighbours_val_received"] == [c["score_before"] for c in others]
        assert r["neighbours_val_aligned"] == [c["score_after"] for c in others]
        weights = dict(zip(rep.selected, rep.weights, strict=True))
        assert r["own_weight"] == weights.get(own[0]["name"], 0.0)
        acc = rep.accuracy
        assert r["ensemble_minus_local"] == acc["ensemble"]["test"] - acc["local"]["test"]
        assert r["student_minus_local"] == acc["student"]["test"] - acc["local"]["test"]
        # the prior-corrected figures are the script's own (no report holds them)
        assert len(r["neighbours_val_prior"]) == 2 and all(0.0 <= p <= 1.0 for p in r["neighbours_val_prior"])
        assert -1.0 <= r["prior_ensemble_minus_local"] <= 1.0
        assert f"| {r['node']} | {r['images']} |" in printed
    # the summary counts the rows
    assert s["neighbours"] == 6 and s["nodes"] == 3
    assert s["aligned_above_own"] == sum(a > r["own_val"] + 1e-9 for r in rows for a in r["neighbours_val_aligned"])
    assert s["aligned_at_most_majority"] == sum(
        a <= r["val_majority_rate"] + 1e-9 for r in rows for a in r["neighbours_val_aligned"])
    assert f"better than the own model after alignment: {s['aligned_above_own']};" in printed
    assert s["prior_above_own"] == sum(p > r["own_val"] + 1e-9 for r in rows for p in r["neighbours_val_prior"])
    assert f"{s['prior_above_own']} better than the own model" in printed
    # the same protocol config the protocol benchmark would build: one round, the FOL rows only
    cfg = ProtocolConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in data["config"].items()})
    assert cfg.rounds == 1 and cfg.methods == ("fol",) and cfg.fol["max_neighbours"] == 2


def test_malformed_override_is_one_line(capsys, benchmark_script) -> None:
    script = benchmark_script("fol_diagnose")
    try:
        script.main(["--nodes", "3", "--pool", "150", "--fol", "oops"])
    except SystemExit as exc:
        assert exc.code == 2 and "error: --fol: expected KEY=VALUE, got 'oops'" in capsys.readouterr().err
    else:
        raise AssertionError("a malformed --fol item must stop the script")
    assert script.main(["--nodes", "3", "--pool", "150", "--fol", "no_such_field=1"]) == 2
    assert "protocol fol" in capsys.readouterr().err


def test_majority_share_counts_classes_not_a_mean(benchmark_script) -> None:
    import torch

    script = benchmark_script("fol_diagnose")
    # five classes: the mean label (2.2) is no share; the most frequent class holds 3 of 5
    assert script._majority(torch.tensor([4, 4, 4, 0, 0])) == 0.6
    assert script._majority(torch.tensor([0, 1, 1])) == 2 / 3 and script._majority(torch.tensor([], dtype=torch.long)) == 0.0


def test_prior_bias_recovers_a_shifted_class_prior(benchmark_script) -> None:
    """Labels drawn from a logistic model whose intercept is 1.5 above the
    logits': the fitted bias must put the class-1 offset back, near 1.5, and
    leave a model that already matches its labels' prior unchanged."""
    import torch

    script = benchmark_script("fol_diagnose")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(20000, generator=g)
    logits = torch.stack([torch.zeros_like(x), x], dim=1)
    shifted = (torch.rand(20000, generator=g) < torch.sigmoid(x + 1.5)).long()
    b = script.prior_bias(logits, shifted)
    assert abs(float(b[1] - b[0]) - 1.5) < 0.1
    matched = (torch.rand(20000, generator=g) < torch.sigmoid(x)).long()
    b = script.prior_bias(logits, matched)
    assert abs(float(b[1] - b[0])) < 0.1


def test_unwritable_json_fails_before_the_round(tmp_path, capsys, monkeypatch, benchmark_script) -> None:
    """An unwritable --json was a traceback after the whole swarm had trained and its round had run."""
    import pytest

    script = benchmark_script("fol_diagnose")
    monkeypatch.setattr(script, "diagnose", lambda *a, **k: pytest.fail("ran before --json was checked"))
    assert script.main(["--nodes", "3", "--pool", "150", "--json", str(tmp_path)]) == 2  # a folder
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--json" in err and "is a folder" in err
