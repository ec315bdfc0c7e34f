# %% [markdown]
r"""
# Lecture 1 — Policy gradients: REINFORCE on CartPole

**What it teaches.** A policy $\pi_\theta(a \mid s)$ is a network that outputs a probability for
each action. Take as objective the expected <a href="../glossary.html#term-Return">discounted return</a> $J(\theta) = \mathbb E[G_0]$,
$G_t = \sum_{k \ge t} \gamma^{k-t} r_k$. The return depends on θ only through the actions sampled,
so we cannot backpropagate through the environment; the log-derivative trick
$\nabla_\theta \mathbb E[f] = \mathbb E[f \cdot \nabla_\theta \log p_\theta]$ gives a gradient we can estimate from played episodes alone
(Sutton & Barto, §13.3):

$$
\begin{aligned}
\nabla_\theta J(\theta) &= \mathbb E\Big[\sum_t \nabla_\theta \log \pi_\theta(a_t \mid s_t) \cdot G_0\Big] \\
&= \mathbb E\Big[\sum_t \nabla_\theta \log \pi_\theta(a_t \mid s_t) \cdot \gamma^t G_t\Big]
\end{aligned}
$$

The second line drops, from each step's weight, the rewards received *before* t: an
action cannot change them, and their term has expectation zero ($\mathbb E_a[\nabla \log \pi(a \mid s)] = 0$,
[lecture 2](02_baseline_actor_critic.ipynb)). What remains of $G_0$ after step t is $\gamma^t G_t$, the return that followed the
action discounted back to the start. Each action's log-probability is pushed up in
proportion to that return. This estimator is <a href="../glossary.html#term-REINFORCE">REINFORCE</a>.

**The estimator everyone codes drops $\gamma^t$.** Nota & Thomas (2020) found it in every
implementation of the <a href="../glossary.html#term-Policy-gradient">policy-gradient</a> algorithms they reviewed (those of the
stable-baselines library, PPO among them), and this library's PPO is no exception
(lectures [3](03_gae.ipynb), [5](05_clipped_surrogate.ipynb) and [6](06_ppo_cartpole.ipynb): its advantages carry no $\gamma^t$):

$$
\hat g = \sum_t \nabla_\theta \log \pi_\theta(a_t \mid s_t) \cdot G_t,
$$

which counts a late action as much as an early one. For γ < 1 its expectation is *not*
$\nabla J$: J discounts step t by $\gamma^t$, $\hat g$ does not. It is not the gradient of the undiscounted
return either (that would use the undiscounted return-to-go), and Nota & Thomas (2020)
prove that in general it is not the gradient of any function of θ. It is used because
the score we care about is often the undiscounted return (on CartPole, the episode's
length), and there γ < 1 serves to cut how far an action's credit reaches, lowering the variance
at the cost of a bias (Schulman et al. 2016, §2, treat γ this way). Below, the noise
study measures all three weights — $G_0$, $\gamma^t G_t$ and $G_t$ — and checks that the first two
have the same expectation; REINFORCE is trained with $G_t$, as PPO is.

**Why it matters.** Every method in this course, PPO included, is this estimator with
its noise reduced and its step size controlled. This lecture measures the noise: how
far the gradient from one batch of episodes is from its expectation, how that shrinks
with the batch size, and how it grows as the policy improves and episodes get longer.
Then it trains REINFORCE over several seeds with nothing to limit how far one update
moves the policy: every seed learns to balance the pole, and then loses it again, for a
few updates or for good (in the run shown, all five fall below half of their best, and
all five end between about a quarter and a third of it).

**Prerequisites.** Python, PyTorch autograd, what an MDP and a return are.

**Library.** The network pieces come from `ppo/models/networks.py` (`mlp`, `CategoricalHead`),
the batched CartPole from `envs/classic/cartpole.py`. REINFORCE itself is written here
in full, because it is the starting point that the library improves on.
"""

# %%
import copy

import torch
from torch import nn

from _common import Lecture, mean_and_spread, plt, print_table
from envs.classic import make_torch_vec_env
from ppo.models.networks import CategoricalHead, mlp

