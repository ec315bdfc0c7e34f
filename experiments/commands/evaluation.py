"""Evaluation of a run folder's policy on the real gymnasium env, which `ppo-eval`, `ppo-train`
and a sweep's runs all call: `evaluate_run` writes eval.json (greedy) or eval-sample.json
(sampled), `record_run` an animation of one episode.

Every episode ends within a step limit: the env's own time limit (CartPole-v1: 500), or
max_episode_steps. An env registered without one (the MinAtar games, as the `minatar`
package registers them) is played for at most UNLIMITED_ENV_STEP_LIMIT = 1,000 steps, the
episode length of gymnax's MinAtar games, on which the published PPO figures for MinAtar
were measured; without a limit a policy that never loses would never finish its
evaluation. The limit played under is written into the result file.

An env id 'MODULE:ENV_ID' (an environment of the user's own) imports MODULE here again, as
training did (envs.factory.registered_env_id). A policy is played only on an env with the
spaces it was trained on (ppo.runs.evaluation.same_space).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from envs.factory import env_spec, gymnasium_env_factory
from experiments.commands.cli import check_writable_file
from ppo.config import ConfigError, PPOConfig
from ppo.runs.evaluation import evaluate_policy, load_policy
from ppo.trainers.base import TrainingDiverged
from ppo.trainers.ppo import PPO

RECORDING_NAME = "episode.gif"
EVALUATION_NAMES = {True: "eval.json", False: "eval-sample.json"}  # greedy → ..., sampled → ...
UNLIMITED_ENV_STEP_LIMIT = 1_000  # steps per evaluation episode where the env registers no time limit


def evaluation_name(greedy: bool) -> str:
    """The file an evaluation writes into the run folder: greedy and sampled ones are kept apart."""
    return EVALUATION_NAMES[greedy]


def check_max_episode_steps(max_episode_steps: int | None) -> None:
    if max_episode_steps is not None and (isinstance(max_episode_steps, bool) or max_episode_steps < 1):
        raise ConfigError(f"max episode steps = {max_episode_steps} must be a positive integer")


def episode_step_limit(env_id: str, max_episode_steps: int | None = None) -> int:
    """The steps an evaluation episode may last: `max_episode_steps` if given, else the env's
    registered time limit, else UNLIMITED_ENV_STEP_LIMIT (ConfigError for a limit below 1)."""
    check_max_episode_steps(max_episode_steps)
    if max_episode_steps is not None:
        return int(max_episode_steps)
    return env_spec(env_id).max_episode_steps or UNLIMITED_ENV_STEP_LIMIT


def evaluation_env_factory(env_id: str, frame_stack: int = 1, max_episode_steps: int | None = None, **kwargs):
    """The gymnasium env factory that evaluation and recording play on: each copy's episodes
    end within `episode_step_limit(env_id, max_episode_steps)` steps (truncated there). The
    env's own limit adds no wrapper, so CartPole-v1 keeps gymnasium's vectorised version."""
    step_limit = episode_step_limit(env_id, max_episode_steps)
    if step_limit != env_spec(env_id).max_episode_steps:
        kwargs["max_episode_steps"] = step_limit
    return gymnasium_env_factory(env_id, frame_stack=frame_stack, **kwargs)


def check_seed(seed: int | None) -> None:
    if seed is not None and not 0 <= seed < 2**32 - 10_000:
        raise ConfigError(f"seed = {seed} must be an integer in [0, 2**32 - 10000) (gymnasium seeds are unsigned)")


def evaluate_run(run_dir: Path, episodes: int, greedy: bool = True, seed: int | None = None,
                 verbose: bool = True, max_episode_steps: int | None = None) -> dict:
    """Evaluate, print one summary line naming the file (if verbose), and write the result next
    to the checkpoint: eval.json if greedy, eval-sample.json if sampled (`evaluation_name`)."""
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
    from ppo.runs.recording import prepare_headless_rendering, record_episode  # the optional extra 'record'

    check_seed(seed)
    check_max_episode_steps(max_episode_steps)
    policy = load_policy(run_dir)
    step_limit = episode_step_limit(policy.config.env_id, max_episode_steps)
    folder = run_dir if run_dir.is_dir() else run_dir.parent
    prepare_headless_rendering()  # before the first env is made: MuJoCo reads MUJOCO_GL when it is imported
    try:
        make_env = evaluation_env_factory(policy.config.env_id, policy.config.frame_stack, step_limit,
                                          render_mode="rgb_array")
    except TypeError as error:  # an env of the user's own whose constructor takes no render_mode
        raise ConfigError(f"{policy.config.env_id} cannot be recorded: making it with render_mode='rgb_array' "
                          f"failed ({str(error).splitlines()[0]})") from None
    result = record_episode(policy, make_env, folder / RECORDING_NAME, seed=seed, greedy=greedy)
    print(f"recorded one {'greedy' if greedy else 'sampled'} episode of {policy.config.env_id} "
          f"(return {result['return']:.1f}, {result['frames']} frames): {result['path']}")
    return result
