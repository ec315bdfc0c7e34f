"""CartPoleNoVel-v1 and PendulumNoVel-v1: classic control with the velocities hidden.

A partially observable version of an env shows the same physics through an observation
with its velocity columns removed:

    CartPoleNoVel-v1   o = (x, θ)             of CartPole's (x, ẋ, θ, θ̇)
    PendulumNoVel-v1   o = (cos θ, sin θ)     of Pendulum's (cos θ, sin θ, θ̇)

Everything else (dynamics, rewards, terminations, time limits, start states, action
space) is the full env's. One observation no longer determines the state: the same
(x, θ) comes with a pole falling left or right, so a policy that sees only the current
observation must act alike in both. The velocity is recoverable from two consecutive
observations (θ̇ ≈ (θ_t − θ_{t−1}) / τ), which is what frame stacking
(`envs.frame_stack`) or a recurrent policy supplies.

The velocity columns are those of the RL Baselines3 Zoo's `MaskVelocityWrapper`
(CartPole-v1: 1 and 3; Pendulum-v1: 2), which registers the same two ids. The zoo
multiplies them by zero and keeps the full observation's shape; here they are removed,
so the observation is 2-dimensional. A network sees the same information either way
(an input that is always zero carries none and its first-layer weights get no gradient).

Two implementations, as for every classic env:

* batched torch: `TorchCartPoleNoVel`, `TorchPendulumNoVel` are the full torch envs whose
  observation (`final_obs` included) is the full one with the velocity columns removed;
* gymnasium: `gymnasium.make("CartPoleNoVel-v1")` (registered when `envs` is imported)
  is gymnasium's own env inside `DropVelocities`, with the full env's time limit and
  reward threshold.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.envs.registration import load_env_creator

from envs.classic.cartpole import TorchCartPole
from envs.classic.pendulum import TorchPendulum

# Full env id -> (partially observable id, the observation columns that are velocities).
VELOCITY_COLUMNS: dict[str, tuple[str, tuple[int, ...]]] = {
    "CartPole-v1": ("CartPoleNoVel-v1", (1, 3)),  # x_dot, theta_dot
    "Pendulum-v1": ("PendulumNoVel-v1", (2,)),  # theta_dot
}


def kept_columns(full_env_id: str, obs_dim: int) -> list[int]:
    """The observation columns of `full_env_id` that are not velocities, in order."""
    velocities = VELOCITY_COLUMNS[full_env_id][1]
    return [column for column in range(obs_dim) if column not in velocities]


def without_columns(space: spaces.Box, kept: list[int]) -> spaces.Box:
    """The Box of the kept columns of a 1-D Box."""
    return spaces.Box(space.low[kept], space.high[kept], dtype=space.dtype)


# ----------------------------------------------------------------- batched torch


class _WithoutVelocities:
    """Mixin for a TorchClassicEnv: its observation with the velocity columns removed.

    Every observation the env hands out (reset, `obs` and `final_obs` of a step) goes
    through `_observe`, so removing the columns there removes them everywhere.
    """

    full_env_id: str

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        full_space = self.single_observation_space
        kept = kept_columns(self.full_env_id, full_space.shape[0])
        self.single_observation_space = without_columns(full_space, kept)
        self._kept = torch.tensor(kept, device=self.device)

    def _observe(self, state: torch.Tensor) -> torch.Tensor:
        return super()._observe(state).index_select(1, self._kept)  # (n, obs_dim without velocities)


class TorchCartPoleNoVel(_WithoutVelocities, TorchCartPole):
    """CartPole-v1 observed as (x, θ)."""

    env_id = "CartPoleNoVel-v1"
    full_env_id = "CartPole-v1"
    observation_is_state = False


class TorchPendulumNoVel(_WithoutVelocities, TorchPendulum):
    """Pendulum-v1 observed as (cos θ, sin θ)."""

    env_id = "PendulumNoVel-v1"
    full_env_id = "Pendulum-v1"


# ----------------------------------------------------------------- gymnasium


class DropVelocities(gym.ObservationWrapper):
    """A gymnasium env of `VELOCITY_COLUMNS` with its velocity columns removed."""

    def __init__(self, env: gym.Env, full_env_id: str):
        super().__init__(env)
        self.kept = kept_columns(full_env_id, env.observation_space.shape[0])
        self.observation_space = without_columns(env.observation_space, self.kept)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return observation[self.kept]


def _without_velocities(full_env_id: str, **kwargs) -> gym.Env:
    """gymnasium's own (unwrapped) `full_env_id`, made with `kwargs`, inside DropVelocities."""
    spec = gym.spec(full_env_id)
    env = load_env_creator(spec.entry_point)(**{**spec.kwargs, **kwargs})
    return DropVelocities(env, full_env_id)


def cartpole_no_velocity(**kwargs) -> gym.Env:
    """The entry point of CartPoleNoVel-v1 (gym.make adds the TimeLimit)."""
    return _without_velocities("CartPole-v1", **kwargs)


def pendulum_no_velocity(**kwargs) -> gym.Env:
    """The entry point of PendulumNoVel-v1 (gym.make adds the TimeLimit)."""
    return _without_velocities("Pendulum-v1", **kwargs)


ENTRY_POINTS = {"CartPole-v1": cartpole_no_velocity, "Pendulum-v1": pendulum_no_velocity}


def register_with_gymnasium() -> None:
    """Register CartPoleNoVel-v1 and PendulumNoVel-v1 with the full envs' time limits and thresholds."""
    for full_env_id, (env_id, _) in VELOCITY_COLUMNS.items():
        if env_id in gym.registry:
            continue
        full = gym.spec(full_env_id)
        gym.register(
            id=env_id,
            entry_point=f"{__name__}:{ENTRY_POINTS[full_env_id].__name__}",
            max_episode_steps=full.max_episode_steps,
            reward_threshold=full.reward_threshold,
        )
