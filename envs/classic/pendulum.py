"""Pendulum-v1 for N copies at once.

A rigid pendulum on a frictionless pivot; the agent applies a torque u in [-2, 2] and is
paid for keeping it upright and still. No terminal state; truncated after 200 steps.

State s = (theta, theta_dot), theta = 0 pointing up. With g = 10, m = 1, l = 1 and
dt = 0.05 s, one step is semi-implicit Euler (the new velocity moves the angle):

    theta_dot <- clip(theta_dot + (3 g / (2 l) sin(theta) + 3 / (m l^2) u) dt, -8, 8)
    theta     <- theta + theta_dot dt

Reward (from the state before the step):
    -(normalize(theta)^2 + 0.1 theta_dot^2 + 0.001 u^2),  normalize(a) = ((a + pi) mod 2 pi) - pi

Start state: theta uniform in [-pi, pi), theta_dot uniform in [-1, 1).
Observation: (cos theta, sin theta, theta_dot). Action: (N, 1) torque, clipped to [-2, 2].

Dtype: gymnasium keeps the state in float64 while the action, a float32 array, stays
float32 in the torque terms (3 u and 0.001 u^2 are float32 products). The same happens
here: physics in float64 by default, the action cast to float32 first. Near the upright
position the dynamics are unstable, so ulp-level differences from gymnasium (torch's
sin vs numpy's) grow to ~1e-10 in the state over an episode; observations stay equal.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from gymnasium import spaces

from envs.classic.base import TorchClassicEnv


class TorchPendulum(TorchClassicEnv):
    env_id = "Pendulum-v1"
    max_episode_steps = 200
    state_dim = 2

    GRAVITY = 10.0
    MASS = 1.0
    LENGTH = 1.0
    DT = 0.05
    MAX_SPEED = 8.0
    MAX_TORQUE = 2.0
    START_HIGH = (math.pi, 1.0)  # start theta in [-pi, pi), theta_dot in [-1, 1)

    def __init__(self, num_envs: int, device="cpu", seed: int | None = None, dtype=torch.float64, groups: int = 1):
        super().__init__(num_envs, device, seed, dtype, groups)
        high = np.array([1.0, 1.0, self.MAX_SPEED], dtype=np.float32)
        self.single_observation_space = spaces.Box(-high, high, dtype=np.float32)
        self.single_action_space = spaces.Box(-self.MAX_TORQUE, self.MAX_TORQUE, shape=(1,), dtype=np.float32)
        self._start_high = torch.tensor(self.START_HIGH, dtype=dtype, device=self.device).unsqueeze(1)  # (2, 1)

    def _initial_state(self, n: int) -> torch.Tensor:
        return self._uniform(-1.0, 1.0, (2, n)).mul_(self._start_high)

    def _transition(self, state, actions):
        theta, theta_dot = state.unbind(0)  # each (N,)
        torque = actions.reshape(self.num_envs).to(torch.float32).clamp(-self.MAX_TORQUE, self.MAX_TORQUE)

        angle_from_top = torch.remainder(theta + math.pi, 2 * math.pi).sub_(math.pi)
        cost = angle_from_top.square_().add_(theta_dot * theta_dot, alpha=0.1).add_(0.001 * torque.square())

        angular_acc = torch.sin(theta).mul_(3 * self.GRAVITY / (2 * self.LENGTH))
        angular_acc += 3.0 / (self.MASS * self.LENGTH**2) * torque  # float32 term, as in gymnasium
        new_theta_dot = angular_acc.mul_(self.DT).add_(theta_dot).clamp_(-self.MAX_SPEED, self.MAX_SPEED)
        new_theta = torch.add(theta, new_theta_dot, alpha=self.DT)
        next_state = torch.stack((new_theta, new_theta_dot))  # (2, N)

        terminated = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        return next_state, cost.neg_().to(torch.float32), terminated

    def _observe(self, state):
        theta, theta_dot = state.unbind(0)
        return self._rows_to_observation(torch.stack((torch.cos(theta), torch.sin(theta), theta_dot)))  # (n, 3)
