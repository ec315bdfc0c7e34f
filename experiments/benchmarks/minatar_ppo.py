"""PPO on MinAtar with the preset: return against env steps and against seconds, next to the
published PPO figures.

For each game and seed, `ppo-train --env-id GAME --seed S` runs as a whole process with the
game's preset (experiments.commands.presets: 10M steps, the budget of the published figures) and
ends with its greedy evaluation of 100 episodes (`ppo-eval`'s rules: sticky actions on,
each episode at most 1,000 steps, the length of gymnax's MinAtar episodes). Up to --jobs
commands run at once, each on one torch thread; a run folder under --run-root that already
holds a finished run of the same command is read, not trained again, so an interrupted
benchmark continues where it stopped.

    python -m experiments.benchmarks.minatar_ppo --env-id MinAtar/Breakout-v1 --seeds 101 102
    python -m experiments.benchmarks.minatar_ppo --seeds 101 --total-timesteps 1000000 --plot runs/minatar_curves.png

The table gives per game and seed the steps, the training seconds, the greedy mean (min,
max) and the mean of the last 20 training episodes at 10%, 50% and 100% of the budget;
--plot draws the learning curves against steps and against seconds with the published
figures marked at their budget; --out writes everything as JSON.

Published (quoted, not run here): the gymnax README lists its gymnax-blines PPO agents at
10M steps with returns of 28 (Breakout-MinAtar) and 131 (SpaceInvaders-MinAtar). gymnax's
games follow MinAtar's rules without sticky actions and end episodes at 1,000 steps.
"""

from __future__ import annotations

import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from experiments.commands.cli import OneLineArgumentParser, run_with_user_errors
from experiments.commands.entry_points import console_argv
from ppo.config import ConfigError

PROG = "python -m experiments.benchmarks.minatar_ppo"
ENV_IDS = ("MinAtar/Breakout-v1", "MinAtar/SpaceInvaders-v1")
EVAL_EPISODES = 100
PUBLISHED = {  # env id → (source, env steps, return): quoted from the gymnax README, not run here
    "MinAtar/Breakout-v1": ("gymnax-blines PPO", 10_000_000, 28.0),
    "MinAtar/SpaceInvaders-v1": ("gymnax-blines PPO", 10_000_000, 131.0),
}
CURVE_POINTS = 50  # rows of metrics.csv kept per run for the curves


def run_folder(run_root: Path, env_id: str, seed: int) -> Path:
    return run_root / f"{env_id.replace('/', '_')}__seed{seed}"


def train_command(env_id: str, seed: int, run_dir: Path, total_timesteps: int | None) -> list[str]:
    command = [*console_argv("ppo-train"), "--env-id", env_id, "--seed", str(seed),
               "--run-dir", str(run_dir), "--eval-episodes", str(EVAL_EPISODES), "--no-progress"]
    return command + ([] if total_timesteps is None else ["--total-timesteps", str(total_timesteps)])


def finished_run(run_dir: Path, budget: int) -> bool:
    """The folder holds a run trained to `budget` steps and its greedy evaluation."""
    from ppo.runs.logger import read_metrics

    if not (run_dir / "eval.json").is_file() or not (run_dir / "metrics.csv").is_file():
        return False
    rows = read_metrics(run_dir / "metrics.csv")
    return bool(rows) and rows[-1]["global_step"] >= budget


def summarise(env_id: str, seed: int, run_dir: Path, command: list[str], wall: float | None) -> dict:
    """One run as recorded: its evaluation, its training seconds and a thinned learning curve."""
    from ppo.runs.logger import read_metrics

    rows = read_metrics(run_dir / "metrics.csv")
    evaluation = json.loads((run_dir / "eval.json").read_text())
    every = max(1, len(rows) // CURVE_POINTS)
    curve = [(row["global_step"], round(row["time_s"], 1), row["episode_return_recent"])
             for row in rows[every - 1::every]]
    if curve[-1][0] != rows[-1]["global_step"]:
        curve.append((rows[-1]["global_step"], round(rows[-1]["time_s"], 1), rows[-1]["episode_return_recent"]))
    return {"env_id": env_id, "seed": seed, "steps": int(rows[-1]["global_step"]), "train_seconds": rows[-1]["time_s"],
            "command_seconds": wall, "greedy_mean": evaluation["mean_return"], "greedy_min": evaluation["min_return"],
            "greedy_max": evaluation["max_return"], "eval_episodes": evaluation["episodes"],
            "eval_max_episode_steps": evaluation.get("max_episode_steps"), "curve": curve,
            "command": " ".join(["python"] + [shown_path(part) for part in command[1:]])}


def shown_path(text: str) -> str:
    """A path below the working directory as relative to it (records name no machine's folders)."""
    try:
        return str(Path(text).relative_to(Path.cwd())) if Path(text).is_absolute() else text
    except ValueError:
        return text


def run_one(env_id: str, seed: int, run_root: Path, total_timesteps: int | None) -> dict:
    from experiments.benchmarks.environments import run_command
    from experiments.commands.presets import build_config

    config = build_config({"env_id": env_id, **({} if total_timesteps is None else {"total_timesteps": total_timesteps})})
    budget = config.num_iterations * config.batch_size  # the steps whole iterations cover
    run_dir = run_folder(run_root, env_id, seed)
    command = train_command(env_id, seed, run_dir, total_timesteps)
    wall = None
    if not finished_run(run_dir, budget):
        wall, _ = run_command(command)
    return summarise(env_id, seed, run_dir, command, wall)


def benchmark(env_ids: list[str], seeds: list[int], run_root: Path, jobs: int = 2,
              total_timesteps: int | None = None) -> list[dict]:
    """Every (game, seed) run, up to `jobs` processes at once; rows in (game, seed) order."""
    pairs = [(env_id, seed) for env_id in env_ids for seed in seeds]
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(lambda pair: run_one(*pair, run_root, total_timesteps), pairs))


