"""Contact-plan file helpers shared by the tests of the ION / HDTN importer (contact_sim/dtn.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from contact_sim import ContactError
from contact_sim.dtn import read_ion


def plan_refusal(path: Path, text: str, reader: Callable[[Path], Any] = read_ion, **write: Any) -> str:
    """The refusal of a plan file holding ``text`` (written with ``write``, ``encoding`` / ``newline``)
    by ``reader``: a ContactError of one line (no LF or CR) whose words beside the file's name are under 300
    characters (the name is the test's temporary path, longer under pytest-xdist), its message returned."""
    path.write_text(text, **write)
    with pytest.raises(ContactError) as info:
        reader(path)
    message = str(info.value)
    assert "\n" not in message and "\r" not in message and len(message.replace(str(path), "")) < 300, message
    return message
