"""Many runs from one `ppo-train` command: seeds as one batch, comma lists as a grid.

    ppo-train --seeds 1-16                                            # 16 seeds of the preset, batched
    ppo-train --learning-rate 1e-3,3e-3 --clip-coef 0.1,0.2 --seeds 1-10   # 2 × 2 settings × 10 seeds

Every flag given as a comma list is swept: the grid is the product of the lists, in the
order of the flags in `--help`. Each setting trains all its seeds as one batched
computation (`ppo.trainers.choice.build_seed_batch`: the trainer with a member axis, for every
`--algorithm`, network, observation and action space a single run takes, recurrent
networks included). Every run gets an ordinary run folder named after what differs from
the defaults, e.g. `runs/CartPole-v1__lr3e-3__clip0.1__seed4`. At the end one table
summarises each setting over its seeds (experiments.commands.statistics).

A run whose losses or parameters turn non-finite (a learning rate too large, say) stops
alone: its folder keeps its last good checkpoint and gets `diverged.json` (when, which
quantity), the other seeds and settings go on, and the table counts it as a failure.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys
import time
from pathlib import Path

import gymnasium as gym
import torch

from envs.factory import EnvError, env_spec, make_seed_batch_env
from experiments.commands.cli import INTERRUPTED_EXIT_CODE, GracefulStop, SweepValues, configure_process
from experiments.commands.evaluation import evaluate_run
from experiments.commands.presets import build_config
from experiments.commands.run_folder import RunFolderClaims, format_value, run_folder_name
from experiments.commands.statistics import format_summary_table, summarize_runs
from ppo.config import ConfigError, PPOConfig, open_files_left, require_finite
from ppo.runs.plotting import CurveDrawer
from ppo.trainers.choice import build_seed_batch
from ppo.trainers.ppo import resolve_device
from ppo.trainers.seed_batch import SeedBatch

# Each run keeps its folder's lock open for the whole command (experiments.commands.run_folder), and its
# metrics.csv while its setting trains (the seeds of one setting train together).
FILES_HELD = "each run folder's lock, and its metrics.csv while it trains"


def count_seeds(text: str) -> int:
    """How many seeds `--seeds TEXT` lists ('1-4,9': 5), counted without listing them; a part that is not
    a seed or a range counts 0 (ppo.trainers.seed_batch.parse_seeds refuses it)."""
    count = 0
    for part in text.split(","):
        first, dash, last = part.strip().partition("-")
        try:
            low, high = int(first), int(last) if dash else int(first)
        except ValueError:
            continue
        count += max(0, high - low + 1)
    return count


def check_open_files(seeds: int, settings: int, what: str) -> None:
    """ConfigError (one line) if `settings` × `seeds` runs would keep more files open than this process
    may (ppo.config.open_files_left: ulimit -n, less the files open and a reserve), before any is claimed."""
    left = open_files_left()
    needed = seeds * (settings + 1)  # a lock per run, and a metrics.csv per seed of the setting training
    if left is None or needed <= left:
        return
    runs = f"{settings} settings × {seeds} seeds" if settings > 1 else f"{seeds} runs"
    raise ConfigError(f"{what}: {runs} keep {needed} files open ({FILES_HELD}), but this process may open {left} "
                      f"more (ulimit -n); give at most {left // (settings + 1)} seeds, or raise ulimit -n")


MEMBERS_PER_THREAD = 8


def batch_threads(config: PPOConfig, members: int, given: bool) -> int:
    """The torch threads a seed batch of `members` runs trains on: `config.num_threads` when
    --num-threads was given, else one per MEMBERS_PER_THREAD members, up to the cores this process
    may use. A batch's products are S times a run's, large enough for a second thread to pay:
    16 CartPole seeds trained in 0.65–0.74 of the one-thread time on 2 threads of an idle
    2-core AMD EPYC, and batches of CartPole, MinAtar and recurrent runs ended with the same
    weights bit for bit on 1 and 2 threads there (other CPUs may round otherwise). Fewer
    members keep one thread, as a single run does: their small products gain little, and spin
    against other processes on shared cores."""
    if given:
        return config.num_threads
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(cores, members // MEMBERS_PER_THREAD))


def expand_grid(flags: dict) -> list[dict]:
    """Every combination of the SweepValues in `flags` (other flags are left out); [{}] if none."""
    swept = {name: value for name, value in flags.items() if isinstance(value, SweepValues)}
    for name, values in swept.items():
        if len(set(map(repr, values))) != len(values):
            raise ConfigError(f"--{name.replace('_', '-')} lists a value twice: {','.join(map(str, values))}")
    return [dict(zip(swept, combination)) for combination in itertools.product(*swept.values())]


def setting_label(setting: dict) -> str:
    return " ".join(f"{name}={format_value(value)}" for name, value in setting.items()) or "defaults"


def success_threshold(env_id: str, given: float | None) -> float | None:
    """The return a run must reach to count as solved: the flag, else gymnasium's reward_threshold."""
    if given is not None:
        return given
    try:
        return env_spec(env_id).reward_threshold
    except (gym.error.Error, EnvError):
        return None


