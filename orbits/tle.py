"""Reading and writing two-line element (TLE) files.

Accepted layouts: plain pairs of lines ``1 ...`` / ``2 ...`` or three-line
sets with a name line before each pair (``0 NAME`` or ``NAME``). Blank lines
are skipped. Every element line is checked for length (69 characters), line
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

import datetime as _dt
from pathlib import Path

from sgp4.api import Satrec
from sgp4.conveniences import sat_epoch_datetime
from sgp4.exporter import export_tle

from .constellation import Constellation
from .errors import OrbitError


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


def parse_tle_text(text: str, source: str = "<text>") -> Constellation:
    """Parse TLE text (2- or 3-line sets) into a :class:`Constellation`."""
    raw = text.splitlines()
    lines = [(i + 1, ln.rstrip()) for i, ln in enumerate(raw) if ln.strip()]
    names, sats = [], []
    k = 0
    while k < len(lines):
        lineno, line = lines[k]
        name = None
        if not line.startswith("1 "):
            if line.startswith("2 "):
                raise OrbitError(f"{source}:{lineno}: TLE line 2 without a preceding line 1")
            name = line[2:].strip() if line.startswith("0 ") else line.strip()
            k += 1
            if k >= len(lines):
                raise OrbitError(f"{source}:{lineno}: name line {name!r} is not followed by TLE lines")
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
        try:
            sat = Satrec.twoline2rv(line, line2)
        except (ValueError, IndexError) as exc:
            raise OrbitError(f"{source}:{lineno}: malformed TLE fields ({exc})") from None
        if sat.error:
            raise OrbitError(f"{source}:{lineno}: SGP4 rejected the elements (error code {sat.error})")
        names.append(name or f"SAT-{line[2:7].strip()}")
        sats.append(sat)
        k += 2
    if not sats:
        raise OrbitError(f"{source}: no TLE sets found")
    return Constellation(names, sats, None, description=f"TLE file {source}")


def read_tle(path: str | Path) -> Constellation:
    """Read a TLE file; raises :class:`OrbitError` naming file and line on any defect."""
    path = Path(path)
    try:
        text = path.read_text(encoding="ascii")
    except FileNotFoundError:
        raise OrbitError(f"{path}: TLE file not found") from None
    except UnicodeDecodeError:
        raise OrbitError(f"{path}: TLE file must be plain ASCII text") from None
    return parse_tle_text(text, str(path))


def format_tle(constellation: Constellation, with_names: bool = True) -> str:
    """Three-line (or two-line) TLE text for every satellite, checksums included.

    Catalog numbers 100000..339999 are written in Alpha-5 (``A0000`` ..
    ``Z9999``); larger ones have no TLE form and raise :class:`OrbitError`
    (write OMM instead, :func:`orbits.omm.write_omm`).
    """
    out = []
    for name, sat, number in zip(constellation.names, constellation.satrecs, constellation.catalog_numbers):
        if number > 339999:
            raise OrbitError(f"satellite {name}: catalog number {number} cannot be written as a TLE "
                             "(Alpha-5 ends at 339999 = Z9999); export OMM instead")
        if number != sat.satnum:
            raise OrbitError(f"satellite {name}: catalog number {number} differs from its elements' "
                             f"number {sat.satnum}")
        try:
            l1, l2 = export_tle(sat)
        except ValueError as exc:
            raise OrbitError(f"satellite {name}: cannot be written as a TLE ({exc})") from None
        if with_names:
            out.append(f"0 {name}")
        out.extend([l1, l2])
    return "\n".join(out) + "\n"


def write_tle(path: str | Path, constellation: Constellation, with_names: bool = True) -> Path:
    """Write ``constellation`` as a TLE file (3-line sets by default); returns the path."""
    path = Path(path)
    path.write_text(format_tle(constellation, with_names), encoding="ascii")
    return path


def tle_epoch(sat: Satrec) -> _dt.datetime:
    """UTC epoch of a satellite's elements."""
    return sat_epoch_datetime(sat).astimezone(_dt.timezone.utc)
