# %% [markdown]
r"""
# Lecture 7 — Reading the diagnostics, and tuning

**What it teaches.** A PPO run's return curve says *whether* it learns; four other
numbers the trainer logs every iteration say *why not*:

* **<a href="../glossary.html#term-Approx-KL">approx KL</a>** — the $k_3$ estimate of $\mathrm{KL}[\pi_{\text{old}} \,\Vert\, \pi_\theta]$ on each minibatch, averaged over
  the update: how far one update moved the policy, *measured on the actions $\pi_{\text{old}}$
  took*. Far above a healthy run's, the steps are too big for the clip to contain; in a
  healthy run whose learning rate is annealed it falls as the steps shrink.
* **<a href="../glossary.html#term-Clip-fraction">clip fraction</a>** — the share of samples whose ratio left $[1 - \varepsilon, 1 + \varepsilon]$: how much of
  the batch the clip is switching off. Near 0, ε (or the step) is irrelevant; large,
  most samples no longer contribute gradient. It counts only what ε clips: with the
  clip removed it reads 0 however far the policy moves, so read it next to the KL.
* **entropy** — $H[\pi_\theta(\cdot \mid s)]$ averaged over the batch: how random the policy still is.
  It should fall slowly as the policy commits; a collapse to ~0 early means it stopped
  exploring.
* **<a href="../glossary.html#term-Explained-variance">explained variance</a>** — $1 - \operatorname{Var}[R - V] / \operatorname{Var}[R]$ of the critic on the rollout: 1 is
  perfect, 0 is no better than the mean, below 0 worse. A critic stuck near or below 0
  gives GAE advantages that are mostly noise.

Read them per iteration, not as one average over a run: a mean over the run hides
the trend (a KL that falls as the learning rate <a href="../glossary.html#term-Learning-rate-annealing">anneals</a>, one that does not).

And how to tell a real difference between two settings from a lucky seed: every
setting is trained over ten seeds, and each comparison comes with a 95% confidence
interval. Then a warning about budgets: a sweep of short runs measures how fast a
setting learns early, which is not the same as which setting ends best.

**What it shows.** (1) The canonical CartPole configuration (the library's <a href="../glossary.html#term-Preset">preset</a>, as
in [lecture 6](06_ppo_cartpole.ipynb)) at its full budget next to two runs with larger steps, ten seeds each:
the diagnostics per iteration, and what a mean over the run hides. (2) A sweep over
the learning rate, ε, the number of epochs K and λ, each varied alone around the
preset, on a fifth of the budget: the final return as an interquartile mean and a mean
with <a href="../glossary.html#term-Bootstrap-confidence-interval">bootstrap</a> confidence intervals (table and figure), and which settings the
intervals separate from the preset. (3) The long runs scored early and at the end:
what the short sweep's ranking of the larger step is worth at the full budget.

**Prerequisites.** Lectures [3](03_gae.ipynb)–[6](06_ppo_cartpole.ipynb).

**Library.** `ppo/trainers/ppo.py` (`PPO.update` computes the diagnostics), `ppo/algorithm/losses.py`
(`kl_estimate`, `clip_fraction`, `explained_variance`), `ppo/runs/logger.py` (the same
numbers in metrics.csv and TensorBoard); `ppo/trainers/seed_batch.py` (`PPO(config, envs, seeds=...)`: the ten
seeds of one setting trained as one batched computation), `ppo/presets.py`
(the CartPole preset), `experiments/commands/statistics.py` (interquartile mean and
stratified-bootstrap intervals, from the `rliable` package), `experiments/commands/plot.py`
(`mean_curve`: the mean over seeds with a <a href="../glossary.html#term-t-interval">t-interval</a>; `ppo-plot` draws the same plots
from run folders). The runs use the batched torch CartPole (`envs/classic/cartpole.py`,
`env_backend="torch"`).
"""

# %%
import math

from _common import Lecture, plt, print_table
from envs.factory import make_seed_batch_env
from experiments.commands.plot import mean_curve
from experiments.commands.presets import build_config
from experiments.commands.statistics import interval_estimates
from ppo.config import PPOConfig
from ppo.trainers.ppo import PPO

lecture = Lecture("07_diagnostics_and_tuning", __doc__)
# The preset was tuned on seeds 1–20 (ppo/presets.py): these ten are seeds it never saw.
SEEDS = lecture.choose(full=list(range(21, 31)), quick=[21, 22, 23, 24])
PRESET = build_config({"env_id": "CartPole-v1", "env_backend": "torch", "tensorboard": False})
BASE = PRESET.replace(total_timesteps=lecture.choose(full=PRESET.total_timesteps, quick=2 * 2048))
BATCH = BASE.num_envs * BASE.num_steps  # samples per iteration
SHORT_BUDGET = lecture.choose(full=10 * BATCH, quick=BATCH)  # the sweep's runs: about a fifth of the budget
LARGE_LR = 4 * BASE.learning_rate
LONG = {  # the full budget: the preset, and two settings that move the policy further per update
    "preset": {},
    f"lr {LARGE_LR:g} constant": dict(learning_rate=LARGE_LR, anneal_lr=False),
    f"no clip, lr {LARGE_LR:g} constant, K 12": dict(clip_coef=math.inf, learning_rate=LARGE_LR, anneal_lr=False,
                                                     update_epochs=12),
}
LARGE, RECKLESS = list(LONG)[1:]
SWEEP = {  # each hyperparameter varied alone; the middle value is the preset's
    "learning_rate": [BASE.learning_rate / 4, BASE.learning_rate, LARGE_LR],
    "clip_coef": [0.05, BASE.clip_coef, 0.5],
    "update_epochs": [2, BASE.update_epochs, 12],
    "gae_lambda": [0.0, BASE.gae_lambda, 1.0],
}
DIAGNOSTICS = ("approx_kl", "clip_fraction", "entropy", "explained_variance")
MAX_RETURN = 500  # CartPole-v1: reward 1 per step, episodes cut at 500 steps
BOOTSTRAP_REPS = lecture.choose(full=1000, quick=100)
print(f"preset: {BASE.num_envs} envs × {BASE.num_steps} steps, {BASE.num_minibatches} minibatches × "
      f"{BASE.update_epochs} epochs, lr {BASE.learning_rate:g} annealed, ε {BASE.clip_coef}, λ {BASE.gae_lambda}, "
      f"a budget of {BASE.total_timesteps:,} steps per run ({BASE.num_iterations} iterations of {BATCH:,}: "
      f"{BASE.num_iterations * BATCH:,} steps); the sweep's runs: {SHORT_BUDGET:,} steps; "
      f"seeds {SEEDS[0]}–{SEEDS[-1]} ({len(SEEDS)} runs per setting)")

