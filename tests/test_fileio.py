"""The one crash-safe writer: normal permissions (umask), and the contact
tables, plots and the simulation's results go through it (a failed write
leaves the previous file whole and no temporary file behind)."""

from __future__ import annotations

import errno
import os
import re
import signal
import stat
import time
from pathlib import Path

import pytest

import swarmbase.fileio as fileio
from contact_sim import ContactPlan, LinkModel, WindowTable
from swarmbase.fileio import atomic_write_bytes, atomic_writer, write_json_atomic

from _names import deep_folder, odd_folder


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def test_files_get_normal_permissions(tmp_path: Path, umask_022) -> None:
    atomic_write_bytes(tmp_path / "a.bin", b"x")
    write_json_atomic(tmp_path / "b.json", {"k": 1})
    with atomic_writer(tmp_path / "c.csv", text=True) as fh:
        fh.write("a,b\n")
    assert [_mode(tmp_path / n) for n in ("a.bin", "b.json", "c.csv")] == [0o644] * 3
    os.umask(0o077)
    atomic_write_bytes(tmp_path / "d.bin", b"x")
    assert _mode(tmp_path / "d.bin") == 0o600


def _plan() -> ContactPlan:
    w = WindowTable([0, 0], [1, 2], [100.0, 20.0], [700.0, 80.0], [100, 200], [150, 250], [0, 0])
    return ContactPlan(["n0", "n1", "n2"], w, LinkModel("constant", 8e6, 10.0), [0.0, 1000.0])


def _fail_replace(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fileio.os, "replace", boom)


@pytest.mark.parametrize("writer", ["to_csv", "to_json", "png"])
def test_contact_outputs_go_through_the_writer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, umask_022,
                                               writer: str) -> None:
    plan = _plan()
    path = tmp_path / f"out.{writer}"

    def write() -> None:
        if writer == "png":
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            from contact_sim.plotting import save_figure

            fig, ax = plt.subplots()
            ax.plot([0, 1], [0, 1])
            save_figure(fig, path)
        else:
            getattr(plan, writer)(path)

    write()
    before = path.read_bytes()
    assert before and _mode(path) == 0o644
    plan.schedule(0, 1, 0, 1000)  # changes the JSON export (transfers)
    _fail_replace(monkeypatch)
    with pytest.raises(OSError, match="No space"):
        write()
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_an_existing_output_folder_is_probed_not_judged_by_its_permission_bits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As root, or on /proc and /sys, permission bits say a folder is writable
    when nothing can be created in it: the check makes (and removes) a probe
    folder in an existing output folder too, as in a folder's nearest parent."""
    out = tmp_path / "out"
    out.mkdir()
    fileio.check_output_dir(out, ValueError)  # a writable folder passes and is left empty
    assert not any(out.iterdir())
    real_mkdir = os.mkdir

    def refuse(path, *args, **kwargs):  # what mkdir in /sys/kernel/debug does while os.access says yes
        if Path(path).parent == out:
            raise OSError(30, "Read-only file system")
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "mkdir", refuse)
    with pytest.raises(ValueError, match=r"^output folder .*out: not writable \(Read-only file system\)$"):
        fileio.check_output_dir(out, ValueError)


def test_an_output_folder_name_too_long_for_the_file_system_is_the_checks_one_line(tmp_path: Path) -> None:
    """A 5,000-character output.dir made the existence test an OSError, which fol printed as the
    bare OS reason after the whole name, without saying it was the output folder; the line then wrote
    the name whole (5 kB): it is cut (swarmbase.tomlcheck.brief)."""
    for out in (tmp_path / ("x" * 5000), tmp_path / ("x" * 5000) / "run"):
        with pytest.raises(ValueError, match=r"^output folder '.*x\.\.\.: cannot be checked \(File name too long\)$") as err:
            fileio.check_output_dir(out, ValueError)
        assert len(str(err.value)) < 300


