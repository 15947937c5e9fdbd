"""PNG figures of a contact plan (matplotlib, Agg backend).

Satellites: ground tracks over about one orbit around the chosen instant plus the contact
edges at one instant between sub-satellite points. Drones: paths in the local
frame plus contact edges at one instant. Edge and track counts are capped (a
deterministic subsample: at most ``MAX_EDGES`` links and ``MAX_TRACKS`` ground
tracks or drone paths; every node's position is drawn) so big swarms stay readable.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from swarmbase.fileio import atomic_writer

from .plan import ContactPlan
from .trajectory import Trajectories

MAX_EDGES = 1500
MAX_TRACKS = 200


def _tracks(nodes: np.ndarray) -> np.ndarray:
    """At most ``MAX_TRACKS`` of ``nodes``, evenly spread over them."""
    return nodes if nodes.size <= MAX_TRACKS else nodes[np.linspace(0, nodes.size - 1, MAX_TRACKS).astype(int)]


def _edges_at(plan: ContactPlan, t_s: float) -> np.ndarray:
    w = plan.windows
    sel = np.flatnonzero((w.t_start_s <= t_s) & (w.t_end_s >= t_s))
    if sel.size > MAX_EDGES:
        sel = sel[np.linspace(0, sel.size - 1, MAX_EDGES).astype(int)]
    return np.stack([w.a[sel], w.b[sel]], axis=1) if sel.size else np.zeros((0, 2), dtype=int)


def plot_contacts(plan: ContactPlan, traj: Trajectories, path: str | Path, t_s: float | None = None,
                  title: str | None = None) -> Path:
    """Write the figure to ``path`` and return it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    t_s = float(traj.times_s[0]) if t_s is None else float(t_s)
    k = int(np.argmin(np.abs(traj.times_s - t_s)))
    edges = _edges_at(plan, float(traj.times_s[k]))
    fig, ax = plt.subplots(figsize=(11, 6), dpi=110)
    if traj.frame == "TEME":
        from orbits import geodetic_from_itrs, teme_to_itrs

        span = np.abs(traj.times_s - traj.times_s[k]) <= 3000.0  # about one LEO orbit of track around the instant
        moving = np.flatnonzero(traj.kinds == 0)
        show = _tracks(moving)
        pos = traj.pos[:, :, :].transpose(1, 0, 2)
        itrs = teme_to_itrs(pos[:, span], traj.start, traj.times_s[span])
        lat, lon, _ = geodetic_from_itrs(itrs)
        for i in show:
            lo = lon[i].copy()
            jumps = np.flatnonzero(np.abs(np.diff(lo)) > 180) + 1
            lo = np.insert(lo, jumps, np.nan)
            la = np.insert(lat[i], jumps, np.nan)
            ax.plot(lo, la, lw=0.4, color="0.75", zorder=1)
        itrs_k = teme_to_itrs(pos[:, k:k + 1], traj.start, traj.times_s[k:k + 1])
        lat_k, lon_k, _ = geodetic_from_itrs(itrs_k[:, 0])
        for a, b in edges:
            # a link across the +-180 deg meridian is drawn the short way: once from each side, the
            # axis limits keep the half that is on the map (it was left out, yet counted as shown)
            wrap = 0.0 if abs(lon_k[a] - lon_k[b]) < 180 else (360.0 if lon_k[b] < lon_k[a] else -360.0)
            for shift in ((0.0,) if wrap == 0.0 else (0.0, -wrap)):
                ax.plot([lon_k[a] + shift, lon_k[b] + wrap + shift], [lat_k[a], lat_k[b]], lw=0.5,
                        color="tab:blue", alpha=0.5, zorder=2)
        sat = traj.kinds == 0
        ax.scatter(lon_k[sat], lat_k[sat], s=6, color="tab:red", zorder=3, label="satellites")
        if (~sat).any():
            ax.scatter(lon_k[~sat], lat_k[~sat], s=40, marker="^", color="k", zorder=4,
                       label="ground stations")
        ax.set_xlim(-180, 180)
        ax.set_ylim(-90, 90)
        ax.set_xlabel("longitude (deg)")
        ax.set_ylabel("latitude (deg)")
    else:
        for i in _tracks(np.arange(traj.n_nodes)):
            ax.plot(traj.pos[:, i, 0], traj.pos[:, i, 1], lw=0.6, color="0.75", zorder=1)
        p = traj.pos[k]
        for a, b in edges:
            ax.plot([p[a, 0], p[b, 0]], [p[a, 1], p[b, 1]], lw=0.8, color="tab:blue", alpha=0.6, zorder=2)
        ax.scatter(p[:, 0], p[:, 1], s=14 if traj.n_nodes <= MAX_TRACKS else 6, color="tab:red", zorder=3,
                   label="drones")
        ax.set_aspect("equal")
        ax.set_xlabel("east (km)")
        ax.set_ylabel("north (km)")
    s = plan.summary()
    w, t_k = plan.windows, float(traj.times_s[k])
    active = int(np.count_nonzero((w.t_start_s <= t_k) & (w.t_end_s >= t_k)))
    links = f"{len(edges)} link{'s' * (len(edges) != 1)}"
    shown = f"{len(edges)} of {active} links shown" if active > len(edges) else f"{links} shown"
    ax.set_title(f"{title} ({shown})" if title and active > len(edges) else
                 title or f"{s['nodes']} nodes, {s['windows']} window{'s' * (s['windows'] != 1)}; {shown} "
                          f"at t = {t_k:.0f} s", fontsize=10)
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)
    return path


def save_figure(fig: "Any", path: str | Path) -> Path:
    """Write a matplotlib figure through the crash-safe writer (format from the
    suffix, PNG by default) and close it."""
    import matplotlib.pyplot as plt

    path = Path(path)
    try:
        with atomic_writer(path) as fh:
            fig.savefig(fh, format=path.suffix.lstrip(".") or "png")
    finally:
        plt.close(fig)
    return path
