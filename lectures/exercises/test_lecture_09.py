"""Checks for the exercises of lecture 9."""

import pytest
import torch

from feedback import check_close
from ppo.trainers import variants


@pytest.mark.parametrize("kl", [0.001, 0.006, 0.0067, 0.01, 0.014, 0.016, 0.2])
def test_adapt_beta_follows_the_library(exercise, kl):
    check_close(exercise.adapt_beta(0.5, kl, 0.01), variants.update_kl_coefficient(0.5, kl, 0.01),
                f"adapt_beta(β = 0.5, KL = {kl}, target 0.01)", {
                    "the thresholds at the target itself (the band is target / 1.5 to 1.5 × target)":
                        1.0 if kl > 0.01 else (0.25 if kl < 0.01 else 0.5),
                    "β moved the wrong way (a KL too large needs a larger penalty)":
                        0.25 if kl > 0.015 else (1.0 if kl < 0.01 / 1.5 else 0.5),
                }, atol=1e-12, rtol=1e-6)


def test_kl_penalty_loss_matches_the_library(exercise):
    generator = torch.Generator().manual_seed(0)
    old = torch.randn(400, generator=generator)
    new = (old + 0.3 * torch.randn(400, generator=generator)).requires_grad_(True)
    advantages = torch.randn(400, generator=generator)
    mine = exercise.kl_penalty_loss(new, old, advantages, 2.0)
    library = variants.kl_penalty_loss(new, old, advantages, 2.0)
    log_ratio, ratio = (new - old).detach(), (new - old).detach().exp()
    surrogate, k3 = (ratio * advantages).mean(), (torch.expm1(log_ratio) - log_ratio).mean()
    check_close(mine, library.detach(), "kl_penalty_loss(β = 2)", {
        "the penalty added with the wrong sign (the loss pays for the KL)": -surrogate - 2.0 * k3,
        "a missing penalty": -surrogate,
        "the k1 estimate in place of k3": -surrogate + 2.0 * (-log_ratio).mean(),
        "β left out of the penalty": -surrogate + k3,
    }, atol=1e-6)
    check_close(torch.autograd.grad(mine, new)[0], torch.autograd.grad(library, new)[0],
                "the gradient of kl_penalty_loss(β = 2)", atol=1e-6)
