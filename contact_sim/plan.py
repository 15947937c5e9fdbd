"""The contact plan: which neighbour can deliver what to whom, in which round.

A :class:`ContactPlan` holds the node names, the contact windows (a
:class:`~contact_sim.windows.WindowTable` with capacities from the link
model), the round boundaries (seconds from the scenario start) and the
transfers recorded so far.

Rules (this project's choices):

* A window is usable in round ``e`` only for its part inside
  ``[T_e, T_e+1)``; that part's capacity is recomputed (mean rate x
  (clipped duration - acquisition)), so a window straddling a boundary pays
  the acquisition overhead again in the next round.
* A window carries data both ways (full duplex: every window found by
  geometry) or, if imported from a DTN plan's one-way contacts, in one
  direction only (``windows.direction``); a transfer ``j -> k`` needs a
  window that carries ``j -> k`` and consumes capacity in that direction only; successive transfers on the same
  window and direction start where the previous one ended. The acquisition
  overhead is paid once per window, direction and round: a second transfer
  in the same round continues on the acquired link, one in a later round
  acquires it again, and so does one held back past where it could start
  (``not_before_s``, e.g. until the sender's battery can pay): the link is
  acquired when the transfer starts.
* ``deliverable(k, e, S)`` lists each neighbour once, with the window that
  completes a transfer of ``S`` bytes *into* ``k`` earliest; ties by neighbour id.

Example:
    >>> import numpy as np
    >>> from contact_sim.windows import WindowTable
    >>> from contact_sim.link import LinkModel
    >>> w = WindowTable([0, 0], [1, 2], [0.0, 100.0], [300.0, 200.0], [10, 10], [20, 20], [0, 0])
    >>> plan = ContactPlan(["a", "b", "c"], w, LinkModel("constant", 8e6, 10.0), [0.0, 600.0])
    >>> [(j, int(win.capacity_bytes)) for j, win in plan.deliverable(0, 0, 50_000_000)]
    [(1, 290000000), (2, 90000000)]
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from orbits import utc_text
from swarmbase.fileio import atomic_writer

from .errors import ContactError
from .link import LinkModel
from .tablewriter import Fixed, Int, Lit, Lookup, row_blocks, utc_pieces, write_rows
from .windows import A_TO_B, B_TO_A, BOTH, DIRECTION_NAMES, Window, WindowTable


def _make_window(a, b, t_start_s, t_end_s, capacity_bytes, mean_range_km, min_range_km, direction) -> Window:
    """``Window(...)`` without the frozen dataclass's per-field ``object.__setattr__``
    (:class:`Window` has no ``__post_init__``): ~1 us less per window, for millions of them."""
    win = object.__new__(Window)
    win.__dict__.update(a=a, b=b, t_start_s=t_start_s, t_end_s=t_end_s, capacity_bytes=capacity_bytes,
                        mean_range_km=mean_range_km, min_range_km=min_range_km, direction=direction)
    return win

log = logging.getLogger(__name__)

_DIRECTIONS = [name.encode() for name in DIRECTION_NAMES]  # the exports' direction column, by code
#: The last instant a ``datetime`` (and so an ISO-8601 stamp of the outputs) can hold.
LAST_UTC = _dt.datetime.max.replace(tzinfo=_dt.timezone.utc)


def check_span_end(start: _dt.datetime, duration_s: float, what: str, where: str, advice: str = "") -> None:
    """Refuse ``duration_s`` from ``start`` (``where`` names the start) that ends after the last instant a
    ``datetime`` holds, in one line led by ``what`` (the field, or a plan file's line): a plan's UTC stamps
    are its start plus its times (the horizon's from ``time.start``, an imported plan's contacts)."""
    if (LAST_UTC - start).total_seconds() < duration_s:  # no time stamp names the end
        raise ContactError(f"{what}: {duration_s:g} s from {where} {utc_text(start, 'seconds')} end after "
                           f"{utc_text(LAST_UTC, 'seconds')}, the last time an ISO-8601 UTC stamp names{advice}")


def _check_volumes(node_names: list[str], windows: WindowTable) -> None:
    """Refuse, naming the first window (its number, nodes and times) and the field, a ``volume_bits`` that is not
    a finite number >= 0: NaN made its capacity a garbage count (-2**63 bytes, with numpy's warning on the cast),
    and a negative one a negative capacity. Neither the window search (rates of a validated link model over
    finite ranges) nor an imported plan (whole bit/s rates) gives one; a plan built through the library may."""
    v = windows.volume_bits
    bad = np.flatnonzero(~((v >= 0) & (v < np.inf)))  # NaN fails every comparison
    if bad.size:
        i = int(bad[0])
        a, b = int(windows.a[i]), int(windows.b[i])
        names = (f"{node_names[a]} - {node_names[b]}" if max(a, b) < len(node_names) else f"{a} - {b}")
        raise ContactError(f"window {i} ({names}, {windows.t_start_s[i]:g} .. {windows.t_end_s[i]:g} s): "
                           f"volume_bits {v[i]:g}; expected a finite number of bits >= 0")


@dataclass(frozen=True)
class Transfer:
    """A model transfer ``src -> dst`` in ``round`` (bytes, seconds from start)."""

    src: int
    dst: int
    round: int
    size_bytes: int
    t_start_s: float
    t_end_s: float
    window_index: int


class ContactPlan:
    """Contact windows + link capacities + rounds + recorded transfers."""

    def __init__(self, node_names: Sequence[str], windows: WindowTable, link: LinkModel,
                 round_boundaries_s: Sequence[float], start: _dt.datetime | None = None,
                 node_kinds: Sequence[str] | None = None, meta: dict | None = None) -> None:
        self.node_names = list(node_names)
        self.node_ids = list(range(len(self.node_names)))
        self.node_kinds = list(node_kinds) if node_kinds is not None else ["node"] * len(self.node_names)
        self.link = link
        self.start = start
        self.meta = dict(meta or {})
        bounds = np.asarray(round_boundaries_s, dtype=float)
        if bounds.ndim != 1 or bounds.size < 2 or not np.isfinite(bounds).all() or np.any(np.diff(bounds) <= 0):
            raise ContactError("rounds: expected at least two strictly increasing finite boundaries (s)")
        self.round_boundaries_s = bounds
        self.windows = windows
        if link.needs_integration:  # the rates are read from the volumes: one that is no number of bits is refused
            _check_volumes(self.node_names, windows)
        self.windows.capacity_bytes = link.capacity_bytes(windows.duration_s, windows.volume_bits)
        self._mean_rate = link.mean_rate(windows.duration_s, windows.volume_bits)
        self.transfers: list[Transfer] = []
        # per (receiving node, round), per (window index, sender): when the last transfer on it ends
        self._busy_into: dict[tuple[int, int], dict[tuple[int, int], float]] = {}
        self._by_node: dict[int, np.ndarray] | None = None
        self._graph = None

    def without_transfers(self) -> "ContactPlan":
        """This plan with no transfer recorded: a new plan whose windows, capacities, mean rates and per-node
        index are this plan's arrays, shared, not copied (nothing but the transfers changes a plan once built),
        so a run of several seeds books each seed's transfers on its own plan without a second copy of a
        plan of millions of windows."""
        plan = object.__new__(ContactPlan)
        plan.__dict__.update(self.__dict__)
        plan.node_names, plan.node_ids, plan.node_kinds = list(self.node_names), list(self.node_ids), list(self.node_kinds)
        plan.meta = dict(self.meta)
        plan.transfers = []
        plan._busy_into = {}
        return plan

    # ------------------------------------------------------------------ basics
    @property
    def n_nodes(self) -> int:
        return len(self.node_names)

    @property
    def n_rounds(self) -> int:
        return self.round_boundaries_s.size - 1

    def round_interval(self, round: int) -> tuple[float, float]:
        """``(start, end)`` seconds of ``round`` (0-based)."""
        if not 0 <= round < self.n_rounds:
            raise ContactError(f"round: expected 0..{self.n_rounds - 1}, got {round}")
        return float(self.round_boundaries_s[round]), float(self.round_boundaries_s[round + 1])

    def round_of(self, t_s: float) -> int:
        """Round containing time ``t_s`` (-1 outside the plan)."""
        i = int(np.searchsorted(self.round_boundaries_s, t_s, side="right")) - 1
        return i if 0 <= i < self.n_rounds else -1

    def _check_node(self, node: int, what: str = "node") -> None:
        if not 0 <= int(node) < self.n_nodes:
            raise ContactError(f"{what}: expected a node id 0..{self.n_nodes - 1}, got {node}")

    def _node_index(self) -> dict[int, np.ndarray]:
        """Each node's window ids, sorted, in the smallest of int32 / int64 that holds them (8 bytes a window
        in all for up to 2**31 windows, not 16), built one end (``a``, then ``b``) at a time: the sort's int64
        order is one end's, never both ends' at once."""
        if self._by_node is None:
            w = self.windows
            dtype = np.int32 if len(w) <= np.iinfo(np.int32).max else np.int64
            runs = []
            for ends in (w.a, w.b):
                # stable: the node's window ids in order; uint16 keys (up to 65,536 nodes) let numpy use its
                # radix sort, ~2x faster
                keys = ends.astype(np.uint16) if self.n_nodes <= 1 << 16 else ends
                order = np.argsort(keys, kind="stable")
                splits = np.searchsorted(keys[order], np.arange(self.n_nodes + 1))
                runs.append((order.astype(dtype), splits))
                del keys, order
            (ids_a, at_a), (ids_b, at_b) = runs
            self._by_node = {k: np.sort(np.concatenate([ids_a[at_a[k]:at_a[k + 1]], ids_b[at_b[k]:at_b[k + 1]]]))
                             for k in range(self.n_nodes)}
        return self._by_node

    # ------------------------------------------------------------------ rounds
    def _candidates(self, node: int, round: int, size: int, src: int | None = None,
                    not_before: float | None = None) -> dict[str, np.ndarray]:
        """Windows of ``node`` (only those with ``src`` if given) that can carry
        ``size`` bytes to ``node`` inside ``round``, as arrays (vectorized over
        the node's windows): window index, neighbour, clipped start / end, remaining
        capacity and the transfer's finish time."""
        t0, t1 = self.round_interval(round)
        w = self.windows
        idx = self._node_index()[int(node)]
        idx = idx[(w.t_end_s[idx] > t0) & (w.t_start_s[idx] < t1)]
        at_a = w.a[idx] == node
        d = w.direction[idx]  # only windows that carry data into ``node``: both ways, or towards it
        into = (d == BOTH) | np.where(at_a, d == B_TO_A, d == A_TO_B)
        idx, at_a = idx[into], at_a[into]
        nb = np.where(at_a, w.b[idx], w.a[idx]).astype(np.int64)
        if src is not None:
            keep = nb == src
            idx, nb = idx[keep], nb[keep]
        start = np.maximum(w.t_start_s[idx], t0)
        end = np.minimum(w.t_end_s[idx], t1)
        acq = np.full(idx.size, float(self.link.acquisition_s))
        for (k, s_), busy in self._busy_into.get((int(node), int(round)), {}).items():  # windows in use
            hit = np.flatnonzero((idx == k) & (nb == s_))
            start[hit] = np.maximum(start[hit], busy)
            acq[hit] = 0.0  # link already acquired by an earlier transfer on this window in this round
        if not_before is not None:
            late = not_before > start
            start[late] = not_before
            acq[late] = self.link.acquisition_s  # the link is (re)acquired when the transfer starts
        rate = self._mean_rate[idx]
        cap = np.floor(rate * np.maximum(end - start - acq, 0.0) / 8.0)
        with np.errstate(divide="ignore"):
            finish = start + acq + np.where(rate > 0, size * 8.0 / np.where(rate > 0, rate, 1.0), np.inf)
        # the transfer must also end inside the window: an empty payload fits any capacity, but
        # not a window shorter than the acquisition or one of rate 0 (as record_transfer checks)
        ok = (end > start) & (cap >= size) & (finish <= end + 1e-6)
        return {"idx": idx[ok], "nb": nb[ok], "start": start[ok], "end": end[ok],
                "cap": cap[ok].astype(np.int64), "finish": finish[ok]}

    def _windows(self, c: dict[str, np.ndarray], rows: np.ndarray) -> list[Window]:
        """:class:`Window` objects of candidate rows ``rows`` (columns converted once, not per value)."""
        w, k = self.windows, c["idx"][rows]
        cols = (w.a[k].tolist(), w.b[k].tolist(), c["start"][rows].tolist(), c["end"][rows].tolist(),
                c["cap"][rows].tolist(), w.mean_range_km[k].tolist(), w.min_range_km[k].tolist(),
                w.direction[k].tolist())
        return [_make_window(*v) for v in zip(*cols)]

    def deliverable(self, node: int, round: int, size_bytes: int) -> list[tuple[int, Window]]:
        """Neighbours able to deliver ``size_bytes`` to ``node`` within ``round``.

        Returns ``[(neighbour_id, window), ...]`` ordered by the earliest
        completion time of the transfer (then neighbour id); the window is the
        part of the contact inside the round, with its remaining capacity.
        Vectorized over the node's windows.
        """
        c, best = self._best_per_neighbour(node, round, size_bytes)
        return list(zip(c["nb"][best].tolist(), self._windows(c, best)))

    def arrivals(self, node: int, round: int, size_bytes: int) -> list[tuple[int, float]]:
        """``[(neighbour_id, finish_s), ...]``: when each neighbour's transfer of
        ``size_bytes`` to ``node`` would end, in the order of :meth:`deliverable`."""
        c, best = self._best_per_neighbour(node, round, size_bytes)
        return list(zip(c["nb"][best].tolist(), c["finish"][best].tolist()))

    def _best_per_neighbour(self, node: int, round: int, size_bytes: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
        self._check_node(node)
        if size_bytes < 0:
            raise ContactError(f"size_bytes: expected >= 0, got {size_bytes}")
        c = self._candidates(node, round, size_bytes)
        if c["idx"].size == 0:
            return c, np.zeros(0, dtype=np.int64)
        # per neighbour, the earliest finish (ties: the earlier window); then by (finish, neighbour)
        order = np.lexsort((c["idx"], c["finish"], c["nb"]))
        _, first = np.unique(c["nb"][order], return_index=True)
        best = order[first]
        return c, best[np.lexsort((c["nb"][best], c["finish"][best]))]

    def earliest_transfer(self, src: int, dst: int, round: int, size_bytes: int,
                          not_before_s: float | None = None, window: int | None = None
                          ) -> tuple[float, float] | None:
        """``(start, finish)`` seconds of the earliest-finishing transfer ``src -> dst`` of
        ``size_bytes`` in ``round`` starting no earlier than ``not_before_s`` (only on the window
        of index ``window`` if given); ``None`` if none fits. Nothing is recorded."""
        best = self._earliest(src, dst, round, size_bytes, not_before_s, window)
        return None if best is None else best[:2]

    def transfer_windows(self, src: int, dst: int, round: int, size_bytes: int,
                         not_before_s: float | None = None) -> list[tuple[int, float, float]]:
        """``[(window index, start, end), ...]``: every window that can carry ``size_bytes``
        ``src -> dst`` in ``round`` from ``not_before_s`` on, with the earliest start of the transfer
        on it and the end of its part inside the round, by window index. Nothing is recorded."""
        c = self._pair_candidates(src, dst, round, size_bytes, not_before_s)
        order = np.argsort(c["idx"], kind="stable")
        return list(zip(c["idx"][order].tolist(), c["start"][order].tolist(), c["end"][order].tolist()))

    def _pair_candidates(self, src: int, dst: int, round: int, size_bytes: int,
                         not_before_s: float | None) -> dict[str, np.ndarray]:
        """:meth:`_candidates` of the transfers ``src -> dst``, both nodes checked."""
        self._check_node(src, "src")
        self._check_node(dst, "dst")
        return self._candidates(dst, round, size_bytes, src=int(src), not_before=not_before_s)

    def _earliest(self, src: int, dst: int, round: int, size_bytes: int,
                  not_before_s: float | None, window: int | None = None) -> tuple[float, float, int] | None:
        """:meth:`earliest_transfer` with the index of the window that carries it."""
        c = self._pair_candidates(src, dst, round, size_bytes, not_before_s)
        if window is not None:
            c = {k: v[c["idx"] == window] for k, v in c.items()}
        if c["idx"].size == 0:
            return None
        i = int(np.lexsort((c["idx"], c["finish"]))[0])
        return float(c["start"][i]), float(c["finish"][i]), int(c["idx"][i])

    def schedule(self, src: int, dst: int, round: int, size_bytes: int,
                 not_before_s: float | None = None, window: int | None = None) -> Transfer:
        """Record the earliest-finishing transfer ``src -> dst`` of ``size_bytes`` in ``round``
        (starting no earlier than ``not_before_s``, e.g. when the sender's battery allows it;
        only on the window of index ``window`` if given), on the window that carries it."""
        best = self._earliest(src, dst, round, size_bytes, not_before_s, window)
        if best is None:
            raise ContactError(
                f"no contact window can carry {size_bytes} bytes from node {src} to node {dst} "
                f"in round {round}")
        return self._record(int(src), int(dst), int(round), size_bytes, best[0], best[1], [best[2]])

    def record_transfer(self, src: int, dst: int, round: int, size_bytes: int,
                        t_start: float, t_end: float) -> Transfer:
        """Record a transfer; it must fit in one window of the pair inside ``round``.

        Raises :class:`ContactError` if no window of ``{src, dst}`` that carries
        ``src -> dst`` covers ``[t_start, t_end]`` within the round, or if none of
        those can take it: its capacity over that interval (after acquisition, if
        this is the first transfer on the window in this direction in the round)
        is below ``size_bytes``, or an earlier transfer on it ends after ``t_start``.
        The first window (in table order) that can take it carries it.
        """
        self._check_node(src, "src")
        self._check_node(dst, "dst")
        if src == dst:
            raise ContactError(f"transfer: src and dst are the same node ({src})")
        t0, t1 = self.round_interval(round)
        if not (t0 - 1e-6 <= t_start <= t_end <= t1 + 1e-6):
            raise ContactError(
                f"transfer {src}->{dst}: [{t_start:.3f}, {t_end:.3f}] s is not inside round {round} "
                f"[{t0:.3f}, {t1:.3f}] s")
        w = self.windows
        lo, hi = min(src, dst), max(src, dst)
        tol = 1e-6
        idx = self._node_index()[int(dst)]
        cover = idx[(w.a[idx] == lo) & (w.b[idx] == hi) & (w.t_start_s[idx] - tol <= t_start)
                    & (t_end <= w.t_end_s[idx] + tol)]
        if cover.size == 0:
            raise ContactError(
                f"transfer {src}->{dst}: no contact window covers [{t_start:.3f}, {t_end:.3f}] s")
        d = w.direction[cover]
        cover = cover[(d == BOTH) | (d == (A_TO_B if src == lo else B_TO_A))]
        if cover.size == 0:
            raise ContactError(
                f"transfer {src}->{dst}: the contact window covering [{t_start:.3f}, {t_end:.3f}] s "
                f"carries data only {dst}->{src}")
        return self._record(int(src), int(dst), int(round), size_bytes, t_start, t_end, cover.tolist())

    def _record(self, src: int, dst: int, round: int, size_bytes: int, t_start: float, t_end: float,
                windows: list[int]) -> Transfer:
        """Record the transfer on the first of ``windows`` (covering it, in its direction) that can take it."""
        tol = 1e-6
        busy_on = self._busy_into.get((dst, round), {})
        refusal = None
        for idx in windows:
            busy = busy_on.get((idx, src))
            if busy is not None and t_start < busy - tol:
                refusal = refusal or (f"transfer {src}->{dst}: starts at {t_start:.3f} s, before the previous "
                                      f"transfer on this window ends ({busy:.3f} s)")
                continue
            acq = 0.0 if busy is not None else self.link.acquisition_s
            cap = self._mean_rate[idx] * max(t_end - t_start - acq, 0.0) / 8.0
            if cap + 1e-6 < size_bytes:
                refusal = refusal or (f"transfer {src}->{dst}: {size_bytes} bytes do not fit in "
                                      f"[{t_start:.3f}, {t_end:.3f}] s (capacity {int(cap)} bytes)")
                continue
            tr = Transfer(src, dst, round, int(size_bytes), float(t_start), float(t_end), idx)
            self._busy_into.setdefault((dst, round), {})[(idx, src)] = float(t_end)
            self.transfers.append(tr)
            return tr
        raise ContactError(refusal)

    # ------------------------------------------------------------------ graph & summaries
    @property
    def graph(self):
        """``networkx.MultiGraph``: one node per node id (name, kind), one edge per window.

        Edge attributes: ``t_start_s``, ``t_end_s``, ``capacity_bytes``,
        ``mean_range_km``, ``min_range_km``, ``index`` (row in ``windows``),
        ``sender`` (``None`` for a window that carries data both ways, else the
        node id that can send on it).
        Built on first access (large plans: prefer :meth:`contact_graph`).
        """
        if self._graph is None:
            import networkx as nx

            g = nx.MultiGraph()
            for i, (name, kind) in enumerate(zip(self.node_names, self.node_kinds)):
                g.add_node(i, name=name, kind=kind)
            w = self.windows
            cols = zip(w.a.tolist(), w.b.tolist(), w.t_start_s.tolist(), w.t_end_s.tolist(),
                       w.capacity_bytes.tolist(), w.mean_range_km.tolist(), w.min_range_km.tolist(),
                       w.direction.tolist())
            g.add_edges_from(
                (a, b, {"t_start_s": s, "t_end_s": e, "capacity_bytes": c, "mean_range_km": mr,
                        "min_range_km": mn, "index": i, "sender": (None, a, b)[d]})
                for i, (a, b, s, e, c, mr, mn, d) in enumerate(cols))
            self._graph = g
        return self._graph

    def contact_graph(self, t_s: float | None = None):
        """``networkx.Graph`` aggregated per pair (windows, total seconds and bytes).

        Edge attributes: ``windows``, ``duration_s``, ``capacity_bytes`` and
        ``one_way_windows`` (how many of the windows carry data one way only;
        :attr:`graph` says which way). With ``t_s``, only the pairs in contact at that instant.
        """
        import networkx as nx

        w = self.windows
        sel = np.ones(len(w), dtype=bool)
        if t_s is not None:
            sel = (w.t_start_s <= t_s) & (w.t_end_s >= t_s)
        g = nx.Graph()
        for i, (name, kind) in enumerate(zip(self.node_names, self.node_kinds)):
            g.add_node(i, name=name, kind=kind)
        a, b = w.a[sel], w.b[sel]
        if a.size:
            key = a.astype(np.int64) * self.n_nodes + b
            uniq, inv = np.unique(key, return_inverse=True)
            n_win = np.bincount(inv)
            dur = np.bincount(inv, weights=w.duration_s[sel])
            cap = np.bincount(inv, weights=w.capacity_bytes[sel].astype(float))
            one_way = np.bincount(inv, weights=w.one_way[sel], minlength=uniq.size).astype(np.int64)
            g.add_edges_from(
                (a_, b_, {"windows": n, "duration_s": d, "capacity_bytes": c, "one_way_windows": o})
                for a_, b_, n, d, c, o in zip((uniq // self.n_nodes).tolist(), (uniq % self.n_nodes).tolist(),
                                              n_win.tolist(), dur.tolist(), cap.tolist(), one_way.tolist()))
        return g

    def summary(self) -> dict:
        """Totals and per-node figures (windows per node, mean duration, capacity; ``one_way_windows``:
        how many windows carry data in one direction only)."""
        w = self.windows
        # per node: two counts, not one of both columns joined (8 bytes a window)
        per_node = np.bincount(w.a, minlength=self.n_nodes) + np.bincount(w.b, minlength=self.n_nodes)
        dur = w.duration_s  # a new array: its median may reorder it in place, after its mean
        mean_duration_s = float(dur.mean()) if len(w) else 0.0
        return {
            "nodes": self.n_nodes,
            "windows": len(w),
            "one_way_windows": int(np.count_nonzero(w.direction)),
            "rounds": self.n_rounds,
            "horizon_s": float(self.round_boundaries_s[-1] - self.round_boundaries_s[0]),
            "windows_per_node_mean": float(per_node.mean()) if self.n_nodes else 0.0,
            "windows_per_node_min": int(per_node.min()) if self.n_nodes else 0,
            "windows_per_node_max": int(per_node.max()) if self.n_nodes else 0,
            "mean_duration_s": mean_duration_s,
            "median_duration_s": float(np.median(dur, overwrite_input=True)) if len(w) else 0.0,
            "mean_capacity_bytes": float(w.capacity_bytes.mean()) if len(w) else 0.0,
            "total_capacity_bytes": float(w.capacity_bytes.sum()) if len(w) else 0.0,
            "transfers": len(self.transfers),
        }

    # ------------------------------------------------------------------ export
    def _utc_pieces(self, t_s: np.ndarray) -> list[object]:
        return utc_pieces(self.start, t_s) if self.start is not None else []

    def to_csv(self, path: str | Path) -> Path:
        """Write one row per window (ids, names, times, UTC, range, capacity, round).

        Columns: ``a, b, name_a, name_b, t_start_s, t_end_s, duration_s,
        start_utc, end_utc, round, capacity_bytes, mean_range_km,
        min_range_km, direction``, ``direction`` being ``both``, ``a->b`` or ``b->a``
        (which way the window carries data); seconds and km with 3 decimals, UTC as
        ``YYYY-MM-DDTHH:MM:SS.mmmZ`` (empty without a start time), ``round``
        the plan round containing the window's start (-1 outside the rounds, as :meth:`round_of`). Formatted in numpy
        (:mod:`contact_sim.tablewriter`), so 10^7 windows take seconds, one block of rows at a time (the
        computed columns too: round, duration, UTC stamps), so what it allocates is bounded by the block, not
        the plan. A window the
        search cut at the horizon (open at its start or end) is not flagged: its
        ``t_start_s`` is 0 or its ``t_end_s`` the horizon (:func:`~contact_sim.windows.find_windows`).
        """
        path = Path(path)
        names = []
        for n in self.node_names:  # csv quoting, once per node
            buf = io.StringIO()
            csv.writer(buf, lineterminator="").writerow([n])
            names.append(buf.getvalue().encode())
        with atomic_writer(path) as fh:  # crash-safe: the old table or the whole new one
            fh.write(b"a,b,name_a,name_b,t_start_s,t_end_s,duration_s,start_utc,end_utc,round,"
                     b"capacity_bytes,mean_range_km,min_range_km,direction\r\n")
            for lo, hi in row_blocks(len(self.windows)):
                write_rows(fh, self._csv_pieces(names, lo, hi))
        return path

    def _csv_pieces(self, names: list[bytes], lo: int, hi: int) -> list[object]:
        """The :meth:`to_csv` rows of windows ``lo:hi`` as table pieces (``names``: each node's CSV field)."""
        w = self.windows
        a, b, t0, t1 = w.a[lo:hi], w.b[lo:hi], w.t_start_s[lo:hi], w.t_end_s[lo:hi]
        rounds = np.searchsorted(self.round_boundaries_s, t0, side="right") - 1
        rounds[rounds >= self.n_rounds] = -1  # after the last round, like round_of (before the first: -1 already)
        comma = Lit(b",")
        return [Int(a), comma, Int(b), comma, Lookup(names, a), comma, Lookup(names, b), comma,
                Fixed(t0), comma, Fixed(t1), comma, Fixed(t1 - t0), comma,
                *self._utc_pieces(t0), comma, *self._utc_pieces(t1), comma,
                Int(rounds), comma, Int(w.capacity_bytes[lo:hi]), comma,
                Fixed(w.mean_range_km[lo:hi], nan=b"nan"), comma,
                Fixed(w.min_range_km[lo:hi], nan=b"nan"), comma, Lookup(_DIRECTIONS, w.direction[lo:hi]),
                Lit(b"\r\n")]

    def to_json(self, path: str | Path) -> Path:
        """Write nodes, rounds, link model, windows and transfers as JSON.

        ``windows`` is a list of objects ``{"a", "b", "t_start_s", "t_end_s",
        "capacity_bytes", "mean_range_km", "min_range_km", "direction"}`` (``direction``
        as in :meth:`to_csv`) (seconds and km
        with 3 decimals), one per line, formatted in numpy like :meth:`to_csv`.
        """
        path = Path(path)
        w = self.windows
        head = {
            "start_utc": self.start.isoformat() if self.start else None,
            "nodes": [{"id": i, "name": n, "kind": k}
                      for i, (n, k) in enumerate(zip(self.node_names, self.node_kinds))],
            "round_boundaries_s": self.round_boundaries_s.tolist(),
            "link": self.link.to_dict(),
            "meta": self.meta,
            "transfers": [asdict(t) for t in self.transfers],
        }
        text = json.dumps(head, indent=1)
        n = len(w)
        with atomic_writer(path) as fh:  # crash-safe: the old table or the whole new one
            fh.write(text[:-1].rstrip().encode() + b',\n "windows": [\n')
            for lo, hi in row_blocks(n):  # one block of rows at a time, like to_csv
                last = np.zeros(hi - lo, dtype=np.int8)
                last[-1] = hi == n
                write_rows(fh, [
                    Lit(b'  {"a": '), Int(w.a[lo:hi]), Lit(b', "b": '), Int(w.b[lo:hi]),
                    Lit(b', "t_start_s": '), Fixed(w.t_start_s[lo:hi]), Lit(b', "t_end_s": '), Fixed(w.t_end_s[lo:hi]),
                    Lit(b', "capacity_bytes": '), Int(w.capacity_bytes[lo:hi]),
                    Lit(b', "mean_range_km": '), Fixed(w.mean_range_km[lo:hi], nan=b"null"),
                    Lit(b', "min_range_km": '), Fixed(w.min_range_km[lo:hi], nan=b"null"),
                    Lit(b', "direction": "'), Lookup(_DIRECTIONS, w.direction[lo:hi]), Lit(b'"}'),
                    Lookup([b",\n", b"\n"], last)])
            fh.write(b" ]\n}\n")
        return path
