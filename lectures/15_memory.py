# %% [markdown]
r"""
# Lecture 15 — Memory: when the observation is not the state

**What it teaches.** Every earlier lecture gave the policy an observation that *is* the
state: CartPole's $(x, \dot x, \theta, \dot\theta)$ settles everything the future depends on, so $\pi(a \mid o_t)$
loses nothing by forgetting the past. Remove the velocities and it no longer does. This
lecture measures what that costs a feed-forward policy (an MLP), and two ways to give the
policy a memory:

1. **<a href="../glossary.html#term-Frame-stacking">frame stacking</a>**: the network sees the last $K$ observations; two frames give a finite
   difference, and a finite difference is a velocity;
2. **a <a href="../glossary.html#term-Recurrent-policy">recurrent policy</a>**: a <a href="../glossary.html#term-GRU">GRU</a> carries a state $h_t$ from step to step, and the network
   learns what to keep in it.

A task built so that no stack short of its delay can help (the cue task) separates the
two; and a linear probe from the GRU's state to the hidden velocities shows what the
trained state holds.

**Prerequisites.** Lectures [6](06_ppo_cartpole.ipynb)–[8](08_implementation_details.ipynb) (the <a href="../glossary.html#term-PPO">PPO</a> loop, seeds and confidence intervals).

**Library.** `envs/partially_observable.py` (CartPoleNoVel-v1), `envs/cue_memory.py`
(CueMemory-v0), `envs/frame_stack.py` (`FrameStackVecEnv`, `frame_stack` in PPOConfig),
`ppo/models/recurrent_networks.py` (`RecurrentActorCritic`), `ppo/trainers/ppo.py`
(`PPO`, which trains a recurrent network when the config names a cell; `RecurrentPPO` is its
old name), `ppo/algorithm/sequence_storage.py`; tests in `tests/test_recurrent.py`,
`tests/test_frame_stack.py`, `tests/test_cue_memory.py`; `ppo/trainers/seed_batch.py`
(`PPO(config, envs, seeds=...)`) and `experiments/commands/statistics.py` (`interval_estimates`) for the seeds.
"""

# %%
import math

import numpy as np
import torch

from _common import Lecture, plt, print_table
from envs.classic.cartpole import TorchCartPole
from envs.cue_memory import DEFAULT_DELAY, DEFAULT_NUM_CUES
from envs.factory import gymnasium_env_factory, make_seed_batch_env, make_vec_env
from experiments.commands.plot import mean_curve
from experiments.commands.presets import build_config
from experiments.commands.statistics import interval_estimates
from experiments.commands.train import training_envs
from ppo.runs.evaluation import Policy, evaluate_policy, load_policy
from ppo.trainers.ppo import PPO
from ppo.trainers.recurrent import RecurrentPPO

lecture = Lecture("15_memory", __doc__)

# %% [markdown]
r"""
## 1. Hide the velocities: the MLP fails

`CartPoleNoVel-v1` is CartPole with the observation cut to $o = (x, \theta)$: the same physics,
rewards and time limit, the velocity columns removed (the RL Baselines3 Zoo registers an
env of the same name, with the columns zeroed). The configuration is the course's
CartPole <a href="../glossary.html#term-Preset">preset</a> (`build_config({"env_id": "CartPole-v1", "env_backend": "torch"})`,
[lecture 6](06_ppo_cartpole.ipynb)), with only the env id changed, so that the one thing that differs from
[lecture 6](06_ppo_cartpole.ipynb) is what the policy sees. Seeds 201–210: none of them was used to choose any
setting of this lecture.

**Why an MLP cannot do it.** A feed-forward policy is a function $\pi(a \mid o_t)$. Two states
with the same $(x, \theta)$ and opposite $\dot\theta$ — a pole that is falling right and one that is
swinging back up — give it the same input, so it must act alike in both, though they
need opposite pushes. How often that happens is measured below on the torch env, whose
full state keeps the velocities: among the states that a random policy visits with the
pole near upright ($|\theta| < 0.05$ rad), $\dot\theta$ is positive in some and negative in others: in
the run shown it is positive in 47.3% of them.
"""

# %%
SEEDS = lecture.choose(full=list(range(201, 211)), quick=[201, 202])
EVAL_EPISODES = lecture.choose(full=10, quick=2)
preset = build_config({"env_id": "CartPole-v1", "env_backend": "torch"})
TOTAL_STEPS = lecture.choose(full=preset.total_timesteps, quick=2 * preset.batch_size)
base = preset.replace(env_id="CartPoleNoVel-v1", total_timesteps=TOTAL_STEPS, tensorboard=False)
TAU = TorchCartPole.TAU  # the Euler step, 0.02 s
print(f"CartPoleNoVel-v1 with the CartPole preset: {base.num_envs} envs × {base.num_steps} steps, "
      f"{base.update_epochs} epochs × {base.num_minibatches} minibatches, lr {base.learning_rate}, "
      f"{base.num_iterations} iterations of {base.batch_size:,}, {base.num_iterations * base.batch_size:,} steps; "
      f"seeds {SEEDS[0]}–{SEEDS[-1]}")

