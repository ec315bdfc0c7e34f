"""Checks for the exercises of lecture 5."""

import math

import pytest
import torch

from ppo.algorithm import losses


def random_batch(seed: int):
    generator = torch.Generator().manual_seed(seed)
    old = torch.randn(500, generator=generator)
    return old + 0.4 * torch.randn(500, generator=generator), old, torch.randn(500, generator=generator)


@pytest.mark.parametrize("epsilon", [0.1, 0.2, 0.3])
def test_clipped_surrogate_loss_matches_the_library(exercise, epsilon):
    new, old, advantages = random_batch(0)
    new.requires_grad_(True)
    mine = exercise.clipped_surrogate_loss(new, old, advantages, epsilon)
    (mine_gradient,) = torch.autograd.grad(mine, new)
    library = losses.clipped_surrogate_loss(new, old, advantages, epsilon)
    (library_gradient,) = torch.autograd.grad(library, new)
    assert torch.allclose(mine, library, atol=1e-6)
    assert torch.allclose(mine_gradient, library_gradient, atol=1e-6)


def test_clip_fraction_matches_the_library(exercise):
    new, old, _ = random_batch(1)
    assert abs(exercise.clip_fraction(new, old, 0.2) - float(losses.clip_fraction(new, old, 0.2))) < 1e-6


@pytest.mark.parametrize("ratio", [0.5, 0.85, 1.0, 1.15, 1.6])
@pytest.mark.parametrize("advantage", [1.0, -1.0])
def test_has_gradient_agrees_with_autograd(exercise, ratio, advantage):
    log_prob = torch.tensor([math.log(ratio)], requires_grad=True)
    losses.clipped_surrogate_loss(log_prob, torch.zeros(1), torch.tensor([advantage]), 0.2).backward()
    assert exercise.has_gradient(ratio, advantage, 0.2) == bool(log_prob.grad.abs().item() > 0)


@pytest.mark.parametrize("ratio", [0.6, 0.9, 1.0, 1.1, 1.5])
@pytest.mark.parametrize("advantage", [1.0, -1.0])
def test_predicted_surrogate_gradient_is_the_lectures_table(exercise, ratio, advantage):
    log_prob = torch.tensor([math.log(ratio)], requires_grad=True)
    (-losses.clipped_surrogate_loss(log_prob, torch.zeros(1), torch.tensor([advantage]), 0.2)).backward()
    assert abs(exercise.predict_surrogate_gradient(ratio, advantage) - log_prob.grad.item()) < 1e-6
