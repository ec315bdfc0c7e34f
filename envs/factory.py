"""Build the training environments for an env id and a backend.

Both backends return an object with the `ppo.vec_env.VecEnv` interface, so the trainer
never asks which one it has. Gymnasium environments that live in optional extras
(MuJoCo, Box2D) get a one-line message naming the extra to install.
"""

from __future__ import annotations

import gymnasium as gym

from ppo.config import ConfigError
from ppo.vec_env import GymnasiumVecEnv, VecEnv

# The optional dependency group of this project that provides each gymnasium family.
EXTRA_FOR_ENTRY_POINT = {
    "gymnasium.envs.mujoco": "mujoco",
    "gymnasium.envs.box2d": "box2d",
}


def torch_env_ids() -> tuple[str, ...]:
    from envs.classic import TORCH_ENV_IDS

    return tuple(TORCH_ENV_IDS)


def check_env_id(env_id: str) -> None:
    """ConfigError if gymnasium does not know `env_id`."""
    if env_id not in gym.registry:
        raise ConfigError(
            f"env_id = {env_id!r} is not a registered gymnasium environment "
            f"(for example CartPole-v1, Acrobot-v1, Pendulum-v1, LunarLander-v3, HalfCheetah-v5)"
        )


def resolve_backend(env_id: str, backend: str) -> str:
    """'auto' → 'torch' when a batched version of env_id exists, else 'gymnasium'."""
    ids = torch_env_ids()
    if backend == "auto":
        return "torch" if env_id in ids else "gymnasium"
    if backend == "torch" and env_id not in ids:
        raise ConfigError(
            f"env_id = {env_id!r} has no batched torch version; env_backend 'torch' supports {', '.join(ids)}"
        )
    return backend


def missing_extra_message(env_id: str, error: Exception) -> str:
    entry_point = str(gym.spec(env_id).entry_point)
    extra = next((name for prefix, name in EXTRA_FOR_ENTRY_POINT.items() if entry_point.startswith(prefix)), None)
    if extra is None:
        return f"{env_id} needs a package that is not installed ({str(error).splitlines()[0]})"
    return f"{env_id} needs the optional extra '{extra}': pip install -c constraints.txt -e '.[{extra}]'"


def make_gymnasium_env(env_id: str, **kwargs) -> gym.Env:
    """gym.make with the missing-extra error turned into a ConfigError."""
    check_env_id(env_id)
    try:
        return gym.make(env_id, **kwargs)
    except (gym.error.DependencyNotInstalled, ImportError) as error:
        raise ConfigError(missing_extra_message(env_id, error)) from None


def make_vec_env(env_id: str, num_envs: int, backend: str = "auto", device: str = "cpu") -> VecEnv:
    """N copies of env_id behind the VecEnv interface, stepped by the chosen backend."""
    check_env_id(env_id)
    backend = resolve_backend(env_id, backend)
    if backend == "torch":
        from envs.classic import make_torch_vec_env

        return make_torch_vec_env(env_id, num_envs, device=device)
    try:
        return GymnasiumVecEnv(env_id, num_envs, device=device)
    except (gym.error.DependencyNotInstalled, ImportError) as error:
        raise ConfigError(missing_extra_message(env_id, error)) from None
