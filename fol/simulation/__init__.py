"""The swarm simulation: where the contact side and the learning side meet.

``fol simulate <scenario.toml>`` and ``fol demo`` run :func:`run_simulation`.
It is the one part of :mod:`fol` that imports :mod:`orbits` and
:mod:`contact_sim`; the learning core never does, and the contact side never
imports :mod:`fol` or torch. Its names load lazily, so importing the package
(``fol --help``) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "SimulationResult": "fol.simulation.result",
    "check_scenario": "fol.simulation.check",
    "run_simulation": "fol.simulation.runner",
    "SwarmScenario": "fol.simulation.scenario",
    "load_scenario": "fol.simulation.scenario",
    "parse_scenario": "fol.simulation.scenario",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'fol.simulation' has no attribute {name!r}")
