"""The swarm simulation: scenario -> contacts -> data -> pretrain -> rounds -> report.

For each seed:

1. **Contacts**: trajectories and windows of the scenario (:mod:`contact_sim`),
   or an imported ION or HDTN contact plan (``[contacts] plan_file``), ``contacts.csv``;
   ground stations relay but hold no data and learn nothing.
2. **Data**: the dataset pool is partitioned over the learning nodes
   (``orbit``-driven, Dirichlet label skew, or by region), each shard split
   70/15/15.
3. **Pretrain** every node (through the executor; checkpointed in the safe
   model format so ``--resume`` skips finished nodes).
4. **Rounds**: in FOL round ``e`` a neighbour's model reaches a node only if a
   window of plan round ``e - 1`` can carry it after the acquisition overhead;
   the transfer is recorded in the plan and its bytes counted. At most Q
   deliveries per node, earliest-finishing first; none when no FOL variant
   runs (only they exchange models peer to peer). Server-based baselines get
   every plan round; a node takes part in a round when a window of that round
   can carry its model up and the aggregate back (to a ground station when the
   scenario has any).
5. **Methods**: each selected method runs on the same nodes; results are saved
   per (seed, method) so ``--resume`` skips what is done.

This subpackage is the one place where the contact side (:mod:`orbits`,
:mod:`contact_sim`) and the learning side (:mod:`fol`) meet.
"""

from __future__ import annotations

import collections
import copy
import logging
import os
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from contact_sim.energy import Battery
from contact_sim.errors import ContactError
from contact_sim.plan import ContactPlan
from contact_sim.scenario import (build_batteries, build_constellation, build_trajectories, load_plan_file,
                                  plan_from_trajectories)
from swarmbase.tomlcheck import brief, shown
from fol.simulation.check import (INPUTS_FILE, RAY_ADDRESS_FIELD, STATE_DIR, check_acquisition_span,
                                  check_pretrained_card, check_scenario, input_digests, pretrained_path, read_run_json,
                                  refused_pretrained, real_number, results_path as _results_path, saved_results,
                                  seed_dir as _seed_dir)
from fol.simulation.partition import orbit_assignment
from fol.simulation.result import SimulationResult
from fol.simulation.scenario import SwarmScenario, errors_name_the_file, json_default
from fol.checkpoint import ModelCard, load_model, model_to_bytes, save_model
from fol.data import GeoDataset, assignment_partition, dirichlet_partition, load_dataset, region_partition
from fol.errors import ConfigError, DataError
from fol.executors import Executor, make_executor
from fol.threads import torch_threads
from fol.fileio import atomic_write_bytes, atomic_write_text, remove_temporaries, write_json_atomic
from fol.methods import NodeSetup, SwarmContext, get_method
from fol.methods.fol_method import payload_card
from fol.models import ModelSpec
from fol.nodedata import SPLIT_RULE, SPLIT_SEED_KEY
from fol.nodes import PretrainTask, build_nodes
from fol.variants import VARIANTS

__all__ = ["run_simulation", "SimulationResult", "plan_deliveries"]

log = logging.getLogger(__name__)

#: In STATE_DIR: the run's wall time so far, over the sessions of a resumed run ({"seconds": ...}).
WALL_FILE = "wall_seconds.json"


# --------------------------------------------------------------------------- helpers


def _write_json(path: Path, data: Any, sort_keys: bool = True) -> None:
    write_json_atomic(path, data, allow_nan=True, default=json_default, sort_keys=sort_keys)


def _load_pool(scn: SwarmScenario, seed: int) -> GeoDataset:
    return load_dataset(scn.data.dataset, root=scn.data.root, **scn.data.loader_options(seed))


