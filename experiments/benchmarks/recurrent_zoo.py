"""This library's recurrent PPO against sb3-contrib's RecurrentPPO with the SB3 zoo's settings.

For each env and seed the two trainers take turns, each as a whole process of its own
(`python -m ...`), timed from start to exit, each followed by a greedy evaluation of 100
episodes inside that process:

  library      `ppo-train --env-id ENV --seed S` with the env's preset (ppo.presets),
               at the preset's budget; with --same-steps also at the zoo's budget
  sb3-contrib  RecurrentPPO('MlpLstmPolicy') with the settings of the zoo's published agent
               for the env (ZOO below: the rl-baselines3-zoo 'ppo_lstm' rows, with obs
               normalisation as the published agents' cards give it), its evaluation
               deterministic with the LSTM state carried through each episode and the
               training run's observation statistics frozen; torch on one thread, as
               ppo-train's default

    python -m experiments.benchmarks.recurrent_zoo                            # both envs, seed 1
    python -m experiments.benchmarks.recurrent_zoo --env-id CartPoleNoVel-v1 --seeds 1 2 --same-steps
    python -m experiments.benchmarks.recurrent_zoo --seeds 201 202 203 --sb3-seeds 201      # sb3-contrib once

sb3-contrib comes with the optional extra 'benchmarks'
(`pip install -c constraints.txt -e '.[benchmarks]'`). The table gives per trainer its
budget, the median whole-process seconds, the greedy means per seed, and the ratio of
sb3-contrib's median seconds to the library's. The trainers alternate, so a busy machine
slows both alike; the figures still belong to the machine that ran them.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
import tempfile
from pathlib import Path

from experiments.benchmarks.environments import run_command
from experiments.commands.cli import OneLineArgumentParser, run_with_user_errors
from experiments.commands.entry_points import console_argv
from ppo.presets import preset_overrides
from ppo.runs.evaluation import EVAL_SEED_OFFSET

PROG = "python -m experiments.benchmarks.recurrent_zoo"
ENV_IDS = ("CartPoleNoVel-v1", "PendulumNoVel-v1")
EVAL_EPISODES = 100

# The zoo's published RecurrentPPO agents (hyperparameters of the sb3 'ppo_lstm' models for
# these envs): 'lin_x' is a linear schedule from x to 0; normalize: observations only.
_ZOO_POLICY = dict(ortho_init=False, activation_fn="relu", lstm_hidden_size=64, enable_critic_lstm=True,
                   net_arch=dict(pi=[64], vf=[64]))
ZOO = {
    "CartPoleNoVel-v1": dict(n_envs=8, n_timesteps=100_000, n_steps=32, batch_size=256, gae_lambda=0.8, gamma=0.98,
                             n_epochs=20, ent_coef=0.0, learning_rate="lin_0.001", clip_range="lin_0.2",
                             policy_kwargs=_ZOO_POLICY),
    "PendulumNoVel-v1": dict(n_envs=4, n_timesteps=100_000, n_steps=1024, gae_lambda=0.95, gamma=0.9, n_epochs=10,
                             ent_coef=0.0, learning_rate=1e-3, clip_range=0.2, use_sde=True, sde_sample_freq=4,
                             policy_kwargs=_ZOO_POLICY),
}


def run_sb3_contrib(env_id: str, seed: int) -> dict:
    """Train and evaluate sb3-contrib's RecurrentPPO with ZOO[env_id] in this process; returns the greedy mean."""
    import gymnasium as gym
    import numpy as np
    import torch
    from torch import nn
    from sb3_contrib import RecurrentPPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.evaluation import evaluate_policy
    from stable_baselines3.common.vec_env import VecNormalize

    import envs  # noqa: F401  (registers the NoVel envs with gymnasium)

    torch.set_num_threads(1)  # as ppo-train's default: one thread each, and no oversubscription on a busy machine
    settings = dict(ZOO[env_id])
    n_envs, n_timesteps = settings.pop("n_envs"), settings.pop("n_timesteps")
    for name in ("learning_rate", "clip_range"):
        if isinstance(settings[name], str):  # lin_x: x · (remaining progress), as the zoo reads it
            start = float(settings[name].removeprefix("lin_"))
            settings[name] = lambda progress, start=start: progress * start
    settings["policy_kwargs"] = {**settings["policy_kwargs"], "activation_fn": nn.ReLU}
    env = VecNormalize(make_vec_env(lambda: gym.make(env_id), n_envs=n_envs, seed=seed), norm_reward=False)
    model = RecurrentPPO("MlpLstmPolicy", env, seed=seed, device="cpu", verbose=0, **settings)
    model.learn(total_timesteps=n_timesteps)
    eval_env = VecNormalize(make_vec_env(lambda: gym.make(env_id), n_envs=1, seed=seed + EVAL_SEED_OFFSET),
                            training=False, norm_reward=False)
    eval_env.obs_rms = env.obs_rms
    returns, _ = evaluate_policy(model, eval_env, n_eval_episodes=EVAL_EPISODES, deterministic=True,
                                 return_episode_rewards=True)
    return {"mean_return": float(np.mean(returns)), "steps": n_timesteps}


