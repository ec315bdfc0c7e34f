# %% [markdown]
"""
# Lecture 2 — A learned baseline: the actor-critic

**What it teaches.** Subtracting any function b(s_t) of the state from the return leaves
the policy gradient unbiased, because the expected score is zero:
E_a[∇ log π(a | s)] = Σ_a ∇π(a | s) = ∇ Σ_a π(a | s) = ∇1 = 0. So

    ∇J = E[ Σ_t ∇ log π(a_t | s_t) · (G_t − b(s_t)) ]

for every b. The b that (nearly) minimises the variance is the state value
V(s) = E[G_t | s_t = s]; G_t − V(s_t) is then an estimate of the *advantage*: how much
better the action taken was than the policy's average in that state. We do not know V,
so we learn it by regression on the returns: that network is the *critic*, the policy
is the *actor*.

**The network.** `ppo.networks.ActorCritic` with `shared=True` is the textbook layout:
one trunk computes features h(s), a policy head turns them into action logits, a value
head into a number V(s). Both losses train the trunk.

**What it shows.** (1) Learning curves over six seeds with and without the baseline.
(2) The variance of the gradient estimate with and without the learned baseline (and
with a constant one), measured over many rollouts at a fixed network — printed as a
ratio, next to the critic's explained variance.

**Prerequisites.** Lecture 1.

**Library.** `ppo/networks.py` (`ActorCritic`), `ppo/trainer.py` (`collect_rollout` and
`compute_advantages`: T steps from N environments, returns R_t), `ppo/losses.py`
(`value_loss`, `explained_variance`). Here we write the simplest update on top of them —
one gradient step per rollout. Lecture 6 replaces it with PPO's.
"""

# %%
from collections import deque

import torch

from _common import Lecture, mean_and_spread, plt, print_table
from ppo.config import PPOConfig
from ppo.losses import entropy_bonus, explained_variance, value_loss
from experiments.train import training_envs
from ppo.trainer import PPO, RECENT_EPISODES
from ppo.update import gradient_step

lecture = Lecture("02_baseline_actor_critic", __doc__)
SEEDS = lecture.choose(full=[1, 2, 3, 4, 5, 6], quick=[1])
ITERATIONS = lecture.choose(full=400, quick=20)  # one gradient step per rollout
VARIANCE_BATCHES = lecture.choose(full=64, quick=8)  # rollouts per variance measurement
VALUE_COEF, ENTROPY_COEF = 0.5, 0.01

# A rollout is T = 8 steps from each of N = 16 CartPole copies (128 samples). With
# λ = 1, compute_advantages returns R_t = the discounted return to the end of the
# episode, bootstrapped with V where the rollout cuts an episode short (Lecture 3).
CONFIG = PPOConfig(
    env_id="CartPole-v1", env_backend="torch", num_envs=16, num_steps=8, gamma=0.99, gae_lambda=1.0,
    shared_network=True, learning_rate=5e-3, total_timesteps=16 * 8 * ITERATIONS, tensorboard=False,
)


def make_trainer(config: PPOConfig) -> PPO:
    """A PPO trainer on the config's environments; we use its rollout machinery, not its update."""
    return PPO(config, training_envs(config), progress=False)

# %% [markdown]
"""
## One shared trunk, two heads
"""

# %%
agent = make_trainer(CONFIG.replace(seed=SEEDS[0]))
model = agent.model
print("trunk:", model.actor_body)
print("policy head:", model.policy_head.logits, "  value head:", model.value_head)
trunk = sum(p.numel() for p in model.actor_body.parameters())
policy_head = sum(p.numel() for p in model.policy_head.parameters())
value_head = sum(p.numel() for p in model.value_head.parameters())
print(f"parameters: trunk {trunk}, policy head {policy_head}, value head {value_head}"
      f" (shared trunk: critic_body is actor_body → {model.critic_body is model.actor_body})")

# %% [markdown]
"""
## The update: policy gradient with or without the baseline, plus the critic's regression

For each rollout, R_t is the return and V(s_t) the critic's prediction stored during
the rollout. The actor-critic loss is

    L = −mean_t[ log π(a_t | s_t) · w_t ]  +  c_v · ½ mean_t[(V(s_t) − R_t)²]  −  c_e · mean_t H[π(· | s_t)]

with weight w_t = R_t − V(s_t) (baseline) or w_t = R_t (none). The weight is computed
without gradient: the baseline is a fixed number for the policy's update.
"""


