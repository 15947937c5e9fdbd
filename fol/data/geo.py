"""Geo-tagged image datasets held in memory, and a node's train / val / test split.

A :class:`GeoDataset` is what every part of the toolkit passes around: images
as one float tensor, integer labels, and the latitude / longitude (degrees) of
each image so that a simulation can hand a satellite the images under its
ground track. Node datasets are small (hundreds of images), so everything is a
tensor in memory and subsets are index copies.

Conventions
-----------
* ``images``: ``torch.float32``, shape ``[N, C, H, W]``, values in ``[0, 1]``
  (**not** mean/std normalised; the models of :mod:`fol.models` take them
  directly and their first BatchNorm absorbs the offset).
* ``labels``: ``torch.int64``, shape ``[N]``, values in ``[0, len(class_names))``.
* ``lat`` / ``lon``: ``numpy.float64``, shape ``[N]``, degrees (WGS-84,
  latitude in ``[-90, 90]``, longitude in ``[-180, 180]``); ``NaN`` when the
  dataset has no coordinates (CIFAR, SVHN).

>>> import torch, numpy as np
>>> ds = GeoDataset(torch.rand(10, 3, 8, 8), torch.arange(10) % 2,
...                 np.linspace(40, 41, 10), np.full(10, -120.0), ["a", "b"], "toy")
>>> node = split_node(ds, seed=0, min_samples=10)
>>> [len(node.train), len(node.val), len(node.test)]
[7, 2, 1]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

from fol.defaults import class_name
from fol.errors import DataError
from swarmbase.tomlcheck import is_finite_number, shown

__all__ = ["GeoDataset", "NodeData", "split_node", "DEFAULT_SPLIT", "DEFAULT_MIN_SAMPLES"]

#: Per-node train / val / test fractions used throughout the toolkit.
DEFAULT_SPLIT: tuple[float, float, float] = (0.7, 0.15, 0.15)
#: Smallest node dataset :func:`split_node` accepts by default (gives at least
#: 3 validation and 3 test images with the default fractions).
DEFAULT_MIN_SAMPLES = 20


#: Largest image pool a loader may build (float32, 3 channels), and the widest image side.
MAX_POOL_BYTES = 8 * 2**30
MAX_IMAGE_SIZE = 1024


def check_pool_size(n_images: int, image_size: int, where: str) -> None:
    """Refuse, before anything is allocated, an image side outside 8..MAX_IMAGE_SIZE
    or a pool of ``n_images`` that would exceed :data:`MAX_POOL_BYTES` as float32.
    ``where`` names the source (a dataset, a folder) in the one-line message."""
    if isinstance(image_size, bool) or not isinstance(image_size, (int, np.integer)) or not (
            8 <= image_size <= MAX_IMAGE_SIZE):
        raise DataError(f"{where}: image_size must be an integer of 8..{MAX_IMAGE_SIZE} pixels, got {image_size!r}")
    need = int(n_images) * 3 * int(image_size) ** 2 * 4  # exact: a count from a file has no size limit
    if need > MAX_POOL_BYTES:
        raise DataError(f"{where}: {count_text(n_images)} images of {image_size}x{image_size} pixels would need "
                        f"{gib_text(need)} as float32 (limit {MAX_POOL_BYTES / 2**30:.0f} GiB); "
                        f"lower image_size or the number of images")


def count_text(n: int) -> str:
    """A count for a one-line message: ``1,000,000``, shortened as :func:`~swarmbase.tomlcheck.shown`
    shortens a long number past 60 characters (a TOML integer has no size limit).

    >>> count_text(10**6), count_text(10**400)
    ('1,000,000', '10000000000000000000... (401 digits)')
    """
    text = f"{int(n):,}"
    return text if len(text) <= 60 else shown(int(n))


def gib_text(n_bytes: int | float) -> str:
    """A byte count needed, for a one-line refusal: ``11.7 GiB``, or past the float range
    (a count of 10**400 in a file) ``more bytes than a float can count``."""
    return f"{n_bytes / 2**30:,.1f} GiB" if is_finite_number(n_bytes) else "more bytes than a float can count"


@dataclass(repr=False)
class GeoDataset:
    """Images + labels + coordinates (see the module docstring for dtypes/units).

    The constructor validates shapes, dtypes and ranges and raises
    :class:`~fol.errors.DataError` naming the field that is wrong. ``lat`` and
    ``lon`` may be given as any array-like; they are stored as float64 arrays;
    ``class_names`` are stored in Unicode NFC (:func:`fol.defaults.class_name`).
    """

    images: torch.Tensor
    labels: torch.Tensor
    lat: np.ndarray
    lon: np.ndarray
    class_names: list[str]
    name: str = "dataset"
    sources: list[str] | None = field(default=None)
    """Optional per-image origin (file path) for error messages and reports."""

    def __post_init__(self) -> None:
        where = f"dataset {self.name!r}"
        if not isinstance(self.images, torch.Tensor) or self.images.ndim != 4:
            shape = tuple(self.images.shape) if isinstance(self.images, torch.Tensor) else type(self.images).__name__
            raise DataError(f"{where}: images must be a 4-D tensor [N, C, H, W], got {shape}")
        if self.images.dtype != torch.float32:
            raise DataError(f"{where}: images must be float32 in [0, 1], got {self.images.dtype}")
        n = int(self.images.shape[0])
        if not isinstance(self.labels, torch.Tensor) or self.labels.ndim != 1 or int(self.labels.shape[0]) != n:
            shape = tuple(self.labels.shape) if isinstance(self.labels, torch.Tensor) else type(self.labels).__name__
            raise DataError(f"{where}: labels must be a 1-D tensor of length {n}, got {shape}")
        if self.labels.dtype != torch.int64:
            raise DataError(f"{where}: labels must be int64, got {self.labels.dtype}")
        self.class_names = [class_name(str(c)) for c in self.class_names]  # NFC, as model cards keep them
        if len(self.class_names) < 1 or len(set(self.class_names)) != len(self.class_names):
            raise DataError(f"{where}: class_names must be non-empty and unique (in Unicode NFC), "
                            f"got {self.class_names}")
        if n and (int(self.labels.min()) < 0 or int(self.labels.max()) >= len(self.class_names)):
            raise DataError(
                f"{where}: labels must lie in [0, {len(self.class_names) - 1}] "
                f"({len(self.class_names)} classes), got [{int(self.labels.min())}, {int(self.labels.max())}]"
            )
        for attr, bound in (("lat", 90.0), ("lon", 180.0)):
            arr = np.asarray(getattr(self, attr), dtype=np.float64)
            if arr.shape != (n,):
                raise DataError(f"{where}: {attr} must have shape ({n},), got {arr.shape}")
            finite = arr[np.isfinite(arr)]
            if np.isinf(arr).any() or (finite.size and np.abs(finite).max() > bound):
                raise DataError(f"{where}: {attr} must be degrees in [-{bound:g}, {bound:g}] or NaN")
            setattr(self, attr, arr)
        if self.sources is not None and len(self.sources) != n:
            raise DataError(f"{where}: sources must have {n} entries, got {len(self.sources)}")

    # ----------------------------------------------------------------- basics

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def __repr__(self) -> str:
        return (
            f"GeoDataset(name={self.name!r}, n={len(self)}, image_shape={self.image_shape}, "
            f"classes={self.class_names})"
        )

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def image_shape(self) -> tuple[int, int, int]:
        """``(C, H, W)`` of one image."""
        c, h, w = self.images.shape[1:]
        return int(c), int(h), int(w)

    @property
    def has_coordinates(self) -> bool:
        """True when every image has a finite latitude and longitude."""
        return bool(len(self)) and bool(np.isfinite(self.lat).all() and np.isfinite(self.lon).all())

    def class_counts(self) -> np.ndarray:
        """Number of images per class, ``int64`` array of length ``num_classes``."""
        return np.bincount(self.labels.numpy(), minlength=self.num_classes).astype(np.int64)

    def tensors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(images, labels)``, the form :func:`fol.train.fit` takes."""
        return self.images, self.labels

    # --------------------------------------------------------------- subsets

    def subset(self, indices: Sequence[int] | np.ndarray | torch.Tensor, name: str | None = None) -> "GeoDataset":
        """The images at ``indices`` (integer positions, in that order; a boolean
        mask of length N is accepted too), as a new dataset with copied tensors."""
        idx = np.asarray(indices.cpu().numpy() if isinstance(indices, torch.Tensor) else indices)
        if idx.dtype == bool:
            if idx.shape != (len(self),):
                raise DataError(f"dataset {self.name!r}: boolean mask must have length {len(self)}, got {idx.shape}")
            idx = np.flatnonzero(idx)
        idx = idx.astype(np.int64).reshape(-1)
        if idx.size and (idx.min() < -len(self) or idx.max() >= len(self)):
            raise DataError(f"dataset {self.name!r}: subset index out of range for {len(self)} images")
        t = torch.from_numpy(idx)
        return GeoDataset(
            images=self.images[t].clone(),
            labels=self.labels[t].clone(),
            lat=self.lat[idx].copy(),
            lon=self.lon[idx].copy(),
            class_names=list(self.class_names),
            name=name or self.name,
            sources=[self.sources[i] for i in idx] if self.sources is not None else None,
        )

    @classmethod
    def concat(cls, parts: Sequence["GeoDataset"], name: str | None = None) -> "GeoDataset":
        """Join datasets with the same classes and image shape (e.g. the union of
        all nodes' training splits for a pooled baseline)."""
        if not parts:
            raise DataError("cannot concatenate an empty list of datasets")
        first = parts[0]
        for p in parts[1:]:
            if p.class_names != first.class_names or p.image_shape != first.image_shape:
                raise DataError(
                    f"cannot concatenate {p.name!r} ({p.class_names}, {p.image_shape}) with "
                    f"{first.name!r} ({first.class_names}, {first.image_shape})"
                )
        with_sources = all(p.sources is not None for p in parts)
        return cls(
            images=torch.cat([p.images for p in parts]),
            labels=torch.cat([p.labels for p in parts]),
            lat=np.concatenate([p.lat for p in parts]),
            lon=np.concatenate([p.lon for p in parts]),
            class_names=list(first.class_names),
            name=name or first.name,
            sources=[s for p in parts for s in p.sources] if with_sources else None,  # type: ignore[union-attr]
        )


