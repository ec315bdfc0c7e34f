# %% [markdown]
"""
# Lecture 6 — Reading the diagnostics, and tuning

**What it teaches.** A PPO run's return curve says *whether* it learns; four other
numbers the trainer logs every iteration say *why not*:

* **approx KL** — the k3 estimate of KL[π_old ‖ π_θ] on each minibatch, averaged over
  the update: how far one update moved the policy. It should stay small and steady; a
  KL that climbs means the steps are too big for the clip to contain.
* **clip fraction** — the share of samples whose ratio left [1 − ε, 1 + ε]: how much of
  the batch the clip is switching off. Near 0, ε (or the step) is irrelevant; large,
  most samples no longer contribute gradient.
* **entropy** — H[π_θ(· | s)] averaged over the batch: how random the policy still is.
  It should fall slowly as the policy commits; a collapse to ~0 early means it stopped
  exploring, often after a few too-large steps.
* **explained variance** — 1 − Var[R − V] / Var[R] of the critic on the rollout: 1 is
  perfect, 0 is no better than the mean, below 0 worse. A critic stuck near or below 0
  gives GAE advantages that are mostly noise.

**What it shows.** A small sweep over the learning rate, ε, the number of epochs K and
λ, each varied alone around one base configuration, across seeds; the learning curves
of every setting; and the diagnostics of a healthy run next to unhealthy ones.

**Prerequisites.** Lectures 3–5.

**Library.** `ppo/trainer.py` (`PPO.update` computes the diagnostics), `ppo/losses.py`
(`kl_estimate`, `clip_fraction`, `explained_variance`), `ppo/logger.py` (the same
numbers in metrics.csv and TensorBoard). The runs use the batched torch CartPole
(`envs/classic/cartpole.py`, `env_backend="torch"`), which keeps the sweep to minutes.
"""

# %%
import torch

from _common import Lecture, mean_and_spread, plt, print_table
from ppo.config import PPOConfig
from experiments.train import training_envs
from ppo.trainer import PPO

lecture = Lecture("06_diagnostics_and_tuning", __doc__)
SEEDS = lecture.choose(full=[1, 2], quick=[1])
BASE = PPOConfig(
    env_id="CartPole-v1", env_backend="torch", num_envs=32, num_steps=lecture.choose(full=32, quick=8),
    learning_rate=1e-3, total_timesteps=lecture.choose(full=32 * 32 * 30, quick=32 * 8 * 2), tensorboard=False,
)
SWEEP = {  # each hyperparameter varied alone; the middle value is the base configuration's
    "learning_rate": [3e-4, 1e-3, 1e-2],
    "clip_coef": [0.05, 0.2, 0.5],
    "update_epochs": [1, 4, 16],
    "gae_lambda": [0.0, 0.95, 1.0],
}
# Outside the sweep, one run built to fail: large steps with the clip effectively removed.
RECKLESS = ("no clip, lr 1e-2, K=16", dict(clip_coef=10.0, learning_rate=1e-2, update_epochs=16, anneal_lr=False))
DIAGNOSTICS = ("approx_kl", "clip_fraction", "entropy", "explained_variance")
print(f"base: {BASE.num_envs} envs × {BASE.num_steps} steps, lr {BASE.learning_rate}, ε {BASE.clip_coef}, "
      f"K {BASE.update_epochs}, λ {BASE.gae_lambda}; {BASE.total_timesteps:,} steps per run, seeds {SEEDS}")

# %% [markdown]
"""
## Running the sweep

One run = one `PPO(config, training_envs(config)).train(callback)`; the callback keeps every iteration's
metrics. The base configuration appears once and is shared by all four sweeps.
"""


# %%
def run(config: PPOConfig) -> list[dict]:
    history = []
    PPO(config, training_envs(config), progress=False).train(callback=lambda ppo, metrics: history.append({"step": ppo.global_step, **metrics}))
    return history


def setting_name(name: str, value) -> str:
    return "base" if getattr(BASE, name) == value else f"{name}={value}"


histories: dict[str, dict[int, list[dict]]] = {"base": {seed: run(BASE.replace(seed=seed)) for seed in SEEDS}}
for name, values in SWEEP.items():
    for value in values:
        key = setting_name(name, value)
        if key not in histories:
            histories[key] = {seed: run(BASE.replace(seed=seed, **{name: value})) for seed in SEEDS}
            print(f"ran {key}")
histories[RECKLESS[0]] = {SEEDS[0]: run(BASE.replace(seed=SEEDS[0], **RECKLESS[1]))}  # one seed is enough to see it
print(f"ran {RECKLESS[0]} (seed {SEEDS[0]} only)")


