"""The shared bottom layer: one TOML checker (same message style for every
package's error type), one byte formatter."""

from __future__ import annotations

import io

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contact_sim.errors import ContactError
from fol.errors import ConfigError
from swarmbase.tomlcheck import Table, brief, read_toml
from swarmbase.units import format_bytes

from _processes import REPO, repo_env


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
                         (lambda: t.num("b"), "tbl.b: expected a number, got true"),
                         (lambda: t.str("s", choices=("z",)), "tbl.s: expected one of z, got 'a'"),
                         (lambda: t.bool("n"), "tbl.n: expected true or false"),
                         (lambda: t.raw("p", required=True), "tbl.p: missing (required)"),
                         # a NUL stopped the caller with a traceback (ValueError: embedded null byte) once opened
                         (lambda: Table({"p": "a\x00b"}, "tbl", {"p"}, error=_Err).path("p", "/base"),
                          "tbl.p: expected a path without a NUL character, got 'a\\x00b'"),
                         (lambda: Table({"zz": 1}, "tbl", {"a"}, error=_Err), "tbl: unknown key 'zz' (allowed: a)"),
                         (lambda: Table([], "tbl", error=_Err), "tbl: expected a table, got list")]:
        with pytest.raises(_Err, match="^.*$") as exc:
            call()
        assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_an_unknown_key_of_a_table_of_many_keys_is_refused_in_a_short_line() -> None:
    """Every allowed key was listed: an unknown key in a scenario's [fol] table (38 keys) was refused in a line
    of 590 characters. The first keys, their count and the closest to the unknown one are given instead."""
    from fol.config import FOLConfig

    with pytest.raises(ConfigError) as exc:
        FOLConfig.from_dict({"gate_epoch": 1}, "run.toml: fol")
    text = str(exc.value)
    assert text.startswith("run.toml: fol: unknown key 'gate_epoch' (allowed: align_fallback, batch_size, ")
    assert re.search(r", \.\.\. \(\d+ keys; the closest: gate_epochs\)\)$", text), text
    assert len(text) < 300
    with pytest.raises(ConfigError, match=r"\(allowed: .*, \.\.\. \(\d+ keys\)\)$"):  # nothing close to it
        FOLConfig.from_dict({"zz": 1}, "run.toml: fol")


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
    # binary units, as the memory budgets count: a size under a GiB in MiB, not "0.00 GiB"
    assert [format_bytes(n, binary=True) for n in (1023, 1024, 5 * 2**20 // 2, 2**30 - 2**20, 8 * 2**30, 2**42)] == [
        "1023 B", "1.0 KiB", "2.5 MiB", "1023.0 MiB", "8.0 GiB", "4.0 TiB"]


def test_a_huge_value_is_shown_shortened_in_every_message() -> None:
    """A 400-digit TOML integer (or a 100,000-character string) was printed in full in the one-line
    error, burying the field name in a screen of digits; the value shown is now bounded."""
    from fol.config import FOLConfig
    from fol.methods import get_method
    from fol.simulation import parse_scenario

    big, long = 10**400, "x" * 100_000

    def demo(**tables: dict) -> dict:
        import tomllib
        from importlib import resources

        return {**tomllib.loads(resources.files("fol.simulation").joinpath("demo.toml").read_text()), **tables}

    calls = [(lambda: Table({"n": big}, "tbl", error=_Err).num("n"), "tbl.n: expected a number"),
             (lambda: Table({"n": big}, "tbl", error=_Err).int("n", maximum=5), "tbl.n: expected an integer <= 5"),
             (lambda: Table({"s": long}, "tbl", error=_Err).str("s", choices=("a",)), "tbl.s: expected one of a"),
             (lambda: Table({"s": [long]}, "tbl", error=_Err).bool("s"), "tbl.s: expected true or false"),
             (lambda: Table({long: 1}, "tbl", {"a"}, error=_Err), "tbl: unknown key 'xxx"),
             (lambda: FOLConfig(momentum=big), "fol.momentum must be a finite number"),
             (lambda: FOLConfig(top_k=-big), "fol.top_k must be > 0"),
             (lambda: FOLConfig(distill_inputs=long), "fol.distill_inputs must be one of"),
             (lambda: get_method("fedavg", fraction=big), "methods.fedavg.fraction must be a number in (0, 1]"),
             (lambda: get_method("hermes", rounds=-big), "methods.hermes.rounds must be an integer >= 1"),
             (lambda: get_method("hermes", intersection=long), "methods.hermes.intersection must be one of"),
             (lambda: get_method("dense", perturb=long), "methods.dense.perturb must be"),
             (lambda: parse_scenario(demo(scenario={"name": "x", "seeds": [big]}), Path("."), "s.toml"),
              "s.toml: scenario.seeds: expected a non-empty list of integers"),
             (lambda: parse_scenario(demo(methods={"run": [long]}), Path("."), "s.toml"), "s.toml: methods.run:"),
             (lambda: parse_scenario(demo(methods={"fedavg": [big]}), Path("."), "s.toml"),
              "s.toml: methods.fedavg: expected a table of options")]
    for call, words in calls:
        with pytest.raises(Exception) as exc:  # noqa: PT011 - the message is what is tested
            call()
        msg = str(exc.value)
        assert len(msg) < 300 and words in msg and ("(401 digits)" in msg or "..." in msg), msg[:400]
    from swarmbase.tomlcheck import shown

    assert shown(10**400) == "10000000000000000000... (401 digits)" and shown(-(10**400)).endswith("(401 digits)")
    assert shown(int("f" * 5000, 16)) == "an integer of more than 4,300 digits"
    assert shown("abc") == "'abc'" and shown(True) == "true" and len(shown(list(range(10**4)))) <= 60


def test_a_long_string_is_shown_without_rendering_all_of_it() -> None:
    """shown() rendered a string whole and split the rendering into words before cutting it to 60
    characters: a 57 MB OEM data line of 30 million numbers took 2.4 s and 340 MB to quote."""
    import tracemalloc

    from swarmbase.tomlcheck import shown

    line = "1 " * 5_000_000  # 10 MB
    tracemalloc.start()
    try:
        text = shown(line)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert text == shown("1 " * 100) and len(text) <= 60
    assert peak < 1_000_000, peak
    # rendered as the whole was: blanks collapsed (also past the first 1,000 characters), the quotes
    # repr() picks for the whole string, the cut at 60 characters
    assert shown(" " * 5000 + "x") == "' x'" and shown("1" + " " * 200_000 + "x") == "'1 x'"
    assert shown("a" * 5000 + "'") == '"' + "a" * 56 + "..." and shown(["y" * 5000]) == shown(["y" * 100])


def test_a_toml_date_or_time_is_shown_as_toml_writes_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A TOML date refused in a scenario field was shown as Python writes it, 'got datetime.date(2025, 3, 1)';
    shown() writes a date, a date-time and a time as TOML does (a UTC offset as Z), also in a list or table."""
    import tomllib

    from contact_sim.cli import main as contacts_main
    from swarmbase.tomlcheck import shown

    doc = tomllib.loads("d = 2025-03-01\nz = 2025-03-01T12:00:00+00:00\no = 2025-03-01 12:00:00.25-07:30\n"
                        "l = 2025-03-01T12:00:00\nt = 07:32:00\nlist = [2025-03-01]\n")
    assert [shown(v) for v in doc.values()] == ["2025-03-01", "2025-03-01T12:00:00Z", "2025-03-01T12:00:00.250000-07:30",
                                                "2025-03-01T12:00:00", "07:32:00", "[2025-03-01]"]
    assert shown({"start": doc["d"]}) == "{'start': 2025-03-01}"
    scenario = tmp_path / "scn.toml"
    scenario.write_text('[constellation]\nkind = "walker-delta"\ntotal = 4\nplanes = 2\nphasing = 1\n'
                        'altitude_km = 550.0\ninclination_deg = 53.0\nepoch = 2025-03-01\n[time]\n'
                        'start = "2025-03-01T00:00:00Z"\nduration_s = 600.0\n[link]\nmax_range_km = 5000.0\n')
    assert contacts_main(["contacts", str(scenario), "--check"]) == 2
    err = capsys.readouterr().err
    # what the bare date lacks said too: the line read as if it gave what was expected
    assert err.count("\n") == 1 and err.endswith("constellation.epoch: expected an ISO-8601 UTC time string, "
                                                  "got 2025-03-01 (a TOML date, no time of day: write "
                                                  "2025-03-01T00:00:00Z, or quote the date)\n"), err
    scenario.write_text(scenario.read_text().replace("epoch = 2025-03-01", "epoch = 07:32:00"))
    assert contacts_main(["contacts", str(scenario), "--check"]) == 2
    assert capsys.readouterr().err.endswith("constellation.epoch: expected an ISO-8601 UTC time string, got 07:32:00 "
                                            "(a TOML time of day, no date)\n")


def test_safejson_refuses_a_number_that_overflows_to_infinity_unless_nan_is_allowed() -> None:
    """``1e999`` parsed to inf though the reader refuses Infinity: a peer's header or a user's
    file could carry an infinite number past every check that reads "standard JSON only"."""
    import math

    from swarmbase.safejson import loads

    for text in ('{"x": 1e999}', "[-1e999]"):
        with pytest.raises(ValueError, match="beyond the largest float"):
            loads(text, max_depth=2)
        assert math.isinf(loads(text, max_depth=2, allow_nan=True)[0 if text[0] == "[" else "x"])
    assert loads('{"x": 1.5e308, "y": -0.0}', max_depth=2) == {"x": 1.5e308, "y": -0.0}


def test_safejson_parses_with_decoders_made_once_as_json_loads_did(monkeypatch: pytest.MonkeyPatch) -> None:
    """loads called json.loads with its options, which builds a JSONDecoder (and its scanner) at every call:
    about a tenth of a positions.jsonl line's parse (a 16 MiB log read in 0.70 s of CPU, 0.60 s with the
    decoders made once). Failed before (a decoder built per call). What it parses and refuses is the same."""
    import json

    from swarmbase.safejson import loads

    def no_decoder(*args, **kwargs):
        raise AssertionError("a JSONDecoder built for one call")

    monkeypatch.setattr(json, "JSONDecoder", no_decoder)
    assert loads('{"a": [1, 2.5, null]}', max_depth=2) == {"a": [1, 2.5, None]}
    assert loads("[NaN, -Infinity]", max_depth=1, allow_nan=1)[1] == float("-inf")
    for text, says in [("[NaN]", "non-standard JSON constant NaN"), ('{"a": 1, "a": 2}', "duplicate key 'a'"),
                       ("[1e999]", "beyond the largest float"), ("\ufeff[1]", "Unexpected UTF-8 BOM"),
                       ("[1,]", "Expecting value: line 1 column 4"), ("[1] x", "Extra data: line 1 column 5")]:
        with pytest.raises(ValueError, match=re.escape(says)):
            loads(text, max_depth=1)
    with pytest.raises(ValueError, match="Unexpected UTF-8 BOM"):
        loads("\ufeff[NaN]", max_depth=1, allow_nan=True)


def test_numba_loops_import_and_run_where_numba_can_write_no_cache(tmp_path: Path) -> None:
    """A read-only install: the PackBits loop (fol/data/packbits.py) and the window search's kernels
    (contact_sim/_kernels.py), copied where numba finds no folder to cache in (their __pycache__ a file,
    the user's cache folder under a file, no NUMBA_CACHE_DIR: what a read-only file system is even to
    root). Before, importing either raised RuntimeError ('cannot cache function ...: no locator
    available'), a traceback; now they compile uncached, decode, and one warning per module says so."""
    import os
    import shutil
    import subprocess
    import sys

    ro = tmp_path / "ro"
    ro.mkdir()
    shutil.copy(REPO / "fol" / "data" / "packbits.py", ro / "ro_packbits.py")
    shutil.copy(REPO / "contact_sim" / "_kernels.py", ro / "ro_kernels.py")
    (ro / "__pycache__").write_text("a file: no folder can be made here")
    blocker = tmp_path / "home"
    blocker.write_text("a file: no folder can be made under it")
    env = repo_env(ro, drop=tuple(k for k in os.environ if k.startswith("NUMBA_")), HOME=str(blocker),
                   XDG_CACHE_HOME=str(blocker / "cache"), PYTHONDONTWRITEBYTECODE="1")
    code = ("import numpy as np, ro_kernels, ro_packbits\n"
            "out = np.empty(8, np.uint8)\n"
            "print(ro_packbits.unpack_bits(np.frombuffer(b'\\x01ab\\xfdz\\x80', np.uint8), out), out[:6].tobytes())\n")
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "(6, False) b'abzzzz'"
    warnings = [line for line in done.stderr.splitlines() if "numba finds no folder" in line]
    assert [line.split(" for ")[1].split(" ")[0] for line in warnings] == ["ro_kernels", "ro_packbits"], done.stderr
    assert "NUMBA_CACHE_DIR" in warnings[0]


def _json_values(strings: st.SearchStrategy[str]) -> st.SearchStrategy[object]:
    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | strings
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=6)
                        | st.dictionaries(strings, inner, max_size=6), max_leaves=30)