random_env = make_vec_env("CartPole-v1", 64, "torch")
random_env.reset(seed=0)
action_generator = torch.Generator().manual_seed(0)
visited = []
for _ in range(lecture.choose(full=200, quick=50)):
    visited.append(random_env.state.clone())  # (N, 4): x, ẋ, θ, θ̇ of every copy
    random_env.step(torch.randint(2, (64,), generator=action_generator))
visited = torch.cat(visited).T  # (4, steps · N)
upright = visited[2].abs() < 0.05
positive_share = float((visited[3][upright] > 0).double().mean())
print(f"random policy, {visited.shape[1]:,} states, {int(upright.sum()):,} with |θ| < 0.05: θ̇ > 0 in "
      f"{positive_share:.1%}, θ̇ < 0 in {1 - positive_share:.1%} (θ̇ from {float(visited[3][upright].min()):.2f} "
      f"to {float(visited[3][upright].max()):.2f} rad/s)")

# %% [markdown]
"""
Now train. Ten seeds of the MLP train as one batched computation (a <a href="../glossary.html#term-Seed-batch">seed batch</a>,
[lecture 6](06_ppo_cartpole.ipynb)), each <a href="../glossary.html#term-Greedy-evaluation">evaluated greedily</a> on gymnasium's CartPoleNoVel-v1 (the same
`evaluate_policy` as `ppo-eval`); [lecture 6](06_ppo_cartpole.ipynb) trained the same preset on full CartPole.
An episode lasts at most 500 steps: in the run shown the MLP's seeds score 37.3 to 48.4.
"""

# %%
COLORS = {"MLP": "tab:gray", "2 frames": "tab:blue", "9 frames": "tab:purple", "10 frames": "tab:green",
          "GRU": "tab:red"}


def train_seed_batch(config, label: str) -> tuple[dict, list]:
    """Train `config` on every seed as one seed batch; returns ({seed: [(step, last-20 return)]}, run folders)."""
    folders = [lecture.path(f"runs/{config.env_id}/{label.replace(' ', '_')}/seed{seed}") for seed in SEEDS]
    for old in (path for folder in folders if folder.exists() for path in folder.iterdir() if path.is_file()):
        old.unlink()  # fresh runs every time
    curves = {seed: [] for seed in SEEDS}

    def keep(batch: PPO, metrics: list[dict]) -> None:
        for seed, row in zip(SEEDS, metrics):
            curves[seed].append((batch.global_step, row["episode_return_recent"]))

    envs = make_seed_batch_env(config.env_id, len(SEEDS), config.num_envs, "torch", frame_stack=config.frame_stack)
    PPO(config, envs, seeds=SEEDS, run_dirs=folders, progress=False).train(keep)
    return curves, folders


def greedy_scores(folders, env_id: str, frame_stack: int, episodes: int) -> list[np.ndarray]:
    """Each run's greedy returns on gymnasium's `env_id`, its frames stacked as in training."""
    return [evaluate_policy(load_policy(folder / "checkpoint.pt"), gymnasium_env_factory(env_id, frame_stack),
                            episodes=episodes) for folder in folders]


curves = {"CartPoleNoVel-v1": {}, "CueMemory-v0": {}}
evaluations = {"CartPoleNoVel-v1": {}, "CueMemory-v0": {}}
curves["CartPoleNoVel-v1"]["MLP"], folders = train_seed_batch(base, "MLP")
evaluations["CartPoleNoVel-v1"]["MLP"] = [float(r.mean()) for r in
                                          greedy_scores(folders, base.env_id, 1, EVAL_EPISODES)]
mlp_scores = evaluations["CartPoleNoVel-v1"]["MLP"]
print("MLP, greedy return per seed: " + ", ".join(f"{score:.1f}" for score in mlp_scores))

# %% tags=["claims"]
lecture.claim("among the near-upright states a random policy visits, each sign of θ̇ comes in more than a quarter "
              "of them", 0.25 < positive_share < 0.75,
              measured=f"θ̇ > 0 in {positive_share:.1%} of {int(upright.sum()):,} states")
lecture.claim("every MLP seed stays below 100", max(mlp_scores) < 100, measured=f"highest {max(mlp_scores):.1f}", quick=False)

# %% [markdown]
r"""
## 2. Frame stacking: a finite difference is a velocity

CartPole integrates with explicit Euler at $\tau = 0.02$ s:

$$
x_{t+1} = x_t + \tau\, \dot x_t, \qquad \theta_{t+1} = \theta_t + \tau\, \dot\theta_t .
$$

So two consecutive positions give the *previous* velocity
exactly, $(x_{t+1} - x_t)/\tau = \dot x_t$, and the current one differs from it by one step's
acceleration, $\tau\, \ddot x_t$. The run checks the identity on the torch env, from the float32
observations a policy sees: it holds to float32 rounding (within $10^{-4}$ rad/s, the
rounding of $x$ over τ).

`frame_stack = 2` (`envs/frame_stack.py`): the network's input is $(o_{t-1}, o_t)$, four
numbers; at an episode's first step it is $(o_0, o_0)$. The MLP can form the difference
itself with one linear layer. Everything else is the MLP's configuration.
"""

