"""Reading and writing two-line element (TLE) files.

Accepted layouts: plain pairs of lines ``1 ...`` / ``2 ...`` or three-line
sets with a name line before each pair (``0 NAME`` or ``NAME``). Blank lines
are skipped. Satellites are named by their name lines (no control characters; ``SAT-<catalog number>``
without one, the number decimal as OMM gives it: ``00001`` is ``SAT-1``); a name used by two
satellites gets ``-<catalog number>`` on its second use, and the same name and number twice is
an error (:class:`orbits.constellation.SatelliteNames`). Every element line is checked for length (69 characters), line
number, modulo-10 checksum and matching catalog numbers; any problem raises
:class:`OrbitError` naming the file and line number.

Example:
    >>> from orbits.constellation import walker_delta
    >>> c = walker_delta(4, 2, 0, 550.0, 53.0, "2025-01-01T00:00:00Z")
    >>> text = format_tle(c)
    >>> parse_tle_text(text, "mem").names
    ['WD-P00-S00', 'WD-P00-S01', 'WD-P01-S00', 'WD-P01-S01']
"""

from __future__ import annotations

import calendar
import math
import re
from pathlib import Path

from sgp4.api import Satrec
from sgp4.exporter import export_tle

from swarmbase.fileio import atomic_write_bytes
from swarmbase.tomlcheck import brief, check_name_length, decimal_number, read_text_file, shown, text_lines

from .constellation import Constellation, SatelliteNames
from .errors import OrbitError, check_elements
from .timeutil import satrec_epoch, utc_text


#: Larger TLE files are refused unread (bytes; 100,000 satellites take about 16 MB).
MAX_TLE_BYTES = 64 * 1024 * 1024


def tle_checksum(line: str) -> int:
    """Modulo-10 checksum of the first 68 characters (digits count, '-' counts 1)."""
    total = 0
    for ch in line[:68]:
        if ch.isdigit():
            total += int(ch)
        elif ch == "-":
            total += 1
    return total % 10


def _check_element_line(line: str, number: str, source: str, lineno: int) -> None:
    where = f"{source}:{lineno}"
    if len(line) != 69:
        raise OrbitError(f"{where}: TLE line {number} must be 69 characters, got {len(line)}")
    if line[0] != number or line[1] != " ":
        raise OrbitError(f"{where}: expected TLE line {number} to start with '{number} '")
    if not line[68].isdigit():
        raise OrbitError(f"{where}: TLE line {number} must end with a checksum digit")
    expected = tle_checksum(line)
    if int(line[68]) != expected:
        raise OrbitError(
            f"{where}: TLE checksum mismatch (line says {line[68]}, computed {expected})"
        )


#: The catalog-number field: up to five digits right-aligned, or Alpha-5 (A..Z without I and O, as
#: letters and digits would be confused; sgp4 itself reads I as J and O as P).
_CATALOG = re.compile(r"^(?: *\d+|[A-HJ-NP-Z]\d{4})$")
#: The classification of line 1, column 8: U, C or S; a blank is seen in the wild and sgp4 reads it as U.
_CLASSIFICATIONS = "UCS "
#: A count right-aligned in its columns (the element set and revolution numbers), or blanks.
_COUNT = re.compile(r"^ *\d*$")
#: Exponent notation with an implied leading decimal point, e.g. ``" 12345-3"`` = 0.12345e-3.
_IMPLIED = re.compile(r"^[ +-]?\d{5}[+-]\d$")


