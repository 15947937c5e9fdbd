"""The pooled references (``pooled``, ``pooled-ft``): one training on every
node's data, fine-tuned per node without ever ending below the pooled model on
the node's validation split, accounted as the raw images each node hands over."""

from __future__ import annotations

import math
import re
from dataclasses import replace

import pytest
import torch

from fol.config import FOLConfig
from fol.errors import ConfigError, TrainingError
from fol.methods import SwarmContext, get_method
from fol.methods.pooled import finetune_node, neighbourhood, pooled_state
from fol.models import build_model
from fol.train import TrainConfig, evaluate


@pytest.fixture(scope="module")
def ctx(tiny_swarm):
    nodes = tiny_swarm("hurricane", 11, psi=0.3)
    return SwarmContext(nodes=nodes, train=TrainConfig(epochs=3, patience=2, lr=0.05), seed=3)


def test_one_pooled_training_serves_both_rows(ctx) -> None:
    pooled = get_method("pooled").run(ctx)
    tuned = get_method("pooled-ft").run(ctx)
    assert len(ctx.cache) == 1  # trained once, shared through the context's cache
    state, _ = pooled_state(ctx)
    model = build_model(ctx.nodes[0].spec)
    model.load_state_dict(state)
    model.eval()
    for node, r, t in zip(ctx.nodes, pooled, tuned):
        assert r.test_accuracy == evaluate(model, *node.data.test.tensors()).accuracy
        # the fine-tune may stop after zero epochs, never below the pooled model on the node's own D_val
        assert t.val_accuracy >= r.val_accuracy
        if t.extra["kept_pooled"]:
            assert t.test_accuracy == r.test_accuracy


def test_the_pooled_model_trains_on_every_node(tiny_swarm) -> None:
    nodes = tiny_swarm("wildfire", 12, psi=0.5)
    ctx = SwarmContext(nodes=nodes, train=TrainConfig(epochs=2, patience=0), seed=0)
    _, seen = pooled_state(ctx)
    n = sum(len(nd.data.train) for nd in nodes)
    assert 2 * (n - 1) <= seen <= 2 * n  # every training image, each epoch (a lone trailing sample is dropped)


def test_upload_is_each_nodes_raw_images_and_flops_add_up(ctx) -> None:
    res = get_method("pooled").run(ctx)
    for node, r in zip(ctx.nodes, res):
        per_image = math.prod(node.data.train.images.shape[1:])
        assert r.bytes_up == (len(node.data.train) + len(node.data.val)) * per_image
        assert r.bytes_down == sum(p.numel() * p.element_size() for p in node.pretrained.state_dict().values())
    tuned = get_method("pooled-ft").run(ctx)
    assert all(t.train_flops > r.train_flops for t, r in zip(tuned, res))  # the fine-tune is charged on top


def test_a_fine_tune_that_cannot_move_keeps_the_pooled_model(ctx) -> None:
    state, _ = pooled_state(ctx)
    node = ctx.nodes[0]
    out, seen, kept = finetune_node((node.spec, state, node.data, replace(ctx.train, epochs=0)))
    assert kept and seen == 0 and out is state  # ties keep the pooled model


def test_mixed_architectures_are_refused(tiny_swarm) -> None:
    nodes = tiny_swarm("hurricane", 13, archs=("cnn-small", "cnn-medium"))
    # the reason given is pooled's own: it trains one model, it averages nothing
    with pytest.raises(ConfigError, match="'pooled' trains one model on every node's data and needs one architecture"):
        get_method("pooled").run(SwarmContext(nodes=nodes, train=TrainConfig(epochs=1)))
    with pytest.raises(ConfigError, match="'nbr-pooled-ft' trains each node's model on its neighbours' data and "
                                          "needs one architecture"):
        get_method("nbr-pooled-ft").run(SwarmContext(nodes=nodes, train=TrainConfig(epochs=1)))


# ---------------------------------------------------------------- nbr-pooled-ft: the room of one exchange


def _recording_map(record: list):
    """An executor's ``map`` that runs in this process and keeps every (item, result)."""
    def run(fn, items, desc=None):
        out = []
        for item in items:
            out.append(fn(item))
            record.append((item, out[-1]))
        return out
    return run


@pytest.fixture(scope="module")
def small_swarm(tiny_swarm):
    return tiny_swarm("wildfire", 17, psi=0.5)


def test_with_every_other_node_a_sender_each_group_model_is_the_pooled_model(small_swarm) -> None:
    n = len(small_swarm)
    record: list = []
    ctx = SwarmContext(nodes=small_swarm, train=TrainConfig(epochs=2, patience=1, lr=0.05), seed=4,
                       fol=FOLConfig(max_neighbours=n - 1), map=_recording_map(record))
    res = get_method("nbr-pooled-ft").run(ctx)
    assert len(record) == n
    groups = list(record)
    pooled, seen = pooled_state(ctx)
    tuned = get_method("pooled-ft").run(ctx)
    for node, r, t, (_, (group_state, group_seen, *_)) in zip(small_swarm, res, tuned, groups):
        assert r.extra["group"] == [nd.name for nd in small_swarm]
        assert group_seen == seen
        assert all(torch.equal(group_state[key], pooled[key]) for key in pooled)  # same data, init and seed
        assert r.test_accuracy == t.test_accuracy  # and the same fine-tune as pooled-ft's


def _recording_fit(monkeypatch) -> list:
    """Every call of :func:`fol.train.fit` from ``fol.methods.pooled``: (training tensors, validation tensors)."""
    import fol.methods.pooled as pooled_module

    calls: list = []
    real = pooled_module.fit

    def fit(model, data, cfg, *, val=None, **kw):
        calls.append((tuple(data), tuple(val)))
        return real(model, data, cfg, val=val, **kw)

    monkeypatch.setattr(pooled_module, "fit", fit)
    return calls


