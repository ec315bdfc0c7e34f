"""Checks for the exercises of lecture 6."""

import torch

from ppo.config import PPOConfig
from ppo.parallel.optim import linear_annealing


def test_update_sizes_match_the_config(exercise):
    config = PPOConfig(num_envs=16, num_steps=64, num_minibatches=4, update_epochs=8, total_timesteps=100_000)
    sizes = exercise.update_sizes(16, 64, 4, 8, 100_000)
    assert sizes == {"batch_size": config.batch_size, "minibatch_size": config.minibatch_size,
                     "num_iterations": config.num_iterations,
                     "gradient_steps": config.num_iterations * config.update_epochs * config.num_minibatches}


def test_learning_rate_anneals_like_the_library(exercise):
    for done in (0, 1, 50, 97):
        assert abs(exercise.learning_rate(3e-4, done, 98) - linear_annealing(3e-4, done, 98)) < 1e-12


def test_finished_episode_returns(exercise):
    rewards = torch.tensor([[1.0, 1.0], [1.0, 2.0], [1.0, 3.0]])
    dones = torch.tensor([[False, True], [True, False], [False, True]])
    finished, running = exercise.finished_episode_returns(rewards, dones, torch.tensor([10.0, 0.0]))
    assert finished == [1.0, 12.0, 5.0]
    assert torch.equal(running, torch.tensor([1.0, 0.0]))
