"""Geo-tagged datasets for the toolkit.

* :class:`GeoDataset` - images (float32 [N, C, H, W] in [0, 1]), int64 labels,
  latitude / longitude (deg, NaN when unknown), class names;
  :class:`NodeData` and :func:`split_node` - a node's stratified 70/15/15 split;
* :func:`make_synthetic` - the embedded, deterministic wildfire / hurricane
  generator whose appearance depends on location;
* loaders for the real datasets (:mod:`fol.data.loaders`) and the name registry
  :func:`load_dataset` / :func:`dataset_names`; :func:`describe` for
  ``fol data info``;
* partitioners: :func:`dirichlet_partition`, :func:`region_partition`,
  :func:`assignment_partition`.

>>> ds = load_dataset("synthetic-wildfire", n=64, seed=0)
>>> parts = dirichlet_partition(ds.labels.numpy(), n_nodes=2, psi=0.5, seed=0, samples_per_node=30)
>>> node = split_node(ds.subset(parts[0]), seed=0)
>>> node.sizes()
(21, 5, 4)
"""

from fol.data.geo import DEFAULT_MIN_SAMPLES, DEFAULT_SPLIT, GeoDataset, NodeData, split_node
from fol.data import loaders as _loaders
from fol.data.loaders import (
    default_data_root,
    load_cifar10,
    load_cifar100,
    load_hurricane,
    load_image_folder,
    load_svhn,
    load_wildfire,
)
from fol.data.partition import assignment_partition, dirichlet_partition, label_entropy, region_partition
from fol.data.registry import SYNTHETIC_DEFAULT_SIZE, dataset_names, describe, load_dataset
from fol.data.synthetic import (
    DEFAULT_LABEL_NOISE,
    TASK_CLASSES,
    TASK_REGIONS,
    TASK_TYPE_CLASSES,
    geo_fields,
    make_synthetic,
)

__all__ = [
    "GeoDataset",
    "NodeData",
    "split_node",
    "DEFAULT_SPLIT",
    "DEFAULT_MIN_SAMPLES",
    "make_synthetic",
    "geo_fields",
    "TASK_CLASSES",
    "TASK_TYPE_CLASSES",
    "TASK_REGIONS",
    "DEFAULT_LABEL_NOISE",
    "SYNTHETIC_DEFAULT_SIZE",
    "load_dataset",
    "dataset_names",
    "describe",
    "dirichlet_partition",
    "region_partition",
    "assignment_partition",
    "label_entropy",
]
# the loaders re-exported above: the real-dataset readers and the data root
__all__ += [n for n in _loaders.__all__ if n.startswith("load_") or n == "default_data_root"]
