"""The one error type of the :mod:`contact_sim` package."""

from __future__ import annotations


class ContactError(Exception):
    """A user-facing contact-simulation error: bad scenario key or value, bad
    waypoint file, impossible request. One line naming the file/field and what
    was expected."""
