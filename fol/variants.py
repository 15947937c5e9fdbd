"""FOL's variants by name (docs/fol-algorithm.md), in a module light enough for ``fol --help``.

``VARIANTS[name] = (runs alignment pruning, deploys the ensemble instead of the
student)``; ``local`` deploys the pretrained model and collects nothing.
:data:`PRESET_NAMES` lists the FOL configuration presets of :mod:`fol.config`.
"""

VARIANTS: dict[str, tuple[bool, bool]] = {
    "fol": (True, False),
    "fol-a": (True, True),
    "fol-n": (False, False),
    "fol-an": (False, True),
}

ALL_VARIANTS: tuple[str, ...] = ("local", *VARIANTS)

#: Names of ``fol.config.PRESETS`` (the project default first), for the CLI.
PRESET_NAMES: tuple[str, ...] = ("default", "paper")

__all__ = ["VARIANTS", "ALL_VARIANTS", "PRESET_NAMES"]
