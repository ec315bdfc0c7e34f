"""Checks for the exercises of lecture 8."""

import torch

from ppo.algorithm.advantages import compute_gae
from ppo.algorithm.losses import normalize_advantages


def test_whiten_matches_the_library(exercise):
    advantages = torch.randn(256, generator=torch.Generator().manual_seed(0)) * 7 + 3
    assert torch.allclose(exercise.whiten(advantages), normalize_advantages(advantages), atol=1e-6)


def test_minibatches_cover_the_batch_once_in_a_random_order(exercise):
    minibatches = exercise.shuffled_minibatches(64, 4, torch.Generator().manual_seed(0))
    assert len(minibatches) == 4 and all(len(indices) == 16 for indices in minibatches)
    assert torch.equal(torch.cat(minibatches).sort().values, torch.arange(64))
    again = exercise.shuffled_minibatches(64, 4, torch.Generator().manual_seed(1))
    assert not torch.equal(torch.cat(minibatches), torch.cat(again))
    assert not torch.equal(torch.cat(minibatches), torch.arange(64))


def test_the_bootstrapped_reward_gives_the_same_td_error_as_the_library(exercise):
    rewards, values, final_values = torch.tensor([1.0, 1.0]), torch.tensor([4.0, 6.0]), torch.tensor([5.0, 9.0])
    truncated = torch.tensor([True, False])
    terminated = ~truncated
    library, _ = compute_gae(rewards.unsqueeze(0), values.unsqueeze(0), final_values.unsqueeze(0),
                             terminated.unsqueeze(0), torch.ones(1, 2, dtype=torch.bool), 0.9, 0.95)
    as_termination = exercise.reward_with_bootstrap(rewards, truncated, final_values, 0.9) - values
    assert torch.allclose(as_termination, library.squeeze(0))
