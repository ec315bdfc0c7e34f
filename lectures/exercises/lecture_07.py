"""Exercises for lecture 7 — reading the diagnostics. Check: pytest lectures/exercises/test_lecture_07.py"""

import torch


def approx_kl(new_log_probs: torch.Tensor, old_log_probs: torch.Tensor, estimator: str) -> float:
    """Exercise 7.1. PPO's "approx KL": an estimate of KL(π_old ‖ π_θ) from actions sampled
    by π_old. new_log_probs: log π_θ(a), old_log_probs: log π_old(a), both (n,); estimator:
    "k1" or "k3". Returns the mean of the chosen per-sample estimate, a float.

    Write log ρ = log π_θ(a) − log π_old(a). k1 is the plain Monte-Carlo estimate: the term
    inside the KL's definition, evaluated at each sample. It is unbiased but can be
    negative on a sample. k3 adds to k1 a term in ρ whose mean under π_old is 0, chosen so
    that every sample's estimate is ≥ 0. Questions: what is E_{π_old}[ρ]? Which multiple of
    (ρ − 1) makes the sum ≥ 0 for every ρ > 0 (compare log ρ with its tangent at ρ = 1)?
    (Lecture 7 reads the approx KL as a diagnostic; Schulman's note "Approximating KL
    Divergence", on lecture 7's reading list in lectures/README.md, derives k1 and k3.)
    """
    raise NotImplementedError("exercise 7.1")


def gradient_steps_taken(minibatch_kls: list[float], target_kl: float | None) -> int:
    """Exercise 7.2. The KL early stop: before each minibatch's gradient step the update
    measures the approx KL of π_θ so far (minibatch_kls[i] before step i); at the first
    one above target_kl it stops, without taking that step. How many steps were taken?
    target_kl None means no early stop.
    """
    raise NotImplementedError("exercise 7.2")
