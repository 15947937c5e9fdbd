"""Pytest set-up for the whole tree (the tests and the packages' docstring
examples, which ``--doctest-modules`` runs): one torch thread per test process
(the models under test are tiny, CI has 2 cores, and oversubscribed threads slow
torch down badly)."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

try:
    import torch

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover
    pass
