# %% [markdown]
"""
# Lecture 1 — Policy gradients: REINFORCE on CartPole

**What it teaches.** A policy π_θ(a | s) is a network that outputs a probability for
each action. We want θ that maximises the expected discounted return J(θ) = E[G_0],
but the return depends on θ only through the actions sampled, so we cannot simply
backpropagate through the environment. The log-derivative trick gives a gradient we
can estimate from played episodes alone:

    ∇_θ J(θ) = E[ Σ_t ∇_θ log π_θ(a_t | s_t) · G_t ],    G_t = Σ_{k ≥ t} γ^{k−t} r_k

Each action's log-probability is pushed up in proportion to the return that followed
it. (Weighting by the return *before* t as well — by G_0 — has the same expectation,
because an action cannot change rewards already received; dropping those terms is free
and removes noise.) This estimator is REINFORCE.

**Why it matters.** Every method in this course, PPO included, is this estimator with
its noise reduced and its step size controlled. This lecture measures the noise: how
far the gradient from one batch of episodes is from the true gradient, how that shrinks
with the batch size, and how it grows as the policy improves and episodes get longer.
Then it trains REINFORCE over several seeds to show what that noise does to learning.

**Prerequisites.** Python, PyTorch autograd, what an MDP and a return are.

**Library.** The network pieces come from `ppo/networks.py` (`mlp`, `CategoricalHead`),
the batched CartPole from `envs/classic/cartpole.py`. REINFORCE itself is written here
in full, because it is the starting point that the library improves on.
"""

# %%
import torch
from torch import nn

from _common import Lecture, mean_and_spread, plt, print_table
from envs.classic import make_torch_vec_env
from ppo.networks import CategoricalHead, mlp

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
because G_t sums rewards to the end.
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


def reinforce_loss(policy: Policy, episodes: dict, weights: torch.Tensor) -> torch.Tensor:
    """−(1/N) Σ_episodes Σ_t log π(a_t | s_t) · weight_t; its gradient is −ĝ."""
    log_probs = policy(episodes["obs"]).log_prob(episodes["actions"])  # (T, N)
    per_step = log_probs * weights * episodes["alive"]
    return -per_step.sum(dim=0).mean()


# %% [markdown]
"""
## How noisy is one episode's gradient?

Fix the policy and play many episodes. Each episode i gives its own estimate g_i, the
gradient of Σ_t log π(a_t | s_t)·weight_t over its steps. The true gradient is their
expectation, E[g]. A batch of B episodes averages B of them, so its variance is
tr Cov[g] / B. We compare two weights: the whole-episode return G_0 on every step, and
the reward-to-go G_t. The *relative noise* of a B-episode batch is

    sqrt(tr Cov[g] / B) / ‖E[g]‖

— above 1, the noise in one batch's gradient is larger than the gradient itself. (We
estimate ‖E[g]‖² by the squared norm of the mean over all episodes minus tr Cov[g] / N,
the amount by which that norm overshoots on average.)
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


def noise_study(policy: Policy, label: str, seed: int) -> list[dict]:
    episodes = play_episodes(policy, VARIANCE_EPISODES, seed)
    returns = rewards_to_go(episodes["rewards"], GAMMA)
    rows = []
    for weight_name, weights in (("G_0", returns[:1].expand_as(returns)), ("G_t", returns)):
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


torch.manual_seed(0)
untrained_policy = Policy()
initial_rows = noise_study(untrained_policy, "untrained", seed=100)

# %% [markdown]
"""
## Training REINFORCE over several seeds

Each update plays a fresh batch of episodes with the current policy, weights each
log-probability by its reward-to-go, and takes one Adam step. Nothing else: no
baseline, no normalisation, no clipping. The same code with different seeds gives the
spread that the noise above predicts.
"""


# %%
def train_reinforce(seed: int) -> tuple[Policy, list[float]]:
    torch.manual_seed(seed)
    policy = Policy()
    optimizer = torch.optim.Adam(policy.parameters(), lr=LEARNING_RATE)
    mean_returns = []
    for iteration in range(ITERATIONS):
        episodes = play_episodes(policy, EPISODES_PER_UPDATE, seed=seed * 10_000 + iteration)
        returns = rewards_to_go(episodes["rewards"], GAMMA)
        loss = reinforce_loss(policy, episodes, returns)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        mean_returns.append(float(episodes["rewards"].sum(0).mean()))  # undiscounted episode return
    return policy, mean_returns


curves = {}
trained_policies = {}
for seed in SEEDS:
    trained_policies[seed], curves[seed] = train_reinforce(seed)
    print(f"seed {seed}: return of the last update's episodes {curves[seed][-1]:.1f}")

# %% [markdown]
"""
## The noise again, at a trained policy

