# %% [markdown]
"""
# Lecture 7 — Implementation details that matter, and bugs that look like PPO

**What it teaches.** Two things the equations do not say.

*Part A — details that are switched on by default.* The trainer does five things
beyond the clipped loss: it bootstraps the value of a state cut by a time limit
(`bootstrap_truncated`), whitens advantages per minibatch (`norm_adv`), initialises
weights orthogonally (`ortho_init`), anneals the learning rate to 0 (`anneal_lr`) and
clips the gradient norm (`max_grad_norm`). We switch each off in turn, plus one
structural choice common in hand-written PPO code (one full batch per epoch instead of
shuffled minibatches), and measure the effect over seeds.

*Part B — bugs that look like PPO.* PPO code in circulation — lecture notes, notebooks,
tutorials — contains mistakes that run and produce a learning curve, so nothing points
at them. Each section below first shows the mistaken code, condensed to the lines that
matter, then reproduces the mistake next to the correct version, with the number that
shows the difference:

1. a step counter that spans episodes, so no update ever runs;
2. a time-limit truncation treated as a termination, and the last step masked
   differently from the others;
3. the value loss on unnormalised returns through a shared trunk, one full batch per epoch;
4. the ratio taken against the frozen reference model instead of the rollout policy;
5. log-probabilities computed once, outside the epoch loop;
6. "entropy" and "KL" computed with formulas that estimate neither;
7. an "experience replay buffer" for an on-policy method;
8. one completion per episode.

**Prerequisites.** Lectures 3–6.

**Library.** `ppo/config.py` (the switches), `ppo/trainer.py`, `ppo/advantages.py`
(terminated vs truncated), `ppo/losses.py`, `ppo/storage.py` (the rollout buffer).
The tests that pin each detail down: `tests/test_gae.py`, `tests/test_trainer.py`,
`tests/test_losses.py`.
"""

# %%
import gymnasium as gym
import torch
import torch.nn.functional as F
from torch.distributions import Categorical

from _common import Lecture, mean_and_spread, plt, print_table
from envs.classic import make_torch_vec_env
from ppo.advantages import compute_gae
from ppo.config import PPOConfig
from ppo.losses import clip_fraction, clipped_surrogate_loss, kl_estimate, normalize_advantages, value_loss
from experiments.train import training_envs
from ppo.trainer import PPO

lecture = Lecture("07_implementation_details", __doc__)
SEEDS = lecture.choose(full=[1, 2, 3], quick=[1])
TIME_LIMIT = 200  # instead of 500: truncations start early in training
BASE = PPOConfig(
    env_id="CartPole-v1", env_backend="torch", num_envs=32, num_steps=lecture.choose(full=32, quick=8),
    learning_rate=1e-3, total_timesteps=lecture.choose(full=32 * 32 * 25, quick=32 * 8 * 2), tensorboard=False,
)

# %% [markdown]
"""
## Part A — each default detail switched off in turn

All runs use the batched CartPole with a 200-step time limit instead of 500, so that
episodes are cut by the limit within this short budget and the truncation rule has
something to act on. "Gradient clipping off" sets `max_grad_norm` so large that it never
binds. "One full batch per epoch" sets `num_minibatches = 1`: K = 4 gradient steps per
rollout instead of 16, as hand-written PPO code often does it.
"""

# %%
ABLATIONS = {
    "base (all on)": {},
    "bootstrap_truncated off": dict(bootstrap_truncated=False),
    "norm_adv off": dict(norm_adv=False),
    "ortho_init off": dict(ortho_init=False),
    "anneal_lr off": dict(anneal_lr=False),
    "gradient clipping off": dict(max_grad_norm=1e9),
    "one full batch per epoch": dict(num_minibatches=1),
}
snapshots = []  # the base run's rollouts, kept for defect 7


