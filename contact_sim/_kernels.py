"""Compiled per-pair kernels of the contact search (numba).

:mod:`contact_sim.windows` screens candidate pairs with a k-d tree; everything
after that is per pair and per cell, and runs here, one loop over the pairs
compiled by numba instead of a few dozen numpy passes over temporaries:

* :func:`space_events` / :func:`group_events`: classify a candidate pair on
  the cell (out of reach, surely visible, surely hidden, or with an edge
  inside) from the cubic Hermite models of its visibility constraints, find
  the edges, and write the pair's **events** in order: window opens, visible
  pieces (Simpson sums of the range), window closes;
* :func:`apply_events`: apply events to the open windows, an open-addressing
  hash table keyed by pair id (memory linear in the pairs in contact), and
  append every closed window to the output buffers.

The two steps are separate so that a data-rate model (any vectorized Python
function of the range) can be evaluated on the pieces' sample ranges in
between. The math is the one described in :mod:`contact_sim.windows`.
Functions here never allocate per pair; callers size the buffers.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from swarmbase.jit import cached_njit

#: numba's njit with its on-disk cache, or without it where numba can write none (a read-only install)
_jit = cached_njit(njit, nogil=True, error_model="numpy")

NEWTON_ITERS = 5
ROOT_TOL = 1e-9  # cell fraction (60 us for a 60 s cell)

OPEN, PIECE, CLOSE = 0, 1, 2  # event kinds
EMPTY = -1.0  # key of a free hash-table row
# scalar state of the accumulator (one int64 array, updated in place)
S_LIVE, S_OUT, S_MISSED = range(3)
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)  # Fibonacci hashing multiplier


# --------------------------------------------------------------------------- cubics

@_jit
def _cubic(a0, a1, a2, a3, s):
    return a0 + s * (a1 + s * (a2 + s * a3))


@_jit
def _critical(a1, a2, a3):
    """The two critical points of a cubic (NaN where absent)."""
    qa, qb, qc = 3.0 * a3, 2.0 * a2, a1  # derivative: qa s^2 + qb s + qc
    scale = abs(qa) + abs(qb) + abs(qc) + 1e-300
    disc = qb * qb - 4.0 * qa * qc
    if abs(qa) <= 1e-12 * scale:
        return -qc / qb, np.nan
    if disc < 0.0:
        return np.nan, np.nan
    q = -0.5 * (qb + np.copysign(np.sqrt(disc), qb))
    return q / qa, qc / q


@_jit
def _cubic_min(a0, a1, a2, a3, lo, hi):
    """Minimum of a cubic over ``[lo, hi]`` (endpoints and interior critical points)."""
    best = min(_cubic(a0, a1, a2, a3, lo), _cubic(a0, a1, a2, a3, hi))
    r1, r2 = _critical(a1, a2, a3)
    if np.isfinite(r1) and lo < r1 < hi:
        best = min(best, _cubic(a0, a1, a2, a3, r1))
    if np.isfinite(r2) and lo < r2 < hi:
        best = min(best, _cubic(a0, a1, a2, a3, r2))
    return best


@_jit
def _monotone_root(a0, a1, a2, a3, lo, hi, flo, fhi):
    """Zero of a cubic with a sign change on ``[lo, hi]``: safeguarded Newton from
    the secant point (bisection whenever a step leaves the bracket), then plain
    bisection if not converged, so the root is bracketed to ``ROOT_TOL``."""
    x = lo - flo * (hi - lo) / (fhi - flo)
    for _ in range(NEWTON_ITERS):
        f = _cubic(a0, a1, a2, a3, x)
        if f * flo > 0.0:
            lo, flo = x, f
        else:
            hi = x
        df = a1 + x * (2.0 * a2 + x * 3.0 * a3)
        step = f / df
        if abs(step) < ROOT_TOL or f == 0.0:
            return x
        xn = x - step
        x = xn if lo < xn < hi else 0.5 * (lo + hi)
    while hi - lo > ROOT_TOL:
        mid = 0.5 * (lo + hi)
        fm = _cubic(a0, a1, a2, a3, mid)
        if fm * flo > 0.0:
            lo, flo = mid, fm
        else:
            hi = mid
    return 0.5 * (lo + hi)


@_jit
def _zeros(a0, a1, a2, a3, out, k):
    """Write the sign-changing zeros of a cubic in (0, 1) to ``out[k:k+3]`` (1.0 where absent)."""
    r1, r2 = _critical(a1, a2, a3)
    c1 = r1 if (np.isfinite(r1) and 0.0 < r1 < 1.0) else 0.0
    c2 = r2 if (np.isfinite(r2) and 0.0 < r2 < 1.0) else 0.0
    if c2 < c1:
        c1, c2 = c2, c1
    b0, b1, b2, b3 = 0.0, c1, c2, 1.0
    for j in range(3):
        lo = b0 if j == 0 else (b1 if j == 1 else b2)
        hi = b1 if j == 0 else (b2 if j == 1 else b3)
        out[k + j] = 1.0
        if hi > lo:
            flo = _cubic(a0, a1, a2, a3, lo)
            fhi = _cubic(a0, a1, a2, a3, hi)
            if flo * fhi < 0.0:
                out[k + j] = _monotone_root(a0, a1, a2, a3, lo, hi, flo, fhi)


@_jit
def _hermite(g0, g1, m0, m1):
    """Power-basis coefficients on s in [0, 1] of the cubic Hermite interpolant."""
    return g0, m0, -3.0 * g0 - 2.0 * m0 + 3.0 * g1 - m1, 2.0 * g0 + m0 - 2.0 * g1 + m1


# --------------------------------------------------------------------------- events

@_jit
def _max_events(n_c):
    """Most events one pair can give on a cell with ``n_c`` constraints: a first-cell
    open, then an open, a piece and a close per segment (``3 n_c + 3`` segments)."""
    return 3 * (3 * n_c + 3) + 1


@_jit
def _certainly_met(g0, g1, m0, m1):
    """All four Bernstein coefficients of the constraint's cubic are positive."""
    return g0 > 0.0 and g0 + m0 / 3.0 > 0.0 and g1 - m1 / 3.0 > 0.0 and g1 > 0.0