def library_run(env_id: str, seed: int, total_timesteps: int | None, folder: Path) -> dict:
    run_dir = folder / f"{env_id}_{seed}_{total_timesteps or 'preset'}"
    command = [*console_argv("ppo-train"), "--env-id", env_id, "--seed", str(seed), "--run-dir",
               str(run_dir), "--no-progress", "--no-tensorboard", "--eval-episodes", str(EVAL_EPISODES)]
    if total_timesteps is not None:
        command += ["--total-timesteps", str(total_timesteps)]
    seconds, _ = run_command(command)
    evaluation = json.loads((run_dir / "eval.json").read_text())
    steps = total_timesteps or preset_overrides(env_id)["total_timesteps"]
    return {"seconds": seconds, "mean_return": evaluation["mean_return"], "steps": steps}


def sb3_contrib_run(env_id: str, seed: int) -> dict:
    seconds, stdout = run_command([sys.executable, "-m", PROG.removeprefix("python -m "), "--sb3-contrib-run", env_id,
                                   "--seeds", str(seed)])
    return {"seconds": seconds, **json.loads(stdout.strip().splitlines()[-1])}


def benchmark(env_ids: list[str], library_seeds: list[int], sb3_seeds: list[int], same_steps: bool = False,
              log=print) -> list[dict]:
    """One row per process: {env_id, trainer, seed, steps, seconds, mean_return}. Per env, the
    library runs each of `library_seeds` with its preset, and after the library's i-th seed
    sb3-contrib runs the i-th of `sb3_seeds`, so the two take turns; with `same_steps` the
    library also runs those turns' seeds at the zoo's budget, where its preset's differs."""
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for env_id in env_ids:
            budgets = [None]
            if same_steps and preset_overrides(env_id)["total_timesteps"] != ZOO[env_id]["n_timesteps"]:
                budgets.append(ZOO[env_id]["n_timesteps"])
            for i, seed in enumerate(library_seeds):
                for budget in budgets if i < len(sb3_seeds) else [None]:
                    rows.append({"env_id": env_id, "trainer": "library", "seed": seed,
                                 **library_run(env_id, seed, budget, Path(folder))})
                    log(f"  {rows[-1]}")
                if i < len(sb3_seeds):
                    rows.append({"env_id": env_id, "trainer": "sb3-contrib", "seed": sb3_seeds[i],
                                 **sb3_contrib_run(env_id, sb3_seeds[i])})
                    log(f"  {rows[-1]}")
    return rows


def print_table(rows: list[dict]) -> None:
    for env_id in dict.fromkeys(row["env_id"] for row in rows):
        groups: dict[tuple[str, int], list[dict]] = {}
        for row in rows:
            if row["env_id"] == env_id:
                groups.setdefault((row["trainer"], row["steps"]), []).append(row)
        sb3_seconds = [row["seconds"] for (trainer, _), runs in groups.items() if trainer == "sb3-contrib"
                       for row in runs]
        print(f"{env_id}:")
        for (trainer, steps), runs in groups.items():
            seconds = statistics.median(row["seconds"] for row in runs)
            ratio = f"   sb3-contrib / this: {statistics.median(sb3_seconds) / seconds:.1f}×" if sb3_seconds else ""
            returns = ", ".join(f"{row['mean_return']:.1f}" for row in runs)
            print(f"  {trainer:<12} {steps:>9,} steps {seconds:>8.1f} s (median)   greedy: {returns}{ratio}")


def main(argv: list[str] | None = None) -> int:
    parser = OneLineArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", nargs="+", choices=ENV_IDS, default=list(ENV_IDS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[1], help="the library's seeds (default: 1)")
    parser.add_argument("--sb3-seeds", type=int, nargs="*", default=None,
                        help="sb3-contrib's seeds, taking turns with the library's first ones (default: --seeds)")
    parser.add_argument("--same-steps", action="store_true",
                        help="in sb3-contrib's turns, also run the library at the zoo's budget where its preset's differs")
    parser.add_argument("--sb3-contrib-run", metavar="ENV_ID", choices=ENV_IDS,
                        help="(internal) train and evaluate sb3-contrib on ENV_ID with the first seed, print JSON")
    args = parser.parse_args(argv)
    if args.sb3_contrib_run:
        print(json.dumps(run_sb3_contrib(args.sb3_contrib_run, args.seeds[0])))
        return 0
    sb3_seeds = args.seeds if args.sb3_seeds is None else args.sb3_seeds
    if sb3_seeds and importlib.util.find_spec("sb3_contrib") is None:
        parser.error("sb3-contrib is not installed: pip install -c constraints.txt -e '.[benchmarks]' "
                     "(or --sb3-seeds with no seeds: the library alone)")
    print(f"greedy means over {EVAL_EPISODES} episodes; whole-process seconds", flush=True)
    print_table(benchmark(args.env_id, args.seeds, sb3_seeds, args.same_steps,
                          log=lambda line: print(line, flush=True)))
    return 0


if __name__ == "__main__":
    raise SystemExit(run_with_user_errors(PROG, main))
