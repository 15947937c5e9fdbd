"""The method interface: what FOL and every baseline implement, so that the
swarm simulation can run any of them on the same nodes and compare them.

A method is one class in one file of :mod:`fol.methods`, registered by name
with :func:`register`; adding a baseline is adding a file. It receives a
:class:`SwarmContext` (every node's data and pretrained model, how many
communication rounds the contact plan allows and who can take part in each,
the shared training settings, and an executor to spread per-node work) and
returns one :class:`NodeResult` per node. The multi-round, server-based
baselines are written on one skeleton, :class:`fol.methods.server.ServerMethod`
(a client update and a server aggregation per method, one loop for the rest).

Everything a method trains goes through :func:`fol.train.fit`, and every method
accounts for what it sends (:mod:`fol.accounting`): bytes up/down per node,
masks at one bit per position, and training FLOPs.
"""

from __future__ import annotations

import inspect
from abc import ABC, abstractmethod
from contextlib import AbstractContextManager, contextmanager
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, ClassVar, Iterable, Iterator, TypeVar

import numpy as np
from torch import nn

from fol.config import FOLConfig
from fol.data import NodeData
from fol.errors import ConfigError, TrainingError
from fol.models import ModelSpec
from fol.train import TrainConfig
from swarmbase.tomlcheck import allowed_text, shown

__all__ = [
    "NodeSetup",
    "NodeResult",
    "SwarmContext",
    "Method",
    "register",
    "get_method",
    "method_names",
    "serial_map",
    "map_nodes",
    "naming_node",
    "naming_server",
    "naming_where",
]

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class NodeSetup:
    """One node as every method sees it: its data, architecture and the model it
    pretrained locally (identical starting point for every method)."""

    index: int
    name: str
    spec: ModelSpec
    class_names: list[str]
    data: NodeData
    pretrained: nn.Module
    pretrain_flops: int = 0
    init_seed: int = 0  # seed of the shared initialization of this node's architecture


@dataclass
class NodeResult:
    """What a method achieved on one node."""

    node: str
    method: str
    test_accuracy: float
    val_accuracy: float = float("nan")
    bytes_up: int = 0
    bytes_down: int = 0
    train_flops: int = 0
    rounds: int = 0
    seconds: float = 0.0
    received_models: int = 0
    kept_local: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def serial_map(fn: Callable[[T], R], items: Iterable[T], desc: str | None = None) -> list[R]:
    """The default executor: run ``fn`` on each item in this process, in order
    (``desc`` names the work, for executors that show progress)."""
    return [fn(item) for item in items]


@dataclass(frozen=True)
class _NodeWork:
    """``fn`` on one node's task, the item ``(node name, task)``: a divergence there (fit's
    :class:`~fol.errors.TrainingError`, naming the stage and the setting to lower) also names the node
    and ``what`` runs (top level and picklable, for process / Ray executors)."""

    fn: Callable[[Any], Any]
    what: str

    def __call__(self, item: tuple[str, Any]) -> Any:
        name, task = item
        with naming_node(name, self.what):
            return self.fn(task)


@contextmanager
def naming_where(who: str, what: str) -> Iterator[None]:
    """A divergence inside (fit's :class:`~fol.errors.TrainingError`, naming the stage and the setting to
    lower) raised again as one line that first names ``who`` ran it (``node sat-0-1``, ``server``) and
    ``what`` it was running: ``node sat-0-1 (fol / fol-a, round 1): distill: the weights became non-finite at
    epoch 0 (...)``, ``server (dense, round 1): data-free distillation: ...``."""
    try:
        yield
    except TrainingError as exc:
        raise TrainingError(f"{who} ({what}): {exc}") from None


def naming_node(name: str, what: str) -> AbstractContextManager[None]:
    """:func:`naming_where` for node ``name``'s own work."""
    return naming_where(f"node {name}", what)


def naming_server(what: str) -> AbstractContextManager[None]:
    """:func:`naming_where` for a method's server-side work (pooled training, DENSE's and Co-Boosting's
    distillation): ``server (dense, round 1): data-free distillation: ...``."""
    return naming_where("server", what)


