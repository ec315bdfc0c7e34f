"""Continuous control: the Gaussian head, clipping at the env boundary, normalisation
statistics that survive a checkpoint, a short Pendulum run that learns, and the
MountainCarContinuous preset finding the flag.

tests/test_networks.py already checks evaluate_actions' log-prob and entropy against
torch.distributions for one model; tests/test_normalize.py checks batch-by-batch
updates against numpy. This file adds what they leave out.
"""

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.distributions import Normal

from envs.factory import gymnasium_env_factory
from envs.gymnasium_vec_env import GymnasiumVecEnv
from experiments.commands.train import training_envs
from ppo.runs.checkpoint import load_checkpoint, save_checkpoint
from ppo.config import PPOConfig
from ppo.runs.evaluation import Policy, evaluate_policy, load_policy
from ppo.models.networks import ActorCritic
from ppo.models.normalize import ObservationNormalizer, RewardScaler, RunningMeanStd
from ppo.trainers.ppo import PPO

OBS = gym.spaces.Box(-np.inf, np.inf, (5,), np.float32)


def random_gaussian_model(action_dim: int, shared: bool) -> ActorCritic:
    model = ActorCritic(OBS, gym.spaces.Box(-1.0, 1.0, (action_dim,), np.float32), shared=shared)
    with torch.no_grad():
        model.policy_head.mean.weight.normal_()  # a non-trivial μ(s)
        model.policy_head.log_std.uniform_(-1.5, 1.0)  # a different σ per dimension
    return model


# ----------------------------------------------------------------- Gaussian head
@pytest.mark.parametrize("action_dim, shared", [(1, False), (6, True)])
def test_sampled_log_prob_matches_torch_distributions_and_the_update_recomputes_it(action_dim, shared):
    torch.manual_seed(action_dim)
    model = random_gaussian_model(action_dim, shared)
    obs = torch.randn(256, 5)
    action, log_prob, _ = model.act(obs)
    assert action.shape == (256, action_dim)
    mean = model.policy_head.mean(model.actor_body(obs))
    reference = Normal(mean, model.policy_head.log_std.exp()).log_prob(action).sum(-1)
    torch.testing.assert_close(log_prob, reference)
    recomputed, _, _ = model.evaluate_actions(obs, action)
    torch.testing.assert_close(recomputed, log_prob)


def test_log_prob_gradients_are_the_analytic_ones():
    # μ = W h + b, so ∂ log π / ∂b_i = (a_i − μ_i) / σ_i²;  ∂ log π / ∂ log σ_i = (a_i − μ_i)² / σ_i² − 1
    torch.manual_seed(1)
    model = random_gaussian_model(3, shared=False)
    head = model.policy_head
    obs, action = torch.randn(1, 5), torch.randn(1, 3) * 2
    log_prob, _, _ = model.evaluate_actions(obs, action)
    bias_grad, log_std_grad = torch.autograd.grad(log_prob.sum(), (head.mean.bias, head.log_std))
    with torch.no_grad():
        mean = head.mean(model.actor_body(obs))[0]
        sigma2 = (2 * head.log_std).exp()
    torch.testing.assert_close(bias_grad, (action[0] - mean) / sigma2)
    torch.testing.assert_close(log_std_grad, (action[0] - mean) ** 2 / sigma2 - 1)


def test_entropy_is_state_independent_with_gradient_one_per_log_std():
    # H = Σ_i (½ + ½ log 2π + log σ_i): the same for every state, ∂H/∂ log σ_i = 1
    torch.manual_seed(2)
    model = random_gaussian_model(4, shared=False)
    _, entropy, _ = model.evaluate_actions(torch.randn(32, 5) * 10, torch.zeros(32, 4))
    expected = sum(0.5 + 0.5 * math.log(2 * math.pi) + s for s in model.policy_head.log_std.tolist())
    torch.testing.assert_close(entropy.detach(), torch.full((32,), expected))
    (grad,) = torch.autograd.grad(entropy[0], model.policy_head.log_std)
    torch.testing.assert_close(grad, torch.ones(4))


