"""PackBits (TIFF compression 32773, Apple's MacPaint run-length code), decoded
into a buffer of a given size, never past it.

A strip or tile is a series of runs, each one header byte ``h`` followed by
its data: ``h`` in 0..127 copies the next ``h + 1`` bytes, ``h`` in 129..255
repeats the next byte ``257 - h`` times, and 128 is no run. Two bytes can
stand for 128, so a 4 MB strip can decode to 256 MB: decoding into a buffer
of the size the strip's tags say it holds bounds it. The loop over the
headers runs compiled (numba, cached on disk where numba can write its cache:
:func:`swarmbase.jit.cached_njit`): 8 MB of one-byte runs (8 million headers)
take about 10 ms, where a Python loop over them takes about 2 s.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from swarmbase.jit import cached_njit

#: What :func:`unpack_bits` returns for runs that hold more than the buffer (nothing is written past it).
TOO_LONG = -1


@cached_njit(njit, nogil=True)
def unpack_bits(data: np.ndarray, out: np.ndarray) -> tuple[int, bool]:
    """``data`` (``uint8``, PackBits runs) decoded into ``out`` (``uint8``):
    ``(bytes written, whether the last run is cut short)``, or ``(TOO_LONG, _)``
    as soon as the runs hold more than ``out`` (nothing is written past it).
    A run cut short by the end of ``data`` gives what it holds, as tifffile's
    own decoder does: a literal the bytes there are, a repeat without its byte
    nothing."""
    n, size = data.size, out.size
    i = 0
    written = 0
    while i < n:
        header = data[i]
        i += 1
        if header < 128:  # a literal of header + 1 bytes
            count = min(header + 1, n - i)
            if written + count > size:
                return TOO_LONG, False
            for k in range(count):
                out[written + k] = data[i + k]
            written += count
            i += count
            if count < header + 1:
                return written, True
        elif header > 128:  # the next byte, 257 - header times
            if i == n:
                return written, True
            count = 257 - header
            if written + count > size:
                return TOO_LONG, False
            value = data[i]
            for k in range(count):
                out[written + k] = value
            written += count
            i += 1
    return written, False
