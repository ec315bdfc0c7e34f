"""Learning is tested: short seeded runs must reach a stated return.

A silently broken update (wrong sign, stale log-probs, advantages misaligned with their
states) still runs without error; only a return threshold catches it.
"""

import pytest

from envs.factory import gymnasium_env_factory
from experiments.benchmarks.continuous import SUCCESS_THRESHOLD
from experiments.commands.presets import build_config
from experiments.commands.train import training_envs
from ppo.runs.evaluation import Policy, evaluate_policy
from ppo.trainers.ppo import PPO


def train_and_evaluate(flags: dict, episodes: int = 100):
    config = build_config({"tensorboard": False, **flags})
    trainer = PPO(config, training_envs(config), progress=False)
    metrics = trainer.train()
    policy = Policy(trainer.model, config, trainer.obs_normalizer)
    returns = evaluate_policy(policy, gymnasium_env_factory(config.env_id), episodes)
    return metrics, returns


def test_cartpole_on_batched_torch_env_solves_gymnasium_cartpole():
    # The shipped preset (100k steps), seed 1; evaluated on gymnasium's own CartPole-v1.
    metrics, returns = train_and_evaluate({"env_id": "CartPole-v1", "env_backend": "torch", "seed": 1})
    assert metrics["episode_return_recent"] >= 195
    assert returns.mean() >= 475


def test_cartpole_on_gymnasium_backend_learns():
    # The gymnasium-stepped path through the same trainer: 40k steps, 4 envs × 128 steps,
    # a larger learning rate than the 500k-step default.
    metrics, returns = train_and_evaluate(
        {"env_id": "CartPole-v1", "env_backend": "gymnasium", "seed": 1, "total_timesteps": 40_000, "learning_rate": 1e-3},
        episodes=20,
    )
    assert metrics["episode_return_recent"] >= 195


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ["Acrobot-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Pendulum-v1"])
def test_every_classic_control_preset_solves_its_task_on_seed_1(env_id):
    # The shipped preset as `ppo-train --env-id ENV` runs it (torch backend), evaluated over
    # 100 greedy episodes on gymnasium's env; "solved" as in experiments/benchmarks/continuous.py.
    _, returns = train_and_evaluate({"env_id": env_id, "seed": 1})
    assert returns.mean() >= SUCCESS_THRESHOLD[env_id], returns.mean()
