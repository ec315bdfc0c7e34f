# %% [markdown]
"""
# Lecture 4 — The clipped surrogate objective

**What it teaches.** A policy-gradient step uses data from the policy that collected it,
π_old. To take *several* gradient steps on one batch, PPO rewrites the objective with
the probability ratio r_t(θ) = π_θ(a_t | s_t) / π_old(a_t | s_t):

    L^PG(θ)   = E[ r_t(θ) Â_t ]          (same gradient as REINFORCE at θ = θ_old)
    L^CLIP(θ) = E[ min( r_t(θ) Â_t,  clip(r_t(θ), 1 − ε, 1 + ε) Â_t ) ]

Maximising L^PG alone rewards pushing r_t as far as the (noisy) advantage says, with
nothing to stop it; the data then no longer describes the policy being updated. The
clip removes the incentive to move r_t beyond 1 ± ε *in the direction the advantage
favours*, and the min keeps the unclipped value whenever it is the worse of the two, so
the objective is a pessimistic (lower) bound.

**What it shows.** (1) L^CLIP against the ratio for Â > 0 and Â < 0 (plot). (2) Where
its gradient is zero and where it is not (table, from autograd). (3) One real PPO
update on CartPole, repeated from the same starting point with different ε: how far
the ratios move, the clip fraction and the KL between the old and new policy.

**Prerequisites.** Lectures 1–3.

**Library.** `ppo/losses.py` — `clipped_surrogate_loss` (it returns −L^CLIP, a loss to
minimise), `clip_fraction`, `kl_estimate`; `ppo/trainer.py` — `PPO.update`, K epochs of
minibatch steps.
"""

# %%
import copy
import math

import torch

from _common import Lecture, plt, print_table
from ppo.config import PPOConfig
from ppo.losses import clip_fraction, clipped_surrogate_loss, kl_estimate, normalize_advantages
from experiments.train import training_envs
from ppo.trainer import PPO

lecture = Lecture("04_clipped_surrogate", __doc__)
EPSILON = 0.2


def clipped_objective(ratio: float, advantage: float, epsilon: float = EPSILON) -> float:
    """L^CLIP of one sample: minus the library's loss, with log π_old = 0 and log π_θ = log r."""
    return -clipped_surrogate_loss(torch.tensor([math.log(ratio)]), torch.zeros(1), torch.tensor([advantage]), epsilon).item()


# %% [markdown]
"""
## L^CLIP against the ratio
"""

# %%
ratios = torch.linspace(0.3, 1.8, 301).tolist()
figure, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=False)
for axis, advantage in zip(axes, (1.0, -1.0)):
    axis.plot(ratios, [r * advantage for r in ratios], "--", color="grey", label="r·Â (unclipped)")
    axis.plot(ratios, [clipped_objective(r, advantage) for r in ratios], color="tab:blue", lw=2, label="L^CLIP")
    for edge in (1 - EPSILON, 1 + EPSILON):
        axis.axvline(edge, color="tab:red", lw=0.8, ls=":")
    axis.axvline(1.0, color="black", lw=0.5)
    axis.set_xlabel("ratio r = π_θ(a|s) / π_old(a|s)")
    axis.set_ylabel("objective (to maximise)")
    axis.set_title(f"Â = {advantage:+.0f}, ε = {EPSILON}")
    axis.legend(fontsize=8)
lecture.save_figure(figure, "clipped_objective.png")

# %% [markdown]
"""
## The gradient zones

The gradient of L^CLIP with respect to log π_θ(a | s) is r·Â where the unclipped term
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
"""
Read the two "no gradient" cells: for a good action (Â > 0) the gradient stops once
r > 1 + ε, for a bad one (Â < 0) once r < 1 − ε — but a sample whose ratio moved the
*wrong* way (r < 1 − ε with Â > 0, r > 1 + ε with Â < 0) keeps its full gradient, so
the update can always undo a mistake.

## What clipping does to one real update

We train PPO on CartPole for a few iterations so that the advantages mean something,
collect one more rollout, and save the network and optimizer. Then we run the same
update — same rollout, same minibatch order — once for each ε, restoring the saved
state in between. A large learning rate and K = 10 epochs make the policy want to move
far, so the clip has work to do. After each update we compare the new policy with the
one that collected the data on every sample of the rollout.

