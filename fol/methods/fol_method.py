"""FOL and its variants as comparison methods: ``local``, ``fol``, ``fol-a``,
``fol-n``, ``fol-an``.

Round ``e`` of the swarm: every node sends its current model (in the safe format,
as bytes, exactly what would cross a link) to the neighbours the contact plan
lets it reach (:meth:`SwarmContext.senders_to`), then every node runs
:func:`fol.personalize.personalize` with what it received. ``fol`` and ``fol-a``
come from the same pipeline run (the distilled student and the aligned Top-K
ensemble it was distilled from), as do ``fol-n`` and ``fol-an``, so asking for
both costs one run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from fol.checkpoint import ModelCard, load_model_bytes, model_to_bytes
from fol.config import FOLConfig
from fol.variants import VARIANTS
from fol.methods.base import Method, NodeResult, NodeSetup, SwarmContext, map_nodes, register
from fol.personalize import NodeState, Received, RoundReport, check_synthesized_inputs, personalize, transfer_share
from fol.train import evaluate

__all__ = ["LocalMethod", "FOLMethod", "FOLAMethod", "FOLNMethod", "FOLANMethod", "run_fol_pipeline", "FOLRun"]


@dataclass
class _RoundTask:
    state: NodeState
    payloads: list[tuple[str, bytes]]
    round: int
    variant: str
    cfg: Any


def _personalize_node(task: _RoundTask) -> tuple[NodeState, RoundReport]:
    """One node's round (top level, so process / Ray executors can run it).
    Payloads go through the safe loader, as they would off a real link."""
    received = []
    for name, payload in task.payloads:
        loaded = load_model_bytes(payload, source=f"{task.state.name} <- {name}")
        received.append(Received(name=name, model=loaded.model, card=loaded.card))
    report = personalize(task.state, received, task.round, task.cfg, task.variant)
    return task.state, report


@dataclass
class FOLRun:
    """Outcome of one pipeline run over the whole swarm."""

    states: list[NodeState]
    reports: list[list[RoundReport]]
    bytes_up_by_round: list[list[int]]  # node -> bytes sent in each round
    bytes_down_by_round: list[list[int]]  # node -> bytes received in each round
    received: list[int]
    seconds: list[float]

    @property
    def bytes_up(self) -> list[int]:
        """Bytes each node sent over the whole run."""
        return [sum(per_round) for per_round in self.bytes_up_by_round]

    @property
    def bytes_down(self) -> list[int]:
        """Bytes each node received over the whole run."""
        return [sum(per_round) for per_round in self.bytes_down_by_round]

    def exchanges(self, k: int, deploy_ensemble: bool) -> list[dict[str, Any]]:
        """Node ``k`` after each exchange: the deployed model's (ensemble's or
        student's) test and validation accuracy, the student's and ensemble's test
        accuracy, the student's transfer share, and bytes, training FLOPs and
        seconds summed up to that exchange. A round that used nothing keeps the
        previous models; before the first round both are the local model. The
        point after exchange ``e`` is what a run of ``e`` rounds gives: a round
        depends only on the rounds before it."""
        points: list[dict[str, Any]] = []
        up = down = flops = 0
        secs = 0.0
        for e, rep in enumerate(self.reports[k]):
            prev = points[-1] if points else None
            acc = {name: rep.accuracy[name] if name in rep.accuracy else (
                   {"test": prev[name], "val": prev[f"{name}_val"]} if prev else rep.accuracy["local"])
                   for name in ("student", "ensemble")}
            up += self.bytes_up_by_round[k][e]
            down += self.bytes_down_by_round[k][e]
            flops += rep.train_flops
            secs += rep.seconds.get("round_total", 0.0)
            shown = acc["ensemble" if deploy_ensemble else "student"]
            points.append({"round": e + 1, "test_accuracy": shown["test"], "val_accuracy": shown["val"],
                           "student": acc["student"]["test"], "student_val": acc["student"]["val"],
                           "ensemble": acc["ensemble"]["test"], "ensemble_val": acc["ensemble"]["val"],
                           "transfer": rep.transfer.get("test") if "student" in rep.accuracy else (
                               prev["transfer"] if prev else None),
                           "kept_local": rep.kept_local and (prev is None or prev["kept_local"]),
                           "bytes_up": up, "bytes_down": down, "train_flops": flops, "seconds": secs})
        return points


def payload_card(node: NodeSetup, round: int) -> ModelCard:
    """The card of the model ``node`` sends in exchange ``round`` (0-based); the
    simulation sizes its contact-plan transfers with the same card."""
    return ModelCard(spec=node.spec, class_names=node.class_names,
                     input_shape=list(node.data.train.images.shape[1:]), producer=node.name, round=round)


def run_fol_pipeline(ctx: SwarmContext, use_pruning: bool) -> FOLRun:
    """Run E rounds of FOL on every node of ``ctx`` (deploying the ensemble, so
    both the student and the ensemble are kept)."""
    variant = "fol-a" if use_pruning else "fol-an"
    cfg = ctx.fol
    n = len(ctx.nodes)
    states = [
        NodeState.from_pretrained(node.name, node.pretrained, node.spec, node.class_names, node.data)
        for node in ctx.nodes
    ]
    run = FOLRun(states, [[] for _ in range(n)], [[0] * cfg.rounds for _ in range(n)],
                 [[0] * cfg.rounds for _ in range(n)], [0] * n, [0.0] * n)
    for r in range(cfg.rounds):
        payloads = []
        for node, state in zip(ctx.nodes, states):
            payloads.append(model_to_bytes(state.current_model, payload_card(node, r)))
        tasks = []
        for k in range(n):
            senders = ctx.senders_to(r, k, cfg.max_neighbours)
            for j in senders:
                run.bytes_up_by_round[j][r] += len(payloads[j])
                run.bytes_down_by_round[k][r] += len(payloads[j])
            run.received[k] += len(senders)
            arrived = [(ctx.nodes[j].name, payloads[j] if ctx.transport is None
                        else ctx.transport(ctx.nodes[j].name, ctx.nodes[k].name, payloads[j], r + 1)) for j in senders]
            tasks.append(_RoundTask(states[k], arrived, r + 1, variant, cfg))
        outcomes = map_nodes(ctx, _personalize_node, [node.name for node in ctx.nodes], tasks,
                             f"{'fol / fol-a' if use_pruning else 'fol-n / fol-an'}, round {r + 1}",
                             desc=f"FOL round {r + 1}/{cfg.rounds}")
        for k, (state, report) in enumerate(outcomes):
            states[k] = state
            run.reports[k].append(report)
            run.seconds[k] += report.seconds.get("round_total", 0.0)
    return run


def _cached_run(ctx: SwarmContext, use_pruning: bool) -> FOLRun:
    key = ("fol-pipeline", use_pruning)
    if key not in ctx.cache:
        ctx.cache[key] = run_fol_pipeline(ctx, use_pruning)
    return ctx.cache[key]


@register
class LocalMethod(Method):
    """The pretrained model alone: no communication."""

    name: ClassVar[str] = "local"
    description: ClassVar[str] = "each node's pretrained model, no communication"

    def run(self, ctx: SwarmContext) -> list[NodeResult]:
        out = []
        for node in ctx.nodes:
            out.append(NodeResult(
                node=node.name, method=self.name,
                test_accuracy=evaluate(node.pretrained, *node.data.test.tensors()).accuracy,
                val_accuracy=evaluate(node.pretrained, *node.data.val.tensors()).accuracy,
                train_flops=node.pretrain_flops, kept_local=True,
            ))
        return out


class _FOLVariant(Method):
    variant: ClassVar[str] = "fol"
    settings_elsewhere: ClassVar[str] = "FOL's settings are the scenario's [fol] table"

    def check_inputs(self, shape: tuple[int, ...], fol: FOLConfig) -> None:
        check_synthesized_inputs(fol, shape)

    def run(self, ctx: SwarmContext) -> list[NodeResult]:
        use_pruning, deploy_ensemble = VARIANTS[self.variant]
        run = _cached_run(ctx, use_pruning)
        out = []
        bytes_up, bytes_down = run.bytes_up, run.bytes_down
        for k, (node, state) in enumerate(zip(ctx.nodes, run.states)):
            model = state.deployed if deploy_ensemble else state.current_model
            kept = all(rep.kept_local for rep in run.reports[k])
            test = node.data.test.tensors()
            acc = {"local": evaluate(node.pretrained, *test).accuracy, "student": evaluate(state.current_model, *test).accuracy,
                   "ensemble": evaluate(state.deployed, *test).accuracy}
            out.append(NodeResult(
                node=node.name, method=self.name,
                test_accuracy=evaluate(model, *node.data.test.tensors()).accuracy,
                val_accuracy=evaluate(model, *node.data.val.tensors()).accuracy,
                bytes_up=bytes_up[k], bytes_down=bytes_down[k],
                train_flops=node.pretrain_flops + sum(rep.train_flops for rep in run.reports[k]),
                rounds=len(run.reports[k]), seconds=run.seconds[k], received_models=run.received[k],
                kept_local=kept,
                extra={"selected": [rep.selected for rep in run.reports[k]],
                       # the deployed model after each exchange: a run of E rounds also gives E' < E
                       "exchanges": run.exchanges(k, deploy_ensemble),
                       "weights": [rep.weights for rep in run.reports[k]],
                       # test accuracies of this pipeline run and the student's share of the ensemble's gain
                       "accuracy": acc, "transfer": None if kept else transfer_share(
                           acc["local"], acc["student"], acc["ensemble"], min_gain=1.0 / len(test[1]))},
            ))
        return out


@register
class FOLMethod(_FOLVariant):
    """FOL: aligned, pruned neighbours -> weighted Top-K ensemble -> distilled student."""

    name: ClassVar[str] = "fol"
    variant: ClassVar[str] = "fol"
    description: ClassVar[str] = "FOL, distilled student deployed"


@register
class FOLAMethod(_FOLVariant):
    name: ClassVar[str] = "fol-a"
    variant: ClassVar[str] = "fol-a"
    description: ClassVar[str] = "FOL, aligned Top-K ensemble deployed"


@register
class FOLNMethod(_FOLVariant):
    name: ClassVar[str] = "fol-n"
    variant: ClassVar[str] = "fol-n"
    description: ClassVar[str] = "FOL without alignment pruning, student deployed"


@register
class FOLANMethod(_FOLVariant):
    name: ClassVar[str] = "fol-an"
    variant: ClassVar[str] = "fol-an"
    description: ClassVar[str] = "FOL without alignment pruning, ensemble deployed"
