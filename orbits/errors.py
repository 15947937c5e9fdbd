"""The one error type of the :mod:`orbits` package."""

from __future__ import annotations


class OrbitError(Exception):
    """A user-facing orbit error: bad constellation parameters, a malformed TLE
    line, a propagation failure. The message is one line naming the file, field
    or satellite and what was expected."""
