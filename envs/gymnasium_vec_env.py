"""gymnasium's vector environments behind the core's `VecEnv` interface (`ppo.vec_env`).

`GymnasiumVecEnv` runs N copies of any registered env id in gymnasium's `SyncVectorEnv`,
in the SAME_STEP autoreset mode the trainer expects, and speaks torch tensors.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from ppo.vec_env import StepResult


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