def _separators(value: object) -> tuple[int, int]:
    """The slow reference: ``(commas between values, values)`` of parsed JSON, from its containers."""
    commas, values, stack = 0, 0, [value]
    while stack:
        item = stack.pop()
        values += 1
        children = list(item.values()) if isinstance(item, dict) else item if isinstance(item, list) else []
        commas += max(len(children) - 1, 0)
        stack.extend(children)
    return commas, values


#: a JSON string as the copy-based count (before 40b9cec) removed it, ``_STRING.sub("", text)``
_COPY_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)

# strings rich in what the count must skip: quotes and backslashes (escaped), commas, \uXXXX escapes
# (ensure_ascii), text outside the BMP and lone surrogates (escaped or written as they are)
_TRICKY = st.text(alphabet=st.sampled_from(['"', "\\", ",", "a", " ", "\n", "é", "\u2028", "\U0001f600", "\udcff",
                                            "u", "0"]), max_size=8)


@settings(max_examples=300, deadline=None)
@given(value=_json_values(_TRICKY), ascii_only=st.booleans(), indent=st.sampled_from([None, 0, 2]),
       compact=st.booleans())
def test_safejson_counts_the_commas_between_values_as_parsing_then_counting_does(value: object, ascii_only: bool,
                                                                                  indent: int | None,
                                                                                  compact: bool) -> None:
    """Review of 40b9cec (commas outside strings counted in place, stopping at the limit): on JSON texts
    whose strings hold quotes, backslashes, commas and escapes, the count equals the slow reference (the
    text parsed, then the separators of its containers counted) and the copy-based count it replaced
    (``_COPY_STRING.sub``), stops no earlier than asked, and loads refuses a text exactly when it holds more
    values than max_items, as check_bounds alone would."""
    import json

    from swarmbase.safejson import _commas_outside_strings, loads

    text = json.dumps(value, ensure_ascii=ascii_only, indent=indent,
                      separators=(",", ":") if compact and indent is None else None)
    commas, values = _separators(json.loads(text))
    assert _commas_outside_strings(text, stop=len(text) + 1) == commas == _COPY_STRING.sub("", text).count(",")
    for stop in range(commas + 2):
        got = _commas_outside_strings(text, stop=stop)
        assert (got >= stop) if stop <= commas else (got == commas), (stop, got, commas)
    for limit in {1, commas, commas + 1, values - 1, values, values + 1} - {0}:
        if values > limit:
            with pytest.raises(ValueError, match=f"^holds more than {limit} values$"):
                loads(text, max_depth=100, max_items=limit)
        else:
            assert loads(text, max_depth=100, max_items=limit) == value


