"""benchmarks/_common.PeakMemory: the memory and CPU probe of the benchmark scripts."""

from __future__ import annotations

import os
import sys
import time

import numpy as np
import pytest


def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    x = 0
    while time.process_time() < end:
        x += 1


def test_peak_memory_counts_pages_shared_after_a_fork_once(benchmark_script):
    common = benchmark_script("_common")
    big = np.ones(64 * 2**20 // 8)  # 64 MB, touched: resident in the parent, then shared with the child
    with common.PeakMemory(interval_s=0.05) as peak:
        pid = os.fork()
        if pid == 0:  # the child only holds the shared pages
            time.sleep(0.6)
            os._exit(0)
        os.waitpid(pid, 0)
    assert big.sum() == big.size
    # summed RSS counts the shared 64 MB in both processes, summed PSS once
    assert peak.rss_kb - peak.pss_kb > 48 * 1024
    assert peak.pss_kb > 64 * 1024


def test_cpu_counts_children_never_waited_for_and_not_what_came_before(benchmark_script):
    common = benchmark_script("_common")
    _burn(0.5)  # before the probe: not counted
    t0 = time.process_time()
    with common.PeakMemory(interval_s=0.05) as peak:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            _burn(0.6)
            os.write(w, b"x")
            time.sleep(0.5)  # alive at the next samples, as a raylet would be
            os._exit(0)
        os.read(r, 1)  # the child has burnt its CPU ...
        time.sleep(0.3)
        assert peak.cpu_by_pid()[pid] >= 0.55  # ... and it counts although the child was never reaped
        os.waitpid(pid, 0)
        os.close(r)
        os.close(w)
    own = time.process_time() - t0  # this process's CPU while probed (the sampling thread's included)
    by_pid = peak.cpu_by_pid()
    assert 0.55 <= by_pid[pid] <= 0.8
    # this process counts only what it used while probed, not the 0.5 s burnt before
    assert by_pid[os.getpid()] <= own + 0.1
    assert peak.cpu_s == sum(by_pid.values())


@pytest.mark.parametrize("name, argv, words", [
    ("compare_methods", ["--threads", "0"], "expected 1.."), ("calibrate_synthetic", ["--threads", "0"], "expected 1.."),
    ("select_pretrain", ["--threads", "99999"], "expected 1.."),
    ("select_pretrain", ["--seeds", "0"], "expected an integer >= 1, got 0"),
    ("select_pretrain", ["--per-node", "19"], "expected an integer >= 20 (the fewest a 70/15/15 split takes), got 19"),
    ("select_pretrain", ["--patiences", "5", "-1"], "expected an integer >= 0, got -1"),
    ("select_pretrain", ["--lrs", "0.01", "-1"], "expected a learning rate > 0, got -1"),
    ("select_pretrain", ["--lrs", "inf"], "expected a learning rate > 0, got inf"),
    ("select_pretrain", ["--psi", "0"], "expected a Dirichlet concentration > 0, got 0"),
    ("select_pretrain", ["--tasks", "wildfire", "nope"], "invalid choice: 'nope'"),
    ("select_pretrain", ["--arch", "nope"], "invalid choice: 'nope'"),
    ("fol_accuracy", ["--seeds", "0"], "expected an integer >= 1, got 0"),
    ("fol_accuracy", ["--nodes", "1"], "expected an integer >= 2, got 1"),
    ("fol_accuracy", ["--per-node", "5"], "expected an integer >= 20 (the fewest a 70/15/15 split takes), got 5"),
    ("fol_accuracy", ["--q", "0"], "expected an integer >= 1, got 0"),
    ("fol_accuracy", ["--psi", "nan"], "expected a Dirichlet concentration > 0, got nan"),
    ("paper_tables", ["--seeds", "1001", "--quick"], "expected an integer in 1..1000 (one full run each"),
    ("paper_tables", ["--seeds", "1000000000", "--quick"], "expected an integer in 1..1000 (one full run each"),
    ("paper_tables", ["--seeds", "0", "--quick"], "expected an integer in 1..1000 (one full run each")])
def test_benchmark_settings_out_of_range_stop_before_any_work(name, argv, words, benchmark_script, monkeypatch,
                                                              capsys) -> None:
    """--threads 0 was a traceback in three scripts; select_pretrain took --seeds 0 and a negative rate,
    and stopped on an unknown --tasks name only when it came to it, after training every task before;
    fol_accuracy checked nothing (--seeds 0 trained nothing and then failed on an empty mean, --q 0 was a
    traceback from FOLConfig); paper_tables built ``tuple(range(N))`` of any --seeds N before any check
    (10**8: 4.4 GB and 23 s; 10**9: a MemoryError traceback). Every refusal is argparse's one line naming
    the option and its range."""
    script = benchmark_script(name)
    monkeypatch.setattr(sys, "argv", [f"{name}.py", *argv])
    if name in ("select_pretrain", "fol_accuracy"):
        monkeypatch.setattr(script, "make_synthetic", lambda *a, **k: pytest.fail("data drawn before the check"))
    if name == "paper_tables":
        monkeypatch.setattr(script, "run_protocol", lambda *a, **k: pytest.fail("run before the check"))
    with pytest.raises(SystemExit) as stop:
        script.main() if name == "compare_methods" else script.main(argv)
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "Traceback" not in err
    assert f"error: argument {argv[0]}: {words}" in err  # the option and the range it takes


def test_a_spike_between_two_samples_is_caught_by_the_kernels_peak_record(benchmark_script):
    """A child that holds 200 MB for a moment between two samples: the sampled sums can miss
    it, the summed per-process peak records (VmHWM) cannot; what came before the probe does
    not count."""
    import subprocess

    common = benchmark_script("_common")
    before = np.ones(96 * 2**20 // 8)  # touched, then freed: this process's record is reset on entry
    del before
    code = ("import sys, time\n"
            "b = bytearray(200 * 2**20)\n"
            "for i in range(0, len(b), 4096): b[i] = 1\n"
            "del b\n"
            "sys.stdout.write('x'); sys.stdout.flush(); time.sleep(2.5)\n")
    with common.PeakMemory(interval_s=1.0) as peak:
        child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
        assert child.stdout.read(1) == b"x"  # allocated, touched and freed
        time.sleep(1.3)  # at least one sample while the child is alive
        child.wait(10)
    assert peak.hwm_kb >= 200 * 1024  # the child's 200 MB, whenever the samples fell
    # the 96 MB touched and freed before the probe is not in it (the records start at the current size)
    assert peak.hwm_kb < peak.rss_kb + 200 * 1024 + 48 * 1024


def test_argument_types_return_the_value_or_one_uniform_refusal(benchmark_script) -> None:
    """The benchmarks' argparse types: the parsed value, or ``expected <range>, got <text>`` (text that is
    not a number at all included, not argparse's 'invalid <function name> value')."""
    import argparse

    common = benchmark_script("_common")
    assert common.int_in(1)("3") == 3 and common.int_in(1, 4)("4") == 4 and common.user_seed("4294967295") == 2**32 - 1
    assert common.positive_float()("0.5") == 0.5 and common.fraction()("0.15") == 0.15
    assert common.comma_names(("a", "b"), unique=True)("b,a") == "b,a"
    for convert, text, message in ((common.int_in(1), "0", "expected an integer >= 1, got 0"),
                                   (common.int_in(1), "three", "expected an integer >= 1, got three"),
                                   (common.int_in(1), "2.5", "expected an integer >= 1, got 2.5"),
                                   (common.int_in(1, 4, why="slots"), "5", "expected an integer in 1..4 (slots), got 5"),
                                   (common.positive_float("a rate"), "nan", "expected a rate > 0, got nan"),
                                   (common.positive_float("a rate"), "inf", "expected a rate > 0, got inf"),
                                   (common.fraction("a share"), "0", "expected a share strictly between 0 and 1, got 0"),
                                   (common.user_seed, "-1", "expected a seed in 0..4294967295, got -1"),
                                   (common.user_seed, str(2**32), f"expected a seed in 0..4294967295, got {2**32}"),
                                   (common.comma_names(("a", "b"), unique=True), "a,a",
                                    "expected a comma-separated list of a, b, each once, got a,a"),
                                   (common.comma_names(("a", "b")), "a,c", "expected a comma-separated list of a, b, got a,c")):
        with pytest.raises(argparse.ArgumentTypeError) as refused:
            convert(text)
        assert str(refused.value) == message


def test_select_pretrain_says_its_standard_error_pools_tasks_seeds_and_nodes(benchmark_script, monkeypatch,
                                                                             capsys) -> None:
    """The table's standard error is over every (task, seed, node) run, not over the nodes."""
    from types import SimpleNamespace

    script = benchmark_script("select_pretrain")
    monkeypatch.setattr(script, "fit", lambda *a, **k: SimpleNamespace(train_loss=[0.0, 0.0]))
    monkeypatch.setattr(script, "evaluate", lambda *a, **k: SimpleNamespace(accuracy=0.5))
    assert script.main(["--tasks", "wildfire", "hurricane", "--nodes", "2", "--per-node", "20", "--seeds", "3",
                        "--lrs", "0.01", "--patiences", "1"]) == 0
    out = capsys.readouterr().out
    assert "(mean ± s.e. over 12 node runs: 2 tasks x 3 seeds x 2 nodes)" in out and "over nodes" not in out


def test_paper_tables_takes_as_many_seeds_as_a_scenario(benchmark_script, monkeypatch, tmp_path, capsys) -> None:
    """The cap of paper_tables' ``--seeds`` is the scenario's ``MAX_SEEDS``: that many is still a run of that many."""
    from fol.errors import ConfigError
    from fol.simulation.scenario import MAX_SEEDS

    script = benchmark_script("paper_tables")
    planned = []

    def run_protocol(cfg, **kwargs):
        planned.append(cfg.seeds)
        raise ConfigError("stopped by the test")

    monkeypatch.setattr(script, "run_protocol", run_protocol)
    monkeypatch.setattr(sys, "argv", ["paper_tables.py"])
    argv = ["--quick", "--seeds", str(MAX_SEEDS), "--first-seed", "2", "--executor", "local", "--out", str(tmp_path)]
    assert script.main(argv) == 2 and "stopped by the test" in capsys.readouterr().err
    assert planned == [tuple(range(2, 2 + MAX_SEEDS))]


def test_stop_ends_the_sampling_inside_the_block(benchmark_script):
    """``stop()`` takes a last sample and ends the sampling there: 128 MB touched after it, still inside the
    ``with`` block, is not in the peak, which holds what came before it (contacts_scale.py --fork-overhead
    measures a search's scan so, not the table built after it); the block's end adds nothing."""
    import gc

    common = benchmark_script("_common")
    # the peak is the process's, from the block's start: memory an earlier test left to the collector, freed
    # inside the block, would lower what is resident now below it (the test failed once in six runs beside
    # other test files, its figures not kept; this is the likely cause, not a confirmed one)
    gc.collect()
    gc.disable()
    try:
        with common.PeakMemory(interval_s=0.02) as peak:
            early = np.ones(64 * 2**20 // 8)  # before stop(): counted
            peak.stop()
            at_stop = peak.pss_kb
            late = np.ones(128 * 2**20 // 8)  # after stop(): not counted
            time.sleep(0.1)
    finally:
        gc.enable()
    assert early.sum() == early.size and late.sum() == late.size
    assert peak.pss_kb == at_stop
    now = _pss_now_kb()
    assert at_stop >= 64 * 1024 and at_stop < now - 96 * 1024, (at_stop, now)


def _pss_now_kb() -> int:
    with open(f"/proc/{os.getpid()}/smaps_rollup") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("Pss:"))