lecture = Lecture("01_policy_gradients", __doc__)
GAMMA = 0.99
SEEDS = lecture.choose(full=[1, 2, 3, 4, 5], quick=[1, 2])
ITERATIONS = lecture.choose(full=50, quick=5)  # policy updates per seed
EPISODES_PER_UPDATE = 16
VARIANCE_EPISODES = lecture.choose(full=400, quick=64)  # episodes for the variance study
LEARNING_RATE = 0.01

# %% [markdown]
"""
## The policy and a batch of episodes

The policy is a small MLP whose last layer gives two logits (push left, push right);
`CategoricalHead` turns them into a categorical distribution with `sample`,
`log_prob` and `entropy`. We play many
episodes at once in the batched torch CartPole, one copy per episode, and keep a mask
of which copies are still inside their first episode: REINFORCE needs whole episodes,
because $G_t$ sums rewards to the end.
"""


# %%
class Policy(nn.Module):
    """π_θ(a | s): an MLP body and a categorical head."""

    def __init__(self, hidden_sizes=(64, 64)):
        super().__init__()
        self.body = mlp(4, hidden_sizes, "tanh", ortho_init=True)
        self.head = CategoricalHead(hidden_sizes[-1], 2, ortho_init=True)

    def forward(self, obs: torch.Tensor):
        return self.head(self.body(obs))


def play_episodes(policy: Policy, num_episodes: int, seed: int) -> dict[str, torch.Tensor]:
    """One full episode in each of `num_episodes` CartPole copies. Tensors are (T, N, ...)
    with T the longest episode; `alive` marks the steps that belong to an episode."""
    envs = make_torch_vec_env("CartPole-v1", num_episodes, seed=seed)
    obs = envs.reset(seed=seed)
    alive = torch.ones(num_episodes, dtype=torch.bool)
    steps = {"obs": [], "actions": [], "rewards": [], "alive": []}
    while alive.any():
        with torch.no_grad():
            actions = policy(obs).sample()
        result = envs.step(actions)
        steps["obs"].append(obs)
        steps["actions"].append(actions)
        steps["rewards"].append(result.reward * alive)
        steps["alive"].append(alive)
        alive = alive & ~(result.terminated | result.truncated)
        obs = result.obs
    return {name: torch.stack(values) for name, values in steps.items()}


def rewards_to_go(rewards: torch.Tensor, gamma: float) -> torch.Tensor:
    """G_t = r_t + γ G_{t+1}, computed backwards over the time axis of (T, N) rewards."""
    returns = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[0])  # (N,)
    for t in reversed(range(rewards.shape[0])):
        running = rewards[t] + gamma * running
        returns[t] = running
    return returns


def discounted_back_to_start(returns: torch.Tensor, gamma: float) -> torch.Tensor:
    """γ^t G_t for (T, N) returns: the part of G_0 that the action at step t can change."""
    discounts = gamma ** torch.arange(returns.shape[0], dtype=returns.dtype)  # (T,)
    return discounts.unsqueeze(1) * returns


def reinforce_loss(policy: Policy, episodes: dict, weights: torch.Tensor) -> torch.Tensor:
    """−(1/N) Σ_episodes Σ_t log π(a_t | s_t) · weight_t; its gradient is −ĝ."""
    log_probs = policy(episodes["obs"]).log_prob(episodes["actions"])  # (T, N)
    per_step = log_probs * weights * episodes["alive"]
    return -per_step.sum(dim=0).mean()


