"""Exercises for lecture 5 — the clipped surrogate objective. Check: pytest lectures/exercises/test_lecture_05.py"""

import torch


def clipped_surrogate_loss(new_log_probs: torch.Tensor, old_log_probs: torch.Tensor, advantages: torch.Tensor,
                           epsilon: float) -> torch.Tensor:
    """Exercise 5.1. PPO's policy loss: minus the clipped surrogate objective L^CLIP of
    lecture 5, averaged over the samples. new_log_probs: log π_θ(a_t|s_t) (attached to θ),
    old_log_probs: log π_old(a_t|s_t) from the rollout, advantages: Â_t, all (n,); epsilon:
    the clip coefficient ε. Returns a scalar to minimise.

    Steps: form each sample's probability ratio r_t(θ) from the two log-probs; form the
    two candidate objectives per sample, one with the raw ratio and one with the ratio held
    inside [1 − ε, 1 + ε]; keep the pessimistic one (which is it, for Â > 0 and for
    Â < 0?); average, and mind the sign. (Lecture 5, the opening and "L^CLIP against the
    ratio".)
    """
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
