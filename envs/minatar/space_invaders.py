"""MinAtar Space Invaders (MinAtar/SpaceInvaders-v1) for N copies at once.

The rules (Young & Tian 2019, MinAtar), on a 10 × 10 grid, rows y = 0 (top) … 9
(bottom), columns x = 0 … 9. Actions: 0 no-op, 1 left, 2 right, 3 fire. One step:

1. The cannon, on the bottom row: fire puts a bullet on the cannon's cell if the cannon
   has cooled down (cooldown 0; the cooldown is then set to 5); left and right move it
   one column, clipped to the board.
2. The cannon's bullets move up one row; those on row 0 leave the board.
3. The aliens' bullets move down one row; those on row 9 leave the board. A bullet now
   on the cannon's cell ends the episode.
4. An alien on the cannon's cell ends the episode.
5. The formation moves when its move timer is 0 (the timer is then set to
   min(aliens left, move interval)): if an alien touches the wall it is heading for
   (column 0 going left, column 9 going right) the formation turns round and moves
   down a row, and if an alien was on the bottom row the episode ends (the bottom row
   wraps round to the top in that last frame); otherwise the formation moves one column
   sideways. An alien that arrives on the cannon's cell ends the episode.
6. The aliens shoot when their shot timer is 0 (the timer is then set to 10): the
   alien lowest in the column nearest the cannon (|x − cannon|, ties to the lower
   column) puts a bullet on its own cell.
7. Every alien on the same cell as a cannon's bullet dies with the bullet: +1 each.
8. Timers: the cooldown counts down to 0, the move and shot timers count down by 1.
9. When no alien is left, a new wave fills rows 0 … 3, columns 2 … 7 (24 aliens);
   the direction, timers and bullets carry on. With difficulty ramping (the default,
   as registered) each new wave moves faster: the move interval drops by 1 per wave,
   from 12 to at least 6.

So the formation moves every min(aliens left, interval) + 1 steps: it speeds up as
aliens die and, with one alien left, moves every other step. Start: cannon at column 5,
a full wave heading left, move interval and move timer 12, shot timer 10, cooldown 0,
no bullets. No randomness but the sticky actions; no time limit.

Observation channels: 0 cannon, 1 alien, 2 alien heading left, 3 alien heading right
(the formation's direction shown on every alien), 4 cannon's bullet, 5 alien's bullet.

State rows (int64, one column per copy): cannon x, direction (−1 left, +1 right), move
interval, move timer, shot timer, cooldown, last executed action, then three bitboards
of 10 rows each (bit x of row y set: an alien / a cannon's bullet / an alien's bullet
in cell (y, x)).
"""

from __future__ import annotations

import torch

from envs.minatar.base import GRID, TorchMinAtarEnv, popcount_table

COOLDOWN = 5
MOVE_INTERVAL, FASTEST_MOVE_INTERVAL = 12, 6
SHOT_INTERVAL = 10
CANNON_START = 5
WAVE_ROWS, WAVE_ROW = range(4), 0b0011111100  # a new wave: rows 0-3, columns 2-7
FIRE = 3


