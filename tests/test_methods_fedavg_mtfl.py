"""FedAvg and MTFL baselines: byte accounting, participation, private BN patches,
FedAvg-Adam moment averaging."""

from __future__ import annotations

import math

import pytest
import torch

from fol.accounting import model_bytes, tensor_bytes
from fol.errors import ConfigError
from fol.methods import NodeSetup, SwarmContext, get_method
from fol.methods._common import local_config, shared_init
from fol.methods.mtfl import MTFLTask, average_moments, mtfl_client_update, private_keys
from fol.models import ModelSpec, build_model
from fol.seeds import round_seed
from fol.train import TrainConfig


@pytest.fixture(scope="module")
def nodes(tiny_swarm):
    return tiny_swarm("wildfire", 1)


def ctx_of(nodes, rounds=2, **kw):
    return SwarmContext(nodes=nodes, train=TrainConfig(epochs=1, lr=0.05), rounds=rounds, seed=3, **kw)


def test_fedavg_bytes_are_rounds_times_model(nodes):
    res = get_method("fedavg", local_epochs=1).run(ctx_of(nodes, rounds=2))
    size = model_bytes(build_model(nodes[0].spec))
    assert [r.node for r in res] == [n.name for n in nodes]
    for r in res:
        assert math.isfinite(r.test_accuracy) and 0 <= r.test_accuracy <= 1
        assert r.bytes_up == 2 * size
        assert r.bytes_down == 3 * size  # two rounds + final broadcast
        assert r.rounds == 2 and r.train_flops > 0


def test_fedavg_follows_participants_and_fraction(nodes):
    ctx = ctx_of(nodes, rounds=3, participants=[[0, 1], [1], []])
    res = get_method("fedavg", local_epochs=1).run(ctx)
    size = model_bytes(build_model(nodes[0].spec))
    assert [r.rounds for r in res] == [1, 2, 0]
    assert [r.bytes_up for r in res] == [size, 2 * size, 0]
    sampled = get_method("fedavg", local_epochs=1, fraction=0.34).run(ctx_of(nodes, rounds=2))
    assert sum(r.rounds for r in sampled) == 2  # one of three nodes per round


def test_fedavg_rejects_heterogeneous_swarm(nodes):
    other = NodeSetup(  # same data, another architecture
        3, "odd", ModelSpec("cnn-medium", 2, 3, 16), nodes[0].class_names, nodes[0].data,
        build_model(ModelSpec("cnn-medium", 2, 3, 16)))
    with pytest.raises(ConfigError, match="fedavg"):
        get_method("fedavg").run(ctx_of(list(nodes) + [other]))
    with pytest.raises(ConfigError, match="fraction"):
        get_method("fedavg", fraction=0.0)


def test_mtfl_private_patches_never_uploaded(nodes):
    model = build_model(nodes[0].spec)
    # cnn-small's BatchNorm layers are features.1 and features.5 (after its two convolutions); the
    # convolutions and the classifier's linear layers are never private
    params = {f"features.{i}.{p}" for i in (1, 5) for p in ("weight", "bias")}
    stats = {f"features.{i}.{p}" for i in (1, 5) for p in ("running_mean", "running_var", "num_batches_tracked")}
    assert private_keys(model, "params") == params and private_keys(model, "stats") == stats
    priv = private_keys(model, "all")
    assert priv == params | stats
    state = model.state_dict()
    task = MTFLTask(nodes[0].spec, {k: v for k, v in state.items() if k not in priv},
                    {k: v for k, v in state.items() if k in priv}, nodes[0].data, TrainConfig(epochs=1))
    up = mtfl_client_update(task)
    assert not (set(up.state) & priv)  # nothing private in the upload
    assert set(up.patches) == priv
    assert any(not torch.equal(up.patches[k], state[k]) for k in priv)  # patches were trained locally

    method = get_method("mtfl", private="params")
    ctx = ctx_of(nodes, rounds=2)
    run = method.train_rounds(ctx)
    res, global_state = method.results(ctx, run), run.state["global"]
    gp = private_keys(model, "params")
    assert not (set(global_state) & gp)
    expected_up = 2 * tensor_bytes({k: v for k, v in state.items() if k not in gp})
    assert all(r.bytes_up == expected_up for r in res)
    assert res[0].extra["private_bytes"] == tensor_bytes({k: state[k] for k in gp})



