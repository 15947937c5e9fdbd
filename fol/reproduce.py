"""The FOL paper's evaluation protocol (its Tables 1-2) as one function.

:func:`run_protocol` runs, for every dataset and Dirichlet concentration psi, a
swarm of nodes with varying local-data sizes (the whole pool is split by
:func:`fol.data.dirichlet_partition` without a fixed per-node size, so label mix
*and* size vary), pretrains every node (:func:`fol.nodes.build_nodes`), and
measures the paper's rows on each node's own test split:

* ``Local`` (the pretrained model);
* ``FOL-A``, ``FOL``, ``FOL-AN``, ``FOL-N`` at E = 1..``rounds``: two FOL
  pipeline runs (with and without alignment pruning,
  :func:`fol.methods.fol_method.run_fol_pipeline`); round ``e`` starts from the
  students of round ``e - 1``, and the ``-A`` rows are the aligned Top-K
  ensembles of the same runs, so E = 1, 2, 3 all come from one run of E = 3;
* ``DENSE`` and ``Co-Boosting`` (one-shot, data-free; their default budget
  presets);
* ``FedAvg`` at E = 1..``rounds`` (the paper's one-shot FedAvg with E rounds);
* ``Pooled`` and ``Pooled + FT`` (not in the paper; not federated): one model
  trained on every node's data in one place, and that model fine-tuned on
  each node's own data (:mod:`fol.methods.pooled`). They measure how much room
  the setting leaves a personalization method: the ceiling the FOL rows are
  read against.
* ``Nbr-pooled + FT`` (only when asked for: ``methods`` holding
  ``nbr-pooled-ft``; not federated): each node's model trained on its own and
  its first-round senders' data, then fine-tuned on its own
  (:mod:`fol.methods.pooled`): the room one exchange with Q neighbours can
  reach.

**Columns, fixed before any result:** after partitioning (which depends only on
the data seed, the same for every training seed) the nodes are sorted by local
data size (ties by index) and the nodes at the size quantiles
:data:`COLUMN_QUANTILES` (25 %, 50 %, 75 %) are reported by id, plus the mean
over all nodes. Every cell is mean ± std over the training seeds (node split,
initialization, shuffling and neighbour draws change with the seed; the swarm
does not). The paper's published cells for the same task and psi
(:data:`PAPER_CELLS`; its own satellites, not ours) are shown beside ours.

>>> cfg = ProtocolConfig.quick()
>>> cfg.psis, cfg.nodes, len(cfg.seeds)
((0.5,), 4, 1)
>>> ROWS[:3]
['Local', 'FOL-A (E=1)', 'FOL-A (E=2)']
"""

from __future__ import annotations

import csv
import dataclasses
import io
import logging
import math
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from fol.config import FOLConfig
from fol.data import DEFAULT_MIN_SAMPLES, GeoDataset, dirichlet_partition, load_dataset
from fol.data.geo import MAX_IMAGE_SIZE
from fol.defaults import DEFAULT_ARCH, MAX_SEED, is_seed
from fol.errors import ConfigError
from fol.fileio import atomic_write_bytes, write_json_atomic
from fol.methods import SwarmContext, get_method
from fol.methods.base import run_side_by_side, serial_map
from fol.methods.fol_method import run_fol_pipeline
from fol.nodes import build_nodes
from fol.personalize import swarm_transfer
from fol.train import evaluate
from swarmbase.tomlcheck import brief, is_decimal, is_finite_number, shown

__all__ = [
    "ProtocolConfig", "ROWS", "COLUMN_QUANTILES", "PAPER_CELLS", "PAPER_SATELLITES", "column_nodes",
    "TABLE_FILES", "check_fresh_output", "mean_pm",
    "Paired", "paired_difference", "merge_results", "RowComparison", "compare_results",
    "partition_pool", "pretrained_swarm", "run_setting", "run_protocol", "ProtocolResult", "load_pool", "SYNTHETIC_POOL_ALL", "paper_task", "METHOD_GROUPS", "DEFAULT_GROUPS", "rows_for",
]

log = logging.getLogger(__name__)

#: Size quantiles of the nodes reported by id (fixed before any result).
COLUMN_QUANTILES: tuple[float, ...] = (0.25, 0.5, 0.75)
#: The two FOL pipelines: (method group, alignment pruning, ensemble row, student row).
_FOL_PIPELINES = (("fol", True, "FOL-A", "FOL"), ("fol-n", False, "FOL-AN", "FOL-N"))
#: The one-shot data-free baselines: (row, method group).
_DATA_FREE = (("DENSE", "dense"), ("Co-Boosting", "co-boosting"))
#: The references of the ``pooled`` group: (row, method). Not federated: every
#: node's data in one place (:mod:`fol.methods.pooled`), the ceiling the other
#: rows are read against.
_POOLED = (("Pooled", "pooled"), ("Pooled + FT", "pooled-ft"))
#: The reference of the ``nbr-pooled-ft`` group: (row, method). Each node's
#: model trained on its own and its first-round senders' data: the room one
#: exchange can reach.
_NBR_POOLED = ("Nbr-pooled + FT", "nbr-pooled-ft")
#: The method groups a protocol run can include (Local is always there): ``fol``
#: gives the FOL-A and FOL rows (the pipeline with pruning), ``fol-n`` FOL-AN and
#: FOL-N (without), each baseline its own rows, and ``pooled`` the two
#: references trained on all nodes' data pooled (Pooled, Pooled + FT),
#: ``nbr-pooled-ft`` the reference trained on each node's and its first-round
#: senders' data (Nbr-pooled + FT). ``local``
#: adds nothing: a run of ``("local",)`` only pretrains and reports Local, which
#: is how to check, in minutes, that a machine pretrains a saved run's swarms
#: alike before comparing with it (``--merge`` refuses runs whose Local differs).
METHOD_GROUPS: tuple[str, ...] = ("fol", "fol-n", "dense", "co-boosting", "fedavg", "pooled", "nbr-pooled-ft",
                                  "local")
#: The groups a run includes unless told otherwise: every group but
#: ``nbr-pooled-ft`` (one training per node on Q + 1 nodes' data; asked for by name).
DEFAULT_GROUPS: tuple[str, ...] = tuple(g for g in METHOD_GROUPS if g != "nbr-pooled-ft")


def rows_for(rounds: int, methods: Sequence[str] = METHOD_GROUPS) -> list[str]:
    """The table's rows for E = 1..``rounds`` and the method groups ``methods``,
    in the paper's order.

    >>> rows_for(1, ("fol",))
    ['Local', 'FOL-A (E=1)', 'FOL (E=1)']
    """
    es = range(1, rounds + 1)
    return (["Local"]
            + [f"{v} (E={e})" for group, _, ens, stu in _FOL_PIPELINES if group in methods
               for v in (ens, stu) for e in es]
            + [row for row, group in _DATA_FREE if group in methods]
            + ([f"FedAvg (E={e})" for e in es] if "fedavg" in methods else [])
            + ([row for row, _ in _POOLED] if "pooled" in methods else [])
            + ([_NBR_POOLED[0]] if _NBR_POOLED[1] in methods else []))


ROWS: list[str] = rows_for(3)

