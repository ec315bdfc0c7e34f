"""The batched torch classic-control envs step exactly like gymnasium's.

The main test runs N gymnasium envs (each from `gymnasium.make`, so its TimeLimit
counts the steps) in lockstep with one torch env of N copies: same start states, same
actions, thousands of steps through terminations, truncations and resets. When a copy's
episode ends, the torch env has already drawn a fresh start state; the test checks that
it lies in gymnasium's start range, resets the gymnasium copy and copies that state in,
so both sides go on in sync.

Acrobot is chaotic: float64 round-off differences (gymnasium's numpy sin/cos vs torch's)
can grow step by step. Its lockstep test therefore copies gymnasium's state into the
torch env after every step and so compares one-step dynamics exactly; a separate
free-running test bounds the drift over a whole episode (measured: below 1e-6 in the
observations for these seeds).
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from envs.classic import TORCH_ENV_IDS, make_torch_vec_env

NUM_ENVS = 16
OBS_RTOL, OBS_ATOL = 1e-6, 1e-7  # float32 observations: equal up to the last bit or two
# Float64 internal states: round-off differences (numpy's vs torch's sin and cos, fused
# multiply-adds) are ~1e-16 per step but grow where the dynamics are unstable (an
# inverted pendulum), up to ~1e-10 after a few hundred steps.
STATE_RTOL, STATE_ATOL = 1e-9, 1e-8


# ----- per-environment knowledge on the gymnasium side ----------------------------------


def gym_observation(env_id: str, env: gym.Env) -> np.ndarray:
    """The observation gymnasium's env would return for its current state."""
    unwrapped = env.unwrapped
    if env_id == "Acrobot-v1":
        return unwrapped._get_ob()
    if env_id == "Pendulum-v1":
        return unwrapped._get_obs()
    return np.array(unwrapped.state, dtype=np.float32)  # CartPole, MountainCar


def assert_in_start_range(env_id: str, states: np.ndarray) -> None:
    """states (k, state_dim): fresh start states must come from gymnasium's start distribution."""
    if env_id == "CartPole-v1":
        assert np.all(np.abs(states) <= 0.05)
    elif env_id == "Acrobot-v1":
        assert np.all(np.abs(states) <= 0.1)
        assert np.array_equal(states.astype(np.float32).astype(np.float64), states)  # float32 values
    elif env_id == "Pendulum-v1":
        assert np.all(np.abs(states[:, 0]) <= math.pi) and np.all(np.abs(states[:, 1]) <= 1.0)
    elif env_id in ("MountainCar-v0", "MountainCarContinuous-v0"):
        assert np.all((states[:, 0] >= -0.6) & (states[:, 0] <= -0.4)) and np.all(states[:, 1] == 0.0)
    else:
        raise AssertionError(env_id)


def random_actions(space: gym.Space, rng: np.random.Generator, n: int) -> np.ndarray:
    if isinstance(space, gym.spaces.Discrete):
        return rng.integers(0, space.n, size=n)
    # A little beyond the bounds, so that both sides' clipping is exercised.
    return rng.uniform(1.25 * space.low, 1.25 * space.high, size=(n, *space.shape)).astype(space.dtype)


# ----- lockstep equivalence ----------------------------------------------------------------


