"""Shared helpers of the benchmark scripts (not part of the installed package)."""

from __future__ import annotations

import platform
import statistics
from typing import Sequence

import torch


def machine_line() -> str:
    return (f"machine: {platform.processor() or platform.machine()}, {torch.get_num_threads()} torch threads, "
            f"torch {torch.__version__}, python {platform.python_version()}")


def mean_std(values: Sequence[float]) -> str:
    """'mean ± std' in percent of fractions in [0, 1]."""
    if len(values) == 1:
        return f"{100 * values[0]:.2f}"
    return f"{100 * statistics.mean(values):.2f} ± {100 * statistics.stdev(values):.2f}"
