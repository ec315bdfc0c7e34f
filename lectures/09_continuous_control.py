# %% [markdown]
"""
# Lecture 9 — Continuous control on Pendulum

**What it teaches.** What changes when the action is a real number instead of a choice
from a list. Nothing in the PPO loop does: the ratio r_t(θ), the clip, GAE and the value
loss only need log π_θ(a | s) and an entropy. What changes is the policy head and the
scales around it:

* **The diagonal Gaussian policy.** The network outputs a mean μ_θ(s) ∈ ℝ^d; a vector
  log σ ∈ ℝ^d, learned but independent of the state, gives the spread. The d action
  dimensions are independent, so the log-probability is a sum over dimensions:

      log π_θ(a | s) = Σ_i [ −(a_i − μ_i(s))² / (2σ_i²) − log σ_i − ½ log 2π ]
      H[π_θ(· | s)]  = Σ_i [ ½ + ½ log 2π + log σ_i ]

  The greedy action, for evaluation, is the mean μ_θ(s).
* **Clipping at the env's door.** A Gaussian sample can leave the action bounds. The
  trainer clips it only on its way to the env and stores the *unclipped* sample, whose
  log-probability is the one the update recomputes. We show what goes wrong otherwise.
* **Normalisation.** Observations are rescaled by running mean and std; rewards are
  divided by the running std of the discounted return. Pendulum's costs run to −16 per
  step, so raw returns are large, and the critic must chase them.
* **The Pendulum preset** of `experiments/presets.py`, and an ablation of the normalisation over
  seeds, evaluated greedily on gymnasium's Pendulum-v1.

**Prerequisites.** Lectures 5–7.

**Library.** `ppo/networks.py` (`GaussianHead`, `ActorCritic.greedy_action`),
`ppo/trainer.py` (`PPO.env_action`, `collect_rollout`), `ppo/normalize.py`
(`ObservationNormalizer`, `RewardScaler`), `experiments/presets.py` (`PRESETS["Pendulum-v1"]`),
`ppo/evaluation.py` (frozen statistics at evaluation), `envs/classic/pendulum.py` (the
batched torch Pendulum that trains here). Tests: `tests/test_networks.py`,
`tests/test_normalize.py`, `tests/test_continuous.py`.
"""

# %%
import dataclasses
import math

import gymnasium as gym
import torch

from _common import Lecture, mean_and_spread, plt, print_table, shown_path
from envs.classic import make_torch_vec_env
from envs.factory import gymnasium_env_factory
from experiments.benchmark_continuous import SUCCESS_THRESHOLD
from experiments.presets import build_config
from experiments.train import training_envs
from ppo.config import PPOConfig
from ppo.evaluation import Policy, evaluate_policy, load_policy
from ppo.networks import ActorCritic, GaussianHead
from ppo.normalize import ObservationNormalizer, RewardScaler
from ppo.trainer import PPO

lecture = Lecture("09_continuous_control", __doc__)
ENV_ID = "Pendulum-v1"

# %% [markdown]
"""
## 1. The diagonal Gaussian policy

An `ActorCritic` built for a 3-dimensional Box action space gets a `GaussianHead`. We set
its log σ to different values per dimension, evaluate one state and one action, and
compare the library's log-probability and entropy with the sums above written out by hand.
"""

# %%
torch.manual_seed(0)
observation_space = gym.spaces.Box(-1.0, 1.0, shape=(4,))
action_space = gym.spaces.Box(-1.0, 1.0, shape=(3,))
model = ActorCritic(observation_space, action_space)
assert isinstance(model.policy_head, GaussianHead)
with torch.no_grad():
    model.policy_head.log_std.copy_(torch.tensor([-1.0, 0.0, 0.5]))
states = torch.randn(3, 4)
with torch.no_grad():
    distribution = model.distribution(states)
    mean, std = distribution.base_dist.loc, distribution.base_dist.scale  # (3 states, 3 dims)
    action = torch.tensor([0.3, -1.2, 2.0])
    per_dimension = -(action - mean[0]) ** 2 / (2 * std[0] ** 2) - std[0].log() - 0.5 * math.log(2 * math.pi)
print_table([{"dimension i": i, "μ_i(s)": float(mean[0, i]), "σ_i": float(std[0, i]), "a_i": float(action[i]),
              "log N(a_i; μ_i, σ_i)": float(per_dimension[i])} for i in range(3)],
            title="One state, one 3-dimensional action: the per-dimension terms")