@pytest.mark.parametrize("text", ['"a\\"b,c"', '["a\\\\", ",", "\\\\\\",\\\\"]', '"\\u0022,\\u005c",1', '["x\\',
                                  '["x\\"', '[1, "open, string', '[",\\', '",",",",",'])
def test_safejson_counts_commas_of_truncated_or_tricky_text_as_the_copy_did(text: str) -> None:
    """Text that is not JSON (a string left open, a backslash at the end) or whose strings hold escaped
    quotes and \\u escapes of a quote or a backslash: the in-place count equals the copy-based one."""
    from swarmbase.safejson import _commas_outside_strings

    assert _commas_outside_strings(text, stop=len(text) + 1) == _COPY_STRING.sub("", text).count(",")


def test_a_file_that_grows_past_its_limit_after_the_size_check_is_refused_not_read_whole(tmp_path: Path,
                                                                                       monkeypatch) -> None:
    """read_text_file checks the size, then reads: a file appended to in between (a log still written, a
    file swapped under the path) is read no further than the limit and refused in one line."""
    import swarmbase.tomlcheck as tomlcheck

    path = tmp_path / "s.toml"
    path.write_text("a = 1\n")
    checked = tomlcheck.check_input_file

    def grows_after_the_check(*args, **kwargs):
        result = checked(*args, **kwargs)
        with path.open("a") as stream:
            stream.write("#" * 100)
        return result

    monkeypatch.setattr(tomlcheck, "check_input_file", grows_after_the_check)
    with pytest.raises(ConfigError, match=r"s\.toml: grew past 64 bytes while it was read; a scenario may have "
                                          r"at most 64$") as caught:
        tomlcheck.read_text_file(path, ConfigError, "scenario", 64)
    assert "\n" not in str(caught.value)
    monkeypatch.undo()
    assert tomlcheck.read_text_file(path, ConfigError, "scenario", 200) == "a = 1\n" + "#" * 100


