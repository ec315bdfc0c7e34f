"""Gymnasium's vector envs against the batched torch envs, side by side in one run.

Section 1: env-steps per second of a random policy. Section 2: full PPO training on
CartPole-v1 with each backend's shipped defaults (time until the mean of the last 20
training episodes first reaches 475, training seconds, steps/s, and the final greedy
100-episode evaluation on gymnasium), over several seeds, with medians and the ratio.

    python -m experiments.benchmarks.environments                       # both sections, CartPole-v1
    python -m experiments.benchmarks.environments --train-seeds         # section 1 only
    python -m experiments.benchmarks.environments --skip-stepping --train-seeds 1 2 3 4 5 6 7 8 9 10
    python -m experiments.benchmarks.environments --env-id Acrobot-v1 --num-envs 64 4096 --device cuda
    python -m experiments.benchmarks.environments --skip-stepping --train-seeds --command-seeds 101 102 103 \
        --sb3-python PATH/TO/python --sb3-every 3          # section 3, with SB3 alongside

One column per backend, for a random policy:

  sync          gymnasium.make_vec(env_id, N, vectorization_mode="sync"): N gymnasium
                envs stepped one after another in Python (gymnasium's SyncVectorEnv)
  numpy-vector  gymnasium.make_vec(env_id, N, vectorization_mode="vector_entry_point"):
                gymnasium's own numpy-batched env (only CartPole has one)
  torch         envs.classic.make_torch_vec_env(env_id, N, device): this project's
                batched torch env

Actions: one random action sequence, (steps, N, ...), is drawn with numpy before any
timing and handed to every backend in its native form (numpy arrays; one torch tensor
already on the device), so no backend pays for sampling actions. Each backend steps
through the same sequence, episodes ending and restarting as they come.

Section 3 (--command-seeds): `ppo-train --seed S` as a user runs it, timed from start to
exit in a fresh process (imports, training, the plot, the 100-episode evaluation), with
the seconds of training until the mean of the last 20 episodes first reached 475 (from
metrics.csv) and the evaluation. With --sb3-python, a Python that has Stable-Baselines3,
the same job with the SB3 zoo's tuned CartPole-v1 settings runs in turns with ours
(before every --sb3-every-th seed), so load from other processes hits both alike.

Timing: the backends take turns, a block of steps each per round (cut short after
--max-seconds), for --rounds rounds. A figure is the median over rounds, a ratio the
median of the per-round ratios: load from other processes then hits all backends alike.
"""

from __future__ import annotations

import math
import statistics
import sys
import time
from typing import Callable

import gymnasium as gym
import numpy as np
import torch

from experiments.commands.cli import OneLineArgumentParser, run_with_user_errors
from experiments.commands.entry_points import console_argv
from ppo.parallel.malloc import keep_freed_memory

PROG = "python -m experiments.benchmarks.environments"
BACKENDS = ("sync", "numpy-vector", "torch")
RATIOS = (("torch", "numpy-vector"), ("torch", "sync"))


# ----- section 1: stepping throughput --------------------------------------------------------


def random_action_sequence(space: gym.Space, steps: int, num_envs: int, seed: int = 0) -> np.ndarray:
    """(steps, num_envs, *action_shape) actions drawn uniformly from `space`."""
    rng = np.random.default_rng(seed)
    if isinstance(space, gym.spaces.Discrete):
        return rng.integers(space.start, space.start + space.n, size=(steps, num_envs))
    return rng.uniform(space.low, space.high, size=(steps, num_envs, *space.shape)).astype(space.dtype)


def single_action_space(env_id: str) -> gym.Space:
    env = gym.make(env_id)
    env.close()
    return env.action_space