def test_mtfl_each_node_trains_and_deploys_its_own_patches(nodes):
    """Algorithm 1, lines 7-9 and 13-15: a node's next round starts from the global
    model with the patches it saved itself, and its deployed model is the global
    model with those patches, not another node's (the patches differ between nodes)."""
    tasks, uploads = [], []

    def capturing_map(fn, items):  # items: (node name, the node's task)
        out = [fn(t) for t in items]
        tasks.append([task for _, task in items])
        uploads.append(out)
        return out

    method = get_method("mtfl", private="params")
    ctx = ctx_of(nodes, rounds=2, map=capturing_map)
    run = method.train_rounds(ctx)
    n = len(nodes)
    assert [len(t) for t in tasks] == [n, n]
    keys = sorted(uploads[0][0].patches)
    assert keys and any(not torch.equal(uploads[0][0].patches[k], uploads[0][1].patches[k]) for k in keys)
    for k in range(n):
        for key in keys:  # round 2 starts from node k's own round-1 patches
            assert torch.equal(tasks[1][k].patches[key], uploads[0][k].patches[key]), (k, key)
        deployed = method.node_state(run.state, ctx, k)
        for key in keys:  # deployed: node k's own round-2 patches
            assert torch.equal(deployed[key], uploads[1][k].patches[key]), (k, key)
        for key, value in run.state["global"].items():
            assert torch.equal(deployed[key], value), (k, key)
        model = method.node_model(run.state, ctx, k)
        assert all(torch.equal(model.state_dict()[key], uploads[1][k].patches[key]) for key in keys)


def test_fedavg_adam_averages_moments(nodes):
    a = {"w": {"exp_avg": torch.ones(3), "exp_avg_sq": torch.full((3,), 4.0), "step": torch.tensor(2.0)}}
    b = {"w": {"exp_avg": torch.full((3,), 3.0), "exp_avg_sq": torch.zeros(3), "step": torch.tensor(4.0)}}
    avg = average_moments([a, b], [1.0, 3.0])
    assert torch.allclose(avg["w"]["exp_avg"], torch.full((3,), 2.5))
    assert torch.allclose(avg["w"]["exp_avg_sq"], torch.full((3,), 1.0))
    assert float(avg["w"]["step"]) == pytest.approx(3.5)

    method = get_method("mtfl-adam", private="params")
    ctx = ctx_of(nodes, rounds=1)
    run = method.train_rounds(ctx)
    res, moments = method.results(ctx, run), run.state["moments"]
    model = build_model(nodes[0].spec)
    federated = [n for n, _ in model.named_parameters() if n not in private_keys(model, "params")]
    assert sorted(moments) == sorted(federated)
    # the global moments are the size-weighted mean of what the clients uploaded: recompute one client's
    state = dict(model.state_dict())
    ups = []
    ctx = ctx_of(nodes, rounds=1)
    for k, node in enumerate(nodes):
        init = shared_init(ctx, node.spec).state_dict()
        gp = private_keys(model, "params")
        ups.append(mtfl_client_update(MTFLTask(node.spec, {k2: v for k2, v in init.items() if k2 not in gp},
                                               {k2: v for k2, v in init.items() if k2 in gp}, node.data,
                                               local_config(ctx, 1, round_seed(ctx.seed, 0, k)), adam=True)))
    ref = average_moments([u.moments for u in ups], [len(n.data.train) for n in nodes])
    name = federated[0]
    assert torch.allclose(ref[name]["exp_avg"], moments[name]["exp_avg"], atol=1e-6)
    # three tensors (weights + 2 moments) per federated parameter: ~3x FedAvg's upload
    fedavg_up = tensor_bytes({k: v for k, v in state.items() if k not in private_keys(model, "params")})
    assert 2.9 * fedavg_up < res[0].bytes_up < 3.1 * fedavg_up


