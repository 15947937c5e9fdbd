"""Choose FOL's project-default options on held-out VALIDATION data (never test).

Synthetic hurricane and wildfire, ``--nodes`` nodes of ``--per-node`` images
(``--swarm protocol``: the protocol's swarm instead, ``--pool`` images over
``--nodes`` nodes of varying size, as :mod:`fol.reproduce` builds it),
Dirichlet psi = ``--psi`` (0.5), ``--arch`` (cnn-medium), Q = ``--q`` (5) neighbours drawn per node
(seeded), K = each config's own (3 in both presets; ``--k`` sets it for all, a
``top_k`` option for one), E = ``--rounds`` (1), ``--seeds`` seeds. Before the usual 70 / 15 / 15 split a
selection slice (``--select-fraction`` of every node's shard, stratified by
nothing, drawn by a seeded permutation) is set aside: no option trains, ranks,
fits weights or decides a revert on it, so it is an unbiased validation set
for every option, including those that use D_val ("train+val" distillation
inputs, weights fitted on D_val, the "val" revert rule).

Stage 2 (fine-tune, alignment pruning, post fine-tune) runs once per node and
stage-2 setting (fine-tune strength, pruning settings, and pruning itself:
``--option align_pruning=false`` aligns without it, the FOL-N pipeline);
every stage-3/4 option reuses those aligned candidates.
Options are compared one at a time against the ``paper`` preset (``--base
default``: against the project default).

With ``--rounds E`` > 1 (for options that act across rounds, such as
``keep_received``), every config runs the whole swarm for E rounds through
the simulation's own loop (:func:`fol.methods.fol_method.run_fol_pipeline`:
in every round each node receives the current students of Q others, drawn
per round and seeded, and personalizes), on the same pretrained nodes; the
student and the ensemble after round E are scored. After round 1 the
students differ, so nothing is shared between configs: each costs a full
run.

The selection rule, fixed before any result was seen: for every option field,
take the value with the highest mean selection-slice accuracy of the deployed
student (``fol``), mean over tasks x seeds x nodes, if it beats the base's
value (the ``paper`` preset's; with ``--base default``, the default's) by at
least ``--min-gain`` points (0.5); the project default is all those picks
together, which a ``--defaults-only`` run, once they are the dataclass
defaults, evaluates once more as the "default (current)" row. Test accuracy
is printed only for reporting, in separate columns, and chooses nothing.

    nice -n 15 env OMP_NUM_THREADS=1 python benchmarks/select_fol_config.py
    python benchmarks/select_fol_config.py --nodes 6 --seeds 1 --tasks hurricane   # quick look
    OMP_NUM_THREADS=1 python benchmarks/select_fol_config.py --swarm protocol --nodes 24 --first-seed 3 --k 3
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (comma_names, fail, fraction, int_in, machine_line, pool_fits, positive_float, seed_range,  # noqa: E402
                     unwritable_output, user_seed)

from fol.checkpoint import ModelCard  # noqa: E402
from fol.config import FOLConfig  # noqa: E402
from fol.errors import ConfigError  # noqa: E402
from fol.fileio import atomic_write_text  # noqa: E402
from fol.data import DEFAULT_MIN_SAMPLES, dirichlet_partition, make_synthetic  # noqa: E402
from fol.defaults import DEFAULT_ARCH  # noqa: E402
from fol.methods import SwarmContext  # noqa: E402
from fol.methods.fol_method import run_fol_pipeline  # noqa: E402
from fol.models import architectures  # noqa: E402
from fol.nodes import build_nodes  # noqa: E402
from fol.personalize import (NodeState, Received, RoundReport, align_candidates,  # noqa: E402
                             apply_align_fallback, ensemble_and_distill, swarm_transfer)
from fol.reproduce import SYNTHETIC_POOL_ALL, ProtocolConfig, load_pool, paired_difference, partition_pool  # noqa: E402
from fol.train import evaluate  # noqa: E402

#: Stage-3/4 options, one at a time against the paper preset: (field, value).
STAGE34_OPTIONS: list[tuple[str, Any]] = [
    ("own_in_top_k", "always"),
    ("tie_break", "val-loss"),
    ("top_k_rule", "greedy"),
    ("ensemble_fit", "val"),
    ("ensemble_vertex", False),
    ("distill_inputs", "train+aug"),
    ("distill_inputs", "train+val"),
    ("distill_inputs", "synth"),
    ("distill_inputs", "train+synth"),
    ("distill_revert", "val"),
    ("align_fallback", "received"),  # applied to the same aligned candidates (no new alignment)
]
#: Further stage-3/4 options (``--more``).
MORE_OPTIONS: list[tuple[str, Any]] = [
    ("distill_mix", "cutmix"),  # with train+aug (the mix only matters there)
    ("distill_revert", "none"),
    ("temperature", 1.0),
    ("temperature", 6.0),
]
#: Stage-2 (fine-tune strength) options: each needs its own alignment run.
STAGE2_OPTIONS: list[tuple[str, Any]] = [
    ("finetune_freeze", 2),
    ("finetune_lr", 0.001),
]


def _carve(shard: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    perm = np.random.default_rng(seed).permutation(np.asarray(shard))
    n_sel = int(round(fraction * len(perm)))
    return perm[n_sel:], perm[:n_sel]


def _parse_option(text: str) -> tuple[str, Any]:
    """``"field=value"`` -> ``(field, value)``, the value read as JSON when it
    parses (numbers, ``true``), else kept as a string. Several changes that
    form one option, ``"f1=v1,f2=v2"``, give ``("f1,f2", (v1, v2))``.

    >>> _parse_option("distill_inputs=train+synth"), _parse_option("temperature=2")
    (('distill_inputs', 'train+synth'), ('temperature', 2))
    >>> _parse_option("distill_inputs=function-matching,distill_epochs=60")
    ('distill_inputs,distill_epochs', ('function-matching', 60))
    """
    if "," in text:
        parts = [_parse_option(part) for part in text.split(",")]
        return ",".join(f for f, _ in parts), tuple(v for _, v in parts)
    field, sep, raw = text.partition("=")
    if not sep or not field.strip():
        raise ValueError(f"expected FIELD=VALUE, got {text!r}")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return field.strip(), value


def _changes(field: str, value: Any) -> dict[str, Any]:
    if "," in field:
        return dict(zip(field.split(","), value))
    return {field: value}


def _option_name(field: str, value: Any) -> str:
    """The row name of an option: ``field=value`` (each change of a combined one)."""
    return ",".join(f"{f}={v}" for f, v in _changes(field, value).items())


#: An option of this script, not a ``FOLConfig`` field: ``align_pruning=false``
#: aligns without the pruning step, i.e. the FOL-N / FOL-AN pipeline (the
#: ``fol-n`` variant), so pruning itself can be compared on the selection slice.
PRUNING = "align_pruning"


def _option_cfg(base: FOLConfig, field: str, value: Any) -> FOLConfig:
    changes = _changes(field, value)
    changes.pop(PRUNING, None)
    if set(changes) == {"distill_mix"}:
        changes["distill_inputs"] = "train+aug"
    return base.replace(**changes)


def without_pruning(options: list[tuple[str, Any]]) -> set[str]:
    """The row names of the options that align without pruning (``align_pruning=false``)."""
    out = set()
    for f, v in options:
        flag = _changes(f, v).get(PRUNING, True)
        if not isinstance(flag, bool):
            raise ConfigError(f"{PRUNING} must be true or false, got {flag!r}")
        if not flag:
            out.add(_option_name(f, v))
    return out


def build_configs(args: argparse.Namespace, options: list[tuple[str, Any]]) -> dict[str, FOLConfig]:
    """The compared configs by row name: the paper preset, the current default
    and every option applied on ``--base``; Q from ``--q`` for all, K from
    ``--k`` for all when given, else each config's own (an option may set it)."""
    fixed = {"max_neighbours": args.q} | ({} if args.k is None else {"top_k": args.k})
    paper = FOLConfig.preset("paper", **fixed)
    base = paper if args.base == "paper" else FOLConfig(**fixed)
    configs = {"paper": paper, "default (current)": FOLConfig(**fixed)}
    return configs | {_option_name(f, v): _option_cfg(base, f, v) for f, v in options}