class ActionRecordingEnv(GymnasiumVecEnv):
    """A gymnasium vector env that remembers every action it was sent."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.sent: list[torch.Tensor] = []

    def step(self, actions):
        self.sent.append(actions.clone())
        return super().step(actions)


def test_env_receives_the_clipped_action_and_the_buffer_keeps_the_sample():
    config = PPOConfig(env_id="Pendulum-v1", env_backend="gymnasium", num_envs=2, num_steps=32, num_minibatches=2,
                       total_timesteps=64, log_std_init=1.5)
    envs = ActionRecordingEnv("Pendulum-v1", 2)
    trainer = PPO(config, envs, progress=False)
    trainer.collect_rollout()
    stored = trainer.buffer.actions  # (T, N, 1)
    sent = torch.stack(envs.sent)
    assert torch.equal(sent, stored.clamp(-2.0, 2.0))
    outside = stored.abs() > 2.0
    assert outside.any() and (stored[outside] != sent[outside]).all()  # stored: the raw sample


def test_greedy_evaluation_acts_with_the_mean_of_the_normalised_observation(tmp_path):
    config = PPOConfig(env_id="Pendulum-v1", env_backend="gymnasium", num_envs=2, num_steps=64, num_minibatches=2,
                       total_timesteps=128, normalize_obs=True, log_std_init=1.0, tensorboard=False)
    trainer = PPO(config, training_envs(config), run_dir=tmp_path, progress=False)
    trainer.train()
    policy = load_policy(tmp_path)
    obs = torch.randn(16, 3) * 3
    with torch.no_grad():
        mean = trainer.model.policy_head.mean(trainer.model.actor_body(trainer.obs_normalizer.normalize(obs)))
    torch.testing.assert_close(policy.act(obs, greedy=True), mean)
    assert not torch.allclose(policy.act(obs, greedy=False), mean, atol=0.1)  # σ = e: samples differ


# ----------------------------------------------------------------- normalisation
def test_merging_running_statistics_of_different_sizes_matches_numpy():
    # Two streams summarised separately, then merged with the parallel-variance rule.
    rng = np.random.default_rng(1)
    first = [rng.normal(-2.0, 0.5, size=(n, 3)) for n in (2, 31)]
    second = [rng.normal(4.0, 3.0, size=(n, 3)) for n in (500, 1)]
    a, b = RunningMeanStd((3,), epsilon=1e-12), RunningMeanStd((3,), epsilon=1e-12)
    for batch in first:
        a.update(torch.as_tensor(batch))
    for batch in second:
        b.update(torch.as_tensor(batch))
    a.merge(b.mean, b.var, b.count)
    everything = np.concatenate(first + second)
    np.testing.assert_allclose(a.mean.numpy(), everything.mean(0), rtol=1e-9)
    np.testing.assert_allclose(a.var.numpy(), everything.var(0), rtol=1e-9)


def test_observation_normalizer_output_matches_numpy():
    rng = np.random.default_rng(2)
    batches = [rng.normal([1.0, -50.0], [0.1, 20.0], size=(n, 2)) for n in (9, 64, 200)]
    normalizer = ObservationNormalizer((2,), clip=5.0)
    for batch in batches[:-1]:
        normalizer(torch.as_tensor(batch, dtype=torch.float32))
    out = normalizer(torch.as_tensor(batches[-1], dtype=torch.float32))
    seen = np.concatenate(batches)
    expected = np.clip((batches[-1] - seen.mean(0)) / np.sqrt(seen.var(0) + 1e-8), -5.0, 5.0)
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-4, atol=1e-4)


def test_reward_scaler_tracks_each_envs_discounted_return_and_resets_it_at_done():
    gamma, steps = 0.9, 50
    rng = np.random.default_rng(3)
    rewards = rng.normal(1.0, 2.0, size=(steps, 3))
    dones = rng.random((steps, 3)) < 0.15
    scaler = RewardScaler(num_envs=3, gamma=gamma, clip=1e9)
    returns, running = [], np.zeros(3)
    for t in range(steps):
        scaled = scaler(torch.as_tensor(rewards[t]), torch.as_tensor(dones[t]))
        running = gamma * running + rewards[t]
        returns.append(running.copy())
        running[dones[t]] = 0.0
    std = np.concatenate(returns).std()  # every env's G_t, pooled
    np.testing.assert_allclose(scaled.numpy(), rewards[-1] / std, rtol=1e-4)


def test_normalisation_statistics_survive_a_weights_only_checkpoint(tmp_path):
    normalizer, scaler = ObservationNormalizer((4,), clip=7.0), RewardScaler(2, gamma=0.95, clip=3.0)
    normalizer(torch.randn(100, 4) * 3 + 2)
    scaler(torch.tensor([1.0, -2.0]), torch.tensor([False, True]))
    save_checkpoint({"obs": normalizer.state_dict(), "reward": scaler.state_dict()}, tmp_path / "c.pt")
    state = load_checkpoint(tmp_path / "c.pt")  # weights_only=True inside
    restored_obs, restored_reward = ObservationNormalizer((4,)), RewardScaler(2, gamma=0.5)
    restored_obs.load_state_dict(state["obs"])
    restored_reward.load_state_dict(state["reward"])
    x = torch.randn(10, 4) * 10
    assert torch.equal(restored_obs.normalize(x), normalizer.normalize(x))
    assert restored_obs.clip == 7.0 and restored_reward.gamma == 0.95 and restored_reward.clip == 3.0
    r = torch.tensor([5.0, -0.3])
    assert torch.equal(restored_reward.scale(r), scaler.scale(r))


def test_evaluation_uses_the_training_statistics_frozen(tmp_path):
    config = PPOConfig(env_id="Pendulum-v1", env_backend="gymnasium", num_envs=2, num_steps=64, num_minibatches=2,
                       total_timesteps=256, normalize_obs=True, normalize_reward=True, tensorboard=False)
    trainer = PPO(config, training_envs(config), run_dir=tmp_path, progress=False)
    trainer.train()
    saved = trainer.obs_normalizer.stats.state_dict()
    assert saved["count"] > 256  # it did learn statistics: every step's obs, and the reset

    state = load_checkpoint(tmp_path / "checkpoint.pt")
    assert torch.equal(state["obs_normalizer"]["stats"]["mean"], saved["mean"])
    assert state["reward_scaler"]["stats"]["count"] == trainer.reward_scaler.stats.count

    policy = load_policy(tmp_path)
    assert policy.obs_normalizer is not None and not policy.obs_normalizer.training
    obs = torch.randn(8, 3) * 4
    torch.testing.assert_close(policy.obs_normalizer.normalize(obs), trainer.obs_normalizer.normalize(obs))
    evaluate_policy(policy, gymnasium_env_factory("Pendulum-v1"), episodes=2, num_envs=2)
    after = policy.obs_normalizer.stats.state_dict()
    assert torch.equal(after["mean"], saved["mean"]) and after["count"] == saved["count"]  # frozen

    resumed = PPO.resume(tmp_path, training_envs, progress=False)
    assert torch.equal(resumed.reward_scaler.stats.var, trainer.reward_scaler.stats.var)


# ----------------------------------------------------------------- learning
# Measured with seed 1: the untrained greedy policy scores -1169 over 10 episodes, the
# trained one -226 (about 15 s of CPU on one core, on gymnasium's own Pendulum).
LEARNING_RUN = dict(env_id="Pendulum-v1", env_backend="gymnasium", seed=1, total_timesteps=61_440, num_envs=16,
                    num_steps=128, num_minibatches=4, update_epochs=10, learning_rate=2e-3, gamma=0.9,
                    ent_coef=0.0, normalize_obs=True, normalize_reward=True, tensorboard=False)


def test_short_pendulum_run_improves_clearly_on_the_untrained_policy():
    config = PPOConfig(**LEARNING_RUN)
    trainer = PPO(config, training_envs(config), progress=False)
    make_env = gymnasium_env_factory("Pendulum-v1")

    def greedy_mean() -> float:
        return float(evaluate_policy(Policy(trainer.model, config, trainer.obs_normalizer), make_env, episodes=10).mean())

    untrained = greedy_mean()
    trainer.train()
    trained = greedy_mean()
    assert untrained < -900, untrained  # measured -1169
    assert trained > -600, trained  # measured -226


@pytest.mark.slow  # full tier: Pendulum is the default tier's continuous learning run
def test_mountain_car_continuous_preset_finds_the_flag_and_keeps_going_there():
    # The sparse +100 against the 0.1 u² action cost: the preset (64 batched envs, both
    # normalisers) at 150k steps, seed 1. Measured: 93.1 over 100 greedy episodes, about 5 s.
    from experiments.commands.presets import build_config

    config = build_config({"env_id": "MountainCarContinuous-v0", "seed": 1, "total_timesteps": 150_000, "tensorboard": False})
    trainer = PPO(config, training_envs(config), progress=False)
    trainer.train()
    returns = evaluate_policy(Policy(trainer.model, config, trainer.obs_normalizer),
                              gymnasium_env_factory(config.env_id), episodes=20)
    assert returns.mean() >= 90, returns.mean()
