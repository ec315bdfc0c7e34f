# %% [markdown]
r"""
# Lecture 2 — A learned baseline: the actor-critic

**What it teaches.** Subtracting any function $b(s_t)$ of the state from the return leaves
the policy gradient unbiased, because the expected score is zero:
$\mathbb E_a[\nabla \log \pi(a \mid s)] = \sum_a \nabla \pi(a \mid s) = \nabla \sum_a \pi(a \mid s) = \nabla 1 = 0$. So

$$
\nabla J = \mathbb E\Big[\sum_t \nabla \log \pi(a_t \mid s_t) \cdot \big(G_t - b(s_t)\big)\Big]
$$

for every b. The b that (nearly) minimises the variance is the <a href="../glossary.html#term-Value-function">state value</a>
$V(s) = \mathbb E[G_t \mid s_t = s]$; $G_t - V(s_t)$ is then an estimate of the *<a href="../glossary.html#term-Advantage">advantage</a>*: how much
better the action taken was than the policy's average in that state. We do not know V,
so we learn it by regression on the returns: that network is the *<a href="../glossary.html#term-Critic">critic</a>*, the policy
is the *actor*.

**The networks.** `ppo.models.networks.ActorCritic` with `shared=False`: the actor and the
critic are two separate MLPs, with their own parameters and their own learning rates,
as in Sutton & Barto's <a href="../glossary.html#term-REINFORCE">REINFORCE</a> with <a href="../glossary.html#term-Baseline">baseline</a> (§13.4). (`shared=True` gives one trunk
with a policy head and a value head; then the critic's loss also moves the policy's
features — [lecture 8](08_implementation_details.ipynb) compares the two.)

**What it shows.** (1) REINFORCE on whole episodes with no baseline, the learned
baseline and a constant one, over ten seeds and three learning rates: learning curves,
and the return of each method at each learning rate with <a href="../glossary.html#term-Bootstrap-confidence-interval">bootstrap confidence
intervals</a> (the score recomputed on many resamples of the seeds, drawn with
replacement; the middle 95% of those scores is the interval; [lecture 7](07_diagnostics_and_tuning.ipynb) explains it)
(the fair comparison puts each method at its own best rate). (2) The variance of the gradient
estimate with and without the learned baseline (and with a constant one), measured over
many <a href="../glossary.html#term-Rollout">rollouts</a> at a fixed network — printed as a ratio, next to the critic's <a href="../glossary.html#term-Explained-variance">explained
variance</a>, $1 - \operatorname{Var}[R - V] / \operatorname{Var}[R]$: 1 for a critic that predicts every return, 0 for one
no better than the returns' mean.

**Prerequisites.** [Lecture 1](01_policy_gradients.ipynb).

**Library.** `ppo/models/networks.py` (`ActorCritic`), `ppo/models/member_networks.py` and
`ppo/parallel/optim.py` (`MemberNetworks`, `StackedAdam`: many independent networks as one
batched computation, with their own Adams), `ppo/trainers/ppo.py` (`collect_rollout` and
`compute_advantages`, for the variance measurement), `ppo/algorithm/losses.py` (`value_loss`,
`explained_variance`), `experiments/commands/statistics.py` (<a href="../glossary.html#term-IQM">IQM</a> and bootstrap intervals).
"""

# %%
import math

import gymnasium as gym
import torch

from _common import Lecture, plt, print_table
from envs.classic import make_torch_vec_env
from experiments.commands.statistics import interval_estimates
from experiments.commands.train import training_envs
from ppo.config import PPOConfig
from ppo.algorithm.losses import explained_variance
from ppo.models.networks import ActorCritic
from ppo.algorithm.distributions import CategoricalDistribution
from ppo.models.member_networks import MemberNetworks, stacked_parameters
from ppo.parallel.optim import FlatAdam, StackedAdam
from ppo.trainers.ppo import PPO

lecture = Lecture("02_baseline_actor_critic", __doc__)
# The learning rates and the critic's rate were chosen on seeds 1–5; the results below are
# on seeds 6–15, which played no part in that choice.
SEEDS = lecture.choose(full=list(range(6, 16)), quick=[6, 7])
LEARNING_RATES = lecture.choose(full=[0.001, 0.003, 0.01], quick=[0.003])  # the actor's Adam step size
CRITIC_LEARNING_RATE = 0.01
UPDATES = lecture.choose(full=100, quick=4)
EPISODES_PER_UPDATE = 4
GAMMA = 0.99
BOOTSTRAP_REPS = lecture.choose(full=2000, quick=200)
VARIANCE_BATCHES = lecture.choose(full=64, quick=8)  # rollouts per variance measurement
WEIGHT_NAMES = ("R", "R − V", "R − mean R")  # the weights compared: no baseline, learned, constant
COLORS = {"R": "tab:red", "R − mean R": "tab:grey", "R − V": "tab:blue"}  # one colour per weight, in every panel
OBSERVATION_SPACE = gym.spaces.Box(-math.inf, math.inf, (4,))
ACTION_SPACE = gym.spaces.Discrete(2)
CRITIC_PARAMETERS = ("critic_body.", "value_head.")

