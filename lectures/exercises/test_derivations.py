"""Checks for the derivation exercises: each compares with an independent computation."""

import pytest
import torch

from feedback import check_close
from ppo.algorithm.advantages import compute_gae
from ppo.lm.exact.optimum import kl_regularised_optimum

LOGITS = torch.tensor([0.3, -1.2, 0.8, 0.0], dtype=torch.float64)
WEIGHTS = torch.tensor([2.0, -1.0, 0.5, 4.0], dtype=torch.float64)


def test_score_function_matches_autograd(exercise):
    scores = exercise.score_function(LOGITS)
    probabilities = LOGITS.softmax(-1)
    for action in range(4):
        logits = LOGITS.clone().requires_grad_(True)
        (expected,) = torch.autograd.grad(logits.log_softmax(-1)[action], logits)
        onehot = torch.eye(4, dtype=torch.float64)[action]
        check_close(scores[action], expected, f"score_function(logits)[{action}] (∇_z log π({action}) = e_{action} − π)", {
            "the softmax term forgotten (∇ log π(a) = e_a − π, not e_a)": onehot,
            "the gradient of π(a), not of log π(a) (π(a)·(e_a − π))": probabilities[action] * (onehot - probabilities),
            "the logits in place of the probabilities (e_a − z)": onehot - LOGITS,
        }, atol=1e-12, rtol=0.0)


def expected_gradient_mistakes(logits, weights) -> dict[str, torch.Tensor]:
    """The gradient each usual mistake of the score-function derivation gives."""
    probabilities = logits.softmax(-1)
    scores = torch.eye(len(logits), dtype=logits.dtype) - probabilities.unsqueeze(0)  # (A, A): row a is ∇log π(a)
    return {
        "the sum over actions without the weights π(a) (an expectation weighs each action by its probability)":
            (weights.unsqueeze(1) * scores).sum(0),
        "a plain mean over the actions in place of the expectation under π": (weights.unsqueeze(1) * scores).mean(0),
        "∇π(a) in place of ∇log π(a) inside the expectation (π(a) counted twice)":
            (probabilities.unsqueeze(1) ** 2 * scores * weights.unsqueeze(1)).sum(0),
    }


def test_expected_gradient_is_the_gradient_of_the_expected_weight(exercise):
    logits = LOGITS.clone().requires_grad_(True)
    (expected,) = torch.autograd.grad((logits.softmax(-1) * WEIGHTS).sum(), logits)
    check_close(exercise.expected_gradient(LOGITS, WEIGHTS), expected, "expected_gradient (Σ_a π(a) w(a) ∇log π(a))",
                expected_gradient_mistakes(LOGITS, WEIGHTS), atol=1e-12, rtol=0.0)


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
    expected = library_gae(rewards, values, last_value, gamma, gae_lambda)
    mistakes = {
        "λ forgotten: a discount of γ^k alone, not (γλ)^k (that is λ = 1, the Monte Carlo advantage)":
            library_gae(rewards, values, last_value, gamma, 1.0),
        "the TD errors alone (that is λ = 0)": library_gae(rewards, values, last_value, gamma, 0.0),
        "no bootstrap from the last value (V(s_T) taken as 0)": library_gae(rewards, values, 0.0, gamma, gae_lambda),
        "γ forgotten in the discount: λ^k, not (γλ)^k": library_gae(rewards, values, last_value, gamma, gae_lambda,
                                                                    discount_gamma=False),
    }
    check_close(by_sum, expected, f"gae_as_discounted_sum(γ = {gamma}, λ = {gae_lambda})", mistakes, atol=1e-12, rtol=0.0)
    check_close(by_returns, expected, f"lambda_return_minus_value(γ = {gamma}, λ = {gae_lambda})",
                {**mistakes, "the λ-return itself, without − V(s_t)": expected + values}, atol=1e-12, rtol=0.0)


def library_gae(rewards, values, last_value, gamma, gae_lambda, discount_gamma=True) -> torch.Tensor:
    """GAE by the library's compute_gae on one environment that never ends; discount_gamma=False gives the
    mistake of a discount λ^k with γ kept only in the TD errors."""
    column = lambda x: x.unsqueeze(1)  # noqa: E731  (T,) → (T, 1)
    next_values = torch.cat([values[1:], torch.tensor([last_value], dtype=torch.float64)])
    never = torch.zeros(len(rewards), dtype=torch.bool)
    if not discount_gamma:
        deltas = rewards + gamma * next_values - values
        return torch.stack([sum(gae_lambda ** k * deltas[t + k] for k in range(len(rewards) - t))
                            for t in range(len(rewards))])
    advantages, _ = compute_gae(column(rewards), column(values), column(next_values), column(never), column(never),
                                gamma, gae_lambda)
    return advantages.squeeze(1)


