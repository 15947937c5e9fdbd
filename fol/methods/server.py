"""The server-round skeleton every multi-round baseline is written on.

Like Flower's ``Strategy`` (and PFLlib's ``clientbase`` / ``serverbase``), a
server-based method is two pieces of algorithm, and **one loop** drives them:

* a **client update**: a picklable top-level function run on one node's task
  (:meth:`ServerMethod.client_fn` and :meth:`ServerMethod.client_task`);
* a **server aggregation** (:meth:`ServerMethod.aggregate`) that folds the
  round's updates into the method's state and says what every participant
  sent and received and what its training cost.

The loop (:meth:`ServerMethod.train_rounds`) does everything else, the same
way for every method: round ``r`` involves the nodes the contact plan lets
reach the server (``ctx.participants_in(r)``), optionally sub-sampled to a
``fraction`` with a seeded generator; the tasks run through ``ctx.map`` (in
process, on worker processes or on Ray); a per-node :class:`Ledger` counts
bytes up / down, rounds taken part in and training FLOPs; and after every
round each node's current model is evaluated, which gives the accuracy
versus rounds and versus bytes curves (``NodeResult.extra["curve"]``).

A complete method in one file (the toy used by the tests and docs)::

    @register
    class LocalSGD(ServerMethod):
        name = "local-sgd"
        rng_salt = 0x5EED

        def setup(self, ctx):
            return [state_of(n.pretrained) for n in ctx.nodes]

        def client_task(self, state, ctx, r, k, cfg):
            return ClientTask(ctx.nodes[k].spec, state[k], ctx.nodes[k].data, cfg)

        def aggregate(self, state, ctx, r, picked, updates):
            for k, (new, _) in zip(picked, updates):
                state[k] = new
            return [Traffic(0, 0, seen) for _, seen in updates]

        def node_state(self, state, ctx, k):
            return state[k]

(``client_fn`` defaults to :func:`train_client`, which trains a state with
:func:`fol.train.fit`.)
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import numpy as np
import torch
from torch import nn

from fol.config import FOLConfig
from fol.data import NodeData
from fol.errors import ConfigError
from fol.methods._common import (
    Ledger, check_fraction, check_positive, check_positive_int, local_config, node_result, require_homogeneous,
    sample_round, state_of, train_flops_of,
)
from fol.methods.base import Method, NodeResult, SwarmContext, map_nodes
from fol.models import ModelSpec, build_model
from fol.seeds import round_seed
from fol.train import TrainConfig, decay_problem, evaluate, fit

__all__ = ["ServerMethod", "Traffic", "ClientTask", "train_client", "RoundsRun"]


@dataclass
class ClientTask:
    """One node's plain local update (picklable for process / Ray executors)."""

    spec: ModelSpec
    state: dict[str, torch.Tensor]
    data: NodeData
    cfg: TrainConfig


def train_client(task: ClientTask) -> tuple[dict[str, torch.Tensor], int]:
    """Train ``task.state`` on the node's training split with :func:`fol.train.fit`;
    returns the new state and the number of samples seen."""
    model = build_model(task.spec)
    model.load_state_dict(task.state)
    hist = fit(model, task.data.train.tensors(), task.cfg)
    return state_of(model), hist.samples_seen


@dataclass
class Traffic:
    """What one participant sent, received and trained in one round.

    ``samples_seen`` training samples at ``macs_ratio`` of the dense model's
    multiply-accumulates become training FLOPs; ``extra_flops`` is added as is
    (e.g. a dense gradient pass)."""

    bytes_up: int
    bytes_down: int
    samples_seen: int = 0
    macs_ratio: float = 1.0
    extra_flops: int = 0
    note: dict[str, Any] | None = None  # appended to the node's ledger history when given


@dataclass
class RoundsRun:
    """Everything the loop produced; ``state`` is the method's own state."""

    state: Any
    ledgers: list[Ledger]
    curves: dict[str, list[list[dict[str, float]]]]  # variant -> node -> one point per round
    seconds: float
    rounds: int


