# %% [markdown]
r"""
# Lecture 9 — Variants: PPO-Penalty, adaptive clipping and dual-clip

**What it teaches.** PPO-Clip controls the step size with a fixed ε. The <a href="../glossary.html#term-PPO">PPO</a> paper
(Schulman et al. 2017, section 4) also proposed a penalty on the <a href="../glossary.html#term-KL-divergence">KL divergence</a> instead
of the clip, with a coefficient that adapts to how far each update actually went:

$$
L_\text{policy} = -\mathbb E\big[r_t(\theta)\,\hat A_t\big] + \beta\,\mathrm{KL}[\pi_\text{old} \,\Vert\, \pi_\theta]
$$

and after each update, with $d = \mathrm{KL}[\pi_\text{old} \,\Vert\, \pi_\theta]$ measured on the <a href="../glossary.html#term-Rollout">rollout</a>,

$$
\beta \leftarrow
\begin{cases}
2\beta & \text{if } d > 1.5\, d_\text{targ} \quad \text{(it moved too far: penalise more),}\\
\beta / 2 & \text{if } d < d_\text{targ} / 1.5 \quad \text{(it barely moved: penalise less).}
\end{cases}
$$

The factors 1.5 and 2 are the paper's. The same feedback can steer ε instead —
*<a href="../glossary.html#term-Adaptive-clipping">adaptive clipping</a>*: halve ε after an update that overshot the <a href="../glossary.html#term-Target-KL">KL target</a>, double it
after one that undershot, within [0.02, 0.5]. That rule is **this library's own**, an
illustration of the idea, not a method from the literature. Both replace a step size
you have to guess (ε) with a KL you have to choose ($d_\text{targ}$). This lecture runs all
three on CartPole over ten seeds and asks what the feedback achieves: does it hold the
KL of each update near $d_\text{targ}$, and does it change the <a href="../glossary.html#term-Return">return</a>?

A third variant bounds the clip from below instead: *dual-clip PPO* (Ye et al. 2020),
for samples with a negative <a href="../glossary.html#term-Advantage">advantage</a> whose <a href="../glossary.html#term-Importance-ratio">ratio</a> has run far past $1 + \varepsilon$.

**What it shows.** The penalised objective and its slope at a few ratios, next to the
clipped one, and the dual clip's bound on a sample with $\hat A < 0$; learning curves with 95% bands, the KL of each update against the target
band, and how β and ε move (plot); per-seed summaries with <a href="../glossary.html#term-IQM">IQM</a> and bootstrap
intervals (table).

**Prerequisites.** Lectures [4](04_surrogate_and_trust_regions.ipynb)–[7](07_diagnostics_and_tuning.ipynb) ([lecture 4](04_surrogate_and_trust_regions.ipynb) for the KL penalty of the TRPO bound).

**Library.** `ppo/trainers/variants.py` — `kl_penalty_loss`, the update rules
`update_kl_coefficient` and `update_clip_coefficient`, and the trainers `PPOPenalty`,
`AdaptiveClipPPO` and `DualClipPPO`, each a subclass of `ppo.trainers.ppo.PPO` that
overrides the policy loss or the ε it reads (and adapts after every update,
`after_update`); `ppo/algorithm/losses.py` (`dual_clip_surrogate_objective`).
Tests: `tests/test_variants.py`, `tests/test_dual_clip.py`.
`experiments/commands/statistics.py` (`interval_estimates`) and `experiments/commands/plot.py`
(`mean_curve`) for the statistics over seeds.
"""

# %%
import math

import numpy as np
import torch

from _common import Lecture, plt, print_table
from experiments.commands.plot import mean_curve
from experiments.commands.presets import build_config
from experiments.commands.statistics import interval_estimates
from experiments.commands.train import training_envs
from ppo.algorithm.losses import clipped_surrogate_loss, dual_clip_surrogate_loss
from ppo.trainers.ppo import PPO
from ppo.trainers.variants import KL_TOLERANCE, AdaptiveClipPPO, DualClipPPO, PPOPenalty, kl_penalty_loss, rollout_kl

