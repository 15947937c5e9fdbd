"""torch's thread count for a block of work, the one way this toolkit sets it.

A task's float reductions depend on the number of threads torch splits them
over, so the simulation (``run.threads``), ``fol pretrain --threads``, the
executors and the synthetic data generator all set it through
:func:`torch_threads`, which gives the caller's own count back afterwards.

>>> import torch
>>> before = torch.get_num_threads()
>>> with torch_threads(1):
...     torch.get_num_threads()
1
>>> torch.get_num_threads() == before
True
"""

from __future__ import annotations

import contextlib
from typing import Iterator

__all__ = ["torch_threads"]


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """torch's thread count set to ``threads`` for the block (None or 0: left as it is), then
    restored: a task's float reductions depend on it, and a caller's own settings stay its own."""
    if not threads:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)