REFERENCE = torch.tensor([0.12, 0.5, 0.38], dtype=torch.float64)
SCORES = torch.tensor([4.0, 0.0, 1.0], dtype=torch.float64)


def library_optimum(beta: float) -> torch.Tensor:
    names = ("pizza", "salad", "soup")
    optimum = kl_regularised_optimum(dict(zip(names, REFERENCE.tolist())), dict(zip(names, SCORES.tolist())), beta)
    return torch.tensor([optimum.probabilities[name] for name in names], dtype=torch.float64)


def test_the_objective_is_the_expected_reward_minus_beta_kl(exercise):
    logits = torch.tensor([0.5, -0.5, 0.0], dtype=torch.float64)
    p = logits.softmax(-1)
    kl = sum(p[i] * torch.log(p[i] / REFERENCE[i]) for i in range(3))
    by_hand = float((p * SCORES).sum() - 0.5 * kl)
    check_close(float(exercise.kl_regularised_objective(logits, REFERENCE, SCORES, 0.5)), by_hand,
                "kl_regularised_objective(β = 0.5): E_π[s] − β KL(π ‖ π_ref)", {
                    "+ β KL in place of − β KL": float((p * SCORES).sum() + 0.5 * kl),
                    "KL(π_ref ‖ π) in place of KL(π ‖ π_ref)":
                        float((p * SCORES).sum() - 0.5 * (REFERENCE * (REFERENCE / p).log()).sum()),
                    "β forgotten (the KL at weight 1)": float((p * SCORES).sum() - kl),
                    "the expected reward alone, without the KL": float((p * SCORES).sum()),
                }, atol=1e-12, rtol=0.0)


@pytest.mark.parametrize("beta", [2.0, 0.5])
def test_gradient_ascent_finds_the_closed_form_optimum(exercise, beta):
    ascent = exercise.maximise_by_gradient_ascent(REFERENCE, SCORES, beta)
    closed = exercise.closed_form_optimum(REFERENCE, SCORES, beta)
    optimum = library_optimum(beta)
    check_close(closed, optimum, f"closed_form_optimum(β = {beta}): π* ∝ π_ref exp(s / β)", {
        "exp(β s) in place of exp(s / β)": (REFERENCE.log() + beta * SCORES).softmax(-1),
        "the reference forgotten: softmax(s / β), not π_ref exp(s / β) normalised": (SCORES / beta).softmax(-1),
        "no normalisation (the probabilities must sum to 1)": REFERENCE * (SCORES / beta).exp(),
    }, atol=1e-12, rtol=0.0)
    check_close(ascent.to(torch.float64), optimum, f"maximise_by_gradient_ascent(β = {beta}), against π*", {
        "the reference policy returned unchanged (no step taken, or the gradient detached)": REFERENCE,
    }, atol=1e-3, rtol=0.0)  # ascent stops short: 400 Adam steps of 0.2 come within 2e-4


@pytest.mark.parametrize("beta", [3.0, 0.5, 1e-3])
def test_the_optimal_value_is_the_objective_at_the_optimum_and_beats_other_policies(exercise, beta):
    best = exercise.optimal_objective_value(REFERENCE, SCORES, beta)
    optimum = library_optimum(beta)
    kl = (torch.xlogy(optimum, optimum) - optimum * REFERENCE.log()).sum()  # 0 log 0 = 0 where π* underflows
    log_partition = float(torch.logsumexp(REFERENCE.log() + SCORES / beta, dim=-1))
    check_close(best, float(optimum @ SCORES - beta * kl),
                f"optimal_objective_value(β = {beta}): β log Σ π_ref exp(s / β)", {
        "the log-partition without its factor β": log_partition,
        "the expected reward under π* alone, without − β KL": float(optimum @ SCORES),
        "the largest reward (β → 0 only)": float(SCORES.max()),
    }, atol=1e-9, rtol=0.0)
    others = torch.randn(200, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64).softmax(-1)
    values = others @ SCORES - beta * (others * (others / REFERENCE).log()).sum(dim=1)
    assert float(values.max()) <= best + 1e-12
    assert torch.isfinite(exercise.closed_form_optimum(REFERENCE, SCORES, beta)).all()
