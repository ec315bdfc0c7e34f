"""One interface for batched environments, whatever steps them.

The trainer talks to every environment through `VecEnv`: N copies stepped in one
call, observations and rewards as torch tensors on one device. Two kinds plug in:

* `envs.gymnasium_vec_env.GymnasiumVecEnv` wraps gymnasium's `SyncVectorEnv` (any registered env id);
* the batched torch environments of `envs.classic` step N copies as tensor code.

The trainer is handed one (`PPO(config, envs)`); building them is the caller's business
(`envs.factory.make_vec_env` for the commands and lectures). This module is the whole
interface between the core and `envs/`: the protocol and the step result.

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
import torch


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


def env_state(envs: VecEnv) -> dict | None:
    """The envs' `state_dict()` if they can be checkpointed, else None.

    A VecEnv may offer `state_dict()` / `load_state_dict(state)` (the batched torch envs
    do): a resumed run then continues every episode exactly where it stood. Envs without
    them (gymnasium's) start fresh episodes when a run resumes.
    """
    state_dict = getattr(envs, "state_dict", None)
    return state_dict() if callable(state_dict) else None
