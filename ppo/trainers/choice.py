"""Which trainer trains a run, chosen from its config and algorithm, and resumed as it was.

    algorithm       trainer                                             its own settings
    clip            PPO, or RecurrentPPO when config.recurrent is a cell   —
    penalty         PPOPenalty: unclipped surrogate − β·KL, β adapted      kl_target, initial_beta
    adaptive-clip   AdaptiveClipPPO: ε halved or doubled toward the KL     kl_target, min_clip, max_clip

and for a batch of seeds (`build_seed_batch`) the same algorithm with a member axis:
SeedBatchPPO (SeedBatchRecurrent for a recurrent config), SeedBatchPenalty or SeedBatchAdaptiveClip.

A checkpoint records the class that wrote it and that class's settings
(`BaseTrainer.trainer_record`), so `resume_run` continues a run with the trainer and the
settings it was started with, whatever the command line says.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Callable

from ppo.config import ConfigError, PPOConfig
from ppo.parallel.distributed import SINGLE_PROCESS, World
from ppo.runs.checkpoint import CheckpointError
from ppo.trainers.ppo import PPO
from ppo.trainers.recurrent import RecurrentPPO, SeedBatchRecurrent
from ppo.trainers.seed_batch import SeedBatchPPO
from ppo.trainers.variants import (AdaptiveClipPPO, PPOPenalty, SeedBatchAdaptiveClip, SeedBatchPenalty,
                                   check_variant_settings)
from ppo.vec_env import VecEnv

ALGORITHMS: dict[str, type[PPO]] = {"clip": PPO, "penalty": PPOPenalty, "adaptive-clip": AdaptiveClipPPO}
SEED_BATCHES: dict[str, type[SeedBatchPPO]] = {"clip": SeedBatchPPO, "penalty": SeedBatchPenalty,
                                               "adaptive-clip": SeedBatchAdaptiveClip}
TRAINERS: dict[str, type[PPO]] = {trainer.__name__: trainer for trainer in (PPO, RecurrentPPO, PPOPenalty, AdaptiveClipPPO)}


def trainer_class(config: PPOConfig, algorithm: str = "clip") -> type[PPO]:
    """The trainer of `algorithm` for this config; ConfigError (one line) for a pair it cannot train."""
    if algorithm not in ALGORITHMS:
        raise ConfigError(f"algorithm = {algorithm!r}: choose one of {', '.join(ALGORITHMS)}")
    if config.recurrent != "none":
        if algorithm != "clip":
            raise ConfigError(f"algorithm = {algorithm!r} trains feed-forward networks; recurrent = "
                              f"{config.recurrent!r} trains with algorithm 'clip'")
        return RecurrentPPO
    return ALGORITHMS[algorithm]


def setting_defaults(algorithm: str) -> dict[str, object]:
    """{setting: default} of the algorithm's own constructor settings (empty for 'clip')."""
    trainer = ALGORITHMS[algorithm]
    parameters = inspect.signature(trainer.__init__).parameters
    return {name: parameters[name].default for name in trainer.settings_names}


def check_settings(algorithm: str, settings: dict[str, object]) -> dict[str, object]:
    """`settings` when each is one of the algorithm's own and possible; ConfigError naming one that is not."""
    if algorithm not in ALGORITHMS:
        raise ConfigError(f"algorithm = {algorithm!r}: choose one of {', '.join(ALGORITHMS)}")
    own = setting_defaults(algorithm)
    for name in settings:
        if name not in own:
            users = [other for other in ALGORITHMS if name in setting_defaults(other)]
            raise ConfigError(f"{name} = {settings[name]} is a setting of algorithm {' or '.join(users)}, "
                              f"not of {algorithm!r}")
    check_variant_settings(**{**({"min_clip": own["min_clip"], "max_clip": own["max_clip"]}
                                 if "min_clip" in settings or "max_clip" in settings else {}), **settings})
    return dict(settings)


def build_trainer(config: PPOConfig, envs: VecEnv, algorithm: str = "clip", settings: dict | None = None,
                  run_dir: str | Path | None = None, progress: bool = True,
                  world: World = SINGLE_PROCESS) -> PPO:
    """A fresh trainer of `algorithm` (with its own `settings`, the rest at their defaults)."""
    trainer = trainer_class(config, algorithm)
    return trainer(config, envs, run_dir=run_dir, progress=progress, world=world,
                   **check_settings(algorithm, settings or {}))


def build_seed_batch(config: PPOConfig, seeds: list[int], envs, algorithm: str = "clip",
                     settings: dict | None = None, run_dirs=None, progress: bool = True) -> SeedBatchPPO:
    """A fresh seed batch of `algorithm`, member s the run `build_trainer` makes with seed s;
    ConfigError (one line) for a pair no trainer takes."""
    batch = SeedBatchRecurrent if trainer_class(config, algorithm) is RecurrentPPO else SEED_BATCHES[algorithm]
    settings = check_settings(algorithm, settings or {})
    return batch(config, seeds, envs, run_dirs=run_dirs, progress=progress, **settings)


def resume_run(run_dir: str | Path, make_envs: Callable[[PPOConfig], VecEnv], total_timesteps: int | None = None,
               progress: bool = True, world: World = SINGLE_PROCESS) -> PPO:
    """The run in `run_dir` continued by the trainer class that wrote its checkpoint."""
    state, _ = PPO.load_run(run_dir, PPOConfig, required_keys=PPO.REQUIRED_STATE)
    record = state.get("trainer", {})
    name = record.get("class", "PPO") if isinstance(record, dict) else record
    if name == "PPO" and state["config"].get("recurrent", "none") != "none":
        name = "RecurrentPPO"  # a recurrent run without a record of its class (older checkpoints)
    if name not in TRAINERS:
        raise CheckpointError(f"checkpoint {run_dir} was written by {name!r}, which this command does not resume "
                              f"(it resumes {', '.join(TRAINERS)})")
    return TRAINERS[name].resume(run_dir, make_envs, total_timesteps, progress=progress, world=world)