def _partition(scn: SwarmScenario, pool: GeoDataset, names: list[str], seed: int) -> list[np.ndarray]:
    d, n = scn.data, len(names)
    if d.partition != "dirichlet":
        missing = int((~np.isfinite(np.asarray(pool.lat, dtype=np.float64) + np.asarray(pool.lon, dtype=np.float64))).sum())
        if missing:
            raise DataError(f"{brief(scn.source)}: data.partition: {d.partition!r} places images by their coordinates, but "
                            f"{missing} of the {len(pool)} images of the {d.dataset} pool have none; "
                            f"use partition = 'dirichlet'" + (", or data.coords" if d.dataset == "imagefolder" else ""))
    try:
        if d.partition == "dirichlet":
            return dirichlet_partition(pool.labels.numpy(), n, d.psi, seed, min_samples=d.min_samples,
                                       samples_per_node=d.per_node)
        if d.partition == "region":
            shards = region_partition(pool.lat, pool.lon, n, seed, min_samples=d.min_samples)
    except DataError as exc:  # say it in the scenario's terms: which pool, which fields
        asked, remedy = ((f"data.per_node = {d.per_node} images each at data.psi = {d.psi}",
                          "lower data.per_node, use fewer nodes or a larger pool") if d.partition == "dirichlet" else
                         (f"data.min_samples = {d.min_samples} images each", "lower data.min_samples or use fewer nodes"))
        raise DataError(f"{brief(scn.source)}: data: the {d.dataset} pool of {len(pool)} images cannot give {n} nodes "
                        f"{asked} ({exc}); {remedy}") from None
    if d.partition == "orbit":
        constellation = build_constellation(scn.contact)
        index = {name: i for i, name in enumerate(constellation.names)}
        check_acquisition_span(scn, constellation)  # swaths sweep from time.start for acquisition_s: inside an OEM
        owner_sat = orbit_assignment(pool.lat, pool.lon, constellation, scn.contact.time.start,
                                     d.acquisition_s or scn.contact.time.duration_s, d.swath_km, rule=d.assign,
                                     seed=seed)
        sat_to_node = np.full(len(constellation.names), -1, dtype=np.int64)
        for k, name in enumerate(names):
            sat_to_node[index[name]] = k
        owner = np.where(owner_sat >= 0, sat_to_node[np.maximum(owner_sat, 0)], -1)
        shards = assignment_partition(owner, n)
    if d.per_node is not None:  # seeded subsample down to per_node
        rng = np.random.default_rng([seed, 7])
        shards = [np.sort(rng.choice(s, d.per_node, replace=False)) if len(s) > d.per_node else s for s in shards]
    for name, s in zip(names, shards):
        if len(s) < d.min_samples:
            remedy = ("enlarge data.acquisition_s or data.swath_km" if d.partition == "orbit" else "use fewer nodes")
            if d.dataset.startswith("synthetic-"):
                remedy += ", or data.size"
            raise DataError(
                f"{brief(scn.source)}: data: node {name} holds {len(s)} images, fewer than data.min_samples = "
                f"{d.min_samples} ({d.partition} partition); {remedy}, or lower data.min_samples"
            )
    return shards


def _earlier_wall_seconds(out: Path) -> float | None:
    """The wall time the interrupted sessions of a run recorded (up to their last saved
    result); None when they recorded none (a run made before it was kept) or it does not read."""
    try:
        seconds = read_run_json(out / STATE_DIR / WALL_FILE)["seconds"]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if not real_number(seconds) or not 0 <= seconds < float("inf"):  # 10**400, beyond any float: as unreadable
        return None
    return float(seconds)


def _pretrained_at(battery: Battery | None) -> float | None:
    """When the node paid for its pretraining (its model exists from then on), or ``None`` if it did not."""
    booked = [t for t, _, label in battery.spends if label == "pretraining"] if battery is not None else []
    return max(booked) if booked else None


def _energy_start(plan: ContactPlan, battery: Battery, src: int, dst: int, r: int, size: int,
                  joules: float, not_before_s: float | None = None) -> tuple[float, float, int] | None:
    """``(start, finish, window index)`` of the earliest-finishing transfer, from ``not_before_s``
    on, that the sender's battery can pay for when it starts: on each window that can carry it,
    from the first moment the battery allows (if the transfer still ends inside the window); ties
    to the earlier window."""
    best = None
    for idx, start, end in plan.transfer_windows(src, dst, r, size, not_before_s):
        t_ok = battery.earliest(start, joules, end)
        if t_ok is None:
            continue
        got = plan.earliest_transfer(src, dst, r, size, t_ok, window=idx)  # None: no longer fits
        if got is not None and battery.can_spend(got[0], joules) and (best is None or got[1] < best[1]):
            best = (got[0], got[1], idx)
    return best


