"""The record a command keeps in its output folder of the files it wrote there: its manifest.

``fol contacts`` and ``fol personalize`` write a set of outputs into ``--out`` that replaces the previous
run's (:func:`swarmbase.fileio.staged_outputs`). A file there of an output's name that a run does not write
(the ``contacts.czml`` of an earlier ``--czml``, the ``member-*.safetensors`` of an earlier ensemble) is
removed only when the previous run's manifest lists it and it still has the size and sha256 written there;
any other such file (the user's own, an output edited since, the outputs of a folder with no manifest) is
kept and said so (:meth:`OutputManifest.earlier_outputs`). Each command describes its manifest once, as an
:class:`OutputManifest`: the manifest's file name, the command as messages name it, the names that count as
its outputs (file names or ``fnmatch`` patterns), its error type and the manifest's limits. The manifest
goes into the run's set and is swapped in with it, written by the one crash-safe writer::

    {"files": {"contacts.csv": {"bytes": 5120, "sha256": "9f86d08..."}}, "format": 1}

It is read as untrusted input (:meth:`OutputManifest.read`): a regular file (a link of its name, which the command
never writes, is refused unread), at most ``max_bytes``, standard JSON, those two
keys, each file one of the command's output names and a plain name (never a path: no folder, ``..`` or
absolute name), its bytes an integer >= 0 and its sha256 64 lowercase hex digits; anything else is one line.

>>> import tempfile, pathlib
>>> out = pathlib.Path(tempfile.mkdtemp())
>>> rule = OutputManifest("demo.manifest.json", "demo", ("table.csv", "part-*.bin"), ValueError, max_files=8)
>>> _ = (out / "table.csv").write_text("a,b\\n"), (out / "part-1.bin").write_bytes(b"x")
>>> _ = rule.write(out / rule.name, [out / "table.csv", out / "part-1.bin"])
>>> record = rule.read(out)
>>> record["table.csv"].bytes, record["part-1.bin"].matches(out / "part-1.bin")
(4, True)
>>> _ = (out / "part-2.bin").write_bytes(b"the user's")
>>> earlier = rule.earlier_outputs(out, ["table.csv", rule.name], record)
>>> earlier.removable, [(p.name, why) for p, why in earlier.kept]
(['part-1.bin'], [('part-2.bin', 'no demo.manifest.json there says demo wrote it')])
"""

from __future__ import annotations

import errno
import glob
import os
import re
import stat
from dataclasses import asdict, dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Collection, Iterable

from swarmbase.fileio import file_sha256, is_regular_file, write_json_atomic
from swarmbase.safejson import loads as bounded_loads
from swarmbase.tomlcheck import Table, brief, read_text_file, shown

__all__ = ["MANIFEST_FORMAT", "WrittenFile", "OutputManifest", "EarlierOutputs", "recorded_unchanged"]

#: The layout this version writes and reads.
MANIFEST_FORMAT = 1

_SHA256 = re.compile(r"[0-9a-f]{64}")

#: The last characters of a path a removed or kept line keeps when it cuts a long one (:func:`brief`): the file's
#: name in the folder (``member-12-0a1b2c3d.safetensors`` is 30). ``fol keys`` names the key files it writes,
#: trusts or removes so too.
SHOWN_PATH_END = 40


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


def recorded_unchanged(record: dict[str, WrittenFile] | None, path: Path) -> bool:
    """Whether a manifest's ``record`` (:meth:`OutputManifest.read`; None: no manifest) lists ``path``'s name
    and ``path`` is still that file (:meth:`WrittenFile.matches`): an earlier output a run may remove."""
    entry = None if record is None else record.get(path.name)
    return entry is not None and entry.matches(path)


