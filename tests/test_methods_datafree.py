"""DENSE and Co-Boosting: generator shapes, distillation towards the ensemble,
ensemble re-weighting, heterogeneous clients, one-shot accounting."""

from __future__ import annotations

import math

import pytest
import torch

from fol.accounting import model_bytes
from fol.errors import ConfigError
from fol.methods import SwarmContext, get_method
from fol.distill import kd_loss
from fol.ensemble import WeightedEnsemble
from fol.methods.dense import DataFreeConfig, Generator, distill_data_free
from fol.models import ModelSpec, build_model
from fol.train import TrainConfig, predict_logits

FAST = dict(epochs=4, g_steps=4, synthesis_batch=24, kd_batch=24)


@pytest.fixture(scope="module")
def nodes(tiny_swarm):
    return tiny_swarm("wildfire", 5, ["cnn-small", "cnn-small", "resnet-small"], psi=0.7, epochs=3)


@pytest.mark.parametrize("size,channels", [(16, 3), (32, 3), (18, 1)])
def test_generator_shapes(size, channels):
    g = Generator(nz=8, image_size=size, channels=channels, ngf=4)
    g.reset()
    x = g(torch.randn(5, 8))
    assert x.shape == (5, channels, size, size)
    assert float(x.detach().min()) >= 0.0 and float(x.detach().max()) <= 1.0


def test_weighted_ensemble_normalizes_weights():
    a, b = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    ens = WeightedEnsemble([a, b], torch.tensor([1.0, 3.0]))
    x = torch.randn(4, 2)
    assert torch.allclose(ens(x), (a(x) + 3 * b(x)) / 4, atol=1e-6)


def _disagreement(members, student, x):
    t = WeightedEnsemble(members)(x).detach()
    return float(kd_loss(predict_logits(student, x), t, 1.0))


@pytest.mark.parametrize("method", ["dense", "co-boosting"])
def test_distillation_lowers_student_ensemble_disagreement(nodes, method):
    members = [n.pretrained for n in nodes[:2]]
    x = torch.cat([n.data.test.images for n in nodes])  # real images: never seen by the server
    student = build_model(nodes[0].spec, seed=11)
    student.load_state_dict(nodes[0].pretrained.state_dict())
    with torch.no_grad():  # a student that confidently disagrees: always class 0 by a wide margin
        student.classifier[-1].bias += torch.tensor([6.0, -6.0])
    before = _disagreement(members, student, x)
    opts = {**get_method(method).options, **FAST}
    res = distill_data_free(members, student, (3, 16, 16), 2, DataFreeConfig(**opts, seed=0))
    after = _disagreement(members, res.student, x)
    assert after < before
    assert res.pool_size == FAST["epochs"] * FAST["synthesis_batch"] and res.server_flops > 0
    if method == "co-boosting":  # ensemble weights moved by signed-gradient steps, within [0, 1]
        w = torch.tensor(res.ensemble_weights)
        assert not torch.allclose(w, torch.full_like(w, 1 / 2)) and (w >= 0).all() and (w <= 1).all()
    else:
        assert res.ensemble_weights == pytest.approx([1 / 2] * 2)


def test_one_shot_accounting_with_heterogeneous_clients(nodes):
    ctx = SwarmContext(nodes=nodes, train=TrainConfig(epochs=1), rounds=3, seed=0,
                       participants=[[0, 2], [0, 1, 2], [1]])
    res = get_method("dense", epochs=2, g_steps=2, synthesis_batch=16).run(ctx)
    student_bytes = model_bytes(build_model(ModelSpec("cnn-small", 2, 3, 16)))
    assert [r.bytes_up for r in res] == [model_bytes(nodes[0].pretrained), 0, model_bytes(nodes[2].pretrained)]
    assert all(r.bytes_down == student_bytes for r in res)  # one broadcast of the student
    assert res[0].extra["student_arch"] == "cnn-small" and res[0].extra["members"] == 2
    assert all(math.isfinite(r.test_accuracy) for r in res)
    assert all(r.train_flops == n.pretrain_flops for r, n in zip(res, nodes, strict=True))