def _stage2_key(cfg: FOLConfig, prunes: bool) -> tuple:
    """What stage 2 reads of ``cfg``, from the config's own per-stage views:
    whether it prunes, the frozen layers, the fine-tune and post fine-tune
    training settings, and the pruning settings (none without pruning)."""
    return (prunes, cfg.finetune_freeze,
            dataclasses.astuple(cfg.finetune_train(cfg.finetune_epochs, 0, "fine-tune")),
            dataclasses.astuple(cfg.finetune_train(cfg.post_finetune_epochs, 0, "post fine-tune")),
            dataclasses.astuple(cfg.prune(0)) if prunes else None)


def stage2_groups(configs: dict[str, FOLConfig], no_pruning: set[str] = frozenset()) -> dict[tuple, list[str]]:
    """The configs grouped by their stage-2 setting (:func:`_stage2_key`, whose
    first item says whether they prune), so alignment runs once per group and
    every config of a group ranks, ensembles and distils the same candidates."""
    groups: dict[tuple, list[str]] = {}
    for name, cfg in configs.items():
        groups.setdefault(_stage2_key(cfg, name not in no_pruning), []).append(name)
    return groups


def protocol_config(task: str, seed: int, args: argparse.Namespace) -> ProtocolConfig:
    """The protocol settings ``--swarm protocol`` partitions one task and seed
    with (validated by :class:`~fol.reproduce.ProtocolConfig`; ``main`` builds
    it once before any training, so a bad ``--pool`` / ``--nodes`` / ``--psi``
    is one line)."""
    return ProtocolConfig(datasets=(f"synthetic-{task}",), psis=(args.psi,), seeds=(seed,), nodes=args.nodes,
                          pool=args.pool, data_seed=seed)


