"""Waiting helpers shared by the tests: threads and processes answer in their own time, and a read
that would block (a FIFO) must fail a test, not hang the suite."""

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


def _outcome_within(call: Callable[[], Any], timeout: float, fifo: Any) -> Any:
    """What ``call()`` returned or raised, run in a thread given ``timeout`` seconds; an ``AssertionError``
    when it still ran then (a read of a FIFO waits for a writer: a writer on ``fifo`` is opened and closed
    then, so that the blocked thread ends with the test, not with the suite)."""
    import os
    import threading

    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:  # noqa: BLE001 - what the caller checks
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        if fifo is not None:
            try:  # a reader blocked in open() wakes and reads the end of the file
                os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass
            thread.join(timeout)
        raise AssertionError(f"still running after {timeout:g} s (blocked)")
    return outcome[0]


def raised_within(call: Callable[[], Any], timeout: float = 10.0, fifo: Any = None) -> BaseException:
    """The exception ``call()`` raised, run in a thread given ``timeout`` seconds; an ``AssertionError``
    when it returned, or still ran then (a blocked read of ``fifo`` is woken: :func:`_outcome_within`)."""
    outcome = _outcome_within(call, timeout, fifo)
    if not isinstance(outcome, BaseException):
        raise AssertionError(f"returned {outcome!r}, expected an error")
    return outcome


def returned_within(call: Callable[[], Any], timeout: float = 10.0, fifo: Any = None) -> Any:
    """What ``call()`` returned, run in a thread given ``timeout`` seconds; its exception re-raised, or an
    ``AssertionError`` when it still ran then (a blocked read of ``fifo`` is woken: :func:`_outcome_within`)."""
    outcome = _outcome_within(call, timeout, fifo)
    if isinstance(outcome, BaseException):
        raise outcome
    return outcome
