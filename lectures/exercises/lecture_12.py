"""Exercises for lecture 12 — PPO for language models. Check: pytest lectures/exercises/test_lecture_12.py"""

import torch


def completion_mask(tokens: torch.Tensor, eos_id: int) -> torch.Tensor:
    """Exercise 12.1. For completions (B, T) padded after their end: True up to and
    including each row's first EOS token, False after it (all True if a row has none).
    """
    raise NotImplementedError("exercise 12.1")


def token_rewards(score: torch.Tensor, policy_log_probs: torch.Tensor, reference_log_probs: torch.Tensor,
                  mask: torch.Tensor, beta: float) -> torch.Tensor:
    """Exercise 12.2. The per-token rewards r_t that RLHF-PPO's GAE and critic see for a
    batch of completions. score: (B,) the reward model's (or the task's) score of each
    completion; policy_log_probs log π(y_t), reference_log_probs log π_ref(y_t), mask
    (True on the real tokens, up to and including EOS): (B, T); beta: the KL coefficient β.
    Returns (B, T).

    Two parts. A KL penalty on every real token: β times that token's k1 estimate of the
    KL between the policy and the reference, on the token the policy sampled (exercise
    7.1, with π_ref in the place of π_θ and π in the place of π_old). Which sign makes it a
    penalty? And the score, paid once: on which token? After the last real token every
    reward is 0. (Lecture 12, "2. One episode, token by token", prints log π, log π_ref,
    KL_t and r_t per token; "5. The KL penalty" explains why k1 goes in the reward.)
    """
    raise NotImplementedError("exercise 12.2")


def kl_regularised_optimum(reference_probabilities: torch.Tensor, scores: torch.Tensor, beta: float) -> torch.Tensor:
    """Exercise 12.3. The policy π* that maximises E_π[r] − β KL(π ‖ π_ref) over K answers,
    in closed form. reference_probabilities π_ref, scores r: (K,), (K,) → (K,).

    Derive it first (derivations.py, exercise D.3, leads you through it; lecture 12,
    section 6). Then mind the overflow for small β.
    """
    raise NotImplementedError("exercise 12.3")