# %%
def rollout_weights(trainer: PPO, use_baseline: bool):
    """Collect one rollout; return flat (obs, actions, weights, returns, stored values)."""
    episode_returns, _ = trainer.collect_rollout()
    _, returns = trainer.compute_advantages()  # (T, N) R_t
    returns = returns.clone()  # made under inference mode; a plain copy can enter autograd
    buffer = trainer.buffer
    values = buffer.values  # (T, N) V(s_t) at collection time
    weights = returns - values if use_baseline else returns
    flat = lambda x: x.reshape(-1, *x.shape[2:])  # noqa: E731  (T, N, ...) → (T·N, ...)
    return flat(buffer.obs), flat(buffer.actions), flat(weights), flat(returns), flat(values), episode_returns


def policy_gradient_loss(trainer: PPO, obs, actions, weights) -> torch.Tensor:
    log_probs, entropy, _ = trainer.model.evaluate_actions(obs, actions)
    return -(log_probs * weights).mean(), entropy


def train_actor_critic(seed: int, use_baseline: bool) -> list[float]:
    trainer = make_trainer(CONFIG.replace(seed=seed))
    mean_returns, recent = [], deque(maxlen=RECENT_EPISODES)
    for _ in range(ITERATIONS):
        obs, actions, weights, returns, _, episode_returns = rollout_weights(trainer, use_baseline)
        pg_loss, entropy = policy_gradient_loss(trainer, obs, actions, weights)
        critic_loss = value_loss(trainer.model.value(obs), None, returns)
        loss = pg_loss + VALUE_COEF * critic_loss - ENTROPY_COEF * entropy_bonus(entropy)
        # zero the gradients, backpropagate, clip their global norm to max_grad_norm = 0.5, one Adam step
        gradient_step(trainer.optimizer, loss, CONFIG.max_grad_norm)
        recent.extend(episode_returns.tolist())
        mean_returns.append(sum(recent) / len(recent) if recent else float("nan"))
    return mean_returns, trainer


# %% [markdown]
"""
## Learning curves over seeds
"""

# %%
curves = {True: {}, False: {}}
trained = {}
for seed in SEEDS:
    for use_baseline in (False, True):
        curves[use_baseline][seed], trainer = train_actor_critic(seed, use_baseline)
        if use_baseline:
            trained[seed] = trainer
        label = "with baseline" if use_baseline else "no baseline"
        print(f"seed {seed}, {label}: mean return of the last {RECENT_EPISODES} episodes {curves[use_baseline][seed][-1]:.1f}")

# %% [markdown]
"""
## Variance of the gradient estimate, with and without the baseline

Fix the network and collect many rollouts. Each rollout gives one estimate ĝ of the
policy gradient (the gradient of the first term of L with respect to the actor's
parameters). Over the rollouts we measure tr Cov[ĝ], the summed variance of all its
components, for three weights on the *same* rollouts:

* w = R: no baseline;
* w = R − mean(R): a constant baseline, the batch's mean return;
* w = R − V(s): the learned, state-dependent baseline.

We measure with longer rollouts (T = 64) than training used, so that R is mostly real
rewards rather than the critic's own bootstrap, and we do it twice: for an untrained
network, whose critic knows nothing, and for the network trained with the baseline.
"""


# %%
MEASURE_STEPS = 64
WEIGHTS = ("R", "R − mean R", "R − V")


def gradient_variance(model_state: dict, label: str) -> dict:
    probe = make_trainer(CONFIG.replace(seed=1000, num_steps=MEASURE_STEPS))
    probe.model.load_state_dict(model_state)
    actor_parameters = list(probe.model.actor_body.parameters()) + list(probe.model.policy_head.parameters())
    estimates = {name: [] for name in WEIGHTS}
    predictions, targets = [], []
    for _ in range(VARIANCE_BATCHES):
        obs, actions, _, returns, values, _ = rollout_weights(probe, use_baseline=False)
        for name, weights in zip(WEIGHTS, (returns, returns - returns.mean(), returns - values)):
            loss, _ = policy_gradient_loss(probe, obs, actions, weights)
            gradient = torch.autograd.grad(-loss, actor_parameters)
            estimates[name].append(torch.cat([g.flatten() for g in gradient]))
        predictions.append(values)
        targets.append(returns)
    variance = {name: float(torch.stack(estimates[name]).var(dim=0).sum()) for name in WEIGHTS}
    return {
        "network": label,
        "explained var. of V": explained_variance(torch.cat(predictions), torch.cat(targets)),
        **{f"tr Cov, w = {name}": variance[name] for name in WEIGHTS},
        "ratio R / (R − V)": variance["R"] / variance["R − V"],
        "ratio (R − mean) / (R − V)": variance["R − mean R"] / variance["R − V"],
    }


