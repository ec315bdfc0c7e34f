"""Frame stacking: the last K observations of each copy, oldest first, never across an episode boundary.

A scripted VecEnv gives observations chosen by hand, so the expected stacks can be
written out; gymnasium's own FrameStackObservation (what evaluation uses) is the
independent reference on a real env; a checkpoint continues a stacked run bit for bit;
and a short `ppo-train --frame-stack` run trains and evaluates end to end.
"""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import torch

from envs.classic import make_torch_vec_env
from envs.factory import EnvError, gymnasium_env_factory, make_seed_batch_env, make_vec_env
from envs.frame_stack import FrameStackVecEnv
from ppo.vec_env import StepResult


class ScriptedVecEnv:
    """Two copies with 1-D observations read from a script: per step, (obs, final_obs, done)."""

    num_envs = 2
    device = torch.device("cpu")
    single_observation_space = gym.spaces.Box(-100.0, 100.0, shape=(1,), dtype=np.float32)
    single_action_space = gym.spaces.Discrete(2)

    def __init__(self, first, steps):
        self.first, self.steps, self.t = first, steps, 0

    def reset(self, seed=None):
        return torch.tensor(self.first, dtype=torch.float32).unsqueeze(1)

    def step(self, actions):
        obs, final_obs, done = self.steps[self.t]
        self.t += 1
        column = lambda values: torch.tensor(values, dtype=torch.float32).unsqueeze(1)  # noqa: E731
        done = torch.tensor(done)
        return StepResult(column(obs), torch.zeros(2), done, torch.zeros(2, dtype=torch.bool), column(final_obs))

    def close(self):
        pass


def test_stacks_by_hand_across_an_episode_boundary():
    # Copy 0: episode 1, 2, 3, 4 (ends: final 4), then 10, 11, 12.
    # Copy 1: 5, 6 (ends: final 7), then 20, 21 (ends: final 22), then 30, 31.
    script = [
        ([2, 6], [2, 6], [False, False]),
        ([3, 20], [3, 7], [False, True]),
        ([10, 21], [4, 21], [True, False]),
        ([11, 30], [11, 22], [False, True]),
        ([12, 31], [12, 31], [False, False]),
    ]
    envs = FrameStackVecEnv(ScriptedVecEnv([1, 5], script), num_frames=3)
    expected = [  # (obs, final_obs) of both copies, oldest frame first
        ([[1, 1, 1], [5, 5, 5]], None),
        ([[1, 1, 2], [5, 5, 6]], [[1, 1, 2], [5, 5, 6]]),
        ([[1, 2, 3], [20, 20, 20]], [[1, 2, 3], [5, 6, 7]]),
        ([[10, 10, 10], [20, 20, 21]], [[2, 3, 4], [20, 20, 21]]),
        ([[10, 10, 11], [30, 30, 30]], [[10, 10, 11], [20, 21, 22]]),
        ([[10, 11, 12], [30, 30, 31]], [[10, 11, 12], [30, 30, 31]]),
    ]
    assert torch.equal(envs.reset(), torch.tensor(expected[0][0], dtype=torch.float32))
    for obs, final_obs in expected[1:]:
        result = envs.step(torch.zeros(2, dtype=torch.int64))
        assert torch.equal(result.obs, torch.tensor(obs, dtype=torch.float32))
        assert torch.equal(result.final_obs, torch.tensor(final_obs, dtype=torch.float32))


def test_one_frame_is_the_env_itself_and_the_space_tiles():
    inner = make_torch_vec_env("CartPoleNoVel-v1", 3, seed=0)
    one = FrameStackVecEnv(inner, 1)
    assert torch.equal(one.reset(seed=1), make_torch_vec_env("CartPoleNoVel-v1", 3).reset(seed=1))
    space = FrameStackVecEnv(inner, 4).single_observation_space
    low, high = inner.single_observation_space.low, inner.single_observation_space.high
    assert space.shape == (8,) and space.dtype == np.float32
    np.testing.assert_array_equal(space.low, np.concatenate([low] * 4))
    np.testing.assert_array_equal(space.high, np.concatenate([high] * 4))
    assert make_vec_env("CartPole-v1", 2, frame_stack=1).__class__.__name__ == "TorchCartPole"


