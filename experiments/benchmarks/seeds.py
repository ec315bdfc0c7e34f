"""Benchmark: S seeds trained as one batch vs the same S seeds one after another.

    python -m experiments.benchmarks.seeds                      # S = 1, 4, 16, 64 on the CartPole preset
    python -m experiments.benchmarks.seeds --sizes 1 4 --total-timesteps 50000 --device cuda

Both sides train in this process, without run folders (no logging, no checkpoints), on
the torch backend: the sequential side is `PPO` once per seed with the preset's
`num_threads`; the batched side is `PPO(config, envs, seeds=...)` with `--threads` threads (default 1). Sequential times are measured on the first min(S, --sequential-cap) seeds
and scaled to S. Prints one row per S: wall seconds of each side, their ratio, and how
many seeds reached a mean training return ≥ --threshold.
"""

from __future__ import annotations

import argparse
import time

import torch

from envs.factory import make_seed_batch_env, make_vec_env
from experiments.commands.cli import configure_process
from experiments.commands.presets import build_config
from ppo.trainers.ppo import PPO


def time_batch(config, seeds, threads: int) -> tuple[float, list[float]]:
    configure_process(config.num_threads)
    started = time.perf_counter()
    batch = PPO(config, make_seed_batch_env(config.env_id, len(seeds), config.num_envs, "torch", config.device),
                seeds=seeds, progress=False)
    torch.set_num_threads(threads)
    batch.train()
    return time.perf_counter() - started, batch.recent_returns_by_member()


def time_sequential(config, seeds) -> tuple[float, list[float]]:
    configure_process(config.num_threads)
    started = time.perf_counter()
    returns = []
    for seed in seeds:
        trainer = PPO(config.replace(seed=seed), make_vec_env(config.env_id, config.num_envs, "torch", config.device),
                      progress=False)
        trainer.train()
        returns.append(trainer.recent_return())
    return time.perf_counter() - started, returns


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n\n")[0])
    parser.add_argument("--env-id", default="CartPole-v1")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--total-timesteps", type=int, default=None, help="default: the preset's")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="threads of the batched side (default: 1, as the "
                        "commands; a second thread helps only on an idle machine)")
    parser.add_argument("--sequential-cap", type=int, default=16, help="time at most this many sequential runs")
    parser.add_argument("--threshold", type=float, default=475.0)
    args = parser.parse_args(argv)
    overrides = {"env_id": args.env_id, "env_backend": "torch", "tensorboard": False, "device": args.device}
    if args.total_timesteps:
        overrides["total_timesteps"] = args.total_timesteps
    config = build_config(overrides, "auto")
    print(f"{config.env_id}, {config.total_timesteps:,} steps per seed, device {config.device}; batched side on "
          f"{args.threads} thread(s), sequential runs on {config.num_threads}")
    print(f"{'S':>4} {'batched s':>10} {'sequential s':>13} {'sequential/batched':>19} {'solved (batched)':>17} "
          f"{'solved (sequential)':>20}")
    for size in args.sizes:
        seeds = list(range(1, size + 1))
        batched, batch_returns = time_batch(config, seeds, args.threads)
        timed = seeds[:args.sequential_cap]
        sequential, sequential_returns = time_sequential(config, timed)
        sequential *= size / len(timed)
        solved = sum(value >= args.threshold for value in batch_returns)
        solved_alone = sum(value >= args.threshold for value in sequential_returns)
        print(f"{size:>4} {batched:>10.1f} {sequential:>13.1f} {sequential / batched:>19.2f} "
              f"{f'{solved}/{size}':>17} {f'{solved_alone}/{len(timed)}':>20}", flush=True)


if __name__ == "__main__":
    main()