def swarm_shards(task: str, seed: int, args: argparse.Namespace) -> tuple[Any, list[np.ndarray], list[np.ndarray]]:
    """The image pool of one task and seed, and every node's kept shard and
    selection slice (indices into the pool; the slice carved off the shard by
    a seeded permutation, before the node's own 70 / 15 / 15 split).

    ``--swarm equal``: ``--nodes`` shards of ``--per-node`` images each.
    ``--swarm protocol``: the protocol's swarm (:mod:`fol.reproduce`): a pool of
    ``--pool`` images partitioned over ``--nodes`` nodes whose sizes vary
    (Dirichlet without a fixed size, at least 40 images each), with this seed
    as the data seed, so the pool and the partition differ from the protocol's
    own runs (data seed 0) on every seed but 0."""
    if args.swarm == "protocol":
        proto = protocol_config(task, seed, args)
        pool = load_pool(f"synthetic-{task}", proto)
        shards = partition_pool(pool, proto, args.psi)
    else:
        pool = make_synthetic(task, args.nodes * args.per_node * 2, seed=seed)
        shards = dirichlet_partition(pool.labels.numpy(), args.nodes, args.psi, seed, samples_per_node=args.per_node)
    kept, selection = zip(*(_carve(np.asarray(s), args.select_fraction, seed * 7919 + k) for k, s in enumerate(shards)))
    return pool, list(kept), list(selection)


def _swarm(task: str, seed: int, args: argparse.Namespace) -> tuple[list[Any], list[Any]]:
    """The pretrained nodes (pretraining of the paper preset, which every
    preset shares) and each node's selection slice (:func:`swarm_shards`)."""
    paper = FOLConfig.preset("paper", rounds=1, seed=seed)
    pool, kept, selection = swarm_shards(task, seed, args)
    nodes = build_nodes(pool, kept, [args.arch], paper.pretrain_train(), seed)
    return nodes, [pool.subset(np.asarray(s, dtype=np.int64)).tensors() for s in selection]


