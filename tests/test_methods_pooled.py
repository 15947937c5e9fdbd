"""The pooled references (``pooled``, ``pooled-ft``): one training on every
node's data, fine-tuned per node without ever ending below the pooled model on
the node's validation split, accounted as the raw images each node hands over."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from fol.errors import ConfigError
from fol.methods import SwarmContext, get_method
from fol.methods.pooled import finetune_node, pooled_state
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
