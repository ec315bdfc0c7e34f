"""Train PPO on a gymnasium environment: `ppo-train` or `python -m experiments.commands.train`.

    ppo-train                                   # CartPole-v1 with its preset
    ppo-train --env-id Acrobot-v1 --seed 3
    ppo-train --learning-rate 1e-3 --update-epochs 10 --no-anneal-lr
    ppo-train --resume runs/CartPole-v1__seed1  # continue a run from its checkpoint
    ppo-train --seeds 1-16                      # 16 seeds at once, one batched computation
    ppo-train --algorithm penalty --kl-target 0.02   # PPO-Penalty (or adaptive-clip) instead of PPO-Clip
    ppo-train --learning-rate 1e-3,3e-3 --seeds 1-10   # a sweep: every comma list is a grid axis

Every PPOConfig field is a flag; see `ppo-train --help`. The run folder receives
config.json, run.json (--eval-episodes, which a resumed run reuses), metrics.csv,
TensorBoard events, checkpoint.pt, learning_curve.png and, when --eval-episodes > 0,
eval.json. Several seeds or a sweep (experiments.commands.sweep) give each run such a folder,
named after what differs from the defaults. Everything is checked before a folder is
claimed, and a run holds its folder while it trains (experiments.commands.run_folder): a second
command on it is refused.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from envs.factory import make_vec_env
from experiments.commands.cli import (
    OneLineArgumentParser,
    SweepValues,
    add_dataclass_flags,
    configure_process,
    given_flags,
    run_with_user_errors,
    train_stoppably,
)
from experiments.commands.evaluation import evaluate_run
from experiments.commands.presets import build_config, format_presets
from experiments.commands.run_folder import RunFolderClaims, claim_on_process_zero, run_folder_name
from experiments.commands.sweep import check_open_files, count_seeds, run_sweep
from ppo.config import ConfigError, PPOConfig, require_finite, require_growing_budget, require_path, require_seed
from ppo.parallel.distributed import close_world, init_world
from ppo.runs.plotting import CurveDrawer
from ppo.trainers.choice import ALGORITHMS, SUMMARIES, algorithms_taking, build_trainer, check_settings, resume_run
from ppo.trainers.ppo import PPO, resolve_device
from ppo.trainers.seed_batch import parse_seeds

PROG = "ppo-train"
DEFAULT_EVAL_EPISODES = 100
RUN_SETTINGS_NAME = "run.json"  # the command's settings that are not PPOConfig fields: {"eval_episodes": N}


HELP_FLAGS = ("-h", "--help")


def algorithm_settings() -> dict[str, object]:
    """{setting name: its Setting} of every registered algorithm (ppo.trainers.registry): each is a flag."""
    return {name: setting for trainer in ALGORITHMS.values() for name, setting in trainer.settings.items()}


def add_algorithm_flags(parser: argparse.ArgumentParser) -> None:
    """--algorithm, and one flag per setting of the registered algorithms, with their meaning and defaults."""
    group = parser.add_argument_group("algorithm (ppo.trainers.registry; each setting belongs to the algorithms named)")
    group.add_argument("--algorithm", choices=list(ALGORITHMS), default=None,
                       help="; ".join(f"{name}: {summary}" for name, summary in SUMMARIES.items()))
    for name, setting in algorithm_settings().items():
        group.add_argument(f"--{name.replace('_', '-')}", type=float, default=None, metavar=name.split("_")[-1].upper(),
                           help=f"{' and '.join(algorithms_taking(name))}: {setting.help} (default {setting.default:g}; "
                           f"{setting.allowed})")


def build_parser(argv: list[str] | None = None) -> OneLineArgumentParser:
    """The command's parser. Given `argv` (a command line that asks for --help), the help shows
    the values a run with its --env-id, --env-backend and --preset would use."""
    shown, about = run_defaults(argv) if argv is not None else (None, "")
    parser = OneLineArgumentParser(
        prog=PROG,
        description="Train PPO on a gymnasium environment. Defaults come from the env's preset "
        f"(see --list-presets); every flag below overrides them. {about}",
    )
    run = parser.add_argument_group("run")
    run.add_argument("--run-dir", default=None,
                     help="output folder (default: runs/ENV_ID__…__seedSEED, named after the flags that differ from "
                     "the defaults, numbered if taken); with several seeds or a sweep, the folder the runs go in "
                     "(default: runs). A run holds its folder while it trains: a second command on it is refused, "
                     "and a folder left by a killed run is taken over")
    run.add_argument("--seeds", default=None, metavar="SEEDS",
                     help="train several seeds, e.g. 1-16 or 1,3,5 (or 1-4,9), as one batched computation (every "
                     "--algorithm, network and space a single run takes), on one torch thread per 8 seeds (at "
                     "least one) up to the cores unless --num-threads is given; each gets its own run folder. Any "
                     "hyperparameter given as a comma list (--learning-rate 1e-3,3e-3) is swept: every combination, "
                     "over every seed, then one summary table per setting")
    run.add_argument("--success-threshold", type=float, default=None, metavar="RETURN",
                     help="the final evaluation that counts as solved in a sweep's summary table "
                     "(default: the env's gymnasium reward_threshold, 475 for CartPole-v1)")
    run.add_argument("--preset", default=None, help="preset row: 'auto' (named like --env-id; the default), a name, or 'none'")
    run.add_argument("--list-presets", action="store_true", help="print the preset table and exit")
    run.add_argument("--eval-episodes", type=int, default=None,
                     help=f"greedy evaluation episodes after training; 0 = skip (default: {DEFAULT_EVAL_EPISODES}; "
                     "a resumed run: as many as it was started with)")
    run.add_argument("--resume", default=None, metavar="RUN_DIR",
                     help="continue the run in RUN_DIR from its checkpoint (only --total-timesteps may change, "
                     "and only upwards; refused while another command is training in RUN_DIR). "
                     "On the torch backend the run continues exactly as if never stopped; gymnasium envs "
                     "start fresh episodes")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_algorithm_flags(parser)
    add_dataclass_flags(parser.add_argument_group("hyperparameters (PPOConfig; a comma list sweeps a flag)"), PPOConfig,
                        shown_defaults=shown, sweepable=True)
    return parser


def run_defaults(argv: list[str]) -> tuple[dict | None, str]:
    """The config a run with this command line's env, backend and preset starts from (the
    values the help shows), and a sentence saying which; the dataclass defaults if the
    command line names no usable env."""
    peek = argparse.ArgumentParser(add_help=False, allow_abbrev=False, exit_on_error=False)
    for flag in ("--env-id", "--env-backend", "--preset"):
        peek.add_argument(flag, default=argparse.SUPPRESS)
    try:
        known, _ = peek.parse_known_args(argv)
    except argparse.ArgumentError:  # a flag without its value: the real parser says so
        return None, "The defaults shown are the PPOConfig defaults."
    flags = {name: value for name, value in vars(known).items() if name != "preset"}
    try:
        config = build_config(flags, getattr(known, "preset", None) or "auto")
    except ValueError:  # ConfigError, EnvError: reported when the run starts
        return None, "The defaults shown are the PPOConfig defaults."
    return config.to_dict(), (f"The defaults shown are those of a run on {config.env_id} with backend "
                              f"{config.env_backend}; add --env-id ENV to see another env's.")


@dataclass(frozen=True)
class TrainRequest:
    """What one command line asks for, read once: the parsed flags, the PPOConfig fields
    given (a comma list as SweepValues), the seeds of a batch, the algorithm and its settings."""

    args: argparse.Namespace
    flags: dict
    seeds: list[int] | None
    algorithm: str
    settings: dict

    @property
    def is_batch(self) -> bool:
        """Several seeds or a sweep: one seed batch per setting (experiments.commands.sweep)."""
        return any(isinstance(value, SweepValues) for value in self.flags.values()) or len(self.seeds or ()) > 1


def parse_request(argv: list[str]) -> TrainRequest:
    """argv → TrainRequest, every combination of flags checked (ConfigError, one line, otherwise)."""
    asks_for_help = any(flag in argv for flag in HELP_FLAGS)  # only the help reads the command line twice
    args = build_parser(argv if asks_for_help else None).parse_args(argv)
    if args.eval_episodes is not None and args.eval_episodes < 0:
        raise ConfigError(f"eval_episodes = {args.eval_episodes} must be ≥ 0")
    args.run_dir, args.resume = _folder("run_dir", args.run_dir), _folder("resume", args.resume)
    if args.success_threshold is not None:
        require_finite("success_threshold", args.success_threshold)
    flags = given_flags(args, PPOConfig)
    settings = {name: getattr(args, name) for name in algorithm_settings() if getattr(args, name) is not None}
    request = TrainRequest(args, flags, _seeds(args, flags), args.algorithm or "clip", settings)
    if request.is_batch:
        if args.resume is not None:
            raise ConfigError("--resume continues one run: give it one run folder, without --seeds or comma lists")
    else:
        if args.success_threshold is not None:
            raise ConfigError(f"success_threshold = {args.success_threshold:g} has no effect with one run: it counts "
                              "the solved runs of the summary table that several seeds or a sweep end with; leave it "
                              "unset")
        if request.seeds:
            flags["seed"] = request.seeds[0]
    if args.resume is not None:
        unexpected = sorted(set(flags) - {"total_timesteps"})
        unexpected += [name for name in ("run_dir", "preset", "algorithm") if getattr(args, name) is not None]
        unexpected += sorted(settings)
        if unexpected:
            raise ConfigError(f"--resume keeps the run's folder and config; only --total-timesteps may change "
                              f"(got {', '.join('--' + name.replace('_', '-') for name in unexpected)})")
    return request


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    return run_with_user_errors(PROG, lambda: _train(parse_request(argv)))


def training_envs(config: PPOConfig, world=None):
    """The VecEnv a process trains on: its share of the `config.num_envs` copies (all of
    them for a single process), on the config's backend and device, frames stacked as it says."""
    num_envs = config.num_envs if world is None else world.share(config.num_envs, "num_envs")
    return make_vec_env(config.env_id, num_envs, config.env_backend, resolve_device(config.device), config.frame_stack)


