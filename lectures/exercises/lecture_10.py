"""Exercises for lecture 10 — continuous control. Check: pytest lectures/exercises/test_lecture_10.py"""

import torch


def gaussian_log_prob(actions: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """Exercise 10.1. log π(a|s) of a diagonal Gaussian, summed over the action dimensions:
    Σ_d [ −(a_d − μ_d)² / (2σ_d²) − log σ_d − ½ log 2π ]. actions, mean: (B, D); log_std: (D,) → (B,).
    Write it out; do not use torch.distributions.
    """
    raise NotImplementedError("exercise 10.1")


def gaussian_entropy(log_std: torch.Tensor) -> torch.Tensor:
    """Exercise 10.2. H of a diagonal Gaussian, Σ_d (½ log(2πe) + log σ_d); it does not depend on μ. (D,) → scalar."""
    raise NotImplementedError("exercise 10.2")


def merge_moments(mean_a: torch.Tensor, var_a: torch.Tensor, count_a: float, mean_b: torch.Tensor,
                  var_b: torch.Tensor, count_b: float) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Exercise 10.3. Observation normalisation keeps a running mean and (population)
    variance. Given those of two sets of samples, return the mean, variance and count of
    their union, without the samples (Chan et al.'s parallel formula).
    """
    raise NotImplementedError("exercise 10.3")
