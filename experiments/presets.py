"""Per-environment defaults: the hyperparameters each env id starts from (command-line policy).

How a run's config is assembled, later lines overriding earlier ones:

    1. the PPOConfig defaults (CleanRL's discrete-action settings)
    2. PRESETS[preset]                     the env's own table row
    3. BACKEND_PRESETS[(preset, backend)]  tuned for a backend (torch: thousands of envs)
    4. the flags given on the command line

The preset is picked automatically from --env-id; --preset NAME uses another row, and
--preset none uses none. `ppo-train --list-presets` prints this table.
"""

from __future__ import annotations

from envs.factory import check_env_id, resolve_backend
from ppo.config import ConfigError, PPOConfig

# CleanRL's ppo_continuous_action.py: 1M steps, lr 3e-4 annealed, 1 env × 2048 steps,
# 32 minibatches × 10 epochs, γ 0.99, λ 0.95, entropy 0, obs normalisation and reward scaling.
CLEANRL_CONTINUOUS = dict(
    total_timesteps=1_000_000, num_envs=1, num_steps=2048, num_minibatches=32, update_epochs=10,
    learning_rate=3e-4, ent_coef=0.0, normalize_obs=True, normalize_reward=True,
)

PRESETS: dict[str, dict] = {
    # CleanRL's discrete defaults reach 490 ± 6 at 500k steps; kept as they are.
    "CartPole-v1": {},
    "Acrobot-v1": {},
    # The SB3 zoo's Pendulum (γ 0.9, 4 envs × 1024 steps, lr 1e-3, 10 epochs, ent 0) plus obs
    # normalisation and reward scaling, minibatches of 256 (zoo: 64; 4× fewer gradient steps).
    # Measured: greedy 100-episode mean −171 … −193 at 200k steps, seeds 1–5.
    "Pendulum-v1": dict(
        total_timesteps=200_000, num_envs=4, num_steps=1024, num_minibatches=16, update_epochs=10,
        learning_rate=1e-3, gamma=0.9, gae_lambda=0.95, ent_coef=0.0,
        normalize_obs=True, normalize_reward=True,
    ),
    # The SB3 zoo's LunarLander (16 envs × 1024 steps, γ 0.999, λ 0.98, 4 epochs, ent 0.01,
    # minibatches of 64, lr 3e-4 constant, no value clipping: with returns in the hundreds,
    # clipping V's change to ±0.2 per update held the return near 100 at 640k steps).
    "LunarLander-v3": dict(
        total_timesteps=1_000_000, num_envs=16, num_steps=1024, num_minibatches=256, update_epochs=4,
        learning_rate=3e-4, anneal_lr=False, gamma=0.999, gae_lambda=0.98, ent_coef=0.01, value_clip_coef=None,
    ),
    # CleanRL's continuous defaults, its MuJoCo benchmark setting.
    "HalfCheetah-v5": CLEANRL_CONTINUOUS,
    "Hopper-v5": CLEANRL_CONTINUOUS,
}

BACKEND_PRESETS: dict[tuple[str, str], dict] = {
    # Batched torch CartPole: env steps are nearly free, so the batch is large (64 envs ×
    # 32 steps) and the wall-clock goes to gradient steps. 4 epochs of 4 minibatches (512)
    # at lr 5e-3 reach 475 after a median of ~78k steps, as early as 8 epochs of 2
    # minibatches at the same lr and with half their gradient work; lr 2e-3 took ~120k.
    # 200k steps: 10 of 10 seeds evaluate at 500 (150k: 9 of 10). Chosen by measurement
    # over seeds: a shared trunk fails where separate networks solve; value clipping off
    # (with few, large updates it caps the critic's progress at ε per update), no
    # advantage whitening and no entropy bonus (once every episode reaches 500 the
    # advantages are noise; whitening scales that noise up to unit size and the policy
    # drifts away from the solution).
    ("CartPole-v1", "torch"): dict(
        num_envs=64, num_steps=32, num_minibatches=4, update_epochs=4, learning_rate=5e-3,
        total_timesteps=200_000, value_clip_coef=None, norm_adv=False, ent_coef=0.0,
    ),
}


def preset_names() -> list[str]:
    return sorted(PRESETS)


def preset_overrides(name: str | None, backend: str) -> dict:
    """The overrides of preset `name` for `backend` (an empty dict for None / 'none')."""
    if name is None or name == "none":
        return {}
    if name not in PRESETS:
        raise ConfigError(f"preset = {name!r} is not one of: none, {', '.join(preset_names())}")
    return {**PRESETS[name], **BACKEND_PRESETS.get((name, backend), {})}


def build_config(flags: dict, preset: str | None = "auto") -> PPOConfig:
    """Defaults ← preset ← explicit flags. `flags` holds only the options the user gave.

    preset 'auto' picks the row named like the env id, if there is one.
    """
    env_id = flags.get("env_id", PPOConfig.env_id)
    if preset == "auto":
        preset = env_id if env_id in PRESETS else None
    backend = flags.get("env_backend") or preset_overrides(preset, "auto").get("env_backend", "auto")
    check_env_id(env_id)
    backend = resolve_backend(env_id, backend)
    values = {**preset_overrides(preset, backend), **flags, "env_backend": backend}
    return PPOConfig(**values).validate()


def format_presets() -> str:
    """The preset table as text, for --list-presets."""
    lines = []
    for name in preset_names():
        overrides = PRESETS[name]
        lines.append(f"{name}: " + (", ".join(f"{k}={v}" for k, v in overrides.items()) or "(the defaults)"))
        for (preset, backend), extra in sorted(BACKEND_PRESETS.items()):
            if preset == name:
                lines.append(f"  with env_backend={backend}: " + ", ".join(f"{k}={v}" for k, v in extra.items()))
    return "\n".join(lines)
