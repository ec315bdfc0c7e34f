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

And how to tell a real difference between two settings from a lucky seed: every
setting is trained over ten seeds, and each comparison comes with a 95% confidence
interval.

**What it shows.** A sweep over the learning rate, ε, the number of epochs K and λ,
each varied alone around one base configuration, plus one run built to fail, every
setting over ten seeds; the final return of each setting as an interquartile mean and a
mean with bootstrap confidence intervals (table and figure), which settings the
intervals separate from the base; the learning curves with their confidence bands; and
the diagnostics of a healthy run next to unhealthy ones.

**Prerequisites.** Lectures 3–5.

**Library.** `ppo/trainer.py` (`PPO.update` computes the diagnostics), `ppo/losses.py`
(`kl_estimate`, `clip_fraction`, `explained_variance`), `ppo/logger.py` (the same
numbers in metrics.csv and TensorBoard); `ppo/seed_batch.py` (`SeedBatchPPO`: the ten
seeds of one setting trained as one batched computation), `experiments/statistics.py`
(interquartile mean and stratified-bootstrap intervals, from the `rliable` package),
`experiments/plot.py` (`mean_curve`: the mean over seeds with a t-interval; `ppo-plot`
draws the same plots from run folders). The runs use the batched torch CartPole
(`envs/classic/cartpole.py`, `env_backend="torch"`).
"""

# %%
from _common import Lecture, plt, print_table
from envs.factory import make_seed_batch_env
from experiments.plot import mean_curve
from experiments.statistics import interval_estimates
from ppo.config import PPOConfig
from ppo.seed_batch import SeedBatchPPO

lecture = Lecture("06_diagnostics_and_tuning", __doc__)
SEEDS = lecture.choose(full=list(range(1, 11)), quick=[1, 2, 3, 4])  # ten seeds per setting (quick: four)
BASE = PPOConfig(
    env_id="CartPole-v1", env_backend="torch", num_envs=8, num_steps=lecture.choose(full=32, quick=16),
    learning_rate=1e-3, total_timesteps=lecture.choose(full=8 * 32 * 22, quick=8 * 16), tensorboard=False,
)
SWEEP = {  # each hyperparameter varied alone; the middle value is the base configuration's
    "learning_rate": [3e-4, 1e-3, 1e-2],
    "clip_coef": [0.05, 0.2, 0.5],
    "update_epochs": [1, 4, 8],
    "gae_lambda": [0.0, 0.95, 1.0],
}
# Outside the sweep, a setting built to fail: the sweep's largest step (lr 1e-2, K = 8) with the clip removed.
RECKLESS = ("no clip, lr 1e-2, K=8", dict(clip_coef=10.0, learning_rate=1e-2, update_epochs=8, anneal_lr=False))
DIAGNOSTICS = ("approx_kl", "clip_fraction", "entropy", "explained_variance")
SOLVED = 100.0  # a run "succeeds" if its final return (below) is at least this: the pole held 100 steps on average
BOOTSTRAP_REPS = lecture.choose(full=1000, quick=100)
print(f"base: {BASE.num_envs} envs × {BASE.num_steps} steps, lr {BASE.learning_rate}, ε {BASE.clip_coef}, "
      f"K {BASE.update_epochs}, λ {BASE.gae_lambda}; {BASE.total_timesteps:,} steps per run; "
      f"seeds {SEEDS[0]}–{SEEDS[-1]} ({len(SEEDS)} runs per setting)")

# %% [markdown]
"""
## Running the sweep, ten seeds at a time

One setting = one `SeedBatchPPO(config, SEEDS, envs)`: the ten runs of that config, one
per seed, trained as one batched computation. Member s of the batch is exactly the run
`PPO(config.replace(seed=SEEDS[s]), ...)` would make — the same initial weights, the
same actions, minibatches and episodes (`tests/test_seed_batch.py` checks it) — but the
ten networks are evaluated by one batched matrix product per layer instead of ten
Python loops, on the one torch thread every lecture runs on. The callback gets one row
of metrics per seed after every iteration; we keep them all. The base configuration
appears once and is shared by all four sweeps. Each run's budget is short (the line
printed above) so that the hundred runs of the sweep fit in a lecture.
"""


# %%
def run(config: PPOConfig) -> dict[int, list[dict]]:
    """Train `config` over SEEDS; every iteration's metrics of every seed, by seed."""
    histories = {seed: [] for seed in SEEDS}

    def keep(batch: SeedBatchPPO, metrics: list[dict]) -> None:
        for seed, row in zip(SEEDS, metrics):
            histories[seed].append({"step": batch.global_step, **row})

    envs = make_seed_batch_env(config.env_id, len(SEEDS), config.num_envs, "torch")
    SeedBatchPPO(config, SEEDS, envs, progress=False).train(keep)
    return histories