@_jit
def _emit(ev_i, ev_f, ne, pid, kind, t, left):
    ev_i[ne, 0] = pid
    ev_i[ne, 1] = kind
    ev_i[ne, 2] = left
    ev_f[ne, 0] = t
    return ne + 1


@_jit
def _piece(ev_i, ev_f, ne, pid, span, d_lo, d_mid, d_hi, d_min):
    _emit(ev_i, ev_f, ne, pid, PIECE, span, 0)
    ev_f[ne, 1] = d_lo
    ev_f[ne, 2] = d_mid
    ev_f[ne, 3] = d_hi
    ev_f[ne, 4] = d_min
    return ne + 1


@_jit
def _whole(ev_i, ev_f, ne, pid, q0, q1, qd0, qd1, dt):
    """A whole visible cell, from squared ranges and their derivatives at both ends."""
    d_lo = np.sqrt(q0)
    d_hi = np.sqrt(q1)
    d_mid = np.sqrt(max(0.5 * (q0 + q1) + 0.125 * dt * (qd0 - qd1), 0.0))
    d_min = min(d_lo, d_mid, d_hi)
    if qd0 < 0.0 and qd1 > 0.0:  # closest approach inside the cell
        a0, a1, a2, a3 = _hermite(q0, q1, qd0 * dt, qd1 * dt)
        d_min = min(d_min, np.sqrt(max(_cubic_min(a0, a1, a2, a3, 0.0, 1.0), 0.0)))
    return _piece(ev_i, ev_f, ne, pid, dt, d_lo, d_mid, d_hi, d_min)


@_jit
def _pair(ev_i, ev_f, ne, pid, n_c, G0, G1, M0, M1, q0, q1, qd0, qd1, t0, dt, first,
          zeros, bounds, state, coef):
    """Events of one candidate pair on one cell.

    ``G0/G1`` are its ``n_c`` constraint values at the cell ends, ``M0/M1``
    their derivatives times ``dt``; ``q0, q1, qd0, qd1`` the squared range and
    its time derivative at both ends. ``zeros``, ``bounds`` and ``state`` are
    scratch arrays (``3 n_c``, ``3 n_c + 4`` and ``3 n_c + 3`` long), ``coef``
    one of ``(n_c, 4)`` for the constraint cubics.
    """
    all_pos, any_neg, vis0, vis1 = True, False, True, True
    for c in range(n_c):
        g0, g1 = G0[c], G1[c]
        if not _certainly_met(g0, g1, M0[c], M1[c]):
            all_pos = False
        if _certainly_met(-g0, -g1, -M0[c], -M1[c]):  # certainly failed
            any_neg = True
        vis0 = vis0 and g0 >= 0.0
        vis1 = vis1 and g1 >= 0.0
    if first and vis0:
        ne = _emit(ev_i, ev_f, ne, pid, OPEN, t0, 1)
    if all_pos:
        return _whole(ev_i, ev_f, ne, pid, q0, q1, qd0, qd1, dt)
    if any_neg:
        return ne
    nz = 3 * n_c
    for c in range(n_c):
        g0, g1 = G0[c], G1[c]
        a0, a1, a2, a3 = _hermite(g0, g1, M0[c], M1[c])
        coef[c, 0], coef[c, 1], coef[c, 2], coef[c, 3] = a0, a1, a2, a3
        if _certainly_met(g0, g1, M0[c], M1[c]):
            zeros[3 * c] = zeros[3 * c + 1] = zeros[3 * c + 2] = 1.0  # certainly met: no zero
        else:
            _zeros(a0, a1, a2, a3, zeros, 3 * c)
    for i in range(1, nz):  # insertion sort: a handful of values
        x = zeros[i]
        j = i - 1
        while j >= 0 and zeros[j] > x:
            zeros[j + 1] = zeros[j]
            j -= 1
        zeros[j + 1] = x
    # segments 0 and -1 are empty segments carrying the states at s = 0 and
    # s = 1, so a state change without an interior zero (a margin exactly 0
    # at a grid time) still produces an edge, at the right end
    bounds[0] = bounds[1] = 0.0
    for i in range(nz):
        bounds[2 + i] = zeros[i]
    bounds[2 + nz] = bounds[3 + nz] = 1.0
    n_seg = nz + 3
    state[0] = vis0
    for j in range(1, n_seg - 1):
        if bounds[j + 1] > bounds[j]:
            mid = 0.5 * (bounds[j] + bounds[j + 1])
            h = np.inf
            for c in range(n_c):
                h = min(h, _cubic(coef[c, 0], coef[c, 1], coef[c, 2], coef[c, 3], mid))
            state[j] = h >= 0.0
        else:
            state[j] = state[j - 1]
    state[n_seg - 1] = vis1
    a0, a1, a2, a3 = _hermite(q0, q1, qd0 * dt, qd1 * dt)
    for j in range(n_seg):
        lo, hi = bounds[j], bounds[j + 1]
        if j > 0 and state[j] and not state[j - 1]:
            ne = _emit(ev_i, ev_f, ne, pid, OPEN, t0 + lo * dt, 0)
        if state[j] and hi > lo:
            d_lo = np.sqrt(max(_cubic(a0, a1, a2, a3, lo), 0.0))
            d_mid = np.sqrt(max(_cubic(a0, a1, a2, a3, 0.5 * (lo + hi)), 0.0))
            d_hi = np.sqrt(max(_cubic(a0, a1, a2, a3, hi), 0.0))
            d_min = min(d_lo, d_mid, d_hi, np.sqrt(max(_cubic_min(a0, a1, a2, a3, lo, hi), 0.0)))
            ne = _piece(ev_i, ev_f, ne, pid, (hi - lo) * dt, d_lo, d_mid, d_hi, d_min)
        if j + 1 < n_seg and state[j] and not state[j + 1]:
            ne = _emit(ev_i, ev_f, ne, pid, CLOSE, t0 + hi * dt, 0)
    return ne


@_jit
def space_events(s0, s1, lo, hi, cols, n_nodes, t0, dt, range_km, inner_km, acc_rel, v_rel,
                 occlusion, first, ev_i, ev_f):
    """Events of the moving-node candidate pairs ``(lo[i], hi[i])`` on the cell ``[t0, t0 + dt]``.

    ``s0`` / ``s1`` are the packed node states at the cell ends (nodes x
    columns: one cache line per node); ``cols`` = (position, velocity after, velocity before, tangent
    length, its rate after, its rate before) column indices (position and
    velocities take 3 columns from there). ``acc_rel < 0`` means no bound on
    the relative acceleration (the screen's ``v_rel dt`` is used). Returns the
    number of events written, or -1 if ``ev_i`` / ``ev_f`` could be too short.
    """
    P, VR, VL, TAN, TDR, TDL = cols[0], cols[1], cols[2], cols[3], cols[4], cols[5]
    R2 = range_km * range_km
    G0, G1, M0, M1 = np.empty(2), np.empty(2), np.empty(2), np.empty(2)
    zeros, bounds, state = np.empty(6), np.empty(10), np.empty(9, dtype=np.bool_)
    coef = np.empty((2, 4))
    n_c = 2 if occlusion else 1
    cap = ev_i.shape[0]
    ne = 0
    for i in range(lo.size):
        if ne + _max_events(2) > cap:
            return -1
        a, b = lo[i], hi[i]
        px = s0[b, P] - s0[a, P]
        py = s0[b, P + 1] - s0[a, P + 1]
        pz = s0[b, P + 2] - s0[a, P + 2]
        wx = s0[b, VR] - s0[a, VR]
        wy = s0[b, VR + 1] - s0[a, VR + 1]
        wz = s0[b, VR + 2] - s0[a, VR + 2]
        q0 = px * px + py * py + pz * pz
        # Lipschitz bound on the range inside the cell: it changes by at most
        # (|w0| + a_rel dt) dt. Pairs that cannot come within the link range are
        # skipped (hidden through the cell); pairs so close that no constraint
        # can fail ("deep") skip the constraint cubics.
        if acc_rel < 0.0:
            grow = v_rel * dt
        else:
            grow = (np.sqrt(wx * wx + wy * wy + wz * wz) + acc_rel * dt) * dt
        far = grow + range_km
        if q0 > far * far:
            continue
        pid = np.int64(a) * n_nodes + b
        ux = s1[b, P] - s1[a, P]
        uy = s1[b, P + 1] - s1[a, P + 1]
        uz = s1[b, P + 2] - s1[a, P + 2]
        q1 = ux * ux + uy * uy + uz * uz
        qd0 = 2.0 * (px * wx + py * wy + pz * wz)
        qd1 = 2.0 * (ux * (s1[b, VL] - s1[a, VL]) + uy * (s1[b, VL + 1] - s1[a, VL + 1])
                     + uz * (s1[b, VL + 2] - s1[a, VL + 2]))
        room = max(inner_km - grow, 0.0)
        if q0 <= room * room:
            if first:
                ne = _emit(ev_i, ev_f, ne, pid, OPEN, t0, 1)
            ne = _whole(ev_i, ev_f, ne, pid, q0, q1, qd0, qd1, dt)
            continue
        G0[0], G1[0], M0[0], M1[0] = R2 - q0, R2 - q1, -qd0 * dt, -qd1 * dt
        if occlusion:
            # a node inside the grazing sphere (tangent length 0) sees nothing: every
            # segment from it crosses the sphere, so the limit is 0 there, not the other's length
            L0 = L1 = Ld0 = Ld1 = 0.0
            if s0[a, TAN] > 0.0 and s0[b, TAN] > 0.0:
                L0 = s0[a, TAN] + s0[b, TAN]
                Ld0 = s0[a, TDR] + s0[b, TDR]
            if s1[a, TAN] > 0.0 and s1[b, TAN] > 0.0:
                L1 = s1[a, TAN] + s1[b, TAN]
                Ld1 = s1[a, TDL] + s1[b, TDL]
            G0[1], G1[1] = L0 * L0 - q0, L1 * L1 - q1
            M0[1], M1[1] = (2.0 * L0 * Ld0 - qd0) * dt, (2.0 * L1 * Ld1 - qd1) * dt
        ne = _pair(ev_i, ev_f, ne, pid, n_c, G0, G1, M0, M1, q0, q1, qd0, qd1, t0, dt, first,
                   zeros, bounds, state, coef)
    return ne