with torch.no_grad():
    print(f"sum over dimensions {float(per_dimension.sum()):.6f}   library log π(a|s) "
          f"{float(distribution.log_prob(action.expand(3, 3))[0]):.6f}")
    by_hand_entropy = float((0.5 + 0.5 * math.log(2 * math.pi) + std[0].log()).sum())
    print(f"entropy by hand {by_hand_entropy:.6f}   library H[π(·|s)] {float(distribution.entropy()[0]):.6f}")
    print("σ at three different states (state-independent):", [[round(v, 4) for v in row] for row in std.tolist()])
    greedy = model.greedy_action(states)
    print(f"greedy action = mean: max |greedy − μ| over the three states = {float((greedy - mean).abs().max()):.1e}")

# %% [markdown]
"""
The policy head's output layer starts with gain 0.01 (lecture 7), so μ starts near 0;
log σ starts at `log_std_init` = 0, i.e. σ = 1 in every dimension. The optimiser moves
log σ like any other weight, and the entropy — a function of σ alone here — shows how
much exploration is left.

## 2. Clip the action only on its way to the env

Pendulum's torque must lie in [−2, 2]. With σ = 1, a fair share of samples fall outside.
`PPO.collect_rollout` sends `PPO.env_action(a)` — the sample clipped to the bounds — to the
env, and stores `a` itself. One rollout of an untrained policy:
"""

# %%
preview_config = build_config({"env_id": ENV_ID, "tensorboard": False, "total_timesteps": 4096})
preset_trainer = PPO(preview_config, training_envs(preview_config), progress=False)
preset_trainer.collect_rollout()
stored = preset_trainer.buffer.actions.reshape(-1)  # (T·N,) what the update will score
sent = preset_trainer.env_action(preset_trainer.buffer.actions).reshape(-1)
low, high = float(preset_trainer.action_low), float(preset_trainer.action_high)
print(f"{stored.numel():,} stored actions: min {float(stored.min()):.2f}, max {float(stored.max()):.2f}, "
      f"{float(((stored < low) | (stored > high)).float().mean()):.1%} outside [{low:g}, {high:g}]; "
      f"the env received values in [{float(sent.min()):.2f}, {float(sent.max()):.2f}]")
preset_trainer.envs.close()

# %% [markdown]
"""
Why not store the clipped action? Because the Gaussian density of the clipped value is
not the probability of what happened. Every sample beyond the bound becomes the same
env action, 2, which therefore has probability P(a ≥ 2) — a point mass. Scoring it as
log N(2; μ, σ) gives a log-probability whose gradient points the wrong way: raising the
density *at* 2 means moving μ towards 2, even when μ is already above it and the
samples beyond the bound were the good ones.

A one-step problem makes this exact. The reward is the torque itself, r = clip(a, −2, 2):
more is better, up to the bound. With a ~ N(μ, σ²) the true gradient is

    ∂/∂μ E[clip(a)] = Φ((2 − μ)/σ) − Φ((−2 − μ)/σ)       (≥ 0 for every μ)

and the policy-gradient estimate is mean[ r · ∂/∂μ log π(a_stored) ], computed by autograd
through a `GaussianHead` whose mean is μ. Once with the unclipped sample stored, once
with the clipped action stored; each over batches of samples, mean ± standard error.
"""


