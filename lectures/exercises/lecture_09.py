"""Exercises for lecture 9 — PPO-Penalty and adaptive clipping. Check: pytest lectures/exercises/test_lecture_09.py"""

import torch


def adapt_beta(beta: float, kl: float, kl_target: float) -> float:
    """Exercise 9.1. PPO-Penalty's rule: double β when the KL exceeded 1.5 × the target,
    halve it when the KL fell below the target / 1.5, else keep it.
    """
    raise NotImplementedError("exercise 9.1")


def kl_penalty_loss(new_log_probs: torch.Tensor, old_log_probs: torch.Tensor, advantages: torch.Tensor,
                    beta: float) -> torch.Tensor:
    """Exercise 9.2. PPO-Penalty's policy loss, −E[r Â] + β KL(π_old ‖ π_θ), the KL by the
    k3 estimator on the sampled actions (see exercise 7.1).
    """
    raise NotImplementedError("exercise 9.2")