def fol_payload_sizes(nodes: Sequence[NodeSetup], rounds: int) -> list[list[int]]:
    """``sizes[r][j]``: the bytes of node ``j``'s FOL payload in exchange ``r``,
    the model with its :func:`~fol.methods.fol_method.payload_card`. The student
    keeps its architecture, so only the card's round changes the size, and only
    with its number of digits: one serialization per node and digit count."""
    by_digits: dict[int, list[int]] = {}
    out = []
    for r in range(rounds):
        digits = len(str(r))
        if digits not in by_digits:
            by_digits[digits] = [len(model_to_bytes(n.pretrained, payload_card(n, r))) for n in nodes]
        out.append(by_digits[digits])
    return out


def plan_deliveries(plan: ContactPlan, learners: list[int], sizes: Sequence[int] | Sequence[Sequence[int]],
                    rounds: int, q: int, batteries: dict[int, Battery] | None = None,
                    waits: list[dict[str, Any]] | None = None) -> list[dict[int, list[int]]]:
    """For each round, which learners deliver their model to which learner.

    ``sizes`` holds each learner's payload bytes, the same in every round, or one
    such list per round (``sizes[r][j]``, as :func:`fol_payload_sizes` gives).
    A sender ``j`` reaches ``k`` in round ``r`` when a window of the pair in that
    round can carry its payload's bytes; the at most ``q`` earliest-finishing
    deliveries are recorded in ``plan`` (so a window's capacity is shared by
    the transfers it carries) and returned as learner indices.

    With ``batteries`` (plan node -> :class:`~contact_sim.energy.Battery`), a
    sender pays ``size x j_per_byte`` joules when its transfer starts, and the
    transfer starts only once the battery holds that much and not before the
    sender's pretraining was paid for (booked as ``"pretraining"``: its model
    exists from then on); a transfer that had to wait is appended to ``waits``
    (no battery charge in the round: no transfer).
    The ``q`` senders are still ranked by their finish without the battery: a
    delayed one keeps its place even when it then ends after one left out;
    only a sender that cannot pay within the round gives its place to the next.
    """
    pos = {plan_idx: k for k, plan_idx in enumerate(learners)}
    per_round_sizes = sizes and np.ndim(sizes[0]) == 1
    by_round = [list(s) for s in sizes] if per_round_sizes else [list(sizes)] * rounds
    if len(by_round) < rounds:
        raise ValueError(f"plan_deliveries: sizes for {len(by_round)} round(s), {rounds} needed")
    # when each learner's pretraining was paid for: no model to send before it (bookings made here are sends)
    pretrained_s = [_pretrained_at((batteries or {}).get(node)) for node in learners]
    out: list[dict[int, list[int]]] = []
    for r in range(rounds):
        sizes = by_round[r]  # this round's payload bytes per learner
        per_round: dict[int, list[int]] = {}
        for k, dst in enumerate(learners):
            # Candidates per payload size with the time their transfer would end; across
            # sizes (heterogeneous swarms) and window rates, earliest finish first, then learner index.
            finish: dict[int, float] = {}
            for size in sorted(set(sizes)):
                for nb, t_end in plan.arrivals(dst, r, size):
                    j = pos.get(nb)
                    if j is not None and sizes[j] == size and j not in finish:
                        finish[j] = t_end
            scheduled: list[int] = []
            for j in sorted(finish, key=lambda j: (finish[j], j)):
                if len(scheduled) >= q:
                    break
                battery = (batteries or {}).get(learners[j])
                joules = sizes[j] * battery.model.j_per_byte if battery is not None else 0.0
                ready = pretrained_s[j]
                if joules > 0 or ready is not None:
                    free = plan.earliest_transfer(learners[j], dst, r, sizes[j])
                    paid = _energy_start(plan, battery, learners[j], dst, r, sizes[j], joules, ready)
                    if free is None or paid is None:
                        if free is not None and waits is not None:
                            waits.append({"src": plan.node_names[learners[j]], "dst": plan.node_names[dst], "round": r,
                                          "wanted_start_s": free[0], "start_s": None, "joules": joules})
                        continue
                    tr = plan.schedule(learners[j], dst, r, sizes[j], not_before_s=paid[0], window=paid[2])
                    if joules > 0:
                        battery.spend(tr.t_start_s, joules,
                                      f"send {plan.node_names[learners[j]]}->{plan.node_names[dst]}")
                    if tr.t_start_s > free[0] + 1e-6 and waits is not None:
                        waits.append({"src": plan.node_names[learners[j]], "dst": plan.node_names[dst], "round": r,
                                      "wanted_start_s": free[0], "start_s": tr.t_start_s, "joules": joules,
                                      "sunlit_at_wanted": battery.sunlit(free[0])})
                    scheduled.append(j)
                    continue
                try:
                    plan.schedule(learners[j], dst, r, sizes[j])
                except ContactError:  # capacity taken by a transfer scheduled before it
                    continue
                scheduled.append(j)
            per_round[k] = scheduled
        out.append(per_round)
    return out


