"""The training loop's batch-norm statistics: after :func:`fit`, the running
mean and variance of every layer that trained are those of the final weights
on the training inputs, not an exponential average over moving weights; a
network kept frozen in eval mode (gate learning) keeps its own statistics."""

from __future__ import annotations

import copy

import torch
from torch import nn

from fol.pruning import _FrozenNet
from fol.train import TrainConfig, evaluate, fit, recompute_bn_stats


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(4, 2))


def _data(n: int = 96) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    x = torch.rand(n, 3, 8, 8, generator=g) * 3 + 1  # far from the initial statistics (mean 0, variance 1)
    return x, (x[:, 0].mean((1, 2)) > 2.5).long()


def _population_stats(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        h = model[0](x)  # the input of the batch-norm layer
    return h.mean((0, 2, 3)), h.var((0, 2, 3), unbiased=True)


def test_fit_leaves_the_statistics_of_the_final_weights() -> None:
    x, y = _data()
    model = _net()
    fit(model, (x, y), TrainConfig(epochs=3, batch_size=16, lr=0.1, seed=0))
    mean, var = _population_stats(model, x)
    bn = model[1]
    assert torch.allclose(bn.running_mean, mean, atol=1e-5)
    # One pass of batches of 96 (< 512): the batch's unbiased variance is the population's.
    assert torch.allclose(bn.running_var, var, rtol=1e-4, atol=1e-6)
    assert bn.momentum == 0.1 and not model.training  # restored; fit leaves eval mode

    # PyTorch's own running average (what fit kept before) is not that: the test can fail.
    ema = _net()
    ema.train()
    opt = torch.optim.SGD(ema.parameters(), lr=0.1, momentum=0.9)
    for _ in range(3):
        for i in range(0, 96, 16):
            loss = nn.functional.cross_entropy(ema(x[i:i + 16]), y[i:i + 16])
            opt.zero_grad()
            loss.backward()
            opt.step()
    mean_ema, _ = _population_stats(ema, x)
    assert not torch.allclose(ema[1].running_mean, mean_ema, atol=1e-3)


def test_early_stopping_keeps_the_statistics_of_the_restored_weights() -> None:
    x, y = _data()
    model = _net()
    fit(model, (x[:64], y[:64]), TrainConfig(epochs=6, batch_size=16, lr=0.2, patience=2, seed=0),
        val=(x[64:], y[64:]))
    mean, _ = _population_stats(model, x[:64])
    assert torch.allclose(model[1].running_mean, mean, atol=1e-5)


def test_a_frozen_network_keeps_its_statistics() -> None:
    x, y = _data()
    net = _net()
    fit(net, (x, y), TrainConfig(epochs=1, seed=0))
    before = copy.deepcopy(net.state_dict())
    scale = nn.Parameter(torch.ones(2))

    def objective(model: nn.Module, batch) -> torch.Tensor:
        return nn.functional.cross_entropy(model(batch[0]) * scale, batch[1])

    wrapper = _FrozenNet(net)
    fit(wrapper, (x * 2, y), TrainConfig(epochs=2, optimizer="adam", lr=0.01), objective=objective, params=[scale])
    assert all(torch.equal(v, before[k]) for k, v in net.state_dict().items())
    assert not torch.equal(scale.detach(), torch.ones(2))  # the gate did train


def test_recompute_restores_modes_and_never_makes_a_batch_of_one() -> None:
    x, _ = _data(9)
    model = _net().eval()
    recompute_bn_stats(model, x, batch_size=4)  # 9 = 4 + 4 + 1 would end on one sample: 3 + 3 + 3 instead
    assert not model.training and not model[1].training and model[1].momentum == 0.1
    mean, _ = _population_stats(model, x)
    assert torch.allclose(model[1].running_mean, mean, atol=1e-5)  # equal batches: the population mean


def test_recompute_never_ends_on_one_sample_when_both_steps_would() -> None:
    # 13 = 4 + 4 + 4 + 1 and 13 = 3 + 3 + 3 + 3 + 1: the last sample joins the batch before (3 + 3 + 3 + 4);
    # a batch of one would stop BatchNorm1d in training mode.
    bn = nn.BatchNorm1d(2)
    x = torch.arange(26, dtype=torch.float32).reshape(13, 2) ** 1.5
    recompute_bn_stats(bn, x, batch_size=4)
    chunk_means = torch.stack([x[0:3].mean(0), x[3:6].mean(0), x[6:9].mean(0), x[9:13].mean(0)])
    assert torch.allclose(bn.running_mean, chunk_means.mean(0))  # the average over those four batches


def test_evaluate_restores_each_layers_mode_also_after_an_error() -> None:
    """A caller that keeps one batch-norm layer frozen (eval) inside a training
    model gets that mix back from evaluate(); a forward that raises leaves the
    caller's modes too, and predict_logits' batching does not change a logit."""
    from fol.train import evaluate, predict_logits

    model = _net().train()
    model[1].eval()  # frozen statistics inside a training model
    x, y = _data(40)
    expected = {m: m.training for m in model.modules()}
    res = evaluate(model, x, y)
    assert {m: m.training for m in model.modules()} == expected
    assert res.n == 40 and 0.0 <= res.accuracy <= 1.0
    try:
        predict_logits(model, x[:, :2])  # wrong channel count: the first convolution raises
    except RuntimeError:
        pass
    else:  # pragma: no cover
        raise AssertionError("a forward on two channels should raise")
    assert {m: m.training for m in model.modules()} == expected
    assert torch.allclose(predict_logits(model, x, batch_size=7), predict_logits(model, x, batch_size=512), atol=1e-6)
    from fol.accounting import forward_macs

    assert forward_macs(model, (3, 8, 8)) > 0
    assert {m: m.training for m in model.modules()} == expected  # counting MACs restores them the same way


def test_early_stopping_restores_the_earliest_of_equally_good_epochs() -> None:
    """Validation accuracies 0.531, 0.875, ..., 0.969 (epoch 6), 0.938, 0.969 (epoch 8), ...:
    the weights restored are exactly those after epoch 6, the first of the tie."""
    x, y = _data()
    train, val = (x[:64], y[:64]), (x[64:], y[64:])
    cfg = dict(batch_size=16, lr=0.2, seed=0)
    model = _net()
    hist = fit(model, train, TrainConfig(epochs=12, patience=3, **cfg), val=val)
    best = max(hist.val_accuracy)
    assert hist.stopped_early and hist.val_accuracy.count(best) >= 2  # a tie to break
    assert hist.best_epoch == hist.val_accuracy.index(best)
    again = _net()  # the same run cut after the best epoch, nothing restored
    fit(again, train, TrainConfig(epochs=hist.best_epoch + 1, **cfg), val=val)
    assert all(torch.equal(v, again.state_dict()[k]) for k, v in model.state_dict().items())
    assert evaluate(model, *val).accuracy == best
