"""Folders whose names a message must not print as they are, for the tests that every line names a file
through :func:`swarmbase.tomlcheck.brief`."""

from __future__ import annotations

from pathlib import Path


def odd_folder(tmp_path: Path, kind: str) -> Path:
    """A folder (made) whose path holds a newline and a terminal's escape ("control"), or is about 3,000
    characters long ("long", 15 folders of 200: no one name may pass 255 bytes)."""
    folder = tmp_path / "a\nb\x1b[2J" if kind == "control" else tmp_path.joinpath(*["d" * 200] * 15)
    folder.mkdir(parents=True)
    return folder


def deep_folder(tmp_path: Path, length: int) -> Path:
    """A folder (made) whose absolute path is ``length`` characters, in parts of at most 200 (no one name may
    pass 255 bytes): a path near the file system's limit (4,095 characters), for the tests of a path too long."""
    parts, size = [], len(str(tmp_path))
    while size + 201 < length:
        parts.append("d" * 200)
        size += 201
    parts.append("d" * (length - size - 1))
    folder = tmp_path.joinpath(*parts)
    folder.mkdir(parents=True)
    assert len(str(folder)) == length
    return folder