# %%
def gradient_estimates(mu: float, sigma: float, samples: int, batches: int, generator: torch.Generator) -> dict:
    head = GaussianHead(in_dim=1, action_dim=1, ortho_init=True, log_std_init=math.log(sigma))
    with torch.no_grad():
        head.mean.weight.zero_()
        head.mean.bias.fill_(mu)  # μ_θ(s) = bias: the gradient with respect to it is ∂/∂μ
    features = torch.zeros(samples, 1)
    estimates = {"unclipped stored": [], "clipped stored": []}
    clipped_share = []
    for _ in range(batches):
        distribution = head(features)
        with torch.no_grad():
            noise = torch.randn(samples, 1, generator=generator)
            sample = head.mean(features) + sigma * noise  # a ~ N(μ, σ²), drawn with our generator
            env_action = sample.clamp(-2.0, 2.0)
            reward = env_action.squeeze(1)
        clipped_share.append(float((sample != env_action).float().mean()))
        for name, stored_action in (("unclipped stored", sample), ("clipped stored", env_action)):
            objective = (reward * distribution.log_prob(stored_action)).mean()  # its gradient estimates ∇E[r]
            (gradient,) = torch.autograd.grad(objective, head.mean.bias, retain_graph=True)
            estimates[name].append(float(gradient))
    standard_normal = torch.distributions.Normal(0.0, 1.0)
    exact = float(standard_normal.cdf(torch.tensor((2 - mu) / sigma)) - standard_normal.cdf(torch.tensor((-2 - mu) / sigma)))
    row = {"μ": mu, "σ": sigma, "samples clipped": f"{sum(clipped_share) / batches:.0%}", "exact ∂E[r]/∂μ": exact}
    for name, values in estimates.items():
        values = torch.tensor(values)
        row[f"estimate, {name}"] = f"{values.mean():+.3f} ± {values.std() / math.sqrt(batches):.3f}"
    return row


generator = torch.Generator().manual_seed(0)
SAMPLES, BATCHES = lecture.choose(full=20_000, quick=2_000), lecture.choose(full=20, quick=5)
clip_rows = [gradient_estimates(mu, 1.0, SAMPLES, BATCHES, generator) for mu in (0.0, 1.0, 2.0, 3.0)]
print_table(clip_rows, title=f"Policy gradient of E[clip(a)] for a ~ N(μ, 1), {BATCHES} batches of {SAMPLES:,} samples")
normal = torch.distributions.Normal(torch.tensor(2.0), torch.tensor(1.0))
print(f"at μ = 2: the env action 2 has probability P(a ≥ 2) = {float(1 - normal.cdf(torch.tensor(2.0))):.2f}; "
      f"the stored clipped value gets density {float(normal.log_prob(torch.tensor(2.0)).exp()):.3f} "
      f"(log {float(normal.log_prob(torch.tensor(2.0))):.3f}), the same for every sample beyond the bound")

figure, axes = plt.subplots(1, 2, figsize=(11, 4))
draws = 2.0 + torch.randn(50_000, generator=generator)
at_bound = float((draws >= 2.0).float().mean())
axes[0].hist(draws.numpy(), bins=120, density=True, alpha=0.5, label="sampled a ~ N(2, 1): stored")
axes[0].axvspan(2.0, float(draws.max()), color="tab:red", alpha=0.08)
axes[0].axvline(2.0, color="tab:red", lw=2, label=f"env action: clip(a) = 2 with probability {at_bound:.2f}")
axes[0].set_xlabel("action")
axes[0].set_ylabel("density")
axes[0].set_title("Every sample beyond the bound becomes the same env action")
axes[0].legend(fontsize=8)
mus = [row["μ"] for row in clip_rows]
axes[1].plot(mus, [row["exact ∂E[r]/∂μ"] for row in clip_rows], "k-o", label="exact")
for name, marker in (("unclipped stored", "s"), ("clipped stored", "^")):
    axes[1].plot(mus, [float(row[f"estimate, {name}"].split(" ± ")[0]) for row in clip_rows], marker=marker, ls="--",
                 label=f"estimate, {name}")
axes[1].axhline(0.0, color="gray", lw=0.8)
axes[1].set_xlabel("μ")
axes[1].set_ylabel("∂E[clip(a)]/∂μ")
axes[1].set_title("Storing the clipped action biases the gradient")
axes[1].legend(fontsize=8)
lecture.save_figure(figure, "clipping.png")

# %% [markdown]
"""
Compare the last two columns with the exact one: the unclipped estimate agrees with it
within its standard error; the clipped one does not, and where most samples are clipped
its sign can flip. (Another fix keeps the bounds inside the distribution: squash a
Gaussian through tanh and correct the log-probability for the change of variables, as
SAC does. The PPO implementations this course follows clip instead.)

## 3. Observation normalisation and reward scaling

Pendulum observes (cos θ, sin θ, θ̇): two numbers in [−1, 1] and an angular velocity with
larger bounds (printed below). Its reward is −(θ² + 0.1 θ̇² + 0.001 u²) with θ ∈ [−π, π],
so every reward is negative, down to the worst case printed below, and with the preset's
γ the discounted return can reach that worst case / (1 − γ). We run random torques in
the batched Pendulum and feed what comes out through the library's two normalisers,
exactly as `PPO.collect_rollout` does.
"""

