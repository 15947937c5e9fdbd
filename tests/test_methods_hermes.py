"""Hermes: intersection-only aggregation, masks that only shrink, byte counts."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

from fol.accounting import mask_bytes
from fol.errors import ConfigError
from fol.methods import SwarmContext, get_method
from fol.methods.hermes import (
    HermesTask, channel_groups, channel_slices, element_masks, group_lasso, hermes_client_update, intersection_aggregate,
    prune_channels, pruned_share, subnetwork_bytes,
)
from fol.models import ModelSpec, build_model
from fol.pruning import prunable_layers
from fol.train import TrainConfig

SPEC = ModelSpec("cnn-small", 2, 3, 16)


@pytest.fixture(scope="module")
def nodes(tiny_swarm):
    return tiny_swarm("hurricane", 2, psi=0.7)


def test_channel_groups_tie_layers_to_their_batchnorm():
    groups = channel_groups(build_model(SPEC), (3, 16, 16))
    assert groups["features.0"] == ["features.0.weight", "features.1.weight", "features.1.bias",
                                    "features.1.running_mean", "features.1.running_var"]
    assert groups["classifier.1"] == ["classifier.1.weight", "classifier.1.bias"]
    assert "classifier.3" not in groups  # the classifier is never pruned


def test_channel_groups_and_macs_ratio_keep_every_layer_mode():
    """A batch-norm layer the caller froze in eval mode inside a training model
    stays frozen after the tracing passes (``model.train(was)`` would unfreeze it)."""
    from fol.methods._common import masked_macs_ratio

    model = build_model(SPEC).train()
    model.features[1].eval()
    channel_groups(model, (3, 16, 16))
    masked_macs_ratio(model, {}, (3, 16, 16))
    assert model.training and not model.features[1].training
    assert sum(m.training for m in model.modules()) == len(list(model.modules())) - 1


def test_aggregation_leaves_non_intersecting_parameters_untouched():
    torch.manual_seed(0)
    states = [{"w": torch.randn(4, 3), "b": torch.randn(5)} for _ in range(3)]
    rows = [torch.tensor([1, 1, 0, 1], dtype=torch.bool), torch.tensor([1, 0, 1, 1], dtype=torch.bool),
            torch.tensor([1, 1, 1, 0], dtype=torch.bool)]
    masks = [{"w": r[:, None].expand(4, 3).clone()} for r in rows]
    out = intersection_aggregate(states, masks, [1.0, 1.0, 2.0])
    expected_row0 = (states[0]["w"][0] + states[1]["w"][0] + 2 * states[2]["w"][0]) / 4
    for i in range(3):
        assert torch.allclose(out[i]["w"][0], expected_row0, atol=1e-6)  # row 0: kept by all -> averaged
        for row in (1, 2, 3):  # not in every subnetwork -> each keeps its own values
            assert torch.equal(out[i]["w"][row], states[i]["w"][row])
        assert torch.allclose(out[i]["b"], (states[0]["b"] + states[1]["b"] + 2 * states[2]["b"]) / 4, atol=1e-6)


def test_pruning_removes_lowest_norm_channels_and_only_shrinks():
    model = build_model(SPEC, seed=0)
    layers = prunable_layers(model)
    full = {n: torch.ones(m.weight.shape[0], dtype=torch.bool) for n, m in layers.items()}
    first = prune_channels(model, full, 0.2)
    assert pruned_share(first) == pytest.approx(0.2, abs=0.03)
    norms = model.features[0].weight.detach().abs().flatten(1).sum(1)
    dropped = (~first["features.0"]).nonzero().flatten()
    kept = first["features.0"].nonzero().flatten()
    assert norms[dropped].max() <= norms[kept].min()
    second = prune_channels(model, first, 0.3)
    for name in full:
        assert not (second[name] & ~first[name]).any()  # subset
    assert pruned_share(second) > pruned_share(first)


def test_client_update_prunes_trains_under_mask_and_masks_shrink(nodes):
    node = nodes[0]
    groups = channel_slices(build_model(SPEC), (3, 16, 16))
    layers = prunable_layers(build_model(SPEC))
    masks = {n: torch.ones(m.weight.shape[0], dtype=torch.bool) for n, m in layers.items()}
    state = node.pretrained.state_dict()
    shares = []
    for r in range(3):
        up = hermes_client_update(HermesTask(SPEC, state, masks, groups, node.data, TrainConfig(epochs=1, seed=r),
                                             0.2, 0.0, 0.3, 1e-4))
        for name in masks:
            assert not (up.channel_masks[name] & ~masks[name]).any()  # only shrinks
        elem = element_masks(up.channel_masks, groups, up.state)
        for key, m in elem.items():
            assert torch.count_nonzero(up.state[key][~m]) == 0  # pruned entries stay exactly zero
        shares.append(pruned_share(up.channel_masks))
        state, masks = up.state, up.channel_masks
    assert shares[0] == pytest.approx(0.2, abs=0.03) and shares[-1] == pytest.approx(0.3, abs=0.03)
    assert shares == sorted(shares)
    # above the accuracy threshold nothing is pruned
    up = hermes_client_update(HermesTask(SPEC, node.pretrained.state_dict(),
                                         {n: torch.ones(m.weight.shape[0], dtype=torch.bool) for n, m in layers.items()},
                                         groups, node.data, TrainConfig(epochs=1), 0.2, 1.0, 0.3, 0.0))
    assert not up.pruned and pruned_share(up.channel_masks) == 0.0


def test_group_lasso_is_eq2():
    model = build_model(SPEC, seed=0)
    expected = 0.0
    for mod in model.modules():
        if isinstance(mod, (torch.nn.Conv2d, torch.nn.Linear)):
            w = mod.weight.detach()
            expected += float(w.flatten(1).norm(dim=1).sum() + w.transpose(0, 1).flatten(1).norm(dim=1).sum())
    assert float(group_lasso(model).detach()) == pytest.approx(expected, rel=1e-5)
    with torch.no_grad():
        model.features[0].weight[0].zero_()
    group_lasso(model).backward()  # a pruned (all-zero) group must not produce NaN gradients
    assert torch.isfinite(model.features[0].weight.grad).all()


def test_hermes_end_to_end_bytes(nodes):
    # the earlier reading: channel-level intersection, r_target = pruned share, from the pretrained models
    method = get_method("hermes", local_epochs=1, acc_threshold=0.0, intersection="channel", target_share="pruned",
                        init="pretrained")
    ctx = SwarmContext(nodes=nodes, train=TrainConfig(epochs=1), rounds=2, seed=0)
    run = method.train_rounds(ctx)
    res = method.results(ctx, run)
    groups = channel_slices(build_model(SPEC), (3, 16, 16), "channel")
    masked = {key for per in groups.values() for ch in per for key, _, _ in ch}
    n_masked = sum(build_model(SPEC).state_dict()[k].numel() for k in masked)
    model = build_model(SPEC)
    dense = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    # per prunable layer: (channels, bytes of one output channel's own entries), from the architecture
    per_channel_bytes = {}
    for seq in ("features", "classifier"):
        mods = list(getattr(model, seq).children())
        for i, mod in enumerate(mods):
            if isinstance(mod, (torch.nn.Conv2d, torch.nn.Linear)) and not (seq == "classifier" and i == len(mods) - 1):
                floats = mod.weight[0].numel() + (mod.bias is not None)
                if i + 1 < len(mods) and isinstance(mods[i + 1], torch.nn.BatchNorm2d):
                    floats += 4  # weight, bias, running_mean, running_var
                per_channel_bytes[f"{seq}.{i}"] = (mod.weight.shape[0], 4 * floats)
    assert per_channel_bytes == {"features.0": (16, 4 * 31), "features.4": (32, 4 * 148), "classifier.1": (64, 4 * 33)}
    for r, masks in zip(res, run.state["masks"], strict=True):
        assert math.isfinite(r.test_accuracy) and r.rounds == 2
        assert r.extra["pruned_share"] == pytest.approx(0.3, abs=0.03)
        # up = down + one mask bitmap per round (the server returns the subnetwork without the mask)
        assert r.bytes_up - r.bytes_down == 2 * mask_bytes(n_masked)
        # down: each round the node receives its subnetwork, i.e. the dense model minus, for every
        # channel pruned so far, that channel's own tensors (its filter row / bias and the entries of
        # the BatchNorm it feeds). Per layer round(share * n) channels are pruned, the share growing
        # by prune_rate = 0.2 per round up to target = 0.3 (acc_threshold = 0: a node prunes every round).
        assert [h["pruned_now"] for h in r.extra["history"]] == [True, True]
        expected_down = 0
        for share in (0.2, 0.3):
            pruned = {name: int(round(share * per_channel_bytes[name][0])) for name in per_channel_bytes}
            expected_down += dense - sum(n * per_channel_bytes[name][1] for name, n in pruned.items())
        assert r.bytes_down == expected_down
        assert {name: int((~m).sum()) for name, m in masks.items()} == pruned  # the final masks: round 2's
        final = subnetwork_bytes(build_model(SPEC).state_dict(),
                                 element_masks(masks, groups, build_model(SPEC).state_dict()))
        assert final == dense - sum(int((~m).sum()) * per_channel_bytes[name][1] for name, m in masks.items())


def test_parameter_level_intersection_keeps_outgoing_weights_of_pruned_channels_personal():
    """Hermes Fig. 5 at parameter level: node 1 pruned channel c of features.4, so the
    classifier's column c (c's outgoing weights) is outside its subnetwork and node 0's
    column is not averaged with node 1's; the channel-level reading averages it."""
    model = build_model(SPEC)
    slices = channel_slices(model, (3, 16, 16))
    torch.manual_seed(0)
    states = [{k: torch.randn_like(v) if v.is_floating_point() else v.clone() for k, v in model.state_dict().items()}
              for _ in range(2)]
    full = {name: torch.ones(len(per), dtype=torch.bool) for name, per in slices.items()}
    c = 3
    pruned = {**full, "features.4": full["features.4"].clone()}
    pruned["features.4"][c] = False
    masks = [element_masks(full, slices, states[0]), element_masks(pruned, slices, states[1])]
    assert not masks[1]["classifier.1.weight"][:, c].any()  # the next layer's input slice of channel c
    out = intersection_aggregate(states, masks, [1.0, 1.0])
    col = "classifier.1.weight"
    assert torch.equal(out[0][col][:, c], states[0][col][:, c])  # stays personal to node 0
    other = [j for j in range(out[0][col].shape[1]) if j != c]
    mean = (states[0][col] + states[1][col]) / 2
    assert torch.allclose(out[0][col][:, other], mean[:, other])  # the intersection is averaged
    assert torch.equal(out[0]["features.4.weight"][c], states[0]["features.4.weight"][c])
    # channel level: the outgoing weights are averaged over both nodes
    ch = channel_slices(model, (3, 16, 16), "channel")
    out_ch = intersection_aggregate(states, [element_masks(full, ch, states[0]), element_masks(pruned, ch, states[1])],
                                    [1.0, 1.0])
    assert torch.allclose(out_ch[0][col][:, c], mean[:, c])