def _float_field(text: str) -> float | None:
    """A TLE number field (blanks around it), else None: ASCII digits only, no ``nan`` or ``inf``, and no digit
    groups (``float()`` reads ``51.6_16`` as 51.616, which SGP4's own parser does not)."""
    try:
        value = decimal_number(text, special=False)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _check_fields(line1: str, line2: str, source: str, lineno1: int, lineno2: int) -> None:
    """The numbers and the classification of a checksummed TLE pair, with their ranges: a pair
    with letters in a number or an inclination of 999 deg is refused here
    instead of producing nonsense orbits (or a failure deep in propagation)."""
    def bad(lineno: int, what: str, text: str, expected: str) -> OrbitError:
        return OrbitError(f"{source}:{lineno}: TLE {what} {text.strip()!r} is invalid; expected {expected}")

    if not _CATALOG.fullmatch(line1[2:7]):  # quoted unstripped: a misaligned field shows its spaces
        raise OrbitError(f"{source}:{lineno1}: TLE catalog number {line1[2:7]!r} is invalid; expected five digits "
                         "or Alpha-5 (a capital letter other than I and O, then four digits) in columns 3-7")
    if line1[7] not in _CLASSIFICATIONS:  # sgp4 keeps any character, and exports write it back
        raise OrbitError(f"{source}:{lineno1}: TLE classification {line1[7]!r} is invalid; expected U "
                         "(unclassified), C (classified) or S (secret) in column 8, or a blank (read as U)")
    if not line1[18:20].isdigit():
        raise bad(lineno1, "epoch year", line1[18:20], "two digits")
    year = int(line1[18:20]) + (1900 if int(line1[18:20]) >= 57 else 2000)  # the TLE convention (and sgp4's)
    days = 366 if calendar.isleap(year) else 365
    day = _float_field(line1[20:32])
    if day is None or not 1.0 <= day < days + 1:
        raise bad(lineno1, "epoch day", line1[20:32],
                  f"a day of the year in 1..{days}.99999999 ({year} has {days} days)")
    if _float_field(line1[33:43]) is None:
        raise bad(lineno1, "mean motion derivative", line1[33:43], "a decimal number")
    for what, field in (("mean motion second derivative", line1[44:52]), ("B* drag term", line1[53:61])):
        if not _IMPLIED.fullmatch(field.strip() if field.strip() else "x"):
            raise bad(lineno1, what, field, "implied-decimal notation such as ' 12345-3'")
    if not _COUNT.fullmatch(line1[62]):  # sgp4 reads a letter or a '-' in these as 0, '-12' as -12, '1a3' as 1
        raise bad(lineno1, "ephemeris type", line1[62], "one digit in column 63")
    if not _COUNT.fullmatch(line1[64:68]):
        raise bad(lineno1, "element set number", line1[64:68], "up to four digits in columns 65-68")
    ranges = (("inclination", line2[8:16], 0.0, 180.0), ("right ascension", line2[17:25], 0.0, 360.0),
              ("argument of perigee", line2[34:42], 0.0, 360.0), ("mean anomaly", line2[43:51], 0.0, 360.0))
    for what, field, lo, hi in ranges:
        value = _float_field(field)
        if value is None or not lo <= value <= hi:
            raise bad(lineno2, f"{what} (deg)", field, f"a number in {lo:g}..{hi:g}")
    if not line2[26:33].isdigit():
        raise bad(lineno2, "eccentricity", line2[26:33], "seven digits (implied leading decimal point)")
    motion = _float_field(line2[52:63])
    if motion is None or not 0.0 < motion < 20.0:
        raise bad(lineno2, "mean motion (rev/day)", line2[52:63], "a number in 0..20")
    if not _COUNT.fullmatch(line2[63:68]):
        raise bad(lineno2, "revolution number", line2[63:68], "up to five digits in columns 64-68")


def parse_tle_text(text: str, source: str = "<text>") -> Constellation:
    """Parse TLE text (2- or 3-line sets, plain ASCII) into a :class:`Constellation`."""
    source = brief(source)  # as every message names it: a long path cut, not written whole
    if not text.isascii():  # str.isdigit() passes a superscript two, which int() then refuses
        raise OrbitError(f"{source}: TLE file must be plain ASCII text")
    raw = text_lines(text)  # numbered as an editor shows them: LF, CR LF or CR alone, not a form feed
    lines = [(i + 1, ln.rstrip()) for i, ln in enumerate(raw) if ln.strip()]
    names, sats = [], []
    book = SatelliteNames()
    k = 0
    while k < len(lines):
        lineno, line = lines[k]
        name = None
        if not line.startswith("1 "):
            if line.startswith("2 "):
                raise OrbitError(f"{source}:{lineno}: TLE line 2 without a preceding line 1")
            name = line[2:].strip() if line.startswith("0 ") else line.strip()
            if not name.isprintable():  # a tab or a control character would not survive an export
                raise OrbitError(f"{source}:{lineno}: TLE name line: expected a name without control "
                                 f"characters, got {shown(name)}")
            check_name_length(name, f"{source}:{lineno}: TLE name line", OrbitError)
            k += 1
            if k >= len(lines):
                raise OrbitError(f"{source}:{lineno}: name line {shown(name)} is not followed by TLE lines")
            lineno, line = lines[k]
            if not line.startswith("1 "):
                raise OrbitError(f"{source}:{lineno}: expected TLE line 1 after the name line")
        if k + 1 >= len(lines):
            raise OrbitError(f"{source}:{lineno}: TLE line 1 without a following line 2")
        lineno2, line2 = lines[k + 1]
        _check_element_line(line, "1", source, lineno)
        _check_element_line(line2, "2", source, lineno2)
        if line[2:7] != line2[2:7]:
            raise OrbitError(
                f"{source}:{lineno2}: catalog number {line2[2:7].strip()!r} does not match "
                f"line 1 ({line[2:7].strip()!r})"
            )
        _check_fields(line, line2, source, lineno, lineno2)
        try:
            sat = Satrec.twoline2rv(line, line2)
        except (ValueError, IndexError) as exc:
            raise OrbitError(f"{source}:{lineno}: malformed TLE fields ({exc})") from None
        check_elements(sat, f"{source}:{lineno}")
        number = int(sat.satnum)  # the catalog number, Alpha-5 decoded (A0000 is 100000)
        names.append(book.claim(name, number, f"{source}:{lineno}: satellite {name or f'SAT-{number}'} "
                                f"({line[2:7].strip()}) appears twice",
                                lambda n: f"{source}:{lineno}: satellite name {n!r} is used twice",
                                where=f"{source}:{lineno}"))
        sats.append(sat)
        k += 2
    if not sats:
        raise OrbitError(f"{source}: no TLE sets found")
    return Constellation(names, sats, None, description=f"TLE file {source}")


