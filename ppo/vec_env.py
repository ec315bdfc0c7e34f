"""One interface for batched environments, whatever steps them.

The trainer talks to every environment through `VecEnv`: N copies stepped in one
call, observations and rewards as torch tensors on one device. Two kinds plug in:

* `GymnasiumVecEnv` wraps gymnasium's `SyncVectorEnv` (any registered env id);
* the batched torch environments in `envs/` step N copies as tensor code.

Autoreset contract (the same for both). When copy i's episode ends at step t, the
result of that very `step` call holds

    terminated[i] or truncated[i] = True
    final_obs[i] = s_{t+1}, the last observation of the finished episode
    obs[i]       = s_0 of the new episode, already reset

so the next action is taken in the new episode and no step is wasted. This is
gymnasium 1.x's ``AutoresetMode.SAME_STEP``. (Its default, ``NEXT_STEP``, returns the
final observation as `obs` and spends the *next* call on the reset, ignoring that
call's action; a loop written for gymnasium 0.29 misreads it.) `final_obs` is what a
time-limit truncation bootstraps from: V(final_obs), never V(obs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode


@dataclass
class StepResult:
    """What one call to `VecEnv.step` returns; N = number of environment copies."""

    obs: torch.Tensor  # (N, *obs_shape) observation to act on next (after autoreset)
    reward: torch.Tensor  # (N,) float32
    terminated: torch.Tensor  # (N,) bool: the MDP reached a terminal state
    truncated: torch.Tensor  # (N,) bool: cut by a time limit, not terminal
    final_obs: torch.Tensor  # (N, *obs_shape) equals obs where no episode ended


class VecEnv(Protocol):
    """N environment copies stepped together with the SAME_STEP autoreset contract."""

    num_envs: int
    single_observation_space: gym.Space
    single_action_space: gym.Space
    device: torch.device

    def reset(self, seed: int | None = None) -> torch.Tensor:
        """Reset all copies; copy i is seeded with seed + i. Returns (N, *obs_shape)."""
        ...

    def step(self, actions: torch.Tensor) -> StepResult:
        """Apply one action per copy: (N,) int64 for Discrete, (N, act_dim) for Box."""
        ...

    def close(self) -> None: ...


class GymnasiumVecEnv:
    """A gymnasium `SyncVectorEnv` in SAME_STEP autoreset mode, speaking torch tensors."""

    def __init__(self, env_id: str, num_envs: int, device: str | torch.device = "cpu", **make_kwargs):
        self.env_id = env_id
        self.num_envs = num_envs
        self.device = torch.device(device)
        self._envs = gym.make_vec(
            env_id,
            num_envs=num_envs,
            vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
            **make_kwargs,
        )
        self.single_observation_space = self._envs.single_observation_space
        self.single_action_space = self._envs.single_action_space
        self._discrete = isinstance(self.single_action_space, gym.spaces.Discrete)

    def _tensor(self, array: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
        return torch.as_tensor(np.asarray(array), dtype=dtype, device=self.device)

    def reset(self, seed: int | None = None) -> torch.Tensor:
        obs, _ = self._envs.reset(seed=seed)
        return self._tensor(obs, torch.float32)

    def step(self, actions: torch.Tensor) -> StepResult:
        actions_np = actions.detach().cpu().numpy()
        if self._discrete:
            actions_np = actions_np.astype(np.int64)
        obs, reward, terminated, truncated, info = self._envs.step(actions_np)
        final_obs = obs
        if "_final_obs" in info and info["_final_obs"].any():
            final_obs = obs.copy()
            for i in np.flatnonzero(info["_final_obs"]):
                final_obs[i] = info["final_obs"][i]
        return StepResult(
            obs=self._tensor(obs, torch.float32),
            reward=self._tensor(reward, torch.float32),
            terminated=self._tensor(terminated, torch.bool),
            truncated=self._tensor(truncated, torch.bool),
            final_obs=self._tensor(final_obs, torch.float32),
        )

    def close(self) -> None:
        self._envs.close()
