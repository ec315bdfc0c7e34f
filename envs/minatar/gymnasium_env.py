"""One copy of a batched MinAtar game as a gymnasium env, for `gymnasium.make`.

`import envs` registers MinAtar/Breakout-v1 and MinAtar/SpaceInvaders-v1 with this entry
point, so evaluation and recording (which take one gymnasium env) see the very
observations the batched training envs give: (C, 10, 10) float32, channel-first. The
`minatar` package registers the same ids with its own envs when its
`minatar.gym.register_envs()` is called; whether that happens before or after `import
envs`, the project's factory (`envs.factory`) makes these ids from the specs kept in
`SPECS`, so training, evaluation and recording stay on the project's games.

With `render_mode="rgb_array"`, `render()` draws the grid (`grid_picture`): each cell a
square of CELL_PIXELS, black where no channel is set, else the colour of the channel set
there that the game draws last (its `drawing_order`: Breakout draws the ball over the brick
it starts in; channel c's hue is c / C of the way round the colour wheel), so `ppo-eval
--record` can write a MinAtar episode as a GIF.
"""

from __future__ import annotations

import colorsys

import gymnasium as gym
import numpy as np
import torch

CELL_PIXELS = 16


def channel_colours(num_channels: int) -> np.ndarray:
    """(C, 3) uint8: channel c at hue c / C, full saturation and value."""
    return np.array([[round(255 * part) for part in colorsys.hsv_to_rgb(c / num_channels, 1.0, 1.0)]
                     for c in range(num_channels)], dtype=np.uint8)


def grid_picture(observation: np.ndarray, cell_pixels: int = CELL_PIXELS, order=None,
                 colours: np.ndarray | None = None) -> np.ndarray:
    """(C, H, W) binary channels → (H·cell_pixels, W·cell_pixels, 3) uint8: channels painted in
    `order` (channel indices, bottom first; default 0 … C−1), each in its row of `colours`
    ((C, 3) uint8; default `channel_colours(C)`), a later one over an earlier one."""
    colours = channel_colours(len(observation)) if colours is None else colours
    picture = np.zeros((*observation.shape[1:], 3), dtype=np.uint8)
    for channel in range(len(observation)) if order is None else order:
        picture[observation[channel] > 0] = colours[channel]
    return picture.repeat(cell_pixels, axis=0).repeat(cell_pixels, axis=1)


def drawing_channels(game) -> list[int] | None:
    """The channel indices of `game.drawing_order` (a batched MinAtar env or its class), or None."""
    if game.drawing_order is None:
        return None
    return [game.channels.index(name) for name in game.drawing_order]


class MinAtarGymnasiumEnv(gym.Env):
    """A batched MinAtar game with one copy behind gymnasium's `Env` interface.

    Keyword arguments go to the batched env (sticky_action_prob, and for Space Invaders
    difficulty_ramping). The episode has no time limit unless `gymnasium.make(...,
    max_episode_steps=K)` adds one.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(self, env_id: str, render_mode: str | None = None, **kwargs):
        from envs.minatar import make_minatar_vec_env

        self.batched = make_minatar_vec_env(env_id, 1, **kwargs)
        self.observation_space = self.batched.single_observation_space
        self.action_space = self.batched.single_action_space
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise ValueError(f"render_mode = {render_mode!r} is not one of: None, rgb_array")
        self.render_mode = render_mode
        self._observation: np.ndarray | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self._observation = self.batched.reset(seed=seed)[0].numpy()
        return self._observation, {}

    def step(self, action):
        result = self.batched.step(torch.as_tensor([int(action)]))
        self._observation = result.final_obs[0].numpy()  # the batched env has already started the next episode
        return self._observation, float(result.reward[0]), bool(result.terminated[0]), False, {}

    def render(self) -> np.ndarray | None:
        """The current grid as an RGB picture (`grid_picture`) when render_mode is "rgb_array"."""
        if self.render_mode != "rgb_array" or self._observation is None:
            return None
        return grid_picture(self._observation, order=drawing_channels(self.batched))


SPECS: dict[str, gym.envs.registration.EnvSpec] = {}  # this project's MinAtar ids, whatever the registry says


def register_with_gymnasium(env_ids) -> None:
    """Register each MinAtar id (no TimeLimit, as the `minatar` package registers them), and
    keep its spec in SPECS."""
    for env_id in env_ids:
        SPECS[env_id] = gym.envs.registration.EnvSpec(id=env_id, entry_point=f"{__name__}:MinAtarGymnasiumEnv",
                                                       kwargs={"env_id": env_id})
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=f"{__name__}:MinAtarGymnasiumEnv", kwargs={"env_id": env_id})



