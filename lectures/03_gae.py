# %% [markdown]
r"""
# Lecture 3 — Generalized Advantage Estimation: between TD(0) and Monte Carlo

> **If you skipped [lecture 2](02_baseline_actor_critic.ipynb).** The policy gradient weights each action's log-probability
> by the discounted return that followed it, $G_t = \sum_{k \ge t} \gamma^{k-t} r_k$.
> Subtracting a <a href="../glossary.html#term-Baseline">baseline</a> $b(s_t)$, any function of the state alone, leaves the gradient
> unbiased, because the expected score is zero, $\mathbb E_a[\nabla \log \pi(a \mid s)] = 0$:
>
> $$\nabla J = \mathbb E\Big[\sum_t \nabla \log \pi_\theta(a_t \mid s_t) \cdot \big(G_t - b(s_t)\big)\Big].$$
>
> The baseline used is the *<a href="../glossary.html#term-Critic">critic</a>*: a network $V(s) \approx \mathbb E[G_t \mid s_t = s]$,
> trained by regression on the returns, $\tfrac12 (V(s_t) - G_t)^2$. Then $G_t - V(s_t)$
> estimates the *<a href="../glossary.html#term-Advantage">advantage</a>* $A(s, a) = Q(s, a) - V(s)$: how much better the action taken
> did than the policy's average in that state. This lecture asks how to form that
> estimate from the critic.

**What it teaches.** [Lecture 2](02_baseline_actor_critic.ipynb) weighted each action by $G_t - V(s_t)$: the real return
minus the critic's guess. That uses the critic only as a baseline, and $G_t$ carries the
noise of every later reward and action. The critic can also stand in for the future:

$$
\begin{aligned}
\delta_t &= r_t + \gamma V(s_{t+1}) - V(s_t) \qquad \text{(TD error)} \\
\hat A_t(\lambda) &= \sum_{k \ge 0} (\gamma\lambda)^k \delta_{t+k} = \delta_t + \gamma\lambda \hat A_{t+1}(\lambda) \qquad \text{(GAE, Schulman et al. 2016)}
\end{aligned}
$$

λ = 0 is the one-step <a href="../glossary.html#term-TD-error">TD error</a>: low variance, but it believes $V(s_{t+1})$ — biased when
the critic is wrong. λ = 1 telescopes to $G_t - V(s_t)$, the Monte Carlo estimate: no
bias from V beyond the baseline, all the variance of the return. λ in between mixes
them with geometric weights.

**How we measure it.** On a task whose true values we can compute exactly: a random
walk on a chain of states, both ends terminal, reward +1 for leaving on the right and −1
on the left. We solve $V^\pi$ and $Q^\pi$ with a linear solve, give <a href="../glossary.html#term-GAE">GAE</a> a *deliberately wrong*
critic $\hat V = V^\pi + \text{fixed noise}$, and compare thousands of estimates with the truth.

What should $\hat A_t$ be compared to? $\hat A_t(\lambda) + \hat V(s_t)$ — the `returns` that `compute_gae`
outputs, the λ-return — estimates $Q(s_t, a_t)$. Its error $R_t^\lambda - Q(s_t, a_t)$ is the
error of the advantage *up to a function of the state alone*, which acts as a baseline
and cannot bias the policy gradient ([lecture 2](02_baseline_actor_critic.ipynb)). So for every state-action pair we
measure the mean error (bias) and the spread (variance) of $R^\lambda$ as an estimate of Q.

**What one estimate hides.** A policy gradient is never one advantage: it averages
over a batch of B samples. Averaging B estimates whose errors are independent divides
their variance by B but leaves their bias: the batch's error is about $\text{bias}^2 + \text{variance}/B$.
The λ that is best for one estimate is not the λ that is best for a batch of thousands.

**Prerequisites.** Lectures [1](01_policy_gradients.ipynb)–[2](02_baseline_actor_critic.ipynb); the <a href="../glossary.html#term-Bellman-equation">Bellman equation</a> $V = r_\pi + \gamma P_\pi V$.

**Library.** `ppo/algorithm/advantages.py` — `compute_gae`, with <a href="../glossary.html#term-Termination">terminations</a> and <a href="../glossary.html#term-Truncation">truncations</a> kept
apart ([lecture 8](08_implementation_details.ipynb)); the trainer uses λ = 0.95 by default (`gae_lambda` in `ppo/config.py`).
"""

# %%
import torch

from _common import Lecture, plt, print_table
from ppo.algorithm.advantages import compute_gae
from ppo.config import PPOConfig

