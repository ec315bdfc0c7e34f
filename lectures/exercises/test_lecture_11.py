"""Checks for the exercises of lecture 11."""

import gymnasium as gym
import torch

from feedback import check_equal


def test_autoreset_replaces_only_the_finished_copies(exercise):
    next_obs = torch.arange(6.0).reshape(3, 2)
    reset_obs = -torch.ones(3, 2)
    observations, final = exercise.same_step_autoreset(next_obs, torch.tensor([False, True, False]), reset_obs)
    check_equal(observations, torch.tensor([[0.0, 1.0], [-1.0, -1.0], [4.0, 5.0]]),
                "same_step_autoreset's obs (copy 1 done)", {
                    "every copy reset, not only the finished one": reset_obs,
                    "no copy reset (the finished copy starts its new episode at once)": next_obs,
                    "the copies that did not finish reset instead": torch.tensor([[-1.0, -1.0], [2.0, 3.0], [-1.0, -1.0]]),
                })
    check_equal(final, next_obs, "same_step_autoreset's final_obs (the last observation of every copy)", {
        "the reset observations as final_obs": torch.tensor([[0.0, 1.0], [-1.0, -1.0], [4.0, 5.0]])})


def test_cartpole_terminated_agrees_with_gymnasium(exercise):
    environment = gym.make("CartPole-v1").unwrapped
    generator = torch.Generator().manual_seed(0)
    states = torch.randn(2000, 4, generator=generator) * torch.tensor([2.0, 1.0, 0.25, 1.0])
    expected = (states[:, 0].abs() > environment.x_threshold) | (states[:, 2].abs() > environment.theta_threshold_radians)
    assert 0 < int(expected.sum()) < 2000
    result = exercise.cartpole_terminated(states)
    check_equal(result, expected, "cartpole_terminated on 2,000 states", {
        "the angle in degrees (θ_threshold is 12° = 0.2094 rad)":
            (states[:, 0].abs() > environment.x_threshold) | (states[:, 2].abs() > 12.0),
        "only the cart's position checked": states[:, 0].abs() > environment.x_threshold,
        "only the pole's angle checked": states[:, 2].abs() > environment.theta_threshold_radians,
        "the velocities read in place of the position and the angle (state = x, ẋ, θ, θ̇)":
            (states[:, 1].abs() > environment.x_threshold) | (states[:, 3].abs() > environment.theta_threshold_radians),
    })
