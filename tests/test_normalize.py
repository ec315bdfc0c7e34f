"""Running statistics against numpy, and reward scaling by the discounted return's std."""

import numpy as np
import pytest
import torch

from ppo.models.normalize import ObservationNormalizer, RewardScaler, RunningMeanStd


def test_running_mean_std_matches_numpy_over_batches_of_different_sizes():
    rng = np.random.default_rng(0)
    batches = [rng.normal(3.0, 2.0, size=(n, 4)) for n in (1, 7, 100, 3, 250)]
    stats = RunningMeanStd((4,), epsilon=0.0 + 1e-12)
    for batch in batches:
        stats.update(torch.as_tensor(batch))
    everything = np.concatenate(batches)
    np.testing.assert_allclose(stats.mean.numpy(), everything.mean(0), rtol=1e-9)
    np.testing.assert_allclose(stats.var.numpy(), everything.var(0), rtol=1e-9)
    assert stats.count == pytest.approx(len(everything))


def test_observation_normalizer_clips_and_freezes():
    normalizer = ObservationNormalizer((2,), clip=3.0)
    normalizer(torch.randn(1000, 2) * 5 + 1)
    frozen = normalizer.stats.state_dict()
    normalizer.training = False
    out = normalizer(torch.tensor([[1e6, -1e6]]))
    assert out.tolist() == [[3.0, -3.0]]
    assert torch.equal(normalizer.stats.mean, frozen["mean"])  # frozen: no update


def test_reward_scaler_divides_by_std_of_discounted_return():
    gamma = 0.9
    scaler = RewardScaler(num_envs=1, gamma=gamma, clip=100.0)
    rewards = [1.0, 2.0, -1.0, 0.5]
    returns, running = [], 0.0
    for r in rewards:
        scaled = scaler(torch.tensor([r]), torch.tensor([False]))
        running = gamma * running + r
        returns.append(running)
    expected_std = np.sqrt(np.var(returns) + 0.0)
    # The prior count (1e-4) with var 1 shifts the estimate only slightly.
    assert scaled.item() == pytest.approx(0.5 / expected_std, rel=1e-3)