# %%
novel_env = make_vec_env("CartPoleNoVel-v1", 64, "torch")
obs = novel_env.reset(seed=1)
differences, velocities = [], []
for _ in range(lecture.choose(full=100, quick=20)):
    state = novel_env.state.clone()  # (N, 4), the state the observation `obs` shows
    result = novel_env.step(torch.randint(2, (64,), generator=action_generator))
    continuing = ~(result.terminated | result.truncated)
    differences.append(((result.final_obs - obs) / TAU)[continuing])  # ((x, θ)_{t+1} − (x, θ)_t) / τ
    velocities.append(state[:, [1, 3]][continuing].float())  # (ẋ_t, θ̇_t)
    obs = result.obs
difference_error = float((torch.cat(differences) - torch.cat(velocities)).abs().max())
print(f"largest |(o_(t+1) − o_t)/τ − (ẋ_t, θ̇_t)| over {len(torch.cat(differences)):,} steps: {difference_error:.1e}")

# %%
STACK = 2
curves["CartPoleNoVel-v1"][f"{STACK} frames"], folders = train_seed_batch(base.replace(frame_stack=STACK),
                                                                           f"{STACK} frames")
evaluations["CartPoleNoVel-v1"][f"{STACK} frames"] = [float(r.mean()) for r in
                                                      greedy_scores(folders, base.env_id, STACK, EVAL_EPISODES)]
stack_scores = evaluations["CartPoleNoVel-v1"][f"{STACK} frames"]
print(f"{STACK} frames, greedy return per seed: " + ", ".join(f"{score:.1f}" for score in stack_scores))

# %% [markdown]
"""
The table gives the <a href="../glossary.html#term-IQM">IQM</a> over the ten seeds with its 95% <a href="../glossary.html#term-Bootstrap-confidence-interval">stratified-bootstrap interval</a>
(`experiments.commands.statistics.interval_estimates`, [lecture 7](07_diagnostics_and_tuning.ipynb)). With two frames the interval
lies entirely above the MLP's (in the run shown, IQM 436 [361, 500] against 44.7 [42.3,
47.1]): the stack recovers most of what hiding the velocities took. It does not recover
all of it on every seed (its lowest seed scores 254); the per-seed <a href="../glossary.html#term-Return">returns</a> printed above
show the spread.
"""

# %%
BOOTSTRAP_REPS = lecture.choose(full=2000, quick=200)


def interval_table(scores: dict[str, list[float]], title: str, digits: int = 3) -> dict:
    estimates = interval_estimates({name: np.array(values) for name, values in scores.items()},
                                   reps=BOOTSTRAP_REPS, seed=0)
    print_table([{"policy": name, "seeds": len(values), "IQM [95% CI]":
                  f"{estimates[name]['iqm']:.{digits}g} [{estimates[name]['iqm_low']:.{digits}g}, "
                  f"{estimates[name]['iqm_high']:.{digits}g}]",
                  "lowest seed": min(values), "highest seed": max(values)} for name, values in scores.items()],
                title=title)
    return estimates


estimates = interval_table(evaluations["CartPoleNoVel-v1"],
                           f"CartPoleNoVel-v1, greedy return ({EVAL_EPISODES} episodes per seed), "
                           f"{base.num_iterations * base.batch_size:,} steps")

# %% tags=["claims"]
lecture.claim("two consecutive positions give the previous velocity to float32 rounding (within 10⁻⁴)",
              difference_error < 1e-4, measured=f"largest difference {difference_error:.1e}")
mlp, stacked = estimates["MLP"], estimates[f"{STACK} frames"]
lecture.claim("with two frames the IQM's interval lies entirely above the MLP's", stacked["iqm_low"] > mlp["iqm_high"],
              measured=f"{STACK} frames [{stacked['iqm_low']:.1f}, {stacked['iqm_high']:.1f}], "
                       f"MLP [{mlp['iqm_low']:.1f}, {mlp['iqm_high']:.1f}]", quick=False)
lecture.claim("the stack recovers most of what hiding the velocities took (more than half of the MLP's gap to 500)",
              stacked["iqm"] - mlp["iqm"] > 0.5 * (500 - mlp["iqm"]),
              measured=f"IQM {stacked['iqm']:.1f} against the MLP's {mlp['iqm']:.1f}", quick=False)
lecture.claim("the stack does not recover all of it on every seed", min(stack_scores) < 500,
              measured=f"lowest seed {min(stack_scores):.1f}", quick=False)

# %% [markdown]
r"""
## 3. The cue task: what a stack cannot reach

`CueMemory-v0` (`envs/cue_memory.py`) shows one of $C = 4$ cues at $t = 0$, then $D = 8$ blank
steps, then a question flag; the action at the question is the answer, rewarded 1 if it
names the cue. The return of an episode is 1 or 0, so the mean return is the success
rate. The env's docstring proves that any memoryless policy is right exactly $1/C$ of the
time: at the question the observation is $(0, \ldots, 0, 1)$ whatever the cue, so the answer is
drawn from one distribution $p$ for every cue, and

$$
P(\text{answer} = \text{cue}) = \sum_c \frac1C\, p(c) = \frac1C,
$$

whatever $p$ is. The same holds for a stack of $F \le D + 1$ frames: all of them are cue-free at
the question. $D + 2 = 10$ frames reach back to $t = 0$.

Three settings, ten seeds each, the same preset as above (64 envs × 32 steps) for a
shorter budget, 12 <a href="../glossary.html#term-Iteration">iterations</a>, enough for 10 frames (below): the MLP,
9 frames ($= D + 1$, the longest stack the proof covers) and 10 frames. Each seed is
evaluated greedily on 200 episodes of gymnasium's CueMemory-v0; the 2,000 episodes of a
setting are pooled into one success rate, and a rate is "at chance" when it lies within
three standard errors, $3\sqrt{\tfrac14 \cdot \tfrac34 / n}$, of $\tfrac14$.
"""