@dataclass(repr=False)
class NodeData:
    """One node's local data: stratified train / val / test splits."""

    train: GeoDataset
    val: GeoDataset
    test: GeoDataset

    def sizes(self) -> tuple[int, int, int]:
        return len(self.train), len(self.val), len(self.test)

    def __repr__(self) -> str:
        return f"NodeData(train={len(self.train)}, val={len(self.val)}, test={len(self.test)})"


def _stratified_counts(class_sizes: np.ndarray, fractions: np.ndarray) -> np.ndarray:
    """Integer matrix ``[classes, splits]`` with row sums ``class_sizes`` and
    column sums as close as possible to ``N * fractions`` (largest remainders)."""
    n = int(class_sizes.sum())
    targets = np.floor(n * fractions).astype(np.int64)
    for s in np.argsort(-(n * fractions - targets), kind="stable")[: n - int(targets.sum())]:
        targets[s] += 1
    quota = class_sizes[:, None] * fractions[None, :]
    counts = np.floor(quota).astype(np.int64)
    row_def = class_sizes - counts.sum(1)
    col_def = targets - counts.sum(0)
    order = np.argsort(-(quota - counts), axis=None, kind="stable")
    for flat in order:  # first pass: at most one extra per cell, by remainder
        c, s = divmod(int(flat), len(fractions))
        if row_def[c] > 0 and col_def[s] > 0:
            counts[c, s] += 1
            row_def[c] -= 1
            col_def[s] -= 1
    for c in range(len(class_sizes)):  # second pass: whatever is left
        for s in range(len(fractions)):
            k = min(row_def[c], col_def[s])
            if k > 0:
                counts[c, s] += k
                row_def[c] -= k
                col_def[s] -= k
    return counts


