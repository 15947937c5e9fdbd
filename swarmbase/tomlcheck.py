"""Reading TOML files and checking their tables: the one helper behind every
configuration file of the project (contact scenarios, swarm scenarios, the node
agent's configuration, FOL hyperparameter files).

Each package raises its own error type, passed as ``error``; the message style
is the same everywhere, one line naming the file, the table and the key::

    scenario.toml: link.rate_bps: expected a positive number, got -1
    scenario.toml: link: unknown key 'speed' (allowed: acquisition_s, model, rate_bps)

>>> t = Table({"rate_bps": -1}, "link", {"rate_bps", "model"}, error=ValueError, source="a.toml")
>>> t.str("model", "constant", choices=("constant", "shannon"))
'constant'
>>> t.num("rate_bps", positive=True)
Traceback (most recent call last):
...
ValueError: a.toml: link.rate_bps: expected a positive number, got -1
"""

from __future__ import annotations

import datetime as _dt
import difflib
import math
import os
import re
import stat
import sys
import tomllib
from pathlib import Path
from typing import Any, Iterable, Iterator

__all__ = ["Table", "read_toml", "read_text_file", "text_lines", "check_input_file", "is_finite_number", "is_decimal",
           "decimal_number", "DECIMAL_NUMBER", "shown",
           "brief", "printable", "check_name_length", "allowed_text", "has_nul",
           "MAX_TOML_BYTES", "NUL_IN_PATH", "MAX_NAME_CHARS", "BRIEF_CHARS"]

#: Configuration files larger than this are refused before parsing (bytes).
MAX_TOML_BYTES = 4 * 1024 * 1024
#: Longest name of a node (a satellite, ground station or drone) or a scenario, in characters: CelesTrak's
#: names take at most 24, and OMM's OBJECT_NAME has no limit of its own.
MAX_NAME_CHARS = 200
#: A file name or argument longer than this is cut in a message (:func:`brief`), in characters.
BRIEF_CHARS = 200


def _a(what: str) -> str:
    """``what`` with its indefinite article: "an agent config file", "a TLE file"."""
    return f"{'an' if what[:1].lower() in 'aeiou' else 'a'} {what}"


#: Why a path holding a NUL is refused (by :func:`check_input_file` and the checks of
#: :mod:`swarmbase.fileio`), after the path: the os module raises ``ValueError`` for one, or takes it as absent.
NUL_IN_PATH = "holds a NUL character, which no file or folder name can hold"


