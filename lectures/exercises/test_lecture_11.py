"""Checks for the exercises of lecture 11."""

import gymnasium as gym
import torch


def test_autoreset_replaces_only_the_finished_copies(exercise):
    next_obs = torch.arange(6.0).reshape(3, 2)
    reset_obs = -torch.ones(3, 2)
    observations, final = exercise.same_step_autoreset(next_obs, torch.tensor([False, True, False]), reset_obs)
    assert torch.equal(observations, torch.tensor([[0.0, 1.0], [-1.0, -1.0], [4.0, 5.0]]))
    assert torch.equal(final, next_obs)


def test_cartpole_terminated_agrees_with_gymnasium(exercise):
    environment = gym.make("CartPole-v1").unwrapped
    generator = torch.Generator().manual_seed(0)
    states = torch.randn(2000, 4, generator=generator) * torch.tensor([2.0, 1.0, 0.25, 1.0])
    expected = (states[:, 0].abs() > environment.x_threshold) | (states[:, 2].abs() > environment.theta_threshold_radians)
    assert 0 < int(expected.sum()) < 2000
    assert torch.equal(exercise.cartpole_terminated(states), expected)
