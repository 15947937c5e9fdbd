"""Datasets by name: ``load_dataset("synthetic-wildfire")`` and friends.

==========================  =====================================================
name                        what
==========================  =====================================================
``synthetic-wildfire``      embedded generator, 12,000 images by default (no files)
``synthetic-hurricane``     embedded generator, 12,000 images by default (no files)
``synthetic-wildfire-types``   the same images, labelled by the form the event
``synthetic-hurricane-types``  takes (4 and 5 classes, "no event" first)
``wildfire``                Wildfire Prediction Dataset, ``<root>/wildfire/``
``hurricane``               Satellite Images of Hurricane Damage, ``<root>/hurricane/``
``cifar10`` / ``cifar100``  torchvision CIFAR, ``<root>/cifar10/``, ``<root>/cifar100/``
``svhn``                    SVHN ``.mat`` files, ``<root>/svhn/``
``imagefolder``             any ``<path>/<class>/<image>`` folder (needs ``path=``)
==========================  =====================================================

``root`` is the data root (the CLI's ``--data-root``; default
:func:`~fol.data.loaders.default_data_root`). Keyword arguments go to the
loader (e.g. ``image_size``, ``max_per_class``; for the synthetic sets ``n``,
``seed``, ``label_noise``, ``region``).

>>> ds = load_dataset("synthetic-hurricane", n=16, seed=1)
>>> len(ds), ds.class_names
(16, ['no_damage', 'damage'])
"""

from __future__ import annotations

import errno
import inspect
from pathlib import Path
from typing import Any, Callable

import numpy as np

from fol.data import loaders
from fol.data.geo import GeoDataset
from fol.data.synthetic import make_synthetic
from fol.defaults import check_band_options
from fol.errors import ConfigError, DataError
from swarmbase.cli import printable
from swarmbase.tomlcheck import brief, shown

__all__ = ["load_dataset", "check_dataset", "dataset_accepts", "dataset_names", "describe", "SYNTHETIC_DEFAULT_SIZE",
           "image_folder_path"]

#: Images drawn by ``load_dataset("synthetic-*")`` unless ``n`` is given.
SYNTHETIC_DEFAULT_SIZE = 12_000


def _synthetic(task: str, classes: str = "event") -> Callable[..., GeoDataset]:
    def load(root: Path | None, n: int = SYNTHETIC_DEFAULT_SIZE, seed: int = 0, **kw: Any) -> GeoDataset:
        return make_synthetic(task, n=n, seed=seed, classes=classes, **kw)

    load.__doc__ = f"make_synthetic({task!r}, n={SYNTHETIC_DEFAULT_SIZE}, seed=0, classes={classes!r}, ...)"
    load.__wrapped__ = make_synthetic  # type: ignore[attr-defined]
    return load


def _in_root(fn: Callable[..., GeoDataset], name: str) -> Callable[..., GeoDataset]:
    def load(root: Path | None, **kw: Any) -> GeoDataset:
        return fn(loaders.dataset_dir(name, root), **kw)

    load.__doc__ = fn.__doc__
    load.__wrapped__ = fn  # type: ignore[attr-defined]
    return load


def image_folder_path(path: str | Path, root: str | Path | None) -> Path:
    """Where ``imagefolder``'s ``path`` is (``~`` expanded, as in a scenario's
    ``data.path``: no shell expands it after ``imagefolder:`` or ``path=``): as
    given when it is absolute or exists, else under the data root (``root``,
    default :func:`~fol.data.loaders.default_data_root`); a folder found in
    neither is named under a given root, else as given."""
    p = Path(path).expanduser()
    try:  # asked of an absolute name too: the loader's is_dir() raised OSError with the name whole
        exists = p.exists()
    except OSError as exc:  # a name the file system refuses (too long): no folder of that name exists
        where = brief(p)  # as every message names it: escaped, a long path cut
        if exc.errno == errno.ENAMETOOLONG:
            raise DataError(f"image folder {where}: not a name this file system takes ({exc.strerror})") from None
        raise DataError(f"image folder {where}: cannot be checked ({exc.strerror})") from None
    if p.is_absolute() or exists:
        return p
    under = (Path(root).expanduser() if root is not None else loaders.default_data_root()) / p
    return under if root is not None or under.exists() else p


def _image_folder(root: Path | None, path: str | Path | None = None, **kw: Any) -> GeoDataset:
    if path is None or (isinstance(path, str) and not path.strip()):  # "" is no folder, not the current one
        raise ConfigError("dataset 'imagefolder' needs path=<folder with one sub-folder per class>"
                          + ("" if path is None else f", got an empty path {path!r}"))
    return loaders.load_image_folder(image_folder_path(path, root), **kw)


_image_folder.__wrapped__ = loaders.load_image_folder  # type: ignore[attr-defined]

_REGISTRY: dict[str, Callable[..., GeoDataset]] = {
    "synthetic-wildfire": _synthetic("wildfire"),
    "synthetic-hurricane": _synthetic("hurricane"),
    "synthetic-wildfire-types": _synthetic("wildfire", "type"),
    "synthetic-hurricane-types": _synthetic("hurricane", "type"),
    "wildfire": _in_root(loaders.load_wildfire, "wildfire"),
    "hurricane": _in_root(loaders.load_hurricane, "hurricane"),
    "cifar10": _in_root(loaders.load_cifar10, "cifar10"),
    "cifar100": _in_root(loaders.load_cifar100, "cifar100"),
    "svhn": _in_root(loaders.load_svhn, "svhn"),
    "imagefolder": _image_folder,
}