# %% [markdown]
r"""
## REINFORCE with and without a learned baseline

Each update plays EPISODES_PER_UPDATE = 4 whole episodes with the current policy and
computes the discounted return $G_t = r_t + \gamma G_{t+1}$ (γ = 0.99) to the end of each. The
two losses, for the actor θ and the critic w, are

$$
L(\theta) = -\frac{1}{E} \sum_{\text{episodes}} \sum_t \log \pi_\theta(a_t \mid s_t) \cdot w_t,
\qquad
L(w) = \tfrac12 \operatorname{mean}_t \big(V_w(s_t) - G_t\big)^2
$$

with weight $w_t = G_t$ (no baseline: [lecture 1](01_policy_gradients.ipynb)'s REINFORCE), $w_t = G_t - V_w(s_t)$ (the
learned baseline) or $w_t = G_t - \operatorname{mean} G$ (a constant baseline: the mean of $G_t$ over the
update's samples), computed without gradient: the baseline is a fixed number for the
actor's update. Each loss has its own Adam: the actor's at the learning rate being
compared, the critic's at 0.01. Without the learned baseline the critic is trained
too, but its V is not used.

Every (learning rate, weight, seed) is one independent run; `MemberNetworks`
(`ppo/models/member_networks.py`) evaluates all of them as one batched network (the
network's own methods mapped over the runs with `torch.func.vmap`), and `StackedAdam`
steps each run's own Adams, one for its actor and one for its critic. A seed's runs, one per weight, start from the same network;
each run plays its own CartPole copies. All runs draw their actions from one random
stream, so a run's episodes depend on the whole batch: the lecture gives the same
numbers every time, but a run's numbers change when the batch changes (another grid,
other seeds).
"""


# %%
def stacked_runs(learning_rate: float) -> tuple[MemberNetworks, StackedAdam, StackedAdam]:
    """The runs of one learning rate: member k·S + i is weight WEIGHT_NAMES[k] on seed SEEDS[i]."""
    members = []
    for _ in WEIGHT_NAMES:
        for seed in SEEDS:
            torch.manual_seed(seed)  # seed i's two members start equal
            members.append(ActorCritic(OBSERVATION_SPACE, ACTION_SPACE, hidden_sizes=(64, 64), shared=False))

    def own_adam(member: ActorCritic, critic: bool, rate: float) -> FlatAdam:
        return FlatAdam([parameter for name, parameter in member.named_parameters()
                         if name.startswith(CRITIC_PARAMETERS) == critic], lr=rate)

    actor = StackedAdam([own_adam(member, False, learning_rate) for member in members])
    critic = StackedAdam([own_adam(member, True, CRITIC_LEARNING_RATE) for member in members])
    return MemberNetworks(members, stacked_parameters(members[0], [actor, critic])), actor, critic


def logits(network: ActorCritic, obs: torch.Tensor) -> torch.Tensor:
    """The policy's logits z for a batch of observations (one network: `MemberNetworks.map` runs it for each)."""
    return network.policy_head.logits(network.actor_body(obs))


def play_episodes(models: list[MemberNetworks], envs) -> dict[str, torch.Tensor]:
    """One whole episode in each of the E copies of every member. Tensors are (T, M, E, ...):
    T the longest episode, M the members of all models in order; `alive` marks the steps
    that belong to an episode."""
    members = [model.num_members for model in models]
    obs = envs.reset().float().view(sum(members), EPISODES_PER_UPDATE, 4)
    alive = torch.ones(obs.shape[:2], dtype=torch.bool)
    steps = {"obs": [], "actions": [], "rewards": [], "alive": []}
    while alive.any():
        with torch.no_grad():
            actions = torch.cat([CategoricalDistribution(model.map(logits, part)).sample()
                                 for model, part in zip(models, obs.split(members))])
        result = envs.step(actions.flatten())
        steps["obs"].append(obs)
        steps["actions"].append(actions)
        steps["rewards"].append(result.reward.float().view(alive.shape) * alive)
        steps["alive"].append(alive)
        alive = alive & ~(result.terminated | result.truncated).view(alive.shape)
        obs = result.obs.float().view(obs.shape)
    return {name: torch.stack(values) for name, values in steps.items()}