def map_nodes(ctx: "SwarmContext", fn: Callable[[T], R], names: Iterable[str], tasks: Iterable[T], what: str,
              desc: str | None = None) -> list[R]:
    """``ctx.map(fn, tasks)`` for per-node work, ``names`` giving each task's node: a node's training that
    diverges ends the run with one line naming the node and ``what`` (the method, the round), then
    what fit says (the stage and the setting to lower)."""
    items = list(zip(names, tasks, strict=True))
    work = _NodeWork(fn, what)
    return ctx.map(work, items) if desc is None else ctx.map(work, items, desc=desc)


@dataclass
class SwarmContext:
    """What a method may use.

    ``rounds`` is how many communication rounds the contact plan allows a
    server-based method; ``participants[r]`` lists the indices of the nodes
    that can exchange a model during round ``r`` (0-based; all nodes when no
    contact plan constrains the run). ``deliveries[r][k]`` lists who delivers a
    model to node ``k`` in peer-to-peer round ``r`` (see :meth:`senders_to`);
    ``cache`` lets methods share work within one run (FOL and FOL-A come from
    the same pipeline run). ``transport(src, dst, payload, round)`` carries a
    peer-to-peer payload and returns the bytes that arrived (default: handed
    over in memory; the runner can route them over the node agent's CURVE
    links instead). ``train`` holds the local-training
    settings every method shares; ``fol`` FOL's hyperparameters. ``map`` runs
    a picklable function over items, possibly in other processes or on a Ray
    cluster: the result must not depend on which. ``evaluate_rounds`` makes
    the multi-round methods evaluate every node after every round (their
    accuracy-versus-rounds curve, ``NodeResult.extra["curve"]``).
    """

    nodes: list[NodeSetup]
    train: TrainConfig
    fol: FOLConfig = field(default_factory=FOLConfig)
    rounds: int = 1
    participants: list[list[int]] | None = None
    seed: int = 0
    map: Callable[..., list[Any]] = serial_map
    deliveries: list[dict[int, list[int]]] | None = None
    cache: dict[Any, Any] = field(default_factory=dict)
    transport: Callable[[str, str, bytes, int], bytes] | None = None
    evaluate_rounds: bool = True

    def senders_to(self, round_index: int, dst: int, limit: int) -> list[int]:
        """Indices of the nodes whose model reaches node ``dst`` in peer-to-peer
        round ``round_index`` (0-based), at most ``limit`` of them.

        With a contact plan (``deliveries``) these are the neighbours it
        delivered, in delivery order; without one the swarm is fully connected
        and ``limit`` distinct other nodes are drawn with a generator seeded by
        (seed, round, dst).
        """
        if self.deliveries is not None:
            if round_index >= len(self.deliveries):
                return []
            return list(self.deliveries[round_index].get(dst, []))[:limit]
        others = [k for k in range(len(self.nodes)) if k != dst]
        rng = np.random.default_rng([self.seed, round_index, dst])
        picked = rng.choice(len(others), size=min(limit, len(others)), replace=False)
        return [others[i] for i in picked]

    def participants_in(self, round_index: int) -> list[int]:
        if self.participants is None:
            return list(range(len(self.nodes)))
        if round_index >= len(self.participants):
            return []
        return list(self.participants[round_index])


