"""Human-readable quantities.

>>> format_bytes(0), format_bytes(189_712), format_bytes(3.2e9)
('0 B', '189.7 kB', '3.2 GB')
>>> format_seconds(0.25), format_seconds(30), format_seconds(1800)
('0.25 s', '30 s', '1800 s')
"""

from __future__ import annotations

__all__ = ["format_bytes", "format_seconds"]


def format_bytes(n: float) -> str:
    """``n`` bytes in decimal units (B, kB, MB, GB, TB): whole bytes, else one decimal."""
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000.0
    return f"{n:.1f} TB"


def format_seconds(s: float) -> str:
    """A duration in seconds: three significant digits under 100 s (``0.25 s``, ``1.5 s``, ``30 s``),
    whole seconds from there on (``1800 s``), so a sub-second delay never reads ``0 s``."""
    return f"{s:.0f} s" if abs(s) >= 100 else f"{s:.3g} s"