Which samples count as "good"? The update does not see the raw Â: with `norm_adv` (the
default) it whitens the advantages, (Â − mean) / std, before the loss. While returns
are still growing, the critic lags behind them and most raw advantages are positive
(the line printed below gives both shares), so the raw sign says little; after
whitening, a sample is pushed up only if it did better than the average sample. The histograms below colour
the samples by the whitened sign, the one the clip acts on. (The trainer whitens per
minibatch; whitening the whole rollout at once, as here, can flip the sign of a few
samples near the mean.)
"""

# %%
config = PPOConfig(
    env_id="CartPole-v1", env_backend="torch", num_envs=16, num_steps=lecture.choose(full=64, quick=16), num_minibatches=4,
    update_epochs=10, learning_rate=1e-3, anneal_lr=False, total_timesteps=10**6, tensorboard=False, seed=1,
)
trainer = PPO(config, training_envs(config), progress=False)
for _ in range(lecture.choose(full=10, quick=1)):  # warm-up iterations with the default ε
    trainer.collect_rollout()
    trainer.update(*trainer.compute_advantages())
trainer.collect_rollout()
advantages, returns = trainer.compute_advantages()
saved = copy.deepcopy((trainer.model.state_dict(), trainer.optimizer.state_dict(), trainer.shuffle_generator.get_state()))
batch = config.batch_size
obs = trainer.buffer.obs.reshape(batch, -1)
actions = trainer.buffer.actions.reshape(batch)
old_log_probs = trainer.buffer.log_probs.reshape(batch)
whitened_advantages = normalize_advantages(advantages.reshape(batch))  # the scale the update sees
signs = whitened_advantages > 0  # the sign the update acts on: Â − mean(Â), not the raw Â
print(f"samples with Â > 0: {float((advantages > 0).float().mean()):.1%} of the raw advantages, "
      f"{float(signs.float().mean()):.1%} after whitening")

update_rows, ratios_after = [], {}
for epsilon in (0.1, 0.2, 0.3, math.inf):
    model_state, optimizer_state, shuffle_state = copy.deepcopy(saved)
    trainer.model.load_state_dict(model_state)
    trainer.optimizer.load_state_dict(optimizer_state)
    trainer.shuffle_generator.set_state(shuffle_state)
    trainer.clip_coef = epsilon  # the ε that PPO.policy_loss reads (value clipping keeps config.clip_coef)
    metrics = trainer.update(advantages, returns)
    with torch.no_grad():
        new_log_probs, _, _ = trainer.model.evaluate_actions(obs, actions)
    ratio = (new_log_probs - old_log_probs).exp()
    label = "no clip" if math.isinf(epsilon) else f"ε = {epsilon}"
    ratios_after[label] = ratio
    update_rows.append({
        "policy loss": label,
        "clip fraction in update": metrics["clip_fraction"] if not math.isinf(epsilon) else 0.0,
        "outside [0.8, 1.2] after": float(clip_fraction(new_log_probs, old_log_probs, 0.2)),
        "min r": float(ratio.min()),
        "max r": float(ratio.max()),
        "KL(old‖new) k3": float(kl_estimate(new_log_probs - old_log_probs, "k3")),
        "surrogate gain E[(r−1)Â]": float(((ratio - 1) * whitened_advantages).mean()),
    })
print_table(update_rows, title=f"One update of K = {config.update_epochs} epochs on {batch} samples, from the same start")
clipped_row = update_rows[1]
print(f"\nwith ε = 0.2: clip fraction during the update {clipped_row['clip fraction in update']:.3f}, "
      f"KL after it {clipped_row['KL(old‖new) k3']:.4f}; without clipping the KL is {update_rows[-1]['KL(old‖new) k3']:.4f}")

# %%
figure, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
bins = torch.linspace(0.0, 2.5, 76).tolist()
for axis, label in zip(axes, ("ε = 0.2", "no clip")):
    ratio = ratios_after[label].clamp(max=2.5)
    axis.hist(ratio[signs].tolist(), bins=bins, alpha=0.6, color="tab:green", label="whitened Â > 0")
    axis.hist(ratio[~signs].tolist(), bins=bins, alpha=0.6, color="tab:red", label="whitened Â ≤ 0")
    for edge in (0.8, 1.2):
        axis.axvline(edge, color="black", lw=0.8, ls=":")
    axis.set_xlabel("ratio π_new / π_old after the update (clamped at 2.5)")
    axis.set_title(label)
    axis.legend(fontsize=8)
axes[0].set_ylabel("samples")
lecture.save_figure(figure, "ratios_after_one_update.png")

# %% [markdown]
"""
## What to take away

In the table, read the rows from top to bottom: how far the ratios spread and how
large the KL gets as ε widens, and what the same update does with no clip at all.
`clip fraction in update` is what the trainer logs (averaged over its minibatches);
`outside [0.8, 1.2] after` is measured once at the end on the whole rollout with a fixed
band, so the rows are comparable. The last column is how much the update raised the
unclipped surrogate (with advantages whitened, as the update sees them): compare how
much of the unclipped update's gain the clipped ones keep, at a fraction of its KL. Ratios do not stop exactly at 1 ± ε: a gradient
step for one sample moves the network, and with it the probabilities of other samples
that are already clipped. Clipping limits the incentive to move, not the movement
itself — which is why PPO also logs the KL (lecture 6) and can stop an update early
(`target_kl` in `ppo/config.py`).
"""

# %%
lecture.finish()
