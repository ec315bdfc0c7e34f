"""Exercises for lecture 2 — a learned baseline. Check: pytest lectures/exercises/test_lecture_02.py"""

import torch


def explained_variance(predictions: torch.Tensor, targets: torch.Tensor) -> float:
    """Exercise 2.1. The critic's explained variance: how much of the targets' variance its
    predictions account for. predictions V, targets R: tensors of the same shape → a float.

    It must be 1 for a critic that predicts every target exactly, 0 for one that predicts
    only the targets' mean (whatever that mean is), and negative for one that does worse
    than the mean. Which variance is left over once the predictions are taken away, and how
    do you compare it with the targets' own? Use population variances (divide by n), as
    the library does. (Lecture 2, "Variance of the gradient estimate, with and without the
    baseline", prints it next to the variance ratio; lecture 7 reads it as a diagnostic.)
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