def test_training_stacks_equal_gymnasiums_frame_stack_used_in_evaluation():
    """Our VecEnv wrapper against gymnasium's FrameStackObservation + FlattenObservation, through resets."""
    num_envs, frames = 4, 4
    envs = make_vec_env("CartPoleNoVel-v1", num_envs, "gymnasium", frame_stack=frames)
    reference = [gymnasium_env_factory("CartPoleNoVel-v1", frame_stack=frames)() for _ in range(num_envs)]
    obs = envs.reset(seed=0)  # GymnasiumVecEnv seeds copy i with seed + i
    np.testing.assert_array_equal(obs.numpy(), np.stack([env.reset(seed=i)[0] for i, env in enumerate(reference)]))
    rng = np.random.default_rng(0)
    ends = 0
    for _ in range(150):
        actions = rng.integers(0, 2, size=num_envs)
        result = envs.step(torch.as_tensor(actions))
        outcomes = [env.step(a) for env, a in zip(reference, actions)]
        np.testing.assert_array_equal(result.final_obs.numpy(), np.stack([o[0] for o in outcomes]))
        expected = []
        for env, (next_obs, _, terminated, truncated, _) in zip(reference, outcomes):
            ends += terminated or truncated
            expected.append(env.reset()[0] if terminated or truncated else next_obs)
        np.testing.assert_array_equal(result.obs.numpy(), np.stack(expected))
    assert ends >= num_envs


def test_torch_stacks_equal_a_per_copy_history_of_the_unstacked_env():
    """A slow reference: each copy's own list of observations since its episode began."""
    num_envs, frames = 5, 3
    stacked = make_vec_env("CartPoleNoVel-v1", num_envs, "torch", frame_stack=frames)
    plain = make_vec_env("CartPoleNoVel-v1", num_envs, "torch")
    first = plain.reset(seed=2)
    stacked.reset(seed=2)
    histories = [[row] for row in first]

    def last_frames(history):
        padded = [history[0]] * max(0, frames - len(history)) + history[-frames:]
        return torch.cat(padded)

    rng = np.random.default_rng(1)
    ends = 0
    for _ in range(200):
        actions = torch.as_tensor(rng.integers(0, 2, size=num_envs))
        ours, theirs = stacked.step(actions), plain.step(actions)
        done = theirs.terminated | theirs.truncated
        for i in range(num_envs):
            final = last_frames(histories[i] + [theirs.final_obs[i]])
            assert torch.equal(ours.final_obs[i], final)
            histories[i] = [theirs.obs[i]] if done[i] else histories[i] + [theirs.obs[i]]
            assert torch.equal(ours.obs[i], last_frames(histories[i]))
        ends += int(done.sum())
    assert ends >= num_envs


def test_checkpoint_continues_the_stacks_bit_for_bit():
    envs = make_vec_env("CartPoleNoVel-v1", 6, "torch", frame_stack=3)
    envs.reset(seed=0)
    actions = torch.tensor([0, 1, 0, 1, 1, 0])
    for _ in range(4):
        envs.step(actions)
    state = envs.state_dict()
    expected = [envs.step(actions) for _ in range(40)]
    restored = make_vec_env("CartPoleNoVel-v1", 6, "torch", frame_stack=3)
    restored.load_state_dict(state)
    for result in expected:
        again = restored.step(actions)
        assert torch.equal(again.obs, result.obs) and torch.equal(again.final_obs, result.final_obs)
    with pytest.raises(ValueError, match="frame_stack = 2"):
        make_vec_env("CartPoleNoVel-v1", 6, "torch", frame_stack=2).load_state_dict(state)
    assert make_vec_env("CartPoleNoVel-v1", 2, "gymnasium", frame_stack=3).state_dict() is None


