"""DM-PFL / DM-PFL+: Eq. 5, the 30 % rule of the global mask, shared positions
carrying global weights, mask readjustment, adaptive inference, accounting."""

from __future__ import annotations

import math

import pytest
import torch

from fol.accounting import mask_bytes
from fol.errors import ConfigError
from fol.methods import SwarmContext, get_method
from fol.methods.dm_pfl import (
    adaptive_predict, compose_personal, entropy, eq5_aggregate, global_mask, magnitude_mask, masked_keys,
    readjust_mask,
)
from fol.models import ModelSpec, build_model
from fol.train import TrainConfig


@pytest.fixture(scope="module")
def nodes(tiny_swarm):
    return tiny_swarm("wildfire", 4)


def test_global_mask_ignores_positions_of_at_most_30_percent_of_clients():
    w_g = {"w": torch.tensor([10.0, 9.0, 8.0, 1.0, 0.5, 0.1, 0.2, 0.3, 0.4, 0.05])}
    n = 10
    counts = [3, 4, 10, 10, 10, 10, 10, 10, 10, 10]  # position 0: 30 % exactly, position 1: 40 %
    masks = [{"w": torch.tensor([c > i for c in counts])} for i in range(n)]
    m = global_mask(w_g, masks, sparsity=0.7, min_client_share=0.3)["w"]
    assert not m[0]  # largest weight but chosen by only 30 % -> excluded
    assert m[1] and m[2] and m[3]  # top (1 - S) = 3 of the eligible positions by |w_g|
    assert int(m.sum()) == 3
    # with one client in four (25 %) the position is excluded, with two (50 %) it is kept
    four = [{"w": torch.tensor([i < 1, i < 2])} for i in range(4)]
    m4 = global_mask({"w": torch.tensor([5.0, 1.0])}, four, sparsity=0.0, min_client_share=0.3)["w"]
    assert m4.tolist() == [False, True]


def test_eq5_mask_wise_weighted_average_keeps_uncovered_positions():
    prev = {"w": torch.tensor([1.0, 2.0, 3.0]), "bn": torch.tensor([0.0])}
    states = [{"w": torch.tensor([4.0, 6.0, 0.0]), "bn": torch.tensor([1.0])},
              {"w": torch.tensor([8.0, 0.0, 0.0]), "bn": torch.tensor([4.0])}]
    masks = [{"w": torch.tensor([True, True, False])}, {"w": torch.tensor([True, False, False])}]
    out = eq5_aggregate(prev, states, masks, [1.0, 3.0])
    assert out["w"].tolist() == pytest.approx([(4 + 3 * 8) / 4, 6.0, 3.0])  # pos 1: only client 0; pos 2: nobody
    assert float(out["bn"]) == pytest.approx((1 + 3 * 4) / 4)


def test_shared_positions_take_global_weights():
    torch.manual_seed(0)
    w_c, w_g = {"w": torch.randn(6), "b": torch.randn(2)}, {"w": torch.randn(6), "b": torch.randn(2)}
    m_c = {"w": torch.tensor([1, 1, 1, 0, 0, 1], dtype=torch.bool)}
    m_g = {"w": torch.tensor([1, 0, 1, 1, 0, 0], dtype=torch.bool)}
    out = compose_personal(w_c, m_c, w_g, m_g)
    shared = m_c["w"] & m_g["w"]
    assert torch.equal(out["w"][shared], w_g["w"][shared])
    assert torch.equal(out["w"][~shared], w_c["w"][~shared])
    assert torch.equal(out["b"], w_g["b"])  # unmasked tensors are global


def test_readjust_keeps_mask_size_and_follows_magnitude_and_gradient():
    mask = torch.tensor([1, 1, 1, 1, 0, 0, 0, 0], dtype=torch.bool)
    weight = torch.tensor([0.1, 5.0, 4.0, 3.0, 0.0, 0.0, 0.0, 0.0])
    grad = torch.tensor([0.0, 0.0, 0.0, 0.0, 0.1, 9.0, 0.2, 0.3])
    new, grown = readjust_mask(mask, weight, grad, 0.25)  # one of four
    assert int(new.sum()) == 4 and not new[0] and new[5]
    assert grown.tolist() == [False] * 5 + [True, False, False]
    assert magnitude_mask(torch.tensor([1.0, -3.0, 2.0, 0.5]), 0.5).tolist() == [False, True, True, False]


def test_adaptive_inference_rule():
    lc = torch.tensor([[4.0, 0.0], [0.1, 0.0]])  # confident / unsure personalized model
    lg = torch.tensor([[0.0, 0.2], [0.0, 4.0]])
    pred = adaptive_predict(lc, lg, base_c=0.1, base_g=0.1)
    assert pred.tolist() == [0, 1]  # each sample goes to the lower-entropy model
    assert float(entropy(torch.zeros(1, 2))) == pytest.approx(math.log(2))


