"""Memory measured in the tests: the traced peak of a call (a reader that must not set aside a buffer
of its whole limit, a refusal that must come before a large allocation)."""

from __future__ import annotations

import tracemalloc
from typing import Callable


def traced_peak(fn: Callable[[], object]) -> int:
    """The most bytes Python and numpy held at once while ``fn()`` ran (tracemalloc)."""
    tracemalloc.start()
    try:
        fn()
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak
