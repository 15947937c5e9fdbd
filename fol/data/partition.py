"""Partitioners: which images each node holds.

Every partitioner returns ``list[np.ndarray]``: for node ``k``, the sorted
int64 indices of its images in the source dataset. An index is given to at
most one node. All of them are deterministic for a given seed and never touch
the global NumPy RNG.

* :func:`dirichlet_partition` - label skew with concentration ``psi`` (smaller
  means more skewed), the standard non-IID benchmark of federated learning;
* :func:`region_partition` - geographic: each node covers one compact region
  (k-means on the unit sphere, or balanced recursive bisection);
* :func:`assignment_partition` - an explicit node id per image (used by the
  orbit-driven partition: the satellite whose ground track covers the image).

>>> import numpy as np
>>> labels = np.repeat([0, 1], 500)
>>> parts = dirichlet_partition(labels, n_nodes=4, psi=0.5, seed=0, samples_per_node=100)
>>> [len(p) for p in parts]
[100, 100, 100, 100]
"""

from __future__ import annotations

import logging
import numbers
from typing import Sequence

import numpy as np

from fol.errors import DataError

__all__ = [
    "dirichlet_partition",
    "region_partition",
    "assignment_partition",
    "label_entropy",
]

log = logging.getLogger(__name__)


def _rng(seed: int, salt: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed) & 0xFFFFFFFF, salt]))


def _check_nodes(n_nodes: int) -> None:
    if not isinstance(n_nodes, (int, np.integer)) or isinstance(n_nodes, bool) or n_nodes < 1:
        raise DataError(f"n_nodes must be a positive integer, got {n_nodes!r}")


