"""Swarm scenario files: the contact tables (validated by
:mod:`contact_sim.scenario`) plus the learning tables validated here.
Every field, with type, default and unit: ``docs/scenario.md``.

Learning tables, every key checked (unknown keys are an error naming them)::

    [scenario]
    name = "leo-hurricane"     # used in the report
    seeds = [0, 1, 2]          # one full run per seed; mean ± std over seeds

    [data]
    dataset = "synthetic-hurricane"   # any name `fol data info` accepts
    # root = "datasets"        # folder of real datasets (relative to this file)
    # path = "my_images"       # dataset = "imagefolder": <path>/<class>/<image> (relative to this file)
    # coords = "filename"      # imagefolder: "none" | "filename" (<lon>,<lat>.<ext>) | "csv" (<path>/coords.csv) | "exif" (GPS tags) | "geotiff"
    # skip_corrupt = true      # real images: skip (and log) unreadable files instead of stopping
    # splits = ["train", "valid"]  # published split folders to pool (wildfire, hurricane, svhn, imagefolder)
    # bands = [4, 3, 2]        # imagefolder of multispectral TIFFs: these 1-based bands as the 3 channels
    # scale = 10000            # with bands: values divided by it, clipped to [0, 1] (Sentinel-2 reflectances)
    size = 9000                # pool size of a synthetic dataset
    image_size = 32            # image side (pixels): synthetic drawn at it, real resized to it
    partition = "orbit"        # "orbit" | "dirichlet" | "region"
    # psi = 0.5                # partition = "dirichlet" only: Dirichlet concentration
    per_node = 300             # images per node: exactly this many (dirichlet), at most (orbit, region)
    acquisition_s = 86400.0    # orbit: the acquisition period from the start (s)
    swath_km = 400.0           # orbit: imaging swath width (km)
    assign = "uniform"         # orbit: "uniform" over the satellites that covered a sample, or "first"
    min_samples = 40           # fewer images on a node is an error

    [models]
    archs = ["cnn-medium"]     # cycled over nodes (default: fol.defaults.DEFAULT_ARCH) ...
    rule = "cycle"             # ... or "plane": satellites of plane p get archs[p % len] (a Walker shell's
                               # planes; a TLE / OMM / OEM file's from the orbit normals at time.start)
    # [models.nodes]           # explicit overrides, node name -> arch
    # "WD-P01-S03" = "resnet-small"

    [fol]                      # any fol.config.FOLConfig field; rounds = E
    rounds = 1                 # default: the number of [rounds] in the contact plan
    # preset = "paper"         # the fields above apply on this preset ("default" | "paper")

    [methods]
    run = ["local", "fol", "fol-a"]   # any of `fol simulate --list-methods`
    # [methods.fedavg]         # options of one method
    # fraction = 0.5

    [run]
    executor = "local"         # "local" | "process" | "ray" (default "ray" when ray_address is set)
    workers = 2                # processes / Ray CPUs, and contact-search processes (default: all cores)
    threads = 1                # torch threads per node task
    transport = "inproc"       # "inproc" | "zmq": FOL's model exchange over CURVE links on 127.0.0.1
    # ray_address = "auto"     # join an existing Ray cluster (executor "ray" only)

    [output]
    dir = "runs/leo-hurricane" # relative to the working directory

Round ``e`` of FOL (1-based) uses round ``e - 1`` of the contact plan: a
neighbour's model reaches a node only if a window of that round can carry it.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from contact_sim.errors import ContactError
from contact_sim.scenario import ContactScenario, parse_contact_scenario, round_boundaries
from fol.config import FOLConfig
from fol.data.geo import DEFAULT_MIN_SAMPLES, MAX_IMAGE_SIZE, check_pool_size
from fol.data.registry import SYNTHETIC_DEFAULT_SIZE, dataset_accepts, dataset_names
from fol.defaults import DEFAULT_ARCH, IMAGE_FOLDER_COORDS, MAX_SEED, check_band_options, is_seed
from fol.errors import ConfigError, DataError
from fol.executors import EXECUTORS
from fol.models import architectures
from fol.nodedata import dataset_options
from orbits.coverage import MEAN_EARTH_RADIUS_KM
from orbits.errors import OrbitError
from swarmbase.cli import parallelism_floor_problem
from swarmbase.tomlcheck import Table, brief, check_name_length, read_toml, shown

__all__ = ["SwarmScenario", "DataConfig", "ModelsConfig", "RunConfig", "load_scenario", "parse_scenario", "MAX_SEEDS"]

PARTITIONS = ("orbit", "dirichlet", "region")
#: Most seeds a scenario may list: each is one full run (data pool, partition, pretraining, every
#: method on every node), so a thousand is already weeks of compute; more is a mistake (a generated list).
MAX_SEEDS = 1_000
#: Widest imaging swath (km): half the Earth's circumference, a footprint reaching the antipode.
MAX_SWATH_KM = math.pi * MEAN_EARTH_RADIUS_KM


@dataclass
class DataConfig:
    dataset: str = "synthetic-hurricane"
    root: str | None = None
    size: int | None = None
    image_size: int | None = None
    partition: str = "dirichlet"
    psi: float = 0.5
    per_node: int | None = 300
    acquisition_s: float | None = None
    swath_km: float = 400.0
    assign: str = "uniform"
    min_samples: int = 40
    path: str | None = None
    coords: str = "none"
    skip_corrupt: bool = False
    splits: list[str] | None = None
    bands: list[int] | None = None
    scale: float | None = None

    @property
    def side_px(self) -> int:
        """The images' side in pixels as the loaders give them: ``image_size``, else their default 32."""
        return self.image_size or 32

    def loader_options(self, seed: int) -> dict[str, Any]:
        """Keyword arguments of :func:`fol.data.load_dataset` for this table:
        the pool of ``seed`` (a synthetic pool is drawn with it)."""
        options = dataset_options(self.dataset, self.size, seed, self.path)
        if self.image_size is not None:
            options["image_size"] = self.image_size
        if self.dataset == "imagefolder":
            options["coords"] = self.coords
        if self.skip_corrupt:
            options["skip_corrupt"] = True
        if self.splits is not None:
            options["splits"] = list(self.splits)
        if self.bands is not None:
            options["bands"] = list(self.bands)
        if self.scale is not None:
            options["scale"] = self.scale
        return options


