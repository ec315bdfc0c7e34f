# %% [markdown]
"""
# Lecture 5 — PPO on CartPole: the whole loop

**What it teaches.** The pieces of lectures 1–4 assembled into one algorithm, run with
the library's trainer:

    for each iteration:
        collect T steps from each of N environments with π_old        (rollout)
        Â, R ← GAE(γ, λ) over the rollout                              (lecture 3)
        for K epochs, for each shuffled minibatch:
            L = −L^CLIP(ε) + c_v · L_value − c_e · H[π_θ]                (lectures 2, 4)
            one Adam step on L, gradient norm clipped
        log the diagnostics

Nothing in this script re-implements a step: it configures `ppo.trainer.PPO`, trains,
plots, evaluates the result on gymnasium's own CartPole-v1 and tells you how to look at
the run in TensorBoard. Read `ppo/trainer.py` next to it: `collect_rollout`,
`compute_advantages` and `update` are the three lines of the loop above.

**Prerequisites.** Lectures 1–4.

**Library.** `ppo/config.py` (every hyperparameter), `ppo/trainer.py` (the loop),
`ppo/logger.py` (metrics.csv and TensorBoard), `ppo/plotting.py`, `ppo/evaluation.py`;
`envs/classic/cartpole.py` (CartPole as batched tensor code, the training backend here).
"""

# %%
import dataclasses
import time

import torch

from _common import Lecture, plt, print_table, shown_path
from envs.factory import gymnasium_env_factory
from experiments.train import training_envs
from ppo.config import PPOConfig
from ppo.evaluation import evaluate_policy, load_policy
from ppo.plotting import plot_learning_curve
from ppo.trainer import PPO

lecture = Lecture("05_ppo_cartpole", __doc__)

# %% [markdown]
"""
## The configuration

The library's defaults are CleanRL's (4 environments × 128 steps per rollout, 500k
steps). To keep the run short on a laptop CPU, this lecture runs 16 copies of
the batched torch CartPole for 64 steps each (1,024 samples per update), takes K = 8
epochs over each rollout with a learning rate of 1e-3, and stops after 100k steps.
Everything else is the default. The same run from the shell is printed below.
"""

# %%
config = PPOConfig(
    env_id="CartPole-v1",
    env_backend="torch",
    num_envs=16,
    num_steps=64,
    update_epochs=8,
    learning_rate=1e-3,
    total_timesteps=lecture.choose(full=100_000, quick=4_096),
    seed=1,
)
defaults = PPOConfig()
changed = {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if getattr(config, f.name) != getattr(defaults, f.name)}
print_table([{"hyperparameter": f.name, "value": getattr(config, f.name),
              "changed from default": "yes" if f.name in changed else ""}
             for f in dataclasses.fields(config)
             if f.name in changed or f.name in ("gamma", "gae_lambda", "clip_coef", "update_epochs", "num_minibatches",
                                                "ent_coef", "vf_coef", "max_grad_norm", "anneal_lr", "norm_adv")],
            title=f"PPO on CartPole: {config.num_iterations} iterations of {config.batch_size} samples, "
                  f"{config.update_epochs} epochs × {config.num_minibatches} minibatches of {config.minibatch_size}")


def as_flags(name, value) -> str:
    flag = "--" + name.replace("_", "-")
    if isinstance(value, bool):
        return flag if value else flag.replace("--", "--no-", 1)
    return f"{flag} {value}"


run_dir = lecture.path("run")
print("\nthe same run from the shell:\n  ppo-train --preset none "
      + " ".join(as_flags(name, value) for name, value in changed.items())
      + f" --run-dir {shown_path(run_dir)}")

# %% [markdown]
"""
## Training

`PPO(config, envs, run_dir=...)` (envs: `training_envs(config)`, the config's N copies) writes config.json, metrics.csv, TensorBoard event files and a
checkpoint into the run folder. The callback is called after every iteration with that
iteration's metrics; we keep them to plot, and print a line now and then.
"""

# %%
if run_dir.exists():  # a fresh run every time the lecture runs
    for old_file in run_dir.iterdir():
        if old_file.is_file():
            old_file.unlink()
history = []


def report(ppo: PPO, metrics: dict) -> None:
    history.append({"step": ppo.global_step, **metrics})
    if ppo.iteration % max(1, config.num_iterations // 8) == 0 or ppo.iteration == config.num_iterations:
        print(f"step {ppo.global_step:>7,}  return (last 20 episodes) {metrics['episode_return_recent']:6.1f}  "
              f"approx KL {metrics['approx_kl']:.4f}  clip fraction {metrics['clip_fraction']:.3f}  "
              f"entropy {metrics['entropy']:.3f}")


started = time.perf_counter()
trainer = PPO(config, training_envs(config), run_dir=run_dir, progress=False)
final_metrics = trainer.train(callback=report)
wall_seconds = time.perf_counter() - started
print(f"\n{trainer.global_step:,} steps in {wall_seconds:.1f} s ({trainer.global_step / wall_seconds:,.0f} steps/s)")
library_plot = plot_learning_curve(run_dir, "PPO on CartPole-v1 (lecture 5)")
lecture.wrote(library_plot)
for name in sorted(path.name for path in run_dir.iterdir()):
    print(f"  run folder: {name}")

# %%
steps = [row["step"] for row in history]
figure, axes = plt.subplots(1, 2, figsize=(11, 4))
axes[0].plot(steps, [row["episode_return_mean"] for row in history], color="tab:blue", alpha=0.35,
             label="episodes finished in this iteration")
axes[0].plot(steps, [row["episode_return_recent"] for row in history], color="tab:blue", lw=2, label="last 20 episodes")
axes[0].set_xlabel("environment steps")
axes[0].set_ylabel("episode return")
axes[0].set_title("Learning curve")
axes[0].legend(fontsize=8)
axes[1].plot(steps, [row["value_loss"] for row in history], color="tab:orange", label="value loss")
axes[1].set_yscale("log")
axes[1].set_xlabel("environment steps")
axes[1].set_title("The critic's loss, ½ (V − R)²")
axes[1].legend(fontsize=8)
lecture.save_figure(figure, "learning_curve.png")

# %% [markdown]
"""
## Evaluation on gymnasium's CartPole-v1

Training returns are from the *sampling* policy on the torch environment. The number to
report is the *greedy* policy (argmax of the logits) on the reference environment, over
whole episodes: `ppo.evaluation` loads the checkpoint and runs gymnasium's CartPole-v1,
whatever backend trained it. 500 is the most an episode can score.
"""

# %%
episodes = lecture.choose(full=20, quick=2)
policy = load_policy(run_dir / "checkpoint.pt")
returns = torch.as_tensor(evaluate_policy(policy, gymnasium_env_factory(config.env_id), episodes=episodes), dtype=torch.float64)
print(f"greedy evaluation, {episodes} episodes of gymnasium CartPole-v1: "
      f"mean return {returns.mean():.1f} ± {returns.std(unbiased=False):.1f} (min {returns.min():.0f}, max {returns.max():.0f})")

# %% [markdown]
"""
## Looking at the run in TensorBoard

Every scalar of metrics.csv is also in the event files: `charts/` holds episode returns,
lengths, learning rate and speed; `losses/` holds the policy and value loss, entropy,
the KL estimates, clip fraction and explained variance. Lecture 6 explains how to read
them. To open them (TensorBoard is installed with the project):
"""

# %%
print(f"  tensorboard --logdir {shown_path(run_dir)}")
print("  then open http://localhost:6006 in a browser")

# %%
lecture.finish()
