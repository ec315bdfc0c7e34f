"""Exercises for lecture 10 — continuous control. Check: pytest lectures/exercises/test_lecture_10.py"""

import torch


def gaussian_log_prob(actions: torch.Tensor, mean: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """Exercise 10.1. log π(a|s) of the library's Gaussian policy: a diagonal Gaussian with
    mean μ and standard deviation σ = exp(log_std), the log-density of the action vector.
    actions, mean: (B, D); log_std: (D,), shared by every row → (B,).

    Questions: the dimensions are independent, so how does the joint log-density follow
    from the D one-dimensional ones? Write the log of the normal density N(a; μ, σ²) out
    term by term, and keep log σ as it is given (why not take log(exp(log_std))?). Write it
    yourself; do not use torch.distributions. (Lecture 10, "1. The diagonal Gaussian
    policy", checks the library's log-prob against a sum written by hand.)
    """
    raise NotImplementedError("exercise 10.1")


def gaussian_entropy(log_std: torch.Tensor) -> torch.Tensor:
    """Exercise 10.2. The entropy H of the same diagonal Gaussian. log_std: (D,) → a scalar.

    Derive it from exercise 10.1: H = −E[log π(a|s)] with a drawn from the Gaussian. What
    is E[(a_d − μ_d)²]? Why does the mean μ drop out, so that the function needs only
    log σ? (Lecture 10, "1. The diagonal Gaussian policy".)
    """
    raise NotImplementedError("exercise 10.2")


def merge_moments(mean_a: torch.Tensor, var_a: torch.Tensor, count_a: float, mean_b: torch.Tensor,
                  var_b: torch.Tensor, count_b: float) -> tuple[torch.Tensor, torch.Tensor, float]:
    """Exercise 10.3. Observation normalisation keeps a running mean and (population)
    variance. Given those of two sets of samples, return the mean, variance and count of
    their union, without the samples (Chan et al.'s parallel formula).
    """
    raise NotImplementedError("exercise 10.3")
