"""Invalid-action masking against a penalty for invalid actions, on the toy task of envs.toy_masked.

    python -m experiments.studies.masking_experiment                         # 10 seeds per setting, about 30 s on a 2-core CPU
    python -m experiments.studies.masking_experiment --seeds 100-104 --json runs/masking.json
    python -m experiments.studies.masking_experiment --curve-points 16 --plot runs/masking_curves.png

Each step of the toy task, `--num-valid` of `--num-actions` actions are valid and one of them
is the target, shown as a one-hot vector; choosing it earns 1. The two settings train the
same PPO on the same budget:

    mask      the env's action mask goes into the policy (ppo.algorithm.distributions): invalid actions
              get probability 0 at sampling, in the update and at evaluation
    penalty   the policy sees the mask as `--num-actions` more inputs but may choose any action; an
              invalid one earns −`--penalty` (Huang & Ontañón 2022's "invalid action penalty")

Every trained policy is scored by greedy play on fresh episodes (`--eval-envs` copies, one
episode each): the share of steps on which it chose the target (the task's success rate,
1 at best; a uniform choice among the valid actions gets 1 / num_valid) and, for the penalty
setting, the share of invalid choices. The table gives each setting's IQM and mean over
seeds with 95% stratified-bootstrap intervals (experiments.commands.statistics). Seeds 1–3 were
used to choose the budget and learning rate; the default seeds, 100–109, were not.

Learning curves: each run is also scored, the same greedy way, at `--curve-points`
iterations evenly spaced over its training (experiments.studies.learning_curves), from iteration 0
(before the first update) to the last. The last point is the final score itself
(`--eval-envs` episodes); the points before it play fewer, `--curve-eval-envs` episodes
(default 250, a quarter of the final evaluation's: the curve's scoring then takes about 5%
of the run time), the same episodes at each of them (the evaluation seed is the run's
seed + 10000, as for the final score), so that they differ only by the policy. A second
table gives, per point (env steps), each setting's IQM target rate over seeds with its 95%
stratified-bootstrap interval, the mean invalid rate of the penalty setting, and where the
two IQM intervals do not overlap ("CIs apart"). At iteration 0 they are apart by
construction: the untrained masked policy already chooses among the valid actions only.
`--plot PATH` draws the IQM lines with their intervals shaded, and `--json` holds every
run's curve and the intervals per point.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

from envs.toy_masked import MaskedChoiceVecEnv
from experiments.commands.cli import OneLineArgumentParser, check_writable_file, configure_process, run_with_user_errors
from experiments.studies.learning_curves import check_plot_path, curve_iterations
from ppo.config import ConfigError, PPOConfig
from ppo.runs.evaluation import EVAL_SEED_OFFSET, Policy
from ppo.trainers.ppo import PPO

PROG = "python -m experiments.studies.masking_experiment"
SETTINGS = ("mask", "penalty")
NUM_ENVS, NUM_STEPS = 16, 32  # one iteration: NUM_ENVS · NUM_STEPS = 512 env steps


def build_parser() -> OneLineArgumentParser:
    parser = OneLineArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="100-109", help="seeds per setting: a range A-B or a comma list (default: 100-109)")
    parser.add_argument("--num-actions", type=int, default=32, help="actions of the task (default: 32)")
    parser.add_argument("--num-valid", type=int, default=3, help="valid actions per step (default: 3)")
    parser.add_argument("--episode-length", type=int, default=8, help="steps per episode (default: 8)")
    parser.add_argument("--penalty", type=float, default=0.1, help="reward of an invalid action is −penalty (default: 0.1)")
    parser.add_argument("--total-timesteps", type=int, default=16 * 32 * 30,
                        help=f"budget per run, whole iterations of {NUM_ENVS * NUM_STEPS} steps (default: 15360)")
    parser.add_argument("--learning-rate", type=float, default=2.5e-3, help="Adam step size (default: 2.5e-3)")
    parser.add_argument("--eval-envs", type=int, default=1000,
                        help="greedy evaluation episodes per run for the final score, the curve's last point (default: 1000)")
    parser.add_argument("--curve-points", type=int, default=11,
                        help="points of each learning curve, at iterations evenly spaced from 0 (before training) "
                             "to the last; at most the run's iterations + 1 (default: 11, every 3rd iteration "
                             "of the default budget)")
    parser.add_argument("--curve-eval-envs", type=int, default=250,
                        help="greedy evaluation episodes at each curve point before the last (the same episodes "
                             "at each), fewer than --eval-envs so the curve costs little (default: 250)")
    parser.add_argument("--plot", type=Path, default=None,
                        help="draw the learning curves (IQM over seeds, 95%% interval shaded) into this image file")
    parser.add_argument("--json", type=Path, default=None,
                        help="also write every run's scores and curve, the table and the curves' intervals here")
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


def make_config(args, setting: str, seed: int) -> PPOConfig:
    return PPOConfig(env_id=f"MaskedChoice-{setting}", num_envs=NUM_ENVS, num_steps=NUM_STEPS, seed=seed,
                     total_timesteps=args.total_timesteps, learning_rate=args.learning_rate, tensorboard=False)


def greedy_rates(model, config: PPOConfig, args, setting: str, episodes: int) -> dict[str, float]:
    """Greedy play on `episodes` fresh episodes, always the same ones for a seed (env seeded with
    seed + EVAL_SEED_OFFSET): the share of steps choosing the target and the share choosing an invalid action."""
    env = make_env(args, episodes, setting)
    obs = env.reset(seed=config.seed + EVAL_SEED_OFFSET)
    policy = Policy(model, config, None)
    hits = invalid = 0.0
    for _ in range(args.episode_length):
        action = policy.act(obs, greedy=True)
        hits += float((action == env.target).float().mean())
        invalid += float((~env.mask.gather(1, action.unsqueeze(1)).squeeze(1)).float().mean())
        obs = env.step(action).obs
    return {"target_rate": hits / args.episode_length, "invalid_rate": invalid / args.episode_length}


def train_one(args, setting: str, seed: int) -> dict:
    """Train one run, scoring it greedily at the curve's points; the final score is the last point.

    Scoring draws from no generator that training uses (greedy actions, an env of its own),
    so the curve leaves the training run as it would be without it."""
    config = make_config(args, setting, seed)
    trainer = PPO(config, make_env(args, config.num_envs, setting), progress=False)
    points = curve_iterations(args.curve_points, config.num_iterations)
    curve: list[dict] = []
    eval_seconds = 0.0

    def score_point(trainer: PPO) -> None:
        nonlocal eval_seconds
        if trainer.iteration not in points:
            return
        started = time.perf_counter()
        episodes = args.eval_envs if trainer.iteration == points[-1] else args.curve_eval_envs
        rates = greedy_rates(trainer.model, config, args, setting, episodes)
        curve.append({"iteration": trainer.iteration, "env_steps": trainer.global_step, "episodes": episodes, **rates})
        eval_seconds += time.perf_counter() - started

    score_point(trainer)  # iteration 0, before any update
    trainer.train(callback=lambda trainer, _metrics: score_point(trainer))
    final = curve[-1]
    return {"target_rate": final["target_rate"], "invalid_rate": final["invalid_rate"],
            "train_return": trainer.recent_return(), "eval_s": eval_seconds, "curve": curve}


def check_arguments(args) -> list[int]:
    """The seeds; ConfigError (one line) for a bad value. Every value is checked before any file is touched."""
    seeds = parse_seed_list(args.seeds)
    if not 1 <= args.num_valid <= args.num_actions:
        raise ConfigError(f"--num-valid {args.num_valid} must be between 1 and --num-actions {args.num_actions}")
    for name in ("episode_length", "total_timesteps", "eval_envs", "curve_eval_envs"):
        if getattr(args, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} {getattr(args, name)} must be a positive integer")
    if args.total_timesteps < NUM_ENVS * NUM_STEPS:
        raise ConfigError(f"--total-timesteps {args.total_timesteps} is less than one iteration "
                          f"({NUM_ENVS} envs × {NUM_STEPS} steps = {NUM_ENVS * NUM_STEPS})")
    curve_iterations(args.curve_points, args.total_timesteps // (NUM_ENVS * NUM_STEPS))
    if args.plot is not None:
        check_plot_path(args.plot)
    for flag, path in (("--json", args.json), ("--plot", args.plot)):
        if path is not None:
            check_writable_file(path, flag)
    return seeds


def interval_text(row: dict[str, float], statistic: str) -> str:
    """`value [low, high]` of an interval_estimates row, e.g. 0.812 [0.750, 0.875]."""
    return f"{row[statistic]:.3f} [{row[statistic + '_low']:.3f}, {row[statistic + '_high']:.3f}]"


def separation(low_row: dict[str, float], high_row: dict[str, float]) -> bool:
    """Whether the IQM interval of `high_row` lies wholly above that of `low_row`."""
    return high_row["iqm_low"] > low_row["iqm_high"]


def curve_table(runs: dict[str, list[dict]], curve_intervals: dict[str, list[dict]]) -> list[str]:
    """The learning-curve table: per point, each setting's IQM [95% CI] and the penalty's mean invalid rate."""
    first = runs[SETTINGS[0]][0]["curve"]
    lines = [f"{'iteration':>9} {'env steps':>9}  " + "  ".join(f"{setting:<22}" for setting in SETTINGS)
             + f"  {'invalid (mean)':>14}  CIs apart"]
    for index, point in enumerate(first):
        rows = {setting: curve_intervals[setting][index] for setting in SETTINGS}
        invalid = np.mean([run["curve"][index]["invalid_rate"] for run in runs["penalty"]])
        mask, penalty = rows["mask"], rows["penalty"]
        apart = "mask above" if separation(penalty, mask) else "penalty above" if separation(mask, penalty) else ""
        lines.append(f"{point['iteration']:>9} {point['env_steps']:>9}  "
                     + "  ".join(f"{interval_text(rows[setting], 'iqm'):<22}" for setting in SETTINGS)
                     + f"  {invalid:>14.3f}  {apart}")
    return lines


def _run(args) -> int:
    seeds = check_arguments(args)
    configure_process(1)
    from experiments.studies.learning_curves import curve_intervals, plot_learning_curves
    from experiments.commands.statistics import interval_estimates

    started = time.perf_counter()
    runs = {setting: [train_one(args, setting, seed) for seed in seeds] for setting in SETTINGS}
    scores = {setting: np.array([run["target_rate"] for run in results]) for setting, results in runs.items()}
    intervals = interval_estimates(scores)
    curves = {setting: np.array([[point["target_rate"] for point in run["curve"]] for run in results])
              for setting, results in runs.items()}
    curve_rows = curve_intervals(curves)
    chance = 1 / args.num_valid
    print(f"{args.num_actions} actions, {args.num_valid} valid per step, {args.total_timesteps} steps per run, "
          f"seeds {seeds[0]}..{seeds[-1]} ({len(seeds)} per setting); greedy target rate "
          f"(chance among the valid: {chance:.3f})")
    print(f"{'setting':<9} {'IQM [95% CI]':<24} {'mean [95% CI]':<24} {'invalid rate (mean)':>19}")
    for setting in SETTINGS:
        row = intervals[setting]
        invalid = np.mean([run["invalid_rate"] for run in runs[setting]])
        print(f"{setting:<9} {interval_text(row, 'iqm'):<24} {interval_text(row, 'mean'):<24} {invalid:>19.3f}")
    print(f"\nlearning curves: greedy target rate, IQM [95% CI] over the {len(seeds)} seeds; invalid rate of the "
          f"penalty setting (mean); {args.curve_eval_envs} episodes per point, the last {args.eval_envs} (the final score)")
    print("\n".join(curve_table(runs, curve_rows)))
    eval_seconds = sum(run["eval_s"] for results in runs.values() for run in results)
    print(f"\n{time.perf_counter() - started:.0f} s (of which {eval_seconds:.1f} s scoring the curves' points)")
    first = runs[SETTINGS[0]][0]["curve"]
    if args.plot is not None:
        plot_learning_curves(args.plot, [point["env_steps"] for point in first], curve_rows, len(seeds),
                             "greedy target rate", f"{args.num_actions} actions, {args.num_valid} valid per step",
                             chance)
        print(f"plot: {args.plot}")
    if args.json is not None:
        curves_record = {"iterations": [point["iteration"] for point in first],
                         "env_steps": [point["env_steps"] for point in first],
                         "episodes": [point["episodes"] for point in first],
                         "target_rate": curve_rows,
                         "invalid_rate_mean": {setting: np.mean([[point["invalid_rate"] for point in run["curve"]]
                                                                 for run in results], axis=0).tolist()
                                               for setting, results in runs.items()}}
        settings = vars(args) | {"json": str(args.json), "plot": None if args.plot is None else str(args.plot),
                                 "seeds": seeds}
        args.json.write_text(json.dumps({"settings": settings, "runs": runs, "intervals": intervals,
                                         "curves": curves_record}, indent=2) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_with_user_errors(PROG, lambda: _run(args))


if __name__ == "__main__":
    torch.set_num_threads(1)
    sys.exit(main())
