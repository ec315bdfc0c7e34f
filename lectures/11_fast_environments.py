# %% [markdown]
"""
# Lecture 11 — Fast environments

**What it teaches.** Where the wall-clock time of <a href="../glossary.html#term-PPO">PPO</a> goes, and what an environment
written as tensor code buys. Gymnasium's `SyncVectorEnv` keeps N ordinary environments
and steps them one after another in a Python loop, so one step of N copies costs about
N times one step of one. A *batched* environment keeps the state of all N copies in
one tensor, (state_dim, N), and steps them with a fixed number of tensor operations —
the cart-pole physics is a few dozen of them, whatever N is. Each tensor operation
has a fixed cost of some microseconds (Python, dispatch, allocation; measured below)
plus a small cost per element, so one call costs nearly the same for a few copies as
for thousands.

The trainer does not care which it gets: both speak the `VecEnv` interface of
`ppo/vec_env.py` (same autoreset contract, torch tensors in and out), and
`PPOConfig.env_backend` picks one (`"gymnasium"` or `"torch"`). So the comparison is
exact: the same `ppo.trainers.ppo.PPO`, the same hyperparameters, the same seed; only the
object that steps the environments changes.

**What it shows.**
1. env-steps per second of stepping alone, against the number of copies N;
2. why: the cost of one step call against N, next to the cost of one tiny tensor op;
3. the cost split of one PPO <a href="../glossary.html#term-Iteration">iteration</a> — <a href="../glossary.html#term-Rollout">rollout</a> (env and the rest), <a href="../glossary.html#term-Advantage">advantages</a>, update;
4. why the trainer runs on one torch thread for networks this small;
5. a race: wall-clock time until the mean <a href="../glossary.html#term-Return">return</a> of the last 20 episodes reaches 475,
   for both backends with the same configuration, evaluated on gymnasium's CartPole-v1.

**Prerequisites.** [Lecture 6](06_ppo_cartpole.ipynb) (the loop), [lecture 7](07_diagnostics_and_tuning.ipynb) (the torch CartPole kept its sweep short).

**Library.** `envs/classic/` (`make_torch_vec_env`, `base.py` for the shared episode
bookkeeping, `cartpole.py` for the physics), `ppo/vec_env.py` (the `VecEnv` interface the trainer steps),
`envs/gymnasium_vec_env.py` (`GymnasiumVecEnv`), `envs/factory.py` (backend choice),
`ppo/presets.py` (`PRESETS`),
`experiments/benchmarks/environments.py` (`benchmark_stepping`; the command-line benchmark that
also compares each backend's shipped defaults over many seeds).
"""

# %%
import os
import statistics
import time

import numpy as np
import torch

from _common import Lecture, plt, print_table
from envs.classic import make_torch_vec_env
from envs.factory import gymnasium_env_factory, make_vec_env
from experiments.benchmarks.environments import benchmark_stepping
from experiments.studies.iteration_profile import PARTS, iteration_clock, time_iteration
from experiments.commands.presets import build_config
from experiments.commands.train import training_envs
from ppo.presets import PRESETS
from ppo.runs.evaluation import Policy, evaluate_policy
from ppo.trainers.ppo import PPO

lecture = Lecture("11_fast_environments", __doc__)
ENV_ID = "CartPole-v1"
SOLVED = 475.0  # CartPole-v1's usual threshold, on the mean of the last 20 training episodes
BACKEND_NAMES = {"sync": "gymnasium SyncVectorEnv", "numpy-vector": "gymnasium numpy-batched", "torch": "batched torch"}
print(f"load average at the start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; torch threads: {torch.get_num_threads()}")

# %% [markdown]
"""
## 1. Stepping alone

`benchmark_stepping` draws one sequence of random actions in advance and hands it to
every backend in its native form, so nothing but stepping is timed. The backends take
turns in rounds and each figure is the median over rounds, so that load from other
processes hits them alike. Three backends: gymnasium's `SyncVectorEnv` (N ordinary
CartPoles), gymnasium's own numpy-batched CartPole (the one classic env gymnasium
ships in batched form) and this project's torch CartPole.
"""

