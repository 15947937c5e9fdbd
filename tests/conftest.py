"""Shared pytest set-up: small thread pools (CI has 2 cores) and a few fixtures."""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "2")

try:  # torch-free packages (orbits, contact_sim) are tested without importing torch
    import torch

    torch.set_num_threads(2)
except ImportError:  # pragma: no cover
    pass