def dirichlet_partition(
    labels: Sequence[int] | np.ndarray,
    n_nodes: int,
    psi: float,
    seed: int,
    min_samples: int = 10,
    samples_per_node: int | None = None,
    max_retries: int = 1000,
    short: str = "redraw",
) -> list[np.ndarray]:
    """Dirichlet label-skew partition with concentration ``psi``.

    Without ``samples_per_node`` (every image is used): the scheme of Hsu et al.
    (2019) / NIID-Bench (Li et al., 2022). For each class ``c`` the proportions
    ``p_c ~ Dir(psi * 1_nodes)`` split that class's images over the nodes (a
    node that already holds ``N / n_nodes`` images gets no more). The draw is
    repeated until every node has at least ``min_samples`` images. When no
    draw of ``max_retries`` does (with few classes, a small ``psi`` and many
    nodes that is all but certain: at psi = 0.1, two classes and 24 nodes,
    each node gets next to nothing of a class with probability about 0.6),
    ``short`` decides: ``"redraw"`` raises :class:`~fol.errors.DataError`;
    ``"top-up"`` takes the draw whose smallest node is largest (the first
    such) and tops up every node short of ``min_samples``, smallest first,
    with images of its own majority class (a node with none takes the most
    common class), moved from the node that holds most of that class among
    those that stay at ``min_samples`` or above; when no node above
    ``min_samples`` holds an image of that class, the largest node gives
    images of its own majority class instead (the only case in which a short
    node receives another class than its majority, so otherwise the top-up
    only makes short nodes more skewed, never less). A draw that succeeds is
    returned as is, so settings that ``"redraw"`` can partition give the same
    shards.

    With ``samples_per_node = m`` (a fixed-size node out of a larger pool, e.g.
    24 nodes x 300 images from 12,000): each node ``k`` draws its label mix
    ``q_k,c ∝ prior_c * G_k,c`` with ``G_k,c ~ Gamma(psi, 1)`` (the first
    scheme's Gamma draws before it normalises each class over the nodes and
    stops filling full nodes: a similar skew, not the same distribution; the
    first scheme gives somewhat more nearly one-class nodes), and receives
    ``m`` images drawn without replacement with that mix. The draw is
    repeated when a class's pool runs out. ``min_samples`` must then be
    ``<= m``.

    Raises :class:`~fol.errors.DataError` when the data cannot satisfy the
    request after ``max_retries`` draws (say how many images there are and how
    many are needed).
    """
    y = np.asarray(labels).astype(np.int64).reshape(-1)
    _check_nodes(n_nodes)
    if short not in ("redraw", "top-up"):
        raise DataError(f"short must be 'redraw' or 'top-up', got {short!r}")
    if not (psi > 0 and np.isfinite(psi)):
        raise DataError(f"Dirichlet concentration psi must be > 0, got {psi!r}")
    if y.size and y.min() < 0:
        raise DataError("labels must be non-negative class indices")
    n = int(y.size)
    classes = np.unique(y)
    rng = _rng(seed, 0xD1)
    if samples_per_node is None:
        need = n_nodes * min_samples
        if n < need:
            raise DataError(f"{n} samples cannot give {n_nodes} nodes at least {min_samples} each (need {need})")
        by_class = [np.flatnonzero(y == c) for c in classes]
        best: list[list[int]] | None = None
        for attempt in range(max_retries):
            parts: list[list[int]] = [[] for _ in range(n_nodes)]
            for idx in by_class:
                idx = rng.permutation(idx)
                p = rng.dirichlet(np.full(n_nodes, psi))
                sizes = np.array([len(q) for q in parts])
                p = p * (sizes < n / n_nodes)
                if p.sum() <= 0:
                    p = np.full(n_nodes, 1.0 / n_nodes)
                p = p / p.sum()
                cuts = (np.cumsum(p) * len(idx)).astype(np.int64)[:-1]
                for k, chunk in enumerate(np.split(idx, cuts)):
                    parts[k].extend(chunk.tolist())
            if min(len(q) for q in parts) >= min_samples:
                log.debug("dirichlet_partition: accepted draw %d", attempt)
                return [np.sort(np.asarray(q, dtype=np.int64)) for q in parts]
            if short == "top-up" and (best is None or min(map(len, parts)) > min(map(len, best))):
                best = parts
        if short == "top-up" and best is not None:
            log.info("dirichlet_partition: no draw of %d gave every node %d images (psi=%s); topping up the best one",
                     max_retries, min_samples, psi)
            return [np.sort(np.asarray(q, dtype=np.int64)) for q in _top_up(best, y, min_samples)]
        raise DataError(
            f"Dirichlet partition (psi={psi}) of {n} samples over {n_nodes} nodes left a node with fewer than "
            f"{min_samples} samples after {max_retries} draws; use fewer nodes, a larger psi or a lower min_samples"
        )

    m = int(samples_per_node)
    if m < 1 or m < min_samples:
        raise DataError(f"samples_per_node ({samples_per_node}) must be >= max(1, min_samples={min_samples})")
    need = n_nodes * m
    if n < need:
        raise DataError(f"{n} samples cannot give {n_nodes} nodes {m} samples each (need {need})")
    prior = np.array([(y == c).mean() for c in classes])
    for attempt in range(max_retries):
        g = rng.gamma(psi, 1.0, size=(n_nodes, len(classes))) * prior[None, :]
        tiny = g.sum(1) <= 0
        g[tiny] = prior  # Gamma underflow at very small psi: fall back to the prior mix for that node
        q = g / g.sum(1, keepdims=True)
        want = np.stack([rng.multinomial(m, qk) for qk in q])  # [nodes, classes]
        pools = [rng.permutation(np.flatnonzero(y == c)) for c in classes]
        if (want.sum(0) > np.array([len(p) for p in pools])).any():
            continue
        starts = np.zeros(len(classes), dtype=np.int64)
        out = []
        for k in range(n_nodes):
            chunks = []
            for ci in range(len(classes)):
                chunks.append(pools[ci][starts[ci] : starts[ci] + want[k, ci]])
                starts[ci] += want[k, ci]
            out.append(np.sort(np.concatenate(chunks).astype(np.int64)))
        log.debug("dirichlet_partition: accepted draw %d", attempt)
        return out
    counts = ", ".join(f"class {c}: {(y == c).sum()}" for c in classes)
    raise DataError(
        f"Dirichlet partition (psi={psi}) cannot draw {n_nodes} x {m} samples from {n} ({counts}) "
        f"after {max_retries} draws; use a larger pool, fewer nodes or a larger psi"
    )


