"""MinAtar Breakout (MinAtar/Breakout-v1) for N copies at once.

The rules (Young & Tian 2019, MinAtar), on a 10 × 10 grid, rows y = 0 (top) … 9
(bottom), columns x = 0 … 9:

* A paddle sits on the bottom row at column p. Actions: 0 no-op, 1 left, 2 right; the
  paddle moves one column, p ← clip(p ∓ 1, 0, 9), before the ball moves.
* The ball moves one cell diagonally per step, (x, y) ← (x + dx, y + dy) with
  dx, dy ∈ {−1, +1}. In this order:
  - side wall: a new x outside 0 … 9 is clipped back and dx flips;
  - top wall: a new y of −1 means the ball stays on row 0 and dy flips;
  - brick: if the new cell holds a brick and the ball did not strike a brick on the
    previous step, the brick is removed, the reward is +1, dy flips and the ball keeps
    its old row (it moves sideways only). If it did strike one on the previous step, the
    ball enters the brick's cell and the brick stays. "Struck a brick" means the ball's
    new cell held a brick, removed or not;
  - bottom row: if the ball was right above the paddle (old x = p) it bounces straight
    back, dy flips; else if it lands on the paddle (new x = p) it bounces back the way it
    came, dx and dy flip; in both cases it keeps its old row. Otherwise the ball falls
    out and the episode terminates. Each time the ball reaches the bottom row with no
    brick left, the three rows of bricks are laid anew.
  Every bounce keeps the ball on its old row, so the ball never enters the bottom row
  except when it falls out.
* Bricks fill rows 1, 2 and 3 at the start: 30 bricks, +1 each.
* Start: paddle at column 4, ball on row 3 either at column 0 moving down-right or at
  column 9 moving down-left, with probability ½ each.

Observation channels: 0 paddle, 1 ball, 2 trail (the ball's cell on the previous step,
which shows its direction), 3 bricks. No time limit.

State rows (int64, one column per copy): ball x, ball y, ball dx, ball dy, paddle x,
trail x, trail y, struck-a-brick flag, last executed action, then three bitboard rows
for the bricks of grid rows 1, 2, 3 (bit x set: a brick in column x).
"""

from __future__ import annotations

import torch

from envs.minatar.base import FULL_ROW, GRID, TorchMinAtarEnv

BRICK_ROWS = (1, 2, 3)  # the grid rows that hold bricks
PADDLE_ROW = GRID - 1
START_ROW = 3
PADDLE_START = 4


class TorchBreakout(TorchMinAtarEnv):
    env_id = "MinAtar/Breakout-v1"
    channels = ("paddle", "ball", "trail", "brick")
    drawing_order = ("brick", "trail", "paddle", "ball")  # the ball starts inside a brick's cell: on top
    action_names = ("no-op", "left", "right")
    BALL_X, BALL_Y, BALL_DX, BALL_DY, PADDLE_X, TRAIL_X, TRAIL_Y, STRUCK, LAST_ACTION = range(9)
    BRICKS = slice(9, 9 + len(BRICK_ROWS))
    state_dim = 9 + len(BRICK_ROWS)
    last_action_row = LAST_ACTION

    def __init__(self, num_envs: int, device="cpu", seed: int | None = None, groups: int = 1,
                 sticky_action_prob: float = 0.1):
        super().__init__(num_envs, device, seed, groups, sticky_action_prob)
        self._paddle_moves = torch.tensor([0, -1, 1], device=self.device)  # by action
        self._single_cell_channels = torch.arange(3, device=self.device).unsqueeze(1)  # (3, 1) paddle, ball, trail

    def _initial_state(self, n: int) -> torch.Tensor:
        from_right = torch.randint(2, (n,), generator=self.generator, device=self.device)  # (n,) 0 or 1
        state = torch.zeros(self.state_dim, n, dtype=torch.int64, device=self.device)
        state[self.BALL_X] = state[self.TRAIL_X] = (GRID - 1) * from_right  # column 0 or 9
        state[self.BALL_Y] = state[self.TRAIL_Y] = START_ROW
        state[self.BALL_DX] = 1 - 2 * from_right  # towards the middle
        state[self.BALL_DY] = 1  # down
        state[self.PADDLE_X] = PADDLE_START
        state[self.BRICKS] = FULL_ROW
        return state

    def _transition(self, state, actions):
        x, y, dx, dy, paddle = state[:5]  # each (N,)
        bricks = state[self.BRICKS]  # (3, N) bitboard rows
        action = self._executed_actions(actions, state[self.LAST_ACTION])
        paddle = (paddle + self._paddle_moves.index_select(0, action)).clamp_(0, GRID - 1)

        new_x, new_y = x + dx, y + dy
        off_side = (new_x < 0) | (new_x > GRID - 1)
        new_x = new_x.clamp(0, GRID - 1)
        dx = torch.where(off_side, -dx, dx)
        off_top = new_y < 0

        band = (new_y - BRICK_ROWS[0]).clamp(0, len(BRICK_ROWS) - 1).unsqueeze(0)  # (1, N) the brick row looked at
        brick_row = bricks.gather(0, band).squeeze(0)  # (N,)
        in_band = (new_y >= BRICK_ROWS[0]) & (new_y <= BRICK_ROWS[-1])
        on_brick = in_band & (((brick_row >> new_x) & 1) == 1)
        breaks = on_brick & (state[self.STRUCK] == 0)

        at_bottom = new_y == PADDLE_ROW
        over_paddle = at_bottom & (x == paddle)
        onto_paddle = at_bottom & ~over_paddle & (new_x == paddle)
        terminated = at_bottom & ~over_paddle & ~onto_paddle

        bounce = off_top | breaks | over_paddle | onto_paddle  # dy flips, the ball keeps its row
        broken = torch.where(breaks, brick_row & ~(1 << new_x), brick_row).unsqueeze(0)  # (1, N)
        relay = at_bottom & (bricks == 0).all(0)  # no brick left when the ball reached the bottom
        next_bricks = torch.where(relay, FULL_ROW, bricks.scatter(0, band, broken))  # (3, N)
        next_state = torch.cat((torch.stack((
            new_x,  # BALL_X
            torch.where(bounce, y, new_y),  # BALL_Y
            torch.where(onto_paddle, -dx, dx),  # BALL_DX
            torch.where(bounce, -dy, dy),  # BALL_DY
            paddle,  # PADDLE_X
            x, y,  # TRAIL_X, TRAIL_Y
            on_brick.long(),  # STRUCK
            action,  # LAST_ACTION
        )), next_bricks))
        return next_state, breaks.to(torch.float32), terminated

    def _observe(self, state):
        observation = self._blank_observation(state.shape[1])  # (n, 4, 10, 10)
        x, y = state[[self.PADDLE_X, self.BALL_X, self.TRAIL_X]], state[[self.PADDLE_X, self.BALL_Y, self.TRAIL_Y]]
        y[0] = PADDLE_ROW
        self._mark_cells(observation, self._single_cell_channels, y, x)  # paddle, ball, trail
        observation[:, 3, BRICK_ROWS[0]:BRICK_ROWS[-1] + 1] = self._bitboard_cells(state[self.BRICKS])
        return observation
