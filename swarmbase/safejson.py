"""Bounded JSON for untrusted text (model cards, protocol headers, the files users give).

:func:`loads` parses standard JSON only (``NaN`` / ``Infinity`` are refused
unless ``allow_nan`` is given, as for a run folder's result files, which
hold them; an object that gives a key twice is always refused, since readers
resolve it differently)
and then checks, without recursion, that the value is at most ``max_depth``
containers deep and holds at most ``max_items`` values in all. Text whose
commas outside strings (a lower bound of its values) already pass
``max_items`` is refused before it is parsed, so that a short text of many
tiny values (``[{},{},...]``: 3 bytes a Python object) is not built first. Deeply nested
input can therefore never reach code that walks it recursively (``repr``,
``==``, ``json.dumps``) and end in a ``RecursionError``. Every failure is a
:class:`ValueError` with a one-line message; callers turn it into their own
project error. Imports nothing heavy (the agent's protocol uses it too).

>>> loads('{"a": [1, 2, {"b": null}]}', max_depth=3)
{'a': [1, 2, {'b': None}]}
>>> loads('[[[[0]]]]', max_depth=3)
Traceback (most recent call last):
...
ValueError: nested deeper than 3 levels
>>> loads('{"EPOCH": 1, "EPOCH": 2}', max_depth=1)
Traceback (most recent call last):
...
ValueError: duplicate key 'EPOCH' in a JSON object
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

__all__ = ["loads", "check_bounds"]


class _Refused(ValueError):
    """A refusal of this module's own (its message is final), not one of the parser's."""


def _reject_constant(name: str) -> Any:
    raise _Refused(f"non-standard JSON constant {name}")


def _finite_float(text: str) -> float:
    """A JSON number's float, refused when it overflows to infinity (``1e999``): standard JSON
    has no infinite number, and ``allow_nan`` is what admits one (written ``Infinity``)."""
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _Refused(f"number {text[:40]} is beyond the largest float")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)  # in C; fewer keys than pairs when a key is given twice, named below
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _Refused(f"duplicate key {key[:60]!r} in a JSON object")
            seen.add(key)
    return out


#: The text up to the next comma outside strings: runs of anything but a quote or a comma, and JSON
#: strings (escapes included; one left open runs to the end). Every quantifier is possessive, so that
#: a match keeps no state to backtrack to (a plain ``*`` over 4 million adjacent strings held about
#: 1.9 GB) and a pass over any text is linear, in C.
_SEGMENT = re.compile(r'(?:[^",]++|"[^"\\]*+(?:\\.[^"\\]*+)*+(?:"|\\?\Z))*+', re.DOTALL)


def _commas_outside_strings(text: str, stop: int) -> int:
    """The commas of ``text`` outside its JSON strings, counted up to ``stop`` at least; no copy of
    the text is made (removing the strings with ``re.sub`` built one from a piece per string: about
    six times an 8 MiB header's size, allocated to refuse it), and Python steps once per comma
    counted, not once per string (8 MiB of adjacent empty strings took 1.9 s so, 0.2 s now)."""
    count = 0
    at = _SEGMENT.match(text).end()
    while at < len(text):  # text[at] is a comma outside the strings
        count += 1
        if count >= stop:
            return count
        at = _SEGMENT.match(text, at + 1).end()
    return count


#: The decoders of :func:`loads`, by ``allow_nan``, made once: ``json.loads`` given any option builds a
#: ``JSONDecoder`` and its scanner at every call, a tenth of the time of a positions.jsonl line's parse. The
#: module shares one across threads as ``json.loads`` shares its own default decoder.
_DECODERS = {False: json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float,
                                     object_pairs_hook=_unique_keys),
             True: json.JSONDecoder(object_pairs_hook=_unique_keys)}


def loads(text: str | bytes, *, max_depth: int, max_items: int = 100_000, allow_nan: bool = False) -> Any:
    """Parse ``text`` and check it with :func:`check_bounds`; :class:`ValueError` on any problem.
    ``allow_nan`` takes ``NaN``, ``Infinity`` and ``-Infinity`` (as :func:`json.dumps` writes them)."""
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        # n commas outside strings separate at least n + 1 values: too many is refused unparsed
        if text.count(",") >= max_items and _commas_outside_strings(text, stop=max_items) >= max_items:
            raise _Refused(f"holds more than {max_items} values")
        if text.startswith("\ufeff"):  # as json.loads refuses it
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        value = _DECODERS[bool(allow_nan)].decode(text)
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 ({exc.reason} at byte {exc.start})") from None
    except RecursionError:
        raise ValueError(f"nested deeper than {max_depth} levels") from None
    except (_Refused, json.JSONDecodeError) as exc:
        raise ValueError(" ".join(str(exc).split())) from None
    except ValueError:  # int() refuses more than sys.get_int_max_str_digits() digits
        raise ValueError(f"an integer longer than {sys.get_int_max_str_digits():,} digits") from None
    check_bounds(value, max_depth=max_depth, max_items=max_items)
    return value


def check_bounds(value: Any, *, max_depth: int, max_items: int = 100_000) -> None:
    """:class:`ValueError` if ``value`` (parsed JSON) nests containers deeper than
    ``max_depth`` or holds more than ``max_items`` values. Iterative: safe on any depth.

    >>> check_bounds({"a": {"b": 1}}, max_depth=2)
    >>> check_bounds([0] * 10, max_depth=1, max_items=5)
    Traceback (most recent call last):
    ...
    ValueError: holds more than 5 values
    """
    if not _within(value, max_depth, max_items):
        _refuse_first_excess(value, max_depth, max_items)


def _within(value: Any, max_depth: int, max_items: int) -> bool:
    """Whether ``value`` is within both bounds: the containers only are visited, a level at a time, each
    adding its children to the count at once (a positions.jsonl line holds 3 containers among its 25
    values), where :func:`_refuse_first_excess` counts every value in turn. It stops at the first level
    too deep that holds a container or once the count passes ``max_items``, so that it takes no longer
    than that walk."""
    count = 1
    level = [value] if isinstance(value, (dict, list)) else []
    depth = 0
    while level:
        if depth >= max_depth:
            return False
        below: list[Any] = []
        for item in level:
            children = item.values() if isinstance(item, dict) else item
            count += len(children)
            if count > max_items:
                return False
            below += [child for child in children if isinstance(child, (dict, list))]
        level, depth = below, depth + 1
    return count <= max_items


def _refuse_first_excess(value: Any, max_depth: int, max_items: int) -> None:
    """The walk that names the bound ``value`` passes first, every value counted in turn (a too deep
    container found before the count passes ``max_items`` is refused as too deep; else as too many)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    count = 0
    while stack:
        item, depth = stack.pop()
        count += 1
        if count > max_items:
            raise ValueError(f"holds more than {max_items} values")
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth >= max_depth:
            raise ValueError(f"nested deeper than {max_depth} levels")
        stack.extend((child, depth + 1) for child in children)
