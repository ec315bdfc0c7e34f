"""Exercises for lecture 7 — reading the diagnostics. Check: pytest lectures/exercises/test_lecture_07.py"""

import torch


def approx_kl(new_log_probs: torch.Tensor, old_log_probs: torch.Tensor, estimator: str) -> float:
    """Exercise 7.1. PPO's "approx KL", KL(π_old ‖ π_θ), from actions sampled by π_old.
    With log ρ = log π_θ(a) − log π_old(a): k1 = mean(−log ρ), k3 = mean((ρ − 1) − log ρ).
    """
    raise NotImplementedError("exercise 7.1")


def gradient_steps_taken(minibatch_kls: list[float], target_kl: float | None) -> int:
    """Exercise 7.2. The KL early stop: before each minibatch's gradient step the update
    measures the approx KL of π_θ so far (minibatch_kls[i] before step i); at the first
    one above target_kl it stops, without taking that step. How many steps were taken?
    target_kl None means no early stop.
    """
    raise NotImplementedError("exercise 7.2")