# %%
NUM_ENVS = lecture.choose(full=(1, 8, 64, 512, 4096), quick=(8, 512))
stepping_rows = benchmark_stepping(
    ENV_ID, num_envs_list=NUM_ENVS, steps=lecture.choose(full=200, quick=40),
    rounds=lecture.choose(full=5, quick=2), max_seconds=lecture.choose(full=0.5, quick=0.05),
)
BACKENDS = [backend for backend in BACKEND_NAMES if backend in stepping_rows[0]]
for backend in BACKENDS:
    print(f"  {backend:>12} = {BACKEND_NAMES[backend]}")
print_table([{"N": row["num_envs"], **{f"{backend} steps/s": f"{row[backend]:,.0f}" for backend in BACKENDS},
              "torch / sync": f"{row['torch/sync']:.1f}×"} for row in stepping_rows],
            title=f"{ENV_ID}: env-steps per second of a random policy (one torch thread, median of rounds)")

# %% [markdown]
"""
## 2. Where the speed-up comes from

Divide N by the rate and you get the time of one `step` call. For the Python loop it
grows in proportion to N: every copy pays the same per-env cost (the `sync µs/env-step`
column stays put). For the <a href="../glossary.html#term-Vectorised-environment">batched env</a> it grows slowly — the call is the same few
dozen tensor operations whatever N is — until the per-element work starts to matter.
The fixed part is set by what one tensor operation costs on this machine, measured
below on a one-element tensor: a torch step call at N = 1 costs as much as ten or more such
operations (37 in the run shown; the count, like every timing here, varies with the
machine and its load). That fixed cost makes the batched env the
slower one at N = 1 (compare the first rows), and at N = 8 it is still no faster than the
loop (0.76× in the run shown), a small fraction of the lead it has at thousands of copies.
Gymnasium's numpy-batched CartPole is the same idea written in numpy; the torch version speaks tensors, which the trainer uses anyway, and
runs on a GPU as well.
"""


# %%
def microseconds_per_call(function, repeats: int) -> float:
    function()
    started = time.perf_counter()
    for _ in range(repeats):
        function()
    return 1e6 * (time.perf_counter() - started) / repeats


one_element = torch.zeros(1)
tiny_op_us = statistics.median(microseconds_per_call(lambda: one_element * 2.0, 2000) for _ in range(5))
call_rows = []
for row in stepping_rows:
    call_us = {backend: 1e6 * row["num_envs"] / row[backend] for backend in BACKENDS}
    call_rows.append({"N": row["num_envs"], **{f"{backend} µs/call": f"{call_us[backend]:,.0f}" for backend in BACKENDS},
                      **{f"{backend} µs/env-step": f"{call_us[backend] / row['num_envs']:.2f}" for backend in BACKENDS}})
print_table(call_rows, title="The same measurements as time per step call (all N copies) and per env-step")
torch_small = 1e6 * stepping_rows[0]["num_envs"] / stepping_rows[0]["torch"]
print(f"\none tiny tensor op (multiply a 1-element tensor): {tiny_op_us:.1f} µs; a torch step call at "
      f"N = {stepping_rows[0]['num_envs']} costs {torch_small:.0f} µs, the price of about "
      f"{torch_small / tiny_op_us:.0f} such ops")

figure, axes = plt.subplots(1, 2, figsize=(11, 4.2))
for backend in BACKENDS:
    ns = [row["num_envs"] for row in stepping_rows]
    axes[0].plot(ns, [row[backend] for row in stepping_rows], "-o", label=BACKEND_NAMES[backend])
    axes[1].plot(ns, [1e6 * row["num_envs"] / row[backend] for row in stepping_rows], "-o", label=BACKEND_NAMES[backend])
