"""GAE(γ, λ): a hand-worked case, a slow independent reference, and the truncation rule."""

import numpy as np
import pytest
import torch

from ppo.algorithm.advantages import compute_gae, successor_values


def slow_gae(rewards, values, last_value, final_values, terminated, truncated, gamma, lam):
    """Per-env, per-episode reference written from the definition Â_t = Σ_k (γλ)^k δ_{t+k}."""
    T, N = rewards.shape
    advantages = np.zeros((T, N))
    for env in range(N):
        for t in range(T):
            total, discount = 0.0, 1.0
            for k in range(t, T):
                if terminated[k, env]:
                    next_value = 0.0
                elif truncated[k, env]:
                    next_value = final_values[k, env]
                elif k + 1 < T:
                    next_value = values[k + 1, env]
                else:
                    next_value = last_value[env]
                delta = rewards[k, env] + gamma * next_value - values[k, env]
                total += discount * delta
                if terminated[k, env] or truncated[k, env]:
                    break
                discount *= gamma * lam
            advantages[t, env] = total
    return advantages


def run_gae(rewards, values, last_value, final_values, terminated, truncated, gamma, lam):
    rewards, values, last_value, final_values = (torch.as_tensor(x, dtype=torch.float64) for x in (rewards, values, last_value, final_values))
    terminated, truncated = torch.as_tensor(terminated), torch.as_tensor(truncated)
    next_values = successor_values(values, last_value, truncated, final_values)
    return compute_gae(rewards, values, next_values, terminated, terminated | truncated, gamma, lam)


def test_three_step_hand_worked_example():
    # One env, three steps, no episode end; γ = 0.5, λ = 0.5, V(s_3) = 4.
    #   δ_2 = 1 + 0.5·4 − 3 = 0       Â_2 = 0
    #   δ_1 = 0 + 0.5·3 − 2 = −0.5    Â_1 = −0.5 + 0.25·0     = −0.5
    #   δ_0 = 2 + 0.5·2 − 1 = 2       Â_0 = 2 + 0.25·(−0.5)    = 1.875
    rewards = [[2.0], [0.0], [1.0]]
    values = [[1.0], [2.0], [3.0]]
    advantages, returns = run_gae(rewards, values, [4.0], np.zeros((3, 1)), np.zeros((3, 1), bool), np.zeros((3, 1), bool), 0.5, 0.5)
    assert advantages[:, 0].tolist() == pytest.approx([1.875, -0.5, 0.0])
    assert returns[:, 0].tolist() == pytest.approx([2.875, 1.5, 3.0])


def test_matches_slow_reference_with_terminations_and_truncations():
    rng = np.random.default_rng(0)
    T, N = 64, 7
    rewards = rng.normal(size=(T, N))
    values = rng.normal(size=(T, N))
    last_value = rng.normal(size=N)
    final_values = rng.normal(size=(T, N))
    terminated = rng.random((T, N)) < 0.05
    truncated = (rng.random((T, N)) < 0.05) & ~terminated
    for gamma, lam in [(0.99, 0.95), (0.9, 0.0), (1.0, 1.0), (0.97, 0.5)]:
        advantages, returns = run_gae(rewards, values, last_value, final_values, terminated, truncated, gamma, lam)
        expected = slow_gae(rewards, values, last_value, final_values, terminated, truncated, gamma, lam)
        np.testing.assert_allclose(advantages.numpy(), expected, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(returns.numpy(), expected + values, rtol=1e-10, atol=1e-10)


def test_truncation_bootstraps_from_final_observation_and_termination_does_not():
    # One step that ends the episode: reward 1, V(s) = 0, V(final obs) = 10, V(next obs) = 99.
    rewards, values, last_value, final_values = [[1.0]], [[0.0]], [99.0], [[10.0]]
    truncated_adv, _ = run_gae(rewards, values, last_value, final_values, [[False]], [[True]], 0.9, 0.95)
    terminated_adv, _ = run_gae(rewards, values, last_value, final_values, [[True]], [[False]], 0.9, 0.95)
    assert truncated_adv.item() == pytest.approx(1.0 + 0.9 * 10.0)  # bootstraps V(final obs), not V(next obs)
    assert terminated_adv.item() == pytest.approx(1.0)


def test_advantage_does_not_leak_across_an_episode_boundary():
    # Step 0 truncates; step 1 belongs to a new episode with a huge reward.
    rewards = [[0.0], [100.0]]
    values = [[0.0], [0.0]]
    advantages, _ = run_gae(rewards, values, [0.0], [[0.0], [0.0]], [[False], [False]], [[True], [False]], 0.99, 0.95)
    assert advantages[0, 0].item() == pytest.approx(0.0)
    assert advantages[1, 0].item() == pytest.approx(100.0)


def test_lambda_one_gives_monte_carlo_return_minus_value():
    rewards = np.ones((5, 1))
    values = np.arange(5.0).reshape(5, 1)
    terminated = np.zeros((5, 1), bool)
    terminated[-1] = True
    advantages, _ = run_gae(rewards, values, [0.0], np.zeros((5, 1)), terminated, np.zeros((5, 1), bool), 0.9, 1.0)
    monte_carlo = [sum(0.9**k for k in range(5 - t)) for t in range(5)]
    np.testing.assert_allclose(advantages[:, 0].numpy(), np.array(monte_carlo) - values[:, 0])
