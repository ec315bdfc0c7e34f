"""Batched torch versions of gymnasium's classic-control environments.

`make_torch_vec_env("CartPole-v1", num_envs=4096)` gives N copies of CartPole-v1, Acrobot-v1,
Pendulum-v1, MountainCar-v0 or MountainCarContinuous-v0, stepped as tensor code
on CPU or CUDA, speaking the `ppo.vec_env.VecEnv` interface. Same physics, spaces,
rewards, terminations, time limits and start-state distributions as `gymnasium.make`.
The same registry holds the envs built on this package's base elsewhere in `envs`:
CartPoleNoVel-v1 and PendulumNoVel-v1 (`envs.partially_observable`) and CueMemory-v0
(`envs.cue_memory`). `BATCHED_ENV_IDS` lists every id; `TORCH_ENV_IDS` the five of
gymnasium's classic control.

Speed on CPU: every tensor operation costs a few microseconds of fixed dispatch overhead,
and a step is ~30 of them (CartPole), so the torch envs pay off from a few hundred copies
on. For up to ~10^4 copies `torch.set_num_threads(1)` is usually fastest: such small
operations gain little from a second thread, and sin/cos start a parallel region even on
a few hundred elements, which can stall for milliseconds when the other cores are busy.
"""

from __future__ import annotations

import torch

from envs.classic.acrobot import TorchAcrobot
from envs.classic.base import TorchClassicEnv
from envs.classic.cartpole import TorchCartPole
from envs.classic.mountain_car import TorchMountainCar
from envs.classic.mountain_car_continuous import TorchMountainCarContinuous
from envs.classic.pendulum import TorchPendulum

# After the classic envs, which these modules build on (`envs/__init__.py` imports this
# package first, so they always find it complete).
from envs.cue_memory import TorchCueMemory  # noqa: E402
from envs.partially_observable import TorchCartPoleNoVel, TorchPendulumNoVel  # noqa: E402

_CLASSIC_CLASSES = (TorchCartPole, TorchAcrobot, TorchPendulum, TorchMountainCar, TorchMountainCarContinuous)
_ENV_CLASSES: dict[str, type[TorchClassicEnv]] = {
    cls.env_id: cls for cls in (*_CLASSIC_CLASSES, TorchCartPoleNoVel, TorchPendulumNoVel, TorchCueMemory)
}
TORCH_ENV_IDS: tuple[str, ...] = tuple(cls.env_id for cls in _CLASSIC_CLASSES)  # gymnasium's classic control
BATCHED_ENV_IDS: tuple[str, ...] = tuple(_ENV_CLASSES)  # every id make_torch_vec_env builds


def make_torch_vec_env(
    env_id: str,
    num_envs: int,
    device: str | torch.device = "cpu",
    seed: int | None = None,
    dtype: torch.dtype = torch.float64,
    max_episode_steps: int | None = None,
    groups: int = 1,
    **env_kwargs,
) -> TorchClassicEnv:
    """N batched copies of `env_id`; `dtype` is the dtype the physics runs in; `groups`
    seed groups of N / groups copies each, one random stream per group (TorchClassicEnv).
    `env_kwargs` go to the env's constructor, as in `gymnasium.make(env_id, **kwargs)`
    (CueMemory-v0: delay, num_cues).

    `max_episode_steps` replaces the env's time limit, as in `gymnasium.make(env_id,
    max_episode_steps=...)` (None keeps gymnasium's: 500 for CartPole-v1, and so on).
    """
    if env_id not in _ENV_CLASSES:
        raise ValueError(f"no batched torch version of {env_id!r}; supported ids: {', '.join(BATCHED_ENV_IDS)}")
    if max_episode_steps is not None and (isinstance(max_episode_steps, bool) or max_episode_steps < 1):
        raise ValueError(f"max_episode_steps = {max_episode_steps!r} must be a positive integer or None")
    env = _ENV_CLASSES[env_id](num_envs, device=device, seed=seed, dtype=dtype, groups=groups, **env_kwargs)
    if max_episode_steps is not None:
        env.max_episode_steps = int(max_episode_steps)  # an instance attribute shadows the class's
    return env


__all__ = [
    "BATCHED_ENV_IDS",
    "TORCH_ENV_IDS",
    "TorchAcrobot",
    "TorchCartPole",
    "TorchCartPoleNoVel",
    "TorchClassicEnv",
    "TorchCueMemory",
    "TorchMountainCar",
    "TorchMountainCarContinuous",
    "TorchPendulum",
    "TorchPendulumNoVel",
    "make_torch_vec_env",
]