lecture = Lecture("09_variants", __doc__)
# The CartPole preset was tuned on seeds 1–20 and lecture 7 reports on 21–30: these ten are new to both.
SEEDS = lecture.choose(full=list(range(31, 41)), quick=[31, 32])
KL_TARGET = 0.01  # d_targ: the KL per update we ask for
INITIAL_BETA = 1.0
BOOTSTRAP_REPS = lecture.choose(full=2000, quick=100)
PRESET = build_config({"env_id": "CartPole-v1", "env_backend": "torch", "tensorboard": False})
BASE = PRESET.replace(anneal_lr=False,
                      total_timesteps=lecture.choose(full=PRESET.total_timesteps, quick=3 * PRESET.batch_size))
ALGORITHMS = {
    "PPO-Clip (ε = 0.2)": lambda config: PPO(config, training_envs(config), progress=False),
    "PPO-Penalty (adaptive β)": lambda config: PPOPenalty(config, training_envs(config), progress=False,
                                                          kl_target=KL_TARGET, initial_beta=INITIAL_BETA),
    "adaptive clipping": lambda config: AdaptiveClipPPO(config, training_envs(config), progress=False,
                                                        kl_target=KL_TARGET),
}
COLORS = dict(zip(ALGORITHMS, ("tab:blue", "tab:orange", "tab:green")))  # one colour per algorithm, in every panel

# %% [markdown]
r"""
## The penalised objective on one sample

`kl_penalty_loss` adds β times the <a href="../glossary.html#term-k1-k2-k3-estimators">k3</a> estimate of $\mathrm{KL}[\pi_\text{old} \,\Vert\, \pi_\theta]$, $(r - 1) - \log r$, to
the unclipped surrogate. Take one sample with $\hat A = +1$ and look at the objective (minus
the loss) and its slope in r, the direction the update pushes the ratio. PPO-Clip's
slope is 0 once $r$ passes $1 + \varepsilon$: the clip switches the sample off. The penalty never
switches a sample off; its slope is $1 - \beta(1 - 1/r)$, which with a large β points back
towards $r = 1$ from either side.
"""


# %%
def objective_and_slope(ratio: float, loss_of_log_ratio) -> tuple[float, float]:
    """The objective −loss at one sample with Â = +1 and its derivative with respect to r."""
    ratio_tensor = torch.tensor([ratio], dtype=torch.float64, requires_grad=True)
    objective = -loss_of_log_ratio(torch.log(ratio_tensor))
    (slope,) = torch.autograd.grad(objective, ratio_tensor)
    return float(objective.detach()), float(slope)


def objective_table(objectives: dict, ratios: tuple[float, ...], title: str) -> dict[tuple[str, float], float]:
    """Print each objective and its slope at each ratio; return {(objective, ratio): slope}."""
    slopes, rows = {}, []
    for ratio in ratios:
        row = {"r": ratio}
        for name, loss in objectives.items():
            value, slope = objective_and_slope(ratio, loss)
            slopes[name, ratio] = slope
            row[name] = f"{value:+.3f} (slope {slope:+.2f})"
        rows.append(row)
    print_table(rows, title=title)
    return slopes


one = torch.ones(1, dtype=torch.float64)
zero = torch.zeros(1, dtype=torch.float64)
OBJECTIVES = {"PPO-Clip ε=0.2": lambda log_ratio: clipped_surrogate_loss(log_ratio, zero, one, 0.2)}
for beta in (0.0, 1.0, 10.0):
    OBJECTIVES[f"penalty β={beta:g}"] = lambda log_ratio, beta=beta: kl_penalty_loss(log_ratio, zero, one, beta)
RATIOS = (0.5, 0.8, 1.0, 1.2, 2.0)
slopes = objective_table(OBJECTIVES, RATIOS, "Objective −L at one sample with Â = +1, and its slope ∂(−L)/∂r")

# %% tags=["claims"]
lecture.claim("PPO-Clip's slope is 0 once r passes 1 + ε (r = 2)", slopes["PPO-Clip ε=0.2", 2.0] == 0.0,
              measured=f"slope {slopes['PPO-Clip ε=0.2', 2.0]:+.3f} at r = 2")