def test_a_small_file_is_read_without_a_buffer_of_the_whole_limit(tmp_path: Path) -> None:
    """read_text_file read with stream.read(max_bytes + 1), which sets aside the whole limit first: a 26-byte
    contact plan read under its 64 MiB limit peaked at 67 MB traced. The bytes read are those of the file."""
    from _memory import traced_peak
    from swarmbase.tomlcheck import read_at_most, read_text_file

    path = tmp_path / "plan.txt"
    path.write_text("a contact +0 +60 1 2 1000\n")
    got: list[str] = []
    peak = traced_peak(lambda: got.append(read_text_file(path, ConfigError, "contact plan", 64 << 20)))
    assert got == ["a contact +0 +60 1 2 1000\n"] and peak < 1 << 20, peak

    class Growing(io.RawIOBase):  # a file that holds more than its size said when it was opened
        def __init__(self) -> None:
            self.left = 5 << 20

        def fileno(self) -> int:
            raise io.UnsupportedOperation("no file number")

        def readable(self) -> bool:
            return True

        def readinto(self, buffer) -> int:
            n = min(len(buffer), self.left)
            buffer[:n] = b"x" * n
            self.left -= n
            return n

    assert len(read_at_most(Growing(), 3 << 20)) == (3 << 20) + 1  # one past the limit: refused by the caller
    assert len(read_at_most(Growing(), 8 << 20)) == 5 << 20