lecture = Lecture("03_gae", __doc__)
NUM_STATES = 11  # non-terminal states 1..11; 0 and 12 are terminal
GAMMA = 0.95
PROBABILITY_RIGHT = 0.5  # the fixed policy being evaluated
NUM_ENVS = lecture.choose(full=4000, quick=500)
ROLLOUT_STEPS = 256
MEASURED_STEPS = 128  # only t < 128: every λ-return then sees (γλ)^128 ≈ 0 of the cut
LAMBDAS = [0.0, 0.2, 0.4, 0.6, 0.8, 0.9, 0.95, 0.97, 0.99, 1.0]
CRITIC_ERRORS = [0.0, 0.25, 0.5, 1.0]  # critic noise, in units of the std of V over states
MAIN_CRITIC_ERROR = 0.5
DEFAULTS = PPOConfig()  # the trainer's defaults: λ and the samples in one gradient step
BATCH_SIZES = sorted({1, 4, 16, 64, DEFAULTS.minibatch_size, 256, 1024, 4096})  # samples averaged into one gradient
CRITIC_COLORS = {0.0: "tab:purple", 0.25: "tab:olive", 0.5: "tab:orange", 1.0: "tab:brown"}
torch.manual_seed(0)

# %% [markdown]
r"""
## The chain and its exact values

State $s \in \{1, \dots, 11\}$; action 1 moves right, action 0 left, $\pi(\text{right}) = 0.5$. Leaving at
the right end pays +1, at the left end −1, every other step 0. With terminal values 0,

$$
V = r_\pi + \gamma P_\pi V \;\Rightarrow\; V = (I - \gamma P_\pi)^{-1} r_\pi, \qquad Q(s, a) = r(s, a) + \gamma V(s').
$$
"""

# %%
TERMINAL_LEFT, TERMINAL_RIGHT = 0, NUM_STATES + 1
states = torch.arange(NUM_STATES + 2)


def step_reward(next_state: torch.Tensor) -> torch.Tensor:
    return (next_state == TERMINAL_RIGHT).double() - (next_state == TERMINAL_LEFT).double()


transition = torch.zeros(NUM_STATES + 2, NUM_STATES + 2, dtype=torch.float64)  # P_π, terminals absorb to nowhere
expected_reward = torch.zeros(NUM_STATES + 2, dtype=torch.float64)
for s in range(1, NUM_STATES + 1):
    for next_state, probability in ((s + 1, PROBABILITY_RIGHT), (s - 1, 1 - PROBABILITY_RIGHT)):
        transition[s, next_state] += probability
        expected_reward[s] += probability * float(step_reward(torch.tensor(next_state)))
true_values = torch.linalg.solve(torch.eye(NUM_STATES + 2, dtype=torch.float64) - GAMMA * transition, expected_reward)
true_q = torch.zeros(NUM_STATES + 2, 2, dtype=torch.float64)
for s in range(1, NUM_STATES + 1):
    for action, next_state in ((0, s - 1), (1, s + 1)):
        true_q[s, action] = step_reward(torch.tensor(next_state)) + GAMMA * true_values[next_state]
value_spread = float(true_values[1:-1].std())
print("true V(s), s = 1..11:", " ".join(f"{v:+.3f}" for v in true_values[1:-1]))


def noisy_critic(error_scale: float, seed: int = 1) -> torch.Tensor:
    """V̂ = V + fixed Gaussian error per state (0 at the terminals, as V̂ is never read there)."""
    generator = torch.Generator().manual_seed(seed)
    noise = torch.randn(NUM_STATES + 2, generator=generator, dtype=torch.float64) * error_scale * value_spread
    noise[[TERMINAL_LEFT, TERMINAL_RIGHT]] = 0.0
    return true_values + noise


# %% [markdown]
"""
## A rollout in the trainer's layout

N copies walk the chain for T steps. When a copy reaches an end, the step is marked
`terminated` and the copy restarts in the middle, exactly the (T, N) layout and
autoreset of the PPO trainer (gymnasium's <a href="../glossary.html#term-SAME_STEP-autoreset">SAME_STEP</a> mode: the step that ends an episode
already returns the first observation of the next one). `compute_gae` then runs unchanged.
"""