lecture.claim("the penalty never switches a sample off: every penalised slope in the table is non-zero",
              all(slopes[name, ratio] != 0.0 for name in OBJECTIVES if name.startswith("penalty") for ratio in RATIOS),
              measured="smallest |slope| " + f"{min(abs(slopes[n, r]) for n in OBJECTIVES if n.startswith('penalty') for r in RATIOS):.3f}")
lecture.claim("with β = 10 the slope points back towards r = 1 from either side (negative at r = 2, "
              "above the surrogate's 1 at r = 0.5)",
              slopes["penalty β=10", 2.0] < 0 and slopes["penalty β=10", 0.5] > 1,
              measured=f"slope {slopes['penalty β=10', 2.0]:+.2f} at r = 2, {slopes['penalty β=10', 0.5]:+.2f} at r = 0.5")

# %% [markdown]
r"""
## A bound from below: dual-clip PPO

The clip is pessimistic in one direction only. For a sample with $\hat A < 0$ (an action that
did worse than expected) PPO-Clip's objective is $\min\big(r \hat A,\ \operatorname{clip}(r, 1 - \varepsilon, 1 + \varepsilon)\,\hat A\big)$,
and once $r > 1 + \varepsilon$ the first term is the smaller one: the objective is $r \hat A$, which
falls without bound as $r$ grows. An action the new policy already likes far more than
the old one did ($r = 10$, say) keeps its full slope $\hat A$, and a few such samples can
dominate a <a href="../glossary.html#term-Minibatch">minibatch</a>. Dual-clip PPO (Ye et al. 2020, who trained agents for a
multi-player game with it) adds a floor $c\hat A$, $c > 1$ (3 in their paper and here):

$$
L^\text{dual}(r, \hat A) =
\begin{cases}
\min\big(r \hat A,\ \operatorname{clip}(r, 1 - \varepsilon, 1 + \varepsilon)\,\hat A\big) & \hat A \ge 0 \quad \text{(PPO-Clip's)},\\
\max\Big(\min\big(r \hat A,\ \operatorname{clip}(r, 1 - \varepsilon, 1 + \varepsilon)\,\hat A\big),\ c \hat A\Big) & \hat A < 0,
\end{cases}
$$

so for $\hat A < 0$ and $r > c$ the objective is the constant $c\hat A$ and the sample sends no
gradient. Below $r = c$, and for every $\hat A \ge 0$, it is PPO-Clip exactly. Take one sample
with $\hat A = -1$:
"""

# %%
minus_one = -torch.ones(1, dtype=torch.float64)
DUAL_RATIOS = (0.5, 1.0, 2.0, 3.5, 10.0)
DUAL_OBJECTIVES = {"PPO-Clip ε=0.2": lambda log_ratio: clipped_surrogate_loss(log_ratio, zero, minus_one, 0.2),
                   "dual-clip c=3": lambda log_ratio: dual_clip_surrogate_loss(log_ratio, zero, minus_one, 0.2, 3.0)}
dual_slopes = objective_table(DUAL_OBJECTIVES, DUAL_RATIOS,
                              "Objective −L at one sample with Â = −1, and its slope ∂(−L)/∂r")

# %% tags=["claims"]
lecture.claim("for Â < 0, PPO-Clip's slope stays −1 however far r runs past 1 + ε (r = 3.5 and 10)",
              all(math.isclose(dual_slopes["PPO-Clip ε=0.2", r], -1.0, abs_tol=1e-9) for r in (3.5, 10.0)),
              measured=f"slopes {dual_slopes['PPO-Clip ε=0.2', 3.5]:+.2f} and {dual_slopes['PPO-Clip ε=0.2', 10.0]:+.2f}")
lecture.claim("the dual clip's slope is 0 past r = c and PPO-Clip's below it",
              dual_slopes["dual-clip c=3", 3.5] == dual_slopes["dual-clip c=3", 10.0] == 0.0
              and all(math.isclose(dual_slopes["dual-clip c=3", r], dual_slopes["PPO-Clip ε=0.2", r], abs_tol=1e-12)
                      for r in (0.5, 1.0, 2.0)),
              measured=", ".join(f"r = {r:g}: {dual_slopes['dual-clip c=3', r]:+.2f}" for r in DUAL_RATIOS))