def rewards_to_go(rewards: torch.Tensor, gamma: float) -> torch.Tensor:
    """G_t = r_t + γ G_{t+1}, backwards over the time axis (first) of the rewards."""
    returns = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[0])
    for t in reversed(range(rewards.shape[0])):
        running = rewards[t] + gamma * running
        returns[t] = running
    return returns


def reinforce_losses(model: MemberNetworks, episodes: dict, returns: torch.Tensor, weight_names: list[str]):
    """Each member's actor loss L(θ) and critic loss L(w), both (M,), for its (T, M, E) episodes;
    member m's weight is weight_names[m]."""
    def as_samples(x: torch.Tensor) -> torch.Tensor:  # (T, M, E, ...) → (M, T·E, ...)
        return x.transpose(0, 1).reshape(model.num_members, -1, *x.shape[3:])

    obs, actions = (as_samples(episodes[key]) for key in ("obs", "actions"))
    returns, alive = as_samples(returns), as_samples(episodes["alive"]).float()
    values = model.map(lambda network, member_obs: network.value(member_obs), obs)  # (M, T·E)
    learned = torch.tensor([float(name == "R − V") for name in weight_names]).unsqueeze(1)
    constant = torch.tensor([float(name == "R − mean R") for name in weight_names]).unsqueeze(1)
    mean_return = (returns * alive).sum(1, keepdim=True) / alive.sum(1, keepdim=True)  # over the member's batch
    weights = returns - learned * values.detach() - constant * mean_return
    log_probs = CategoricalDistribution(model.map(logits, obs)).log_prob(actions)
    actor_loss = -(log_probs * weights * alive).sum(1) / EPISODES_PER_UPDATE
    critic_loss = 0.5 * ((values - returns).pow(2) * alive).sum(1) / alive.sum(1)
    return actor_loss, critic_loss


def train_all() -> tuple[torch.Tensor, list[MemberNetworks]]:
    """Every run at once; returns the mean undiscounted return of each update's episodes,
    (updates, learning rates, weights, seeds), and the trained stacks."""
    runs = [stacked_runs(learning_rate) for learning_rate in LEARNING_RATES]
    models = [model for model, _, _ in runs]
    num_members = sum(model.num_members for model in models)
    envs = make_torch_vec_env("CartPole-v1", num_members * EPISODES_PER_UPDATE, seed=0, groups=num_members)
    torch.manual_seed(0)  # the actions' random stream
    weight_names = [name for name in WEIGHT_NAMES for _ in SEEDS]  # of the members of one learning rate
    curves = torch.zeros(UPDATES, len(LEARNING_RATES), len(WEIGHT_NAMES), len(SEEDS))
    for update in range(UPDATES):
        episodes = play_episodes(models, envs)
        curves[update] = episodes["rewards"].sum(0).mean(-1).view(curves.shape[1:])
        returns = rewards_to_go(episodes["rewards"], GAMMA)
        for rate, (model, actor_optimizer, critic_optimizer) in enumerate(runs):
            members = slice(rate * model.num_members, (rate + 1) * model.num_members)
            part = {key: values[:, members] for key, values in episodes.items()}
            actor_loss, critic_loss = reinforce_losses(model, part, returns[:, members], weight_names)
            actor_optimizer.zero_grad()
            critic_optimizer.zero_grad()
            # the members' parameters are disjoint, so the gradient of the sum is each member's own
            (actor_loss.sum() + critic_loss.sum()).backward()
            actor_optimizer.step()
            critic_optimizer.step()
    return curves, models


curves, trained_models = train_all()

# %% [markdown]
"""
## Learning curves and the return at each learning rate

A run's score is the mean return of all its updates' episodes: the area under its
learning curve, which counts how fast it learns as well as where it ends (Sutton &
Barto's figure 13.2 compares the two methods this way). We also report the final
return, the mean of the last fifth of the updates. Over the ten seeds each
(learning rate, weight) gets the IQM, the interquartile mean: the mean of the middle
half of the runs, once the lowest and the highest quarter are dropped (one lucky or
failed seed moves it less than the mean). Its 95% interval comes from the bootstrap:
draw ten runs from the ten with replacement, compute the IQM of that resample, repeat
2,000 times, and keep the range from the 2.5th to the 97.5th percentile of those IQMs.
[Lecture 7](07_diagnostics_and_tuning.ipynb) explains both in full.
"""

