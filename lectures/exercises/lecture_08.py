"""Exercises for lecture 8 — PPO-Penalty and adaptive clipping. Check: pytest lectures/exercises/test_lecture_08.py"""

import torch


def adapt_beta(beta: float, kl: float, kl_target: float) -> float:
    """Exercise 8.1. PPO-Penalty's rule: double β when the KL exceeded 1.5 × the target,
    halve it when the KL fell below the target / 1.5, else keep it.
    """
    raise NotImplementedError("exercise 8.1")


def kl_penalty_loss(new_log_probs: torch.Tensor, old_log_probs: torch.Tensor, advantages: torch.Tensor,
                    beta: float) -> torch.Tensor:
    """Exercise 8.2. PPO-Penalty's policy loss, −E[r Â] + β KL(π_old ‖ π_θ), the KL by the
    k3 estimator on the sampled actions (see exercise 6.1).
    """
    raise NotImplementedError("exercise 8.2")
