"""Checks for the exercises of lecture 6."""

import torch

from feedback import check_close, check_equal
from ppo.config import PPOConfig
from ppo.parallel.optim import linear_annealing


def test_update_sizes_match_the_config(exercise):
    config = PPOConfig(num_envs=16, num_steps=64, num_minibatches=4, update_epochs=8, total_timesteps=100_000)
    sizes = exercise.update_sizes(16, 64, 4, 8, 100_000)
    expected = {"batch_size": config.batch_size, "minibatch_size": config.minibatch_size,
                "num_iterations": config.num_iterations,
                "gradient_steps": config.num_iterations * config.update_epochs * config.num_minibatches}
    check_equal(sorted(sizes), sorted(expected), "update_sizes' keys")
    mistakes = {"minibatch_size": {"the number of minibatches per epoch, not their size": 4},
                "num_iterations": {"a rounded-up count (the trainer runs only whole iterations)": 98,
                                   "total_timesteps // num_steps (a batch is num_envs × num_steps)": 100_000 // 64},
                "gradient_steps": {"one iteration's steps, K·M (the total counts every iteration)": 8 * 4,
                                   "the epochs left out": config.num_iterations * 4}}
    for key, value in expected.items():
        check_equal(sizes[key], value, f"update_sizes(16 envs, 64 steps, 4 minibatches, 8 epochs, 100,000)[{key!r}]",
                    mistakes.get(key))


def test_learning_rate_anneals_like_the_library(exercise):
    for done in (0, 1, 50, 97):
        check_close(exercise.learning_rate(3e-4, done, 98), linear_annealing(3e-4, done, 98),
                    f"learning_rate(3e-4, {done} iterations done of 98)", {
                        "one iteration too many counted (the first iteration runs at the full rate)":
                            3e-4 * (1 - (done + 1) / 98),
                        "the fraction done in place of the fraction left": 3e-4 * done / 98,
                    }, atol=1e-12, rtol=0.0)


def test_finished_episode_returns(exercise):
    rewards = torch.tensor([[1.0, 1.0], [1.0, 2.0], [1.0, 3.0]])
    dones = torch.tensor([[False, True], [True, False], [False, True]])
    finished, running = exercise.finished_episode_returns(rewards, dones, torch.tensor([10.0, 0.0]))
    check_close(finished, [1.0, 12.0, 5.0], "finished_episode_returns' finished returns", {
        "the running returns carried in left out (env 0 had 10 already)": [1.0, 2.0, 5.0],
        "the step's reward not added before the episode ends": [0.0, 11.0, 2.0],
        "a return not reset after its episode ends": [1.0, 12.0, 6.0],
        "the envs read in the wrong order (the order of ending, step by step, env by env)": [1.0, 5.0, 12.0],
    }, atol=0.0, rtol=0.0)
    check_equal(running, torch.tensor([1.0, 0.0]), "finished_episode_returns' running returns after the rollout", {
        "a return not reset after its episode ends": torch.tensor([1.0, 6.0])})