#: (task, psi) -> the satellites the paper reports for that setting.
PAPER_SATELLITES: dict[tuple[str, float], tuple[int, ...]] = {
    ("wildfire", 0.7): (13, 28, 48), ("hurricane", 0.7): (35, 32, 44),
    ("wildfire", 0.5): (32,), ("wildfire", 0.3): (43,), ("wildfire", 0.1): (48,),
    ("hurricane", 0.5): (8,), ("hurricane", 0.3): (26,), ("hurricane", 0.1): (44,),
}
#: Published test accuracy (%), means only (Tables 1-2), per row, one value per
#: satellite of :data:`PAPER_SATELLITES`.
PAPER_CELLS: dict[tuple[str, float], dict[str, tuple[float, ...]]] = {
    ("wildfire", 0.7): {
        "Local": (94.23, 94.12, 90.53),
        "FOL-A (E=1)": (97.19, 97.16, 95.97),
        "FOL-A (E=2)": (97.5, 97.52, 97.33),
        "FOL-A (E=3)": (97.53, 97.7, 97.99),
        "FOL (E=1)": (94.94, 95.21, 91.26),
        "FOL (E=2)": (95.23, 95.57, 91.6),
        "FOL (E=3)": (96.32, 95.75, 91.95),
        "FOL-AN (E=1)": (94.38, 94.86, 91.28),
        "FOL-AN (E=2)": (95.63, 95.04, 93.29),
        "FOL-AN (E=3)": (95.94, 96.45, 95.97),
        "FOL-N (E=1)": (93.44, 94.68, 88.59),
        "FOL-N (E=2)": (94.69, 94.86, 90.6),
        "FOL-N (E=3)": (95.31, 95.21, 91.95),
        "DENSE": (88.75, 87.41, 83.22),
        "Co-Boosting": (90.31, 89.19, 88.02),
        "FedAvg (E=1)": (73.19, 73.94, 68.18),
        "FedAvg (E=2)": (73.13, 72.29, 66.92),
        "FedAvg (E=3)": (74.61, 71.58, 68.48),
    },
    ("wildfire", 0.5): {
        "Local": (79.07,), "FOL-A (E=1)": (95.35,), "FOL-A (E=2)": (96.52,),
        "FOL-A (E=3)": (97.67,), "FOL (E=1)": (90.7,), "FOL (E=2)": (91.96,),
        "FOL (E=3)": (93.02,), "FOL-AN (E=1)": (90.77,), "FOL-AN (E=2)": (93.22,),
        "FOL-AN (E=3)": (95.35,), "FOL-N (E=1)": (86.05,), "FOL-N (E=2)": (87.35,),
        "FOL-N (E=3)": (90.54,), "DENSE": (79.91,), "Co-Boosting": (86.05,),
        "FedAvg (E=1)": (53.11,), "FedAvg (E=2)": (56.03,), "FedAvg (E=3)": (51.07,),
    },
    ("wildfire", 0.3): {
        "Local": (90.37,), "FOL-A (E=1)": (94.07,), "FOL-A (E=2)": (94.92,),
        "FOL-A (E=3)": (95.76,), "FOL (E=1)": (90.68,), "FOL (E=2)": (91.53,),
        "FOL (E=3)": (92.37,), "FOL-AN (E=1)": (91.53,), "FOL-AN (E=2)": (93.22,),
        "FOL-AN (E=3)": (94.07,), "FOL-N (E=1)": (88.14,), "FOL-N (E=2)": (89.83,),
        "FOL-N (E=3)": (90.06,), "DENSE": (78.63,), "Co-Boosting": (85.59,),
        "FedAvg (E=1)": (63.25,), "FedAvg (E=2)": (67.52,), "FedAvg (E=3)": (66.1,),
    },
    ("wildfire", 0.1): {
        "Local": (85.5,), "FOL-A (E=1)": (90.63,), "FOL-A (E=2)": (96.14,),
        "FOL-A (E=3)": (96.88,), "FOL (E=1)": (88.46,), "FOL (E=2)": (90.63,),
        "FOL (E=3)": (93.75,), "FOL-AN (E=1)": (87.51,), "FOL-AN (E=2)": (90.63,),
        "FOL-AN (E=3)": (90.94,), "FOL-N (E=1)": (85.13,), "FOL-N (E=2)": (86.38,),
        "FOL-N (E=3)": (88.47,), "DENSE": (52.08,), "Co-Boosting": (54.51,),
        "FedAvg (E=1)": (35.33,), "FedAvg (E=2)": (45.16,), "FedAvg (E=3)": (42.86,),
    },
    ("hurricane", 0.7): {
        "Local": (86.93, 87.34, 89.82),
        "FOL-A (E=1)": (95.34, 96.18, 97.61),
        "FOL-A (E=2)": (96.59, 96.97, 97.87),
        "FOL-A (E=3)": (96.9, 97.47, 98.2),
        "FOL (E=1)": (90.09, 89.87, 91.62),
        "FOL (E=2)": (91.23, 91.77, 95.21),
        "FOL (E=3)": (92.26, 92.41, 95.81),
        "FOL-AN (E=1)": (88.24, 91.14, 92.81),
        "FOL-AN (E=2)": (90.09, 92.47, 94.01),
        "FOL-AN (E=3)": (93.19, 93.04, 96.41),
        "FOL-N (E=1)": (85.76, 89.22, 91.62),
        "FOL-N (E=2)": (89.16, 90.21, 92.22),
        "FOL-N (E=3)": (90.71, 90.51, 94.61),
        "DENSE": (67.49, 69.95, 73.05),
        "Co-Boosting": (72.14, 74.45, 74.04),
        "FedAvg (E=1)": (60.21, 62.03, 66.26),
        "FedAvg (E=2)": (59.44, 64.33, 69.88),
        "FedAvg (E=3)": (63.7, 65.16, 67.82),
    },
    ("hurricane", 0.5): {
        "Local": (86.77,), "FOL-A (E=1)": (95.04,), "FOL-A (E=2)": (95.34,),
        "FOL-A (E=3)": (95.87,), "FOL (E=1)": (89.26,), "FOL (E=2)": (90.08,),
        "FOL (E=3)": (90.91,), "FOL-AN (E=1)": (91.34,), "FOL-AN (E=2)": (92.56,),
        "FOL-AN (E=3)": (93.39,), "FOL-N (E=1)": (85.95,), "FOL-N (E=2)": (86.74,),
        "FOL-N (E=3)": (87.6,), "DENSE": (61.1,), "Co-Boosting": (72.29,),
        "FedAvg (E=1)": (66.12,), "FedAvg (E=2)": (58.79,), "FedAvg (E=3)": (60.33,),
    },
    ("hurricane", 0.3): {
        "Local": (57.14,), "FOL-A (E=1)": (90.48,), "FOL-A (E=2)": (91.72,),
        "FOL-A (E=3)": (93.65,), "FOL (E=1)": (84.13,), "FOL (E=2)": (85.71,),
        "FOL (E=3)": (87.3,), "FOL-AN (E=1)": (87.47,), "FOL-AN (E=2)": (88.89,),
        "FOL-AN (E=3)": (90.48,), "FOL-N (E=1)": (76.19,), "FOL-N (E=2)": (80.95,),
        "FOL-N (E=3)": (82.54,), "DENSE": (58.73,), "Co-Boosting": (52.38,),
        "FedAvg (E=1)": (41.27,), "FedAvg (E=2)": (45.16,), "FedAvg (E=3)": (44.44,),
    },
    ("hurricane", 0.1): {
        "Local": (77.78,), "FOL-A (E=1)": (88.89,), "FOL-A (E=2)": (91.67,),
        "FOL-A (E=3)": (94.44,), "FOL (E=1)": (83.33,), "FOL (E=2)": (84.43,),
        "FOL (E=3)": (86.11,), "FOL-AN (E=1)": (86.73,), "FOL-AN (E=2)": (88.67,),
        "FOL-AN (E=3)": (91.39,), "FOL-N (E=1)": (80.56,), "FOL-N (E=2)": (81.94,),
        "FOL-N (E=3)": (83.37,), "DENSE": (46.14,), "Co-Boosting": (48.78,),
        "FedAvg (E=1)": (46.14,), "FedAvg (E=2)": (42.61,), "FedAvg (E=3)": (43.33,),
    },
}