# %%
PRESET = build_config({"env_id": ENV_ID})
GAMMA = PRESET.gamma
envs = make_torch_vec_env(ENV_ID, 32, seed=0)
max_speed, max_torque = float(envs.single_observation_space.high[2]), float(envs.single_action_space.high[0])
worst_reward = -(math.pi**2 + 0.1 * max_speed**2 + 0.001 * max_torque**2)
print(f"observation bounds {envs.single_observation_space.high.tolist()} (±); worst reward per step {worst_reward:.2f}; "
      f"worst discounted return with γ = {GAMMA}: {worst_reward / (1 - GAMMA):.1f}")
obs_normalizer = ObservationNormalizer((3,))
reward_scaler = RewardScaler(32, GAMMA)
raw_obs, normalized_obs, raw_rewards, scaled_rewards = [], [], [], []
raw_returns = torch.zeros(32)
discounted = []
obs = envs.reset(seed=0)
action_generator = torch.Generator().manual_seed(0)
for _ in range(lecture.choose(full=1000, quick=200)):
    raw_obs.append(obs)
    normalized_obs.append(obs_normalizer(obs))
    torque = torch.rand(32, 1, generator=action_generator) * 4 - 2
    result = envs.step(torque)
    done = result.terminated | result.truncated
    raw_rewards.append(result.reward)
    scaled_rewards.append(reward_scaler(result.reward, done))
    raw_returns = raw_returns * GAMMA + result.reward
    discounted.append(raw_returns.clone())
    raw_returns = raw_returns * (~done)
    obs = result.obs
late = len(raw_obs) // 2  # statistics of the second half, after the running estimates have settled
raw_obs, normalized_obs = torch.cat(raw_obs[late:]), torch.cat(normalized_obs[late:])
print_table([{"observation": name, "raw mean": float(raw_obs[:, i].mean()), "raw std": float(raw_obs[:, i].std()),
              "normalised mean": float(normalized_obs[:, i].mean()), "normalised std": float(normalized_obs[:, i].std())}
             for i, name in enumerate(("cos θ", "sin θ", "θ̇"))],
            title="Observations under random torques (second half of the run)")
raw_r, scaled_r = torch.cat(raw_rewards[late:]), torch.cat(scaled_rewards[late:])
returns_seen = torch.cat(discounted[late:])
scale = float(torch.sqrt(reward_scaler.stats.var + reward_scaler.epsilon))
print_table([
    {"quantity": "reward per step", "raw mean": float(raw_r.mean()), "raw std": float(raw_r.std()),
     "scaled mean": float(scaled_r.mean()), "scaled std": float(scaled_r.std())},
    {"quantity": f"discounted return (γ = {GAMMA})", "raw mean": float(returns_seen.mean()), "raw std": float(returns_seen.std()),
     "scaled mean": float(returns_seen.mean()) / scale, "scaled std": float(returns_seen.std()) / scale},
], title=f"Rewards: RewardScaler divides by the running std of the discounted return ({scale:.1f} here)")
value_clip = PRESET.value_clip_coef
print(f"value clipping in the preset: value_clip_coef ε_v = {value_clip}. A critic moving at most ε_v per "
      f"update needs about {abs(float(returns_seen.mean())) / value_clip:.0f} updates to go from V = 0 to the mean return "
      f"in raw units, {abs(float(returns_seen.mean())) / scale / value_clip:.0f} in scaled units")

# %% [markdown]
"""
Two things follow. The observation normaliser gives θ̇ the same unit scale as the other
two inputs. The reward scaler shrinks the critic's targets by the factor printed above
but keeps their sign (the mean is not subtracted) — and it matters more than it seems,
when the value loss is clipped (`value_clip_coef`, 0.2 by default, printed above): the critic
can then move its prediction by at most ε_v per update, an amount measured in reward
units. The last line above counts what that means for a critic that starts at 0. Both normalisers'
statistics are part of the checkpoint and are frozen at evaluation.

## 4. The preset

`build_config({"env_id": "Pendulum-v1"})` starts from the PPOConfig defaults and applies
the row `PRESETS["Pendulum-v1"]`: the SB3 zoo's Pendulum settings (10 epochs, no
entropy bonus) retuned for the batched env — 8 envs × 256 steps, γ 0.95, lr 2e-3 (the
comment above the row records what was measured) — with both normalisers on. To keep this lecture to minutes we change two sizes and the
budget: more envs and fewer steps each give the same number of samples per iteration
with fewer step calls (the batched env makes extra copies nearly free, lecture 10), and
we stop earlier (and write no TensorBoard files). Everything else is the preset.
"""

