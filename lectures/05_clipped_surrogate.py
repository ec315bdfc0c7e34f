# %% [markdown]
r"""
# Lecture 5 — The clipped surrogate objective

> **If you skipped [lecture 4](04_surrogate_and_trust_regions.ipynb).** PPO collects a batch with the current policy
> $\pi_{\text{old}}$ and then takes many gradient steps on it. To score a new policy
> $\pi_\theta$ on $\pi_{\text{old}}$'s samples it weights each sample by the
> *<a href="../glossary.html#term-Importance-ratio">probability ratio</a>*
>
> $$r_t(\theta) = \frac{\pi_\theta(a_t \mid s_t)}{\pi_{\text{old}}(a_t \mid s_t)},$$
>
> which gives the *<a href="../glossary.html#term-Surrogate-objective">surrogate objective</a>* $\mathbb E[r_t(\theta) \hat A_t]$, with $\hat A_t$
> the advantages of [lecture 3](03_gae.ipynb). At $\theta = \theta_{\text{old}}$ every
> ratio is 1 and its gradient is the policy gradient; away from $\pi_{\text{old}}$ it is
> wrong, because it keeps $\pi_{\text{old}}$'s states where the new policy would visit
> others. How far the policy moved is measured by the *<a href="../glossary.html#term-KL-divergence">KL divergence</a>*
> $\mathrm{KL}(\pi_{\text{old}}(\cdot \mid s) \,\Vert\, \pi_\theta(\cdot \mid s))$,
> averaged over the batch's states; the *<a href="../glossary.html#term-Trust-region">trust region</a>* is the set of policies within a
> small KL of $\pi_{\text{old}}$ (TRPO's δ = 0.01), where the surrogate still predicts
> the change in return. *[Lecture 4](04_surrogate_and_trust_regions.ipynb)'s update* is the one that lecture measures: PPO trains
> CartPole for a few iterations, collects one more <a href="../glossary.html#term-Rollout">rollout</a> of 1,024 samples and saves the
> network, the optimiser and the minibatch order (`lectures/_saved_update.py`), so that
> the same update, K = 10 <a href="../glossary.html#term-Epoch">epochs</a> of minibatch steps, can be repeated from the same start
> with other settings. With the clip, its updates stayed inside the trust region and the
> surrogate predicted the change in return; without it, they left it and the prediction
> overshot.

**What it teaches.** [Lecture 4](04_surrogate_and_trust_regions.ipynb) repeated one PPO update from the same start with and
without the clip and measured, for each, the gain in return the surrogate predicted
against the change measured on fresh episodes, and how far (in KL) the update moved the
policy: the further it moved, the less the prediction was worth, and the clip kept the
updates close. This lecture takes the clip apart. With the probability ratio
$r_t(\theta) = \pi_\theta(a_t \mid s_t) / \pi_{\text{old}}(a_t \mid s_t)$:

$$
\begin{aligned}
L^{\text{PG}}(\theta) &= \mathbb E\big[r_t(\theta) \hat A_t\big] \qquad \text{(same gradient as REINFORCE at } \theta = \theta_{\text{old}}\text{)} \\
L^{\text{CLIP}}(\theta) &= \mathbb E\Big[\min\big(r_t(\theta) \hat A_t,\; \operatorname{clip}(r_t(\theta), 1 - \varepsilon, 1 + \varepsilon) \hat A_t\big)\Big]
\end{aligned}
$$

$L^{\text{PG}}$ is [lecture 4](04_surrogate_and_trust_regions.ipynb)'s surrogate as PPO computes it: a mean over the rollout's samples,
without the $\gamma^t$ weights ([lecture 1](01_policy_gradients.ipynb): every implementation drops them). Maximising $L^{\text{PG}}$
alone rewards pushing $r_t$ as far as the (noisy) advantage says, with nothing to stop it;
the data then no longer describes the policy being updated, and [lecture 4](04_surrogate_and_trust_regions.ipynb) measured what
that does to the surrogate's prediction. The
clip removes the incentive to move $r_t$ beyond $1 \pm \varepsilon$ *in the direction the advantage
favours*, and the min keeps the unclipped value whenever it is the worse of the two, so
the objective is a pessimistic (lower) bound.

**What it shows.** (1) $L^{\text{CLIP}}$ against the ratio for $\hat A > 0$ and $\hat A < 0$ (plot). (2) Where
its gradient is zero and where it is not (table, from autograd). (3) [Lecture 4](04_surrogate_and_trust_regions.ipynb)'s update
on CartPole, repeated from the same start with different ε: how far the ratios move, the
<a href="../glossary.html#term-Clip-fraction">clip fraction</a> (the share of samples whose ratio lies outside $[1 - \varepsilon, 1 + \varepsilon]$) and the KL
between the old and new policy (table, histograms). The KL is estimated from the
rollout's own samples with $k_3 = (\rho - 1) - \log \rho$, $\rho = \pi_{\text{new}}(a \mid s) / \pi_{\text{old}}(a \mid s)$, averaged
over them: an unbiased estimate of $\mathrm{KL}(\pi_{\text{old}} \,\Vert\, \pi_{\text{new}})$ that is never negative (Schulman
2020; `kl_estimate`; [lecture 8](08_implementation_details.ipynb) compares it with formulas that estimate nothing).

**Prerequisites.** Lectures [1](01_policy_gradients.ipynb)–[4](04_surrogate_and_trust_regions.ipynb).

**Library.** `ppo/algorithm/losses.py` — `clipped_surrogate_loss` (it returns $-L^{\text{CLIP}}$, a loss to
minimise), `clip_fraction`, `kl_estimate`; `ppo/trainers/ppo.py` — `PPO.update`, K epochs of
minibatch steps; `lectures/_saved_update.py` — the saved start of [lecture 4](04_surrogate_and_trust_regions.ipynb)'s update.
"""

