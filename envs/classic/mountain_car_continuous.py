"""MountainCarContinuous-v0 for N copies at once.

MountainCar with a continuous push: force u in [-1, 1], power 0.0015. The flag pays
+100, and every step costs 0.1 u², so the agent must find the flag before the action
penalty teaches it to stand still.

State s = (x, v). One step (unit time step), u = clip(a, -1, 1):

    v <- clip(v + 0.0015 u - 0.0025 cos(3 x), -0.07, 0.07)
    x <- clip(x + v, -1.2, 0.6)
    v <- 0 if x == -1.2 and v < 0     (an inelastic wall on the left)

Reward: 100 · [terminated] − 0.1 a², with the action as given (gymnasium squares the
unclipped action). Terminates when x >= 0.45 and v >= 0; truncated after 999 steps.
Start state: x uniform in [-0.6, -0.4), v = 0. Observation: (x, v). Action: (N, 1).

Dtype, as gymnasium does it: its reset draws the state as float64, and every step stores
the new state as float32. So the first step of an episode runs in float64 (but for
0.0025 cos(3x), which meets the float32 push and is rounded to float32), and every later
step runs in float32 arithmetic (but for an action beyond the bounds: gymnasium clips it
to a Python float, and the push is then computed in float64). Here the state is kept in `dtype` (float64 by default)
holding those float32 values, and a copy whose position is not a float32 number is on the
first step of its episode (a float64 start position is a float32 number with probability
~2^-29). The termination test sees the values before they are rounded, as gymnasium's
does. The states then agree with gymnasium's exactly.
"""

from __future__ import annotations

import numpy as np
import torch
from gymnasium import spaces

from envs.classic.base import TorchClassicEnv


class TorchMountainCarContinuous(TorchClassicEnv):
    env_id = "MountainCarContinuous-v0"
    max_episode_steps = 999
    state_dim = 2
    observation_is_state = True

    MIN_POSITION = -1.2
    MAX_POSITION = 0.6
    MAX_SPEED = 0.07
    GOAL_POSITION = 0.45
    GOAL_VELOCITY = 0.0
    POWER = 0.0015
    GRAVITY = 0.0025
    MAX_ACTION = 1.0
    GOAL_REWARD = 100.0
    ACTION_COST = 0.1
    START_POSITION = (-0.6, -0.4)

    def __init__(self, num_envs: int, device="cpu", seed: int | None = None, dtype=torch.float64, groups: int = 1):
        super().__init__(num_envs, device, seed, dtype, groups)
        low = np.array([self.MIN_POSITION, -self.MAX_SPEED], dtype=np.float32)
        high = np.array([self.MAX_POSITION, self.MAX_SPEED], dtype=np.float32)
        self.single_observation_space = spaces.Box(low, high, dtype=np.float32)
        self.single_action_space = spaces.Box(-self.MAX_ACTION, self.MAX_ACTION, shape=(1,), dtype=np.float32)

    def _initial_state(self, n: int) -> torch.Tensor:
        state = torch.zeros(2, n, dtype=self.dtype, device=self.device)
        state[0].uniform_(*self.START_POSITION, generator=self.generator)
        return state

    def _transition(self, state, actions):
        position, velocity = state.unbind(0)  # each (N,), in self.dtype
        action = actions.reshape(self.num_envs).to(torch.float32)
        position32, velocity32 = position.to(torch.float32), velocity.to(torch.float32)
        first_step = position32.to(self.dtype) != position  # still gymnasium's float64 start state
        cos_argument = torch.where(first_step, 3 * position, (3 * position32).to(self.dtype))
        gravity = torch.cos(cos_argument).mul_(self.GRAVITY)  # (N,) 0.0025 cos(3x)
        # The speed change u·0.0015 − 0.0025 cos(3x): in float32 for an action inside the
        # bounds, in float64 for one that was clipped (the bound is a Python float there).
        clipped = action.abs() > self.MAX_ACTION
        inside = (action * self.POWER - gravity.to(torch.float32)).to(self.dtype)
        bound = torch.sign(action).to(self.dtype).mul_(self.MAX_ACTION * self.POWER).sub_(gravity)
        speed_change = torch.where(clipped, bound, inside)  # (N,) in self.dtype

        # Later steps: everything in float32 (the bounds too, as numpy compares a float32
        # with a Python float in float32).
        v32 = (velocity32 + speed_change.to(torch.float32)).clamp_(-self.MAX_SPEED, self.MAX_SPEED)
        x32 = (position32 + v32).clamp_(self.MIN_POSITION, self.MAX_POSITION)
        v32.masked_fill_((x32 == self.MIN_POSITION) & (v32 < 0), 0.0)
        # The first step: float64 (self.dtype) arithmetic.
        v64 = (velocity + speed_change).clamp_(-self.MAX_SPEED, self.MAX_SPEED)
        x64 = (position + v64).clamp_(self.MIN_POSITION, self.MAX_POSITION)
        v64.masked_fill_((x64 == self.MIN_POSITION) & (v64 < 0), 0.0)

        new_position = torch.where(first_step, x64, x32.to(self.dtype))
        new_velocity = torch.where(first_step, v64, v32.to(self.dtype))
        terminated = torch.where(
            first_step,
            (x64 >= self.GOAL_POSITION) & (v64 >= self.GOAL_VELOCITY),
            (x32 >= self.GOAL_POSITION) & (v32 >= self.GOAL_VELOCITY),  # compared in float32
        )

        action64 = action.to(torch.float64)
        reward = terminated.to(torch.float64).mul_(self.GOAL_REWARD).sub_(action64.square_().mul_(self.ACTION_COST))
        next_state = torch.stack((new_position, new_velocity)).to(torch.float32).to(self.dtype)  # stored as float32
        return next_state, reward.to(torch.float32), terminated

    def _observe(self, state):
        return self._rows_to_observation(state)  # (n, 2): the observation is the state