# %%
defaults = PPOConfig()
preset = build_config({"env_id": ENV_ID})
LECTURE_CHANGES = dict(num_envs=32, num_steps=128, total_timesteps=lecture.choose(full=98_304, quick=8_192),
                       tensorboard=False)
BASE = build_config({"env_id": ENV_ID, **LECTURE_CHANGES})
rows = []
for field in dataclasses.fields(PPOConfig):
    name = field.name
    if getattr(preset, name) != getattr(defaults, name) or getattr(BASE, name) != getattr(preset, name):
        rows.append({"hyperparameter": name, "default": getattr(defaults, name), "Pendulum preset": getattr(preset, name),
                     "this lecture": getattr(BASE, name)})
print_table(rows, title=f"{ENV_ID}: defaults ← preset ← this lecture's changes "
                        f"({BASE.num_iterations} iterations of {BASE.batch_size} samples, "
                        f"{BASE.update_epochs} epochs × {BASE.num_minibatches} minibatches of {BASE.minibatch_size})")
print(f"samples per iteration: preset {preset.batch_size:,}, here {BASE.batch_size:,}; step calls per iteration: "
      f"preset {preset.num_steps:,}, here {BASE.num_steps:,} ({preset.num_steps / BASE.num_steps:.0f}× fewer); "
      f"steps: preset {preset.total_timesteps:,}, here {BASE.total_timesteps:,}")
print(f"backend chosen by 'auto': {BASE.env_backend} (the batched Pendulum of envs/classic/pendulum.py)")

# %% [markdown]
"""
## 5. With and without normalisation

The same configuration, once as it is and once with `normalize_obs` and
`normalize_reward` both off, over seeds. Each final policy is evaluated greedily (its
mean action, clipped to the bounds) on gymnasium's own Pendulum-v1, with the
observation statistics frozen as they were at the end of training. Returns are
negative and closer to 0 is better; the dashed line in the plot is the mark that
`experiments/benchmark_continuous.py` counts as a success (printed below). The first
seed's run with normalisation writes a run folder, whose checkpoint we load back at the end.
"""

# %%
SEEDS = lecture.choose(full=[1, 2], quick=[1])
SETTINGS = {"normalised (preset)": {}, "not normalised": dict(normalize_obs=False, normalize_reward=False)}
EVAL_EPISODES = lecture.choose(full=20, quick=2)
print(f"success mark of experiments.benchmark_continuous for {ENV_ID}: greedy mean ≥ {SUCCESS_THRESHOLD[ENV_ID]:g}")
run_dir = lecture.path("run")
if run_dir.exists():  # a fresh run folder every time the lecture runs
    for old_file in run_dir.iterdir():
        if old_file.is_file():
            old_file.unlink()


def train(config: PPOConfig, keep_run: bool) -> tuple[PPO, list[dict]]:
    history = []
    trainer = PPO(config, training_envs(config), run_dir=run_dir if keep_run else None, progress=False)
    trainer.train(callback=lambda ppo, metrics: history.append({"step": ppo.global_step, **metrics}))
    trainer.envs.close()
    return trainer, history


