"""Orbit Mean-elements Messages (CCSDS OMM, CelesTrak / Space-Track "GP" data).

Reads OMM files in the three layouts CelesTrak serves (JSON list of records,
CSV with one header row, CCSDS NDM/XML) through sgp4's own OMM support
(``sgp4.omm.parse_csv`` / ``parse_xml`` / ``initialize``), and the CCSDS KVN
layout (``KEY = value`` lines, Space-Track's ``format/kvn``; sgp4 has no
reader for it, so :func:`_kvn_records` turns it into the same records), and writes a
:class:`~orbits.constellation.Constellation` back out with
``sgp4.exporter.export_omm``. Every field sgp4 needs is checked first, so a
malformed file raises :class:`OrbitError` naming the file, the record and the
field instead of a bare ``KeyError`` or ``ValueError``.

Catalog numbers. OMM carries ``NORAD_CAT_ID`` as a plain integer, so six-digit
numbers (the 18th SDS expects to pass 99999 in 2026) are fine in the file. The
installed sgp4's ``Satrec`` stores the number as an Alpha-5 string and refuses
anything above 339999 ("Z9999"); since the number plays no part in the
propagation, such satellites are initialized with number 0 and the real one is
kept in ``Constellation.catalog_numbers``, which OMM export writes back.
TLE export (:func:`orbits.tle.format_tle`) writes 100000..339999 in Alpha-5
and refuses larger numbers with an error that points to OMM.

Example:
    >>> from orbits.constellation import walker_delta
    >>> c = walker_delta(2, 1, 0, 550.0, 53.0, "2025-01-01T00:00:00Z")
    >>> c.catalog_numbers = [123456, 400000]
    >>> back = parse_omm_text(format_omm(c, "json"), "json", "mem.json")
    >>> back.catalog_numbers, back.names
    ([123456, 400000], ['WD-P00-S00', 'WD-P00-S01'])
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Iterable

from sgp4 import omm as _omm
from sgp4.api import Satrec
from sgp4.exporter import export_omm

from swarmbase.fileio import atomic_write_text
from swarmbase.safejson import loads as bounded_loads
from swarmbase.tomlcheck import (brief, check_name_length, decimal_number, is_decimal, lines_with_ends,
                                 read_text_file, shown, text_lines)
from swarmbase.xmlguard import refuse_doctype

from .constants import SGP4_MAX_SATNUM
from .constellation import Constellation, SatelliteNames
from .errors import OrbitError, check_elements
from .timeutil import ccsds_datetime, satrec_epoch, utc_text

#: Files larger than this are refused before they are read.
MAX_OMM_BYTES = 64 * 1024 * 1024
#: A JSON file's limits: a GP list of flat records is 2 levels deep; Space-Track's 40-field records
#: fill the size limit with about 2,000,000 values (CelesTrak's whole catalog, 10,000 objects, is 200,000).
MAX_OMM_JSON_DEPTH, MAX_OMM_JSON_VALUES = 8, 4_000_000
#: Accepted layouts.
OMM_FORMATS = ("json", "csv", "xml", "kvn")

_FLOAT_FIELDS = ("MEAN_MOTION", "ECCENTRICITY", "INCLINATION", "RA_OF_ASC_NODE", "ARG_OF_PERICENTER",
                 "MEAN_ANOMALY", "BSTAR", "MEAN_MOTION_DOT", "MEAN_MOTION_DDOT")
_INT_FIELDS = ("NORAD_CAT_ID", "EPHEMERIS_TYPE", "ELEMENT_SET_NO", "REV_AT_EPOCH")
#: Ranges of the TLE-related integers: one digit and four digits as in a TLE; the revolution count
#: (five digits in a TLE, which wraps it) may be written whole.
_INT_RANGES = {"EPHEMERIS_TYPE": 9, "ELEMENT_SET_NO": 9999, "REV_AT_EPOCH": 999999999}
#: Fields with a harmless default when a file leaves them out (CelesTrak always writes them).
_DEFAULTS = {"CLASSIFICATION_TYPE": "U", "OBJECT_ID": "UNKNOWN", "EPHEMERIS_TYPE": 0,
             "ELEMENT_SET_NO": 999, "REV_AT_EPOCH": 0, "BSTAR": 0.0, "MEAN_MOTION_DOT": 0.0,
             "MEAN_MOTION_DDOT": 0.0}
#: An international (COSPAR) designator as OBJECT_ID writes it: launch year, launch number, piece.
#: CLASSIFICATION_TYPE values: U (unclassified), C (classified), S (secret), as a TLE's line 1 column 8.
_CLASSIFICATIONS = ("U", "C", "S")
_COSPAR_ID = re.compile(r"^\d{4}-\d{3}[A-Z]{1,3}$", re.ASCII)
#: MEAN_ELEMENT_THEORY values naming the elements SGP4 takes: Space-Track and CelesTrak write SGP4,
#: the CCSDS 502.0-B standard's own example SGP/SGP4; SDP4 is SGP4's deep-space branch, which the
#: sgp4 library picks by itself from the period (SGP4-XP elements are another theory and are refused)
_SGP4_THEORIES = ("SGP4", "SGP/SGP4", "SDP4", "SGP4/SDP4")
_XML_META = ("OBJECT_NAME", "OBJECT_ID", "CENTER_NAME", "REF_FRAME", "TIME_SYSTEM", "MEAN_ELEMENT_THEORY")
_XML_MEAN = ("EPOCH", "MEAN_MOTION", "ECCENTRICITY", "INCLINATION", "RA_OF_ASC_NODE", "ARG_OF_PERICENTER",
             "MEAN_ANOMALY")
_XML_TLE = ("EPHEMERIS_TYPE", "CLASSIFICATION_TYPE", "NORAD_CAT_ID", "ELEMENT_SET_NO", "REV_AT_EPOCH", "BSTAR",
            "MEAN_MOTION_DOT", "MEAN_MOTION_DDOT")
#: A KVN line ``KEY = value`` (CCSDS keywords: letters, digits and underscores), the value maybe ending in ``[unit]``.
_KVN_LINE = re.compile(r"([A-Za-z][A-Za-z0-9_]*)\s*=\s*(.*)")
#: The units CCSDS 502.0-B gives the fields sgp4 reads (compared without case or blanks); a KVN value
#: in another unit (``MEAN_MOTION = 0.0011 [rad/s]``) is refused rather than read as the expected one.
_KVN_UNITS = {"MEAN_MOTION": "rev/day", "INCLINATION": "deg", "RA_OF_ASC_NODE": "deg", "ARG_OF_PERICENTER": "deg",
              "MEAN_ANOMALY": "deg", "BSTAR": "1/er", "MEAN_MOTION_DOT": "rev/day**2", "MEAN_MOTION_DDOT": "rev/day**3"}
def kvn_start(keyword: str) -> "re.Pattern[str]":
    """A pattern matching a CCSDS KVN message's first line ``keyword = ...`` (``CCSDS_OMM_VERS``,
    ``CCSDS_OEM_VERS``) after any blank or COMMENT lines, the key in any case as the readers take
    it: how a reader tells KVN from XML, CSV, JSON. Possessive (``*+``), so a long run of blank or
    COMMENT lines is scanned once, never backtracked over."""
    return re.compile(r"(?:\s|COMMENT(?:[ \t][^\n]*+)?+(?=[\r\n]|\Z))*+(?i:" + re.escape(keyword) + r")\s*=")


_KVN_START = kvn_start("CCSDS_OMM_VERS")


def omm_format(path: str | Path, text: str | None = None) -> str:
    """``kvn`` when the text starts with ``CCSDS_OMM_VERS =`` (after blank or COMMENT lines; no other
    layout can), else ``json`` / ``csv`` / ``xml`` / ``kvn`` from the file extension, else from the first character."""
    if text and _KVN_START.match(text):
        return "kvn"
    ext = Path(path).suffix.lower().lstrip(".")
    if ext in OMM_FORMATS:
        return ext
    head = (text or "").lstrip()[:1]
    return "json" if head in "[{" and head else "xml" if head == "<" else "csv"


def _epoch_text(value: Any, where: str) -> str:
    """EPOCH in the exact layout sgp4.omm expects (``%Y-%m-%dT%H:%M:%S.%f``, UTC)."""
    if not isinstance(value, str) or not value.strip():
        raise OrbitError(f"{where}.EPOCH: expected an ISO-8601 UTC time like 2025-03-01T12:00:00.000000, got {shown(value)}")
    try:
        dt = ccsds_datetime(value)  # CCSDS also allows YYYY-DDDThh:mm:ss (its own examples use it)
    except ValueError:
        raise OrbitError(f"{where}.EPOCH: expected an ISO-8601 UTC time like 2025-03-01T12:00:00.000000, "
                         f"got {shown(value)}") from None
    except OverflowError:  # 9999-12-31T23:00:00-05:00 is in the year 10000 in UTC
        raise OrbitError(f"{where}.EPOCH: expected a time within the years 1..9999 in UTC, "
                         f"got {shown(value)}") from None
    return dt.isoformat(timespec="microseconds")  # strftime writes the year 1 as "1", which sgp4 refuses


def _checked_fields(rec: Any, where: str) -> dict[str, Any]:
    """A copy of one OMM record with every field sgp4 reads validated."""
    if not isinstance(rec, dict):
        raise OrbitError(f"{where}: expected a record of OMM fields, got {type(rec).__name__}")
    fields = {str(k).strip().upper(): (v.strip() if isinstance(v, str) else v) for k, v in rec.items()
              if k is not None}
    for key, default in _DEFAULTS.items():
        if fields.get(key) in (None, ""):
            fields[key] = default
    theory = str(fields.get("MEAN_ELEMENT_THEORY") or "SGP4").upper()
    if theory not in _SGP4_THEORIES:
        raise OrbitError(f"{where}.MEAN_ELEMENT_THEORY: only SGP4 mean elements are supported "
                         f"({', '.join(_SGP4_THEORIES)}), got {shown(theory)}")
    frame = str(fields.get("REF_FRAME") or "TEME").upper()
    if frame != "TEME":
        raise OrbitError(f"{where}.REF_FRAME: SGP4 elements are TEME, got {shown(frame)}")
    clock = str(fields.get("TIME_SYSTEM") or "UTC").upper()
    if clock != "UTC":  # a TT epoch read as UTC is 69 s (~500 km along a LEO orbit) off, a GPS one 18 s
        raise OrbitError(f"{where}.TIME_SYSTEM: SGP4 epochs are UTC, got {shown(fields['TIME_SYSTEM'])}")
    center = str(fields.get("CENTER_NAME") or "EARTH").upper()
    if center != "EARTH":
        raise OrbitError(f"{where}.CENTER_NAME: expected EARTH, got {shown(center)}")
    if "EPOCH" not in fields:
        raise OrbitError(f"{where}.EPOCH: missing (required)")
    fields["EPOCH"] = _epoch_text(fields["EPOCH"], where)
    for key in _FLOAT_FIELDS:
        if key not in fields:
            raise OrbitError(f"{where}.{key}: missing (required)")
        try:
            # a text in ASCII digits (float() reads every script's, and 1_000); a JSON number as it is
            value = decimal_number(fields[key]) if isinstance(fields[key], str) else float(fields[key])
        except OverflowError:  # a JSON integer beyond the float range
            value = math.inf
        except (TypeError, ValueError):
            raise OrbitError(f"{where}.{key}: expected a number, got {shown(fields[key])}") from None
        if not math.isfinite(value):
            raise OrbitError(f"{where}.{key}: expected a finite number, got {shown(fields[key])}")
        fields[key] = value
    for key in _INT_FIELDS:
        if key not in fields:
            raise OrbitError(f"{where}.{key}: missing (required)")
        value = fields[key]
        try:
            ivalue = int(value) if not isinstance(value, float) or value.is_integer() else None
        except (TypeError, ValueError):
            ivalue = None
        if isinstance(value, str) and not is_decimal(value.strip(" \t\r\n").removeprefix("+"), 20, signed=True):
            ivalue = None  # int() reads every script's digits too, and 90_001
        if ivalue is None or isinstance(value, bool):
            raise OrbitError(f"{where}.{key}: expected an integer, got {shown(value)}")
        fields[key] = ivalue
    for key, top in _INT_RANGES.items():  # sgp4 keeps them in C integers (10**20 overflowed there)
        if not 0 <= fields[key] <= top:
            raise OrbitError(f"{where}.{key}: expected an integer in 0..{top}, got {shown(fields[key])}")
    if not 0 <= fields["NORAD_CAT_ID"] <= 999999999:  # 0 as a TLE's 00000 (custom satellites), which OMM export writes
        raise OrbitError(f"{where}.NORAD_CAT_ID: expected a catalog number in 0..999999999, "
                         f"got {shown(fields['NORAD_CAT_ID'])}")
    if not 0.0 <= fields["ECCENTRICITY"] < 1.0:
        raise OrbitError(f"{where}.ECCENTRICITY: expected 0 <= e < 1, got {fields['ECCENTRICITY']}")
    if not 0.0 < fields["MEAN_MOTION"] < 20.0:
        raise OrbitError(f"{where}.MEAN_MOTION: expected 0..20 revolutions per day, got {fields['MEAN_MOTION']}")
    if not 0.0 <= fields["INCLINATION"] <= 180.0:
        raise OrbitError(f"{where}.INCLINATION: expected 0..180 deg, got {fields['INCLINATION']}")
    for key in ("RA_OF_ASC_NODE", "ARG_OF_PERICENTER", "MEAN_ANOMALY"):  # CCSDS angles; sgp4 takes any value
        if not -360.0 <= fields[key] <= 360.0:  # (a mean anomaly of 1e300 deg gave a position, silently wrong)
            raise OrbitError(f"{where}.{key}: expected -360..360 deg, got {fields[key]}")
    if fields["CLASSIFICATION_TYPE"] not in _CLASSIFICATIONS:  # the TLE's line 1 column 8, which exports write
        raise OrbitError(f"{where}.CLASSIFICATION_TYPE: expected U (unclassified), C (classified) or S (secret), "
                         f"got {shown(fields['CLASSIFICATION_TYPE'])}")
    fields["OBJECT_ID"] = str(fields["OBJECT_ID"])
    return fields


def omm_satrec(rec: dict[str, Any], where: str = "OMM record") -> tuple[Satrec, int, str | None]:
    """``(Satrec, catalog number, OBJECT_NAME)`` of one OMM record, via ``sgp4.omm.initialize``."""
    fields = _checked_fields(rec, where)
    catalog = fields["NORAD_CAT_ID"]
    if catalog > SGP4_MAX_SATNUM:  # sgp4's Alpha-5 field cannot hold it; the number does not affect SGP4
        fields["NORAD_CAT_ID"] = 0
    sat = Satrec()
    try:
        _omm.initialize(sat, fields)
    except (KeyError, ValueError, TypeError) as exc:
        raise OrbitError(f"{where}: sgp4 rejected the record ({exc})") from None
    sat.classification = fields["CLASSIFICATION_TYPE"]  # initialize sets it, then its sgp4init resets it to U
    check_elements(sat, where)
    if not _COSPAR_ID.fullmatch(fields["OBJECT_ID"]):  # sgp4 keeps OBJECT_ID[2:] whatever it is ('UNKNOWN' -> 'KNOWN')
        sat.intldesg = ""  # a TLE export leaves the designator blank, an OMM export writes UNKNOWN
    name = fields.get("OBJECT_NAME")
    if name is not None and not str(name).isprintable():  # no export could be read back (TLE lines, XML 1.0)
        raise OrbitError(f"{where}.OBJECT_NAME: expected a name on one line without control characters, got {shown(name)}")
    if name is not None:
        check_name_length(str(name).strip(), f"{where}.OBJECT_NAME", OrbitError)
    return sat, catalog, (str(name).strip() or None) if name is not None else None


def _blank_row(row: dict[Any, Any]) -> bool:
    """Whether a CSV row holds nothing but blanks (a spreadsheet saves an emptied row as bare commas)."""
    values = [v for k, v in row.items() if k is not None] + list(row.get(None) or ())
    return all(v is None or not v.strip() for v in values)


def _record_start(text: str, done: int) -> int:
    """The line a CSV record the csv module refused starts on: the first line after the ``done`` lines of
    the records before it that is not empty (the module skips those), as it splits lines (LF, CR LF, CR)."""
    for number, line in enumerate(lines_with_ends(text), 1):
        if number > done and line.strip("\r\n"):
            return number
    return done + 1


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _kvn_unit(value: str) -> tuple[str, str] | None:
    """``(number, unit)`` of a KVN value ending in ``[unit]``, else None (no regular expression: a
    lazy one took seconds on a line of a few thousand blanks)."""
    start = value.rfind("[")
    if start < 0 or not value.endswith("]") or "]" in value[start + 1:-1]:
        return None
    return value[:start].rstrip(), value[start + 1:-1]


def _kvn_records(text: str, source: str) -> list[tuple[str, dict[str, str], dict[str, int]]]:
    """``(where, fields, line of each field)`` of every message of a KVN text (CCSDS 502.0-B section 6:
    ``KEY = value`` lines, ``COMMENT`` lines and blank lines; each message starts with ``CCSDS_OMM_VERS``)."""
    out: list[tuple[str, dict[str, str], dict[str, int]]] = []
    fields: dict[str, str] = {}
    lines: dict[str, int] = {}
    for number, line in enumerate(text_lines(text), 1):  # numbered as an editor shows them (LF, CR LF, CR)
        body = line.strip()
        if not body or body.split(None, 1)[0] == "COMMENT":  # its text after a blank or a tab
            continue
        match = _KVN_LINE.fullmatch(body)
        if match is None:
            raise OrbitError(f"{source}:{number}: expected a 'KEY = value' line or a COMMENT line, got {shown(body)}")
        key, value = match.group(1).upper(), match.group(2)
        if key == "CCSDS_OMM_VERS":
            fields, lines = {}, {}
            out.append((f"{source}:{number}", fields, lines))
        elif not out:
            raise OrbitError(f"{source}:{number}: {key}: an OMM message must start with a CCSDS_OMM_VERS line")
        elif key in lines:
            raise OrbitError(f"{source}:{number}: {key}: given twice in one message (first on line {lines[key]})")
        unit = _kvn_unit(value)
        # a number's unit is dropped; text keeps its brackets ('NAME [DEB]', and a name '12 [3]' too)
        if unit is not None and (key in _KVN_UNITS or (key not in _XML_META and _is_number(unit[0]))):
            value, given = unit
            expected = _KVN_UNITS.get(key)
            if expected is not None and re.sub(r"\s", "", given).lower().replace("^", "**") != expected:
                raise OrbitError(f"{source}:{number}: {key}: expected the unit [{expected}] or none, got {shown(given)}")
        fields[key], lines[key] = value, number
    return out


def _at_field_line(exc: OrbitError, where: str, lines: dict[str, int]) -> OrbitError:
    """An error about field KEY of the KVN message at ``where`` (``file:line``), moved to KEY's own line."""
    match = re.match(re.escape(where) + r"\.([A-Z0-9_]+):", str(exc))
    if match is None or match.group(1) not in lines:
        return exc
    source = where.rsplit(":", 1)[0]
    return OrbitError(f"{source}:{lines[match.group(1)]}.{str(exc)[len(where) + 1:]}")