# %%
import math

import torch

from _common import Lecture, plt, print_table
from _saved_update import saved_start
from ppo.config import PPOConfig
from ppo.algorithm.losses import clip_fraction, clipped_surrogate_loss, kl_estimate, normalize_advantages

lecture = Lecture("05_clipped_surrogate", __doc__)
EPSILON = 0.2


def clipped_objective(ratio: float, advantage: float, epsilon: float = EPSILON) -> float:
    """L^CLIP of one sample: minus the library's loss, with log π_old = 0 and log π_θ = log r."""
    return -clipped_surrogate_loss(torch.tensor([math.log(ratio)]), torch.zeros(1), torch.tensor([advantage]), epsilon).item()


# %% [markdown]
r"""
## $L^{\text{CLIP}}$ against the ratio
"""

# %%
ratios = torch.linspace(0.3, 1.8, 301).tolist()
figure, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=False)
for axis, advantage in zip(axes, (1.0, -1.0)):
    axis.plot(ratios, [r * advantage for r in ratios], "--", color="grey", label="r·Â (unclipped)")
    axis.plot(ratios, [clipped_objective(r, advantage) for r in ratios], color="tab:blue", lw=2, label="L^CLIP")
    for edge in (1 - EPSILON, 1 + EPSILON):
        axis.axvline(edge, color="black", lw=0.8, ls=":", label="r = 1 ± ε" if edge > 1 else None)
    axis.axvline(1.0, color="black", lw=0.5)
    axis.set_xlabel("ratio r = π_θ(a|s) / π_old(a|s)")
    axis.set_ylabel("objective (to maximise)")
    axis.set_title(f"Â = {advantage:+.0f}, ε = {EPSILON}")
    axis.legend(fontsize=8)
lecture.save_figure(figure, "clipped_objective.png")

# %% tags=["claims"]
largest_excess = max(clipped_objective(r, advantage) - r * advantage for r in ratios for advantage in (1.0, -1.0))
lecture.claim("L^CLIP is a pessimistic bound: at every ratio of the plot, for Â = +1 and Â = −1, it is at most r·Â",
              largest_excess <= 1e-6, measured=f"largest L^CLIP − r·Â over the grid {largest_excess:.2e}")

# %% [markdown]
r"""
## The gradient zones

The gradient of $L^{\text{CLIP}}$ with respect to $\log \pi_\theta(a \mid s)$ is $r \hat A$ where the unclipped term
is the one the min picks, and 0 where the clipped (constant) term is picked. We ask
autograd at one ratio inside each zone.
"""


# %%
def objective_gradient(ratio: float, advantage: float) -> float:
    """∂ L^CLIP / ∂ log π_θ(a | s) for one sample, by autograd through the library's loss."""
    log_prob = torch.tensor([math.log(ratio)], requires_grad=True)
    (-clipped_surrogate_loss(log_prob, torch.zeros(1), torch.tensor([advantage]), EPSILON)).backward()
    return log_prob.grad.item()


