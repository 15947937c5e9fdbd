"""Human-readable quantities.

>>> format_bytes(0), format_bytes(189_712), format_bytes(3.2e9)
('0 B', '189.7 kB', '3.2 GB')
"""

from __future__ import annotations

__all__ = ["format_bytes"]


def format_bytes(n: float) -> str:
    """``n`` bytes in decimal units (B, kB, MB, GB, TB): whole bytes, else one decimal."""
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000.0
    return f"{n:.1f} TB"
