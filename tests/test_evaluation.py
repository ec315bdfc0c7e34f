"""Evaluation counts every episode once, with its whole return, on either kind of env copies;
sampled actions follow the evaluation's seed; greedy and sampled results go to separate files.

`evaluate_policy` steps N single gymnasium copies (SAME_STEP autoreset) or, where the
factory offers one, gymnasium's numpy-vectorised env (NEXT_STEP autoreset: the step after
an episode's end only restarts that copy).
"""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from envs.factory import gymnasium_env_factory
from experiments.commands import evaluate, evaluation
from ppo.config import PPOConfig
from ppo.runs.evaluation import Policy, evaluate_policy, sample_action
from ppo.models.networks import CategoricalDistribution


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


# ---------------------------------------------------------------- sampled actions, reproducible from the seed

class UniformModel(torch.nn.Module):
    """π(a | s) = 1/2 for both actions, whatever s."""

    def distribution(self, obs: torch.Tensor) -> CategoricalDistribution:
        return CategoricalDistribution(torch.zeros(obs.shape[0], 2))


class CoinEnv(gym.Env):
    """Ten steps per episode, each paying the action taken (0 or 1): a return counts heads."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.steps = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.steps += 1
        return np.zeros(1, np.float32), float(action), False, self.steps == 10, {}


def sampled_returns(seed: int, global_seed: int) -> np.ndarray:
    torch.manual_seed(global_seed)  # whatever state torch's global generator is in
    return evaluate_policy(Policy(UniformModel(), PPOConfig(), None), CoinEnv, episodes=40, greedy=False, seed=seed)


def test_sampled_evaluation_is_reproducible_from_its_seed_alone():
    """The env is deterministic: all randomness is in the sampled actions."""
    np.testing.assert_array_equal(sampled_returns(seed=5, global_seed=0), sampled_returns(seed=5, global_seed=1))
    assert not np.array_equal(sampled_returns(seed=5, global_seed=0), sampled_returns(seed=6, global_seed=0))


def test_seeded_sampling_draws_from_the_policy():
    """Frequencies and moments of 40 000 draws agree with π within 5 standard errors."""
    generator = torch.Generator().manual_seed(0)
    draws = 40_000
    logits = torch.log(torch.tensor([[0.2, 0.8]])).expand(draws, 2)
    actions = sample_action(CategoricalDistribution(logits), generator)
    frequency = actions.double().mean().item()
    assert abs(frequency - 0.8) < 5 * (0.8 * 0.2 / draws) ** 0.5

    mean, std = torch.tensor([[1.5, -2.0]]).expand(draws, 2), torch.tensor([[0.5, 2.0]]).expand(draws, 2)
    gaussian = torch.distributions.Independent(torch.distributions.Normal(mean, std), 1)
    samples = sample_action(gaussian, generator)  # (draws, 2)
    torch.testing.assert_close(samples.mean(0), torch.tensor([1.5, -2.0]), atol=5 * 2.0 / draws**0.5, rtol=0)
    torch.testing.assert_close(samples.std(0), torch.tensor([0.5, 2.0]), atol=5 * 2.0 / (2 * draws) ** 0.5, rtol=0)


# ---------------------------------------------------------------- ppo-eval: greedy and sampled results kept apart

@pytest.fixture(scope="module")
def trained_run(tmp_path_factory) -> Path:
    from experiments.commands.train import training_envs
    from ppo.trainers.ppo import PPO

    run_dir = tmp_path_factory.mktemp("eval") / "run"
    config = PPOConfig(env_id="CartPole-v1", env_backend="torch", num_envs=4, num_steps=16, total_timesteps=64,
                       tensorboard=False)
    PPO(config, training_envs(config), run_dir=run_dir, progress=False).train()
    return run_dir


def ppo_eval(run_dir: Path, capsys, *flags: str) -> str:
    assert evaluate.main([str(run_dir), "--episodes", "8", *flags]) == 0
    return capsys.readouterr().out


def test_sampled_evaluation_writes_its_own_file_and_leaves_the_greedy_score_alone(trained_run, capsys):
    out = ppo_eval(trained_run, capsys)
    assert f"8 greedy episodes → {trained_run / 'eval.json'}" in out
    greedy = (trained_run / "eval.json").read_bytes()
    assert json.loads(greedy)["greedy"] is True

    out = ppo_eval(trained_run, capsys, "--sample", "--seed", "3")
    assert f"8 sampled episodes → {trained_run / 'eval-sample.json'}" in out
    assert (trained_run / "eval.json").read_bytes() == greedy  # the score sweeps and plots read
    sampled = json.loads((trained_run / "eval-sample.json").read_text())
    assert sampled["greedy"] is False and sampled["seed"] == 3


def test_ppo_eval_sample_with_a_seed_gives_the_same_result_twice(trained_run, capsys):
    torch.manual_seed(1)
    ppo_eval(trained_run, capsys, "--sample", "--seed", "11")
    first = (trained_run / "eval-sample.json").read_text()
    torch.manual_seed(2)  # a different global stream must not matter
    ppo_eval(trained_run, capsys, "--sample", "--seed", "11")
    assert (trained_run / "eval-sample.json").read_text() == first


class EndlessEnv(gym.Env):
    """An env registered without a time limit that never terminates: reward 1 per step."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), dtype=np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return np.zeros(2, dtype=np.float32), {}

    def step(self, action):
        return np.zeros(2, dtype=np.float32), 1.0, False, False, {}