def paper_task(dataset: str) -> str | None:
    """The paper's task a dataset name stands for (synthetic or real), else None."""
    for task in ("wildfire", "hurricane"):
        if dataset in (task, f"synthetic-{task}"):
            return task
    return None


#: Most collection rounds E a protocol run may ask for: the bound a scenario puts on its plan
#: rounds (``contact_sim.scenario.MAX_ROUNDS``; the learning core does not import contact_sim,
#: so the value is repeated here and a test holds the two equal).
MAX_ROUNDS = 10_000


@dataclass
class ProtocolConfig:
    """What :func:`run_protocol` runs. ``datasets`` are :func:`fol.data.load_dataset`
    names or ``imagefolder:PATH``; ``pool`` is how many images are partitioned
    (synthetic sets: generated, 12,000 when ``pool = 0``; other data: a seeded
    class-stratified-by-chance subset when larger, all of it when ``pool = 0``); ``rounds`` is E;
    ``fol`` holds :class:`FOLConfig` overrides (e.g. ``max_neighbours``);
    ``method_options`` the options of ``dense`` / ``co-boosting`` / ``fedavg``;
    ``methods`` the method groups run (of :data:`METHOD_GROUPS`; by default
    :data:`DEFAULT_GROUPS`, all but ``nbr-pooled-ft``);
    ``splits`` the split folders pooled from an ``imagefolder:PATH`` laid out by split
    first (``PATH/<split>/<class>/``; empty: none, the folder is ``PATH/<class>/``)."""

    datasets: tuple[str, ...] = ("synthetic-wildfire", "synthetic-hurricane")
    psis: tuple[float, ...] = (0.7, 0.5, 0.3, 0.1)
    seeds: tuple[int, ...] = (0, 1, 2)
    nodes: int = 24
    pool: int = 7200
    image_size: int = 32
    arch: str = DEFAULT_ARCH
    rounds: int = 3
    min_samples: int = 40
    data_seed: int = 0
    fol: dict[str, Any] = field(default_factory=dict)
    method_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    methods: tuple[str, ...] = DEFAULT_GROUPS
    splits: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.splits and not any(d.startswith("imagefolder:") for d in self.datasets):
            raise ConfigError(f"protocol splits: only for an imagefolder:PATH dataset laid out by split first, "
                              f"got splits {list(self.splits)} with datasets {list(self.datasets)}")
        unknown = sorted(set(self.methods) - set(METHOD_GROUPS))
        if unknown or not self.methods:
            raise ConfigError(f"protocol methods: expected one or more of {list(METHOD_GROUPS)}, got "
                              f"{list(self.methods)}")
        if self.nodes < 2 or self.rounds < 1 or not self.seeds or not self.psis or not self.datasets:
            raise ConfigError("protocol: need >= 2 nodes, >= 1 round, and at least one seed, psi and dataset")
        if self.rounds > MAX_ROUNDS:  # E sizes the table and every FOL run's per-node lists
            raise ConfigError(f"protocol: rounds must be at most {MAX_ROUNDS:,} (the most rounds a scenario may "
                              f"define), got {self.rounds:,}")
        for name in ("datasets", "psis", "seeds", "methods"):  # a repeat would run (and overwrite) a setting twice
            values = list(getattr(self, name))
            if len(set(values)) != len(values):
                raise ConfigError(f"protocol {name}: each value once, got {values}")
        if not all(is_seed(s) for s in (*self.seeds, self.data_seed)):
            # the generators seeded by [seed, ...] take non-negative integers only (FedAvg's stopped a run there),
            # and a seed past MAX_SEED stopped a scenario's run after its data (as here after hours)
            raise ConfigError(f"protocol: seeds and data_seed must be integers in 0..{MAX_SEED}, got seeds "
                              f"{list(self.seeds)}, data_seed {self.data_seed!r}")
        if self.min_samples < DEFAULT_MIN_SAMPLES:  # else a small node stops the run when its setting is pretrained
            raise ConfigError(f"protocol: min_samples must be >= {DEFAULT_MIN_SAMPLES} (every node's images are split "
                              f"70/15/15 into train/val/test, which needs {DEFAULT_MIN_SAMPLES}), got {self.min_samples}")
        if isinstance(self.image_size, bool) or not isinstance(self.image_size, (int, np.integer)) or not (
                8 <= self.image_size <= MAX_IMAGE_SIZE):  # the loaders' bounds, named here before any pool is drawn
            raise ConfigError(f"protocol: image_size must be an integer of 8..{MAX_IMAGE_SIZE} pixels, "
                              f"got {shown(self.image_size)}")
        if not all(is_finite_number(p) and p > 0 for p in self.psis):  # Dirichlet concentrations
            raise ConfigError(f"protocol: psi values must be finite numbers > 0, got {list(self.psis)}")
        if self.pool < 0 or (self.pool and self.pool < self.nodes * self.min_samples):
            raise ConfigError(f"protocol: pool must be 0 (all) or >= nodes x min_samples = "
                              f"{self.nodes * self.min_samples}, got {self.pool}")
        fol = self.fol_config(0)  # validate the overrides now, with a clear error
        # and the baselines' options, before hours of pretraining (only these methods take options here)
        optional = [name for _, name in _DATA_FREE] + ["fedavg"]
        shape = (3, self.image_size, self.image_size)
        for name, options in self.method_options.items():
            if name not in optional:
                raise ConfigError(f"protocol method options: {name!r} takes no options here; expected one of "
                                  f"{optional}")
            get_method(name, **options).check_inputs(shape, fol)
        get_method("fol").check_inputs(shape, fol)  # a "synth" distillation's size

    @classmethod
    def quick(cls, **over: Any) -> "ProtocolConfig":
        """The ``--quick`` preset: psi = 0.5 only, 4 nodes from 600 images, one
        seed, Q = 3 neighbours, so every node takes every other (E = 1..3 and
        every row of the paper kept; the pooled references are left out to
        stay within the time). A smoke test of the whole table within 10
        minutes on two cores, not evidence: its test splits hold a few dozen
        images."""
        base = dict(psis=(0.5,), seeds=(0,), nodes=4, pool=600, fol={"max_neighbours": 3},
                    methods=tuple(g for g in DEFAULT_GROUPS if g != "pooled"))
        return cls(**{**base, **over})

    def fol_config(self, seed: int) -> FOLConfig:
        try:
            return FOLConfig.from_dict({**self.fol, "rounds": self.rounds, "seed": seed}, where="protocol fol")
        except TypeError as exc:
            raise ConfigError(f"protocol fol: {exc}") from None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


