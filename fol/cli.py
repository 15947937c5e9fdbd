"""The ``fol`` command line.

Each sub-command lives with the code it drives and registers itself here through
an ``add_*_parser(subparsers)`` function; the heavy modules (torch, skyfield) are
imported only when their command runs, so ``fol --help`` is instant.

User errors (a bad file, field or payload), and a file that cannot be read or
written after the checks passed (a full disk), end in one line on stderr and exit
status 2; nothing is printed as a traceback unless ``--debug`` is given. Ctrl-C
ends in one line and exit status 130. A reader that stops reading the output
(``fol ... | head -1``) ends the command quietly with status 141, as a command
ended by SIGPIPE. Standard output that cannot be written (``fol ... > /dev/full``,
a full disk) ends the command in one line and exit status 1.
"""

from __future__ import annotations

import argparse
import logging
import re
import sys
from pathlib import PurePath
from typing import Callable, Sequence

from swarmbase.cli import ArgumentParser, os_failure_line, printable, run_command

__all__ = ["main", "build_parser"]

log = logging.getLogger("fol")


def _user_error_types() -> tuple[type[BaseException], ...]:
    """The error types of every package (one per package) that mean 'user mistake'."""
    from contact_sim.errors import ContactError
    from fol.errors import FOLError
    from orbits.errors import OrbitError

    return (FOLError, OrbitError, ContactError)


def _registrars() -> list[Callable[[argparse._SubParsersAction], None]]:
    """``add_*_parser`` functions of every sub-command, in help order."""
    from fol.commands import registrars

    return registrars()


def build_parser() -> argparse.ArgumentParser:
    parser = ArgumentParser(
        prog="fol",
        description="Peer-to-peer one-shot personalization (Federated Oriented Learning) for satellite and drone swarms.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks and debug logging")
    parser.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for register in _registrars():
        register(sub)
    return parser


class _PrintableFormatter(logging.Formatter):
    """Log lines with their message escaped (:func:`swarmbase.cli.printable`): a warning names a
    user's file (a skipped image, a skipped neighbour model), whose name may hold a newline or a
    terminal escape. A traceback (``--debug``) keeps its lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return printable(super().formatMessage(record))


def main(argv: Sequence[str] | None = None) -> int:
    return run_command("fol", lambda: _main(argv))  # Ctrl-C before the command runs, a closed output pipe


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = logging.DEBUG if args.debug else logging.WARNING if args.quiet else logging.INFO
    handler = logging.StreamHandler()  # stderr, as basicConfig's
    handler.setFormatter(_PrintableFormatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    user_errors = _user_error_types()
    try:
        return int(args.func(args) or 0)
    except user_errors as exc:
        if args.debug:
            raise
        print(f"fol {args.command}: error: {printable(str(exc))}", file=sys.stderr)  # a file name: one line
        return 2
    except BrokenPipeError:  # the reader of stdout went away: swarmbase.cli.run_command
        raise
    except OSError as exc:  # a file that cannot be read or written after the checks passed (a full disk)
        if args.debug:
            raise
        option = _option_of(parser, args, exc.filename)
        line = os_failure_line(exc)
        print(f"fol {args.command}: error: {printable(f'{option} {line}' if option else line)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"fol {args.command}: interrupted", file=sys.stderr)
        return 130
    except (MemoryError, RuntimeError) as exc:
        line = out_of_memory_line(exc)
        if line is None or args.debug:
            raise
        print(f"fol {args.command}: error: {line}", file=sys.stderr)
        return 1


def _option_of(parser: argparse.ArgumentParser, args: argparse.Namespace, filename: object) -> str | None:
    """The option (``--dir``) of ``args`` whose path is ``filename`` (an ``OSError``'s) or a folder holding it,
    the deepest such one, else None: a failure past the checks (a name the file system refuses as too long)
    then names the option as the checks' refusals do, not only the path, cut short, it gave."""
    if not isinstance(filename, (str, PurePath)):
        return None
    failed, found, depth = PurePath(filename), None, -1
    for action in _option_actions(parser):
        value = getattr(args, action.dest, None)
        if not isinstance(value, (str, PurePath)) or not str(value):
            continue
        given = PurePath(value)
        if given.parts and (failed == given or failed.is_relative_to(given)) and len(given.parts) > depth:
            found, depth = next(s for s in action.option_strings if s.startswith("--")), len(given.parts)
    return found


def _option_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """Every ``--option`` of ``parser`` and of its sub-commands' parsers, at every depth."""
    actions: list[argparse.Action] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):  # an alias maps to the same parser
                actions += _option_actions(sub)
        elif any(s.startswith("--") for s in action.option_strings):
            actions.append(action)
    return actions


#: What an out-of-memory line suggests, for every command.
_OOM_HINT = "(fewer or smaller images, a smaller batch, or more memory for the process)"
#: How torch's CPU allocator words a failed allocation (a ``RuntimeError``, not ``MemoryError``).
_TORCH_ALLOC_FAILED = re.compile(r"DefaultCPUAllocator: can't allocate memory: you tried to allocate (\d+) bytes")


def out_of_memory_line(exc: BaseException) -> str | None:
    """One line for an allocation that failed (Python's ``MemoryError``, or torch's allocator
    refusing a tensor), else None: a run sized within every limit the scenario is checked
    against may still need more memory than the machine (or its ``ulimit -v``) grants."""
    if isinstance(exc, MemoryError):
        return f"out of memory {_OOM_HINT}"
    match = _TORCH_ALLOC_FAILED.search(str(exc)) if isinstance(exc, RuntimeError) else None
    if match is None:
        return None
    from fol.data.geo import gib_text

    return f"out of memory: a tensor of {gib_text(int(match.group(1)))} could not be allocated {_OOM_HINT}"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