# %% [markdown]
"""
## Ten seeds at a time

One setting = one `PPO(config, envs, seeds=SEEDS)`: the ten runs of that config, one
per seed, trained as one batched computation: the ten networks are evaluated by one
batched matrix product per layer instead of ten Python loops, on the one torch thread
every lecture runs on. Member s of the batch draws the same random numbers as the run
`PPO(config.replace(seed=SEEDS[s]), ...)` and starts from the same weights, but it is
not that run: the batched matrix products round differently, and the differences grow
over the iterations into a different run ([lecture 6](06_ppo_cartpole.ipynb) measures it on seed 21: weights
within 10⁻⁶ of the single run's after the first iteration, more than 10⁻³ apart by the
ninth; `tests/test_seed_batch.py` checks the draws, and that one iteration started from
the same weights lands within 10⁻⁵ of the single run's). A member is as fair a run of its
seed as the single one, so the ten members are ten seeds' runs. The callback gets one row
of metrics per seed after every iteration; we keep them all.

The seeds are 21–30: the preset's settings were chosen on seeds 1–20, and a result
measured on the seeds a setting was tuned on flatters it.

The three long runs first, at the preset's full budget: the preset itself; the learning
rate four times larger and held constant (the preset anneals it linearly to 0), a
larger step all through the run; and a run built to fail: that learning rate with the
clip removed (ε = inf: no ratio is ever clipped, the plain importance-sampled surrogate)
and twice the epochs.
"""


# %%
def run(config: PPOConfig) -> dict[int, list[dict]]:
    """Train `config` over SEEDS; every iteration's metrics of every seed, by seed."""
    histories = {seed: [] for seed in SEEDS}

    def keep(batch: PPO, metrics: list[dict]) -> None:
        for seed, row in zip(SEEDS, metrics):
            histories[seed].append({"step": batch.global_step, **row})

    envs = make_seed_batch_env(config.env_id, len(SEEDS), config.num_envs, "torch")
    PPO(config, envs, seeds=SEEDS, progress=False).train(keep)
    return histories


def return_curve(histories: dict[int, list[dict]]) -> dict:
    """The seeds' mean return per iteration with its 95% t-interval (`mean_curve`), the band cut
    to the range a return can take, [0, MAX_RETURN]; "unclipped_high" keeps the band's top as computed."""
    curve = mean_curve([([row["step"] for row in history], [row["episode_return_recent"] for row in history])
                        for history in histories.values()], points=len(next(iter(histories.values()))))
    return {**curve, "unclipped_high": list(curve["high"]),
            "low": [max(0.0, value) for value in curve["low"]],
            "high": [min(float(MAX_RETURN), value) for value in curve["high"]]}


long_runs = {key: run(BASE.replace(**overrides)) for key, overrides in LONG.items()}
print("ran the long runs:", ", ".join(long_runs))

# %% [markdown]
"""
## Reading the diagnostics of one run

One seed of each (the first), as you would read a run of your own: the same seed, the
same axes, one colour per setting in every panel. The approx-KL panel is logarithmic,
and values below 10⁻⁸ are drawn at 10⁻⁸ (a deterministic policy's KL estimate can be
10⁻¹³ or exactly 0, which a log axis would stretch to fill the panel).
"""

# %%
KL_FLOOR = 1e-8
LONG_COLORS = {"preset": "tab:blue", LARGE: "tab:orange", RECKLESS: "tab:red"}
figure, axes = plt.subplots(2, 3, figsize=(15, 7.5))
panels = [("episode_return_recent", "return, mean of the last 20 episodes"), ("approx_kl", "approx KL (k3), nats"),
          ("clip_fraction", "clip fraction"), ("entropy", "entropy, nats"),
          ("explained_variance", "explained variance"), ("value_loss", "value loss, (return units)²")]
for axis, (metric, title) in zip(axes.flat, panels):
    for key, histories in long_runs.items():
        history = histories[SEEDS[0]]
        values = [row[metric] for row in history]
        if metric == "approx_kl":
            values = [max(value, KL_FLOOR) for value in values]
        axis.plot([row["step"] for row in history], values, lw=2 if key == "preset" else 1.2,
                  color=LONG_COLORS[key], label=key)
    axis.set_ylabel(title)
    axis.set_xlabel("environment steps")
    if metric in ("approx_kl", "value_loss"):
        axis.set_yscale("log")
