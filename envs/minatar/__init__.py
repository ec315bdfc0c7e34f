"""MinAtar games (Young & Tian 2019) as batched torch environments.

`make_minatar_vec_env("MinAtar/Breakout-v1", num_envs=4096)` gives N copies of a
MinAtar game stepped as tensor code on CPU or CUDA, speaking the `ppo.vec_env.VecEnv`
interface: MinAtar/Breakout-v1 (`envs.minatar.breakout`) and MinAtar/SpaceInvaders-v1
(`envs.minatar.space_invaders`), each module's docstring giving the game's rules.

Written from the games' published rules and checked step for step against the
`minatar` package (tests/test_minatar.py), which is GPL-licensed and only a test and
benchmark reference here (the optional extra `minatar`). Same dynamics, rewards,
terminations, minimal action sets and sticky-action probability as its v1 gymnasium
envs; observations are (N, C, 10, 10) float32, channel-first, where the package gives
(10, 10, C) bool (see `envs.minatar.base`).
"""

from __future__ import annotations

import torch

from envs.minatar.base import TorchMinAtarEnv
from envs.minatar.breakout import TorchBreakout
from envs.minatar.space_invaders import TorchSpaceInvaders

_ENV_CLASSES: dict[str, type[TorchMinAtarEnv]] = {cls.env_id: cls for cls in (TorchBreakout, TorchSpaceInvaders)}
MINATAR_ENV_IDS: tuple[str, ...] = tuple(_ENV_CLASSES)


def make_minatar_vec_env(
    env_id: str,
    num_envs: int,
    device: str | torch.device = "cpu",
    seed: int | None = None,
    max_episode_steps: int | None = None,
    groups: int = 1,
    **env_kwargs,
) -> TorchMinAtarEnv:
    """N batched copies of the MinAtar game `env_id`, in `groups` seed groups (TorchClassicEnv).

    `env_kwargs` go to the game's constructor: sticky_action_prob (0.1 by default) and,
    for Space Invaders, difficulty_ramping (True). `max_episode_steps` sets a time limit
    (None: none, as registered).
    """
    if env_id not in _ENV_CLASSES:
        raise ValueError(f"no batched MinAtar version of {env_id!r}; supported ids: {', '.join(MINATAR_ENV_IDS)}")
    if max_episode_steps is not None and (isinstance(max_episode_steps, bool) or max_episode_steps < 1):
        raise ValueError(f"max_episode_steps = {max_episode_steps!r} must be a positive integer or None")
    env = _ENV_CLASSES[env_id](num_envs, device=device, seed=seed, groups=groups, **env_kwargs)
    if max_episode_steps is not None:
        env.max_episode_steps = int(max_episode_steps)
    return env


__all__ = ["MINATAR_ENV_IDS", "TorchBreakout", "TorchMinAtarEnv", "TorchSpaceInvaders", "make_minatar_vec_env"]
