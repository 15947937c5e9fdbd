"""The process executor: results in order, errors raised, and no file descriptor per tensor."""

from __future__ import annotations

import copy
import math
import os

import pytest
import torch

from fol.executors import make_executor


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_tensors_crossing_the_pool_leave_no_file_descriptors_open():
    # torch's multiprocessing reductions would keep one descriptor per tensor storage
    # sent or received open in this process (60 per item here): a few hundred nodes'
    # models and data then exhaust the limit ("Too many open files")
    items = [[torch.full((4,), float(i + k)) for k in range(30)] for i in range(40)]
    got = []
    with make_executor("process", workers=2, threads=1) as ex:
        ex.map(copy.deepcopy, items[:2])  # the workers are up
        before = _open_fds()
        out = ex.map(copy.deepcopy, items, on_result=lambda i, r: got.append(i))
        after = _open_fds()
    assert after - before < 20
    assert sorted(got) == list(range(40))
    assert all(torch.equal(a, b) for x, y in zip(out, items) for a, b in zip(x, y))  # in order


def test_a_failing_task_raises_in_the_caller_and_the_pool_still_works():
    with make_executor("process", workers=2, threads=1) as ex:
        with pytest.raises(ValueError, match="math domain error"):
            ex.map(math.sqrt, [4.0, -1.0, 9.0, 16.0, 25.0, 36.0])
        assert ex.map(math.sqrt, [4.0, 9.0]) == [2.0, 3.0]