def _records(text: str, fmt: str, source: str) -> Iterable[tuple[str, Any]]:
    if fmt == "json":
        try:
            doc = bounded_loads(text, max_depth=MAX_OMM_JSON_DEPTH, max_items=MAX_OMM_JSON_VALUES, allow_nan=True)
        except ValueError as exc:
            raise OrbitError(f"{source}: invalid JSON ({exc})") from None
        if isinstance(doc, dict):
            doc = [doc]
        if not isinstance(doc, list):
            raise OrbitError(f"{source}: expected a JSON list of OMM records")
        return [(f"{source}: record {i}", rec) for i, rec in enumerate(doc)]
    if fmt == "csv":
        if _KVN_START.match(text):  # Space-Track's "kvn" format, not a CSV header
            raise OrbitError(f"{source}: holds OMM in KVN layout ('KEY = value' lines), not CSV; read it as kvn")
        # lines as StringIO(text, newline="") gives them, ended at LF, CR LF or CR alone (a Mac spreadsheet's CSV;
        # a split at LF only handed it a CR-only file as one line), without a StringIO's copy of 4 bytes a character
        reader = _omm.parse_csv(lines_with_ends(text))
        rows: list[tuple[str, Any]] = []
        done = 0  # lines of the records read whole (the csv module does not count the line it fails in)
        try:
            if not reader.fieldnames or "EPOCH" not in [f.strip().upper() for f in reader.fieldnames]:
                raise OrbitError(f"{source}: expected a CSV header row with OMM field names (EPOCH, MEAN_MOTION, ...)")
            done = reader.line_num
            for row in reader:
                if not _blank_row(row):
                    rows.append((f"{source}:{reader.line_num}", row))
                done = reader.line_num
            return rows
        except csv.Error as exc:  # e.g. a quote left open: its field runs past the csv module's limit
            raise OrbitError(f"{source}:{_record_start(text, done)}: not a valid CSV record ({exc}); "
                             "a quote left open?") from None
    if fmt == "xml":
        refuse_doctype(text, source, OrbitError)  # sgp4 parses with ElementTree, which expands entities
        try:
            return [(f"{source}: segment {i}", rec) for i, rec in enumerate(_omm.parse_xml(io.StringIO(text)))]
        except ET.ParseError as exc:
            raise OrbitError(f"{source}: invalid XML ({exc})") from None
        except (AttributeError, TypeError):  # sgp4 reads data/... of a segment, then iterates each group
            raise OrbitError(f"{source}: expected CCSDS OMM segments with metadata, data/meanElements and "
                             "data/tleParameters") from None
    raise OrbitError(f"{source}: unknown OMM format {fmt!r}; expected one of {', '.join(OMM_FORMATS)}")