# %%
start_state = (NUM_STATES + 1) // 2
state = torch.full((NUM_ENVS,), start_state)
visited, actions, next_states = [], [], []
for t in range(ROLLOUT_STEPS):
    action = (torch.rand(NUM_ENVS) < PROBABILITY_RIGHT).long()
    next_state = state + 2 * action - 1
    visited.append(state)
    actions.append(action)
    next_states.append(next_state)
    ended = (next_state == TERMINAL_LEFT) | (next_state == TERMINAL_RIGHT)
    state = torch.where(ended, torch.full_like(next_state, start_state), next_state)
visited, actions, next_states = torch.stack(visited), torch.stack(actions), torch.stack(next_states)  # (T, N)
rewards = step_reward(next_states)  # (T, N)
terminated = (next_states == TERMINAL_LEFT) | (next_states == TERMINAL_RIGHT)
target_q = true_q[visited, actions]  # (T, N) the exact Q(s_t, a_t)
print(f"{NUM_ENVS} copies × {ROLLOUT_STEPS} steps; {int(terminated.sum())} episodes finished")


# %%
def bias_and_variance(critic: torch.Tensor, gae_lambda: float) -> dict:
    """Visit-weighted mean over (s, a) of bias² and variance of R^λ as an estimate of Q(s, a)."""
    _, lambda_returns = compute_gae(
        rewards, critic[visited], critic[next_states], terminated, terminated, GAMMA, gae_lambda
    )
    error = (lambda_returns - target_q)[:MEASURED_STEPS].flatten()
    pair = (visited * 2 + actions)[:MEASURED_STEPS].flatten()  # index of the (s, a) pair
    size = 2 * (NUM_STATES + 2)
    count = torch.zeros(size, dtype=torch.float64).index_add_(0, pair, torch.ones_like(error))
    mean = torch.zeros(size, dtype=torch.float64).index_add_(0, pair, error) / count.clamp(min=1)
    mean_square = torch.zeros(size, dtype=torch.float64).index_add_(0, pair, error**2) / count.clamp(min=1)
    weight = count / count.sum()
    # Where the exact answer is 0 (a perfect critic's mean error; TD(0)'s variance, the next state
    # being fixed by the action), float64 leaves rounding of ~1e-15; show it as the 0 it is
    mean = torch.where(mean.abs() < 1e-12, torch.zeros_like(mean), mean)
    bias_squared = float((weight * mean**2).sum())
    pair_variance = mean_square - mean**2
    pair_variance = torch.where(pair_variance.abs() < 1e-12, torch.zeros_like(pair_variance), pair_variance)
    variance = float((weight * pair_variance).sum())
    # an unbiased estimator's bias² from sampling alone: each pair's mean is off by variance / visits
    sampling_floor = float((weight * pair_variance / count.clamp(min=1)).sum())
    return {"λ": gae_lambda, "bias²": bias_squared, "variance": variance, "MSE": bias_squared + variance,
            "sampling floor": sampling_floor}


results = {scale: [bias_and_variance(noisy_critic(scale), lam) for lam in LAMBDAS] for scale in CRITIC_ERRORS}


def batch_error(row: dict, batch_size: int) -> float:
    """Mean squared error of an average of `batch_size` estimates with independent errors: bias² + variance / B."""
    return row["bias²"] + row["variance"] / batch_size


def best_lambda(rows: list[dict], batch_size: int = 1) -> float:
    return min(rows, key=lambda row: batch_error(row, batch_size))["λ"]

# %% [markdown]
"""
## Bias and variance against λ
"""

# %%
main_rows = results[MAIN_CRITIC_ERROR]
names = {0.0: "TD(0)", 1.0: "Monte Carlo"}
print_table([{"": names.get(row["λ"], ""), **row} for row in main_rows],
            title=f"R^λ as an estimate of Q(s, a); critic error {MAIN_CRITIC_ERROR} × std of V")
print_table([{"critic error (× std V)": scale, "best λ, one estimate": best_lambda(rows),
              "MSE at λ=0": rows[0]["MSE"], "MSE at λ=0.95": rows[LAMBDAS.index(0.95)]["MSE"],
              "MSE at λ=1": rows[-1]["MSE"]} for scale, rows in results.items()],
            title="The best λ for one estimate depends on how wrong the critic is")
print_table([{"critic error (× std V)": scale, **{f"B={b}": best_lambda(rows, b) for b in BATCH_SIZES}}
             for scale, rows in results.items()],
            title="The best λ for an average of B estimates (error bias² + variance / B)")

