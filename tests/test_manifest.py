"""swarmbase.manifest: the one record of the outputs a command wrote into a folder (fol contacts and fol
personalize use it; their end-to-end tests are in test_cli_errors.py and test_personalize_cli.py). Here the
parts the contact tests cannot reach: outputs named by a pattern, and the bounds the writer and reader share."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from swarmbase.fileio import staged_outputs
from swarmbase.manifest import EarlierOutputs, OutputManifest

from _names import deep_folder, odd_folder


class _Err(Exception):
    pass


RULE = OutputManifest("demo.manifest.json", "demo", ("table.csv", "part-*.bin"), _Err, max_files=4)
_SHA = "0" * 64


def _manifest(folder: Path, files: dict[str, object]) -> None:
    (folder / RULE.name).write_text(json.dumps({"format": 1, "files": files}))


@pytest.mark.parametrize("name", ["part-/../../notes.bin", "part-/x.bin", "..", "part-\u0000.bin", "/etc/passwd",
                                  "demo.manifest.json", "part-1.txt"])
def test_a_name_a_pattern_matches_only_through_a_folder_is_refused_in_one_line(name: str, tmp_path: Path) -> None:
    """``fnmatch``'s ``*`` matches a '/', so ``part-*.bin`` alone would take ``part-/../../notes.bin``: a
    manifest naming anything but a plain output name is refused, by the table checker's unknown-key line."""
    _manifest(tmp_path, {name: {"bytes": 1, "sha256": _SHA}})
    with pytest.raises(_Err) as info:
        RULE.read(tmp_path)
    message = str(info.value)
    assert "\n" not in message and message.startswith(
        f"{tmp_path / RULE.name}: files: unknown key {name!r} (allowed: part-*.bin, table.csv); it records which "
        f"files in --out demo wrote: remove it"), message


def test_outputs_of_a_pattern_are_removed_only_as_recorded_and_unchanged(tmp_path: Path) -> None:
    """The previous run's part-1.bin, untouched, goes; its part-2.bin, edited, and the user's part-9.bin stay,
    each said why; a link or a folder of a part's name is neither; what the run writes is neither."""
    for name, data in (("table.csv", b"t"), ("part-1.bin", b"one"), ("part-2.bin", b"two")):
        (tmp_path / name).write_bytes(data)
    RULE.write(tmp_path / RULE.name, [tmp_path / n for n in ("table.csv", "part-1.bin", "part-2.bin")])
    (tmp_path / "part-2.bin").write_bytes(b"TWO")  # same size, other bytes
    (tmp_path / "part-9.bin").write_bytes(b"the user's")
    (tmp_path / "part-link.bin").symlink_to(tmp_path / "part-9.bin")
    (tmp_path / "part-dir.bin").mkdir()
    earlier = RULE.earlier_outputs(tmp_path, ["table.csv", RULE.name], RULE.read(tmp_path))
    assert earlier.removable == ["part-1.bin"]
    assert earlier.kept == [(tmp_path / "part-2.bin", "changed since demo wrote it"),
                            (tmp_path / "part-9.bin", "no demo.manifest.json there says demo wrote it")]
    removed: list[Path] = []
    with staged_outputs(tmp_path, replaces=earlier.replaces, removed=removed, removable=earlier.unchanged) as stage:
        (stage / "table.csv").write_bytes(b"new")
        RULE.write(stage / RULE.name, [stage / "table.csv"])
    assert removed == [tmp_path / "part-1.bin"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.manifest.json", "part-2.bin", "part-9.bin",
                                                         "part-dir.bin", "part-link.bin", "table.csv"]
    assert earlier.lines(removed) == [
        f"removed    {tmp_path / 'part-1.bin'} (an earlier run's; not an output of this one)",
        f"kept       {tmp_path / 'part-2.bin'} (not an output of this run; changed since demo wrote it)",
        f"kept       {tmp_path / 'part-9.bin'} (not an output of this run; no demo.manifest.json there says demo "
        f"wrote it)"]
    assert RULE.read(tmp_path).keys() == {"table.csv"}  # the kept files are nobody's output from now on


def test_a_removable_file_edited_before_the_swap_is_kept_and_said_changed(tmp_path: Path) -> None:
    (tmp_path / "part-1.bin").write_bytes(b"one")
    RULE.write(tmp_path / RULE.name, [tmp_path / "part-1.bin"])
    earlier = RULE.earlier_outputs(tmp_path, [RULE.name], RULE.read(tmp_path))
    assert earlier.removable == ["part-1.bin"] and earlier.kept == []
    removed: list[Path] = []
    with staged_outputs(tmp_path, replaces=earlier.replaces, removed=removed, removable=earlier.unchanged) as stage:
        (tmp_path / "part-1.bin").write_bytes(b"one, edited while the run computed")
        RULE.write(stage / RULE.name, [])
    assert removed == [] and (tmp_path / "part-1.bin").read_bytes() == b"one, edited while the run computed"
    assert earlier.kept == [(tmp_path / "part-1.bin", "changed since demo wrote it")]