#: The images a synthetic setting generates with ``pool = 0`` ("all of the data").
SYNTHETIC_POOL_ALL = 12_000


def load_pool(dataset: str, cfg: ProtocolConfig) -> GeoDataset:
    """The images a setting partitions (see :class:`ProtocolConfig`)."""
    if dataset.startswith("imagefolder:"):
        ds = load_dataset("imagefolder", path=dataset.split(":", 1)[1], image_size=cfg.image_size,
                          splits=list(cfg.splits) or None)
    elif dataset.startswith("synthetic-"):
        ds = load_dataset(dataset, n=cfg.pool or SYNTHETIC_POOL_ALL, seed=cfg.data_seed, image_size=cfg.image_size)
    else:
        ds = load_dataset(dataset, image_size=cfg.image_size)
    if cfg.pool and len(ds) > cfg.pool:
        keep = np.sort(np.random.default_rng([cfg.data_seed, 0x9001]).choice(len(ds), cfg.pool, replace=False))
        ds = ds.subset(keep)
    return ds


def column_nodes(sizes: Sequence[int], quantiles: Sequence[float] = COLUMN_QUANTILES) -> list[int]:
    """Indices of the nodes at the given quantiles of local data size (ties by
    index): the rule that fixes the reported node ids before any training. The
    quantile ``q`` is the node of rank ``q * (n - 1)`` in that order, rounded to
    the nearest rank (a tie to the even rank, as Python's ``round``: rank 11.5 of
    24 nodes is 12). In a small swarm two quantiles can fall on the same node; it
    is reported once.

    >>> column_nodes([50, 400, 120, 300, 90])
    [4, 2, 3]
    >>> column_nodes([100, 90, 193, 210])   # 4 nodes: the 50 % and 75 % quantiles are one node
    [0, 2]
    """
    order = sorted(range(len(sizes)), key=lambda k: (sizes[k], k))
    return list(dict.fromkeys(order[round(q * (len(order) - 1))] for q in quantiles))


def partition_pool(pool: GeoDataset, cfg: ProtocolConfig, psi: float) -> list[np.ndarray]:
    """The swarm's shards of ``pool`` at Dirichlet ``psi`` (they depend on the
    data seed only, never on the training seed). Where no Dirichlet draw gives
    every node ``min_samples`` images (psi = 0.1 with two classes and 24
    nodes), the best draw is topped up, as a rule with each short node's
    majority class (``short="top-up"`` of :func:`~fol.data.dirichlet_partition`,
    which says where the images come from); settings
    a draw can satisfy are unchanged by that rule."""
    return dirichlet_partition(pool.labels.numpy(), cfg.nodes, psi, seed=cfg.data_seed, min_samples=cfg.min_samples,
                               short="top-up")


def pretrained_swarm(pool: GeoDataset, shards: Sequence[np.ndarray], cfg: ProtocolConfig, seed: int,
                     map: Callable[..., list[Any]] = serial_map) -> SwarmContext:
    """Every node of one swarm and training seed, split and pretrained: what
    every row of :func:`run_setting` starts from."""
    fol_cfg = cfg.fol_config(seed)
    nodes = build_nodes(pool, shards, [cfg.arch], fol_cfg.pretrain_train(), seed, map=map)
    return SwarmContext(nodes=nodes, train=fol_cfg.pretrain_train(), fol=fol_cfg, rounds=1, seed=seed, map=map)


def run_setting(pool: GeoDataset, shards: Sequence[np.ndarray], cfg: ProtocolConfig, seed: int,
                progress: Callable[[str], None] = log.info, map: Callable[..., list[Any]] = serial_map,
                reverted: dict[str, list[bool | None]] | None = None) -> dict[str, list[float]]:
    """Every row of the table for one swarm and one training seed: row -> test
    accuracy per node (fractions in [0, 1]). ``map`` spreads per-node work (an
    executor's ``map`` from :mod:`fol.executors`; results do not depend on it).

    ``reverted``, when given, receives for every student row (``FOL (E=e)``,
    ``FOL-N (E=e)``) one entry per node: whether round ``e``'s distillation
    handed back its starting model (the revert rule, ``FOLConfig.distill_revert``),
    None when the node distilled nothing that round (no usable model arrived)."""
    t0 = time.perf_counter()
    ctx = pretrained_swarm(pool, shards, cfg, seed, map)
    nodes = ctx.nodes
    out: dict[str, list[float]] = {"Local": [evaluate(n.pretrained, *n.data.test.tensors()).accuracy for n in nodes]}
    progress(f"pretrained {len(nodes)} nodes ({time.perf_counter() - t0:.0f} s)")
    for group, use_pruning, ens_name, stu_name in _FOL_PIPELINES:
        if group not in cfg.methods:
            continue
        t0 = time.perf_counter()
        run = run_fol_pipeline(ctx, use_pruning)
        per_node = [run.exchanges(k, deploy_ensemble=True) for k in range(len(nodes))]
        for e in range(cfg.rounds):
            out[f"{ens_name} (E={e + 1})"] = [pts[e]["ensemble"] for pts in per_node]
            out[f"{stu_name} (E={e + 1})"] = [pts[e]["student"] for pts in per_node]
            if reverted is not None:
                reverted[f"{stu_name} (E={e + 1})"] = [
                    bool(reps[e].distillation["reverted"]) if "reverted" in reps[e].distillation else None
                    for reps in run.reports]
        progress(f"{stu_name} / {ens_name}, {cfg.rounds} round(s) ({time.perf_counter() - t0:.0f} s)")
    # DENSE and Co-Boosting distil on the server, in one process each: run them side by side.
    t0 = time.perf_counter()
    data_free = [(row, name) for row, name in _DATA_FREE if name in cfg.methods]
    if data_free:
        methods = [get_method(name, **cfg.method_options.get(name, {})) for _, name in data_free]
        for (row, _), results in zip(data_free, run_side_by_side(methods, ctx, desc="data-free baselines")):
            out[row] = [r.test_accuracy for r in results]
        progress(f"{', '.join(row for row, _ in data_free)} ({time.perf_counter() - t0:.0f} s)")
    fedavg_rounds = cfg.rounds if "fedavg" in cfg.methods else 0
    for e in range(1, fedavg_rounds + 1):
        t0 = time.perf_counter()
        results = get_method("fedavg", **cfg.method_options.get("fedavg", {})).run(dataclasses.replace(ctx, rounds=e))
        out[f"FedAvg (E={e})"] = [r.test_accuracy for r in results]
        progress(f"FedAvg (E={e}) ({time.perf_counter() - t0:.0f} s)")
    if "pooled" in cfg.methods:
        t0 = time.perf_counter()
        for row, name in _POOLED:  # one pooled training (ctx.cache), then the per-node fine-tunes
            out[row] = [r.test_accuracy for r in get_method(name).run(ctx)]
        progress(f"{', '.join(row for row, _ in _POOLED)} ({time.perf_counter() - t0:.0f} s)")
    if _NBR_POOLED[1] in cfg.methods:
        t0 = time.perf_counter()
        out[_NBR_POOLED[0]] = [r.test_accuracy for r in get_method(_NBR_POOLED[1]).run(ctx)]
        progress(f"{_NBR_POOLED[0]} ({time.perf_counter() - t0:.0f} s)")
    return out


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    return (100 * statistics.mean(values), 100 * statistics.stdev(values) if len(values) > 1 else 0.0)


