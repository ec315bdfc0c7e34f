"""CartPoleNoVel-v1 and PendulumNoVel-v1: the full env's observation minus its velocity columns.

Each backend is checked against its own full env (same seed, same actions: the observation
is the full one with columns ẋ, θ̇ or θ̇ removed, step for step through resets), and the
torch version against the gymnasium version in lockstep, as tests/test_torch_envs.py
checks the full envs.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from envs.classic import make_torch_vec_env
from envs.factory import make_vec_env
from envs.gymnasium_vec_env import GymnasiumVecEnv
from envs.partially_observable import TorchCartPoleNoVel, TorchPendulumNoVel

# No-velocity id -> (full id, the columns of the full observation it keeps), written out by hand.
CASES = {
    "CartPoleNoVel-v1": ("CartPole-v1", [0, 2]),  # x, theta
    "PendulumNoVel-v1": ("Pendulum-v1", [0, 1]),  # cos theta, sin theta
}
NUM_ENVS = 8


def random_actions(space: gym.Space, rng: np.random.Generator, n: int) -> np.ndarray:
    if isinstance(space, gym.spaces.Discrete):
        return rng.integers(0, space.n, size=n)
    return rng.uniform(space.low, space.high, size=(n, *space.shape)).astype(space.dtype)


@pytest.mark.parametrize("env_id", CASES)
@pytest.mark.parametrize("reset_by_index", [True, False])
def test_torch_observation_is_the_full_one_without_velocities(env_id, reset_by_index):
    full_id, kept = CASES[env_id]
    partial, full = make_torch_vec_env(env_id, NUM_ENVS), make_torch_vec_env(full_id, NUM_ENVS)
    partial.reset_by_index = full.reset_by_index = reset_by_index
    assert torch.equal(partial.reset(seed=3), full.reset(seed=3)[:, kept])
    for env in (partial, full):  # time-limit truncations within the test
        env.elapsed_steps.copy_(torch.arange(NUM_ENVS) * 5 + env.max_episode_steps - 60)
    rng = np.random.default_rng(0)
    ended = 0
    for _ in range(120):
        actions = torch.as_tensor(random_actions(full.single_action_space, rng, NUM_ENVS))
        ours, theirs = partial.step(actions), full.step(actions)
        assert ours.obs.shape == (NUM_ENVS, len(kept))
        assert torch.equal(ours.obs, theirs.obs[:, kept])
        assert torch.equal(ours.final_obs, theirs.final_obs[:, kept])
        for name in ("reward", "terminated", "truncated"):
            assert torch.equal(getattr(ours, name), getattr(theirs, name))
        ended += int((theirs.terminated | theirs.truncated).sum())
    assert ended >= NUM_ENVS  # every copy went through at least one reset


@pytest.mark.parametrize("env_id", CASES)
def test_gymnasium_observation_is_the_full_one_without_velocities(env_id):
    full_id, kept = CASES[env_id]
    partial, full = gym.make(env_id), gym.make(full_id)
    obs, _ = partial.reset(seed=5)
    full_obs, _ = full.reset(seed=5)
    np.testing.assert_array_equal(obs, full_obs[kept])
    rng = np.random.default_rng(1)
    episodes = 0
    for _ in range(700):  # several CartPole episodes, three Pendulum time limits
        action = random_actions(full.action_space, rng, 1)[0]
        obs, reward, terminated, truncated, _ = partial.step(action)
        full_obs, full_reward, full_terminated, full_truncated, _ = full.step(action)
        np.testing.assert_array_equal(obs, full_obs[kept])
        assert (reward, terminated, truncated) == (full_reward, full_terminated, full_truncated)
        if terminated or truncated:
            episodes += 1
            obs, _ = partial.reset()
            full_obs, _ = full.reset()
            np.testing.assert_array_equal(obs, full_obs[kept])
    assert episodes >= 3


@pytest.mark.parametrize("env_id", CASES)
def test_spaces_limits_and_threshold_are_the_full_envs(env_id):
    full_id, kept = CASES[env_id]
    full_space = gym.make(full_id).observation_space
    gym_env, torch_env = gym.make(env_id), make_torch_vec_env(env_id, 2)
    for space in (gym_env.observation_space, torch_env.single_observation_space):
        assert space.shape == (len(kept),) and space.dtype == np.float32
        np.testing.assert_array_equal(space.low, full_space.low[kept])
        np.testing.assert_array_equal(space.high, full_space.high[kept])
    assert gym_env.action_space == torch_env.single_action_space == gym.make(full_id).action_space
    assert gym.spec(env_id).max_episode_steps == gym.spec(full_id).max_episode_steps == torch_env.max_episode_steps
    assert gym.spec(env_id).reward_threshold == gym.spec(full_id).reward_threshold
    assert torch_env.reset(seed=0).shape == (2, len(kept))


def test_auto_backend_picks_torch_and_gymnasium_backend_works():
    assert isinstance(make_vec_env("CartPoleNoVel-v1", 4, "auto"), TorchCartPoleNoVel)
    assert isinstance(make_vec_env("PendulumNoVel-v1", 4, "auto"), TorchPendulumNoVel)
    envs = make_vec_env("CartPoleNoVel-v1", 4, "gymnasium")
    assert isinstance(envs, GymnasiumVecEnv) and envs.reset(seed=0).shape == (4, 2)
    assert envs.step(torch.zeros(4, dtype=torch.int64)).final_obs.shape == (4, 2)


def gym_full_observation(full_id: str, env: gym.Env) -> np.ndarray:
    """The full observation gymnasium's env would return for its current state."""
    unwrapped = env.unwrapped
    return unwrapped._get_obs() if full_id == "Pendulum-v1" else np.array(unwrapped.state, dtype=np.float32)