def run(config: PPOConfig, keep_rollouts: bool = False) -> list[dict]:
    envs = make_torch_vec_env(config.env_id, config.num_envs, max_episode_steps=TIME_LIMIT)
    history = []

    def record(ppo: PPO, metrics: dict) -> None:
        history.append({"step": ppo.global_step, **metrics})
        if keep_rollouts:
            buffer = ppo.buffer
            snapshots.append((buffer.obs.reshape(-1, 4).clone(), buffer.actions.reshape(-1).clone(),
                              buffer.log_probs.reshape(-1).clone()))

    trainer = PPO(config, envs=envs, progress=False)
    trainer.train(callback=record)
    if keep_rollouts:
        run.last_trainer = trainer
    return history


ablation_histories = {}
for name, change in ABLATIONS.items():
    ablation_histories[name] = {seed: run(BASE.replace(seed=seed, **change), keep_rollouts=(name.startswith("base") and seed == SEEDS[0]))
                                for seed in SEEDS}
    print(f"ran {name}")


def run_summary(name: str) -> dict:
    finals, overall = [], []
    for history in ablation_histories[name].values():
        tail = history[-max(1, len(history) // 4):]
        finals.append(sum(row["episode_return_recent"] for row in tail) / len(tail))
        overall.append(sum(row["episode_return_recent"] for row in history) / len(history))
    return {"setting": name, "final return": mean_and_spread(finals), "mean return over the run": mean_and_spread(overall),
            "_final": sum(finals) / len(finals)}


ablation_rows = [run_summary(name) for name in ABLATIONS]
print_table([{k: v for k, v in row.items() if not k.startswith("_")} for row in ablation_rows],
            title=f"Ablations on CartPole with a {TIME_LIMIT}-step limit, {len(SEEDS)} seeds "
                  f"(final: last quarter of the run; mean ± std over seeds)")
base_final = ablation_rows[0]["_final"]
for row in ablation_rows[1:]:
    print(f"  {row['setting']:>25}: final return {row['_final'] - base_final:+.1f} relative to the base run")

figure, axis = plt.subplots(figsize=(8, 4.8))
for name in ABLATIONS:
    histories = list(ablation_histories[name].values())
    curves = torch.tensor([[row["episode_return_recent"] for row in history] for history in histories])
    axis.plot([row["step"] for row in histories[0]], curves.mean(0), lw=2.5 if name.startswith("base") else 1.3, label=name)
axis.set_xlabel("environment steps")
axis.set_ylabel(f"return, last 20 episodes (limit {TIME_LIMIT})")
axis.set_title(f"Each detail switched off in turn (mean of {len(SEEDS)} seeds)")
axis.legend(fontsize=8)
lecture.save_figure(figure, "ablations.png")

# %% [markdown]
"""
Read the table with the ± in mind: where a difference is smaller than the spread over
seeds, these few seeds have not shown one. A detail that changes little on CartPole
can still earn its place on harder tasks and in the corner cases that Part B makes
visible.

## Part B — mistaken code, each next to the correct version

### 1. A step counter that spans episodes

The mistaken training loop:

```python
steps = 0                                   # set once, before the first episode
for episode in range(num_episodes):
    state, _ = env.reset()
    done = False
    while not done and steps < max_steps:   # meant as a per-episode limit
        ...                                 # act, store the transition
        steps += 1
        if steps % update_every == 0:
            agent.update()
```

`steps` is never reset, so after `max_steps` steps *in total* every later episode ends
its loop before the first step, and with `max_steps = 500 < update_every = 2048` the
counter never reaches `update_every`. `count_updates` below runs this loop with random
actions next to the same loop with a per-episode counter.
"""


# %%
def count_updates(num_episodes: int, per_episode_counter: bool, max_steps: int = 500, update_every: int = 2048):
    env = gym.make("CartPole-v1")
    env.action_space.seed(0)
    total_steps = updates = 0
    for episode in range(num_episodes):
        env.reset(seed=episode)
        done, episode_steps = False, 0
        while not done and (episode_steps if per_episode_counter else total_steps) < max_steps:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            done = terminated or truncated
            total_steps += 1
            episode_steps += 1
            if total_steps % update_every == 0:
                updates += 1
    env.close()
    return {"loop": "per-episode counter" if per_episode_counter else "counter spans episodes (mistaken)",
            "episodes": num_episodes, "transitions collected": total_steps, "updates run": updates}


print_table([count_updates(300, per_episode_counter=False), count_updates(300, per_episode_counter=True)],
            title="Defect 1: who ever calls update()?")
print("The library's trainer never asks about episodes: it collects fixed rollouts of "
      f"num_envs × num_steps steps and updates after each (here {BASE.batch_size} steps).")

# %% [markdown]
"""
### 2. A truncation treated as a termination

An episode cut by the time limit has not ended: the state it was cut in still has a
future. Take the cleanest case — reward 1 every step, a critic that already knows the
value of a balanced pole, V = 1 / (1 − γ) = 100, and an episode cut after 500 steps.
Correctly bootstrapped, every TD error is 1 + γ·100 − 100 = 0: nothing to learn. Treated
as a termination, the last TD error is 1 − 100 = −99, and GAE spreads it backwards: the
last few dozen actions of every perfect episode are punished.
"""

# %%
GAMMA, LAMBDA, LENGTH = 0.99, 0.95, 500
rewards = torch.ones(LENGTH, 1)
values = torch.full((LENGTH, 1), 1 / (1 - GAMMA))
last_step = torch.zeros(LENGTH, 1, dtype=torch.bool)
last_step[-1] = True
no_step = torch.zeros_like(last_step)
correct, _ = compute_gae(rewards, values, values, terminated=no_step, dones=last_step, gamma=GAMMA, gae_lambda=LAMBDA)
mistaken, _ = compute_gae(rewards, values, values, terminated=last_step, dones=last_step, gamma=GAMMA, gae_lambda=LAMBDA)
print_table([{"step t": t, "Â_t, truncation bootstrapped": float(correct[t]), "Â_t, truncation as termination": float(mistaken[t])}
             for t in (LENGTH - 1, LENGTH - 2, LENGTH - 5, LENGTH - 20, LENGTH - 50, LENGTH - 100)],
            title=f"Defect 2a: a perfect {LENGTH}-step episode cut by the time limit (γ = {GAMMA}, λ = {LAMBDA})")
print(f"steps with |Â| > 1: bootstrapped {int((correct.abs() > 1).sum())}, as termination {int((mistaken.abs() > 1).sum())}")

# %% [markdown]
"""
The same code's GAE has a second, smaller slip: inside the rollout the next value is
masked by `done`, but at the rollout's last step it is not, so a rollout that ends
exactly on a termination bootstraps from the value of the *reset* state of the next
episode. `gae_as_in_the_mistaken_code` below is that recursion; the line that differs
from the others is the `next_value` of the last step. A 4-step rollout whose last step
terminates, with V(reset state) = 50:
"""


# %%
def gae_as_in_the_mistaken_code(rewards, values, value_after_rollout, dones, gamma, lam):
    """The mistaken recursion, for one env: the last step's next value is not masked."""
    advantages, running = [], 0.0
    all_values = values + [value_after_rollout]
    for t in reversed(range(len(rewards))):
        next_value = all_values[t + 1] if t == len(rewards) - 1 else all_values[t + 1] * (1 - dones[t])
        delta = rewards[t] + gamma * next_value - values[t]
        running = delta + gamma * lam * (1 - dones[t]) * running
        advantages.insert(0, running)
    return advantages


short_rewards, short_values, short_dones, reset_value = [1.0, 1.0, 1.0, 1.0], [3.0, 2.5, 2.0, 1.0], [0, 0, 0, 1], 50.0
mistaken_advantages = gae_as_in_the_mistaken_code(short_rewards, short_values, reset_value, short_dones, GAMMA, LAMBDA)
as_column = lambda values: torch.tensor(values).unsqueeze(1)  # noqa: E731  (T,) → (T, 1)
terminal = as_column(short_dones).bool()
library_advantages, _ = compute_gae(as_column(short_rewards), as_column(short_values),
                                    as_column(short_values[1:] + [reset_value]), terminal, terminal, GAMMA, LAMBDA)
print_table([{"step": t, "done": short_dones[t], "mistaken Â": mistaken_advantages[t], "ppo.advantages Â": float(library_advantages[t])}
             for t in range(4)], title="Defect 2b: the last step of a rollout that ends on a termination")

# %% [markdown]
"""
### 3. The value loss on unnormalised returns, through a shared trunk

The mistaken update:

```python
returns = discounted_returns(rewards)                  # raw: tens to hundreds on CartPole
advantages = returns - values.detach()
advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
for epoch in range(K):                                 # the whole batch at once, no minibatches
    logits, values = model(states)                     # one network, one trunk, two heads
    loss = policy_loss(logits, advantages) + 0.5 * ((values - returns) ** 2).mean()
    optimizer.zero_grad(); loss.backward(); optimizer.step()
```

With a shared trunk the value loss and the policy loss pull on the same weights. With
advantages whitened to unit scale but value targets left as raw returns (tens to
hundreds on CartPole), the value term's gradient can dwarf the policy's, and after the
global gradient-norm clip the policy gets a sliver of the step. We measure both
gradients on the trunk for one rollout of a network trained for a few iterations, once
with raw returns and once for a critic whose targets (and predictions) are measured in
units of the returns' standard deviation.
"""

# %%
shared_config = BASE.replace(shared_network=True, seed=1, total_timesteps=10**6)
shared = PPO(shared_config, training_envs(shared_config), progress=False)
for _ in range(lecture.choose(full=8, quick=1)):
    shared.collect_rollout()
    shared.update(*shared.compute_advantages())
shared.collect_rollout()
advantages, returns = shared.compute_advantages()
obs = shared.buffer.obs.reshape(-1, 4)
actions = shared.buffer.actions.reshape(-1)
old_log_probs = shared.buffer.log_probs.reshape(-1)
returns = returns.reshape(-1).clone()
trunk = list(shared.model.actor_body.parameters())


def trunk_gradient(loss: torch.Tensor) -> torch.Tensor:
    return torch.cat([g.flatten() for g in torch.autograd.grad(loss, trunk, retain_graph=True)])


new_log_probs, _, new_values = shared.model.evaluate_actions(obs, actions)
policy_gradient = trunk_gradient(clipped_surrogate_loss(new_log_probs, old_log_probs, normalize_advantages(advantages.reshape(-1)), 0.2))
scale_rows = []
return_scale = returns.std()
for label, scale in (("raw returns", 1.0), ("in units of std(R)", return_scale)):
    # A critic that predicts returns in units of their std: V/σ against R/σ.
    value_gradient = trunk_gradient(BASE.vf_coef * value_loss(new_values / scale, None, returns / scale))
    total = policy_gradient + value_gradient
    scale_rows.append({
        "value targets": label, "target std": float(returns.std() / scale),
        "|∇ policy|": float(policy_gradient.norm()), "|∇ c_v·value|": float(value_gradient.norm()),
        "value / policy": float(value_gradient.norm() / policy_gradient.norm()),
        "cos(total, policy)": float(F.cosine_similarity(total, policy_gradient, dim=0)),
    })
print_table(scale_rows, title="Defect 3: gradients on a shared trunk (one rollout)")
print("The library's defaults avoid the collision: separate actor and critic networks (shared_network=False), "
      "and reward scaling by the return's running std is one flag away (normalize_reward). The mistaken code's other "
      "choice, one full batch per epoch, is the last row of the Part A table.")

# %% [markdown]
"""
### 4. The ratio taken against the reference model

In RLHF there are two "old" policies: π_old, the policy that generated this batch, and
π_ref, the frozen supervised model the KL penalty anchors to. The ratio in the clipped
loss must use π_old. The mistaken pseudocode divides by π_ref instead:

```python
logprobs_ref = reference_model.log_probs(completions)      # frozen SFT model
for epoch in range(K):
    logprobs = policy.log_probs(completions)
    ratio = torch.exp(logprobs - logprobs_ref)              # should be logprobs - logprobs_old
    loss = -torch.min(ratio * advantages, torch.clamp(ratio, 1 - eps, 1 + eps) * advantages).mean()
```

Once the policy has
drifted from π_ref — which is the point of training — most ratios are far outside
[1 − ε, 1 + ε] on the *first* minibatch, and the clip switches their gradient off before
the update has moved anything. Tensors are enough to see it: token distributions of a
reference and of policies that have drifted from it by increasing amounts.
"""

# %%
torch.manual_seed(0)
VOCABULARY, SEQUENCES, LENGTH_TOKENS = 16, 64, 8
reference_logits = torch.randn(SEQUENCES, LENGTH_TOKENS, VOCABULARY)
drift_rows = []
for drift in (0.0, 0.5, 1.0, 2.0, 3.0):
    policy_logits = reference_logits + drift * torch.randn_like(reference_logits)
    policy = Categorical(logits=policy_logits)
    tokens = policy.sample()  # (B, L) generated by the current policy, which is π_old here
    policy_log_probs = policy.log_prob(tokens).requires_grad_(True)
    reference_log_probs = Categorical(logits=reference_logits).log_prob(tokens)
    token_advantages = torch.randn(SEQUENCES, LENGTH_TOKENS)
    clipped_surrogate_loss(policy_log_probs, reference_log_probs, token_advantages, 0.2).backward()
    drift_rows.append({
        "KL(π ‖ π_ref), nats/token": float(torch.distributions.kl_divergence(policy, Categorical(logits=reference_logits)).mean()),
        "clip fraction, ratio to π_old": float(clip_fraction(policy_log_probs.detach(), policy_log_probs.detach(), 0.2)),
        "clip fraction, ratio to π_ref": float(clip_fraction(policy_log_probs.detach(), reference_log_probs, 0.2)),
        "tokens with no gradient (π_ref)": float((policy_log_probs.grad == 0).float().mean()),
    })
print_table(drift_rows, title="Defect 4: the first minibatch of an update, ratio against π_old vs against π_ref")

# %% [markdown]
"""
### 5. Log-probabilities computed once, outside the epoch loop

The ratio r = π_θ / π_old must be recomputed from the *current* θ in every epoch; that
is the only way the clip can see how far the update has gone. The mistaken code:

```python
logprobs = policy.log_probs(completions)            # once, before the loop
for epoch in range(K):
    ratio = torch.exp(logprobs - logprobs_old)      # the same tensor every epoch
    loss = -torch.min(ratio * adv, torch.clamp(ratio, 1 - eps, 1 + eps) * adv).mean()
    loss.backward(retain_graph=True); optimizer.step()
```

Compute log π_θ once before the loop and reuse it, and r stays exactly 1 in every epoch: the clip never
engages, the loop reports a clip fraction of 0, and every epoch repeats the first
epoch's gradient. A tabular policy (logits per state) makes the effect exact.
"""

# %%
torch.manual_seed(1)
STATES, ACTIONS, SAMPLES, EPOCHS = 32, 4, 512, 10
old_logits = torch.randn(STATES, ACTIONS)
sample_states = torch.randint(STATES, (SAMPLES,))
sample_actions = Categorical(logits=old_logits[sample_states]).sample()
rollout_log_probs = Categorical(logits=old_logits[sample_states]).log_prob(sample_actions)
sample_advantages = normalize_advantages(torch.randn(SAMPLES))


def exact_kl(logits: torch.Tensor) -> float:
    return float(torch.distributions.kl_divergence(Categorical(logits=old_logits), Categorical(logits=logits)).mean())


def run_epochs(recompute: bool) -> list[dict]:
    logits = old_logits.clone().requires_grad_(True)
    optimizer = torch.optim.Adam([logits], lr=0.05)
    stale = Categorical(logits=logits[sample_states]).log_prob(sample_actions)  # computed once, graph kept
    rows = []
    for epoch in range(1, EPOCHS + 1):
        current = Categorical(logits=logits[sample_states]).log_prob(sample_actions) if recompute else stale
        loss = clipped_surrogate_loss(current, rollout_log_probs, sample_advantages, 0.2)
        optimizer.zero_grad()
        loss.backward(retain_graph=not recompute)
        optimizer.step()
        with torch.no_grad():
            true_log_probs = Categorical(logits=logits[sample_states]).log_prob(sample_actions)
        rows.append({"epoch": epoch, "exact KL(old ‖ new)": exact_kl(logits.detach()),
                     "clip fraction the loop sees": float(clip_fraction(current.detach(), rollout_log_probs, 0.2)),
                     "true clip fraction": float(clip_fraction(true_log_probs, rollout_log_probs, 0.2))})
    return rows


recomputed, reused = run_epochs(recompute=True), run_epochs(recompute=False)
print_table([{"log-probs": "recomputed each epoch", **recomputed[-1]}, {"log-probs": "computed once (mistaken)", **reused[-1]}],
            title=f"Defect 5: after {EPOCHS} epochs on one batch (Adam, lr 0.05)")
figure, axes = plt.subplots(1, 2, figsize=(11, 4))
for rows, label in ((recomputed, "recomputed each epoch"), (reused, "computed once")):
    axes[0].plot([r["epoch"] for r in rows], [r["exact KL(old ‖ new)"] for r in rows], "-o", label=label)
    axes[1].plot([r["epoch"] for r in rows], [r["true clip fraction"] for r in rows], "-o", label=f"{label}: true")
    axes[1].plot([r["epoch"] for r in rows], [r["clip fraction the loop sees"] for r in rows], "--", label=f"{label}: as logged")
axes[0].set_title("KL from the rollout policy")
axes[1].set_title("clip fraction")
for axis in axes:
    axis.set_xlabel("epoch")
    axis.legend(fontsize=8)
lecture.save_figure(figure, "stale_log_probs.png")

# %% [markdown]
"""
### 6. An "entropy" and a "KL" that estimate neither

The mistaken code computes both from the log-probabilities of the *sampled* tokens only:

```python
entropy = -(torch.exp(logprobs) * logprobs).sum()                       # not H[π]
kl = (torch.exp(logprobs_ref) * (logprobs_ref - logprobs)).mean()       # not KL(π ‖ π_ref)
```

With samples drawn from π, an
unbiased entropy estimate is mean(−log π(x)), and the KL estimators of `ppo.losses`
(k1 = −log ρ, k3 = (ρ − 1) − log ρ with ρ = π_ref(x) / π(x)) are unbiased for KL(π ‖ π_ref).
Here all are compared with the exact values, which we can compute for a small vocabulary.
"""

# %%
torch.manual_seed(2)
positions = 4096
policy_logits = torch.randn(positions, VOCABULARY) * 1.5
reference_logits = policy_logits + torch.randn(positions, VOCABULARY)
policy, reference = Categorical(logits=policy_logits), Categorical(logits=reference_logits)
tokens = policy.sample()
log_p, log_p_reference = policy.log_prob(tokens), reference.log_prob(tokens)
print_table([
    {"quantity": "entropy H[π] (mean per token)", "exact": float(policy.entropy().mean()),
     "mistaken formula": float(-(log_p.exp() * log_p).sum()), "sampled estimate": float(-log_p.mean())},
    {"quantity": "KL(π ‖ π_ref) (mean per token)", "exact": float(torch.distributions.kl_divergence(policy, reference).mean()),
     "mistaken formula": float((log_p_reference.exp() * (log_p_reference - log_p)).mean()),
     "sampled estimate": float(kl_estimate(log_p_reference - log_p, "k3"))},
], title=f"Defect 6: {positions} sampled tokens, vocabulary {VOCABULARY} (sampled estimate: −mean log π, and k3)")
print("The trainer uses the exact entropy of each state's action distribution (entropy() of the policy head's "
      "distribution in ppo.networks) and k3 for the approx KL.")

# %% [markdown]
"""
### 7. An "experience replay buffer" for an on-policy method

PPO's loss is built around π_old, the policy that collected the data; its ratio and
its clip assume the data is fresh. The mistaken design keeps an "experience replay
buffer" of 10⁵–10⁶ transitions and samples minibatches from it — data from hundreds of
updates ago:

```python
buffer = deque(maxlen=1_000_000)
...
buffer.extend(new_transitions)
batch = random.sample(buffer, minibatch_size)   # mostly from policies long gone
```
 We kept
every rollout of the base run of Part A and ask, at the end of training, how the final
policy relates to each: the fraction of samples whose ratio is outside [0.8, 1.2] (no
gradient from those in the pessimistic direction) and the KL between the policy that
collected the rollout and the final one.
"""

# %%
final_model = run.last_trainer.model
age_rows = []
for age in [a for a in (0, 1, 2, 5, 10, 20) if a < len(snapshots)]:
    obs_old, actions_old, log_probs_old = snapshots[-1 - age]
    with torch.no_grad():
        log_probs_now, _, _ = final_model.evaluate_actions(obs_old, actions_old)
    age_rows.append({"rollout age (updates ago)": age,
                     "ratio outside [0.8, 1.2]": float(clip_fraction(log_probs_now, log_probs_old, 0.2)),
                     "KL(collector ‖ final), k3": float(kl_estimate(log_probs_now - log_probs_old, "k3"))})
print_table(age_rows, title=f"Defect 7: the final policy against rollouts of the past (batch of {BASE.batch_size})")
print(f"A replay buffer of 10^5 transitions would hold the last {100_000 // BASE.batch_size} rollouts of this run. "
      "ppo.storage.RolloutBuffer holds exactly one rollout and is overwritten every iteration.")

# %% [markdown]
"""
### 8. One completion per episode

A notebook that teaches PPO on a tiny language model (the experiment of lecture 11)
updates the model after every single completion:

```python
for episode in range(300):
    completion = generate(policy, prompt)                 # one sample
    reward = 4.0 if completion.endswith("pizza<EOS>") else 0.0
    ppo_update(policy, critic, [completion], [reward])    # a batch of one
```

Two things go wrong. Whitening advantages over a batch of one gives (Â − Â) / σ = 0, so
either normalisation is skipped or the signal vanishes. And a single sample is a noisy
gradient: with a rule reward (1 if the completion is the target, else 0) and a
starting success rate of 12%, most single completions score 0 and give no gradient at
all without a baseline. A one-token "completion" over a small vocabulary has an exact
policy gradient, so we can measure how well B completions estimate it.
"""

# %%
print(f"normalize_advantages on a batch of one: {normalize_advantages(torch.tensor([3.0])).tolist()}")
target_probability, target_token = 0.12, 0
logits = torch.zeros(VOCABULARY)
logits[target_token] = torch.log(torch.tensor(target_probability * (VOCABULARY - 1) / (1 - target_probability)))
probabilities = logits.softmax(0)
one_hot = torch.eye(VOCABULARY)
exact_gradient = probabilities[target_token] * (one_hot[target_token] - probabilities)  # ∇_z E[R]
trials = lecture.choose(full=2000, quick=200)
generator = torch.Generator().manual_seed(3)
batch_rows = []
for batch_size in (1, 4, 16, 64):
    cosines, zero_updates = [], 0
    for _ in range(trials):
        samples = torch.multinomial(probabilities, batch_size, replacement=True, generator=generator)
        rewards_b = (samples == target_token).float()
        # leave-one-out mean of the other samples' rewards as the baseline (none for B = 1)
        baseline = (rewards_b.sum() - rewards_b) / (batch_size - 1) if batch_size > 1 else torch.zeros(1)
        estimate = ((rewards_b - baseline).unsqueeze(1) * (one_hot[samples] - probabilities)).mean(0)
        if estimate.norm() == 0:
            zero_updates += 1
            cosines.append(0.0)
        else:
            cosines.append(float(F.cosine_similarity(estimate, exact_gradient, dim=0)))
    batch_rows.append({"completions per update": batch_size, "mean cos(estimate, exact gradient)": sum(cosines) / trials,
                       "updates with zero gradient": zero_updates / trials})
print_table(batch_rows, title=f"Defect 8: gradient estimates from B completions ({trials} trials each)")

# %% [markdown]
"""
## What to take away

Every defect in Part B runs without an error, and most produce a learning curve that
goes up for a while. The numbers printed above are what gives them away: updates run
(1), the advantages at a time-limit cut (2), the gradient split on a shared trunk (3),
the clip fraction on the first minibatch (4, 5), estimates against exact values (6),
ratios of old data under the new policy (7), and gradient agreement against batch size
(8). Each of these has a test in `tests/` that fails if the library makes the mistake.
"""

# %%
lecture.finish()
