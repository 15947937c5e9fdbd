"""What one simulation run returns: the output folder, one result row per
(seed, node, method), the contact plan, the rounds each method used and, with
``[energy]``, the energy summary of the first seed."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from contact_sim.plan import ContactPlan

__all__ = ["SimulationResult"]


@dataclass
class SimulationResult:
    out: Path
    results: list[dict[str, Any]]  # one row per (seed, node, method)
    plan: ContactPlan
    rounds_used: dict[str, int]  # per method, the most over seeds
    seconds: float  # wall time, with the earlier sessions' of a resumed run (earlier_seconds)
    transfers: list[dict[str, Any]] = field(default_factory=list)  # every seed's, with a "seed" key
    energy: dict[str, Any] | None = None  # per-node energy and transfers that waited (when [energy] is on)
    # wall time of the sessions before --resume (up to their last saved result); 0 for a run that was not
    # resumed, None when they recorded none (then ``seconds`` is the resumed part's only)
    earlier_seconds: float | None = 0.0
