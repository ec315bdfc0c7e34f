"""Checks for the exercises of lecture 8."""

import torch

from ppo.algorithm.advantages import compute_gae
from feedback import check_close, check_equal
from ppo.algorithm.losses import normalize_advantages


def test_whiten_matches_the_library(exercise):
    advantages = torch.randn(256, generator=torch.Generator().manual_seed(0)) * 7 + 3
    check_close(exercise.whiten(advantages), normalize_advantages(advantages), "whiten", {
        "the mean not subtracted": advantages / (advantages.std() + 1e-8),
        "only the mean subtracted (no division by the std)": advantages - advantages.mean(),
        "the population std (n) in place of the unbiased one (n − 1)":
            (advantages - advantages.mean()) / (advantages.std(unbiased=False) + 1e-8),
        "a division by the variance in place of the std": (advantages - advantages.mean()) / (advantages.var() + 1e-8),
    }, atol=1e-6)


def test_minibatches_cover_the_batch_once_in_a_random_order(exercise):
    minibatches = exercise.shuffled_minibatches(64, 4, torch.Generator().manual_seed(0))
    check_equal(len(minibatches), 4, "the number of minibatches of shuffled_minibatches(64, 4)",
                {"minibatches of 4 samples, not 4 minibatches": 16})
    check_equal([len(indices) for indices in minibatches], [16] * 4, "the sizes of shuffled_minibatches(64, 4)")
    check_equal(torch.cat(minibatches).sort().values, torch.arange(64),
                "the sorted indices of shuffled_minibatches(64, 4): each sample exactly once")
    again = exercise.shuffled_minibatches(64, 4, torch.Generator().manual_seed(1))
    assert not torch.equal(torch.cat(minibatches), torch.cat(again)), (
        "shuffled_minibatches gave the same order for generators seeded 0 and 1: draw the permutation from `generator`")
    assert not torch.equal(torch.cat(minibatches), torch.arange(64)), (
        "shuffled_minibatches gave the indices in order 0..63: shuffle them first")


def test_the_bootstrapped_reward_gives_the_same_td_error_as_the_library(exercise):
    rewards, values, final_values = torch.tensor([1.0, 1.0]), torch.tensor([4.0, 6.0]), torch.tensor([5.0, 9.0])
    truncated = torch.tensor([True, False])
    terminated = ~truncated
    library, _ = compute_gae(rewards.unsqueeze(0), values.unsqueeze(0), final_values.unsqueeze(0),
                             terminated.unsqueeze(0), torch.ones(1, 2, dtype=torch.bool), 0.9, 0.95)
    reward = exercise.reward_with_bootstrap(rewards, truncated, final_values, 0.9)
    expected = library.squeeze(0) + values
    check_close(reward, expected, "reward_with_bootstrap(r = [1, 1], truncated = [True, False], V(final) = [5, 9], "
                "γ = 0.9)", {
                    "a bootstrap after the termination too (only the truncated step has a future)":
                        rewards + 0.9 * final_values,
                    "a missing γ": rewards + truncated.float() * final_values,
                    "no bootstrap at all": rewards,
                })