Longer episodes mean more terms in Σ_t and larger returns multiplying them, so the
variance of the estimate grows as the policy gets better. We repeat the study at the
policy trained with the first seed.
"""

# %%
trained_rows = noise_study(trained_policies[SEEDS[0]], f"trained (seed {SEEDS[0]})", seed=200)
all_rows = initial_rows + trained_rows
print_table([{k: v for k, v in row.items() if not k.startswith("_")} for row in all_rows],
            title="REINFORCE gradient estimates, one episode each (noise = sqrt(tr Cov / B) / |E[g]|)")
for row in all_rows:
    if not row["_resolved"]:
        print(f"{row['policy']}, {row['weight']}: with {len(row['_gradients'])} episodes the mean gradient is lost in "
              f"the noise; |E[g]| is below what they resolve, so the noise columns are lower bounds")

# Empirical check of the 1/B law: split the N episodes into disjoint batches of B and
# measure how far each batch mean lies from the mean over all N. That distance has
# variance tr Cov · (1/B − 1/N), so we divide by (1 − B/N) to compare with tr Cov / B.
figure, axis = plt.subplots(figsize=(7, 4.5))
for row, style in zip(all_rows, ("-o", "-s", "--o", "--s")):
    gradients = row["_gradients"]
    mean_gradient = gradients.mean(0)
    batch_sizes = [b for b in (1, 2, 4, 8, 16, 32, 64) if gradients.shape[0] // b >= 4]
    measured = []
    for b in batch_sizes:
        batches = gradients[: (gradients.shape[0] // b) * b].reshape(-1, b, gradients.shape[1]).mean(1)
        spread = (batches - mean_gradient).norm(dim=1).pow(2).mean() / (1 - b / gradients.shape[0])
        measured.append(float(spread.sqrt()) / row["_signal"])
    bound_note = "" if row["_resolved"] else " (a lower bound)"
    axis.loglog(batch_sizes, measured, style, label=f"{row['policy']}, weight {row['weight']}{bound_note}")
axis.axhline(1.0, color="grey", lw=0.8)
axis.set_xlabel("episodes per batch B")
axis.set_ylabel("relative noise  |ĝ_B − E[g]| / |E[g]|")
axis.set_title("REINFORCE: noise of a batch's gradient estimate")
axis.legend(fontsize=8)
lecture.save_figure(figure, "gradient_noise_vs_batch_size.png")

# %%
figure, axis = plt.subplots(figsize=(7, 4.5))
curve_tensor = torch.tensor([curves[seed] for seed in SEEDS])  # (seeds, iterations)
for seed in SEEDS:
    axis.plot(curves[seed], alpha=0.5, lw=1, label=f"seed {seed}")
axis.plot(curve_tensor.mean(0), color="black", lw=2, label="mean over seeds")
axis.set_xlabel(f"update (each on {EPISODES_PER_UPDATE} fresh episodes)")
axis.set_ylabel("mean episode return")
axis.set_title("REINFORCE on CartPole-v1 (reward-to-go, no baseline)")
axis.legend(fontsize=8)
lecture.save_figure(figure, "reinforce_learning_curves.png")

last = max(1, ITERATIONS // 5)
final_returns = curve_tensor[:, -last:].mean(1)
print_table([{"seed": seed, f"mean return, last {last} updates": float(value)} for seed, value in zip(SEEDS, final_returns)],
            title="REINFORCE learning over seeds")
print(f"across seeds: {mean_and_spread(final_returns)} (min {final_returns.min():.1f}, max {final_returns.max():.1f})")

# %% [markdown]
"""
## What to take away

Read the table: the `noise B=1` column is the noise of a single episode's gradient
relative to the true gradient, and `B for noise=1` is how many episodes a batch needs
before its gradient is, on average, as long as its error. Compare the G_0 and G_t rows
to see what dropping the past rewards buys, and the untrained and trained rows to see
how the noise grows with episode length. The spread of the final returns across seeds
is that noise at work. Lecture 2 subtracts a learned baseline from G_t to shrink it
further; `ppo/advantages.py` is where that ends up.
"""

# %%
lecture.finish()