@dataclass
class EarlierOutputs:
    """What a run does with the files of its output names that it does not write (:meth:`OutputManifest.
    earlier_outputs`): ``removable``, the names of those the previous run wrote and nobody changed since
    (removed in the swap), and ``kept``, the other regular files of such names, each with why it is kept."""

    manifest: OutputManifest
    record: dict[str, WrittenFile] | None
    removable: list[str] = field(default_factory=list)
    kept: list[tuple[Path, str]] = field(default_factory=list)

    @property
    def replaces(self) -> list[str]:
        """``removable`` as the patterns of :func:`swarmbase.fileio.staged_outputs`' ``replaces`` (each name
        matching itself only)."""
        return [glob.escape(name) for name in self.removable]

    def unchanged(self, path: Path) -> bool:
        """``staged_outputs(removable=...)``: asked once the new set is written, just before the swap, whether
        ``path`` is still the file the manifest lists; one changed since (while the run computed, too) is kept, and added to ``kept``."""
        if recorded_unchanged(self.record, path):
            return True
        self.kept.append((path, self.manifest.kept_changed))
        return False

    def lines(self, removed: Iterable[Path]) -> list[str]:
        """The lines a run prints of the earlier outputs it removed (``removed``: what the swap said) and of
        the files it kept, each path named through :func:`~swarmbase.tomlcheck.brief`: a name found in the folder
        (``member-*.safetensors``) may hold a newline or a terminal's escape, and the folder (``--out``) may be
        thousands of characters long; a cut keeps the path's last :data:`SHOWN_PATH_END` characters, so the files
        stay told apart."""
        return ([f"removed    {brief(p, keep_end=SHOWN_PATH_END)} (an earlier run's; not an output of this one)"
                 for p in removed]
                + [f"kept       {brief(p, keep_end=SHOWN_PATH_END)} (not an output of this run; {why})"
                   for p, why in self.kept])


def _expected_of(exc: OSError, path: Path) -> str:
    """What writing the manifest ``path`` needed that the system's ``exc`` says was not there."""
    if exc.errno == errno.EISDIR or os.path.isdir(path):
        return "expected a file there, not a folder: remove or rename the folder"
    if exc.errno == errno.ENAMETOOLONG:
        return ("expected a shorter path: the file system refuses the manifest's, or its temporary file's beside it, "
                "as too long; give a shorter output folder")
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return "expected a folder this user can write files in"
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "expected room for it on the disk: free some space"
    return "expected a folder it can be written to"


