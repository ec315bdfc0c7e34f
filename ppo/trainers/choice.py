"""Which trainer trains a run, chosen by its algorithm's name, and resumed as it was.

The algorithms are the trainer classes that registered a name (ppo.trainers.registry):

    clip            PPO: the clipped surrogate                          —
    penalty         PPOPenalty: unclipped surrogate − β·KL, β adapted      kl_target, initial_beta
    adaptive-clip   AdaptiveClipPPO: ε halved or doubled toward the KL     kl_target, min_clip, max_clip
    dual-clip       DualClipPPO: PPO-Clip bounded below by c·Â (Â < 0)      dual_clip

Each trains feed-forward or recurrent networks (config.recurrent), one run or, given
seeds, a batch of them (`build_seed_batch`: the same class with a member axis,
ppo.trainers.seed_batch). A checkpoint records the class that wrote it and that class's
settings (`BaseTrainer.trainer_record`), so `resume_run` continues a run with the trainer
and the settings it was started with, whatever the command line says.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import ppo.trainers.variants  # noqa: F401 (its classes register their algorithms)
from ppo.config import ConfigError, PPOConfig
from ppo.parallel.distributed import SINGLE_PROCESS, World
from ppo.runs.checkpoint import CheckpointError
from ppo.trainers.ppo import PPO
from ppo.trainers.recurrent import RecurrentPPO  # noqa: F401 (old checkpoints name it)
from ppo.trainers.registry import ALGORITHMS, SUMMARIES, TRAINERS
from ppo.vec_env import VecEnv


def trainer_class(algorithm: str = "clip") -> type[PPO]:
    """The trainer registered as `algorithm`; ConfigError (one line) naming the choices otherwise."""
    if algorithm not in ALGORITHMS:
        raise ConfigError(f"algorithm = {algorithm!r}: choose one of {', '.join(ALGORITHMS)}")
    return ALGORITHMS[algorithm]


def setting_defaults(algorithm: str) -> dict[str, object]:
    """{setting: default} of the algorithm's own settings (empty for 'clip')."""
    return {name: setting.default for name, setting in trainer_class(algorithm).settings.items()}


def algorithms_taking(name: str) -> list[str]:
    """The algorithms that have a setting called `name`."""
    return [algorithm for algorithm, trainer in ALGORITHMS.items() if name in trainer.settings]


def check_settings(algorithm: str, settings: dict[str, object]) -> dict[str, object]:
    """`settings` when each is one of the algorithm's own and possible; ConfigError naming one that is not."""
    trainer = trainer_class(algorithm)
    for name in settings:
        if name not in trainer.settings:
            users = " or ".join(algorithms_taking(name)) or "no algorithm"
            raise ConfigError(f"{name} = {settings[name]} is a setting of algorithm {users}, not of {algorithm!r}")
    trainer.check_settings(settings)
    return dict(settings)


def build_trainer(config: PPOConfig, envs: VecEnv, algorithm: str = "clip", settings: dict | None = None,
                  run_dir: str | Path | None = None, progress: bool = True,
                  world: World = SINGLE_PROCESS) -> PPO:
    """A fresh trainer of `algorithm` (with its own `settings`, the rest at their defaults)."""
    trainer = trainer_class(algorithm)
    return trainer(config, envs, run_dir=run_dir, progress=progress, world=world,
                   **check_settings(algorithm, settings or {}))


def build_seed_batch(config: PPOConfig, seeds: list[int], envs, algorithm: str = "clip",
                     settings: dict | None = None, run_dirs=None, progress: bool = True) -> PPO:
    """A fresh seed batch of `algorithm`, member s the run `build_trainer` makes with seed s."""
    trainer = trainer_class(algorithm)
    return trainer(config, envs, seeds=seeds, run_dirs=run_dirs, progress=progress,
                   **check_settings(algorithm, settings or {}))


def resume_run(run_dir: str | Path, make_envs: Callable[[PPOConfig], VecEnv], total_timesteps: int | None = None,
               progress: bool = True, world: World = SINGLE_PROCESS) -> PPO:
    """The run in `run_dir` continued by the trainer class that wrote its checkpoint."""
    state, _ = PPO.load_run(run_dir, PPOConfig, required_keys=PPO.REQUIRED_STATE)
    record = state.get("trainer", {})
    name = record.get("class", "PPO") if isinstance(record, dict) else record
    if name not in TRAINERS:
        raise CheckpointError(f"checkpoint {run_dir} was written by {name!r}, which this command does not resume "
                              f"(it resumes {', '.join(TRAINERS)})")
    return TRAINERS[name].resume(run_dir, make_envs, total_timesteps, progress=progress, world=world)


__all__ = ["ALGORITHMS", "SUMMARIES", "build_seed_batch", "build_trainer", "check_settings", "resume_run",
           "setting_defaults", "trainer_class"]
