"""The contact plan's and the battery's stated rules against slow, obviously-correct references.

Each reference steps through time on a grid (the plan in ticks of 1/8 s, the battery in steps of
1/4 s) and applies the rules literally as contact_sim/plan.py and contact_sim/energy.py state them;
random small cases (windows overlapping, touching, straddling round boundaries, one-way and two-way,
zero-length, shorter than the acquisition; batteries empty or full, never sunlit, costs above the
capacity, bookings out of time order, overlapping eclipses) compare them with the real code, and
a battery-delayed transfer of the simulation (plan_deliveries) with the best affordable tick. All
the plan's times, rates and sizes are whole ticks, so the two agree exactly.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contact_sim import ContactError, ContactPlan, LinkModel, WindowTable
from contact_sim.energy import Battery, EnergyModel
from contact_sim.windows import A_TO_B, B_TO_A, BOTH

CASES = settings(max_examples=60, deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.too_slow])
TICK = 1 / 8  # s: the plan reference's grid


# ------------------------------------------------------------------ contact plan


class RefPlan:
    """The plan's rules, tick by tick: a window carries ``bpt`` bytes in each tick of its part inside
    the round, after ``acq`` ticks of acquisition, paid once per window, direction and round (again
    when a transfer is held back past where it could start); transfers on a window and direction
    follow each other."""

    def __init__(self, windows, bounds, acq):
        self.windows = windows  # (a, b, start tick, end tick, bytes per tick, direction), table order
        self.bounds = bounds  # round boundaries (ticks)
        self.acq = acq  # acquisition (ticks)
        self.busy: dict[tuple[int, int, int, int], int] = {}  # (window, src, dst, round) -> end tick

    def _carries(self, i, src, dst):
        a, b, _, _, _, d = self.windows[i]
        return {a, b} == {src, dst} and (d == BOTH or (d == A_TO_B) == (src == a))

    def _try(self, i, src, dst, r, size, not_before):
        """(finish, start, end, capacity) of ``size`` bytes ``src -> dst`` on window ``i`` in round ``r``."""
        _, _, ws, we, bpt, _ = self.windows[i]
        lo, hi = max(ws, self.bounds[r]), min(we, self.bounds[r + 1])
        start, acquired = lo, False
        if (i, src, dst, r) in self.busy:
            start, acquired = max(start, self.busy[i, src, dst, r]), True
        if not_before is not None and not_before > start:
            start, acquired = not_before, False
        if start >= hi or bpt == 0:
            return None
        wait = 0 if acquired else self.acq
        cap = bpt * max(hi - start - wait, 0)
        t, sent = start, 0
        while True:  # one tick at a time
            if wait == 0 and sent >= size:
                return (t, start, hi, cap)
            if t >= hi:
                return None
            if wait:
                wait -= 1
            else:
                sent += bpt
            t += 1

    def _best(self, src, dst, r, size, not_before=None):
        best = None
        for i in range(len(self.windows)):
            if self._carries(i, src, dst):
                got = self._try(i, src, dst, r, size, not_before)
                if got is not None and (best is None or got[0] < best[0][0]):
                    best = (got, i)
        return best

    def deliverable(self, k, r, size):
        rows = []
        for nb in sorted({n for a, b, *_ in self.windows for n in (a, b) if k in (a, b)} - {k}):
            best = self._best(nb, k, r, size)
            if best is not None:
                (finish, start, end, cap), _ = best
                rows.append((finish, nb, start, end, cap))
        return [(nb, start, end, cap, finish) for finish, nb, start, end, cap in sorted(rows)]

    def schedule(self, src, dst, r, size, not_before=None):
        best = self._best(src, dst, r, size, not_before)
        if best is None:
            return None
        (finish, start, _, _), i = best
        self.busy[i, src, dst, r] = finish
        return (start, finish, i)


def _random_plan(rng):
    n = int(rng.integers(2, 5))
    n_rounds = int(rng.integers(1, 4))
    bounds = np.cumsum(rng.integers(1, 60, n_rounds + 1)) - int(rng.integers(0, 2))
    acq = int(rng.choice([0, 0, 1, 3, 8, 20]))
    rows = []
    for _ in range(int(rng.integers(1, 7))):
        a, b = sorted(rng.choice(n, 2, replace=False).tolist())
        start = int(rng.integers(bounds[0] - 5, bounds[-1] + 2))
        if rows and rng.random() < 0.3:  # touching an earlier window, or at a round boundary
            start = int(rng.choice([rows[-1][3], *bounds]))
        length = int(rng.choice([0, 1, acq, acq + 1, int(rng.integers(1, 80))]))
        bpt = int(rng.choice([0, 1, 2, 5, 40])) if length else 0  # a zero-length window has no rate
        rows.append((a, b, start, start + length, bpt, int(rng.choice([BOTH, BOTH, A_TO_B, B_TO_A]))))
    rows.sort(key=lambda w: (w[2], w[0], w[1]))  # the window table's order
    a, b, s, e, bpt, d = (np.array(c) for c in zip(*rows))
    volume = bpt * 8 / TICK * (e - s) * TICK  # bits: mean rate = bpt * 64 bit/s
    table = WindowTable(a, b, s * TICK, e * TICK, np.ones(a.size), np.ones(a.size), volume, direction=d)
    plan = ContactPlan([f"n{i}" for i in range(n)], table, LinkModel("plan", acquisition_s=acq * TICK),
                       bounds * TICK)
    return plan, RefPlan(rows, bounds.tolist(), acq), n, n_rounds


def _code_rows(plan, k, r, size):
    arrivals = plan.arrivals(k, r, size)
    rows = plan.deliverable(k, r, size)
    assert [nb for nb, _ in arrivals] == [nb for nb, _ in rows]
    return [(nb, w.t_start_s / TICK, w.t_end_s / TICK, w.capacity_bytes, t / TICK)
            for (nb, w), (_, t) in zip(rows, arrivals)]


@CASES
@given(st.integers(0, 2**32 - 1))
def test_contact_plan_matches_a_tick_by_tick_reference(seed) -> None:
    rng = np.random.default_rng(seed)
    plan, ref, n, n_rounds = _random_plan(rng)
    for _ in range(12):
        src, dst = (int(x) for x in rng.choice(n, 2, replace=False))
        r = int(rng.integers(n_rounds))
        size = 40 * int(rng.choice([0, 1, 2, 3, 5, 40]))  # whole ticks of every window's rate
        for k in range(n):  # every node's offers, as the simulation ranks them
            assert _code_rows(plan, k, r, size) == ref.deliverable(k, r, size), (k, r, size)
        not_before = int(rng.integers(ref.bounds[r] - 2, ref.bounds[r + 1] + 2)) if rng.random() < 0.3 else None
        want = ref.schedule(src, dst, r, size, not_before)
        nb_s = None if not_before is None else not_before * TICK
        if want is None:
            assert plan.earliest_transfer(src, dst, r, size, nb_s) is None
            try:
                plan.schedule(src, dst, r, size, nb_s)
            except ContactError:
                continue
            raise AssertionError(f"scheduled {src}->{dst} in round {r}: the reference finds no window")
        tr = plan.schedule(src, dst, r, size, nb_s)
        assert (tr.t_start_s / TICK, tr.t_end_s / TICK, tr.window_index) == want, (src, dst, r, size, not_before)


# ------------------------------------------------------------------ battery

STEP = 0.25  # s: the battery reference's grid


class RefBattery:
    """The energy rules literally: level from ``initial_charge x capacity`` at 0 s, per step (split at
    bookings) + (solar - idle) W when sunlit at the step's middle, - idle W otherwise, clamped to
    [0, capacity]; each booking (in time order, later bookings at the same time after earlier ones)
    needs the level then."""

    def __init__(self, cap, initial, solar, idle, eclipses):
        self.cap, self.initial, self.solar, self.idle, self.eclipses = cap, initial, solar, idle, eclipses
        self.spends: list[tuple[float, float]] = []

    def _power(self, t):
        return (0.0 if any(a <= t < b for a, b in self.eclipses) else self.solar) - self.idle

    def _run(self, spends, until=None):
        """(smallest margin level - cost over the bookings, level at ``until``)."""
        level, t, margin = self.initial * self.cap, 0.0, math.inf
        spends = sorted(spends, key=lambda s: s[0])
        events = [s[0] for s in spends] + ([until] if until is not None else [])
        end = max(events, default=0.0)
        k = 0
        while True:
            while k < len(spends) and spends[k][0] <= t:
                margin = min(margin, level - spends[k][1])
                level -= spends[k][1]
                k += 1
            if t >= end:
                return margin, level
            nxt = min([math.floor(t / STEP + 1e-9) * STEP + STEP] + [e for e in events if e > t])
            level = min(max(level + self._power((t + nxt) / 2) * (nxt - t), 0.0), self.cap)
            t = nxt

    def margin(self, t, joules):
        return self._run(self.spends + [(t, joules)])[0]

    def level_at(self, t):
        return self._run([s for s in self.spends if s[0] <= t], until=t)[1]


def _random_battery(rng, cap_j, solar, idle, initial, j_per_byte=0.0):
    n = int(rng.integers(0, 4))
    starts = rng.choice(np.arange(-2.0, 24.0, 0.5), n).tolist()
    eclipses = [(a, a + float(rng.choice(np.arange(0.5, 12.0, 0.5)))) for a in starts]  # may overlap
    if rng.random() < 0.15:
        eclipses = [(-1.0, 60.0)]  # never sunlit over the times the case looks at
    model = EnergyModel(battery_wh=cap_j / 3600.0, solar_w=solar, idle_w=idle, initial_charge=initial,
                        j_per_byte=j_per_byte)
    return Battery(model, eclipses), RefBattery(model.capacity_j, initial, solar, idle, eclipses)


@settings(CASES, max_examples=35)
@given(st.integers(0, 2**32 - 1))
def test_battery_matches_a_step_by_step_reference(seed) -> None:
    rng = np.random.default_rng(seed)
    cap_j = float(rng.choice([4.0, 10.0, 36.0]))
    solar, idle = float(rng.choice([0.0, 1.0, 2.0, 4.0])), float(rng.choice([0.0, 0.0, 1.0]))
    initial = float(rng.choice([0.0, 0.0, 0.5, 1.0]))
    code, ref = _random_battery(rng, cap_j, solar, idle, initial)
    for _ in range(8):
        t_from = float(rng.integers(0, 40)) * STEP
        joules = float(rng.choice([0.0, 1.0, 2.0, 3.5, cap_j, cap_j + 1.0]))
        if rng.random() < 0.5:  # book at a grid time, in no particular order
            m = ref.margin(t_from, joules)
            if m >= 0.0 or m < -1e-6:
                assert code.can_spend(t_from, joules) == (m >= 0.0), (t_from, joules, m)
            if code.can_spend(t_from, joules):
                code.spend(t_from, joules)
                ref.spends.append((t_from, joules))
            continue
        until = float(rng.choice([t_from + 4.0, 30.0, math.inf]))
        got = code.earliest(t_from, joules, until)
        ticks = np.arange(t_from, min(until, 30.0) + 1e-9, STEP)
        feasible = [t for t in ticks.tolist() if ref.margin(t, joules) >= -1e-9]
        if got is None:
            assert not feasible or joules > cap_j, (t_from, joules, until, feasible[:1])
            continue
        assert t_from <= got <= until
        assert ref.margin(got, joules) >= -1e-6, (t_from, joules, got)
        assert not [t for t in feasible if t < got - 1e-6], (t_from, joules, got, feasible[:1])  # none earlier
        assert abs(code.level_at(got) - ref.level_at(got)) < 1e-6
        code.spend(got, joules)  # booked, as the simulation books what earliest() finds
        ref.spends.append((got, joules))
    for t in np.arange(0.0, 12.0, 0.75).tolist():
        assert abs(code.level_at(t) - ref.level_at(t)) < 1e-6, t


@CASES
@given(st.integers(0, 2**32 - 1))
def test_a_battery_delayed_transfer_finishes_no_later_than_any_affordable_tick(seed) -> None:
    """plan_deliveries with the sender's battery: the transfer it books is affordable when it starts,
    and ends no later than the best start on the plan's tick grid at which the reference plan can carry
    it and the reference battery can pay; none at all only if no tick offers both."""
    from fol.simulation.runner import plan_deliveries

    rng = np.random.default_rng(seed)
    plan, ref, n, n_rounds = _random_plan(rng)
    r = int(rng.integers(n_rounds))
    size = 40 * int(rng.choice([1, 2, 3]))
    battery, ref_battery = _random_battery(rng, float(rng.choice([10.0, 36.0])), float(rng.choice([1.0, 4.0])),
                                           float(rng.choice([0.0, 1.0])), float(rng.choice([0.0, 0.5])), 0.05)
    joules = size * 0.05
    for _ in range(int(rng.integers(0, 3))):  # earlier bookings the transfer must leave affordable
        t, cost = float(rng.integers(0, 60)) * STEP, float(rng.choice([1.0, 3.0]))
        if battery.can_spend(t, cost):
            battery.spend(t, cost)
            ref_battery.spends.append((t, cost))
    src, dst = (int(x) for x in rng.choice(n, 2, replace=False))
    options = []
    for tick in range(ref.bounds[r], ref.bounds[r + 1] + 1):
        if ref_battery.margin(tick * TICK, joules) < -1e-9:
            continue
        for i in range(len(ref.windows)):
            if ref._carries(i, src, dst):
                got = ref._try(i, src, dst, r, size, tick)
                if got is not None:
                    options.append(got[0] * TICK)
    # only src's model can move (into dst), and only in round r
    sizes = [[size if e == r else 10**9, 10**9] for e in range(r + 1)]
    plan_deliveries(plan, [src, dst], sizes, r + 1, 1, {src: battery}, [])
    sent = [t for t in plan.transfers if (t.src, t.dst, t.round) == (src, dst, r)]
    if not sent:
        assert not options, (src, dst, r, min(options))
        return
    [tr] = sent
    assert ref_battery.margin(tr.t_start_s, joules) >= -1e-6
    assert tr.t_end_s <= min(options, default=math.inf) + 1e-6, (tr, min(options, default=None))
