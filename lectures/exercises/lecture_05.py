"""Exercises for lecture 5 — the clipped surrogate objective. Check: pytest lectures/exercises/test_lecture_05.py"""

import torch


def clipped_surrogate_loss(new_log_probs: torch.Tensor, old_log_probs: torch.Tensor, advantages: torch.Tensor,
                           epsilon: float) -> torch.Tensor:
    """Exercise 5.1. −E[min(r Â, clip(r, 1 − ε, 1 + ε) Â)] with r = exp(log π_θ − log π_old)."""
    raise NotImplementedError("exercise 5.1")


def clip_fraction(new_log_probs: torch.Tensor, old_log_probs: torch.Tensor, epsilon: float) -> float:
    """Exercise 5.2. The share of samples whose ratio lies outside [1 − ε, 1 + ε]."""
    raise NotImplementedError("exercise 5.2")


def has_gradient(ratio: float, advantage: float, epsilon: float) -> bool:
    """Exercise 5.3. Without autograd: does one sample with this ratio and advantage
    (advantage ≠ 0) contribute a gradient to L^CLIP? (Which term does the min pick?)
    """
    raise NotImplementedError("exercise 5.3")


def predict_surrogate_gradient(ratio: float, advantage: float) -> float:
    """Exercise 5.4, predict before you run the lecture. The number lecture 5's table "The
    gradient zones" prints: ∂L^CLIP/∂log π_θ(a|s) of one sample (L^CLIP the objective,
    to be maximised; ε = 0.2) at this ratio and advantage. The check asks for ratios
    0.6, 0.9, 1.0, 1.1 and 1.5 with Â = ±1 and computes each by autograd.
    """
    raise NotImplementedError("exercise 5.4")
