"""Checks for the derivation exercises: each compares with an independent computation."""

import pytest
import torch

from ppo.algorithm.advantages import compute_gae
from ppo.lm.exact.optimum import kl_regularised_optimum

LOGITS = torch.tensor([0.3, -1.2, 0.8, 0.0], dtype=torch.float64)
WEIGHTS = torch.tensor([2.0, -1.0, 0.5, 4.0], dtype=torch.float64)


def test_score_function_matches_autograd(exercise):
    scores = exercise.score_function(LOGITS)
    for action in range(4):
        logits = LOGITS.clone().requires_grad_(True)
        (expected,) = torch.autograd.grad(logits.log_softmax(-1)[action], logits)
        assert torch.allclose(scores[action], expected, atol=1e-12)


def test_expected_gradient_is_the_gradient_of_the_expected_weight(exercise):
    logits = LOGITS.clone().requires_grad_(True)
    (expected,) = torch.autograd.grad((logits.softmax(-1) * WEIGHTS).sum(), logits)
    assert torch.allclose(exercise.expected_gradient(LOGITS, WEIGHTS), expected, atol=1e-12)


@pytest.mark.parametrize("baseline", [-3.0, 0.7, 10.0, 1e3])
def test_a_constant_baseline_leaves_the_expected_gradient_unchanged(exercise, baseline):
    # E[∇log π · b] = b Σ_a ∇π(a) = b ∇1 = 0: bounded by float64 rounding of terms of size |b|
    with_baseline = exercise.expected_gradient(LOGITS, WEIGHTS - baseline)
    assert torch.allclose(with_baseline, exercise.expected_gradient(LOGITS, WEIGHTS), atol=1e-12 * (1 + abs(baseline)))
    assert exercise.expected_gradient(LOGITS, torch.full((4,), baseline, dtype=torch.float64)).abs().max() < 1e-12 * (1 + abs(baseline))


def a_rollout(seed: int):
    generator = torch.Generator().manual_seed(seed)
    return (torch.randn(7, generator=generator, dtype=torch.float64),
            torch.randn(7, generator=generator, dtype=torch.float64), 0.6)


@pytest.mark.parametrize("gamma, gae_lambda", [(0.9, 0.8), (0.99, 0.95), (0.9, 0.0), (0.9, 1.0)])
def test_the_discounted_sum_of_td_errors_is_the_lambda_return_minus_the_value(exercise, gamma, gae_lambda):
    rewards, values, last_value = a_rollout(0)
    by_sum = exercise.gae_as_discounted_sum(rewards, values, last_value, gamma, gae_lambda)
    by_returns = exercise.lambda_return_minus_value(rewards, values, last_value, gamma, gae_lambda)
    assert torch.allclose(by_sum, by_returns, atol=1e-12)
    column = lambda x: x.unsqueeze(1)  # noqa: E731  (T,) → (T, 1)
    next_values = torch.cat([values[1:], torch.tensor([last_value], dtype=torch.float64)])
    never = torch.zeros(7, dtype=torch.bool)
    library, _ = compute_gae(column(rewards), column(values), column(next_values), column(never), column(never),
                             gamma, gae_lambda)
    assert torch.allclose(by_sum, library.squeeze(1), atol=1e-12)


REFERENCE = torch.tensor([0.12, 0.5, 0.38], dtype=torch.float64)
SCORES = torch.tensor([4.0, 0.0, 1.0], dtype=torch.float64)


def library_optimum(beta: float) -> torch.Tensor:
    names = ("pizza", "salad", "soup")
    optimum = kl_regularised_optimum(dict(zip(names, REFERENCE.tolist())), dict(zip(names, SCORES.tolist())), beta)
    return torch.tensor([optimum.probabilities[name] for name in names], dtype=torch.float64)


def test_the_objective_is_the_expected_reward_minus_beta_kl(exercise):
    logits = torch.tensor([0.5, -0.5, 0.0], dtype=torch.float64)
    p = logits.softmax(-1)
    by_hand = float((p * SCORES).sum() - 0.5 * sum(p[i] * torch.log(p[i] / REFERENCE[i]) for i in range(3)))
    assert abs(float(exercise.kl_regularised_objective(logits, REFERENCE, SCORES, 0.5)) - by_hand) < 1e-12


@pytest.mark.parametrize("beta", [2.0, 0.5])
def test_gradient_ascent_finds_the_closed_form_optimum(exercise, beta):
    ascent = exercise.maximise_by_gradient_ascent(REFERENCE, SCORES, beta)
    closed = exercise.closed_form_optimum(REFERENCE, SCORES, beta)
    assert torch.allclose(closed, library_optimum(beta), atol=1e-12)
    assert torch.allclose(ascent.to(torch.float64), closed, atol=1e-3)  # ascent stops short: 400 Adam steps of 0.2 come within 2e-4


@pytest.mark.parametrize("beta", [3.0, 0.5, 1e-3])
def test_the_optimal_value_is_the_objective_at_the_optimum_and_beats_other_policies(exercise, beta):
    best = exercise.optimal_objective_value(REFERENCE, SCORES, beta)
    optimum = library_optimum(beta)
    kl = (torch.xlogy(optimum, optimum) - optimum * REFERENCE.log()).sum()  # 0 log 0 = 0 where π* underflows
    assert abs(best - float(optimum @ SCORES - beta * kl)) < 1e-9
    others = torch.randn(200, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64).softmax(-1)
    values = others @ SCORES - beta * (others * (others / REFERENCE).log()).sum(dim=1)
    assert float(values.max()) <= best + 1e-12
    assert torch.isfinite(exercise.closed_form_optimum(REFERENCE, SCORES, beta)).all()