# %% [markdown]
"""
Dual-clip is written in the library as a variant is meant to be added: one class,
`DualClipPPO` in `ppo/trainers/variants.py`, whose `policy_loss` is the objective above
and whose one setting, c, is declared with its default, its meaning and the values it
allows (`settings = {"dual_clip": Setting(3.0, ..., above=1.0)}`), and one
registration (`@register_algorithm("dual-clip", ...)`). From those alone it trains as
`ppo-train --algorithm dual-clip --dual-clip 3`, on a recurrent network too, a batch of
seeds with `--seeds`, and resumes with its c. Its trainer logs `dual_clip_fraction`,
the share of samples held at the bound. One run on the CartPole <a href="../glossary.html#term-Preset">preset</a> (seed 31, the
first of the seeds below) shows how seldom the bound binds there: ratios rarely reach
3 within an update of four minibatches. It was built for long updates on data from
older policies, where ratios run away. `tests/test_dual_clip.py` checks the objective
and its gradient by hand and that the preset still solves CartPole with it.
"""

# %%
dual_run = DualClipPPO(BASE.replace(seed=SEEDS[0]), training_envs(BASE), progress=False)
dual_metrics = []
dual_run.train(callback=lambda ppo, metrics: dual_metrics.append(metrics))
held = [row["dual_clip_fraction"] for row in dual_metrics]
print(f"dual-clip PPO, seed {SEEDS[0]}, {dual_run.global_step:,} steps: mean return of the last 20 episodes "
      f"{dual_metrics[-1]['episode_return_recent']:.1f}; share of samples held at c·Â: largest {max(held):.2e}, "
      f"non-zero in {sum(value > 0 for value in held)} of {len(held)} updates")

# %% tags=["claims"]
lecture.claim("on the CartPole preset the dual clip holds fewer than one sample in a hundred in every update",
              max(held) < 0.01, measured=f"largest share {max(held):.2e}")

# %% [markdown]
r"""
## Training the three over ten seeds

All three start from the library's CartPole preset ([lecture 6](06_ppo_cartpole.ipynb), `ppo-train
--list-presets`) with one change: the learning rate stays constant instead of
<a href="../glossary.html#term-Learning-rate-annealing">annealing</a> to 0, because an annealed step makes the last updates move the policy by
ever less whatever β or ε is, and a KL target would then be missed by construction.
Each run is 48 <a href="../glossary.html#term-Iteration">iterations</a> of $64 \times 32 = 2{,}048$ steps, 98,304 steps: the preset's
`total_timesteps` of 100,000 rounded down to whole iterations.
The adaptive ones use $d_\text{targ} = 0.01$ and start from $\beta_0 = 1$ and the preset's $\varepsilon = 0.2$.
The variants report, per iteration, the coefficient the update used (`beta` or
`clip_coef`) and the KL measured on the whole rollout afterwards (`kl_after_update`);
for PPO-Clip the callback measures the same KL with the same function,
`ppo.trainers.variants.rollout_kl`. The thirty runs here are single runs, one after another,
so each is exactly the run `ppo-train --algorithm penalty --seed N` makes; `--seeds` would
train each variant's ten as one <a href="../glossary.html#term-Seed-batch">seed batch</a> (`PPOPenalty(config, envs, seeds=SEEDS)`: the
same class with a member axis), the same experiment within float32 rounding.
"""

# %%
print(f"CartPole preset, anneal_lr {PRESET.anneal_lr} → {BASE.anneal_lr}: {BASE.num_envs} envs × {BASE.num_steps} steps, "
      f"{BASE.update_epochs} epochs × {BASE.num_minibatches} minibatches, lr {BASE.learning_rate}, ε {BASE.clip_coef}; "
      f"{BASE.num_iterations} iterations of {BASE.batch_size:,}, {BASE.num_iterations * BASE.batch_size:,} steps per run; "
      f"seeds {SEEDS[0]}–{SEEDS[-1]}")
histories = {name: {} for name in ALGORITHMS}
for name, make in ALGORITHMS.items():
    for seed in SEEDS:
        trainer = make(BASE.replace(seed=seed))
        history = []

        def record(ppo: PPO, metrics: dict) -> None:
            kl = metrics["kl_after_update"] if "kl_after_update" in metrics else rollout_kl(ppo)
            history.append({"step": ppo.global_step, **metrics, "kl_after_update": kl})

        trainer.train(callback=record)
        histories[name][seed] = history
    print(f"ran {name}")