zone_rows = []
for ratio, zone in ((0.6, "r < 1 − ε"), (0.9, "1 − ε < r < 1"), (1.0, "r = 1"), (1.1, "1 < r < 1 + ε"), (1.5, "r > 1 + ε")):
    up, down = objective_gradient(ratio, 1.0), objective_gradient(ratio, -1.0)
    zone_rows.append({
        "zone": zone, "r": ratio,
        "gradient, Â = +1": up, "Â > 0": "pushes r up" if up > 0 else "no gradient",
        "gradient, Â = −1": down, "Â < 0": "pushes r down" if down < 0 else "no gradient",
    })
print_table(zone_rows, title=f"∂L^CLIP/∂log π_θ at ε = {EPSILON}")

# %% [markdown]
r"""
Read the two "no gradient" cells: for a good action ($\hat A > 0$) the gradient stops once
$r > 1 + \varepsilon$, for a bad one ($\hat A < 0$) once $r < 1 - \varepsilon$ — but a sample whose ratio moved the
*wrong* way ($r < 1 - \varepsilon$ with $\hat A > 0$, $r > 1 + \varepsilon$ with $\hat A < 0$) keeps its full gradient, so
the update can always undo a mistake.

"""

# %% tags=["claims"]
lecture.claim("the gradient stops for a good action once r > 1 + ε and for a bad one once r < 1 − ε",
              objective_gradient(1.5, 1.0) == 0.0 and objective_gradient(0.6, -1.0) == 0.0,
              measured=f"gradient {objective_gradient(1.5, 1.0)} at r = 1.5, Â = +1; "
                       f"{objective_gradient(0.6, -1.0)} at r = 0.6, Â = −1")
wrong_way = {(0.6, 1.0): objective_gradient(0.6, 1.0), (1.5, -1.0): objective_gradient(1.5, -1.0)}
lecture.claim("a ratio that moved the wrong way (r < 1 − ε with Â > 0, r > 1 + ε with Â < 0) keeps its full gradient r·Â",
              all(abs(gradient - ratio * advantage) < 1e-6 for (ratio, advantage), gradient in wrong_way.items()),
              measured=", ".join(f"r = {ratio}, Â = {advantage:+.0f}: {gradient:+.3f}"
                                 for (ratio, advantage), gradient in wrong_way.items()))

# %% [markdown]
r"""
## What clipping does to one real update

We take [lecture 4](04_surrogate_and_trust_regions.ipynb)'s update: PPO trained on CartPole for a few iterations, one more
rollout, and the network, optimizer and minibatch order saved (`lectures/_saved_update.py`).
We run the same update — same rollout, same minibatch order — once for each ε, restoring
the saved state in between. A large learning rate (1e-3, four times the library's
default) and K = 10 epochs on 1,024 samples make the policy want to move far, so the
clip has work to do; that is why this start departs from the library's CartPole <a href="../glossary.html#term-Preset">preset</a>
(the settings that `ppo/presets.py` names for an environment, which
the training command applies; [lecture 6](06_ppo_cartpole.ipynb) introduces it), which is set to learn quickly over a whole run, not to stress one update. After each update we compare the new policy with
the one that collected the data on every sample of the rollout.

Which samples count as "good"? The update does not see the raw $\hat A$: with `norm_adv` (the
default) it <a href="../glossary.html#term-Advantage-normalisation">whitens the advantages</a>, $(\hat A - \operatorname{mean}) / \operatorname{std}$, before the loss. While returns
are still growing, the critic lags behind them and most raw advantages are positive
(97.5% of them in the line printed below, 59.7% after whitening), so the raw sign
says little; after
whitening, a sample is pushed up only if it did better than the average sample. The histograms below colour
the samples by the whitened sign, the one the clip acts on. (The trainer whitens per
minibatch; whitening the whole rollout at once, as here, flips the sign of a few
samples near the mean: 1.4% of them for one random split into the trainer's
minibatches, in the second printed line.)
"""

# %%
start = saved_start(lecture)
trainer, config, advantages = start.trainer, start.trainer.config, start.advantages
batch = config.batch_size
obs = trainer.buffer.obs.reshape(batch, -1)
actions = trainer.buffer.actions.reshape(batch)
old_log_probs = trainer.buffer.log_probs.reshape(batch)
whitened_advantages = normalize_advantages(advantages.reshape(batch))  # the scale the update sees
signs = whitened_advantages > 0  # the sign the update acts on: Â − mean(Â), not the raw Â
raw_positive = float((advantages > 0).float().mean())
print(f"samples with Â > 0: {raw_positive:.1%} of the raw advantages, {float(signs.float().mean()):.1%} after whitening")
split = torch.randperm(batch, generator=torch.Generator().manual_seed(0)).reshape(config.num_minibatches, -1)
minibatch_signs = torch.empty(batch, dtype=torch.bool)
for rows in split:
    minibatch_signs[rows] = normalize_advantages(advantages.reshape(batch)[rows]) > 0