def test_a_long_output_path_is_named_cut_in_every_line_of_the_output_checks(tmp_path: Path, monkeypatch) -> None:
    """Review: check_output_dir, check_output_file and _creatable wrote the output path whole in their other
    lines: a 3,000-character --out (parts of 200 characters, which the file system takes) made lines of
    3,000 to 6,000 characters. Each path is now cut by brief(), as the 'cannot be checked' line was."""
    from fol.errors import ConfigError
    from fol.simulation.check import check_run_folder

    deep = tmp_path.joinpath(*(["b" * 200] * 15))
    deep.mkdir(parents=True)
    (deep / "file.txt").write_text("x")
    (deep / "gone").symlink_to("/nowhere")
    (deep / "ro").mkdir()
    os.mkfifo(deep / "pipe")
    (tmp_path / "file").write_text("x")
    on_a_file = tmp_path / "file" / ("c" * 200) / ("c" * 200) / ("c" * 200) / "out"
    real_probe = fileio._probe

    def probe(folder: Path) -> None:  # as root, a folder without write permission is writable: the refusal made
        if folder.name == "ro":
            raise PermissionError(13, "Permission denied")
        real_probe(folder)

    monkeypatch.setattr(fileio, "_probe", probe)
    for call, says in ((lambda: fileio.check_output_dir(deep / "file.txt", ValueError), ": exists and is not a folder"),
                       (lambda: fileio.check_output_dir(deep, ValueError, empty=True), ": is not empty"),
                       (lambda: fileio.check_output_dir(deep / "ro", ValueError), ": not writable (Permission denied)"),
                       (lambda: fileio.check_output_dir(on_a_file, ValueError), "/file is not a folder)"),
                       (lambda: fileio.check_output_dir(deep / "gone" / "out", ValueError),
                        "which does not exist; remove the link or give another path"),
                       (lambda: fileio.check_output_dir(deep / "ro" / "new", ValueError),
                        "(Permission denied)"),
                       (lambda: fileio.check_output_file(deep, ValueError), ": is a folder; expected a file name"),
                       (lambda: fileio.check_output_file(deep / "pipe", ValueError),
                        ": exists and is not a regular file"),
                       (lambda: check_run_folder(deep), "is not empty and holds no run to continue; give another --out")):
        with pytest.raises((ValueError, ConfigError)) as err:
            call()
        message = str(err.value)
        assert says in message and "\n" not in message and len(message) < 700, (len(message), message[:300])
        assert message.count("b" * 200) == 0, message[:300]  # no part of the path whole


def test_a_failed_write_names_the_target_file(tmp_path: Path) -> None:
    """A write that fails on a full disk raises an OSError without a file name; the writer
    names the file it was writing (the command's one-line error then says which), and keeps
    the previous content."""
    import errno

    target = tmp_path / "results.json"
    target.write_text("previous")
    with pytest.raises(OSError) as info:
        with atomic_writer(target) as fh:
            fh.write(b"new")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(target)
    assert target.read_text() == "previous" and sorted(tmp_path.iterdir()) == [target]


def test_folders_write_json_atomic_creates_are_made_durable_in_their_parents(tmp_path, monkeypatch) -> None:
    """A JSON file written into folders that did not exist: each new folder's entry is fsynced in its
    parent (make_dirs), or after a power loss the file could be gone with its folder."""
    synced = []
    real = fileio.fsync_dir
    monkeypatch.setattr(fileio, "fsync_dir", lambda folder: (synced.append(folder), real(folder)))
    fileio.write_json_atomic(tmp_path / "a" / "b" / "x.json", {"k": 1})
    assert {tmp_path, tmp_path / "a", tmp_path / "a" / "b"} <= set(synced)