@pytest.mark.parametrize("name", ["a\n2026-01-01 INFO forged.toml", "clear\x1b[2J.toml", "line\u2028sep.toml",
                                  "txt.\u202elmot", "bytes-\udcff.toml", "tab\there.toml", "nbsp\xa0here.toml",
                                  "zero\u200bwidth.toml"])
def test_a_file_name_that_is_not_printable_is_named_escaped_as_every_line_is(tmp_path: Path, name: str) -> None:
    """Review: brief(), which every reader uses to name a file in its refusal, returned a short name as it
    was: a TOML (TLE, OEM, mission ...) file named with a newline, a terminal's escape, U+2028 or a
    right-to-left override made the refusal two lines (one forged), cleared the terminal or showed the
    name reversed; only the image loaders escaped it (their own _file_name). brief() then quoted and
    escaped such text as repr writes it, while a message naming the file as it is (a ``data.csv:3:``
    prefix, a log line) was printed escaped by printable(), unquoted: one run named one file two ways.
    brief() now escapes each such character once as printable() does, unquoted, cut once escaped (quoted
    at a cut); printable text is written as before."""
    from swarmbase.tomlcheck import printable

    path = tmp_path / name
    message = _msg(read_toml, path, _Err)
    assert message == f"{printable(str(path))}: TOML file not found", message
    assert message.isprintable() and "'" not in message
    assert brief(path) == printable(str(path)) == printable(f"{path}:3: x").removesuffix(":3: x")
    assert brief(name * 100).isprintable() and len(brief(name * 100)) == 200
    cut = brief(name * 100, keep_end=30)
    assert len(cut) == 200 and cut.endswith(printable(name * 100)[-30:] + "'") and cut.isprintable(), cut
    for text in ("runs/a", "café 東京.toml", "a  b.toml", "x" * 300):  # as before
        assert brief(text) == (text if len(text) <= 200 else "'" + "x" * 196 + "...")