# %%
CUE_STEPS = lecture.choose(full=12, quick=2) * base.batch_size
CUE_EPISODES = lecture.choose(full=200, quick=20)
cue_base = base.replace(env_id="CueMemory-v0", total_timesteps=CUE_STEPS)
CUE_STACKS = {"MLP": 1, f"{DEFAULT_DELAY + 1} frames": DEFAULT_DELAY + 1, f"{DEFAULT_DELAY + 2} frames": DEFAULT_DELAY + 2}
pooled_success = {}
for label, frames in CUE_STACKS.items():
    curves["CueMemory-v0"][label], folders = train_seed_batch(cue_base.replace(frame_stack=frames), label)
    returns = greedy_scores(folders, cue_base.env_id, frames, CUE_EPISODES)
    evaluations["CueMemory-v0"][label] = [float(r.mean()) for r in returns]
    pooled_success[label] = (float(np.concatenate(returns).mean()), sum(len(r) for r in returns))


def chance_band(episodes: int) -> float:
    """Three standard errors of a success rate of 1/C over `episodes` episodes."""
    p = 1 / DEFAULT_NUM_CUES
    return 3 * math.sqrt(p * (1 - p) / episodes)


print_table([{"policy": label, "frames seen": frames, "pooled success": pooled_success[label][0],
              "episodes": pooled_success[label][1], "chance ± 3 s.e.":
              f"{1 / DEFAULT_NUM_CUES:.2f} ± {chance_band(pooled_success[label][1]):.3f}",
              "lowest seed": min(evaluations["CueMemory-v0"][label]),
              "highest seed": max(evaluations["CueMemory-v0"][label])}
             for label, frames in CUE_STACKS.items()],
            title=f"CueMemory-v0 (delay {DEFAULT_DELAY}, {DEFAULT_NUM_CUES} cues), greedy success, "
                  f"{CUE_STEPS:,} steps per seed")

# %% tags=["claims"]
for label in ("MLP", f"{DEFAULT_DELAY + 1} frames"):
    rate, episodes = pooled_success[label]
    lecture.claim(f"{label}: the pooled success rate is at chance, within 3 standard errors of 1/4",
                  abs(rate - 1 / DEFAULT_NUM_CUES) < chance_band(episodes),
                  measured=f"{rate:.3f} over {episodes:,} episodes (band ±{chance_band(episodes):.3f})")
reach_rate = pooled_success[f"{DEFAULT_DELAY + 2} frames"][0]
lecture.claim("10 frames answer right at least 95% of the time", reach_rate >= 0.95,
              measured=f"pooled success {reach_rate:.3f}", quick=False)

# %% [markdown]
r"""
## 4. The recurrent policy

`ppo/models/recurrent_networks.py`: the MLP's hidden layers, then a GRU cell, then the heads.
The <a href="../glossary.html#term-Actor-critic">actor and the critic</a> each have their own (the config's `shared_network = False`, as
for the feed-forward network), stepped together as one batched computation. Per step,
with $x_t$ the hidden layers' output for $o_t$:

$$
\begin{aligned}
h_{t-1} &\leftarrow h_{t-1} \cdot (1 - \text{start}_t) \qquad \text{(a new episode forgets the last)}\\
r &= \sigma(W_r x_t + U_r h_{t-1} + b_r)\\
z &= \sigma(W_z x_t + U_z h_{t-1} + b_z)\\
n &= \tanh\big(W_n x_t + b_n + r \odot (U_n h_{t-1} + b'_n)\big)\\
h_t &= (1 - z) \odot n + z \odot h_{t-1}\\
\pi(a \mid o_{\le t}) &= \operatorname{softmax}\big(\operatorname{head}(h_t)\big)
\end{aligned}
$$

`recurrent = "lstm"` swaps the cell for an LSTM (a state $(h, c)$ and four gates). What the
trainer (`ppo/trainers/ppo.py`, `PPO` on a recurrent config) must get right, each with the test
in `tests/test_recurrent.py` that fails when it is wrong:

* **the state resets where an episode starts** — at the first reset and at every
  autoreset step, before the cell reads the new episode's first observation
  (`test_unroll_zeroes_the_state_before_an_episodes_first_observation`,
  `test_rollout_marks_the_first_reset_and_every_autoreset_step_as_an_episode_start`);
* **the update replays each sequence from the state it started the <a href="../glossary.html#term-Rollout">rollout</a> with**, so the
  recomputed log-probs are the rollout's and the first <a href="../glossary.html#term-Minibatch">minibatch</a> has $r_t = 1$
  (`test_first_minibatch_of_every_update_has_ratio_one_to_rounding`,
  `test_replaying_from_a_zero_state_instead_of_the_stored_one_breaks_ratio_one`);
* **a minibatch is whole env sequences**, T steps in order, never shuffled steps: the
  recurrence needs $h_{t-1}$ to compute $h_t$
  (`test_an_epochs_minibatches_are_whole_env_sequences_each_env_once_in_order`).

The configuration departs from the preset in one place, for time: the update loops over
the $T = 32$ steps of a sequence in Python, once per minibatch and <a href="../glossary.html#term-Epoch">epoch</a>, so the GRU runs
4 epochs of one minibatch (all 64 sequences) instead of 6 epochs of 4 — 128 steps of the
cell per iteration instead of 768. (The SB3 zoo's recurrent settings for this env run 20 epochs of one minibatch of
8 sequences on 8 envs: many more passes per sample, and several times slower here.)
Each seed here is a recurrent `PPO` run of its own (`ppo-train --seeds` would stack them
as one batch), and a GRU iteration costs more than the MLP's, so the
lecture trains fewer of them: three.
"""