@_jit
def group_events(pid, G0, G1, D0, D1, q0, q1, qd0, qd1, t0, dt, first, ev_i, ev_f):
    """Events of pairs given by their constraint values ``G0/G1`` ``(C, n)`` and
    time derivatives ``D0/D1`` at the cell ends (ground-station links).
    Returns the number of events written, or -1 if the buffers could be too short."""
    n_c = G0.shape[0]
    g0, g1, m0, m1 = np.empty(n_c), np.empty(n_c), np.empty(n_c), np.empty(n_c)
    zeros, bounds = np.empty(3 * n_c), np.empty(3 * n_c + 4)
    state = np.empty(3 * n_c + 3, dtype=np.bool_)
    coef = np.empty((n_c, 4))
    per_pair = _max_events(n_c)
    cap = ev_i.shape[0]
    ne = 0
    for i in range(pid.size):
        if ne + per_pair > cap:
            return -1
        for c in range(n_c):
            g0[c], g1[c] = G0[c, i], G1[c, i]
            m0[c], m1[c] = D0[c, i] * dt, D1[c, i] * dt
        ne = _pair(ev_i, ev_f, ne, pid[i], n_c, g0, g1, m0, m1, q0[i], q1[i], qd0[i], qd1[i],
                   t0, dt, first, zeros, bounds, state, coef)
    return ne


# --------------------------------------------------------------------------- open windows
#
# The open windows live in one hash table ``tab`` of 64-byte rows (one cache
# line each): the pair id (as a float64, exact below 2^53; EMPTY for a free
# row), then the window's start time, integral of range, minimum range,
# integral of rate and ``left`` flag. Linear probing from a Fibonacci hash,
# deletion by backward shift (no tombstones, so no rebuilds but to grow or
# shrink); the caller keeps the table at most half full. A lookup so touches
# one cache line, and rarely two.

KEY, T_START, D_INT, D_MIN, BITS, LEFT = range(6)
ROW = 8  # float64 per row: 64 bytes


@_jit
def _home(key, shift):
    return np.int64((np.uint64(key) * _GOLDEN) >> shift)


@_jit
def table_find(tab, key, shift):
    """Row of pair id ``key`` (-1 if absent)."""
    mask = tab.shape[0] - 1
    pos = _home(key, shift)
    fkey = np.float64(key)
    while True:
        k = tab[pos, KEY]
        if k == fkey:
            return pos
        if k == EMPTY:
            return -1
        pos = (pos + 1) & mask


@_jit
def table_insert(tab, key, shift, st):
    """Row for pair id ``key``, which is not in the table: its first free row."""
    mask = tab.shape[0] - 1
    pos = _home(key, shift)
    while tab[pos, KEY] >= 0.0:
        pos = (pos + 1) & mask
    tab[pos, KEY] = np.float64(key)
    st[S_LIVE] += 1
    return pos