@dataclass(frozen=True)
class Paired:
    """One method against a baseline on the same nodes and seeds
    (:func:`paired_difference`). ``per_seed`` holds, per seed, the difference
    of the swarm means (fractions); ``diff`` is their (mean, std) in points;
    ``above`` / ``below`` count the (node, seed) pairs where the method
    scores above / below the baseline (the rest are ties); ``nonzero`` and
    ``p`` are the Wilcoxon signed-rank test over nodes: each node's
    difference averaged over the seeds, zero differences dropped, two-sided
    (``p`` is None when no node differs)."""

    per_seed: tuple[float, ...]
    above: int
    below: int
    pairs: int
    nonzero: int
    p: float | None

    @property
    def diff(self) -> tuple[float, float]:
        """(mean, std) over seeds of the per-seed difference, in points."""
        return _mean_std(self.per_seed)


def paired_difference(method: dict[Any, Sequence[float]], base: dict[Any, Sequence[float]]) -> Paired:
    """``method`` against ``base``, paired by seed and node: both map a seed to
    one accuracy per node (fractions), the same nodes in the same order; only
    the seeds both have are compared. See :class:`Paired`.

    >>> r = paired_difference({0: [0.9, 0.8, 0.7], 1: [0.9, 0.9, 0.7]}, {0: [0.8, 0.8, 0.7], 1: [0.8, 0.8, 0.7]})
    >>> round(r.diff[0], 2), r.above, r.below, r.pairs, r.nonzero
    (5.0, 3, 0, 6, 2)
    """
    from scipy.stats import wilcoxon

    seeds = [s for s in method if s in base]
    if not seeds:
        raise ConfigError("paired difference: the method and the baseline share no seed")
    if len({len(method[s]) for s in seeds} | {len(base[s]) for s in seeds}) != 1:
        raise ConfigError("paired difference: every seed of the method and the baseline must hold the same "
                          "number of nodes")
    per_seed = [[a - b for a, b in zip(method[s], base[s])] for s in seeds]
    flat = [d for row in per_seed for d in row]
    # rounded so that equal differences rank as ties: 0.9 - 0.8 and 0.8 - 0.7 differ in the last bit
    per_node = [round(statistics.mean(col), 10) for col in zip(*per_seed)]
    nonzero = [d for d in per_node if abs(d) > 1e-12]
    p = float(wilcoxon(nonzero).pvalue) if nonzero else None
    return Paired(per_seed=tuple(statistics.mean(row) for row in per_seed),
                  above=sum(d > 1e-12 for d in flat), below=sum(d < -1e-12 for d in flat), pairs=len(flat),
                  nonzero=len(nonzero), p=p)


