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
    """Exercise 1.2. The loss to give autograd so that one gradient-descent step on it follows
    the REINFORCE estimate of one episode's policy gradient. log_probs: (T,) log π(a_t|s_t)
    of the episode's actions, attached to the policy's parameters; weights: (T,) the weight
    w_t of each step (G_t in the common estimator, γ^t G_t for ∇ E[G_0]: exercise 1.4).
    Returns a scalar.

    Questions: which scalar function of the log-probs has the REINFORCE estimate as its
    gradient? An optimiser descends: which sign turns that into ascent on the return? The
    weights are numbers measured on the episode, not functions of θ: how do you keep
    autograd from differentiating through them? (Lecture 1, "The policy and a batch of
    episodes", writes the loss for a batch of episodes.)
    """
    raise NotImplementedError("exercise 1.2")


def batch_size_where_noise_equals_signal(gradients: torch.Tensor) -> float:
    """Exercise 1.3. From single-episode gradient estimates g_1 … g_E (rows of an (E, P)
    tensor): the batch size B at which the noise of an average of B episodes' estimates
    equals the signal. Signal: the norm of the mean gradient, |E[g]|. Noise of a batch:
    the root of the expected squared distance between the batch's average and E[g].
    Estimate both from the E rows, population form (divide by E). Returns a float; it need
    not be a whole number.

    Questions: for one episode, write the expected squared distance |g − E[g]|² with the
    covariance of g. How does it shrink for an average of B independent episodes? Then
    solve noise = signal for B. (Lecture 1, "How noisy is one episode's gradient?", prints
    this batch size for each choice of weights.)
    """
    raise NotImplementedError("exercise 1.3")
