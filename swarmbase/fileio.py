"""Crash-safe writes: a file is either its old content or its complete new
content, never a torn mix. Used by the model format, the node agent's state and
inbox, the simulation's results and reports, and the contact tables.

Files are created with the process's normal permissions (``0o666`` minus the
umask), like ``open(path, "w")`` would, not the private ``0o600`` of
:func:`tempfile.mkstemp`.

>>> import tempfile, pathlib, json
>>> p = pathlib.Path(tempfile.mkdtemp()) / "state.json"
>>> write_json_atomic(p, {"round": 2})
>>> json.loads(p.read_text())
{'round': 2}
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from pathlib import Path
from typing import IO, Any, Callable, Iterator

__all__ = ["fsync_dir", "atomic_writer", "atomic_write_bytes", "atomic_write_text", "write_json_atomic"]


def fsync_dir(folder: Path) -> None:
    """Make a rename in ``folder`` durable (POSIX; a no-op where not possible)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str], text: bool = False) -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` for writing (binary, or UTF-8 text
    with ``newline=""`` when ``text``); on a clean exit it is fsynced and
    renamed over ``path``, on an error it is removed and ``path`` is untouched.
    For large outputs written piece by piece (contact tables).

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.csv"
    >>> with atomic_writer(p, text=True) as fh:
    ...     _ = fh.write("a,b\\n")
    >>> p.read_text()
    'a,b\\n'
    """
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    # O_EXCL with mode 0o666: the kernel applies the umask, as for any new file
    while True:
        tmp = folder / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
            break
        except FileExistsError:  # pragma: no cover - 48 random bits collided
            continue
    try:
        with (os.fdopen(fd, "w", encoding="utf-8", newline="") if text else os.fdopen(fd, "wb")) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(folder)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` through a fsynced temporary file in the same
    folder and ``os.replace``; the temporary file never outlives a failure."""
    with atomic_writer(path) as fh:
        fh.write(data)


def atomic_write_text(path: Path, text: str) -> None:
    """:func:`atomic_write_bytes` of ``text`` encoded as UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"))


def write_json_atomic(path: Path, data: Any, *, allow_nan: bool = False,
                      default: Callable[[Any], Any] | None = float) -> None:
    """Write ``data`` as JSON to ``path`` atomically (creating the folder).
    NaN / infinity are refused unless ``allow_nan`` (they are not JSON)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=1, sort_keys=True, allow_nan=allow_nan, default=default)
    atomic_write_bytes(path, text.encode())