axes[0].set_ylabel("env-steps per second")
axes[0].set_title("Throughput of stepping alone")
axes[1].set_ylabel("µs per step call (all N copies)")
axes[1].set_title("Cost of one call")
for axis in axes:
    axis.set_xscale("log")
    axis.set_yscale("log")
    axis.set_xlabel("number of copies N")
    axis.legend(fontsize=8)
lecture.save_figure(figure, "stepping.png")

# %% tags=["claims"]
first, last = stepping_rows[0], stepping_rows[-1]
sync_per_env = {row["num_envs"]: 1e6 / row["sync"] for row in stepping_rows if row["num_envs"] >= 8}
torch_call_growth = (last["num_envs"] / last["torch"]) / (first["num_envs"] / first["torch"])
lecture.claim("For the Python loop every copy pays the same per-env cost (the sync µs/env-step column stays "
              "within a factor 3 from N = 8 up)", max(sync_per_env.values()) < 3 * min(sync_per_env.values()),
              measured=", ".join(f"N = {n}: {us:.2f} µs" for n, us in sync_per_env.items()))
lecture.claim("A torch step call grows far more slowly than N (less than a tenth of the growth in N)",
              torch_call_growth < 0.1 * last["num_envs"] / first["num_envs"],
              measured=f"µs/call ×{torch_call_growth:.1f} while N grew ×{last['num_envs'] // first['num_envs']}")
lecture.claim("At thousands of copies the batched env steps at least 10× as fast as the Python loop",
              last["torch/sync"] >= 10, measured=f"{last['torch/sync']:.1f}× at N = {last['num_envs']}")
lecture.claim("At N = 1 the batched env is the slower one", first["num_envs"] == 1 and first["torch/sync"] < 1,
              measured=f"torch / sync {first['torch/sync']:.2f}× at N = {first['num_envs']}", quick=False)
few = next(row for row in stepping_rows if row["num_envs"] == 8)
lecture.claim("At a handful of copies (N = 8) batching gains little: the batched env's lead there is under a fifth of its "
              "lead at the largest N", few["torch/sync"] < last["torch/sync"] / 5,
              measured=f"torch / sync {few['torch/sync']:.2f}× at N = 8, {last['torch/sync']:.1f}× at N = {last['num_envs']}")
lecture.claim("A torch step call at the smallest N costs the price of more than ten tiny tensor ops",
              torch_small > 10 * tiny_op_us, measured=f"{torch_small:.0f} µs = {torch_small / tiny_op_us:.0f} ops")

# %% [markdown]
"""
## 3. The cost of one PPO iteration

Stepping is one part of an iteration. `PPO.train` runs three named steps —
`collect_rollout`, `compute_advantages`, `update` — and we time each with
`time.perf_counter`. Inside the rollout we also time the environment's `step` calls
alone; the rest of the rollout is the policy network's forward pass and sampling for
every step, and the bookkeeping. (`experiments/studies/iteration_profile.py` holds these timers,
and `python -m experiments.studies.iteration_profile --env-id ENV` prints the same split for any env.)

Both backends run the configuration tuned for the torch CartPole,
`PRESETS["CartPole-v1"]` (one row for both backends), printed below: many copies, short
rollouts, few large <a href="../glossary.html#term-Minibatch">minibatches</a>. With the same configuration the two rows differ in one
thing only, so the difference between them is what the environment costs.
"""


# %%
CONFIG = build_config({"env_id": ENV_ID, "env_backend": "torch", "seed": 1, "tensorboard": False})
print(f"CartPole preset {PRESETS[ENV_ID]}")
print(f"→ {CONFIG.num_envs} envs × {CONFIG.num_steps} steps = {CONFIG.batch_size} samples per iteration, "
      f"{CONFIG.update_epochs} epochs × {CONFIG.num_minibatches} minibatches of {CONFIG.minibatch_size}")