# %%
last = max(1, UPDATES // 5)
scores = {"area": curves.mean(0), "final": curves[-last:].mean(0)}  # each (rates, weights, seeds)


def setting(rate: int, weight: int) -> str:
    return f"lr {LEARNING_RATES[rate]:g}, w = {WEIGHT_NAMES[weight]}"


estimates = {kind: interval_estimates({setting(r, w): values[r, w].numpy() for r in range(len(LEARNING_RATES))
                                       for w in range(len(WEIGHT_NAMES))}, reps=BOOTSTRAP_REPS, seed=0)
             for kind, values in scores.items()}
print_table([{"actor lr": f"{LEARNING_RATES[r]:g}", "weight": WEIGHT_NAMES[w],
              **{f"{kind} IQM [95% CI]": "{iqm:.1f} [{iqm_low:.1f}, {iqm_high:.1f}]".format(**estimates[kind][setting(r, w)])
                 for kind in scores},
              "seeds with final ≥ 475": int((scores["final"][r, w] >= 475).sum())}
             for r in range(len(LEARNING_RATES)) for w in range(len(WEIGHT_NAMES))],
            title=f"REINFORCE on CartPole-v1, {UPDATES} updates of {EPISODES_PER_UPDATE} episodes, seeds "
                  f"{SEEDS[0]}–{SEEDS[-1]} (area: mean return over all updates; final: over the last {last})")
best_rate = {w: max(range(len(LEARNING_RATES)), key=lambda r: estimates["area"][setting(r, w)]["iqm"])
             for w in range(len(WEIGHT_NAMES))}
paired = scores["area"][:, 1] - scores["area"][:, 0]  # (rates, seeds): with baseline − without, seed by seed
print_table([{"seed": seed, **{f"lr {rate:g}": float(paired[r, i]) for r, rate in enumerate(LEARNING_RATES)}}
             for i, seed in enumerate(SEEDS)],
            title="Area with the learned baseline minus area without a baseline, seed by seed (same initial network)")

# %%
figure, axes = plt.subplots(1, 2, figsize=(11, 4.4))
shown_rate = best_rate[0]  # the curves at the rate that is best for REINFORCE without a baseline
for w, name in enumerate(WEIGHT_NAMES):
    runs = curves[:, shown_rate, w, :]  # (updates, seeds)
    low, high = runs.quantile(0.25, dim=1), runs.quantile(0.75, dim=1)
    axes[0].fill_between(range(UPDATES), low, high, color=COLORS[name], alpha=0.2)
    axes[0].plot(runs.median(dim=1).values, color=COLORS[name], lw=2, label=f"w = {name}")
axes[0].set_xlabel(f"update (each on {EPISODES_PER_UPDATE} fresh episodes)")
axes[0].set_ylabel("mean return of the update's episodes (steps)")
axes[0].set_ylim(0, 520)
axes[0].set_title(f"Learning curves at actor lr {LEARNING_RATES[shown_rate]:g}")
axes[0].legend(fontsize=8, loc="upper left", title=f"median, band: middle half\nof {len(SEEDS)} seeds",
               title_fontsize=8)
for w, name in enumerate(WEIGHT_NAMES):
    rows = [estimates["area"][setting(r, w)] for r in range(len(LEARNING_RATES))]
    axes[1].fill_between(LEARNING_RATES, [row["iqm_low"] for row in rows], [row["iqm_high"] for row in rows],
                         color=COLORS[name], alpha=0.2)
    axes[1].plot(LEARNING_RATES, [row["iqm"] for row in rows], "o-", color=COLORS[name], lw=2, label=f"w = {name}")
axes[1].set_xscale("log")
axes[1].set_xticks(LEARNING_RATES, [f"{rate:g}" for rate in LEARNING_RATES])
axes[1].minorticks_off()
axes[1].set_xlabel("actor's learning rate (Adam step size, log scale)")
axes[1].set_ylabel("mean return over all updates (steps)")
axes[1].set_ylim(0, 520)
axes[1].set_title(f"Return against learning rate ({len(SEEDS)} seeds)")
axes[1].legend(fontsize=8, loc="upper left", title="IQM, band: 95% CI", title_fontsize=8)
lecture.save_figure(figure, "baseline_learning.png")

# %% tags=["claims"]
rate_index = {rate: r for r, rate in enumerate(LEARNING_RATES)}


def interval_text(kind: str, rate: int, weight: int) -> str:
    return "{iqm:.1f} [{iqm_low:.1f}, {iqm_high:.1f}]".format(**estimates[kind][setting(rate, weight)])


def interval_above_constant(rate: int) -> bool:
    """The learned baseline's area interval lies wholly above the constant baseline's."""
    return estimates["area"][setting(rate, 1)]["iqm_low"] > estimates["area"][setting(rate, 2)]["iqm_high"]


def interval_above(kind: str, rate_high: int, rate_low: int) -> bool:
    """The baseline's interval (at rate_high) lies wholly above the no-baseline one's (at rate_low)."""
    return estimates[kind][setting(rate_high, 1)]["iqm_low"] > estimates[kind][setting(rate_low, 0)]["iqm_high"]


def intervals_overlap(first: str, second: str, kind: str = "area") -> bool:
    """The two settings' intervals share some values: neither lies wholly above the other."""
    one, other = estimates[kind][first], estimates[kind][second]
    return not (one["iqm_low"] > other["iqm_high"] or other["iqm_low"] > one["iqm_high"])


def interval_width(rate: int, weight: int) -> float:
    return estimates["area"][setting(rate, weight)]["iqm_high"] - estimates["area"][setting(rate, weight)]["iqm_low"]


def share_of_gain(rate: int) -> float:
    """How much of the learned baseline's gain in IQM over no baseline the constant baseline gets."""
    iqm = [estimates["area"][setting(rate, w)]["iqm"] for w in range(len(WEIGHT_NAMES))]
    return (iqm[2] - iqm[0]) / (iqm[1] - iqm[0])


constant_best_unclear = (0.003 in rate_index and 0.01 in rate_index
                         and intervals_overlap(setting(rate_index[0.003], 2), setting(rate_index[0.01], 2)))
lecture.claim("without a baseline and with the learned one, REINFORCE does best at lr 0.003 of the three rates; the "
              "constant baseline's intervals at lr 0.003 and 0.01 overlap, so ten seeds do not tell which is its best",
              0.003 in rate_index and best_rate[0] == best_rate[1] == rate_index[0.003] and constant_best_unclear,
              measured="best: " + ", ".join(f"{LEARNING_RATES[best_rate[w]]:g} ({name})"
                                            for w, name in enumerate(WEIGHT_NAMES))
                       + ("; R − mean R: " + ", ".join(f"lr {LEARNING_RATES[r]:g} {interval_text('area', r, 2)}"
                                                      for r in range(len(LEARNING_RATES)))),
              quick=False)
lecture.claim("each method at its own best learning rate, the baseline's interval lies above the interval without",
              interval_above("area", best_rate[1], best_rate[0]),
              measured=f"{interval_text('area', best_rate[1], 1)} (R − V) against "
                       f"{interval_text('area', best_rate[0], 0)} (R)", quick=False)
for rate in (0.001, 0.003):
    r = rate_index.get(rate)
    lecture.claim(f"at lr {rate:g} the baseline's interval lies above the interval without, and the baseline's "
                  "run scores higher on at least nine of the ten seeds",
                  r is not None and interval_above("area", r, r) and int((paired[r] > 0).sum()) >= 9,
                  measured="not run" if r is None else
                  f"{interval_text('area', r, 1)} against {interval_text('area', r, 0)}; "
                  f"higher on {int((paired[r] > 0).sum())} of {len(SEEDS)}", quick=False)
median_curves = curves[:, rate_index[0.003]].median(dim=-1).values if 0.003 in rate_index else None  # (updates, weights)
reaches = [int((median_curves[:, w] >= 475).nonzero()[0]) if median_curves is not None and
           bool((median_curves[:, w] >= 475).any()) else None for w in range(len(WEIGHT_NAMES))]
lecture.claim("at lr 0.003 the blue median (R − V) reaches 475 and the red one (R) never does in the 100 updates",
              UPDATES == 100 and reaches[1] is not None and reaches[0] is None,
              measured=f"first update with median ≥ 475: {reaches[1]} (R − V), {reaches[0]} (R)", quick=False)
r = rate_index.get(0.003)
solved = {w: int((scores["final"][r, w] >= 475).sum()) for w in range(len(WEIGHT_NAMES))} if r is not None else {}
lecture.claim("at lr 0.003 the final returns' intervals do not overlap either, and more seeds end with a final "
              "return of at least 475 with the baseline than without",
              r is not None and interval_above("final", r, r) and solved[1] > solved[0],
              measured="not run" if r is None else f"{interval_text('final', r, 1)} against "
                                                   f"{interval_text('final', r, 0)}; {solved[1]} seeds against {solved[0]}",
              quick=False)
r = rate_index.get(0.01)
wider = r is not None and all(interval_width(r, w) > interval_width(smaller, w) for w in (0, 1)
                              for smaller in range(len(LEARNING_RATES)) if LEARNING_RATES[smaller] < 0.01)
lecture.claim("at lr 0.01 the learned baseline's gain is no longer clear-cut: the intervals with and without it are "
              "both wider than at either smaller rate, and the baseline scores higher on some seeds and lower on others",
              wider and 0 < int((paired[r] > 0).sum()) < len(SEEDS),
              measured="not run" if r is None else
              f"{interval_text('area', r, 1)} against {interval_text('area', r, 0)}; widths "
              + "; ".join(f"{name}: " + ", ".join(f"{interval_width(rate, w):.1f}" for rate in range(len(LEARNING_RATES)))
                          for w, name in enumerate(WEIGHT_NAMES[:2]))
              + f" (lr {', '.join(f'{rate:g}' for rate in LEARNING_RATES)}); higher on "
                f"{int((paired[r] > 0).sum())} of {len(SEEDS)}", quick=False)

small_rates = [rate_index[rate] for rate in (0.001, 0.003) if rate in rate_index]
r = rate_index.get(0.001)
constant_over_none = (r is not None and
                      estimates["area"][setting(r, 2)]["iqm_low"] > estimates["area"][setting(r, 0)]["iqm_high"])
lecture.claim("at lr 0.001 the constant baseline's interval lies above the interval without a baseline, and at lr "
              "0.001 and 0.003 its IQM gets more than half of the learned baseline's gain over no baseline",
              constant_over_none and len(small_rates) == 2 and all(share_of_gain(rate) > 0.5 for rate in small_rates),
              measured="not run" if r is None else
              f"lr 0.001: {interval_text('area', r, 2)} against {interval_text('area', r, 0)}; share of the gain "
              + ", ".join(f"{share_of_gain(rate):.2f} (lr {LEARNING_RATES[rate]:g})" for rate in small_rates),
              quick=False)
r = rate_index.get(0.003)
learned_over_constant = r is not None and interval_above_constant(r)
lecture.claim("at lr 0.003 the learned baseline's interval and the constant one's overlap",
              r is not None and not learned_over_constant and not (
                  estimates["area"][setting(r, 2)]["iqm_low"] > estimates["area"][setting(r, 1)]["iqm_high"]),
              measured="not run" if r is None else
              f"{interval_text('area', r, 1)} (R − V) against {interval_text('area', r, 2)} (R − mean R)", quick=False)

# %% [markdown]
r"""
## Variance of the gradient estimate, with and without the baseline

Fix the network and collect many rollouts. Each rollout gives one estimate ĝ of the
policy gradient (the gradient of the actor's loss with respect to the actor's
parameters). Over the rollouts we measure $\operatorname{tr} \operatorname{Cov}[\hat g]$, the summed variance of all its
components, for three weights on the *same* rollouts:

* $w = R$: no baseline;
* $w = R - \operatorname{mean}(R)$: a constant baseline, the batch's mean return;
* $w = R - V(s)$: the learned, state-dependent baseline.

A rollout here is T = 64 steps from each of N = 16 CartPole copies, collected by the
library's PPO trainer (`PPO.collect_rollout`; [lecture 6](06_ppo_cartpole.ipynb) introduces the trainer, here it
only plays and scores the rollouts); with λ = 1, `compute_advantages` returns R_t, the discounted return to the end of the
episode, bootstrapped with V where the rollout cuts an episode short ([lecture 3](03_gae.ipynb)). We
measure twice: for an untrained network, whose critic knows nothing, and for a network
trained above with the baseline (the first seed, at the baseline's best learning rate).
"""


# %%
MEASURE_CONFIG = PPOConfig(env_id="CartPole-v1", env_backend="torch", num_envs=16, num_steps=64, gamma=GAMMA,
                           gae_lambda=1.0, shared_network=False, tensorboard=False)
WEIGHTS = ("R", "R − mean R", "R − V")


def rollout_weights(trainer: PPO):
    """Collect one rollout; return flat (obs, actions, returns R_t, stored values V(s_t))."""
    trainer.collect_rollout()
    _, returns = trainer.compute_advantages()  # (T, N) R_t
    returns = returns.clone()  # made under inference mode; a plain copy can enter autograd
    buffer = trainer.buffer
    flat = lambda x: x.reshape(-1, *x.shape[2:])  # noqa: E731  (T, N, ...) → (T·N, ...)
    return flat(buffer.obs), flat(buffer.actions), flat(returns), flat(buffer.values)


def gradient_variance(model_state: dict, label: str) -> dict:
    probe = PPO(MEASURE_CONFIG.replace(seed=1000), training_envs(MEASURE_CONFIG.replace(seed=1000)), progress=False)
    probe.model.load_state_dict(model_state)
    actor_parameters = list(probe.model.actor_body.parameters()) + list(probe.model.policy_head.parameters())
    estimates = {name: [] for name in WEIGHTS}
    predictions, targets = [], []
    for _ in range(VARIANCE_BATCHES):
        obs, actions, returns, values = rollout_weights(probe)
        log_probs = probe.model.evaluate_actions(obs, actions)[0]
        for name, weights in zip(WEIGHTS, (returns, returns - returns.mean(), returns - values)):
            gradient = torch.autograd.grad((log_probs * weights).mean(), actor_parameters, retain_graph=True)
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


torch.manual_seed(SEEDS[0] + 100)
untrained_network = ActorCritic(OBSERVATION_SPACE, ACTION_SPACE, hidden_sizes=(64, 64), shared=False)
trained_member = WEIGHT_NAMES.index("R − V") * len(SEEDS)  # the first seed's run with the baseline
rows = [
    gradient_variance(untrained_network.state_dict(), "untrained"),
    gradient_variance(trained_models[best_rate[1]].members[trained_member].state_dict(),
                      f"trained, seed {SEEDS[0]}"),
]
print_table(rows, title=f"Policy-gradient variance over {VARIANCE_BATCHES} rollouts of "
            f"{MEASURE_CONFIG.num_envs} × {MEASURE_CONFIG.num_steps} steps")
print(f"\nvariance ratio (no baseline / learned baseline) at the trained network: {rows[1]['ratio R / (R − V)']:.1f}")

# %%
figure, axis = plt.subplots(figsize=(5.5, 4.4))
names = [row["network"] for row in rows]
positions = torch.arange(len(rows), dtype=torch.float32)
for offset, name in zip((-0.27, 0.0, 0.27), WEIGHTS):
    axis.bar(positions + offset, [row[f"tr Cov, w = {name}"] for row in rows], 0.27, color=COLORS[name],
                label=f"w = {name}")
axis.set_xticks(positions.tolist(), names)
axis.set_yscale("log")
axis.set_ylabel("tr Cov[ĝ] over rollouts (log scale)")
axis.set_title("Variance of the policy-gradient estimate")
axis.legend(fontsize=8, loc="upper left")
lecture.save_figure(figure, "baseline_variance.png")

# %% tags=["claims"]
untrained_row, trained_row = rows
lecture.claim("at the untrained network, R − V is no less noisy than R (ratio R / (R − V) between 0.9 and 1.1)",
              0.9 < untrained_row["ratio R / (R − V)"] < 1.1, measured=f"ratio {untrained_row['ratio R / (R − V)']:.2f}")
for row in rows:
    lecture.claim(f"at the {row['network']} network, a constant baseline lowers the variance",
                  row["tr Cov, w = R − mean R"] < row["tr Cov, w = R"],
                  measured=f"{row['tr Cov, w = R − mean R']:.3g} against {row['tr Cov, w = R']:.3g}")
lecture.claim("at the trained network the learned baseline divides the variance by more than 10",
              trained_row["ratio R / (R − V)"] > 10, measured=f"ratio {trained_row['ratio R / (R − V)']:.1f}",
              quick=False)
lecture.claim("but the batch's mean return, a constant, lowers it further (ratio (R − mean) / (R − V) below 1)",
              trained_row["ratio (R − mean) / (R − V)"] < 1,
              measured=f"ratio {trained_row['ratio (R − mean) / (R − V)']:.2f}", quick=False)
lecture.claim("and the trained critic's explained variance is between −0.1 and 0.1",
              -0.1 < trained_row["explained var. of V"] < 0.1,
              measured=f"{trained_row['explained var. of V']:.4f}", quick=False)

# %% [markdown]
r"""
## What to take away

**What the baseline buys in return.** Without a baseline and with the learned one,
REINFORCE does best at lr 0.003 of the three rates (the peaks of the red and blue lines
in the right panel of the first figure). The constant baseline's IQM is 294.0 at lr
0.003 and 252.7 at lr 0.01 in this run, but its intervals at the two rates overlap
widely, so ten seeds do not tell which is its best (which of the two comes out higher
changes with the last bits of a run's rounding). Each method at its own
best learning rate, the learned baseline's interval lies above the interval without a
baseline: an IQM of 317.7 [303.7, 331.7] against 210.3 [181.3, 244.4]. With the
baseline the runs learn faster. The left panel shows it at lr 0.003: the blue median
(R − V) first reaches 475 at update 53, and the red one (R) never does in the 100
updates. The comparison holds seed by seed too: at lr 0.001 and at lr 0.003 the learned
baseline's interval lies above the interval without, and its run scores higher on all
ten seeds (the table of differences; a seed's runs start from the same network). At lr 0.003 the final returns' intervals do not
overlap either (465.9 [435.1, 487.0] against 330.1 [221.6, 416.8]), and 5 seeds end with
a final return of at least 475 with the baseline against 1 without (the last column of
the first table).

**A constant does most of it.** At lr 0.001 the constant baseline's interval,
164.4 [153.2, 172.5], lies above the interval without a baseline, and at lr 0.001 and
0.003 its IQM gets more than half of the learned baseline's gain over no baseline (0.88
and 0.78 of it in this run). At lr 0.003 its interval, 294.0 [254.8, 325.8], is wide: it
overlaps the learned baseline's (the grey and blue points of the right panel), and in
this run it lies above the interval without a baseline too, but only just (its lower
end, 254.8, against that interval's upper end, 244.4). On this budget
ten seeds cannot tell the learned baseline from the batch's mean return. The variance
measurement, two paragraphs down, says why.

**Where the step size takes over.** At lr 0.01 the learned baseline's gain is no longer
clear-cut: the intervals with and without it are both wider than at either smaller
rate, and the baseline scores higher on some seeds and lower on others (the wide bands
at the right end of the right panel). In this run its IQM is still much higher (230.7
[171.6, 279.1] against 126.4 [93.4, 210.2], two intervals that overlap from 171.6 to
210.2) and it scores higher on 7 seeds and lower on 3 (seeds 7, 8 and 13, by 0.5, 28 and
54); at this rate every run is
erratic, and where the two land moves with the last bits of a run's rounding. There
the trouble is the step's size, which a better estimate of the gradient does not cure.
So a comparison at
one learning rate can show anything from a clear gain (0.001, 0.003) to an uncertain one
(0.01); the fair comparison puts each method at its own best rate. The grid and the
critic's learning rate were chosen on seeds 1–5; every number above is from seeds 6–15.

**The variance, measured directly.** The untrained row shows that a learned baseline
is only as useful as the critic behind it: at the untrained network, R − V is no less
noisy than R (ratio R / (R − V) 1.02). At the
untrained network and at the trained one, a constant baseline lowers the variance: on
CartPole every return is a large positive number, so every action's log-probability
gets pushed up and only the differences carry information; subtracting the level
removes that push. At the trained network the learned baseline divides the variance by
16 in this run (the blue bar against the red one in the second figure, log scale); the ratio R / (R − V) is how many times more rollouts the
estimator without a baseline would need for the same precision. But the batch's mean
return, a constant, lowers it further (ratio (R − mean) / (R − V) 0.92: the grey bar is
the lowest, if only by about a twelfth), and the trained critic's explained variance is −0.00002: V predicts the returns of these rollouts no better than their
mean does. What the learned baseline buys here is mostly the level of the returns; its
state-dependent part adds V's own scatter (if V is uncorrelated with R,
$\operatorname{Var}[R - V] = \operatorname{Var}[R] + \operatorname{Var}[V] > \operatorname{Var}[R - \operatorname{mean} R]$). A likely reason: a policy that balances
earns a return that depends on how many steps are left before the time limit or the
rollout's end, which the state does not show. The batch mean is not free either: it
depends on the batch's own returns, so it is not exactly unbiased, and it needs a batch
of many episodes, where V(s) works one step at a time — what [lecture 3](03_gae.ipynb)'s advantages
need.

**Explained variance.** It compares V(s_t) with each R_t, one sample at a time; the
gradient's variance is what the update feels, each weight multiplied by its score
$\nabla \log \pi$ and summed along the rollout. Read explained variance as a check that the critic
is learning, not as a measure of what the baseline buys.

Advantage normalisation ([lecture 8](08_implementation_details.ipynb)) subtracts the batch mean of the advantages: a
constant baseline on top of the learned one — the combination the variance
measurement suggests.

Next, [lecture 3](03_gae.ipynb) asks how to form the advantage from the critic: the full return minus V
(λ = 1, used here) or V's own predictions a few steps ahead (λ < 1).
"""

# %%
lecture.finish()
