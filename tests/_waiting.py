"""Polling helper shared by the agent tests (threads and processes answer in their own time)."""

from __future__ import annotations

import time
from typing import Any, Callable


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition",
               poll_s: float = 0.05) -> Any:
    """``predicate()``'s first truthy value, polled every ``poll_s`` seconds; an
    ``AssertionError`` naming ``what`` after ``timeout`` seconds without one."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(poll_s)
    return value
