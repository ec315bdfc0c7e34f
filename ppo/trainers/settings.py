"""An algorithm's own settings: the numbers a PPO variant adds to the config, declared once.

A variant of PPO (ppo.trainers.variants) declares each setting it takes beyond `PPOConfig`
as a `Setting`: its default, what it means and which values it allows.

    class DualClipPPO(PPO):
        settings = {"dual_clip": Setting(3.0, "c: for Â < 0 the objective is held at c·Â", above=1.0)}

From that one declaration the trainer takes the setting as a keyword (`DualClipPPO(config,
envs, dual_clip=2.0)`), checks it, keeps it as an attribute, writes it into the checkpoint
and config.json (so `resume` continues with it), and `ppo-train` makes it a flag
(`--dual-clip`) whose help is the text here, refused on any other algorithm.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ppo.config import ConfigError


@dataclass(frozen=True)
class Setting:
    """One setting: its default, its meaning (the flag's help), and the values allowed: finite and
    greater than `above` (0 by default), and less than `below` if given."""

    default: float
    help: str
    above: float = 0.0
    below: float | None = None

    @property
    def allowed(self) -> str:
        upper = f" and < {self.below:g}" if self.below is not None else ""
        return f"a finite number > {self.above:g}{upper}"

    def check(self, name: str, value) -> float:
        """`value` as a float; ConfigError (one line) naming it and what is allowed otherwise."""
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{name} = {value!r} must be {self.allowed}") from None
        if not (math.isfinite(number) and number > self.above and (self.below is None or number < self.below)):
            raise ConfigError(f"{name} = {value} must be {self.allowed}")
        return number


def resolve_settings(owner: str, declared: dict[str, Setting], given: dict[str, object]) -> dict[str, float]:
    """Every declared setting's value: the given one, checked, else its default; ConfigError (one
    line) for a name `owner` does not declare."""
    unknown = sorted(set(given) - set(declared))
    if unknown:
        own = ", ".join(declared) or "none"
        raise ConfigError(f"{unknown[0]} = {given[unknown[0]]} is not a setting of {owner} (its settings: {own})")
    return {name: setting.check(name, given.get(name, setting.default)) for name, setting in declared.items()}