# %% [markdown]
r"""
## How noisy is one episode's gradient?

Fix the policy and play many episodes. Each episode i gives its own estimate $g_i$, the
gradient of $\sum_t \log \pi(a_t \mid s_t) \cdot \mathrm{weight}_t$ over its steps; the estimator's expectation
is $\mathbb E[g]$. A batch of B episodes averages B of them, so its variance is $\operatorname{tr} \operatorname{Cov}[g] / B$. We
compare three weights: the whole-episode return $G_0$ on every step, $\gamma^t G_t$ (the same
expectation, $\nabla J$, without the rewards before t) and $G_t$ (the common estimator). The
*relative noise* of a B-episode batch is

$$
\frac{\sqrt{\operatorname{tr} \operatorname{Cov}[g] / B}}{\lVert \mathbb E[g] \rVert}
$$

— above 1, the noise in one batch's gradient is larger than the gradient itself. (We
estimate $\lVert \mathbb E[g] \rVert^2$ by the squared norm of the mean over all episodes minus $\operatorname{tr} \operatorname{Cov}[g] / N$,
the amount by which that norm overshoots on average.)

Do $G_0$ and $\gamma^t G_t$ really have the same expectation? For each episode take the
difference $d_i$ of its two estimates. If $\mathbb E[d] = 0$, the squared norm of the mean of N
differences is $\operatorname{tr} \operatorname{Cov}[d] / N$ on average, so their ratio is near 1; a real difference in
expectation makes it grow with N. The same test between $\gamma^t G_t$ and $G_t$ measures the
effect of dropping $\gamma^t$.
"""


# %%
def per_episode_gradients(policy: Policy, episodes: dict, weights: torch.Tensor) -> torch.Tensor:
    """(N, num_parameters): the REINFORCE gradient estimate of each episode on its own."""
    parameters = list(policy.parameters())
    gradients = []
    for i in range(episodes["actions"].shape[1]):
        length = int(episodes["alive"][:, i].sum())
        one = {name: values[:length, i : i + 1] for name, values in episodes.items()}
        loss = reinforce_loss(policy, one, weights[:length, i : i + 1])
        gradients.append(torch.cat([g.flatten() for g in torch.autograd.grad(-loss, parameters)]))
    return torch.stack(gradients)


def same_expectation_ratio(first: torch.Tensor, second: torch.Tensor) -> float:
    """|mean of d|² / (tr Cov[d] / N) for the per-episode differences d = first − second, (N, P):
    about 1 when the two estimators have the same expectation, growing with N when not."""
    differences = first - second
    return float(differences.mean(0).norm() ** 2 / (differences.var(dim=0).sum() / len(differences)))


def noise_study(policy: Policy, label: str, seed: int) -> list[dict]:
    episodes = play_episodes(policy, VARIANCE_EPISODES, seed)
    returns = rewards_to_go(episodes["rewards"], GAMMA)
    rows = []
    weight_choices = (("G_0", returns[:1].expand_as(returns)),
                      ("γ^t G_t", discounted_back_to_start(returns, GAMMA)),
                      ("G_t", returns))
    for weight_name, weights in weight_choices:
        gradients = per_episode_gradients(policy, episodes, weights)  # (N, P)
        total_variance = gradients.var(dim=0).sum()  # tr Cov[g]
        # ‖mean of N estimates‖² overshoots ‖E[g]‖² by tr Cov / N on average; remove that
        signal_squared = gradients.mean(dim=0).norm() ** 2 - total_variance / len(gradients)
        # N episodes resolve ‖E[g]‖ only down to about sqrt(tr Cov / N): below that, the
        # signal is lost in the noise and the table gives bounds (<, >) instead of values.
        resolution = (total_variance / len(gradients)).sqrt()
        resolved = bool(signal_squared > resolution**2)
        signal = signal_squared.sqrt() if resolved else resolution
        bound = "" if resolved else ">"
        rows.append({
            "policy": label,
            "weight": weight_name,
            "mean episode length": float(episodes["alive"].sum(0).float().mean()),
            "|E[g]|": f"{float(signal):.3g}" if resolved else f"< {float(signal):.3g}",
            "tr Cov[g]": float(total_variance),
            "noise B=1": f"{bound}{float(total_variance.sqrt() / signal):.3g}",
            "noise B=16": f"{bound}{float((total_variance / 16).sqrt() / signal):.3g}",
            # B at which the batch's noise equals the signal: tr Cov / ‖E[g]‖²
            "B for noise=1": f"{bound}{float(total_variance / signal**2):.3g}",
            "_signal": float(signal),
            "_resolved": resolved,
            "_gradients": gradients,
        })
    return rows


