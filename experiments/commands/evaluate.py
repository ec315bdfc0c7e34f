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

Every episode ends within a step limit: the env's own time limit (CartPole-v1: 500), or
--max-episode-steps N. An env registered without one (the MinAtar games, as the `minatar`
package registers them) is played for at most UNLIMITED_ENV_STEP_LIMIT = 1,000 steps, the
episode length of gymnax's MinAtar games, on which the published PPO figures for MinAtar
were measured; without a limit a policy that never loses would never finish its
evaluation. The limit played under is written into the result file.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from experiments.commands.cli import OneLineArgumentParser, check_writable_file, run_with_user_errors
from ppo.trainers.base import TrainingDiverged
from ppo.config import ConfigError

PROG = "ppo-eval"
RECORDING_NAME = "episode.gif"
EVALUATION_NAMES = {True: "eval.json", False: "eval-sample.json"}  # greedy → ..., sampled → ...
UNLIMITED_ENV_STEP_LIMIT = 1_000  # steps per evaluation episode where the env registers no time limit


def evaluation_name(greedy: bool) -> str:
    """The file an evaluation writes into the run folder: greedy and sampled ones are kept apart."""
    return EVALUATION_NAMES[greedy]


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


def check_max_episode_steps(max_episode_steps: int | None) -> None:
    if max_episode_steps is not None and (isinstance(max_episode_steps, bool) or max_episode_steps < 1):
        raise ConfigError(f"max episode steps = {max_episode_steps} must be a positive integer")


def episode_step_limit(env_id: str, max_episode_steps: int | None = None) -> int:
    """The steps an evaluation episode may last: `max_episode_steps` if given, else the env's
    registered time limit, else UNLIMITED_ENV_STEP_LIMIT (ConfigError for a limit below 1)."""
    import gymnasium as gym

    check_max_episode_steps(max_episode_steps)
    if max_episode_steps is not None:
        return int(max_episode_steps)
    return gym.spec(env_id).max_episode_steps or UNLIMITED_ENV_STEP_LIMIT


def evaluation_env_factory(env_id: str, frame_stack: int = 1, max_episode_steps: int | None = None, **kwargs):
    """The gymnasium env factory that evaluation and recording play on: each copy's episodes
    end within `episode_step_limit(env_id, max_episode_steps)` steps (truncated there). The
    env's own limit adds no wrapper, so CartPole-v1 keeps gymnasium's vectorised version."""
    import gymnasium as gym

    from envs.factory import gymnasium_env_factory

    step_limit = episode_step_limit(env_id, max_episode_steps)
    if step_limit != gym.spec(env_id).max_episode_steps:
        kwargs["max_episode_steps"] = step_limit
    return gymnasium_env_factory(env_id, frame_stack=frame_stack, **kwargs)


def check_seed(seed: int | None) -> None:
    if seed is not None and not 0 <= seed < 2**32 - 10_000:
        raise ConfigError(f"seed = {seed} must be an integer in [0, 2**32 - 10000) (gymnasium seeds are unsigned)")


def evaluate_run(run_dir: Path, episodes: int, greedy: bool = True, seed: int | None = None,
                 verbose: bool = True, max_episode_steps: int | None = None) -> dict:
    """Evaluate, print one summary line naming the file (if verbose), and write the result next
    to the checkpoint: eval.json if greedy, eval-sample.json if sampled (`evaluation_name`)."""
    import torch

    from ppo.runs.evaluation import evaluate_policy, load_policy

    from ppo.config import PPOConfig
    from ppo.trainers.ppo import PPO

    if episodes <= 0:
        raise ConfigError(f"episodes = {episodes} must be a positive integer")
    check_seed(seed)
    check_max_episode_steps(max_episode_steps)
    PPO.load_run(run_dir, PPOConfig, required_keys=("model", "spaces"))  # checksum, config, run folder agree
    folder = run_dir if run_dir.is_dir() else run_dir.parent
    output = check_writable_file(folder / evaluation_name(greedy), "the evaluation file")
    policy = load_policy(run_dir)
    torch.set_num_threads(policy.config.num_threads)  # a 64-wide network runs fastest on one thread
    step_limit = episode_step_limit(policy.config.env_id, max_episode_steps)
    make_env = evaluation_env_factory(policy.config.env_id, policy.config.frame_stack, step_limit)
    returns = evaluate_policy(policy, make_env, episodes, greedy=greedy, seed=seed)
    result = {
        "env_id": policy.config.env_id,
        "episodes": int(len(returns)),
        "mean_return": float(returns.mean()),
        "std_return": float(returns.std()),
        "min_return": float(returns.min()),
        "max_return": float(returns.max()),
        "greedy": greedy,
        "seed": seed if seed is not None else policy.config.seed + 10_000,
        "max_episode_steps": step_limit,
    }
    if not np.isfinite(returns).all():
        raise TrainingDiverged(f"the policy of {run_dir} earns non-finite returns; nothing written")
    output.write_text(json.dumps(result, indent=2, allow_nan=False) + "\n")
    mode = "greedy" if greedy else "sampled"
    if verbose:
        print(f"evaluation on {result['env_id']}: {result['mean_return']:.1f} ± {result['std_return']:.1f} "
              f"over {len(returns)} {mode} episodes → {output}")
    return result


def record_run(run_dir: Path, greedy: bool = True, seed: int | None = None,
               max_episode_steps: int | None = None) -> dict:
    """Write one episode of the run's policy to RECORDING_NAME in the run folder."""
    from ppo.runs.evaluation import load_policy
    from ppo.runs.recording import prepare_headless_rendering, record_episode

    check_seed(seed)
    check_max_episode_steps(max_episode_steps)
    policy = load_policy(run_dir)
    step_limit = episode_step_limit(policy.config.env_id, max_episode_steps)
    folder = run_dir if run_dir.is_dir() else run_dir.parent
    prepare_headless_rendering()  # before the first env is made: MuJoCo reads MUJOCO_GL when it is imported
    make_env = evaluation_env_factory(policy.config.env_id, policy.config.frame_stack, step_limit,
                                      render_mode="rgb_array")
    result = record_episode(policy, make_env, folder / RECORDING_NAME, seed=seed, greedy=greedy)
    print(f"recorded one {'greedy' if greedy else 'sampled'} episode of {policy.config.env_id} "
          f"(return {result['return']:.1f}, {result['frames']} frames): {result['path']}")
    return result


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
