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
"""

from __future__ import annotations

import codecs
from typing import Any
from xml.parsers import expat


class _RootReached(Exception):
    """The prolog is over: no document type declaration can follow."""


def refuse_doctype(data: bytes | str, source: str, error: type[Exception]) -> None:
    """Raise ``error`` ("``source``:line: a document type declaration ...") when ``data``
    declares a document type or an entity before its root element, or names an encoding
    Python cannot decode (the standard library's parsers raise a bare ``LookupError`` for
    it). Other malformed XML is left to the caller's own parser and its message."""
    parser = expat.ParserCreate()

    def refuse(*_: Any) -> None:
        raise error(f"{source}:{parser.CurrentLineNumber}: a document type declaration (<!DOCTYPE); this file "
                    "kind has none, and entities are not expanded")

    def root(*_: Any) -> None:
        raise _RootReached

    def declaration(_version: str | None, encoding: str | None, _standalone: int) -> None:
        if encoding:  # expat ignores it in text already decoded, ElementTree does not
            codecs.lookup(encoding)

    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.StartElementHandler = root
    parser.XmlDeclHandler = declaration
    try:
        parser.Parse(data, True)
    except (_RootReached, expat.ExpatError):
        return
    except LookupError as exc:  # "unknown encoding: NAME"
        name = str(exc).partition(": ")[2] or str(exc)
        raise error(f"{source}:1: the XML declaration names an encoding Python does not know "
                    f"({name[:40]!r}{'...' if len(name) > 40 else ''})") from None


__all__ = ["refuse_doctype"]
