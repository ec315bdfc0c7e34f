"""CueMemory-v0: the cue at t = 0, blanks, the question at t = delay + 1, reward for the right answer.

The central claim: a policy that sees only the current observation (or a stack of the
last F ≤ delay + 1 of them) answers correctly in exactly 1/C of the episodes, whatever it
is, because the question looks the same for every cue. The tests check it on arbitrary
memoryless policies over many episodes, and check that a policy with memory gets 1, so
that a leak of the cue into later observations would be caught.
"""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from envs.classic import make_torch_vec_env
from envs.cue_memory import DEFAULT_DELAY, TorchCueMemory
from envs.factory import make_vec_env
from envs.frame_stack import FrameStackVecEnv


def test_one_episode_by_hand():
    """delay 2, 3 cues: o_0 = (e_c, 0), o_1 = o_2 = 0, o_3 = (0, 0, 0, 1), answer at o_3."""
    env = make_torch_vec_env("CueMemory-v0", 3, seed=0, delay=2, num_cues=3)
    first = env.reset(seed=0)
    cues = env.state[:, 0].long()
    assert torch.equal(first, torch.cat((torch.nn.functional.one_hot(cues, 3).float(), torch.zeros(3, 1)), 1))
    blank, question = torch.zeros(3, 4), torch.tensor([[0.0, 0.0, 0.0, 1.0]]).expand(3, 4)
    answers = torch.tensor([0, 1, 2])
    for step, expected in enumerate((blank, blank, question)):
        result = env.step((answers + step) % 3)  # actions before the question do nothing
        assert torch.equal(result.obs, expected)
        assert not result.terminated.any() and not result.truncated.any() and not result.reward.any()
    result = env.step(answers)
    assert torch.equal(result.terminated, torch.ones(3, dtype=torch.bool)) and not result.truncated.any()
    assert torch.equal(result.reward, (answers == cues).float())
    assert torch.equal(result.final_obs, torch.zeros(3, 4))  # the state after the answer: blank
    assert torch.equal(result.obs[:, :3].sum(1), torch.ones(3)) and not result.obs[:, 3].any()  # new cues


def answer_step_results(policy, num_cues=4, delay=DEFAULT_DELAY, episodes=4000, frame_stack=1, seed=0):
    """(cues, answers, rewards, observations at the question) of one episode in each of
    `episodes` copies, acting with `policy(obs) -> actions`."""
    envs = make_torch_vec_env("CueMemory-v0", episodes, seed=seed, delay=delay, num_cues=num_cues)
    if frame_stack > 1:
        envs = FrameStackVecEnv(envs, frame_stack)
    obs = envs.reset(seed=seed)
    cues = (envs.envs if frame_stack > 1 else envs).state[:, 0].long().clone()
    for _ in range(delay + 1):
        obs = envs.step(policy(obs)).obs
    question, answers = obs.clone(), policy(obs)
    result = envs.step(answers)
    assert result.terminated.all()
    return cues, answers, result.reward, question


def binomial_bound(p: float, n: int) -> float:
    return 5 * math.sqrt(p * (1 - p) / n)  # 5 standard deviations: a false alarm about once in 10^6 runs