def _folder(name: str, text: str | None) -> Path | None:
    """The folder a flag names; ConfigError for an empty path (which would be the current folder)."""
    if text is None:
        return None
    require_path(name, text)
    return Path(text)


def _seeds(args, flags: dict) -> list[int] | None:
    """The seeds of --seeds, or of --seed given as a comma list; None for one ordinary --seed. Each is a
    seed (ppo.config.require_seed), and a batch holds no more runs than this process can keep files open for."""
    settings = math.prod(len(value) for name, value in flags.items()
                         if isinstance(value, SweepValues) and name != "seed")  # the grid's, seeds apart
    if args.seeds is not None:
        if "seed" in flags:
            raise ConfigError("give --seed or --seeds, not both")
        check_open_files(count_seeds(args.seeds), settings, f"seeds = {args.seeds!r}")  # before the ranges are listed
        seeds = parse_seeds(args.seeds)
    elif isinstance(flags.get("seed"), SweepValues):
        seeds = list(flags.pop("seed"))
        check_open_files(len(seeds), settings, f"seed = {','.join(map(str, seeds))}")
    else:
        return None
    for seed in seeds:
        require_seed("seed", seed)
    return seeds


def _defaults(flags: dict, preset: str | None) -> PPOConfig:
    """The config of a run given only this command line's env and backend (what a folder name is relative to)."""
    return build_config({name: flags[name] for name in ("env_id", "env_backend") if name in flags}, preset or "auto")