def test_options_are_validated():
    with pytest.raises(ConfigError, match="co-boosting.epochs"):
        get_method("co-boosting", epochs=0)
    with pytest.raises(ConfigError, match="dense"):
        get_method("dense", nonsense=1)
    with pytest.raises(ConfigError, match="perturb"):
        get_method("co-boosting", perturb="fgsm")
    # options the loop reads only from its second epoch on, or as a flag: a wrong type is refused here,
    # not met as a TypeError (or a string "false" read as true) deep in the distillation
    for name, value in [("weight_steps", "2"), ("weight_steps", 1.5), ("weight_steps", -1),
                        ("weight_decay_rate", "x"), ("weight_decay_rate", math.inf),
                        # a decay factor: above 1, weight_lr * rate**epoch grew (and overflowed near 1e300)
                        ("weight_decay_rate", 1.5), ("weight_decay_rate", 1e300),
                        ("adv_mask", "no"), ("cosine_lr", "false"), ("cosine_lr", 1)]:
        with pytest.raises(ConfigError, match=f"methods.dense.{name} must be"):
            get_method("dense", **{name: value})
    assert get_method("co-boosting", weight_steps=0, cosine_lr=False).options["weight_steps"] == 0
    # T^2 overflows float32 near 2e19: 1e30 passed --check and ended the run after pretraining with a
    # "non-finite loss" message blaming kd_lr; the range is FOL's temperature's
    for name, value in [("temperature", 1e30), ("temperature", 101.0), ("adv_temperature", 1e30),
                        ("adv_temperature", 1e-3)]:
        with pytest.raises(ConfigError, match=rf"^methods\.co-boosting\.{name} must be in \[0\.01, 100\] \("):
            get_method("co-boosting", **{name: value})
    assert get_method("dense", temperature=100.0, adv_temperature=0.01).options["temperature"] == 100.0
    assert get_method("co-boosting", weight_decay_rate=1).options["weight_decay_rate"] == 1.0


def test_epsilon_above_one_is_refused_as_the_radius_it_would_be():
    """An L-inf radius above 1 moves every pixel of a distillation batch to 0 or 1: epsilon = 8 (the
    published odseta 8, in units of 1/255) was accepted and Co-Boosting distilled on binary images."""
    from fol.methods.dense import WeightedEnsemble as FrozenEnsemble, _perturb

    ensemble = FrozenEnsemble([build_model(ModelSpec("cnn-small", 2, 3, 8), seed=0)])
    x = torch.rand(2, 3, 8, 8, generator=torch.Generator().manual_seed(0))
    assert _perturb(x, ensemble, None, "ods", 8.0, torch.Generator().manual_seed(0)).unique().numel() == 2
    small = _perturb(x, ensemble, None, "ods", 8 / 255, torch.Generator().manual_seed(0))
    assert float((small - x).abs().max()) <= 8 / 255 + 1e-6 and small.unique().numel() > 2
    with pytest.raises(ConfigError, match=r"^methods\.co-boosting\.epsilon must be at most 1 \(.*got 8\.0$"):
        get_method("co-boosting", epsilon=8)
    assert get_method("co-boosting", epsilon=1).options["epsilon"] == 1.0
    assert get_method("co-boosting").options["epsilon"] == pytest.approx(8 / 255)


