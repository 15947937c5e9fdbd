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
import errno
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import stat
import threading
from pathlib import Path
from typing import IO, Any, Callable, Iterator, Sequence

from swarmbase.tomlcheck import NUL_IN_PATH, brief, has_nul

__all__ = ["fsync_dir", "make_dirs", "atomic_writer", "atomic_write_bytes", "atomic_write_text", "write_json_atomic",
           "staged_outputs", "check_output_dir", "check_output_file", "check_input_dir", "publish_gate", "is_temporary",
           "remove_temporaries", "remove_path", "dead_link", "DEAD_LINK", "dead_link_text", "file_sha256",
           "is_regular_file", "is_special_file"]

#: The name of :func:`atomic_writer`'s temporary file for ``<name>``: ``.<name>.<12 hex digits>.tmp``.
_TEMPORARY = re.compile(r"\..+\.[0-9a-f]{12}\.tmp")

_gates = threading.local()  # the publish_gate of each thread


@contextlib.contextmanager
def publish_gate(gate: Callable[[], contextlib.AbstractContextManager[Any]]) -> Iterator[None]:
    """While the block runs in this thread, each file :func:`atomic_writer` publishes (its final
    rename), each folder :func:`make_dirs` creates and each file or folder :func:`remove_path`
    removes is made inside ``gate()``, a context manager
    that may raise to refuse it (the temporary file is then removed and the target untouched), and
    may hold a lock so that a refusal decided by another thread cannot fall between its check and
    the rename. The node agent runs a personalization under one: a round its stop abandoned
    publishes and removes nothing after the stop returned.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "t.txt"
    >>> def refuse():
    ...     raise RuntimeError("abandoned")
    >>> with publish_gate(refuse):
    ...     atomic_write_text(p, "x")
    Traceback (most recent call last):
    RuntimeError: abandoned
    >>> list(p.parent.iterdir())
    []
    """
    previous = getattr(_gates, "gate", None)
    _gates.gate = gate
    try:
        yield
    finally:
        _gates.gate = previous


def _gated() -> contextlib.AbstractContextManager[Any]:
    gate = getattr(_gates, "gate", None)
    return contextlib.nullcontext() if gate is None else gate()


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


def make_dirs(folder: Path) -> None:
    """``folder.mkdir(parents=True, exist_ok=True)``, and each folder it creates is made
    durable: POSIX makes a new entry survive a power loss only once its parent is fsynced.
    A link among them that leads nowhere (:func:`dead_link`) is an ``OSError`` of the error
    following it gives (``ENOENT`` or ``ELOOP``) whose reason names the link and its target."""
    folder = Path(folder)
    new = [p for p in (folder, *folder.parents) if not p.exists()]
    for path in new:  # mkdir says "File exists" of a link that leads nowhere: say where it leads
        if (dead := dead_link(path)) is not None:
            raise OSError(dead, f"{brief(path)} is {dead_link_text(path, dead)}", str(path))
    with _gated() if new else contextlib.nullcontext():  # (an existing file there still raises)
        folder.mkdir(parents=True, exist_ok=True)
    for created in reversed(new):
        fsync_dir(created.parent)


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str], text: bool = False) -> Iterator[IO[Any]]:
    """Open a temporary file beside ``path`` for writing (binary, or UTF-8 text
    with ``newline=""`` when ``text``); on a clean exit it is fsynced and
    renamed over ``path``, on an error it is removed and ``path`` is untouched
    (an ``OSError`` that names no file, such as a full disk, or the temporary file it could not create, such as
    a path too long for its name, is raised naming ``path``).
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
        tmp = folder / f".{path.name}.{secrets.token_hex(6)}.tmp"  # see _TEMPORARY
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
            break
        except FileExistsError:  # pragma: no cover - 48 random bits collided
            continue
        except OSError as exc:  # the temporary file is the writer's own: said of the file being written
            raise OSError(exc.errno, exc.strerror, str(path)) from None
    try:
        with (os.fdopen(fd, "w", encoding="utf-8", newline="") if text else os.fdopen(fd, "wb")) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        with _gated():
            os.replace(tmp, path)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename is None and exc.errno is not None:
            raise OSError(exc.errno, exc.strerror, str(path)) from exc  # write()'s errors name no file
        raise
    fsync_dir(folder)


def is_temporary(name: str) -> bool:
    """Whether ``name`` is the name of one of :func:`atomic_writer`'s temporary files
    (``.<name>.<12 hex digits>.tmp``), which a process killed mid-write leaves behind.

    >>> is_temporary(".state.json.0123456789ab.tmp"), is_temporary(".notes.tmp"), is_temporary("a.tmp")
    (True, False, False)
    """
    return _TEMPORARY.fullmatch(name) is not None


def remove_temporaries(folder: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporary files :func:`atomic_writer` left in ``folder`` (a crash or a
    kill mid-write) and nothing else; returns them. A missing folder holds none."""
    try:
        found = sorted(p for p in Path(folder).iterdir() if is_temporary(p.name) and p.is_file())
    except (FileNotFoundError, NotADirectoryError):
        return []
    for path in found:
        path.unlink(missing_ok=True)
    return found


