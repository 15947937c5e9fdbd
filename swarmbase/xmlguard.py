"""XML from users, read without entity expansion.

A document type declaration (``<!DOCTYPE ...>``) is the only place an XML
file can define entities, and the standard library's parsers expand the
internal ones: a few hundred bytes of nested declarations (the "billion
laughs") become megabytes of text before expat's own amplification limit
(8 MiB) stops them. No OMM or GPX file has a document type, so the readers
of this project refuse one: :func:`refuse_doctype` scans a document's prolog
(up to its root element, so a large file costs next to nothing) and raises
the caller's error type naming the line.

>>> refuse_doctype(b'<?xml version="1.0"?><gpx/>', "ok.gpx", ValueError)
>>> refuse_doctype(b'<!DOCTYPE x [<!ENTITY a "b">]><x>&a;</x>', "lol.xml", ValueError)
Traceback (most recent call last):
ValueError: lol.xml:1: a document type declaration (<!DOCTYPE); this file kind has none, and entities are not expanded
>>> refuse_doctype(b'<?xml version="1.0" encoding="UTF-1"?><gpx/>', "odd.gpx", ValueError)
Traceback (most recent call last):
ValueError: odd.gpx:1: the XML declaration names an encoding Python does not know ('UTF-1')
>>> refuse_doctype(b'<?xml version="1.0" encoding="Shift_JIS"?><gpx/>', "jp.gpx", ValueError)
Traceback (most recent call last):
ValueError: jp.gpx:1: the XML declaration names a multi-byte encoding the XML parser cannot read ('Shift_JIS'); save the file as UTF-8
"""

from __future__ import annotations

import codecs
from typing import Any
from xml.parsers import expat

from swarmbase.tomlcheck import shown


class _RootReached(Exception):
    """The prolog is over: no document type declaration can follow."""


class _Declared(Exception):
    """A document type or entity declaration, on the line it holds (raised out of the parser as is,
    whatever exceptions the caller's ``error`` type derives from)."""


def refuse_doctype(data: bytes | str, source: str, error: type[Exception]) -> None:
    """Raise ``error`` ("``source``:line: a document type declaration ...") when ``data``
    declares a document type or an entity before its root element, or names an encoding
    Python cannot decode (the standard library's parsers raise a bare ``LookupError`` for
    it) or a multi-byte one expat cannot read (Shift_JIS, UTF-32 ...: a bare ``ValueError``).
    Other malformed XML is left to the caller's own parser and its message."""
    parser = expat.ParserCreate()

    def refuse(*_: Any) -> None:
        raise _Declared(parser.CurrentLineNumber)

    def root(*_: Any) -> None:
        raise _RootReached

    declared: list[str] = []

    def declaration(_version: str | None, encoding: str | None, _standalone: int) -> None:
        if encoding:  # expat ignores it in text already decoded, ElementTree does not
            declared.append(encoding)
            codecs.lookup(encoding)
            if isinstance(data, str):  # the check expat makes of bytes, which ElementTree parses text as
                try:
                    expat.ParserCreate().Parse(f'<?xml version="1.0" encoding="{encoding}"?><x/>'.encode(), True)
                except expat.ExpatError:  # UTF-16 (not what these bytes are): read by expat, not refused here
                    pass

    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.StartElementHandler = root
    parser.XmlDeclHandler = declaration
    try:
        parser.Parse(data, True)
    except (_RootReached, expat.ExpatError):
        return
    except _Declared as at:
        raise error(f"{source}:{at.args[0]}: a document type declaration (<!DOCTYPE); this file kind has none, "
                    "and entities are not expanded") from None
    except LookupError as exc:  # "unknown encoding: NAME"
        name = str(exc).partition(": ")[2] or str(exc)
        raise error(f"{source}:1: the XML declaration names an encoding Python does not know "
                    f"({shown(name)})") from None
    except ValueError:  # "multi-byte encodings are not supported": expat reads UTF-8, UTF-16 and 8-bit ones
        raise error(f"{source}:1: the XML declaration names a multi-byte encoding the XML parser cannot read "
                    f"({shown(declared[0] if declared else '?')}); save the file as UTF-8") from None


__all__ = ["refuse_doctype"]
