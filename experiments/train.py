"""Train PPO on a gymnasium environment: `ppo-train` or `python -m experiments.train`.

    ppo-train                                   # CartPole-v1 with its preset
    ppo-train --env-id Acrobot-v1 --seed 3
    ppo-train --learning-rate 1e-3 --update-epochs 10 --no-anneal-lr
    ppo-train --resume runs/CartPole-v1__seed1  # continue a run from its checkpoint
    ppo-train --seeds 1-16                      # 16 seeds at once, one batched computation
    ppo-train --learning-rate 1e-3,3e-3 --seeds 1-10   # a sweep: every comma list is a grid axis

Every PPOConfig field is a flag; see `ppo-train --help`. The run folder receives
config.json, metrics.csv, TensorBoard events, checkpoint.pt, learning_curve.png and,
when --eval-episodes > 0, eval.json. Several seeds or a sweep (experiments.sweep) give
each run such a folder, named after what differs from the defaults.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from experiments.cli import (
    OneLineArgumentParser,
    SweepValues,
    add_dataclass_flags,
    check_writable_folder,
    configure_process,
    fresh_run_dir,
    given_flags,
    run_with_user_errors,
    train_stoppably,
)
from experiments.sweep import run_folder_name
from ppo.config import ConfigError, PPOConfig

PROG = "ppo-train"


def build_parser(argv: list[str] | None = None) -> OneLineArgumentParser:
    """The command's parser. `argv` (the command line) is read for --env-id, --env-backend
    and --preset, so that the help shows the values a run with them would use."""
    shown, about = run_defaults(argv or [])
    parser = OneLineArgumentParser(
        prog=PROG,
        description="Train PPO on a gymnasium environment. Defaults come from the env's preset "
        f"(see --list-presets); every flag below overrides them. {about}",
    )
    run = parser.add_argument_group("run")
    run.add_argument("--run-dir", type=Path, default=None,
                     help="output folder (default: runs/ENV_ID__…__seedSEED, named after the flags that differ from "
                     "the defaults, numbered if taken); with several seeds or a sweep, the folder the runs go in "
                     "(default: runs)")
    run.add_argument("--seeds", default=None, metavar="SEEDS",
                     help="train several seeds as one batched computation, e.g. 1-16 or 1,3,5 (or 1-4,9); each "
                     "gets its own run folder. Any hyperparameter given as a comma list (--learning-rate 1e-3,3e-3) "
                     "is swept: every combination, over every seed, then one summary table per setting")
    run.add_argument("--success-threshold", type=float, default=None, metavar="RETURN",
                     help="the final evaluation that counts as solved in a sweep's summary table "
                     "(default: the env's gymnasium reward_threshold, 475 for CartPole-v1)")
    run.add_argument("--preset", default=None, help="preset row: 'auto' (named like --env-id; the default), a name, or 'none'")
    run.add_argument("--list-presets", action="store_true", help="print the preset table and exit")
    run.add_argument("--eval-episodes", type=int, default=100, help="greedy evaluation episodes after training; 0 = skip (default: 100)")
    run.add_argument("--resume", type=Path, default=None, metavar="RUN_DIR",
                     help="continue the run in RUN_DIR from its checkpoint (only --total-timesteps may change). "
                     "On the torch backend the run continues exactly as if never stopped; gymnasium envs "
                     "start fresh episodes")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_dataclass_flags(parser.add_argument_group("hyperparameters (PPOConfig; a comma list sweeps a flag)"), PPOConfig,
                        shown_defaults=shown, sweepable=True)
    return parser


def run_defaults(argv: list[str]) -> tuple[dict | None, str]:
    """The config a run with this command line's env, backend and preset starts from (the
    values the help shows), and a sentence saying which; the dataclass defaults if the
    command line names no usable env."""
    import argparse

    from experiments.presets import build_config

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


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    return run_with_user_errors(PROG, lambda: _train(args))


def training_envs(config: PPOConfig, world=None):
    """The VecEnv a process trains on: its share of the `config.num_envs` copies (all of
    them for a single process), on the config's backend and device."""
    from envs.factory import make_vec_env
    from ppo.trainer import resolve_device

    num_envs = config.num_envs if world is None else world.share(config.num_envs, "num_envs")
    return make_vec_env(config.env_id, num_envs, config.env_backend, resolve_device(config.device))