def _train(request: TrainRequest) -> int:
    """Under torchrun, each process runs this; process 0 alone writes, prints and evaluates."""
    world = init_world(getattr(request.args, "device", "cpu"))
    try:
        with RunFolderClaims(PROG) as claims:  # every run folder this command claims, held until it ends
            return _train_process(request, world, claims)
    finally:
        close_world(world)


def _train_process(request: TrainRequest, world, claims: RunFolderClaims) -> int:
    """Claim the run folder (experiments.commands.run_folder), train, report."""
    args, flags = request.args, request.flags
    if args.list_presets:
        print(format_presets())
        return 0
    if request.is_batch:
        if world.distributed:
            raise ConfigError("several seeds or a sweep run in one process; start them without torchrun")
        return run_sweep(PROG, flags, request.seeds or [flags.get("seed", PPOConfig.seed)], args.preset or "auto",
                         args.run_dir or Path("runs"), _eval_episodes(args.eval_episodes), not args.no_progress,
                         args.success_threshold, claims=claims, algorithm=request.algorithm,
                         algorithm_settings=check_settings(request.algorithm, request.settings))
    if args.resume is not None:
        trainer, eval_episodes = _resumed_trainer(request, world, claims)
    else:
        trainer, eval_episodes = _fresh_trainer(request, world, claims)
    return _train_and_report(trainer, eval_episodes, world)


