"""benchmarks/contacts_scale.py: its memory probe and a tiny run of the script."""

from __future__ import annotations

import os
import time

import numpy as np


def test_peak_memory_counts_pages_shared_after_a_fork_once(benchmark_script):
    cs = benchmark_script("contacts_scale")
    big = np.ones(64 * 2**20 // 8)  # 64 MB, touched: resident in the parent, then shared with the child
    with cs.PeakMemory(interval_s=0.05) as peak:
        pid = os.fork()
        if pid == 0:  # the child only holds the shared pages
            time.sleep(0.6)
            os._exit(0)
        os.waitpid(pid, 0)
    assert big.sum() == big.size
    # summed RSS counts the shared 64 MB in both processes, summed PSS once
    assert peak.rss_kb - peak.pss_kb > 48 * 1024
    assert peak.pss_kb > 64 * 1024


def test_contacts_scale_runs_at_a_tiny_size(benchmark_script, capsys):
    cs = benchmark_script("contacts_scale")
    assert cs.main(["--sizes", "1584", "--hours", "0.1", "--workers", "2", "--check-edges", "20"]) == 0
    out = capsys.readouterr().out
    assert "0 pairs with a different window count" in out
    assert "not evaluated (0.1 h, 60 s grid)" in out
    row = next(line for line in out.splitlines() if line.startswith("| 1,584 |"))
    err = float(row.split("|")[9])
    assert err <= 1.0
