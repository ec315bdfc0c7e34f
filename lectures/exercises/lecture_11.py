"""Exercises for lecture 11 — PPO for language models. Check: pytest lectures/exercises/test_lecture_11.py"""

import torch


def completion_mask(tokens: torch.Tensor, eos_id: int) -> torch.Tensor:
    """Exercise 11.1. For completions (B, T) padded after their end: True up to and
    including each row's first EOS token, False after it (all True if a row has none).
    """
    raise NotImplementedError("exercise 11.1")


def token_rewards(score: torch.Tensor, policy_log_probs: torch.Tensor, reference_log_probs: torch.Tensor,
                  mask: torch.Tensor, beta: float) -> torch.Tensor:
    """Exercise 11.2. The per-token reward of RLHF-PPO: r_t = −β KL_t on every real token,
    KL_t = log π(y_t) − log π_ref(y_t) (the k1 estimate), plus the completion's score on its
    last real token, and 0 after it. score: (B,); the others (B, T) → (B, T).
    """
    raise NotImplementedError("exercise 11.2")


def kl_regularised_optimum(reference_probabilities: torch.Tensor, scores: torch.Tensor, beta: float) -> torch.Tensor:
    """Exercise 11.3. The policy that maximises E[r] − β KL(π ‖ π_ref) over K answers:
    π*(y) ∝ π_ref(y) exp(r(y) / β). (K,), (K,) → (K,). Mind the overflow for small β.
    """
    raise NotImplementedError("exercise 11.3")