@dataclass
class ProtocolResult:
    """Raw per-node accuracies of every setting, and the tables made from them.

    ``settings[(dataset, psi)]`` holds ``sizes`` (images per node), ``columns``
    (the node indices reported by id), ``acc[seed][row]`` (one accuracy per
    node) and, for runs that recorded it, ``reverted[seed][row]`` (per node,
    whether that student row's distillation reverted; see :func:`run_setting`)."""

    config: ProtocolConfig
    settings: dict[tuple[str, float], dict[str, Any]] = field(default_factory=dict)
    seconds: float = 0.0  # wall time
    cpu_seconds: float = 0.0  # CPU time of this process (less sensitive to a busy machine)
    complete: bool = True  # False while :func:`run_protocol` is still running seeds

    def rows(self, dataset: str, psi: float) -> list[str]:
        """The rows one setting holds, in the paper's order: those of
        ``config.rounds`` and ``config.methods`` for one run; for runs of
        different method groups joined by :func:`merge_results`, the rows they
        ran (every seed of a setting holds the same rows)."""
        present = set(next(iter(self.settings[(dataset, psi)]["acc"].values())))
        return [row for row in rows_for(self.config.rounds, METHOD_GROUPS) if row in present]

    def cell(self, dataset: str, psi: float, row: str, column: int | None) -> tuple[float, float]:
        """(mean, std) in % over seeds of one node's accuracy (``column`` = node
        index) or of the mean over all nodes (``column = None``)."""
        acc = self.settings[(dataset, psi)]["acc"]
        vals = [(statistics.mean(a[row]) if column is None else a[row][column]) for a in acc.values()]
        return _mean_std(vals)

    def records(self) -> list[dict[str, Any]]:
        """One record per (dataset, psi, row, column) with the paper's figure."""
        out = []
        for (dataset, psi), s in self.settings.items():
            task = paper_task(dataset)
            paper = PAPER_CELLS.get((task, psi), {}) if task else {}
            for row in self.rows(dataset, psi):
                pub = paper.get(row)
                for col in [*s["columns"], None]:
                    mean, std = self.cell(dataset, psi, row, col)
                    out.append({"dataset": dataset, "psi": psi, "row": row,
                                "column": "mean" if col is None else f"node-{col}",
                                "node_images": None if col is None else s["sizes"][col],
                                "mean": round(mean, 2), "std": round(std, 2), "seeds": len(s["acc"]),
                                "paper_mean": round(statistics.mean(pub), 2) if pub else None,
                                "paper_cells": list(pub) if pub else None})
        return out

    def markdown(self) -> str:
        parts = [] if self.complete else [
            "\n_Partial: not every setting holds every planned seed (a run still going or stopped, or merged "
            "runs of unequal seeds); the settings and seeds below are those finished._"]
        for (dataset, psi), s in self.settings.items():
            task = paper_task(dataset)
            paper = PAPER_CELLS.get((task, psi), {}) if task else {}
            sats = PAPER_SATELLITES.get((task, psi), ()) if task else ()
            cols = s["columns"]
            parts.append(f"\n#### {dataset}, psi = {psi}: {len(s['sizes'])} nodes ({min(s['sizes'])}-"
                         f"{max(s['sizes'])} images), {self.config.arch}, {len(s['acc'])} seed(s)\n")
            seeds = sorted(s["acc"])
            spread = ("seed {} (one value per cell, no spread)" if len(seeds) == 1
                      else "mean ± std over seeds {} (sample std, n − 1)").format(seeds)
            parts.append(f"Test accuracy (%) on each node's own test split, {spread}: of one node's accuracy in "
                         f"the node columns (the nodes at the "
                         f"{' / '.join(f'{100 * q:.0f}' for q in COLUMN_QUANTILES)} % quantiles of local data "
                         f"size, fixed by the partition before training), of the mean over all nodes in the last"
                         + ("; paper: its published means for its own satellites, not these nodes.\n" if paper
                            else ".\n"))
            head = ["method"] + [f"node-{c} ({s['sizes'][c]} img)" for c in cols] + ["mean over nodes"]
            if paper:
                head.append("paper, satellite " + " / ".join(f"#{n}" for n in sats))
            parts.append("| " + " | ".join(head) + " |")
            parts.append("|" + "---|" * len(head))
            for row in self.rows(dataset, psi):
                cells = [row] + [mean_pm(self.cell(dataset, psi, row, c), len(s["acc"])) for c in [*cols, None]]
                if paper:
                    cells.append(" / ".join(f"{v:.2f}" for v in paper.get(row, ())) or "-")
                parts.append("| " + " | ".join(cells) + " |")
            others = [r for r in self.rows(dataset, psi) if r != "Local"]
            if others:
                parts.append(f"\nPaired with Local on the same nodes and seeds ({len(s['acc'])} seed(s)):\n")
                parts.append("| method | − Local (points, mean ± std over seeds) | (node, seed) pairs above / below "
                             "Local | Wilcoxon signed-rank p (nodes that differ) |")
                parts.append("|---|---|---|---|")
                for row in others:
                    d = self.paired(dataset, psi, row)
                    test = "-" if d.p is None else f"{d.p:.2g} ({d.nonzero})"
                    parts.append(f"| {row} | {mean_pm(d.diff, len(d.per_seed), '+.1f')} | {d.above} / {d.below} of "
                                 f"{d.pairs} | {test} |")
            reverts = self.reverts(dataset, psi)
            if reverts:
                parts.append("\nDistillation reverted (the student handed back its starting model): " + "; ".join(
                    f"{row} {r} of {n} node runs" for row, (r, n) in reverts.items()) + ".")
        return "\n".join(parts) + "\n"

    def reverts(self, dataset: str, psi: float) -> dict[str, tuple[int, int]]:
        """Per student row, (node runs whose distillation reverted, node runs
        that distilled), over the seeds that recorded it; empty when none did."""
        counts: dict[str, list[int]] = {}
        for per_row in self.settings[(dataset, psi)].get("reverted", {}).values():
            for row, flags in per_row.items():
                c = counts.setdefault(row, [0, 0])
                c[0] += sum(f is True for f in flags)
                c[1] += sum(f is not None for f in flags)
        return {row: (c[0], c[1]) for row, c in counts.items()}

    def paired(self, dataset: str, psi: float, row: str, base: str = "Local") -> Paired:
        """``row`` against ``base`` in one setting (:func:`paired_difference`)."""
        acc = self.settings[(dataset, psi)]["acc"]
        return paired_difference({seed: a[row] for seed, a in acc.items()},
                                 {seed: a[base] for seed, a in acc.items()})

    def transfer(self, dataset: str, psi: float, rounds: int = 1) -> dict[str, tuple[float, float]]:
        """The one-model gain at E = ``rounds``, mean ± std over seeds of the
        swarm means: ``student`` FOL - Local and ``ensemble`` FOL-A - Local
        (points), and ``kept``, the share of the ensemble's gain the student
        keeps (:func:`fol.personalize.swarm_transfer`, % of the swarm means;
        seeds where the ensemble's mean gains under half a point are left out,
        :data:`fol.personalize.SWARM_SHARE_MIN_GAIN`; ``kept_seeds`` = (seeds
        counted, seeds run))."""
        acc = self.settings[(dataset, psi)]["acc"].values()
        stu, ens = f"FOL (E={rounds})", f"FOL-A (E={rounds})"
        kept = [swarm_transfer(a["Local"], a[stu], a[ens])["of_means"] for a in acc]
        return {"student": self.paired(dataset, psi, stu).diff, "ensemble": self.paired(dataset, psi, ens).diff,
                "kept": _mean_std([k for k in kept if k is not None]) if any(k is not None for k in kept)
                else (math.nan, math.nan),
                "kept_seeds": (sum(k is not None for k in kept), len(kept))}

    def csv(self) -> str:
        buf = io.StringIO()
        recs = self.records()
        writer = csv.DictWriter(buf, fieldnames=list(recs[0]) if recs else ["dataset"])
        writer.writeheader()
        for r in recs:
            writer.writerow({**r, "paper_cells": " / ".join(map(str, r["paper_cells"] or []))})
        return buf.getvalue()

    def to_json(self) -> dict[str, Any]:
        return {"config": self.config.to_dict(), "complete": self.complete, "seconds": self.seconds,
                "cpu_seconds": self.cpu_seconds, "records": self.records(),
                "raw": [{"dataset": d, "psi": p, "sizes": s["sizes"], "columns": s["columns"],
                         "acc": {str(seed): a for seed, a in s["acc"].items()},
                         "reverted": {str(seed): r for seed, r in s.get("reverted", {}).items()}}
                        for (d, p), s in self.settings.items()]}

    @classmethod
    def from_json(cls, data: Any, where: str) -> "ProtocolResult":
        """The result that :meth:`to_json` wrote, checked field by field
        (``where`` names the file in the one-line error)."""
        def bad(field_: str, expected: str) -> ConfigError:
            return ConfigError(f"{where}: {field_}: expected {expected}")

        if not isinstance(data, dict) or not isinstance(data.get("config"), dict) \
                or not isinstance(data.get("raw"), list):
            raise bad("top level", "the tables.json of benchmarks/paper_tables.py (an object with 'config' and 'raw')")
        raw_cfg = {"splits": [], **data["config"]}  # tables written before splits existed have none
        names = {f.name for f in dataclasses.fields(ProtocolConfig)}
        if set(raw_cfg) != names:
            raise bad("config", f"exactly the keys {sorted(names)}")
        for key in ("datasets", "psis", "seeds", "methods", "splits"):
            if not isinstance(raw_cfg[key], list):
                raise bad(f"config.{key}", "a list")
            raw_cfg[key] = tuple(raw_cfg[key])
        try:
            config = ProtocolConfig(**raw_cfg)
        except (ConfigError, TypeError) as exc:
            raise bad("config", f"a valid protocol configuration ({exc})") from None
        for key in ("seconds", "cpu_seconds"):
            if not isinstance(data.get(key, 0.0), (int, float)) or not data.get(key, 0.0) >= 0:
                raise bad(key, "a number of seconds >= 0")
        rows = rows_for(config.rounds, config.methods)
        result = cls(config, seconds=float(data.get("seconds", 0.0)), cpu_seconds=float(data.get("cpu_seconds", 0.0)),
                     complete=data.get("complete") is True)
        for i, item in enumerate(data["raw"]):
            at = f"raw[{i}]"
            if not isinstance(item, dict) or not isinstance(item.get("dataset"), str) \
                    or not isinstance(item.get("psi"), (int, float)) or not isinstance(item.get("acc"), dict):
                raise bad(at, "an object with 'dataset' (text), 'psi' (a number), 'sizes', 'columns' and 'acc'")
            if item["dataset"] not in config.datasets or item["psi"] not in config.psis \
                    or (item["dataset"], float(item["psi"])) in result.settings:
                raise bad(at, f"a setting of config.datasets and config.psis {list(config.psis)}, each once; got "
                              f"{item['dataset']!r} psi={item['psi']!r}")
            sizes, columns = item.get("sizes"), item.get("columns")
            if not (isinstance(sizes, list) and len(sizes) == config.nodes
                    and all(isinstance(n, int) and n > 0 for n in sizes)):
                raise bad(f"{at}.sizes", f"a list of positive image counts, one per node (config.nodes = "
                                         f"{config.nodes})")
            if columns != column_nodes(sizes):
                raise bad(f"{at}.columns", f"the nodes at the size quantiles, {column_nodes(sizes)}")
            acc: dict[int, dict[str, list[float]]] = {}
            held: set[str] | None = None  # a merged file may hold fewer rows than its config names; every seed the same
            for seed, per_row in item["acc"].items():
                if not (is_decimal(seed, 12, signed=True) and int(seed) in config.seeds and int(seed) not in acc) \
                        or not isinstance(per_row, dict) \
                        or "Local" not in per_row or not set(per_row) <= set(rows) \
                        or (held is not None and set(per_row) != held):
                    raise bad(f"{at}.acc[{shown(seed)}]", f"a seed of config.seeds {list(config.seeds)}, each once (0 and "
                                                     f"00 are one seed), mapping Local and rows of {rows}, the same "
                                                     f"rows for every seed")
                held = set(per_row)
                for row, values in per_row.items():
                    if not (isinstance(values, list) and len(values) == len(sizes)
                            and all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0.0 <= v <= 1.0
                                    for v in values)):  # a JSON true / false is no accuracy
                        raise bad(f"{at}.acc[{seed!r}][{row!r}]",
                                  f"{len(sizes)} accuracies in [0, 1], one per node")
                acc[int(seed)] = {row: [float(v) for v in per_row[row]] for row in rows if row in per_row}
            if not acc:
                raise bad(f"{at}.acc", "at least one finished seed")
            reverted: dict[int, dict[str, list[bool | None]]] = {}
            raw_rev = item.get("reverted", {})  # absent in runs made before it was recorded
            if not isinstance(raw_rev, dict):
                raise bad(f"{at}.reverted", "an object mapping a seed to its student rows")
            for seed, per_row in raw_rev.items():
                if not (is_decimal(seed, 12, signed=True) and int(seed) in acc and int(seed) not in reverted) \
                        or not isinstance(per_row, dict) or not set(per_row) <= set(rows):
                    raise bad(f"{at}.reverted[{shown(seed)}]", "a seed of 'acc', each once, mapping rows of the table")
                for row, flags in per_row.items():
                    if not (isinstance(flags, list) and len(flags) == len(sizes)
                            and all(f is None or isinstance(f, bool) for f in flags)):
                        raise bad(f"{at}.reverted[{seed!r}][{row!r}]",
                                  f"{len(sizes)} entries true / false / null, one per node")
                reverted[int(seed)] = {row: list(flags) for row, flags in per_row.items()}
            result.settings[(item["dataset"], float(item["psi"]))] = {"sizes": sizes, "columns": columns, "acc": acc,
                                                                      "reverted": reverted}
        return result

    def write(self, out_dir: Path) -> list[Path]:
        """``tables.md``, ``tables.csv`` and ``tables.json`` (:data:`TABLE_FILES`) in ``out_dir``."""
        out_dir.mkdir(parents=True, exist_ok=True)
        paths = [out_dir / name for name in TABLE_FILES]
        atomic_write_bytes(paths[0], self.markdown().encode())
        atomic_write_bytes(paths[1], self.csv().encode())
        write_json_atomic(paths[2], self.to_json())
        return paths