@pytest.mark.parametrize("name", ["runs/a\nb\udcff", "a\x1b[2J\udcfe.safetensors"])
def test_a_name_with_a_byte_that_is_not_utf8_and_a_control_character_is_escaped_once(name: str) -> None:
    """Review: recorded_path and fol personalize's listing of a neighbours folder named a file by
    brief(utf8_text(name)): utf8_text writes the byte that is not UTF-8 as the text '\\udcff', then brief,
    quoting a name that holds a newline or an escape as repr writes it, doubled its backslash: the line
    showed 'runs/a\\nb\\\\udcff', the repr of a name holding a backslash, not the file's. brief() of the
    name itself escapes each character once (the byte that is not UTF-8 as utf8_text writes it), also
    where it cuts the name."""
    from swarmbase.cli import recorded_path, utf8_text

    with pytest.raises(ValueError) as err:
        recorded_path(name, "--data", ValueError, "the card records it")
    assert str(err.value).startswith(f"--data {brief(name)}: holds bytes that are not UTF-8"), err.value
    assert "\\\\" not in brief(name) and brief(name) == utf8_text(name).replace("\n", "\\n").replace("\x1b", "\\x1b")
    assert brief("runs/set\udcff") == "runs/set\\udcff" and brief("runs/a") == "runs/a"
    cut = brief("x\n" + "y" * 300 + "\udcff", 40, keep_end=10)
    assert cut == "'x\\n" + "y" * 22 + "...yyyy\\udcff'" and len(cut) == 40 and "\\\\" not in cut, cut


def test_numbered_text_lines_are_text_lines_made_one_at_a_time() -> None:
    """The lines the OEM reader takes one at a time, and text_lines lists, are the editor's (LF, CR LF or CR
    alone end one; U+2028, a form feed and the rest do not; a last line without an end counts, an empty text
    has none), numbered from 1, for every text of up to 6 of these characters."""
    import itertools

    from swarmbase.tomlcheck import numbered_text_lines, text_lines

    def editors_lines(text: str) -> list[str]:
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        return lines[:-1] if lines[-1] == "" else lines

    for size in range(7):
        for chars in itertools.product("a\r\n\u2028\x0c", repeat=size):
            text = "".join(chars)
            assert list(numbered_text_lines(text)) == list(enumerate(editors_lines(text), 1)), repr(text)
            assert text_lines(text) == editors_lines(text), repr(text)
    text = "x\r\n" * 3 + "y\r" * 2 + "z"
    assert list(numbered_text_lines(text)) == [(1, "x"), (2, "x"), (3, "x"), (4, "y"), (5, "y"), (6, "z")]


