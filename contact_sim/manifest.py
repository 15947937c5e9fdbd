"""The record ``fol contacts`` keeps in ``--out`` of the files it wrote there: ``contacts.manifest.json``.

A run's outputs replace the previous run's (:mod:`contact_sim.cli`). A file there of an output's name that a
run does not write (the ``contacts.czml`` of an earlier ``--czml``) is removed only when the previous run's
manifest lists it and it still has the size and sha256 written there; any other such file (the user's own
``contacts.png`` in ``--out .``, a hand-made ``orbits.oem``, an output edited since) is kept
(:func:`earlier_outputs`). The manifest goes into the run's set and is swapped in with it
(:func:`swarmbase.fileio.staged_outputs`), written by the one crash-safe writer::

    {"files": {"contacts.csv": {"bytes": 5120, "sha256": "9f86d08..."}}, "format": 1}

It is read as untrusted input (:func:`read_manifest`): at most :data:`MAX_MANIFEST_BYTES`, standard JSON, those
two keys, each file one of the names ``fol contacts`` writes (so never a path: no folder, ``..`` or absolute
name), its bytes an integer >= 0 and its sha256 64 lowercase hex digits; anything else is one line.

>>> import tempfile, pathlib
>>> out = pathlib.Path(tempfile.mkdtemp())
>>> _ = (out / "contacts.csv").write_text("a,b\\n")
>>> _ = write_manifest(out / MANIFEST, [out / "contacts.csv"])
>>> record = read_manifest(out, ["contacts.csv", "contacts.czml"])
>>> record["contacts.csv"].bytes, record["contacts.csv"].matches(out / "contacts.csv")
(4, True)
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Collection, Iterable

from swarmbase.fileio import file_sha256, write_json_atomic
from swarmbase.safejson import loads as bounded_loads
from swarmbase.tomlcheck import Table, read_text_file, shown

from .errors import ContactError

__all__ = ["MANIFEST", "MANIFEST_FORMAT", "MAX_MANIFEST_BYTES", "WrittenFile", "read_manifest", "write_manifest",
           "earlier_outputs", "KEPT_UNRECORDED", "KEPT_CHANGED"]

#: The manifest's name in ``--out``.
MANIFEST = "contacts.manifest.json"
#: The layout this version writes and reads.
MANIFEST_FORMAT = 1
#: A larger manifest is refused unread: one of every output takes about 2 kB.
MAX_MANIFEST_BYTES = 64 * 1024

_SHA256 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class WrittenFile:
    """A file as a run wrote it: its size in bytes and the sha256 of its bytes."""

    bytes: int
    sha256: str

    @classmethod
    def of(cls, path: Path) -> WrittenFile:
        return cls(os.stat(path).st_size, file_sha256(path))

    def matches(self, path: Path) -> bool:
        """Whether ``path`` is still this file: a regular file (not a link) of this size and sha256 (read only
        when the size matches). A file that cannot be read is not known to match."""
        try:
            st = os.lstat(path)
            return stat.S_ISREG(st.st_mode) and st.st_size == self.bytes and file_sha256(path) == self.sha256
        except OSError:
            return False


def write_manifest(path: Path, files: Iterable[Path]) -> Path:
    """Write the manifest of ``files`` (which must be in ``path``'s folder) to ``path``; returns ``path``."""
    write_json_atomic(path, {"format": MANIFEST_FORMAT,
                             "files": {p.name: asdict(WrittenFile.of(p)) for p in files}})
    return path


def read_manifest(folder: Path, names: Collection[str]) -> dict[str, WrittenFile] | None:
    """The files the manifest in ``folder`` records, by name (each one of ``names``, the outputs of
    ``fol contacts``); None when there is none. A manifest that is too large, not UTF-8, not JSON or not of
    the layout above raises :class:`ContactError` with one line naming it."""
    path = folder / MANIFEST
    if not os.path.lexists(path):
        return None
    text = read_text_file(path, ContactError, "manifest of fol contacts", MAX_MANIFEST_BYTES)
    try:  # per file: its table and two values; plus the top table, format and files
        doc = bounded_loads(text, max_depth=3, max_items=3 * len(names) + 3)
    except ValueError as exc:
        raise ContactError(f"{path}: not a manifest of fol contacts ({exc})") from None
    top = Table(_object(doc, path, "top level"), "", {"format", "files"}, error=ContactError, source=str(path))
    layout = top.int("format", required=True)
    if layout != MANIFEST_FORMAT:
        top.fail("format", f"expected {MANIFEST_FORMAT}, got {shown(layout)}")
    files = Table(_object(top.raw("files", required=True), path, "files"), "files",
                  allowed=names, error=ContactError, source=str(path))  # a path ('..', '/etc') is no output name
    record = {}
    for name in files.data:
        entry = Table(_object(files[name], path, f"files.{name}"), f"files.{name}", {"bytes", "sha256"},
                      error=ContactError, source=str(path))
        size = entry.int("bytes", required=True, minimum=0)
        sha256 = entry.str("sha256", required=True)
        if not _SHA256.fullmatch(sha256):
            entry.fail("sha256", f"expected 64 lowercase hex digits, got {shown(sha256)}")
        record[name] = WrittenFile(size, sha256)
    return record


def _object(value: object, path: Path, where: str) -> object:
    """``value`` when it is a JSON object, else :class:`ContactError` naming ``where`` in the manifest."""
    if not isinstance(value, dict):
        raise ContactError(f"{path}: {where}: expected a JSON object, got {shown(value)}")
    return value


#: Why :func:`earlier_outputs` keeps a file: no manifest lists it, or it is not the file the manifest lists.
KEPT_UNRECORDED = f"no {MANIFEST} there says fol contacts wrote it"
KEPT_CHANGED = "changed since fol contacts wrote it"


def earlier_outputs(folder: Path, stale: Iterable[str], record: dict[str, WrittenFile] | None
                    ) -> tuple[list[str], list[tuple[Path, str]]]:
    """Of the output names ``stale`` (those a run does not write), the ones whose regular file in ``folder`` the
    previous run wrote and nobody changed since (``record``: its manifest; to be removed), and the other regular
    files of those names, each with why it is kept. A link or a folder of such a name is neither: the command
    writes regular files only."""
    removable: list[str] = []
    kept: list[tuple[Path, str]] = []
    for name in stale:
        path = folder / name
        if path.is_symlink() or not path.is_file():
            continue
        entry = None if record is None else record.get(name)
        if entry is not None and entry.matches(path):
            removable.append(name)
        else:
            kept.append((path, KEPT_CHANGED if entry is not None else KEPT_UNRECORDED))
    return removable, kept
