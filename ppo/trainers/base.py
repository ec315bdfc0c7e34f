"""The lifecycle every trainer shares: construct, train(callback), save, resume, state_dict.

    trainer = PPO(config, envs, run_dir=...)      # or RLHFTrainer(config, reference, tokenizer, task, run_dir=...)
    trainer.train(callback)                       # iterations until the budget is spent, or callback returns True
    trainer.save(path)                            # atomic checkpoint of trainer.state_dict()
    PPO.resume(run_dir, make_envs)                # a new trainer that continues run_dir/checkpoint.pt

One iteration is one rollout and one update (`train_iteration`); its metrics are
returned, kept in `history` and, with a run folder, written to metrics.csv and
TensorBoard. With a run folder `train` also writes config.json, a checkpoint every
`config.checkpoint_every` iterations and one at the end.

Run folders follow one rule (`ppo.runs.checkpoint.check_run_folder`), checked when `train`
starts, before anything is written: a new run is refused in a folder that already holds a
run (continue that one with `resume`, or give another folder), and a resumed run whose
metrics.csv is missing or lacks some of its iterations is refused, so a curve never loses
its start. A run folder that cannot be made or written is refused by the constructor; a
run whose budget is spent has nothing to train and is refused too (resume it with a larger
budget). A write that fails while training (a full disk) ends it with WriteFailed, one line
naming the file and the checkpoint that is kept.

Faults. A checkpoint holds everything the next iteration depends on, so a run resumed
from it repeats exactly what the lost iterations did; the log rows and TensorBoard
events written after the checkpoint's step are dropped on resume, so each step is
logged once and in order. After every iteration the losses, the gradient norm and the
parameters are checked (`check_finite`): anything non-finite stops training with
`TrainingDiverged`, before that iteration is logged or checkpointed (the last good
checkpoint stays). A seed batch stops only the member that diverged (ppo.trainers.seed_batch).

The learning-rate schedule. α = α₀ · f with f linear in the iteration, from f₀ at
iteration i₀ to 0 after the last iteration I:

    f(i) = f₀ · (1 − (i − i₀) / (I − i₀))        (i₀, f₀) = (0, 1) for a fresh run

When a resumed run gets a different budget I', the line restarts from the last
iteration done, i₀ ← i − 1 with f₀ ← f(i − 1) under the old budget, and runs to 0 at
I': the rate never jumps, and with an unchanged budget nothing changes.

What `train` does with an iteration's metrics is asked of methods a seed batch (one row
per member, several run folders, one log each, members that stop alone) answers its own
way: `member_rows`, `check_finite`, `open_logs`, `log`, `keeps_checkpoints` and `still_training`.

A subclass supplies the algorithm: `run_iteration()` (the rollout and the update),
`total_iterations`, `samples_seen` (environment steps or completions so far: the x-axis
of the logs) and `state_dict` / `load_state_dict` for what it adds to the counters kept here.
A subclass whose constructor takes settings beyond the config (PPO-Penalty's KL target,
...) names them in `settings_names`: they are saved, with the class's name, in the
checkpoint ("trainer") and in config.json, and `saved_settings` gives them back to the
constructor when the run is resumed.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from pathlib import Path
from typing import Callable

import torch

from ppo.runs.checkpoint import (
    CHECKPOINT_NAME,
    CheckpointError,
    WriteFailed,
    check_run_folder,
    check_writable_run_dir,
    load_checkpoint,
    remove_stale_temporaries,
    save_checkpoint,
    write_run_file,
)
from ppo.config import ConfigError, require_path
from ppo.parallel.distributed import SINGLE_PROCESS, World
from ppo.parallel.optim import linear_annealing

Callback = Callable[["BaseTrainer", dict], "bool | None"]

# Metrics that must stay finite; a NaN episodic return (no episode ended) is legitimate.
GUARDED_METRICS = ("policy_loss", "value_loss", "entropy", "approx_kl", "grad_norm")


@contextlib.contextmanager
def single_threaded():
    """torch on one CPU thread inside the block: a network's initial weights (the orthogonal
    initialisation's QR) come out the same at any thread count the run trains with."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def continue_global_stream(device: torch.device, seed: int) -> torch.Generator:
    """A trainer's own action generator, where the global one stands now: right after the
    network's initialisation from `seed`, a run draws its first action as it always has,
    and no draw elsewhere in the process (another trainer, a notebook cell) moves it."""
    generator = torch.Generator(device=device)
    if torch.device(device).type == "cpu":
        generator.set_state(torch.get_rng_state())
    else:  # the network initialised on the CPU: the device's own stream still starts at the seed
        generator.manual_seed(seed)
    return generator


