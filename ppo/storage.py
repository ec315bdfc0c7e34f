"""Rollout storage: one fixed-shape tensor per quantity, T steps × N envs.

PPO is on-policy: the buffer holds exactly the latest rollout, is used for K epochs of
minibatch updates, and is then overwritten. It is not a replay buffer.
"""

from __future__ import annotations

import torch


class RolloutBuffer:
    """Tensors of shape (T, N, ...) filled one step at a time by `add`."""

    def __init__(
        self,
        num_steps: int,
        num_envs: int,
        obs_shape: tuple[int, ...],
        action_shape: tuple[int, ...],
        action_dtype: torch.dtype,
        device: torch.device,
    ):
        T, N = num_steps, num_envs
        self.num_steps = num_steps

        def zeros(*shape, dtype=torch.float32):
            return torch.zeros(shape, dtype=dtype, device=device)

        self.obs = zeros(T, N, *obs_shape)  # (T, N, obs_dim) s_t, as the network saw it
        self.actions = zeros(T, N, *action_shape, dtype=action_dtype)  # (T, N[, act_dim]) a_t
        self.log_probs = zeros(T, N)  # log π_old(a_t | s_t)
        self.values = zeros(T, N)  # V_old(s_t)
        self.rewards = zeros(T, N)  # r_t (after any reward scaling)
        self.terminated = zeros(T, N, dtype=torch.bool)
        self.truncated = zeros(T, N, dtype=torch.bool)
        self.final_obs = zeros(T, N, *obs_shape)  # (T, N, obs_dim) last obs of an episode cut at t
        self.step = 0

    def add(self, obs, action, log_prob, value, reward, terminated, truncated, final_obs) -> None:
        t = self.step
        self.obs[t] = obs
        self.actions[t] = action
        self.log_probs[t] = log_prob
        self.values[t] = value
        self.rewards[t] = reward
        self.terminated[t] = terminated
        self.truncated[t] = truncated
        self.final_obs[t] = final_obs
        self.step += 1

    def reset(self) -> None:
        self.step = 0

    @property
    def full(self) -> bool:
        return self.step == self.num_steps