def test_a_pattern_output_of_glob_characters_is_removed_as_itself_only(tmp_path: Path) -> None:
    """The names handed to staged_outputs are patterns: a recorded ``part-[1].bin`` is escaped, so the swap
    does not take ``part-1.bin`` (a file it matches as a pattern) with it."""
    (tmp_path / "part-[1].bin").write_bytes(b"recorded")
    (tmp_path / "part-1.bin").write_bytes(b"recorded too")
    RULE.write(tmp_path / RULE.name, [tmp_path / "part-[1].bin", tmp_path / "part-1.bin"])
    earlier = RULE.earlier_outputs(tmp_path, [RULE.name], RULE.read(tmp_path))
    assert earlier.removable == ["part-1.bin", "part-[1].bin"]
    removed: list[Path] = []
    with staged_outputs(tmp_path, replaces=earlier.replaces[1:], removed=removed, removable=earlier.unchanged):
        pass
    assert removed == [tmp_path / "part-[1].bin"] and (tmp_path / "part-1.bin").exists()


def test_the_writer_never_writes_a_manifest_the_reader_refuses(tmp_path: Path) -> None:
    for i in range(5):
        (tmp_path / f"part-{i}.bin").write_bytes(b"x")
    (tmp_path / "notes.txt").write_text("the user's")
    with pytest.raises(_Err, match=r"notes.txt is not an output of demo; not recorded"):
        RULE.write(tmp_path / RULE.name, [tmp_path / "notes.txt"])
    with pytest.raises(_Err, match=r"5 files, more than the 4 a manifest of demo may list"):
        RULE.write(tmp_path / RULE.name, [tmp_path / f"part-{i}.bin" for i in range(5)])
    assert not (tmp_path / RULE.name).exists()
    RULE.write(tmp_path / RULE.name, [tmp_path / f"part-{i}.bin" for i in range(4)])  # max_files: read back
    assert len(RULE.read(tmp_path)) == 4
    with pytest.raises(ValueError, match="outputs given as patterns need max_files"):
        OutputManifest("m.json", "demo", ("part-*.bin",), _Err)


def _one_removed_one_kept(folder: Path, recorded: str, mine: str) -> tuple[EarlierOutputs, list[Path]]:
    """A run into ``folder`` after one whose manifest records ``recorded`` (removed in the swap), beside the
    user's ``mine`` of an output's pattern (kept): the run's earlier outputs and what the swap removed."""
    (folder / recorded).write_bytes(b"recorded")
    (folder / mine).write_bytes(b"the user's")
    RULE.write(folder / RULE.name, [folder / recorded])
    earlier = RULE.earlier_outputs(folder, [RULE.name], RULE.read(folder))
    removed: list[Path] = []
    with staged_outputs(folder, replaces=earlier.replaces, removed=removed, removable=earlier.unchanged) as stage:
        RULE.write(stage / RULE.name, [])
    return earlier, removed


def test_the_lines_write_a_file_name_of_the_folder_escaped_on_one_line(tmp_path: Path) -> None:
    """A file of an output's pattern may be named anything (a newline, a terminal's escape, a right-to-left
    override): the removed and kept lines write its name escaped, each one line that cannot rewrite the
    terminal, as every message naming a file does. Before, the names were printed as they are."""
    recorded, mine = "part-\u202e1.bin", "part-\x1b[2J\nx.bin"
    earlier, removed = _one_removed_one_kept(tmp_path, recorded, mine)
    assert removed == [tmp_path / recorded]
    assert earlier.lines(removed) == [
        f"removed    {tmp_path}/part-\\u202e1.bin (an earlier run's; not an output of this one)",
        f"kept       {tmp_path}/part-\\x1b[2J\\nx.bin (not an output of this run; no demo.manifest.json there says "
        "demo wrote it)"]


