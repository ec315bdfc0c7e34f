"""What the batched MinAtar games share: integer states, bitboards, sticky actions, images.

Every game is a 10 × 10 grid seen through C binary channels. A subclass writes the rules
of one step for N copies at once (`_initial_state`, `_transition`, `_observe`, as for
`envs.classic.base.TorchClassicEnv`, whose episode bookkeeping, seed groups, autoreset
and checkpoints this class inherits) and this class adds:

* Integer state. The state is (state_dim, N) int64, one row per variable (a position, a
  direction, a timer, ...), so a step is exact integer arithmetic: the same on every
  machine and device, and equal to the reference implementation cell for cell.
* Bitboards. A 10 × 10 map of things (bricks, aliens, bullets) is stored as 10 rows of the
  state, one per grid row, each an integer whose bit c is the cell in column c. Moving
  every alien one column left is then one right shift per row, and a whole map is 10
  numbers per copy instead of 100.
* Observations. `_bitboard_cells` turns bitboard rows into cells by a table look-up
  (row value v → its 10 bits) and `_mark_cells` draws single things (a paddle, a ball).
  Channel-first, (N, C, 10, 10) float32, as convolutions take it; the `minatar` package's
  gymnasium envs return (10, 10, C) bool, channel-last. Image[c, y, x] there is
  image[y, x, c] here.
* Sticky actions (Machado et al. 2018): with probability p (`sticky_action_prob`, 0.1
  by default as in the `minatar` package and its gymnasium registration) a copy repeats
  the action it executed on the previous step instead of the chosen one; each copy draws
  its own uniform number every step, from its seed group's generator. The executed
  action is kept in the state. A new episode starts with no-op as the previous action
  (as the Arcade Learning Environment does; the `minatar` package carries the last
  action over from the previous episode).
* Actions are the game's minimal action set, numbered as the `minatar` package's v1
  gymnasium envs number them (`action_names` lists them).
* No time limit by default: the `minatar` package registers its gymnasium envs without
  one. `make_minatar_vec_env(..., max_episode_steps=K)` sets one.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from envs.classic.base import TorchClassicEnv

GRID = 10  # the board is GRID × GRID cells
FULL_ROW = (1 << GRID) - 1  # a bitboard row with every column set
NO_TIME_LIMIT = torch.iinfo(torch.int64).max


def row_bits_table(device: torch.device) -> torch.Tensor:
    """(2^10, 10) float32: row v of the table holds the bits of v, column c = bit c."""
    values = torch.arange(1 << GRID, device=device).unsqueeze(1)  # (1024, 1)
    columns = torch.arange(GRID, device=device)  # (10,)
    return ((values >> columns) & 1).to(torch.float32)


def popcount_table(device: torch.device) -> torch.Tensor:
    """(2^10,) int64: entry v is the number of set bits of v (cells occupied in a bitboard row)."""
    return row_bits_table(device).sum(1).to(torch.int64)


class TorchMinAtarEnv(TorchClassicEnv):
    """N copies of one MinAtar game; see the module docstring. The state is int64."""

    channels: tuple[str, ...]  # the names of the C observation channels, in order
    drawing_order: tuple[str, ...] | None = None  # channels bottom to top when drawn; None: in channel order
    action_names: tuple[str, ...]  # the minimal action set, in the order of the action indices
    last_action_row: int  # the state row holding the action each copy executed last
    max_episode_steps = NO_TIME_LIMIT

    def __init__(self, num_envs: int, device="cpu", seed: int | None = None, groups: int = 1,
                 sticky_action_prob: float = 0.1):
        if isinstance(sticky_action_prob, bool) or not 0.0 <= sticky_action_prob <= 1.0:
            raise ValueError(f"sticky_action_prob = {sticky_action_prob!r} must be a probability in [0, 1]")
        super().__init__(num_envs, device, seed, torch.int64, groups)
        self.sticky_action_prob = float(sticky_action_prob)
        self.single_observation_space = gym.spaces.Box(
            0.0, 1.0, shape=(len(self.channels), GRID, GRID), dtype=np.float32)
        self.single_action_space = gym.spaces.Discrete(len(self.action_names))
        self._row_bits = row_bits_table(self.device)
        self.executed_actions: torch.Tensor | None = None  # (N,) what the copies did on the last step

    def _executed_actions(self, actions: torch.Tensor, last_actions: torch.Tensor) -> torch.Tensor:
        """(N,) the actions the copies execute: the chosen one, or with probability p the last one."""
        actions = actions.reshape(-1).to(device=self.device, dtype=torch.int64)
        if self.sticky_action_prob > 0.0:
            actions = torch.where(self._uniform_per_copy() < self.sticky_action_prob, last_actions, actions)
        self.executed_actions = actions
        return actions

    def _uniform_per_copy(self) -> torch.Tensor:
        """(N,) uniform numbers in [0, 1), each seed group's block drawn with its own generator."""
        draws = [torch.rand(self.group_size, generator=generator, device=self.device) for generator in self.generators]
        return draws[0] if self.groups == 1 else torch.cat(draws)

    def _blank_observation(self, n: int) -> torch.Tensor:
        """(n, C, 10, 10) float32 zeros, to be drawn on."""
        return torch.zeros(n, len(self.channels), GRID, GRID, dtype=torch.float32, device=self.device)

    def _bitboard_cells(self, rows: torch.Tensor) -> torch.Tensor:
        """(k, n) bitboard rows → (n, k, 10) float32 cells: cells[i, r, x] = bit x of rows[r, i]."""
        return self._row_bits.index_select(0, rows.T.reshape(-1)).view(rows.shape[1], rows.shape[0], GRID)

    @staticmethod
    def _mark_cells(observation: torch.Tensor, channel: torch.Tensor, y: torch.Tensor, x: torch.Tensor) -> None:
        """Set observation[i, channel[i], y[i], x[i]] = 1 for every copy i (each argument (n,) or (k, n))."""
        channels, height, width = observation.shape[1:]
        cells = (channel * height + y) * width + x  # flat cell index within one image
        observation.view(observation.shape[0], -1).scatter_(1, cells.reshape(-1, observation.shape[0]).T, 1.0)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.env_id!r}, num_envs={self.num_envs}, device={self.device}, "
                f"sticky_action_prob={self.sticky_action_prob})")