def remove_path(path: str | os.PathLike[str]) -> None:
    """Remove ``path``, a file or a folder with everything in it (nothing when it is absent), inside
    the thread's :func:`publish_gate`: a removal is a change to the outputs, refused like a write.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp()) / "round-1"
    >>> _ = (d / "sub").mkdir(parents=True), (d / "sub" / "a.bin").write_bytes(b"x")
    >>> remove_path(d); remove_path(d); d.exists()
    False
    """
    path = Path(path)
    if not os.path.lexists(path):
        return
    with _gated():
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    fsync_dir(path.parent)


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The hex sha256 of a file's bytes, read in chunks (a file is never all in memory). A FIFO, a
    device or a socket (:func:`is_special_file`) is an ``OSError`` (``EINVAL``), not opened: a FIFO
    would wait for a writer, ``/dev/zero`` be read without end.

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "a.txt"
    >>> _ = p.write_bytes(b"abc")
    >>> file_sha256(p)[:16]
    'ba7816bf8f01cfea'
    """
    if is_special_file(path):
        raise OSError(errno.EINVAL, NOT_REGULAR, os.fspath(path))
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` through a fsynced temporary file in the same
    folder and ``os.replace``; the temporary file never outlives a failure."""
    with atomic_writer(path) as fh:
        fh.write(data)


def atomic_write_text(path: Path, text: str) -> None:
    """:func:`atomic_write_bytes` of ``text`` encoded as UTF-8."""
    atomic_write_bytes(path, text.encode("utf-8"))


def write_json_atomic(path: Path, data: Any, *, allow_nan: bool = False,
                      default: Callable[[Any], Any] | None = float, sort_keys: bool = True) -> None:
    """Write ``data`` as JSON to ``path`` atomically (creating the folder).
    NaN / infinity are refused unless ``allow_nan`` (they are not JSON). Keys are
    sorted unless ``sort_keys=False`` (a record read back as the dicts it was made of)."""
    path = Path(path)
    make_dirs(path.parent)
    text = json.dumps(data, indent=1, sort_keys=sort_keys, allow_nan=allow_nan, default=default)
    atomic_write_bytes(path, text.encode())