@dataclass
class ModelsConfig:
    archs: list[str] = field(default_factory=lambda: [DEFAULT_ARCH])
    rule: str = "cycle"
    nodes: dict[str, str] = field(default_factory=dict)


@dataclass
class RunConfig:
    executor: str = "local"
    workers: int | None = None
    threads: int | None = 1
    ray_address: str | None = None
    transport: str = "inproc"


@dataclass
class SwarmScenario:
    """A validated scenario: contact part, learning part, and the raw document."""

    name: str
    seeds: list[int]
    contact: ContactScenario
    data: DataConfig
    models: ModelsConfig
    fol: FOLConfig
    methods: list[str]
    method_options: dict[str, dict[str, Any]]
    run: RunConfig
    output_dir: Path | None
    raw: dict[str, Any]
    source: str
    text: str | None = None  # the file as written, copied into the output folder

    def resolved(self) -> dict[str, Any]:
        """JSON-ready description of every setting actually used (defaults filled in)."""
        return {
            "name": self.name, "seeds": self.seeds, "source": self.source,
            "base_dir": str(Path(self.contact.base_dir).resolve()),
            "contact": {k: v for k, v in self.raw.items() if k not in _LEARNING_TABLES},
            "data": asdict(self.data), "models": asdict(self.models), "fol": self.fol.to_dict(),
            "methods": methods_as_used({"run": self.methods, **self.method_options}), "run": asdict(self.run),
            "output": {"dir": str(self.output_dir) if self.output_dir else None},
        }


_LEARNING_TABLES = ("scenario", "data", "models", "fol", "methods", "run", "output")

#: How the ``[data]`` fields are named in a refusal of :func:`~fol.defaults.check_band_options`.
SCENARIO_BAND_NAMES = {"dataset": "dataset 'imagefolder'", "bands": "data.bands", "scale": "data.scale",
                       "coords": "data.coords"}


@contextmanager
def errors_name_the_file(source: str) -> Iterator[None]:
    """An error raised inside names the scenario file first (``<source>: <table>.<key>: ...``), as
    ``fol contacts`` words them: a :class:`ConfigError` about a scenario's fields, and the contact side's
    :class:`~contact_sim.errors.ContactError` or :class:`~orbits.errors.OrbitError` about a file the
    scenario names (an OEM whose span does not hold the horizon, a ``[time] iers_finals`` that is
    malformed or too short), each kept its type, the file named as :func:`~swarmbase.tomlcheck.brief` writes
    it. One that names the file first already, as it is or as brief() writes it (the contact side's), is left
    as it is."""
    try:
        yield
    except (ConfigError, ContactError, OrbitError) as exc:
        name = brief(source)
        if str(exc).startswith((f"{source}: ", f"{name}: ")):
            raise
        raise type(exc)(f"{name}: {exc}") from None


