# %% [markdown]
"""
# Lecture 3 — Generalized Advantage Estimation: between TD(0) and Monte Carlo

**What it teaches.** Lecture 2 weighted each action by G_t − V(s_t): the real return
minus the critic's guess. That uses the critic only as a baseline, and G_t carries the
noise of every later reward and action. The critic can also stand in for the future:

    δ_t = r_t + γ V(s_{t+1}) − V(s_t)                         (TD error)
    Â_t(λ) = Σ_{k ≥ 0} (γλ)^k δ_{t+k}  =  δ_t + γλ Â_{t+1}(λ)    (GAE, Schulman et al. 2016)

λ = 0 is the one-step TD error: low variance, but it believes V(s_{t+1}) — biased when
the critic is wrong. λ = 1 telescopes to G_t − V(s_t), the Monte Carlo estimate: no
bias from V beyond the baseline, all the variance of the return. λ in between mixes
them with geometric weights.

**How we measure it.** On a task whose true values we can compute exactly: a random
walk on a chain of states, both ends terminal, reward +1 for leaving on the right and −1
on the left. We solve V^π and Q^π with a linear solve, give GAE a *deliberately wrong*
critic V̂ = V^π + fixed noise, and compare thousands of estimates with the truth.

What should Â_t be compared to? Â_t(λ) + V̂(s_t) — the `returns` that `compute_gae`
outputs, the λ-return — estimates Q(s_t, a_t). Its error R_t^λ − Q(s_t, a_t) is the
error of the advantage *up to a function of the state alone*, which acts as a baseline
and cannot bias the policy gradient (lecture 2). So for every state-action pair we
measure the mean error (bias) and the spread (variance) of R^λ as an estimate of Q.

**Prerequisites.** Lectures 1–2; the Bellman equation V = r_π + γ P_π V.

**Library.** `ppo/advantages.py` — `compute_gae`, with terminations and truncations kept
apart (lecture 7); the trainer uses λ = 0.95 by default (`gae_lambda` in `ppo/config.py`).
"""

# %%
import torch

from _common import Lecture, plt, print_table
from ppo.advantages import compute_gae

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
torch.manual_seed(0)

# %% [markdown]
"""
## The chain and its exact values

State s ∈ {1, …, 11}; action 1 moves right, action 0 left, π(right) = 0.5. Leaving at
the right end pays +1, at the left end −1, every other step 0. With terminal values 0,

    V = r_π + γ P_π V   ⇒   V = (I − γ P_π)⁻¹ r_π,     Q(s, a) = r(s, a) + γ V(s').
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
SAME_STEP autoreset of the PPO trainer. `compute_gae` then runs unchanged.
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
    bias_squared = float((weight * mean**2).sum())
    variance = float((weight * (mean_square - mean**2)).sum())
    return {"λ": gae_lambda, "bias²": bias_squared, "variance": variance, "MSE": bias_squared + variance}


results = {scale: [bias_and_variance(noisy_critic(scale), lam) for lam in LAMBDAS] for scale in CRITIC_ERRORS}

# %% [markdown]
"""
## Bias and variance against λ
"""

# %%
main_rows = results[MAIN_CRITIC_ERROR]
names = {0.0: "TD(0)", 1.0: "Monte Carlo"}
print_table([{"": names.get(row["λ"], ""), **row} for row in main_rows],
            title=f"R^λ as an estimate of Q(s, a); critic error {MAIN_CRITIC_ERROR} × std of V")
best = {scale: min(rows, key=lambda row: row["MSE"])["λ"] for scale, rows in results.items()}
print_table([{"critic error (× std V)": scale, "λ with the lowest MSE": best[scale],
              "MSE at λ=0": rows[0]["MSE"], "MSE at λ=0.95": rows[LAMBDAS.index(0.95)]["MSE"],
              "MSE at λ=1": rows[-1]["MSE"]} for scale, rows in results.items()],
            title="The best λ depends on how wrong the critic is")

figure, axes = plt.subplots(1, 3, figsize=(15, 4.3))
axes[0].plot(range(1, NUM_STATES + 1), true_values[1:-1], "k-o", label="true V")
critic = noisy_critic(MAIN_CRITIC_ERROR)
axes[0].plot(range(1, NUM_STATES + 1), critic[1:-1], "--s", color="tab:orange", label=f"critic V̂ (error {MAIN_CRITIC_ERROR})")
axes[0].set_xlabel("state")
axes[0].set_ylabel("value")
axes[0].set_title("The random-walk chain")
axes[0].legend(fontsize=8)
for key, color in (("bias²", "tab:red"), ("variance", "tab:blue"), ("MSE", "black")):
    axes[1].plot(LAMBDAS, [row[key] for row in main_rows], "-o", color=color, label=key)
axes[1].set_yscale("log")
axes[1].set_xlabel("λ")
axes[1].set_title(f"R^λ vs the true Q (critic error {MAIN_CRITIC_ERROR})")
axes[1].legend(fontsize=8)
for scale in CRITIC_ERRORS:
    axes[2].plot(LAMBDAS, [row["MSE"] for row in results[scale]], "-o", label=f"critic error {scale}")
axes[2].set_yscale("log")
axes[2].set_xlabel("λ")
axes[2].set_ylabel("mean squared error")
axes[2].set_title("MSE against λ for critics of different quality")
axes[2].legend(fontsize=8)
lecture.save_figure(figure, "gae_bias_variance.png")

# %% [markdown]
"""
## What to take away

In the first table, follow bias² and variance as λ goes from 0 (TD) to 1 (Monte
Carlo): the critic's error enters through V̂(s_{t+k}) with weight (γλ)^k, so bias
shrinks as λ grows, while more of the random future enters, so variance grows. At λ = 1
the bias is zero up to sampling noise, whatever the critic — the return never reads V̂.
The second table shows where the sum is smallest for each critic: the better the critic,
the more of the future can be handed to it (smaller λ); its first row, a perfect
critic, is TD(0)'s best case. A default like PPO's λ = 0.95 leans towards Monte Carlo
because early in training the critic is poor.

On CartPole the same function runs over a (T, N) rollout with terminations and
time-limit truncations: `ppo/advantages.py`, tested against a slow reference in
`tests/test_gae.py`.
"""

# %%
lecture.finish()