def _top_up(parts: list[list[int]], y: np.ndarray, min_samples: int) -> list[list[int]]:
    """Move images until every node of ``parts`` holds ``min_samples`` (see
    :func:`dirichlet_partition`, ``short="top-up"``); ``parts`` is not changed.
    Needs ``len(y) >= len(parts) * min_samples``."""
    parts = [list(q) for q in parts]
    largest_class = int(np.bincount(y).argmax())
    while True:
        sizes = [len(q) for q in parts]
        short_nodes = [k for k, size in enumerate(sizes) if size < min_samples]
        if not short_nodes:
            return parts
        k = min(short_nodes, key=lambda j: (sizes[j], j))
        c = int(np.bincount(y[parts[k]]).argmax()) if parts[k] else largest_class
        donors = [j for j, size in enumerate(sizes) if size > min_samples and (y[parts[j]] == c).any()]
        if not donors:  # no spare image of that class: the largest node gives of its own majority class
            j = max((j for j, size in enumerate(sizes) if size > min_samples), key=lambda i: (sizes[i], -i))
            c = int(np.bincount(y[parts[j]]).argmax())
        else:
            j = max(donors, key=lambda i: (int((y[parts[i]] == c).sum()), -i))
        of_c = [i for i in parts[j] if y[i] == c]
        move = of_c[len(of_c) - min(min_samples - sizes[k], sizes[j] - min_samples, len(of_c)):]
        moved = set(move)
        parts[j] = [i for i in parts[j] if i not in moved]
        parts[k].extend(move)


def _unit_vectors(lat: np.ndarray, lon: np.ndarray) -> np.ndarray:
    la, lo = np.radians(lat), np.radians(lon)
    return np.stack([np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo), np.sin(la)], axis=1)


def _bisect(points: np.ndarray, idx: np.ndarray, k: int, out: list[np.ndarray]) -> None:
    """Recursive coordinate bisection: split along the widest axis so that the
    two halves get sizes proportional to the number of nodes each will hold."""
    if k == 1:
        out.append(np.sort(idx))
        return
    k_left = k // 2
    pts = points[idx]
    axis = int(np.argmax(pts.max(0) - pts.min(0)))
    order = idx[np.argsort(pts[:, axis], kind="stable")]
    cut = int(round(len(idx) * k_left / k))
    _bisect(points, order[:cut], k_left, out)
    _bisect(points, order[cut:], k - k_left, out)