def _server_answer(text: str, source: str) -> None:
    """Refuse, quoting it, a server's error answer saved in place of the data: Space-Track answers a bad
    query with a JSON object ``{"error": "..."}``, CelesTrak with one line of text (``No GP data found``);
    each was blamed on a missing EPOCH or CSV header, or on invalid JSON or XML."""
    body = text.strip()
    if body.startswith("{") and len(body) <= 100_000:
        try:
            doc = bounded_loads(body, max_depth=MAX_OMM_JSON_DEPTH, max_items=MAX_OMM_JSON_VALUES, allow_nan=True)
        except ValueError:
            return
        error = ([v for k, v in doc.items() if k.lower() == "error"]
                 if isinstance(doc, dict) and not {k.upper() for k in doc} & {"EPOCH", "MEAN_MOTION"} else [])
        if error:
            raise OrbitError(f"{source}: holds a server's error message, not OMM data: {shown(error[0], 200)}")
    elif body and "\n" not in body and not body.startswith(("[", "<")) and "," not in body \
            and "EPOCH" not in body.upper() and not _KVN_LINE.fullmatch(body):
        raise OrbitError(f"{source}: holds one line of text, not OMM data: {shown(body, 200)} (a server's error "
                         "message saved as the file?)")


def parse_omm_text(text: str, fmt: str, source: str = "<text>") -> Constellation:
    """Parse OMM text (``fmt`` = json/csv/xml/kvn) into a :class:`Constellation`."""
    source = brief(source)  # as every message names it: a long path cut, not written whole
    _server_answer(text, source)
    names, sats, catalog = [], [], []
    book = SatelliteNames()
    records = (_kvn_records(text, source) if fmt == "kvn"
               else [(where, rec, {}) for where, rec in _records(text, fmt, source)])
    for where, rec, lines in records:
        try:
            sat, number, name = omm_satrec(rec, where)
            names.append(book.claim(name, number, f"{where}.NORAD_CAT_ID: satellite {number} appears twice",
                                    lambda n: f"{where}.OBJECT_NAME: satellite name {shown(n)} is used twice",
                                    where=where))
        except OrbitError as exc:  # a KVN field's error names the field's own line
            raise _at_field_line(exc, where, lines) from None
        sats.append(sat)
        catalog.append(number)
    if not sats:
        raise OrbitError(f"{source}: no OMM records found")
    return Constellation(names, sats, None, description=f"OMM file {source}", catalog_numbers=catalog)


