# %% [markdown]
"""
# Lecture 5 — The clipped surrogate objective

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

**What it shows.** (1) Why a surrogate at all, and how far from π_old it can be
trusted: importance sampling, Kakade & Langford's identity, the TRPO bound and TRPO's
KL constraint, in one page. (2) L^CLIP against the ratio for Â > 0 and Â < 0 (plot).
(3) Where its gradient is zero and where it is not (table, from autograd). (4) One real
PPO update on CartPole, repeated from the same starting point with different ε: how far
the ratios move, the clip fraction and the KL between the old and new policy. (5) The
same update at several step sizes and ε ∈ {0.1, 0.2, ∞}: the gain in return the
surrogate predicts against the change measured on fresh episodes (table, plot).

**Prerequisites.** Lectures 1–3.

**Library.** `ppo/losses.py` — `clipped_surrogate_loss` (it returns −L^CLIP, a loss to
minimise), `clip_fraction`, `kl_estimate`; `ppo/trainer.py` — `PPO.update`, K epochs of
minibatch steps.
"""

# %% [markdown]
"""
## Before the clip: a surrogate, and where it can be trusted

Write η(π) = E[Σ_t γ^t r_t] for the discounted return of π from the start state, and
A^old(s, a) = Q^old(s, a) − V^old(s) for the advantage of π_old. Kakade & Langford
(2002) give an exact identity for any other policy π:

    η(π) = η(π_old) + E_{τ ~ π}[ Σ_t γ^t A^old(s_t, a_t) ]

It needs states and actions *from π*, which we have not collected. Importance sampling
fixes the actions: E_{a~π}[f(a)] = E_{a~π_old}[r(a) f(a)] with r = π(a|s) / π_old(a|s).
The states cannot be fixed that way, so the surrogate simply keeps π_old's:

    L_{π_old}(π) = η(π_old) + E_{τ ~ π_old}[ Σ_t γ^t r_t A^old(s_t, a_t) ]

L and η agree in value and gradient at π = π_old (the gradient of L there is the policy
gradient of lecture 1), so L is a first-order model of η. Away from π_old the states π
visits differ from π_old's, and L can be wrong. How wrong is bounded (Schulman et al.
2015, TRPO, Theorem 1, which extends Kakade & Langford's bound for mixtures of policies):

    η(π) ≥ L_{π_old}(π) − C · max_s KL(π_old(·|s) ‖ π(·|s)),    C = 4 γ max_{s,a} |A^old(s,a)| / (1 − γ)²

Maximising the right-hand side improves η at every step, but C is enormous: with
γ = 0.99, 1/(1 − γ)² = 10⁴. TRPO therefore keeps L and replaces the penalty by a
constraint: maximise L subject to the *mean* KL over visited states ≤ δ (0.01 in the
paper). Expanding L to first order (gradient g) and the KL to second order (the Fisher
matrix F, the KL's Hessian at π_old) gives the natural-gradient step
Δθ = √(2δ / gᵀF⁻¹g) · F⁻¹g, which TRPO computes with conjugate gradient (products Fv,
never F itself) and follows by a line search that checks the KL and the gain in L.

PPO-clip is a first-order stand-in for all of this: plain Adam steps on a surrogate
whose incentive to move r_t stops at 1 ± ε. It computes no F and bounds no KL; the clip
only removes the reason to go further. The last section measures what that buys: the
gain in η that L predicts for an update against the change in η actually measured.
"""

# %%
import copy
import math

import torch

from _common import Lecture, plt, print_table
from ppo.config import PPOConfig
from ppo.losses import clip_fraction, clipped_surrogate_loss, kl_estimate, normalize_advantages
from envs.classic import make_torch_vec_env
from experiments.train import training_envs
from ppo.trainer import PPO

