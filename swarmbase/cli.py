"""What every command-line entry point does around its work (``fol``, and
``python -m contact_sim.cli`` standalone): Ctrl-C ends in one line and exit
status 130; a reader that stops reading the output (``... | head -1``)
ends the command quietly with status 141, as a command ended by SIGPIPE, with
no traceback and no 'Exception ignored' message at exit; standard output that
cannot be written (``... > /dev/full``, a full disk) ends the command with the
line ``<prog>: cannot write to standard output: <reason>`` and status 1. Files
already saved by the crash-safe writer are complete either way. Text standard
output's encoding cannot write (a path of bytes that are not UTF-8, which Python
gives as lone surrogates, where the locale's UTF-8 output is strict) is written
with those characters escaped (``\\udcff``), as standard error writes them.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import PurePath
from typing import Any, Callable, NoReturn

from swarmbase.tomlcheck import BRIEF_CHARS, brief, printable, shown

__all__ = ["run_command", "printable", "utf8_text", "recorded_path", "os_failure_line", "path_argument",
           "ArgumentParser", "MAX_PER_CORE", "max_local_parallelism", "parallelism_range", "parallelism_problem",
           "parallelism_floor_problem"]

#: A piece of argparse's usage error that may be the user's text: a value it quotes (``'...'`` or ``"..."``, as
#: repr writes it), or a run of characters without a space (an argument ``unrecognized arguments:`` lists).
_TYPED_PIECE = re.compile(r"""'[^']*'|"[^"]*"|\S+""")


class ArgumentParser(argparse.ArgumentParser):
    """The parser of every command-line entry point (``fol``, ``python -m contact_sim.cli``; a sub-command's
    parser is of its parent's class): argparse's usage error, which writes what the user typed as it is
    (``invalid int value: '999...'``, ``unrecognized arguments: ...``), is one line of bounded length, each
    character that is not printable escaped (:func:`printable`: a newline or a terminal escape of an argument
    broke the line or rewrote the terminal) and each value longer than a name may be cut (:func:`brief`:
    a 5,000-character argument made a 5 kB line).

    >>> line = usage_line("argument --epochs: invalid int value: '" + "9" * 5000 + "'")
    >>> len(line), line[:50]
    (238, "argument --epochs: invalid int value: '99999999999")
    >>> usage_line("unrecognized arguments: a\\nb\\x1b[2J")
    'unrecognized arguments: a\\\\nb\\\\x1b[2J'
    """

    def error(self, message: str) -> NoReturn:
        super().error(usage_line(message))


def usage_line(message: str) -> str:
    """argparse's usage error ``message`` as :class:`ArgumentParser` writes it."""
    def cut(match: re.Match[str]) -> str:
        piece = match.group()
        return piece if len(piece) <= BRIEF_CHARS else brief(piece.strip("'\""))

    return _TYPED_PIECE.sub(cut, printable(message))


def path_argument(text: str) -> str:
    """The argparse ``type`` of every file and folder argument: an empty name (an
    unset shell variable in ``--out "$OUT"``) is refused in argparse's one line,
    not taken as the current folder, nor as the argument left out.

    >>> path_argument("runs/a")
    'runs/a'
    >>> path_argument(" ")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: expected a file or folder name, got an empty string
    """
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a file or folder name, got an empty string")
    return text


#: Processes or torch threads per core beyond which a command on this machine refuses to run: past it they
#: only slow a CPU-bound run, and a typo (``--workers 100000``) would start a process per unit of work.
MAX_PER_CORE = 4


def max_local_parallelism() -> int:
    """The most processes or torch threads a run takes on this machine: :data:`MAX_PER_CORE` per core."""
    return MAX_PER_CORE * (os.cpu_count() or 1)


def parallelism_floor_problem(value: int | str) -> str | None:
    """Why ``value`` (a number, or an argument as typed that is not one) cannot be a number of processes,
    threads or Ray CPUs anywhere, or None: the lower bound of :func:`parallelism_problem` alone, the whole rule
    where no upper bound is known yet (``fol simulate --workers``, a scenario's ``run.workers`` /
    ``run.threads`` as read: a Ray cluster counts its own CPUs), in one wording for both.

    >>> parallelism_floor_problem(1) is None, parallelism_floor_problem(0)
    (True, 'expected a whole number >= 1, got 0')
    """
    return None if isinstance(value, int) and value >= 1 else f"expected a whole number >= 1, got {shown(value)}"


def parallelism_range() -> str:
    """The range :func:`parallelism_problem` allows, in the words of its message (a benchmark's
    ``--workers`` / ``--threads`` says it too)."""
    return f"1..{max_local_parallelism()} on this machine of {os.cpu_count() or 1} core(s) ({MAX_PER_CORE} per core)"


def parallelism_problem(value: int) -> str | None:
    """Why ``value`` cannot be a number of local processes or threads (``fol contacts --workers``,
    ``fol pretrain --threads``, ``fol simulate``'s ``run.workers`` / ``--workers`` and ``run.threads`` off a
    Ray cluster), or None: the one rule, 1..:func:`max_local_parallelism`, and its one message.

    >>> parallelism_problem(1) is None, parallelism_problem(0).startswith("expected 1..")
    (True, True)
    """
    if 1 <= value <= max_local_parallelism():
        return None
    return f"expected {parallelism_range()}, got {shown(value)}"