def split_node(
    ds: GeoDataset,
    seed: int,
    fractions: tuple[float, float, float] = DEFAULT_SPLIT,
    min_samples: int = DEFAULT_MIN_SAMPLES,
) -> NodeData:
    """Split one node's data into stratified train / val / test sets.

    Each class is shuffled with a generator seeded by ``seed`` and cut so that
    the split sizes are ``N * fraction`` rounded by largest remainders (each
    less than one image off, summing to ``N``) and every class's count in each
    split is near its quota (class size x fraction): less than one image
    under it and less than two over it (within one image for most class
    mixes; not always the closest integers allow). Indices within a split
    keep the dataset's order.

    Raises :class:`~fol.errors.DataError` when the node has fewer than
    ``min_samples`` images or a split would be empty.
    """
    fr = np.asarray(fractions, dtype=np.float64)
    if fr.shape != (3,) or (fr <= 0).any() or abs(fr.sum() - 1.0) > 1e-6:
        raise DataError(f"split fractions must be three positive numbers summing to 1, got {tuple(fractions)}")
    n = len(ds)
    if n < min_samples:
        raise DataError(
            f"dataset {ds.name!r} has {n} samples; a train/val/test split "
            f"({'/'.join(f'{f:g}' for f in fr)}) needs at least {min_samples}"
        )
    counts = _stratified_counts(ds.class_counts(), fr)
    if (counts.sum(0) == 0).any():
        raise DataError(
            f"dataset {ds.name!r} has {n} samples, too few for a non-empty train/val/test split "
            f"({'/'.join(f'{f:g}' for f in fr)}); lower min_samples only if the fractions allow it"
        )
    # every bit of the seed (a node seed can pass 2**32); below 2**32 the stream is the one it always was
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 0x5E11]))
    labels = ds.labels.numpy()
    parts: list[list[np.ndarray]] = [[], [], []]
    for c in range(ds.num_classes):
        idx = np.flatnonzero(labels == c)
        rng.shuffle(idx)
        a, b = counts[c, 0], counts[c, 0] + counts[c, 1]
        for s, chunk in enumerate((idx[:a], idx[a:b], idx[b:])):
            parts[s].append(chunk)
    names = ("train", "val", "test")
    subsets = [ds.subset(np.sort(np.concatenate(p)), name=f"{ds.name}/{names[s]}") for s, p in enumerate(parts)]
    return NodeData(*subsets)
