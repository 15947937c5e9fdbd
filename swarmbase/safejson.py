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
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _Refused(f"duplicate key {key[:60]!r} in a JSON object")
        out[key] = value
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


def loads(text: str | bytes, *, max_depth: int, max_items: int = 100_000, allow_nan: bool = False) -> Any:
    """Parse ``text`` and check it with :func:`check_bounds`; :class:`ValueError` on any problem.
    ``allow_nan`` takes ``NaN``, ``Infinity`` and ``-Infinity`` (as :func:`json.dumps` writes them)."""
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        # n commas outside strings separate at least n + 1 values: too many is refused unparsed
        if text.count(",") >= max_items and _commas_outside_strings(text, stop=max_items) >= max_items:
            raise _Refused(f"holds more than {max_items} values")
        value = json.loads(text, parse_constant=None if allow_nan else _reject_constant,
                           parse_float=None if allow_nan else _finite_float, object_pairs_hook=_unique_keys)
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