def expectation_tests(rows: list[dict]) -> dict[str, float]:
    gradients = {row["weight"]: row["_gradients"] for row in rows}
    return {"G_0 vs γ^t G_t": same_expectation_ratio(gradients["G_0"], gradients["γ^t G_t"]),
            "γ^t G_t vs G_t": same_expectation_ratio(gradients["γ^t G_t"], gradients["G_t"])}


torch.manual_seed(0)
untrained_policy = Policy()
initial_rows = noise_study(untrained_policy, "untrained", seed=100)

# %% [markdown]
"""
## Training REINFORCE over several seeds

Each update plays a fresh batch of episodes with the current policy, weights each
log-probability by its reward-to-go $G_t$ (the common estimator), and takes one Adam
step. Nothing else: no <a href="../glossary.html#term-Baseline">baseline</a>, no normalisation, no clipping. We keep a copy of each
seed's best policy (the one whose batch of episodes scored highest) next to its last.
"""


# %%
def train_reinforce(seed: int) -> tuple[Policy, Policy, list[float]]:
    """Returns the last policy, the best one, and the mean undiscounted return of each update's episodes."""
    torch.manual_seed(seed)
    policy = Policy()
    optimizer = torch.optim.Adam(policy.parameters(), lr=LEARNING_RATE)
    mean_returns, best_policy = [], copy.deepcopy(policy)
    for iteration in range(ITERATIONS):
        episodes = play_episodes(policy, EPISODES_PER_UPDATE, seed=seed * 10_000 + iteration)
        mean_returns.append(float(episodes["rewards"].sum(0).mean()))  # undiscounted episode return
        if mean_returns[-1] >= max(mean_returns):  # the policy that played these episodes, before its update
            best_policy = copy.deepcopy(policy)
        returns = rewards_to_go(episodes["rewards"], GAMMA)
        loss = reinforce_loss(policy, episodes, returns)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return policy, best_policy, mean_returns


curves, last_policies, best_policies = {}, {}, {}
for seed in SEEDS:
    last_policies[seed], best_policies[seed], curves[seed] = train_reinforce(seed)
    print(f"seed {seed}: best update's episodes {max(curves[seed]):.1f} (update {curves[seed].index(max(curves[seed]))}), "
          f"last update's {curves[seed][-1]:.1f}")

# %% [markdown]
r"""
## The noise again, at a trained policy

Longer episodes mean more terms in $\sum_t$ and larger returns multiplying them, so the
variance of the estimate should grow as the policy gets better. We repeat the study at
the first seed's *best* policy (its last one, in this run, has collapsed: see below).
"""

# %%
best_return = max(curves[SEEDS[0]])
trained_rows = noise_study(best_policies[SEEDS[0]], f"best of seed {SEEDS[0]}", seed=200)
all_rows = initial_rows + trained_rows
print_table([{k: v for k, v in row.items() if not k.startswith("_")} for row in all_rows],
            title="REINFORCE gradient estimates, one episode each (noise = sqrt(tr Cov / B) / |E[g]|)")
for row in all_rows:
    if not row["_resolved"]:
        print(f"{row['policy']}, {row['weight']}: with {len(row['_gradients'])} episodes the mean gradient is lost in "
              f"the noise; |E[g]| is below what they resolve, so the noise columns are lower bounds")

expectations = {"untrained": expectation_tests(initial_rows), "trained": expectation_tests(trained_rows)}
print_table([{"policy": row["policy"], **{f"|mean d|² / (tr Cov[d]/N), {pair}": value for pair, value in tests.items()}}
             for row, tests in ((initial_rows[0], expectations["untrained"]), (trained_rows[0], expectations["trained"]))],
            title="Same expectation? (about 1 if yes; grows with the number of episodes if not)")

untrained_label, trained_label = initial_rows[0]["policy"], trained_rows[0]["policy"]