sign_flips = float((minibatch_signs != signs).float().mean())
print(f"whitened per minibatch ({config.num_minibatches} random minibatches) instead of over the rollout: "
      f"{sign_flips:.1%} of the samples change sign")

update_rows, ratios_after = [], {}
for epsilon in (0.1, 0.2, 0.3, math.inf):
    metrics = start.update(epsilon)
    with torch.no_grad():
        new_log_probs, _, _ = trainer.model.evaluate_actions(obs, actions)
    ratio = (new_log_probs - old_log_probs).exp()
    label = "no clip" if math.isinf(epsilon) else f"ε = {epsilon}"
    ratios_after[label] = ratio
    update_rows.append({
        "policy loss": label,
        "clip fraction in update": metrics["clip_fraction"],
        "outside [0.8, 1.2] after": float(clip_fraction(new_log_probs, old_log_probs, 0.2)),
        "min r": float(ratio.min()),
        "max r": float(ratio.max()),
        "KL(old‖new) k3": float(kl_estimate(new_log_probs - old_log_probs, "k3")),
        "surrogate gain E[(r−1)Â]": float(((ratio - 1) * whitened_advantages).mean()),
    })
print_table(update_rows, title=f"One update of K = {config.update_epochs} epochs on {batch} samples, from the same start")
clipped_row = update_rows[1]
unclipped_row = update_rows[-1]
print(f"\nwith ε = 0.2: clip fraction during the update {clipped_row['clip fraction in update']:.3f}, "
      f"KL after it {clipped_row['KL(old‖new) k3']:.4f}; without clipping the KL is {unclipped_row['KL(old‖new) k3']:.4f}")
kls = [row["KL(old‖new) k3"] for row in update_rows]
gain_shares = [row["surrogate gain E[(r−1)Â]"] / unclipped_row["surrogate gain E[(r−1)Â]"] for row in update_rows[:-1]]
kl_shares = [kl / unclipped_row["KL(old‖new) k3"] for kl in kls[:-1]]
for row, gain_share, kl_share in zip(update_rows, gain_shares, kl_shares):
    print(f"{row['policy loss']}: {gain_share:.1%} of the unclipped update's surrogate gain at {kl_share:.1%} of its KL")

# %%
figure, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
bins = torch.linspace(0.0, 2.5, 76).tolist()
for axis, label in zip(axes, ("ε = 0.2", "no clip")):
    ratio = ratios_after[label].clamp(max=2.5)
    axis.hist(ratio[signs].tolist(), bins=bins, histtype="step", lw=1.5, color="tab:green", label="whitened Â > 0")
    axis.hist(ratio[~signs].tolist(), bins=bins, histtype="step", lw=1.5, color="tab:red", label="whitened Â ≤ 0")
    for edge in (0.8, 1.2):
        axis.axvline(edge, color="black", lw=0.8, ls=":", label="r = 1 ± 0.2" if edge > 1 else None)
    axis.set_xlabel("ratio π_new / π_old after the update (clamped at 2.5)")
    axis.set_title(label)
    axis.legend(fontsize=8)
axes[0].set_ylabel("samples")
lecture.save_figure(figure, "ratios_after_one_update.png")
unclipped_ratio = ratios_after["no clip"]
pushed_down_good = float((unclipped_ratio[signs] < 0.8).float().mean())
pushed_up_bad = float((unclipped_ratio[~signs] > 1.2).float().mean())
print(f"no clip: {pushed_down_good:.1%} of the samples with whitened Â > 0 end with r < 0.8, "
      f"{pushed_up_bad:.1%} of those with whitened Â ≤ 0 with r > 1.2")

# %% [markdown]
r"""
The histograms show the same update with and without the clip. With ε = 0.2 (left)
the ratios stay in a narrow peak around 1: 0.98% of them end outside [0.8, 1.2]. Without the clip (right) they spread over the whole range
for both colours, and 26.2% of the samples with whitened $\hat A$ > 0 and 36.3% of those with
whitened $\hat A$ ≤ 0 end on the wrong side of the band: a good action (green) whose probability fell below 0.8 of $\pi_{\text{old}}$'s, a bad one
(red) whose probability rose above 1.2 of it. The network cannot move one sample's
probability alone; ten epochs of unclipped steps that push some samples far drag
others, of both signs, along with them.
"""