def read_omm(path: str | Path, fmt: str | None = None) -> Constellation:
    """Read an OMM file (JSON, CSV, XML or KVN; see :func:`omm_format` unless ``fmt`` is given)."""
    path = Path(path)
    text = read_text_file(path, OrbitError, "GP/OMM file", MAX_OMM_BYTES)
    fmt = fmt or omm_format(path, text)
    if fmt not in OMM_FORMATS:
        raise OrbitError(f"{brief(path)}: unknown OMM format {fmt!r}; expected one of {', '.join(OMM_FORMATS)}")
    return parse_omm_text(text, fmt, str(path))


def omm_records(constellation: Constellation) -> list[dict[str, Any]]:
    """One OMM record (CelesTrak GP JSON field names) per satellite, via ``sgp4.exporter.export_omm``."""
    out = []
    for name, sat, number in zip(constellation.names, constellation.satrecs, constellation.catalog_numbers):
        known_id = sat.intldesg[:2].isdigit()
        if not known_id:  # synthetic satellites have no international designator
            saved, sat.intldesg = sat.intldesg, "00000"
        try:
            rec = export_omm(sat, name)
        finally:
            if not known_id:
                sat.intldesg = saved
        if not known_id:
            rec["OBJECT_ID"] = "UNKNOWN"
        # export_omm dates the epoch by its two-digit year (2060 was written as 1960) and to +-1 us
        rec["EPOCH"] = satrec_epoch(sat).replace(tzinfo=None).isoformat(timespec="microseconds")
        rec["NORAD_CAT_ID"] = int(number)
        out.append(rec)
    return out


