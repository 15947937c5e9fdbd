"""Vectorized text tables: millions of rows of numbers formatted in numpy.

Python's ``csv`` module (or ``json.dumps`` of one dict per row) formats each
value with a Python call, about 1 us per value: a 10^7-window contact plan
takes minutes. Here every column is turned into ASCII digits with integer
arithmetic on whole arrays, written into a ``(rows, width)`` byte matrix
with 0 as padding, and the padding is dropped with one ``bytes.translate``,
so the cost is a few numpy passes per column. Rows are formatted in blocks of
:data:`BLOCK_ROWS`; a writer whose columns are computed (rounds, durations, UTC
stamps, sorted contacts) builds the pieces of one block at a time
(:func:`row_blocks`), so its temporaries are bounded by the block, not the table.

A table is a list of *pieces*, each one of:

* ``Lit(b"text")``: the same bytes on every row (separators, JSON keys);
* ``Int(values)``: integers in decimal, with a ``-`` sign where negative
  (int64, or uint64 for values up to 2**64 - 1);
* ``Fixed(values, digits, nan)``: floats with exactly ``digits`` decimals (the
  ``"%.{digits}f"`` format; ties can differ from Python's correctly rounded
  ``format`` in the last digit); NaN is written as the ``nan`` token when one
  is given (``b"nan"`` in CSV, ``b"null"`` in JSON: ranges of an imported
  plan are unknown), else refused like infinity;
* ``Lookup(table, index)``: ``table[index]``, a small set of byte strings
  (node names, calendar days) gathered per row; ``table`` may also be a
  ``(entries, width)`` uint8 array, prebuilt once (times of day).

>>> import io, numpy as np
>>> buf = io.BytesIO()
>>> write_rows(buf, [Int(np.array([3, -12])), Lit(b","), Fixed(np.array([0.5, 1234.0625]), 3),
...                  Lit(b","), Lookup([b"a", b"bb"], np.array([1, 0])), Lit(b"\\n")])
2
>>> buf.getvalue()
b'3,0.500,bb\\n-12,1234.062,a\\n'
"""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import BinaryIO, Iterator, Sequence

import numpy as np

from .errors import ContactError

__all__ = ["Lit", "Int", "Fixed", "Lookup", "write_rows", "row_blocks", "utc_pieces", "BLOCK_ROWS"]

BLOCK_ROWS = 1 << 18  # rows formatted at a time (bounded temporaries); read when a table is written
_POW10 = 10 ** np.arange(19, dtype=np.int64)


@dataclass(frozen=True)
class Lit:
    text: bytes


@dataclass(frozen=True)
class Int:
    values: np.ndarray


@dataclass(frozen=True)
class Fixed:
    values: np.ndarray
    digits: int = 3
    nan: bytes | None = None


@dataclass(frozen=True)
class Lookup:
    table: Sequence[bytes] | np.ndarray
    index: np.ndarray


_TAB4 = np.array([list(f"{i:04d}".encode()) for i in range(10_000)], dtype=np.uint8)  # 4 digits per entry
# as one uint32 per entry, then the same without leading zeros (0 bytes instead; 0 -> 4 zero bytes)
_TAB4_32 = np.concatenate([
    _TAB4.view(np.uint32).ravel(),
    np.array([list(f"{i:>4d}".replace(" ", "\0").encode()) if i else [0] * 4 for i in range(10_000)],
             dtype=np.uint8).view(np.uint32).ravel()])