def test_staged_outputs_replaces_removes_only_stale_matches_and_only_on_success(tmp_path: Path) -> None:
    """``replaces``: files of an earlier set matching a pattern go with the swap, the new
    set's files and other files stay; an error in the body changes nothing."""
    (tmp_path / "member-old.bin").write_bytes(b"old")
    (tmp_path / "ensemble.json").write_text("old")
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(OSError):
        with fileio.staged_outputs(tmp_path, replaces=["ensemble.json", "member-*.bin"]) as stage:
            (stage / "member-new.bin").write_bytes(b"new")
            raise OSError(28, "No space left on device")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ensemble.json", "member-old.bin", "notes.txt"]
    with fileio.staged_outputs(tmp_path, replaces=["ensemble.json", "member-*.bin"]) as stage:
        (stage / "member-new.bin").write_bytes(b"new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["member-new.bin", "notes.txt"]


def test_staged_outputs_replaces_removes_regular_files_only_and_says_which(tmp_path: Path) -> None:
    """A set is regular files: a link matching ``replaces`` (to the user's file, or leading nowhere) and a
    folder are left alone; ``removed`` lists the files the swap did remove. Before, the link to the user's
    file was removed with the stale outputs."""
    mine = tmp_path / "mine.bin"
    mine.write_bytes(b"mine")
    out = tmp_path / "out"
    out.mkdir()
    (out / "part-1.bin").write_bytes(b"old")
    os.symlink(mine, out / "part-2.bin")
    os.symlink(tmp_path / "gone", out / "part-3.bin")
    (out / "part-4.bin").mkdir()
    removed: list[Path] = []
    with fileio.staged_outputs(out, replaces=["part-*.bin"], removed=removed) as stage:
        (stage / "part-0.bin").write_bytes(b"new")
    assert removed == [out / "part-1.bin"]
    assert sorted(p.name for p in out.iterdir()) == ["part-0.bin", "part-2.bin", "part-3.bin", "part-4.bin"]
    assert os.readlink(out / "part-2.bin") == str(mine) and mine.read_bytes() == b"mine"


def test_staged_outputs_removes_only_the_stale_files_removable_allows_asked_at_the_swap(tmp_path: Path) -> None:
    """``removable`` is asked of each stale match when the set is swapped in, after the body wrote it: a file
    changed while the new set was being written (part-2.bin) is left alone and not said removed, one the
    predicate allows (part-1.bin) is removed; the new set's own files replace their namesakes either way."""
    (tmp_path / "part-1.bin").write_bytes(b"ours")
    (tmp_path / "part-2.bin").write_bytes(b"ours")
    (tmp_path / "part-3.bin").write_bytes(b"the user's")
    asked: list[str] = []

    def unchanged(path: Path) -> bool:
        asked.append(path.name)
        return path.read_bytes() == b"ours"

    removed: list[Path] = []
    with fileio.staged_outputs(tmp_path, replaces=["part-*.bin"], removed=removed, removable=unchanged) as stage:
        (stage / "part-3.bin").write_bytes(b"new")
        (tmp_path / "part-2.bin").write_bytes(b"edited meanwhile")
        assert asked == []
    assert sorted(asked) == ["part-1.bin", "part-2.bin"]
    assert removed == [tmp_path / "part-1.bin"]
    assert _listing(tmp_path) == {"part-2.bin": b"edited meanwhile", "part-3.bin": b"new"}


@pytest.mark.skipif(not hasattr(signal, "pthread_sigmask"), reason="needs signal.pthread_sigmask")
def test_ctrl_c_while_the_earlier_files_are_hashed_stops_before_the_swap(tmp_path: Path) -> None:
    """Ctrl-C was held off from before ``removable`` was asked (a digest of every earlier output, seconds for
    large ones) to the end of the swap, so a Ctrl-C while it hashed waited, and the new set was swapped in
    anyway. It is now held off for the renames alone: a Ctrl-C while the earlier files are hashed stops
    the command with the previous set in place. Python's own SIGINT handler is put in place for the test, as
    a command run from a terminal has it: a suite started as a background job of a non-interactive shell
    (``bash -c 'pytest ... &'``) inherits SIGINT ignored, Python then installs no handler, and the Ctrl-C
    never arrived (three whole-suite runs failed so; ``timeout``, as CI runs the suite, resets it)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _ctrl_c_while_hashing(tmp_path)
    finally:
        signal.signal(signal.SIGINT, previous)


def _ctrl_c_while_hashing(tmp_path: Path) -> None:
    (tmp_path / "part-1.bin").write_bytes(b"old")
    (tmp_path / "part-2.bin").write_bytes(b"old")

    def hashing(path: Path) -> bool:
        os.kill(os.getpid(), signal.SIGINT)  # the user's Ctrl-C, while the digest is computed
        for _ in range(1000):  # the handler runs between bytecodes
            time.sleep(0.001)
        return True

    with pytest.raises(KeyboardInterrupt):
        with fileio.staged_outputs(tmp_path, replaces=["part-*.bin"], removable=hashing) as stage:
            (stage / "part-1.bin").write_bytes(b"new")
    assert _listing(tmp_path) == {"part-1.bin": b"old", "part-2.bin": b"old"}


def test_a_stale_file_removed_between_its_choice_and_the_swap_is_skipped(tmp_path: Path) -> None:
    """A file chosen for removal that is gone by the time of the renames (removed by the user meanwhile)
    does not undo the swap: the new set goes in and the file is not said removed."""
    (tmp_path / "part-1.bin").write_bytes(b"old")
    (tmp_path / "part-2.bin").write_bytes(b"old")

    def gone_after(path: Path) -> bool:
        if path.name == "part-2.bin":
            path.unlink()
        return True

    removed: list[Path] = []
    with fileio.staged_outputs(tmp_path, replaces=["part-*.bin"], removed=removed, removable=gone_after) as stage:
        (stage / "part-3.bin").write_bytes(b"new")
    assert removed == [tmp_path / "part-1.bin"]
    assert _listing(tmp_path) == {"part-3.bin": b"new"}


@pytest.mark.parametrize("becomes", ["folder", "link"])
def test_a_stale_file_replaced_by_a_folder_or_link_before_the_swap_is_left(tmp_path: Path, becomes: str) -> None:
    """A file chosen for removal that the user replaced by a folder (or a link) before the renames is the
    user's, not an earlier output: it is left, with what it holds, and not said removed. The folder was moved
    aside and deleted with its files."""
    (tmp_path / "part-1.bin").write_bytes(b"old")
    (tmp_path / "mine.txt").write_bytes(b"the user's")

    def replaced(path: Path) -> bool:
        path.unlink()
        if becomes == "folder":
            path.mkdir()
            (path / "keep.txt").write_bytes(b"the user's")
        else:
            path.symlink_to(tmp_path / "mine.txt")
        return True

    removed: list[Path] = []
    with fileio.staged_outputs(tmp_path, replaces=["part-*.bin"], removed=removed, removable=replaced) as stage:
        (stage / "part-3.bin").write_bytes(b"new")
    assert removed == []
    old = tmp_path / "part-1.bin"
    assert ((old / "keep.txt").read_bytes() if becomes == "folder" else old.read_bytes()) == b"the user's"
    assert (tmp_path / "part-3.bin").read_bytes() == b"new"


def _listing(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("fail_at", range(1, 10))
def test_staged_outputs_a_rename_failing_mid_swap_leaves_the_previous_set(tmp_path: Path, monkeypatch,
                                                                          fail_at: int) -> None:
    """The swap renamed the new files one by one and removed the stale ones with no way
    back: a rename failing on the second of three left new a.csv beside old b.csv and
    c.csv. Whichever rename or removal fails, the folder now holds the previous set
    (and nothing hidden is left behind); when none fails, the new set."""
    old = {"a.csv": b"old a", "b.csv": b"old b", "c.csv": b"old c", "part-9.bin": b"old part",
           "notes.txt": b"mine"}
    for name, data in old.items():
        (tmp_path / name).write_bytes(data)
    real_replace, real_unlink, calls = os.replace, Path.unlink, [0]

    def counted(fn):
        def wrapper(*args, **kwargs):
            calls[0] += 1
            if calls[0] == fail_at:
                raise OSError(5, "Input/output error")
            return fn(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(os, "replace", counted(real_replace))
    monkeypatch.setattr(os, "rename", counted(os.rename))
    monkeypatch.setattr(Path, "unlink", counted(real_unlink))
    new = {"a.csv": b"new a", "b.csv": b"new b", "c.csv": b"new c"}
    try:
        with fileio.staged_outputs(tmp_path, replaces=["*.csv", "part-*.bin"]) as stage:
            calls[0] = 0  # count the swap's own operations only
            for name, data in new.items():
                (stage / name).write_bytes(data)
    except OSError as exc:
        assert "Input/output error" in str(exc)
        monkeypatch.undo()
        assert _listing(tmp_path) == old
    else:
        monkeypatch.undo()
        assert _listing(tmp_path) == {**new, "notes.txt": b"mine"}


def test_staged_outputs_an_output_name_taken_by_a_folder_leaves_the_previous_set(tmp_path: Path) -> None:
    """No injected fault: a folder named like the second output makes its rename fail
    (a file cannot replace a folder); the first output was already swapped in."""
    (tmp_path / "a.csv").write_bytes(b"old a")
    (tmp_path / "b.csv").mkdir()
    (tmp_path / "b.csv" / "x").write_bytes(b"x")
    with pytest.raises(OSError):
        with fileio.staged_outputs(tmp_path) as stage:
            (stage / "a.csv").write_bytes(b"new a")
            (stage / "b.csv").write_bytes(b"new b")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "b.csv"]
    assert (tmp_path / "a.csv").read_bytes() == b"old a"
    assert (tmp_path / "b.csv" / "x").read_bytes() == b"x"


def test_the_writer_fsyncs_the_file_renames_it_then_fsyncs_its_folder(tmp_path: Path, monkeypatch) -> None:
    """docs/architecture.md, "One crash-safe writer": the bytes go to a temporary file
    ``.<name>.<12 hex digits>.tmp`` in the same folder, are fsynced, replace the target
    with ``os.replace``, and then the folder is fsynced; an error inside leaves the old
    content and no temporary file."""
    target = tmp_path / "state.json"
    target.write_bytes(b"old")
    events: list[tuple[str, str]] = []
    real_fsync, real_replace, real_dir = os.fsync, os.replace, fileio.fsync_dir

    def fsync(fd: int) -> None:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):  # a folder's fsync is fsync_dir's, recorded below
            events.append(("fsync", os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))))
        real_fsync(fd)

    def replace(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
        events.append(("replace", f"{Path(src).parent == tmp_path and fileio.is_temporary(Path(src).name)} "
                                  f"-> {Path(dst).name}"))
        real_replace(src, dst)

    monkeypatch.setattr(fileio.os, "fsync", fsync)
    monkeypatch.setattr(fileio.os, "replace", replace)
    monkeypatch.setattr(fileio, "fsync_dir", lambda folder: (events.append(("fsync_dir", str(folder))),
                                                             real_dir(folder)))
    atomic_write_bytes(target, b"new")
    assert target.read_bytes() == b"new"
    assert [kind for kind, _ in events] == ["fsync", "replace", "fsync_dir"], events
    assert fileio.is_temporary(events[0][1]) and events[0][1].startswith(".state.json.")
    assert events[1:] == [("replace", "True -> state.json"), ("fsync_dir", str(tmp_path))]
    with pytest.raises(RuntimeError), atomic_writer(target) as fh:
        fh.write(b"half")
        raise RuntimeError("killed")
    assert target.read_bytes() == b"new" and [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_a_killed_writers_staged_folder_is_removed_by_the_next_set_written_there(tmp_path: Path) -> None:
    """A kill mid-write left staged_outputs' hidden temporary folder for ever, with what it held (a
    `fol keys gen` secret key, mode 0600); the next call on the folder removes one whose writer is gone,
    and keeps a live writer's and a broken swap's `.old` folder."""
    import subprocess
    import sys

    from swarmbase.fileio import staged_outputs

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True,
                          check=True)
    dead = tmp_path / f".staged-{int(gone.stdout)}-0123456789ab.tmp"
    live = tmp_path / f".staged-{os.getppid()}-0123456789ab.tmp"
    aside = tmp_path / f".staged-{int(gone.stdout)}-0123456789ab.old"
    for folder in (dead, live, aside):
        folder.mkdir()
        (folder / "n.key_secret").write_text("secret")
    with staged_outputs(tmp_path) as stage:
        (stage / "n.key").write_text("public")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["n.key", live.name, aside.name])


@pytest.mark.parametrize("link", ["dangling", "loop"])
@pytest.mark.parametrize("where", ["itself", "ancestor"])
def test_an_output_path_through_a_link_that_leads_nowhere_is_refused_naming_the_link(
        tmp_path: Path, link: str, where: str) -> None:
    """A link that points nowhere (or into a loop) is not there for ``exists()``, so the output
    checks took it for a free name: ``fol personalize --out`` ran the whole round, then could not
    create the folder (File exists), and ``fol pretrain --out`` silently replaced the link with a
    file. Both checks now refuse it, or a folder on the way that is one, in one line naming the
    link and where it points; nothing is created, the link is kept."""
    bad = tmp_path / "out"
    target = tmp_path / "gone" if link == "dangling" else bad
    bad.symlink_to(target)
    path = bad if where == "itself" else bad / "sub" / "model.safetensors"
    which = "is" if where == "itself" else f"{bad} is"
    leads = "does not exist" if link == "dangling" else r"leads back to it \(a loop of links\)"
    line = rf"^--out {re.escape(str(path))}: {re.escape(which)} a link to {re.escape(str(target))}, which {leads}; " \
           r"remove the link or give another path$"
    for check in (fileio.check_output_dir, fileio.check_output_file):
        with pytest.raises(ValueError, match=line):
            check(path, ValueError, what="--out")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and bad.is_symlink()
    with pytest.raises(OSError) as info:  # the agent's state and key folders: make_dirs names the link too
        fileio.make_dirs(path)
    assert info.value.errno == (errno.ENOENT if link == "dangling" else errno.ELOOP)
    assert info.value.strerror == f"{bad} is a link to {target}, which {fileio.DEAD_LINK[info.value.errno]}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and bad.is_symlink()


def test_links_to_an_existing_folder_or_file_are_checked_as_their_target(tmp_path: Path) -> None:
    """A link that leads somewhere is what it leads to, as before: a folder accepts outputs (in
    the folder it points to), a file may be replaced, a folder is no file name."""
    folder, file = tmp_path / "real", tmp_path / "real.bin"
    folder.mkdir()
    file.write_bytes(b"x")
    (tmp_path / "to-folder").symlink_to(folder)
    (tmp_path / "to-file").symlink_to(file)
    assert fileio.check_output_dir(tmp_path / "to-folder", ValueError) == tmp_path / "to-folder"
    assert fileio.check_output_dir(tmp_path / "to-folder" / "new", ValueError) == tmp_path / "to-folder" / "new"
    assert fileio.check_output_file(tmp_path / "to-file", ValueError) == tmp_path / "to-file"
    assert fileio.check_output_file(tmp_path / "to-folder" / "m.bin", ValueError) == tmp_path / "to-folder" / "m.bin"
    with pytest.raises(ValueError, match="exists and is not a folder$"):
        fileio.check_output_dir(tmp_path / "to-file", ValueError)
    with pytest.raises(ValueError, match="is a folder; expected a file name$"):
        fileio.check_output_file(tmp_path / "to-folder", ValueError)
    fileio.make_dirs(tmp_path / "to-folder" / "made")
    assert (folder / "made").is_dir() and list(folder.iterdir()) == [folder / "made"]


def test_file_sha256_refuses_a_fifo_unopened(tmp_path: Path) -> None:
    """file_sha256 (the digests of a run's input files, which --resume compares) opened a FIFO and waited
    for a writer forever; a FIFO or a device is now an OSError (EINVAL, 'not a regular file'), not opened."""
    from _waiting import raised_within

    fifo = tmp_path / "finals.all"
    os.mkfifo(fifo)
    exc = raised_within(lambda: fileio.file_sha256(fifo), fifo=fifo)
    assert isinstance(exc, OSError) and exc.errno == errno.EINVAL and exc.strerror == "not a regular file", exc
    assert exc.filename == str(fifo)
    assert fileio.is_special_file(fifo) and fileio.is_special_file("/dev/zero")
    regular = tmp_path / "a.txt"
    regular.write_bytes(b"abc")
    link = tmp_path / "link"
    link.symlink_to(regular)
    assert not any(fileio.is_special_file(p) for p in (regular, link, tmp_path, tmp_path / "nothing", "x" * 5000))


def test_a_run_json_that_is_a_fifo_is_refused_unopened(tmp_path: Path) -> None:
    """--resume reads the JSON files a run wrote (its record, saved results, the wall time) with
    read_run_json, which opened a FIFO there and waited for a writer forever; it is now a ValueError, as a
    damaged file is, not opened, and --resume says the folder holds no readable run record."""
    from _waiting import raised_within
    from fol.errors import ConfigError
    from fol.simulation.check import read_run_json, read_run_record

    fifo = tmp_path / "scenario.resolved.json"
    os.mkfifo(fifo)
    exc = raised_within(lambda: read_run_json(fifo), fifo=fifo)
    assert isinstance(exc, ValueError) and str(exc) == "not a regular file; expected a JSON file of a run", exc
    exc = raised_within(lambda: read_run_record(tmp_path), fifo=fifo)
    assert isinstance(exc, ConfigError) and "no readable scenario.resolved.json there" in str(exc), exc


def test_a_link_to_a_long_target_that_leads_nowhere_is_named_cut(tmp_path: Path) -> None:
    """Review: every message about a link that leads nowhere names its target (dead_link_text), written
    whole: a link to a target of 4,000 characters made check_output_dir's refusal a line of 4,118. The
    target is now cut by brief() (its end kept: the file name); a short one is written as before."""
    from swarmbase.fileio import check_output_dir, make_dirs

    long_link, short_link = tmp_path / "out", tmp_path / "short"
    long_link.symlink_to("/nowhere/" + "t" * 4000 + "/run-07")
    short_link.symlink_to("/nowhere/run")
    with pytest.raises(ValueError) as err:
        check_output_dir(long_link, ValueError)
    message = str(err.value)
    assert message.startswith(f"output folder {long_link}: is a link to '/nowhere/ttt") and "...ttt" in message
    assert message.endswith("/run-07', which does not exist; remove the link or give another path"), message
    assert len(message) < 400 and "\n" not in message
    with pytest.raises(OSError) as os_err:
        make_dirs(long_link / "sub")
    assert len(str(os_err.value)) < 600 and str(os_err.value).count("t" * 100) == 1
    assert fileio.dead_link_text(short_link, errno.ENOENT) == "a link to /nowhere/run, which does not exist"


def test_a_path_holding_a_nul_is_one_line_of_the_callers_error(tmp_path: Path) -> None:
    """A NUL in a path given to check_input_file raised the os module's ValueError ("embedded null
    byte", a traceback, not the caller's error type); check_output_file and check_output_dir took it as a
    name that can be created (the write failed after the work), check_input_dir said it did not exist.
    Each now refuses it in one line of the error type it is given, naming the path (the NUL escaped)
    and why. The names of the files around it are untouched."""
    from swarmbase.tomlcheck import check_input_file

    class CallersError(Exception):
        pass

    (tmp_path / "a").write_text("kept")
    bad = tmp_path / "a\0b"
    calls = {
        "check_input_file": lambda: check_input_file(bad, CallersError, "model file"),
        "check_input_file name=": lambda: check_input_file(str(bad), CallersError, "model file", name="model n1"),
        "check_output_file": lambda: fileio.check_output_file(bad, CallersError),
        "check_output_dir": lambda: fileio.check_output_dir(bad, CallersError, what="--out"),
        "check_input_dir": lambda: fileio.check_input_dir(bad, CallersError, "--neighbors"),
    }
    for name, call in calls.items():
        with pytest.raises(CallersError) as info:
            call()
        msg = str(info.value)
        assert "holds a NUL character" in msg and "\n" not in msg and "\0" not in msg, (name, msg)
        assert ("model n1: " if name.endswith("name=") else str(bad).replace("\0", "\\x00")) in msg, (name, msg)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a"] and (tmp_path / "a").read_text() == "kept"


class _TwoPartError(Exception):
    def __init__(self, where: str, why: str) -> None:
        super().__init__(where, why)


def test_staged_outputs_errors_name_the_file_in_the_folder_not_the_staging_folder(tmp_path: Path) -> None:
    """A writer's refusal or a full disk inside the set names the file it was given, in the hidden staging
    folder that is removed as staged_outputs ends: the error is raised naming the file in ``folder`` instead
    (its type and, for an OSError, errno and reason kept); an error naming no staged file, or whose type is not
    made of its message, is raised as it is. Failed before (each named '.staged-<pid>-<hex>.tmp/...')."""
    from contact_sim import ContactError

    (tmp_path / "kept.bin").write_bytes(b"previous")

    def raised(make) -> Exception:
        with pytest.raises(Exception) as info:
            with fileio.staged_outputs(tmp_path) as stage:
                (stage / "kept.bin").write_bytes(b"new")
                raise make(stage)
        return info.value

    exc = raised(lambda stage: ContactError(f"{stage / 'contacts.ion'}: no window to write"))
    assert type(exc) is ContactError and str(exc) == f"{tmp_path / 'contacts.ion'}: no window to write"
    exc = raised(lambda stage: OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(stage / "model.bin")))
    assert type(exc) is OSError and (exc.errno, exc.strerror, exc.filename) == (
        errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "model.bin"))
    exc = raised(lambda stage: PermissionError(errno.EACCES, "Permission denied", str(stage / "a"), None,
                                               str(stage / "b")))
    assert type(exc) is PermissionError and (exc.filename, exc.filename2) == (str(tmp_path / "a"),
                                                                              str(tmp_path / "b"))
    assert str(raised(lambda stage: ValueError("no file named"))) == "no file named"
    exc = raised(lambda stage: _TwoPartError(str(stage / "x"), "why"))
    assert type(exc) is _TwoPartError and ".staged-" in exc.args[0]  # not made of one message: as it was
    assert (tmp_path / "kept.bin").read_bytes() == b"previous"
    assert [p.name for p in tmp_path.iterdir()] == ["kept.bin"]  # the staging folder removed


@pytest.mark.parametrize("kind", ["control", "long"])
def test_make_dirs_names_a_dead_link_on_the_way_through_brief(kind: str, tmp_path: Path) -> None:
    """make_dirs' error for a link on the way that leads nowhere gave as its reason '<link> is a link to ...'
    with the link as it is: shown after the file (os_failure_line) or alone (fol keys gen: 'cannot write the
    key pair there (<reason>)'), a folder of 3,000 characters made a 3 kB line and a newline or a terminal's
    escape went into it raw. The reason names the link through brief(), as the link's target is named."""
    from swarmbase.tomlcheck import brief

    folder = odd_folder(tmp_path, kind)
    link = folder / "out"
    link.symlink_to(tmp_path / "gone")
    with pytest.raises(OSError) as info:
        fileio.make_dirs(link / "sub")
    assert info.value.strerror == f"{brief(link)} is a link to {tmp_path / 'gone'}, which does not exist"
    assert info.value.strerror.isprintable() and len(info.value.strerror) < 400, info.value.strerror
    assert info.value.filename == str(link)  # the file itself, for the callers' own naming


def test_a_temporary_file_that_cannot_be_made_is_said_of_the_file_being_written(tmp_path: Path) -> None:
    """The writer's temporary file ('.<name>.<hex>.tmp' beside it) that could not be created, a folder's full
    path too long for it though not for the file, was an OSError naming the temporary file: a caller's line read
    'cannot write .contacts.csv.<hex>.tmp (File name too long)', a file that never exists. It names the file
    being written, as an error of write() does; nothing is left there, and what the file held stays."""
    folder = deep_folder(tmp_path, 4070)
    path = folder / "table.csv"  # 4,080 characters: its temporary file's, 4,098, too long
    path.write_text("the previous table")
    with pytest.raises(OSError) as refused:
        atomic_write_bytes(path, b"new")
    assert refused.value.errno == errno.ENAMETOOLONG and refused.value.filename == str(path), refused.value
    assert [p.name for p in folder.iterdir()] == ["table.csv"] and path.read_text() == "the previous table"
