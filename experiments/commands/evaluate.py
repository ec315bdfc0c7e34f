"""Evaluate a trained run on the real gymnasium env: `ppo-eval RUN_DIR`.

    ppo-eval runs/CartPole-v1__seed1                  # 100 greedy episodes → eval.json
    ppo-eval runs/CartPole-v1__seed1 --sample         # sample actions from π instead → eval-sample.json
    ppo-eval runs/CartPole-v1__seed1 --episodes 20 --seed 7
    ppo-eval runs/CartPole-v1__seed1 --record         # and an animation of one episode
    ppo-eval runs/MinAtar_Breakout-v1__seed1 --max-episode-steps 5000

Prints mean ± std of the episodic return and the file it wrote into the run folder:
eval.json for greedy actions (the final score that sweep tables and plots read), or
eval-sample.json for sampled ones, so that one kind never overwrites the other. Sampled
actions are drawn from a generator seeded with --seed: the same seed, the same returns.
--record also plays one episode (greedy, or sampled with --sample; seed --seed or the
first evaluation seed) on the rendered env and writes it to episode.gif in the run
folder; it needs the optional extra 'record'.

Every episode ends within a step limit: the env's own time limit, or --max-episode-steps N
(experiments.commands.evaluation says which limit an env without one gets).
"""

from __future__ import annotations

import sys
from pathlib import Path

from experiments.commands.cli import OneLineArgumentParser, run_with_user_errors
from experiments.commands.evaluation import (
    EVALUATION_NAMES,
    RECORDING_NAME,
    UNLIMITED_ENV_STEP_LIMIT,
    evaluate_run,
    record_run,
)

PROG = "ppo-eval"


def build_parser() -> OneLineArgumentParser:
    parser = OneLineArgumentParser(prog=PROG, description="Evaluate a PPO checkpoint on the gymnasium environment.")
    parser.add_argument("run_dir", type=Path, help="run folder (or checkpoint file) to evaluate")
    parser.add_argument("--episodes", type=int, default=100, help="episodes to run (default: 100)")
    parser.add_argument("--sample", action="store_true",
                        help=f"sample actions from the policy instead of acting greedily; writes "
                             f"{EVALUATION_NAMES[False]} instead of {EVALUATION_NAMES[True]}")
    parser.add_argument("--seed", type=int, default=None,
                        help="evaluation seed of the envs and of sampled actions (default: the run's seed + 10000)")
    parser.add_argument("--record", action="store_true", help=f"also write one episode as an animation to {RECORDING_NAME} in the run folder (extra 'record')")
    parser.add_argument("--max-episode-steps", type=int, default=None,
                        help=f"end each episode after this many steps (default: the env's own time limit; "
                             f"{UNLIMITED_ENV_STEP_LIMIT:,} for an env registered without one, such as MinAtar's games)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def evaluate_and_record() -> int:
        if args.record:  # first, so a missing extra is reported before the long part
            record_run(args.run_dir, not args.sample, args.seed, args.max_episode_steps)
        evaluate_run(args.run_dir, args.episodes, not args.sample, args.seed, max_episode_steps=args.max_episode_steps)
        return 0

    return run_with_user_errors(PROG, evaluate_and_record)


if __name__ == "__main__":
    sys.exit(main())
