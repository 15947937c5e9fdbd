"""The server-round skeleton: a complete method in one file (the one in
docs/baselines.md) registers and runs, and the loop's per-round curves."""

from __future__ import annotations

import math
import re
import types
from pathlib import Path

import pytest
import torch

from fol.accounting import tensor_bytes
from fol.defaults import MAX_SEED
from fol.errors import ConfigError
from fol.methods import SwarmContext, base, get_method
from fol.train import TrainConfig

DOC = Path(__file__).resolve().parents[1] / "docs" / "baselines.md"


@pytest.fixture(scope="module")
def nodes(tiny_swarm):
    return tiny_swarm("wildfire", 2, psi=0.5)


def _doc_method_source() -> str:
    text = DOC.read_text()
    section = text[text.index("## Adding a baseline in one file"):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def test_a_complete_method_in_one_file_from_the_docs(nodes, monkeypatch):
    source = _doc_method_source()
    assert len(source.splitlines()) < 80
    readme = (DOC.parents[1] / "README.md").read_text()  # the README quotes the length
    assert f"(FedPer, {len(source.splitlines())} lines)" in readme
    base.method_names()  # load the package's methods first ...
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))  # ... so that only fedper is dropped afterwards
    module = types.ModuleType("fedper_from_docs")
    exec(compile(source, str(DOC), "exec"), module.__dict__)
    method = get_method("fedper", local_epochs=1)
    ctx = SwarmContext(nodes=nodes, train=TrainConfig(epochs=1, lr=0.05), rounds=2, seed=1)
    run = method.train_rounds(ctx)
    res, state = method.results(ctx, run), run.state
    base_bytes = tensor_bytes(state["base"])
    for r in res:
        assert math.isfinite(r.test_accuracy) and r.rounds == 2
        assert r.bytes_up == 2 * base_bytes and r.bytes_down == 3 * base_bytes  # + the deployment download
        assert [p["round"] for p in r.extra["curve"]] == [1, 2]
    heads = state["heads"]
    key = next(iter(heads[0]))
    assert not torch.equal(heads[0][key], heads[1][key])  # the classifier stayed personal
    assert all(not k.startswith("classifier.3") for k in state["base"])


def test_curves_follow_the_ledger_and_can_be_switched_off(nodes):
    ctx = SwarmContext(nodes=nodes, train=TrainConfig(epochs=1, lr=0.05), rounds=3, seed=2,
                       participants=[[0, 1, 2], [1], [0, 1, 2]])
    res = get_method("fedavg", local_epochs=1).run(ctx)
    for r in res:
        curve = r.extra["curve"]
        assert [p["round"] for p in curve] == [1, 2, 3]
        assert curve[-1]["test_accuracy"] == pytest.approx(r.test_accuracy)
        assert curve[-1]["bytes"] == r.bytes_up + r.bytes_down
        assert all(a["bytes"] <= b["bytes"] for a, b in zip(curve, curve[1:]))
    # node 0 sat out round 2: its bytes do not grow there, node 1's do
    assert res[0].extra["curve"][1]["bytes"] == res[0].extra["curve"][0]["bytes"]
    assert res[1].extra["curve"][1]["bytes"] > res[1].extra["curve"][0]["bytes"]
    quiet = SwarmContext(nodes=nodes, train=TrainConfig(epochs=1), rounds=1, seed=2, evaluate_rounds=False)
    assert all("curve" not in r.extra for r in get_method("fedavg", local_epochs=1).run(quiet))


def test_rounds_option_overrides_the_context(nodes):
    res = get_method("mtfl", rounds=2).run(SwarmContext(nodes=nodes, train=TrainConfig(epochs=1), rounds=5, seed=0))
    assert all(r.rounds == 2 and len(r.extra["curve"]) == 2 for r in res)
    with pytest.raises(ConfigError, match="mtfl.rounds"):
        get_method("mtfl", rounds=0)