axes.flat[0].legend(fontsize=8, loc="upper left")  # the return starts low: the upper left is empty
figure.suptitle(f"One run of each setting (seed {SEEDS[0]}), every iteration")
lecture.save_figure(figure, "diagnostics_per_iteration.png")


# %%
def quarter(history: list[dict]) -> list[dict]:
    """The last quarter of a run's iterations."""
    return history[-max(1, len(history) // 4):]


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def kl_profile(histories: dict[int, list[dict]]) -> dict[str, float]:
    """Over the seeds, the median of: the run's mean KL, its largest iteration's KL, the mean KL
    of the last quarter, the run's mean clip fraction and its entropy at the end (the last
    quarter's mean)."""
    per_seed = {name: [] for name in ("mean", "peak", "last quarter", "clip fraction", "entropy (end)")}
    for history in histories.values():
        kls = [row["approx_kl"] for row in history]
        per_seed["mean"].append(sum(kls) / len(kls))
        per_seed["peak"].append(max(kls))
        per_seed["clip fraction"].append(sum(row["clip_fraction"] for row in history) / len(history))
        per_seed["last quarter"].append(sum(row["approx_kl"] for row in quarter(history)) / len(quarter(history)))
        per_seed["entropy (end)"].append(sum(row["entropy"] for row in quarter(history)) / len(quarter(history)))
    return {name: median(values) for name, values in per_seed.items()}


kl_profiles = {key: kl_profile(histories) for key, histories in long_runs.items()}
print_table([{"setting": key, "mean KL over the run": row["mean"], "largest iteration's KL": row["peak"],
              "KL, last quarter": row["last quarter"], "clip fraction": row["clip fraction"],
              "entropy, last quarter": row["entropy (end)"]} for key, row in kl_profiles.items()],
            title=f"Approx KL per run, median over {len(SEEDS)} seeds")

# %% [markdown]
"""
What the figure and the table show, each checked below on this run:

* The unclipped run's KL is far above the preset's (the red line of the KL panel, until
  the figure's seed collapses, and the table's mean: 1.93 against 0.00414, some 470
  times the preset's), and its entropy falls to near
  0 within the first two iterations, from ln 2 ≈ 0.69 (a coin flip between the two
  actions) to at most 0.060 on every seed (red, entropy panel): its first updates made
  the policy almost deterministic. Its clip fraction reads 0 throughout: with ε = inf
  nothing is clipped, so that column cannot see the step, however large.
* In this run the figure's seed collapses: seed 21's unclipped return (red, return
  panel) climbs slowly, to 161.8, and then, after updates whose KL is above 1, drops
  after 90,000 steps to 9.2 and stays there to the end: the policy now picks the same action in every state it
  meets, and the pole falls in about ten steps. Nothing stops an unclipped step at a
  large learning rate, repeated over twelve epochs, from driving the policy's
  probabilities to 0 and 1 within float32's precision in those states. There the sampled
  action has probability 1, so its log-probability has no gradient, every ratio is
  exactly 1 and the entropy is 0: no later update can move the policy. The KL drawn at
  the floor of its panel from then on is that symptom: a policy that has stopped moving,
  not one that has converged. The critic's explained variance dips as the episodes
  change and then climbs back towards 1, because ten-step episodes are easy to predict:
  that panel looks healthy again on a dead run. Other seeds of this setting collapse
  too (26 and 29 in this run, the claim's line below), earlier or later, or keep learning by large steps to the end (when and whether a
  seed collapses moves with the last bits of rounding; the claim below checks that at
  least one does), so the setting is behind the preset at the end of the sweep's budget (an <a href="../glossary.html#term-IQM">IQM</a> of 82.2 against
  176.7 at 20,480 steps, the last section's table) and its seeds spread widely.
* The preset's KL falls as its learning rate anneals: its last quarter's KL is 0.0011,
  about a quarter of its mean over the run, 0.0041. The constant learning rate's does
  not fall: its last quarter, 0.036, is above its mean, 0.025, which is six times the
  preset's. A mean over the run shows neither trend.
"""

# %% tags=["claims"]
early_iterations = max(1, SHORT_BUDGET // (4 * BATCH))  # the first few iterations: a quarter of the sweep's budget
preset_kl, large_kl, reckless_kl = (kl_profiles[key] for key in LONG)
reckless_entropy_early = max(history[early_iterations - 1]["entropy"] for history in long_runs[RECKLESS].values())
lecture.claim("the unclipped run's mean KL over the run is more than a hundred times the preset's (medians over "
              "the seeds)", reckless_kl["mean"] > 100 * preset_kl["mean"],
              measured=f"{reckless_kl['mean']:.3g} against {preset_kl['mean']:.3g}", quick=False)
lecture.claim(f"the unclipped run's entropy falls to near 0 within the first few iterations (below 0.1 on every "
              f"seed by iteration {early_iterations}; ln 2 ≈ 0.69 is a coin flip)", reckless_entropy_early < 0.1,
              measured=f"largest over the seeds {reckless_entropy_early:.3g}; the preset's last quarter "
                       f"{preset_kl['entropy (end)']:.3g}", quick=False)
collapsed = [seed for seed, history in long_runs[RECKLESS].items()
             if history[-1]["episode_return_recent"] < min(20.0, max(row["episode_return_recent"] for row in history) / 5)
             and history[-1]["approx_kl"] < KL_FLOOR]
figure_seed = long_runs[RECKLESS][SEEDS[0]]
lecture.claim("on at least one seed the unclipped run collapses: its last iteration's return is below 20 and below a "
              "fifth of its peak, and its KL there is below the plot's floor of 10⁻⁸ (a policy that has stopped moving)",
              bool(collapsed),
              measured=f"collapsed seeds {collapsed}; the figure's seed {SEEDS[0]}: peak "
                       f"{max(row['episode_return_recent'] for row in figure_seed):.1f}, last "
                       f"{figure_seed[-1]['episode_return_recent']:.1f}, last KL {figure_seed[-1]['approx_kl']:.3g}",
              quick=False)
lecture.claim("the unclipped run's clip fraction reads about 0 throughout (median mean below 0.01)",
              reckless_kl["clip fraction"] < 0.01,
              measured=f"{reckless_kl['clip fraction']:.3g} (the preset's {preset_kl['clip fraction']:.3g})")
lecture.claim("the preset's KL falls as its learning rate anneals: its last quarter's KL is less than half its mean "
              "over the run", preset_kl["last quarter"] < preset_kl["mean"] / 2,
              measured=f"{preset_kl['last quarter']:.3g} against {preset_kl['mean']:.3g}", quick=False)
lecture.claim("the constant learning rate's KL does not fall: its last quarter is at least its mean, and above the "
              "preset's mean", large_kl["last quarter"] >= large_kl["mean"] > preset_kl["mean"],
              measured=f"last quarter {large_kl['last quarter']:.3g}, mean {large_kl['mean']:.3g}, the preset's "
                       f"mean {preset_kl['mean']:.3g}", quick=False)

# %% [markdown]
"""
## A sweep on a fifth of the budget

Now the usual tuning experiment: each hyperparameter varied alone around the preset,
ten seeds per setting, each run on a fifth of the preset's budget (the line printed at
the top) so that the whole sweep fits in a lecture. The learning rate is still annealed
to 0, now over the short run.

A run's *final return* is its training return (the mean of its last 20 episodes)
averaged over the last quarter of the run. Each setting has ten of them, one per seed,
and two summaries with 95% confidence intervals (`experiments.commands.statistics.interval_estimates`,
<a href="../glossary.html#term-rliable">rliable</a>'s estimators):

* **IQM**, the interquartile mean: the mean of the middle half of the runs (with ten,
  the lowest two and the highest two dropped). One failed or lucky seed barely moves
  it, and it is less noisy than the median.
* the **mean** over the ten runs.

The interval is a bootstrap one: draw ten runs with replacement from the ten, recompute
the statistic, repeat (the table's title says how many times), and keep the middle 95%
of the results. rliable stratifies the draws by task; with one task, CartPole, that is
the plain percentile bootstrap, which with ten runs is, if anything, a little too
narrow.

A setting *differs from the preset* when its IQM interval and the preset's do not
overlap. That rule is conservative: two overlapping 95% intervals can still hide a real
difference. Overlap means "not shown by ten seeds", not "equal". The last column but
one, "seeds 21–22", is what a sweep over two seeds would have reported: the mean of the
first two runs.
"""


# %%
def setting_name(name: str, value) -> str:
    return "preset" if getattr(BASE, name) == value else f"{name}={value:g}"


SHORT = BASE.replace(total_timesteps=SHORT_BUDGET)
sweep: dict[str, dict[int, list[dict]]] = {"preset": run(SHORT)}
for name, values in SWEEP.items():
    for value in values:
        key = setting_name(name, value)
        if key not in sweep:
            sweep[key] = run(SHORT.replace(**{name: value}))
print("ran the sweep:", ", ".join(sweep))


def final_return(history: list[dict]) -> float:
    """A run's training return averaged over the last quarter of its iterations."""
    return sum(row["episode_return_recent"] for row in quarter(history)) / len(quarter(history))


def return_at(history: list[dict], step: int) -> float:
    """A run's training return at the first iteration that reached `step` environment steps."""
    return next(row["episode_return_recent"] for row in history if row["step"] >= step)


def compared(estimates: dict, key: str, reference: str) -> str:
    """'above' or 'below' `reference` when the IQM intervals do not overlap; 'overlaps' otherwise."""
    row, other = estimates[key], estimates[reference]
    if row["iqm_low"] > other["iqm_high"]:
        return "above"
    if row["iqm_high"] < other["iqm_low"]:
        return "below"
    return "overlaps"


def interval(row: dict, name: str) -> str:
    return f"{row[name]:.1f} [{row[name + '_low']:.1f}, {row[name + '_high']:.1f}]"


def diagnostics(histories: dict[int, list[dict]]) -> dict[str, float]:
    """Each diagnostic's median over the seeds of its mean over the run (KL, clip fraction) or
    over the last quarter (entropy, explained variance)."""
    medians = {}
    for name in DIAGNOSTICS:
        per_seed = []
        for history in histories.values():
            rows = quarter(history) if name in ("entropy", "explained_variance") else history
            per_seed.append(sum(row[name] for row in rows) / len(rows))
        medians[name] = median(per_seed)
    return medians


sweep_finals = {key: [final_return(history) for history in histories.values()] for key, histories in sweep.items()}
sweep_estimates = interval_estimates(sweep_finals, reps=BOOTSTRAP_REPS, seed=0)
verdicts = {key: compared(sweep_estimates, key, "preset") for key in sweep if key != "preset"}
sweep_diagnostics = {key: diagnostics(histories) for key, histories in sweep.items()}
print_table([{"setting": key,
              "IQM [95% CI]": interval(sweep_estimates[key], "iqm"),
              "mean [95% CI]": interval(sweep_estimates[key], "mean"),
              f"seeds {SEEDS[0]}–{SEEDS[1]}": sum(sweep_finals[key][:2]) / 2,
              "IQM vs preset": verdicts.get(key, "")} for key in sweep],
            title=f"Final return after {SHORT_BUDGET:,} steps over {len(SEEDS)} seeds (training return, last "
                  f"quarter of the run); 95% stratified-bootstrap intervals, {BOOTSTRAP_REPS} resamples")
print_table([{"setting": key, "approx KL": row["approx_kl"], "clip fraction": row["clip_fraction"],
              "entropy (end)": row["entropy"], "explained var. (end)": row["explained_variance"]}
             for key, row in sweep_diagnostics.items()],
            title=f"Diagnostics of the sweep, median over {len(SEEDS)} seeds (KL and clip fraction: mean over "
                  "the run; entropy, explained variance: last quarter)")

# %% [markdown]
r"""
The first figure shows the learning curves of each sweep: at every iteration the mean
over the ten seeds, and a band of $\pm\, t_{0.975,\,9} \cdot s / \sqrt{10}$ around it (s the standard
deviation over the seeds at that iteration): a 95% t-interval for the mean
(`experiments.commands.plot.mean_curve`), cut to 0–500, the range a return can take: a
t-interval is symmetric about the mean, so where most seeds sit at a bound it reaches
past it. Here that cut never binds (the highest band top is 205.6 after this short
budget); in the long runs' figure below it does. In every panel the preset is blue, the
smaller value orange and the larger value green. The second shows the table's IQM intervals, the
preset's shaded across the plot: a setting whose bar does not touch the shading
differs from the preset.
"""

# %%
ROLE_COLORS = ("tab:orange", "tab:blue", "tab:green")  # smaller than the preset's value, the preset's, larger
figure, axes = plt.subplots(2, 2, figsize=(12, 8), sharey=True)
sweep_curves = {}
for axis, (name, values) in zip(axes.flat, SWEEP.items()):
    for value, color in zip(values, ROLE_COLORS):
        key = setting_name(name, value)
        curve = sweep_curves[key] = return_curve(sweep[key])
        axis.plot(curve["x"], curve["mean"], lw=2, color=color,
                  label=f"{name} = {value:g}" + (" (preset)" if key == "preset" else ""))
        axis.fill_between(curve["x"], curve["low"], curve["high"], color=color, alpha=0.2, linewidth=0)
    axis.set_title(f"sweep over {name}: mean of {len(SEEDS)} seeds, 95% t-interval (cut at 0 and {MAX_RETURN})",
                   fontsize=10)
    axis.set_xlabel("environment steps")
    axis.set_ylabel("return, mean of the last 20 episodes")
    axis.legend(fontsize=8, loc="upper left")
lecture.save_figure(figure, "sweep_learning_curves.png")

# %%
keys = list(sweep)
verdict_colors = {"above": "tab:green", "below": "tab:red", "overlaps": "tab:gray"}
figure, axis = plt.subplots(figsize=(8, 0.45 * len(keys) + 1.4))
preset_row = sweep_estimates["preset"]
axis.axvspan(preset_row["iqm_low"], preset_row["iqm_high"], color="tab:blue", alpha=0.15, label="preset's 95% CI")
for position, key in enumerate(reversed(keys)):
    row = sweep_estimates[key]
    color = "tab:blue" if key == "preset" else verdict_colors[verdicts[key]]
    axis.plot([row["iqm_low"], row["iqm_high"]], [position, position], color=color, lw=6, alpha=0.6,
              solid_capstyle="butt")
    axis.plot([row["iqm"]], [position], marker="|", markersize=14, color="black")
    axis.plot(sweep_finals[key], [position] * len(SEEDS), "o", ms=3, color="black", alpha=0.35)
axis.set_yticks(range(len(keys)), list(reversed(keys)))
axis.set_ylim(-0.6, len(keys) + 0.4)
axis.set_xlabel(f"final return after {SHORT_BUDGET:,} steps")
axis.set_title(f"IQM of the final return and its 95% bootstrap CI ({len(SEEDS)} seeds; dots: the runs)\n"
               "green: above the preset, red: below, gray: intervals overlap", fontsize=10)
axis.grid(axis="x", alpha=0.3)
axis.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12 - 0.3 / len(keys)))
lecture.save_figure(figure, "sweep_final_return_iqm.png")

# %%
separated = [key for key, verdict in verdicts.items() if verdict != "overlaps"]
not_separated = [key for key, verdict in verdicts.items() if verdict == "overlaps"]
print(f"IQM intervals apart from the preset's ({len(separated)}): "
      + ", ".join(f"{key} ({verdicts[key]})" for key in separated))
print(f"IQM intervals overlapping the preset's ({len(not_separated)}): {', '.join(not_separated) or 'none'}")
two_seed_means = {key: sum(finals[:2]) / 2 for key, finals in sweep_finals.items()}
two_seed_gaps = {key: two_seed_means[key] - two_seed_means["preset"] for key in sweep}
ten_seed_gaps = {key: sweep_estimates[key]["iqm"] - sweep_estimates["preset"]["iqm"] for key in sweep}
two_seed_rank = sorted(sweep, key=lambda key: -two_seed_means[key])
ten_seed_rank = sorted(sweep, key=lambda key: -sweep_estimates[key]["iqm"])
print_table([{"setting": key, f"seeds {SEEDS[0]}–{SEEDS[1]} minus preset": two_seed_gaps[key],
              f"rank on {SEEDS[0]}–{SEEDS[1]}": two_seed_rank.index(key) + 1,
              f"IQM of {len(SEEDS)} seeds minus preset": ten_seed_gaps[key],
              f"rank on {len(SEEDS)} seeds": ten_seed_rank.index(key) + 1, "IQM vs preset": verdicts.get(key, "")}
             for key in sweep],
            title=f"Two seeds against {len(SEEDS)}: each setting's final return minus the preset's")


# %% [markdown]
r"""
Reading the sweep, each sentence checked below:

* Three settings end below the preset with intervals apart: the learning rate divided
  by four, ε = 0.05 and λ = 0. The other five, the larger learning rate, ε = 0.5, K = 2,
  K = 12 and λ = 1, overlap the preset: ten seeds do not separate them from it on this
  budget. None is separated above.
* Steps that are too small show in the diagnostics: a quarter of the learning rate and
  K = 2 have a lower KL and clip fraction than the preset, and their critics explain
  less of the return (explained variance 0.093 and 0.090 against the preset's 0.74),
  since they too take smaller steps. The larger steps (learning rate × 4, ε = 0.5,
  K = 12) move the policy further: a KL of 0.0124, 0.0277 and 0.0103 against the
  preset's 0.0070.
* ε = 0.05 is the case to read carefully: it clips a larger share of the samples than
  the preset (0.24 against 0.089) while its KL is lower (0.00093 against 0.0070). A
  narrow band clips more and lets the policy move less.
* λ = 0 ends below every other setting (an IQM of 15.6; the next lowest is 60.0), and
  yet its explained variance is above the preset's (0.91 against 0.74). With λ = 0 the target the critic is scored against is $r + \gamma V(s')$, mostly
  its own guess, which it predicts easily: explained variance is no guide to the
  advantages' quality here.
* Two seeds rank the settings differently from ten (the table above). On seeds 21–22
  alone K = 12 scores 15.4 above the preset; over ten seeds its IQM is 0.3 below the
  preset's, level with it. ε = 0.5 is above the preset on two seeds (by 18.1) and on
  ten (by 18.1, its interval still overlapping the preset's), so two seeds are not always wrong;
  but among the settings ten seeds cannot tell from the preset, their order on two
  seeds is not their order on ten. What two seeds get right here are the large gaps:
  the three settings ten seeds put below the preset are below it on seeds 21–22 as
  well. The dots of the interval figure show how far apart single runs of one setting
  land.
"""

# %% tags=["claims"]
sweep_band_top = max(max(curve["unclipped_high"]) for curve in sweep_curves.values())
lecture.claim("in the sweep's figure the cut at 500 never binds: every band stays below 500",
              sweep_band_top < MAX_RETURN, measured=f"highest band top {sweep_band_top:.1f}")
lecture.claim("three settings end below the preset with intervals apart: lr / 4, ε = 0.05 and λ = 0; none above",
              set(separated) == {"learning_rate=0.00125", "clip_coef=0.05", "gae_lambda=0"}
              and all(verdicts[key] == "below" for key in separated),
              measured=", ".join(f"{key} {verdicts[key]}" for key in separated) or "none apart", quick=False)
small_steps, large_steps = ("learning_rate=0.00125", "update_epochs=2"), \
    ("learning_rate=0.02", "clip_coef=0.5", "update_epochs=12")
preset_row = sweep_diagnostics["preset"]
lecture.claim("a quarter of the learning rate and K = 2 have a lower KL and clip fraction than the preset, and an "
              "explained variance far below it (less than half)",
              all(sweep_diagnostics[key]["approx_kl"] < preset_row["approx_kl"]
                  and sweep_diagnostics[key]["clip_fraction"] < preset_row["clip_fraction"]
                  and sweep_diagnostics[key]["explained_variance"] < preset_row["explained_variance"] / 2
                  for key in small_steps),
              measured="; ".join(f"{key}: KL {sweep_diagnostics[key]['approx_kl']:.3g}, clip "
                                 f"{sweep_diagnostics[key]['clip_fraction']:.3g}, EV "
                                 f"{sweep_diagnostics[key]['explained_variance']:.3g}" for key in ("preset", *small_steps)),
              quick=False)
lecture.claim("the larger steps (lr × 4, ε = 0.5, K = 12) have a higher KL than the preset",
              all(sweep_diagnostics[key]["approx_kl"] > preset_row["approx_kl"] for key in large_steps),
              measured=", ".join(f"{key} {sweep_diagnostics[key]['approx_kl']:.3g}" for key in ("preset", *large_steps)),
              quick=False)
narrow = sweep_diagnostics["clip_coef=0.05"]
lecture.claim("ε = 0.05 clips a larger share of the samples than the preset while its KL is lower",
              narrow["clip_fraction"] > preset_row["clip_fraction"] and narrow["approx_kl"] < preset_row["approx_kl"],
              measured=f"clip fraction {narrow['clip_fraction']:.3g} against {preset_row['clip_fraction']:.3g}, "
                       f"KL {narrow['approx_kl']:.3g} against {preset_row['approx_kl']:.3g}", quick=False)
td_zero = "gae_lambda=0"
lecture.claim("λ = 0 ends below every other setting, and its explained variance is above the preset's",
              all(sweep_estimates[td_zero]["iqm"] < sweep_estimates[key]["iqm"] for key in sweep if key != td_zero)
              and sweep_diagnostics[td_zero]["explained_variance"] > preset_row["explained_variance"],
              measured=f"IQM {sweep_estimates[td_zero]['iqm']:.1f} (next lowest "
                       f"{min(row['iqm'] for key, row in sweep_estimates.items() if key != td_zero):.1f}); explained "
                       f"variance {sweep_diagnostics[td_zero]['explained_variance']:.3g} against "
                       f"{preset_row['explained_variance']:.3g}", quick=False)
two_seeds = f"seeds {SEEDS[0]}–{SEEDS[1]}"
lecture.claim(f"on {two_seeds} alone K = 12 scores more than 10 above the preset; over ten seeds its IQM is within 2 "
              "of the preset's", two_seed_gaps["update_epochs=12"] > 10 and abs(ten_seed_gaps["update_epochs=12"]) < 2,
              measured=f"{two_seeds}: {two_seed_gaps['update_epochs=12']:+.1f}; IQM: "
                       f"{ten_seed_gaps['update_epochs=12']:+.1f}", quick=False)
lecture.claim("ε = 0.5 is above the preset on two seeds and on ten, its interval still overlapping the preset's",
              two_seed_gaps["clip_coef=0.5"] > 0 and ten_seed_gaps["clip_coef=0.5"] > 0
              and verdicts["clip_coef=0.5"] == "overlaps",
              measured=f"{two_seeds}: {two_seed_gaps['clip_coef=0.5']:+.1f}; IQM: {ten_seed_gaps['clip_coef=0.5']:+.1f} "
                       f"({verdicts['clip_coef=0.5']})", quick=False)
close_to_preset = ["preset", *not_separated]
lecture.claim("among the settings ten seeds cannot tell from the preset, their order on two seeds is not their order "
              "on ten", [key for key in two_seed_rank if key in close_to_preset]
              != [key for key in ten_seed_rank if key in close_to_preset],
              measured=f"on {two_seeds}: {', '.join(key for key in two_seed_rank if key in close_to_preset)}; on ten: "
                       f"{', '.join(key for key in ten_seed_rank if key in close_to_preset)}", quick=False)
lecture.claim(f"the settings ten seeds put below the preset are below it on {two_seeds} as well",
              bool(separated) and all(two_seed_gaps[key] < 0 for key in separated if verdicts[key] == "below"),
              measured=", ".join(f"{key} {two_seed_gaps[key]:+.1f}" for key in separated) or "none apart", quick=False)

# %% [markdown]
"""
## The same question at the full budget

The short sweep asked which setting is ahead after a fifth of the budget. The long runs
of the first section answer the question a user tunes for: which is ahead at the end.
Each is scored three ways, each an IQM over the ten seeds with its interval: the return
at the step where the sweep's runs ended (read off the long run), the best return of
the run (its peak), and the final return (the last quarter's mean).
"""

# %%
scores = {
    "early": {key: [return_at(history, SHORT_BUDGET) for history in histories.values()]
              for key, histories in long_runs.items()},
    "peak": {key: [max(row["episode_return_recent"] for row in history) for history in histories.values()]
             for key, histories in long_runs.items()},
    "final": {key: [final_return(history) for history in histories.values()] for key, histories in long_runs.items()},
}
long_estimates = {when: interval_estimates(by_setting, reps=BOOTSTRAP_REPS, seed=0) for when, by_setting in scores.items()}
long_verdicts = {when: {key: compared(estimates, key, "preset") for key in LONG if key != "preset"}
                 for when, estimates in long_estimates.items()}
print_table([{"setting": key,
              f"at {SHORT_BUDGET:,} steps": interval(long_estimates["early"][key], "iqm"),
              "peak": interval(long_estimates["peak"][key], "iqm"),
              "final (last quarter)": interval(long_estimates["final"][key], "iqm"),
              "vs preset: early / final": "" if key == "preset" else
              f"{long_verdicts['early'][key]} / {long_verdicts['final'][key]}"} for key in LONG],
            title=f"The long runs ({BASE.num_iterations * BATCH:,} steps), IQM [95% CI] over {len(SEEDS)} seeds, "
                  f"{BOOTSTRAP_REPS} resamples")
drops = {key: [peak - final for peak, final in zip(scores["peak"][key], scores["final"][key])] for key in LONG}
print("peak minus final return, median over seeds: "
      + ", ".join(f"{key} {median(values):.1f}" for key, values in drops.items()))

figure, axis = plt.subplots(figsize=(9, 5))
long_curves = {}
for key, histories in long_runs.items():
    curve = long_curves[key] = return_curve(histories)
    axis.plot(curve["x"], curve["mean"], lw=2, color=LONG_COLORS[key], label=key)
    axis.fill_between(curve["x"], curve["low"], curve["high"], color=LONG_COLORS[key], alpha=0.2, linewidth=0)
axis.axvline(SHORT_BUDGET, color="black", ls="--", lw=1, label="where the sweep's runs end")
axis.set_xlabel("environment steps")
axis.set_ylabel("return, mean of the last 20 episodes")
axis.set_title(f"The full budget: mean of {len(SEEDS)} seeds, 95% t-interval (cut at 0 and {MAX_RETURN})", fontsize=10)
axis.legend(fontsize=8, loc="lower right")
lecture.save_figure(figure, "long_runs.png")
long_band_tops = {key: max(curve["unclipped_high"]) for key, curve in long_curves.items()}
print("highest top of each band before the cut at 500: "
      + ", ".join(f"{key} {top:.1f}" for key, top in long_band_tops.items()))

# %% [markdown]
"""
Reading the table and the figure, each sentence checked below:

* The bands are cut at 500, the most a return can be. Late in the runs the
  t-intervals of the preset and of the larger learning rate, symmetric about the mean,
  reach above 500 (to 521.5 and 509.1, the line under the figure): a range of returns no
  run can score, which is why they are cut.
* The larger constant learning rate's interval reaches into the preset's where the
  sweep's runs end, as in the sweep (its IQM, 184.6, is inside the preset's
  interval), and at the end its IQM is inside the preset's interval too: ten seeds separate
  it from the preset at neither budget. Nor did it degrade late on this task: its median drop
  from its peak to its final return is 3.6, against the preset's 11.7. A larger step is
  not harmful by itself; whether it is, only a run of the length you will train for
  can say.
* The unclipped run is below the preset where the sweep's runs end, intervals apart,
  and its IQM is still below the preset's at the end (289.5 against 470.1). What the
  short budget cannot show is how it gets there: its final interval is 304.6 wide
  against the preset's 80.6, 3.8 times as wide (its seeds land far apart: the red band
  of the figure), and it falls furthest from its own peak: its median drop from peak
  to final return is 102.1, more than 8 times the preset's 11.7. With an interval that
  wide, whether ten seeds separate its end from the preset's is where rounding takes
  the runs: here they do not (its interval, [138.7, 443.3], reaches into the preset's,
  [417.6, 498.1]); with other rounding it can lie below it.
"""

# %% tags=["claims"]
lecture.claim("late in the runs the t-intervals of the preset and of the larger learning rate reach above 500",
              min(long_band_tops["preset"], long_band_tops[LARGE]) > MAX_RETURN,
              measured=f"highest band tops: preset {long_band_tops['preset']:.1f}, {LARGE} {long_band_tops[LARGE]:.1f}",
              quick=False)
large_early, large_final = long_verdicts["early"][LARGE], long_verdicts["final"][LARGE]
lecture.claim("ten seeds separate the larger constant learning rate from the preset at neither budget",
              large_early == "overlaps" and large_final == "overlaps",
              measured=f"at {SHORT_BUDGET:,} steps: {large_early}; final: {large_final}", quick=False)
lecture.claim("the larger constant learning rate's median drop from peak to final return is no larger than the "
              "preset's", median(drops[LARGE]) <= median(drops["preset"]),
              measured=f"{median(drops[LARGE]):.1f} against {median(drops['preset']):.1f}", quick=False)
reckless_early, reckless_final = long_verdicts["early"][RECKLESS], long_verdicts["final"][RECKLESS]
reckless_final_iqm, preset_final_iqm = (long_estimates["final"][key]["iqm"] for key in (RECKLESS, "preset"))
lecture.claim("the unclipped run is below the preset where the sweep's runs end (intervals apart), and its IQM is "
              "still below the preset's at the end", reckless_early == "below" and reckless_final_iqm < preset_final_iqm,
              measured=f"at {SHORT_BUDGET:,} steps: {reckless_early}; final IQM {reckless_final_iqm:.1f} against "
                       f"{preset_final_iqm:.1f} (intervals: {reckless_final})", quick=False)
final_widths = {key: long_estimates["final"][key]["iqm_high"] - long_estimates["final"][key]["iqm_low"] for key in LONG}
lecture.claim("the unclipped run's final interval is more than three times as wide as the preset's",
              final_widths[RECKLESS] > 3 * final_widths["preset"],
              measured=f"{final_widths[RECKLESS]:.1f} against {final_widths['preset']:.1f}", quick=False)
lecture.claim("the unclipped run's median drop from peak to final return is more than three times the preset's",
              median(drops[RECKLESS]) > 3 * median(drops["preset"]),
              measured=f"{median(drops[RECKLESS]):.1f} against {median(drops['preset']):.1f}", quick=False)

# %% [markdown]
"""
## What to take away

* Learning rate, ε and K all set *how far one update moves the policy*, and the approx
  KL shows it: the larger values of each have a higher KL than the preset, the smaller
  learning rate and K a lower one.
* A run whose steps are far too large shows it in several columns at once: a KL orders
  of magnitude above a healthy run's and an entropy that collapses early. The clip
  fraction alone would have missed it here: with the clip removed it reads 0 in every
  iteration.
* Read the diagnostics per iteration: the preset's KL falls as its learning rate
  anneals, the constant learning rate's does not, and the mean over a run hides both.
* λ does not change the step size but the quality of the advantages; with λ = 0 the
  return collapses while the explained variance looks better than the preset's.
* A difference between two settings is a claim about how the runs of each are
  distributed, not about one run of each: ten seeds, intervals, and "not separated"
  where they overlap, which calls for more seeds, not for the conclusion that the
  settings are equal. Two seeds alone put K = 12 well above the preset; ten seeds put
  it level.
* A sweep of short runs measures early speed. Here the short budget and the full one
  agreed on the larger learning rate (not separated at either) and on the direction of
  the unclipped run (its IQM below the preset's at both, intervals apart only at the
  short budget in this run), but only the full budget shows what the unclipped
  run does after the sweep's runs end: the widest spread over seeds and the largest
  late drop from its peak, so wide that whether ten seeds separate its end from the
  preset's changes with the rounding of the runs. Compare settings at the budget you
  will train with, as this lecture's last table does.

When a run misbehaves, the order to check is: KL and clip fraction (step size), then
entropy (exploration), then explained variance (critic), then the implementation
details of [lecture 8](08_implementation_details.ipynb). `target_kl` in `ppo/config.py` stops an update's epochs early when
the KL passes a threshold; [lecture 9](09_variants.ipynb) adapts the step size to the KL instead. For run
folders written by `ppo-train --seeds 21-30` (or a sweep), `ppo-plot` draws the same
curves, intervals and a performance profile from the shell.
"""

# %%
lecture.finish()
