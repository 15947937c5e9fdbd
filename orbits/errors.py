"""The one error type of the :mod:`orbits` package."""

from __future__ import annotations

from sgp4.api import SGP4_ERRORS


class OrbitError(Exception):
    """A user-facing orbit error: bad constellation parameters, a malformed TLE
    line, a propagation failure. The message is one line naming the file, field
    or satellite and what was expected."""


def sgp4_reason(code: int) -> str:
    """SGP4's own words for its error ``code`` (``sgp4.api.SGP4_ERRORS``), for the messages of
    elements it refuses and of propagation that fails (``semilatus rectum is less than zero``
    for code 4)."""
    return SGP4_ERRORS.get(code, "unknown error")


def check_elements(sat, where: str) -> None:
    """Raise :class:`OrbitError` ``"<where>: SGP4 rejected the elements (error N: <reason>)"`` when
    sgp4 refused the elements it was given for ``sat`` (its ``error`` is set), as the TLE and OMM
    readers and the Walker shells report it (``gp.json: record 0: SGP4 rejected the elements
    (error 4: semilatus rectum is less than zero)``)."""
    if sat.error:
        raise OrbitError(f"{where}: SGP4 rejected the elements (error {sat.error}: {sgp4_reason(sat.error)})")