def _participants(plan: ContactPlan, learners: list[int], sizes: list[int], rounds: int) -> list[list[int]]:
    """Learners that can move their model up and the aggregate down within each
    round: through a ground station when the scenario has any (the server sits
    on the ground), else through any contact (a server reachable via a
    neighbour). Each direction needs a window able to carry two models; a
    one-way window (an imported DTN plan's) counts only for its direction."""
    stations = {i for i, kind in enumerate(plan.node_kinds) if kind == "ground_station"}
    one_way = bool(plan.windows.one_way.any())  # else every window carries both ways: one query suffices

    def reachable(node: int, r: int, size: int) -> bool:
        peers = [nb for nb, _ in plan.deliverable(node, r, 2 * size)]  # the aggregate down to node
        if stations:
            peers = [nb for nb in peers if nb in stations]
        # ... and the model up from node: a one-way window carries only one of the two
        return any(node in (k for k, _ in plan.deliverable(nb, r, 2 * size)) for nb in peers) if one_way \
            else bool(peers)

    return [[k for k, node in enumerate(learners) if reachable(node, r, sizes[k])] for r in range(rounds)]


class ZmqTransport:
    """FOL's peer-to-peer payloads over the node agent's CURVE links on
    127.0.0.1 (one authenticated, encrypted, chunked and verified transfer per
    delivery), instead of in memory. The links know the nodes as ``node-<index>``:
    the agent's node ids are letters, digits, '.', '_' and '-', which satellite names are not."""

    def __init__(self, workdir: Path, names: Sequence[str]) -> None:
        from fol.agent.loopback import LoopbackLinks

        self.outbox = workdir / "outbox"
        self.outbox.mkdir(parents=True, exist_ok=True)
        self.ids = {name: f"node-{k}" for k, name in enumerate(names)}
        self.links = LoopbackLinks(workdir, list(self.ids.values()))

    def __call__(self, src: str, dst: str, payload: bytes, round_: int) -> bytes:
        path = self.outbox / f"{self.ids[src]}-round-{round_}.safetensors"
        if not path.exists() or path.read_bytes() != payload:
            atomic_write_bytes(path, payload)
        return self.links.send(self.ids[src], self.ids[dst], path).read_bytes()

    def close(self) -> None:
        self.links.close()


# --------------------------------------------------------------------------- energy


def _book_pretraining(scn: SwarmScenario, plan: ContactPlan, batteries: dict[int, Battery], learners: list[int],
                      nodes: Sequence[NodeSetup]) -> None:
    """Each node pays for its pretraining (FLOPs x J/FLOP) as soon as its battery can, from the start."""
    for node_idx, node in zip(learners, nodes):
        battery = batteries.get(node_idx)
        joules = node.pretrain_flops * scn.contact.energy.j_per_flop
        if battery is None or joules <= 0:
            continue
        t = battery.earliest(0.0, joules, plan.round_boundaries_s[-1])
        if t is None:
            raise ContactError(f"energy: pretraining {node.name} needs {joules:.3g} J, more than its battery can "
                               f"supply within the scenario (energy.battery_wh, energy.solar_w)")
        battery.spend(t, joules, "pretraining")


def _energy_summary(scn: SwarmScenario, plan: ContactPlan, batteries: dict[int, Battery], learners: list[int],
                    waits: list[dict[str, Any]]) -> dict[str, Any]:
    """Per node: eclipse share, battery at the end, joules spent by pretraining and transfers; the waits."""
    horizon = float(plan.round_boundaries_s[-1])
    sent = collections.Counter(t.src for t in plan.transfers)  # also the free ones (j_per_byte = 0)
    nodes = []
    for node_idx in learners:
        b = batteries.get(node_idx)
        if b is None:
            continue
        shadow = sum(min(e, horizon) - max(s, 0.0) for s, e in b.eclipses if e > 0 and s < horizon)
        nodes.append({
            "node": plan.node_names[node_idx], "eclipse_fraction": shadow / horizon if horizon > 0 else 0.0,
            "battery_start_wh": b.model.initial_charge * b.model.battery_wh,
            "battery_end_wh": b.level_at(horizon) / 3600.0,
            "pretraining_j": sum(j for _, j, label in b.spends if label == "pretraining"),
            "transfer_j": sum(j for _, j, label in b.spends if label.startswith("send")),
            "transfers": sent[node_idx],
        })
    return {"model": asdict(scn.contact.energy), "nodes": nodes, "waits": waits}