# %%
GRU_SEEDS = lecture.choose(full=SEEDS[:3], quick=SEEDS[:1])
gru_config = base.replace(recurrent="gru", num_minibatches=1, update_epochs=4)
cell_steps = {name: config.update_epochs * config.num_minibatches * config.num_steps
              for name, config in (("GRU", gru_config), ("preset", base))}


def train_recurrent(config, seeds) -> tuple[dict, dict]:
    """One RecurrentPPO run per seed; returns ({seed: curve}, {seed: trainer})."""
    runs_curves, trainers = {}, {}
    for seed in seeds:
        folder = lecture.path(f"runs/{config.env_id}/GRU/seed{seed}")
        for old in (path for path in folder.iterdir() if path.is_file()) if folder.exists() else ():
            old.unlink()
        seed_config = config.replace(seed=seed)
        trainer = RecurrentPPO(seed_config, training_envs(seed_config), run_dir=folder, progress=False)
        runs_curves[seed] = []
        trainer.train(callback=lambda ppo, metrics, seed=seed: runs_curves[seed].append(
            (ppo.global_step, metrics["episode_return_recent"])))
        trainers[seed] = trainer
    return runs_curves, trainers


curves["CartPoleNoVel-v1"]["GRU"], gru_trainers = train_recurrent(gru_config, GRU_SEEDS)
gru_scores = [float(evaluate_policy(load_policy(trainer.run_dir / "checkpoint.pt"),
                                    gymnasium_env_factory(base.env_id), episodes=EVAL_EPISODES).mean())
              for trainer in gru_trainers.values()]
evaluations["CartPoleNoVel-v1"]["GRU"] = gru_scores
print("GRU, greedy return per seed: " + ", ".join(f"{score:.1f}" for score in gru_scores))

# %% [markdown]
r"""
The GRU escapes the MLP's trap: each of its three seeds scores above every MLP seed (were
the two alike, three runs of one beating all ten of the other would happen once in
$\binom{13}{3}$ draws). But within the same 98,304 steps it stays short of the
two-frame stack: each GRU seed ends below the lower end of the stack's IQM interval (in
the run shown, 182 to 343 against 361). The
stack hands the first layer both positions, and a finite difference is one linear layer
away; the GRU has to discover through backpropagation in time that the previous step is
worth keeping, with fewer gradient steps per iteration (the cheaper configuration
above) on top. When the missing information is a short-window function of the
observations, the stack is the stronger baseline.

Ratio one, measured. On the first GRU run: one more rollout, then its log-probs
recomputed the way the update does (`model.evaluate_actions` over the stored sequences,
from the stored initial states), and again from zero initial states, the bug the second
test plants. From the stored states the log-probs are the rollout's to float32
rounding (within $10^{-5}$); from zero states they are off by more than $10^{-3}$ at some step —
each env's first steps of the rollout are read as if an episode had just begun.
"""

# %%
trainer = gru_trainers[GRU_SEEDS[0]]
trainer.collect_rollout()
buffer = trainer.buffer
with torch.no_grad():
    replayed, _, _ = trainer.model.evaluate_actions(buffer.obs, buffer.actions, buffer.initial_state,
                                                    buffer.episode_starts)
    from_zero, _, _ = trainer.model.evaluate_actions(buffer.obs, buffer.actions,
                                                     torch.zeros_like(buffer.initial_state), buffer.episode_starts)
stored_gap = float((replayed - buffer.log_probs).abs().max())
zero_gap = float((from_zero - buffer.log_probs).abs().max())
print(f"largest |log π recomputed − log π of the rollout|: from the stored states {stored_gap:.1e}, "
      f"from zero states {zero_gap:.1e}")

# %% [markdown]
"""
On the cue task the GRU runs the preset itself (6 epochs of 4 minibatches, affordable
here) with one change: $T = 10$ steps per sequence instead of 32. Every episode lasts
exactly $D + 2 = 10$ steps and all copies start together, so each rollout's sequence is
one whole episode: the gradient of the answer's log-prob flows back through the GRU to
the step that saw the cue. Its budget is 48 iterations of 64 × 10 steps, 30,720 steps
(the stacks above had 24,576). (With $T = 32$ an episode
can straddle two rollouts; the update never backpropagates across that cut, and those
episodes teach the memory nothing.)
"""