def _digits(v: np.ndarray, min_digits: int = 1) -> np.ndarray:  # min_digits: 1 or 4
    """``(n, w)`` ASCII digits of non-negative int64 ``v``, leading zeros as 0 bytes.

    Four digits per step: one ``divmod`` by 10^4 and one 4-byte table gather
    (the table without leading zeros where all higher digits are zero), so a
    column costs a few passes whatever its width. ``min_digits=4`` keeps the
    lowest group's zeros (``5 -> 0005``); otherwise at least one digit.
    """
    n = v.size
    top = int(v.max()) if n else 0
    groups = max(1, -(-len(str(top)) // 4))
    out = np.empty((n, groups), dtype=np.uint32)
    rest = v
    for j in range(groups - 1, -1, -1):
        rest, r = np.divmod(rest, 10_000)
        if rest.dtype == np.uint64:  # below 2**64 / 10**4 after the first step: int64 from here on
            rest, r = rest.astype(np.int64), r.astype(np.int64)
        if j == groups - 1 and min_digits == 4:
            out[:, j] = _TAB4_32[r]
        else:  # the blank variant where every higher group is zero
            out[:, j] = _TAB4_32[r + 10_000 * (rest == 0)]
    out = out.view(np.uint8).reshape(n, 4 * groups)
    if min_digits == 1 and n:
        out[:, -1] = np.where(v == 0, np.uint8(48), out[:, -1])  # 0 is "0", not blank
    return out


def _int_bytes(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v)
    if v.dtype == np.uint64:  # HDTN's 64-bit rates: no sign
        return _digits(v)
    v = v.astype(np.int64)
    neg = v < 0
    body = _digits(np.abs(v))
    if not neg.any():
        return body
    sign = np.where(neg, np.uint8(45), np.uint8(0))[:, None]
    return np.hstack([sign, body])


def _fixed_bytes(x: np.ndarray, digits: int, nan: bytes | None = None) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    missing = np.isnan(x)
    if np.isinf(x).any() or (missing.any() and nan is None):
        raise ContactError("table export: expected finite numbers, got NaN or infinity")
    if missing.any():
        body = _fixed_bytes(np.where(missing, 0.0, x), digits)
        width = max(body.shape[1], len(nan))
        out = np.zeros((x.size, width), dtype=np.uint8)
        out[:, width - body.shape[1]:] = body
        out[missing] = 0
        out[missing, width - len(nan):] = np.frombuffer(nan, dtype=np.uint8)
        return out
    scale = 10 ** digits
    m = np.rint(np.abs(x) * scale).astype(np.int64)
    neg = (x < 0) & (m > 0)
    if digits == 3:  # the digits of m, at least 4 ("0500" for 0.5), with the point inserted
        d = _digits(m, min_digits=4)
        w = d.shape[1]
        body = np.empty((x.size, w + 1), dtype=np.uint8)
        body[:, :w - 3] = d[:, :w - 3]
        body[:, w - 3] = 46
        body[:, w - 2:] = d[:, w - 3:]
    else:
        whole = _digits(m // scale)
        parts = [whole]
        if digits:
            frac = _digits(m % scale + scale)[:, -digits:]  # fixed width, zeros kept
            parts += [np.full((x.size, 1), 46, dtype=np.uint8), frac]
        body = np.hstack(parts)
    if not neg.any():
        return body
    return np.hstack([np.where(neg, np.uint8(45), np.uint8(0))[:, None], body])


def _lookup_bytes(table: Sequence[bytes] | np.ndarray, index: np.ndarray) -> np.ndarray:
    if isinstance(table, np.ndarray):  # prebuilt (entries, width) uint8 rows
        return table[np.asarray(index)]
    width = max((len(t) for t in table), default=0)
    if width == 0:
        return np.zeros((np.size(index), 0), dtype=np.uint8)
    if any(0 in t for t in table):
        raise ContactError("table export: text with a NUL byte")
    arr = np.array(list(table), dtype=f"S{width}").view(np.uint8).reshape(len(table), width)
    return arr[np.asarray(index)]


def _block(pieces: Sequence[object], lo: int, hi: int) -> bytes:
    n = hi - lo
    cols = []
    for p in pieces:
        if isinstance(p, Lit):
            if p.text:
                cols.append(np.broadcast_to(np.frombuffer(p.text, dtype=np.uint8), (n, len(p.text))))
        elif isinstance(p, Int):
            cols.append(_int_bytes(p.values[lo:hi]))
        elif isinstance(p, Fixed):
            cols.append(_fixed_bytes(p.values[lo:hi], p.digits, p.nan))
        elif isinstance(p, Lookup):
            cols.append(_lookup_bytes(p.table, p.index[lo:hi]))
        else:  # pragma: no cover - programming error
            raise TypeError(f"unknown table piece {type(p).__name__}")
    mat = np.hstack(cols) if cols else np.zeros((n, 0), dtype=np.uint8)
    return mat.tobytes().translate(None, b"\0")  # drop the padding (a C loop over the bytes)


def row_blocks(n_rows: int, block_rows: int | None = None) -> Iterator[tuple[int, int]]:
    """``(lo, hi)`` of the consecutive blocks of at most ``block_rows`` (:data:`BLOCK_ROWS`) rows of a
    table of ``n_rows``: a writer builds each block's pieces from rows ``lo:hi`` and writes them.

    >>> list(row_blocks(5, 2))
    [(0, 2), (2, 4), (4, 5)]
    """
    step = block_rows or BLOCK_ROWS
    return ((lo, min(n_rows, lo + step)) for lo in range(0, n_rows, step))


def write_rows(fh: BinaryIO, pieces: Sequence[object], block_rows: int | None = None) -> int:
    """Write every row (the concatenation of the pieces) to binary file ``fh``, ``block_rows``
    (:data:`BLOCK_ROWS`) at a time; returns the row count."""
    sizes = {np.size(p.values) for p in pieces if isinstance(p, (Int, Fixed))}
    sizes |= {np.size(p.index) for p in pieces if isinstance(p, Lookup)}
    if len(sizes) > 1:  # pragma: no cover - programming error
        raise ValueError(f"columns of different lengths: {sorted(sizes)}")
    n = sizes.pop() if sizes else 0
    for lo, hi in row_blocks(n, block_rows):
        fh.write(_block(pieces, lo, hi))
    return n


def utc_pieces(start: _dt.datetime, t_s: np.ndarray) -> list[object]:
    """Pieces writing ``start + t_s`` as ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (UTC, milliseconds).

    >>> import io, numpy as np
    >>> buf = io.BytesIO()
    >>> write_rows(buf, utc_pieces(_dt.datetime(2025, 3, 1), np.array([0.0, 86399.9996])))
    2
    >>> buf.getvalue()
    b'2025-03-01T00:00:00.000Z2025-03-02T00:00:00.000Z'
    """
    base = start.replace(tzinfo=None)
    base_ms = (base - _dt.datetime(1970, 1, 1)) // _dt.timedelta(milliseconds=1)
    ms = base_ms + np.rint(np.asarray(t_s, dtype=np.float64) * 1000.0).astype(np.int64)
    day, rest = np.divmod(ms, 86_400_000)
    first = int(day.min()) if day.size else 0
    span = int(day.max()) - first + 1 if day.size else 0
    if span <= max(day.size, 1):  # a few calendar days: index them directly (no sort)
        days, inv = np.arange(first, first + span), day - first
    else:  # times spread over more days than there are rows
        days, inv = np.unique(day, return_inverse=True)
    labels = [(_dt.date(1970, 1, 1) + _dt.timedelta(days=int(d))).isoformat().encode() + b"T" for d in days]
    sec, milli = np.divmod(rest, 1000)
    hms, msz = _clock_tables()
    return [Lookup(labels, inv), Lookup(hms, sec), Lookup(msz, milli)]


_CLOCK: tuple[np.ndarray, np.ndarray] | None = None


def _clock_tables() -> tuple[np.ndarray, np.ndarray]:
    """``HH:MM:SS`` for every second of a day and ``.mmmZ`` for every millisecond, as uint8 rows."""
    global _CLOCK
    if _CLOCK is None:
        s = np.arange(86_400)
        two = np.array([list(f"{i:02d}".encode()) for i in range(60)], dtype=np.uint8)
        hms = np.full((86_400, 8), 58, dtype=np.uint8)  # ':' between the fields
        hms[:, 0:2] = two[s // 3600]
        hms[:, 3:5] = two[s // 60 % 60]
        hms[:, 6:8] = two[s % 60]
        msz = np.array([list(f".{i:03d}Z".encode()) for i in range(1000)], dtype=np.uint8)
        _CLOCK = (hms, msz)
    return _CLOCK