def return_at(curve: list, fraction: float) -> float:
    """The last-20 training return at the first curve point at or past `fraction` of the run's steps."""
    target = fraction * curve[-1][0]
    return next(value for step, _, value in curve if step >= target)


def format_table(rows: list[dict]) -> str:
    lines = [f"{'game':<26} {'seed':>5} {'steps':>11} {'train s':>8} {'greedy mean (min, max)':>24} "
             f"{'last-20 return at 10% / 50% / 100%':>36}"]
    for row in rows:
        curve = row["curve"]
        lines.append(f"{row['env_id']:<26} {row['seed']:>5} {row['steps']:>11,} {row['train_seconds']:>8.0f} "
                     f"{row['greedy_mean']:>10.1f} ({row['greedy_min']:.0f}, {row['greedy_max']:.0f})".ljust(84)
                     + f" {return_at(curve, 0.1):>10.1f} / {return_at(curve, 0.5):.1f} / {return_at(curve, 1.0):.1f}")
    for env_id in dict.fromkeys(row["env_id"] for row in rows):
        source, steps, value = PUBLISHED[env_id]
        lines.append(f"published: {env_id} {source} {value:g} at {steps:,} steps (quoted, not run here)")
    return "\n".join(lines)


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    games = list(dict.fromkeys(row["env_id"] for row in rows))
    figure, axes = plt.subplots(len(games), 2, figsize=(12, 4 * len(games)), squeeze=False)
    for (by_steps, by_seconds), env_id in zip(axes, games):
        for row in (row for row in rows if row["env_id"] == env_id):
            steps, seconds, returns = zip(*row["curve"])
            label = f"seed {row['seed']}: greedy {row['greedy_mean']:.1f}"
            by_steps.plot(steps, returns, lw=1.5, label=label)
            by_seconds.plot([value / 60 for value in seconds], returns, lw=1.5, label=label)
        source, budget, value = PUBLISHED[env_id]
        by_steps.plot([budget], [value], "k*", ms=12, label=f"{source}: {value:g} at {budget / 1e6:g}M (quoted)")
        by_steps.set_xlabel("environment steps")
        by_seconds.set_xlabel("training minutes on one CPU thread")
        for axis in (by_steps, by_seconds):
            axis.set_ylabel("return, last 20 training episodes")
            axis.set_title(env_id)
            axis.legend(fontsize=8, loc="upper left")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def build_parser() -> OneLineArgumentParser:
    parser = OneLineArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", nargs="+", default=list(ENV_IDS), help=f"games (default: {' '.join(ENV_IDS)})")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1], help="seeds (default: 1)")
    parser.add_argument("--run-root", type=Path, default=Path("runs/minatar-ppo"),
                        help="folder of the run folders; finished runs there are read, not retrained "
                             "(default: runs/minatar-ppo)")
    parser.add_argument("--jobs", type=int, default=2, help="training commands at once (default: 2)")
    parser.add_argument("--total-timesteps", type=int, default=None, help="budget per run (default: the preset's)")
    parser.add_argument("--plot", type=Path, default=None, help="write the learning curves to this PNG")
    parser.add_argument("--out", type=Path, default=None, help="write the rows as JSON to this file")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def run() -> int:
        unknown = [env_id for env_id in args.env_id if env_id not in ENV_IDS]
        if unknown:
            raise ConfigError(f"env id = {unknown[0]!r} is not one of: {', '.join(ENV_IDS)}")
        if args.jobs < 1:
            raise ConfigError(f"jobs = {args.jobs} must be a positive integer")
        rows = benchmark(args.env_id, args.seeds, args.run_root, args.jobs, args.total_timesteps)
        print(format_table(rows))
        if args.out:
            args.out.write_text(json.dumps(rows, indent=1) + "\n")
        if args.plot:
            plot(rows, args.plot)
            print(f"learning curves: {args.plot}")
        return 0

    return run_with_user_errors(PROG, run)


if __name__ == "__main__":
    sys.exit(main())
