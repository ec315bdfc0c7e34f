"""Exercises for lecture 1 — policy gradients (REINFORCE). Check: pytest lectures/exercises/test_lecture_01.py"""

import torch


def rewards_to_go(rewards: torch.Tensor, gamma: float) -> torch.Tensor:
    """Exercise 1.1. G_t = Σ_{k ≥ t} γ^(k−t) r_k for one episode. rewards: (T,) → (T,).

    Hint: walk backwards, G_t = r_t + γ G_{t+1}.
    """
    raise NotImplementedError("exercise 1.1")


def discounted_back_to_start(returns: torch.Tensor, gamma: float) -> torch.Tensor:
    """Exercise 1.4. The weights whose REINFORCE estimate is unbiased for ∇ E[G_0]:
    γ^t G_t, the part of G_0 that the action at step t can change. returns: (T,) G_t → (T,).

    (The common estimator weights by G_t alone; for γ < 1 its expectation is not ∇ E[G_0].)
    """
    raise NotImplementedError("exercise 1.4")


def reinforce_loss(log_probs: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """Exercise 1.2. The loss whose gradient is minus the REINFORCE estimate of one episode:
    −Σ_t log π(a_t|s_t) · w_t, with the weights w_t given (G_t in the common estimator,
    γ^t G_t for the gradient of E[G_0]: exercise 1.4). log_probs, weights: (T,) → a scalar.

    The weights are numbers, not functions of θ: no gradient may flow into them.
    """
    raise NotImplementedError("exercise 1.2")


def batch_size_where_noise_equals_signal(gradients: torch.Tensor) -> float:
    """Exercise 1.3. From single-episode gradient estimates g_1 … g_E (rows of an (E, P)
    tensor): the batch size B at which the noise of a B-episode average, sqrt(tr Cov[g] / B),
    equals the signal |E[g]|. Use the population covariance (divide by E).
    """
    raise NotImplementedError("exercise 1.3")