def dataset_names() -> list[str]:
    """Names accepted by :func:`load_dataset`."""
    return list(_REGISTRY)


def load_dataset(name: str, root: str | Path | None = None, **kw: Any) -> GeoDataset:
    """Load dataset ``name`` (see the module table) from data root ``root``.

    Unknown names and keyword arguments the loader does not take raise
    :class:`~fol.errors.ConfigError`; missing or unreadable data raises
    :class:`~fol.errors.DataError` saying where the files are expected.
    ``bands``, ``scale`` and ``coords`` go by :func:`~fol.defaults.check_band_options`,
    as in every front end: ``bands`` given to another dataset than ``imagefolder`` is
    refused as such, not as an option its loader does not take.
    """
    if name in _REGISTRY:
        check_band_options(name, kw.get("bands"), kw.get("scale"), kw.get("coords"), names=loaders.LOADER_BAND_NAMES)
    fn = _checked_loader(name, kw)
    return fn(Path(root).expanduser() if root is not None else None, **kw)


def dataset_accepts(name: str, option: str) -> bool:
    """Does dataset ``name``'s loader take keyword ``option``?

    >>> dataset_accepts("wildfire", "skip_corrupt"), dataset_accepts("synthetic-wildfire", "skip_corrupt")
    (True, False)
    """
    try:
        _checked_loader(name, {option: None})
    except ConfigError:
        return False
    return True


def _checked_loader(name: str, kw: dict[str, Any]) -> Callable[..., GeoDataset]:
    if name not in _REGISTRY:
        raise ConfigError(f"unknown dataset {shown(name)}; expected one of {', '.join(dataset_names())}")
    fn = _REGISTRY[name]
    target = getattr(fn, "__wrapped__", fn)
    params = inspect.signature(target).parameters
    # the name fixes the task and, for the synthetic sets, the label set
    allowed = {p for p in params if p not in ("path", "task", "classes") or name == "imagefolder"}
    unknown = sorted(set(kw) - allowed)
    if unknown:
        raise ConfigError(
            f"dataset {name!r} does not take option(s) {', '.join(unknown)}; expected a subset of {sorted(allowed)}"
        )
    return fn


def check_dataset(name: str, root: str | Path | None = None, **kw: Any) -> None:
    """What :func:`load_dataset` would check first, without reading any image:
    the name, the options, and that a real dataset's folder exists and is not
    empty (synthetic datasets are generated, so always present); an image
    folder read with ``bands`` holds only TIFF files.

    >>> check_dataset("synthetic-wildfire", n=10)
    >>> check_dataset("hurricane", root="/nonexistent")
    Traceback (most recent call last):
    ...
    fol.errors.DataError: dataset 'hurricane' not found: no files in /nonexistent/hurricane (unpack it there, or set data.root / --data-root / FOL_DATA_ROOT; see datasets/README.md)
    """
    _checked_loader(name, kw)
    if name.startswith("synthetic-"):
        return
    if name == "imagefolder":
        folder = image_folder_path(kw.get("path") or "", root)
        where = brief(folder)  # as every message names it: escaped, a long path cut
        loaders.check_image_folder_root(folder)  # a file, a link leading nowhere: said so, not "not found"
        if not folder.is_dir() or not any(folder.iterdir()):
            raise DataError(f"image folder {where} not found or empty: expected {where}/<class>/<image files>")
        if kw.get("coords") == "csv":
            table = Path(kw.get("coords_csv") or folder / "coords.csv")
            if not table.is_file():
                raise DataError(f"coordinates file {brief(table)} not found: coords = 'csv' needs it (columns file, lat, lon)")
        if kw.get("bands") is not None:  # a folder of TIFFs: told from the file names, no image is read
            loaders.check_tiff_names(folder, loaders.image_folder_files(folder, splits=kw.get("splits"))[0])
        return
    folder = loaders.dataset_dir(name, root)
    if not folder.is_dir() or not any(folder.iterdir()):
        raise DataError(f"dataset {name!r} not found: no files in {brief(folder)} (unpack it there, or set data.root / "
                        f"--data-root / FOL_DATA_ROOT; see datasets/README.md)")


def describe(ds: GeoDataset) -> str:
    """A short multi-line summary for ``fol data info``: size, image shape,
    class balance, coordinate extent (deg) and per-channel pixel mean."""
    n = len(ds)
    c, h, w = ds.image_shape
    # the dataset's and the classes' names are a user's folder names: escaped, one line each
    lines = [f"dataset {printable(ds.name)}: {n} images, {c}x{h}x{w} (C x H x W, float32 in [0, 1])"]
    counts = ds.class_counts()
    lines.append(f"  classes ({ds.num_classes}):")
    for name, k in zip(ds.class_names, counts):
        lines.append(f"    {printable(name):<16s} {int(k):>8d}  ({(100.0 * k / n) if n else 0.0:5.1f} %)")
    has = np.isfinite(ds.lat) & np.isfinite(ds.lon)
    if has.any():
        lines.append(
            f"  coordinates: {int(has.sum())}/{n} images; latitude {ds.lat[has].min():.3f} .. {ds.lat[has].max():.3f} deg, "
            f"longitude {ds.lon[has].min():.3f} .. {ds.lon[has].max():.3f} deg"
        )
    else:
        lines.append("  coordinates: none")
    if n:
        mean = ds.images.mean(dim=(0, 2, 3)).tolist()
        lines.append("  pixel mean per channel: " + ", ".join(f"{m:.3f}" for m in mean))
    return "\n".join(lines)