def make_envs(backend: str, num_envs: int):
    return make_torch_vec_env(ENV_ID, num_envs) if backend == "torch" else make_vec_env(ENV_ID, num_envs, "gymnasium")


def time_iterations(backends: tuple[str, ...], iterations: int) -> dict:
    """Median milliseconds of each part of an iteration, per backend; the backends take turns iteration by
    iteration, so load from other processes hits them alike."""
    runs = {}
    for backend in backends:
        trainer = PPO(CONFIG.replace(env_backend=backend), make_envs(backend, CONFIG.num_envs), progress=False)
        runs[backend] = (trainer, iteration_clock(trainer), [])
    for _ in range(iterations):
        for trainer, clock, timed in runs.values():
            timed.append(time_iteration(trainer, clock))
    for trainer, _, _ in runs.values():
        trainer.envs.close()
    return {backend: {name: 1e3 * statistics.median(row[name] for row in timed) for name in PARTS}
            for backend, (_, _, timed) in runs.items()}


ITERATIONS = lecture.choose(full=8, quick=2)
split = time_iterations(("gymnasium", "torch"), ITERATIONS)
split_rows = []
for backend, parts in split.items():
    total = sum(parts.values())
    split_rows.append({"backend": backend, **{f"{name} ms": parts[name] for name in parts}, "iteration ms": total,
                       "env share": f"{parts['env step'] / total:.0%}",
                       "steps/s": f"{CONFIG.batch_size / total * 1e3:,.0f}"})
print_table(split_rows, title=f"One PPO iteration, {CONFIG.batch_size} samples (median of {ITERATIONS} iterations)")
gym_total, torch_total = (sum(split[b].values()) for b in ("gymnasium", "torch"))
print(f"iteration speed-up from the backend alone: {gym_total / torch_total:.2f}×; "
      f"env stepping {split['gymnasium']['env step'] / max(split['torch']['env step'], 1e-9):.1f}× faster, "
      f"everything else the same work")

# %% [markdown]
r"""
Read the table from left to right (the two backends took turns, iteration by
iteration, so load from other processes hits both rows alike). The env columns are where the backends differ; the
network's share of the rollout and the whole update are the same work in both rows.
Once the environment is cheap, the update — K <a href="../glossary.html#term-Epoch">epochs</a> of minibatch gradient steps — is
what an iteration costs, and making the env faster still would change little: with the
rest of the work the same, the speed-up of a whole iteration cannot exceed
$t_\text{total} / (t_\text{total} - t_\text{env})$, the total time of an iteration over its time outside the env, in the gymnasium row's figures (up to the noise of timing
each part separately).
"""

# %% tags=["claims"]
env_speedup = split["gymnasium"]["env step"] / split["torch"]["env step"]
bound = gym_total / (gym_total - split["gymnasium"]["env step"])
lecture.claim("The env columns are where the backends differ: env stepping is at least 3× faster on the torch backend",
              env_speedup >= 3, measured=f"{env_speedup:.1f}×")
update_ratio = split["gymnasium"]["update"] / split["torch"]["update"]
lecture.claim("The update is the same work in both rows (its times agree within a factor 1.5)",
              1 / 1.5 < update_ratio < 1.5, measured=f"gymnasium / torch update time {update_ratio:.2f}")
torch_update_share = split["torch"]["update"] / torch_total
lecture.claim("Once the environment is cheap, the update is most of what an iteration costs",
              torch_update_share > 0.5, measured=f"update {torch_update_share:.0%} of the torch iteration")
lecture.claim("The speed-up of a whole iteration is far below the env's own (less than half of it)",
              gym_total / torch_total < env_speedup / 2,
              measured=f"iteration {gym_total / torch_total:.2f}×, env {env_speedup:.1f}×")