def _check_image_file_fields(data: DataConfig, bands: object, scale: object) -> None:
    """``path`` and ``coords`` belong to ``dataset = "imagefolder"``, which needs
    ``path``; a partition by place needs coordinates from the files;
    ``skip_corrupt`` belongs to the datasets read from image files, ``root``
    to those read from ``<root>/<name>/``. ``bands`` and ``scale``, as written in the
    file, go by the one rule of every front end (:func:`~fol.defaults.check_band_options`);
    the checked values are set in ``data``."""
    if data.skip_corrupt and not dataset_accepts(data.dataset, "skip_corrupt"):
        readers = ", ".join(n for n in dataset_names() if dataset_accepts(n, "skip_corrupt"))
        raise ConfigError(f"data.skip_corrupt: only applies to the datasets read from image files ({readers}), "
                          f"not {shown(data.dataset)}")
    if data.splits is not None and not dataset_accepts(data.dataset, "splits"):
        readers = ", ".join(n for n in dataset_names() if dataset_accepts(n, "splits"))
        raise ConfigError(f"data.splits: only applies to the datasets read from split folders ({readers}), "
                          f"not {shown(data.dataset)}")
    if data.root is not None and (data.dataset.startswith("synthetic-") or data.dataset == "imagefolder"):
        real = ", ".join(n for n in dataset_names() if not n.startswith("synthetic-") and n != "imagefolder")
        where = " (its images are in data.path)" if data.dataset == "imagefolder" else ""
        raise ConfigError(f"data.root: only applies to the datasets read from <root>/<name>/ ({real}), "
                          f"not {shown(data.dataset)}{where}")
    checked, data.scale = check_band_options(data.dataset, bands, scale, data.coords, names=SCENARIO_BAND_NAMES)
    data.bands = list(checked) if checked is not None else None
    if data.dataset != "imagefolder":
        for key, unset in (("path", data.path is None), ("coords", data.coords == "none")):
            if not unset:
                raise ConfigError(f"data.{key}: only applies to dataset 'imagefolder', not {shown(data.dataset)} "
                                  f"(real datasets are found under data.root)")
        return
    if data.path is None:
        raise ConfigError("data.path: dataset 'imagefolder' needs path = <folder with one sub-folder per class> "
                          "(relative to the scenario file)")
    if data.partition in ("orbit", "region") and data.coords == "none":
        raise ConfigError(f"data.partition: {shown(data.partition)} places images by their coordinates, but data.coords "
                          f"is 'none'; set coords = 'filename' (<lon>,<lat>.<ext>), 'csv' (<path>/coords.csv), 'exif' (EXIF GPS tags) "
                          f"or 'geotiff' (a GeoTIFF's centre), "
                          f"or use partition = 'dirichlet'")


def _table(doc: dict[str, Any], name: str, allowed: set[str], source: str) -> Table:
    """Table ``name`` of ``doc``, its refusals naming the file ``source`` as :func:`~swarmbase.tomlcheck.brief`
    writes it (as :func:`errors_name_the_file` and the contact side name it)."""
    return Table(doc.get(name, {}), name, allowed, error=ConfigError, source=brief(source))


def parse_scenario(doc: dict[str, Any], base_dir: Path, source: str = "scenario", text: str | None = None) -> SwarmScenario:
    """Validate a parsed scenario document (contact tables and learning tables).
    A learning-table error names the file first, as the contact side's do."""
    contact = parse_contact_scenario(doc, base_dir, source)
    with errors_name_the_file(source):
        return _parse_learning(doc, base_dir, source, text, contact)