# %%
best_batch = {scale: [best_lambda(rows, b) for b in BATCH_SIZES] for scale, rows in results.items()}
figure, axes = plt.subplots(2, 2, figsize=(12, 9))
axes = axes.flatten()
axes[0].plot(range(1, NUM_STATES + 1), true_values[1:-1], "k-o", label="true V")
critic = noisy_critic(MAIN_CRITIC_ERROR)
axes[0].plot(range(1, NUM_STATES + 1), critic[1:-1], "--s", color=CRITIC_COLORS[MAIN_CRITIC_ERROR],
             label=f"critic V̂ (error {MAIN_CRITIC_ERROR} × std V)")
axes[0].set_xlabel("state s (0 and 12 are the terminal ends)")
axes[0].set_ylabel("value (expected discounted reward)")
axes[0].set_title("The random-walk chain")
axes[0].legend(fontsize=8, loc="upper left")
for key, color, style in (("bias²", "tab:red", "-o"), ("variance", "tab:blue", "-o"), ("MSE", "black", "-o")):
    axes[1].plot(LAMBDAS, [row[key] for row in main_rows], style, color=color, label=f"{key}, one estimate")
axes[1].plot(LAMBDAS, [batch_error(row, 16) for row in main_rows], "--", color="black", label="bias² + variance / 16")
axes[1].set_ylim(bottom=0)
axes[1].set_xlabel("λ")
axes[1].set_ylabel("squared error (reward²)")
axes[1].set_title(rf"$R^\lambda$ against the true Q (critic error {MAIN_CRITIC_ERROR})")
axes[1].legend(fontsize=8, loc="upper center")
for scale in CRITIC_ERRORS:
    axes[2].plot(LAMBDAS, [row["MSE"] for row in results[scale]], "-o", color=CRITIC_COLORS[scale],
                 label=f"critic error {scale}")
axes[2].set_ylim(bottom=0)
axes[2].set_xlabel("λ")
axes[2].set_ylabel("mean squared error of one estimate (reward²)")
axes[2].set_title("One estimate: MSE against λ")
axes[2].legend(fontsize=8, loc="upper left")
for scale in CRITIC_ERRORS:
    axes[3].semilogx(BATCH_SIZES, best_batch[scale], "-o", color=CRITIC_COLORS[scale], label=f"critic error {scale}")
axes[3].axvline(DEFAULTS.minibatch_size, color="grey", lw=0.8, ls=":")
axes[3].text(DEFAULTS.minibatch_size * 1.1, 0.3, f"trainer's default\nminibatch, {DEFAULTS.minibatch_size}", fontsize=8,
             color="grey")
axes[3].set_ylim(-0.05, 1.05)
axes[3].set_xlabel("batch size B (estimates averaged)")
axes[3].set_ylabel("λ with the lowest bias² + variance / B")
axes[3].set_title("A batch: the best λ against B")
axes[3].legend(fontsize=8, loc="center right")
lecture.save_figure(figure, "gae_bias_variance.png")

# %% tags=["claims"]
bias_squared = [row["bias²"] for row in main_rows]
variance = [row["variance"] for row in main_rows]
lecture.claim("as λ goes from 0 to 1, bias² shrinks at every step",
              all(later < earlier for earlier, later in zip(bias_squared, bias_squared[1:])),
              measured="bias² " + ", ".join(f"{value:.3g}" for value in bias_squared))
lecture.claim("as λ goes from 0 to 1, the variance grows at every step",
              all(later > earlier for earlier, later in zip(variance, variance[1:])),
              measured="variance " + ", ".join(f"{value:.3g}" for value in variance))
# What bias² an unbiased estimator shows from sampling alone: the squared error of each pair's
# mean, variance / visits, averaged over pairs as bias² is: the `sampling floor` column.
monte_carlo_bias = {scale: rows[-1]["bias²"] / rows[-1]["sampling floor"] for scale, rows in results.items()}
lecture.claim("at λ = 1 the bias is zero up to sampling noise, whatever the critic "
              "(bias² below 3 times what sampling alone gives)",
              max(monte_carlo_bias.values()) < 3,
              measured="bias² / sampling floor " + ", ".join(f"{value:.2f}" for value in monte_carlo_bias.values()))
best_single = [best_lambda(results[scale]) for scale in CRITIC_ERRORS]
lecture.claim("for one estimate, the better the critic, the smaller the best λ",
              all(later >= earlier for earlier, later in zip(best_single, best_single[1:])),
              measured="best λ " + ", ".join(f"{value:g}" for value in best_single))
lecture.claim("for one estimate, λ = 0.8 or less is best for every critic here", max(best_single) <= 0.8,
              measured=f"largest best λ {max(best_single):g}")
