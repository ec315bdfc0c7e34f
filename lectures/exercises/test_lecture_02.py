"""Checks for the exercises of lecture 2."""

import torch

from feedback import check_close
from ppo.algorithm.losses import explained_variance


def test_explained_variance_matches_the_library(exercise):
    generator = torch.Generator().manual_seed(0)
    targets = torch.randn(200, generator=generator) * 3 + 1
    for predictions in (targets, torch.full_like(targets, float(targets.mean())), targets + torch.randn(200, generator=generator),
                        -targets):
        residual = targets - predictions
        check_close(exercise.explained_variance(predictions, targets), explained_variance(predictions, targets),
                    "explained_variance", {
                        "Var[V]/Var[R] in place of 1 − Var[R − V]/Var[R]": float(predictions.var() / targets.var()),
                        "the share left unexplained, Var[R − V]/Var[R]": float(residual.var() / targets.var()),
                        "the mean squared error in place of Var[R − V]":
                            float(1 - residual.pow(2).mean() / targets.var(unbiased=False)),
                    }, atol=1e-5, rtol=0.0)


def test_the_optimal_baseline_gives_the_smallest_variance(exercise):
    generator = torch.Generator().manual_seed(1)
    gradients = torch.randn(5000, 3, generator=generator) * torch.linspace(0.5, 2.0, 5000).unsqueeze(1)
    returns = 10 + 5 * gradients.norm(dim=1) + torch.randn(5000, generator=generator)  # R correlated with |g|
    norms_squared = gradients.pow(2).sum(dim=1)
    best = exercise.optimal_constant_baseline(norms_squared, returns)

    def variance(baseline: float) -> float:
        estimates = (returns - baseline).unsqueeze(1) * gradients
        return float(estimates.var(dim=0, unbiased=False).sum())

    expected = float((norms_squared * returns).mean() / norms_squared.mean())
    check_close(best, expected, "optimal_constant_baseline", {
        "the mean return (a good baseline, not the one of least variance)": float(returns.mean()),
        "weights |g| in place of |g|²": float((norms_squared.sqrt() * returns).mean() / norms_squared.sqrt().mean()),
    }, atol=1e-3, rtol=1e-4)
    assert variance(best) < variance(float(returns.mean())) < variance(0.0), (
        f"the variance at b = {best:.4g} is {variance(best):.4g}, not below the mean return's {variance(float(returns.mean())):.4g}")
    assert variance(best) <= min(variance(best - 0.5), variance(best + 0.5)), (
        f"b = {best:.4g} is not a minimum of the variance: b ± 0.5 give less")
