"""The batched torch MinAtar Breakout against the `minatar` package, side by side in one run.

Env-steps per second of a random policy, one column per backend:

  minatar  the `minatar` package's v1 gymnasium env (`minatar.gym.BaseEnv`), N copies in
           gymnasium's SyncVectorEnv: N Python games stepped one after another
  torch    envs.minatar.make_minatar_vec_env(env_id, N, device): this project's batched env

Both with the package's defaults: sticky actions with p = 0.1, no time limit.

    python -m experiments.benchmarks.minatar                        # N = 1, 64, 1024, 4096
    python -m experiments.benchmarks.minatar --env-id MinAtar/SpaceInvaders-v1 --num-envs 64 1024

The `minatar` package is GPL-licensed and only a reference here: install it with
`pip install -c constraints.txt -e '.[minatar]'`. Actions, timing and ratios as in
`experiments.benchmarks.environments`: one random action sequence drawn before any timing, handed
to each backend in its native form; the backends take turns, a block of steps each per
round (cut short after --max-seconds, which caps the slow side at large N), and a figure
is the median over rounds, a ratio the median of the per-round ratios.
"""

from __future__ import annotations

import statistics
import sys

import gymnasium as gym
import torch

from experiments.benchmarks.environments import random_action_sequence, rates_in_turns
from experiments.commands.cli import OneLineArgumentParser, run_with_user_errors
from ppo.parallel.malloc import keep_freed_memory

PROG = "python -m experiments.benchmarks.minatar"
BACKENDS = ("minatar", "torch")
GAMES = {"MinAtar/Breakout-v1": "breakout", "MinAtar/SpaceInvaders-v1": "space_invaders"}


def make_backend(backend: str, env_id: str, num_envs: int, device: str, actions, warmup_steps: int):
    """(env, step) where step(i) applies the i-th batch of `actions` (steps, N); reset and warmed up."""
    if backend == "torch":
        from envs.minatar import make_minatar_vec_env

        env = make_minatar_vec_env(env_id, num_envs, device=device)
        batches = list(torch.as_tensor(actions, device=env.device).unbind(0))
    else:
        from minatar.gym import BaseEnv

        game = GAMES[env_id]
        env = gym.vector.SyncVectorEnv([lambda: BaseEnv(game, use_minimal_action_set=True) for _ in range(num_envs)])
        batches = list(actions)
    env.reset(seed=0)
    for i in range(warmup_steps):
        env.step(batches[i])
    return env, lambda i: env.step(batches[i])


def benchmark(env_id: str, num_envs_list: tuple[int, ...], steps: int, rounds: int, max_seconds: float,
              device: str, warmup_steps: int = 5) -> list[dict]:
    """One row per N: median env-steps/s of each backend and the median per-round ratio torch/minatar."""
    sync = torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
    from envs.minatar import make_minatar_vec_env

    action_space = make_minatar_vec_env(env_id, 1).single_action_space
    rows = []
    for num_envs in num_envs_list:
        actions = random_action_sequence(action_space, steps, num_envs)
        backends = {backend: make_backend(backend, env_id, num_envs, device, actions, warmup_steps)
                    for backend in BACKENDS}
        per_round = rates_in_turns(backends, num_envs, steps, rounds, max_seconds, sync)
        row = {"num_envs": num_envs, **{backend: statistics.median(rates) for backend, rates in per_round.items()}}
        for env, _ in backends.values():
            env.close()
        row["torch/minatar"] = statistics.median(t / m for t, m in zip(per_round["torch"], per_round["minatar"]))
        rows.append(row)
        print(format_table([row], header=not rows[:-1]), flush=True)
    return rows


def format_table(rows: list[dict], header: bool = True) -> str:
    columns = (*BACKENDS, "torch/minatar")
    lines = [f"{'N':>6}" + "".join(f"{column:>16}" for column in columns)] if header else []
    for row in rows:
        cells = [f"{row[column]:>15.2f}x" if "/" in column else f"{row[column]:>16,.0f}" for column in columns]
        lines.append(f"{row['num_envs']:>6}" + "".join(cells))
    return "\n".join(lines)


def build_parser() -> OneLineArgumentParser:
    parser = OneLineArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="MinAtar/Breakout-v1", choices=list(GAMES),
                        help="the game (default: MinAtar/Breakout-v1)")
    parser.add_argument("--num-envs", type=int, nargs="+", default=[1, 64, 1024, 4096], metavar="N",
                        help="numbers of copies (default: 1 64 1024 4096)")
    parser.add_argument("--steps", type=int, default=200, help="steps per backend per round, at most (default: 200)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of turns (default: 5)")
    parser.add_argument("--max-seconds", type=float, default=0.5,
                        help="a block of steps stops after this many seconds (default: 0.5)")
    parser.add_argument("--device", default="cpu", help="device of the torch env (default: cpu)")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default: 1)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_with_user_errors(PROG, lambda: _run(args), (ValueError, gym.error.Error))


def _run(args) -> int:
    try:
        import minatar.gym  # noqa: F401
    except ImportError:
        raise ValueError("the `minatar` package is not installed: "
                         "pip install -c constraints.txt -e '.[minatar]'") from None
    if torch.device(args.device).type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"--device {args.device}: CUDA is not available")
    for name in ("steps", "rounds"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name} {getattr(args, name)} must be a positive integer")
    if any(n < 1 for n in args.num_envs):
        raise ValueError(f"--num-envs {args.num_envs}: every N must be a positive integer")
    torch.set_num_threads(args.threads)
    keep_freed_memory()  # the allocator setting ppo-train makes, for both backends alike
    print(f"{args.env_id}: env-steps/s of a random policy (sticky actions p = 0.1), median of {args.rounds} rounds; "
          f"torch on {args.device}, {torch.get_num_threads()} intra-op threads", flush=True)
    benchmark(args.env_id, tuple(args.num_envs), args.steps, args.rounds, args.max_seconds, args.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
