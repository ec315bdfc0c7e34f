"""Rollout storage for a recurrent policy: the feed-forward buffer plus what replaying needs.

Per step t and env n, as `RolloutBuffer` (ppo.algorithm.storage): o_t, a_t, log π_old(a_t | o_≤t),
V_old(o_≤t), r_t, terminated, truncated, and V_old(final obs | the state after o_t) where the
episode was truncated at t; and

    episode_starts[t, n]   o_t is an episode's first observation (the state was zeroed before it)

Per sequence (env n's steps cL … cL + L − 1 of this rollout, L = sequence_length, which
divides T; L = T by default, one sequence per env):

    sequence_states[c, n]  the recurrent state (K, S) env n entered step cL with
    initial_state[n]       = sequence_states[0, n], the state env n entered the rollout with

Every sequence has the same length L, and episodes that end inside it reset the state
there, so the update needs no padding: it replays sequence (c, n) from sequence_states[c, n],
zeroing the state where episode_starts is set, and recomputes exactly the rollout's
log-probs and values. (The final values are computed during the rollout for every policy;
a recurrent one needs the state the episode ended with, which only the rollout has.)
"""

from __future__ import annotations

import torch

from ppo.algorithm.storage import RolloutBuffer


class SequenceRolloutBuffer(RolloutBuffer):
    """RolloutBuffer (T, N, ...) with episode starts, final values per step and a state per sequence."""

    def __init__(self, num_steps: int, num_envs: int, obs_shape: tuple[int, ...], action_shape: tuple[int, ...],
                 action_dtype: torch.dtype, device: torch.device, state_shape: tuple[int, ...],
                 sequence_length: int | None = None):
        super().__init__(num_steps, num_envs, obs_shape, action_shape, action_dtype, device)
        self.sequence_length = sequence_length or num_steps
        if num_steps % self.sequence_length:
            raise ValueError(f"sequence_length = {sequence_length} does not divide num_steps = {num_steps}")
        self.episode_starts = torch.zeros(num_steps, num_envs, dtype=torch.bool, device=device)  # (T, N)
        self.sequence_states = torch.zeros(num_steps // self.sequence_length, num_envs, *state_shape,
                                           device=device)  # (T / L, N, K, S)

    @property
    def initial_state(self) -> torch.Tensor:
        """The state every env entered the rollout with (N, K, S)."""
        return self.sequence_states[0]

    def reset(self) -> None:
        """Begin a rollout (every row of sequence_states is written by `keep_state` as its sequence begins)."""
        super().reset()

    def keep_state(self, state: torch.Tensor) -> None:
        """Before the step about to be stored: if it begins a sequence, keep the state (N, K, S) envs enter it with."""
        if self.step % self.sequence_length == 0:
            self.sequence_states[self.step // self.sequence_length] = state

    def sequences(self, tensor: torch.Tensor) -> torch.Tensor:
        """Per-step (T, N, ...) → one row per sequence (T/L · N, L, ...); row c·N + n is env n's c-th sequence,
        the row of sequence_states.flatten(0, 1)."""
        T, N = tensor.shape[:2]
        L = self.sequence_length
        return tensor.reshape(T // L, L, N, *tensor.shape[2:]).transpose(1, 2).reshape(T // L * N, L,
                                                                                       *tensor.shape[2:])
