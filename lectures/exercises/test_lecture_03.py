"""Checks for the exercises of lecture 3."""

import torch

from ppo.advantages import compute_gae

GAMMA, LAMBDA = 0.9, 0.8


def an_episode_fragment():
    generator = torch.Generator().manual_seed(0)
    rewards = torch.randn(8, generator=generator)
    values = torch.randn(8, generator=generator)
    next_values = torch.cat([values[1:], torch.randn(1, generator=generator)])
    next_values[2] = 5.0  # V(final observation) of the episode truncated at step 2
    terminated = torch.zeros(8, dtype=torch.bool)
    terminated[5] = True
    dones = terminated.clone()
    dones[2] = True
    return rewards, values, next_values, terminated, dones


def test_td_errors_bootstrap_unless_terminated(exercise):
    rewards, values, next_values, terminated, _ = an_episode_fragment()
    deltas = exercise.td_errors(rewards, values, next_values, terminated, GAMMA)
    assert torch.allclose(deltas[2], rewards[2] + GAMMA * 5.0 - values[2])  # truncated: bootstrapped
    assert torch.allclose(deltas[5], rewards[5] - values[5])  # terminated: no future
    assert torch.allclose(deltas[0], rewards[0] + GAMMA * values[1] - values[0])


def test_gae_matches_the_library(exercise):
    rewards, values, next_values, terminated, dones = an_episode_fragment()
    mine = exercise.gae(rewards, values, next_values, terminated, dones, GAMMA, LAMBDA)
    column = lambda x: x.unsqueeze(1)  # noqa: E731  (T,) → (T, 1), one environment
    library, _ = compute_gae(column(rewards), column(values), column(next_values), column(terminated), column(dones),
                             GAMMA, LAMBDA)
    assert torch.allclose(mine, library.squeeze(1), atol=1e-6)


def test_lambda_return_is_gae_plus_the_value(exercise):
    rewards, values, _, _, _ = an_episode_fragment()
    next_values = torch.cat([values[1:], torch.tensor([0.7])])  # one episode: V(s_{t+1}) is the next step's value
    no_end = torch.zeros(8, dtype=torch.bool)
    advantages, returns = compute_gae(rewards.unsqueeze(1), values.unsqueeze(1), next_values.unsqueeze(1),
                                      no_end.unsqueeze(1), no_end.unsqueeze(1), GAMMA, LAMBDA)
    assert torch.allclose(exercise.lambda_return(rewards, values, next_values, GAMMA, LAMBDA), returns.squeeze(1), atol=1e-5)