lecture.claim("The speed-up of a whole iteration stays within total / (total − env time), up to timing noise "
              "(25% allowed: the parts are medians of separately timed iterations)",
              gym_total / torch_total < 1.25 * bound,
              measured=f"iteration {gym_total / torch_total:.2f}×, bound {bound:.2f}×", quick=False)

# %% [markdown]
r"""
## 4. One torch thread

PyTorch splits large operations across threads. For this network (64–64 tanh MLPs)
and these batches, each operation is microseconds of work; handing parts of it to
another thread and waiting for them costs a good part of what the split saves (in the run shown, most of it for the update and all of it for one rollout step's forward pass), and when
the other core is busy with another process the wait can be much longer. How much is
left over depends on the CPU and its load: on the machines this project ran on, a second
thread changed the update by anything from a slowdown to a speed-up of about 40% (in the
run shown it was 1.12× faster: 48.7 ms with one thread, 43.6 ms with two), while the large product below gains more. `PPOConfig.num_threads` is 1 by default: a second core is better spent
on a second run (a second seed, or `ppo-train --seeds`), which doubles the work done
where a second thread buys a fraction (the commands set it for the process before they
build the trainer; this script sets it itself). Below: one `update` of the iteration above, the
policy's forward pass for one rollout step, and — for contrast — a $1024 \times 1024$ matrix
product, large enough for a second thread to have real work, each timed with 1 and 2
threads, alternating. Whether that second thread pays depends on whether a second core
is free: the load average is printed with the table, and on a busy machine even the
large product can come out slower with two threads — what the comparison shows in every
case is that the small operations gain less from a second thread than the large one.
"""


# %%
def time_with_threads(threads: int, rounds: int) -> dict:
    torch.set_num_threads(threads)  # process-wide, as experiments.commands.cli.configure_process does for --num-threads
    config = CONFIG.replace(num_threads=threads)
    trainer = PPO(config, training_envs(config), progress=False)
    trainer.collect_rollout()
    advantages, returns = trainer.compute_advantages()
    obs = trainer.next_obs
    big = torch.randn(1024, 1024)
    timings = {"update (ms)": [], "forward for one rollout step (µs)": [], "1024×1024 matmul (ms)": []}
    with torch.inference_mode():
        trainer.model.act(obs)
    for _ in range(rounds):
        started = time.perf_counter()
        trainer.update(advantages, returns)
        timings["update (ms)"].append(1e3 * (time.perf_counter() - started))
        with torch.inference_mode():
            timings["forward for one rollout step (µs)"].append(microseconds_per_call(lambda: trainer.model.act(obs), 200))
        timings["1024×1024 matmul (ms)"].append(microseconds_per_call(lambda: big @ big, 5) / 1e3)
    trainer.envs.close()
    return timings


ROUNDS = lecture.choose(full=4, quick=1)
thread_timings = {1: {}, 2: {}}
for _ in range(ROUNDS):  # alternate, so load from other processes hits both settings alike
    for threads in (1, 2):
        for name, values in time_with_threads(threads, 1).items():
            thread_timings[threads].setdefault(name, []).extend(values)
torch.set_num_threads(1)
thread_rows = []
for name in thread_timings[1]:
    one, two = statistics.median(thread_timings[1][name]), statistics.median(thread_timings[2][name])
    thread_rows.append({"operation": name, "1 thread": one, "2 threads": two, "2 threads / 1 thread": two / one})