class TorchSpaceInvaders(TorchMinAtarEnv):
    env_id = "MinAtar/SpaceInvaders-v1"
    channels = ("cannon", "alien", "alien_left", "alien_right", "cannon_bullet", "alien_bullet")
    action_names = ("no-op", "left", "right", "fire")
    CANNON_X, DIRECTION, MOVE_INTERVAL, MOVE_TIMER, SHOT_TIMER, COOLDOWN, LAST_ACTION = range(7)
    ALIENS, CANNON_BULLETS, ALIEN_BULLETS = slice(7, 17), slice(17, 27), slice(27, 37)
    state_dim = 37
    last_action_row = LAST_ACTION

    def __init__(self, num_envs: int, device="cpu", seed: int | None = None, groups: int = 1,
                 sticky_action_prob: float = 0.1, difficulty_ramping: bool = True):
        super().__init__(num_envs, device, seed, groups, sticky_action_prob)
        self.difficulty_ramping = bool(difficulty_ramping)
        self._cannon_moves = torch.tensor([0, -1, 1, 0], device=self.device)  # by action
        self._popcount = popcount_table(self.device)
        self._columns = torch.arange(GRID, device=self.device)  # (10,)
        self._wave = torch.zeros(GRID, 1, dtype=torch.int64, device=self.device)  # (10, 1) bitboard
        self._wave[list(WAVE_ROWS)] = WAVE_ROW

    def _initial_state(self, n: int) -> torch.Tensor:
        state = torch.zeros(self.state_dim, n, dtype=torch.int64, device=self.device)
        state[self.CANNON_X] = CANNON_START
        state[self.DIRECTION] = -1
        state[self.MOVE_INTERVAL] = state[self.MOVE_TIMER] = MOVE_INTERVAL
        state[self.SHOT_TIMER] = SHOT_INTERVAL
        state[self.ALIENS] = self._wave
        return state

    def _transition(self, state, actions):
        cannon, direction, interval, move_timer, shot_timer, cooldown = state[:6]  # each (N,)
        aliens, cannon_bullets = state[self.ALIENS], state[self.CANNON_BULLETS]  # (10, N) bitboards
        alien_bullets = state[self.ALIEN_BULLETS]
        zero_row = torch.zeros_like(cannon).unsqueeze(0)  # (1, N)

        # 1-2. The cannon fires or moves; its bullets rise, row 0's leave.
        action = self._executed_actions(actions, state[self.LAST_ACTION])
        fires = (action == FIRE) & (cooldown == 0)
        new_bullet = torch.where(fires, 1 << cannon, 0)  # on row 9, which then moves up to row 8
        cannon = (cannon + self._cannon_moves.index_select(0, action)).clamp_(0, GRID - 1)
        cannon_bit = 1 << cannon  # (N,)
        cannon_bullets = torch.cat((cannon_bullets[1:-1], (cannon_bullets[-1] | new_bullet).unsqueeze(0), zero_row))

        # 3-4. The aliens' bullets fall, row 9's leave; anything on the cannon's cell ends it.
        alien_bullets = torch.cat((zero_row, alien_bullets[:-1]))
        terminated = ((alien_bullets[-1] | aliens[-1]) & cannon_bit) != 0

        # 5. The formation moves.
        moves = move_timer == 0
        move_timer = torch.where(moves, torch.minimum(self._popcount[aliens].sum(0), interval), move_timer)
        left_wall, right_wall = ((aliens & 1) != 0).any(0), ((aliens >> (GRID - 1)) != 0).any(0)
        turns = moves & torch.where(direction < 0, left_wall, right_wall)
        sideways = moves & ~turns
        terminated |= turns & (aliens[-1] != 0)
        sideways_aliens = torch.where(direction < 0, aliens >> 1, aliens << 1)  # the wall side is empty
        aliens = torch.where(turns, aliens.roll(1, dims=0), torch.where(sideways, sideways_aliens, aliens))
        direction = torch.where(turns, -direction, direction)
        terminated |= (aliens[-1] & cannon_bit) != 0

        # 6. The alien nearest the cannon shoots.
        shoots = shot_timer == 0
        shot_timer = torch.where(shoots, SHOT_INTERVAL, shot_timer)
        occupied_columns = ((aliens.unsqueeze(-1) >> self._columns) & 1).any(0)  # (N, 10)
        distance = torch.where(occupied_columns, (self._columns - cannon.unsqueeze(1)).abs(), GRID)  # (N, 10)
        column = distance.argmin(1)  # (N,) the first minimum: ties go to the lower column
        in_column = (aliens >> column) & 1  # (10, N)
        lowest_row = (in_column * self._columns.unsqueeze(1)).argmax(0, keepdim=True)  # (1, N)
        shot = torch.where(shoots, 1 << column, 0).unsqueeze(0)  # (1, N)
        alien_bullets = alien_bullets.scatter(0, lowest_row, alien_bullets.gather(0, lowest_row) | shot)

        # 7. Bullets kill aliens.
        kills = aliens & cannon_bullets  # (10, N)
        reward = self._popcount[kills].sum(0).to(torch.float32)
        aliens, cannon_bullets = aliens & ~kills, cannon_bullets & ~kills

        # 8-9. Timers; a new wave, faster, when the last alien died.
        cooldown = torch.where(fires, COOLDOWN, cooldown)
        cooldown = cooldown - (cooldown > 0).long()
        cleared = (aliens == 0).all(0)
        if self.difficulty_ramping:
            interval = interval - (cleared & (interval > FASTEST_MOVE_INTERVAL)).long()
        aliens = torch.where(cleared, self._wave, aliens)

        scalars = (cannon, direction, interval, move_timer - 1, shot_timer - 1, cooldown, action)
        next_state = torch.cat((torch.stack(scalars), aliens, cannon_bullets, alien_bullets))
        return next_state, reward, terminated

    def _observe(self, state):
        n = state.shape[1]
        observation = self._blank_observation(n)  # (n, 6, 10, 10)
        cannon = state[self.CANNON_X]
        self._mark_cells(observation, torch.zeros_like(cannon), torch.full_like(cannon, GRID - 1), cannon)
        maps = self._bitboard_cells(state[self.ALIENS.start:]).view(n, 3, GRID, GRID)  # aliens, both bullets
        heading_left = (state[self.DIRECTION] < 0).to(torch.float32).view(n, 1, 1)
        observation[:, 1] = maps[:, 0]
        observation[:, 2] = maps[:, 0] * heading_left
        observation[:, 3] = maps[:, 0] * (1 - heading_left)
        observation[:, 4:] = maps[:, 1:]
        return observation
