"""Swarm scenario files: the contact tables (validated by
:mod:`contact_sim.scenario`) plus the learning tables validated here.

Learning tables, every key checked (unknown keys are an error naming them)::

    [scenario]
    name = "leo-hurricane"     # used in the report
    seeds = [0, 1, 2]          # one full run per seed; mean ± std over seeds

    [data]
    dataset = "synthetic-hurricane"   # any name `fol data info` accepts
    # root = "datasets"        # folder of real datasets (relative to this file)
    size = 9000                # pool size of a synthetic dataset
    image_size = 32            # synthetic images only (pixels)
    partition = "orbit"        # "orbit" | "dirichlet" | "region"
    psi = 0.5                  # Dirichlet concentration (partition = "dirichlet")
    per_node = 300             # at most this many images per node
    acquisition_s = 86400.0    # orbit: the acquisition period from the start (s)
    swath_km = 400.0           # orbit: imaging swath width (km)
    assign = "uniform"         # orbit: "uniform" over the satellites that covered a sample, or "first"
    min_samples = 40           # fewer images on a node is an error

    [models]
    archs = ["cnn-small"]      # cycled over nodes (a list = heterogeneous swarm) ...
    rule = "cycle"             # ... or "plane": satellites of plane p get archs[p % len]
    # [models.nodes]           # explicit overrides, node name -> arch
    # "sat-P01-S03" = "resnet-small"

    [fol]                      # any fol.config.FOLConfig field; rounds = E
    rounds = 1                 # default: the number of [rounds] in the contact plan
    # preset = "paper"         # the fields above apply on this preset ("default" | "paper")

    [methods]
    run = ["local", "fol", "fol-a"]   # any of `fol simulate --list-methods`
    # [methods.fedavg]         # options of one method
    # fraction = 0.5

    [run]
    executor = "local"         # "local" | "process" | "ray"
    workers = 2                # processes / Ray CPUs (default: all cores)
    threads = 1                # torch threads per node task
    transport = "inproc"       # "inproc" | "zmq": FOL's model exchange over CURVE links on 127.0.0.1
    # ray_address = "auto"     # join an existing Ray cluster

    [output]
    dir = "runs/leo-hurricane" # relative to the working directory

Round ``e`` of FOL (1-based) uses round ``e - 1`` of the contact plan: a
neighbour's model reaches a node only if a window of that round can carry it.
"""

from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from contact_sim.scenario import ContactScenario, parse_contact_scenario
from fol.config import FOLConfig
from fol.errors import ConfigError
from fol.executors import EXECUTORS
from fol.models import architectures

__all__ = ["SwarmScenario", "DataConfig", "ModelsConfig", "RunConfig", "load_scenario", "parse_scenario"]

PARTITIONS = ("orbit", "dirichlet", "region")


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


@dataclass
class ModelsConfig:
    archs: list[str] = field(default_factory=lambda: ["cnn-small"])
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
            "contact": {k: v for k, v in self.raw.items() if k not in _LEARNING_TABLES},
            "data": asdict(self.data), "models": asdict(self.models), "fol": self.fol.to_dict(),
            "methods": {"run": self.methods, **self.method_options}, "run": asdict(self.run),
            "output": {"dir": str(self.output_dir) if self.output_dir else None},
        }


_LEARNING_TABLES = ("scenario", "data", "models", "fol", "methods", "run", "output")


def _table(doc: dict[str, Any], name: str, allowed: set[str]) -> dict[str, Any]:
    t = doc.get(name, {})
    if not isinstance(t, dict):
        raise ConfigError(f"[{name}]: expected a table")
    unknown = sorted(set(t) - allowed)
    if unknown:
        raise ConfigError(f"{name}.{unknown[0]}: unknown key (allowed: {', '.join(sorted(allowed))})")
    return t


