"""Train an env's preset for several seeds and report how many runs succeed.

    python -m experiments.benchmarks.continuous --env-id Pendulum-v1 --seeds 1 2 3 4 5
    python -m experiments.benchmarks.continuous --env-id LunarLander-v3 --seeds 1 2 3 --total-timesteps 1000000
    python -m experiments.benchmarks.continuous --env-id Pendulum-v1 --seeds 1 --gamma 0.95   # any PPOConfig flag
    python -m experiments.benchmarks.continuous --classic-control --seeds 101 102 103 104 105

For every seed: train with the preset (flags override it, as in ppo-train), then run the
final greedy evaluation on gymnasium's env (100 episodes, observation statistics
frozen) and print its mean ± std, the training wall-clock and steps/s. The last line
counts the seeds whose evaluation mean reaches --threshold (the env's usual "solved"
score by default), next to the SB3 zoo's published PPO figure for the env.
--classic-control runs every gymnasium classic-control task in turn, each with its own
preset (then only --seeds, --eval-episodes and --json-out apply), and ends with one table. --json-out writes all of it to a file; --runs-dir keeps each seed's
run folder (checkpoint, metrics) for ppo-eval / --record.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

from experiments.commands.cli import OneLineArgumentParser, add_dataclass_flags, configure_process, given_flags, run_with_user_errors
from ppo.config import ConfigError, PPOConfig

PROG = "python -m experiments.benchmarks.continuous"

# Mean greedy return that counts as a success: the target this benchmark holds each env's preset to.
SUCCESS_THRESHOLD = {
    "CartPole-v1": 475.0,
    "Acrobot-v1": -100.0,
    "MountainCar-v0": -130.0,
    "MountainCarContinuous-v0": 90.0,
    "Pendulum-v1": -200.0,
    "LunarLander-v3": 200.0,
    "LunarLanderContinuous-v3": 200.0,
    "HalfCheetah-v5": 1440.0,  # CleanRL's published HalfCheetah-v4 figure at 1M steps
    "Hopper-v5": 2380.0,  # CleanRL's published Hopper-v4 figure at 1M steps
}


CLASSIC_CONTROL = ("CartPole-v1", "Acrobot-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Pendulum-v1")

# The SB3 zoo's published PPO results (its benchmark table: mean ± std of the evaluation,
# training budget), for the table's last column. Pendulum: the table's v0 row.
ZOO_FIGURE = {
    "CartPole-v1": "500.0 ± 0.0 at 100k",
    "Acrobot-v1": "-73.5 ± 18.2 at 1M",
    "MountainCar-v0": "-110.4 ± 19.5 at 1M",
    "MountainCarContinuous-v0": "88.3 ± 2.6 at 20k (gSDE)",
    "Pendulum-v1": "-169.9 ± 104.9 at 2M",
}


def build_parser() -> OneLineArgumentParser:
    parser = OneLineArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    bench = parser.add_argument_group("benchmark")
    bench.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5], help="seeds to train (default: 1 2 3 4 5)")
    bench.add_argument("--preset", default="auto", help="preset row: 'auto' (named like --env-id), a name, or 'none'")
    bench.add_argument("--eval-episodes", type=int, default=100, help="greedy evaluation episodes per seed (default: 100)")
    bench.add_argument("--threshold", type=float, default=None, help="success = evaluation mean ≥ this (default: per env)")
    bench.add_argument("--runs-dir", type=Path, default=None, help="keep each seed's run folder under this folder")
    bench.add_argument("--json-out", type=Path, default=None, help="write the per-seed results to this JSON file")
    bench.add_argument("--classic-control", action="store_true",
                       help=f"every classic-control task with its preset: {', '.join(CLASSIC_CONTROL)}")
    add_dataclass_flags(parser.add_argument_group("hyperparameters (PPOConfig)"), PPOConfig, skip=("seed",))
    return parser


def train_and_evaluate(config: PPOConfig, eval_episodes: int, run_dir: Path | None) -> dict:
    """One seed: train, then the greedy evaluation of the final policy."""
    from envs.factory import gymnasium_env_factory
    from experiments.commands.train import training_envs
    from ppo.runs.evaluation import Policy, evaluate_policy
    from ppo.trainers.ppo import PPO

    configure_process(config.num_threads)
    trainer = PPO(config, training_envs(config), run_dir=run_dir, progress=False)
    started = time.perf_counter()
    trainer.train()
    wall = time.perf_counter() - started
    trainer.envs.close()
    trainer.model.eval()
    policy = Policy(trainer.model, config, trainer.obs_normalizer)
    returns = evaluate_policy(policy, gymnasium_env_factory(config.env_id), eval_episodes)
    return {
        "seed": config.seed,
        "eval_mean": float(returns.mean()),
        "eval_std": float(returns.std()),
        "train_wall_s": wall,
        "steps": trainer.global_step,
        "steps_per_s": trainer.global_step / max(trainer.train_seconds, 1e-9),
    }


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_with_user_errors(PROG, lambda: _benchmark(args))


def _benchmark(args) -> int:
    from experiments.commands.presets import build_config

    if args.eval_episodes <= 0:
        raise ConfigError(f"eval_episodes = {args.eval_episodes} must be a positive integer")
    flags = given_flags(args, PPOConfig)
    if args.classic_control:
        if flags or args.threshold is not None or args.preset != "auto" or args.runs_dir is not None:
            raise ConfigError("--classic-control uses each task's preset; give only --seeds, --eval-episodes, --json-out")
        summaries = [benchmark_env(build_config, {"env_id": env_id}, args) for env_id in CLASSIC_CONTROL]
        print("\n" + format_summary_table(summaries))
    else:
        summaries = [benchmark_env(build_config, flags, args)]
    if args.json_out is not None:
        args.json_out.write_text(json.dumps(summaries if args.classic_control else summaries[0], indent=2) + "\n")
    return 0


def benchmark_env(build_config, flags: dict, args) -> dict:
    """Train and evaluate every seed of one env; print a line per seed and the count."""
    configs = [build_config({**flags, "seed": seed}, args.preset) for seed in args.seeds]
    env_id = configs[0].env_id
    threshold = args.threshold if args.threshold is not None else SUCCESS_THRESHOLD.get(env_id)
    if threshold is None:
        raise ConfigError(f"no default success threshold for {env_id}; give --threshold")
    print(f"{env_id}: {configs[0].total_timesteps:,} steps per seed, backend {configs[0].env_backend}, "
          f"success = greedy mean over {args.eval_episodes} episodes ≥ {threshold:g}", flush=True)

    results = []
    for config in configs:
        run_dir = None if args.runs_dir is None else args.runs_dir / f"{env_id.replace('/', '_')}__seed{config.seed}"
        result = train_and_evaluate(config, args.eval_episodes, run_dir)
        result["success"] = result["eval_mean"] >= threshold
        results.append(result)
        print(f"seed {config.seed}: eval {result['eval_mean']:.1f} ± {result['eval_std']:.1f}, "
              f"train {result['train_wall_s']:.1f} s, {result['steps_per_s']:,.0f} steps/s"
              f"{'' if result['success'] else '  (below threshold)'}", flush=True)

    successes = sum(result["success"] for result in results)
    print(f"{successes}/{len(results)} seeds reach {threshold:g} (SB3 zoo: {ZOO_FIGURE.get(env_id, 'n/a')})", flush=True)
    return {"env_id": env_id, "threshold": threshold, "config": configs[0].to_dict(), "results": results,
            "successes": successes, "zoo": ZOO_FIGURE.get(env_id)}


def format_summary_table(summaries: list[dict]) -> str:
    """One row per env: budget, success count, evaluation per seed, median training time."""
    lines = ["| env | steps | solved | greedy eval per seed (100 episodes) | median train s | median steps/s | SB3 zoo |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for summary in summaries:
        results = summary["results"]
        evals = ", ".join(f"{r['eval_mean']:.1f}" for r in results)
        lines.append(
            f"| {summary['env_id']} | {summary['config']['total_timesteps']:,} | {summary['successes']}/{len(results)} "
            f"(≥ {summary['threshold']:g}) | {evals} | {statistics.median(r['train_wall_s'] for r in results):.1f} "
            f"| {statistics.median(r['steps_per_s'] for r in results):,.0f} | {summary['zoo'] or 'n/a'} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
