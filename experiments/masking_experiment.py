"""Invalid-action masking against a penalty for invalid actions, on the toy task of envs.toy_masked.

    python -m experiments.masking_experiment                         # 10 seeds per setting, about 3 min on a CPU
    python -m experiments.masking_experiment --seeds 100-104 --json masking.json

Each step of the toy task, `--num-valid` of `--num-actions` actions are valid and one of them
is the target, shown as a one-hot vector; choosing it earns 1. The two settings train the
same PPO on the same budget:

    mask      the env's action mask goes into the policy (ppo.distributions): invalid actions
              get probability 0 at sampling, in the update and at evaluation
    penalty   the policy sees the mask as 16 more inputs but may choose any action; an
              invalid one earns −`--penalty` (Huang & Ontañón 2022's "invalid action penalty")

Every trained policy is scored by greedy play on fresh episodes (`--eval-envs` copies, one
episode each): the share of steps on which it chose the target (the task's success rate,
1 at best; a uniform choice among the valid actions gets 1 / num_valid) and, for the penalty
setting, the share of invalid choices. The table gives each setting's IQM and mean over
seeds with 95% stratified-bootstrap intervals (experiments.statistics). Seeds 1–3 were
used to choose the budget and learning rate; the default seeds, 100–109, were not.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from envs.toy_masked import MaskedChoiceVecEnv
from experiments.cli import OneLineArgumentParser, check_writable_file, configure_process, run_with_user_errors
from ppo.config import ConfigError, PPOConfig
from ppo.evaluation import Policy
from ppo.trainer import PPO

PROG = "python -m experiments.masking_experiment"
SETTINGS = ("mask", "penalty")


def build_parser() -> OneLineArgumentParser:
    parser = OneLineArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="100-109", help="seeds per setting: a range A-B or a comma list (default: 100-109)")
    parser.add_argument("--num-actions", type=int, default=32, help="actions of the task (default: 32)")
    parser.add_argument("--num-valid", type=int, default=3, help="valid actions per step (default: 3)")
    parser.add_argument("--episode-length", type=int, default=8, help="steps per episode (default: 8)")
    parser.add_argument("--penalty", type=float, default=0.1, help="reward of an invalid action is −penalty (default: 0.1)")
    parser.add_argument("--total-timesteps", type=int, default=16 * 32 * 30, help="budget per run (default: 15360)")
    parser.add_argument("--learning-rate", type=float, default=2.5e-3, help="Adam step size (default: 2.5e-3)")
    parser.add_argument("--eval-envs", type=int, default=1000, help="greedy evaluation episodes per run (default: 1000)")
    parser.add_argument("--json", type=Path, default=None, help="also write every run's scores and the table here")
    return parser


def parse_seed_list(text: str) -> list[int]:
    try:
        if "-" in text.strip()[1:]:
            first, last = (int(part) for part in text.split("-", 1))
            seeds = list(range(first, last + 1))
        else:
            seeds = [int(part) for part in text.split(",")]
    except ValueError:
        raise ConfigError(f"--seeds {text!r} is not a range A-B or a comma list of integers") from None
    if len(seeds) < 2:
        raise ConfigError(f"--seeds {text!r} gives {len(seeds)} seed(s); intervals need at least 2")
    return seeds


def make_env(args, num_envs: int, invalid: str) -> MaskedChoiceVecEnv:
    return MaskedChoiceVecEnv(num_envs, args.num_actions, args.num_valid, args.episode_length, invalid, args.penalty)


def train_one(args, setting: str, seed: int) -> dict[str, float]:
    """Train one run; its greedy target rate and invalid-action rate on fresh episodes."""
    config = PPOConfig(env_id=f"MaskedChoice-{setting}", num_envs=16, num_steps=32, seed=seed,
                       total_timesteps=args.total_timesteps, learning_rate=args.learning_rate, tensorboard=False)
    trainer = PPO(config, make_env(args, config.num_envs, setting), progress=False)
    trainer.train()
    env = make_env(args, args.eval_envs, setting)
    obs = env.reset(seed=seed + 10_000)
    policy = Policy(trainer.model, config, None)
    hits = invalid = 0.0
    for _ in range(args.episode_length):
        action = policy.act(obs, greedy=True)
        hits += float((action == env.target).float().mean())
        invalid += float((~env.mask.gather(1, action.unsqueeze(1)).squeeze(1)).float().mean())
        obs = env.step(action).obs
    return {"target_rate": hits / args.episode_length, "invalid_rate": invalid / args.episode_length,
            "train_return": trainer.recent_return()}


def check_arguments(args) -> list[int]:
    seeds = parse_seed_list(args.seeds)
    if not 1 <= args.num_valid <= args.num_actions:
        raise ConfigError(f"--num-valid {args.num_valid} must be between 1 and --num-actions {args.num_actions}")
    for name in ("episode_length", "total_timesteps", "eval_envs"):
        if getattr(args, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} {getattr(args, name)} must be a positive integer")
    if args.json is not None:
        check_writable_file(args.json, "--json")
    return seeds


def _run(args) -> int:
    seeds = check_arguments(args)
    configure_process(1)
    from experiments.statistics import interval_estimates

    started = time.perf_counter()
    runs = {setting: [train_one(args, setting, seed) for seed in seeds] for setting in SETTINGS}
    scores = {setting: np.array([run["target_rate"] for run in results]) for setting, results in runs.items()}
    intervals = interval_estimates(scores)
    print(f"{args.num_actions} actions, {args.num_valid} valid per step, {args.total_timesteps} steps per run, "
          f"seeds {seeds[0]}..{seeds[-1]} ({len(seeds)} per setting); greedy target rate "
          f"(chance among the valid: {1 / args.num_valid:.3f})")
    print(f"{'setting':<9} {'IQM [95% CI]':<24} {'mean [95% CI]':<24} {'invalid rate (mean)':>19}")
    for setting in SETTINGS:
        row = intervals[setting]
        invalid = np.mean([run["invalid_rate"] for run in runs[setting]])
        print(f"{setting:<9} {row['iqm']:.3f} [{row['iqm_low']:.3f}, {row['iqm_high']:.3f}]{'':<5} "
              f"{row['mean']:.3f} [{row['mean_low']:.3f}, {row['mean_high']:.3f}]{'':<5} {invalid:>19.3f}")
    print(f"\n{time.perf_counter() - started:.0f} s")
    if args.json is not None:
        args.json.write_text(json.dumps({"settings": vars(args) | {"json": str(args.json), "seeds": seeds},
                                         "runs": runs, "intervals": intervals}, indent=2) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_with_user_errors(PROG, lambda: _run(args))


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(main())