@pytest.mark.parametrize(("field", "value", "match"), [
    # each ran silently (a negative temperature or epsilon, an unknown perturb read as "disagreement",
    # a decay factor above 1) or ended in torch's own ValueError (a negative lr_g) from the Python API
    ("temperature", -1.0, r"^DataFreeConfig\.temperature must be a positive number, got -1\.0$"),
    ("lr_g", -1e-3, r"^DataFreeConfig\.lr_g must be a positive number, got -0\.001$"),
    ("lr_g", 0.0, r"^DataFreeConfig\.lr_g must be a positive number"),
    ("epsilon", -1.0, r"^DataFreeConfig\.epsilon must be a positive number"),
    # the published code's odseta 8 means 8/255; epsilon = 8 ran, every distillation batch binarized
    ("epsilon", 8.0, r"^DataFreeConfig\.epsilon must be at most 1 \(the L-inf radius of the hard-sample step on "
                     r"images of values in \[0, 1\]; the published odseta 8 means 8/255 = 0\.0314\), got 8\.0$"),
    ("perturb", "fgsm", r"^DataFreeConfig\.perturb must be 'none', 'ods' or 'disagreement', got 'fgsm'$"),
    ("weight_decay_rate", 5.0, r"^DataFreeConfig\.weight_decay_rate must be at most 1, got 5\.0$"),
    ("weight_decay_rate", -0.5, r"^DataFreeConfig\.weight_decay_rate must be a non-negative number"),
    ("epochs", 10**30, r"^DataFreeConfig\.epochs must be at most 100,000"),  # range(10**30): a loop for ever
    ("nz", 0, r"^DataFreeConfig\.nz must be an integer >= 1, got 0$"),
    ("adv_mask", "no", r"^DataFreeConfig\.adv_mask must be true or false"),
    ("seed", -1, r"^DataFreeConfig\.seed must be an integer in 0\.\.4294967295, got -1$"),
    ("temperature", 1e30, r"^DataFreeConfig\.temperature must be in \[0\.01, 100\] \(the loss T\^2 \* KL"),
])
def test_data_free_config_checks_its_own_fields(field, value, match):
    with pytest.raises(ConfigError, match=match):
        DataFreeConfig(**{field: value})


def test_data_free_config_keeps_its_defaults_and_the_fol_synth_path():
    assert DataFreeConfig() == DataFreeConfig(epochs=15, g_steps=5, lr_g=1e-3, synthesis_batch=48, kd_batch=48)
    assert DataFreeConfig(epochs=0).epochs == 0  # fol.distill_epochs = 0 with distill_inputs = "synth"
    assert isinstance(DataFreeConfig(temperature=4).temperature, float)


def test_distill_data_free_refuses_a_synthesis_too_large_before_building_it():
    student = torch.nn.Linear(1, 1)  # never reached
    with pytest.raises(ConfigError, match=r"^DataFreeConfig: synthesis_batch / nz / ngf / epochs: .* GiB"):
        distill_data_free([student], student, (3, 16, 16), 2, DataFreeConfig(synthesis_batch=10**12))


def test_a_generator_too_large_to_hold_is_refused_before_it_is_built(nodes):
    ctx = SwarmContext(nodes=nodes, train=TrainConfig(epochs=1, seed=0))
    for options in (dict(ngf=100_000), dict(nz=10**9), dict(synthesis_batch=10**9)):
        with pytest.raises(ConfigError, match=r"^methods\.dense: synthesis_batch / nz / ngf / epochs: .* GiB \(limit 8 GiB\)$"):
            get_method("dense", epochs=1, **options).run(ctx)


@pytest.mark.parametrize("option", ["synthesis_batch", "nz", "ngf"])
def test_an_option_beyond_any_float_is_refused_as_too_large_in_one_line(option):
    """An integer option of 10**400 (TOML's have no size limit) made the size estimate an
    OverflowError traceback in `fol simulate --check`."""
    with pytest.raises(ConfigError, match=r"^methods\.dense: synthesis_batch / nz / ngf / epochs: [^\n]* \(limit 8 GiB\)$"):
        get_method("dense", **{option: 10**400}).check_inputs((3, 16, 16))


