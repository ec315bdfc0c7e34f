# %% [markdown]
"""
# Lecture 8 — Variants: PPO-Penalty and adaptive clipping

**What it teaches.** PPO-Clip controls the step size with a fixed ε. The PPO paper
(Schulman et al. 2017) also proposed a penalty on the KL divergence instead of the
clip, with a coefficient that adapts to how far each update actually went:

    L_policy = −E[ r_t(θ) Â_t ] + β · KL[π_old ‖ π_θ]

    after each update, with d = KL[π_old ‖ π_θ] measured on the rollout:
        d > 1.5 · d_targ   →  β ← 2β      (it moved too far: penalise more)
        d < d_targ / 1.5   →  β ← β / 2   (it barely moved: penalise less)

The same feedback can steer ε instead — *adaptive clipping*: halve ε after an update
that overshot the KL target, double it after one that undershot. Both replace a step
size you have to guess (ε) with a KL you have to choose (d_targ), which has the same
meaning on every task. This lecture runs all three on CartPole, over seeds.

**What it shows.** Learning curves of PPO-Clip, PPO-Penalty and adaptive clipping over
seeds; the KL of each update against the target band; how β and ε move.

**Prerequisites.** Lectures 4–6.

**Library.** `ppo/variants.py` — `kl_penalty_loss`, the update rules
`update_kl_coefficient` and `update_clip_coefficient`, and the trainers `PPOPenalty` and
`AdaptiveClipPPO`, each a subclass of `ppo.trainer.PPO` that overrides the policy loss
or the ε it reads, and adapts after every update. Tests: `tests/test_variants.py`.
"""

# %%
import torch

from _common import Lecture, mean_and_spread, plt, print_table
from ppo.config import PPOConfig
from experiments.train import training_envs
from ppo.trainer import PPO
from ppo.variants import KL_TOLERANCE, AdaptiveClipPPO, PPOPenalty, kl_penalty_loss, rollout_kl

lecture = Lecture("08_variants", __doc__)
SEEDS = lecture.choose(full=[1, 2, 3], quick=[1])
KL_TARGET = 0.01  # d_targ: the KL per update we ask for
INITIAL_BETA = 1.0
BASE = PPOConfig(
    env_id="CartPole-v1", env_backend="torch", num_envs=32, num_steps=lecture.choose(full=32, quick=8),
    update_epochs=8, num_minibatches=2, learning_rate=3e-3, anneal_lr=False,
    total_timesteps=lecture.choose(full=32 * 32 * 30, quick=32 * 8 * 3), tensorboard=False,
)
ALGORITHMS = {
    "PPO-Clip (ε = 0.2)": lambda config: PPO(config, training_envs(config), progress=False),
    "PPO-Penalty (adaptive β)": lambda config: PPOPenalty(config, training_envs(config), progress=False, kl_target=KL_TARGET, initial_beta=INITIAL_BETA),
    "adaptive clipping": lambda config: AdaptiveClipPPO(config, training_envs(config), progress=False, kl_target=KL_TARGET),
}

# %% [markdown]
"""
## The penalised loss on one sample

`kl_penalty_loss` adds β times the k3 estimate of KL[π_old ‖ π_θ] to the unclipped
surrogate. Unlike the clip, the penalty never switches a sample's gradient off; it
pulls back harder the further the ratio goes, in either direction.
"""

# %%
for ratio in (0.5, 0.8, 1.0, 1.2, 2.0):
    log_ratio = torch.log(torch.tensor([ratio]))
    cells = [f"β={beta}: {-kl_penalty_loss(log_ratio, torch.zeros(1), torch.ones(1), beta).item():+.3f}" for beta in (0.0, 1.0, 10.0)]
    print(f"r = {ratio:>3}, Â = +1   objective  " + "   ".join(cells))