def test_per_node_seeds_never_repeat_within_a_run_and_keep_the_small_swarm_arithmetic():
    """Node k of seed s splits and pretrains with s * 1000 + k below 1,000 nodes and a
    server round shuffles with s * 7919 + r * 1009 + k below 1,009 (every measured figure
    used these); past those bounds the arithmetic would hand node 1,000 of seed s the
    stream of node 0 of seed s + 1, and node 1,009 of round r that of node 0 of round r + 1."""
    from fol.seeds import node_seed, round_seed

    assert [node_seed(5, k) for k in (0, 999)] == [5000, 5999]
    assert round_seed(5, 2, 1000, 8) == 5 * 7919 + 2 * 1009 + 1008
    nodes = [node_seed(s, k) for s in range(3) for k in range(2500)]
    assert len(set(nodes)) == len(nodes)
    rounds = [round_seed(0, r, k) for r in range(4) for k in range(2500)]
    assert len(set(rounds)) == len(rounds)
    big = node_seed(MAX_SEED, 10**6), round_seed(MAX_SEED, 10**6, 10**6, 0x51)
    assert all(2**48 <= v < 2**64 for v in big)  # above every arithmetic seed, within torch's 64 bits
    torch.Generator().manual_seed(big[1])


def test_a_salted_draw_never_takes_another_nodes_seed_of_that_round():
    """DM-PFL's personal phase draws with salt 0x51 (81): in a swarm of more than
    81 nodes, node k's draw fell on node k + 81's unsalted seed of the same round.
    The swarm's size now moves it off; a swarm of at most 81 nodes (every measured
    DM-PFL figure) keeps the arithmetic value."""
    from types import SimpleNamespace

    from fol.methods.dm_pfl import DMPFLMethod
    from fol.seeds import round_seed
    from fol.train import TrainConfig

    for n in (24, 81):
        assert [round_seed(3, 2, k, 0x51, n) for k in range(n)] == [3 * 7919 + 2 * 1009 + k + 81 for k in range(n)]
    for n in (82, 100, 1200):
        unsalted = {round_seed(3, r, k) for r in range(3) for k in range(n)}
        salted = {round_seed(3, r, k, 0x51, n) for r in range(3) for k in range(n)}
        assert len(unsalted) == len(salted) == 3 * n and not unsalted & salted
    ctx = SimpleNamespace(seed=3, nodes=[None] * 100, train=TrainConfig())
    method = DMPFLMethod()
    assert method.local_cfg(ctx, 2, 5, 0x51).seed != method.local_cfg(ctx, 2, 86).seed
    ctx.nodes = [None] * 24
    assert method.local_cfg(ctx, 2, 5, 0x51).seed == 3 * 7919 + 2 * 1009 + 86


def test_an_aggregation_of_participants_without_training_samples_divides_by_nothing():
    # Every participant trained on an empty split (weights 0): their updates are the
    # downloaded model, so the aggregate is their plain mean, not NaN.
    from fol.methods._common import weighted_average
    from fol.methods.dm_pfl import eq5_aggregate
    from fol.methods.hermes import intersection_aggregate

    states = [{"w": torch.tensor([1.0, 2.0]), "n": torch.tensor(3)}, {"w": torch.tensor([3.0, 4.0]), "n": torch.tensor(5)}]
    avg = weighted_average(states, [0, 0])
    assert torch.equal(avg["w"], torch.tensor([2.0, 3.0])) and int(avg["n"]) == 4
    masks = [{"w": torch.tensor([True, False])}, {"w": torch.tensor([True, True])}]
    out = intersection_aggregate(states, masks, [0.0, 0.0])
    assert torch.equal(out[0]["w"], torch.tensor([2.0, 2.0])) and torch.equal(out[1]["w"], torch.tensor([2.0, 4.0]))
    prev = {"w": torch.tensor([9.0, 9.0]), "n": torch.tensor(0)}
    eq5 = eq5_aggregate(prev, states, masks, [0.0, 0.0])
    assert torch.equal(eq5["w"], torch.tensor([2.0, 4.0])) and int(eq5["n"]) == 4  # Eq. 5 at equal sizes


def test_each_client_task_is_named_by_the_node_whose_data_it_trains_on(nodes):
    """map_nodes pairs each task with a node name (a divergence names that node): the server loop passes the
    names of the round's participants only, where every other caller passes every node's. In a round that
    leaves nodes out, each task still goes with the name of the node whose data it carries, in step."""
    seen = []

    def checking_map(fn, items, desc=None):  # items: (node name, the node's task)
        for name, task in items:
            seen.append(name)
            assert task.data is next(node for node in nodes if node.name == name).data, name
        return [fn(item) for item in items]

    ctx = SwarmContext(nodes=nodes, train=TrainConfig(epochs=1, lr=0.05), rounds=2, seed=3, map=checking_map,
                       participants=[[2, 0], [1]], evaluate_rounds=False)
    get_method("fedavg", local_epochs=1).run(ctx)
    assert seen == [nodes[0].name, nodes[2].name, nodes[1].name]
