"""Partitioners: Dirichlet label skew, geographic regions, explicit assignment."""

from __future__ import annotations

import numpy as np
import pytest

from fol.data import assignment_partition, dirichlet_partition, label_entropy, region_partition
from fol.errors import DataError


def _labels(n_per_class=600, classes=4):
    return np.repeat(np.arange(classes), n_per_class)


def _disjoint(parts):
    allidx = np.concatenate(parts)
    return len(allidx) == len(np.unique(allidx))


def test_dirichlet_full_partition_covers_each_index_once_and_respects_min():
    y = _labels()
    parts = dirichlet_partition(y, n_nodes=10, psi=0.5, seed=3, min_samples=30)
    assert len(parts) == 10 and _disjoint(parts)
    assert sum(len(p) for p in parts) == len(y)  # every image used
    assert min(len(p) for p in parts) >= 30
    again = dirichlet_partition(y, n_nodes=10, psi=0.5, seed=3, min_samples=30)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))
    other = dirichlet_partition(y, n_nodes=10, psi=0.5, seed=4, min_samples=30)
    assert not all(np.array_equal(a, b) for a, b in zip(parts, other))


def test_dirichlet_samples_per_node_exact_sizes():
    y = np.repeat([0, 1], 6000)
    parts = dirichlet_partition(y, n_nodes=24, psi=0.5, seed=0, samples_per_node=300)
    assert [len(p) for p in parts] == [300] * 24
    assert _disjoint(parts)
    assert all(p.dtype == np.int64 and np.all(np.diff(p) > 0) for p in parts)


def _mean_entropy(y, psi, seed, **kw):
    parts = dirichlet_partition(y, n_nodes=20, psi=psi, seed=seed, **kw)
    return np.mean([label_entropy(y[p], 4) for p in parts])


@pytest.mark.parametrize("kw", [dict(min_samples=5), dict(samples_per_node=100, min_samples=5)])
def test_smaller_psi_gives_more_skew(kw):
    y = _labels()
    skewed = np.mean([_mean_entropy(y, 0.1, s, **kw) for s in range(3)])
    mild = np.mean([_mean_entropy(y, 1.0, s, **kw) for s in range(3)])
    iid = np.mean([_mean_entropy(y, 100.0, s, **kw) for s in range(3)])
    assert skewed + 0.3 < mild < iid
    assert iid > 1.9  # close to log2(4) = 2 bits for near-uniform nodes


def test_dirichlet_errors_say_what_is_needed():
    y = np.repeat([0, 1], 50)
    with pytest.raises(DataError, match=r"100 samples.*need 240"):
        dirichlet_partition(y, n_nodes=24, psi=0.5, seed=0, min_samples=10)
    with pytest.raises(DataError, match="need 300"):
        dirichlet_partition(y, n_nodes=3, psi=0.5, seed=0, samples_per_node=100)
    with pytest.raises(DataError, match="psi"):
        dirichlet_partition(y, n_nodes=2, psi=0.0, seed=0)
    with pytest.raises(DataError, match="after 5 draws"):
        dirichlet_partition(y, n_nodes=4, psi=0.05, seed=0, min_samples=24, max_retries=5)


def _spread_km(lat, lon):
    """Mean distance (km) of points to their centroid on the sphere."""
    la, lo = np.radians(lat), np.radians(lon)
    v = np.stack([np.cos(la) * np.cos(lo), np.cos(la) * np.sin(lo), np.sin(la)], 1)
    c = v.mean(0)
    c /= np.linalg.norm(c)
    return float(np.mean(np.arccos(np.clip(v @ c, -1, 1))) * 6371.0)


@pytest.mark.parametrize("method", ["kmeans", "bisect"])
def test_region_partition_is_compact(method):
    rng = np.random.default_rng(0)
    lat = rng.uniform(20, 50, 2000)
    lon = rng.uniform(-125, -70, 2000)
    parts = region_partition(lat, lon, n_nodes=8, seed=1, method=method, min_samples=20)
    assert len(parts) == 8 and _disjoint(parts) and sum(map(len, parts)) == 2000
    whole = _spread_km(lat, lon)
    node_spread = np.mean([_spread_km(lat[p], lon[p]) for p in parts])
    assert node_spread < 0.5 * whole
    # random partitions of the same sizes are not compact
    perm = rng.permutation(2000)
    cuts = np.cumsum([len(p) for p in parts])[:-1]
    rand_spread = np.mean([_spread_km(lat[p], lon[p]) for p in np.split(perm, cuts)])
    assert node_spread < 0.5 * rand_spread
    if method == "bisect":
        assert max(map(len, parts)) - min(map(len, parts)) <= 1
    again = region_partition(lat, lon, n_nodes=8, seed=1, method=method, min_samples=20)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again, strict=True))