@dataclass(frozen=True)
class OutputManifest:
    """How one command records the files it wrote into its output folder: the manifest's file ``name`` there,
    the ``command`` as messages name it, its ``outputs`` (file names, or ``fnmatch`` patterns such as
    ``member-*.safetensors``; the manifest's own name is none of them), the ``error`` type its lines raise, and
    the largest manifest read: ``max_bytes``, and ``max_files`` files (default: the number of ``outputs``,
    which must then all be plain names)."""

    name: str
    command: str
    outputs: tuple[str, ...]
    error: type[Exception]
    max_bytes: int = 64 * 1024
    max_files: int | None = None

    def __post_init__(self) -> None:
        if self.max_files is None:
            if any(glob.has_magic(p) for p in self.outputs):
                raise ValueError(f"{self.name}: outputs given as patterns need max_files")
            object.__setattr__(self, "max_files", len(self.outputs))

    @property
    def kept_unrecorded(self) -> str:
        """Why a file is kept that no manifest lists."""
        return f"no {self.name} there says {self.command} wrote it"

    @property
    def kept_changed(self) -> str:
        """Why a file is kept that the manifest lists, at another size or sha256."""
        return f"changed since {self.command} wrote it"

    def is_output(self, name: str) -> bool:
        """Whether ``name`` is the name of one of the command's outputs: a plain file name (no folder, not
        ``.`` or ``..``) that one of ``outputs`` matches.

        >>> rule = OutputManifest("m.json", "demo", ("part-*.bin",), ValueError, max_files=8)
        >>> rule.is_output("part-1.bin"), rule.is_output("part-/../../etc/passwd.bin"), rule.is_output("m.json")
        (True, False, False)
        """
        return ("/" not in name and "\0" not in name and name not in (".", "..")
                and any(fnmatchcase(name, pattern) for pattern in self.outputs))

    def write(self, path: Path, files: Iterable[Path], shown: str | os.PathLike[str] | None = None) -> Path:
        """Write the manifest of ``files`` (which must be in ``path``'s folder, each an output) to ``path``
        with the crash-safe writer; returns ``path``. A set the reader would refuse is never written: a file
        not an output, or more than ``max_files``, raises ``error``; so does a manifest the system cannot write
        (a folder of its name, a folder that cannot be written, a path too long), saying what was expected,
        and whatever ``path`` held is left as it was. Each line names the manifest as ``shown`` (default
        ``path``; a manifest written into :func:`~swarmbase.fileio.staged_outputs`' temporary folder is shown at
        its place in the output folder), through :func:`brief`."""
        named = brief(path if shown is None else shown, keep_end=SHOWN_PATH_END)
        files = list(files)
        for p in files:
            if not self.is_output(p.name):
                raise self.error(f"{named}: {brief(p.name)} is not an output of {self.command}; not recorded")
        if len(files) > self.max_files:
            raise self.error(f"{named}: {len(files):,} files, more than the {self.max_files:,} a manifest of "
                             f"{self.command} may list")
        record = {p.name: asdict(WrittenFile.of(p)) for p in files}  # a file that cannot be read: its own OSError
        try:
            write_json_atomic(path, {"format": MANIFEST_FORMAT, "files": record})
        except OSError as exc:
            raise self.error(f"{named}: cannot write the manifest of {self.command} ({exc.strerror or exc}); "
                             f"{_expected_of(exc, path)}") from None
        return path

    def read(self, folder: Path, where: str = "--out") -> dict[str, WrittenFile] | None:
        """The files the manifest in ``folder`` records, by name; None when there is none. A manifest that is
        a link, too large, not UTF-8, not JSON or not of the layout above raises ``error`` with one line naming it and
        what to do (``where``: the folder's option as typed)."""
        try:
            return self._read(folder / self.name)
        except self.error as exc:
            raise self.error(f"{exc}; it records which files in {where} {self.command} wrote: remove it (the "
                             f"files it lists are then kept) or give another {where}") from None

    def _read(self, path: Path) -> dict[str, WrittenFile] | None:
        if not os.path.lexists(path):
            return None
        error, what = self.error, f"manifest of {self.command}"
        named = brief(path)  # the file as every message names it: --out may be long or hold a newline
        if os.path.islink(path):  # the command writes a regular file there: a link is the user's, never read
            raise error(f"{named}: is a link to {brief(os.readlink(path))}, not the regular file {self.command} writes")
        text = read_text_file(path, error, what, self.max_bytes)
        try:  # per file: its table and two values; plus the top table, format and files
            doc = bounded_loads(text, max_depth=3, max_items=3 * self.max_files + 3)
        except ValueError as exc:
            raise error(f"{named}: not a {what} ({exc})") from None
        top = Table(self._object(doc, named, "top level"), "", {"format", "files"}, error=error, source=named)
        layout = top.int("format", required=True)
        if layout != MANIFEST_FORMAT:
            top.fail("format", f"expected {MANIFEST_FORMAT}, got {shown(layout)}")
        files = Table(self._object(top.raw("files", required=True), named, "files"), "files", error=error,
                      source=named)
        unknown = sorted(name for name in files.data if not self.is_output(name))  # a path ('..', '/etc') is none
        if unknown:  # said by the one table checker, as a key outside the names allowed
            Table({unknown[0]: None}, "files", self.outputs, error=error, source=named)
            raise error(f"{named}: files: unknown key {shown(unknown[0])}")  # a pattern's own text ('[ab]')
        record = {}
        for name in files.data:
            entry = Table(self._object(files[name], named, f"files.{name}"), f"files.{name}", {"bytes", "sha256"},
                          error=error, source=named)
            size = entry.int("bytes", required=True, minimum=0)
            sha256 = entry.str("sha256", required=True)
            if not _SHA256.fullmatch(sha256):
                entry.fail("sha256", f"expected 64 lowercase hex digits, got {shown(sha256)}")
            record[name] = WrittenFile(size, sha256)
        return record

    def _object(self, value: object, named: str, where: str) -> object:
        """``value`` when it is a JSON object, else ``error`` naming ``where`` in the manifest (``named``: its file
        as :func:`brief` names it)."""
        if not isinstance(value, dict):
            raise self.error(f"{named}: {where}: expected a JSON object, got {shown(value)}")
        return value

    def earlier_outputs(self, folder: Path, writes: Collection[str],
                        record: dict[str, WrittenFile] | None) -> EarlierOutputs:
        """Of the regular files in ``folder`` of an output's name that the run does not write (``writes``), the
        ones the previous run wrote and nobody changed since (``record``: its manifest, :meth:`read`; to be
        removed), and the others, each with why it is kept; in the order of ``outputs``, the matches of a
        pattern in name order. A link or a folder of such a name is neither: the commands write regular files
        only."""
        earlier = EarlierOutputs(self, record)
        seen: set[str] = set(writes) | {self.name}
        for pattern in self.outputs:
            names = sorted(p.name for p in folder.glob(pattern)) if glob.has_magic(pattern) else [pattern]
            for name in names:
                if name in seen or not self.is_output(name):
                    continue
                seen.add(name)
                path = folder / name
                if not is_regular_file(path):
                    continue
                if recorded_unchanged(record, path):
                    earlier.removable.append(name)
                else:
                    listed = record is not None and name in record
                    earlier.kept.append((path, self.kept_changed if listed else self.kept_unrecorded))
        return earlier