def _fresh_trainer(request: TrainRequest, world, claims: RunFolderClaims):
    """(trainer, evaluation episodes) of a new run. The env, the spaces and the device are
    checked before the run folder is claimed, so a refused command leaves no folder."""
    args, flags = request.args, request.flags
    config = build_config(flags, args.preset or "auto")
    configure_process(config.num_threads)
    trainer = build_trainer(config, training_envs(config, world), request.algorithm, request.settings,
                            progress=not args.no_progress, world=world)
    default = Path("runs") / run_folder_name(config, _defaults(flags, args.preset), preset=args.preset,
                                             processes=world.size, algorithm=request.algorithm,
                                             settings=request.settings)
    # process 0 claims the folder and names it for all; the trainer was built without one
    trainer.run_dir = claim_on_process_zero(world, lambda: claims.new_run(args.run_dir, default))
    eval_episodes = _eval_episodes(args.eval_episodes)
    if world.is_main:
        (trainer.run_dir / RUN_SETTINGS_NAME).write_text(json.dumps({"eval_episodes": eval_episodes}) + "\n")
    return trainer, eval_episodes


def _resumed_trainer(request: TrainRequest, world, claims: RunFolderClaims):
    """(trainer, evaluation episodes) continuing the run in --resume; refused while that run
    is still training, or when the budget leaves nothing to train."""
    args, flags = request.args, request.flags
    run_dir = args.resume
    claim_on_process_zero(world, lambda: claims.resumed(run_dir))
    budget = PPO.load_run(run_dir, PPOConfig, required_keys=PPO.REQUIRED_STATE)[1].total_timesteps  # before the flag
    trainer = resume_run(run_dir, lambda config: training_envs(config, world), flags.get("total_timesteps"),
                         progress=not args.no_progress, world=world)
    done, step = trainer.global_step, trainer.config.batch_size
    require_growing_budget("total_timesteps", trainer.config.total_timesteps, budget, done, step, run_dir)
    if trainer.iteration >= trainer.total_iterations:
        if "total_timesteps" in flags:
            raise ConfigError(f"--total-timesteps {flags['total_timesteps']} leaves nothing to train: run {run_dir} "
                              f"has done {done} steps, in iterations of {step}; give --total-timesteps {done + step} "
                              "or more")
        raise ConfigError(f"run {run_dir} is complete ({done} steps); to train it further give --total-timesteps "
                          f"{done + step} or more")
    configure_process(trainer.config.num_threads)  # the checkpoint's weights replace the fresh ones
    eval_episodes = args.eval_episodes
    if eval_episodes is None:  # as the run was started
        eval_episodes = _recorded_eval_episodes(run_dir)
    return trainer, eval_episodes


def _eval_episodes(given: int | None) -> int:
    return DEFAULT_EVAL_EPISODES if given is None else given


def _recorded_eval_episodes(run_dir: Path) -> int:
    """The --eval-episodes the run in `run_dir` was started with (RUN_SETTINGS_NAME), else the default."""
    try:
        value = json.loads((run_dir / RUN_SETTINGS_NAME).read_text())["eval_episodes"]
    except (OSError, ValueError, KeyError, TypeError):
        return DEFAULT_EVAL_EPISODES
    return value if isinstance(value, int) and value >= 0 else DEFAULT_EVAL_EPISODES


def _train_and_report(trainer, eval_episodes: int, world) -> int:
    """Train (stoppably), then on process 0: the learning curve, a summary of this command's
    part of the run, the greedy evaluation."""
    config, run_dir = trainer.config, trainer.run_dir
    steps_before, seconds_before = trainer.global_step, trainer.train_seconds
    with CurveDrawer(helper=None if world.is_main else False) as drawer:  # the curve is drawn while it evaluates
        started = time.perf_counter()
        exit_code = train_stoppably(PROG, trainer, run_dir, world)
        if exit_code is not None:
            return exit_code
        wall = time.perf_counter() - started
        curve = drawer.draw(run_dir, f"PPO on {config.env_id} ({trainer.envs.__class__.__name__}, seed {config.seed})")
        steps, seconds = trainer.global_step - steps_before, trainer.train_seconds - seconds_before
        in_all = f" ({trainer.global_step:,} in all)" if steps_before else ""
        print(
            f"trained {config.env_id} for {steps:,} steps{in_all} in {wall:.1f} s "
            f"({steps / max(seconds, 1e-9):,.0f} steps/s, backend {config.env_backend}"
            f"{f' on {world.size} processes' if world.distributed else ''}); "
            f"mean return of the last 20 training episodes: {trainer.recent_return():.1f}"
        )
        if eval_episodes:
            evaluate_run(run_dir, eval_episodes)
    print(f"run folder: {run_dir}\nlearning curve: {curve}\ntensorboard: tensorboard --logdir {run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
