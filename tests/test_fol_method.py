"""FOL as a swarm method: deliveries, byte accounting, shared runs, isolated nodes."""

from __future__ import annotations

import pytest
import torch

from fol.checkpoint import ModelCard, load_model_bytes, model_to_bytes
from fol.config import FOLConfig
from fol.data import dirichlet_partition, make_synthetic
from fol.methods import SwarmContext, get_method, method_names
from fol.methods.base import serial_map
from fol.nodes import build_nodes
from fol.train import TrainConfig, evaluate

TINY = FOLConfig(finetune_epochs=1, post_finetune_epochs=1, gate_epochs=1, distill_epochs=2, top_k=2,
                 max_neighbours=2, pretrain_epochs=3)


@pytest.fixture(scope="module")
def nodes():
    pool = make_synthetic("hurricane", 1200, seed=1, image_size=16)
    shards = dirichlet_partition(pool.labels.numpy(), 4, 0.5, seed=1, samples_per_node=100)
    return build_nodes(pool, shards, ["cnn-small"], TrainConfig(epochs=3, lr=0.05), seed=1)


def _payload_size(node) -> int:
    card = ModelCard(spec=node.spec, class_names=node.class_names,
                     input_shape=list(node.data.train.images.shape[1:]), producer=node.name, round=0)
    return len(model_to_bytes(node.pretrained, card))


def test_fol_variants_are_registered() -> None:
    assert {"local", "fol", "fol-a", "fol-n", "fol-an"} <= set(method_names())


def test_contact_plan_deliveries_drive_bytes_and_isolated_node_keeps_local(nodes) -> None:
    # Round 0: node 0 hears from 1 and 2, node 1 from 0, node 2 from 0 and 3; node 3 hears nothing.
    deliveries = [{0: [1, 2], 1: [0], 2: [0, 3]}]
    ctx = SwarmContext(nodes=nodes, train=TrainConfig(epochs=1), fol=TINY, deliveries=deliveries, seed=0)
    fol = {r.node: r for r in get_method("fol").run(ctx)}
    fol_a = {r.node: r for r in get_method("fol-a").run(ctx)}
    local = {r.node: r for r in get_method("local").run(ctx)}
    assert len(ctx.cache) == 1  # fol and fol-a shared one pipeline run

    size = _payload_size(nodes[0])  # same architecture everywhere: same payload size
    sent = {0: 2, 1: 1, 2: 1, 3: 1}
    heard = {0: 2, 1: 1, 2: 2, 3: 0}
    for k, node in enumerate(nodes):
        r = fol[node.name]
        assert r.bytes_down == heard[k] * size
        assert r.bytes_up == sent[k] * size
        assert r.received_models == heard[k]
        assert fol_a[node.name].bytes_down == r.bytes_down
    isolated = nodes[3]
    assert fol[isolated.name].kept_local and fol_a[isolated.name].kept_local
    assert fol[isolated.name].test_accuracy == local[isolated.name].test_accuracy
    assert fol[isolated.name].train_flops == isolated.pretrain_flops
    assert fol[nodes[0].name].train_flops > nodes[0].pretrain_flops
    # The ensemble deployed by fol-a combines K = 2 members.
    assert all(len(w) == 2 for w in fol_a[nodes[0].name].extra["weights"])