untrained = make_trainer(CONFIG.replace(seed=SEEDS[0] + 100))
rows = [
    gradient_variance(untrained.model.state_dict(), "untrained"),
    gradient_variance(trained[SEEDS[0]].model.state_dict(), f"trained, seed {SEEDS[0]}"),
]
print_table(rows, title=f"Policy-gradient variance over {VARIANCE_BATCHES} rollouts of "
            f"{CONFIG.num_envs} × {MEASURE_STEPS} steps")
print(f"\nvariance ratio (no baseline / learned baseline) at the trained network: {rows[1]['ratio R / (R − V)']:.1f}")

# %%
figure, axes = plt.subplots(1, 2, figsize=(11, 4.2))
for use_baseline, color in ((False, "tab:red"), (True, "tab:blue")):
    curve_tensor = torch.tensor([curves[use_baseline][seed] for seed in SEEDS])
    label = "w = R − V (baseline)" if use_baseline else "w = R (no baseline)"
    axes[0].fill_between(range(ITERATIONS), curve_tensor.min(0).values, curve_tensor.max(0).values, color=color,
                         alpha=0.15, label=f"{label}, range over seeds")
    axes[0].plot(curve_tensor.mean(0), color=color, lw=2, label=f"{label}, mean of {len(SEEDS)} seeds")
axes[0].set_xlabel(f"update (one per rollout of {CONFIG.batch_size} steps)")
axes[0].set_ylabel(f"mean return of the last {RECENT_EPISODES} episodes (steps)")
axes[0].set_ylim(0, 520)
axes[0].set_title("Actor-critic on CartPole-v1")
axes[0].legend(fontsize=8, loc="upper left")
names = [row["network"] for row in rows]
positions = torch.arange(len(rows), dtype=torch.float32)
for offset, name, color in zip((-0.27, 0.0, 0.27), WEIGHTS, ("tab:red", "tab:grey", "tab:blue")):
    axes[1].bar(positions + offset, [row[f"tr Cov, w = {name}"] for row in rows], 0.27, color=color, label=f"w = {name}")
axes[1].set_xticks(positions.tolist(), names)
axes[1].set_yscale("log")
axes[1].set_ylabel("tr Cov[ĝ] over rollouts (log scale)")
axes[1].set_title("Variance of the policy-gradient estimate")
axes[1].legend(fontsize=8, loc="upper left")
lecture.save_figure(figure, "baseline_variance_and_learning.png")