def test_a_manifest_that_is_a_link_is_refused_in_one_line_and_left_alone(tmp_path: Path) -> None:
    """The command writes its manifest as a regular file in the folder, as it writes every output: a link of
    the manifest's name is the user's, and what it leads to (another folder's manifest) says nothing of the
    files in this one. It is refused in one line, not read; before, it was read through the link, and the
    files in the folder it listed were removed."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "part-1.bin").write_bytes(b"one")
    RULE.write(elsewhere / RULE.name, [elsewhere / "part-1.bin"])
    out = tmp_path / "out"
    out.mkdir()
    (out / "part-1.bin").write_bytes(b"one")  # the same bytes: the user's copy
    (out / RULE.name).symlink_to(elsewhere / RULE.name)
    with pytest.raises(_Err) as info:
        RULE.read(out)
    message = str(info.value)
    assert "\n" not in message and message == (
        f"{out / RULE.name}: is a link to {elsewhere / RULE.name}, not the regular file demo writes; it records "
        f"which files in --out demo wrote: remove it (the files it lists are then kept) or give another --out")
    assert (out / RULE.name).is_symlink() and (out / "part-1.bin").read_bytes() == b"one"


def test_the_lines_name_a_long_folder_cut_keeping_the_file_name(tmp_path: Path) -> None:
    """An output folder (--out) of about 3,000 characters: each removed or kept line is one line of at most
    brief()'s 200 characters for the path, the file's own name kept at the cut's end, so two files stay told
    apart. Before, the lines were escaped but not bounded: the whole folder, 3 kB, in each."""
    from swarmbase.tomlcheck import BRIEF_CHARS, brief

    folder = odd_folder(tmp_path, "long")
    recorded, mine = "part-1.bin", "part-\x1b[2J\nx.bin"
    earlier, removed = _one_removed_one_kept(folder, recorded, mine)
    lines = earlier.lines(removed)
    assert lines == [
        f"removed    {brief(folder / recorded, keep_end=40)} (an earlier run's; not an output of this one)",
        f"kept       {brief(folder / mine, keep_end=40)} (not an output of this run; no demo.manifest.json there "
        "says demo wrote it)"]
    assert all(line.isprintable() and len(line) < BRIEF_CHARS + 100 for line in lines), lines
    assert lines[0].split(" (")[0].endswith("/part-1.bin'") and "/part-\\x1b[2J\\nx.bin' (" in lines[1], lines


@pytest.mark.parametrize("kind", ["control", "long"])
def test_a_refused_manifest_is_named_through_brief(kind: str, tmp_path: Path) -> None:
    """The manifest reader named the manifest file as it is in every refusal (not JSON, a top level or an entry
    that is not an object, an unknown file, a bad sha256, a link): a newline or a terminal's escape in --out's
    name went into the message as it is, an --out of 3,000 characters made a 3 kB line. It is named through
    brief(), as the bounded reader's own refusals (read_text_file) name it."""
    from swarmbase.tomlcheck import brief

    folder = odd_folder(tmp_path, kind)
    manifest = folder / RULE.name
    for text, says in (("{", "not a manifest of demo ("), ("[]", "top level: expected a JSON object"),
                       ('{"format": 1, "files": {"x.txt": {}}}', "files: unknown key 'x.txt'"),
                       ('{"format": 1, "files": {"table.csv": []}}', "files.table.csv: expected a JSON object"),
                       ('{"format": 1, "files": {"table.csv": {"bytes": 1, "sha256": "x"}}}', "files.table.csv.sha256")):
        manifest.write_text(text)
        with pytest.raises(_Err) as info:
            RULE.read(folder)
        message = str(info.value)
        assert message.startswith(f"{brief(manifest)}: {says}") and message.isprintable(), message
        assert len(message) < 700, message
    manifest.unlink()
    manifest.symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(_Err) as info:
        RULE.read(folder)
    assert str(info.value).startswith(f"{brief(manifest)}: is a link to "), info.value


@pytest.mark.parametrize("kind", ["folder", "unwritable", "too long"])
def test_a_manifest_the_system_cannot_write_is_one_line_saying_what_was_expected(
        kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The writer let the system's error out as it was: a folder of the manifest's name, a folder that cannot be
    written or a path too long was an OSError (a traceback from a caller that does not catch it; the command
    named the temporary file '.<name>.<hex>.tmp' when it did). Each is the command's error, one line naming the
    manifest and what was expected; what the path held is left as it was, and no temporary file."""
    import errno
    import os

    from swarmbase.tomlcheck import brief

    # too long: the manifest's path the file system takes (4,095 characters at most), not its temporary file's
    folder = deep_folder(tmp_path, 4070) if kind == "too long" else tmp_path / "out"
    folder.mkdir(exist_ok=True)
    (folder / "table.csv").write_text("a,b\n")
    path = folder / RULE.name
    if kind == "folder":
        path.mkdir()
        (path / "inside.txt").write_text("the user's")
    else:  # the previous run's manifest (written as is: too long a path for the writer's temporary file)
        _manifest(folder, {"table.csv": {"bytes": 4, "sha256": _SHA}})
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    if kind == "unwritable":
        folder.chmod(0o500)
        if os.geteuid() == 0:  # root writes anyway: what os.open says to any other user
            real_open = os.open

            def refuse(name, *args, **kwargs):
                if Path(name).parent == folder:
                    raise PermissionError(errno.EACCES, "Permission denied", str(name))
                return real_open(name, *args, **kwargs)

            monkeypatch.setattr(os, "open", refuse)
    try:
        with pytest.raises(_Err) as refused:
            RULE.write(path, [folder / "table.csv"])
    finally:
        monkeypatch.undo()
        folder.chmod(0o700)
    message = str(refused.value)
    expected = {"folder": "(Is a directory); expected a file there, not a folder: remove or rename the folder",
                "unwritable": "(Permission denied); expected a folder this user can write files in",
                "too long": "(File name too long); expected a shorter path: the file system refuses the manifest's, "
                            "or its temporary file's beside it, as too long; give a shorter output folder"}[kind]
    assert message == f"{brief(path, keep_end=40)}: cannot write the manifest of demo {expected}", message
    assert message.isprintable() and len(message) < 500, message
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before  # no temporary file either
    if kind == "folder":
        assert (path / "inside.txt").read_text() == "the user's"