def region_partition(
    lat: Sequence[float] | np.ndarray,
    lon: Sequence[float] | np.ndarray,
    n_nodes: int,
    seed: int,
    method: str = "kmeans",
    min_samples: int = 1,
    iterations: int = 50,
) -> list[np.ndarray]:
    """Geographic partition: each node gets the images of one compact region.

    ``method="kmeans"`` clusters the images' unit vectors on the sphere (so
    the antimeridian is no seam) with k-means++ seeded by ``seed`` (scipy's
    ``kmeans2``); node sizes follow the data density. ``method="bisect"``
    splits recursively along the widest extent into regions of (almost) equal
    size. Nodes are ordered by the mean longitude, then latitude, of their
    region, so node 0 is the westernmost.

    Raises :class:`~fol.errors.DataError` when a coordinate is missing (NaN)
    or a node would hold fewer than ``min_samples`` images.
    """
    la = np.asarray(lat, dtype=np.float64).reshape(-1)
    lo = np.asarray(lon, dtype=np.float64).reshape(-1)
    _check_nodes(n_nodes)
    if la.shape != lo.shape:
        raise DataError(f"lat and lon must have the same length, got {la.size} and {lo.size}")
    if not (np.isfinite(la).all() and np.isfinite(lo).all()):
        raise DataError(
            f"region partition needs coordinates for every image; {int((~np.isfinite(la + lo)).sum())} are missing"
        )
    n = la.size
    if n < n_nodes * min_samples:
        raise DataError(f"{n} samples cannot give {n_nodes} regional nodes at least {min_samples} each")
    pts = _unit_vectors(la, lo)
    if method == "kmeans":
        import warnings

        from scipy.cluster.vq import kmeans2

        with warnings.catch_warnings():  # an empty cluster is reported below via min_samples
            warnings.simplefilter("ignore")
            _, assign = kmeans2(pts, n_nodes, iter=iterations, minit="++", rng=_rng(seed, 0x6E0))
        parts = [np.flatnonzero(assign == k).astype(np.int64) for k in range(n_nodes)]
    elif method == "bisect":
        parts = []
        order = _rng(seed, 0xB15).permutation(n)  # ties broken reproducibly
        _bisect(pts, order, n_nodes, parts)
        parts = [np.sort(p).astype(np.int64) for p in parts]
    else:
        raise DataError(f"region partition method must be 'kmeans' or 'bisect', got {method!r}")
    small = [len(p) for p in parts if len(p) < min_samples]
    if small:
        raise DataError(
            f"region partition ({method}) gave {len(small)} node(s) fewer than {min_samples} samples "
            f"(smallest {min(small)}); use fewer nodes or method='bisect'"
        )

    def key(p: np.ndarray) -> tuple[float, float]:
        if p.size == 0:
            return (np.inf, np.inf)
        v = pts[p].mean(0)
        return (float(np.degrees(np.arctan2(v[1], v[0]))), float(np.degrees(np.arctan2(v[2], np.hypot(v[0], v[1])))))

    return sorted(parts, key=key)


def assignment_partition(assign: Sequence[int | None] | np.ndarray, n_nodes: int) -> list[np.ndarray]:
    """Partition from an explicit node id per image (``None`` or ``-1``: the
    image goes to no node). Node ``k`` gets exactly the images with id ``k``.

    >>> [p.tolist() for p in assignment_partition([0, None, 1, 0, -1], 2)]
    [[0, 3], [2]]
    """
    _check_nodes(n_nodes)
    ids = np.array([-1 if a is None else a for a in assign], dtype=object)
    # numbers only: a text '1' (or a bool) converted to a node id without a word
    if not all(isinstance(a, numbers.Real) and not isinstance(a, (bool, np.bool_)) for a in ids):
        raise DataError("assignment must hold integer node ids or None")
    try:
        ids_int = ids.astype(np.int64)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an infinite id
        raise DataError("assignment must hold integer node ids or None") from None
    if ids.size and not all(float(a) == int(a) for a in ids):
        raise DataError("assignment must hold integer node ids or None")
    bad = np.flatnonzero((ids_int < -1) | (ids_int >= n_nodes))
    if bad.size:
        raise DataError(
            f"assignment[{int(bad[0])}] = {ids_int[bad[0]]} is not a node id in [0, {n_nodes - 1}] or -1/None"
        )
    order = np.argsort(ids_int, kind="stable")
    sorted_ids = ids_int[order]
    bounds = np.searchsorted(sorted_ids, np.arange(n_nodes + 1))
    return [np.sort(order[bounds[k] : bounds[k + 1]]).astype(np.int64) for k in range(n_nodes)]


def label_entropy(labels: np.ndarray, num_classes: int) -> float:
    """Shannon entropy (bits) of a node's label distribution; ``log2(C)`` when
    balanced, 0 when one class. A skew measure for partitions and reports."""
    counts = np.bincount(np.asarray(labels, dtype=np.int64), minlength=num_classes).astype(np.float64)
    if counts.sum() == 0:
        return 0.0
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log2(p)).sum())