# %%
GRU_CUE_ITERATIONS = lecture.choose(full=48, quick=2)
gru_cue_config = cue_base.replace(recurrent="gru", num_steps=DEFAULT_DELAY + 2)
gru_cue_config = gru_cue_config.replace(total_timesteps=GRU_CUE_ITERATIONS * gru_cue_config.batch_size)
curves["CueMemory-v0"]["GRU"], gru_cue_trainers = train_recurrent(gru_cue_config, GRU_SEEDS)
gru_cue_returns = [evaluate_policy(load_policy(trainer.run_dir / "checkpoint.pt"),
                                   gymnasium_env_factory("CueMemory-v0"), episodes=CUE_EPISODES)
                   for trainer in gru_cue_trainers.values()]
evaluations["CueMemory-v0"]["GRU"] = [float(r.mean()) for r in gru_cue_returns]
pooled_success["GRU"] = (float(np.concatenate(gru_cue_returns).mean()), sum(len(r) for r in gru_cue_returns))
print(f"GRU on CueMemory-v0 ({gru_cue_config.total_timesteps:,} steps): greedy success per seed "
      + ", ".join(f"{rate:.3f}" for rate in evaluations["CueMemory-v0"]["GRU"])
      + f"; pooled {pooled_success['GRU'][0]:.3f} over {pooled_success['GRU'][1]} episodes")

gru_cue_mean = np.mean([[rate for _, rate in curve] for curve in curves["CueMemory-v0"]["GRU"].values()], axis=0)
print(f"GRU's mean training success over seeds: peak {gru_cue_mean.max():.3f} at iteration "
      f"{int(gru_cue_mean.argmax()) + 1}, end {gru_cue_mean[-1]:.3f}")
first_above = int(np.argmax(gru_cue_mean >= 0.9)) + 1 if gru_cue_mean.max() >= 0.9 else GRU_CUE_ITERATIONS + 1
steps_to_first = first_above * gru_cue_config.batch_size
print(f"GRU's mean training success first at 0.9 or more: iteration {first_above} ({steps_to_first:,} steps)")

# %% [markdown]
"""
The GRU carries the cue across the delay, where no stack of 9 frames could: in the run
shown every seed answers right in all 200 of its evaluation episodes, as 10 frames do. The red curve on the right
shows the GRU's mean training success reaching 0.9 after 7,680 steps, fewer than 10
frames' whole budget (12 iterations of 2,048, 24,576 steps), and ending at 1.000. The stack is handed the cue as an input; the GRU
has to learn to keep it, through a gradient that crosses eight blank steps, and on this
task it learns that quickly.

The learning curves (the mean of the last 20 training episodes, sampled actions; mean
over seeds with a 95% <a href="../glossary.html#term-t-interval">t-interval</a> band, `experiments.commands.plot.mean_curve`). Left: on
CartPoleNoVel the MLP's curve stays flat near the bottom; two frames and the GRU climb.
The GRU's band, over three seeds, is wide (a t-interval with two degrees
of freedom). Right: on the cue task the MLP and 9 frames stay on the chance line, 10
frames and the GRU leave it.
"""

# %%
figure, axes = plt.subplots(1, 2, figsize=(13, 4.4))
for axis, (env_id, by_method) in zip(axes, curves.items()):
    for label, per_seed in by_method.items():
        curve = mean_curve([(np.array([s for s, _ in c]), np.array([r for _, r in c])) for c in per_seed.values()])
        axis.plot(curve["x"], curve["mean"], color=COLORS[label], lw=2, label=f"{label} ({len(per_seed)} seeds)")
        if len(per_seed) > 1:
            axis.fill_between(curve["x"], curve["low"], curve["high"], color=COLORS[label], alpha=0.2)
    axis.set_xlabel("environment steps")
    axis.set_title(env_id)
axes[0].set_ylabel("return, last 20 training episodes")
axes[1].set_ylabel("success rate, last 20 training episodes")
axes[1].axhline(1 / DEFAULT_NUM_CUES, color="black", lw=0.8, ls=":", label="chance, 1/4")
axes[0].set_ylim(0, 500)  # 500: the longest episode
axes[1].set_ylim(0, 1.05)  # a success rate (the GRU's three-seed band reaches beyond it)
for axis in axes:
    axis.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
lecture.save_figure(figure, "learning_curves.png")

# %% tags=["claims"]
lecture.claim("128 steps of the cell per iteration instead of 768", (cell_steps["GRU"], cell_steps["preset"]) == (128, 768),
              measured=f"epochs × minibatches × T: {cell_steps['GRU']} here, {cell_steps['preset']} with the preset")
lecture.claim("every GRU seed scores above every MLP seed", min(gru_scores) > max(mlp_scores),
              measured=f"GRU lowest {min(gru_scores):.1f}, MLP highest {max(mlp_scores):.1f}", quick=False)
lecture.claim("each GRU seed ends below the lower end of the two-frame IQM's interval",
              max(gru_scores) < stacked["iqm_low"],
              measured=f"GRU highest {max(gru_scores):.1f}, two frames' interval from {stacked['iqm_low']:.1f}",
              quick=False)