def _typed(t: dict[str, Any], where: str, key: str, kind: type | tuple[type, ...], default: Any) -> Any:
    if key not in t:
        return default
    v = t[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(v, bool) and bool not in kinds or not isinstance(v, kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise ConfigError(f"{where}.{key}: expected {names}, got {v!r}")
    return float(v) if float in kinds and not isinstance(v, str) else v


def parse_scenario(doc: dict[str, Any], base_dir: Path, source: str = "scenario", text: str | None = None) -> SwarmScenario:
    """Validate a parsed scenario document (contact tables and learning tables)."""
    contact = parse_contact_scenario(doc, base_dir, source)

    s = _table(doc, "scenario", {"name", "seeds", "seed"})
    name = _typed(s, "scenario", "name", str, Path(source).stem)
    if "seeds" in s and "seed" in s:
        raise ConfigError("scenario: give seeds or seed, not both")
    seeds = s.get("seeds", [s.get("seed", 0)])
    if not isinstance(seeds, list) or not seeds or not all(isinstance(x, int) and not isinstance(x, bool) for x in seeds):
        raise ConfigError(f"scenario.seeds: expected a non-empty list of integers, got {seeds!r}")
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"scenario.seeds: repeated seed in {seeds}")

    d = _table(doc, "data", set(DataConfig.__dataclass_fields__))
    data = DataConfig(
        dataset=_typed(d, "data", "dataset", str, "synthetic-hurricane"),
        root=None,
        size=_typed(d, "data", "size", int, None),
        image_size=_typed(d, "data", "image_size", int, None),
        partition=_typed(d, "data", "partition", str, "dirichlet"),
        psi=_typed(d, "data", "psi", (int, float), 0.5),
        per_node=_typed(d, "data", "per_node", int, 300),
        acquisition_s=_typed(d, "data", "acquisition_s", (int, float), None),
        swath_km=_typed(d, "data", "swath_km", (int, float), 400.0),
        assign=_typed(d, "data", "assign", str, "uniform"),
        min_samples=_typed(d, "data", "min_samples", int, 40),
    )
    if "root" in d:
        root = Path(_typed(d, "data", "root", str, ""))
        data.root = str(root if root.is_absolute() else base_dir / root)
    if data.partition not in PARTITIONS:
        raise ConfigError(f"data.partition: expected one of {', '.join(PARTITIONS)}, got {data.partition!r}")
    if data.partition == "orbit" and contact.constellation is None:
        raise ConfigError("data.partition: 'orbit' needs a [constellation] (drone swarms: dirichlet or region)")
    if data.assign not in ("uniform", "first"):
        raise ConfigError(f"data.assign: expected 'uniform' or 'first', got {data.assign!r}")
    if data.psi <= 0:
        raise ConfigError(f"data.psi: expected > 0, got {data.psi}")
    if data.per_node is not None and data.per_node < 1:
        raise ConfigError(f"data.per_node: expected >= 1, got {data.per_node}")
    if data.size is not None and data.size < 1:
        raise ConfigError(f"data.size: expected >= 1, got {data.size}")
    if data.acquisition_s is not None and data.acquisition_s <= 0:
        raise ConfigError(f"data.acquisition_s: expected > 0 s, got {data.acquisition_s}")
    if data.swath_km <= 0:
        raise ConfigError(f"data.swath_km: expected > 0 km, got {data.swath_km}")

    m = _table(doc, "models", {"archs", "arch", "rule", "nodes"})
    if "arch" in m and "archs" in m:
        raise ConfigError("models: give arch or archs, not both")
    archs = m.get("archs", [m["arch"]] if "arch" in m else ["cnn-small"])
    if not isinstance(archs, list) or not archs or not all(isinstance(a, str) for a in archs):
        raise ConfigError(f"models.archs: expected a non-empty list of architecture names, got {archs!r}")
    nodes = m.get("nodes", {})
    if not isinstance(nodes, dict) or not all(isinstance(v, str) for v in nodes.values()):
        raise ConfigError("models.nodes: expected a table of node name = architecture")
    for where, a in [("models.archs", a) for a in archs] + [(f"models.nodes.{k}", v) for k, v in nodes.items()]:
        if a not in architectures():
            raise ConfigError(f"{where}: unknown architecture {a!r}; expected one of {', '.join(architectures())}")
    models = ModelsConfig(list(archs), _typed(m, "models", "rule", str, "cycle"), dict(nodes))
    if models.rule not in ("cycle", "plane"):
        raise ConfigError(f"models.rule: expected 'cycle' or 'plane', got {models.rule!r}")
    if models.rule == "plane" and contact.constellation is None:
        raise ConfigError("models.rule: 'plane' needs a [constellation]")

    f = doc.get("fol", {})
    if not isinstance(f, dict):
        raise ConfigError("[fol]: expected a table")
    plan_rounds = contact.rounds.count or (len(contact.rounds.boundaries_s) - 1 if contact.rounds.boundaries_s else 1)
    fol_cfg = FOLConfig.from_dict({"rounds": plan_rounds, **f}, where="fol")
    if fol_cfg.rounds > plan_rounds:
        raise ConfigError(f"fol.rounds: {fol_cfg.rounds} FOL rounds but the contact plan has {plan_rounds} [rounds]")

    meth = doc.get("methods", {})
    if not isinstance(meth, dict):
        raise ConfigError("[methods]: expected a table")
    from fol.methods import method_names

    known = method_names()
    run_list = meth.get("run", ["local", "fol", "fol-a"])
    if not isinstance(run_list, list) or not run_list or not all(isinstance(x, str) for x in run_list):
        raise ConfigError(f"methods.run: expected a non-empty list of method names, got {run_list!r}")
    for x in run_list:
        if x not in known:
            raise ConfigError(f"methods.run: unknown method {x!r}; expected some of {', '.join(known)}")
    options = {}
    for key, value in meth.items():
        if key == "run":
            continue
        if key not in known or not isinstance(value, dict):
            raise ConfigError(f"methods.{key}: expected a table of options of a known method")
        options[key] = dict(value)

    r = _table(doc, "run", {"executor", "workers", "threads", "ray_address", "transport"})
    run = RunConfig(
        executor=_typed(r, "run", "executor", str, "local"),
        workers=_typed(r, "run", "workers", int, None),
        threads=_typed(r, "run", "threads", int, 1),
        ray_address=_typed(r, "run", "ray_address", str, None),
        transport=_typed(r, "run", "transport", str, "inproc"),
    )
    if run.transport not in ("inproc", "zmq"):
        raise ConfigError(f"run.transport: expected 'inproc' or 'zmq', got {run.transport!r}")
    if run.executor not in EXECUTORS:
        raise ConfigError(f"run.executor: expected one of {', '.join(EXECUTORS)}, got {run.executor!r}")
    for key in ("workers", "threads"):
        value = getattr(run, key)
        if value is not None and value < 1:
            raise ConfigError(f"run.{key}: expected >= 1, got {value}")

    o = _table(doc, "output", {"dir"})
    out = Path(o["dir"]) if "dir" in o else None

    return SwarmScenario(name, list(seeds), contact, data, models, fol_cfg, list(run_list), options, run, out, doc,
                         source, text)


def load_scenario(path: str | Path) -> SwarmScenario:
    """Read and validate a scenario TOML file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: scenario file not found") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a UTF-8 text file") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML ({exc})") from None
    return parse_scenario(doc, path.resolve().parent, str(path), text)