def run_sweep(prog: str, flags: dict, seeds: list[int], preset: str, parent: Path, eval_episodes: int,
              progress: bool, threshold: float | None, claims: RunFolderClaims, algorithm: str = "clip",
              algorithm_settings: dict | None = None) -> int:
    """Train every setting of the grid over `seeds`, evaluate each run, print the summary table.
    Each run's folder is claimed in `claims` (experiments.commands.run_folder), which the caller releases.
    `algorithm` and `algorithm_settings` choose the trainer (ppo.trainers.choice) of every run."""
    for name in ("env_id", "env_backend", "device"):
        if isinstance(flags.get(name), SweepValues):
            raise ConfigError(f"--{name.replace('_', '-')} takes one value in a sweep (got {','.join(flags[name])})")
    if threshold is not None:
        require_finite("success_threshold", threshold)  # before any folder is claimed
    if importlib.util.find_spec("rliable") is None:  # before any training, not after it
        raise ConfigError("several seeds end with a summary table, which needs the optional extra 'stats': "
                          "pip install -c constraints.txt -e '.[stats]'")
    algorithm_settings = algorithm_settings or {}
    fixed = {name: value for name, value in flags.items() if not isinstance(value, SweepValues)}
    grid = expand_grid(flags)
    defaults = build_config({name: value for name, value in fixed.items()
                             if name in ("env_id", "env_backend")}, preset)
    settings = [(setting, build_config({**fixed, **setting}, preset)) for setting in grid]  # all checked first
    plan = [[claims.fresh(parent / run_folder_name(config.replace(seed=seed), defaults, list(setting), preset,
                                                    algorithm=algorithm, settings=algorithm_settings))
             for seed in seeds] for setting, config in settings]
    threshold = success_threshold(settings[0][1].env_id, threshold)
    print(f"{len(settings)} setting{'s' * (len(settings) > 1)} × {len(seeds)} seed{'s' * (len(seeds) > 1)} "
          f"= {len(settings) * len(seeds)} runs in {parent}/")
    all_runs: list[Path] = []
    for (setting, config), run_dirs in zip(settings, plan):
        configure_process(config.num_threads)  # the weights are drawn as a single run draws them
        started = time.perf_counter()
        envs = make_seed_batch_env(config.env_id, len(seeds), config.num_envs, config.env_backend,
                                   resolve_device(config.device), config.frame_stack)
        batch = build_seed_batch(config, seeds, envs, algorithm, algorithm_settings, run_dirs, progress)
        threads = batch_threads(config, len(seeds), "num_threads" in flags)
        torch.set_num_threads(threads)  # after the weights are drawn (on one thread, as a single run draws them)
        with CurveDrawer() as drawer:  # the curves are drawn while the runs are evaluated
            outcome = _train_seed_batch(prog, batch, run_dirs)
            if outcome is None:
                return INTERRUPTED_EXIT_CODE
            returns, diverged, steps = outcome
            print(f"{setting_label(setting)}: {len(seeds)} seeds × {steps:,} steps in "
                  f"{time.perf_counter() - started:.1f} s on {threads} thread{'s' * (threads > 1)}; "
                  "mean return of the last 20 training episodes per seed: "
                  + " ".join("diverged" if member in diverged else f"{value:.0f}"
                             for member, value in enumerate(returns)))
            for member, record in diverged.items():
                kept = ("keeps its last good checkpoint" if (run_dirs[member] / "checkpoint.pt").exists()
                        else "has no checkpoint (none was due before)")
                print(f"{prog}: seed {record['seed']} of {setting_label(setting)} diverged at iteration "
                      f"{record['iteration']} ({record['quantity']} = {record['value']}) and stopped there; "
                      f"{run_dirs[member]} {kept}", file=sys.stderr)
            _finish_runs(drawer, config, seeds, run_dirs, eval_episodes, skip=set(diverged))
        all_runs.extend(run_dirs)
    print(format_summary_table(summarize_runs(all_runs, threshold)))
    print(f"compare them: ppo-plot {parent}" + (f" --threshold {threshold:g}" if threshold is not None else ""))
    return 0


Outcome = tuple[list[float], dict[int, dict], int]  # per seed the last training return, the diverged, steps each


def _train_seed_batch(prog: str, batch: SeedBatch, run_dirs: list[Path]) -> Outcome | None:
    """Train the seed batch; None when it was stopped (its checkpoints are saved)."""
    with GracefulStop(prog) as stop:
        batch.train(callback=stop.callback)
    if stop.requested or (batch.iteration < batch.total_iterations and len(batch.diverged) < batch.num_members):
        _say_stopped(prog, batch.iteration, batch.total_iterations, run_dirs)
        return None
    return batch.recent_returns_by_member(), batch.diverged, batch.global_step


def _say_stopped(prog: str, iteration: int, total: int, run_dirs: list[Path]) -> None:
    print(f"{prog}: stopped after iteration {iteration} of {total}; checkpoints saved. Resume a run with: "
          f"{prog} --resume RUN_DIR (one of {run_dirs[0].parent}/…)", file=sys.stderr)


def _finish_runs(drawer: CurveDrawer, config: PPOConfig, seeds: list[int], run_dirs: list[Path], eval_episodes: int,
                 skip: set[int] = frozenset()) -> None:
    """What a single run does after training, for each run: learning curve (handed to `drawer`),
    greedy evaluation (not for the runs in `skip`, by index: those that diverged are failures, not scores)."""
    for seed, run_dir in zip(seeds, run_dirs):
        drawer.draw(run_dir, f"PPO on {config.env_id} (seed {seed})")
    if eval_episodes:
        for member, run_dir in enumerate(run_dirs):
            if member not in skip:
                evaluate_run(run_dir, eval_episodes, verbose=False)
