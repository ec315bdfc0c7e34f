"""The PPO update: K epochs of shuffled minibatches, one gradient step each.

Both trainers of this project — `ppo.trainer.PPO` (environments) and
`ppo.lm.rlhf_trainer.RLHFTrainer` (token generation) — run their update through
`run_update`; only the loss of a minibatch differs, and each trainer passes its own.

    for epoch = 1 .. K:
        shuffle the B samples of the rollout (one permutation per epoch)
        for each minibatch of B / M consecutive shuffled samples:
            L(θ), log r_t(θ) ← minibatch_loss(minibatch)
            if target_kl is set and KL̂(π_old ‖ π_θ) > target_kl:  stop the update here
            zero the gradients; backward L; clip the global gradient norm; Adam step

The meaning of `target_kl`: per minibatch, checked before its step. KL̂ is the k3
estimate of KL(π_old ‖ π_θ) on the minibatch's own samples, with θ as it is before that
minibatch's step. The first minibatch whose KL̂ exceeds the target takes no step, and
the update ends there (as in Spinning Up; SB3 checks at the same place against 1.5 ·
target_kl; CleanRL checks once per epoch). The policy is never moved from a point that
is already further from π_old than the target allows.

A sample is whatever the trainer stores per row: a transition (CartPole) or a whole
completion (the language model, whose tensors are (B, T) with a mask after EOS).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

from ppo.distributed import SINGLE_PROCESS, World
from ppo.losses import kl_estimate, log_ratio_clip_fraction
from ppo.optim import FlatAdam


@dataclass
class MinibatchLoss:
    """What a trainer's minibatch loss returns to `run_update`."""

    loss: torch.Tensor  # scalar L(θ) to minimise
    log_ratio: torch.Tensor  # log r_t(θ) = log π_θ − log π_old per sample (or token), detached
    mask: torch.Tensor | None = None  # which entries of log_ratio are real (tokens up to EOS)
    terms: dict[str, torch.Tensor] = field(default_factory=dict)  # detached scalars to average, e.g. policy_loss


def gradient_step(optimizer: FlatAdam, loss: torch.Tensor, max_grad_norm: float | None,
                  world: World = SINGLE_PROCESS) -> torch.Tensor:
    """One step of gradient descent on `loss`; returns the gradient norm before clipping.

    With several processes the gradient is averaged over them (one all-reduce of the flat
    gradient vector, ppo.distributed) before it is clipped, so every process steps alike.
    """
    optimizer.zero_grad()
    loss.backward()
    world.average_(optimizer.flat_grads)
    grad_norm = optimizer.clip_grad_norm(max_grad_norm)
    optimizer.step()
    return grad_norm


def shuffled_minibatches(samples: dict[str, torch.Tensor], num_minibatches: int, generator: torch.Generator):
    """One epoch: the samples in a random order, cut into `num_minibatches` equal consecutive slices.

    Every tensor is gathered once with the same permutation; a minibatch is then a
    contiguous slice of each. With B samples every sample is visited exactly once.
    """
    num_samples = len(next(iter(samples.values())))
    size = num_samples // num_minibatches
    order = torch.randperm(num_samples, generator=generator, device=generator.device)
    shuffled = {name: tensor[order] for name, tensor in samples.items()}
    for start in range(0, num_samples, size):
        yield {name: tensor[start : start + size] for name, tensor in shuffled.items()}


def update_settings(config, clip_coef: float | None = None) -> dict:
    """run_update's keyword settings from an UpdateConfig (clip_coef: the ε in force, if not config's)."""
    return dict(
        update_epochs=config.update_epochs,
        num_minibatches=config.num_minibatches,
        max_grad_norm=config.max_grad_norm,
        target_kl=config.target_kl,
        clip_coef=config.clip_coef if clip_coef is None else clip_coef,
    )


def run_update(
    samples: dict[str, torch.Tensor],
    minibatch_loss: Callable[[dict[str, torch.Tensor]], MinibatchLoss],
    optimizer: FlatAdam,
    *,
    update_epochs: int,
    num_minibatches: int,
    max_grad_norm: float | None,
    target_kl: float | None,
    clip_coef: float,
    generator: torch.Generator,
    world: World = SINGLE_PROCESS,
) -> dict[str, float]:
    """K epochs of minibatch steps (the module docstring); returns the update's diagnostics.

    `samples` maps names to tensors whose first dimension indexes the B samples of the
    rollout; `minibatch_loss` receives the same names with b = B / M rows each.

    Diagnostics, over every minibatch visited (the one that stopped the update included):
    the mean of each loss term; old_approx_kl (k1) and approx_kl (k3) estimates of
    KL(π_old ‖ π_θ) and clip_fraction = share of |r_t(θ) − 1| > ε, each over all
    samples; the first minibatch's largest |r_t(θ) − 1| (0 up to rounding: π_θ = π_old
    there); gradient steps taken; whether target_kl ended the update; the mean gradient
    norm before clipping.
    """
    terms: list[torch.Tensor] = []  # per minibatch; summarised once at the end (no host sync per step)
    log_ratios: list[torch.Tensor] = []
    masks: list[torch.Tensor | None] = []
    grad_norms: list[torch.Tensor] = []
    term_names: list[str] = []
    early_stopped = False
    for _ in range(update_epochs):
        for minibatch in shuffled_minibatches(samples, num_minibatches, generator):
            result = minibatch_loss(minibatch)
            if result.terms:
                term_names = list(result.terms)
                terms.append(torch.stack([value.detach() for value in result.terms.values()]))
            log_ratios.append(result.log_ratio)
            masks.append(result.mask)
            if target_kl is not None:  # the minibatch's k3 KL, averaged over the processes: all stop alike
                kl = world.mean_of(float(kl_estimate(result.log_ratio, "k3", result.mask)))
                early_stopped = kl > target_kl
            if early_stopped:
                break
            grad_norms.append(gradient_step(optimizer, result.loss, max_grad_norm, world))
        if early_stopped:
            break

    first_ratio_error = _largest_ratio_error(log_ratios[0], masks[0])
    log_ratio = torch.cat(log_ratios)  # minibatches of one rollout share their trailing shape
    mask = None if masks[0] is None else torch.cat(masks)
    summary = torch.stack([kl_estimate(log_ratio, "k1", mask), kl_estimate(log_ratio, "k3", mask),
                           log_ratio_clip_fraction(log_ratio, clip_coef, mask), first_ratio_error])
    summary = world.average_(summary).tolist()  # the mean over processes (equal shares)
    term_means = world.average_(torch.stack(terms).mean(dim=0)).tolist() if terms else []
    return {
        **dict(zip(term_names, term_means)),
        "old_approx_kl": summary[0],
        "approx_kl": summary[1],
        "clip_fraction": summary[2],
        "first_minibatch_ratio_error": summary[3],
        "gradient_steps": len(grad_norms),
        "early_stopped": float(early_stopped),
        "grad_norm": float(torch.stack(grad_norms).mean()) if grad_norms else float("nan"),
    }


def _largest_ratio_error(log_ratio: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    errors = log_ratio.exp().sub(1.0).abs()
    return (errors if mask is None else errors[mask]).max()