ENDLESS_ID = "TestEndless-v0"
if ENDLESS_ID not in gym.registry:
    gym.register(ENDLESS_ID, entry_point=EndlessEnv)  # no max_episode_steps, as MinAtar registers its games


def test_an_env_without_a_time_limit_is_evaluated_under_the_default_step_limit():
    # Without a limit this evaluation would never end: every episode is the limit's length.
    assert gym.spec(ENDLESS_ID).max_episode_steps is None
    assert evaluation.episode_step_limit(ENDLESS_ID) == evaluation.UNLIMITED_ENV_STEP_LIMIT == 1_000
    returns = evaluate_policy(constant_policy(), evaluation.evaluation_env_factory(ENDLESS_ID), episodes=3)
    assert returns.tolist() == [1_000.0] * 3
    returns = evaluate_policy(constant_policy(), evaluation.evaluation_env_factory(ENDLESS_ID, max_episode_steps=7),
                              episodes=3)
    assert returns.tolist() == [7.0] * 3


def test_minatar_games_get_the_default_limit_and_registered_limits_stay_as_they_are():
    assert gym.spec("MinAtar/Breakout-v1").max_episode_steps is None
    assert evaluation.episode_step_limit("MinAtar/Breakout-v1") == 1_000
    assert evaluation.episode_step_limit("MinAtar/SpaceInvaders-v1", 5_000) == 5_000
    assert evaluation.episode_step_limit("CartPole-v1") == 500
    # CartPole's own limit adds no wrapper: the factory still offers gymnasium's vectorised env.
    assert evaluation.evaluation_env_factory("CartPole-v1").make_vec(2) is not None
    assert evaluation.evaluation_env_factory("CartPole-v1", max_episode_steps=20).make_vec(2) is None
    returns = evaluate_policy(Policy(BalancingModel(), PPOConfig(), None),
                              evaluation.evaluation_env_factory("CartPole-v1", max_episode_steps=20), episodes=4)
    assert returns.tolist() == [20.0] * 4


class BalancingModel(torch.nn.Module):
    """Push towards the side the pole leans to: CartPole stays up far longer than 20 steps."""

    def greedy_action(self, obs: torch.Tensor) -> torch.Tensor:
        return (obs[:, 2] + 0.5 * obs[:, 3] > 0).long()


def test_ppo_eval_records_the_step_limit_it_played_under(trained_run, capsys):
    ppo_eval(trained_run, capsys, "--max-episode-steps", "9")
    result = json.loads((trained_run / "eval.json").read_text())
    assert result["max_episode_steps"] == 9 and result["max_return"] <= 9
    ppo_eval(trained_run, capsys)
    assert json.loads((trained_run / "eval.json").read_text())["max_episode_steps"] == 500


@pytest.mark.parametrize("limit", ["0", "-3"])
def test_ppo_eval_refuses_a_step_limit_below_one_and_writes_nothing(trained_run, capsys, limit):
    before = (trained_run / "eval.json").read_text() if (trained_run / "eval.json").exists() else None
    assert evaluate.main([str(trained_run), "--max-episode-steps", limit]) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and f"max episode steps = {limit}" in error and "positive integer" in error
    after = (trained_run / "eval.json").read_text() if (trained_run / "eval.json").exists() else None
    assert before == after