# %% [markdown]
"""
## Training the three over seeds

Same configuration for all: 32 CartPole copies × 32 steps, K = 8 epochs of 2
minibatches, a constant learning rate of 3e-3; d_targ = 0.01 and β₀ = 1 for the
adaptive ones. The step size is chosen so that PPO-Clip's updates move the policy by a
KL of the order of d_targ: with much smaller steps (lecture 6's base run, annealed to
0) every update would undershoot the target and the adaptive rules would only ever
loosen — β halving towards 0, ε pinned at its upper bound. The variants report, per iteration, the
coefficient the update used (`beta` or `clip_coef`) and the KL measured on the whole
rollout afterwards (`kl_after_update`); for PPO-Clip the callback measures the same KL
with the same function, `ppo.variants.rollout_kl`.
"""

# %%
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

# %%
low, high = KL_TARGET / KL_TOLERANCE, KL_TARGET * KL_TOLERANCE
rows = []
for name in ALGORITHMS:
    finals, kls, in_band = [], [], []
    for history in histories[name].values():
        tail = history[-max(1, len(history) // 4):]
        finals.append(sum(row["episode_return_recent"] for row in tail) / len(tail))
        kl_values = torch.tensor([row["kl_after_update"] for row in history])
        kls.append(float(kl_values.median()))
        in_band.append(float(((kl_values >= low) & (kl_values <= high)).float().mean()))
    rows.append({"algorithm": name, "final return": mean_and_spread(finals),
                 "median KL per update": sum(kls) / len(kls), "updates with KL in band": sum(in_band) / len(in_band)})
print_table(rows, title=f"{len(SEEDS)} seeds, {BASE.total_timesteps:,} steps each; KL band [{low:.4f}, {high:.4f}] around d_targ = {KL_TARGET}")
for name, key in (("PPO-Penalty (adaptive β)", "beta"), ("adaptive clipping", "clip_coef")):
    values = [row[key] for history in histories[name].values() for row in history]
    print(f"{name}: {key} ranged over [{min(values):.4g}, {max(values):.4g}] across updates and seeds")

# %%
figure, axes = plt.subplots(1, 3, figsize=(16, 4.5))
colors = dict(zip(ALGORITHMS, ("tab:blue", "tab:orange", "tab:green")))
for name in ALGORITHMS:
    for index, history in enumerate(histories[name].values()):
        steps = [row["step"] for row in history]
        label = name if index == 0 else None
        axes[0].plot(steps, [row["episode_return_recent"] for row in history], color=colors[name], alpha=0.7, lw=1.2, label=label)
        axes[1].plot(steps, [row["kl_after_update"] for row in history], color=colors[name], alpha=0.7, lw=1.2, label=label)
axes[0].set_title("return, last 20 episodes (one line per seed)")
axes[1].axhspan(low, high, color="grey", alpha=0.2, label="target band")
axes[1].set_yscale("log")
axes[1].set_title("KL[π_old ‖ π_new] after each update")
for index, history in enumerate(histories["PPO-Penalty (adaptive β)"].values()):
    axes[2].plot([row["step"] for row in history], [row["beta"] for row in history], color=colors["PPO-Penalty (adaptive β)"],
                 label="β (PPO-Penalty)" if index == 0 else None)
for index, history in enumerate(histories["adaptive clipping"].values()):
    axes[2].plot([row["step"] for row in history], [row["clip_coef"] for row in history], color=colors["adaptive clipping"],
                 label="ε (adaptive clipping)" if index == 0 else None)
axes[2].set_yscale("log")
axes[2].set_title("the adapted coefficient")
for axis in axes:
    axis.set_xlabel("environment steps")
    axis.legend(fontsize=8)
lecture.save_figure(figure, "variants.png")

# %% [markdown]
"""
## What to take away

The adaptive rules aim the KL of each update at d_targ; PPO-Clip does not aim at any KL
— its KL is whatever ε, the learning rate and K produce. Compare the median KL column
with d_targ and with PPO-Clip's, then the in-band column and the middle plot: a rule
that reacts once per update, by factors of two, to a KL measured on one noisy rollout
centres the KL but cannot pin each update to the band. The right-hand plot shows the
other side of that coin: β and ε bounce between neighbouring powers of two instead of
settling. Whether any of this buys return on this task is in the first column — with
the ± from a few seeds in mind. A KL penalty returns in the language-model lectures
(11–12), where it ties the policy to a frozen reference model instead of the previous
policy.
"""

# %%
lecture.finish()