def _parse_learning(doc: dict[str, Any], base_dir: Path, source: str, text: str | None,
                    contact: ContactScenario) -> SwarmScenario:
    s = _table(doc, "scenario", {"name", "seeds", "seed"}, source)
    name = s.str("name", Path(source).stem)
    if name in ("", ".", "..") or "/" in name or "\\" in name or not name.isprintable():  # one folder in runs/
        raise ConfigError(f"scenario.name: expected a printable name with no slash or backslash, not '.' or '..' (the "
                          f"default output folder is runs/<name>; output.dir sets another), got {shown(name)}")
    check_name_length(name, "scenario.name", ConfigError)
    if "seeds" in s and "seed" in s:
        raise ConfigError("scenario: give seeds or seed, not both")
    if "seed" in s and not is_seed(s["seed"]):  # named as written, not as the list it stands for
        raise ConfigError(f"scenario.seed: expected an integer in 0..{MAX_SEED}, got {shown(s['seed'])}")
    seeds = s.get("seeds", [s.get("seed", 0)])
    if isinstance(seeds, list) and len(seeds) > MAX_SEEDS:  # each seed is a full run: refused before any is planned
        raise ConfigError(f"scenario.seeds: expected at most {MAX_SEEDS:,} seeds (one full run each), "
                          f"got {len(seeds):,}: {shown(seeds)}")
    if not isinstance(seeds, list) or not seeds or not all(is_seed(x) for x in seeds):
        # the generators seeded by [seed, ...] take non-negative integers only, torch's at most 64 bits
        raise ConfigError(f"scenario.seeds: expected a non-empty list of integers in 0..{MAX_SEED}, got {shown(seeds)}")
    seen: set[int] = set()
    for seed in seeds:
        if seed in seen:  # the list shown shortened: it may hold a thousand seeds
            raise ConfigError(f"scenario.seeds: repeated seed {seed} in {shown(seeds)}")
        seen.add(seed)

    d = _table(doc, "data", set(DataConfig.__dataclass_fields__), source)
    data = DataConfig(
        dataset=d.str("dataset", "synthetic-hurricane"),
        root=None,
        size=d.int("size", None),
        image_size=d.int("image_size", None),
        partition=d.str("partition", "dirichlet"),
        psi=d.num("psi", 0.5),
        per_node=d.int("per_node", 300),
        acquisition_s=d.num("acquisition_s", None),
        swath_km=d.num("swath_km", 400.0),
        assign=d.str("assign", "uniform"),
        min_samples=d.int("min_samples", 40),
        coords=d.str("coords", "none", choices=IMAGE_FOLDER_COORDS),
        skip_corrupt=d.bool("skip_corrupt", False),
        splits=d.str_list("splits", None, what="split folder names"),
    )
    if "root" in d:  # as every path of the file: ~ expanded, a relative one against the file's folder
        data.root = str(d.path("root", base_dir))
    if "path" in d:
        data.path = str(d.path("path", base_dir))
    if data.dataset not in dataset_names():
        raise ConfigError(f"data.dataset: unknown dataset {shown(data.dataset)}; expected one of {', '.join(dataset_names())}")
    _check_image_file_fields(data, d.get("bands"), d.get("scale"))
    if data.partition not in PARTITIONS:
        raise ConfigError(f"data.partition: expected one of {', '.join(PARTITIONS)}, got {shown(data.partition)}")
    if data.partition == "orbit" and contact.constellation is None:
        raise ConfigError("data.partition: 'orbit' needs a [constellation] (drone swarms: dirichlet or region)")
    if data.assign not in ("uniform", "first"):
        raise ConfigError(f"data.assign: expected 'uniform' or 'first', got {shown(data.assign)}")
    if data.psi <= 0:
        raise ConfigError(f"data.psi: expected > 0, got {shown(data.psi)}")
    if data.min_samples < DEFAULT_MIN_SAMPLES:  # below it the node's split stops the run after the data is read
        raise ConfigError(f"data.min_samples: expected >= {DEFAULT_MIN_SAMPLES} (every node's images are split "
                          f"70/15/15 into train/val/test, which needs {DEFAULT_MIN_SAMPLES}), got {shown(data.min_samples)}")
    if data.per_node is not None and data.per_node < data.min_samples:  # no node could hold min_samples
        raise ConfigError(f"data.per_node: expected >= data.min_samples = {shown(data.min_samples)} (a node holds at "
                          f"most per_node images), got {shown(data.per_node)}")
    if data.size is not None and data.size < 1:
        raise ConfigError(f"data.size: expected >= 1, got {shown(data.size)}")
    if data.image_size is not None and not 8 <= data.image_size <= MAX_IMAGE_SIZE:
        raise ConfigError(f"data.image_size: expected an integer of 8..{MAX_IMAGE_SIZE} pixels, got {shown(data.image_size)}")
    if data.dataset.startswith("synthetic-"):
        try:  # the pool is drawn whole: refuse one that could not be held before drawing it
            check_pool_size(data.size or SYNTHETIC_DEFAULT_SIZE, data.side_px, "data.size")
        except DataError as exc:
            raise ConfigError(str(exc)) from None
    if data.acquisition_s is not None and data.acquisition_s <= 0:
        raise ConfigError(f"data.acquisition_s: expected > 0 s, got {shown(data.acquisition_s)}")
    if not 0 < data.swath_km < MAX_SWATH_KM:  # the footprint of orbits.coverage.swath_half_angle_rad
        raise ConfigError(f"data.swath_km: expected a width of 0 < swath_km < {MAX_SWATH_KM!r} km (pi x "
                          f"{MEAN_EARTH_RADIUS_KM:g} km, half the Earth's circumference), got {shown(data.swath_km)}")
    for key, needs in (("psi", "dirichlet"), ("acquisition_s", "orbit"), ("swath_km", "orbit"), ("assign", "orbit")):
        if key in d and data.partition != needs:  # another partition would silently ignore it
            raise ConfigError(f"data.{key}: only applies to partition = {needs!r}, not {shown(data.partition)}")

    m = _table(doc, "models", {"archs", "arch", "rule", "nodes"}, source)
    if "arch" in m and "archs" in m:
        raise ConfigError("models: give arch or archs, not both")
    if "arch" in m and not isinstance(m["arch"], str):  # named as written, not as the list it stands for
        raise ConfigError(f"models.arch: expected an architecture name, got {shown(m['arch'])}")
    archs = m.get("archs", [m["arch"]] if "arch" in m else [DEFAULT_ARCH])
    if not isinstance(archs, list) or not archs or not all(isinstance(a, str) for a in archs):
        raise ConfigError(f"models.archs: expected a non-empty list of architecture names, got {shown(archs)}")
    nodes = m.get("nodes", {})
    if not isinstance(nodes, dict) or not all(isinstance(v, str) for v in nodes.values()):
        raise ConfigError("models.nodes: expected a table of node name = architecture")
    for where, a in [("models.archs", a) for a in archs] + [(f"models.nodes.{k}", v) for k, v in nodes.items()]:
        if a not in architectures():
            raise ConfigError(f"{where}: unknown architecture {shown(a)}; expected one of {', '.join(architectures())}")
    models = ModelsConfig(list(archs), m.str("rule", "cycle"), dict(nodes))
    if models.rule not in ("cycle", "plane"):
        raise ConfigError(f"models.rule: expected 'cycle' or 'plane', got {shown(models.rule)}")
    if models.rule == "plane" and contact.constellation is None:
        raise ConfigError("models.rule: 'plane' needs a [constellation]")

    f = doc.get("fol", {})
    if not isinstance(f, dict):
        raise ConfigError("[fol]: expected a table")
    plan_rounds = len(round_boundaries(contact)) - 1
    fol_cfg = FOLConfig.from_dict({"rounds": plan_rounds, **f}, where=f"{brief(source)}: fol")
    if fol_cfg.rounds > plan_rounds:
        raise ConfigError(f"fol.rounds: {fol_cfg.rounds} FOL rounds but the contact plan has {plan_rounds} [rounds]")

    meth = doc.get("methods", {})
    if not isinstance(meth, dict):
        raise ConfigError("[methods]: expected a table")
    from fol.methods import get_method, method_names

    known = method_names()
    run_list = meth.get("run", ["local", "fol", "fol-a"])
    if not isinstance(run_list, list) or not run_list or not all(isinstance(x, str) for x in run_list):
        raise ConfigError(f"methods.run: expected a non-empty list of method names, got {shown(run_list)}")
    for x in run_list:
        if x not in known:
            raise ConfigError(f"methods.run: unknown method {shown(x)}; expected some of {', '.join(known)}")
    repeated = next((x for i, x in enumerate(run_list) if x in run_list[:i]), None)
    if repeated is not None:  # it would run twice per seed, over one results file, and count its rows twice
        raise ConfigError(f"methods.run: repeated method {shown(repeated)} in {shown(run_list)}")
    options = {}
    for key, value in meth.items():
        if key == "run":
            continue
        if key not in known:
            raise ConfigError(f"methods: unknown method table {shown(key)}; expected a table of options of one of "
                              f"{', '.join(known)}")  # the key shown bounded: a TOML key has no size limit
        if not isinstance(value, dict):
            raise ConfigError(f"methods.{key}: expected a table of options, got {shown(value)}")
        get_method(key, **value)  # every table, run or not: a typo or a bad value is refused, never ignored
        options[key] = dict(value)

    r = _table(doc, "run", {"executor", "workers", "threads", "ray_address", "transport"}, source)
    run = RunConfig(  # an address alone means Ray, as --ray-address alone does
        executor=r.str("executor", "ray" if "ray_address" in r else "local"),
        workers=r.int("workers", None),
        threads=r.int("threads", 1),
        ray_address=r.str("ray_address", None),
        transport=r.str("transport", "inproc"),
    )
    if run.transport not in ("inproc", "zmq"):
        raise ConfigError(f"run.transport: expected 'inproc' or 'zmq', got {shown(run.transport)}")
    if run.executor not in EXECUTORS:
        raise ConfigError(f"run.executor: expected one of {', '.join(EXECUTORS)}, got {shown(run.executor)}")
    for key in ("workers", "threads"):
        value = getattr(run, key)
        if value is not None and (problem := parallelism_floor_problem(value)):  # --workers' words; no upper
            raise ConfigError(f"run.{key}: {problem}")  # bound yet: a Ray cluster counts its own CPUs

    o = _table(doc, "output", {"dir"}, source)
    out = None
    if "dir" in o:
        out_dir = o.str("dir", nonempty=True)
        if "\0" in out_dir:  # no file system takes one: making the folder raised ValueError
            raise ConfigError(f"output.dir: expected a path without a NUL character, got {shown(out_dir)}")
        out = Path(out_dir).expanduser()  # as every other path field (and a shell) reads ~

    return SwarmScenario(name, list(seeds), contact, data, models, fol_cfg, list(run_list), options, run, out, doc,
                         source, text)


