"""Exercises for lecture 3 — Generalized Advantage Estimation. Check: pytest lectures/exercises/test_lecture_03.py

One environment, T steps; every argument is a (T,) tensor (flags as bools).
"""

import torch


def td_errors(rewards: torch.Tensor, values: torch.Tensor, next_values: torch.Tensor, terminated: torch.Tensor,
              gamma: float) -> torch.Tensor:
    """Exercise 3.1. The TD error δ_t = r_t + γ V(s_{t+1}) − V(s_t) of each step.

    next_values[t] is the critic's V of s_t's true successor (the final observation where a
    time limit cut the episode). A terminal state has no future: what is its value, and
    which of the two flags, termination or truncation, means s_{t+1} is terminal?
    (Lecture 3's introduction; lecture 8 on truncation.)
    """
    raise NotImplementedError("exercise 3.1")


def gae(rewards: torch.Tensor, values: torch.Tensor, next_values: torch.Tensor, terminated: torch.Tensor,
        dones: torch.Tensor, gamma: float, gae_lambda: float) -> torch.Tensor:
    """Exercise 3.2. GAE: Â_t = Σ_{l ≥ 0} (γλ)^l δ_{t+l}, the sum running to the end of s_t's
    episode or of the rollout, whichever comes first (δ from exercise 3.1).

    Compute it in one backward pass, without the double sum: derive a relation between Â_t
    and Â_{t+1}. dones = terminated or truncated: where must the sum stop, and where must
    the bootstrap in δ_t stop? (Lecture 3's introduction.)
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


def predict_best_lambda(batch_size: int) -> float:
    """Exercise 3.4, predict before you run the lecture. Lecture 3's chain, with the critic
    wrong by 0.5 × the spread of V: which λ of 0, 0.2, 0.4, 0.6, 0.8, 0.9, 0.95, 0.97,
    0.99, 1 gives the smallest error bias² + variance / B for an average of B = batch_size
    advantage estimates? Answer for B = 1, 16 and 4096 (return a number; no code needed:
    reason from what λ trades). The check runs the lecture's experiment at a small size
    and accepts a λ whose error is within 10% of the best.
    """
    raise NotImplementedError("exercise 3.4")