def make_backend(backend: str, env_id: str, num_envs: int, device: str, dtype: torch.dtype, actions: np.ndarray):
    """(env, step) where step(i) applies the i-th batch of `actions`; None if the backend lacks env_id.

    The actions are split into per-step batches in the backend's native form beforehand,
    so a step call does nothing but step.
    """
    if backend == "torch":
        from envs.classic import make_torch_vec_env

        env = make_torch_vec_env(env_id, num_envs, device=device, dtype=dtype)
        batches = list(torch.as_tensor(actions, device=env.device).unbind(0))
    elif backend == "numpy-vector" and gym.spec(env_id).vector_entry_point is None:
        return None
    else:
        mode = "sync" if backend == "sync" else "vector_entry_point"
        env = gym.make_vec(env_id, num_envs=num_envs, vectorization_mode=mode)
        batches = list(actions)
    env.reset(seed=0)
    return env, lambda i: env.step(batches[i])


def time_block(step: Callable[[int], object], start: int, steps: int, max_seconds: float, sync: Callable[[], None]) -> float:
    """Steps per second of one block of calls step(start), step(start + 1), ... (wrapping at `steps`)."""
    sync()
    began = time.perf_counter()
    done = 0
    while done < steps:
        step((start + done) % steps)
        done += 1
        if time.perf_counter() - began > max_seconds:
            break
    sync()
    return done / (time.perf_counter() - began)


def rates_in_turns(backends: dict[str, tuple[object, Callable[[int], object]]], num_envs: int, steps: int, rounds: int,
                   max_seconds: float, sync: Callable[[], None]) -> dict[str, list[float]]:
    """{backend: env-steps/s of each round}: in every round each backend steps its block in turn, so that a change
    in the machine's load hits them alike; round r starts at action r·steps/rounds."""
    per_round: dict[str, list[float]] = {backend: [] for backend in backends}
    for round_index in range(rounds):
        start = round_index * steps // rounds
        for backend, (_, step) in backends.items():
            per_round[backend].append(num_envs * time_block(step, start, steps, max_seconds, sync))
    return per_round


def benchmark_stepping(
    env_id: str = "CartPole-v1",
    num_envs_list: tuple[int, ...] = (8, 64, 512, 4096),
    steps: int = 200,
    rounds: int = 5,
    max_seconds: float = 0.5,
    device: str = "cpu",
    dtype: torch.dtype = torch.float64,
    backends: tuple[str, ...] = BACKENDS,
    warmup_steps: int = 5,
) -> list[dict]:
    """One row per N: median env-steps/s of each backend and the median per-round ratios."""
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
    rows = []
    for num_envs in num_envs_list:
        actions = random_action_sequence(single_action_space(env_id), steps, num_envs)
        backends_here = {}
        for backend in backends:
            made = make_backend(backend, env_id, num_envs, device, dtype, actions)
            if made is not None:
                backends_here[backend] = made
                for i in range(warmup_steps):
                    made[1](i)
        per_round = rates_in_turns(backends_here, num_envs, steps, rounds, max_seconds, sync)
        for env, _ in backends_here.values():
            env.close()
        row = {"num_envs": num_envs}
        row.update({backend: statistics.median(rates) for backend, rates in per_round.items()})
        for top, bottom in RATIOS:
            if top in per_round and bottom in per_round:
                ratios = [a / b for a, b in zip(per_round[top], per_round[bottom])]
                row[f"{top}/{bottom}"] = statistics.median(ratios)
        rows.append(row)
    return rows


def format_stepping_table(rows: list[dict], backends: tuple[str, ...] = BACKENDS) -> str:
    columns = list(backends) + [f"{top}/{bottom}" for top, bottom in RATIOS if top in backends and bottom in backends]
    lines = [f"{'N':>6}" + "".join(f"{column:>20}" for column in columns)]
    for row in rows:
        cells = []
        for column in columns:
            value = row.get(column)
            if value is None:
                cells.append(f"{'n/a':>20}")
            elif "/" in column:
                cells.append(f"{value:>19.2f}x")
            else:
                cells.append(f"{value:>20,.0f}")
        lines.append(f"{row['num_envs']:>6}" + "".join(cells))
    return "\n".join(lines)


# ----- section 2: full PPO training, gymnasium backend against torch backend -----------------

SOLVED_RETURN = 475.0  # CartPole-v1's threshold; the mean of the last 20 training episodes


