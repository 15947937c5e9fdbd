"""The one error type of the :mod:`fol` package.

Every mistake a user can cause (a bad file, a bad configuration field, a bad
payload, data that is too small) raises :class:`FOLError` or one of its
subclasses, with a one-line message that names the file or field and says what
was expected. The CLI prints that line and exits non-zero, without a traceback.
"""

from __future__ import annotations


class FOLError(Exception):
    """A user-facing error of the learning side (models, checkpoints, data, FOL)."""


class CheckpointError(FOLError):
    """A model file or payload failed validation (never partially loaded)."""


class DataError(FOLError):
    """A dataset is missing, malformed, or too small for what was asked."""


class ConfigError(FOLError):
    """A configuration field is unknown or has an invalid value."""


class TrainingError(FOLError):
    """Training diverged (a non-finite loss), typically from a too large learning rate."""
