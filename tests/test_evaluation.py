"""Evaluation counts every episode once, with its whole return, on either kind of env copies.

`evaluate_policy` steps N single gymnasium copies (SAME_STEP autoreset) or, where the
factory offers one, gymnasium's numpy-vectorised env (NEXT_STEP autoreset: the step after
an episode's end only restarts that copy).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from envs.factory import gymnasium_env_factory
from ppo.config import PPOConfig
from ppo.evaluation import Policy, evaluate_policy


class ConstantModel(torch.nn.Module):
    """A 'network' whose greedy action is always `action` (CartPole: 0 = push left)."""

    def __init__(self, action: int = 0):
        super().__init__()
        self.action = action

    def greedy_action(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.full((obs.shape[0],), self.action, dtype=torch.int64)


def constant_policy(action: int = 0) -> Policy:
    return Policy(ConstantModel(action), PPOConfig(), None)


class CountdownVecEnv(gym.vector.VectorEnv):
    """N copies whose episode k lasts k + 1 steps paying 1 per step; NEXT_STEP autoreset,
    and the restarting step pays a reward of 1000 that must not be counted."""

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int):
        self.num_envs = num_envs
        self.single_observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.single_action_space = gym.spaces.Discrete(2)
        self.episode = np.zeros(num_envs, dtype=np.int64)
        self.steps = np.zeros(num_envs, dtype=np.int64)
        self.restart = np.zeros(num_envs, dtype=bool)

    def reset(self, *, seed=None, options=None):
        self.episode[:] = 0
        self.steps[:] = 0
        self.restart[:] = False
        return np.zeros((self.num_envs, 1), np.float32), {}

    def step(self, actions):
        reward = np.where(self.restart, 1000.0, 1.0)
        self.steps = np.where(self.restart, 0, self.steps + 1)
        self.episode = self.episode + self.restart
        terminated = ~self.restart & (self.steps == self.episode + 1)
        self.restart = terminated
        return np.zeros((self.num_envs, 1), np.float32), reward, terminated, np.zeros(self.num_envs, bool), {}


class CountdownFactory:
    def __call__(self):
        raise AssertionError("make_vec is there: no single copies")

    def make_vec(self, num_envs):
        return CountdownVecEnv(num_envs)


def test_next_step_autoreset_counts_each_episode_once_without_the_restart_step():
    returns = evaluate_policy(constant_policy(), CountdownFactory(), episodes=7, num_envs=3)
    # quotas 3, 2, 2: copy 0 plays episodes of 1, 2, 3 steps; copies 1 and 2 of 1 and 2 steps
    assert sorted(returns.tolist()) == [1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 3.0]


def test_cartpole_factory_offers_gymnasium_vector_env_and_others_do_not():
    vector = gymnasium_env_factory("CartPole-v1").make_vec(4)
    assert vector.num_envs == 4 and vector.metadata["autoreset_mode"] == gym.vector.AutoresetMode.NEXT_STEP
    vector.close()
    assert gymnasium_env_factory("Acrobot-v1").make_vec(4) is None
    assert gymnasium_env_factory("CartPole-v1", render_mode="rgb_array").make_vec(4) is None  # rendering: single copies
    assert isinstance(gymnasium_env_factory("CartPole-v1")(), gym.Env)


def test_vectorised_and_single_copy_cartpole_evaluations_agree():
    """Always pushing left fails CartPole in ~9 steps: both paths give 100 such episodes."""
    factory = gymnasium_env_factory("CartPole-v1")
    vectorised = evaluate_policy(constant_policy(), factory, episodes=100, seed=3)
    single = evaluate_policy(constant_policy(), factory.__call__, episodes=100, seed=3)  # a plain function
    assert len(vectorised) == len(single) == 100
    assert vectorised.min() >= 8 and vectorised.max() <= 11 and single.min() >= 8 and single.max() <= 11
    assert abs(vectorised.mean() - single.mean()) < 0.5
    np.testing.assert_array_equal(vectorised, evaluate_policy(constant_policy(), factory, episodes=100, seed=3))
