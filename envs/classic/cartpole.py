"""CartPole-v1 for N copies at once.

A pole hinged on a cart that slides without friction along a track; the agent pushes
the cart left (action 0) or right (action 1) with a force of fixed size F = 10 N.

State s = (x, x_dot, theta, theta_dot): cart position, cart velocity, pole angle from
upright, pole angular velocity. With cart mass m_c = 1, pole mass m_p = 0.1, half pole
length l = 0.5, M = m_c + m_p and g = 9.8 (Barto, Sutton & Anderson 1983, frictionless):

    temp      = (F + m_p l theta_dot^2 sin(theta)) / M
    theta_acc = (g sin(theta) - cos(theta) temp) / (l (4/3 - m_p cos^2(theta) / M))
    x_acc     = temp - m_p l theta_acc cos(theta) / M

Integrator: explicit Euler with tau = 0.02 s; every new value uses the old state,

    x <- x + tau x_dot,   x_dot <- x_dot + tau x_acc,
    theta <- theta + tau theta_dot,   theta_dot <- theta_dot + tau theta_acc.

Reward +1 every step, the terminating one included. Terminates when |x| > 2.4 or
|theta| > 12 degrees (checked on the new state); truncated after 500 steps. Start state:
each variable uniform in [-0.05, 0.05).

Dtype: gymnasium keeps the state in float64 and hands out float32 observations, so the
physics runs in float64 by default. Against gymnasium over 16 copies x 1000 random steps
the float32 observations then agree bit for bit and the float64 states to ~1e-13 (the
code folds constants, e.g. F / M, and torch's sin/cos may differ from numpy's by an ulp).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from gymnasium import spaces

from envs.classic.base import TorchClassicEnv


class TorchCartPole(TorchClassicEnv):
    env_id = "CartPole-v1"
    max_episode_steps = 500
    state_dim = 4
    observation_is_state = True

    GRAVITY = 9.8
    CART_MASS = 1.0
    POLE_MASS = 0.1
    TOTAL_MASS = CART_MASS + POLE_MASS
    POLE_HALF_LENGTH = 0.5
    POLE_MASS_LENGTH = POLE_MASS * POLE_HALF_LENGTH
    MASS_LENGTH_RATIO = POLE_MASS_LENGTH / TOTAL_MASS  # m_p l / M, in all three equations
    FORCE = 10.0
    TAU = 0.02
    X_LIMIT = 2.4
    THETA_LIMIT = 12 * 2 * math.pi / 360  # 12 degrees in radians
    START_RANGE = 0.05

    def __init__(self, num_envs: int, device="cpu", seed: int | None = None, dtype=torch.float64, groups: int = 1):
        super().__init__(num_envs, device, seed, dtype, groups)
        # Observations may leave the termination box by one step; the space allows twice it.
        high = np.array([2 * self.X_LIMIT, np.inf, 2 * self.THETA_LIMIT, np.inf], dtype=np.float32)
        self.single_observation_space = spaces.Box(-high, high, dtype=np.float32)
        self.single_action_space = spaces.Discrete(2)
        as_tensor = dict(dtype=dtype, device=self.device)
        self._force_over_mass = torch.tensor([-self.FORCE, self.FORCE], **as_tensor) / self.TOTAL_MASS  # by action
        self._four_thirds_l = torch.tensor(4.0 / 3.0 * self.POLE_HALF_LENGTH, **as_tensor)
        self._limits = torch.tensor([[self.X_LIMIT], [self.THETA_LIMIT]], **as_tensor)  # (2, 1) for x, theta

    def _initial_state(self, n: int) -> torch.Tensor:
        return self._uniform(-self.START_RANGE, self.START_RANGE, (4, n))

    def _transition(self, state, actions):
        x, x_dot, theta, theta_dot = state.unbind(0)  # each (N,)
        force_over_mass = self._force_over_mass.index_select(0, actions)  # (N,) F / M
        cos, sin = torch.cos(theta), torch.sin(theta)

        # temp = (F + m_p l theta_dot^2 sin) / M
        temp = torch.addcmul(force_over_mass, theta_dot * theta_dot, sin, value=self.MASS_LENGTH_RATIO)
        # theta_acc = (g sin - cos temp) / (l (4/3 - m_p cos^2 / M)) = (...) / (4 l / 3 - (m_p l / M) cos^2)
        denominator = torch.addcmul(self._four_thirds_l, cos, cos, value=-self.MASS_LENGTH_RATIO)
        theta_acc = torch.mul(sin, self.GRAVITY).addcmul_(cos, temp, value=-1.0).div_(denominator)
        # x_acc = temp - m_p l theta_acc cos / M
        x_acc = torch.addcmul(temp, theta_acc, cos, value=-self.MASS_LENGTH_RATIO)

        # Explicit Euler, s <- s + tau ds/dt, written row by row into the new state.
        next_state = torch.empty_like(state)  # (4, N)
        for row, rate in enumerate((x_dot, x_acc, theta_dot, theta_acc)):
            torch.add(state[row], rate, alpha=self.TAU, out=next_state[row])

        # |x| > 2.4 or |theta| > 12 degrees, both rows in one comparison.
        out_of_bounds = next_state[0::2].abs() > self._limits  # (2, N)
        terminated = out_of_bounds[0] | out_of_bounds[1]
        reward = torch.ones(self.num_envs, dtype=torch.float32, device=self.device)
        return next_state, reward, terminated

    def _observe(self, state):
        return self._rows_to_observation(state)  # (n, 4): the observation is the state