#: The files :meth:`ProtocolResult.write` writes (and rewrites after every finished seed).
TABLE_FILES: tuple[str, ...] = ("tables.md", "tables.csv", "tables.json")


def check_fresh_output(out_dir: Path, what: str = "--out") -> None:
    """Refuse, with one :class:`ConfigError` line, an ``out_dir`` that already
    holds a result's tables (:data:`TABLE_FILES`): writing there would replace an
    earlier run's seeds by this one's (after its first seed). Runs are joined
    with :func:`merge_results`."""
    held = [name for name in TABLE_FILES if (Path(out_dir) / name).exists()]
    if held:
        raise ConfigError(f"{what} {brief(out_dir)}: already holds {', '.join(held)} of an earlier run, which this one "
                          f"would replace; give another --out (join runs with --merge)")


#: The protocol settings that may differ between the runs :func:`merge_results`
#: joins: which settings and seeds they ran, and which rows (method groups, E).
_MERGEABLE = ("datasets", "psis", "seeds", "methods", "rounds")


def merge_results(results: Sequence[tuple[str, ProtocolResult]]) -> ProtocolResult:
    """One result from runs of the same protocol: ``results`` are (name,
    result) pairs, the names for errors. Runs may differ in datasets, psi
    values and seeds (e.g. one process per task, or per seed) and in the rows
    they ran (``methods`` and ``rounds``, e.g. one process per method group).
    A setting in several runs must have the same swarm (node sizes); a seed in
    several runs must have the same Local row to the last node (the same
    pretrained swarm), and its other rows are joined. A row two runs both
    hold for one seed must also be the same to the last node (a repeat of the
    same code and seed, e.g. E = 1 again in a run of E = 1-3): it is kept
    once, and a repeat that differs is refused. Every seed of a merged
    setting must end with the same rows. The merged result is complete when
    it holds every seed of every setting the runs planned: a stopped run
    joined with a run of the seeds it missed is."""
    if not results:
        raise ConfigError("merge: no results to merge")
    first_name, first = results[0]
    fixed = {k: v for k, v in first.config.to_dict().items() if k not in _MERGEABLE}
    settings: dict[tuple[str, float], dict[str, Any]] = {}
    for name, res in results:
        other = {k: v for k, v in res.config.to_dict().items() if k not in _MERGEABLE}
        differ = sorted(k for k in fixed if fixed[k] != other[k])
        if differ:
            raise ConfigError(f"merge: {name} and {first_name} differ in {', '.join(differ)}; only "
                              f"{', '.join(_MERGEABLE)} may differ")
        for key, s in res.settings.items():
            where = f"merge: {name}: {key[0]} psi={key[1]}"
            have = settings.setdefault(key, {"sizes": s["sizes"], "columns": s["columns"], "acc": {}, "reverted": {}})
            if have["sizes"] != s["sizes"]:
                raise ConfigError(f"{where} is a different swarm (node sizes) than in the runs before it")
            for seed, rows in s["acc"].items():
                mine = have["acc"].setdefault(seed, {"Local": rows["Local"]})
                if mine["Local"] != rows["Local"]:
                    raise ConfigError(f"{where} seed {seed}: its Local row differs from the runs before it (another "
                                      f"pretraining); only runs of the same swarm and seed can add rows to it")
                differ = [row for row in rows if row != "Local" and row in mine and mine[row] != rows[row]]
                if differ:
                    raise ConfigError(f"{where}: seed {seed} already has the rows {differ} from the runs before it, "
                                      f"with other accuracies; a row two runs both hold must be the same to the last "
                                      f"node (a repeat of the same code and seed)")
                mine.update(rows)
                have["reverted"].setdefault(seed, {}).update(s.get("reverted", {}).get(seed, {}))
    rounds = max(r.config.rounds for _, r in results)
    order = rows_for(rounds, METHOD_GROUPS)
    for (dataset, psi), s in settings.items():
        s["acc"] = {seed: {row: rows[row] for row in order if row in rows} for seed, rows in sorted(s["acc"].items())}
        s["reverted"] = {seed: r for seed, r in sorted(s["reverted"].items()) if r}
        held = {seed: set(rows) for seed, rows in s["acc"].items()}
        first_seed = next(iter(held))
        for seed, rows in held.items():
            if rows != held[first_seed]:
                raise ConfigError(f"merge: {dataset} psi={psi}: seeds {first_seed} and {seed} hold different rows "
                                  f"({sorted(rows ^ held[first_seed])}); merge runs that give every seed the same rows")
    pick = lambda key: tuple(dict.fromkeys(v for _, r in results for v in getattr(r.config, key)))  # noqa: E731
    methods = tuple(g for g in METHOD_GROUPS if g in pick("methods"))
    config = dataclasses.replace(first.config, datasets=pick("datasets"), psis=pick("psis"),
                                 seeds=tuple(sorted(pick("seeds"))), methods=methods,
                                 rounds=rounds)
    # complete when every setting and seed the runs planned is held (a stopped run joined with a run of
    # the seeds it missed is complete; two complete runs of different seeds of one setting are too)
    complete = all((d, p) in settings and set(settings[(d, p)]["acc"]) >= set(config.seeds)
                   for d in config.datasets for p in config.psis)
    return ProtocolResult(config, settings=settings, seconds=sum(r.seconds for _, r in results),
                          cpu_seconds=sum(r.cpu_seconds for _, r in results), complete=complete)