# --------------------------------------------------------------------------- pretraining with checkpoints


def _spec_text(spec: ModelSpec) -> str:
    """A model spec in a message: ``cnn-small, 2 classes, 3x32 px``, with its options."""
    options = "".join(f", {k}={shown(v)}" for k, v in sorted(spec.options.items()))
    return f"{spec.arch}, {spec.num_classes} classes, {spec.in_channels}x{spec.input_size} px{options}"


def _resumed_pretraining(path: Path, spec: ModelSpec, name: str, seed: int) -> tuple[dict[str, Any], int]:
    """The state dict and pretraining FLOPs of node ``name``'s checkpoint ``path``
    (written by :func:`_pretrained_nodes` of an earlier run of this scenario);
    :class:`ConfigError` naming the file if it is another model's."""
    with refused_pretrained(path, name):
        loaded = load_model(path)
    card = loaded.card
    if card.spec != spec:
        raise ConfigError(f"--resume: {brief(path)}: a {shown(card.spec.arch)} checkpoint where the scenario gives node "
                          f"{name!r} {spec.arch!r} ({_spec_text(card.spec)} against {_spec_text(spec)}); move the "
                          f"file away to pretrain {name!r} again")
    return loaded.model.state_dict(), check_pretrained_card(path, card, name, seed)


def _node_specs(pool: GeoDataset, archs: Sequence[str]) -> list[ModelSpec]:
    """Each node's model: its architecture on the pool's classes and image shape."""
    c, h, _ = pool.images.shape[1:]
    return [ModelSpec(a, len(pool.class_names), c, h) for a in archs]


def _check_saved_models(scn: SwarmScenario, out: Path, pool: GeoDataset, names: list[str], archs: list[str]) -> None:
    """``--resume``: every pretrained model the interrupted run saved, read as the run will read it
    (against the model the pool's classes and image shape give each node), before anything in
    ``out`` is written (:class:`ConfigError` naming the first bad file)."""
    specs = _node_specs(pool, archs)
    for seed in scn.seeds:
        seed_dir = _seed_dir(out, seed)
        for name, spec in zip(names, specs):
            if pretrained_path(seed_dir, name).exists():
                _resumed_pretraining(pretrained_path(seed_dir, name), spec, name, seed)


def _pretrained_nodes(scn: SwarmScenario, pool: GeoDataset, shards: list[np.ndarray], names: list[str],
                      archs: list[str], seed: int, seed_dir: Path, executor: Executor) -> list[NodeSetup]:
    """Pretrain every node, reusing models checkpointed by an earlier run."""
    c, h, _ = pool.images.shape[1:]
    specs = _node_specs(pool, archs)
    # build_nodes does the split and pretraining; reuse it with a map that skips checkpointed nodes.
    saved: dict[int, Path] = {k: pretrained_path(seed_dir, names[k]) for k in range(len(names))}

    def checkpoint(task: PretrainTask, result: tuple[dict[str, Any], int]) -> None:
        """Save one node's pretrained model as soon as it finishes (a kill keeps it)."""
        from fol.models import build_model

        state_dict, flops = result
        model = build_model(task.spec)
        model.load_state_dict(state_dict)
        card = ModelCard(spec=task.spec, class_names=list(pool.class_names), input_shape=[c, h, h],
                         producer=task.name, round=0,
                         extra={"pretrain_flops": int(flops), "seed": seed, SPLIT_SEED_KEY: SPLIT_RULE})
        save_model(saved[task.index], model, card)

    def resumable_map(fn: Any, tasks: Sequence[PretrainTask]) -> list[Any]:
        todo = [t for t in tasks if not saved[t.index].exists()]
        results = executor.map(fn, todo, desc="pretraining",
                               on_result=lambda i, r: checkpoint(todo[i], r)) if todo else []
        done = {t.index: r for t, r in zip(todo, results)}
        out = []
        for t in tasks:
            if t.index in done:
                out.append(done[t.index])
            else:
                out.append(_resumed_pretraining(saved[t.index], t.spec, t.name, seed))
        return out

    return build_nodes(pool, shards, specs, scn.fol.pretrain_train(), seed, names=names, map=resumable_map)