lecture.claim("the dashed line, bias² + variance / 16, has its lowest point further right than the solid MSE",
              best_lambda(main_rows, 16) > best_lambda(main_rows, 1),
              measured=f"lowest at λ = {best_lambda(main_rows, 16):g} against {best_lambda(main_rows, 1):g}")
td_zero_variance = [rows[0]["variance"] for rows in results.values()]
lecture.claim("At λ = 0 the variance is exactly 0, for every critic (the chain is deterministic given the action)",
              all(value == 0 for value in td_zero_variance),
              measured="TD(0) variance " + ", ".join(f"{value:.3g}" for value in td_zero_variance))
lecture.claim("for every wrong critic, the best λ grows as the batch grows",
              all(all(later >= earlier for earlier, later in zip(best_batch[scale], best_batch[scale][1:]))
                  and best_batch[scale][-1] > best_batch[scale][0] for scale in CRITIC_ERRORS if scale > 0),
              measured="; ".join(f"error {scale}: " + ", ".join(f"{value:g}" for value in best_batch[scale])
                                 for scale in CRITIC_ERRORS if scale > 0))
at_minibatch = {scale: best_lambda(rows, DEFAULTS.minibatch_size) for scale, rows in results.items() if scale > 0}
lecture.claim("each of PPO's gradient steps averages a minibatch, 128 samples by default (`minibatch_size`)",
              DEFAULTS.minibatch_size == 128, measured=f"PPOConfig().minibatch_size = {DEFAULTS.minibatch_size}")
lecture.claim(f"at the trainer's default minibatch of {DEFAULTS.minibatch_size} samples, every wrong critic's best λ "
              f"is {DEFAULTS.gae_lambda} or more", min(at_minibatch.values()) >= DEFAULTS.gae_lambda,
              measured=", ".join(f"error {k}: {v:g}" for k, v in at_minibatch.items()))
lecture.claim("a perfect critic's best λ is 0 at every batch size", set(best_batch[0.0]) == {0.0},
              measured=", ".join(f"{value:g}" for value in best_batch[0.0]))

# %% [markdown]
r"""
## What to take away

In the first table (and the second panel), follow bias² and variance as λ goes from 0
(TD) to 1 (Monte Carlo). As λ goes from 0 to 1, bias² shrinks at every step: the
critic's error enters through $\hat V(s_{t+k})$ with weight $(\gamma\lambda)^k$. And the variance grows at
every step, as more of the random future enters. At λ = 0 it is exactly 0, for every
critic, only because this chain is deterministic given the action: the action fixes the
next state and the reward, so $r + \gamma \hat V(s')$ is the same number at every visit of (s, a).
Where transitions or rewards are random, TD(0) has a variance too. At λ = 1 the bias
is zero up to sampling noise, whatever the critic: the return never reads $\hat V$. Its bias²
is 1.78 times the `sampling floor` column for every critic in this run; that column is the bias² an unbiased estimator shows from a finite number of
visits alone.

For one estimate, the better the critic, the smaller the best λ: 0, 0.2, 0.4 and 0.8
for critic errors 0, 0.25, 0.5 and 1 (the second table, and the lowest point of each
curve in the third panel). A perfect critic's best λ is 0 at every batch size (the purple line
of the fourth panel).

That is not yet the answer for a policy gradient, which averages a batch. Averaging
divides the variance by B but not the bias: in the second panel the dashed line,
$\text{bias}^2 + \text{variance} / 16$, already has its lowest point further right than the solid MSE
(at λ = 0.95 against 0.4).
For every wrong critic, the best λ grows as the batch grows (the third table, and the
fourth panel: each coloured line climbs towards 1), and at the trainer's default
<a href="../glossary.html#term-Minibatch">minibatch</a> of 128 samples the wrong critics' best λ are 0.97, 0.99 and 1, at or above
its default λ = 0.95 (`gae_lambda`, `ppo/config.py`). That, not a poor critic, is the case for a λ near 1
in PPO: each of its gradient steps averages a minibatch, 128 samples by default
(`minibatch_size`), not one estimate. Two cautions keep this a
direction rather than a formula: steps of one <a href="../glossary.html#term-Rollout">rollout</a> share their future, so a batch
of B steps holds fewer than B independent estimates; and this critic's error is fixed
per state, while a trained critic's error changes as it learns.

On CartPole the same function runs over a (T, N) rollout with terminations and
time-limit truncations: `ppo/algorithm/advantages.py`, tested against a slow reference in
`tests/test_gae.py`.
"""

# %%
lecture.finish()
