"""Human-readable quantities.

>>> format_bytes(0), format_bytes(189_712), format_bytes(3.2e9), format_bytes(629_145, binary=True)
('0 B', '189.7 kB', '3.2 GB', '614.4 KiB')
>>> format_seconds(0.25), format_seconds(30), format_seconds(1800)
('0.25 s', '30 s', '1800 s')
>>> format_count(21600), format_count(1234.56, 1), format_count(2.16e304), format_count(float("inf"))
('21,600', '1,234.6', '2.16e+304', 'more than 1.8e+308')
"""

from __future__ import annotations

__all__ = ["format_bytes", "format_seconds", "format_count"]


def format_bytes(n: float, binary: bool = False) -> str:
    """``n`` bytes in decimal units (B, kB, MB, GB, TB), or with ``binary`` in powers of 1024 (B, KiB, MiB, GiB,
    TiB), as a memory budget counts them: whole bytes, else one decimal, so a size under a GiB reads in MiB
    (``0.6 MiB``), not as ``0.00 GiB``."""
    step, units = (1024.0, ("B", "KiB", "MiB", "GiB", "TiB")) if binary else (1000.0, ("B", "kB", "MB", "GB", "TB"))
    for unit in units[:-1]:
        if abs(n) < step:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= step
    return f"{n:.1f} {units[-1]}"


def format_seconds(s: float) -> str:
    """A duration in seconds: three significant digits under 100 s (``0.25 s``, ``1.5 s``, ``30 s``),
    whole seconds from there on (``1800 s``), so a sub-second delay never reads ``0 s``."""
    return f"{s:.0f} s" if abs(s) >= 100 else f"{s:.3g} s"


#: From this size on, :func:`format_count` writes a number in powers of ten.
_HUGE_COUNT = 1e15


def format_count(n: float, decimals: int = 0) -> str:
    """A count or amount for a one-line message: thousands separated, ``decimals`` decimals (``21,600``);
    from 10^15 on, a size no setting means (a step or a horizon many orders of magnitude off), in powers
    of ten (``2.16e+304``), not in the hundreds of digits a float of 1e304 has; past the float range
    (a ratio that overflowed), ``more than 1.8e+308``."""
    if n == float("inf"):
        return "more than 1.8e+308"
    return f"{n:.3g}" if n >= _HUGE_COUNT else f"{n:,.{decimals}f}"
