"""Exercises for lecture 13 — the RLHF pipeline. Check: pytest lectures/exercises/test_lecture_13.py"""

import torch


def bradley_terry_loss(chosen_scores: torch.Tensor, rejected_scores: torch.Tensor) -> torch.Tensor:
    """Exercise 13.1. The reward model's loss on comparisons: −mean log σ(r(y_w) − r(y_l)).
    Keep it finite when the score gap is large (a plain log(sigmoid(...)) is not).
    """
    raise NotImplementedError("exercise 13.1")


def group_normalised_advantages(rewards: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Exercise 13.2. GRPO's critic-free advantage. rewards: (G, K), K completions of each
    of G prompts. Each completion's reward minus its group's mean, divided by its group's
    (unbiased) std + eps. → (G, K).
    """
    raise NotImplementedError("exercise 13.2")


def leave_one_out_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """Exercise 13.3. RLOO's baseline: each completion's reward minus the mean reward of
    the other K − 1 completions of the same prompt. (G, K) → (G, K).
    """
    raise NotImplementedError("exercise 13.3")


def predict_best_of_n_kl(n: int) -> float:
    """Exercise 13.4, predict before you run the lecture. Best-of-n draws n completions from
    π_ref and keeps the one the reward model scores highest. Lecture 13 computes
    KL(π_bon ‖ π_ref) exactly for every n. What is it, in nats, when no two completions
    can tie (every completion its own score)? Think of the quantile u = F(r(y)) of the kept
    completion: its density under π_bon is n·u^(n−1), under π_ref 1. Return the value for
    this n (a formula in n is fine); the check compares with the exact KL for n = 2, 16, 256.
    """
    raise NotImplementedError("exercise 13.4")