def _scores(node: Any, sel: Any, student: Any, ensemble: Any) -> dict[str, float]:
    test = node.data.test.tensors()
    return {"local_sel": evaluate(node.pretrained, *sel).accuracy,
            "local_test": evaluate(node.pretrained, *test).accuracy,
            "fol_sel": evaluate(student, *sel).accuracy, "fol_test": evaluate(student, *test).accuracy,
            "fola_sel": evaluate(ensemble, *sel).accuracy, "fola_test": evaluate(ensemble, *test).accuracy}


def run_swarm_rounds(task: str, seed: int, args: argparse.Namespace, configs: dict[str, FOLConfig],
                     no_pruning: set[str] = frozenset()):
    """``--rounds E`` > 1: every config runs E rounds of the whole swarm in
    the simulation's loop; then yield, node after node, what
    :func:`run_swarm` yields, for the student and ensemble after round E."""
    nodes, sel_sets = _swarm(task, seed, args)
    scores: dict[str, list[dict[str, float]]] = {}
    for name, cfg in configs.items():
        ctx = SwarmContext(nodes=nodes, train=FOLConfig.preset("paper").pretrain_train(),
                           fol=cfg.replace(seed=seed, rounds=args.rounds), seed=seed)
        run = run_fol_pipeline(ctx, use_pruning=name not in no_pruning)
        scores[name] = [_scores(node, sel, state.current_model, state.deployed)
                        for node, sel, state in zip(nodes, sel_sets, run.states, strict=True)]
        print(f"  {task} seed {seed} {name}: {args.rounds} rounds done", flush=True)
    for k in range(len(nodes)):
        yield {name: rows[k] for name, rows in scores.items()}


