"""Checks for the exercises of lecture 7."""

import pytest
import torch
from torch.distributions import Categorical, kl_divergence

from feedback import check_close, check_equal
from ppo.algorithm.losses import kl_estimate


@pytest.mark.parametrize("estimator", ["k1", "k3"])
def test_approx_kl_matches_the_library(exercise, estimator):
    generator = torch.Generator().manual_seed(0)
    old, new = torch.randn(300, generator=generator), torch.randn(300, generator=generator)
    log_ratio = new - old
    other = "k3" if estimator == "k1" else "k1"
    check_close(exercise.approx_kl(new, old, estimator), float(kl_estimate(log_ratio, estimator)),
                f"approx_kl(estimator = {estimator!r})", {
                    f"the {other} estimator in place of {estimator}": float(kl_estimate(log_ratio, other)),
                    "the log-ratio the wrong way round, log π_old − log π_θ": float(kl_estimate(-log_ratio, estimator)),
                    "a sum in place of the mean": float(kl_estimate(log_ratio, estimator)) * 300,
                    "k2, ½(log r)²": float(kl_estimate(log_ratio, "k2")),
                }, atol=1e-5, rtol=0.0)


def test_approx_kl_estimates_the_exact_kl(exercise):
    torch.manual_seed(0)
    old_policy = Categorical(logits=torch.tensor([0.0, 0.5, -0.5, 1.0]))
    new_policy = Categorical(logits=torch.tensor([0.2, 0.3, -0.4, 0.8]))
    actions = old_policy.sample((200_000,))
    exact = float(kl_divergence(old_policy, new_policy))
    estimate = exercise.approx_kl(new_policy.log_prob(actions), old_policy.log_prob(actions), "k3")
    check_close(estimate, exact, "approx_kl(k3) on 200,000 actions of π_old, against the exact KL(π_old ‖ π_θ)",
                atol=0.1 * exact, rtol=0.0)


def test_gradient_steps_taken_stops_before_the_step_that_would_overshoot(exercise):
    kls = [0.0, 0.004, 0.012, 0.03, 0.01]
    for target, expected in ((0.02, 3), (0.001, 1), (None, 5), (1.0, 5)):
        overshooting = next((step for step, kl in enumerate(kls) if target is not None and kl > target), None)
        mistakes = {} if overshooting is None else {
            "the step of the minibatch over the target taken (the check comes before the step)": overshooting + 1}
        check_equal(exercise.gradient_steps_taken(kls, target), expected,
                    f"gradient_steps_taken(KLs {kls}, target_kl = {target})", mistakes)
