"""Exercises for lecture 12 — PPO for language models. Check: pytest lectures/exercises/test_lecture_12.py"""

import torch


def completion_mask(tokens: torch.Tensor, eos_id: int) -> torch.Tensor:
    """Exercise 12.1. For completions (B, T) padded after their end: True up to and
    including each row's first EOS token, False after it (all True if a row has none).
    """
    raise NotImplementedError("exercise 12.1")


def token_rewards(score: torch.Tensor, policy_log_probs: torch.Tensor, reference_log_probs: torch.Tensor,
                  mask: torch.Tensor, beta: float) -> torch.Tensor:
    """Exercise 12.2. The per-token reward of RLHF-PPO: r_t = −β KL_t on every real token,
    KL_t = log π(y_t) − log π_ref(y_t) (the k1 estimate), plus the completion's score on its
    last real token, and 0 after it. score: (B,); the others (B, T) → (B, T).
    """
    raise NotImplementedError("exercise 12.2")


def kl_regularised_optimum(reference_probabilities: torch.Tensor, scores: torch.Tensor, beta: float) -> torch.Tensor:
    """Exercise 12.3. The policy π* that maximises E_π[r] − β KL(π ‖ π_ref) over K answers,
    in closed form. reference_probabilities π_ref, scores r: (K,), (K,) → (K,).

    Derive it first (derivations.py, exercise D.3, leads you through it; lecture 12,
    section 6). Then mind the overflow for small β.
    """
    raise NotImplementedError("exercise 12.3")
