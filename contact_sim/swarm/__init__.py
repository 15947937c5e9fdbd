"""The swarm simulation: where the contact side and the learning side meet.

``fol simulate <scenario.toml>`` and ``fol demo`` run :func:`run_simulation`.
Unlike the rest of :mod:`contact_sim`, this subpackage imports torch (through
:mod:`fol`); nothing outside it does. Its names load lazily, so importing the
package (``fol --help``) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "SimulationResult": "contact_sim.swarm.runner",
    "run_simulation": "contact_sim.swarm.runner",
    "SwarmScenario": "contact_sim.swarm.scenario",
    "load_scenario": "contact_sim.swarm.scenario",
    "parse_scenario": "contact_sim.swarm.scenario",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'contact_sim.swarm' has no attribute {name!r}")