def test_hermes_defaults_follow_the_paper(nodes):
    """init = global (every node starts from one model), r_target = kept share,
    an accuracy-vs-rounds curve per node."""
    method = get_method("hermes", local_epochs=1, acc_threshold=0.0, prune_rate=0.4, target=0.5)
    res = method.run(SwarmContext(nodes=nodes, train=TrainConfig(epochs=1), rounds=2, seed=0))
    dense = sum(t.numel() * t.element_size() for t in build_model(SPEC).state_dict().values())
    # parameter level (the default): a channel's entries include the next layer's input slice
    slices = channel_slices(build_model(SPEC), (3, 16, 16))
    masked = {key for per in slices.values() for ch in per for key, _, _ in ch}
    n_masked = sum(build_model(SPEC).state_dict()[k].numel() for k in masked)
    for r in res:
        assert r.extra["pruned_share"] == pytest.approx(0.5, abs=0.03)  # at most 50 % kept
        # each round the subnetwork goes up with its mask and comes back down; the initial global
        # model came down once, at the node's first round
        assert r.bytes_down == r.bytes_up - 2 * mask_bytes(n_masked) + dense
        assert [p["round"] for p in r.extra["curve"]] == [1, 2]
        assert r.extra["curve"][-1]["test_accuracy"] == pytest.approx(r.test_accuracy)
    with pytest.raises(ConfigError, match="hermes.init"):
        get_method("hermes", init="scratch")