def setting_name(name: str, value) -> str:
    return "base" if getattr(BASE, name) == value else f"{name}={value}"


histories: dict[str, dict[int, list[dict]]] = {"base": run(BASE)}
for name, values in SWEEP.items():
    for value in values:
        key = setting_name(name, value)
        if key not in histories:
            histories[key] = run(BASE.replace(**{name: value}))
            print(f"ran {key}")
histories[RECKLESS[0]] = run(BASE.replace(**RECKLESS[1]))
print(f"ran {RECKLESS[0]}")

# %% [markdown]
"""
## Final returns over ten seeds, with confidence intervals

A run's *final return* is its training return (the mean of its last 20 episodes)
averaged over the last quarter of the run. Each setting has ten of them, one per seed,
and two summaries with 95% confidence intervals (`experiments.statistics.interval_estimates`,
rliable's estimators):

* **IQM**, the interquartile mean: the mean of the middle half of the runs (with ten,
  the lowest two and the highest two dropped). One failed or lucky seed barely moves
  it, and it is less noisy than the median.
* the **mean** over the ten runs.

The interval is a bootstrap one: draw ten runs with replacement from the ten, recompute
the statistic, repeat (the table's title says how many times), and keep the middle 95%
of the results. rliable stratifies the draws by task; with one task, CartPole, that is
the plain percentile bootstrap, which with ten runs is, if anything, a little too
narrow.

A setting *differs from the base* when its IQM interval and the base's do not overlap.
That rule is conservative: two overlapping 95% intervals can still hide a real
difference. Overlap means "not shown by ten seeds", not "equal".

Two more columns: how many of the ten runs ended at a return of at least 100 (a
success count; CartPole's own "solved" line of lecture 5 is far beyond a budget this
short), and "seeds 1–2", what a sweep over two seeds would have reported: the mean of
the first two runs.
"""