@contextlib.contextmanager
def staged_outputs(folder: str | os.PathLike[str], replaces: Sequence[str] = (),
                   removed: list[Path] | None = None,
                   removable: Callable[[Path], bool] | None = None) -> Iterator[Path]:
    """A set of output files replaced together: yields a temporary folder inside
    ``folder`` (which must exist) to write the set into; on a clean exit each
    file there is renamed over its namesake in ``folder``, then the regular files of
    ``folder`` matching one of the glob patterns ``replaces`` (outputs an
    earlier set may hold and this one does not) that the new set did not bring
    are removed (Ctrl-C is held off during these renames and removals, not
    while they are chosen) and added to ``removed`` when it is given. A link or a folder of such a name is
    left alone: a set is regular files, so a link there is the user's own, not
    an earlier set's output. With ``removable``, a match is removed only when
    ``removable(path)`` is true, asked once the set is written, just before the swap (a caller that knows which
    files it wrote, by their digest, leaves one changed since alone). On an
    error or Ctrl-C the temporary folder is removed and ``folder`` still holds
    the previous set; so it does when one of the final renames fails (the old
    files are kept aside in a hidden folder until the whole set is in place, and
    the renames already made are undone). Other files in ``folder`` are left
    alone. Only a power loss during the final renames can mix the sets (the old
    files are then in a hidden ``.staged-*.old`` folder). The temporary folder a
    killed writer left is removed by the next call on ``folder``. An error raised while writing the set that
    names a file in the temporary folder (a writer's refusal, a full disk) is raised naming that file in
    ``folder`` instead: the temporary folder is gone once the error is shown.

    >>> import tempfile, pathlib
    >>> out = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (out / "old-part.bin").write_bytes(b"x")
    >>> with staged_outputs(out, replaces=["*-part.bin"]) as stage:
    ...     _ = (stage / "new-part.bin").write_bytes(b"y")
    >>> sorted(p.name for p in out.iterdir())
    ['new-part.bin']
    """
    folder = Path(folder)
    _remove_dead_stages(folder)
    stage = folder / f".staged-{os.getpid()}-{secrets.token_hex(6)}.tmp"
    os.mkdir(stage)
    try:
        try:
            yield stage
        except Exception as exc:  # a writer's error names its file in the staging folder, gone as this ends
            said = _unstaged(exc, stage, folder)
            if said is exc:
                raise
            raise said from None
        names = sorted(p.name for p in stage.iterdir())
        # the earlier files to remove are chosen before Ctrl-C is held off: ``removable`` may hash large files
        stale = _stale(folder, names, replaces, removable)
        sigint = hasattr(signal, "pthread_sigmask") and hasattr(signal, "SIGINT")
        blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}) if sigint else None
        try:
            gone = _swap(stage, folder, names, stale)
        finally:
            if blocked is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        if removed is not None:
            removed.extend(gone)
    finally:
        shutil.rmtree(stage, ignore_errors=True)


def _unstaged(exc: Exception, stage: Path, folder: Path) -> Exception:
    """``exc`` naming the outputs' files in ``folder`` where it named them in the staging folder ``stage``, which
    is removed as :func:`staged_outputs` ends (a refusal naming ``o/.staged-<pid>-<hex>.tmp/x`` names a file that
    never exists): an ``OSError``'s file names, or the one message of an error made of one (a package's error
    type); ``exc`` itself when it names no staged file or is of another shape."""
    staged = str(stage)
    if isinstance(exc, OSError):
        names = [str(n).replace(staged, str(folder)) if isinstance(n, str) and staged in n else n
                 for n in (exc.filename, exc.filename2)]
        if names == [exc.filename, exc.filename2] or exc.errno is None:
            return exc
        return type(exc)(exc.errno, exc.strerror, names[0], None, names[1])
    if len(exc.args) != 1 or not isinstance(exc.args[0], str) or staged not in exc.args[0]:
        return exc
    try:
        return type(exc)(exc.args[0].replace(staged, str(folder)))
    except Exception:  # an error type made otherwise than of its message: left as it is
        return exc


#: :func:`staged_outputs`' temporary folder: ``.staged-<pid of its writer>-<12 hex digits>.tmp``.
_STAGE = re.compile(r"\.staged-(\d+)-[0-9a-f]{12}\.tmp")