def load_scenario(path: str | Path, base_dir: str | Path | None = None, source: str | None = None) -> SwarmScenario:
    """Read and validate a scenario TOML file. Relative paths in it resolve
    against ``base_dir`` (default: the file's folder; ``--resume`` passes the
    original scenario's folder when it re-reads the copy in the output folder)."""
    path = Path(path)
    doc, text = read_toml(path, ConfigError, "scenario file")
    return parse_scenario(doc, Path(base_dir) if base_dir is not None else path.resolve().parent,
                          source or str(path), text)


#: ``resolved()`` keys and ``run`` fields that do not change results (``--resume`` may differ in them).
RESULT_NEUTRAL = ("source", "base_dir", "output")
RESULT_NEUTRAL_RUN = ("executor", "workers", "ray_address", "transport")


def json_default(o: Any) -> Any:
    """How a run's JSON files (``scenario.resolved.json``, results, transfers) hold what
    :mod:`json` does not: numpy scalars as numbers, paths as text."""
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, Path):
        return str(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def methods_as_used(methods: Any) -> Any:
    """A ``resolved()`` ``methods`` table (``{"run": [...], "<method>": {options}, ...}``) as the run uses it:
    the options of every method in ``run``, each default filled in (:meth:`~fol.methods.base.Method.used_options`),
    and no table of a method it does not run. Written out at its default or left out, an option is the same;
    a record saved before the defaults were filled in reads as one saved after. A table that is not one (a
    hand-edited record) is returned as it is, to be compared as it is."""
    from fol.methods.base import get_method, method_names

    run = methods.get("run") if isinstance(methods, dict) else None
    if not isinstance(run, list) or not all(isinstance(m, str) and m in method_names() for m in run):
        return methods
    used: dict[str, Any] = {"run": run}
    for name in run:
        options = methods.get(name, {})
        if not isinstance(options, dict):
            return methods
        try:
            used[name] = type(get_method(name)).used_options(options)
        except ConfigError:  # a bad budget in a hand-edited record
            return methods
    return used


def result_settings(resolved: dict[str, Any]) -> dict[str, Any]:
    """The part of :meth:`SwarmScenario.resolved` that changes results: contact
    tables, data, models, FOL hyperparameters, methods and their options, seeds,
    torch threads; not the executor, the transport, the output folder or where
    the file was read from."""
    out = {k: v for k, v in resolved.items() if k not in RESULT_NEUTRAL}
    if "methods" in out:  # a record written before the options' defaults were filled in, as one written after
        out["methods"] = methods_as_used(out["methods"])
    run = resolved.get("run", {})  # a hand-edited record: compared as it is, and differs
    out["run"] = {k: v for k, v in run.items() if k not in RESULT_NEUTRAL_RUN} if isinstance(run, dict) else run
    return out
