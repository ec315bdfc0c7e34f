"""Exercises for lecture 15 — memory. Check: pytest lectures/exercises/test_lecture_15.py"""

import torch


def masked_gru_step(inputs: torch.Tensor, state: torch.Tensor, episode_start: torch.Tensor,
                    weight_ih: torch.Tensor, weight_hh: torch.Tensor, bias_ih: torch.Tensor,
                    bias_hh: torch.Tensor) -> torch.Tensor:
    """Exercise 15.1. One step of a GRU for B envs, as a recurrent policy's rollout takes it.

    inputs (B, I): the hidden layers' output for this step's observations; state (B, H): each
    env's state after its previous step; episode_start (B,) bool: this step's observation is
    the first of a new episode. The weights are torch.nn.GRUCell's: weight_ih (3H, I),
    weight_hh (3H, H), bias_ih and bias_hh (3H,), each holding the reset, update and
    candidate blocks in that order (the lecture's section 4 gives the cell's equations).
    Return the new state (B, H). An env that starts an episode must not carry anything from
    the episode before: its new state depends on this step's input alone.
    """
    raise NotImplementedError("exercise 15.1")


def linear_probe_r2(train_features: torch.Tensor, train_targets: torch.Tensor,
                    test_features: torch.Tensor, test_targets: torch.Tensor) -> torch.Tensor:
    """Exercise 15.2. A linear probe, scored on held-out data.

    Fit the targets (n, k) as an affine function of the features (n, d) by least squares on
    the training rows (an intercept included), predict the test rows, and return R² of each
    target column on the test rows (k,): 1 − (sum of squared errors) / (sum of squared
    deviations of the test targets from their own mean). R² is 1 for a perfect probe, 0 for
    one no better than predicting the test mean, and can be negative.
    """
    raise NotImplementedError("exercise 15.2")