def format_omm(constellation: Constellation, fmt: str = "json") -> str:
    """OMM text of every satellite: ``json`` (CelesTrak GP layout), ``csv``, ``xml`` (CCSDS NDM) or ``kvn``."""
    records = omm_records(constellation)
    if fmt == "json":
        return json.dumps(records, indent=1) + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=list(records[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(records)
        return buf.getvalue()
    if fmt == "xml":
        root = ET.Element("ndm")
        for rec in records:
            body = ET.SubElement(ET.SubElement(root, "omm", id="CCSDS_OMM_VERS", version="2.0"), "body")
            segment = ET.SubElement(body, "segment")
            meta = ET.SubElement(segment, "metadata")
            data = ET.SubElement(segment, "data")
            groups = ((meta, _XML_META), (ET.SubElement(data, "meanElements"), _XML_MEAN),
                      (ET.SubElement(data, "tleParameters"), _XML_TLE))
            for parent, keys in groups:
                for key in keys:
                    ET.SubElement(parent, key).text = str(rec[key])
        ET.indent(root)
        return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
    if fmt == "kvn":  # one message per satellite, in the order and with the units of CCSDS 502.0-B
        created = utc_text(_dt.datetime.now(_dt.timezone.utc), "seconds", zone="")
        return "\n".join(f"CCSDS_OMM_VERS = 2.0\nCREATION_DATE = {created}\nORIGINATOR = fol-swarm\n" + "".join(
            f"{key} = {rec[key]}" + (f" [{_KVN_UNITS[key].upper() if key == 'BSTAR' else _KVN_UNITS[key]}]"
                                     if key in _KVN_UNITS else "") + "\n"
            for key in _XML_META + _XML_MEAN + _XML_TLE) for rec in records)
    raise OrbitError(f"OMM format: expected one of {', '.join(OMM_FORMATS)}, got {fmt!r}")


def write_omm(path: str | Path, constellation: Constellation, fmt: str | None = None) -> Path:
    """Write ``constellation`` as an OMM file (format from the extension, JSON by default)."""
    path = Path(path)
    fmt = fmt or (path.suffix.lower().lstrip(".") if path.suffix.lower().lstrip(".") in OMM_FORMATS else "json")
    atomic_write_text(path, format_omm(constellation, fmt))  # crash-safe: the old file or the whole new one
    return path