# %% tags=["claims"]
default_learning_rate = PPOConfig.__dataclass_fields__["learning_rate"].default
lecture.claim("the update's learning rate, 1e-3, is four times the library's default",
              config.learning_rate == 1e-3 and math.isclose(config.learning_rate, 4 * default_learning_rate),
              measured=f"{config.learning_rate:g} against the default {default_learning_rate:g}")
lecture.claim("while returns are still growing, most raw advantages are positive", raw_positive > 0.5,
              measured=f"{raw_positive:.1%} of the raw advantages positive")
lecture.claim("whitening per minibatch instead of over the rollout flips the sign of under 10% of the samples",
              sign_flips < 0.10, measured=f"{sign_flips:.1%} flipped")
spreads = [row["max r"] - row["min r"] for row in update_rows]
escaped = [row["policy loss"] for row, epsilon in zip(update_rows, (0.1, 0.2, 0.3))
           if row["max r"] > 1 + epsilon or row["min r"] < 1 - epsilon]
lecture.claim("the policy wants to move far: without the clip the KL is more than 10 times that with ε = 0.2",
              kls[-1] > 10 * kls[1], measured=f"KL {kls[-1]:.4f} without, {kls[1]:.4f} with ε = 0.2")
lecture.claim("the wider ε, the larger the KL and the spread of the ratios (rows top to bottom)",
              all(a < b for a, b in zip(kls, kls[1:])) and all(a < b for a, b in zip(spreads, spreads[1:])),
              measured="KL " + ", ".join(f"{kl:.4f}" for kl in kls)
                       + "; max r − min r " + ", ".join(f"{spread:.3f}" for spread in spreads))
lecture.claim("each clipped update keeps a larger share of the unclipped update's surrogate gain than of its KL",
              all(gain > kl for gain, kl in zip(gain_shares, kl_shares)),
              measured=", ".join(f"{gain:.1%} of the gain at {kl:.1%} of the KL" for gain, kl in zip(gain_shares, kl_shares)))
lecture.claim("ratios do not stop at 1 ± ε: in some clipped row they end outside the band",
              len(escaped) > 0,
              measured="; ".join(f"{row['policy loss']}: r in [{row['min r']:.3f}, {row['max r']:.3f}]" for row in update_rows[:-1]))
lecture.claim("with ε = 0.2, fewer than 2% of the ratios end outside [0.8, 1.2]",
              clipped_row["outside [0.8, 1.2] after"] < 0.02,
              measured=f"{clipped_row['outside [0.8, 1.2] after']:.2%} outside")
lecture.claim("without the clip, more than 1 in 5 of the samples of either sign end on the wrong side of the band "
              "(r < 0.8 with whitened Â > 0, r > 1.2 with whitened Â ≤ 0)",
              pushed_down_good > 0.2 and pushed_up_bad > 0.2,
              measured=f"{pushed_down_good:.1%} and {pushed_up_bad:.1%}", quick=False)

# %% [markdown]
"""
## What to take away

In the table, read the rows from top to bottom: how far the ratios spread and how
large the KL gets as ε widens, and what the same update does with no clip at all.
`clip fraction in update` is what the trainer logs (averaged over its minibatches);
`outside [0.8, 1.2] after` is measured once at the end on the whole rollout with a fixed
band, so the rows are comparable. The last column is how much the update raised the
unclipped surrogate (with advantages whitened, as the update sees them); the lines
under the table give each <a href="../glossary.html#term-Clipped-surrogate">clipped update</a>'s share of the unclipped update's gain and
of its KL: the clipped ones keep a larger share of the gain than of the KL (ε = 0.2
keeps 15.9% of the gain at 1.2% of the KL). Without the clip the KL is 0.287, some 80 times
the 0.0035 of ε = 0.2. Ratios do
not stop exactly at 1 ± ε (read min r and max r: in some rows they lie outside the
band): a gradient step for one sample moves the network, and with it the probabilities of other samples
that are already clipped. Clipping limits the incentive to move, not the movement
itself — which is why PPO also logs the KL ([lecture 7](07_diagnostics_and_tuning.ipynb)) and can stop an update early
(`target_kl` in `ppo/config.py`). [Lecture 4](04_surrogate_and_trust_regions.ipynb)'s table is the other half of the story: what
these updates, from the same start, did to the return, and whether the surrogate saw it
coming. [Lecture 6](06_ppo_cartpole.ipynb) puts the clipped update into the whole training loop.
"""

# %%
lecture.finish()