def summary(key: str) -> dict:
    """Per setting, over seeds: the return at the end and the diagnostics over the run."""
    finals, diagnostics = [], {name: [] for name in DIAGNOSTICS}
    for history in histories[key].values():
        tail = history[-max(1, len(history) // 4):]  # the last quarter of the run
        finals.append(sum(row["episode_return_recent"] for row in tail) / len(tail))
        for name in DIAGNOSTICS:
            rows = tail if name in ("entropy", "explained_variance") else history
            diagnostics[name].append(sum(row[name] for row in rows) / len(rows))
    mean = lambda values: sum(values) / len(values)  # noqa: E731
    return {
        "setting": key,
        "final return": mean_and_spread(finals),
        "_final": mean(finals),
        "approx KL": mean(diagnostics["approx_kl"]),
        "clip fraction": mean(diagnostics["clip_fraction"]),
        "entropy (end)": mean(diagnostics["entropy"]),
        "explained var. (end)": mean(diagnostics["explained_variance"]),
    }


rows = [summary(key) for key in histories]
print_table([{k: v for k, v in row.items() if not k.startswith("_")} for row in rows],
            title="Sweep summary (final return: last quarter of the run, mean ± std over seeds, one seed for the "
                  f"last row; "
                  "KL and clip fraction: mean over the run; entropy, explained variance: last quarter)")

# %%
figure, axes = plt.subplots(2, 2, figsize=(12, 8))
for axis, (name, values) in zip(axes.flat, SWEEP.items()):
    for value in values:
        key = setting_name(name, value)
        curves = torch.tensor([[row["episode_return_recent"] for row in h] for h in histories[key].values()])
        steps = [row["step"] for row in next(iter(histories[key].values()))]
        axis.plot(steps, curves.mean(0), lw=2 if key == "base" else 1.3, label=f"{name} = {value}" + (" (base)" if key == "base" else ""))
    axis.set_title(f"sweep over {name} (mean of {len(SEEDS)} seeds)")
    axis.set_xlabel("environment steps")
    axis.set_ylabel("return, last 20 episodes")
    axis.legend(fontsize=8)
lecture.save_figure(figure, "sweep_learning_curves.png")

# %% [markdown]
"""
## Healthy and unhealthy runs, side by side

The base run next to the sweep's fastest learner (the largest learning rate), a run
whose steps are too timid (one epoch per rollout), one with poor advantages (λ = 0:
the critic's one-step guesses alone) and the run built to fail: a large learning rate,
sixteen epochs and ε = 10, which leaves the ratio unclipped. Same seed, same axes.
"""

# %%
shown = ["base", "learning_rate=0.01", "update_epochs=1", "gae_lambda=0.0", RECKLESS[0]]
figure, axes = plt.subplots(2, 3, figsize=(15, 7.5))
panels = [("episode_return_recent", "return, last 20 episodes"), ("approx_kl", "approx KL (k3)"),
          ("clip_fraction", "clip fraction"), ("entropy", "entropy"), ("explained_variance", "explained variance"),
          ("value_loss", "value loss")]
for axis, (metric, title) in zip(axes.flat, panels):
    for key in shown:
        history = histories[key][SEEDS[0]]
        axis.plot([row["step"] for row in history], [row[metric] for row in history], lw=2 if key == "base" else 1.2, label=key)
    axis.set_title(title)
    axis.set_xlabel("environment steps")
    if metric in ("approx_kl", "value_loss"):
        axis.set_yscale("log")
axes.flat[0].legend(fontsize=8)
lecture.save_figure(figure, "healthy_vs_unhealthy_diagnostics.png")

# %% [markdown]
"""
## Reading the numbers against the base run

Rather than fixed thresholds, which depend on the task and the batch size, compare each
setting with the base run of the same sweep. The lines below are computed from the
table above.
"""

# %%
base = next(row for row in rows if row["setting"] == "base")
for row in rows:
    if row["setting"] == "base":
        continue
    notes = []
    kl_ratio = row["approx KL"] / base["approx KL"]
    if kl_ratio > 2 or kl_ratio < 0.5:
        notes.append(f"approx KL {kl_ratio:.1f}× the base run's")
    if abs(row["clip fraction"] - base["clip fraction"]) > 0.05:
        notes.append(f"clip fraction {row['clip fraction']:.2f} (base {base['clip fraction']:.2f})")
    if row["entropy (end)"] < 0.5 * base["entropy (end)"]:
        notes.append(f"entropy fell to {row['entropy (end)']:.2f} (base {base['entropy (end)']:.2f})")
    if row["explained var. (end)"] < base["explained var. (end)"] - 0.2:
        notes.append(f"explained variance {row['explained var. (end)']:.2f} (base {base['explained var. (end)']:.2f})")
    print(f"{row['setting']:>22}: final return {row['_final']:.1f} (base {base['_final']:.1f})"
          + ("; " + "; ".join(notes) if notes else "; diagnostics close to the base run"))

# %% [markdown]
"""
## What to take away

* Learning rate, ε and K all set *how far one update moves the policy*; the approx KL
  and clip fraction columns show it directly. Within the sweep's range, a larger step
  can simply be faster on a short budget — compare the KL of the fastest setting with
  the unclipped run's, whose KL, entropy and return show what "too far" looks like.
* A setting can move the policy too little as well: a KL and clip fraction far below the
  base run's, with a return curve that rises slowly, is a step that is too small.
* λ does not change the step size but the quality of the advantages; with λ = 0 the
  advantages are only as good as the critic, so compare its explained variance and
  return with λ = 0.95.
* One diagnostic alone can look fine in a broken run. Compare the unclipped run's
  explained variance with its entropy: a policy that always does the same thing is
  easy for a critic to predict.
* Two seeds are not many: where the ± in the final-return column is as large as the
  difference between settings, the sweep has not shown a difference.

When a run misbehaves, the order to check is: KL and clip fraction (step size), then
entropy (exploration), then explained variance (critic), then the implementation
details of lecture 7. `target_kl` in `ppo/config.py` stops an update's epochs early when
the KL passes a threshold; lecture 8 adapts the step size to the KL instead.
"""

# %%
lecture.finish()
