"""Exercises for lecture 2 — a learned baseline. Check: pytest lectures/exercises/test_lecture_02.py"""

import torch


def explained_variance(predictions: torch.Tensor, targets: torch.Tensor) -> float:
    """Exercise 2.1. 1 − Var[R − V] / Var[R] (population variances): 1 for a perfect critic,
    0 for one that predicts only the mean, negative for a worse one.
    """
    raise NotImplementedError("exercise 2.1")


def optimal_constant_baseline(gradient_norms_squared: torch.Tensor, returns: torch.Tensor) -> float:
    """Exercise 2.2. The constant b that minimises the variance of the estimate (R − b) · g,
    given |g|² and R of each sampled episode (both (E,)); g = ∇log π of the episode.

    Derive b*: the mean of (R − b) g does not depend on b (why?), so minimising the
    variance is minimising E[|(R − b) g|²]. Is b* the mean return? (Lecture 2, "Variance
    of the gradient estimate, with and without the baseline".)
    """
    raise NotImplementedError("exercise 2.2")