# %%
# Empirical check of the 1/B law: split the N episodes into disjoint batches of B and
# measure how far each batch mean lies from the mean over all N. That distance has
# variance tr Cov · (1/B − 1/N), so we divide by (1 − B/N) to compare with tr Cov / B.
figure, axis = plt.subplots(figsize=(7.5, 5.5))
slopes = {}
styles = {"G_0": "o", "γ^t G_t": "^", "G_t": "s"}
for row in all_rows:
    gradients = row["_gradients"]
    mean_gradient = gradients.mean(0)
    batch_sizes = [b for b in (1, 2, 4, 8, 16, 32, 64) if gradients.shape[0] // b >= 4]
    measured = []
    for b in batch_sizes:
        batches = gradients[: (gradients.shape[0] // b) * b].reshape(-1, b, gradients.shape[1]).mean(1)
        spread = (batches - mean_gradient).norm(dim=1).pow(2).mean() / (1 - b / gradients.shape[0])
        measured.append(float(spread.sqrt()) / row["_signal"])
    # least-squares slope of log(noise) against log(B): −½ for noise ∝ 1/√B
    log_b, log_noise = torch.tensor(batch_sizes).log(), torch.tensor(measured).log()
    slopes[row["policy"], row["weight"]] = float(((log_b - log_b.mean()) * (log_noise - log_noise.mean())).sum()
                                                 / ((log_b - log_b.mean()) ** 2).sum())
    bound_note = "" if row["_resolved"] else " (a lower bound)"
    color = "tab:blue" if row["policy"] == untrained_label else "tab:red"
    linestyle = "-" if row["_resolved"] else ":"
    axis.loglog(batch_sizes, measured, linestyle, marker=styles[row["weight"]], color=color,
                label=f"{row['policy']}, weight {row['weight']}{bound_note}")
axis.axhline(1.0, color="grey", lw=0.8)
axis.set_xlabel("episodes per batch B")
axis.set_ylabel("relative noise  |ĝ_B − E[g]| / |E[g]|  (no unit)")
axis.set_title("REINFORCE: noise of a batch's gradient estimate")
axis.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
lecture.save_figure(figure, "gradient_noise_vs_batch_size.png")

# %% tags=["claims"]
trace = {(row["policy"], row["weight"]): float(row["tr Cov[g]"]) for row in all_rows}
for policy_label, tests in ((untrained_label, expectations["untrained"]), (trained_label, expectations["trained"])):
    lecture.claim(f"at the {policy_label} policy, G_0 and γ^t G_t weights have the same expectation "
                  f"(the ratio stays below 3)", tests["G_0 vs γ^t G_t"] < 3,
                  measured=f"ratio {tests['G_0 vs γ^t G_t']:.2f}")
    lecture.claim(f"at the {policy_label} policy, dropping the rewards before t (γ^t G_t instead of G_0) lowers "
                  f"the variance tr Cov[g]", trace[policy_label, "γ^t G_t"] < trace[policy_label, "G_0"],
                  measured=f"{trace[policy_label, 'γ^t G_t']:.3g} against {trace[policy_label, 'G_0']:.3g}")
lecture.claim("at the untrained policy, dropping γ^t changes the expectation: the ratio of G_t against γ^t G_t "
              "is above 3", expectations["untrained"]["γ^t G_t vs G_t"] > 3,
              measured=f"ratio {expectations['untrained']['γ^t G_t vs G_t']:.2f}", quick=False)
lecture.claim(f"at the trained policy {VARIANCE_EPISODES} episodes are too few to see it (ratio below 3), and "
              f"too few to resolve |E[g]| for the weights γ^t G_t and G_t", expectations["trained"]["γ^t G_t vs G_t"] < 3
              and not any(row["_resolved"] for row in trained_rows if row["weight"] != "G_0"),
              measured=f"ratio {expectations['trained']['γ^t G_t vs G_t']:.2f}, |E[g]| resolved for "
                       f"{[row['weight'] for row in trained_rows if row['_resolved']] or 'none'}", quick=False)
length_growth = trained_rows[0]["mean episode length"] / initial_rows[0]["mean episode length"]
variance_growth = trace[trained_label, "G_t"] / trace[untrained_label, "G_t"]
lecture.claim("the trained policy's episodes are longer, and its gradient's variance tr Cov[g] (weight G_t) "
              "is more than 100 times the untrained one's", length_growth > 1 and variance_growth > 100,
              measured=f"episodes {length_growth:.1f}× longer, tr Cov {variance_growth:.3g}× larger", quick=False)
lecture.claim("in the figure every line falls with a slope between −0.6 and −0.35 (−½ is noise ∝ 1/√B)",
              all(-0.6 < slope < -0.35 for slope in slopes.values()),
              measured="slopes " + ", ".join(f"{slope:.2f}" for slope in slopes.values()), quick=False)

# %% [markdown]
"""
## Learning, and forgetting

The curves below are the mean undiscounted return of each update's 16 episodes (the
number of steps the pole stayed up; CartPole-v1 stops at 500).
"""

# %%
curve_tensor = torch.tensor([curves[seed] for seed in SEEDS])  # (seeds, iterations)
best_returns = curve_tensor.max(1).values  # (seeds,)
best_updates = curve_tensor.argmax(1)
last = max(1, ITERATIONS // 10)
final_returns = curve_tensor[:, -last:].mean(1)
figure, axis = plt.subplots(figsize=(7.5, 5))
updates = torch.arange(ITERATIONS)
mean = curve_tensor.mean(0)
for index, seed in enumerate(SEEDS):
    axis.plot(updates, curve_tensor[index], color="tab:grey", alpha=0.6, lw=0.8,
              label="one seed" if index == 0 else None)
axis.fill_between(updates, curve_tensor.min(0).values, curve_tensor.max(0).values, color="tab:blue", alpha=0.15,
                  label="range over seeds")
axis.plot(updates, mean, color="tab:blue", lw=2, label=f"mean over {len(SEEDS)} seeds")
axis.plot(best_updates, best_returns, "^", color="tab:green", label="each seed's best update")
axis.plot(torch.full((len(SEEDS),), ITERATIONS - 1), curve_tensor[:, -1], "v", color="tab:red",
          label="each seed's last update")
axis.axhline(500, ls="--", color="black", lw=0.8, label="CartPole-v1's maximum, 500")
axis.set_xlabel(f"update (each on {EPISODES_PER_UPDATE} fresh episodes)")
axis.set_ylabel("mean episode return (steps balanced)")
axis.set_ylim(0, 530)
axis.set_title("REINFORCE on CartPole-v1 (weight G_t, no baseline, Adam lr 0.01)")
axis.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=3)
lecture.save_figure(figure, "reinforce_learning_curves.png")

# the first update after its best in which a seed's return is below half of that best (None: never)
below_half = curve_tensor < best_returns[:, None] / 2  # (seeds, iterations)
falls = [next((t for t in range(int(when) + 1, ITERATIONS) if below_half[index, t]), None)
         for index, when in enumerate(best_updates)]
collapse = final_returns / best_returns
print_table([{"seed": seed, "best update's return": float(best), "at update": int(when),
              "first update below half of it": "never" if fall is None else fall,
              f"mean return, last {last} updates": float(final), "last / best": float(ratio)}
             for seed, best, when, fall, final, ratio in zip(SEEDS, best_returns, best_updates, falls, final_returns,
                                                              collapse)],
            title="REINFORCE learning over seeds")
print(f"last {last} updates, across seeds: {mean_and_spread(final_returns)} "
      f"(min {final_returns.min():.1f}, max {final_returns.max():.1f})")

# %% tags=["claims"]
lecture.claim("every seed reaches a mean return of at least 450 in some update",
              bool(best_returns.min() >= 450), measured=f"lowest best {best_returns.min():.1f}", quick=False)
lecture.claim("four of the five seeds' best updates touch the dashed 500 line", int((best_returns >= 500).sum()) == 4,
              measured="best per seed " + ", ".join(f"{value:.1f}" for value in best_returns.tolist()), quick=False)
fallen = sum(fall is not None for fall in falls)
lecture.claim("then at least four of the five seeds fall below half of their best in some later update",
              fallen >= 4, measured=f"{fallen} of {len(SEEDS)}; first update below half of the best: "
                                    + ", ".join("never" if fall is None else str(fall) for fall in falls), quick=False)
lecture.claim(f"and at least one seed does not recover: its last {last} updates average less than half of its best",
              bool(collapse.min() < 0.5),
              measured="last / best " + ", ".join(f"{ratio:.2f}" for ratio in collapse.tolist()), quick=False)

# %% [markdown]
r"""
## What to take away

**The noise.** In the first table the `noise B=1` column is the noise of a single
episode's gradient relative to its expectation, and `B for noise=1` is how many
episodes a batch needs before its gradient is, on average, as long as its error. At
both policies, $G_0$ and $\gamma^t G_t$ weights have the same expectation (in the second table
the ratio is 0.94 at the untrained policy and 1.02 at the trained one, both below 3),
and dropping the rewards before t ($\gamma^t G_t$ instead of $G_0$) lowers the variance
$\operatorname{tr} \operatorname{Cov}[g]$, from 1.86e+04 to 3.47e+03 at the untrained policy: the same
gradient, for free, with less noise. $G_t$ is not that gradient: at the untrained
policy, dropping $\gamma^t$ changes the expectation (the ratio of $G_t$ against $\gamma^t G_t$ is 28,
where the same expectation would give about 1); at the
trained policy 400 episodes are too few to see it (ratio 0.59), and too few to
resolve $\lvert \mathbb E[g] \rvert$ for the weights $\gamma^t G_t$ and $G_t$. The trained policy's episodes are 23.6
times longer (500 steps against 21.2), and its gradient's variance (weight $G_t$) is about
26,000 times the untrained one's in this run. At that policy 400 episodes resolve $\lvert \mathbb E[g] \rvert$
barely if at all: in this run they resolve it for none of the three weights, not even
$G_0$, so all three rows are marked < and >, bounds, drawn dotted in the figure. A
row is resolved exactly when its `B for noise=1` is below the 400 episodes, and whether
it comes out above or below 400 depends on where the trained policy ended up.
In the figure every line falls with a slope between −0.42 and −0.46 in this run (−½ is
noise ∝ $1/\sqrt B$): to halve the noise, take four
times the episodes. Where a solid line crosses the grey line, a batch's noise equals
its signal.

**The forgetting.** Four of the five seeds' best updates reach the dashed 500 line and
the fifth, seed 2, reaches 473 (the green triangles). Then at least four of the five seeds fall
below half of their best in some later update (the `first update below half of it`
column of the last table; in this run all five do), and at least one does not recover: its last 5 updates
average less than half of its best (the `last / best` column; the red triangles are
the last updates). In this run none of the five recovers: seed 1 ends at 0.36 of its
best, seeds 4 and 5 at 0.32, seed 2 at 0.27 and seed 3 at 0.26. When a seed
falls, whether it climbs back and where it stands at the
end belong to the run: in this run seed 3, the first to reach 500 (update 16), is the
first to fall, at update 30, and its last 5 updates average 132; seed 1 reaches 500 at
update 18 and stays above half of it the longest, until it falls at update 45, and its
last 5 updates average 179, the most of the five; seed 5 reaches 500 at update 28 and
also falls at update 45 (161 over its last 5 updates); seed 4 reaches 500 at update 29 and
falls at update 41 (160); and seed 2, the last to reach its best (473, update 31), falls
soonest after it, three updates later at update 34, and ends lowest, at 127. These trajectories are chaotic:
a difference in the last bits of rounding (another CPU) grows from update to update and
moves every fall, so that in one run only some seeds end collapsed, and in another every
seed does, as here. The spread across seeds at the end (the line under the last table) is not noise
around one level: it is where each seed stands between its falls and its recoveries;
in this run all five stand collapsed, between 127 and 179 (152.0 ± 19.6).
This lecture does not test why; the
likely reason is that nothing here limits how far one update moves the policy: with
γ = 0.99 a weight $G_t$ can reach $1/(1 - \gamma) = 100$, a batch of long episodes sums
hundreds of such terms, and one Adam step at a fixed learning rate can undo what the
policy knew. [Lecture 2](02_baseline_actor_critic.ipynb) shrinks the noise with a baseline; [lecture 4](04_surrogate_and_trust_regions.ipynb) measures how far
one update may move the policy before its objective stops predicting the return, and
[lecture 5](05_clipped_surrogate.ipynb)'s clipped objective limits that move. The weights
end up in `ppo/algorithm/advantages.py`.
"""

# %%
lecture.finish()