class TrainingDiverged(Exception):
    """A loss, gradient norm or parameter became NaN or infinite; one-line message, and which
    quantity with what value (`quantity`, `value`: "parameters", nan for a parameter)."""

    def __init__(self, message: str, quantity: str | None = None, value: float = math.nan):
        super().__init__(message)
        self.quantity, self.value = quantity, value


class BaseTrainer:
    """Iterations, logging, checkpoints and resuming, for any trainer with a `config`."""

    sample_unit = "samples"  # what `samples_seen` counts ("steps", "completions"); names the speed metric
    budget_field = ""  # the config field that sets the run's length (may change on resume)
    settings_names: tuple[str, ...] = ()  # constructor arguments beyond the config, kept as attributes
    run_kind = "ppo-train"  # the kind of run its checkpoints are (ppo.runs.checkpoint.RUN_KINDS)

    def __init__(self, config, run_dir: str | Path | None = None, progress: bool = True,
                 world: World = SINGLE_PROCESS):
        self.config = config
        self.world = world  # the processes of a data-parallel run (ppo.parallel.distributed); process 0 writes
        require_path("run_dir", run_dir)
        self.run_dir = check_writable_run_dir(run_dir) if run_dir is not None else None
        self.progress = progress
        self.iteration = 0  # iterations done
        self.train_seconds = 0.0  # wall-clock spent inside train_iteration
        self.history: list[dict[str, float]] = []
        self.schedule_origin = (0, 1.0)  # (i₀, f₀) of the learning-rate line; see the module docstring
        self.checkpoint_iteration: int | None = None  # the iteration of the checkpoint in the run folder

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

    # ------------------------------------------------------------------ the learning-rate schedule
    def learning_rate_fraction(self, iteration: int | None = None, total: int | None = None) -> float:
        """f(i) = f₀ · (1 − (i − i₀) / (I − i₀)) for iteration i (0-based; default: the next one)."""
        start, fraction = self.schedule_origin
        iteration = self.iteration if iteration is None else iteration
        total = self.total_iterations if total is None else total
        return linear_annealing(fraction, iteration - start, total - start)

    # ------------------------------------------------------------------ the loop
    def train_iteration(self) -> dict[str, float]:
        """`run_iteration`, timed and counted; the metrics are also appended to `history`."""
        started = time.perf_counter()
        metrics = self.run_iteration()
        self.train_seconds += time.perf_counter() - started
        self.iteration += 1
        for row in self.member_rows(metrics):
            row.update({
                "iteration": self.iteration,
                "time_s": self.train_seconds,
                f"{self.sample_unit}_per_second": self.samples_seen / max(self.train_seconds, 1e-9),
            })
        self.history.append(metrics)
        return metrics

    def member_rows(self, metrics) -> list[dict[str, float]]:
        """The rows of an iteration's metrics, one per run it trains: one here (a seed batch has S)."""
        return [metrics]

    def train(self, callback: Callback | None = None) -> dict[str, float]:
        """Iterate until `total_iterations`; `callback(trainer, metrics)` after each iteration
        may return True to stop early. Returns the last iteration's metrics.

        ConfigError before anything is written if the run folder breaks its rule (the module
        docstring) or the budget is spent; WriteFailed if a file cannot be written."""
        self.refuse_spent_budget()
        logs = self.open_logs()
        metrics: dict[str, float] = {}
        try:
            while self.iteration < self.total_iterations and self.still_training():
                metrics = self.train_iteration()
                self.check_finite(metrics)
                self.log(logs, metrics)
                if self.keeps_checkpoints() and self.config.checkpoint_every \
                        and self.iteration % self.config.checkpoint_every == 0:
                    self.save()
                stop = callback is not None and bool(callback(self, metrics))
                if self.world.any(stop):  # every process stops after the same iteration
                    break
        except WriteFailed as failure:  # metrics.csv, say: add which checkpoint is kept
            if self.run_dir is None or failure.path.name == CHECKPOINT_NAME:
                raise
            raise WriteFailed(f"iteration {self.iteration}: {failure}; {self.kept_checkpoint()}",
                              failure.path, failure.reason) from None
        finally:
            for log in logs:
                log.close()
        if self.keeps_checkpoints():
            self.save()
        return metrics

    def refuse_spent_budget(self) -> None:
        """ConfigError when a run with a run folder has no iteration left to train: `train` would
        only write its checkpoint again (a finished run resumed with its own budget)."""
        if self.keeps_checkpoints() and self.iteration >= self.total_iterations:
            where = f"run {self.run_dir}" if self.run_dir is not None else "the run"
            raise ConfigError(f"{where} is complete ({self.iteration} of {self.total_iterations} iterations): "
                              f"nothing to train; to train it further, resume it with a larger "
                              f"{self.budget_field or 'budget'}")

    def kept_checkpoint(self) -> str:
        """What a run stopped by a failure keeps, in words: its last checkpoint, or none."""
        if self.run_dir is None:
            return "nothing is saved (the trainer has no run folder)"
        path = self.run_dir / CHECKPOINT_NAME
        if not path.is_file():
            return f"{self.run_dir} holds no checkpoint, none was due yet"
        at = f" (iteration {self.checkpoint_iteration})" if self.checkpoint_iteration else ""
        return f"the last checkpoint{at} is kept in {path}"

    # ------------------------------------------------------------------ what train writes
    def keeps_checkpoints(self) -> bool:
        """Whether `train` writes checkpoints: the trainer has a run folder."""
        return self.run_dir is not None

    def still_training(self) -> bool:
        """False when nothing is left to train before the budget is spent (a seed batch whose members all diverged)."""
        return True

    def open_logs(self) -> list:
        """Prepare the run folder (config.json, no stale temporaries) and open its metrics log;
        none without a folder, or in a process other than the first."""
        from ppo.runs.logger import MetricsLogger  # tensorboard and tqdm load only when a run is logged

        if self.run_dir is None:
            return []
        # every process checks (they read one folder), so that all of them stop, not process 0 alone
        check_run_folder(self.run_dir, self.iteration, resume_with=f"{type(self).__name__}.resume({str(self.run_dir)!r}, ...)")
        if not self.world.is_main:
            return []
        self.run_dir.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(self.run_dir)
        write_run_file(self.run_dir / "config.json", json.dumps(self.run_settings(), indent=2) + "\n")
        return [MetricsLogger(self.run_dir, self.config.tensorboard, self.total_samples, self.progress,
                              resume_from_step=self.samples_seen)]

    def log(self, logs: list, metrics: dict[str, float]) -> None:
        """An iteration's row in metrics.csv and TensorBoard, and the progress bar moved on."""
        for logger in logs:
            logger.log(self.samples_seen, metrics)
            logger.progress(self.samples_seen, self.progress_text(metrics))

    def check_finite(self, metrics: dict[str, float]) -> None:
        """TrainingDiverged naming the iteration and the quantity if a loss, the gradient norm
        or a parameter is NaN or infinite."""
        for name in GUARDED_METRICS:
            value = metrics.get(name)
            if value is not None and not math.isfinite(value):
                raise TrainingDiverged(f"iteration {self.iteration}: {name} = {value}; training stopped "
                                       f"({self.kept_checkpoint()}; try a smaller learning rate)", name, value)
        parameters = getattr(self.optimizer, "flat_params", None)
        if parameters is not None and not bool(torch.isfinite(parameters).all()):
            raise TrainingDiverged(f"iteration {self.iteration}: a parameter is not finite; training stopped "
                                   f"({self.kept_checkpoint()}; try a smaller learning rate)", "parameters")

    # ------------------------------------------------------------------ checkpoints
    def trainer_record(self) -> dict:
        """{"class": the trainer's class name, and each of `settings_names` with its value}."""
        return {"class": type(self).__name__, **{name: getattr(self, name) for name in self.settings_names}}

    def run_settings(self) -> dict:
        """What config.json holds: the config, and the trainer's record when it has settings of its own."""
        return {**self.config.to_dict(), **({"trainer": self.trainer_record()} if self.settings_names else {})}

    @classmethod
    def saved_settings(cls, state: dict, path: str | Path) -> dict[str, object]:
        """The `settings_names` values a checkpoint was written with, for the constructor of a
        resumed trainer. CheckpointError if another trainer class wrote it, or a setting is missing.
        A checkpoint without a record (older files) counts as written by a trainer without settings."""
        record = state.get("trainer", {"class": cls.__name__})
        written_by = record.get("class") if isinstance(record, dict) else record
        if written_by != cls.__name__:
            raise CheckpointError(f"checkpoint {path} was written by {written_by!r}, not {cls.__name__}; "
                                  f"resume it with {written_by}.resume")
        missing = [name for name in cls.settings_names if name not in record]
        if missing:
            raise CheckpointError(f"checkpoint {path} does not record {cls.__name__}'s {', '.join(missing)}; "
                                  "it cannot be resumed with the settings it was trained with")
        return {name: record[name] for name in cls.settings_names}

    def state_dict(self) -> dict:
        """The counters; a subclass adds its models, optimizer and random generators."""
        return {
            "trainer": self.trainer_record(),
            "config": self.config.to_dict(),
            "iteration": self.iteration,
            "train_seconds": self.train_seconds,
            "total_iterations": self.total_iterations,
            "schedule_origin": list(self.schedule_origin),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore the counters; a changed budget restarts the learning-rate line (module docstring)."""
        self.iteration = int(state["iteration"])
        self.checkpoint_iteration = self.iteration
        self.train_seconds = float(state.get("train_seconds", 0.0))
        start, fraction = state.get("schedule_origin", (0, 1.0))
        self.schedule_origin = (int(start), float(fraction))
        saved_total = int(state.get("total_iterations", self.total_iterations))
        if saved_total != self.total_iterations and 0 < self.iteration < self.total_iterations:
            last = self.iteration - 1
            self.schedule_origin = (last, self.learning_rate_fraction(last, saved_total))

    def save(self, path: str | Path | None = None) -> Path:
        """Write `state_dict()` atomically (default: the run folder's checkpoint); loadable with weights_only=True.

        With several processes every one must call it (the state gathers theirs); process 0 writes.
        """
        if path is None:
            if self.run_dir is None:
                raise ValueError("save() needs a path when the trainer has no run folder")
            path = self.run_dir / CHECKPOINT_NAME
        state = self.state_dict()
        if self.world.is_main:
            try:
                save_checkpoint(state, path)
            except WriteFailed as failure:
                raise WriteFailed(f"iteration {self.iteration}: {failure}{self._kept_iteration(path)}",
                                  failure.path, failure.reason) from None
            if self.run_dir is not None and Path(path) == self.run_dir / CHECKPOINT_NAME:
                self.checkpoint_iteration = self.iteration
        return Path(path)

    def _kept_iteration(self, path) -> str:
        """' (iteration K)' when `path` is the run folder's checkpoint and holds iteration K."""
        kept = self.run_dir is not None and Path(path) == self.run_dir / CHECKPOINT_NAME and Path(path).is_file()
        return f" (iteration {self.checkpoint_iteration})" if kept and self.checkpoint_iteration else ""

    @classmethod
    def load_run(cls, run_dir: str | Path, config_class, required_keys: tuple[str, ...] = ()):
        """(checkpoint state, its validated config) of a run folder or checkpoint file.

        CheckpointError if the file is unusable, its config fails the command line's checks,
        or it disagrees with the run folder's config.json (another env, another network, ...).
        """
        path = Path(run_dir)
        state = load_checkpoint(path, required_keys=("config", "iteration", *required_keys), kind=cls.run_kind)
        try:
            if not isinstance(state["config"], dict):
                raise ConfigError("it is not a table of settings")
            config = config_class.from_dict(state["config"]).validate()
        except ConfigError as error:
            raise CheckpointError(f"checkpoint {path} has an unusable config ({error})") from None
        if not isinstance(state["iteration"], int) or state["iteration"] < 0:
            raise CheckpointError(f"checkpoint {path} has an unusable iteration count {state['iteration']!r}")
        folder = path if path.is_dir() else path.parent
        cls._check_matches_folder(config, folder / "config.json", path)
        return state, config

    @classmethod
    def _check_matches_folder(cls, config, config_path: Path, checkpoint_path: Path) -> None:
        if not config_path.is_file():
            return
        try:
            folder_config = json.loads(config_path.read_text())
        except (OSError, ValueError):
            raise CheckpointError(f"{config_path} is unreadable; the run folder is damaged") from None
        ours = config.to_dict()
        # a field newer than the folder's config.json counts as its default, as the checkpoint's config does
        defaults = type(config).from_dict({}).to_dict()
        differing = sorted(name for name in ours if name != cls.budget_field
                           and json.dumps(folder_config.get(name, defaults[name])) != json.dumps(ours[name]))
        if differing:
            shown = ", ".join(f"{name} {folder_config.get(name)!r} vs {ours[name]!r}" for name in differing[:3])
            raise CheckpointError(f"checkpoint {checkpoint_path} does not belong to the run in {config_path.parent} "
                                  f"(config.json differs: {shown})")
