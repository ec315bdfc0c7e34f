"""The clipped surrogate, value loss, KL estimators, entropy and explained variance."""

import math

import pytest
import torch
from torch.distributions import Categorical

from ppo.algorithm.losses import (
    clip_fraction,
    clipped_surrogate_loss,
    explained_variance,
    kl_estimate,
    masked_mean,
    normalize_advantages,
    value_loss,
)

EPS = 0.2


def surrogate_and_gradient(ratio: float, advantage: float):
    """Loss for one sample at a given ratio, and dL/d(log π_new)."""
    new_log_prob = torch.tensor([math.log(ratio)], requires_grad=True)
    loss = clipped_surrogate_loss(new_log_prob, torch.zeros(1), torch.tensor([advantage]), EPS)
    loss.backward()
    return loss.item(), new_log_prob.grad.item()


# Objective min(rA, clip(r)A) for A = +1 and A = −1, and whether the gradient is alive.
POSITIVE_ADVANTAGE_TABLE = [  # ratio, objective, gradient flows
    (0.5, 0.5, True),
    (0.9, 0.9, True),
    (1.0, 1.0, True),
    (1.1, 1.1, True),
    (1.5, 1.2, False),  # past 1 + ε: clipped, no incentive to push further
    (3.0, 1.2, False),
]
NEGATIVE_ADVANTAGE_TABLE = [
    (0.5, -0.8, False),  # below 1 − ε: clipped, no incentive to push further down
    (0.7, -0.8, False),
    (0.9, -0.9, True),
    (1.0, -1.0, True),
    (1.5, -1.5, True),  # a worse action made more likely is never clipped away
    (3.0, -3.0, True),
]


@pytest.mark.parametrize("ratio, objective, alive", POSITIVE_ADVANTAGE_TABLE)
def test_clipped_surrogate_positive_advantage_table(ratio, objective, alive):
    loss, gradient = surrogate_and_gradient(ratio, 1.0)
    assert loss == pytest.approx(-objective)
    assert (gradient != 0.0) == alive
    if alive:
        assert gradient == pytest.approx(-ratio)  # d(−rA)/d log r = −rA


@pytest.mark.parametrize("ratio, objective, alive", NEGATIVE_ADVANTAGE_TABLE)
def test_clipped_surrogate_negative_advantage_table(ratio, objective, alive):
    loss, gradient = surrogate_and_gradient(ratio, -1.0)
    assert loss == pytest.approx(-objective)
    assert (gradient != 0.0) == alive


def test_ratio_one_gives_minus_mean_advantage():
    advantages = torch.randn(100)
    log_probs = torch.randn(100)
    assert clipped_surrogate_loss(log_probs, log_probs.clone(), advantages, EPS).item() == pytest.approx(-advantages.mean().item())


def test_mask_excludes_positions():
    advantages = torch.tensor([1.0, 2.0, 1000.0])
    mask = torch.tensor([True, True, False])
    zeros = torch.zeros(3)
    assert clipped_surrogate_loss(zeros, zeros, advantages, EPS, mask).item() == pytest.approx(-1.5)
    assert masked_mean(advantages, mask).item() == pytest.approx(1.5)


def test_value_loss_plain_and_clipped_by_hand():
    new, old, target = torch.tensor([2.0]), torch.tensor([0.0]), torch.tensor([3.0])
    assert value_loss(new, old, target).item() == pytest.approx(0.5 * 1.0)
    # clipped: V_clip = 0 + clip(2, −0.2, 0.2) = 0.2 → (0.2 − 3)² = 7.84 > 1
    assert value_loss(new, old, target, clip_coef=0.2).item() == pytest.approx(0.5 * 7.84)


def test_kl_estimators_are_unbiased_for_categorical_kl_and_k3_is_nonnegative():
    torch.manual_seed(0)
    q = Categorical(logits=torch.randn(6))
    p = Categorical(logits=torch.randn(6))
    exact = torch.distributions.kl_divergence(q, p).item()  # KL(q ‖ p)
    samples = q.sample((400_000,))
    log_ratio = p.log_prob(samples) - q.log_prob(samples)
    k1 = kl_estimate(log_ratio, "k1").item()
    k3 = kl_estimate(log_ratio, "k3").item()
    assert k1 == pytest.approx(exact, abs=0.02)
    assert k3 == pytest.approx(exact, abs=0.02)
    per_sample_k3 = torch.expm1(log_ratio) - log_ratio
    assert (per_sample_k3 >= 0).all()
    assert (-log_ratio < 0).any(), "k1 per sample can be negative"
    with pytest.raises(ValueError, match="k4"):
        kl_estimate(log_ratio, "k4")


def test_entropy_of_uniform_categorical_is_log_n():
    for n in (2, 5, 17):
        assert Categorical(logits=torch.zeros(n)).entropy().item() == pytest.approx(math.log(n))


def test_explained_variance():
    targets = torch.randn(50)
    assert explained_variance(targets, targets) == pytest.approx(1.0)
    assert explained_variance(torch.full_like(targets, targets.mean().item()), targets) == pytest.approx(0.0, abs=1e-6)
    assert math.isnan(explained_variance(torch.zeros(4), torch.ones(4)))


def test_clip_fraction_counts_ratios_outside_the_band():
    old = torch.zeros(4)
    new = torch.log(torch.tensor([1.0, 1.1, 1.3, 0.7]))
    assert clip_fraction(new, old, EPS).item() == pytest.approx(0.5)


def test_normalize_advantages_whitens():
    advantages = torch.randn(1000) * 5 + 3
    whitened = normalize_advantages(advantages)
    assert whitened.mean().item() == pytest.approx(0.0, abs=1e-5)
    assert whitened.std().item() == pytest.approx(1.0, abs=1e-4)