def run_lockstep(env_id, steps, resync_every_step=False, reset_by_index=True, seed=0):
    """Step both sides together and compare every output; returns counts of episode ends."""
    torch_env = make_torch_vec_env(env_id, NUM_ENVS, seed=seed)
    torch_env.reset_by_index = reset_by_index
    torch_env.reset(seed=seed)
    gym_envs = [gym.make(env_id) for _ in range(NUM_ENVS)]
    rng = np.random.default_rng(seed)

    # Start both sides in the torch env's start states, with step counters already
    # advanced at random (near the limit for CartPole, whose random episodes are short),
    # so that time-limit truncations happen early and at different steps.
    limit = torch_env.max_episode_steps
    low = limit - 30 if env_id == "CartPole-v1" else 0
    elapsed = rng.integers(low, limit, size=NUM_ENVS)
    torch_env.set_state(torch_env.state, elapsed_steps=torch.as_tensor(elapsed))
    for i, env in enumerate(gym_envs):
        env.reset(seed=seed + i)
        env.unwrapped.state = torch_env.state[i].numpy().copy()
        env._elapsed_steps = int(elapsed[i])  # the TimeLimit wrapper's counter

    terminations = truncations = 0
    for _ in range(steps):
        actions = random_actions(torch_env.single_action_space, rng, NUM_ENVS)
        result = torch_env.step(torch.as_tensor(actions))
        outcomes = [env.step(action) for env, action in zip(gym_envs, actions)]

        gym_obs = np.stack([o[0] for o in outcomes])
        gym_reward = np.array([o[1] for o in outcomes], dtype=np.float32)
        gym_terminated = np.array([o[2] for o in outcomes])
        gym_truncated = np.array([o[3] for o in outcomes])
        np.testing.assert_array_equal(result.terminated.numpy(), gym_terminated)
        np.testing.assert_array_equal(result.truncated.numpy(), gym_truncated)
        np.testing.assert_allclose(result.final_obs.numpy(), gym_obs, rtol=OBS_RTOL, atol=OBS_ATOL)
        np.testing.assert_allclose(result.reward.numpy(), gym_reward, rtol=1e-6)
        terminations += int(gym_terminated.sum())
        truncations += int(gym_truncated.sum())

        # Rows that ended: the torch env restarted them; restart gymnasium's in the same state.
        ended = np.flatnonzero(gym_terminated | gym_truncated)
        torch_state = torch_env.state.numpy()  # (N, state_dim), after the autoreset
        assert_in_start_range(env_id, torch_state[ended])
        for i in ended:
            gym_envs[i].reset()
            gym_envs[i].unwrapped.state = torch_state[i].copy()
        assert torch.all(torch_env.elapsed_steps[ended] == 0)
        expected_obs = np.stack([gym_observation(env_id, env) for env in gym_envs])
        np.testing.assert_allclose(result.obs.numpy(), expected_obs, rtol=OBS_RTOL, atol=OBS_ATOL)

        gym_state = np.stack([np.asarray(env.unwrapped.state, dtype=np.float64) for env in gym_envs])
        if resync_every_step:
            torch_env.set_state(gym_state)
        else:
            np.testing.assert_allclose(torch_state, gym_state, rtol=STATE_RTOL, atol=STATE_ATOL)
    for env in gym_envs:
        env.close()
    return terminations, truncations


@pytest.mark.parametrize(
    "env_id, steps, resync",
    [
        ("CartPole-v1", 800, False),
        ("MountainCar-v0", 500, False),
        ("Pendulum-v1", 500, False),
        ("MountainCarContinuous-v0", 1100, False),
        ("Acrobot-v1", 550, True),
    ],
)
def test_lockstep_with_gymnasium(env_id, steps, resync):
    terminations, truncations = run_lockstep(env_id, steps, resync_every_step=resync)
    assert truncations > 0  # the time limit was exercised
    if env_id == "CartPole-v1":
        assert terminations > 100


def test_mountain_car_continuous_reaches_the_flag_bit_for_bit_with_gymnasium():
    """Pushing along the velocity (energy pumping) reaches the flag: terminations, the +100
    reward, and states equal to gymnasium's to the last bit (float64 first step, float32
    after it, float64 pushes for actions beyond the bounds)."""
    num_envs = 8
    torch_env = make_torch_vec_env("MountainCarContinuous-v0", num_envs, seed=5)
    torch_env.reset(seed=5)
    gym_envs = [gym.make("MountainCarContinuous-v0") for _ in range(num_envs)]
    for i, env in enumerate(gym_envs):
        env.reset(seed=i)
        env.unwrapped.state = torch_env.state[i].numpy().copy()
    rng = np.random.default_rng(5)
    terminations = 0
    for _ in range(400):
        direction = np.where(torch_env.state[:, 1].numpy() >= 0, 1.0, -1.0)
        actions = (direction * rng.uniform(0.6, 1.3, size=num_envs)).astype(np.float32).reshape(num_envs, 1)
        result = torch_env.step(torch.as_tensor(actions))
        outcomes = [env.step(action) for env, action in zip(gym_envs, actions)]
        np.testing.assert_array_equal(result.terminated.numpy(), [o[2] for o in outcomes])
        np.testing.assert_array_equal(result.final_obs.numpy(), np.stack([o[0] for o in outcomes]))
        np.testing.assert_array_equal(result.reward.numpy(), np.array([o[1] for o in outcomes], dtype=np.float32))
        for i in np.flatnonzero(result.terminated.numpy()):
            gym_envs[i].reset()
            gym_envs[i].unwrapped.state = torch_env.state[i].numpy().copy()
        terminations += int(result.terminated.sum())
        gym_state = np.stack([np.asarray(env.unwrapped.state, dtype=np.float64) for env in gym_envs])
        np.testing.assert_array_equal(torch_env.state.numpy(), gym_state)
    assert terminations >= num_envs  # every copy reached the flag at least once
    assert torch.all(result.reward[result.terminated] > 99)


