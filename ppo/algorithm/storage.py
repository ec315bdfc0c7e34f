"""Rollout storage: one fixed-shape tensor per quantity, T steps × N envs.

PPO is on-policy: the buffer holds exactly the latest rollout, is used for K epochs of
minibatch updates, and is then overwritten. It is not a replay buffer.

Observations keep their shape ((T, N, C, H, W) for images) and, by default, are stored as
float32; a uint8 image run stores them as uint8 (`obs_dtype`), a quarter of the memory,
scaled by the encoder when read (ppo.models.encoders). With an action mask (`mask_size` logits),
the mask each action was drawn under is stored beside it, so the update recomputes
log π_θ(a_t | s_t) and the entropy under the same mask. Where a time limit cut an episode at
step t, its last observation s_{t+1} is kept in `final_obs[t]` and its value V(s_{t+1}) in
`final_values[t]` (the trainer computes it, ppo.trainers.ppo.PPO.bootstrap_values), which
GAE bootstraps from (ppo.algorithm.advantages.successor_values).
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
        obs_dtype: torch.dtype = torch.float32,
        mask_size: int | None = None,
    ):
        T, N = num_steps, num_envs
        self.num_steps = num_steps

        def zeros(*shape, dtype=torch.float32):
            return torch.zeros(shape, dtype=dtype, device=device)

        self.obs = zeros(T, N, *obs_shape, dtype=obs_dtype)  # (T, N, *obs_shape) s_t, as the network saw it
        self.actions = zeros(T, N, *action_shape, dtype=action_dtype)  # (T, N[, act_dim]) a_t
        self.log_probs = zeros(T, N)  # log π_old(a_t | s_t)
        self.values = zeros(T, N)  # V_old(s_t)
        self.rewards = zeros(T, N)  # r_t (after any reward scaling)
        self.terminated = zeros(T, N, dtype=torch.bool)
        self.truncated = zeros(T, N, dtype=torch.bool)
        self.final_obs = zeros(T, N, *obs_shape, dtype=obs_dtype)  # (T, N, *obs_shape) last obs of an episode cut at t
        self.final_values = zeros(T, N)  # V(last obs) of an episode cut at t by a time limit, else 0
        # (T, N, logits) the valid actions a_t was drawn from (True = valid), if the env masks actions
        self.action_masks = None if mask_size is None else zeros(T, N, mask_size, dtype=torch.bool)
        self.step = 0

    def add(self, obs, action, log_prob, value, reward, terminated, truncated, action_mask=None) -> None:
        t = self.step
        if self.action_masks is not None:
            self.action_masks[t] = action_mask
        self.obs[t] = obs
        self.actions[t] = action
        self.log_probs[t] = log_prob
        self.values[t] = value
        self.rewards[t] = reward
        self.terminated[t] = terminated
        self.truncated[t] = truncated
        self.step += 1

    def reset(self) -> None:
        """Begin a rollout: no final values yet (only the truncated steps write one)."""
        self.step = 0
        self.final_values.zero_()

    @property
    def full(self) -> bool:
        return self.step == self.num_steps
