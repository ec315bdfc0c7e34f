"""One process against K processes (torchrun) on the same PPO run, side by side.

For each setting and seed the same `ppo-train` command runs with 1 process and with
K processes (`torchrun --standalone --nproc-per-node K`), the two alternating so that
load from other programs hits both alike. Reported per setting: steps/s of training,
seconds until the mean return of the last 20 training episodes first reaches 475, the
final greedy evaluation, and the speed-up and scaling efficiency = speed-up / K.

Two settings with the same total batch in both columns:

  env-bound     gymnasium's per-env Python CartPoles (sync backend), 512 envs × 64
                steps (lr 5e-3): stepping the envs is most of an iteration, and it
                splits; the policy's forward pass per step does not (each process
                still makes T of them), nor do the gradient steps.
  update-bound  the batched torch CartPole preset: env steps are nearly free and the
                K epochs of minibatch steps are the cost. Every process still takes
                every gradient step (on b/K samples, with an all-reduce each), so
                more processes cannot make it faster on a tiny network.

    python -m experiments.benchmarks.distributed                    # seeds 1 2 3, K = 2
    python -m experiments.benchmarks.distributed --seeds 1 2 3 4 5 --settings env-bound
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SOLVED = 475.0
SETTINGS = {
    "env-bound": ["--env-backend", "gymnasium", "--num-envs", "512", "--num-steps", "64", "--num-minibatches", "4",
                  "--update-epochs", "4", "--learning-rate", "5e-3", "--total-timesteps", "655360"],
    "update-bound": ["--env-backend", "torch"],
}


def run_once(setting: str, seed: int, processes: int, folder: Path) -> dict:
    run_dir = folder / f"{setting}__p{processes}__seed{seed}"
    train = ["-m", "experiments.commands.train", "--env-id", "CartPole-v1", *SETTINGS[setting], "--seed", str(seed),
             "--run-dir", str(run_dir), "--no-progress", "--no-tensorboard", "--eval-episodes", "100"]
    launcher = ([sys.executable] if processes == 1 else
                [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(processes)])
    result = subprocess.run([*launcher, *train], capture_output=True, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    if result.returncode:
        raise SystemExit(f"{setting} seed {seed} with {processes} process(es) failed:\n{result.stderr[-2000:]}")
    steps_per_second = float(re.search(r"\(([\d,]+) steps/s", result.stdout).group(1).replace(",", ""))
    with open(run_dir / "metrics.csv", newline="") as file:
        rows = list(csv.DictReader(file))
    reached = [float(row["time_s"]) for row in rows
               if row["episode_return_recent"] and float(row["episode_return_recent"]) >= SOLVED]
    evaluation = json.loads((run_dir / "eval.json").read_text())["mean_return"]
    return {"steps_per_second": steps_per_second, "seconds_to_475": reached[0] if reached else float("nan"),
            "eval": evaluation}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, prog="python -m experiments.benchmarks.distributed", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--processes", type=int, default=2, help="K (default: 2)")
    parser.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=list(SETTINGS))
    args = parser.parse_args(argv)
    print(f"{os.cpu_count()} CPU cores, load average {os.getloadavg()[0]:.1f}", flush=True)
    with tempfile.TemporaryDirectory() as temporary:
        for setting in args.settings:
            results: dict[int, list[dict]] = {1: [], args.processes: []}
            for index, seed in enumerate(args.seeds):
                order = (1, args.processes) if index % 2 == 0 else (args.processes, 1)
                for processes in order:
                    result = run_once(setting, seed, processes, Path(temporary))
                    results[processes].append(result)
                    print(f"  {setting:>12} seed {seed} × {processes}: {result['steps_per_second']:9,.0f} steps/s, "
                          f"475 after {result['seconds_to_475']:6.2f} s, eval {result['eval']:.1f}", flush=True)
            one, many = results[1], results[args.processes]
            ratios = [b["steps_per_second"] / a["steps_per_second"] for a, b in zip(one, many)]
            print(f"\n{setting}: median over seeds {args.seeds}")
            print(f"  {'processes':>9} {'steps/s':>10} {'s to 475 (runs reaching it)':>28} {'eval ≥ 475':>10}")
            for processes, rows in results.items():
                reached = [r["seconds_to_475"] for r in rows if r["seconds_to_475"] == r["seconds_to_475"]]
                seconds = f"{statistics.median(reached):.2f} ({len(reached)}/{len(rows)})" if reached else "never"
                print(f"  {processes:>9} {statistics.median(r['steps_per_second'] for r in rows):>10,.0f} "
                      f"{seconds:>28} {sum(r['eval'] >= SOLVED for r in rows):>6}/{len(rows)}")
            speedup = statistics.median(ratios)
            print(f"  speed-up (median of per-seed steps/s ratios) {speedup:.2f}×, "
                  f"scaling efficiency {speedup / args.processes:.0%}\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