print_table(thread_rows, title=f"Timings with 1 and 2 torch threads (median of {ROUNDS} rounds; "
                               f"load average now {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
for row in thread_rows:
    ratio = row["2 threads / 1 thread"]
    verdict = f"{ratio:.2f}× slower" if ratio > 1 else f"{1 / ratio:.2f}× faster"
    print(f"  {row['operation'].split(' (')[0]}: with a second thread {verdict}")

figure, axes = plt.subplots(1, 2, figsize=(11, 4.2))
bottom = np.zeros(2)
backends = list(split)
for name, color in zip(split["torch"], ("tab:red", "tab:orange", "tab:gray", "tab:blue")):
    heights = np.array([split[backend][name] for backend in backends])
    axes[0].bar(backends, heights, bottom=bottom, color=color, label=name)
    bottom += heights
axes[0].set_ylabel("milliseconds per iteration")
axes[0].set_title(f"One PPO iteration ({CONFIG.batch_size} samples)")
axes[0].legend(fontsize=8)
positions = np.arange(len(thread_rows))
axes[1].bar(positions, [row["2 threads / 1 thread"] for row in thread_rows], color="tab:purple")
axes[1].axhline(1.0, color="black", lw=1)
axes[1].set_xticks(positions, [row["operation"].split(" (")[0] for row in thread_rows], fontsize=8)
axes[1].set_ylabel("time with 2 threads / time with 1")
axes[1].set_title("A second torch thread")
lecture.save_figure(figure, "iteration_cost.png")

# %% tags=["claims"]
thread_ratio = {row["operation"].split(" (")[0]: row["2 threads / 1 thread"] for row in thread_rows}
lecture.claim("The small operations gain less from a second thread than the large matrix product (or lose)",
              min(thread_ratio["update"], thread_ratio["forward for one rollout step"])
              > thread_ratio["1024×1024 matmul"],
              measured=", ".join(f"{name} {ratio:.2f}" for name, ratio in thread_ratio.items()), quick=False)

# %% [markdown]
"""
## 5. The race

Both backends train from the same configuration and seed until the mean return of the
last 20 training episodes reaches 475 (or the step budget runs out). The torch env and
gymnasium's draw different start states, so the two runs see different episodes and
need different numbers of steps; the seconds per step are what the backend decides.
Time to 475 is the steps needed divided by the steps per second: the rate is the
backend's, the steps needed are the seed's (on this seed gymnasium's start states may
happen to be solved in fewer steps), so one seed's race can go either way even though
the torch backend is faster per step. Each run's steps per second is one run of one to four
seconds, so load from other processes moves it more than section 3's alternated
medians. Each policy is then <a href="../glossary.html#term-Greedy-evaluation">evaluated greedily</a> on gymnasium's own CartPole-v1
(`ppo.runs.evaluation.evaluate_policy`), whatever trained it.
"""


# %%
def race(backend: str, total_timesteps: int) -> dict:
    config = CONFIG.replace(env_backend=backend, total_timesteps=total_timesteps)
    trainer = PPO(config, training_envs(config), progress=False)
    curve = []

    def watch(ppo: PPO, metrics: dict) -> bool:
        curve.append((metrics["time_s"], ppo.global_step, metrics["episode_return_recent"]))
        return metrics["episode_return_recent"] >= SOLVED

    trainer.train(callback=watch)
    trainer.envs.close()
    returns = evaluate_policy(Policy(trainer.model, config, trainer.obs_normalizer), gymnasium_env_factory(ENV_ID),
                              episodes=EVAL_EPISODES)
    reached = curve[-1][2] >= SOLVED
    return {"curve": curve, "reached": reached, "seconds": curve[-1][0], "steps": curve[-1][1],
            "eval": returns}


EVAL_EPISODES = lecture.choose(full=20, quick=2)
BUDGET = lecture.choose(full=CONFIG.total_timesteps, quick=2 * CONFIG.batch_size)
results = {backend: race(backend, BUDGET) for backend in ("gymnasium", "torch")}
race_rows = []
for backend, result in results.items():
    returns = result["eval"]
    race_rows.append({
        "backend": backend,
        "reached 475": "yes" if result["reached"] else f"no (budget {BUDGET:,} steps)",
        "steps": f"{result['steps']:,}",
        "training seconds": result["seconds"],
        "steps/s": f"{result['steps'] / result['seconds']:,.0f}",
        f"greedy eval ({EVAL_EPISODES} episodes)": f"{returns.mean():.1f} ± {returns.std():.1f}",
    })
print_table(race_rows, title=f"Race to a last-20 mean of {SOLVED:.0f} on {ENV_ID} (seed {CONFIG.seed}, same configuration)")
gym_rate = results["gymnasium"]["steps"] / results["gymnasium"]["seconds"]
torch_rate = results["torch"]["steps"] / results["torch"]["seconds"]
print(f"steps per second, torch / gymnasium: {torch_rate / gym_rate:.2f}× "
      f"(section 3 predicted {gym_total / torch_total:.2f}× from one iteration's cost split)")
if all(result["reached"] for result in results.values()):
    first_to_475 = min(results, key=lambda backend: results[backend]["seconds"])
    fewer_steps = min(results, key=lambda backend: results[backend]["steps"])
    print(f"time to 475, gymnasium / torch: {results['gymnasium']['seconds'] / results['torch']['seconds']:.2f}× "
          f"(steps to 475: gymnasium {results['gymnasium']['steps']:,}, torch {results['torch']['steps']:,}): "
          f"{first_to_475} reached 475 first; {fewer_steps} needed fewer steps")

figure, axes = plt.subplots(1, 2, figsize=(11, 4.2))
for backend, result in results.items():
    seconds, steps, recent = zip(*result["curve"])
    axes[0].plot(seconds, recent, label=backend)
    axes[1].plot(steps, recent, label=backend)
for axis, label in zip(axes, ("training seconds (wall-clock)", "environment steps")):
    axis.axhline(SOLVED, color="black", ls="--", lw=1)
    axis.set_xlabel(label)
    axis.set_ylabel("return, last 20 episodes")
    axis.legend(fontsize=8)
axes[0].set_title("Against the clock")
axes[1].set_title("Against samples")
lecture.save_figure(figure, "race.png")

# %% tags=["claims"]
lecture.claim("Both backends reach a last-20 mean of 475 within the preset's budget, and each policy evaluates "
              "greedily at 475 or more on gymnasium's CartPole-v1",
              all(result["reached"] and float(result["eval"].mean()) >= SOLVED for result in results.values()),
              measured="; ".join(f"{backend}: {'reached' if r['reached'] else 'not reached'} at {r['steps']:,} steps, "
                                 f"eval {float(r['eval'].mean()):.1f}" for backend, r in results.items()), quick=False)
lecture.claim("The torch backend trains faster per step than gymnasium (one run each: load can move this)",
              torch_rate > gym_rate, measured=f"torch / gymnasium steps per second {torch_rate / gym_rate:.2f}×",
              quick=False)

# %% [markdown]
"""
## What to take away

* A batched environment turns "N copies cost N times one" into "N copies cost little
  more than one call" (sections 1–2: compare the µs/call columns). That is what makes
  thousands of copies cheap — and at a handful of copies, batching gains little.
* In a PPO iteration on a CPU, the environment is one part of the cost. The speed-up of
  training is bounded by the share the env had (section 3): compare the race's
  steps-per-second ratio with the prediction printed under it.
* Small networks gain less from a second thread than large products do (section 4, the
  printed ratios): the update is many small operations, where a second thread has little
  to do and its waiting shows, all the more when other processes share the cores; a second core serves
  a second run better. Whether a large operation gains from a
  second thread depends on a core being free (the load average printed with the table).
* Steps per second are the backend's; the steps needed to reach 475 are the seed's. One
  seed's race can therefore go either way (the line under the race table says which
  backend reached 475 first and which needed fewer steps): a faster backend is a claim
  about the rate, and a claim about time-to-solve needs many seeds
  (`python -m experiments.benchmarks.environments` runs them).
* Curves against samples (right panel of race.png) show whether the two backends learn
  the same task; curves against seconds show what the backend buys.

`python -m experiments.benchmarks.environments` repeats sections 1 and 5 over more seeds and
also compares each backend with its own shipped defaults.
"""

# %%
lecture.finish()
