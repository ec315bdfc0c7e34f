"""Checks for the exercises of lecture 2."""

import torch

from ppo.algorithm.losses import explained_variance


def test_explained_variance_matches_the_library(exercise):
    generator = torch.Generator().manual_seed(0)
    targets = torch.randn(200, generator=generator) * 3 + 1
    for predictions in (targets, torch.full_like(targets, float(targets.mean())), targets + torch.randn(200, generator=generator),
                        -targets):
        assert abs(exercise.explained_variance(predictions, targets) - explained_variance(predictions, targets)) < 1e-5


def test_the_optimal_baseline_gives_the_smallest_variance(exercise):
    generator = torch.Generator().manual_seed(1)
    gradients = torch.randn(5000, 3, generator=generator) * torch.linspace(0.5, 2.0, 5000).unsqueeze(1)
    returns = 10 + 5 * gradients.norm(dim=1) + torch.randn(5000, generator=generator)  # R correlated with |g|
    norms_squared = gradients.pow(2).sum(dim=1)
    best = exercise.optimal_constant_baseline(norms_squared, returns)

    def variance(baseline: float) -> float:
        estimates = (returns - baseline).unsqueeze(1) * gradients
        return float(estimates.var(dim=0, unbiased=False).sum())

    assert variance(best) < variance(float(returns.mean())) < variance(0.0)
    assert variance(best) <= min(variance(best - 0.5), variance(best + 0.5))