def _weights(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_two_rounds_chain_students(nodes) -> None:
    """Round 2 starts from round 1: what a node sends in round 2 is the student it
    ended round 1 with (not its pretrained model again), carded as round 1."""
    students, arrived = [], []  # per round: each node's student after it; what each node received

    def recording_map(fn, items, desc=None):  # items: (node name, the node's task)
        assert [name for name, _ in items] == [node.name for node in nodes]
        arrived.append([[load_model_bytes(payload) for _, payload in t.payloads] for _, t in items])
        out = serial_map(fn, items)
        students.append([_weights(state.current_model) for state, _ in out])
        return out

    ctx = SwarmContext(nodes=nodes, train=TrainConfig(epochs=1), fol=TINY.replace(rounds=2, max_neighbours=1), seed=0,
                       map=recording_map)
    results = get_method("fol-n").run(ctx)
    assert all(r.rounds == 2 and r.received_models == 2 for r in results)
    run = ctx.cache[("fol-pipeline", False)]
    chained = 0
    for k in range(len(nodes)):
        [first], [second] = arrived[0][k], arrived[1][k]
        [i], [j] = ctx.senders_to(0, k, 1), ctx.senders_to(1, k, 1)
        assert _same(_weights(first.model), _weights(nodes[i].pretrained)) and first.card.round == 0
        assert _same(_weights(second.model), students[0][j]) and second.card.round == 1
        chained += not _same(students[0][j], _weights(nodes[j].pretrained))
    assert chained  # at least one round-1 student differs from its pretrained model: the check above can tell
    for state in run.states:
        assert [rep.round for rep in state.reports] == [1, 2]
        acc = evaluate(state.current_model, *state.data.test.tensors()).accuracy
        assert acc == pytest.approx([r for r in results if r.node == state.name][0].test_accuracy)


def test_each_exchange_point_is_the_shorter_run(nodes) -> None:
    """``extra["exchanges"][e - 1]`` of an E-round run is what an e-round run gives
    (compare_methods and the protocol read E = 1, 2 off one E = 3 run)."""
    deliveries = [{0: [1], 1: [2], 2: [3], 3: [0]}, {0: [2], 2: [0]}]  # round 2: nodes 1 and 3 hear nothing
    cfg = TINY.replace(max_neighbours=1)
    runs = {}
    for e in (1, 2):
        ctx = SwarmContext(nodes=nodes, train=TrainConfig(epochs=1), fol=cfg.replace(rounds=e), deliveries=deliveries,
                           seed=0)
        runs[e] = {m: get_method(m).run(ctx) for m in ("fol", "fol-a")}
    for m in ("fol", "fol-a"):
        for node, short, long in zip(nodes, runs[1][m], runs[2][m], strict=True):
            one, two = long.extra["exchanges"]
            assert (one["test_accuracy"], one["val_accuracy"]) == (short.test_accuracy, short.val_accuracy)
            assert (one["bytes_up"], one["bytes_down"]) == (short.bytes_up, short.bytes_down)
            assert one["train_flops"] == short.train_flops - node.pretrain_flops  # FOL's own training only
            assert two["train_flops"] == long.train_flops - node.pretrain_flops
            assert (two["test_accuracy"], two["bytes_up"], two["bytes_down"]) == (
                long.test_accuracy, long.bytes_up, long.bytes_down)
            assert two["kept_local"] == long.kept_local
    size = _payload_size(nodes[0])
    by_node = {r.node: r.extra["exchanges"] for r in runs[2]["fol"]}
    assert by_node[nodes[1].name][1]["bytes_down"] == by_node[nodes[1].name][0]["bytes_down"] == size
    assert by_node[nodes[0].name][1]["bytes_down"] == 2 * size


def test_keeping_earlier_rounds_models_costs_no_byte(nodes) -> None:
    """``keep_received = "all"`` over a swarm: the same bytes cross the links as
    with ``"round"`` (only the current student is ever sent), and in round 2
    every node ranks round 1's neighbour again beside round 2's."""
    cfg = TINY.replace(rounds=2, max_neighbours=1)
    out = {}
    for keep in ("round", "all"):
        ctx = SwarmContext(nodes=nodes, train=TrainConfig(epochs=1), fol=cfg.replace(keep_received=keep), seed=0)
        get_method("fol-n").run(ctx)
        out[keep] = ctx.cache[("fol-pipeline", False)]
    assert out["all"].bytes_down_by_round == out["round"].bytes_down_by_round
    assert out["all"].bytes_up_by_round == out["round"].bytes_up_by_round
    for k in range(len(nodes)):
        first, second = out["all"].reports[k]
        assert len(first.candidates) == 2 and len(second.candidates) == 3
        assert second.candidates[1]["name"] == f"{first.candidates[1]['name']} (round 1)"
        assert len(out["round"].reports[k][1].candidates) == 2