last = max(1, ITERATIONS // 5)
summary, finals = [], {}
for use_baseline in (False, True):
    finals[use_baseline] = torch.tensor([sum(curves[use_baseline][s][-last:]) / last for s in SEEDS])
    summary.append({"weight": "R − V" if use_baseline else "R",
                    f"mean return, last {last} updates": mean_and_spread(finals[use_baseline]),
                    "best seed": float(finals[use_baseline].max())})
print_table(summary, title=f"Final returns over {len(SEEDS)} seeds (mean ± std)")
print_table([{"seed": seed, "w = R": float(without), "w = R − V": float(with_baseline)}
             for seed, without, with_baseline in zip(SEEDS, finals[False], finals[True])],
            title=f"Mean return of the last {last} updates, seed by seed (same initial network and episodes' seeds)")

untrained_row, trained_row = rows
lecture.claim("at the untrained network, R − V is no less noisy than R (ratio R / (R − V) between 0.9 and 1.1)",
              0.9 < untrained_row["ratio R / (R − V)"] < 1.1, measured=f"ratio {untrained_row['ratio R / (R − V)']:.2f}")
for row in rows:
    lecture.claim(f"at the {row['network']} network, a constant baseline lowers the variance",
                  row["tr Cov, w = R − mean R"] < row["tr Cov, w = R"],
                  measured=f"{row['tr Cov, w = R − mean R']:.3g} against {row['tr Cov, w = R']:.3g}")
lecture.claim("at the trained network, the learned baseline lowers the variance more than the constant does "
              "(ratio (R − mean) / (R − V) above 1)", trained_row["ratio (R − mean) / (R − V)"] > 1,
              measured=f"ratio {trained_row['ratio (R − mean) / (R − V)']:.2f}", quick=False)
lecture.claim("yet the trained critic's explained variance is below 0",
              trained_row["explained var. of V"] < 0, measured=f"{trained_row['explained var. of V']:.2f}", quick=False)
final_means = {weight: float(values.mean()) for weight, values in finals.items()}
final_spreads = {weight: float(values.std(unbiased=False)) for weight, values in finals.items()}
lecture.claim(f"on this budget neither weight solves CartPole: no seed's last {last} updates average 475",
              max(float(values.max()) for values in finals.values()) < 475,
              measured=f"best seed {max(float(values.max()) for values in finals.values()):.1f}", quick=False)
lecture.claim("the gap between the two means is smaller than the larger of their two spreads",
              abs(final_means[True] - final_means[False]) < max(final_spreads.values()),
              measured=f"gap {abs(final_means[True] - final_means[False]):.1f}, "
                       f"spreads {final_spreads[False]:.1f} (R) and {final_spreads[True]:.1f} (R − V)", quick=False)
higher_with_baseline = int((finals[True] > finals[False]).sum())
lecture.claim("seed by seed, the baseline ends higher on some seeds and lower on others",
              0 < higher_with_baseline < len(SEEDS), measured=f"higher on {higher_with_baseline} of {len(SEEDS)}",
              quick=False)

# %% [markdown]
"""
## What to take away

**The variance, measured directly.** The untrained row shows that a learned baseline
is only as useful as the critic behind it: at the untrained network, R − V is no less
noisy than R (ratio R / (R − V) between 0.9 and 1.1). At the untrained network and at
the trained one, a constant baseline lowers the variance: on CartPole every return is a
large positive number, so every action's log-probability gets pushed up and only the
differences carry information; subtracting the level removes that push. At the trained
network, the learned baseline lowers the variance more than the constant does (ratio
(R − mean) / (R − V) above 1): V also follows the differences between states. The
ratio R / (R − V) is how many times more rollouts the estimator without a baseline
would need for the same precision. In the right panel the three bars of each network
are the three weights, on a log scale: the blue bar (R − V) of the trained network is
the lowest.

**Explained variance is not the same measurement.** Yet the trained critic's explained
variance is below 0: over all samples, V predicts R worse than R's mean would. The two
numbers measure different things: explained variance compares V(s_t) with each R_t,
one sample at a time; the gradient's variance is what the update feels, each weight
multiplied by its score ∇ log π and summed along the rollout. Here they disagree. Read
explained variance as a check that the critic is learning, not as a measure of what
the baseline buys.

**The learning curves.** On this budget neither weight solves CartPole: no seed's last
updates average 475 (the `best seed` column). Lecture 1's REINFORCE reached 500 on
another budget: whole episodes, 16 of them per update, Adam at twice this learning
rate, no gradient clipping. Here the learning curves do not show the baseline
helping. Compared as two groups, the gap between the two means is smaller than the
larger of their two spreads (the shaded ranges in the left panel overlap). Compared
seed by seed — each seed starts both runs from the same network and plays the same
environment seeds — the baseline ends higher on some seeds and lower on others (the
last table). A lower-variance gradient is a better estimate of the same direction; on
this budget, with one small step per rollout, that does not turn into a return that
six seeds can tell apart. The direct measurement of the variance is the evidence this
lecture gives; lecture 7 measures how many seeds a difference in returns needs, and
lecture 6 shows PPO, which takes many gradient steps per rollout, solving CartPole.

Advantage normalisation (lecture 8) subtracts the batch mean of the advantages: a
constant baseline on top of the learned one.

Next, lecture 3 asks how to form the advantage from the critic: the full return minus V
(λ = 1, used here) or V's own predictions a few steps ahead (λ < 1).
"""

# %%
lecture.finish()