# %% [markdown]
r"""
## Per seed, then over seeds

Each run gives four numbers: its *final return* (the mean of its last 20 training
episodes, averaged over the last quarter of the run, as in [lecture 7](07_diagnostics_and_tuning.ipynb)), the median of
its per-update KLs, the share of its updates whose KL fell inside the band
$[d_\text{targ} / 1.5,\ 1.5\, d_\text{targ}]$ where neither rule acts, and the spread of its KLs (the
ratio of the 90th to the 10th percentile). Over the ten seeds: the IQM with a 95%
<a href="../glossary.html#term-Bootstrap-confidence-interval">stratified-bootstrap interval</a> (`experiments.commands.statistics.interval_estimates`; [lecture 7](07_diagnostics_and_tuning.ipynb)).
"""

# %%
low, high = KL_TARGET / KL_TOLERANCE, KL_TARGET * KL_TOLERANCE
per_run = {name: {"final return": [], "median KL": [], "share in band": [], "KL spread p90/p10": []} for name in ALGORITHMS}
for name in ALGORITHMS:
    for history in histories[name].values():
        tail = history[-max(1, len(history) // 4):]
        kl_values = torch.tensor([row["kl_after_update"] for row in history], dtype=torch.float64)
        per_run[name]["final return"].append(sum(row["episode_return_recent"] for row in tail) / len(tail))
        per_run[name]["median KL"].append(float(kl_values.median()))
        per_run[name]["share in band"].append(float(((kl_values >= low) & (kl_values <= high)).double().mean()))
        per_run[name]["KL spread p90/p10"].append(float(kl_values.quantile(0.9) / kl_values.quantile(0.1)))
estimates = {quantity: interval_estimates({name: np.array(per_run[name][quantity]) for name in ALGORITHMS},
                                          reps=BOOTSTRAP_REPS, seed=0)
             for quantity in per_run[next(iter(ALGORITHMS))]}


def interval(quantity: str, name: str, digits: int = 3) -> str:
    row = estimates[quantity][name]
    return f"{row['iqm']:.{digits}g} [{row['iqm_low']:.{digits}g}, {row['iqm_high']:.{digits}g}]"


print_table([{"algorithm": name, **{quantity: interval(quantity, name) for quantity in per_run[name]}}
             for name in ALGORITHMS],
            title=f"IQM [95% CI] over {len(SEEDS)} seeds; KL band [{low:.4f}, {high:.4f}] around d_targ = {KL_TARGET}")
for name in ALGORITHMS:
    print(f"{name}, per seed: final return " + " ".join(f"{value:.0f}" for value in per_run[name]["final return"])
          + "; median KL " + " ".join(f"{value:.4f}" for value in per_run[name]["median KL"]))
for name, key in (("PPO-Penalty (adaptive β)", "beta"), ("adaptive clipping", "clip_coef")):
    values = [row[key] for history in histories[name].values() for row in history]
    print(f"{name}: {key} ranged over [{min(values):.4g}, {max(values):.4g}] across updates and seeds")


def overlaps(quantity: str, first: str, second: str) -> bool:
    a, b = estimates[quantity][first], estimates[quantity][second]
    return a["iqm_low"] <= b["iqm_high"] and b["iqm_low"] <= a["iqm_high"]


# %% [markdown]
"""
## The figure

Left: the return, the mean of the ten seeds with its 95% <a href="../glossary.html#term-t-interval">t-interval</a>
(`experiments.commands.plot.mean_curve`). Middle: the KL of each update, the median over seeds
with the band between the 25th and 75th percentiles, on a log axis (every KL here is
positive), with the target band in grey. Right: β and ε, median over seeds and
interquartile band; the dotted lines are ε's bounds. Each algorithm has one colour in
all three panels.
"""


# %%
def quantile_curve(name: str, key: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Steps, and the 25th, 50th and 75th percentiles over seeds of `key` at each iteration."""
    runs = list(histories[name].values())
    values = np.array([[row[key] for row in history] for history in runs])  # (seeds, iterations)
    steps = np.array([row["step"] for row in runs[0]])
    return steps, *np.percentile(values, [25, 50, 75], axis=0)


figure, axes = plt.subplots(1, 3, figsize=(16, 4.6))
for name in ALGORITHMS:
    curve = mean_curve([([row["step"] for row in history], [row["episode_return_recent"] for row in history])
                        for history in histories[name].values()], points=len(histories[name][SEEDS[0]]))
    axes[0].plot(curve["x"], curve["mean"], color=COLORS[name], lw=2, label=name)
    axes[0].fill_between(curve["x"], curve["low"], curve["high"], color=COLORS[name], alpha=0.2, linewidth=0)
    steps, q25, q50, q75 = quantile_curve(name, "kl_after_update")
    axes[1].plot(steps, q50, color=COLORS[name], lw=1.5, label=name)
    axes[1].fill_between(steps, q25, q75, color=COLORS[name], alpha=0.2, linewidth=0)
for name, key, label in (("PPO-Penalty (adaptive β)", "beta", "β (PPO-Penalty)"), ("adaptive clipping", "clip_coef", "ε (adaptive clipping)")):
    steps, q25, q50, q75 = quantile_curve(name, key)
    axes[2].step(steps, q50, where="post", color=COLORS[name], lw=1.5, label=label)
    axes[2].fill_between(steps, q25, q75, step="post", color=COLORS[name], alpha=0.2, linewidth=0)
for index, bound in enumerate((0.02, 0.5)):
    axes[2].axhline(bound, color=COLORS["adaptive clipping"], ls=":", lw=1, label="ε's bounds" if index == 0 else None)
axes[1].axhspan(low, high, color="grey", alpha=0.25, label="target band, d_targ / 1.5 to 1.5 · d_targ")
axes[0].set_ylabel("return, mean of the last 20 episodes")
axes[0].set_title(f"Return: mean of {len(SEEDS)} seeds, 95% t-interval", fontsize=10)
axes[1].set_yscale("log")
axes[1].set_ylabel("KL[π_old ‖ π_new] on the rollout (nats)")
axes[1].set_title("KL of each update: median and interquartile band", fontsize=10)
axes[2].set_yscale("log", base=2)
axes[2].set_ylabel("coefficient (β or ε, no unit)")
axes[2].set_title("The adapted coefficient: median and interquartile band", fontsize=10)
for axis in axes:
    axis.set_xlabel("environment steps")
axes[0].legend(fontsize=8, loc="lower right")
axes[1].legend(fontsize=8, loc="best")
axes[2].legend(fontsize=8, loc="lower left")
lecture.save_figure(figure, "variants.png")

# %% [markdown]
r"""
## What the runs show

**Return.** With the preset's settings all three solve CartPole on most seeds: in this run the IQM
final return is 499.8 for each of PPO-Clip, adaptive clipping and <a href="../glossary.html#term-PPO-Penalty">PPO-Penalty</a>,
and each feedback rule's IQM interval overlaps PPO-Clip's — ten seeds show no difference
in return between the clip and either feedback rule on this task, though PPO-Penalty's
interval reaches lower. Not every run holds 500: one PPO-Penalty run falls, to 429
on seed 36 (the per-seed lines under the table), the lowest final return of all
thirty runs (PPO-Clip's lowest is 498, adaptive clipping's 494). The IQM leaves it
out, and the lower end of PPO-Penalty's interval, 486,
shows it. How many penalty runs fall,
and which, changes from one machine to another: these runs are chaotic, and a
difference in the last bits of rounding (another CPU) grows until a run ends elsewhere.
That each feedback rule's interval overlaps PPO-Clip's does not make the two overlap
each other; here they do: adaptive clipping's [498, 500] and PPO-Penalty's [486, 500].

**The KL of each update.** PPO-Clip does not aim at any KL: its KL is whatever ε, the
learning rate and K produce. The feedback rules aim at $d_\text{targ}$, but a rule that reacts
once per update, by factors of two, to a KL measured on one rollout cannot pin each
update to the band: in every run of every algorithm fewer than half of the updates
land in it (between 8% and 48% in this run), and within one run the KLs vary
several-fold: the 90th percentile is more than four times the 10th in every run (8.9 to
112 times here), and more than ten times in a typical run (the IQM over seeds of that
ratio, 12 to 44 by algorithm here). What the penalty does achieve is a centre: every PPO-Penalty run's
median KL lies within a factor of two of $d_\text{targ}$ (0.0053 to 0.0098 in this run).

**The coefficients.** β never settles (right panel): in every PPO-Penalty run it spans
a factor of 64 or more (2,048 at most) in this run. Its median over seeds rises first, from 1 to 4, then, once the runs
reach 500 and every algorithm's KL falls (middle panel, the clip's the most), the rule
halves β again and again: the median ends at 0.023 (between 1/64 and 1/32), about 170 times below its peak. That is where the penalty's worst run failed: it had reached 500,
updates that stayed below the band had halved its β below its start (to 1/32 in this
run, seed 36), and then the updates overshot: the largest went to a KL of 0.71, about 71
times $d_\text{targ}$, with β back at only 1/8 — the rule doubles β only after such an update,
one factor of two at a time — and the return fell, to 429 (the orange curve's dip in the
last quarter of the left panel). How low β had fallen, and how far the largest update went, are the
run's. Adaptive
clipping's ε runs into its upper bound 0.5 in every run, and its median KL still stays
below $d_\text{targ}$ in every run (0.0043 to 0.0092): at $\varepsilon = 0.5$ the clip no longer binds (on
average it cuts off between 0.7% and 2.6% of the samples per run here, fewer than one
in twenty), so the learning rate and K set the step, and loosening ε further cannot
raise the KL. A KL penalty returns in the language-model lectures
([12](12_ppo_for_language_models.ipynb)–[13](13_rlhf_pipeline.ipynb)), where it ties the policy to a frozen <a href="../glossary.html#term-Reference-policy-_ref">reference model</a> instead of the previous
policy.
"""

# %% tags=["claims"]
finals_iqm = {name: estimates["final return"][name]["iqm"] for name in ALGORITHMS}
lecture.claim("every algorithm's IQM final return is above 450", min(finals_iqm.values()) > 450,
              measured=", ".join(f"{name}: {value:.1f}" for name, value in finals_iqm.items()), quick=False)
names = list(ALGORITHMS)
lecture.claim("each feedback rule's IQM interval of the final return overlaps PPO-Clip's",
              all(overlaps("final return", names[0], name) for name in names[1:]),
              measured="; ".join(f"{name} {interval('final return', name)}" for name in names), quick=False)
in_band = [share for name in ALGORITHMS for share in per_run[name]["share in band"]]
lecture.claim("in every run of every algorithm fewer than half of the updates land in the band", max(in_band) < 0.5,
              measured=f"share in band between {min(in_band):.2f} and {max(in_band):.2f}", quick=False)
spreads = [spread for name in ALGORITHMS for spread in per_run[name]["KL spread p90/p10"]]
spread_iqms = {name: estimates["KL spread p90/p10"][name]["iqm"] for name in ALGORITHMS}
lecture.claim("within one run the KLs vary several-fold: the 90th percentile more than four times the 10th in every "
              "run, and more than ten times in a typical run (each algorithm's IQM over seeds of that ratio)",
              min(spreads) > 4 and min(spread_iqms.values()) > 10,
              measured=f"p90/p10 between {min(spreads):.1f} and {max(spreads):.1f}; IQM "
                       + ", ".join(f"{name} {value:.1f}" for name, value in spread_iqms.items()),
              quick=False)
penalty_medians = per_run["PPO-Penalty (adaptive β)"]["median KL"]
lecture.claim("every PPO-Penalty run's median KL lies within a factor of two of d_targ",
              all(KL_TARGET / 2 <= value <= 2 * KL_TARGET for value in penalty_medians),
              measured=f"medians between {min(penalty_medians):.4f} and {max(penalty_medians):.4f}", quick=False)
beta_spans = [max(row["beta"] for row in history) / min(row["beta"] for row in history)
              for history in histories["PPO-Penalty (adaptive β)"].values()]
lecture.claim("in every PPO-Penalty run β spans at least a factor of 16", min(beta_spans) >= 16,
              measured=f"max β / min β between {min(beta_spans):g} and {max(beta_spans):g}", quick=False)
steps, _, beta_median, _ = quantile_curve("PPO-Penalty (adaptive β)", "beta")
peak = int(np.argmax(beta_median))
kl_first_half, kl_last_quarter = ({name: float(np.median([row["kl_after_update"] for history in histories[name].values()
                                                          for row in history[part]])) for name in ALGORITHMS}
                                  for part in (slice(None, len(steps) // 2), slice(-(len(steps) // 4), None)))
lecture.claim("β's median over seeds rises first, then, with every algorithm's KL falling, ends at least 16 times below "
              "its peak", 0 < peak < len(steps) // 2 and beta_median[peak] / beta_median[-1] >= 16
              and all(kl_last_quarter[name] < kl_first_half[name] for name in ALGORITHMS),
              measured=f"median β {beta_median[0]:g} at the start, peak {beta_median[peak]:g} at step {steps[peak]:,}, "
                       f"{beta_median[-1]:g} at the end; median KL first half → last quarter: "
                       + ", ".join(f"{name} {kl_first_half[name]:.4f} → {kl_last_quarter[name]:.4f}" for name in ALGORITHMS),
              quick=False)
penalty_runs = histories["PPO-Penalty (adaptive β)"]
worst_seed = min(penalty_runs, key=lambda seed: per_run["PPO-Penalty (adaptive β)"]["final return"][SEEDS.index(seed)])
worst = penalty_runs[worst_seed]
reached = next((index for index, row in enumerate(worst) if row["episode_return_recent"] >= 500), None)
jump = max(range(len(worst)), key=lambda index: worst[index]["kl_after_update"])
lowest_beta_before = min((row["beta"] for row in worst[reached:jump]), default=None) if reached is not None else None
lecture.claim("the penalty's worst run had reached 500; after that, its largest update went more than ten times past "
              "d_targ, with β halved below its starting value β₀ = 1",
              reached is not None and jump > reached and worst[jump]["kl_after_update"] > 10 * KL_TARGET
              and worst[jump]["beta"] < INITIAL_BETA,
              measured=f"seed {worst_seed}: return ≥ 500 first at step {worst[reached]['step'] if reached is not None else None}; "
                       f"smallest β from then until its largest update {'none' if lowest_beta_before is None else f'{lowest_beta_before:g}'}; "
                       f"largest KL {worst[jump]['kl_after_update']:.3f} at step {worst[jump]['step']:,} with β "
                       f"{worst[jump]['beta']:g}; final return {per_run['PPO-Penalty (adaptive β)']['final return'][SEEDS.index(worst_seed)]:.0f}",
              quick=False)
clip_maxima = [max(row["clip_coef"] for row in history) for history in histories["adaptive clipping"].values()]
lecture.claim("adaptive clipping's ε runs into its upper bound 0.5 in every run", min(clip_maxima) == 0.5,
              measured=f"largest ε per run between {min(clip_maxima):g} and {max(clip_maxima):g}", quick=False)
at_bound = [[row["clip_fraction"] for row in history if row["clip_coef"] == 0.5]
            for history in histories["adaptive clipping"].values()]
clipped_at_bound = [sum(values) / len(values) if values else math.nan for values in at_bound]  # nan: never at 0.5
lecture.claim("at ε = 0.5 the clip cuts off fewer than one sample in twenty on average, in every run",
              max(clipped_at_bound) < 0.05,
              measured="mean clip fraction at ε = 0.5 per run between "
                       f"{min(clipped_at_bound):.3f} and {max(clipped_at_bound):.3f}", quick=False)
clip_medians = per_run["adaptive clipping"]["median KL"]
lecture.claim("adaptive clipping's median KL stays below d_targ in every run", max(clip_medians) < KL_TARGET,
              measured=f"medians between {min(clip_medians):.4f} and {max(clip_medians):.4f}", quick=False)
lowest = {name: min(per_run[name]["final return"]) for name in ALGORITHMS}
lecture.claim("the lowest final return of all thirty runs is a PPO-Penalty run's, below 450",
              min(lowest, key=lowest.get) == "PPO-Penalty (adaptive β)" and lowest["PPO-Penalty (adaptive β)"] < 450,
              measured=", ".join(f"{name}: lowest {value:.0f}" for name, value in lowest.items()), quick=False)

# %%
lecture.finish()