def test_lockstep_with_mask_autoreset():
    """The mask autoreset (the default off CPU) agrees with gymnasium as well."""
    terminations, truncations = run_lockstep("CartPole-v1", 300, reset_by_index=False, seed=1)
    assert terminations > 0 and truncations > 0


def test_acrobot_free_running_drift_is_small():
    """Without re-syncing, Acrobot's float64 round-off differences may grow, but stay small."""
    num_envs = 8
    torch_env = make_torch_vec_env("Acrobot-v1", num_envs, seed=3)
    torch_env.reset(seed=3)
    gym_envs = [gym.make("Acrobot-v1") for _ in range(num_envs)]
    for i, env in enumerate(gym_envs):
        env.reset(seed=i)
        env.unwrapped.state = torch_env.state[i].numpy().copy()
    rng = np.random.default_rng(3)
    for _ in range(torch_env.max_episode_steps - 1):  # one whole episode, no resets
        actions = rng.integers(0, 3, size=num_envs)
        result = torch_env.step(torch.as_tensor(actions))
        gym_obs = np.stack([env.step(a)[0] for env, a in zip(gym_envs, actions)])
        np.testing.assert_allclose(result.obs.numpy(), gym_obs, atol=1e-5)


@pytest.mark.parametrize("env_id", TORCH_ENV_IDS)
def test_truncation_at_exact_step_count(env_id):
    """From a fresh reset, truncated turns True on step max_episode_steps, not before.

    A neutral action (no force) keeps the episode from terminating; CartPole's pole falls
    within ~100 steps whatever the action, so there the counter starts at the limit - 3.
    """
    limit = gym.spec(env_id).max_episode_steps
    torch_env = make_torch_vec_env(env_id, 2, seed=0)
    assert torch_env.max_episode_steps == limit
    torch_env.reset(seed=0)
    first_step = 1
    if env_id == "CartPole-v1":
        first_step = limit - 2
        torch_env.elapsed_steps.fill_(first_step - 1)
    continuous = isinstance(torch_env.single_action_space, gym.spaces.Box)
    neutral = torch.zeros((2, 1)) if continuous else torch.ones(2, dtype=torch.int64)
    for step in range(first_step, limit + 1):
        result = torch_env.step(neutral)
        assert not result.terminated.any()
        assert bool(result.truncated.all()) == (step == limit) and result.truncated.all() == result.truncated.any()
    assert torch.all(torch_env.elapsed_steps == 0)


# ----- seeding, spaces, autoreset semantics, start states ----------------------------------


def rollout(env_id, seed, steps=80, num_envs=8):
    """Observations of a rollout with fixed actions, time-limit resets at step 40 included."""
    env = make_torch_vec_env(env_id, num_envs)
    rng = np.random.default_rng(0)
    observations = [env.reset(seed=seed)]
    env.elapsed_steps.fill_(env.max_episode_steps - 40)
    for _ in range(steps):
        actions = torch.as_tensor(random_actions(env.single_action_space, rng, num_envs))
        observations.append(env.step(actions).obs)
    return torch.stack(observations)


@pytest.mark.parametrize("env_id", TORCH_ENV_IDS)
def test_same_seed_same_trajectories_and_different_seeds_differ(env_id):
    first = rollout(env_id, seed=7)
    assert torch.equal(first, rollout(env_id, seed=7))
    assert not torch.equal(first[0], rollout(env_id, seed=8, steps=0)[0])


def test_reset_without_seed_continues_the_stream():
    env = make_torch_vec_env("CartPole-v1", 4)
    first = env.reset(seed=3)
    second = env.reset()
    assert not torch.equal(first, second)
    again = make_torch_vec_env("CartPole-v1", 4)
    again.reset(seed=3)
    assert torch.equal(again.reset(), second)
    assert torch.equal(make_torch_vec_env("CartPole-v1", 4, seed=3).reset(), first)  # seed at construction