def test_hermes_round_averages_only_the_intersection_of_the_node_masks(nodes):
    """The method's own round (not only :func:`intersection_aggregate`): after one
    round each node's model holds, on the entries every participant's subnetwork
    keeps, the training-set-size weighted average of the uploaded updates, and
    its own upload everywhere else (e.g. the outgoing weights of a channel
    another node pruned). The nodes start from their own pretrained models, so
    their L1-norm pruning picks different channels."""
    captured = []

    def capturing_map(fn, items):
        out = [fn(t) for t in items]
        captured.extend(out)
        return out

    # unequal training sets, so the average's weights matter
    nodes = [replace(nodes[0], data=replace(nodes[0].data, train=nodes[0].data.train.subset(range(40)))), *nodes[1:]]
    method = get_method("hermes", local_epochs=1, acc_threshold=0.0, init="pretrained")
    ctx = SwarmContext(nodes=nodes, train=TrainConfig(epochs=1), rounds=1, seed=0, map=capturing_map,
                       evaluate_rounds=False)
    run = method.train_rounds(ctx)
    n = len(nodes)
    assert len(captured) == n >= 2
    elems = [element_masks(u.channel_masks, run.state["slices"], u.state) for u in captured]
    w = torch.tensor([float(len(node.data.train)) for node in nodes], dtype=torch.float64)
    w = w / w.sum()
    finals = run.state["states"]
    personal = 0
    for key in captured[0].state:
        ups = [u.state[key] for u in captured]
        mean = sum(w[k] * ups[k].double() for k in range(n)).to(ups[0].dtype)
        if key not in elems[0]:  # no mask: averaged over all participants
            if ups[0].is_floating_point():
                assert all(torch.allclose(finals[k][key], mean) for k in range(n)), key
            continue
        inter = torch.stack([e[key] for e in elems]).all(0)
        for k in range(n):
            assert torch.allclose(finals[k][key][inter], mean[inter]), key
            assert torch.equal(finals[k][key][~inter], ups[k][~inter]), key
            personal += int((elems[k][key] & ~inter).sum())
    assert personal > 0  # the subnetworks differ: some kept entries are outside the intersection
    # parameter level: every slice of a channel node 0 kept and another node pruned, the
    # outgoing weights (the next layer's input slice) included, keeps node 0's trained values
    outgoing = 0
    for layer, per_channel in run.state["slices"].items():
        kept = captured[0].channel_masks[layer] & ~torch.stack([u.channel_masks[layer] for u in captured]).all(0)
        for c in kept.nonzero().flatten().tolist():
            for key, dim, idxs in per_channel[c]:
                own = captured[0].state[key].index_select(dim, torch.tensor(idxs))
                assert torch.equal(finals[0][key].index_select(dim, torch.tensor(idxs)), own), (layer, c, key)
                if dim == 1:
                    outgoing += 1
                    assert own.abs().sum() > 0  # a real value, not the others' zeros averaged in
    assert outgoing > 0


def test_a_node_hermes_never_reaches_keeps_and_is_charged_its_pretrained_model(nodes):
    ctx = SwarmContext(nodes=nodes, train=TrainConfig(epochs=1), rounds=1, seed=0, participants=[[0]])
    res = get_method("hermes", local_epochs=1).run(ctx)  # init = "global": trains from the shared initialization
    assert not res[0].kept_local and res[0].train_flops > 0
    for node, r in zip(nodes[1:], res[1:]):
        assert r.kept_local and r.rounds == 0 and r.bytes_down == 0
        assert r.train_flops == node.pretrain_flops > 0  # the model it deploys, as `local` charges it
