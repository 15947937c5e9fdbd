"""What every command-line entry point does around its work (``fol``, and
``python -m contact_sim.cli`` standalone): Ctrl-C ends in one line and exit
status 130, and a reader that stops reading the output (``... | head -1``)
ends the command quietly with status 141, as a command ended by SIGPIPE, with
no traceback and no 'Exception ignored' message at exit.
"""

from __future__ import annotations

import os
import sys
from typing import Callable

__all__ = ["run_command"]


def run_command(prog: str, run: Callable[[], int]) -> int:
    """``run()``'s exit status; 130 (after the line ``<prog>: interrupted``) on
    Ctrl-C, 141 when stdout is a pipe whose reader went away."""
    try:
        try:
            return run()
        finally:  # the output still buffered (all of it, when it goes to a pipe): written here, not at exit
            if sys.stdout is not None:  # None: started with stdout closed
                sys.stdout.flush()
    except BrokenPipeError:
        _discard_stdout()
        return 141
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130


def _discard_stdout() -> None:
    """Point stdout at the null device, so that the interpreter's last flush at exit
    does not fail again on the closed pipe (an 'Exception ignored' message)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout has no file descriptor (captured, or None)
        pass