lecture = Lecture("05_clipped_surrogate", __doc__)
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
largest_excess = max(clipped_objective(r, advantage) - r * advantage for r in ratios for advantage in (1.0, -1.0))
lecture.claim("L^CLIP is a pessimistic bound: at every ratio of the plot, for Â = +1 and Â = −1, it is at most r·Â",
              largest_excess <= 1e-6, measured=f"largest L^CLIP − r·Â over the grid {largest_excess:.2e}")

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
minibatch; whitening the whole rollout at once, as here, flips the sign of a few
samples near the mean: under 10% of them, the printed line says how many for one
random split into the trainer's minibatches.)
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
raw_positive = float((advantages > 0).float().mean())
print(f"samples with Â > 0: {raw_positive:.1%} of the raw advantages, {float(signs.float().mean()):.1%} after whitening")
split = torch.randperm(batch, generator=torch.Generator().manual_seed(0)).reshape(config.num_minibatches, -1)
minibatch_signs = torch.empty(batch, dtype=torch.bool)
for rows in split:
    minibatch_signs[rows] = normalize_advantages(advantages.reshape(batch)[rows]) > 0
sign_flips = float((minibatch_signs != signs).float().mean())
print(f"whitened per minibatch ({config.num_minibatches} random minibatches) instead of over the rollout: "
      f"{sign_flips:.1%} of the samples change sign")
lecture.claim("while returns are still growing, most raw advantages are positive", raw_positive > 0.5,
              measured=f"{raw_positive:.1%} of the raw advantages positive")
lecture.claim("whitening per minibatch instead of over the rollout flips the sign of under 10% of the samples",
              sign_flips < 0.10, measured=f"{sign_flips:.1%} flipped")

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
unclipped_row = update_rows[-1]
print(f"\nwith ε = 0.2: clip fraction during the update {clipped_row['clip fraction in update']:.3f}, "
      f"KL after it {clipped_row['KL(old‖new) k3']:.4f}; without clipping the KL is {unclipped_row['KL(old‖new) k3']:.4f}")
kls = [row["KL(old‖new) k3"] for row in update_rows]
spreads = [row["max r"] - row["min r"] for row in update_rows]
gain_shares = [row["surrogate gain E[(r−1)Â]"] / unclipped_row["surrogate gain E[(r−1)Â]"] for row in update_rows[:-1]]
kl_shares = [kl / unclipped_row["KL(old‖new) k3"] for kl in kls[:-1]]
for row, gain_share, kl_share in zip(update_rows, gain_shares, kl_shares):
    print(f"{row['policy loss']}: {gain_share:.1%} of the unclipped update's surrogate gain at {kl_share:.1%} of its KL")
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

# %%
figure, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
bins = torch.linspace(0.0, 2.5, 76).tolist()
for axis, label in zip(axes, ("ε = 0.2", "no clip")):
    ratio = ratios_after[label].clamp(max=2.5)
    axis.hist(ratio[signs].tolist(), bins=bins, histtype="step", lw=1.5, color="tab:green", label="whitened Â > 0")
    axis.hist(ratio[~signs].tolist(), bins=bins, histtype="step", lw=1.5, color="tab:red", label="whitened Â ≤ 0")
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
unclipped surrogate (with advantages whitened, as the update sees them); the lines
under the table give each clipped update's share of the unclipped update's gain and
of its KL: the clipped ones keep a larger share of the gain than of the KL. Ratios do
not stop exactly at 1 ± ε (read min r and max r: in some rows they lie outside the
band): a gradient step for one sample moves the network, and with it the probabilities of other samples
that are already clipped. Clipping limits the incentive to move, not the movement
itself — which is why PPO also logs the KL (lecture 7) and can stop an update early
(`target_kl` in `ppo/config.py`).
"""

# %% [markdown]
"""
## How far the surrogate can be trusted, measured

Back to the first section: L_{π_old}(π) − η(π_old) is the gain in return the surrogate
*predicts* for a new policy π; η(π) − η(π_old) is the change that happens. We measure
both for the update above, from the same saved start, at three learning rates (the
step size) and ε ∈ {0.1, 0.2, ∞}:

