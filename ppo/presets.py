"""Per-environment defaults: the hyperparameters each env id starts from.

How a run's config is assembled, later lines overriding earlier ones:

    1. the PPOConfig defaults (CleanRL's discrete-action settings)
    2. PRESETS[preset]                     the env's own table row
    3. BACKEND_PRESETS[(preset, backend)]  tuned for a backend (torch: thousands of envs)
    4. the flags given on the command line

The preset is picked automatically from --env-id; --preset NAME uses another row, and
--preset none uses none. `ppo-train --list-presets` prints this table.
"""

from __future__ import annotations

from ppo.config import ConfigError, PPOConfig

PRESETS: dict[str, dict] = {
    # CleanRL's discrete defaults reach 490 ± 6 at 500k steps; kept as they are.
    "CartPole-v1": {},
    "Acrobot-v1": {},
}

BACKEND_PRESETS: dict[tuple[str, str], dict] = {}


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
    from envs.factory import check_env_id, resolve_backend

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