def utf8_text(text: str) -> str:
    """``text`` (a file name, an argument as typed) with the bytes that are not UTF-8, which Python gives
    as lone surrogates, written as their escape (``\\udcff``): text that a model card, a seed's hash
    and a JSON file take as UTF-8 (a lone surrogate makes encoding it raise). Every other character is
    kept; the escape is for reading, not for finding the file again.

    >>> utf8_text("caf\\xe9.safetensors"), utf8_text("m\\udcff.safetensors")
    ('café.safetensors', 'm\\\\udcff.safetensors')
    """
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def recorded_path(path: str, flag: str, error: type[Exception], record: str, name_only: bool = False) -> str:
    """``path`` (a file or folder argument as typed, ``flag`` naming it: ``--data``; empty for a positional
    argument) when what a file will record of it is UTF-8 text: the whole of it, or with ``name_only`` its
    last part (a file's name). Else ``error``, one line naming the flag and the path, saying that it holds
    bytes that are not UTF-8, what records it (``record``: "the model card records --data") and that a
    UTF-8 path is expected. Such bytes (Python gives them as lone surrogates) could be recorded only
    escaped (:func:`utf8_text`), which names no file to check against later: a command refuses the
    argument before any work, rather than record what it could not read back.

    >>> recorded_path("runs/set", "--data", ValueError, "the model card records it")
    'runs/set'
    >>> recorded_path("runs/caf\\udce9/m.safetensors", "--model", ValueError, "the card records it", name_only=True)
    'runs/caf\\udce9/m.safetensors'
    >>> recorded_path("runs/set\\udcff", "--data", ValueError, "the model card records it")
    Traceback (most recent call last):
    ...
    ValueError: --data runs/set\\udcff: holds bytes that are not UTF-8 (shown escaped), and the model card records it; expected a UTF-8 path (rename the file or folder, or give a link to it whose name is UTF-8)
    """
    part = PurePath(path).name if name_only else path  # the name as Path(path).name records it
    try:
        part.encode("utf-8")
    except UnicodeEncodeError:
        where = f"{flag} {brief(path)}" if flag else brief(path)
        raise error(f"{where}: {'its file name holds' if name_only else 'holds'} bytes that are not UTF-8 (shown "
                    f"escaped), and {record}; expected a UTF-8 {'file name' if name_only else 'path'} (rename the "
                    f"file or folder, or give a link to it whose name is UTF-8)") from None
    return path


def os_failure_line(exc: OSError) -> str:
    """``<file>: <reason>`` of an OS error (a full disk: the crash-safe writer names the file it wrote),
    or the reason alone when the error names no file; a long file name (one the file system refuses as
    too long) cut by :func:`swarmbase.tomlcheck.brief`.

    >>> os_failure_line(OSError(28, "No space left on device", "state.json")), os_failure_line(OSError("gone"))
    ('state.json: No space left on device', 'gone')
    >>> line = os_failure_line(OSError(36, "File name too long", "a" * 5000))
    >>> len(line), line[-26:]
    (220, 'aaa...: File name too long')
    """
    where = f"{brief(exc.filename)}: " if exc.filename is not None else ""
    return f"{where}{exc.strerror or exc}"


class _OutputLost(BaseException):
    """Standard output failed (not a closed pipe). A ``BaseException``, as Ctrl-C is:
    it ends the command through every ``except OSError`` / ``except Exception`` that
    is about the command's own files, and argparse's help, which ignores ``OSError``."""

    def __init__(self, exc: OSError) -> None:
        super().__init__(exc.strerror or str(exc))


class _GuardedStdout:
    """``sys.stdout`` whose write errors other than a closed pipe raise :class:`_OutputLost`."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def _guarded(self, name: str, *args: Any) -> Any:
        try:
            return getattr(self._stream, name)(*args)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise _OutputLost(exc) from None

    def write(self, text: str) -> int:
        try:
            return self._guarded("write", text)
        except UnicodeEncodeError:
            # a name of bytes that are not UTF-8 (lone surrogates) where the locale's UTF-8 output is strict,
            # or a character the output's encoding lacks: written escaped, as standard error writes it
            encoding = getattr(self._stream, "encoding", None) or "utf-8"
            self._guarded("write", text.encode(encoding, "backslashreplace").decode(encoding))
            return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        self._guarded("flush")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def run_command(prog: str, run: Callable[[], int]) -> int:
    """``run()``'s exit status; 130 (after the line ``<prog>: interrupted``) on
    Ctrl-C, 141 when stdout is a pipe whose reader went away, 1 (after one line)
    when stdout cannot be written."""
    stdout = sys.stdout
    if stdout is not None:  # None: started with stdout closed
        sys.stdout = _GuardedStdout(stdout)
    try:
        try:
            return run()
        finally:  # the output still buffered (all of it, when it goes to a pipe): written here, not at exit
            if sys.stdout is not None:
                sys.stdout.flush()
    except BrokenPipeError:
        _discard_stdout(stdout)
        return 141
    except _OutputLost as exc:
        _discard_stdout(stdout)
        print(f"{prog}: cannot write to standard output: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    finally:
        if isinstance(sys.stdout, _GuardedStdout):
            sys.stdout = stdout


def _discard_stdout(stdout: Any) -> None:
    """Point ``stdout`` at the null device, so that the interpreter's last flush at exit
    does not fail again on the closed pipe or full device (an 'Exception ignored' message)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout has no file descriptor (captured, or None)
        pass
