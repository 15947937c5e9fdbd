"""Defining properties of FOL's stages 2 (Top-K), 3 (ensemble) and 4 (distillation)."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fol.config import FOLConfig
from fol.distill import distill, kd_loss
from fol.ensemble import WeightedEnsemble, ensemble_logits, fit_ensemble_weights
from fol.errors import ConfigError
from fol.models import ModelSpec, build_model
from fol.stages import Candidate, select_top_k
from fol.train import TrainConfig, predict_logits


# ------------------------------------------------------------------ ensemble


@pytest.mark.parametrize("seed", range(5))
def test_ensemble_weights_on_simplex_and_no_worse_than_best_member(seed: int) -> None:
    g = torch.Generator().manual_seed(seed)
    n, c, k = 200, 3, 4
    y = torch.randint(0, c, (n,), generator=g)
    onehot = F.one_hot(y, c).float()
    # Members of different quality: noisy versions of the true one-hot logits.
    members = [onehot * (3.0 - i) + torch.randn(n, c, generator=g) * (0.5 + i) for i in range(k)]
    w = fit_ensemble_weights(members, y, steps=200, lr=0.1)
    assert w.shape == (k,)
    assert (w >= 0).all()
    assert float(w.sum()) == pytest.approx(1.0, abs=1e-6)
    ens_loss = float(F.cross_entropy(ensemble_logits(members, w), y))
    best_member = min(float(F.cross_entropy(m, y)) for m in members)
    assert ens_loss <= best_member + 1e-6


def test_ensemble_weights_find_the_best_mix_when_no_single_member_is_best() -> None:
    """Above, the best member is also the best ensemble, so the fall-back to the best
    vertex passes whatever the weight fit does. Here member A knows the first 200
    images, B the last 100 and C is noise: the lowest cross-entropy is an interior
    mix of A and B, found independently by a grid search over the simplex (step 0.01),
    and the fitted weights must reach it."""
    g = torch.Generator().manual_seed(0)
    n, c = 300, 3
    y = torch.randint(0, c, (n,), generator=g)
    onehot = F.one_hot(y, c).float()
    first = (torch.arange(n) < 200).float()[:, None]
    members = [4 * onehot * first + torch.randn(n, c, generator=g) * 0.5,
               4 * onehot * (1 - first) + torch.randn(n, c, generator=g) * 0.5,
               torch.randn(n, c, generator=g) * 2.0]
    grid = torch.tensor([(i / 100, j / 100, 1 - (i + j) / 100) for i in range(101) for j in range(101 - i)])
    mixed = torch.einsum("gk,knc->gnc", grid, torch.stack(members))  # every grid point's ensemble logits
    losses = F.cross_entropy(mixed.permute(0, 2, 1), y.expand(len(grid), n), reduction="none").mean(1)
    best = int(losses.argmin())
    vertices = [float(F.cross_entropy(m, y)) for m in members]
    assert float(losses[best]) < min(vertices) - 0.1  # a real mix wins, by a margin
    for vertex in (False, True):
        w = fit_ensemble_weights(members, y, vertex=vertex)
        fitted = float(F.cross_entropy(ensemble_logits(members, w), y))
        assert fitted <= float(losses[best]) + 0.005
        assert float((w - grid[best]).abs().max()) < 0.03, (w, grid[best])


def test_ensemble_prefers_the_informative_member() -> None:
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (300,), generator=g)
    good = F.one_hot(y, 2).float() * 4
    noise = torch.randn(300, 2, generator=g) * 4
    w = fit_ensemble_weights([noise, good], y)
    assert w[1] > w[0]


def test_weighted_ensemble_module_combines_member_logits() -> None:
    torch.manual_seed(0)
    a, b = nn.Linear(5, 3), nn.Linear(5, 3)
    w = torch.tensor([0.25, 0.75])
    x = torch.randn(7, 5)
    ens = WeightedEnsemble([a, b], w)
    torch.testing.assert_close(ens(x), 0.25 * a(x) + 0.75 * b(x))
    with pytest.raises(ValueError):
        WeightedEnsemble([a], w)
    # The output divides by the weights' sum: all-zero weights gave NaN logits, negative ones
    # flipped a member's sign, NaN ones gave NaN, and no member at all a NaN or an index error.
    for bad in ([0.0, 0.0], [-0.5, 1.5], [float("nan"), 1.0], [float("inf"), 1.0]):
        with pytest.raises(ValueError, match=r"^an ensemble needs at least one member and finite weights >= 0 "):
            WeightedEnsemble([a, b], torch.tensor(bad))
    with pytest.raises(ValueError, match=r"^an ensemble needs at least one member"):
        WeightedEnsemble([])
    torch.testing.assert_close(WeightedEnsemble([a, b], torch.tensor([0.0, 2.0]))(x), b(x))


# ------------------------------------------------------------------ distillation


def _student_and_teacher() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    spec = ModelSpec("cnn-small", num_classes=2, input_size=16)
    student = build_model(spec, seed=0)
    teacher = build_model(spec, seed=1)
    x = torch.rand(96, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    return student, x, predict_logits(teacher, x) * 3


def test_distillation_lowers_kl_to_teacher() -> None:
    student, x, teacher_logits = _student_and_teacher()
    res = distill(student, x, teacher_logits, TrainConfig(epochs=15, lr=0.05, batch_size=32, weight_decay=0.0), 3.0, 0.0)
    assert res.kl_after < 0.5 * res.kl_before
    # The argument is not modified.
    assert all(torch.equal(p, q) for p, q in zip(student.parameters(), _student_and_teacher()[0].parameters(), strict=True))


def test_large_lambda_keeps_student_near_its_start() -> None:
    student, x, teacher_logits = _student_and_teacher()
    cfg = TrainConfig(epochs=8, lr=0.02, batch_size=32, weight_decay=0.0)
    free = distill(student, x, teacher_logits, cfg, 3.0, lam=0.0)
    held = distill(student, x, teacher_logits, cfg, 3.0, lam=10.0)
    # both students are kept (a reverted one has drift 0 whatever the proximal term did) and
    # the held one still learned from the teacher: the term holds it near, not back
    assert not free.reverted and not held.reverted
    assert held.kl_after < held.kl_before
    assert 0 < held.drift < 0.25 * free.drift
    for res in (free, held):  # drift is ||theta - theta_prev||_2 of the returned student
        with torch.no_grad():
            dist = sum(((p - q) ** 2).sum() for p, q in zip(res.student.parameters(), student.parameters()))
        assert res.drift == pytest.approx(float(dist.sqrt()), rel=1e-5)


def test_kd_loss_is_zero_for_identical_logits_and_positive_otherwise() -> None:
    z = torch.randn(10, 4)
    assert float(kd_loss(z, z, 2.0)) == pytest.approx(0.0, abs=1e-6)
    assert float(kd_loss(z, -z, 2.0)) > 0.1


def test_kd_loss_is_t_squared_kl_from_teacher_to_student() -> None:
    """The documented definition, written out by hand: ``T^2 * sum_c p_t log(p_t / p_s)``
    with ``p = softmax(logits / T)``, averaged over the batch. KL is not symmetric, so
    these logits tell KL(teacher || student) from KL(student || teacher); T = 4 tells
    the T^2 factor (Hinton et al.'s gradient scale) from none."""
    student = torch.tensor([[4.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    teacher = torch.tensor([[0.0, 8.0, 0.0], [0.0, 0.0, 3.0]])
    for temperature in (1.0, 4.0):
        p_t = torch.softmax(teacher / temperature, dim=1)
        p_s = torch.softmax(student / temperature, dim=1)
        per_sample = temperature**2 * (p_t * (p_t / p_s).log()).sum(1)
        reverse = temperature**2 * (p_s * (p_s / p_t).log()).sum(1)
        assert float((per_sample - reverse).abs().min()) > 0.05  # the example tells the two directions apart
        torch.testing.assert_close(kd_loss(student, teacher, temperature, reduction="none"), per_sample)
        assert float(kd_loss(student, teacher, temperature)) == pytest.approx(float(per_sample.mean()), rel=1e-5)


# ------------------------------------------------------------------ Top-K


def _linear(weight: torch.Tensor) -> nn.Linear:
    lin = nn.Linear(weight.shape[1], weight.shape[0], bias=False)
    with torch.no_grad():
        lin.weight.copy_(weight)
    return lin


def test_top_k_ranks_by_score_then_cosine_to_own_logits() -> None:
    g = torch.Generator().manual_seed(0)
    w_own = torch.randn(3, 6, generator=g)
    val_x = torch.randn(40, 6, generator=g)
    own = _linear(w_own)
    aligned = _linear(2.0 * w_own)  # same logit direction: cosine 1
    orthogonalish = _linear(torch.randn(3, 6, generator=g))
    opposite = _linear(-w_own)  # cosine -1
    own_logits = predict_logits(own, val_x)
    cands = [
        Candidate("z-opposite", opposite, score=0.8),
        Candidate("y-random", orthogonalish, score=0.8),
        Candidate("x-aligned", aligned, score=0.8),
        Candidate("w-best", opposite, score=0.9),  # a higher score beats any cosine
    ]
    top = select_top_k(cands, 3, own_logits, val_x)
    assert [c.name for c in top] == ["w-best", "x-aligned", "y-random"]
    assert top[1].cosine == pytest.approx(1.0, abs=1e-6)
    assert cands[0].cosine == pytest.approx(-1.0, abs=1e-6)


def test_top_k_full_tie_is_broken_by_name_deterministically() -> None:
    lin = _linear(torch.eye(3))
    x = torch.randn(5, 3)
    cands = [Candidate(n, copy.deepcopy(lin), score=0.5) for n in ("b", "c", "a")]
    assert [c.name for c in select_top_k(cands, 2, predict_logits(lin, x), x)] == ["a", "b"]


# ------------------------------------------------------------------ config


def test_config_rejects_unknown_and_invalid_fields(tmp_path) -> None:
    with pytest.raises(ConfigError, match="unknown key"):
        FOLConfig.from_dict({"topk": 3})
    with pytest.raises(ConfigError, match="top_k"):
        FOLConfig(top_k=0)
    with pytest.raises(ConfigError, match="prune_ratio"):
        FOLConfig(prune_ratio=1.0)
    with pytest.raises(ConfigError, match="temperature"):
        FOLConfig.from_dict({"temperature": "hot"})
    bad = tmp_path / "fol.toml"
    bad.write_text("[fol]\ntop_k = \n")
    with pytest.raises(ConfigError, match="fol.toml"):
        FOLConfig.from_toml(bad)
    good = tmp_path / "good.toml"
    good.write_text("[fol]\ntop_k = 2\nlam = 0.5\n")
    cfg = FOLConfig.from_toml(good)
    assert (cfg.top_k, cfg.lam) == (2, 0.5)


def test_distillation_keeps_the_student_when_it_already_matches_the_teacher() -> None:
    student, x, _ = _student_and_teacher()
    own_logits = predict_logits(student, x)
    res = distill(student, x, own_logits, TrainConfig(epochs=3, lr=0.05, batch_size=32, weight_decay=0.0), 3.0, 0.0)
    assert res.kl_before == pytest.approx(0.0, abs=1e-6)
    assert res.reverted and res.student is student and res.drift == 0.0


# ------------------------------------------------------------------ a round's seeds


def test_a_neighbours_alignment_draws_from_the_seed_the_round_and_its_name_only() -> None:
    """docs/reproducibility.md and docs/fol-algorithm.md (Rounds): a neighbour's fine-tuning,
    gate learning and post fine-tuning are seeded from the config's seed, the round and the
    neighbour's name, so the same inputs give the same aligned model, bit for bit; renaming the
    neighbour (a file's stem in ``fol personalize``), another round or another seed change the
    draws; the receiving node's own name is not part of them."""
    from fol.checkpoint import ModelCard
    from fol.data import make_synthetic, split_node
    from fol.personalize import NodeState, Received, RoundReport, align_candidates

    pool = make_synthetic("hurricane", 40, seed=0, image_size=8)
    data = split_node(pool, seed=0)
    spec = ModelSpec("cnn-small", len(pool.class_names), 3, 8)
    own, neighbour = build_model(spec, seed=0), build_model(spec, seed=1)
    cfg = FOLConfig(finetune_epochs=1, post_finetune_epochs=1, gate_epochs=1)

    def aligned(name: str, round_: int = 1, node: str = "me", c: FOLConfig = cfg) -> torch.Tensor:
        state = NodeState.from_pretrained(node, copy.deepcopy(own), spec, pool.class_names, data)
        item = Received(name, copy.deepcopy(neighbour), ModelCard(spec, pool.class_names, producer="x"))
        cands = align_candidates(state, [item], round_, c, True, RoundReport(node, round_, "fol"))
        return torch.cat([p.detach().flatten() for p in cands[1].model.parameters()])

    first = aligned("n1")
    # the same inputs but for the receiver's name, which draws nothing: the same model
    assert torch.equal(first, aligned("n1", node="another node"))
    assert not torch.equal(first, aligned("n2"))  # a renamed neighbour: other draws
    assert not torch.equal(first, aligned("n1", round_=2))
    assert not torch.equal(first, aligned("n1", c=cfg.replace(seed=1)))
