"""Checks for the exercises of lecture 9."""

import pytest
import torch

from ppo.trainers import variants


@pytest.mark.parametrize("kl", [0.001, 0.006, 0.0067, 0.01, 0.014, 0.016, 0.2])
def test_adapt_beta_follows_the_library(exercise, kl):
    assert exercise.adapt_beta(0.5, kl, 0.01) == pytest.approx(variants.update_kl_coefficient(0.5, kl, 0.01))


def test_kl_penalty_loss_matches_the_library(exercise):
    generator = torch.Generator().manual_seed(0)
    old = torch.randn(400, generator=generator)
    new = (old + 0.3 * torch.randn(400, generator=generator)).requires_grad_(True)
    advantages = torch.randn(400, generator=generator)
    mine = exercise.kl_penalty_loss(new, old, advantages, 2.0)
    library = variants.kl_penalty_loss(new, old, advantages, 2.0)
    assert torch.allclose(mine, library, atol=1e-6)
    assert torch.allclose(torch.autograd.grad(mine, new)[0], torch.autograd.grad(library, new)[0], atol=1e-6)