def read_tle(path: str | Path) -> Constellation:
    """Read a TLE file; raises :class:`OrbitError` naming file and line on any defect."""
    path = Path(path)
    text = read_text_file(path, OrbitError, "TLE file", MAX_TLE_BYTES)  # UTF-8, a byte-order mark dropped
    return parse_tle_text(text, str(path))


class _TleView:
    """A satellite record as ``sgp4.exporter.export_tle`` should see it: the TLE's five-digit
    revolution counter rolls over, and the angles are given in 0..2 pi (export_tle refuses the
    negative ones an OMM may hold). The record itself is left as it is (its angles are read-only)."""

    def __init__(self, sat: Satrec, year: int) -> None:
        self._sat = sat
        self.revnum = sat.revnum % 100000
        self.nodeo, self.argpo, self.mo = (a % (2.0 * math.pi) for a in (sat.nodeo, sat.argpo, sat.mo))
        # the day is written with 8 decimals: an epoch in the year's last 0.43 ms would read
        # 'day 366' (367 in a leap year), a day the year has not; it is the next year's day 1
        self.year = year
        if round(sat.epochdays, 8) >= (366 if calendar.isleap(year) else 365) + 1:
            self.year, self.epochdays = year + 1, 1.0
        self.epochyr = self.year % 100

    def __getattr__(self, key: str):
        return getattr(self._sat, key)


def format_tle(constellation: Constellation, with_names: bool = True) -> str:
    """Three-line (or two-line) TLE text for every satellite, checksums included.

    Catalog numbers 100000..339999 are written in Alpha-5 (``A0000`` ..
    ``Z9999``); larger ones, and epochs outside 1957..2056 (the two-digit
    year's span), have no TLE form and raise :class:`OrbitError` (write OMM
    instead, :func:`orbits.omm.write_omm`). A revolution count past 99999
    (OMM's ``REV_AT_EPOCH`` may hold one) is written modulo 100000, as the
    TLE's five-digit counter rolls over; negative angles (an OMM may hold them) are written
    as the same angle in 0..360 deg; elements that would overflow their
    columns (a B* of 1e-12, whose exponent has two digits) raise :class:`OrbitError`.
    """
    out = []
    for name, sat, number in zip(constellation.names, constellation.satrecs, constellation.catalog_numbers):
        if number > 339999:
            raise OrbitError(f"satellite {name}: catalog number {number} cannot be written as a TLE "
                             "(Alpha-5 ends at 339999 = Z9999); export OMM instead")
        epoch = satrec_epoch(sat)
        view = _TleView(sat, epoch.year)
        if not 1957 <= view.year <= 2056:  # a two-digit year would read back a century off
            raise OrbitError(f"satellite {name}: epoch {utc_text(epoch, 'seconds')} has no TLE form (two-digit "
                             "years cover 1957..2056); export OMM instead")
        if number != sat.satnum:
            raise OrbitError(f"satellite {name}: catalog number {number} differs from its elements' "
                             f"number {sat.satnum}")
        try:
            l1, l2 = export_tle(view)
        except ValueError as exc:
            raise OrbitError(f"satellite {name}: cannot be written as a TLE ({exc})") from None
        for number_, line in (("1", l1), ("2", l2)):
            if len(line) != 69:  # e.g. B* -3e-12: the implied-decimal fields take a one-digit exponent
                raise OrbitError(f"satellite {name}: its elements do not fit the TLE's columns (line {number_} "
                                 f"would be {len(line)} characters; B* and the mean motion derivatives take "
                                 "a one-digit exponent); export OMM instead")
        if with_names:
            out.append(f"0 {name}")
        out.extend([l1, l2])
    return "\n".join(out) + "\n"


def write_tle(path: str | Path, constellation: Constellation, with_names: bool = True) -> Path:
    """Write ``constellation`` as a TLE file (3-line sets by default); returns the path."""
    path = Path(path)
    try:
        data = format_tle(constellation, with_names).encode("ascii")
    except UnicodeEncodeError as exc:
        raise OrbitError(f"{brief(path)}: a TLE file is ASCII text; a satellite name holds "
                         f"{exc.object[exc.start:exc.end]!r} (write it without names, or as OMM)") from None
    atomic_write_bytes(path, data)  # crash-safe: the old file or the whole new one
    return path

