"""``--data`` spec strings of ``fol pretrain`` / ``fol personalize`` (fol/nodedata.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fol.errors import ConfigError
from fol.nodedata import parse_node_data


def test_a_folder_whose_name_holds_an_equals_sign_is_a_folder(tmp_path: Path) -> None:
    folder = tmp_path / "run=1"  # hive-style names (year=2020/) are common in exported imagery
    (folder / "burnt").mkdir(parents=True)
    spec = parse_node_data(str(folder))
    assert (spec.dataset, spec.path, spec.partition) == ("imagefolder", str(folder), "all")
    with pytest.raises(ConfigError, match="unknown or malformed entry"):
        parse_node_data(str(tmp_path / "missing=1"))  # not a folder: still read as key=value pairs
    assert parse_node_data("dataset=synthetic-wildfire,nodes=2,node=1").node == 1
