"""MountainCar-v0 for N copies at once.

An underpowered car in a valley, position x in [-1.2, 0.6], must rock back and forth to
reach the flag at x >= 0.5. Action 0, 1, 2 pushes left, not at all, right.

State s = (x, v). With force 0.001 and gravity 0.0025, one step (unit time step):

    v <- clip(v + (a - 1) 0.001 - 0.0025 cos(3 x), -0.07, 0.07)
    x <- clip(x + v, -1.2, 0.6)
    v <- 0 if x == -1.2 and v < 0     (an inelastic wall on the left)

Reward -1 every step. Terminates when x >= 0.5 and v >= 0; truncated after 200 steps.
Start state: x uniform in [-0.6, -0.4), v = 0. Observation: (x, v).

Dtype: gymnasium steps the state as float64 scalars; float64 here by default too, and
the states agree with gymnasium's to ~1e-15.
"""

from __future__ import annotations

import numpy as np
import torch
from gymnasium import spaces

from envs.classic.base import TorchClassicEnv


class TorchMountainCar(TorchClassicEnv):
    env_id = "MountainCar-v0"
    max_episode_steps = 200
    state_dim = 2
    observation_is_state = True

    MIN_POSITION = -1.2
    MAX_POSITION = 0.6
    MAX_SPEED = 0.07
    GOAL_POSITION = 0.5
    GOAL_VELOCITY = 0.0
    FORCE = 0.001
    GRAVITY = 0.0025
    START_POSITION = (-0.6, -0.4)

    def __init__(self, num_envs: int, device="cpu", seed: int | None = None, dtype=torch.float64, groups: int = 1):
        super().__init__(num_envs, device, seed, dtype, groups)
        low = np.array([self.MIN_POSITION, -self.MAX_SPEED], dtype=np.float32)
        high = np.array([self.MAX_POSITION, self.MAX_SPEED], dtype=np.float32)
        self.single_observation_space = spaces.Box(low, high, dtype=np.float32)
        self.single_action_space = spaces.Discrete(3)
        self._push_of_action = torch.tensor([-self.FORCE, 0.0, self.FORCE], dtype=dtype, device=self.device)

    def _initial_state(self, n: int) -> torch.Tensor:
        state = torch.zeros(2, n, dtype=self.dtype, device=self.device)
        state[0].uniform_(*self.START_POSITION, generator=self.generator)
        return state

    def _transition(self, state, actions):
        position, velocity = state.unbind(0)  # each (N,)
        push = self._push_of_action.index_select(0, actions)  # (a - 1) * force
        velocity = torch.cos(3 * position).mul_(-self.GRAVITY).add_(push).add_(velocity)
        velocity.clamp_(-self.MAX_SPEED, self.MAX_SPEED)
        position = torch.add(position, velocity).clamp_(self.MIN_POSITION, self.MAX_POSITION)
        velocity.masked_fill_((position == self.MIN_POSITION) & (velocity < 0), 0.0)

        terminated = (position >= self.GOAL_POSITION) & (velocity >= self.GOAL_VELOCITY)
        reward = torch.full((self.num_envs,), -1.0, dtype=torch.float32, device=self.device)
        return torch.stack((position, velocity)), reward, terminated

    def _observe(self, state):
        return self._rows_to_observation(state)  # (n, 2): the observation is the state