def test_budget_presets_and_their_share_of_the_published_budget():
    from fol.methods.dense import BUDGETS, budget_share, generator_samples

    dense_paper = get_method("dense", budget="paper").options
    assert (dense_paper["epochs"], dense_paper["g_steps"], dense_paper["synthesis_batch"]) == (200, 30, 256)
    assert (dense_paper["nz"], dense_paper["ngf"]) == (256, 64)
    assert generator_samples(get_method("co-boosting", budget="paper").options) == 200 * 30 * 128
    assert generator_samples(get_method("dense").options) == 15 * 5 * 48  # default: "tiny"
    assert budget_share("dense", "tiny") == pytest.approx(3600 / 1_536_000)
    assert budget_share("co-boosting", "tiny") == pytest.approx(3600 / 768_000)
    assert budget_share("dense", "medium") == pytest.approx(0.075)
    shares = [budget_share("dense", b) for b in [*BUDGETS, "paper"]]
    assert shares == sorted(shares) and shares[-1] == 1.0
    assert get_method("dense", budget="small", epochs=3).options["epochs"] == 3  # explicit option wins
    with pytest.raises(ConfigError, match="dense.budget"):
        get_method("dense", budget="huge")


def test_side_by_side_in_worker_processes_matches_running_alone(nodes):
    from fol.executors import make_executor
    from fol.methods.base import run_side_by_side

    ctx = SwarmContext(nodes=nodes, train=TrainConfig(epochs=1), rounds=1, seed=3)
    methods = [get_method("dense", epochs=2, g_steps=2, synthesis_batch=16),
               get_method("co-boosting", epochs=2, g_steps=2, synthesis_batch=16)]
    alone = [[r.test_accuracy for r in m.run(ctx)] for m in methods]
    calls = []
    with make_executor("process", workers=2, threads=1) as ex:
        def counting_map(fn, items, desc=None):
            calls.append(len(items))
            return ex.map(fn, items, desc=desc)
        together = run_side_by_side(methods, SwarmContext(nodes=nodes, train=TrainConfig(epochs=1), rounds=1,
                                                          seed=3, map=counting_map))
    assert calls == [2]  # one task per method, through the executor
    assert [[r.test_accuracy for r in res] for res in together] == alone
    assert [res[0].method for res in together] == ["dense", "co-boosting"]


def test_the_loop_trains_only_the_student_and_leaves_the_callers_models_as_they_were():
    """Members are frozen copies (backward passes compute input gradients only);
    the student's parameters are frozen during synthesis and handed back
    trainable; the caller's members keep their weights and flags."""
    spec = ModelSpec(arch="cnn-small", num_classes=2, input_size=16)
    members = [build_model(spec, seed=i) for i in range(2)]
    next(members[1].parameters()).requires_grad_(False)  # a caller's own flag, kept as it was
    before = [{k: v.clone() for k, v in m.state_dict().items()} for m in members]
    flags = [[p.requires_grad for p in m.parameters()] for m in members]
    student = build_model(spec, seed=5)
    start = {k: v.clone() for k, v in student.state_dict().items()}
    res = distill_data_free(members, student, (3, 16, 16), 2, DataFreeConfig(epochs=2, g_steps=2, synthesis_batch=8, kd_batch=8))
    assert res.student is student and all(p.requires_grad for p in student.parameters())
    assert any(not torch.equal(v, start[k]) for k, v in student.state_dict().items())
    for m, b, f in zip(members, before, flags):
        assert all(torch.equal(v, b[k]) for k, v in m.state_dict().items())
        assert [p.requires_grad for p in m.parameters()] == f