# --------------------------------------------------------------------------- main entry


def run_simulation(
    scn: SwarmScenario,
    out: Path,
    *,
    executor: Executor | None = None,
    resume: bool = False,
    progress: bool = True,
) -> SimulationResult:
    """Run the scenario for every seed and write the output folder (see module doc)."""
    from tqdm.auto import tqdm

    t_start = time.perf_counter()
    out = Path(out)
    # seconds, before any long work; with resume, the saved results too (check_saved_results): a refusal changes nothing
    report = check_scenario(scn, out, resume=resume)
    # what --resume compares the files the record names with, taken now: the check read the satellites' and
    # drones' files, and the run flies that read (a file edited while the pool is read must not be recorded)
    inputs = input_digests(scn) if not resume or not (out / INPUTS_FILE).exists() else None
    # the first seed's pool, read and partitioned before the output folder is started or touched: a
    # pool that cannot give every node its images stops a new run without leaving a folder behind
    pool = _load_pool(scn, scn.seeds[0])
    first = (pool, _partition(scn, pool, report.nodes, scn.seeds[0]))
    if resume:
        _check_saved_models(scn, out, pool, report.nodes, report.archs)
    del pool
    resolved = scn.resolved()
    resolved_path = out / "scenario.resolved.json"
    earlier = _earlier_wall_seconds(out) if resume else 0.0

    def wall_seconds() -> float:
        """This session's wall time so far plus the recorded earlier sessions', saved in the run folder."""
        seconds = (earlier or 0.0) + time.perf_counter() - t_start
        _write_json(out / STATE_DIR / WALL_FILE, {"seconds": seconds})
        return seconds

    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"output folder {brief(out)}: cannot be created ({exc.strerror})") from None
    if resume:  # a kill mid-write left the crash-safe writer's temporary files (never read): removed, not kept forever
        for folder, _, _ in os.walk(out):
            remove_temporaries(folder)
    _write_json(resolved_path, resolved)
    if inputs is not None:
        _write_json(out / INPUTS_FILE, inputs)
    if scn.text is not None and not (out / "scenario.toml").exists():
        atomic_write_text(out / "scenario.toml", scn.text)

    # contacts first, in run.workers forked processes (at most one per core), before the
    # executor exists: forking a process that already runs Ray's threads is unsafe, so a
    # caller's Ray executor gets a serial search
    contact_workers = scn.run.workers or os.cpu_count() or 1
    if executor is not None and executor.kind == "ray":
        contact_workers = 1
    with errors_name_the_file(scn.source):  # a search past its memory budget says which scenario, as fol contacts
        if scn.contact.plan_file is not None:
            log.info("reading the contact plan %s", brief(scn.contact.plan_file))
            traj = None
            base_plan = load_plan_file(scn.contact)
        else:
            log.info("computing contact windows (%d processes)", contact_workers)
            traj = build_trajectories(scn.contact)
            base_plan = plan_from_trajectories(traj, scn.contact, workers=contact_workers)
    own_executor = executor is None
    if executor is None:
        executor = make_executor(scn.run.executor, workers=scn.run.workers, threads=scn.run.threads,
                                 ray_address=scn.run.ray_address, ray_address_field=RAY_ADDRESS_FIELD)
    transport: ZmqTransport | None = None  # a seed's, closed after its methods or, if one raises, below
    try:
        # The parent evaluates models and aggregates too: with the tasks' thread count its
        # float reductions do not depend on how many cores the machine has.
        with torch_threads(scn.run.threads):
            learners = [i for i, kind in enumerate(base_plan.node_kinds) if kind != "ground_station"]
            names = [base_plan.node_names[i] for i in learners]
            by_name = dict(zip(report.nodes, report.archs))
            archs = [by_name[n] for n in names]

            rows: list[dict[str, Any]] = []
            rounds_used: dict[str, int] = {}
            transfers: list[dict[str, Any]] = []
            rounds_by_seed: dict[int, dict[str, int]] = {}
            plan = base_plan
            energy: dict[str, Any] | None = None
            base_batteries = build_batteries(scn.contact, base_plan)  # {} unless [energy]; eclipses computed once
            for seed in tqdm(scn.seeds, desc="seeds", disable=None if progress else True):
                seed_dir = _seed_dir(out, seed)
                (seed_dir / "pretrained").mkdir(parents=True, exist_ok=True)
                (seed_dir / "results").mkdir(exist_ok=True)
                if first is not None and seed == scn.seeds[0] and names == report.nodes:
                    pool, shards = first
                else:
                    pool = _load_pool(scn, seed)
                    shards = _partition(scn, pool, names, seed)
                first = None
                nodes = _pretrained_nodes(scn, pool, shards, names, archs, seed, seed_dir, executor)
                wall_seconds()
                # every node holds copies of its shard; the pool (with the images no node
                # was given) would otherwise stay in the driver through all the rounds
                del pool, shards

                sizes = fol_payload_sizes(nodes, max(1, scn.fol.rounds))
                participants = _participants(base_plan, learners, sizes[0], base_plan.n_rounds)
                plan = base_plan.without_transfers()  # the windows shared, not copied: only transfers differ
                batteries = copy.deepcopy(base_batteries) if base_batteries else None
                waits: list[dict[str, Any]] = []
                if batteries:
                    _book_pretraining(scn, plan, batteries, learners, nodes)
                # only the FOL variants exchange models peer to peer: without one, no transfer happens
                # (none is booked, listed in transfers.json or charged to a battery)
                deliveries = (plan_deliveries(plan, learners, sizes, scn.fol.rounds, scn.fol.max_neighbours,
                                              batteries, waits) if any(m in VARIANTS for m in scn.methods)
                              else [{} for _ in range(scn.fol.rounds)])
                if batteries and seed == scn.seeds[0]:
                    energy = _energy_summary(scn, plan, batteries, learners, waits)
                transport = ZmqTransport(seed_dir / "links", names) if scn.run.transport == "zmq" else None
                ctx = SwarmContext(nodes=nodes, train=scn.fol.pretrain_train(), fol=scn.fol.replace(seed=seed),
                                   rounds=plan.n_rounds, participants=participants, deliveries=deliveries, seed=seed,
                                   map=executor.map, transport=transport)
                if seed == scn.seeds[0]:
                    plan.to_csv(out / "contacts.csv")
                # each node's split sizes, with every row: an accuracy is read against its test count
                sizes = {n.name: dict(zip(("n_train", "n_val", "n_test"), n.data.sizes())) for n in nodes}
                for name in tqdm(scn.methods, desc=f"methods (seed {seed})", leave=False, disable=None if progress else True):
                    path = _results_path(seed_dir, name)
                    if resume and path.exists():
                        results = saved_results(path, name, names)
                    else:
                        t0 = time.perf_counter()
                        method = get_method(name, **scn.method_options.get(name, {}))
                        results = method.run(ctx)
                        log.info("seed %d: %s done in %.1f s", seed, name, time.perf_counter() - t0)
                        # in the order of the method's own dicts: a resumed run's rows (and results.json) as an uncut run's
                        _write_json(path, [r.to_dict() for r in results], sort_keys=False)
                        wall_seconds()
                    used = max((r.rounds for r in results), default=0)
                    rounds_by_seed.setdefault(seed, {})[name] = used
                    rounds_used[name] = max(rounds_used.get(name, 0), used)  # over seeds
                    for r in results:
                        rows.append({"seed": seed, **r.to_dict(), **sizes.get(r.node, {})})
                if transport is not None:
                    transport.close()
                    transport = None
                transfers += [{"seed": seed, **t.__dict__} for t in plan.transfers]
            _write_json(out / "transfers.json", transfers)
            _write_json(out / "rounds_used.json", {str(s): r for s, r in rounds_by_seed.items()})
            if energy is not None:
                flops = {(r["method"], r["node"]): r["train_flops"] for r in rows if r["seed"] == scn.seeds[0]}
                for node in energy["nodes"]:
                    node["method_training_j"] = {m: f * scn.contact.energy.j_per_flop
                                                 for (m, n), f in flops.items() if n == node["node"]}
                _write_json(out / "energy.json", energy)
            result = SimulationResult(out, rows, plan, rounds_used, wall_seconds(), transfers, energy, earlier)
            from fol.simulation.report import write_report

            write_report(scn, result, traj)
            return result
    finally:
        if transport is not None:
            transport.close()
        if own_executor:
            executor.close()