def test_with_one_neighbour_the_group_is_the_node_and_its_sender(small_swarm, monkeypatch) -> None:
    record: list = []
    ctx = SwarmContext(nodes=small_swarm, train=TrainConfig(epochs=2, patience=0, lr=0.05), seed=5,
                       fol=FOLConfig(max_neighbours=1), map=_recording_map(record))
    fits = _recording_fit(monkeypatch)
    res = get_method("nbr-pooled-ft").run(ctx)
    assert len(fits) == 2 * len(small_swarm)  # per node: its group's training, then its fine-tune
    for k, (node, r, (_, (_, seen, *_))) in enumerate(zip(small_swarm, res, record)):
        senders = ctx.senders_to(0, k, ctx.fol.max_neighbours)
        assert len(senders) == 1 and senders[0] != k
        group = sorted([k, *senders])
        assert r.extra["group"] == [small_swarm[j].name for j in group]
        # exactly the group's training splits, early-stopped on the group's validation splits
        (x, y), (vx, vy) = fits[2 * k]
        assert torch.equal(x, torch.cat([small_swarm[j].data.train.images for j in group]))
        assert torch.equal(y, torch.cat([small_swarm[j].data.train.labels for j in group]))
        assert torch.equal(vx, torch.cat([small_swarm[j].data.val.images for j in group]))
        assert torch.equal(vy, torch.cat([small_swarm[j].data.val.labels for j in group]))
        assert 2 * (len(x) - 1) <= seen <= 2 * len(x)  # every group training image each epoch, nothing else
        # then the fine-tune on the node's own splits only
        (fx, _), (fvx, _) = fits[2 * k + 1]
        assert torch.equal(fx, node.data.train.images) and torch.equal(fvx, node.data.val.images)
        # accounting: node k downloads its sender's raw images
        per_image = math.prod(node.data.train.images.shape[1:])
        sender = small_swarm[senders[0]]
        assert r.bytes_down == (len(sender.data.train) + len(sender.data.val)) * per_image
    # and each node uploads its own once per node it sends to
    receivers = [sum(ctx.senders_to(0, k, 1) == [j] for k in range(len(small_swarm))) for j in range(len(small_swarm))]
    for j, (node, r) in enumerate(zip(small_swarm, res)):
        per_image = math.prod(node.data.train.images.shape[1:])
        assert r.bytes_up == receivers[j] * (len(node.data.train) + len(node.data.val)) * per_image


def test_no_test_image_of_any_node_enters_a_training(small_swarm, monkeypatch) -> None:
    ctx = SwarmContext(nodes=small_swarm, train=TrainConfig(epochs=1, patience=0), seed=6,
                       fol=FOLConfig(max_neighbours=2))
    fits = _recording_fit(monkeypatch)
    get_method("nbr-pooled-ft").run(ctx)
    assert len(fits) == 2 * len(small_swarm)
    tests = {tuple(img.flatten().tolist()) for nd in small_swarm for img in nd.data.test.images}
    for (x, _), (vx, _) in fits:
        assert not tests & {tuple(img.flatten().tolist()) for img in torch.cat([x, vx])}


def test_the_groups_are_the_nodes_whose_models_fol_receives_in_round_one(small_swarm) -> None:
    """The same context: the (sender, receiver) pairs FOL's first round carries
    (seen through ``ctx.transport``) are the groups' members; with a contact
    plan, round 0's deliveries capped at Q (of three nodes, one neighbour
    each: a node's group is not the whole swarm)."""
    carried: set = set()

    def transport(src, dst, payload, round_number):
        if round_number == 1:
            carried.add((src, dst))
        return payload

    n = len(small_swarm)
    names = [nd.name for nd in small_swarm]
    plan = [{k: [(k + 1) % n, (k + 2) % n, (k + 3) % n] for k in range(n)}]
    for deliveries in (None, plan):
        carried.clear()
        ctx = SwarmContext(nodes=small_swarm, train=TrainConfig(epochs=1), seed=9, deliveries=deliveries,
                           fol=FOLConfig(max_neighbours=1, rounds=1, finetune_epochs=1, post_finetune_epochs=1,
                                         gate_epochs=1, distill_epochs=1, top_k=1), transport=transport)
        get_method("fol").run(ctx)
        assert carried == {(names[j], names[k]) for k in range(n) for j in neighbourhood(ctx, k) if j != k}
        if deliveries is not None:
            assert all(neighbourhood(ctx, k) == sorted({k, (k + 1) % n}) for k in range(n))  # capped at Q = 1


def test_a_divergence_names_the_server_or_the_node_and_the_stage(ctx) -> None:
    """The pooled training runs on the server, in no node's work: a divergence there said only 'pretrain'
    (the stage the swarm's settings were made for) and the rate to lower. It now names the server, the
    method that asked for the pooled model and the stage; nbr-pooled-ft's group training, a node's work,
    names the node."""
    wild = replace(ctx, train=replace(ctx.train, lr=1e6, weight_decay=0.0, lr_field="fol.pretrain_lr"), cache={})
    for method, who in (("pooled-ft", r"server"), ("nbr-pooled-ft", r"node \S+")):
        with pytest.raises(TrainingError) as caught:
            get_method(method).run(wild)
        assert re.fullmatch(rf"{who} \({method}\): pooled training: the [\w -]+ became non-finite at epoch \d+ "
                            r"\((finite but huge weights; )?learning rate 1e\+06; a smaller fol\.pretrain_lr "
                            r"usually fixes this\)", str(caught.value)), caught.value