def test_region_partition_antimeridian_and_errors():
    lat = np.array([0.0, 0.5, 1.0, 0.0, 0.5, 1.0])
    lon = np.array([179.5, -179.8, 179.9, 10.0, 10.5, 11.0])  # one cluster straddles 180 deg
    parts = region_partition(lat, lon, n_nodes=2, seed=0)
    assert sorted(map(sorted, (p.tolist() for p in parts))) == [[0, 1, 2], [3, 4, 5]]
    with pytest.raises(DataError, match="missing"):
        region_partition([0.0, np.nan], [0.0, 1.0], n_nodes=1, seed=0)
    with pytest.raises(DataError, match="method"):
        region_partition(lat, lon, n_nodes=2, seed=0, method="voronoi")
    with pytest.raises(DataError, match="at least 5"):
        region_partition(lat, lon, n_nodes=2, seed=0, min_samples=5)


def test_assignment_partition_exact():
    parts = assignment_partition([2, 0, None, 2, -1, 1, 0], n_nodes=4)
    assert [p.tolist() for p in parts] == [[1, 6], [5], [0, 3], []]
    with pytest.raises(DataError, match=r"assignment\[1\] = 4"):
        assignment_partition([0, 4], n_nodes=4)
    with pytest.raises(DataError, match="integer"):
        assignment_partition([0, 1.5], n_nodes=4)
    for bad in (float("inf"), float("-inf"), float("nan")):  # inf was an OverflowError traceback
        with pytest.raises(DataError, match="integer"):
            assignment_partition([0, bad], n_nodes=4)
    for bad in ("1", b"1", np.str_("1"), True, np.bool_(True)):  # were taken as node 1
        with pytest.raises(DataError, match=r"^assignment must hold integer node ids or None$"):
            assignment_partition([0, bad], n_nodes=4)
    assert [p.tolist() for p in assignment_partition(np.array([1, 0, -1]), 2)] == [[1], [0]]
    assert [p.tolist() for p in assignment_partition(np.array([1.0, 0.0]), 2)] == [[1], [0]]


def test_top_up_completes_a_draw_no_redraw_can_and_changes_no_feasible_one() -> None:
    y = np.repeat([0, 1], 3600)
    with pytest.raises(DataError, match="fewer than 40"):
        dirichlet_partition(y, n_nodes=24, psi=0.1, seed=0, min_samples=40, max_retries=50)
    parts = dirichlet_partition(y, n_nodes=24, psi=0.1, seed=0, min_samples=40, max_retries=50, short="top-up")
    flat = np.concatenate(parts)
    assert len(flat) == len(y) == len(set(flat.tolist()))  # every image once
    assert min(len(p) for p in parts) == 40
    feasible = dirichlet_partition(y, n_nodes=10, psi=0.5, seed=3, min_samples=30)
    same = dirichlet_partition(y, n_nodes=10, psi=0.5, seed=3, min_samples=30, short="top-up")
    assert all(np.array_equal(a, b) for a, b in zip(feasible, same))
    with pytest.raises(DataError, match="short"):
        dirichlet_partition(y, n_nodes=10, psi=0.5, seed=3, short="pad")


def test_top_up_adds_only_the_short_nodes_majority_class() -> None:
    from fol.data.partition import _top_up

    y = np.array([0] * 60 + [1] * 40)
    parts = [list(range(0, 50)) + list(range(60, 90)),  # 80 images: the donor
             list(range(50, 52)) + [90],                # 3 images, majority class 0
             list(range(91, 100)),                      # 9 images, all class 1
             list(range(52, 60)),                       # 8 images of class 0
             []]                                        # empty: takes the most common class (0)
    out = _top_up(parts, y, min_samples=10)
    assert sorted(i for q in out for i in q) == list(range(100)) and min(map(len, out)) == 10
    assert len(parts[4]) == 0  # the input is not changed
    for before, after in zip(parts[1:], out[1:]):
        added = set(after) - set(before)
        majority = int(np.bincount(y[before]).argmax()) if before else 0
        assert set(before) <= set(after) and {int(y[i]) for i in added} <= {majority}
