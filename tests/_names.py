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
