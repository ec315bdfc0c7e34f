"""Rollout storage for a recurrent policy: the feed-forward buffer plus what replaying needs.

Per step t and env n, as `RolloutBuffer` (ppo.storage): o_t, a_t, log π_old(a_t | o_≤t),
V_old(o_≤t), r_t, terminated, truncated, the final observation of an episode cut at t; and

    episode_starts[t, n]   o_t is an episode's first observation (the state was zeroed before it)
    final_values[t, n]     V_old(final obs | the state after o_t), where the episode was truncated at t

Per sequence (env n's T steps of this rollout):

    initial_state[n]       the recurrent state (K, S) env n entered the rollout with

Every sequence is a whole env column of the same length T, and episodes that end inside it
reset the state there, so the update needs no padding: it replays column n from
initial_state[n], zeroing the state where episode_starts is set, and recomputes exactly
the rollout's log-probs and values. The final values are computed during the rollout,
because V(final obs) needs the state the episode ended with, which only the rollout has.
"""

from __future__ import annotations

import torch

from ppo.storage import RolloutBuffer


class SequenceRolloutBuffer(RolloutBuffer):
    """RolloutBuffer (T, N, ...) with episode starts, final values per step and an initial state per env."""

    def __init__(self, num_steps: int, num_envs: int, obs_shape: tuple[int, ...], action_shape: tuple[int, ...],
                 action_dtype: torch.dtype, device: torch.device, state_shape: tuple[int, ...]):
        super().__init__(num_steps, num_envs, obs_shape, action_shape, action_dtype, device)
        self.episode_starts = torch.zeros(num_steps, num_envs, dtype=torch.bool, device=device)  # (T, N)
        self.final_values = torch.zeros(num_steps, num_envs, device=device)  # (T, N)
        self.initial_state = torch.zeros(num_envs, *state_shape, device=device)  # (N, K, S)

    def start_sequences(self, state: torch.Tensor) -> None:
        """Begin a rollout whose envs enter it with `state` (N, K, S)."""
        self.reset()
        self.initial_state.copy_(state)
        self.final_values.zero_()