def train_one(env_id: str, backend: str, seed: int, eval_episodes: int) -> dict:
    """Train with the backend's shipped defaults; time-to-threshold, speed, final evaluation."""
    from envs.factory import gymnasium_env_factory
    from experiments.commands.presets import build_config
    from experiments.commands.train import training_envs
    from ppo.runs.evaluation import Policy, evaluate_policy
    from ppo.trainers.ppo import PPO

    started = time.perf_counter()
    config = build_config({"env_id": env_id, "env_backend": backend, "seed": seed, "tensorboard": False})
    trainer = PPO(config, training_envs(config), progress=False)
    first_solved: list[float] = []

    def watch(ppo, metrics):
        if not first_solved and metrics["episode_return_recent"] >= SOLVED_RETURN:
            first_solved.append(metrics["time_s"])

    trainer.train(callback=watch)
    command_seconds = time.perf_counter() - started
    returns = evaluate_policy(Policy(trainer.model, config, trainer.obs_normalizer), gymnasium_env_factory(env_id),
                              eval_episodes)
    return {
        "backend": backend,
        "seed": seed,
        "seconds_to_solved": first_solved[0] if first_solved else float("nan"),
        "train_seconds": trainer.train_seconds,
        "setup_and_train_seconds": command_seconds,
        "steps": trainer.global_step,
        "steps_per_second": trainer.global_step / trainer.train_seconds,
        "eval_mean": float(returns.mean()),
    }


def benchmark_training(env_id: str, seeds: tuple[int, ...], backends: tuple[str, ...], eval_episodes: int) -> list[dict]:
    rows = []
    for seed in seeds:  # backends alternate, so load from other processes hits both alike
        for backend in backends:
            row = train_one(env_id, backend, seed, eval_episodes)
            print(
                f"  {backend:>9} seed {seed}: solved {reached_in(row['seconds_to_solved'], 1)}, "
                f"train {row['train_seconds']:.1f} s ({row['steps']:,} steps, {row['steps_per_second']:,.0f} steps/s), "
                f"eval {row['eval_mean']:.1f}",
                flush=True,
            )
            rows.append(row)
    return rows


def format_training_table(rows: list[dict], backends: tuple[str, ...], eval_threshold: float = SOLVED_RETURN) -> str:
    def median(values):
        values = [v for v in values if v == v]  # drop NaN (never solved)
        return statistics.median(values) if values else float("nan")

    lines = [f"{'backend':>9} {'seeds':>5} {'eval>=475':>9} {'med s to 475':>12} {'med train s':>11} {'med steps/s':>11} {'med eval':>8}"]
    medians = {}
    for backend in backends:
        mine = [row for row in rows if row["backend"] == backend]
        medians[backend] = {
            key: median([row[key] for row in mine])
            for key in ("seconds_to_solved", "train_seconds", "steps_per_second", "eval_mean")
        }
        successes = sum(row["eval_mean"] >= eval_threshold for row in mine)
        m = medians[backend]
        lines.append(
            f"{backend:>9} {len(mine):>5} {successes:>9} {m['seconds_to_solved']:>12.1f} {m['train_seconds']:>11.1f} "
            f"{m['steps_per_second']:>11,.0f} {m['eval_mean']:>8.1f}"
        )
    if {"torch", "gymnasium"} <= set(backends):
        t, g = medians["torch"], medians["gymnasium"]
        lines.append(
            f"torch/gymnasium: time to 475 x{t['seconds_to_solved'] / g['seconds_to_solved']:.3f}, "
            f"train time x{t['train_seconds'] / g['train_seconds']:.3f}, steps/s x{t['steps_per_second'] / g['steps_per_second']:.1f}"
        )
    return "\n".join(lines)


# ----- section 3: the whole command, start to exit -------------------------------------------