def test_mtfl_adam_refuses_lr_it_would_ignore(nodes):
    """FedAvg-Adam's local optimiser runs at adam_lr, so a given lr changed nothing:
    the option is refused, naming the one that sets the rate."""
    with pytest.raises(ConfigError, match="adam_lr"):
        get_method("mtfl-adam", lr=0.5)
    assert get_method("mtfl", lr=0.5).lr == 0.5  # plain MTFL trains with SGD at lr
    a = get_method("mtfl-adam", adam_lr=0.5).train_rounds(ctx_of(nodes, rounds=1)).state["global"]
    b = get_method("mtfl-adam", adam_lr=1e-6).train_rounds(ctx_of(nodes, rounds=1)).state["global"]
    assert any(not torch.equal(a[k], b[k]) for k in a)  # adam_lr reaches the optimiser


def test_mtfl_adam_divergence_names_the_adam_rate(nodes):
    """When FedAvg-Adam's local training diverges, the error names the rate the
    Adam steps ran at (adam_lr), not the swarm's SGD rate it never used. (Adam's
    step is about adam_lr whatever the gradient, so a rate within the bound of
    1e6 diverges here from downloaded moments: a first moment of 1e30 over a
    second of 0 makes the step 1e6 * 1e30 / ~|g|, beyond float32.)"""
    from fol.errors import TrainingError

    model = build_model(nodes[0].spec)
    state = model.state_dict()
    priv = private_keys(model, "params")
    moments = {name: {"step": torch.tensor(1.0), "exp_avg": torch.full_like(p, 1e30),
                      "exp_avg_sq": torch.zeros_like(p)} for name, p in model.named_parameters() if name not in priv}
    task = MTFLTask(nodes[0].spec, {k: v for k, v in state.items() if k not in priv},
                    {k: v for k, v in state.items() if k in priv}, nodes[0].data,
                    TrainConfig(epochs=2, lr=0.0123), adam=True, adam_lr=1e6, global_moments=moments)
    with pytest.raises(TrainingError, match=r"learning rate 1e\+06") as err:
        mtfl_client_update(task)
    assert "0.0123" not in str(err.value)


@pytest.mark.parametrize("name", ["fedavg", "mtfl"])
def test_a_swarm_the_server_never_reaches_keeps_its_pretrained_models(nodes, name):
    # No node reaches the server in any round: there is no global model to deploy,
    # only the untrained initialization, so every node keeps (and scores) its own model.
    ctx = ctx_of(nodes, rounds=2, participants=[[], []])
    res = get_method(name, local_epochs=1).run(ctx)
    for node, r in zip(nodes, res):
        x, y = node.data.test.tensors()
        own = float((node.pretrained(x).argmax(1) == y).float().mean())
        assert r.kept_local and r.rounds == 0 and r.bytes_up == 0 == r.bytes_down
        assert r.train_flops == node.pretrain_flops > 0  # what its deployed model cost, as for `local`
        assert r.test_accuracy == pytest.approx(own)
        assert [p["bytes"] for p in r.extra["curve"]] == [0, 0]
    # once one round aggregates, every node deploys the global model (downloaded once at the end)
    late = get_method(name, local_epochs=1).run(ctx_of(nodes, rounds=2, participants=[[], [0]]))
    assert not any(r.kept_local for r in late) and late[1].bytes_down > 0 and late[1].rounds == 0
    assert late[1].extra["curve"][0]["bytes"] == 0 < late[1].extra["curve"][1]["bytes"]