def _remove_dead_stages(folder: Path) -> None:
    """Remove the temporary folders of :func:`staged_outputs` in ``folder`` whose writer is no longer
    running (a kill or a power cut mid-write left them, with whatever they held: a secret key of
    ``fol keys gen``); a live writer's, and the ``.old`` folders of a swap a power cut broke, stay."""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        match = _STAGE.fullmatch(name)
        if match is None or int(match.group(1)) == os.getpid():
            continue
        try:
            os.kill(int(match.group(1)), 0)
            continue  # its writer runs (or the pid is another user's process): not ours to remove
        except ProcessLookupError:
            pass
        except (PermissionError, OverflowError):
            continue
        shutil.rmtree(folder / name, ignore_errors=True)


def is_regular_file(path: Path) -> bool:
    """Whether ``path`` is a regular file itself, not a link (to one or not) nor a folder: what a set of
    outputs is made of, and so all an earlier set may have left (:func:`staged_outputs`)."""
    return not path.is_symlink() and path.is_file()


#: What a refusal says of a file :func:`is_special_file` finds.
NOT_REGULAR = "not a regular file"


def is_special_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path``, its links followed, is a FIFO (a named pipe), a device or a socket: there, but
    neither a regular file nor a folder. Told by ``os.stat``, without opening it: ``open()`` of a FIFO
    waits for a writer, forever, and a device such as ``/dev/zero`` reads without end, so a reader of a
    user's file refuses one first, saying :data:`NOT_REGULAR` (as
    :func:`swarmbase.tomlcheck.check_input_file` does of every file that is not regular). False for a
    name that cannot be checked (missing, a link that leads nowhere, too long): opening it says why.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> os.mkfifo(d / "pipe"); _ = (d / "a.png").write_bytes(b"x")
    >>> is_special_file(d / "pipe"), is_special_file("/dev/null"), is_special_file(d / "a.png"), is_special_file(d)
    (True, True, False, False)
    >>> is_special_file(d / "missing"), is_special_file("x" * 5000)
    (False, False)
    """
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):  # ValueError: a NUL in the name
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _stale(folder: Path, names: list[str], replaces: Sequence[str],
           removable: Callable[[Path], bool] | None) -> list[Path]:
    """The earlier files of ``folder`` a swap bringing ``names`` removes: the regular files (not links)
    matching a pattern of ``replaces`` that the new set does not bring and ``removable`` allows."""
    matches = {p for pattern in replaces for p in folder.glob(pattern) if p.name not in names and is_regular_file(p)}
    return sorted(p for p in matches if removable is None or removable(p))


def _swap(stage: Path, folder: Path, names: list[str], stale: Sequence[Path]) -> list[Path]:
    """Move the files ``names`` of ``stage`` into ``folder``: each file they replace, and
    each file of ``stale`` (:func:`_stale`), is first moved into a hidden folder beside them,
    removed once every move succeeded; the stale files removed are returned (one gone
    meanwhile, or since made a folder or a link, is skipped). If a move fails, the moves made
    are undone in reverse order (so ``folder`` holds the previous set again) and the error is
    raised; should an undo fail too, the kept-aside files stay in that hidden folder."""
    aside = folder / f"{stage.name[:-len('.tmp')]}.old"
    undo: list[tuple[Path, Path]] = []  # (moved to, moved from)

    def move(src: Path, dst: Path) -> None:
        os.replace(src, dst)
        undo.append((dst, src))

    try:
        os.mkdir(aside)
        for name in names:
            target = folder / name
            if os.path.lexists(target) and (target.is_symlink() or not target.is_dir()):
                # a folder is never moved aside (a file renamed onto it fails, and is undone)
                move(target, aside / name)
            move(stage / name, target)
        removed = []
        for path in stale:
            if not is_regular_file(path):  # gone, or made a folder or a link since it was chosen:
                continue  # nothing to remove, or the user's
            try:
                move(path, aside / path.name)
            except FileNotFoundError:  # removed since it was checked: nothing to remove
                continue
            removed.append(path)
    except BaseException:
        undone = True
        for dst, src in reversed(undo):
            try:
                os.replace(dst, src)
            except OSError:  # the folder failed twice: keep what was set aside
                undone = False
        fsync_dir(folder)
        if undone:
            shutil.rmtree(aside, ignore_errors=True)
        raise
    fsync_dir(folder)
    shutil.rmtree(aside, ignore_errors=True)
    return removed


#: What a link that leads to no file says, by the error following it gives (:func:`dead_link`).
DEAD_LINK = {errno.ENOENT: "does not exist", errno.ELOOP: "leads back to it (a loop of links)"}


def dead_link(path: str | os.PathLike[str]) -> int | None:
    """``errno.ENOENT`` when ``path`` is a link that points nowhere (a file or folder moved, a disk
    not mounted), ``errno.ELOOP`` when it is in a loop of links (``a -> b -> a``); None otherwise
    (not a link, one that leads to a file or folder, or one that cannot be followed for another
    reason, such as a folder on its way that cannot be searched). ``Path.exists()`` is False for
    both, as for a name that is free, yet nothing can be created there.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> (d / "gone").symlink_to(d / "nothing"); (d / "loop").symlink_to(d / "loop")
    >>> dead_link(d / "gone") == errno.ENOENT, dead_link(d / "loop") == errno.ELOOP, dead_link(d / "free")
    (True, True, None)
    """
    if not os.path.islink(path):
        return None
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return errno.ELOOP
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):  # a file on its way where a folder was
            return errno.ENOENT
    return None


def dead_link_text(path: str | os.PathLike[str], dead: int) -> str:
    """``a link to <its target>, which does not exist`` (or leads back to it), of :func:`dead_link`'s ``dead``:
    how every message about such a link names it. A target of more than 200 characters (a link may hold
    4,095) is cut by :func:`~swarmbase.tomlcheck.brief`, its last 60 kept: the line stays one line of a
    few hundred characters, and still ends with the file name the link was to reach.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> (d / "gone").symlink_to("/mnt/usb/" + "x" * 3000 + "/scene.tif")
    >>> text = dead_link_text(d / "gone", errno.ENOENT)
    >>> len(text), text[:22], text[-40:]
    (232, "a link to '/mnt/usb/xx", "xxxxxxx/scene.tif', which does not exist")
    """
    return f"a link to {brief(os.readlink(path), keep_end=60)}, which {DEAD_LINK[dead]}"


def _creatable(path: Path, error: type[Exception], what: str) -> None:
    """``path`` (absent) can be created: neither it nor a folder on its way is a link that
    leads nowhere or into a loop (:func:`dead_link`; writing through one fails, after the work),
    and its nearest existing ancestor is a folder in which a probe folder can be made (and is
    removed at once); permission bits alone say nothing for root or on special file systems
    such as /proc."""
    for name in (path, *path.parents):  # as typed: a link on the way that leads nowhere is named
        if (dead := dead_link(name)) is not None:
            which = "is" if name == path else f"{brief(name)} is"
            raise error(f"{what} {brief(path)}: {which} {dead_link_text(name, dead)}; remove the link or give "
                        f"another path")
        if name.exists():
            break
    try:
        parent = path.absolute().parent
        while not parent.exists():
            parent = parent.parent
    except OSError as exc:  # a relative path from a working folder whose absolute path passes the system's limit
        if exc.errno != errno.ENAMETOOLONG:
            raise
        raise error(f"{what} {brief(path)}: cannot be checked ({exc.strerror}: from the working folder it is a path "
                    f"of {len(str(path.absolute())):,} characters, more than the system takes); expected a shorter "
                    "path: give one outside this folder, or run from a shorter one") from None
    if not parent.is_dir():
        raise error(f"{what} {brief(path)}: cannot be created ({brief(parent)} is not a folder)")
    try:
        _probe(parent)
    except OSError as exc:
        raise error(f"{what} {brief(path)}: cannot be created in {brief(parent)} ({exc.strerror})") from None


def _probe(folder: Path) -> None:
    """Make a probe folder in ``folder`` and remove it at once (``OSError`` when
    nothing can be created there)."""
    probe = folder / f".probe-{secrets.token_hex(6)}"
    os.mkdir(probe)
    os.rmdir(probe)


def _refuse_nul(path: Path, error: type[Exception], what: str) -> None:
    """One line of ``error`` for a path holding a NUL, which the os module raises ``ValueError`` for, or takes
    as absent (the folder and file checks below)."""
    if has_nul(path):
        raise error(f"{what} {brief(path)}: {NUL_IN_PATH}")


def check_output_dir(path: str | os.PathLike[str], error: type[Exception], *, empty: bool = False,
                     what: str = "output folder") -> Path:
    """Check, before any long work, that ``path`` can receive outputs: an existing
    writable folder (empty if ``empty``) or a name that can be created. Writable
    means a probe folder can be made in it (or in the name's nearest existing
    parent) and is removed at once; nothing else is created. Problems raise
    ``error`` with one line."""
    path = Path(path)
    _refuse_nul(path, error, what)
    try:
        exists = path.exists()
    except OSError as exc:  # a name too long for the file system (named cut), a loop of symbolic links
        raise error(f"{what} {brief(path)}: cannot be checked ({exc.strerror})") from None
    if exists:
        if not path.is_dir():
            raise error(f"{what} {brief(path)}: exists and is not a folder")
        try:  # a probe, not the permission bits: those say nothing for root or on a read-only mount
            _probe(path)
        except OSError as exc:
            raise error(f"{what} {brief(path)}: not writable ({exc.strerror})") from None
        if empty and any(path.iterdir()):
            raise error(f"{what} {brief(path)}: is not empty")
        return path
    _creatable(path, error, what)
    return path


def check_input_dir(path: str | os.PathLike[str], error: type[Exception], what: str) -> Path:
    """``path`` as a Path when it is an existing folder, else ``error`` with one line naming ``what`` (a
    flag as the user typed it, ``--resume``): not there, not a folder, or a name the file system cannot
    check (too long: the name is cut). Nothing is read or created.

    >>> check_input_dir("/nonexistent-folder", ValueError, "--resume")
    Traceback (most recent call last):
    ...
    ValueError: --resume /nonexistent-folder: does not exist
    """
    path = Path(path)
    _refuse_nul(path, error, what)
    try:
        is_dir, exists = path.is_dir(), path.exists()
    except OSError as exc:  # a name too long for the file system: one line, the name cut
        raise error(f"{what} {brief(path)}: cannot be checked ({exc.strerror})") from None
    if not is_dir:
        raise error(f"{what} {brief(path)}: {'exists and is not a folder' if exists else 'does not exist'}")
    return path


def check_output_file(path: str | os.PathLike[str], error: type[Exception], what: str = "output file") -> Path:
    """Check, before any long work, that a file can be written at ``path``
    (replacing a regular file is allowed; a folder there is not)."""
    path = Path(path)
    _refuse_nul(path, error, what)
    try:
        is_dir = path.is_dir()
    except OSError as exc:  # a name too long for the file system: one line, the name cut
        raise error(f"{what} {brief(path)}: cannot be checked ({exc.strerror})") from None
    if is_dir:
        raise error(f"{what} {brief(path)}: is a folder; expected a file name")
    if path.exists() and not path.is_file():
        raise error(f"{what} {brief(path)}: exists and is not a regular file")
    if path.exists():
        if not os.access(path.parent if str(path.parent) else ".", os.W_OK | os.X_OK):
            raise error(f"{what} {brief(path)}: its folder is not writable")
        return path
    _creatable(path, error, what)
    return path
