"""ActorCritic: initialisation, heads, and the Gaussian policy against torch.distributions."""

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.distributions import Normal

from ppo.models.networks import ActorCritic

OBS = gym.spaces.Box(-np.inf, np.inf, (5,), np.float32)


def test_shared_trunk_and_separate_networks():
    shared = ActorCritic(OBS, gym.spaces.Discrete(3), shared=True)
    separate = ActorCritic(OBS, gym.spaces.Discrete(3), shared=False)
    assert shared.actor_body is shared.critic_body
    assert separate.actor_body is not separate.critic_body
    assert sum(p.numel() for p in separate.parameters()) > sum(p.numel() for p in shared.parameters())


def test_orthogonal_init_gains():
    model = ActorCritic(OBS, gym.spaces.Discrete(3), hidden_sizes=(64, 64))
    hidden = model.actor_body[2].weight  # 64 × 64, gain √2: W Wᵀ = 2 I
    torch.testing.assert_close(hidden @ hidden.T, 2.0 * torch.eye(64), atol=1e-4, rtol=0)
    policy = model.policy_head.logits.weight  # 3 × 64, gain 0.01: rows orthogonal, norm 0.01
    torch.testing.assert_close(policy @ policy.T, 1e-4 * torch.eye(3), atol=1e-8, rtol=0)
    value = model.value_head.weight
    assert value.norm().item() == pytest.approx(1.0, rel=1e-5)
    assert model.value_head.bias.item() == 0.0


def test_initial_categorical_policy_is_near_uniform():
    model = ActorCritic(OBS, gym.spaces.Discrete(4))
    probs = model.distribution(torch.randn(32, 5)).probs
    assert torch.allclose(probs, torch.full_like(probs, 0.25), atol=0.02)


def test_gaussian_log_prob_and_entropy_match_torch_distributions():
    torch.manual_seed(0)
    action_space = gym.spaces.Box(-2.0, 2.0, (3,), np.float32)
    model = ActorCritic(OBS, action_space, log_std_init=-0.5)
    with torch.no_grad():
        model.policy_head.log_std.copy_(torch.tensor([-0.5, 0.3, 1.0]))
        model.policy_head.mean.weight.normal_()
    obs = torch.randn(64, 5)
    actions = torch.randn(64, 3) * 3
    log_prob, entropy, _ = model.evaluate_actions(obs, actions)
    mean = model.policy_head.mean(model.actor_body(obs))
    reference = Normal(mean, model.policy_head.log_std.exp())
    torch.testing.assert_close(log_prob, reference.log_prob(actions).sum(-1))
    torch.testing.assert_close(entropy, reference.entropy().sum(-1))
    # closed forms: H = Σ (½ + ½ log 2π + log σ_i)
    expected_entropy = sum(0.5 + 0.5 * math.log(2 * math.pi) + s for s in (-0.5, 0.3, 1.0))
    assert entropy[0].item() == pytest.approx(expected_entropy, rel=1e-5)
    torch.testing.assert_close(model.greedy_action(obs), mean)


def test_log_std_initial_value():
    model = ActorCritic(OBS, gym.spaces.Box(-1, 1, (2,), np.float32), log_std_init=-1.0)
    assert torch.equal(model.policy_head.log_std.data, torch.full((2,), -1.0))


def test_categorical_distribution_matches_torch_distributions():
    from torch.distributions import Categorical

    from ppo.models.networks import CategoricalDistribution

    torch.manual_seed(0)
    logits = torch.randn(64, 5) * 3
    actions = torch.randint(0, 5, (64,))
    ours, reference = CategoricalDistribution(logits), Categorical(logits=logits)
    torch.testing.assert_close(ours.log_prob(actions), reference.log_prob(actions))
    torch.testing.assert_close(ours.entropy(), reference.entropy())
    # Gumbel-max samples follow softmax(z): frequencies over many draws
    row = torch.tensor([[0.0, 1.0, -1.0, 2.0]])
    draws = CategoricalDistribution(row.expand(200_000, 4)).sample()
    frequencies = torch.bincount(draws, minlength=4).float() / draws.numel()
    torch.testing.assert_close(frequencies, torch.softmax(row[0], -1), atol=0.005, rtol=0)
