"""The GPU check: what one CUDA machine does with this library, in one command.

    python -m experiments.benchmarks.gpu_check                # on a machine with CUDA
    python -m experiments.benchmarks.gpu_check --device cpu --sizes 1 4 --total-timesteps 8192 \\
        --minatar-timesteps 8192 --no-torchrun               # the same code paths, small, on a CPU

On the device it trains, each in this process and without run folders:

1. the CartPole preset as one seed batch of each size in --sizes (1, 64 and 1,024 by
   default), on the batched torch CartPole living on the device. For each size it prints
   the wall seconds, the seconds per seed, and how many seeds reached a mean training
   return of 475. The goal: 1,024 seeds in under 10× one seed's time.
2. a MinAtar Breakout run with its preset (on the device), in environment steps per second.
3. where two GPUs exist, the CartPole preset through torchrun with two processes (NCCL,
   one GPU each) against one process, both as whole `ppo-train` commands.

Without CUDA (and without --device cpu) it says so in one line and exits with 0: nothing
is wrong, there is nothing to check here. Every figure is a ratio measured in this run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from envs.factory import make_vec_env
from experiments.benchmarks.seeds import time_batch
from ppo.presets import preset_config
from ppo.trainers.ppo import PPO

SOLVED = 475.0
GOAL_RATIO = 10.0  # the largest batch in under this many times one seed's time


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m experiments.benchmarks.gpu_check", allow_abbrev=False,
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N, or cpu to try the code paths")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 64, 1024], help="seed batch sizes")
    parser.add_argument("--total-timesteps", type=int, default=None, help="CartPole budget per seed (the preset's)")
    parser.add_argument("--minatar-timesteps", type=int, default=2_000_000, help="MinAtar Breakout's budget; 0 = skip")
    parser.add_argument("--no-torchrun", action="store_true", help="skip the two-process run")
    args = parser.parse_args(argv)
    if any(size < 1 for size in args.sizes):
        parser.error(f"--sizes {args.sizes}: every size must be a positive integer")
    return args


def cartpole_batches(args: argparse.Namespace) -> list[tuple[int, float, int]]:
    """(S, wall seconds, seeds reaching 475) for each seed batch size S."""
    overrides = {"env_backend": "torch", "tensorboard": False, "device": args.device}
    if args.total_timesteps:
        overrides["total_timesteps"] = args.total_timesteps
    config = preset_config("CartPole-v1", **overrides)
    rows = []
    for size in args.sizes:
        seconds, returns = time_batch(config, list(range(1, size + 1)), threads=1)
        solved = sum(value >= SOLVED for value in returns)
        rows.append((size, seconds, solved))
        print(f"  CartPole, {size:5d} seeds as one batch: {seconds:8.1f} s, {seconds / size:8.3f} s per seed, "
              f"{solved}/{size} reached {SOLVED:.0f}", flush=True)
    return rows


def minatar_run(args: argparse.Namespace) -> float:
    """Environment steps per second of one MinAtar Breakout run with its preset on the device."""
    config = preset_config("MinAtar/Breakout-v1", env_backend="torch", tensorboard=False, device=args.device,
                           total_timesteps=args.minatar_timesteps)
    trainer = PPO(config, make_vec_env(config.env_id, config.num_envs, "torch", config.device), progress=False)
    started = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - started
    rate = trainer.samples_seen / seconds
    print(f"  MinAtar Breakout: {trainer.samples_seen:,d} steps in {seconds:.1f} s, {rate:,.0f} steps/s, "
          f"mean return of the last episodes {trainer.recent_return():.1f}", flush=True)
    return rate


def whole_command_seconds(processes: int, folder: Path) -> float:
    """Wall seconds of `ppo-train` on the CartPole preset (CUDA) with 1 process or `processes` under torchrun."""
    train = ["-m", "experiments.commands.train", "--env-id", "CartPole-v1", "--device", "cuda", "--run-dir",
             str(folder / f"p{processes}"), "--no-progress", "--no-tensorboard", "--eval-episodes", "0"]
    launcher = ([sys.executable] if processes == 1 else
                [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(processes)])
    started = time.perf_counter()
    result = subprocess.run([*launcher, *train], capture_output=True, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    if result.returncode:
        raise SystemExit(f"gpu-check: ppo-train with {processes} process(es) failed: "
                         f"{(result.stderr.strip().splitlines() or ['no output'])[-1]}")
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu-check: no CUDA device here (torch.cuda.is_available() is False); nothing was run")
        return 0
    where = torch.cuda.get_device_name(torch.device(args.device)) if args.device.startswith("cuda") else "the CPU"
    print(f"gpu-check on {where} (torch {torch.__version__}, {os.cpu_count()} CPU cores)", flush=True)
    rows = cartpole_batches(args)
    (one, one_seconds, _), (largest, largest_seconds, _) = rows[0], rows[-1]
    ratio = largest_seconds / one_seconds
    verdict = "meets" if largest > one and ratio < GOAL_RATIO else "misses"
    print(f"  {largest} seeds took {ratio:.1f}× the time of {one}: {verdict} the goal of under {GOAL_RATIO:.0f}×")
    if args.minatar_timesteps:
        minatar_run(args)
    gpus = torch.cuda.device_count() if args.device.startswith("cuda") else 0
    if args.no_torchrun or gpus < 2:
        print(f"  torchrun with NCCL: skipped ({'--no-torchrun' if args.no_torchrun else f'{gpus} GPU(s) here'})")
        return 0
    with tempfile.TemporaryDirectory() as folder:
        alone, two = whole_command_seconds(1, Path(folder)), whole_command_seconds(2, Path(folder))
    print(f"  ppo-train on CartPole: 1 process {alone:.1f} s, 2 processes (NCCL) {two:.1f} s: {alone / two:.2f}× faster")
    return 0


if __name__ == "__main__":
    sys.exit(main())