# %%
def final_returns(key: str) -> list[float]:
    """The final return of each seed: its training return averaged over the last quarter of the run."""
    finals = []
    for history in histories[key].values():
        tail = history[-max(1, len(history) // 4):]
        finals.append(sum(row["episode_return_recent"] for row in tail) / len(tail))
    return finals


def diagnostics(key: str) -> dict[str, float]:
    """Each diagnostic, per seed over the run (KL, clip fraction) or its last quarter (entropy,
    explained variance), then averaged over the seeds."""
    means = {}
    for name in DIAGNOSTICS:
        per_seed = []
        for history in histories[key].values():
            rows = history[-max(1, len(history) // 4):] if name in ("entropy", "explained_variance") else history
            per_seed.append(sum(row[name] for row in rows) / len(rows))
        means[name] = sum(per_seed) / len(per_seed)
    return means


finals = {key: final_returns(key) for key in histories}
estimates = interval_estimates(finals, reps=BOOTSTRAP_REPS, seed=0)  # {setting: {"iqm", "iqm_low", ...}}


def compared_with_base(key: str) -> str:
    """'above' or 'below' the base when the IQM intervals do not overlap; 'overlaps' otherwise."""
    row, base_row = estimates[key], estimates["base"]
    if row["iqm_low"] > base_row["iqm_high"]:
        return "above"
    if row["iqm_high"] < base_row["iqm_low"]:
        return "below"
    return "overlaps"


def interval(row: dict, name: str) -> str:
    return f"{row[name]:.1f} [{row[name + '_low']:.1f}, {row[name + '_high']:.1f}]"


verdicts = {key: compared_with_base(key) for key in histories if key != "base"}
print_table([{"setting": key,
              "IQM [95% CI]": interval(estimates[key], "iqm"),
              "mean [95% CI]": interval(estimates[key], "mean"),
              f"final ≥ {SOLVED:g}": f"{sum(value >= SOLVED for value in finals[key])}/{len(SEEDS)}",
              "seeds 1–2": sum(finals[key][:2]) / 2,
              "IQM vs base": verdicts.get(key, "")} for key in histories],
            title=f"Final return over {len(SEEDS)} seeds (training return, last quarter of the run); "
                  f"95% stratified-bootstrap intervals, {BOOTSTRAP_REPS} resamples")

diagnostic_rows = {key: diagnostics(key) for key in histories}
print_table([{"setting": key, "approx KL": row["approx_kl"], "clip fraction": row["clip_fraction"],
              "entropy (end)": row["entropy"], "explained var. (end)": row["explained_variance"]}
             for key, row in diagnostic_rows.items()],
            title=f"Diagnostics, mean over {len(SEEDS)} seeds (KL and clip fraction: mean over the run; "
                  "entropy, explained variance: last quarter)")

# %% [markdown]
"""
The first figure shows the learning curves of each sweep: at every iteration the mean
over the ten seeds, and a band of ± t(0.975, 9)·s/√10 around it (s the standard
deviation over the seeds at that iteration): a 95% t-interval for the mean
(`experiments.plot.mean_curve`). The second shows the table's IQM intervals, the
base's shaded across the plot: a setting whose bar does not touch the shading differs
from the base.
"""

# %%
figure, axes = plt.subplots(2, 2, figsize=(12, 8))
for axis, (name, values) in zip(axes.flat, SWEEP.items()):
    for value in values:
        key = setting_name(name, value)
        runs = histories[key].values()  # the iterations' steps are the same in every run: no interpolation
        curve = mean_curve([([row["step"] for row in history], [row["episode_return_recent"] for row in history])
                            for history in runs], points=len(histories[key][SEEDS[0]]))
        line, = axis.plot(curve["x"], curve["mean"], lw=2 if key == "base" else 1.3,
                          label=f"{name} = {value}" + (" (base)" if key == "base" else ""))
        axis.fill_between(curve["x"], curve["low"], curve["high"], color=line.get_color(), alpha=0.2, linewidth=0)
    axis.set_title(f"sweep over {name}: mean of {len(SEEDS)} seeds, 95% t-interval")
    axis.set_xlabel("environment steps")
    axis.set_ylabel("return, last 20 episodes")
    axis.legend(fontsize=8, loc="upper left")
lecture.save_figure(figure, "sweep_learning_curves.png")

# %%
keys = list(histories)
colors = {"above": "tab:green", "below": "tab:red", "overlaps": "tab:gray"}
figure, axis = plt.subplots(figsize=(8, 0.45 * len(keys) + 1.2))
base_row = estimates["base"]
axis.axvspan(base_row["iqm_low"], base_row["iqm_high"], color="tab:blue", alpha=0.15, label="base's 95% CI")
for position, key in enumerate(reversed(keys)):
    row = estimates[key]
    color = "tab:blue" if key == "base" else colors[verdicts[key]]
    axis.plot([row["iqm_low"], row["iqm_high"]], [position, position], color=color, lw=6, alpha=0.6,
              solid_capstyle="butt")
    axis.plot([row["iqm"]], [position], marker="|", markersize=14, color="black")
    axis.plot(finals[key], [position] * len(SEEDS), "o", ms=3, color="black", alpha=0.35)
axis.set_yticks(range(len(keys)), list(reversed(keys)))
axis.set_xlabel("final return")
axis.set_title(f"IQM of the final return and its 95% bootstrap CI ({len(SEEDS)} seeds; dots: the runs)\n"
               "green: above the base, red: below, gray: intervals overlap", fontsize=10)
axis.grid(axis="x", alpha=0.3)
axis.legend(fontsize=8, loc="lower right")
lecture.save_figure(figure, "final_return_iqm.png")

# %% [markdown]
"""
## Healthy and unhealthy runs, side by side

The base run next to the largest learning rate, a run whose steps are too timid (one
epoch per rollout), one with poor advantages (λ = 0: the critic's one-step guesses
alone) and the run built to fail: a large learning rate, eight epochs and ε = 10, which
leaves the ratio unclipped. One seed of each (the first), as you would read a run of
your own; the same seed, the same axes.
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
        axis.plot([row["step"] for row in history], [row[metric] for row in history], lw=2 if key == "base" else 1.2,
                  label=key)
    axis.set_title(f"{title} (seed {SEEDS[0]})")
    axis.set_xlabel("environment steps")
    if metric in ("approx_kl", "value_loss"):
        axis.set_yscale("log")
axes.flat[0].legend(fontsize=8)
lecture.save_figure(figure, "healthy_vs_unhealthy_diagnostics.png")

# %% [markdown]
"""
## Reading the numbers against the base run

Rather than fixed thresholds, which depend on the task and the batch size, compare each
setting with the base run of the same sweep: first whether the intervals separate its
return from the base's, then which diagnostics moved. The lines below are computed from
the two tables above.
"""

# %%
base = diagnostic_rows["base"]
in_words = {"above": "above the base", "below": "below the base", "overlaps": "not separated from the base"}
for key, row in diagnostic_rows.items():
    if key == "base":
        continue
    notes = []
    kl_ratio = row["approx_kl"] / base["approx_kl"]
    if kl_ratio > 2 or kl_ratio < 0.5:
        notes.append(f"approx KL {kl_ratio:.1f}× the base run's")
    if abs(row["clip_fraction"] - base["clip_fraction"]) > 0.05:
        notes.append(f"clip fraction {row['clip_fraction']:.2f} (base {base['clip_fraction']:.2f})")
    if row["entropy"] < 0.5 * base["entropy"]:
        notes.append(f"entropy fell to {row['entropy']:.2f} (base {base['entropy']:.2f})")
    if row["explained_variance"] < base["explained_variance"] - 0.2:
        notes.append(f"explained variance {row['explained_variance']:.2f} (base {base['explained_variance']:.2f})")
    print(f"{key:>22}: IQM {estimates[key]['iqm']:.1f} (base {estimates['base']['iqm']:.1f}), "
          f"{in_words[verdicts[key]]}; " + ("; ".join(notes) if notes else "diagnostics close to the base run's"))

separated = [key for key, verdict in verdicts.items() if verdict != "overlaps"]
not_separated = [key for key, verdict in verdicts.items() if verdict == "overlaps"]
print(f"\nIQM intervals apart from the base's ({len(separated)}): {', '.join(separated) or 'none'}")
print(f"IQM intervals overlapping the base's ({len(not_separated)}): {', '.join(not_separated) or 'none'}")
two_seed_winners = [key for key in not_separated if sum(finals[key][:2]) > sum(finals["base"][:2])]
print(f"of these, the ones seeds 1–2 alone would have ranked above the base: {', '.join(two_seed_winners) or 'none'}")
reckless = diagnostic_rows[RECKLESS[0]]
print(f"the unclipped run, mean over seeds: explained variance {reckless['explained_variance']:.2f} "
      f"(base {base['explained_variance']:.2f}), entropy {reckless['entropy']:.2f} (base {base['entropy']:.2f})")

# %% [markdown]
"""
## What to take away

* Learning rate, ε and K all set *how far one update moves the policy*; the approx KL
  and clip fraction columns show it directly. Whether a larger step pays on a budget
  this short is what the intervals of the larger values say against the base; the
  unclipped run's KL, entropy and return show what "too far" looks like.
* A setting can move the policy too little as well: a KL and clip fraction far below the
  base run's, with a return curve that rises slowly, is a step that is too small. A
  small ε is the case to read carefully: compare its two columns with the base's — a
  narrow band can clip a larger share of the samples while the policy moves less.
* λ does not change the step size but the quality of the advantages; with λ = 0 the
  advantages are only as good as the critic, so compare its return with λ = 0.95's. Its
  explained variance is no guide here: with λ = 0 the return the critic is scored
  against is r + γV(s′), mostly the critic's own guess, which it predicts easily.
* One diagnostic alone can look fine in a broken run. Compare the unclipped run's
  explained variance with its entropy (the last line above): a policy that always does
  the same thing is easy for a critic to predict.
* A difference between two settings is a claim about how the runs of each are
  distributed, not about one run of each. The lines above say which settings ten seeds
  separate from the base (an interval wholly above or below the base's) and which they
  do not. For the latter, compare the "seeds 1–2" column with the intervals: two seeds
  can rank a setting above the base that ten seeds cannot tell from it (the line above
  names them), and the dots of the interval figure show how far apart single runs of
  one setting land. Overlapping intervals call for more seeds before a conclusion, not
  for the conclusion that the settings are equal.

When a run misbehaves, the order to check is: KL and clip fraction (step size), then
entropy (exploration), then explained variance (critic), then the implementation
details of lecture 7. `target_kl` in `ppo/config.py` stops an update's epochs early when
the KL passes a threshold; lecture 8 adapts the step size to the KL instead. For run
folders written by `ppo-train --seeds 1-10` (or a sweep), `ppo-plot` draws the same
curves, intervals and a performance profile from the shell.
"""

# %%
lecture.finish()
