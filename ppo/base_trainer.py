"""The lifecycle both trainers share: construct, train(callback), save, resume, state_dict.

    trainer = PPO(config, envs, run_dir=...)      # or RLHFTrainer(config, reference, tokenizer, task, run_dir=...)
    trainer.train(callback)                       # iterations until the budget is spent, or callback returns True
    trainer.save(path)                            # atomic checkpoint of trainer.state_dict()
    PPO.resume(run_dir, make_envs)                # a new trainer that continues run_dir/checkpoint.pt

One iteration is one rollout and one update (`train_iteration`); its metrics are
returned, kept in `history` and, with a run folder, written to metrics.csv and
TensorBoard. With a run folder `train` also writes config.json, a checkpoint every
`config.checkpoint_every` iterations and one at the end.

A subclass supplies the algorithm: `run_iteration()` (the rollout and the update),
`total_iterations`, `samples_seen` (environment steps or completions so far: the x-axis
of the logs) and `state_dict` / `load_state_dict` for what it adds to the counters kept here.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

from ppo.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from ppo.config import ConfigError

CHECKPOINT_NAME = "checkpoint.pt"

Callback = Callable[["BaseTrainer", dict], "bool | None"]


class BaseTrainer:
    """Iterations, logging, checkpoints and resuming, for any trainer with a `config`."""

    sample_unit = "samples"  # what `samples_seen` counts ("steps", "completions"); names the speed metric

    def __init__(self, config, run_dir: str | Path | None = None, progress: bool = True):
        self.config = config
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.progress = progress
        self.iteration = 0  # iterations done
        self.train_seconds = 0.0  # wall-clock spent inside train_iteration
        self.history: list[dict[str, float]] = []

    # ------------------------------------------------------------------ what a subclass provides
    @property
    def total_iterations(self) -> int:
        raise NotImplementedError

    @property
    def samples_seen(self) -> int:
        raise NotImplementedError

    @property
    def total_samples(self) -> int:
        raise NotImplementedError

    def run_iteration(self) -> dict[str, float]:
        """One rollout and one update; returns their metrics."""
        raise NotImplementedError

    def progress_text(self, metrics: dict[str, float]) -> str:
        """A few words next to the progress bar."""
        return ""

    # ------------------------------------------------------------------ the loop
    def train_iteration(self) -> dict[str, float]:
        """`run_iteration`, timed and counted; the metrics are also appended to `history`."""
        started = time.perf_counter()
        metrics = self.run_iteration()
        self.train_seconds += time.perf_counter() - started
        self.iteration += 1
        metrics.update({
            "iteration": self.iteration,
            "time_s": self.train_seconds,
            f"{self.sample_unit}_per_second": self.samples_seen / max(self.train_seconds, 1e-9),
        })
        self.history.append(metrics)
        return metrics

    def train(self, callback: Callback | None = None) -> dict[str, float]:
        """Iterate until `total_iterations`; `callback(trainer, metrics)` after each iteration
        may return True to stop early. Returns the last iteration's metrics."""
        from ppo.logger import MetricsLogger  # tensorboard and tqdm load only when a run is logged

        logger = None
        if self.run_dir is not None:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            (self.run_dir / "config.json").write_text(json.dumps(self.config.to_dict(), indent=2) + "\n")
            logger = MetricsLogger(self.run_dir, self.config.tensorboard, self.total_samples, self.progress,
                                   resume_from_step=self.samples_seen)
        metrics: dict[str, float] = {}
        try:
            while self.iteration < self.total_iterations:
                metrics = self.train_iteration()
                if logger is not None:
                    logger.log(self.samples_seen, metrics)
                    logger.progress(self.samples_seen, self.progress_text(metrics))
                    if self.config.checkpoint_every and self.iteration % self.config.checkpoint_every == 0:
                        self.save()
                if callback is not None and callback(self, metrics):
                    break
        finally:
            if logger is not None:
                logger.close()
        if self.run_dir is not None:
            self.save()
        return metrics

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict:
        """The counters; a subclass adds its models, optimizer and random generators."""
        return {
            "config": self.config.to_dict(),
            "iteration": self.iteration,
            "train_seconds": self.train_seconds,
        }

    def load_state_dict(self, state: dict) -> None:
        self.iteration = int(state["iteration"])
        self.train_seconds = float(state.get("train_seconds", 0.0))

    def save(self, path: str | Path | None = None) -> Path:
        """Write `state_dict()` atomically (default: the run folder's checkpoint); loadable with weights_only=True."""
        if path is None:
            if self.run_dir is None:
                raise ValueError("save() needs a path when the trainer has no run folder")
            path = self.run_dir / CHECKPOINT_NAME
        save_checkpoint(self.state_dict(), path)
        return Path(path)

    @staticmethod
    def load_run(run_dir: str | Path, config_class, required_keys: tuple[str, ...] = ()):
        """(checkpoint state, its validated config) of a run folder or checkpoint file; CheckpointError if unusable."""
        path = Path(run_dir)
        state = load_checkpoint(path, required_keys=("config", "iteration", *required_keys))
        try:
            config = config_class.from_dict(state["config"]).validate()
        except ConfigError as error:
            raise CheckpointError(f"checkpoint {path} has an unusable config ({error})") from None
        return state, config