# The SB3 zoo's tuned PPO for CartPole-v1 (rl-baselines3-zoo hyperparams/ppo.yml): 8 envs ×
# 32 steps, minibatches of 256, 20 epochs, γ 0.98, λ 0.8, ent 0, lr and clip range
# annealed linearly from 1e-3 and 0.2, 100k steps; then 100 greedy episodes, as ours.
SB3_ZOO_CARTPOLE = """
import sys
import gymnasium as gym
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
seed = int(sys.argv[1])
envs = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
model = PPO("MlpPolicy", envs, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98, n_epochs=20, ent_coef=0.0,
            learning_rate=lambda left: left * 1e-3, clip_range=lambda left: left * 0.2, seed=seed, device="cpu", verbose=0)
model.learn(100_000)
mean, std = evaluate_policy(model, gym.make("CartPole-v1"), n_eval_episodes=100, deterministic=True)
print(f"evaluation on CartPole-v1: {mean:.1f} ± {std:.1f}")
"""


def run_command(argv: list[str]) -> tuple[float, str]:
    """Wall-clock seconds of a fresh process from start to exit, and its stdout."""
    import subprocess

    started = time.perf_counter()
    finished = subprocess.run(argv, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if finished.returncode != 0:
        raise ValueError(f"{' '.join(argv[:3])} ... failed: {finished.stderr.strip().splitlines()[-1:]}")
    return seconds, finished.stdout


def evaluation_mean(stdout: str) -> float:
    line = next(line for line in stdout.splitlines() if line.startswith("evaluation on"))
    return float(line.split(":")[1].split("±")[0])


def reached_in(seconds: float, digits: int, suffix: str = "") -> str:
    """How a row's seconds_to_solved reads: 'after 1.23 s' + suffix, or 'not reached' where it is NaN."""
    return "not reached" if math.isnan(seconds) else f"after {seconds:.{digits}f} s{suffix}"


def seconds_to_solved(run_dir) -> float:
    """Training seconds at the first iteration whose last-20-episode mean reached 475 (metrics.csv)."""
    from ppo.runs.logger import read_metrics

    for row in read_metrics(run_dir / "metrics.csv"):
        if (row.get("episode_return_recent") or -math.inf) >= SOLVED_RETURN:
            return row["time_s"]
    return float("nan")


def benchmark_commands(seeds: tuple[int, ...], sb3_python: str | None, sb3_every: int) -> list[dict]:
    import tempfile
    from pathlib import Path

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for index, seed in enumerate(seeds):
            if sb3_python and index % sb3_every == 0:
                seconds, stdout = run_command([sb3_python, "-c", SB3_ZOO_CARTPOLE, str(seed)])
                rows.append({"who": "sb3-zoo", "seed": seed, "command_seconds": seconds, "eval_mean": evaluation_mean(stdout),
                             "seconds_to_solved": float("nan")})
                print(f"  sb3-zoo   seed {seed}: {seconds:.1f} s, eval {rows[-1]['eval_mean']:.1f}", flush=True)
            run_dir = Path(folder) / f"seed{seed}"
            seconds, stdout = run_command([*console_argv("ppo-train"), "--seed", str(seed),
                                           "--run-dir", str(run_dir), "--no-progress"])
            rows.append({"who": "ppo-train", "seed": seed, "command_seconds": seconds, "eval_mean": evaluation_mean(stdout),
                         "seconds_to_solved": seconds_to_solved(run_dir)})
            print(f"  ppo-train seed {seed}: {seconds:.1f} s, 475 {reached_in(rows[-1]['seconds_to_solved'], 2, ' of training')}, "
                  f"eval {rows[-1]['eval_mean']:.1f}", flush=True)
    return rows


def format_command_table(rows: list[dict]) -> str:
    lines = [f"{'command':>9} {'runs':>4} {'eval>=475':>9} {'med command s':>13} {'med s to 475':>12}"]
    medians = {}
    for who in ("ppo-train", "sb3-zoo"):
        mine = [row for row in rows if row["who"] == who]
        if not mine:
            continue
        solved = [row["seconds_to_solved"] for row in mine if row["seconds_to_solved"] == row["seconds_to_solved"]]
        medians[who] = statistics.median(row["command_seconds"] for row in mine)
        lines.append(f"{who:>9} {len(mine):>4} {sum(row['eval_mean'] >= SOLVED_RETURN for row in mine):>9} "
                     f"{medians[who]:>13.1f} {statistics.median(solved) if solved else float('nan'):>12.2f}")
    if len(medians) == 2:
        lines.append(f"sb3-zoo / ppo-train, median command seconds: {medians['sb3-zoo'] / medians['ppo-train']:.1f}x")
    return "\n".join(lines)


# ----- command line ------------------------------------------------------------------------


def build_parser() -> OneLineArgumentParser:
    parser = OneLineArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="CartPole-v1", help="environment id (default: CartPole-v1)")
    parser.add_argument("--num-envs", type=int, nargs="+", default=[8, 64, 512, 4096], metavar="N",
                        help="numbers of env copies (default: 8 64 512 4096)")
    parser.add_argument("--steps", type=int, default=200, help="steps per backend per round, at most (default: 200)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of turns (default: 5)")
    parser.add_argument("--max-seconds", type=float, default=0.5,
                        help="cut a backend's block short after this many seconds (default: 0.5)")
    parser.add_argument("--device", default="cpu", help="device of the torch env (default: cpu)")
    parser.add_argument("--dtype", choices=["float64", "float32"], default="float64",
                        help="dtype the torch env's physics runs in (default: float64)")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default: 1, fastest here)")
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS),
                        help="backends to time (default: all)")
    parser.add_argument("--train-seeds", type=int, nargs="*", default=[1, 2, 3, 4, 5], metavar="SEED",
                        help="seeds of the PPO training comparison; none = skip it (default: 1 2 3 4 5)")
    parser.add_argument("--train-backends", nargs="+", choices=("gymnasium", "torch"), default=["gymnasium", "torch"],
                        help="backends of the training comparison (default: both)")
    parser.add_argument("--eval-episodes", type=int, default=100, help="greedy evaluation episodes per run (default: 100)")
    parser.add_argument("--skip-stepping", action="store_true", help="only the training comparison")
    parser.add_argument("--command-seeds", type=int, nargs="*", default=[], metavar="SEED",
                        help="section 3: time the whole `ppo-train --seed SEED` command for these seeds (default: none)")
    parser.add_argument("--sb3-python", default=None, metavar="PYTHON",
                        help="a Python with stable-baselines3: run the SB3 zoo's CartPole job alongside section 3")
    parser.add_argument("--sb3-every", type=int, default=1, metavar="K",
                        help="run the SB3 job before every K-th seed of section 3 (default: 1)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_with_user_errors(PROG, lambda: _run(args), (ValueError, gym.error.Error))


def _run(args) -> int:
    if torch.device(args.device).type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {args.device}: CUDA is not available")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    keep_freed_memory()  # the allocator setting ppo-train makes, for every backend alike
    backends = tuple(backend for backend in BACKENDS if backend in args.backends)
    gym.spec(args.env_id)  # an unknown id fails here, before the header
    print(f"{args.env_id}: env-steps/s of a random policy, median of {args.rounds} rounds; "
          f"torch on {args.device}, {args.dtype} physics, {torch.get_num_threads()} intra-op threads", flush=True)
    if not args.skip_stepping:
        rows = benchmark_stepping(
            args.env_id, tuple(args.num_envs), args.steps, args.rounds, args.max_seconds,
            args.device, getattr(torch, args.dtype), backends,
        )
        print(format_stepping_table(rows, backends))
    if args.train_seeds:
        train_backends = tuple(args.train_backends)
        print(f"\nPPO on {args.env_id} with each backend's shipped defaults, evaluated greedily on gymnasium:", flush=True)
        rows = benchmark_training(args.env_id, tuple(args.train_seeds), train_backends, args.eval_episodes)
        print(format_training_table(rows, train_backends))
    if args.command_seeds:
        if args.sb3_every < 1:
            raise ValueError(f"--sb3-every {args.sb3_every} must be a positive integer")
        print(f"\nThe whole command, start to exit: ppo-train --seed S (CartPole-v1, its preset, 100 greedy "
              f"evaluation episodes){' and the SB3 zoo job in turns' if args.sb3_python else ''}:", flush=True)
        rows = benchmark_commands(tuple(args.command_seeds), args.sb3_python, args.sb3_every)
        print(format_command_table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
