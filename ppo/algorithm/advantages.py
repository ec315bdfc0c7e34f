"""Generalized Advantage Estimation, GAE(γ, λ) (Schulman et al., 2016).

For a rollout of T steps from N parallel environments, with V the critic:

    δ_t = r_t + γ · (1 − terminated_t) · V(s_{t+1}) − V(s_t)
    Â_t = δ_t + γ · λ · (1 − done_t) · Â_{t+1},        Â_T = 0
    R_t = Â_t + V(s_t)                                  (the critic's regression target)

where done_t = terminated_t or truncated_t. The two flags play different roles:

* termination ends the MDP: the next state has value 0, so nothing is bootstrapped;
* truncation (a time limit) is not part of the MDP: the state the episode was cut at
  still has a future, so δ_t bootstraps from V(final observation). Only the recursion
  stops, because s_{t+1} of the next stored step belongs to a new episode.

`next_values[t]` must therefore hold V of the true successor of s_t: V(s_{t+1}) inside
an episode, V(final observation) where the episode was truncated (anything where it
terminated: it is multiplied by zero). λ = 1 gives Monte-Carlo returns minus V; λ = 0
gives the one-step TD error.

The same function serves token generation: T is the token axis, N the batch of
completions, and `terminated` marks each completion's last real token.
"""

from __future__ import annotations

import torch


def compute_gae(
    rewards: torch.Tensor,  # (T, N)
    values: torch.Tensor,  # (T, N) V(s_t)
    next_values: torch.Tensor,  # (T, N) V of the true successor of s_t
    terminated: torch.Tensor,  # (T, N) bool
    dones: torch.Tensor,  # (T, N) bool: terminated or truncated
    gamma: float,
    gae_lambda: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return (advantages, returns), both (T, N), by the backward recursion above."""
    not_terminated = 1.0 - terminated.to(values.dtype)
    not_done = 1.0 - dones.to(values.dtype)
    deltas = rewards + gamma * not_terminated * next_values - values  # (T, N)
    advantages = torch.zeros_like(values)
    running = torch.zeros_like(values[0])  # (N,) Â_{t+1}
    for t in reversed(range(values.shape[0])):
        running = deltas[t] + gamma * gae_lambda * not_done[t] * running
        advantages[t] = running
    return advantages, advantages + values


def successor_values(
    values: torch.Tensor,  # (T, N)
    last_value: torch.Tensor,  # (N,) V of the observation after the rollout's last step
    truncated: torch.Tensor,  # (T, N) bool
    final_values: torch.Tensor,  # (T, N) V(final observation), read where truncated
) -> torch.Tensor:
    """V of each step's true successor: V(s_{t+1}), or V(final obs) after a truncation."""
    shifted = torch.cat([values[1:], last_value.unsqueeze(0)], dim=0)  # (T, N)
    return torch.where(truncated, final_values, shifted)
