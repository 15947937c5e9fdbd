"""FOL's alignment-aware structured pruning (fol.pruning)."""

from __future__ import annotations

import copy

import pytest
import torch
import torch_pruning as tp
from torch import nn

from fol.errors import ConfigError, DataError
from fol.models import ModelSpec, build_model, resize_to_state
from fol.pruning import (
    GatedNormImportance,
    GateHooks,
    PruneConfig,
    align_and_prune,
    alignment_term,
    classifier_name,
    fold_gates,
    gate_sites,
    group_lasso_term,
    match_shared_layers,
    prunable_layers,
    prune_by_importance,
)
from fol.train import TrainConfig, fit


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """One intra-op thread: on a shared 2-core machine two OpenMP threads
    contending with other processes make these small models 10x slower."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def toy_data(n: int, seed: int, size: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    """Learnable two-class images: class 1 has a bright top-left patch in channel 0."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 3, size, size, generator=g)
    y = torch.randint(0, 2, (n,), generator=g)
    x[y == 1, 0, : size // 2, : size // 2] += 1.0
    return x, y


# MobileNet-V3 keeps large feature maps at 32 px (stride-1 stem): test it on
# fewer, smaller images (every zoo model pools adaptively, so any size runs).
SMALL_INPUT = {"mobilenet_v3_small": (16, 16), "resnet-small": (16, 32), "resnet18": (8, 16)}


def randomize_batch_norms(m: nn.Module, seed: int) -> None:
    """Non-trivial BN statistics and affine parameters (as after training)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for bn in m.modules():
            if isinstance(bn, nn.BatchNorm2d):
                c = bn.num_features
                bn.running_mean.copy_(torch.randn(c, generator=g) * 0.2)
                bn.running_var.copy_(torch.rand(c, generator=g) + 0.5)
                bn.weight.copy_(torch.rand(c, generator=g) + 0.5)
                bn.bias.copy_(torch.randn(c, generator=g) * 0.2)


def model(arch: str, seed: int = 0, **options) -> nn.Module:
    return build_model(ModelSpec(arch, num_classes=2, options=options), seed=seed).eval()


def kept_share(before: int, ratio: float) -> int:
    """Channels torch-pruning keeps in a layer of ``before`` channels."""
    return int(before * (1 - ratio))


# ------------------------------------------------------------------ layers


def test_prunable_layers_exclude_the_classifier() -> None:
    for arch, head in [("cnn-small", "classifier.3"), ("resnet-small", "fc"), ("mobilenet_v3_small", "classifier.3")]:
        m = model(arch)
        assert classifier_name(m) == head
        assert m.get_submodule(head).out_features == 2
        layers = prunable_layers(m)
        assert head not in layers and layers
        assert all(isinstance(layer, (nn.Conv2d, nn.Linear)) for layer in layers.values())
    assert list(prunable_layers(model("cnn-small"))) == ["features.0", "features.4", "classifier.1"]


def test_match_shared_layers_by_name_and_shape() -> None:
    small = model("cnn-small")
    assert match_shared_layers(small, model("cnn-small", seed=3)) == [
        ("features.0", "features.0"), ("features.4", "features.4"), ("classifier.1", "classifier.1"),
    ]
    assert match_shared_layers(small, model("cnn", widths=[16, 64])) == [("features.0", "features.0")]
    assert match_shared_layers(small, model("resnet-small")) == []
    assert match_shared_layers(model("resnet-small"), small) == []
    mobile = model("mobilenet_v3_small")
    assert len(match_shared_layers(mobile, model("mobilenet_v3_small", seed=1))) == len(prunable_layers(mobile))


def test_gates_sit_after_batch_norm_when_one_follows() -> None:
    m = model("resnet-small")
    sites = gate_sites(m, torch.zeros(1, 3, 32, 32))
    assert sites["stem.0"] == "stem.1"
    assert sites["layers.1.conv1"] == "layers.1.bn1"
    assert sites["layers.1.shortcut.0"] == "layers.1.shortcut.1"
    mobile = model("mobilenet_v3_small")
    sites = gate_sites(mobile, torch.zeros(1, 3, 32, 32))
    assert sites["features.1.block.0.0"] == "features.1.block.0.1"  # depthwise conv -> its BN
    assert sites["features.1.block.1.fc1"] == "features.1.block.1.fc1"  # SE squeeze: no BN
    assert sites["classifier.0"] == "classifier.0"


# ------------------------------------------------------------ structural


@pytest.mark.parametrize(
    "arch", ["cnn-small", "cnn-medium", "cnn-large", "resnet-small", "resnet18", "mobilenet_v3_small"]
)
def test_every_prunable_layer_loses_the_target_share(arch: str) -> None:
    n, size = SMALL_INPUT.get(arch, (32, 32))
    x, y = toy_data(n, seed=0, size=size)
    neighbour, own = model(arch, seed=0), model(arch, seed=0)
    ratio = 0.3
    result = align_and_prune(neighbour, own, (x, y), PruneConfig(ratio=ratio, gate_epochs=1, batch_size=16))
    pruned, report = result.model, result.report
    layers = prunable_layers(neighbour)
    assert set(report["channels"]) == set(layers)
    for name, layer in layers.items():
        before = layer.weight.shape[0]
        after = pruned.get_submodule(name).weight.shape[0]
        assert report["channels"][name] == [before, after]
        expected = before if before == 1 else kept_share(before, ratio)
        assert abs(after - expected) <= 1, (name, before, after)
        assert len(report["removed_channels"].get(name, [])) == before - after
    assert report["params_after"] < 0.8 * report["params_before"]
    assert report["macs_after"] < 0.8 * report["macs_before"]
    with torch.no_grad():
        out = pruned(x[:5])
    assert out.shape == (5, 2) and torch.isfinite(out).all()
    assert all(p.requires_grad for p in pruned.parameters())
    # ready for post fine-tuning with the one training loop
    fit(pruned, (x, y), TrainConfig(epochs=1, batch_size=16, seed=0))


def test_arguments_are_not_mutated() -> None:
    x, y = toy_data(32, seed=1)
    neighbour, own = model("cnn-small", seed=0), model("cnn-small", seed=1)
    neighbour.train()
    before_n = copy.deepcopy(neighbour.state_dict())
    before_o = copy.deepcopy(own.state_dict())
    align_and_prune(neighbour, own, (x, y), PruneConfig(gate_epochs=1))
    for ref, m in ((before_n, neighbour), (before_o, own)):
        state = m.state_dict()
        assert state.keys() == ref.keys()
        assert all(torch.equal(state[k], ref[k]) for k in ref)
    assert neighbour.training and not own.training
    assert all(p.requires_grad for p in neighbour.parameters())


@pytest.mark.parametrize("arch", ["cnn-small", "resnet-small", "mobilenet_v3_small"])
def test_folding_keeps_the_gated_function(arch: str) -> None:
    m = model(arch, seed=0)
    randomize_batch_norms(m, seed=1)
    x = torch.randn(4, 3, 16, 16)
    g = torch.Generator().manual_seed(0)
    gates = {}
    for name, layer in prunable_layers(m).items():
        alpha = torch.rand(layer.weight.shape[0], generator=g) * 2 - 0.5
        alpha[::3] = 0.0
        gates[name] = alpha
    sites = gate_sites(m, x)
    head = m.get_submodule(classifier_name(m))
    seen: list[torch.Tensor] = []
    head.register_forward_pre_hook(lambda _m, inp: seen.append(inp[0].clone()))
    with torch.no_grad():
        plain = m(x)
        with GateHooks(m, gates, sites):
            gated = m(x)
        fold_gates(m, gates, sites)
        folded = m(x)
    features_plain, features_gated, features_folded = seen
    assert not torch.allclose(features_plain, features_gated, atol=1e-2)  # the gates change the function
    torch.testing.assert_close(features_folded, features_gated, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(folded, gated, rtol=1e-5, atol=1e-5)
    assert not torch.equal(plain, folded)


def test_gated_norm_importance_ranks_channels_by_gated_norm() -> None:
    conv = nn.Conv2d(2, 4, 3, padding=1, bias=False)
    net = nn.Sequential(conv, nn.BatchNorm2d(4), nn.ReLU(), nn.Conv2d(4, 3, 1)).eval()
    with torch.no_grad():
        conv.weight.copy_(torch.ones(4, 2, 3, 3) * torch.tensor([1.0, 2.0, 3.0, 4.0]).view(4, 1, 1, 1))
    norms = conv.weight.detach().flatten(1).norm(dim=1)
    alpha = torch.tensor([1.0, -1.0, 0.1, 0.5])  # gated norms: 1, 2, 0.3, 2 (x ||ones||)
    imp = GatedNormImportance({conv: alpha})
    dg = tp.DependencyGraph().build_dependency(net, example_inputs=torch.zeros(1, 2, 8, 8))
    group = dg.get_pruning_group(conv, tp.prune_conv_out_channels, idxs=list(range(4)))
    scores = imp(group)
    torch.testing.assert_close(scores, alpha.abs() * norms)
    assert scores.argsort().tolist()[:2] == [2, 0]
    # without gates a plain L2 ranking would drop channels 0 and 1
    assert norms.argsort().tolist()[:2] == [0, 1]
    # the next layer's outputs have no gate here: no score, torch-pruning skips the group
    head_group = dg.get_pruning_group(net[3], tp.prune_conv_out_channels, idxs=list(range(3)))
    assert imp(head_group) is None


def test_prune_by_importance_removes_the_lowest_gated_norms() -> None:
    conv = nn.Conv2d(2, 4, 3, padding=1, bias=False)
    net = nn.Sequential(conv, nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 8 * 8, 2)).eval()
    with torch.no_grad():
        conv.weight.copy_(torch.ones(4, 2, 3, 3) * torch.tensor([1.0, 2.0, 3.0, 4.0]).view(4, 1, 1, 1))
    imp = GatedNormImportance({conv: torch.tensor([1.0, 1.0, 0.1, 0.5])})
    pruned = prune_by_importance(net, imp, 0.5, torch.zeros(1, 2, 8, 8))
    # gated norms 1, 2, 0.3, 2 -> channels 2 and 0 go, filters 2.0 and 4.0 remain
    assert conv.out_channels == 2
    assert conv.weight[:, 0, 0, 0].tolist() == [2.0, 4.0]
    assert pruned[4].in_features == 2 * 8 * 8 and pruned(torch.zeros(3, 2, 8, 8)).shape == (3, 2)
    with pytest.raises(ConfigError):
        prune_by_importance(net, imp, 1.0, torch.zeros(1, 2, 8, 8))


# ------------------------------------------------------------- objective


def test_alignment_and_group_lasso_terms() -> None:
    a, b = model("cnn-small", seed=0), model("cnn-small", seed=0)
    shared = match_shared_layers(a, b)
    ones = {n: torch.ones(l.weight.shape[0]) for n, l in prunable_layers(a).items()}
    assert float(alignment_term(a, b, ones, shared)) == pytest.approx(0.0, abs=1e-6)
    zeros = {n: torch.zeros_like(v) for n, v in ones.items()}
    lasso = group_lasso_term(b, ones, [n for n, _ in shared])
    # alpha = 0: the distance to the own filters is the own filters' norm
    assert float(alignment_term(a, b, zeros, shared)) == pytest.approx(float(lasso), rel=1e-5)
    assert float(group_lasso_term(a, zeros, list(ones))) == 0.0
    assert float(alignment_term(a, model("resnet-small"), ones, [])) == 0.0


def _scaled_own(neighbour: nn.Module, seed: int) -> tuple[nn.Module, dict[str, torch.Tensor]]:
    """Own model = neighbour with filter i of each prunable layer scaled by c_i in [0, 0.5]."""
    own = copy.deepcopy(neighbour)
    g = torch.Generator().manual_seed(seed)
    scales = {}
    with torch.no_grad():
        for name, layer in prunable_layers(own).items():
            c = torch.rand(layer.weight.shape[0], generator=g) * 0.5
            layer.weight.mul_(c.view(-1, *([1] * (layer.weight.dim() - 1))))
            scales[name] = c
    return own, scales


def test_alignment_term_decreases_while_gates_train() -> None:
    x, y = toy_data(96, seed=3)
    neighbour = model("cnn-small", seed=0)
    own, scales = _scaled_own(neighbour, seed=0)
    shared = match_shared_layers(neighbour, own)
    # the optimum of the alignment term is alpha = c, where it vanishes
    assert float(alignment_term(neighbour, own, scales, shared)) == pytest.approx(0.0, abs=1e-5)
    cfg = PruneConfig(lambda_p=1.0, gamma_shared=1e-4, gamma_unshared=1e-4, gate_epochs=3, gate_lr=0.05, ratio=0.3)
    history = align_and_prune(neighbour, own, (x, y), cfg).report["gate_history"]
    assert len(history["alignment"]) == 3
    assert history["alignment"][-1] < 0.7 * history["alignment"][0]
    assert history["total"][-1] < history["total"][0]


def test_alignment_biases_kept_channels_toward_the_own_model() -> None:
    x, y = toy_data(96, seed=4)
    neighbour = model("cnn-small", seed=0)
    fit(neighbour, (x, y), TrainConfig(epochs=2, batch_size=32, lr=0.02, seed=0))
    own = copy.deepcopy(neighbour)
    g = torch.Generator().manual_seed(1)
    unmatched = {}
    with torch.no_grad():  # the own model lacks half of the neighbour's filters in every layer
        for name, layer in prunable_layers(own).items():
            n = layer.weight.shape[0]
            idx = torch.randperm(n, generator=g)[: n // 2]
            layer.weight[idx] = 0.0
            unmatched[name] = set(idx.tolist())
    cfg = PruneConfig(lambda_p=0.05, gamma_shared=1e-4, gamma_unshared=1e-4, gate_epochs=2, ratio=0.3)

    def share_unmatched(use_alignment: bool) -> float:
        removed = align_and_prune(neighbour, own, (x, y), cfg, use_alignment=use_alignment).report["removed_channels"]
        hits = sum(len(set(idxs) & unmatched[name]) for name, idxs in removed.items())
        return hits / sum(len(idxs) for idxs in removed.values())

    aligned, blind = share_unmatched(True), share_unmatched(False)
    assert aligned >= 0.9, aligned  # removal prefers the filters the own model does not have
    assert blind < 0.8, blind  # without alignment the choice ignores the own model


def test_heterogeneous_pair_prunes_with_group_lasso_only() -> None:
    x, y = toy_data(48, seed=5)
    neighbour, own = model("cnn-small", seed=0), model("resnet-small", seed=0)
    result = align_and_prune(neighbour, own, (x, y), PruneConfig(gate_epochs=2, ratio=0.5))
    report = result.report
    assert report["shared_layers"] == []
    history = report["gate_history"]
    assert history["alignment"] == [0.0, 0.0] and history["group_lasso_shared"] == [0.0, 0.0]
    assert all(v > 0 for v in history["group_lasso_unshared"])
    assert report["channels"] == {"features.0": [16, 8], "features.4": [32, 16], "classifier.1": [64, 32]}
    assert result.model(x[:3]).shape == (3, 2)


def test_ratio_zero_keeps_every_channel() -> None:
    x, y = toy_data(32, seed=6)
    result = align_and_prune(model("cnn-small"), model("cnn-small"), (x, y), PruneConfig(ratio=0.0, gate_epochs=1))
    assert all(before == after for before, after in result.report["channels"].values())
    assert result.report["removed_channels"] == {}


@pytest.mark.parametrize("arch", ["cnn-small", "resnet-small"])
def test_a_high_ratio_keeps_one_channel_where_the_share_rounds_to_zero(arch: str) -> None:
    """Where floor(n * (1 - ratio)) is 0 a layer keeps one channel: a higher
    ratio never prunes less (torch-pruning refuses to empty a layer and then
    left the whole layer unpruned, so 0.99 removed nothing)."""
    n, size = SMALL_INPUT.get(arch, (16, 32))
    x, y = toy_data(n, seed=8, size=size)
    kept = {}
    for ratio in (0.9, 0.95, 0.99):
        result = align_and_prune(model(arch), model(arch), (x, y), PruneConfig(ratio=ratio, gate_epochs=0))
        for name, (before, after) in result.report["channels"].items():
            assert after == max(1, kept_share(before, ratio)), (ratio, name, before, after)
            assert after <= kept.get(name, before), (ratio, name)
            kept[name] = after
        with torch.no_grad():
            assert result.model(x[:2]).shape == (2, 2)


# ---------------------------------------------------------- round trip


def test_pruned_model_round_trips_through_the_safe_format(tmp_path) -> None:
    x, y = toy_data(32, seed=7)
    spec = ModelSpec("resnet-small", num_classes=2)
    pruned = align_and_prune(
        build_model(spec, seed=0), build_model(spec, seed=0), (x, y), PruneConfig(gate_epochs=1, ratio=0.4)
    ).model.eval()
    with torch.no_grad():
        expected = pruned(x[:4])
        # the tensor shapes alone rebuild the pruned tree
        state = pruned.state_dict()
        rebuilt = resize_to_state(build_model(spec), {k: tuple(v.shape) for k, v in state.items()})
        rebuilt.load_state_dict(state, strict=True)
        torch.testing.assert_close(rebuilt.eval()(x[:4]), expected, rtol=0, atol=0)

    from fol.checkpoint import load_model, save_model  # part of the package: an import error fails, never skips

    path = tmp_path / "pruned.safetensors"
    card = save_model(path, pruned, spec=spec, class_names=["a", "b"])
    assert card.pruned
    loaded = load_model(path).model
    with torch.no_grad():
        torch.testing.assert_close(loaded(x[:4]), expected, rtol=0, atol=0)


# ------------------------------------------------------------ user errors


def test_bad_config_and_data_raise_project_errors() -> None:
    with pytest.raises(ConfigError, match="ratio"):
        PruneConfig(ratio=1.0)
    with pytest.raises(ConfigError, match="lambda_p"):
        PruneConfig(lambda_p=-1.0)
    with pytest.raises(ConfigError, match="gate_lr"):
        PruneConfig(gate_lr=0.0)
    with pytest.raises(ConfigError, match="gate_epochs"):
        PruneConfig(gate_epochs=-1)
    m = model("cnn-small")
    x, y = toy_data(8, seed=8)
    with pytest.raises(DataError, match="labels"):
        align_and_prune(m, m, (x, y + 5), PruneConfig())
    with pytest.raises(DataError):
        align_and_prune(m, m, (x, y[:4]), PruneConfig())
    with pytest.raises(DataError):
        align_and_prune(m, m, (x, y.float()), PruneConfig())


def test_gate_epochs_is_bounded_as_fol_configs_counts_are() -> None:
    with pytest.raises(ConfigError, match=r"^prune config field 'gate_epochs' must be at most 100,000, got 1000000000000$"):
        PruneConfig(gate_epochs=10**12)
    assert PruneConfig(gate_epochs=100_000).gate_epochs == 100_000
