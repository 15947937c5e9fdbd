"""The shared bottom layer: one TOML checker (same message style for every
package's error type), one byte formatter."""

from __future__ import annotations

from pathlib import Path

import pytest

from contact_sim.errors import ContactError
from fol.errors import ConfigError
from swarmbase.tomlcheck import Table, read_toml
from swarmbase.units import format_bytes


class _Err(Exception):
    pass


def test_table_checks_types_ranges_and_unknown_keys() -> None:
    t = Table({"n": 3, "x": 1.5, "s": "a", "b": True, "l": ["u"]}, "tbl", {"n", "x", "s", "b", "l", "p"},
              error=_Err, source="f.toml")
    assert (t.int("n", minimum=1), t.num("x", positive=True), t.str("s", choices=("a", "b")), t.bool("b"),
            t.str_list("l"), t.num("missing", 2.0)) == (3, 1.5, "a", True, ["u"], 2.0)
    assert t.path("p", "/base") is None
    for call, needle in [(lambda: t.int("x"), "f.toml: tbl.x: expected an integer, got 1.5"),
                         (lambda: t.int("n", maximum=2), "tbl.n: expected an integer <= 2"),
                         (lambda: t.num("s"), "tbl.s: expected a number"),
                         (lambda: t.num("b"), "tbl.b: expected a number, got True"),
                         (lambda: t.str("s", choices=("z",)), "tbl.s: expected one of z, got 'a'"),
                         (lambda: t.bool("n"), "tbl.n: expected true or false"),
                         (lambda: t.raw("p", required=True), "tbl.p: missing (required)"),
                         (lambda: Table({"zz": 1}, "tbl", {"a"}, error=_Err), "tbl: unknown key 'zz' (allowed: a)"),
                         (lambda: Table([], "tbl", error=_Err), "tbl: expected a table, got list")]:
        with pytest.raises(_Err, match="^.*$") as exc:
            call()
        assert needle in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("error", [ContactError, ConfigError])
def test_read_toml_refuses_bad_files_in_one_line(tmp_path: Path, error: type[Exception]) -> None:
    cases = {"missing.toml": None, "dir.toml": "DIR", "bin.toml": b"\xff\xfe\x00", "bad.toml": b"[a\nb=",
             "deep.toml": b"x = " + b"[" * 50_000 + b"]" * 50_000,  # 100 kB: a RecursionError inside tomllib
             "long.toml": b"x = " + b"9" * 5_000,  # int() refuses over 4,300 digits: a ValueError inside tomllib
             # a hex (octal, binary) integer is parsed at any size, and str() of it then failed in the
             # first message that showed it: a ValueError traceback after the file had been read
             "hex.toml": b"[a]\nx = [1, 0x" + b"f" * 5_000 + b"]", "oct.toml": b"x = {y = 0o" + b"7" * 5_000 + b"}"}
    for name, content in cases.items():
        p = tmp_path / name
        if content == "DIR":
            p.mkdir()
        elif content is not None:
            p.write_bytes(content)
        with pytest.raises(error) as exc:
            read_toml(p, error, "scenario file")
        msg = str(exc.value)
        assert str(p) in msg and "\n" not in msg
    assert "is a directory" in _msg(read_toml, tmp_path / "dir.toml", error)
    assert "nested too deeply" in _msg(read_toml, tmp_path / "deep.toml", error)
    for name in ("long.toml", "hex.toml", "oct.toml"):
        assert "an integer longer than 4,300 digits" in _msg(read_toml, tmp_path / name, error)
    edge = tmp_path / "edge.toml"  # 4,300 digits is still an integer (a field's own range check names it)
    edge.write_text(f"x = {10**4300 - 1}\ny = {hex(10**4300 - 1)}\n")
    assert read_toml(edge, error)[0] == {"x": 10**4300 - 1, "y": 10**4300 - 1}
    good = tmp_path / "good.toml"
    good.write_text("[a]\nb = 1\n")
    assert read_toml(good, error) == ({"a": {"b": 1}}, "[a]\nb = 1\n")


def _msg(fn, *args) -> str:
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 - the message is what is tested
        return str(exc)
    raise AssertionError("no error")


def test_format_bytes() -> None:
    assert [format_bytes(n) for n in (0, 999, 1000, 189_712, 3_200_000_000, 5e12)] == [
        "0 B", "999 B", "1.0 kB", "189.7 kB", "3.2 GB", "5.0 TB"]
