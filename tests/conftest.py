"""Shared pytest set-up: one torch thread per test process (the models under test are tiny, CI has 2 cores, and oversubscribed threads slow torch down badly)."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

try:  # torch-free packages (orbits, contact_sim) are tested without importing torch
    import torch

    torch.set_num_threads(1)
except ImportError:  # pragma: no cover
    pass
