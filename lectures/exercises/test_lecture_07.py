"""Checks for the exercises of lecture 7."""

import pytest
import torch
from torch.distributions import Categorical, kl_divergence

from ppo.algorithm.losses import kl_estimate


@pytest.mark.parametrize("estimator", ["k1", "k3"])
def test_approx_kl_matches_the_library(exercise, estimator):
    generator = torch.Generator().manual_seed(0)
    old, new = torch.randn(300, generator=generator), torch.randn(300, generator=generator)
    assert abs(exercise.approx_kl(new, old, estimator) - float(kl_estimate(new - old, estimator))) < 1e-5


def test_approx_kl_estimates_the_exact_kl(exercise):
    torch.manual_seed(0)
    old_policy = Categorical(logits=torch.tensor([0.0, 0.5, -0.5, 1.0]))
    new_policy = Categorical(logits=torch.tensor([0.2, 0.3, -0.4, 0.8]))
    actions = old_policy.sample((200_000,))
    exact = float(kl_divergence(old_policy, new_policy))
    estimate = exercise.approx_kl(new_policy.log_prob(actions), old_policy.log_prob(actions), "k3")
    assert abs(estimate - exact) < 0.1 * exact


def test_gradient_steps_taken_stops_before_the_step_that_would_overshoot(exercise):
    kls = [0.0, 0.004, 0.012, 0.03, 0.01]
    assert exercise.gradient_steps_taken(kls, 0.02) == 3
    assert exercise.gradient_steps_taken(kls, 0.001) == 1
    assert exercise.gradient_steps_taken(kls, None) == 5
    assert exercise.gradient_steps_taken(kls, 1.0) == 5