def has_nul(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` holds a NUL character (no file name can; the os module raises ``ValueError``)."""
    text = os.fspath(path)
    return ("\0" if isinstance(text, str) else b"\0") in text


def check_input_file(path: str | os.PathLike[str], error: type[Exception], what: str = "file",
                     max_bytes: int | None = None, *, name: str | None = None, option: str | None = None) -> Path:
    """``path`` as a :class:`Path` if it names a readable regular file (at most
    ``max_bytes``), else ``error`` with one line saying what is wrong. Links are followed. The line names
    the file by ``name`` (default: the path; a received model's label, for one), cut by :func:`brief`,
    after the command-line ``option`` that gave it when there is one (as ``--out`` and ``--resume`` are named).

    >>> check_input_file("/nonexistent/m.safetensors", ValueError, "model file", name="model n1:r0")
    Traceback (most recent call last):
    ...
    ValueError: model n1:r0: model file not found
    >>> check_input_file("/nonexistent/c.toml", ValueError, "FOL config file", option="--config")
    Traceback (most recent call last):
    ...
    ValueError: --config /nonexistent/c.toml: FOL config file not found
    """
    path = Path(path)
    shown_as = brief(path if name is None else name)
    if option is not None:
        shown_as = f"{option} {shown_as}"
    if has_nul(path):  # os.stat's ValueError ("embedded null byte") is no one-line refusal of the caller's type
        raise error(f"{shown_as}: {NUL_IN_PATH}; expected {_a(what)}")
    try:
        st = path.stat()
    except FileNotFoundError:
        raise error(f"{shown_as}: {what} not found") from None
    except OSError as exc:  # a name too long for the file system: named cut, not in a 5 kB line
        raise error(f"{shown_as}: cannot read the {what} ({exc.strerror})") from None
    if stat.S_ISDIR(st.st_mode):
        raise error(f"{shown_as}: is a directory; expected {_a(what)}")
    if not stat.S_ISREG(st.st_mode):
        raise error(f"{shown_as}: not a regular file; expected {_a(what)}")
    if max_bytes is not None and st.st_size > max_bytes:
        raise error(f"{shown_as}: {st.st_size} bytes; {_a(what)} may have at most {max_bytes}")
    return path


def read_at_most(stream: Any, max_bytes: int) -> bytes:
    """The bytes of an open binary file, at most ``max_bytes + 1`` of them (one more than a file may have
    tells one that grew past the limit after its size was checked). Read in what the file holds when opened
    and in 1 MiB pieces past that: ``stream.read(max_bytes + 1)`` set aside a buffer of the whole limit
    first (64 MiB traced to read a 26-byte contact plan, and a failure under a tight address-space limit).

    >>> import io
    >>> read_at_most(io.BytesIO(b"abc"), 64), read_at_most(io.BytesIO(b"x" * 100), 64) == b"x" * 65
    (b'abc', True)
    """
    try:
        size = os.fstat(stream.fileno()).st_size
    except (AttributeError, OSError):  # io.UnsupportedOperation (a stream in memory) is an OSError
        size = 0  # not a file of the file system (a pipe, a stream in memory): read in pieces
    pieces = [stream.read(min(size, max_bytes) + 1)]
    held = len(pieces[0])
    while pieces[-1] and held <= max_bytes and held > size:  # it grew since it was opened (or has no size)
        pieces.append(stream.read(min(1 << 20, max_bytes + 1 - held)))
        held += len(pieces[-1])
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def read_text_file(path: str | os.PathLike[str], error: type[Exception], what: str, max_bytes: int) -> str:
    """The UTF-8 text of a user file of at most ``max_bytes`` (checked before
    reading), without the byte-order mark Windows editors and Excel's "CSV UTF-8"
    put first; a missing file, a folder, a larger file or non-UTF-8 bytes raise
    ``error`` with one line naming the file; so does a file that grew past
    ``max_bytes`` after the check (no more than ``max_bytes + 1`` bytes are read)."""
    path = check_input_file(path, error, what, max_bytes)
    try:
        with path.open("rb") as stream:
            data = read_at_most(stream, max_bytes)
        if len(data) > max_bytes:
            raise error(f"{brief(path)}: grew past {max_bytes} bytes while it was read; "
                        f"{_a(what)} may have at most {max_bytes}")
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise error(f"{brief(path)}: not a UTF-8 text file; expected {_a(what)}") from None
    except OSError as exc:
        raise error(f"{brief(path)}: cannot read the {what} ({exc.strerror})") from None


def text_lines(text: str) -> list[str]:
    """The lines of a line-based file's text as an editor numbers them: ended by LF, CR LF or a lone CR
    (Windows, Unix and classic Mac files), without their ends. Unlike ``str.splitlines()``, no other
    character ends a line (U+2028 / U+2029, NEL, the separators \\x1c..\\x1e, \\v, \\f), so a line number
    in a message is the editor's and a field holding such a character is not cut; a last line without an
    end counts, an empty text has none.

    >>> text_lines("a\\u2028b\\r\\nc\\rd\\n\\ne")
    ['a\\u2028b', 'c', 'd', '', 'e']
    >>> text_lines(""), text_lines("a\\n")
    ([], ['a'])
    """
    return [line for _, line in numbered_text_lines(text)]


def numbered_text_lines(text: str) -> Iterator[tuple[int, str]]:
    """``(number, line)`` of the lines of :func:`text_lines`, the same lines numbered from 1, made one at a time
    as :func:`lines_with_ends` splits them (the one way they are split): a reader of a large file (an OEM of
    64 MiB) holds no list of every line.

    >>> list(numbered_text_lines("a\\u2028b\\r\\nc\\rd\\n\\ne"))
    [(1, 'a\\u2028b'), (2, 'c'), (3, 'd'), (4, ''), (5, 'e')]
    """
    return enumerate((m.group(1) or m.group(2) or "" for m in _LINE_WITH_END.finditer(text)), 1)


#: A line with its end (LF, CR LF or a lone CR), or a last line without one; group 1 or 2 is the line without it.
_LINE_WITH_END = re.compile(r"([^\r\n]*)(?:\r\n?|\n)|([^\r\n]+)\Z")


def lines_with_ends(text: str) -> Iterator[str]:
    """The lines ``io.StringIO(text, newline="")`` gives a ``csv.reader`` (ended by LF, CR LF or a lone CR, their
    ends kept), made one at a time from ``text``: a ``StringIO`` copies a text into 4 bytes a character (a
    waypoint CSV of 56 MB took 224 MB more).

    >>> list(lines_with_ends("a\\r\\nb\\rc\\n\\nd")), list(lines_with_ends("")), list(lines_with_ends("a\\u2028b\\n"))
    (['a\\r\\n', 'b\\r', 'c\\n', '\\n', 'd'], [], ['a\\u2028b\\n'])
    """
    return (m.group() for m in _LINE_WITH_END.finditer(text))


def read_toml(path: str | os.PathLike[str], error: type[Exception], what: str = "TOML file"
              ) -> tuple[dict[str, Any], str]:
    """Parse a TOML file; returns ``(document, text)``. A missing file, a folder,
    a file over :data:`MAX_TOML_BYTES`, non-UTF-8 bytes or invalid TOML raise
    ``error`` with one line naming the file."""
    text = read_text_file(path, error, what, MAX_TOML_BYTES)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{brief(path)}: invalid TOML ({exc})") from None
    except RecursionError:  # tomllib parses nested arrays / inline tables recursively
        raise error(f"{brief(path)}: invalid TOML (arrays or inline tables nested too deeply)") from None
    except ValueError:  # int() refuses more than sys.get_int_max_str_digits() digits
        raise error(f"{brief(path)}: invalid TOML (an integer longer than {sys.get_int_max_str_digits():,} digits)") from None
    if _has_overlong_int(doc):  # a hex / octal / binary one is parsed at any size, but no message could show it
        raise error(f"{brief(path)}: invalid TOML (an integer longer than {sys.get_int_max_str_digits():,} digits)")
    return doc, text


def _has_overlong_int(doc: Any) -> bool:
    """Whether ``doc`` holds an integer of more decimal digits than ``str()``
    converts (``sys.get_int_max_str_digits()``; 0 means no limit)."""
    digits = sys.get_int_max_str_digits()
    if not digits:
        return False
    bound, stack = 10**digits, [doc]
    while stack:
        v = stack.pop()
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        elif isinstance(v, int) and not isinstance(v, bool) and abs(v) >= bound:
            return True
    return False


def is_finite_number(v: Any) -> bool:
    """``v`` is an int or a float (not a bool), finite and within the float range:
    TOML and JSON integers have no size limit, and ``10**400`` is no float.

    >>> is_finite_number(3), is_finite_number(float("nan")), is_finite_number(10**400), is_finite_number(True)
    (True, False, False, False)
    """
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:  # an integer beyond the float range
        return False


#: Leading zeros :func:`is_decimal` takes before a number's digits (``int()`` reads them; it refuses
#: more than 4,300 digits in all).
MAX_LEADING_ZEROS = 64


def is_decimal(text: Any, max_digits: int, signed: bool = False) -> bool:
    """``text`` is a number of 1 to ``max_digits`` ASCII digits, after leading zeros (up to
    :data:`MAX_LEADING_ZEROS`, as ``int()`` reads ``005555``) and, when ``signed``, one leading
    ``-``, so ``int(text)`` takes it: ``str.isdigit()`` passes superscripts and every script's
    digits, which ``int()`` refuses or reads, and ``int()`` refuses more than 4,300 digits.

    >>> is_decimal("65535", 5), is_decimal("005555", 5), is_decimal("\u00b2", 5), is_decimal("1" * 6, 5)
    (True, True, False, False)
    >>> is_decimal("-3", 3, signed=True), is_decimal("-3", 3), is_decimal("0", 1), is_decimal("", 1)
    (True, False, True, False)
    """
    if not isinstance(text, str):
        return False
    digits = text[1:] if signed and text.startswith("-") else text
    number = digits.lstrip("0") or digits[-1:]  # "000": the number 0, one digit
    return (digits.isascii() and digits.isdigit() and 1 <= len(number) <= max_digits
            and len(digits) - len(number) <= MAX_LEADING_ZEROS)


#: A number as the text files of autopilots and GPS loggers write it: ASCII digits, maybe a sign, a point and an
#: exponent, or ``nan`` / ``inf`` / ``infinity`` in any case (as C's printf and Qt write them); ``float()`` reads
#: more: ``1_000``, and every script's digits (``float("4\U0001d7df.5")`` is 47.5). The case of ``nan`` and
#: ``inf`` is written out in ASCII classes, not left to ``re.IGNORECASE``, which in Unicode matches ``i`` with the
#: dotless ``ı`` and the dotted ``İ`` (``ınf`` matched, and ``float()`` then refused it): a reader matching a
#: whole line of such numbers at once puts its ``pattern`` in its own as it is.
DECIMAL_NUMBER = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
                            r"|[nN][aA][nN]|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?)")
#: The same without ``nan`` and ``inf``: digits only (an OEM's data lines).
_DIGITS_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def decimal_number(text: str, special: bool = True) -> float:
    """``float(text)`` for a number written as :data:`DECIMAL_NUMBER` describes (surrounding ASCII spaces, tabs
    and line ends ignored; with ``special`` false, no ``nan`` or ``inf``), else ``ValueError``, as ``float()``
    raises for text that is no number.

    >>> decimal_number(" -47.5e0 "), decimal_number("NaN") != decimal_number("NaN"), decimal_number(".5")
    (-47.5, True, 0.5)
    >>> decimal_number("4\U0001d7df.5")
    Traceback (most recent call last):
    ValueError: not a decimal number
    """
    text = text.strip(" \t\r\n")
    if not (DECIMAL_NUMBER if special else _DIGITS_NUMBER).fullmatch(text):
        raise ValueError("not a decimal number")
    return float(text)


#: A longer string is rendered from its start (a message shows about 60 characters of it).
_SHOWN_STR_CHARS = 1000
_BLANKS, _NOT_BLANK = re.compile(" +"), re.compile("[^ ]")


def _shown_prefix(text: str) -> str:
    """A start of the long ``text`` whose ``repr()`` :func:`shown` cuts where it cuts the whole one's:
    pieces of 250 characters, a run of blanks after one jumped over (``shown`` collapses it to one
    blank), until they make 200 characters with blanks collapsed; then the quotes of ``text`` (both
    cut off) so that ``repr()`` chooses the quote it chooses for the whole."""
    pieces, pos, size = [], 0, 0
    while pos < len(text) and size < 200:
        piece = text[pos:pos + 250]
        pieces.append(piece)
        size += len(_BLANKS.sub(" ", piece))
        pos += len(piece)
        if piece.endswith(" "):
            found = _NOT_BLANK.search(text, pos)
            pos = found.start() if found else len(text)
    if pos < len(text):
        pieces += [q for q in "'\"" if q in text]
    return "".join(pieces)


def _shown_pieces(value: Any) -> Iterator[str]:
    """``repr(value)`` in pieces, a boolean and a date or time (also in a list or table) written as TOML does."""
    if isinstance(value, bool):
        yield "true" if value else "false"
    elif isinstance(value, (list, tuple)):
        yield "["
        for i, v in enumerate(value):
            yield ", " if i else ""
            yield from _shown_pieces(v)
        yield "]"
    elif isinstance(value, dict):
        yield "{"
        for i, (k, v) in enumerate(value.items()):
            yield f"{', ' if i else ''}{k!r}: "
            yield from _shown_pieces(v)
        yield "}"
    elif isinstance(value, (_dt.date, _dt.time)):  # a TOML date or time as written there, not datetime.date(...)
        text = value.isoformat()
        yield text[:-6] + "Z" if getattr(value, "tzinfo", None) is _dt.timezone.utc else text
    elif isinstance(value, str) and len(value) > _SHOWN_STR_CHARS:  # rendered in part: repr() of a 57 MB line
        yield repr(_shown_prefix(value))  # of '1 1 1 ...' and its split into words took 2.4 s and 340 MB
    else:
        yield repr(value)


def shown(value: Any, limit: int = 60) -> str:
    """``repr(value)`` for a one-line error message, booleans spelled ``true`` and
    ``false`` and dates and times written as in TOML (``2025-03-01``, ``2025-03-01T12:00:00Z``), at most about ``limit`` characters: a long integer keeps
    its first digits and says how many it has, any other long value is cut with
    ``...`` (a TOML integer or string has no size limit, and a message is meant
    to be read).

    >>> shown(10**400), shown("x" * 100, 12), shown(0.5), shown([True, {"a": False}])
    ('10000000000000000000... (401 digits)', "'xxxxxxxx...", '0.5', "[true, {'a': false}]")
    """
    parts: list[str] = []
    cut = False  # rendered in part: a long list or table is not rendered whole, nor one nested too deeply
    try:
        for piece in _shown_pieces(value):
            parts.append(piece)
            if len(" ".join("".join(parts).split())) > limit:
                cut = True
                break
    except ValueError:  # an integer str() refuses (more than sys.get_int_max_str_digits() digits)
        return f"an integer of more than {sys.get_int_max_str_digits():,} digits"
    except RecursionError:
        cut = True
    text = " ".join("".join(parts).split())
    if not cut:
        return text
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{text[:20]}... ({len(text.lstrip('-')):,} digits)"
    return text[: max(limit - 3, 1)] + "..."


def printable(text: str) -> str:
    """``text`` with every character that is not printable (control characters such as
    newline, tab or a terminal's escape, format characters such as a right-to-left override or a
    zero-width space, spaces other than ' ' such as a no-break space, lone surrogates of an undecodable
    file name) written as its Python escape, each once, so text from a file or a peer prints as one line
    that cannot rewrite the terminal. The one escaping of every message: :func:`brief` names a file with
    it, and the command-line tools print each error and log line through it
    (:func:`swarmbase.cli.printable`), so a name is shown the same way in both.

    >>> printable("fire"), printable("a\\nb\\x1b[2J\\u202ec"), printable("caf\\xe9 \\udcff\\t\\xa0\\u200b")
    ('fire', 'a\\\\nb\\\\x1b[2J\\\\u202ec', 'café \\\\udcff\\\\t\\\\xa0\\\\u200b')
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def brief(text: Any, limit: int = BRIEF_CHARS, keep_end: int = 0) -> str:
    """``text`` (a file name, an argument as typed) as a one-line message writes it: as it is when at most
    ``limit`` characters, else cut (between single quotes, ``...`` at the cut). A message names what the
    user typed in the user's own words, and a name of 5,000 characters (a path the file system refuses as
    too long) does not make a 5 kB line. With ``keep_end``, a cut keeps that many last characters too (at
    most half of ``limit``), ``...`` in the middle: files whose long names differ only at their end (a
    number, a suffix) stay told apart.

    Text holding a character that is not printable (a newline or a tab, a terminal's escape sequence, a
    line or paragraph separator such as U+2028, a right-to-left override, a no-break space, a zero-width
    space, a byte of a file name that is not UTF-8) is written with each such character escaped once, as
    :func:`printable` writes it, and cut the same way once escaped (quoted at a cut, as above): written as
    it is, it broke the line, forged another, or rewrote the terminal it was printed on. That is how the
    command-line tools print every error and log line, so a file is shown one way in a run, whether a
    message names it with ``brief`` or as it is (``data.csv:3:`` prefixes, log lines).

    >>> brief("runs/a"), brief(Path("runs/a")), brief("x" * 100, 12), len(brief("x" * 5000))
    ('runs/a', 'runs/a', "'xxxxxxxx...", 200)
    >>> brief("model-from-node-" + "x" * 100 + "-07.safetensors", 40, keep_end=15)
    "'model-from-node-xxxx...-07.safetensors'"
    >>> print(brief("a\\n2026-01-01 INFO forged"), brief("\\x1b[2Jx\\u2028\\u202etxt.png"), brief("\\n" * 100, 12))
    a\\n2026-01-01 INFO forged \\x1b[2Jx\\u2028\\u202etxt.png '\\n\\n\\n\\n...
    >>> print(brief("model-\\x1b" + "x" * 100 + "-07.safetensors", 40, keep_end=15))
    'model-\\x1bxxxxxxxxxx...-07.safetensors'
    """
    escaped = printable(str(text))
    if len(escaped) <= limit:
        return escaped
    # cut between single quotes, each character as printable() writes it (a backslash or a quote of the name once,
    # as a log line shows it: repr wrote a backslash twice, and a name holding ' between double quotes)
    quoted = f"'{escaped}'"
    if keep_end <= 0:
        return quoted[:max(limit - 3, 1)] + "..."
    keep_end = min(keep_end, limit // 2)  # the quotes and dots in the limit
    return quoted[:max(limit - keep_end - 4, 1)] + "..." + quoted[-keep_end - 1:]


def check_name_length(name: str, where: str, error: type[Exception]) -> str:
    """``name``, or ``error`` naming ``where`` when it is over :data:`MAX_NAME_CHARS` characters
    (a name is a node's key in every table and message the project writes).

    >>> check_name_length("ISS (ZARYA)", "a.tle:1: TLE name line", ValueError)
    'ISS (ZARYA)'
    >>> check_name_length("x" * 300, "a.tle:1", ValueError)
    Traceback (most recent call last):
    ...
    ValueError: a.tle:1: expected a name of at most 200 characters, got 300: 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...
    """
    if len(name) > MAX_NAME_CHARS:
        raise error(f"{where}: expected a name of at most {MAX_NAME_CHARS} characters, got {len(name):,}: "
                    f"{shown(name, 40)}")
    return name


#: An unknown key's message lists the allowed keys whole up to this many characters.
_ALLOWED_CHARS = 200


def allowed_text(key: str, allowed: Iterable[str], sort: bool = True) -> str:
    """The allowed keys for the message refusing ``key`` (a table's keys, a method's options): all of them,
    or, when they would not fit in :data:`_ALLOWED_CHARS` (``[fol]``'s 38 made a line of 590 characters),
    the first ones, their count and those closest to ``key``. ``sort=False`` keeps the order given (a
    method's options as it declares them).

    >>> allowed_text("rate", {"rate_bps", "model"})
    'model, rate_bps'
    >>> text = allowed_text("gate_epoch", {f"key_{i:02d}" for i in range(40)} | {"gate_epochs"})
    >>> len(text), text[:28], text[-47:]
    (188, 'gate_epochs, key_00, key_01,', 'key_16, ... (41 keys; the closest: gate_epochs)')
    """
    names = sorted(allowed) if sort else list(allowed)
    whole = ", ".join(names)
    if len(whole) <= _ALLOWED_CHARS:
        return whole
    head = whole[:_ALLOWED_CHARS - 50].rsplit(", ", 1)[0]
    close = difflib.get_close_matches(key, names, n=3, cutoff=0.7)
    return f"{head}, ... ({len(names)} keys{'; the closest: ' + ', '.join(close) if close else ''})"


def _resolved(text: str, base: str | os.PathLike[str]) -> Path:
    """``text`` as a path, ``~`` expanded, a relative one resolved against ``base``."""
    p = Path(text).expanduser()
    return p if p.is_absolute() else Path(base) / p

class Table:
    """Typed, checked access to one TOML table.

    ``where`` names the table in messages (``"link"``, ``"ground_stations[0]"``,
    ``""`` for the document's top level),
    ``allowed`` (if given) the keys it may hold, ``source`` the file. Missing
    optional keys return the given default, unchecked.
    """

    def __init__(self, data: Any, where: str, allowed: Iterable[str] | None = None, *,
                 error: type[Exception], source: str | None = None) -> None:
        self.where, self.error, self.source = where, error, source
        if not isinstance(data, dict):
            self._raise(f"{where or 'top level'}: expected a table, got {type(data).__name__}")
        if allowed is not None:
            allowed = set(allowed)
            unknown = sorted(set(data) - allowed)
            if unknown:
                self._raise(f"{where or 'top level'}: unknown key {shown(unknown[0])} "
                            f"(allowed: {allowed_text(unknown[0], allowed)})")
        self.data: dict[str, Any] = data

    # ---------------------------------------------------------------- errors
    def _raise(self, message: str) -> None:
        raise self.error(f"{self.source}: {message}" if self.source else message)

    def fail(self, key: str, message: str) -> None:
        """Raise the error for ``<where>.<key>: <message>``."""
        self._raise(f"{self.where}.{key}: {message}" if self.where else f"{key}: {message}")

    # ---------------------------------------------------------------- access
    def __contains__(self, key: str) -> bool:
        return key in self.data

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        """The value as parsed, unchecked (like :meth:`dict.get`)."""
        return self.data.get(key, default)

    def has(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, default: Any = None, required: bool = False) -> Any:
        """The value as parsed (no type check). A required one must be there, and not ``null`` (a table
        read from JSON, such as a manifest, can hold one; the typed getters take ``None`` as absent)."""
        if key not in self.data:
            if required:
                self.fail(key, "missing (required)")
            return default
        if required and self.data[key] is None:
            self.fail(key, "required, got null")
        return self.data[key]

    def table(self, key: str, allowed: Iterable[str] | None = None) -> "Table":
        """A sub-table (an empty one when absent), named ``<where>.<key>``."""
        where = f"{self.where}.{key}" if self.where else key
        return Table(self.data.get(key, {}), where, allowed, error=self.error, source=self.source)

    def num(self, key: str, default: float | None = None, required: bool = False, *, positive: bool = False,
            nonneg: bool = False, minimum: float | None = None, maximum: float | None = None) -> float | None:
        """A finite number (int or float in the file), as float."""
        v = self.raw(key, default, required)
        if v is None or key not in self.data:
            return v
        if not is_finite_number(v):
            self.fail(key, f"expected a number, got {shown(v)}")
        if positive and v <= 0:
            self.fail(key, f"expected a positive number, got {shown(v)}")
        if nonneg and v < 0:
            self.fail(key, f"expected a number >= 0, got {shown(v)}")
        if minimum is not None and v < minimum or maximum is not None and v > maximum:
            hi = "inf" if maximum is None else f"{maximum:g}"
            if minimum is None and positive:  # the range starts above 0, not at -inf
                self.fail(key, f"expected a positive number of at most {hi}, got {shown(v)}")
            lo = f"{minimum:g}" if minimum is not None else "0" if nonneg else "-inf"
            self.fail(key, f"expected a number in {lo}..{hi}, got {shown(v)}")
        return float(v)

    def int(self, key: str, default: int | None = None, required: bool = False, *,
            minimum: int | None = None, maximum: int | None = None) -> int | None:
        """An integer within ``minimum..maximum``."""
        v = self.raw(key, default, required)
        if v is None or key not in self.data:
            return v
        if isinstance(v, bool) or not isinstance(v, int):
            self.fail(key, f"expected an integer, got {shown(v)}")
        if minimum is not None and v < minimum:
            self.fail(key, f"expected an integer >= {minimum}, got {shown(v)}")
        if maximum is not None and v > maximum:
            self.fail(key, f"expected an integer <= {maximum}, got {shown(v)}")
        return v

    def str(self, key: str, default: str | None = None, required: bool = False, *,
            choices: Iterable[str] | None = None, nonempty: bool = False) -> str | None:
        """A string, one of ``choices`` if given."""
        v = self.raw(key, default, required)
        if v is None or key not in self.data:
            return v
        if not isinstance(v, str):
            self.fail(key, f"expected a string, got {shown(v)}")
        if nonempty and not v.strip():
            self.fail(key, "expected a non-empty string")
        if choices is not None:
            choices = tuple(choices)
            if v not in choices:
                self.fail(key, f"expected one of {', '.join(choices)}, got {shown(v)}")
        return v

    def bool(self, key: str, default: bool | None = None, required: bool = False) -> bool | None:
        """``true`` or ``false``."""
        v = self.raw(key, default, required)
        if key in self.data and not isinstance(v, bool):
            self.fail(key, f"expected true or false, got {shown(v)}")
        return v

    def str_list(self, key: str, default: list[str] | None = None, required: bool = False, *,
                 what: str = "strings") -> list[str] | None:
        """A non-empty list of strings."""
        v = self.raw(key, default, required)
        if v is None or key not in self.data:
            return v
        if not isinstance(v, list) or not v or not all(isinstance(x, str) for x in v):
            self.fail(key, f"expected a non-empty list of {what}, got {shown(v)}")
        return list(v)

    def path(self, key: str, base: str | os.PathLike[str], required: bool = False) -> Path | None:
        """A path string (``~`` expanded), relative ones resolved against ``base``."""
        v = self.str(key, required=required, nonempty=True)
        if v is None:
            return None
        if "\0" in v:  # no file system takes one: opening it raised ValueError
            self.fail(key, f"expected a path without a NUL character, got {shown(v)}")
        return _resolved(v, base)

    def path_list(self, key: str, base: str | os.PathLike[str]) -> list[Path] | None:
        """A non-empty list of path strings, each as :meth:`path` reads one."""
        names = self.str_list(key, what="paths")
        if names is None:
            return None
        for name in names:
            if not name or "\0" in name:
                self.fail(key, f"expected non-empty paths without a NUL character, got {shown(name)}")
        return [_resolved(name, base) for name in names]