def test_dm_pfl_end_to_end(nodes):
    ctx = SwarmContext(nodes=nodes, train=TrainConfig(epochs=1), rounds=2, seed=0)
    method = get_method("dm-pfl", local_epochs=1, readjust_ratio=0.05)
    run = method.train_rounds(ctx)
    res = method.results(ctx, run)
    st = run.state
    spec = nodes[0].spec
    keys = masked_keys(build_model(spec))
    n_pos = sum(build_model(spec).state_dict()[k].numel() for k in keys)
    assert st["phase1_done"] == 1 and st["phase2_done"] == 1
    for k, r in enumerate(res):
        assert math.isfinite(r.test_accuracy) and r.rounds == 2
        personal = method.node_state(st, ctx, k)
        for key in keys:
            shared = st["m_g"][key] & st["m_c"][k][key]
            assert torch.equal(personal[key][shared], st["w_g"][key][shared])  # shared -> global weights
            assert torch.count_nonzero(personal[key][~st["m_c"][k][key]]) == 0  # sparse personal model
        for key in personal:  # dense tensors: global, but for the running statistics phase 2b recomputed
            if key not in st["m_c"][k] and not key.endswith("num_batches_tracked"):
                assert torch.equal(personal[key], st["w_g"][key]) != key.endswith(("running_mean", "running_var"))
        density = r.extra["personal_density"]
        assert density == pytest.approx(0.5, abs=0.02)
        # phase-1 upload carries a 1-bit mask over every masked position
        assert r.bytes_up > mask_bytes(n_pos)
    assert r.extra["global_density"] <= 0.5 + 1e-6
    plus = get_method("dm-pfl+", local_epochs=1, readjust_ratio=0.05).run(ctx)  # same training, cached
    assert [p.bytes_up for p in plus] == [r.bytes_up for r in res]
    assert all(math.isfinite(p.test_accuracy) for p in plus)


def test_erk_keeps_the_total_density_and_favours_small_layers():
    from fol.methods.dm_pfl import erk_densities

    model = build_model(ModelSpec("cnn-medium", 2, 3, 16))
    sd = model.state_dict()
    shapes = {k: tuple(sd[k].shape) for k in masked_keys(model)}
    dens = erk_densities(shapes, 0.5)
    total = sum(dens[k] * sd[k].numel() for k in shapes) / sum(sd[k].numel() for k in shapes)
    assert total == pytest.approx(0.5, abs=1e-9)
    assert all(0 < d <= 1 for d in dens.values())
    # ERK: the first conv (32 x 3 x 3 x 3, few weights per connection) is denser than the 64 x 64 x 3 x 3 conv
    assert dens["features.0.weight"] > dens["features.8.weight"]
    assert dens["classifier.3.weight"] == 1.0  # tiny classifier: dense


def test_dm_pfl_schedule_and_init_options(nodes):
    from fol.methods.dm_pfl import dm_pfl_schedule

    assert dm_pfl_schedule(3, 1, 0.5) == [("1", False), ("1", False), ("2", True)]
    assert dm_pfl_schedule(5, 2, 0.5) == [("1", False), ("1", False), ("2", True), ("1", False), ("2", True)]
    ctx = SwarmContext(nodes=nodes, train=TrainConfig(epochs=1), rounds=3, seed=0)
    glob = get_method("dm-pfl", local_epochs=1, iterations=1)
    run = glob.train_rounds(ctx)
    res = glob.results(ctx, run)
    assert run.state["phase1_done"] == 2 and run.state["phase2_done"] == 1
    dense = sum(t.numel() * t.element_size() for t in build_model(nodes[0].spec).state_dict().values())
    pre = get_method("dm-pfl", local_epochs=1, init="pretrained", distribution="uniform").run(ctx)
    for g, p in zip(res, pre):
        assert g.bytes_down - p.bytes_down == dense  # global init: the initial model downloaded once
        assert [c["round"] for c in g.extra["curve"]] == [1, 2, 3]
    with pytest.raises(ConfigError, match="distribution"):
        get_method("dm-pfl", distribution="random")


def test_phase_2b_charges_the_initial_model_to_a_node_that_never_reached_the_server(nodes):
    """Node 2 is never in a round, but the local phase 2b reaches every node: it trains
    m_c - m_g from the shared initialization, so with ``init = "global"`` it downloads
    that initial model once (at its first phase 2b), besides m_g and w_g * m_g per cycle."""
    from fol.accounting import model_bytes
    from fol.methods.dm_pfl import values_bytes

    ctx = SwarmContext(nodes=nodes, train=TrainConfig(epochs=1), rounds=4, seed=0, participants=[[0, 1]] * 4)
    method = get_method("dm-pfl", local_epochs=1, iterations=2)
    run = method.train_rounds(ctx)
    res = method.results(ctx, run)
    st = run.state
    down = values_bytes(st["w_g"], st["m_g"]) + mask_bytes(st["n_pos"])  # one phase-2b download
    assert res[2].rounds == 0 and res[2].bytes_up == 0
    assert res[2].bytes_down == 2 * down + model_bytes(build_model(nodes[0].spec))  # two cycles, the init once


