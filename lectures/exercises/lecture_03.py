"""Exercises for lecture 3 — Generalized Advantage Estimation. Check: pytest lectures/exercises/test_lecture_03.py

One environment, T steps; every argument is a (T,) tensor (flags as bools).
"""

import torch


def td_errors(rewards: torch.Tensor, values: torch.Tensor, next_values: torch.Tensor, terminated: torch.Tensor,
              gamma: float) -> torch.Tensor:
    """Exercise 3.1. δ_t = r_t + γ (1 − terminated_t) V(s_{t+1}) − V(s_t).

    next_values[t] is V of s_t's true successor (the final observation where a time limit
    cut the episode), so a truncation bootstraps and only a termination does not.
    """
    raise NotImplementedError("exercise 3.1")


def gae(rewards: torch.Tensor, values: torch.Tensor, next_values: torch.Tensor, terminated: torch.Tensor,
        dones: torch.Tensor, gamma: float, gae_lambda: float) -> torch.Tensor:
    """Exercise 3.2. Â_t = δ_t + γ λ (1 − done_t) Â_{t+1}, with Â_T = 0 after the last step.

    dones = terminated or truncated: the recursion stops at both, the bootstrap only at the first.
    """
    raise NotImplementedError("exercise 3.2")


def lambda_return(rewards: torch.Tensor, values: torch.Tensor, next_values: torch.Tensor, gamma: float,
                  gae_lambda: float) -> torch.Tensor:
    """Exercise 3.3. The λ-return of each step of an episode that never ends inside the
    rollout, from its definition as a weighted average of n-step returns:

        G_t^(n) = r_t + γ r_{t+1} + … + γ^(n−1) r_{t+n−1} + γ^n V(s_{t+n})
        G_t^λ   = (1 − λ) Σ_{n=1}^{T−t−1} λ^(n−1) G_t^(n) + λ^(T−t−1) G_t^(T−t)

    (the last n-step return, which reaches the end of the rollout, takes the remaining
    weight). It equals Â_t + V(s_t) from GAE: the test checks that.
    """
    raise NotImplementedError("exercise 3.3")
