"""Checks for the exercises of lecture 13."""

import math

import pytest
import torch

from feedback import check_close
from ppo.lm.exact.best_of_n import best_of_n_probabilities, kl_divergence
from ppo.lm.algorithm.reward_model import bradley_terry_loss


def test_bradley_terry_loss_matches_the_library_and_stays_finite(exercise):
    chosen, rejected = torch.tensor([2.0, -1.0, 0.0, 150.0]), torch.tensor([1.0, 0.5, 0.0, -150.0])
    assert torch.allclose(exercise.bradley_terry_loss(chosen, rejected), bradley_terry_loss(chosen, rejected))
    assert torch.isfinite(exercise.bradley_terry_loss(torch.tensor([-150.0]), torch.tensor([150.0])))


def test_group_normalised_advantages(exercise):
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [4.0, 4.0, 4.0, 0.0]])
    advantages = exercise.group_normalised_advantages(rewards)
    assert torch.allclose(advantages.mean(dim=1), torch.zeros(2), atol=1e-6)
    assert torch.allclose(advantages.std(dim=1), torch.ones(2), atol=1e-4)
    assert torch.allclose(exercise.group_normalised_advantages(torch.ones(1, 4)), torch.zeros(1, 4))


def test_leave_one_out_advantages(exercise):
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [3.0, 0.0, 0.0, 0.0]])
    expected = torch.tensor([[1 - 1 / 3, -2 / 3, -2 / 3, 1 - 1 / 3], [3.0, -1.0, -1.0, -1.0]])
    check_close(exercise.leave_one_out_advantages(rewards), expected, "leave_one_out_advantages", {
        "the group's mean as the baseline, the completion itself included": rewards - rewards.mean(dim=1, keepdim=True),
        "the mean over the whole batch, not per prompt": rewards - rewards.mean(),
    }, atol=1e-6)


@pytest.mark.parametrize("n", [2, 16, 256])
def test_predicted_best_of_n_kl_is_the_exact_kl_without_ties(exercise, n):
    reference = torch.rand(20_000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    reference /= reference.sum()  # 20,000 completions, each with its own score: ties impossible
    scores = torch.randperm(20_000, generator=torch.Generator().manual_seed(1)).double()
    exact = kl_divergence(best_of_n_probabilities(reference, scores, n), reference)
    # 20,000 outcomes come within 2e-5 of the continuous case; 0.02 accepts a prediction rounded to 2 digits
    check_close(exercise.predict_best_of_n_kl(n), exact, f"predict_best_of_n_kl({n})", {
        "log n alone (the (n − 1)/n term left out)": math.log(n)}, atol=0.02, rtol=0.0)
