"""Solutions to lectures/exercises/lecture_11.py."""

import math

import torch


def same_step_autoreset(next_obs, done, reset_obs):
    return torch.where(done.unsqueeze(1), reset_obs, next_obs), next_obs.clone()


def cartpole_terminated(states):
    return (states[:, 0].abs() > 2.4) | (states[:, 2].abs() > 12 * 2 * math.pi / 360)
