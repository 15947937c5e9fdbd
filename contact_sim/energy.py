"""Per-node energy: a battery charged by solar power in sunlight, drained by an idle load,
and spent by training (J per FLOP) and transmission (J per byte).

The model (close to the power model of ESA's PASEOS simulator): each node has
a battery of ``battery_wh`` (stored in joules), starts at ``initial_charge``
of it, gains ``solar_w - idle_w`` watts while sunlit and loses ``idle_w``
watts in eclipse, clamped to ``[0, capacity]``. An activity costs its energy
at the moment it starts (``flops x j_per_flop`` for training, ``bytes x
j_per_byte`` for sending a model) and may start only if the battery holds
that much then, and every activity already booked later still finds enough.
A node that cannot afford a transfer when its window opens waits: in eclipse
the battery only drains, so the wait ends after enough sunlight.

Sunlight comes from :func:`orbits.sunlight.eclipse_intervals` for
satellites; nodes without an orbit (drones, ground stations' peers in an
imported plan) are taken as always sunlit; ground stations have no battery.

Example (a node 1,000 s into eclipse, empty battery, 10 W net in sunlight):
    >>> m = EnergyModel(battery_wh=1.0, solar_w=12.0, idle_w=2.0, initial_charge=0.0)
    >>> b = Battery(m, eclipses=[(0.0, 1000.0)])
    >>> b.earliest(0.0, 50.0)      # 1,000 s of eclipse, then 50 J at 10 W
    1005.0
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Sequence

from swarmbase.tomlcheck import is_finite_number

from .errors import ContactError

_EPS_J = 1e-9
#: Energy comparisons also allow this fraction of the battery's capacity: a level summed over many
#: sunlight / eclipse steps carries rounding errors of some units in the last place of the
#: capacity (7e-9 J for a 50 kWh battery), which a fixed 1e-9 J would not absorb.
_REL_EPS = 1e-12
#: Largest battery (Wh): 1 TWh, hundreds of times the largest grid storage plant; beyond it a capacity
#: could leave the float range in joules (an empty start, inf x 0, was NaN), so it is refused as a typing mistake.
MAX_BATTERY_WH = 1e12


@dataclass(frozen=True)
class EnergyModel:
    """Battery (Wh), solar power in sunlight (W), idle load (W), J per FLOP and per transmitted byte."""

    battery_wh: float
    solar_w: float
    idle_w: float
    j_per_flop: float = 0.0
    j_per_byte: float = 0.0
    initial_charge: float = 1.0

    def __post_init__(self) -> None:
        for name in ("battery_wh", "solar_w", "idle_w", "j_per_flop", "j_per_byte"):
            v = getattr(self, name)
            if not is_finite_number(v) or v < 0:
                raise ContactError(f"energy.{name}: expected a number >= 0, got {v!r}")
        if not 0 < self.battery_wh <= MAX_BATTERY_WH:
            raise ContactError(f"energy.battery_wh: expected a positive capacity of at most {MAX_BATTERY_WH:g} Wh, "
                               f"got {self.battery_wh}")
        if not 0.0 <= self.initial_charge <= 1.0:
            raise ContactError(f"energy.initial_charge: expected a fraction 0..1, got {self.initial_charge}")

    @property
    def capacity_j(self) -> float:
        return self.battery_wh * 3600.0


@dataclass
class Battery:
    """The battery of one node over the scenario (seconds from the start, joules)."""

    model: EnergyModel
    #: ``(start_s, end_s)`` intervals in shadow; overlapping or nested ones count as their union
    eclipses: Sequence[tuple[float, float]] = ()
    #: booked activities: sorted ``(t_s, joules, label)``
    spends: list[tuple[float, float, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        edges = sorted({float(x) for iv in self.eclipses for x in iv})
        self._edges = edges
        merged: list[tuple[float, float]] = []  # their union: overlapping or nested intervals are one eclipse
        for a, b in sorted((float(a), float(b)) for a, b in self.eclipses if b > a):
            if merged and a <= merged[-1][1]:
                merged[-1] = (merged[-1][0], max(merged[-1][1], b))
            else:
                merged.append((a, b))
        self._eclipses = merged
        self._tol = max(_EPS_J, _REL_EPS * self.model.capacity_j)

    def sunlit(self, t_s: float) -> bool:
        """Whether the node is in sunlight at ``t_s``."""
        i = bisect.bisect_right(self._eclipses, (t_s, math.inf)) - 1
        return not (i >= 0 and self._eclipses[i][0] <= t_s < self._eclipses[i][1])

    def _power_w(self, t_s: float) -> float:
        return (self.model.solar_w if self.sunlit(t_s) else 0.0) - self.model.idle_w

    def _advance(self, level: float, t0: float, t1: float) -> float:
        """Level at ``t1`` from ``level`` at ``t0`` with no activity in between (clamped)."""
        cap = self.model.capacity_j
        i = bisect.bisect_right(self._edges, t0)
        t = t0
        while t < t1:
            nxt = min(self._edges[i], t1) if i < len(self._edges) else t1
            level = min(max(level + self._power_w(t) * (nxt - t), 0.0), cap)
            t, i = nxt, i + 1
        return level

    def _feasible(self, spends: list[tuple[float, float, str]]) -> bool:
        level, t = self.model.initial_charge * self.model.capacity_j, 0.0
        for ts, joules, _ in spends:
            level = self._advance(level, t, ts)
            if level + self._tol < joules:
                return False
            level, t = level - joules, ts
        return True

    def level_at(self, t_s: float) -> float:
        """Battery energy (J) at ``t_s``, after the activities booked up to then."""
        level, t = self.model.initial_charge * self.model.capacity_j, 0.0
        for ts, joules, _ in self.spends:
            if ts > t_s:
                break
            level = self._advance(level, t, ts) - joules
            t = ts
        return self._advance(level, t, t_s)

    def can_spend(self, t_s: float, joules: float) -> bool:
        """Whether booking ``joules`` at ``t_s`` keeps every booked activity affordable."""
        trial = sorted(self.spends + [(float(t_s), float(joules), "")], key=lambda s: s[0])
        return self._feasible(trial)

    def spend(self, t_s: float, joules: float, label: str = "") -> None:
        """Book an activity; raises :class:`ContactError` when the battery cannot afford it."""
        if not self.can_spend(t_s, joules):
            raise ContactError(f"energy: {joules:.3g} J at {t_s:.1f} s exceeds what the battery holds")
        bisect.insort(self.spends, (float(t_s), float(joules), label), key=lambda s: s[0])

    def earliest(self, t_from: float, joules: float, t_until: float = math.inf) -> float | None:
        """Earliest ``t >= t_from`` (and ``<= t_until``) at which ``joules`` can be spent, else ``None``."""
        if joules > self.model.capacity_j + self._tol:
            return None
        t = float(t_from)
        # Each pass returns, or moves t strictly past an eclipse edge or a booking (finitely many),
        # or solves for the moment the charge reaches `joules` inside a sunlit stretch, after which
        # the level is `joules` up to rounding (far below self._tol), so the next pass returns or
        # moves past a booking: the loop ends within 2 x (edges + bookings) + 4 passes.
        for _ in range(2 * (len(self._edges) + len(self.spends)) + 4):
            if t > t_until:
                return None
            level = self.level_at(t)
            if level + self._tol >= joules:
                if self.can_spend(t, joules):
                    return t
                nxt = [s[0] for s in self.spends if s[0] > t]  # a later booking needs the energy: try after it
                t = nxt[0] if nxt else math.inf
                continue
            # charge until the level reaches `joules` (only in sunlight, at solar - idle watts)
            i = bisect.bisect_right(self._edges, t)
            seg_end = self._edges[i] if i < len(self._edges) else math.inf
            later = [s[0] for s in self.spends if s[0] > t]
            seg_end = min(seg_end, later[0]) if later else seg_end
            p = self._power_w(t)
            if p > 0 and level + p * (seg_end - t) + self._tol >= joules:
                t = t + (joules - level) / p
            elif math.isinf(seg_end):
                return None
            else:
                t = seg_end
        raise ContactError(f"energy: no time found to spend {joules:.6g} J from {t_from:.1f} s on "
                           "(a bug: the search is bounded by the eclipse edges and bookings)")  # pragma: no cover
