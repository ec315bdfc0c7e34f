"""Exercises for lecture 11 — fast environments. Check: pytest lectures/exercises/test_lecture_11.py"""

import torch


def same_step_autoreset(next_obs: torch.Tensor, done: torch.Tensor,
                        reset_obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Exercise 11.1. Autoreset for N copies in one tensor, without a Python loop. next_obs:
    (N, D) the observations after the step; done: (N,) bool; reset_obs: (N, D) fresh first
    observations. Return (the observations the agent sees next: the reset one where done,
    the final observations: next_obs as it was, kept so that a truncation can bootstrap).
    """
    raise NotImplementedError("exercise 11.1")


def cartpole_terminated(states: torch.Tensor) -> torch.Tensor:
    """Exercise 11.2. CartPole's termination for a batch of states (N, 4) = (x, ẋ, θ, θ̇):
    the cart left |x| ≤ 2.4 or the pole left |θ| ≤ 12 degrees. → (N,) bool.
    """
    raise NotImplementedError("exercise 11.2")
