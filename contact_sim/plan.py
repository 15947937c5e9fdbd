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
* Links are full duplex: a transfer ``j -> k`` consumes capacity of the
  window in the ``j -> k`` direction only; successive transfers on the same
  window and direction start where the previous one ended. The acquisition
  overhead is paid once per window, direction and round: a second transfer
  in the same round continues on the acquired link, one in a later round
  acquires it again.
* ``deliverable(k, e, S)`` lists each neighbour once, with the window that
  completes a transfer of ``S`` bytes earliest; ties by neighbour id.

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
import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from swarmbase.fileio import atomic_write_text, atomic_writer

from .errors import ContactError
from .link import LinkModel
from .windows import Window, WindowTable

log = logging.getLogger(__name__)


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
        if bounds.ndim != 1 or bounds.size < 2 or np.any(np.diff(bounds) <= 0):
            raise ContactError("rounds: expected at least two strictly increasing boundaries (s)")
        self.round_boundaries_s = bounds
        self.windows = windows
        self.windows.capacity_bytes = link.capacity_bytes(windows.duration_s, windows.volume_bits)
        self._mean_rate = link.mean_rate(windows.duration_s, windows.volume_bits)
        self.transfers: list[Transfer] = []
        # bytes already scheduled per (window index, src, dst): next free time
        #: (window, src, dst, round) -> end of the last transfer recorded there
        self._busy_until: dict[tuple[int, int, int, int], float] = {}
        self._by_node: dict[int, np.ndarray] | None = None
        self._graph = None

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
        if self._by_node is None:
            w = self.windows
            ids = np.concatenate([np.arange(len(w)), np.arange(len(w))])
            ends = np.concatenate([w.a, w.b])
            order = np.argsort(ends, kind="stable")
            ids, ends = ids[order], ends[order]
            splits = np.searchsorted(ends, np.arange(self.n_nodes + 1))
            self._by_node = {k: np.sort(ids[splits[k]:splits[k + 1]]) for k in range(self.n_nodes)}
        return self._by_node

    # ------------------------------------------------------------------ rounds
    def _clipped(self, idx: int, round: int, t_from: float | None = None,
                 not_before: float | None = None) -> Window | None:
        t0, t1 = self.round_interval(round)
        w = self.windows
        a = max(float(w.t_start_s[idx]), t0)
        b = min(float(w.t_end_s[idx]), t1)
        if t_from is not None:
            a = max(a, t_from)
            acq = 0.0  # link already acquired by an earlier transfer on this window
        else:
            acq = self.link.acquisition_s
        if not_before is not None and not_before > a:
            a = not_before
            acq = self.link.acquisition_s  # the link is (re)acquired when the transfer starts
        if b <= a:
            return None
        usable = max(b - a - acq, 0.0)
        cap = int(np.floor(self._mean_rate[idx] * usable / 8.0))
        return Window(int(w.a[idx]), int(w.b[idx]), a, b, cap, float(w.mean_range_km[idx]),
                      float(w.min_range_km[idx]))

    def _options(self, src: int, dst: int | None, node: int, round: int, size: int,
                 not_before: float | None = None):
        """Yield ``(finish_time, neighbour, window_index, clipped_window, start_time)``."""
        t0, t1 = self.round_interval(round)
        w = self.windows
        for idx in self._node_index()[int(node)]:
            if w.t_end_s[idx] <= t0 or w.t_start_s[idx] >= t1:
                continue
            nb = int(w.b[idx]) if int(w.a[idx]) == node else int(w.a[idx])
            s, d = (nb, node) if dst is None else (src, dst)
            if dst is not None and nb != src:
                continue
            busy = self._busy_until.get((int(idx), s, d, int(round)))
            win = self._clipped(int(idx), round, busy, not_before)
            if win is None or win.capacity_bytes < size:
                continue
            rate = self._mean_rate[idx]
            waited = not_before is not None and busy is not None and not_before > busy
            acq = 0.0 if busy is not None and not waited else self.link.acquisition_s
            start = win.t_start_s
            finish = start + acq + (size * 8.0 / rate if rate > 0 else np.inf)
            yield finish, nb, int(idx), win, start

    def deliverable(self, node: int, round: int, size_bytes: int) -> list[tuple[int, Window]]:
        """Neighbours able to deliver ``size_bytes`` to ``node`` within ``round``.

        Returns ``[(neighbour_id, window), ...]`` ordered by the earliest
        completion time of the transfer (then neighbour id); the window is the
        part of the contact inside the round, with its remaining capacity.
        """
        self._check_node(node)
        if size_bytes < 0:
            raise ContactError(f"size_bytes: expected >= 0, got {size_bytes}")
        best: dict[int, tuple[float, Window]] = {}
        for finish, nb, _, win, _ in self._options(-1, None, node, round, size_bytes):
            if nb not in best or finish < best[nb][0]:
                best[nb] = (finish, win)
        return [(nb, win) for nb, (_, win) in sorted(best.items(), key=lambda kv: (kv[1][0], kv[0]))]

    def earliest_transfer(self, src: int, dst: int, round: int, size_bytes: int,
                          not_before_s: float | None = None) -> tuple[float, float] | None:
        """``(start, finish)`` seconds of the earliest-finishing transfer ``src -> dst`` of
        ``size_bytes`` in ``round`` starting no earlier than ``not_before_s``; ``None`` if none fits.
        Nothing is recorded."""
        self._check_node(src, "src")
        self._check_node(dst, "dst")
        opts = sorted(self._options(src, dst, dst, round, size_bytes, not_before_s), key=lambda o: o[0])
        return (opts[0][4], opts[0][0]) if opts else None

    def schedule(self, src: int, dst: int, round: int, size_bytes: int,
                 not_before_s: float | None = None) -> Transfer:
        """Record the earliest-finishing transfer ``src -> dst`` of ``size_bytes`` in ``round``
        (starting no earlier than ``not_before_s``, e.g. when the sender's battery allows it)."""
        best = self.earliest_transfer(src, dst, round, size_bytes, not_before_s)
        if best is None:
            raise ContactError(
                f"no contact window can carry {size_bytes} bytes from node {src} to node {dst} "
                f"in round {round}")
        start, finish = best
        return self.record_transfer(src, dst, round, size_bytes, start, finish)

    def record_transfer(self, src: int, dst: int, round: int, size_bytes: int,
                        t_start: float, t_end: float) -> Transfer:
        """Record a transfer; it must fit in one window of the pair inside ``round``.

        Raises :class:`ContactError` if no window of ``{src, dst}`` covers
        ``[t_start, t_end]`` within the round, or if its capacity over that
        interval (after acquisition, if this is the first transfer on the
        window in this direction) is below ``size_bytes``.
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
        for idx in self._node_index()[int(dst)]:
            if int(w.a[idx]) != lo or int(w.b[idx]) != hi:
                continue
            if not (w.t_start_s[idx] - tol <= t_start and t_end <= w.t_end_s[idx] + tol):
                continue
            busy = self._busy_until.get((int(idx), src, dst, int(round)))
            if busy is not None and t_start < busy - tol:
                raise ContactError(
                    f"transfer {src}->{dst}: starts at {t_start:.3f} s, before the previous transfer "
                    f"on this window ends ({busy:.3f} s)")
            acq = 0.0 if busy is not None else self.link.acquisition_s
            cap = self._mean_rate[idx] * max(t_end - t_start - acq, 0.0) / 8.0
            if cap + 1e-6 < size_bytes:
                raise ContactError(
                    f"transfer {src}->{dst}: {size_bytes} bytes do not fit in "
                    f"[{t_start:.3f}, {t_end:.3f}] s (capacity {int(cap)} bytes)")
            tr = Transfer(int(src), int(dst), int(round), int(size_bytes), float(t_start),
                          float(t_end), int(idx))
            self._busy_until[(int(idx), src, dst, int(round))] = float(t_end)
            self.transfers.append(tr)
            return tr
        raise ContactError(
            f"transfer {src}->{dst}: no contact window covers [{t_start:.3f}, {t_end:.3f}] s")

    # ------------------------------------------------------------------ graph & summaries
    @property
    def graph(self):
        """``networkx.MultiGraph``: one node per node id (name, kind), one edge per window.

        Edge attributes: ``t_start_s``, ``t_end_s``, ``capacity_bytes``,
        ``mean_range_km``, ``min_range_km``, ``index`` (row in ``windows``).
        Built on first access (large plans: prefer :meth:`contact_graph`).
        """
        if self._graph is None:
            import networkx as nx

            g = nx.MultiGraph()
            for i, (name, kind) in enumerate(zip(self.node_names, self.node_kinds)):
                g.add_node(i, name=name, kind=kind)
            w = self.windows
            g.add_edges_from(
                (int(w.a[i]), int(w.b[i]), {
                    "t_start_s": float(w.t_start_s[i]), "t_end_s": float(w.t_end_s[i]),
                    "capacity_bytes": int(w.capacity_bytes[i]),
                    "mean_range_km": float(w.mean_range_km[i]),
                    "min_range_km": float(w.min_range_km[i]), "index": i})
                for i in range(len(w)))
            self._graph = g
        return self._graph

    def contact_graph(self, t_s: float | None = None):
        """``networkx.Graph`` aggregated per pair (windows, total seconds and bytes).

        With ``t_s``, only the pairs in contact at that instant.
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
            for u, n, d, c in zip(uniq, n_win, dur, cap):
                g.add_edge(int(u // self.n_nodes), int(u % self.n_nodes), windows=int(n),
                           duration_s=float(d), capacity_bytes=float(c))
        return g

    def summary(self) -> dict:
        """Totals and per-node figures (windows per node, mean duration, capacity)."""
        w = self.windows
        per_node = np.bincount(np.concatenate([w.a, w.b]), minlength=self.n_nodes) if len(w) else \
            np.zeros(self.n_nodes, dtype=int)
        dur = w.duration_s
        return {
            "nodes": self.n_nodes,
            "windows": len(w),
            "rounds": self.n_rounds,
            "horizon_s": float(self.round_boundaries_s[-1] - self.round_boundaries_s[0]),
            "windows_per_node_mean": float(per_node.mean()) if self.n_nodes else 0.0,
            "windows_per_node_min": int(per_node.min()) if self.n_nodes else 0,
            "windows_per_node_max": int(per_node.max()) if self.n_nodes else 0,
            "mean_duration_s": float(dur.mean()) if len(w) else 0.0,
            "median_duration_s": float(np.median(dur)) if len(w) else 0.0,
            "mean_capacity_bytes": float(w.capacity_bytes.mean()) if len(w) else 0.0,
            "total_capacity_bytes": float(w.capacity_bytes.sum()) if len(w) else 0.0,
            "transfers": len(self.transfers),
        }

    # ------------------------------------------------------------------ export
    def _utc(self, t_s: np.ndarray) -> list[str]:
        if self.start is None:
            return [""] * len(t_s)
        base = np.datetime64(self.start.replace(tzinfo=None), "ms")
        stamps = base + np.round(np.asarray(t_s) * 1000).astype("timedelta64[ms]")
        return [str(s) + "Z" for s in stamps]

    def to_csv(self, path: str | Path) -> Path:
        """Write one row per window (ids, names, times, UTC, range, capacity, round)."""
        path = Path(path)
        w = self.windows
        names = np.asarray(self.node_names, dtype=object)
        rounds = np.searchsorted(self.round_boundaries_s, w.t_start_s, side="right") - 1
        utc_a, utc_b = self._utc(w.t_start_s), self._utc(w.t_end_s)
        with atomic_writer(path, text=True) as fh:  # crash-safe: the old table or the whole new one
            out = csv.writer(fh)
            out.writerow(["a", "b", "name_a", "name_b", "t_start_s", "t_end_s", "duration_s",
                          "start_utc", "end_utc", "round", "capacity_bytes", "mean_range_km",
                          "min_range_km"])
            for i in range(len(w)):
                out.writerow([int(w.a[i]), int(w.b[i]), names[w.a[i]], names[w.b[i]],
                              f"{w.t_start_s[i]:.3f}", f"{w.t_end_s[i]:.3f}",
                              f"{w.t_end_s[i] - w.t_start_s[i]:.3f}", utc_a[i], utc_b[i],
                              int(rounds[i]), int(w.capacity_bytes[i]),
                              f"{w.mean_range_km[i]:.3f}", f"{w.min_range_km[i]:.3f}"])
        return path

    def to_json(self, path: str | Path) -> Path:
        """Write nodes, rounds, link model, windows and transfers as JSON."""
        path = Path(path)
        w = self.windows
        doc = {
            "start_utc": self.start.isoformat() if self.start else None,
            "nodes": [{"id": i, "name": n, "kind": k}
                      for i, (n, k) in enumerate(zip(self.node_names, self.node_kinds))],
            "round_boundaries_s": self.round_boundaries_s.tolist(),
            "link": self.link.to_dict(),
            "meta": self.meta,
            "windows": [
                {"a": int(w.a[i]), "b": int(w.b[i]), "t_start_s": round(float(w.t_start_s[i]), 3),
                 "t_end_s": round(float(w.t_end_s[i]), 3), "capacity_bytes": int(w.capacity_bytes[i]),
                 "mean_range_km": round(float(w.mean_range_km[i]), 3),
                 "min_range_km": round(float(w.min_range_km[i]), 3)}
                for i in range(len(w))],
            "transfers": [asdict(t) for t in self.transfers],
        }
        atomic_write_text(path, json.dumps(doc, indent=1))
        return path