def test_seed_batch_member_state_is_that_members_own_run_state():
    batch = make_seed_batch_env("CartPoleNoVel-v1", 3, 2, "torch", frame_stack=2)
    batch.reset(seed=[11, 12, 13])
    single = make_vec_env("CartPoleNoVel-v1", 2, "torch", frame_stack=2)
    single.reset(seed=12)
    actions = torch.tensor([1, 0])
    for _ in range(15):
        batch_result = batch.step(actions.repeat(3))
        single_result = single.step(actions)
    assert torch.equal(batch_result.obs[2:4], single_result.obs)
    member, own = batch.member_state_dict(1), single.state_dict()
    assert torch.equal(member["frames"], own["frames"]) and torch.equal(member["envs"]["state"], own["envs"]["state"])
    resumed = make_vec_env("CartPoleNoVel-v1", 2, "torch", frame_stack=2)
    resumed.load_state_dict(member)
    assert torch.equal(resumed.step(actions).obs, single.step(actions).obs)


def test_spaces_that_cannot_stack_and_bad_sizes_are_refused():
    class ImageEnv(ScriptedVecEnv):
        single_observation_space = gym.spaces.Box(0, 255, shape=(4, 4), dtype=np.uint8)

    with pytest.raises(ValueError, match="flat Box"):
        FrameStackVecEnv(ImageEnv([0, 0], []), 2)
    for bad in (0, -1, 2.0, True):
        with pytest.raises(ValueError, match=f"frame_stack = {bad!r}"):
            FrameStackVecEnv(make_torch_vec_env("CartPole-v1", 2), bad)
    with pytest.raises(EnvError, match="FrozenLake-v1.*flat Box"):
        gymnasium_env_factory("FrozenLake-v1", frame_stack=2)


def test_ppo_train_with_frame_stack_trains_and_evaluates(tmp_path):
    from experiments.commands.train import main

    run_dir = tmp_path / "run"
    code = main(["--env-id", "CartPoleNoVel-v1", "--frame-stack", "3", "--num-envs", "4", "--num-steps", "16",
                 "--total-timesteps", "128", "--eval-episodes", "2", "--run-dir", str(run_dir), "--no-progress",
                 "--no-tensorboard"])
    assert code == 0
    assert json.loads((run_dir / "config.json").read_text())["frame_stack"] == 3
    assert json.loads((run_dir / "eval.json").read_text())["episodes"] == 2
    checkpoint = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    assert len(checkpoint["spaces"]["observation"]["low"]) == 6  # 3 frames of (x, theta)


def test_a_resumed_frame_stacked_run_continues_as_if_never_stopped(tmp_path):
    """The checkpoint holds the stacks: stopping after 2 iterations and resuming gives the
    uninterrupted run's weights bit for bit (same CPU, same operations in the same order)."""
    from experiments.commands.train import training_envs
    from ppo.config import PPOConfig
    from ppo.trainers.ppo import PPO

    config = PPOConfig(env_id="CartPoleNoVel-v1", env_backend="torch", frame_stack=3, num_envs=4, num_steps=32,
                       total_timesteps=4 * 128, tensorboard=False)
    straight = PPO(config, training_envs(config), run_dir=tmp_path / "straight", progress=False)
    straight.train()
    stopped = PPO(config, training_envs(config), run_dir=tmp_path / "stopped", progress=False)
    stopped.train(callback=lambda ppo, metrics: ppo.iteration == 2)
    resumed = PPO.resume(tmp_path / "stopped", training_envs, progress=False)
    assert isinstance(resumed.envs, FrameStackVecEnv) and resumed.next_obs.shape == (4, 6)
    resumed.train()
    for name, weight in straight.model.state_dict().items():
        assert torch.equal(weight, resumed.model.state_dict()[name]), name