def test_curve_bytes_count_the_global_model_a_node_deploys_before_it_downloaded_it(nodes):
    """Before the cycle's phase 2b a node's model is composed with the server's latest
    global weights, and DM-PFL+ runs the global model at inference: the curves counted
    no download of them (FedAvg and MTFL count theirs). Round 1 of a 3-round cycle:
    every node needs the latest w_g * m_g and m_g, plus the initial model if it has not
    joined; after phase 2b (round 3) nothing more, so the last point is the final total."""
    from fol.accounting import model_bytes
    from fol.methods.dm_pfl import values_bytes

    ctx = SwarmContext(nodes=nodes, train=TrainConfig(epochs=1), rounds=3, seed=0, participants=[[0, 1]] * 3)
    plain, plus = get_method("dm-pfl", local_epochs=1), get_method("dm-pfl+", local_epochs=1)
    run = plain.train_rounds(ctx)
    res, res_plus = plain.results(ctx, run), plus.results(ctx, run)
    st = run.state
    down = values_bytes(st["w_g"], st["m_g"]) + mask_bytes(st["n_pos"])  # sizes fixed by the global mask
    dense = model_bytes(build_model(nodes[0].spec))
    for k in range(3):
        for r in (res[k], res_plus[k]):
            first, last = r.extra["curve"][0], r.extra["curve"][-1]
            assert last["bytes"] == r.bytes_up + r.bytes_down  # after phase 2b: the final total
            # after round 1 the node holds none of the new global model (node 2 not even the initial one)
            if k < 2:  # round 1: the initial model down, w_c * m_c and m_c up; then exactly one global model
                up = values_bytes(st["w_c"][k], st["m_c"][k]) + mask_bytes(st["n_pos"])  # m_c keeps its size
                assert first["bytes"] == dense + up + down
            else:  # never at the server: the initial model and the global model, nothing else
                assert first["bytes"] == dense + down


def test_phase_1_round_sends_the_eq5_weights_and_the_30_percent_global_mask(nodes):
    """The method's own wiring of Algorithm 1 (not only the helpers): the w_g and
    m_g a node receives in the second phase-1 round are Eq. 5 over the first
    round's uploads (starting from the shared initialization) and the top
    positions of w_g among those more than ``min_client_share`` of the
    participants selected."""
    from fol.methods._common import shared_init, state_of
    from fol.methods.dm_pfl import Phase1Task, sparse_view

    calls = []

    def capturing_map(fn, items, desc=None):  # items: (node name, the node's task)
        out = [fn(t) for t in items]
        calls.append(([task for _, task in items], out))
        return out

    ctx = SwarmContext(nodes=nodes, train=TrainConfig(epochs=1), rounds=2, seed=0, map=capturing_map,
                       evaluate_rounds=False)
    method = get_method("dm-pfl", local_epochs=1, readjust_ratio=0.05, phase1_share=1.0, init="pretrained",
                        min_client_share=0.5)
    run = method.train_rounds(ctx)
    (tasks1, ups1), (tasks2, _) = calls[0], calls[1]
    assert all(isinstance(t, Phase1Task) for t in tasks1 + tasks2)
    assert all(t.w_g is None and t.m_g is None for t in tasks1)  # nothing aggregated yet
    sizes = [float(len(n.data.train)) for n in nodes]
    masks = [u.m_c for u in ups1]
    w_g = eq5_aggregate(state_of(shared_init(ctx, nodes[0].spec)), [sparse_view(u.w_c, u.m_c) for u in ups1],
                        masks, sizes)
    m_g = global_mask(w_g, masks, method.sparsity, 0.5, run.state["density"])
    assert any(not torch.equal(m_g[k], global_mask(w_g, masks, method.sparsity, 0.0, run.state["density"])[k])
               for k in m_g)  # the share rule matters here
    plain = {k: sum(s * u.w_c[k] * u.m_c[k] for s, u in zip(sizes, ups1)) / sum(sizes) for k in masks[0]}
    assert any(not torch.allclose(plain[k], w_g[k]) for k in masks[0])  # Eq. 5 is not the plain average
    for t in tasks2:
        assert t.w_g.keys() == w_g.keys() and t.m_g.keys() == m_g.keys()
        assert all(torch.allclose(t.w_g[k], w_g[k], atol=1e-6) for k in w_g)
        assert all(torch.equal(t.m_g[k], m_g[k]) for k in m_g)