class Method(ABC):
    """A personalization or federated method compared in the swarm report.

    Subclasses set ``name`` (the identifier used in scenarios and reports) and
    a one-line ``description``; options come from the scenario's
    ``[methods.<name>]`` table as keyword arguments of ``__init__`` (unknown
    ones are an error naming the method).
    """

    name: ClassVar[str] = ""
    description: ClassVar[str] = ""
    multi_round: ClassVar[bool] = False  # a server-based method that uses ctx.rounds
    one_architecture: ClassVar[bool] = False  # averages parameters: every node must hold the same architecture
    #: why a ``one_architecture`` method needs it, in its refusal of a mixed swarm
    one_architecture_reason: ClassVar[str] = "averages parameters"
    #: where its settings are given instead, for a method whose table takes no option
    settings_elsewhere: ClassVar[str] = ""

    @classmethod
    def _option_parameters(cls) -> list[inspect.Parameter]:
        """The keyword parameters of the method's ``__init__`` and, where that forwards ``**kwargs`` to
        ``super().__init__``, those of the classes above it, the nearest class's first."""
        found: list[inspect.Parameter] = []
        for klass in cls.__mro__:
            if klass is object:
                break
            init = klass.__dict__.get("__init__")
            if init is None:
                continue
            params = list(inspect.signature(init).parameters.values())[1:]  # without self
            found += [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
            if not any(p.kind is p.VAR_KEYWORD for p in params):
                break
        return found

    @classmethod
    def option_names(cls) -> list[str] | None:
        """The options the method takes: the keyword parameters of its
        ``__init__`` and, where that forwards ``**kwargs`` to
        ``super().__init__``, those of the classes above it (a method that
        checks its ``**kwargs`` itself overrides this); ``None`` if unknown."""
        return list(dict.fromkeys(p.name for p in cls._option_parameters()))

    @classmethod
    def used_options(cls, options: dict[str, Any]) -> dict[str, Any]:
        """The options the method runs with, given ``options`` as a scenario's ``[methods.<name>]`` writes
        them: each default of its ``__init__`` (and, where that forwards ``**kwargs``, of the classes above
        it, as :meth:`option_names` walks them) filled in where the table leaves it out. What ``--resume``
        compares: an option written at its default is no change."""
        defaults: dict[str, Any] = {}
        for p in cls._option_parameters():
            if p.default is not p.empty:
                defaults.setdefault(p.name, p.default)
        return {**defaults, **options}

    @abstractmethod
    def run(self, ctx: SwarmContext) -> list[NodeResult]:
        """Run on every node of ``ctx`` and return one result per node, in node order."""

    def check_inputs(self, shape: tuple[int, ...], fol: FOLConfig) -> None:
        """Refuse, before any training, options this method could not run with on
        images of ``shape`` (channels, height, width) and FOL settings ``fol``
        (e.g. a synthesis too large for memory); ``fol simulate --check`` calls
        it. Most methods need no such check."""


_REGISTRY: dict[str, type[Method]] = {}


def register(cls: type[Method]) -> type[Method]:
    """Class decorator adding a method to the registry under ``cls.name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    _REGISTRY[cls.name] = cls
    return cls


def _load_all() -> None:
    import importlib
    import pkgutil
    from pathlib import Path

    for info in pkgutil.iter_modules([str(Path(__file__).parent)]):
        if info.name != "base" and not info.name.startswith("_"):
            importlib.import_module(f"fol.methods.{info.name}")


def method_names() -> list[str]:
    _load_all()
    return sorted(_REGISTRY)


def get_method(name: str, **options: Any) -> Method:
    """Instantiate the registered method ``name`` with its options."""
    _load_all()
    if name not in _REGISTRY:
        raise ConfigError(f"method {shown(name)} is unknown; expected one of {', '.join(sorted(_REGISTRY))}")
    cls = _REGISTRY[name]
    accepted = cls.option_names()
    if accepted is not None:
        unknown = [k for k in options if k not in accepted]
        if unknown:  # the first one and their count: a table may hold thousands, each of any length
            takes = f"expected some of {allowed_text(unknown[0], accepted, sort=False)}" if accepted else \
                "it takes no options" + (f" ({cls.settings_elsewhere})" if cls.settings_elsewhere else "")
            more = f" and {len(unknown) - 1:,} more" if len(unknown) > 1 else ""
            raise ConfigError(f"methods.{name}: invalid option(s): unknown {shown(unknown[0])}{more}; {takes}")
    try:
        return cls(**options)
    except TypeError as exc:
        raise ConfigError(f"methods.{name}: invalid option(s): {exc}") from None


def _run_method(args: tuple[Method, SwarmContext]) -> list[NodeResult]:
    method, ctx = args
    return method.run(ctx)


def run_side_by_side(methods: Iterable[Method], ctx: SwarmContext, desc: str | None = None) -> list[list[NodeResult]]:
    """Run several methods at once, one task per method through ``ctx.map``.

    Meant for methods whose work is not spread over the nodes (DENSE's and
    Co-Boosting's server-side distillation run in one process): side by side
    they keep an executor's workers busy where, one after the other, each would
    hold one core. Each task gets a copy of ``ctx`` that runs its per-node work
    in its own process (``serial_map``) and starts with an empty ``cache``, so
    the results are the ones each method gives when run alone.
    """
    inner = replace(ctx, map=serial_map, cache={})
    return ctx.map(_run_method, [(m, inner) for m in methods], desc=desc)