def run_swarm(task: str, seed: int, args: argparse.Namespace, configs: dict[str, FOLConfig],
              no_pruning: set[str] = frozenset()):
    """Yield, node after node (index order), the accuracies of local /
    student / ensemble on the selection slice and on test for every named
    config (those in ``no_pruning`` aligned without the pruning step):
    ``{config: {key: value}}``."""
    if args.rounds > 1:
        yield from run_swarm_rounds(task, seed, args, configs, no_pruning)
        return
    nodes, sel_sets = _swarm(task, seed, args)
    rng = np.random.default_rng(seed)
    senders = [sorted(rng.choice([j for j in range(len(nodes)) if j != k], size=min(args.q, len(nodes) - 1),
                                 replace=False).tolist()) for k in range(len(nodes))]
    out: dict[str, dict[str, float]] = {}

    def record(name: str, key: str, value: float) -> None:
        out.setdefault(name, {})[key] = value

    groups = stage2_groups(configs, no_pruning)
    for k, node in enumerate(nodes):
        card = ModelCard(spec=node.spec, class_names=node.class_names,
                         input_shape=list(node.data.train.images.shape[1:]), producer=node.name, round=0)
        received = [Received(nodes[j].name, nodes[j].pretrained, card) for j in senders[k]]
        sel = sel_sets[k]
        for (use_pruning, *_), names in groups.items():
            first = configs[names[0]].replace(seed=seed)
            state = NodeState.from_pretrained(node.name, node.pretrained, node.spec, node.class_names, node.data)
            aligned = align_candidates(state, received, 1, first.replace(align_fallback="none"), use_pruning,
                                       RoundReport(node.name, 1, "fol"))
            for name in names:
                cfg = configs[name].replace(seed=seed)
                candidates = (apply_align_fallback(aligned, received, node.data) if cfg.align_fallback == "received"
                              else copy.copy(aligned))  # the fallback on the same alignment
                ens, student = ensemble_and_distill(state, candidates, 1, cfg, RoundReport(node.name, 1, "fol"))
                for key, value in _scores(node, sel, student, ens).items():
                    record(name, key, value)
        print(f"  {task} seed {seed} node {k + 1}/{len(nodes)} done", flush=True)
        yield out
        out = {}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=comma_names(("hurricane", "wildfire"), unique=True),
                    default="hurricane,wildfire")
    ap.add_argument("--nodes", type=int_in(2, why="a swarm"), default=12)
    ap.add_argument("--per-node", type=int, default=300, help="images per node (--swarm equal)")
    ap.add_argument("--swarm", choices=("equal", "protocol"), default="equal",
                    help="equal: --nodes x --per-node images; protocol: the protocol's swarm, --pool images over "
                         "--nodes nodes of varying size")
    ap.add_argument("--pool", type=int, default=7200, help="images partitioned over the swarm (--swarm protocol; 0 = all the protocol generates)")
    ap.add_argument("--psi", type=positive_float("a Dirichlet concentration"), default=0.5)
    ap.add_argument("--seeds", type=int_in(1), default=2)
    ap.add_argument("--first-seed", type=user_seed, default=0,
                    help="seeds first-seed .. first-seed + seeds - 1 (fresh seeds for a confirmatory run)")
    ap.add_argument("--q", type=int_in(1), default=5)
    ap.add_argument("--k", type=int_in(1), default=None,
                    help="K for every config (default: each config's own; an option may set top_k)")
    ap.add_argument("--rounds", type=int_in(1), default=1,
                    help="E: > 1 runs every config's E rounds over the whole swarm and scores round E")
    ap.add_argument("--arch", default=DEFAULT_ARCH, choices=architectures(),
                    help="model of every node (default: the project default, %(default)s)")
    ap.add_argument("--select-fraction", type=fraction("a share of each node's images"), default=0.15)
    ap.add_argument("--min-gain", type=float, default=0.5, help="points over the paper value an option must gain")
    ap.add_argument("--json", default=None, help="also write every per-node figure to this file")
    ap.add_argument("--stage2", action=argparse.BooleanOptionalAction, default=True,
                    help="also compare fine-tune strength (one more alignment run per option)")
    ap.add_argument("--synth", action=argparse.BooleanOptionalAction, default=True,
                    help="also compare teacher-synthesized distillation inputs (DENSE's loop; the slowest option)")
    ap.add_argument("--more", action=argparse.BooleanOptionalAction, default=True,
                    help="also compare cutmix, no revert rule and temperatures 1 and 6")
    ap.add_argument("--defaults-only", action="store_true",
                    help="compare only the paper preset and the current default (e.g. the rule's picks together)")
    ap.add_argument("--option", action="append", default=None, metavar="FIELD=VALUE",
                    help="compare only these options (repeatable; the value is read as JSON, else as a string; "
                         "FIELD=VALUE,FIELD=VALUE is one option of several changes)")
    ap.add_argument("--base", choices=("paper", "default"), default="paper",
                    help="the configuration the options change one at a time, and the rule compares against")
    ap.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                    help="print the table of runs saved with --json (e.g. one process per task or seed) and exit")
    args = ap.parse_args(argv)

    if args.merge:  # the runs' own settings (and option set) win over this command line's
        saved_runs = []
        for path in args.merge:
            try:
                saved = json.loads(Path(path).read_text())
            except (OSError, UnicodeDecodeError, ValueError) as exc:
                return fail(f"--merge {path}: cannot read it as JSON ({exc.__class__.__name__}: {exc})")
            if not (isinstance(saved, dict) and isinstance(saved.get("args"), dict)
                    and isinstance(saved.get("done"), list) and all(isinstance(d, str) for d in saved["done"])
                    and isinstance(saved.get("results"), dict)):
                return fail(f"--merge {path}: expected a --json file of this script (an object with 'args', 'done' and "
                            f"'results')")
            saved_runs.append(saved)
        # A key a saved run lacks predates its option: the run had it off (False),
        # or, for --base, compared against the paper preset.
        missing = {"base": "paper", "rounds": 1, "swarm": "equal", "pool": 7200}
        for key in ("nodes", "per_node", "psi", "q", "k", "arch", "select_fraction", "synth", "more", "stage2",
                    "defaults_only", "option", "base", "rounds", "swarm", "pool"):
            values = {json.dumps(saved["args"].get(key, missing.get(key, False))) for saved in saved_runs}
            if len(values) > 1:
                return fail(f"--merge: the runs differ in {key} ({', '.join(sorted(values))}); merge runs of one "
                            "setting")
            setattr(args, key, saved_runs[0]["args"].get(key, missing.get(key, False)))
        covered: dict[str, str] = {}
        for path, saved in zip(args.merge, saved_runs):
            # a (task, seed) in two runs would count its node runs twice (the means and the Wilcoxon test)
            for swarm in dict.fromkeys(d.split(" nodes ")[0] for d in saved["done"]):
                if swarm in covered:
                    return fail(f"--merge {path}: {swarm} is also in {covered[swarm]}; merge runs of different tasks or "
                                f"seeds (each node run once)")
                covered[swarm] = path
    options = [o for o in STAGE34_OPTIONS if args.synth or o[0] != "distill_inputs" or "synth" not in o[1]]
    options += (MORE_OPTIONS if args.more else []) + (STAGE2_OPTIONS if args.stage2 else [])
    if args.option:
        try:
            options = [_parse_option(text) for text in args.option]
        except ValueError as exc:
            return fail(f"--option: {exc}")
    if any("rounds" in _changes(field, value) for field, value in options):
        return fail("--option: E is the same for every option; set it with --rounds")
    if any("max_neighbours" in _changes(field, value) for field, value in options):
        return fail("--option: Q is the same for every option (the neighbours are drawn once); set it with --q")
    if args.defaults_only:
        options = []
    if args.swarm == "protocol":
        try:
            protocol_config(args.tasks.split(",")[0], args.first_seed, args)
        except ConfigError as exc:
            return fail(f"--swarm protocol: {exc}")
    try:
        configs = build_configs(args, options)
        no_pruning = without_pruning(options)
    except (ConfigError, TypeError) as exc:
        return fail(f"--option: {exc}")
    results: dict[str, dict[str, list[float]]] = {name: {} for name in configs}
    if args.merge:
        done = []
        for saved in saved_runs:
            done += saved["done"]
            for name in configs:
                for key, values in saved["results"][name].items():
                    results[name].setdefault(key, []).extend(values)
        print_table(results, configs, options, args, done)
        return 0
    # the swarm's settings, before any training: each bad value one line (they were tracebacks from the
    # partition or the split; each value alone is checked by its type= as it is read)
    smallest = args.per_node if args.swarm == "equal" else ProtocolConfig.min_samples
    bad = next((f"{flag}: expected {want}, got {value}" for flag, value, ok, want in (
        # the smallest node (--per-node, or the protocol's min_samples) keeps the split's minimum beside its slice
        ("--per-node / --select-fraction", f"{smallest} images and {args.select_fraction}",
         smallest - round(args.select_fraction * smallest) >= DEFAULT_MIN_SAMPLES,
         f"the smallest node to keep >= {DEFAULT_MIN_SAMPLES} images besides its selection slice (the 70/15/15 "
         "split's minimum)"),
    ) if not ok), None)
    if bad:
        return fail(bad)
    seeds = seed_range(ap, args.first_seed, args.seeds, "--first-seed / --seeds")
    if args.swarm == "equal":  # the pool swarm() draws whole (--swarm protocol: its --pool, checked above)
        pool_fits(ap, args.nodes * args.per_node * 2, 32, "--nodes x --per-node x 2 synthetic images")
    if unwritable_output(args.json):  # before the training, not after
        return 2
    torch.set_num_threads(1)
    print(machine_line())
    t0 = time.perf_counter()
    picks: dict[str, Any] = {}
    done = []
    for seed in seeds:  # both tasks of a seed first: a cut-short run still covers both
        for task in args.tasks.split(","):
            for k, one in enumerate(run_swarm(task, seed, args, configs, no_pruning)):
                for name, row in one.items():
                    for key, value in row.items():
                        results[name].setdefault(key, []).append(value)
                if args.json:  # after every node, so a run cut short keeps its first nodes (in index order)
                    atomic_write_text(Path(args.json), json.dumps({"args": vars(args), "done": done + [
                        f"{task} seed {seed} nodes 0-{k}"], "results": results, "picks": picks}, indent=1))
            done.append(f"{task} seed {seed}")
            print(f"\n{task} seed {seed} done at {time.perf_counter() - t0:.0f} s", flush=True)
            picks = print_table(results, configs, options, args, done)
    print(f"total {time.perf_counter() - t0:.0f} s")
    return 0