def test_generator_loss_terms_follow_the_published_code():
    """DENSE's L_adv counts only the samples where student and ensemble disagree;
    Co-Boosting's acts on every sample at T = 3 and weights the cross-entropy by
    (1 - p_y)^hs; the BN term enters with weight ``bn``."""
    from fol.methods.dense import generator_loss

    t_out = torch.tensor([[3.0, 0.0, 0.0], [0.0, 2.0, 0.0], [1.0, 0.0, 2.0], [0.0, 0.0, 1.0]])
    s_out = torch.tensor([[2.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 3.0], [2.0, 0.0, 0.0]])
    y = torch.tensor([0, 1, 1, 2])
    x = torch.zeros(4, 1)
    student = lambda _: s_out  # noqa: E731

    def kl(t):  # T^2 KL(softmax(t_out / T) || softmax(s_out / T)) per sample
        pt, ps = torch.softmax(t_out / t, 1), torch.softmax(s_out / t, 1)
        return (pt * (pt.log() - ps.log())).sum(1) * t * t

    adv_only = dict(bn=0.0, oh=0.0, adv=1.0)
    disagree = torch.tensor([0.0, 1.0, 0.0, 1.0])  # argmax: 0/0, 1/0, 2/2, 2/0
    dense = generator_loss(t_out, y, torch.zeros(()), student, x, DataFreeConfig(**adv_only, adv_mask=True))
    assert float(dense) == pytest.approx(float(-(kl(1.0) * disagree).mean()), rel=1e-5)
    cob = generator_loss(t_out, y, torch.zeros(()), student, x,
                         DataFreeConfig(**adv_only, adv_mask=False, adv_temperature=3.0))
    assert float(cob) == pytest.approx(float(-kl(3.0).mean()), rel=1e-5)
    ce = torch.nn.functional.cross_entropy(t_out, y, reduction="none")
    p_y = torch.softmax(t_out, 1)[torch.arange(4), y]
    oh_only = dict(bn=0.0, oh=1.0, adv=0.0)
    plain = generator_loss(t_out, y, torch.zeros(()), student, x, DataFreeConfig(**oh_only))
    hard = generator_loss(t_out, y, torch.zeros(()), student, x, DataFreeConfig(**oh_only, hard_sample_power=2.0))
    assert float(plain) == pytest.approx(float(ce.mean()), rel=1e-5)
    assert float(hard) == pytest.approx(float(((1 - p_y) ** 2 * ce).mean()), rel=1e-5)
    bn = generator_loss(t_out, y, torch.tensor(2.0), student, x, DataFreeConfig(bn=0.5, oh=0.0, adv=0.0))
    assert float(bn) == pytest.approx(1.0)


def test_bn_statistics_loss_matches_mean_and_variance():
    """DeepInversion's term: ||running_var - var|| + ||running_mean - mean|| at the
    input of every BatchNorm2d (biased batch variance over batch and pixels)."""
    from fol.methods.dense import _BNStats

    bn = torch.nn.BatchNorm2d(2).eval()
    bn.running_mean.copy_(torch.tensor([1.0, -1.0]))
    bn.running_var.copy_(torch.tensor([2.0, 0.5]))
    x = torch.randn(5, 2, 3, 3, generator=torch.Generator().manual_seed(0))
    hooks = _BNStats([torch.nn.Sequential(bn)])
    hooks.active = True
    bn(x)
    mean, var = x.mean((0, 2, 3)), x.transpose(0, 1).flatten(1).var(1, unbiased=False)
    expected = torch.linalg.vector_norm(bn.running_var - var) + torch.linalg.vector_norm(bn.running_mean - mean)
    assert float(hooks.pop()) == pytest.approx(float(expected), rel=1e-5)
    hooks.remove()


def test_ensemble_weight_steps_descend_the_pool_cross_entropy():
    """Co-Boosting's weight update moves weight towards the member that is right on
    the pool's labels (signed descent, clipped to [0, 1])."""
    from fol.methods.dense import WeightedEnsemble as Teacher, ensemble_weight_steps

    right, wrong = torch.nn.Linear(2, 2, bias=False), torch.nn.Linear(2, 2, bias=False)
    with torch.no_grad():
        right.weight.copy_(5 * torch.eye(2))
        wrong.weight.copy_(-5 * torch.eye(2))
    px = torch.randn(16, 2, generator=torch.Generator().manual_seed(0))
    py = px.argmax(1)
    ens = Teacher([right, wrong])
    one = ensemble_weight_steps(ens, px, py, 0.1, 1, 16)
    assert one.tolist() == pytest.approx([0.6, 0.4])
    assert ensemble_weight_steps(ens, px, py, 0.1, 10, 16).tolist() == pytest.approx([1.0, 0.0])


