"""Exercises for lecture 1 — policy gradients (REINFORCE). Check: pytest lectures/exercises/test_lecture_01.py"""

import torch


def rewards_to_go(rewards: torch.Tensor, gamma: float) -> torch.Tensor:
    """Exercise 1.1. G_t = Σ_{k ≥ t} γ^(k−t) r_k for one episode. rewards: (T,) → (T,).

    Do it in one pass over the episode: which relation between G_t and G_{t+1} lets you?
    """
    raise NotImplementedError("exercise 1.1")


def discounted_back_to_start(returns: torch.Tensor, gamma: float) -> torch.Tensor:
    """Exercise 1.4. The weights w_t whose REINFORCE estimate Σ_t ∇log π(a_t|s_t) · w_t is
    unbiased for ∇ E[G_0], G_0 = Σ_k γ^k r_k. returns: (T,) G_t → (T,) w_t.

    Derive them: write ∇ E[G_0] = E[G_0 Σ_t ∇log π(a_t|s_t)], drop the rewards before t
    (why may you?), and express what is left in terms of G_t. The common estimator
    weights by G_t alone; is its expectation ∇ E[G_0] when γ < 1? (Lecture 1, "The noise
    again, at a trained policy".)
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