lecture.claim("replayed from the stored states the log-probs are the rollout's within 10⁻⁵", stored_gap < 1e-5,
              measured=f"{stored_gap:.1e}")
lecture.claim("replayed from zero states they are off by more than 10⁻³ at some step", zero_gap > 1e-3,
              measured=f"{zero_gap:.1e}", quick=False)
lecture.claim("its budget is 48 iterations of 64 × 10 steps, 30,720 steps (the stacks above had 24,576)",
              (gru_cue_config.num_iterations, gru_cue_config.num_envs, gru_cue_config.num_steps,
               gru_cue_config.total_timesteps, cue_base.total_timesteps) == (48, 64, 10, 30_720, 24_576),
              measured=f"{gru_cue_config.num_iterations} iterations of {gru_cue_config.num_envs} × "
                       f"{gru_cue_config.num_steps}, {gru_cue_config.total_timesteps:,} steps; stacks "
                       f"{cue_base.total_timesteps:,}", quick=False)
gru_cue_rates = evaluations["CueMemory-v0"]["GRU"]
lecture.claim("the GRU answers far above chance on every seed (above 0.5)", min(gru_cue_rates) > 0.5,
              measured="per seed " + ", ".join(f"{rate:.3f}" for rate in gru_cue_rates), quick=False)
lecture.claim("every seed is right every time or nearly (at least 0.95), as 10 frames are", min(gru_cue_rates) >= 0.95,
              measured="per seed " + ", ".join(f"{rate:.3f}" for rate in gru_cue_rates), quick=False)
lecture.claim("the GRU's mean training success reaches 0.9 in fewer steps than 10 frames' whole budget, and ends at "
              "0.9 or more", steps_to_first < CUE_STEPS and gru_cue_mean[-1] >= 0.9,
              measured=f"first at 0.9 or more after {steps_to_first:,} steps (iteration {first_above} of "
                       f"{GRU_CUE_ITERATIONS}); 10 frames' budget {CUE_STEPS:,}; end {gru_cue_mean[-1]:.3f}",
              quick=False)

# %% [markdown]
r"""
## 5. What the hidden state learned

The GRU was never told that velocities exist. Does its state $h_t$ hold them? A **linear
probe** asks: fit $\dot x_t$ and $\dot\theta_t$ as an affine function of $h_t$ by least squares, on states
the trained policy visits, and measure

$$
R^2 = 1 - \frac{\sum (y - \hat y)^2}{\sum (y - \bar y)^2}
$$

on *held-out
episodes* (the probe never saw them). The torch env supplies the targets: its full state
keeps the velocities the policy does not see.

Two probes on the same steps frame the answer: one from the raw observation $(x_t, \theta_t)$ —
the MLP's input — and one from the two-frame stack $(x_{t-1}, \theta_{t-1}, x_t, \theta_t)$, which by
section 2 holds the previous velocity exactly. The rollout: 16 copies of the first GRU
run's policy with sampled actions; the probes are fitted on 12 copies' episodes and scored
on the other 4.

What the run shows: from the raw observation
the probe explains almost nothing of $\dot\theta$ ($R^2$ 0.018). It does explain part of $\dot x$
($R^2$ 0.474), not because $(x, \theta)$
holds the velocity but because this policy's episodes tie the two: the cart drifts, and
where it is says roughly how fast (the grey columns of the left panel: one position,
a range of velocities). From the GRU's state the probe explains most of both ($R^2$ 0.948
and 0.908): the red points lie along the diagonal. The GRU was trained on
returns alone and has learned to carry the velocities. The two-frame stack, a hand-made
feature that is the velocity one step late, does about as well (0.954 and 0.897).
"""

# %%
PROBE_STEPS = lecture.choose(full=500, quick=60)
PROBE_ENVS, TRAIN_ENVS = 16, 12
probe_env = make_vec_env("CartPoleNoVel-v1", PROBE_ENVS, "torch")
obs = probe_env.reset(seed=12_345)  # not a training seed
policy = Policy(trainer.model, trainer.config, None)
start = torch.ones(PROBE_ENVS, dtype=torch.bool)
previous = obs.clone()
probe_generator = torch.Generator().manual_seed(12_345)
records = {"hidden": [], "raw": [], "stacked": [], "velocity": []}
for _ in range(PROBE_STEPS):
    previous = torch.where(start.unsqueeze(1), obs, previous)  # the stack's (o_0, o_0) at an episode start
    velocity = probe_env.state[:, [1, 3]].float()  # (N, 2): ẋ_t, θ̇_t of the state o_t shows
    action = policy.act(obs, greedy=False, generator=probe_generator, episode_start=start)
    records["hidden"].append(policy.state[:, 0, : trainer.model.recurrent_size].clone())  # the actor's h_t
    records["raw"].append(obs)
    records["stacked"].append(torch.cat([previous, obs], dim=1))
    records["velocity"].append(velocity)
    result = probe_env.step(action)
    previous, obs = obs, result.obs
    start = result.terminated | result.truncated
data = {name: torch.stack(rows).double() for name, rows in records.items()}  # (T, N, ...)