def _seeds(args, flags: dict) -> list[int] | None:
    """The seeds of --seeds, or of --seed given as a comma list; None for one ordinary --seed."""
    from ppo.seed_batch import parse_seeds

    if args.seeds is not None:
        if "seed" in flags:
            raise ConfigError("give --seed or --seeds, not both")
        return parse_seeds(args.seeds)
    if isinstance(flags.get("seed"), SweepValues):
        return list(flags.pop("seed"))
    return None


def _defaults(flags: dict, preset: str | None) -> PPOConfig:
    """The config of a run given only this command line's env and backend (what a folder name is relative to)."""
    from experiments.presets import build_config

    return build_config({name: flags[name] for name in ("env_id", "env_backend") if name in flags}, preset or "auto")


def _train(args) -> int:
    """Under torchrun, each process runs this; process 0 alone writes, prints and evaluates."""
    from ppo.distributed import close_world, init_world

    world = init_world(getattr(args, "device", "cpu"))
    try:
        return _train_process(args, world)
    finally:
        close_world(world)


def _train_process(args, world) -> int:
    from experiments.presets import build_config, format_presets
    from ppo.trainer import PPO

    if args.list_presets:
        print(format_presets())
        return 0
    if args.eval_episodes < 0:
        raise ConfigError(f"eval_episodes = {args.eval_episodes} must be ≥ 0")
    flags = given_flags(args, PPOConfig)
    seeds = _seeds(args, flags)
    if any(isinstance(value, SweepValues) for value in flags.values()) or len(seeds or ()) > 1:
        if args.resume is not None:
            raise ConfigError("--resume continues one run: give it one run folder, without --seeds or comma lists")
        if world.distributed:
            raise ConfigError("several seeds or a sweep run in one process; start them without torchrun")
        from experiments.sweep import run_sweep

        return run_sweep(PROG, flags, seeds or [PPOConfig.seed if "seed" not in flags else flags["seed"]],
                         args.preset or "auto", args.run_dir or Path("runs"), args.eval_episodes,
                         not args.no_progress, args.success_threshold)
    if seeds:
        flags["seed"] = seeds[0]
    if args.resume is not None:
        unexpected = sorted(set(flags) - {"total_timesteps"})
        unexpected += ["run_dir"] if args.run_dir is not None else []
        unexpected += ["preset"] if args.preset is not None else []
        if unexpected:
            raise ConfigError(f"--resume keeps the run's folder and config; only --total-timesteps may change "
                              f"(got {', '.join('--' + name.replace('_', '-') for name in unexpected)})")
        trainer = PPO.resume(args.resume, lambda config: training_envs(config, world), flags.get("total_timesteps"),
                             progress=not args.no_progress, world=world)
        run_dir = check_writable_folder(args.resume, "run_dir") if world.is_main else args.resume
        configure_process(trainer.config.num_threads)  # the checkpoint's weights replace the fresh ones
    else:
        config = build_config(flags, args.preset or "auto")
        run_dir = args.run_dir or fresh_run_dir(Path("runs") / run_folder_name(config, _defaults(flags, args.preset)))
        run_dir = Path(world.gather(str(run_dir))[0])  # process 0 names the run folder for all
        if (run_dir / "checkpoint.pt").exists():
            raise ConfigError(f"run_dir {run_dir} already holds a run; use --resume {run_dir} or another --run-dir")
        if world.is_main:
            check_writable_folder(run_dir, "run_dir")
        configure_process(config.num_threads)  # before the weights are drawn: the orthogonal init depends on it
        trainer = PPO(config, training_envs(config, world), run_dir=run_dir, progress=not args.no_progress,
                      world=world)
    config = trainer.config

    started = time.perf_counter()
    exit_code = train_stoppably(PROG, trainer, run_dir, world)
    if exit_code is not None:
        return exit_code
    wall = time.perf_counter() - started
    from ppo.plotting import plot_learning_curve

    curve = plot_learning_curve(run_dir, f"PPO on {config.env_id} ({trainer.envs.__class__.__name__}, seed {config.seed})")
    print(
        f"trained {config.env_id} for {trainer.global_step:,} steps in {wall:.1f} s "
        f"({trainer.global_step / max(trainer.train_seconds, 1e-9):,.0f} steps/s, backend {config.env_backend}"
        f"{f' on {world.size} processes' if world.distributed else ''}); "
        f"mean return of the last 20 training episodes: {trainer.recent_return():.1f}"
    )
    if args.eval_episodes:
        from experiments.evaluate import evaluate_run

        evaluate_run(run_dir, args.eval_episodes)
    print(f"run folder: {run_dir}\nlearning curve: {curve}\ntensorboard: tensorboard --logdir {run_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