def test_a_hard_sample_power_that_zeroes_the_cross_entropy_is_refused():
    """Co-Boosting weights each sample's cross-entropy by (1 - p_y)^hs in float32: hard_sample_power =
    1e300 was accepted and made every weight 0 (the L_CE term vanished); refused above 100 now, where a
    sample of even odds still weighs 2^-100."""
    p_y = torch.tensor([0.5, 0.9, 0.1, 1e-3])
    assert int(torch.count_nonzero((1 - p_y).pow(1e300))) == 0
    assert float((1 - p_y[:1]).pow(100.0)) > 0
    # the message's "0 from 150": 2^-hs rounds to float32's smallest subnormal 2^-149 up to hs = 150 (it said
    # "0 past 149", but 2^-149.5 is 2^-149 in float32, not 0)
    assert float(torch.tensor(0.5).pow(149.5)) > 0 and float(torch.tensor(0.5).pow(150.0)) == 0
    with pytest.raises(ConfigError, match=r"^methods\.co-boosting\.hard_sample_power must be at most 100 \(the float32 "
                                          r"weight \(1 - p_y\)\^hs .* is 2\^-hs, 0 from 150; .* got 1e\+300$"):
        get_method("co-boosting", hard_sample_power=1e300)
    with pytest.raises(ConfigError, match=r"^DataFreeConfig\.hard_sample_power must be at most 100 "):
        DataFreeConfig(hard_sample_power=101.0)
    assert get_method("co-boosting", hard_sample_power=100.0).options["hard_sample_power"] == 100.0


def test_a_step_or_clip_that_acts_as_zero_in_float32_is_refused_as_a_tiny_learning_rate_is():
    """epsilon, weight_lr and grad_clip of 1e-300 were accepted: the hard-sample step and the
    ensemble-weight step are then 0 in float32 (nothing moves), and a clip of 1e-300 scales the
    generator's gradient to 0 (it stops learning, the opposite of grad_clip = 0, no clipping).
    Refused between 0 and 1e-10 now, as a tiny learning rate is; 0 stays accepted where it was."""
    from fol.methods.dense import _perturb

    torch.manual_seed(0)
    x = torch.rand(4, 3, 8, 8)
    ens = WeightedEnsemble([build_model(ModelSpec("cnn-small", num_classes=3, input_size=8))])
    gen = torch.Generator().manual_seed(0)
    assert torch.equal(_perturb(x, ens, ens, "ods", 1e-300, gen), x)  # the step of radius 1e-300 moves no pixel
    assert not torch.equal(_perturb(x, ens, ens, "ods", 1e-10, gen), x)  # 1e-10 moves the pixels below 2e-3
    w = torch.tensor([0.5, 0.25])
    assert torch.equal(w - 1e-300 * torch.ones(2), w)  # the ensemble weights' signed step of 1e-300
    g = Generator(4, 8, ngf=4)
    g(torch.randn(2, 4)).sum().backward()
    torch.nn.utils.clip_grad_norm_(g.parameters(), 1e-300)
    assert all(not bool(p.grad.any()) for p in g.parameters())  # every gradient is 0: Adam's step is 0

    for method, option, zero in (("dense", "epsilon", None), ("co-boosting", "epsilon", None),
                                 ("co-boosting", "weight_lr", "the weights are not fitted"),
                                 ("dense", "grad_clip", "no clipping"), ("co-boosting", "grad_clip", "no clipping")):
        accepted = rf"0 \({zero}\) or at least" if zero else "at least"
        with pytest.raises(ConfigError, match=rf"^methods\.{method}\.{option} must be {accepted} 1e-10 \(.*\), "
                                              rf"got 1e-300$"):
            get_method(method, **{option: 1e-300})
        assert get_method(method, **{option: 1e-10}).options[option] == 1e-10
        if zero:
            assert get_method(method, **{option: 0.0}).options[option] == 0.0
    with pytest.raises(ConfigError, match=r"^DataFreeConfig\.grad_clip must be 0 \(no clipping\) or at least 1e-10 "):
        DataFreeConfig(grad_clip=1e-20)