#: What two runs :func:`compare_results` sets side by side may differ in, besides
#: what :func:`merge_results` allows: the options of FOL and of the baselines.
_COMPARABLE = _MERGEABLE + ("fol", "method_options")


@dataclass(frozen=True)
class RowComparison:
    """One row of two runs on the same swarms (:func:`compare_results`):
    ``local`` (the same in both), ``base`` and ``other`` are (mean, std) in %
    over ``seeds`` of the swarm means; ``paired`` is other against base
    (:class:`Paired`)."""

    dataset: str
    psi: float
    row: str
    seeds: tuple[int, ...]
    local: tuple[float, float]
    base: tuple[float, float]
    other: tuple[float, float]
    paired: Paired


def compare_results(base: ProtocolResult, other: ProtocolResult) -> list[RowComparison]:
    """``other`` against ``base``, paired by setting, seed and node: two runs of
    the same protocol that differ in FOL's or the baselines' options (e.g.
    ``--fol preset=paper`` against the default), which :func:`merge_results`
    cannot join (their FOL rows have the same names). Only the settings and
    seeds both ran are compared, and on every one of those seeds Local must
    agree to the last node (the same pretrained swarm); every row both hold
    but Local is compared, in the paper's order.

    >>> cfg = ProtocolConfig(datasets=("d",), psis=(0.5,), seeds=(0,), nodes=2, pool=0, rounds=1, methods=("fol",))
    >>> run = lambda fol: ProtocolResult(cfg, settings={("d", 0.5): {"sizes": [50, 60], "columns": [0, 1, 1],
    ...     "acc": {0: {"Local": [0.8, 0.9], "FOL (E=1)": fol}}}})
    >>> [(c.row, round(c.paired.diff[0], 1), c.paired.above) for c in compare_results(run([0.8, 0.9]), run([0.9, 0.9]))]
    [('FOL (E=1)', 5.0, 1)]
    """
    fixed, theirs = base.config.to_dict(), other.config.to_dict()
    differ = sorted(k for k in fixed if k not in _COMPARABLE and fixed[k] != theirs[k])
    if differ:
        raise ConfigError(f"compare: the two runs differ in {', '.join(differ)}; only "
                          f"{', '.join(_COMPARABLE)} may differ (the same swarms, pretrained alike)")
    out: list[RowComparison] = []
    for key, mine in base.settings.items():
        if key not in other.settings:
            continue
        yours = other.settings[key]
        where = f"compare: {key[0]} psi={key[1]}"
        if mine["sizes"] != yours["sizes"]:
            raise ConfigError(f"{where}: the two runs partitioned the data differently (node sizes differ)")
        seeds = tuple(s for s in mine["acc"] if s in yours["acc"])
        for seed in seeds:
            if mine["acc"][seed]["Local"] != yours["acc"][seed]["Local"]:
                raise ConfigError(f"{where} seed {seed}: Local differs between the runs (another pretraining); "
                                  f"only runs of the same swarm and seed can be compared")
        if not seeds:
            continue
        first_mine, first_yours = next(iter(mine["acc"].values())), next(iter(yours["acc"].values()))
        order = rows_for(max(base.config.rounds, other.config.rounds), METHOD_GROUPS)  # run_setting interleaves E
        held = [row for row in order if row != "Local" and row in first_mine and row in first_yours]
        local = _mean_std([statistics.mean(mine["acc"][s]["Local"]) for s in seeds])
        for row in held:
            a = {s: mine["acc"][s][row] for s in seeds}
            b = {s: yours["acc"][s][row] for s in seeds}
            out.append(RowComparison(key[0], key[1], row, seeds, local,
                                     _mean_std([statistics.mean(v) for v in a.values()]),
                                     _mean_std([statistics.mean(v) for v in b.values()]),
                                     paired_difference(b, a)))
    if not out:
        raise ConfigError("compare: the two runs share no setting and seed with a row besides Local")
    return out


def mean_pm(mean_std: tuple[float, float], n: int, spec: str = ".1f") -> str:
    """``mean ± std`` of ``n`` values in format ``spec`` (the std without its sign); one
    value alone, as the tables show a single seed: a "± 0" over one value would read as
    seeds that agree.

    >>> mean_pm((2.0, 0.5), 3, "+.1f"), mean_pm((2.0, 0.0), 1)
    ('+2.0 ± 0.5', '2.0')
    """
    mean, std = mean_std
    return f"{mean:{spec}}" + (f" ± {std:{spec.lstrip('+')}}" if n > 1 else "")


def run_protocol(cfg: ProtocolConfig, progress: Callable[[str], None] = log.info,
                 map: Callable[..., list[Any]] = serial_map,
                 on_seed: Callable[[ProtocolResult], None] | None = None) -> ProtocolResult:
    """Run every (dataset, psi, seed) of ``cfg``; see the module docstring.

    ``on_seed(result)`` is called after every finished (dataset, psi, seed)
    with the result so far (``complete`` False until the last one), e.g. to
    write it, so a run stopped after hours keeps every finished seed."""
    result = ProtocolResult(cfg, complete=False)
    t_start, cpu_start = time.perf_counter(), time.process_time()
    finished = 0
    # Every pool and partition first: a setting that cannot be built fails
    # before hours of training on the others.
    pools = {dataset: load_pool(dataset, cfg) for dataset in cfg.datasets}
    partitions = {(dataset, psi): partition_pool(pools[dataset], cfg, psi)
                  for dataset in cfg.datasets for psi in cfg.psis}
    for dataset in cfg.datasets:
        pool = pools[dataset]
        for psi in cfg.psis:
            shards = partitions[(dataset, psi)]
            sizes = [int(len(s)) for s in shards]
            setting: dict[str, Any] = {"sizes": sizes, "columns": column_nodes(sizes), "acc": {}, "reverted": {}}
            for seed in cfg.seeds:
                where = f"{dataset} psi={psi} seed={seed}"
                setting["reverted"][seed] = {}
                setting["acc"][seed] = run_setting(pool, shards, cfg, seed,
                                                     lambda m: progress(f"{where}: {m}"), map,
                                                     reverted=setting["reverted"][seed])
                result.settings[(dataset, psi)] = setting  # only settings with a finished seed
                result.seconds = time.perf_counter() - t_start
                result.cpu_seconds = time.process_time() - cpu_start
                finished += 1
                result.complete = finished == len(cfg.datasets) * len(cfg.psis) * len(cfg.seeds)
                progress(f"{where}: done ({result.seconds:.0f} s so far)")
                if on_seed is not None:
                    on_seed(result)
    result.complete = True
    return result
