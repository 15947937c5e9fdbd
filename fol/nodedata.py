"""One node's local data from a short spec string, for the single-node commands
(``fol pretrain``, ``fol personalize``) and the node agent.

A spec is either a folder of class sub-folders (the whole folder is the node's
data) or comma-separated ``key=value`` pairs naming a dataset and a partition,
so that several commands (or several drones) given the same spec with another
``node`` get disjoint shards of the same pool:

>>> spec = parse_node_data("dataset=synthetic-hurricane,nodes=12,node=3,psi=0.5")
>>> spec.node_name, spec.partition, spec.per_node
('node-3', 'dirichlet', 300)
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from typing import TYPE_CHECKING, Mapping

from fol.defaults import MAX_SEED, check_band_options, check_data_root, is_seed
from fol.errors import CheckpointError, ConfigError, DataError
from swarmbase.cli import path_argument, recorded_path
from swarmbase.tomlcheck import shown

if TYPE_CHECKING:  # fol.data imports torch; the CLI's --help must not
    from torch import nn

    from fol.checkpoint import ModelCard
    from fol.config import FOLConfig
    from fol.data import NodeData

__all__ = ["NodeDataSpec", "parse_node_data", "pretraining_spec", "split_fields", "load_node_data", "dataset_options",
           "NODE_DATA_HELP", "DATA_ROOT_HELP", "add_node_data_arguments", "SPLIT_SEED_KEY", "SPLIT_RULE", "LEGACY_SPLIT_RULE",
           "recorded_split_rule", "split_seed", "SIMULATION_CARD_KEYS", "PretrainedNode", "pretrain_from_spec"]

NODE_DATA_HELP = (
    "node data: a folder with one sub-folder per class, or key=value pairs "
    "'dataset=NAME,nodes=N,node=K[,partition=dirichlet|region][,psi=0.5][,per_node=300][,size=M][,seed=S]"
    "[,path=DIR][,splits=A+B][,bands=B1+B2+B3][,scale=X]'"
)
#: The help of ``--data-root`` (every command that trains one node, and ``fol data info``): the rule of
#: :func:`fol.defaults.check_data_root`.
DATA_ROOT_HELP = ("folder holding real datasets (default: datasets/ or $FOL_DATA_ROOT); refused for a synthetic-* "
                  "dataset, which reads no file")


@dataclass(frozen=True)
class NodeDataSpec:
    """Which shard of which dataset a node holds.

    ``partition``: ``dirichlet`` (label skew with concentration ``psi``, at
    most ``per_node`` images per node), ``region`` (geographic k-means over the
    images' coordinates) or ``all`` (the node holds the whole dataset).
    ``size`` is the pool size for synthetic datasets (default: the dataset's
    own). ``seed`` drives the partition and the train/val/test split.
    ``splits`` names the published split folders to pool (``train+valid``;
    ``+``, as ``,`` separates the pairs), for the datasets whose loader takes them.
    ``bands`` (``4+3+2``: three 1-based band numbers) reads an ``imagefolder`` of
    multispectral TIFFs, those bands as the model's 3 input channels; ``scale``
    divides their values (then clipped to [0, 1]) before they are scaled to 8 bits.
    """

    dataset: str
    nodes: int = 1
    node: int = 0
    partition: str = "dirichlet"
    psi: float = 0.5
    per_node: int | None = 300
    size: int | None = None
    seed: int = 0
    root: str | None = None
    path: str | None = None  # the folder of an ``imagefolder`` dataset
    splits: str | None = None  # split folders to pool, '+'-separated (``train+valid``)
    bands: tuple[int, int, int] | None = None  # a TIFF's bands as the 3 channels, '+'-separated (``4+3+2``)
    scale: float | None = None  # with bands: their values divided by it, clipped to [0, 1]

    @property
    def node_name(self) -> str:
        return f"node-{self.node}"


_INT_FIELDS = {"nodes", "node", "per_node", "size", "seed"}
#: The integer fields ``none`` may unset (``per_node=none``: no cap; ``size=none``: the dataset's own).
_OPTIONAL_INT_FIELDS = {"per_node", "size"}


def _is_folder(text: str) -> bool:
    """Whether ``text`` names a folder; a name the file system refuses (longer than it takes: a
    long key=value spec, or a stray paste) names none, where ``Path.is_dir`` raised ``OSError``."""
    try:
        return Path(text).is_dir()
    except OSError:
        return False

#: How a spec's pairs are named in a refusal of :func:`~fol.defaults.check_band_options`.
SPEC_BAND_NAMES = {"dataset": "dataset=imagefolder", "bands": "bands=", "scale": "scale=", "coords": "coords="}


def parse_node_data(text: str, root: str | None = None, where: str = "--data",
                    root_where: str = "--data-root") -> NodeDataSpec:
    """Parse a ``--data`` spec (see :data:`NODE_DATA_HELP`); errors name it ``where`` (an agent: its
    config file and ``node.data``). A data ``root`` given with a dataset generated from no file is
    refused here, naming it ``root_where`` (an agent: its config file and ``node.data_root``), by
    :func:`fol.defaults.check_data_root`: the one check of every command that reads a spec, before
    any of its data is read."""
    text = text.strip()
    if not text:  # an unset variable in --data "$DIR": not the current folder
        raise ConfigError(f"{where} is empty; expected {NODE_DATA_HELP[len('node data: '):]}")
    folder = _is_folder(text)
    if "=" not in text or folder:  # a folder may have '=' in its name (run=1/)
        path = Path(text)
        if not folder:
            raise ConfigError(f"{where} {shown(text)}: not a folder and not key=value pairs ({NODE_DATA_HELP})")
        return NodeDataSpec(dataset="imagefolder", path=str(path), partition="all", per_node=None, root=root)
    known = {f.name for f in dataclasses.fields(NodeDataSpec)}
    values: dict[str, object] = {"root": root}
    given: dict[str, str] = {}
    last = ""
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep and last == "path":  # 'path=/data/a,b': the comma cut the folder's name
            raise ConfigError(f"{where}: path={shown(given['path'].strip(), 300)} is followed by {shown(part)}: "
                              f"',' separates the key=value pairs, so path= cannot hold a comma; give the folder "
                              f"itself as {where} (the node then holds all of it), or path= a link to it whose name "
                              f"has no comma")
        last = key
        if not sep or key not in known:
            raise ConfigError(f"{where}: unknown or malformed entry {shown(part)}; expected keys {', '.join(sorted(known))}")
        if key in given:
            raise ConfigError(f"{where}: {key!r} is given twice ({key}={shown(given[key].strip())}, then "
                              f"{shown(part)}); keep one")
        given[key] = value
        try:
            if key in _INT_FIELDS:
                values[key] = None if key in _OPTIONAL_INT_FIELDS and value.lower() == "none" else int(value)
            elif key in ("psi", "scale"):
                values[key] = float(value)
            else:  # bands= as typed: checked with scale= by the one rule, below
                values[key] = value.strip()
        except ValueError:
            raise ConfigError(f"{where}: {key}={shown(value)} is not a valid "
                              f"{'integer' if key in _INT_FIELDS else 'number'}") from None
    if "dataset" not in values:
        raise ConfigError(f"{where}: 'dataset=NAME' is required")
    bands = values.pop("bands", None)
    spec = NodeDataSpec(**values)  # type: ignore[arg-type]
    if spec.partition not in ("dirichlet", "region", "all"):
        raise ConfigError(f"{where}: partition={shown(spec.partition)}; expected dirichlet, region or all")
    if spec.nodes < 1 or not 0 <= spec.node < spec.nodes:
        raise ConfigError(f"{where}: node={spec.node} must be in [0, nodes={spec.nodes})")
    if not 0 < spec.psi < float("inf"):
        raise ConfigError(f"{where}: psi={spec.psi} must be a finite number > 0")
    if not is_seed(spec.seed):
        raise ConfigError(f"{where}: seed={spec.seed}: expected an integer in 0..{MAX_SEED}")
    checked, scale = check_band_options(spec.dataset, bands, spec.scale, names=SPEC_BAND_NAMES, where=where, sep="+")
    spec = dataclasses.replace(spec, bands=checked, scale=scale)
    if spec.partition == "region" and spec.dataset == "imagefolder":  # known before any image is read
        raise ConfigError(f"{where}: partition=region places images by their coordinates, and a data spec reads "
                          "none from an image folder; use partition=dirichlet or all (or a scenario with data.coords)")
    check_data_root(spec.dataset, root, root_where)
    return spec


#: The fields each partition does not read (:func:`load_node_data`): ``all`` takes the whole
#: dataset, ``region`` cuts ``nodes`` regions by the images' places.
_UNREAD = {"all": ("nodes", "psi", "per_node"), "region": ("psi", "per_node"), "dirichlet": ()}


def split_fields(spec: NodeDataSpec) -> tuple[object, ...]:
    """What fixes a node's shard and its train / val / test split: every field but where the
    files are (``root``, ``path``) and the ones its partition does not read, so that two specs
    with equal fields give the same split (a folder given as a path and as
    ``dataset=imagefolder,path=...,partition=all`` among them)."""
    skip = ("root", "path", *_UNREAD.get(spec.partition, ()))
    return tuple(getattr(spec, f.name) if f.name not in skip else None for f in dataclasses.fields(spec))


def pretraining_spec(trained_on: object) -> NodeDataSpec | None:
    """The spec a model card's ``extra["data"]`` names (the ``--data`` of ``fol pretrain``, kept
    by every round since), to compare with :func:`split_fields`; None when none is kept or it
    cannot be read (a folder since moved: nothing to compare)."""
    try:
        return parse_node_data(trained_on) if isinstance(trained_on, str) else None
    except ConfigError:
        return None


#: The key of a model card's ``extra`` that names the rule its node's train / val / test split is
#: seeded by (:func:`split_seed`), so that every later command re-splits the node's data as the
#: model was trained on it. ``fol pretrain``, ``fol model import`` and ``fol simulate``'s pretrained
#: checkpoints record :data:`SPLIT_RULE`;
#: ``fol personalize`` and the node agent pass on the rule they split by.
SPLIT_SEED_KEY = "split_seed"
#: Node ``K`` of a spec with ``seed=S`` splits with :func:`fol.seeds.node_seed` ``(S, K)``, as
#: ``fol simulate`` splits its node ``K``.
SPLIT_RULE = "node_seed"
#: ``S + K``: the rule of the models whose card records none (made before the key existed). Node 1
#: of seed 0 split as node 0 of seed 1 by it.
LEGACY_SPLIT_RULE = "seed+node"
_SPLIT_RULES = (SPLIT_RULE, LEGACY_SPLIT_RULE)
#: What only ``fol simulate``'s pretrained checkpoints keep in their card's ``extra``
#: (:mod:`fol.simulation.runner`): such a card split by :data:`SPLIT_RULE` even before it recorded it.
SIMULATION_CARD_KEYS = ("pretrain_flops", "seed")


def recorded_split_rule(extra: Mapping[str, object], source: str) -> str:
    """The split rule a model card's ``extra`` records (:data:`SPLIT_SEED_KEY`): none is
    :data:`LEGACY_SPLIT_RULE`, the rule of the models made before the key was recorded, but for
    ``fol simulate``'s pretrained checkpoints (:data:`SIMULATION_CARD_KEYS`), which have always
    split by :data:`SPLIT_RULE` (``fol.nodes.build_nodes``; a resumed run keeps ones saved before).
    An unknown rule raises :class:`~fol.errors.CheckpointError` naming ``source`` (the model file):
    splitting by another rule could put the model's training images in its validation and test sets.

    >>> recorded_split_rule({}, "m.safetensors"), recorded_split_rule({"split_seed": "node_seed"}, "m.safetensors")
    ('seed+node', 'node_seed')
    """
    if SPLIT_SEED_KEY not in extra:
        return SPLIT_RULE if all(key in extra for key in SIMULATION_CARD_KEYS) else LEGACY_SPLIT_RULE
    rule = extra[SPLIT_SEED_KEY]
    if not isinstance(rule, str) or rule not in _SPLIT_RULES:
        raise CheckpointError(f"{source}: model card extra.{SPLIT_SEED_KEY} is {shown(rule)}; this toolkit "
                              f"splits a node's data by {' or '.join(map(repr, _SPLIT_RULES))} (a model made by "
                              f"a newer toolkit?); use that toolkit, or a model whose card records one of these")
    return rule


def split_seed(spec: NodeDataSpec, rule: str = SPLIT_RULE) -> int:
    """The seed of node ``spec.node``'s train / val / test split by ``rule``.

    >>> spec = parse_node_data("dataset=synthetic-hurricane,nodes=4,node=1,seed=1")
    >>> split_seed(spec), split_seed(spec, LEGACY_SPLIT_RULE)
    (1001, 2)
    """
    from fol.seeds import node_seed  # numpy: not for the CLI's --help

    if rule == SPLIT_RULE:
        return node_seed(spec.seed, spec.node)
    if rule == LEGACY_SPLIT_RULE:
        return spec.seed + spec.node
    raise ValueError(f"unknown split rule {rule!r}; expected one of {', '.join(_SPLIT_RULES)}")


def dataset_options(name: str, size: int | None, seed: int, path: str | None = None,
                    where: str = "--data") -> dict[str, object]:
    """Loader keyword arguments: a synthetic pool is drawn with ``seed`` (so every
    node given the same spec sees the same pool) and ``size`` images. Errors name the spec ``where``."""
    if path is not None and name != "imagefolder":
        raise ConfigError(f"{where}: path= only applies to dataset=imagefolder, not {name!r}")
    if name.startswith("synthetic-"):
        return {"seed": seed, **({"n": size} if size is not None else {})}
    if size is not None:
        raise ConfigError(f"{where}: size= only applies to synthetic datasets, not {name!r}")
    return {"path": path} if name == "imagefolder" else {}


def load_node_data(spec: NodeDataSpec, where: str = "--data", rule: str = SPLIT_RULE) -> "NodeData":
    """Load the dataset, take this node's shard and split it 70/15/15 (stratified), seeded by ``rule``
    (:func:`split_seed`; for an existing model, the rule its card records, :func:`recorded_split_rule`).
    Errors about the spec name it ``where``, as :func:`parse_node_data` does (an agent: its config file
    and ``node.data``)."""
    import numpy as np

    from fol.data import dirichlet_partition, load_dataset, region_partition, split_node

    seed = split_seed(spec, rule)  # an unknown rule before the dataset is read

    options = dataset_options(spec.dataset, spec.size, spec.seed, spec.path, where)
    if spec.splits is not None:
        options["splits"] = _split_folders(spec)
    if spec.bands is not None:
        options["bands"] = spec.bands
    if spec.scale is not None:
        options["scale"] = spec.scale
    try:
        ds = load_dataset(spec.dataset, root=spec.root, **options)
    except DataError as exc:  # the loader names the folder it looked in; the line names the spec too
        text = str(exc)
        raise DataError(text if text.startswith(where) else f"{where}: {text}") from None
    if spec.partition == "all":
        shard = ds
    elif spec.partition == "dirichlet":
        try:
            parts = dirichlet_partition(ds.labels.numpy(), spec.nodes, spec.psi, spec.seed,
                                        samples_per_node=spec.per_node)
        except DataError as exc:  # in the spec's terms
            raise DataError(f"{where}: {len(ds)} images of {spec.dataset} cannot give nodes={spec.nodes} "
                            f"per_node={spec.per_node} images each at psi={spec.psi} ({exc}); lower per_node or "
                            f"nodes") from None
        shard = ds.subset(parts[spec.node], name=f"{ds.name}/{spec.node_name}")
    else:
        missing = int((~(np.isfinite(ds.lat) & np.isfinite(ds.lon))).sum())
        if missing:  # no node count helps: say what is missing, not "lower nodes"
            raise DataError(f"{where}: partition=region places images by their coordinates, and {missing} of the "
                            f"{len(ds)} images of {spec.dataset} have none; use partition=dirichlet or all")
        try:
            parts = region_partition(ds.lat, ds.lon, spec.nodes, spec.seed)
        except DataError as exc:  # in the spec's terms, as above
            raise DataError(f"{where}: {len(ds)} images of {spec.dataset} cannot give nodes={spec.nodes} regional "
                            f"shards ({exc}); lower nodes") from None
        shard = ds.subset(parts[spec.node], name=f"{ds.name}/{spec.node_name}")
    return split_node(shard, seed=seed)


def _split_folders(spec: NodeDataSpec) -> list[str] | None:
    """The split folders ``splits=`` names (``train+valid``), as the loader takes them."""
    return None if spec.splits is None else [s.strip() for s in spec.splits.split("+") if s.strip()]


def _refuse_one_class_folder(spec: NodeDataSpec, text: str, where: str) -> None:
    """An image folder of one class folder (or none) refused from its sub-folders' names, before any
    image is read (:func:`fol.data.loaders.image_folder_classes`), in the words of the check of ``fol
    simulate``'s scenario (:func:`fol.data.loaders.refuse_one_class`): the dataset's classes are its
    class folders, so the loaded data would hold that one class. A folder that is missing or cannot be
    listed is left to the loader, which says so."""
    from fol.data.loaders import image_folder_classes, refuse_one_class
    from fol.data.registry import image_folder_path  # where the loader looks for spec.path, its one rule

    if spec.dataset != "imagefolder" or not spec.path:
        return
    folder = image_folder_path(spec.path, spec.root)
    if not folder.is_dir():
        return
    try:
        classes = image_folder_classes(folder, _split_folders(spec))
    except DataError as exc:  # what the loader would say of the folder, said now, in the same words
        message = str(exc)
        raise DataError(message if message.startswith(where) else f"{where}: {message}") from None
    try:
        refuse_one_class(folder, classes)
    except DataError as exc:  # the one wording of fol simulate's check too, after this flag and spec
        raise DataError(f"{where} {text}: {exc}") from None


@dataclass(frozen=True)
class PretrainedNode:
    """What :func:`pretrain_from_spec` gives: the model, its card and the node's data it was
    trained on (the card's ``extra`` holds its validation and test accuracy)."""

    spec: NodeDataSpec
    data: "NodeData"
    model: "nn.Module"
    card: "ModelCard"


def pretrain_from_spec(text: str, arch: str, settings: "FOLConfig", *, root: str | None = None,
                       init_seed: int | None = None, producer: str | None = None, where: str = "--data",
                       progress: bool = False) -> PretrainedNode:
    """Pretrain node ``K`` of the node-data spec ``text`` (``seed=S``) as ``fol simulate`` pretrains its
    node ``K`` (:func:`fol.nodes.build_nodes`): the data split by :data:`SPLIT_RULE`, batch order and
    dropout drawn with :func:`fol.seeds.node_seed` ``(S, K)``, from the shared initialization of seed
    ``init_seed`` (None: ``S``, the run's seed, as the simulation's default), with the pretraining
    fields of ``settings`` (a ``[fol]`` table: ``pretrain_epochs``, ``pretrain_lr``, ``batch_size``,
    ``patience``, ``momentum``, ``weight_decay``). The one way a single node is pretrained: ``fol
    pretrain --data`` and the node agent's loopback set-up (:func:`fol.agent.loopback.prepare_nodes`).

    What the model and its card will say of the data is checked before training, in one line naming
    ``where`` and ``text``: a spec that is not UTF-8 text (a folder whose name holds such bytes; the card
    records the spec as typed, :func:`swarmbase.cli.recorded_path`) before it is parsed, an image folder
    of one class folder before any image is read, a class folder whose name is not UTF-8 (the card could
    not be written after the training). The card (``producer``, default the spec's ``node-K``, round 0)
    records the validation and test accuracy, the spec (``extra.data``), which :func:`pretraining_spec`
    reads back, and the split rule (:data:`SPLIT_SEED_KEY`), by which later commands re-split the
    node's data."""
    from fol.checkpoint import ModelCard
    from fol.models import ModelSpec
    from fol.seeds import node_seed
    from fol.stages import pretrain
    from fol.train import evaluate

    recorded_path(text, where, ConfigError, "the model card records the spec as UTF-8 text")  # read back as written
    spec = parse_node_data(text, root=root, where=where)  # and fol pretrain's --data-root (the loopback gives none)
    _refuse_one_class_folder(spec, text, where)  # before the images are read
    node = load_node_data(spec, where=where)
    x, _ = node.train.tensors()
    names, shape = list(node.train.class_names), list(x.shape[1:])
    # every other dataset has at least two classes (named datasets: their fixed classes; synthetic
    # ones: two or more); one that had one would be refused here, in the model's terms (num_classes)
    try:
        model_spec = ModelSpec(arch, num_classes=len(names), in_channels=shape[0], input_size=shape[1])
        ModelCard(spec=model_spec, class_names=names, input_shape=shape)
    except ConfigError as exc:
        raise ConfigError(f"{where} {text}: {exc}") from None
    train = dataclasses.replace(settings.pretrain_train(), seed=node_seed(spec.seed, spec.node), progress=progress)
    model = pretrain(model_spec, node, train, init_seed=spec.seed if init_seed is None else init_seed)
    val = evaluate(model, *node.val.tensors())
    test = evaluate(model, *node.test.tensors())
    card = ModelCard(spec=model_spec, class_names=names, input_shape=shape, producer=producer or spec.node_name,
                     round=0, extra={"val_accuracy": val.accuracy, "test_accuracy": test.accuracy,
                                     "data": text,  # UTF-8 (recorded_path above): pretraining_spec reads it
                                     SPLIT_SEED_KEY: SPLIT_RULE})  # the rule load_node_data split by
    return PretrainedNode(spec, node, model, card)


def add_node_data_arguments(p: argparse.ArgumentParser) -> None:
    """``--data SPEC`` and ``--data-root``, shared by every command that trains one node."""
    p.add_argument("--data", required=True, metavar="SPEC", help=NODE_DATA_HELP)
    p.add_argument("--data-root", type=path_argument, default=None, help=DATA_ROOT_HELP)