def paired_line(values: list[float], base: list[float]) -> str:
    """``values`` against ``base`` on the same node runs: the mean difference
    in points, the runs above / below, and the two-sided Wilcoxon
    signed-rank p over the runs that differ ('-' when none does); the
    protocol's own :func:`~fol.reproduce.paired_difference`, every node run
    taken as one node of one seed.

    >>> paired_line([0.9, 0.8, 0.7, 0.6], [0.8, 0.8, 0.6, 0.6])
    '+5.00 points, 2 above / 0 below of 4 runs, p = 0.5'
    """
    r = paired_difference({0: values}, {0: base})
    p = "-" if r.p is None else f"{r.p:.2g}"
    return f"{r.diff[0]:+.2f} points, {r.above} above / {r.below} below of {r.pairs} runs, p = {p}"


def print_table(results: dict[str, dict[str, list[float]]], configs: dict[str, FOLConfig],
                options: list[tuple[str, Any]], args: argparse.Namespace, done: list[str]) -> dict[str, Any]:
    """Print the ablation table of what is done so far; return the rule's picks."""

    def mean(name: str, key: str) -> float:
        return 100 * statistics.mean(results[name][key])

    k_text = "each config's own" if args.k is None else args.k
    swarm = (f"{args.nodes} nodes of varying size from {args.pool or SYNTHETIC_POOL_ALL} images (the protocol's swarm)"
             if args.swarm == "protocol" else f"{args.nodes} nodes x {args.per_node} images")
    print(f"\nsynthetic {', '.join(done)}: {swarm}, psi = {args.psi}, "
          f"Q = {args.q}, K = {k_text}, E = {args.rounds}, {args.arch}; selection slice {args.select_fraction:.0%} of each "
          f"shard; accuracy in %, mean over swarms x nodes ({len(results['paper']['fol_sel'])} node runs); transfer = "
          f"(fol - local) / (fol-a - local) of the means, '-' when fol-a gains < 0.5 points")
    base_row = "paper" if args.base == "paper" else "default (current)"
    header = (f"{'option (vs ' + base_row + ')':<30} {'sel fol':>8} {'sel fol-a':>9} {'sel local':>9} {'transfer':>8} | "
              f"{'test fol':>8} {'test fol-a':>10} {'test local':>10} {'transfer':>8}")
    print(header)
    print("-" * len(header))
    fmt = lambda v: "-" if v is None else f"{100 * v:.0f} %"  # noqa: E731
    for name in configs:
        sel_t = swarm_transfer(results[name]["local_sel"], results[name]["fol_sel"], results[name]["fola_sel"])["of_means"]
        test_t = swarm_transfer(results[name]["local_test"], results[name]["fol_test"], results[name]["fola_test"])["of_means"]
        print(f"{name:<30} {mean(name, 'fol_sel'):>8.2f} {mean(name, 'fola_sel'):>9.2f} {mean(name, 'local_sel'):>9.2f} "
              f"{fmt(sel_t):>8} | {mean(name, 'fol_test'):>8.2f} {mean(name, 'fola_test'):>10.2f} "
              f"{mean(name, 'local_test'):>10.2f} {fmt(test_t):>8}")

    print(f"the student against {base_row}, node run by node run on the selection slice (Wilcoxon signed-rank "
          f"over the runs that differ; reported beside the rule, which reads the means only):")
    for name in configs:
        if name != base_row:
            print(f"  {name:<28} {paired_line(results[name]['fol_sel'], results[base_row]['fol_sel'])}")

    # The pre-stated rule: per field, the best value on the selection slice if it gains >= min_gain.
    base = mean(base_row, "fol_sel")
    picks: dict[str, Any] = {}
    for field in dict.fromkeys(f for f, _ in options):
        best = max(((v, mean(_option_name(f, v), "fol_sel")) for f, v in options if f == field),
                   key=lambda t: t[1])
        if best[1] - base >= args.min_gain:
            picks[field] = best[0]
    print(f"picked by the rule (student's selection-slice accuracy, >= {args.min_gain} points over "
          f"{base_row} {base:.2f}): {picks or 'nothing'}", flush=True)
    return picks


if __name__ == "__main__":
    raise SystemExit(main())