@_jit
def table_delete(tab, pos, shift, st):
    """Free row ``pos``, shifting later rows of its probe run back so that
    every key stays reachable from its home row."""
    mask = tab.shape[0] - 1
    i = j = pos
    while True:
        j = (j + 1) & mask
        k = tab[j, KEY]
        if k == EMPTY:
            break
        h = _home(np.int64(k), shift)
        # row j may move to i unless its home lies cyclically in (i, j]
        if (i < h <= j) if i <= j else (h > i or h <= j):
            continue
        for c in range(ROW):
            tab[i, c] = tab[j, c]
        i = j
    tab[i, KEY] = EMPTY
    st[S_LIVE] -= 1


@_jit
def table_rebuild(old, tab, shift, st):
    """Move the live rows of ``old`` into the empty table ``tab``."""
    st[S_LIVE] = 0
    for i in range(old.shape[0]):
        if old[i, KEY] >= 0.0:
            pos = table_insert(tab, np.int64(old[i, KEY]), shift, st)
            for j in range(1, ROW):
                tab[pos, j] = old[i, j]


@_jit
def _start(tab, pos, t, left):
    tab[pos, T_START] = t
    tab[pos, D_INT] = 0.0
    tab[pos, D_MIN] = np.inf
    tab[pos, BITS] = 0.0
    tab[pos, LEFT] = left


@_jit
def _out(out_pid, out_f, out_b, st, tab, pos, t_end, flag_right):
    o = st[S_OUT]
    out_pid[o] = np.int64(tab[pos, KEY])
    out_f[o, 0] = tab[pos, T_START]
    out_f[o, 1] = t_end
    out_f[o, 2] = tab[pos, D_INT]
    out_f[o, 3] = tab[pos, D_MIN]
    out_f[o, 4] = tab[pos, BITS]
    out_b[o, 0] = tab[pos, LEFT] != 0.0
    out_b[o, 1] = flag_right
    st[S_OUT] = o + 1


@_jit
def apply_events(ev_i, ev_f, bits, ne, tab, shift, st, out_pid, out_f, out_b):
    """Apply events ``0 .. ne-1`` in order to the open windows.

    OPEN (re)starts the pair's window; PIECE adds its range integral, minimum
    and ``bits``; CLOSE removes the window and appends it to the outputs:
    ``out_pid``, ``out_f`` = (start, end, range integral, minimum range,
    bits), ``out_b`` = (flag left, flag right). The caller guarantees room for
    every open and close of the ``ne`` events (table at most half full, outputs).
    """
    for e in range(ne):
        pid, kind = ev_i[e, 0], ev_i[e, 1]
        pos = table_find(tab, pid, shift)
        if kind == OPEN:
            if pos < 0:
                pos = table_insert(tab, pid, shift, st)
            _start(tab, pos, ev_f[e, 0], np.float64(ev_i[e, 2]))
        elif pos < 0:  # a piece or close of a window never opened: cannot happen by construction
            st[S_MISSED] += 1
        elif kind == PIECE:
            w = ev_f[e, 0] / 6.0
            tab[pos, D_INT] += w * (ev_f[e, 1] + 4.0 * ev_f[e, 2] + ev_f[e, 3])
            tab[pos, D_MIN] = min(tab[pos, D_MIN], ev_f[e, 4])
            tab[pos, BITS] += bits[e]
        else:
            _out(out_pid, out_f, out_b, st, tab, pos, ev_f[e, 0], ev_i[e, 2] != 0)
            table_delete(tab, pos, shift, st)


@_jit
def checkpoint(tab, st, t, out_pid, out_f, out_b):
    """Emit every open window as ending at ``t`` (flagged right) and restart it
    at ``t`` (flagged left)."""
    for pos in range(tab.shape[0]):
        if tab[pos, KEY] >= 0.0:
            _out(out_pid, out_f, out_b, st, tab, pos, t, True)
            _start(tab, pos, t, 1.0)