def random_mlp(in_dim: int, out_dim: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    w1, w2 = torch.randn(in_dim, 32, generator=generator), torch.randn(32, out_dim, generator=generator)
    return lambda obs: torch.tanh(obs @ w1) @ w2  # (N, out_dim) logits


@pytest.mark.parametrize("num_cues", [2, 4])
def test_every_memoryless_policy_answers_right_one_time_in_num_cues(num_cues):
    reads_the_cue = lambda obs: obs[:, :num_cues].argmax(1)  # right at t = 0, where the cue is visible  # noqa: E731
    logits = random_mlp(num_cues + 1, num_cues, seed=1)
    greedy_mlp = lambda obs: logits(obs).argmax(1)  # noqa: E731
    sampler = torch.Generator().manual_seed(2)
    def sampling_mlp(obs):
        return torch.multinomial(torch.softmax(logits(obs), 1), 1, generator=sampler).squeeze(1)

    episodes = 4000
    for policy in (reads_the_cue, greedy_mlp, sampling_mlp):
        cues, answers, rewards, question = answer_step_results(policy, num_cues, episodes=episodes)
        assert torch.equal(question, question[:1].expand_as(question))  # one question for every cue
        assert torch.equal(rewards, (answers == cues).float())
        assert abs(rewards.mean().item() - 1 / num_cues) < binomial_bound(1 / num_cues, episodes)
    # A deterministic memoryless policy gives every cue the same answer: right for one cue in num_cues.
    _, answers, _, _ = answer_step_results(greedy_mlp, num_cues, episodes=episodes)
    assert len(answers.unique()) == 1


def test_four_stacked_frames_do_not_reach_the_cue_but_delay_plus_two_do():
    delay, num_cues, episodes = DEFAULT_DELAY, 4, 4000
    logits = random_mlp(4 * (num_cues + 1), num_cues, seed=3)
    cues, answers, rewards, question = answer_step_results(lambda obs: logits(obs).argmax(1), num_cues, delay,
                                                            episodes, frame_stack=4)
    assert torch.equal(question, question[:1].expand_as(question))
    assert abs(rewards.mean().item() - 1 / num_cues) < binomial_bound(1 / num_cues, episodes)
    # delay + 2 frames hold o_0: reading the cue from the oldest frame answers every episode right.
    oldest_cue = lambda obs: obs[:, :num_cues].argmax(1)  # noqa: E731
    _, _, rewards, _ = answer_step_results(oldest_cue, num_cues, delay, 500, frame_stack=delay + 2)
    assert rewards.mean().item() == 1.0


def test_a_policy_with_memory_answers_every_episode_right():
    num_cues, episodes = 4, 500
    memory = {}

    def remembers(obs):
        if "cue" not in memory:
            memory["cue"] = obs[:, :num_cues].argmax(1)  # the first observation shows the cue
        return memory["cue"]

    _, _, rewards, _ = answer_step_results(remembers, num_cues, episodes=episodes)
    assert rewards.mean().item() == 1.0


def test_cues_are_uniform_and_seeded():
    env = make_torch_vec_env("CueMemory-v0", 20_000, seed=0, num_cues=4)
    env.reset(seed=4)
    counts = torch.bincount(env.state[:, 0].long(), minlength=4).float()
    assert torch.all((counts / 20_000 - 0.25).abs() < binomial_bound(0.25, 20_000))
    again = make_torch_vec_env("CueMemory-v0", 20_000, num_cues=4)
    again.reset(seed=4)
    assert torch.equal(again.state, env.state)


def test_torch_and_gymnasium_versions_step_alike():
    delay, num_cues, n = 3, 3, 6
    torch_env = make_torch_vec_env("CueMemory-v0", n, seed=0, delay=delay, num_cues=num_cues)
    torch_env.reset(seed=0)
    gym_envs = [gym.make("CueMemory-v0", delay=delay, num_cues=num_cues) for _ in range(n)]
    for i, env in enumerate(gym_envs):
        env.reset(seed=i)
        env.unwrapped.cue = int(torch_env.state[i, 0])
    rng = np.random.default_rng(0)
    answered = 0
    for _ in range(4 * (delay + 2)):
        actions = rng.integers(0, num_cues, size=n)
        result = torch_env.step(torch.as_tensor(actions))
        outcomes = [env.step(a) for env, a in zip(gym_envs, actions)]
        np.testing.assert_array_equal(result.final_obs.numpy(), np.stack([o[0] for o in outcomes]))
        np.testing.assert_array_equal(result.reward.numpy(), [o[1] for o in outcomes])
        np.testing.assert_array_equal(result.terminated.numpy(), [o[2] for o in outcomes])
        np.testing.assert_array_equal(result.truncated.numpy(), [o[3] for o in outcomes])
        for i in np.flatnonzero(result.terminated.numpy()):
            obs, _ = gym_envs[i].reset()
            gym_envs[i].unwrapped.cue = int(torch_env.state[i, 0])
            answered += 1
        np.testing.assert_array_equal(result.obs.numpy(), np.stack([env.unwrapped._observation() for env in gym_envs]))
    assert answered == 4 * n
    assert gym_envs[0].observation_space == torch_env.single_observation_space
    assert gym_envs[0].action_space == torch_env.single_action_space == gym.spaces.Discrete(num_cues)


def test_gymnasium_cue_distribution_and_spec():
    env = gym.make("CueMemory-v0")
    cues = [int(np.argmax(env.reset(seed=seed)[0][:4])) for seed in range(2000)]
    assert abs(np.mean(np.array(cues) == 1) - 0.25) < binomial_bound(0.25, 2000)
    assert gym.spec("CueMemory-v0").max_episode_steps is None  # no time limit: every episode is answered
    assert env.observation_space.shape == (5,) and env.action_space == gym.spaces.Discrete(4)


def test_no_time_limit_and_auto_backend_is_torch():
    envs = make_vec_env("CueMemory-v0", 4, "auto")
    assert isinstance(envs, TorchCueMemory)
    envs.reset(seed=0)
    for _ in range(10 * (DEFAULT_DELAY + 2)):
        assert not envs.step(torch.zeros(4, dtype=torch.int64)).truncated.any()


@pytest.mark.parametrize("kwargs, message", [
    (dict(delay=-1), "delay = -1"), (dict(delay=2.5), "delay = 2.5"),
    (dict(num_cues=1), "num_cues = 1"), (dict(num_cues=True), "num_cues = True"),
])
def test_bad_task_sizes_are_refused_by_name(kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_torch_vec_env("CueMemory-v0", 2, **kwargs)
    with pytest.raises(ValueError, match=message):
        gym.make("CueMemory-v0", **kwargs)


def test_checkpoint_round_trip_and_refusal_of_another_task():
    env = make_torch_vec_env("CueMemory-v0", 8, seed=0)
    env.reset(seed=0)
    actions = torch.zeros(8, dtype=torch.int64)
    for _ in range(5):
        env.step(actions)
    state = env.state_dict()
    expected = [env.step(actions) for _ in range(25)]
    restored = make_torch_vec_env("CueMemory-v0", 8)
    restored.load_state_dict(state)
    for result in expected:
        again = restored.step(actions)
        assert torch.equal(again.obs, result.obs) and torch.equal(again.reward, result.reward)
    with pytest.raises(ValueError, match="delay"):
        make_torch_vec_env("CueMemory-v0", 8, delay=3).load_state_dict(state)
