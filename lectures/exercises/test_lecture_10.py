"""Checks for the exercises of lecture 10."""

import torch
from torch.distributions import Normal


def test_gaussian_log_prob_and_entropy_match_torch(exercise):
    generator = torch.Generator().manual_seed(0)
    mean = torch.randn(5, 3, generator=generator)
    log_std = torch.tensor([-0.5, 0.0, 0.7])
    actions = mean + torch.randn(5, 3, generator=generator)
    reference = Normal(mean, log_std.exp())
    assert torch.allclose(exercise.gaussian_log_prob(actions, mean, log_std), reference.log_prob(actions).sum(-1), atol=1e-5)
    assert torch.allclose(exercise.gaussian_entropy(log_std), reference.entropy()[0].sum(), atol=1e-5)


def test_merged_moments_are_those_of_the_union(exercise):
    generator = torch.Generator().manual_seed(1)
    first, second = torch.randn(30, 4, generator=generator) * 2 + 1, torch.randn(70, 4, generator=generator) - 3
    mean, variance, count = exercise.merge_moments(first.mean(0), first.var(0, unbiased=False), 30,
                                                   second.mean(0), second.var(0, unbiased=False), 70)
    union = torch.cat([first, second])
    assert count == 100
    assert torch.allclose(mean, union.mean(0), atol=1e-5)
    assert torch.allclose(variance, union.var(0, unbiased=False), atol=1e-5)