def test_lines_with_ends_are_the_lines_of_a_stringio_without_newline_translation() -> None:
    """The waypoint CSV reader's lines (made one at a time, not copied into a StringIO) are a StringIO's with
    newline="" for every text of up to 6 of these characters, and a csv.reader reads the same rows from them
    (a quoted field across lines, quotes left open) with the same line numbers."""
    import csv
    import itertools

    from swarmbase.tomlcheck import lines_with_ends

    for size in range(7):
        for chars in itertools.product('a\r\n\u2028",', repeat=size):
            text = "".join(chars)
            assert list(lines_with_ends(text)) == list(io.StringIO(text, newline="")), repr(text)

    def rows(lines) -> list:
        reader, out = csv.reader(lines), []
        try:
            for row in reader:
                out.append((reader.line_num, row))
        except csv.Error as exc:
            out.append((reader.line_num, str(exc)))
        return out

    for text in ('a,"b\r\nc",d\re\n', 'a,"b\nc\n', "a,b\r\n\r\nc", 'x"y,"z""\rw"\n'):
        assert rows(lines_with_ends(text)) == rows(io.StringIO(text, newline="")), repr(text)


@pytest.mark.parametrize("name", ["C:\\data\\" + "x" * 300 + ".toml", "it's-" + "x" * 300 + ".toml",
                                  "say-\"hi\"-" + "x" * 300 + ".toml"])
def test_a_long_printable_name_is_cut_with_its_characters_as_they_are(name: str) -> None:
    """brief() cut a long printable name through repr (shown), which wrote each backslash twice and put a
    name holding a quote in double quotes, while the same name holding a tab, and every log line naming
    the file as it is, showed the backslash once: 'C:\\\\data\\\\xx...' beside C:\\data\\xx... in one run.
    A cut name is now its characters as they are, between single quotes, as a cut name with an escape is."""
    from swarmbase.tomlcheck import brief

    for keep_end in (0, 30):
        cut = brief(name, keep_end=keep_end)
        assert len(cut) == 200 and cut.startswith("'" + name[:150]), cut
        if keep_end:
            assert cut.endswith(name[-30:] + "'"), cut
        else:
            assert cut.endswith("..."), cut
    tabbed = brief(name[:150] + "\t" + name[150:])  # the same name with a tab: the same first 150 characters
    assert tabbed.startswith("'" + name[:150]), tabbed


def _first_excess(value: object, max_depth: int, max_items: int) -> str | None:
    """The slow reference: the bounds walk check_bounds made before 2026-12-07, every value counted in
    turn; the message of the first bound passed, or None."""
    stack, count = [(value, 0)], 0
    while stack:
        item, depth = stack.pop()
        count += 1
        if count > max_items:
            return f"holds more than {max_items} values"
        if isinstance(item, (dict, list)):
            if depth >= max_depth:
                return f"nested deeper than {max_depth} levels"
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return None


@settings(max_examples=300, deadline=None)
@given(value=_json_values(st.text(max_size=3)), data=st.data())
def test_safejson_check_bounds_refuses_what_counting_every_value_refused(value: object, data) -> None:
    """check_bounds visits containers only, counting their children at once: on any value and any depth and
    value limits around the value's own, it refuses exactly what the walk counting every value in turn
    refused, with the same message (too deep or too many, whichever that walk met first)."""
    from swarmbase.safejson import check_bounds

    values = _separators(value)[1]
    max_depth = data.draw(st.integers(0, 6), label="max_depth")
    max_items = data.draw(st.sampled_from(sorted({0, 1, values - 1, values, values + 1} - {-1})), label="max_items")
    expected = _first_excess(value, max_depth, max_items)
    if expected is None:
        check_bounds(value, max_depth=max_depth, max_items=max_items)
    else:
        with pytest.raises(ValueError) as refused:
            check_bounds(value, max_depth=max_depth, max_items=max_items)
        assert str(refused.value) == expected


@pytest.mark.parametrize("text, key", [('{"a": 1, "b": 2, "a": 3, "b": 4}', "a"),
                                       ('{"b": 1, "a": 2, "a": 3, "b": 4}', "a"), ('[{"x": 1}, {"y": 1, "y": 2}]', "y")])
def test_safejson_names_the_first_key_given_twice(text: str, key: str) -> None:
    from swarmbase.safejson import loads

    with pytest.raises(ValueError, match=f"^duplicate key '{key}' in a JSON object$"):
        loads(text, max_depth=3)