@pytest.mark.parametrize("env_id", TORCH_ENV_IDS)
def test_spaces_equal_gymnasium(env_id):
    torch_env = make_torch_vec_env(env_id, 2)
    gym_env = gym.make(env_id)
    for ours, theirs in [
        (torch_env.single_observation_space, gym_env.observation_space),
        (torch_env.single_action_space, gym_env.action_space),
    ]:
        assert type(ours) is type(theirs) and ours == theirs and ours.dtype == theirs.dtype
        if isinstance(theirs, gym.spaces.Box):
            assert np.array_equal(ours.low, theirs.low) and np.array_equal(ours.high, theirs.high)
    obs = torch_env.reset(seed=0)
    assert obs.shape == (2, *gym_env.observation_space.shape) and obs.dtype == torch.float32


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("env_id", TORCH_ENV_IDS)
def test_final_obs_differs_from_obs_exactly_where_an_episode_ended(env_id, dtype):
    env = make_torch_vec_env(env_id, 64, seed=0, dtype=dtype)
    env.reset(seed=0)
    env.elapsed_steps.copy_(torch.arange(64) % 7 + env.max_episode_steps - 7)  # truncations soon
    rng = np.random.default_rng(0)
    ended_somewhere = False
    for _ in range(40):
        result = env.step(torch.as_tensor(random_actions(env.single_action_space, rng, 64)))
        done = result.terminated | result.truncated
        assert torch.equal((result.final_obs != result.obs).any(dim=1), done)
        # the restart wrote fresh states into the env; the returned final_obs kept the old ones
        assert not torch.equal(result.final_obs[done], env._observe(env._state)[done]) or not done.any()
        assert result.reward.dtype == torch.float32 and result.terminated.dtype == torch.bool
        ended_somewhere |= bool(done.any())
    assert ended_somewhere


@pytest.mark.parametrize("env_id", TORCH_ENV_IDS)
def test_start_states_cover_gymnasium_range(env_id):
    env = make_torch_vec_env(env_id, 4096, seed=0)
    env.reset(seed=0)
    states = env.state.numpy()
    assert_in_start_range(env_id, states)
    spread = states.max(axis=0) - states.min(axis=0)
    expected = {
        "CartPole-v1": [0.1] * 4,
        "Acrobot-v1": [0.2] * 4,
        "Pendulum-v1": [2 * math.pi, 2.0],
        "MountainCar-v0": [0.2, 0.0],
        "MountainCarContinuous-v0": [0.2, 0.0],
    }[env_id]
    np.testing.assert_allclose(spread, expected, rtol=0.01)  # uniform, filling the range


# ----- errors ------------------------------------------------------------------------------


def test_unknown_env_id_names_it_and_the_supported_ones():
    with pytest.raises(ValueError) as excinfo:
        make_torch_vec_env("LunarLander-v3", 4)
    message = str(excinfo.value)
    assert "LunarLander-v3" in message and "\n" not in message
    assert all(env_id in message for env_id in TORCH_ENV_IDS)


def test_max_episode_steps_sets_the_time_limit_and_refuses_bad_values():
    env = make_torch_vec_env("CartPole-v1", 3, seed=0, max_episode_steps=5)
    env.reset(seed=0)
    truncated = [bool(env.step(torch.ones(3, dtype=torch.int64)).truncated.all()) for _ in range(5)]
    assert truncated == [False, False, False, False, True]  # pushed right: still upright after 5 steps
    assert make_torch_vec_env("CartPole-v1", 3).max_episode_steps == 500
    for bad in (0, -3):
        with pytest.raises(ValueError, match=f"max_episode_steps = {bad}"):
            make_torch_vec_env("CartPole-v1", 3, max_episode_steps=bad)


def test_step_before_reset_raises():
    env = make_torch_vec_env("CartPole-v1", 2)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(torch.zeros(2, dtype=torch.int64))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("env_id", TORCH_ENV_IDS)
def test_runs_on_cuda(env_id):
    env = make_torch_vec_env(env_id, 256, device="cuda", seed=0)
    assert not env.reset_by_index
    obs = env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(250):
        result = env.step(torch.as_tensor(random_actions(env.single_action_space, rng, 256), device="cuda"))
    assert obs.device.type == result.obs.device.type == "cuda"
    assert torch.isfinite(result.obs).all()
