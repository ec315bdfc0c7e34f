"""Train an env's preset for several seeds and report how many runs succeed.

    python -m experiments.benchmark_continuous --env-id Pendulum-v1 --seeds 1 2 3 4 5
    python -m experiments.benchmark_continuous --env-id LunarLander-v3 --seeds 1 2 3 --total-timesteps 1000000
    python -m experiments.benchmark_continuous --env-id Pendulum-v1 --seeds 1 --gamma 0.95   # any PPOConfig flag

For every seed: train with the preset (flags override it, as in ppo-train), then run the
final greedy evaluation on gymnasium's env (100 episodes, observation statistics
frozen) and print its mean ± std, the training wall-clock and steps/s. The last line
counts the seeds whose evaluation mean reaches --threshold (the env's usual "solved"
score by default). --json-out writes all of it to a file; --runs-dir keeps each seed's
run folder (checkpoint, metrics) for ppo-eval / --record.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from experiments.cli import OneLineArgumentParser, add_dataclass_flags, configure_process, given_flags, run_with_user_errors
from ppo.config import ConfigError, PPOConfig

PROG = "benchmark_continuous"

# Mean greedy return that counts as a success; the targets of this project's issue.
SUCCESS_THRESHOLD = {
    "Pendulum-v1": -200.0,
    "LunarLander-v3": 200.0,
    "LunarLanderContinuous-v3": 200.0,
    "MountainCarContinuous-v0": 90.0,
    "HalfCheetah-v5": 1440.0,  # CleanRL's published HalfCheetah-v4 figure at 1M steps
    "Hopper-v5": 2380.0,  # CleanRL's published Hopper-v4 figure at 1M steps
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
    add_dataclass_flags(parser.add_argument_group("hyperparameters (PPOConfig)"), PPOConfig, skip=("seed",))
    return parser


def train_and_evaluate(config: PPOConfig, eval_episodes: int, run_dir: Path | None) -> dict:
    """One seed: train, then the greedy evaluation of the final policy."""
    from envs.factory import gymnasium_env_factory
    from experiments.train import training_envs
    from ppo.evaluation import Policy, evaluate_policy
    from ppo.trainer import PPO

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
    from experiments.presets import build_config

    if args.eval_episodes <= 0:
        raise ConfigError(f"eval_episodes = {args.eval_episodes} must be a positive integer")
    flags = given_flags(args, PPOConfig)
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
              f"train {result['train_wall_s']:.0f} s, {result['steps_per_s']:,.0f} steps/s"
              f"{'' if result['success'] else '  (below threshold)'}", flush=True)

    successes = sum(result["success"] for result in results)
    print(f"{successes}/{len(results)} seeds reach {threshold:g}")
    if args.json_out is not None:
        summary = {"env_id": env_id, "threshold": threshold, "config": configs[0].to_dict(), "results": results}
        args.json_out.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
