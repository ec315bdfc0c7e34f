"""Acrobot-v1 for N copies at once.

Two links hang in a chain from a fixed pivot; only the joint between them is actuated.
Action 0, 1, 2 applies torque a = -1, 0, +1 at that joint. The goal is to swing the
tip above the bar: -cos(theta1) - cos(theta1 + theta2) > 1 terminates the episode.

State s = (theta1, theta2, dtheta1, dtheta2): angle of the first link from hanging
down, angle of the second link relative to the first, and their angular velocities.
With link masses m1 = m2 = 1, first link length l1 = 1, centres of mass at lc1 = lc2 =
0.5, moments of inertia I1 = I2 = 1 and g = 9.8 (Sutton & Barto's book version):

    d1 = m1 lc1^2 + m2 (l1^2 + lc2^2 + 2 l1 lc2 cos(theta2)) + I1 + I2
    d2 = m2 (lc2^2 + l1 lc2 cos(theta2)) + I2
    phi2 = m2 lc2 g sin(theta1 + theta2)                       [= cos(theta1 + theta2 - pi/2)]
    phi1 = -m2 l1 lc2 sin(theta2) (dtheta2^2 + 2 dtheta2 dtheta1)
           + (m1 lc1 + m2 l1) g sin(theta1) + phi2
    ddtheta2 = (a + d2 / d1 phi1 - m2 l1 lc2 dtheta1^2 sin(theta2) - phi2)
               / (m2 lc2^2 + I2 - d2^2 / d1)
    ddtheta1 = -(d2 ddtheta2 + phi1) / d1

Integrator: one classic fourth-order Runge-Kutta step of dt = 0.2 s with the torque held
constant, s <- s + dt/6 (k1 + 2 k2 + 2 k3 + k4). Afterwards both angles are wrapped into
[-pi, pi] and the velocities clipped to |dtheta1| <= 4 pi, |dtheta2| <= 9 pi.

Reward -1 per step, 0 on the terminating step; truncated after 500 steps. Start state:
each variable uniform in [-0.1, 0.1), rounded to float32 as gymnasium does.
Observation: (cos theta1, sin theta1, cos theta2, sin theta2, dtheta1, dtheta2).

Dtype: gymnasium integrates in float64 and the motion can be chaotic, so float64 is the
default here. One step agrees with gymnasium's to ~1e-15; free-running, ulp-level
differences (torch's sin/cos vs numpy's) grow to ~1e-6 over an episode of random actions.
In float32 they grow to ~1e-5 by step 200 and to wholly different motions by step 500.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from gymnasium import spaces

from envs.classic.base import TorchClassicEnv

PI = math.pi
TWO_PI = 2 * math.pi


class TorchAcrobot(TorchClassicEnv):
    env_id = "Acrobot-v1"
    max_episode_steps = 500
    state_dim = 4

    DT = 0.2
    GRAVITY = 9.8
    LINK_LENGTH_1 = 1.0
    LINK_MASS_1 = 1.0
    LINK_MASS_2 = 1.0
    LINK_COM_1 = 0.5  # position of the centre of mass along the link
    LINK_COM_2 = 0.5
    LINK_MOI = 1.0  # moment of inertia of either link
    MAX_VEL_1 = 4 * PI
    MAX_VEL_2 = 9 * PI
    TORQUES = (-1.0, 0.0, 1.0)
    START_RANGE = 0.1

    def __init__(self, num_envs: int, device="cpu", seed: int | None = None, dtype=torch.float64, groups: int = 1):
        super().__init__(num_envs, device, seed, dtype, groups)
        high = np.array([1.0, 1.0, 1.0, 1.0, self.MAX_VEL_1, self.MAX_VEL_2], dtype=np.float32)
        self.single_observation_space = spaces.Box(-high, high, dtype=np.float32)
        self.single_action_space = spaces.Discrete(3)
        self._torque_of_action = torch.tensor(self.TORQUES, dtype=dtype, device=self.device)
        max_velocity = torch.tensor([[self.MAX_VEL_1], [self.MAX_VEL_2]], dtype=dtype, device=self.device)
        self._velocity_bounds = (-max_velocity, max_velocity)  # each (2, 1)

        m1, m2, l1, lc1, lc2, inertia = (
            self.LINK_MASS_1, self.LINK_MASS_2, self.LINK_LENGTH_1, self.LINK_COM_1, self.LINK_COM_2, self.LINK_MOI,
        )
        # Constant parts of the equations in the module docstring.
        self._d1_const = m1 * lc1**2 + m2 * (l1**2 + lc2**2) + 2 * inertia
        self._d1_cos = 2 * m2 * l1 * lc2
        self._d2_const = m2 * lc2**2 + inertia
        self._d2_cos = m2 * l1 * lc2
        self._coriolis = m2 * l1 * lc2
        self._gravity_1 = (m1 * lc1 + m2 * l1) * self.GRAVITY
        self._gravity_2 = m2 * lc2 * self.GRAVITY
        self._d2_const_tensor = torch.tensor(self._d2_const, dtype=dtype, device=self.device)

    def _initial_state(self, n: int) -> torch.Tensor:
        start = self._uniform(-self.START_RANGE, self.START_RANGE, (4, n), dtype=torch.float32)
        return start.to(self.dtype)

    def _derivative(self, state: torch.Tensor, torque: torch.Tensor) -> torch.Tensor:
        """ds/dt (4, N) at state (4, N) under torque (N,)."""
        theta1, theta2, dtheta1, dtheta2 = state.unbind(0)
        cos2, sin2 = torch.cos(theta2), torch.sin(theta2)
        d1 = torch.mul(cos2, self._d1_cos).add_(self._d1_const)
        d2 = torch.mul(cos2, self._d2_cos).add_(self._d2_const)
        phi2 = torch.sin(theta1 + theta2).mul_(self._gravity_2)
        phi1 = (dtheta2 * dtheta2).addcmul_(dtheta2, dtheta1, value=2.0).mul_(sin2).mul_(-self._coriolis)
        phi1.add_(torch.sin(theta1), alpha=self._gravity_1).add_(phi2)
        numerator = (d2 / d1).mul_(phi1).add_(torque).sub_(phi2)
        numerator.addcmul_(dtheta1 * dtheta1, sin2, value=-self._coriolis)
        ddtheta2 = numerator.div_(torch.addcdiv(self._d2_const_tensor, d2 * d2, d1, value=-1.0))
        ddtheta1 = torch.addcmul(phi1, d2, ddtheta2).div_(d1).neg_()
        return torch.stack((dtheta1, dtheta2, ddtheta1, ddtheta2))  # (4, N)

    def _transition(self, state, actions):
        torque = self._torque_of_action.index_select(0, actions)  # (N,)
        half_dt = self.DT / 2
        k1 = self._derivative(state, torque)
        k2 = self._derivative(torch.add(state, k1, alpha=half_dt), torque)
        k3 = self._derivative(torch.add(state, k2, alpha=half_dt), torque)
        k4 = self._derivative(torch.add(state, k3, alpha=self.DT), torque)
        slope = torch.add(k1, k2, alpha=2.0).add_(k3, alpha=2.0).add_(k4)  # k1 + 2 k2 + 2 k3 + k4
        next_state = torch.add(state, slope, alpha=self.DT / 6)  # (4, N)

        angles, velocities = next_state[:2], next_state[2:]  # views, each (2, N)
        # Wrap into [-pi, pi]: shift by the whole turns that take the angle back in range.
        angles.sub_(torch.floor((angles + PI) / TWO_PI).mul_(TWO_PI))
        velocities.clamp_(*self._velocity_bounds)

        theta1, theta2 = angles.unbind(0)
        tip_height = torch.cos(theta1).neg_().sub_(torch.cos(theta2 + theta1))
        terminated = tip_height > 1.0
        reward = terminated.to(torch.float32).sub_(1.0)  # -1, or 0 on reaching the goal
        return next_state, reward, terminated

    def _observe(self, state):
        angles, velocities = state[:2], state[2:]  # each (2, n)
        cos_sin = torch.stack((torch.cos(angles), torch.sin(angles)), dim=1)  # (2, 2, n)
        rows = torch.cat((cos_sin.reshape(4, state.shape[1]), velocities))  # (6, n)
        return self._rows_to_observation(rows)  # (n, 6)
