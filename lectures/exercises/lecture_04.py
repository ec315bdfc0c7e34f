"""Exercises for lecture 4 — the clipped surrogate objective. Check: pytest lectures/exercises/test_lecture_04.py"""

import torch


def clipped_surrogate_loss(new_log_probs: torch.Tensor, old_log_probs: torch.Tensor, advantages: torch.Tensor,
                           epsilon: float) -> torch.Tensor:
    """Exercise 4.1. −E[min(r Â, clip(r, 1 − ε, 1 + ε) Â)] with r = exp(log π_θ − log π_old)."""
    raise NotImplementedError("exercise 4.1")


def clip_fraction(new_log_probs: torch.Tensor, old_log_probs: torch.Tensor, epsilon: float) -> float:
    """Exercise 4.2. The share of samples whose ratio lies outside [1 − ε, 1 + ε]."""
    raise NotImplementedError("exercise 4.2")


def has_gradient(ratio: float, advantage: float, epsilon: float) -> bool:
    """Exercise 4.3. Without autograd: does one sample with this ratio and advantage
    (advantage ≠ 0) contribute a gradient to L^CLIP? (Which term does the min pick?)
    """
    raise NotImplementedError("exercise 4.3")