class ServerMethod(Method):
    """Base class of the multi-round, server-based baselines (see the module doc).

    Common options (every subclass accepts them as keyword arguments):
    ``local_epochs`` (epochs of local training per round), ``fraction`` (share
    of the reachable nodes sampled per round), ``lr`` (local learning rate;
    default: the swarm's shared setting) and ``rounds`` (how many server rounds
    to run; default: every round the context allows, ``ctx.rounds``).
    """

    multi_round: ClassVar[bool] = True
    one_architecture: ClassVar[bool] = True  # averages parameters (``fol simulate --check`` refuses a mixed swarm)
    rng_salt: ClassVar[int] = 0  # distinct per method: its client-sampling stream
    default_local_epochs: ClassVar[int] = 5

    def __init__(self, local_epochs: int | None = None, fraction: float = 1.0, lr: float | None = None,
                 rounds: int | None = None) -> None:
        epochs = self.default_local_epochs if local_epochs is None else local_epochs
        self.local_epochs = check_positive_int(self.name, "local_epochs", epochs, count=True)
        self.fraction = check_fraction(self.name, "fraction", fraction)
        self.lr = None if lr is None else check_positive(self.name, "lr", lr, factor=True, rate=True)
        self.rounds = None if rounds is None else check_positive_int(self.name, "rounds", rounds, count=True)

    @classmethod
    def used_options(cls, options: dict[str, Any]) -> dict[str, Any]:
        """:meth:`Method.used_options`, ``local_epochs`` left out (or None) being the method's own default."""
        used = super().used_options(options)
        if used.get("local_epochs") is None:
            used["local_epochs"] = cls.default_local_epochs
        return used

    def check_inputs(self, shape: tuple[int, ...], fol: FOLConfig) -> None:
        """A local ``lr`` must go with the swarm's SGD weight decay (``fol.weight_decay``,
        which local training keeps): refused before any training when their product is 1 or more."""
        if self.lr is not None and (problem := decay_problem(self.lr, fol.weight_decay)):
            raise ConfigError(f"methods.{self.name}.lr: fol.weight_decay {problem}")

    # ------------------------------------------------------------------ hooks

    def setup(self, ctx: SwarmContext) -> Any:
        """The method's initial state (global model, per-node states, masks...)."""
        raise NotImplementedError

    def client_fn(self, state: Any, round_index: int) -> Callable[[Any], Any]:
        """The picklable top-level function that runs a client task in round
        ``round_index`` (default :func:`train_client`)."""
        return train_client

    def client_task(self, state: Any, ctx: SwarmContext, round_index: int, k: int, cfg: TrainConfig) -> Any:
        """Node ``k``'s task for round ``round_index``; ``cfg`` holds its local
        training settings (epochs, learning rate, per-(node, round) seed)."""
        raise NotImplementedError

    def aggregate(self, state: Any, ctx: SwarmContext, round_index: int, picked: list[int],
                  updates: list[Any]) -> list[Traffic]:
        """Fold the updates of the nodes ``picked`` into ``state`` (in place);
        one :class:`Traffic` per participant, in ``picked`` order."""
        raise NotImplementedError

    def after_round(self, state: Any, ctx: SwarmContext, round_index: int, ledgers: list[Ledger]) -> None:
        """Optional work after the aggregation of a round (charged to ``ledgers``)."""

    def node_state(self, state: Any, ctx: SwarmContext, k: int) -> dict[str, torch.Tensor]:
        """The state dict node ``k`` would deploy now."""
        raise NotImplementedError

    def deploy_bytes(self, state: Any, ctx: SwarmContext, k: int, variant: str | None = None) -> int:
        """Bytes node ``k`` must still download to deploy the model of ``variant``
        (default: this method) now, e.g. the final broadcast of a global model;
        0 by default. One run can serve several variants (:meth:`evaluate_node`),
        whose models may need different downloads."""
        return 0

    def evaluate_node(self, state: Any, ctx: SwarmContext, k: int) -> dict[str, tuple[float, float]]:
        """(test, validation) accuracy of node ``k``'s current model, per variant
        name (one method run can serve several registered variants)."""
        model = self.node_model(state, ctx, k)
        node = ctx.nodes[k]
        return {self.name: (evaluate(model, *node.data.test.tensors()).accuracy,
                            evaluate(model, *node.data.val.tensors()).accuracy)}

    def result_extra(self, state: Any, ctx: SwarmContext, k: int, ledger: Ledger) -> dict[str, Any]:
        """Method-specific fields of node ``k``'s result."""
        return {"participations": ledger.rounds}

    def cache_key(self) -> tuple | None:
        """Key under which ``ctx.cache`` shares one training run between variants (None: no sharing)."""
        return None

    def initial_flops(self, ctx: SwarmContext, k: int) -> int:
        """Training FLOPs node ``k`` has spent before the first round (0, or
        its pretraining when the method starts from the pretrained model)."""
        return 0

    # ------------------------------------------------------------------ loop

    def total_rounds(self, ctx: SwarmContext) -> int:
        return int(ctx.rounds if self.rounds is None else self.rounds)

    def node_model(self, state: Any, ctx: SwarmContext, k: int) -> nn.Module:
        model = build_model(ctx.nodes[k].spec)
        model.load_state_dict(self.node_state(state, ctx, k))
        return model.eval()

    def local_cfg(self, ctx: SwarmContext, round_index: int, k: int, salt: int = 0) -> TrainConfig:
        """Local-training settings of node ``k`` in ``round_index`` (seeded per node and round;
        a ``salt`` draws apart from every node's unsalted seed of that round)."""
        seed = round_seed(ctx.seed, round_index, k, salt, len(ctx.nodes))  # the size matters to a salt only
        if self.lr is None:  # the swarm's rate, fol.pretrain_lr
            return local_config(ctx, self.local_epochs, seed)
        return local_config(ctx, self.local_epochs, seed, self.lr, lr_field=f"methods.{self.name}.lr")

    def train_rounds(self, ctx: SwarmContext) -> RoundsRun:
        """The one server-round loop (cached in ``ctx.cache`` when :meth:`cache_key` is set)."""
        key = self.cache_key()
        if key is not None and key in ctx.cache:
            return ctx.cache[key]
        spec = require_homogeneous(ctx, self.name)
        shape = ctx.nodes[0].data.train.images.shape[1:]
        state = self.setup(ctx)
        ledgers = [Ledger(train_flops=self.initial_flops(ctx, k)) for k in range(len(ctx.nodes))]
        curves: dict[str, list[list[dict[str, float]]]] = {}
        rng = np.random.default_rng([ctx.seed, self.rng_salt])
        rounds = self.total_rounds(ctx)
        t0 = time.perf_counter()
        for r in range(rounds):
            picked = sample_round(ctx, r, self.fraction, rng)
            if picked:
                tasks = [self.client_task(state, ctx, r, k, self.local_cfg(ctx, r, k)) for k in picked]
                updates = map_nodes(ctx, self.client_fn(state, r), [ctx.nodes[k].name for k in picked], tasks,
                                    f"{self.name}, round {r + 1}")
                traffic = self.aggregate(state, ctx, r, picked, list(updates))
                for k, t in zip(picked, traffic):
                    led = ledgers[k]
                    led.bytes_up += int(t.bytes_up)
                    led.bytes_down += int(t.bytes_down)
                    led.rounds += 1
                    led.train_flops += train_flops_of(spec, shape, t.samples_seen, t.macs_ratio) + int(t.extra_flops)
                    if t.note is not None:
                        led.history.append({"round": r, **t.note})
            self.after_round(state, ctx, r, ledgers)
            if ctx.evaluate_rounds:
                self._record(state, ctx, r, ledgers, curves)
        run = RoundsRun(state, ledgers, curves, time.perf_counter() - t0, rounds)
        if key is not None:
            ctx.cache[key] = run
        return run

    def _record(self, state: Any, ctx: SwarmContext, r: int, ledgers: list[Ledger],
                curves: dict[str, list[list[dict[str, float]]]]) -> None:
        for k, led in enumerate(ledgers):
            for variant, (test, val) in self.evaluate_node(state, ctx, k).items():
                per_node = curves.setdefault(variant, [[] for _ in ledgers])
                deploy = self.deploy_bytes(state, ctx, k, variant)
                per_node[k].append({"round": r + 1, "test_accuracy": float(test), "val_accuracy": float(val),
                                    "bytes": int(led.bytes_up + led.bytes_down + deploy)})

    def run(self, ctx: SwarmContext) -> list[NodeResult]:
        return self.results(ctx, self.train_rounds(ctx))

    def results(self, ctx: SwarmContext, run: RoundsRun) -> list[NodeResult]:
        """One result per node from a finished :meth:`train_rounds` (the final
        models, their bytes and the per-round curves). Tests and tools that need
        the method's final state call ``train_rounds`` and read ``run.state``."""
        results = []
        for k, node in enumerate(ctx.nodes):
            led = run.ledgers[k]
            kept = self.kept_local(run.state, ctx, k, led)
            flops = led.train_flops
            if kept and self.initial_flops(ctx, k) == 0:  # it deploys its pretrained model: charged as `local` is
                flops += node.pretrain_flops
            final = Ledger(led.bytes_up, led.bytes_down + self.deploy_bytes(run.state, ctx, k, self.name), flops,
                           led.rounds, list(led.history))
            extra = self.result_extra(run.state, ctx, k, led)
            curve = run.curves.get(self.name, [[]] * len(ctx.nodes))[k]
            if curve:
                extra["curve"] = curve
            if len(curve) == run.rounds and run.rounds > 0:  # the last point is the final model's evaluation
                test, val = curve[-1]["test_accuracy"], curve[-1]["val_accuracy"]
            else:
                test, val = self.evaluate_node(run.state, ctx, k)[self.name]
            res = node_result(node, self.name, None, final, test_accuracy=test, val_accuracy=val, extra=extra,
                              kept_local=kept)
            res.seconds = run.seconds / max(1, len(ctx.nodes))
            results.append(res)
        return results

    def kept_local(self, state: Any, ctx: SwarmContext, k: int, ledger: Ledger) -> bool:
        """Whether node ``k`` ends with its own local model (default: never); such
        a node's result is charged its pretraining FLOPs, as ``local``'s is."""
        return False