@pytest.mark.parametrize("env_id", CASES)
def test_torch_and_gymnasium_versions_step_alike(env_id):
    """Lockstep, as for the full envs: the same start states, the same actions, resets included."""
    full_id, kept = CASES[env_id]
    torch_env = make_torch_vec_env(env_id, NUM_ENVS, seed=0)
    torch_env.reset(seed=0)
    limit = torch_env.max_episode_steps
    elapsed = np.arange(NUM_ENVS) * 3 + limit - 40  # truncations early, at different steps
    torch_env.set_state(torch_env.state, elapsed_steps=torch.as_tensor(elapsed))
    gym_envs = [gym.make(env_id) for _ in range(NUM_ENVS)]
    for i, env in enumerate(gym_envs):
        env.reset(seed=i)
        env.unwrapped.state = torch_env.state[i].numpy().copy()
        env._elapsed_steps = int(elapsed[i])  # the TimeLimit wrapper's counter
    rng = np.random.default_rng(2)
    ends = 0
    for _ in range(150):
        actions = random_actions(torch_env.single_action_space, rng, NUM_ENVS)
        result = torch_env.step(torch.as_tensor(actions))
        outcomes = [env.step(action) for env, action in zip(gym_envs, actions)]
        # float32 observations from float64 states that differ by round-off (see test_torch_envs)
        np.testing.assert_allclose(result.final_obs.numpy(), np.stack([o[0] for o in outcomes]),
                                   rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(result.reward.numpy(), np.array([o[1] for o in outcomes], np.float32), rtol=1e-6)
        np.testing.assert_array_equal(result.terminated.numpy(), [o[2] for o in outcomes])
        np.testing.assert_array_equal(result.truncated.numpy(), [o[3] for o in outcomes])
        for i in np.flatnonzero(result.terminated.numpy() | result.truncated.numpy()):
            gym_envs[i].reset()
            gym_envs[i].unwrapped.state = torch_env.state[i].numpy().copy()
            ends += 1
        expected = np.stack([gym_full_observation(full_id, env)[kept] for env in gym_envs])
        np.testing.assert_allclose(result.obs.numpy(), expected, rtol=1e-6, atol=1e-7)
    assert ends >= NUM_ENVS


def test_checkpoint_round_trip_continues_bit_for_bit():
    env = make_torch_vec_env("CartPoleNoVel-v1", 4, seed=0)
    env.reset(seed=0)
    actions = torch.ones(4, dtype=torch.int64)
    env.step(actions)
    state = env.state_dict()
    expected = [env.step(actions).obs for _ in range(30)]
    restored = make_torch_vec_env("CartPoleNoVel-v1", 4)
    restored.load_state_dict(state)
    assert all(torch.equal(restored.step(actions).obs, obs) for obs in expected)
    with pytest.raises(ValueError, match="CartPoleNoVel-v1"):
        make_torch_vec_env("CartPole-v1", 4).load_state_dict(state)