def last_quarter(history: list[dict], key: str) -> float:
    tail = [row[key] for row in history[-max(1, len(history) // 4):] if row[key] == row[key]]  # skip NaN
    return sum(tail) / len(tail) if tail else float("nan")


results = {name: {} for name in SETTINGS}
for name, change in SETTINGS.items():
    for seed in SEEDS:
        config = BASE.replace(seed=seed, **change)
        trainer, history = train(config, keep_run=(name == "normalised (preset)" and seed == SEEDS[0]))
        returns = evaluate_policy(Policy(trainer.model, config, trainer.obs_normalizer), gymnasium_env_factory(ENV_ID),
                                  episodes=EVAL_EPISODES)
        results[name][seed] = {"history": history, "eval": float(returns.mean()),
                               "log_std": float(trainer.model.policy_head.log_std.detach().mean())}
        print(f"{name:>20}, seed {seed}: training return (last quarter) {last_quarter(history, 'episode_return_recent'):8.1f}   "
              f"greedy eval {returns.mean():8.1f} ± {returns.std():.1f}   "
              f"explained variance {last_quarter(history, 'explained_variance'):.2f}", flush=True)

summary_rows = []
for name, per_seed in results.items():
    runs = list(per_seed.values())
    summary_rows.append({
        "setting": name,
        f"greedy eval ({EVAL_EPISODES} ep.)": mean_and_spread(r["eval"] for r in runs),
        "training return": mean_and_spread(last_quarter(r["history"], "episode_return_recent") for r in runs),
        "explained variance": f"{sum(last_quarter(r['history'], 'explained_variance') for r in runs) / len(runs):.2f}",
        "final σ": f"{sum(math.exp(r['log_std']) for r in runs) / len(runs):.2f}",
    })
print_table(summary_rows, title=f"{ENV_ID}, {BASE.total_timesteps:,} steps, seeds {SEEDS} "
                                f"(mean ± std over seeds; training columns: last quarter of the run)")

figure, axes = plt.subplots(1, 2, figsize=(11, 4.2))
for (name, per_seed), color in zip(results.items(), ("tab:blue", "tab:red")):
    for index, (seed, result) in enumerate(per_seed.items()):
        steps = [row["step"] for row in result["history"]]
        axes[0].plot(steps, [row["episode_return_recent"] for row in result["history"]], color=color, alpha=0.8,
                     label=name if index == 0 else None)
        axes[1].plot(steps, [row["explained_variance"] for row in result["history"]], color=color, alpha=0.8,
                     label=name if index == 0 else None)
axes[0].axhline(SUCCESS_THRESHOLD[ENV_ID], color="black", ls="--", lw=1)
axes[0].set_ylabel("return, last 20 training episodes")
axes[0].set_title("Learning curves (one line per seed)")
axes[1].set_ylabel("explained variance of the critic")
axes[1].set_ylim(-1, 1.05)
axes[1].set_title("How much of the return the critic predicts")
for axis in axes:
    axis.set_xlabel("environment steps")
    axis.legend(fontsize=8)
lecture.save_figure(figure, "normalisation_ablation.png")

# %% [markdown]
"""
Read the explained-variance panel next to the learning curves: without reward scaling
the critic, moving at most ε_v per update in raw reward units, explains little of the
return within this budget, and its advantages carry little beyond the raw rewards.

## The statistics travel with the checkpoint

`ppo.evaluation.load_policy` rebuilds the policy from `checkpoint.pt`, including the
observation normaliser's running mean and variance, frozen. Forget them — feed raw
observations to a network trained on normalised ones — and the same weights act on
inputs of the wrong scale:
"""

# %%
checkpoint = run_dir / "checkpoint.pt"
lecture.wrote(checkpoint)
loaded = load_policy(checkpoint)
with_statistics = evaluate_policy(loaded, gymnasium_env_factory(ENV_ID), episodes=EVAL_EPISODES)
without_statistics = evaluate_policy(Policy(loaded.model, loaded.config, None), gymnasium_env_factory(ENV_ID),
                                     episodes=EVAL_EPISODES)
print_table([
    {"evaluation": "checkpoint, statistics frozen (load_policy)", "mean return": float(with_statistics.mean()),
     "std": float(with_statistics.std())},
    {"evaluation": "same weights, raw observations", "mean return": float(without_statistics.mean()),
     "std": float(without_statistics.std())},
], title=f"{shown_path(checkpoint)}: greedy, {EVAL_EPISODES} episodes of gymnasium {ENV_ID}")

# %% [markdown]
"""
## What to take away

* A continuous action needs only a new head: μ_θ(s), a learned state-independent log σ,
  and a log-probability summed over dimensions. The rest of PPO is unchanged.
* Clip the action for the env, store the sample for the update (section 2's table).
* On Pendulum the scales matter: compare the two rows of section 5, and look at what the
  critic explains in each.
* Normalisation statistics are part of the policy; evaluation must load them.

The preset's full budget (`ppo-train --env-id Pendulum-v1`) and several seeds:
`python -m experiments.benchmark_continuous --env-id Pendulum-v1 --seeds 1 2 3 4 5`.
"""

# %%
lecture.finish()
