"""Checks for the exercises of lecture 10."""

import math

import torch
from torch.distributions import Normal

from feedback import check_close


def test_gaussian_log_prob_and_entropy_match_torch(exercise):
    generator = torch.Generator().manual_seed(0)
    mean = torch.randn(5, 3, generator=generator)
    log_std = torch.tensor([-0.5, 0.0, 0.7])
    actions = mean + torch.randn(5, 3, generator=generator)
    reference = Normal(mean, log_std.exp())
    per_dimension = reference.log_prob(actions)  # (5, 3)
    std = log_std.exp()
    check_close(exercise.gaussian_log_prob(actions, mean, log_std), per_dimension.sum(-1), "gaussian_log_prob", {
        "log π per dimension, not summed over the action's dimensions": per_dimension,
        "a mean over the dimensions in place of the sum": per_dimension.mean(-1),
        "σ in place of σ² in the quadratic term": (-(actions - mean) ** 2 / (2 * std) - log_std
                                                    - 0.5 * math.log(2 * math.pi)).sum(-1),
        "the − log σ term left out": (per_dimension + log_std).sum(-1),
        "the − ½ log 2π term left out": (per_dimension + 0.5 * math.log(2 * math.pi)).sum(-1),
    }, atol=1e-5)
    check_close(exercise.gaussian_entropy(log_std), reference.entropy()[0].sum(), "gaussian_entropy", {
        "the entropy per dimension, not summed": reference.entropy()[0],
        "the ½ left out (H = ½ log 2πe + log σ per dimension)": (0.5 * math.log(2 * math.pi) + log_std).sum(),
        "log σ² in place of log σ": (0.5 * math.log(2 * math.pi * math.e) + 2 * log_std).sum(),
    }, atol=1e-5)


def test_merged_moments_are_those_of_the_union(exercise):
    generator = torch.Generator().manual_seed(1)
    first, second = torch.randn(30, 4, generator=generator) * 2 + 1, torch.randn(70, 4, generator=generator) - 3
    mean, variance, count = exercise.merge_moments(first.mean(0), first.var(0, unbiased=False), 30,
                                                   second.mean(0), second.var(0, unbiased=False), 70)
    union = torch.cat([first, second])
    check_close(count, 100, "merge_moments' count (30 + 70)", atol=0.0, rtol=0.0)
    check_close(mean, union.mean(0), "merge_moments' mean", {
        "the plain mean of the two means (they must be weighted by their counts)": (first.mean(0) + second.mean(0)) / 2,
    }, atol=1e-5)
    check_close(variance, union.var(0, unbiased=False), "merge_moments' variance", {
        "the δ² n_a n_b / n term left out (the spread between the two means)":
            (first.var(0, unbiased=False) * 30 + second.var(0, unbiased=False) * 70) / 100,
        "the plain mean of the two variances": (first.var(0, unbiased=False) + second.var(0, unbiased=False)) / 2,
        "the unbiased (n − 1) variance": union.var(0),
    }, atol=1e-5)
