"""Every baseline is registered and runs end to end on a tiny swarm."""

from __future__ import annotations

import math
import re

import pytest

from fol.errors import ConfigError
from fol.methods import SwarmContext, get_method, method_names
from fol.train import TrainConfig

BASELINES = {
    "fedavg": dict(local_epochs=1),
    "hermes": dict(local_epochs=1),
    "dm-pfl": dict(local_epochs=1),
    "dm-pfl+": dict(local_epochs=1),
    "mtfl": {},
    "mtfl-adam": {},
    "dense": dict(epochs=2, g_steps=2, synthesis_batch=16),
    "co-boosting": dict(epochs=2, g_steps=2, synthesis_batch=16),
    "pooled": {},  # the references (not federated), run like every baseline
    "pooled-ft": {},
    "nbr-pooled-ft": {},
}


@pytest.fixture(scope="module")
def ctx(tiny_swarm):
    nodes = tiny_swarm("hurricane", 6, psi=0.3)
    return SwarmContext(nodes=nodes, train=TrainConfig(epochs=1), rounds=2, seed=6)


def test_all_baselines_registered():
    assert set(BASELINES) <= set(method_names())


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_baseline_runs_end_to_end(ctx, name):
    method = get_method(name, **BASELINES[name])
    res = method.run(ctx)
    assert [r.node for r in res] == [n.name for n in ctx.nodes]
    for r in res:
        assert r.method == name
        assert math.isfinite(r.test_accuracy) and 0.0 <= r.test_accuracy <= 1.0
        assert math.isfinite(r.val_accuracy)
        assert r.bytes_up > 0 and r.bytes_down > 0 and r.train_flops > 0


def test_unknown_option_names_the_method():
    for name in BASELINES:
        with pytest.raises(ConfigError, match=name.replace("+", r"\+")):
            get_method(name, no_such_option=1)


@pytest.mark.parametrize("name, option", [("fedavg", "fraction"), ("fedavg", "lr"), ("hermes", "acc_threshold"),
                                          ("hermes", "lam"), ("dm-pfl", "sparsity"), ("mtfl-adam", "adam_lr")])
@pytest.mark.parametrize("value", [10**400, float("nan"), float("inf")], ids=["10**400", "nan", "inf"])
def test_a_number_option_beyond_the_float_range_is_one_config_error(name, option, value):
    # TOML integers have no size limit: 10**400 in [methods.<name>] must be refused in one line naming
    # the option, as nan and inf are, not escape as an OverflowError (or a numpy message)
    with pytest.raises(ConfigError, match=rf"^methods\.{re.escape(name)}\.{option} must be a .*number"):
        get_method(name, **{option: value})


@pytest.mark.parametrize("name, option", [("fedavg", "lr"), ("mtfl", "lr"), ("hermes", "lr"), ("hermes", "lam"),
                                          ("dm-pfl", "lr"), ("mtfl-adam", "adam_lr"), ("dense", "lr_g"),
                                          ("dense", "kd_lr"), ("dense", "adv"), ("co-boosting", "weight_lr"),
                                          ("co-boosting", "kd_weight_decay")])
def test_a_method_rate_or_loss_weight_is_bounded_as_fol_configs_are(name, option):
    # a baseline's learning rate or loss weight multiplies float32 tensors as FOLConfig's do: 1e38 was
    # accepted here (while fol.*_lr refuses it) and overflowed inside torch, or reached TrainConfig's
    # check only at run time, after the swarm had pretrained
    with pytest.raises(ConfigError, match=rf"^methods\.{re.escape(name)}\.{option} must be at most 1e\+06 "
                                          rf"\(it multiplies float32 tensors; every default is 1 or less\), got 1e\+38$"):
        get_method(name, **{option: 1e38})
    # the bound itself is allowed (a decay with a rate whose product with it stays below 1)
    method = get_method(name, **{option: 1e6}, **({"kd_lr": 1e-7} if option == "kd_weight_decay" else {}))
    values = lambda m: m.options if name in ("dense", "co-boosting") else vars(m)  # noqa: E731
    assert values(method)[option] == 1e6
    default = values(get_method(name))[option]  # what the message says of the defaults holds (DENSE's adv is 1)
    assert default is None or 0 <= default <= 1


@pytest.mark.parametrize("name, option", [("fedavg", "local_epochs"), ("fedavg", "rounds"), ("mtfl", "local_epochs"),
                                          ("hermes", "rounds"), ("dm-pfl", "iterations"), ("dense", "epochs"),
                                          ("dense", "g_steps"), ("co-boosting", "weight_steps")])
def test_a_method_count_of_epochs_steps_or_rounds_is_bounded_as_fol_configs_are(name, option):
    # 10**19 was accepted and ended in an OverflowError traceback (range, tqdm) at run time, after the
    # swarm had pretrained; 10**12 would have looped for ages
    with pytest.raises(ConfigError, match=rf"^methods\.{re.escape(name)}\.{option} must be at most 100,000, "
                                          rf"got 10000000000000000000$"):
        get_method(name, **{option: 10**19})
    get_method(name, **{option: 100_000})
