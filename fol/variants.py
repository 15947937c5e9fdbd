"""FOL's variants by name (docs/fol-algorithm.md), in a module light enough for ``fol --help``.

``VARIANTS[name] = (runs alignment pruning, deploys the ensemble instead of the
student)``; ``local`` deploys the pretrained model and collects nothing.
"""

VARIANTS: dict[str, tuple[bool, bool]] = {
    "fol": (True, False),
    "fol-a": (True, True),
    "fol-n": (False, False),
    "fol-an": (False, True),
}

ALL_VARIANTS: tuple[str, ...] = ("local", *VARIANTS)

__all__ = ["VARIANTS", "ALL_VARIANTS"]