- **predicted**: on fresh episodes of π_old (not the update's own rollout), the
  sample mean over episodes of Σ_t γ^t (r_t − 1) Â_t, with Â_t = G_t − V_old(s_t), the
  discounted return from t minus the critic. (Â's expectation over π_old's actions is
  A^old's, because E_{a~π_old}[r − 1] = 0 removes V's bias.)
- **measured**: η(π) − η(π_old), the mean discounted return from the start state of
  π's episodes minus π_old's. Both policies play the same episodes' random numbers
  (the same start states, the same uniforms U in the Gumbel-max sampler of
  `CategoricalDistribution.sample`), so their episodes differ only where their actions
  do: common random numbers, which shrink the standard error of the difference.

Units: discounted return with γ = 0.99, at most 1/(1 − γ) = 100. The table also gives
each update's mean KL(π_old ‖ π) over π_old's states (TRPO's constraint; the paper's
δ = 0.01) and the penalty C · max KL of the TRPO bound, with max|A| taken as the
largest |Â| of the episodes.
"""


# %%
@torch.no_grad()
def play_episodes(model, uniforms: torch.Tensor, seed: int) -> dict[str, torch.Tensor]:
    """One episode in each of M copies of CartPole, actions sampled with the given uniforms (H, M, 2);
    steps after a copy's episode ended are masked. Returns obs (T, M, 4), actions, alive mask and
    G_t = Σ_k γ^(k−t) r_k, the discounted return from each step, all (T, M)."""
    copies = uniforms.shape[1]
    envs = make_torch_vec_env(config.env_id, copies, seed=seed)
    obs, alive, steps = envs.reset(seed=seed), torch.ones(copies, dtype=torch.bool), []
    for uniform in uniforms:
        action = model.distribution(obs).sample(uniform)
        result = envs.step(action)
        steps.append((obs, action, result.reward * alive, alive))
        alive = alive & ~(result.terminated | result.truncated)
        obs = result.obs
        if not alive.any():
            break
    observations, actions, rewards, mask = (torch.stack(column) for column in zip(*steps))
    discounted = torch.zeros_like(rewards)  # (T, M)
    running = torch.zeros(copies)
    for t in reversed(range(len(steps))):
        running = rewards[t] + config.gamma * running
        discounted[t] = running
    return {"obs": observations, "actions": actions, "alive": mask, "returns": discounted}


def restore_and_update(learning_rate: float, epsilon: float) -> None:
    """The update of the previous section from the saved start, with another step size and ε."""
    model_state, optimizer_state, shuffle_state = copy.deepcopy(saved)
    trainer.model.load_state_dict(model_state)
    trainer.optimizer.load_state_dict(optimizer_state)
    trainer.shuffle_generator.set_state(shuffle_state)
    trainer.optimizer.lr = learning_rate
    trainer.clip_coef = epsilon
    trainer.update(advantages, returns)


def log_probs_of(episodes: dict[str, torch.Tensor]) -> torch.Tensor:
    """log π(a_t | s_t) of the current network for the episodes' steps, (T, M)."""
    steps, copies = episodes["actions"].shape
    with torch.no_grad():
        log_probs, _, _ = trainer.model.evaluate_actions(episodes["obs"].reshape(steps * copies, -1),
                                                         episodes["actions"].reshape(-1))
    return log_probs.reshape(steps, copies)


COPIES = lecture.choose(full=1024, quick=128)
HORIZON = 500  # CartPole-v1's time limit
LEARNING_RATES = lecture.choose(full=[3e-4, 1e-3, 3e-3], quick=[1e-3])
EPSILONS = (0.1, 0.2, math.inf)
EPISODE_SEED = 2024
uniforms = torch.rand(HORIZON, COPIES, 2, generator=torch.Generator().manual_seed(EPISODE_SEED))
trainer.model.load_state_dict(saved[0])  # π_old: the network before any of the updates
old_episodes = play_episodes(trainer.model, uniforms, EPISODE_SEED)
old_log_probs_fresh = log_probs_of(old_episodes)
steps_played = old_episodes["alive"].shape[0]
with torch.no_grad():
    old_values = trainer.model.value(old_episodes["obs"].reshape(steps_played * COPIES, -1)).reshape(steps_played, COPIES)
alive = old_episodes["alive"]
fresh_advantages = (old_episodes["returns"] - old_values) * alive  # (T, M) Â_t = G_t − V_old(s_t)
discounts = config.gamma ** torch.arange(steps_played, dtype=torch.float32).unsqueeze(1)  # (T, 1) γ^t
penalty_factor = 4 * config.gamma * float(fresh_advantages.abs().max()) / (1 - config.gamma) ** 2  # C of the bound
print(f"π_old on {COPIES} fresh episodes: η(π_old) = {float(old_episodes['returns'][0].mean()):.2f} "
      f"(mean length {float(alive.sum(0).float().mean()):.1f} steps); the bound's C = {penalty_factor:,.0f}")

trust_rows = []
for learning_rate in LEARNING_RATES:
    for epsilon in EPSILONS:
        restore_and_update(learning_rate, epsilon)
        log_ratio = (log_probs_of(old_episodes) - old_log_probs_fresh) * alive  # (T, M)
        per_episode_prediction = (discounts * (log_ratio.exp() - 1) * fresh_advantages).sum(0)  # (M,)
        kl_per_step = (log_ratio.exp() - 1) - log_ratio  # k3 estimate of KL(π_old ‖ π) at each state
        new_episodes = play_episodes(trainer.model, uniforms, EPISODE_SEED)
        change = new_episodes["returns"][0] - old_episodes["returns"][0]  # (M,) per start state
        trust_rows.append({
            "lr": learning_rate, "ε": "∞" if math.isinf(epsilon) else epsilon,
            "mean KL": float(kl_per_step[alive].mean()),
            "predicted": float(per_episode_prediction.mean()),
            "± se": float(per_episode_prediction.std() / math.sqrt(COPIES)),
            "measured": float(change.mean()),
            "± se ": float(change.std() / math.sqrt(COPIES)),
            "bound's penalty C·max KL": penalty_factor * float(kl_per_step[alive].max()),
        })
print_table(trust_rows, title="One update from the same start: the gain the surrogate predicts against the change in η "
                              "(discounted return, γ = 0.99)")

# %%
figure, axis = plt.subplots(figsize=(6.5, 5))
colours = {0.1: "tab:blue", 0.2: "tab:green", "∞": "tab:red"}  # colour: ε; marker: learning rate
markers = dict(zip(LEARNING_RATES, ("o", "s", "^")))
for row in trust_rows:
    axis.errorbar([row["predicted"]], [row["measured"]], xerr=[2 * row["± se"]], yerr=[2 * row["± se "]],
                  fmt=markers[row["lr"]], color=colours[row["ε"]], capsize=3, markersize=6)
for epsilon, colour in colours.items():
    axis.plot([], [], "-", color=colour, lw=3, label=f"ε = {epsilon}")
for learning_rate, marker in markers.items():
    axis.plot([], [], marker, color="0.3", linestyle="none", label=f"lr {learning_rate:g}")
extent = [min(min(row["predicted"], row["measured"]) for row in trust_rows) - 2,
          max(max(row["predicted"], row["measured"]) for row in trust_rows) + 2]
axis.plot(extent, extent, color="black", lw=0.8, ls=":", label="measured = predicted")
axis.axhline(0, color="grey", lw=0.5)
axis.set_xlabel("predicted gain L(π) − η(π_old) (discounted return)")
axis.set_ylabel("measured change η(π) − η(π_old) (discounted return)")
axis.set_title("The surrogate's prediction against the return (bars: ±2 se)")
axis.legend(fontsize=8, loc="upper left")
lecture.save_figure(figure, "predicted_against_measured.png")


def prediction_error(row: dict) -> float:
    return abs(row["predicted"] - row["measured"])


def standard_error(row: dict) -> float:
    """Of predicted − measured, the two standard errors combined as if independent."""
    return math.hypot(row["± se"], row["± se "])


by_step = {lr: [row for row in trust_rows if row["lr"] == lr] for lr in LEARNING_RATES}
clipped_rows = [row for row in trust_rows if row["ε"] != "∞"]
unclipped_rows = [row for row in trust_rows if row["ε"] == "∞"]
lecture.claim("every clipped update's prediction is within 2.5 of the measured change (discounted returns go up to 100)",
              all(prediction_error(row) <= 2.5 for row in clipped_rows),
              measured="; ".join(f"lr {row['lr']:g}, ε {row['ε']}: {prediction_error(row):.2f} "
                                 f"({prediction_error(row) / standard_error(row):.1f} se)" for row in clipped_rows),
              quick=False)
lecture.claim("at every step size the unclipped update's prediction is the furthest off, and too optimistic",
              all(max(rows, key=prediction_error)["ε"] == "∞" for rows in by_step.values())
              and all(row["predicted"] > row["measured"] for row in unclipped_rows),
              measured="; ".join(f"lr {lr:g}: errors " + ", ".join(f"{prediction_error(row):.2f}" for row in rows)
                                 for lr, rows in by_step.items()), quick=False)
lecture.claim("the unclipped updates' mean KL exceeds TRPO's δ = 0.01 at every step size; every clipped one stays below it",
              all(row["mean KL"] > 0.01 for row in unclipped_rows) and all(row["mean KL"] < 0.01 for row in clipped_rows),
              measured="unclipped " + ", ".join(f"{row['mean KL']:.4f}" for row in unclipped_rows)
                       + f"; clipped at most {max(row['mean KL'] for row in clipped_rows):.4f}", quick=False)
lowered = [row for row in clipped_rows if row["measured"] < 0]
lecture.claim("with the clip, every predicted gain has the sign of the measured change, the one clipped update that "
              "lowered the return (lr 0.003, ε = 0.1) included",
              all((row["predicted"] > 0) == (row["measured"] > 0) for row in clipped_rows)
              and [(row["lr"], row["ε"]) for row in lowered] == [(0.003, 0.1)],
              measured="; ".join(f"lr {row['lr']:g}, ε {row['ε']}: predicted {row['predicted']:+.2f}, measured "
                                 f"{row['measured']:+.2f}" for row in clipped_rows), quick=False)
wrong_sign = [row["lr"] for row in unclipped_rows if row["predicted"] > 0 > row["measured"]]
lecture.claim("without the clip, at lr 0.001 and 0.003 the surrogate predicts a gain and the return falls",
              wrong_sign == [0.001, 0.003],
              measured="; ".join(f"lr {row['lr']:g}: predicted {row['predicted']:+.2f}, measured {row['measured']:+.2f}"
                                 for row in unclipped_rows), quick=False)
smallest_penalty = min(row["bound's penalty C·max KL"] for row in trust_rows)
lecture.claim("in every row the bound's penalty exceeds 100, the largest discounted return there is: it guarantees nothing",
              smallest_penalty > 1 / (1 - config.gamma), measured=f"smallest penalty {smallest_penalty:,.0f}")

# %% [markdown]
"""
Read the table and the figure together. Where the update stays near π_old — every
clipped row, mean KL below TRPO's δ = 0.01 — the points lie near the diagonal: the
surrogate's prediction is within 2.5 of the measured change, on returns of up to 100
(the bars and the `± se` columns show how much of that is sampling noise). That
is the first-order model working inside its trust region. Without the clip the same
step sizes move the policy much further (KL above δ at every step size), and there the
surrogate is too optimistic and the furthest off of the three: it credits the new
policy with π_old's states, which the new policy no longer visits. Whether an update
raises the return at all depends on the rollout it learned from (the update maximises
the surrogate on its own 1,024 samples, and on fresh episodes that surrogate can be
negative); with the clip, the prediction says so: every clipped update's predicted gain
has the sign of the measured change, the one clipped update that lowered the return
(lr 0.003, ε = 0.1, the blue triangle below 0) included. Without the clip it does not:
at lr 0.001 and 0.003 the surrogate predicts a large gain and the return falls (the red
square and triangle). The TRPO bound is true but useless
here: its penalty C · max KL exceeds 100, the largest discounted return CartPole can
give, in every row. This is why TRPO constrains the mean KL instead, and why PPO
settles for a clip that keeps the ratios, and so the KL, small.
"""

# %%
lecture.finish()
