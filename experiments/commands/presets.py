"""The presets on the command line: ppo-train's config from its flags, and --list-presets.

The rows and the rule that combines them live in the core (`ppo.presets`: the PPOConfig
defaults ← PRESETS[preset] ← the values given); this module adds what only a command
knows: the env id is checked against gymnasium's registry and the backend is resolved
('auto' → torch where a batched version exists) before the config is built, so a run's
config.json names the backend it trained on.

The preset is picked automatically from --env-id; --preset NAME uses another row, and
--preset none uses none. `ppo-train --list-presets` prints the table.
"""

from __future__ import annotations

from envs.factory import BATCHED_ENV_IDS, check_env_id, resolve_backend
from ppo.config import PPOConfig
from ppo.presets import (  # noqa: F401 (CARTPOLE_BATCHED, CLEANRL_CONTINUOUS, MINATAR, PRESETS: for importers)
    CARTPOLE_BATCHED,
    CLEANRL_CONTINUOUS,
    MINATAR,
    PRESETS,
    preset_config,
    preset_for,
    preset_names,
    preset_overrides,
)


def build_config(flags: dict, preset: str | None = "auto") -> PPOConfig:
    """Defaults ← preset ← explicit flags, with the env id checked and the backend resolved.
    `flags` holds only the options the user gave.

    preset 'auto' picks the row named like the env id, if there is one.
    """
    env_id = flags.get("env_id", PPOConfig.env_id)
    row = preset_overrides(preset_for(env_id, preset))
    check_env_id(env_id)
    backend = resolve_backend(env_id, flags.get("env_backend") or row.get("env_backend", "auto"))
    given = {name: value for name, value in flags.items() if name != "env_id"}
    return preset_config(env_id, preset, **{**given, "env_backend": backend})


def preset_backends(name: str) -> tuple[str, ...]:
    """The backends that can run preset `name`'s env: the batched torch one first, where it exists."""
    return ("torch", "gymnasium") if name in BATCHED_ENV_IDS else ("gymnasium",)


def format_presets() -> str:
    """The preset table as text, for --list-presets: per env, its row and the backends that run it."""
    lines = ["Settings per environment (PPOConfig defaults ← preset ← your flags); "
             "`ppo-train --env-id ENV --help` lists every value such a run uses."]
    for name in preset_names():
        backends = preset_backends(name)
        text = ", ".join(f"{k}={v}" for k, v in preset_overrides(name).items()) or "(the PPOConfig defaults)"
        lines += [f"{name} (--env-backend auto: {backends[0]})", f"  {' and '.join(backends)}: {text}"]
    return "\n".join(lines)
