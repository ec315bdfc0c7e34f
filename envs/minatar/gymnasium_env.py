"""One copy of a batched MinAtar game as a gymnasium env, for `gymnasium.make`.

`import envs` registers MinAtar/Breakout-v1 and MinAtar/SpaceInvaders-v1 with this entry
point, so evaluation and recording (which take one gymnasium env) see the very
observations the batched training envs give: (C, 10, 10) float32, channel-first. The
`minatar` package registers the same ids only when its `minatar.gym.register_envs()` is
called; called after `import envs`, it replaces these (gymnasium warns).
"""

from __future__ import annotations

import gymnasium as gym
import torch


class MinAtarGymnasiumEnv(gym.Env):
    """A batched MinAtar game with one copy behind gymnasium's `Env` interface.

    Keyword arguments go to the batched env (sticky_action_prob, and for Space Invaders
    difficulty_ramping). The episode has no time limit unless `gymnasium.make(...,
    max_episode_steps=K)` adds one.
    """

    metadata = {"render_modes": []}

    def __init__(self, env_id: str, render_mode: str | None = None, **kwargs):
        from envs.minatar import make_minatar_vec_env

        self.batched = make_minatar_vec_env(env_id, 1, **kwargs)
        self.observation_space = self.batched.single_observation_space
        self.action_space = self.batched.single_action_space
        self.render_mode = render_mode

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        return self.batched.reset(seed=seed)[0].numpy(), {}

    def step(self, action):
        result = self.batched.step(torch.as_tensor([int(action)]))
        observation = result.final_obs[0].numpy()  # the batched env has already started the next episode
        return observation, float(result.reward[0]), bool(result.terminated[0]), False, {}


def register_with_gymnasium(env_ids) -> None:
    """Register each MinAtar id (no TimeLimit, as the `minatar` package registers them)."""
    for env_id in env_ids:
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=f"{__name__}:MinAtarGymnasiumEnv", kwargs={"env_id": env_id})