def probe(features: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Least-squares affine probe fitted on the first TRAIN_ENVS copies; (R² per target, predictions) on the rest."""
    def design(rows):
        flat = rows.reshape(-1, rows.shape[-1])
        return torch.cat([flat, torch.ones(len(flat), 1, dtype=flat.dtype)], dim=1)

    train_x, test_x = design(features[:, :TRAIN_ENVS]), design(features[:, TRAIN_ENVS:])
    train_y, test_y = (targets[:, :TRAIN_ENVS].reshape(-1, 2), targets[:, TRAIN_ENVS:].reshape(-1, 2))
    weights = torch.linalg.lstsq(train_x, train_y).solution
    predicted = test_x @ weights
    r2 = 1 - ((test_y - predicted) ** 2).sum(0) / ((test_y - test_y.mean(0)) ** 2).sum(0)
    return r2, predicted


r2 = {}
predictions = {}
held_out = data["velocity"][:, TRAIN_ENVS:].reshape(-1, 2)
for name, label in (("raw", "raw observation (x, θ)"), ("stacked", "two frames (x, θ)_{t−1,t}"),
                    ("hidden", f"GRU state h_t ({trainer.model.recurrent_size} numbers)")):
    r2[name], predictions[name] = probe(data[name], data["velocity"])
print_table([{"probe input": label, "R² of ẋ (held out)": float(r2[name][0]), "R² of θ̇ (held out)": float(r2[name][1])}
             for name, label in (("raw", "raw observation (x, θ)"), ("stacked", "two frames"),
                                 ("hidden", f"GRU state h_t ({trainer.model.recurrent_size} numbers)"))],
            title=f"Linear probes to the hidden velocities: fitted on {TRAIN_ENVS} copies × {PROBE_STEPS} steps, "
                  f"scored on {PROBE_ENVS - TRAIN_ENVS} held-out copies ({len(held_out):,} steps)")

# %%
figure, axes = plt.subplots(1, 2, figsize=(11, 4.5))
for column, (axis, name) in enumerate(zip(axes, ("cart velocity ẋ (m/s)", "pole angular velocity θ̇ (rad/s)"))):
    truth = held_out[:, column].numpy()
    for key, label, color in (("raw", "from (x, θ)", COLORS["MLP"]), ("hidden", "from the GRU state", COLORS["GRU"])):
        axis.scatter(truth, predictions[key][:, column].numpy(), s=3, alpha=0.3, color=color,
                     label=f"{label}: R² {float(r2[key][column]):.2f}")
    low, high = float(truth.min()), float(truth.max())
    axis.plot([low, high], [low, high], color="black", lw=0.8, ls="--", label="predicted = true")
    axis.set_xlabel(f"true {name}")
    axis.set_ylabel(f"probe's prediction, {name.split(' (')[1][:-1]}")
    axis.set_title(f"Held-out episodes: {name.split(' (')[0]}")
    axis.legend(fontsize=8, loc="upper left", markerscale=4)
lecture.save_figure(figure, "probe.png")

# %% tags=["claims"]
lecture.claim("from the raw observation the probe explains almost nothing of θ̇ (R² below 0.1)",
              float(r2["raw"][1]) < 0.1, measured=f"R² of θ̇ {float(r2['raw'][1]):.3f}", quick=False)
lecture.claim("it does explain part of ẋ (R² between 0.3 and 0.7)", 0.3 < float(r2["raw"][0]) < 0.7,
              measured=f"R² of ẋ {float(r2['raw'][0]):.3f}", quick=False)
lecture.claim("from the GRU's state the probe explains most of both (R² above 0.85)", bool((r2["hidden"] > 0.85).all()),
              measured=f"R² {float(r2['hidden'][0]):.3f}, {float(r2['hidden'][1]):.3f}", quick=False)
lecture.claim("the two-frame stack does about as well (within 0.05 of the GRU's state on both)",
              bool(((r2["stacked"] - r2["hidden"]).abs() < 0.05).all()),
              measured=f"stack {float(r2['stacked'][0]):.3f}, {float(r2['stacked'][1]):.3f}; hidden "
                       f"{float(r2['hidden'][0]):.3f}, {float(r2['hidden'][1]):.3f}", quick=False)

# %% [markdown]
r"""
## What to take away

* Hiding the velocities breaks a feed-forward policy on a task it solves with them: the
  observation no longer determines the state.
* When the missing quantity is a short-window function of past observations (a
  velocity), a stack of frames recovers it, cheaply, with the feed-forward machinery.
* When the information lies further back than the stack reaches, no stack of $F \le D + 1$
  frames does better than chance, provably; a recurrent policy can carry it, at the
  price of sequence minibatches, stored initial states, resets at episode starts and a
  slower update.
* A linear probe is a cheap way to ask what a recurrent state holds.

Exercise: train the GRU with `recurrent = "lstm"`, or with a longer budget, and compare
the returns and the probes; on the cue task, lengthen the delay (`CueMemory`'s `delay`)
and find where the GRU's success starts to fall. From the shell, `ppo-train --env-id
CartPoleNoVel-v1` trains the recurrent preset: a GRU of 64, its update replaying
16-step sequences (`--sequence-length`), for 146 iterations of 64 × 32 steps, 299,008
steps (its `total_timesteps` of 300,000 rounded down to whole iterations).
"""

# %%
lecture.finish()
