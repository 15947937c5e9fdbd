"""Crash-safe writes: a file is either its old content or its complete new
content, never a torn mix. Used by the model format, the node agent's state and
inbox, and every report writer.

>>> import tempfile, pathlib, json
>>> p = pathlib.Path(tempfile.mkdtemp()) / "state.json"
>>> write_json_atomic(p, {"round": 2})
>>> json.loads(p.read_text())
{'round': 2}
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Callable

__all__ = ["fsync_dir", "atomic_write_bytes", "write_json_atomic"]


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


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a fsynced temporary file in the same
    folder and ``os.replace``; the temporary file never outlives a failure."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(folder)


def write_json_atomic(path: Path, data: Any, *, allow_nan: bool = False,
                      default: Callable[[Any], Any] | None = float) -> None:
    """Write ``data`` as JSON to ``path`` atomically (creating the folder).
    NaN / infinity are refused unless ``allow_nan`` (they are not JSON)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(data, indent=1, sort_keys=True, allow_nan=allow_nan, default=default)
    atomic_write_bytes(path, text.encode())
