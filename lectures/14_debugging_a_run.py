# %% [markdown]
r"""
# Lecture 14 — Debugging a PPO run

**What it teaches.** A broken <a href="../glossary.html#term-PPO">PPO</a> rarely crashes: it runs, logs, and draws a learning
curve that is merely bad. The <a href="../glossary.html#term-Return">return</a> says *that* something is wrong; the diagnostics
the trainer logs every <a href="../glossary.html#term-Iteration">iteration</a> say *what*. Each kind of bug leaves its own
signature in them. This lecture plants five bugs of known kind in the library's PPO,
trains each next to the correct run on the same seeds, shows their diagnostics side by
side, and turns what they show into a table of signatures. Then it hands you the
diagnostics of three runs with their bug hidden, to name it yourself; the answers are
at the end.

The diagnostics, all in every row of `metrics.csv` (`ppo/algorithm/update.py`, `run_update`,
lists how each is computed; [lecture 7](07_diagnostics_and_tuning.ipynb) explains <a href="../glossary.html#term-Approx-KL">approx KL</a>, <a href="../glossary.html#term-Clip-fraction">clip fraction</a>, entropy and
<a href="../glossary.html#term-Explained-variance">explained variance</a>):

* **return** — the mean of the last 20 finished episodes (`episode_return_recent`);
* **approx KL** — the <a href="../glossary.html#term-k1-k2-k3-estimators">k3</a> estimate of $\mathrm{KL}(\pi_\text{old} \,\Vert\, \pi_\theta)$, averaged over the update's <a href="../glossary.html#term-Minibatch">minibatches</a>;
* **clip fraction** — the share of samples with $|r_t(\theta) - 1| > \varepsilon$;
* **entropy** — $\mathcal H[\pi_\theta(\cdot \mid s)]$ averaged over the batch;
* **explained variance** — $1 - \operatorname{Var}[R - V] / \operatorname{Var}[R]$ of the <a href="../glossary.html#term-Critic">critic</a> on the <a href="../glossary.html#term-Rollout">rollout</a>;
* **<a href="../glossary.html#term-Value-loss">value loss</a>** — the critic's mean squared error against the returns $R$;
* **gradient norm** — the global norm of the loss's gradient before clipping, averaged over the steps;
* **<a href="../glossary.html#term-First-minibatch-ratio-error">first-minibatch ratio error</a>** — the largest $|r_t(\theta) - 1|$ on the update's first
  minibatch, before any step. There θ *is* $\theta_\text{old}$, so this is 0 up to rounding in a
  correct run; anything else means $\log \pi_\text{old}$ is not the log-probability of the policy
  that collected the data.

**The bugs.** Each one is a line of PPO code written wrong, planted as a small
subclass of `PPO` (or one changed setting) below:

1. **wrong sign** — the <a href="../glossary.html#term-Advantage">advantage</a> with its sign flipped ($\hat A = V - R$), i.e. gradient
   ascent on the policy loss;
2. **$\log \pi_\text{old}$ recomputed each minibatch** — $\log \pi_\text{old}$ taken from the current network
   at every minibatch instead of from the rollout (a cached value refreshed at the wrong
   place), so the <a href="../glossary.html#term-Importance-ratio">ratio</a> is always 1;
3. **too-large step** — the learning rate 30 times the <a href="../glossary.html#term-Preset">preset</a>'s;
4. **shared trunk, raw returns** — the <a href="../glossary.html#term-Actor-critic">actor and the critic</a> share one network body
   (`shared_network = True`), and the critic learns the raw <a href="../glossary.html#term-Discount">discounted</a> returns, tens to a hundred
   on CartPole. The value loss's gradient grows with the size of its targets, so on the
   weights both heads share it outweighs the policy loss's by far: the shared body learns
   what the critic needs, and the policy's features move with it, whatever the advantages
   say. This is defect 3 of [lecture 8](08_implementation_details.ipynb), which measures
   the two gradients on one rollout; it is why the library's default is two separate
   networks, where the value loss has no path into the policy's weights;
5. **ratio against the <a href="../glossary.html#term-Reference-policy-_ref">reference</a>** — the ratio $r_t(\theta)$ taken against a frozen copy of
   the initial policy instead of the policy that collected the rollout. PPO's ratio
   must compare the current policy with $\pi_\text{old}$, the rollout's: then it is 1 on the
   first minibatch and the clip limits how far *this* update moves. Against a fixed
   reference the ratio drifts from 1 as training moves the policy, the clip acts on most
   samples before the update has moved anything, and the gradients it leaves pull the
   policy back towards the reference, a brake nobody chose. This is defect 4 of
   [lecture 8](08_implementation_details.ipynb), where the reference is the frozen model
   of <a href="../glossary.html#term-RLHF">RLHF</a>; here it is carried to CartPole.

**Prerequisites.** Lectures [5](05_clipped_surrogate.ipynb)–[7](07_diagnostics_and_tuning.ipynb) ([lecture 7](07_diagnostics_and_tuning.ipynb) for the diagnostics). Bugs 4 and 5 are defects 3
and 4 of [lecture 8](08_implementation_details.ipynb); the list above says what each is and why it matters, so this lecture
can be read without it.

**Library.** `ppo/algorithm/update.py` (the diagnostics), `ppo/trainers/ppo.py` (`PPO`, which the
bugs subclass), `ppo/trainers/seed_batch.py` (how a batch of seeds runs a subclass's hooks),
`ppo/algorithm/losses.py`, `ppo/runs/logger.py` (the same numbers in
metrics.csv and TensorBoard), `ppo/presets.py` (the CartPole preset). The
library's own tests pin the correct behaviour down: a ratio of 1 on the first
minibatch (`tests/test_trainer.py`, `tests/test_update.py`).
"""

# %%
import copy
import textwrap

import torch

from _common import Lecture, plt, print_table
from envs.factory import make_seed_batch_env
from experiments.commands.presets import build_config
from ppo.trainers.ppo import PPO

lecture = Lecture("14_debugging_a_run", __doc__)
CANONICAL = build_config({"env_id": "CartPole-v1", "env_backend": "torch", "tensorboard": False})
CONFIG = CANONICAL.replace(total_timesteps=lecture.choose(full=CANONICAL.total_timesteps,
                                                           quick=2 * CANONICAL.batch_size))
# The preset was tuned on seeds 1–20 and these signatures were read off seeds 1–5: the runs use others.
SEEDS = lecture.choose(full=[31, 32, 33, 34, 35], quick=[31, 32])
MYSTERY_SEEDS = [41, 42, 43]
print(f"canonical CartPole (the preset): {CONFIG.num_envs} envs × {CONFIG.num_steps} steps, "
      f"{CONFIG.num_minibatches} minibatches × {CONFIG.update_epochs} epochs, lr {CONFIG.learning_rate} annealed, "
      f"{CONFIG.num_iterations} iterations of {CONFIG.batch_size:,}, {CONFIG.num_iterations * CONFIG.batch_size:,} steps; "
      f"seeds {SEEDS[0]}–{SEEDS[-1]}")

# %% [markdown]
r"""
## The bugs, as code

Every bug is a few lines: a subclass of `PPO` that overrides the one method where the
mistake lives, or a changed setting. `transitions_loss` is the loss of a minibatch's
transitions from $\log \pi_\theta$, $\mathcal H$ and $V$ recomputed; `minibatch_loss` is the method that
recomputes them and hands the update its loss and its log-ratio; the diagnostics are
computed from that log-ratio, exactly as the mistaken code would log them. Each class is
written for one run, and `PPO(config, envs, seeds=...)` trains its five seeds as one
batch: the batch calls the subclass's own override for every member.
"""


# %%
class WrongSign(PPO):
    """Â with its sign flipped: the policy is pushed away from the actions that did well."""

    def transitions_loss(self, new_log_probs, entropy, new_values, minibatch):
        return super().transitions_loss(new_log_probs, entropy, new_values,
                                        {**minibatch, "advantages": -minibatch["advantages"]})


class RecomputedOldLogProb(PPO):
    """log π_old taken from the current network at every minibatch: r_t(θ) = 1 always."""

    def minibatch_loss(self, minibatch):
        new_log_probs, entropy, new_values, transitions = self.evaluate_samples(minibatch)
        recomputed = {**transitions, "log_probs": new_log_probs.detach()}  # should be the rollout's log-probs
        return self.transitions_loss(new_log_probs, entropy, new_values, recomputed)


class RatioToReference(PPO):
    """The ratio against a frozen copy of the initial policy instead of π_old (lecture 8, defect 4)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reference = copy.deepcopy(self.model)  # frozen: never trained

    def minibatch_loss(self, minibatch):
        with torch.no_grad():
            reference_log_probs, _, _ = self.reference.evaluate_actions(minibatch["obs"], minibatch["actions"])
        return super().minibatch_loss({**minibatch, "log_probs": reference_log_probs})


CORRECT = "correct"
RECOMPUTED = "log π_old recomputed each minibatch"
BUGS = {  # name: (trainer class, change to the preset)
    "wrong sign": (WrongSign, {}),
    RECOMPUTED: (RecomputedOldLogProb, {}),
    "too-large step (lr × 30)": (PPO, dict(learning_rate=30 * CONFIG.learning_rate)),
    "shared trunk, raw returns": (PPO, dict(shared_network=True)),
    "ratio against the reference": (RatioToReference, {}),
}
DIAGNOSTICS = {  # metrics.csv column: axis label
    "episode_return_recent": "return (last 20 episodes)",
    "approx_kl": "approx KL (k3), nats",
    "clip_fraction": "clip fraction",
    "entropy": "entropy, nats",
    "explained_variance": "explained variance",
    "value_loss": "value loss",
    "grad_norm": "gradient norm",
    "first_minibatch_ratio_error": "first-minibatch max |r − 1|",
}


def recording_return_variance(trainer_class: type[PPO]) -> type[PPO]:
    """`trainer_class` that also logs Var[R] of the rollout's returns, the denominator of
    explained variance (not among the trainer's diagnostics), after each update of each run."""

    class Recording(trainer_class):
        def after_update(self, samples):
            metrics = super().after_update(samples)
            metrics["return_variance"] = float(samples["returns"].var(unbiased=False))
            return metrics

    return Recording


def train(trainer_class, change: dict, seeds: list[int]) -> dict[str, torch.Tensor]:
    """Train the preset with `change` over `seeds` as one batch: each diagnostic as an
    (iterations, seeds) tensor."""
    config = CONFIG.replace(**change)
    envs = make_seed_batch_env(config.env_id, len(seeds), config.num_envs, "torch")
    batch = recording_return_variance(trainer_class)(config, envs, seeds=seeds, progress=False)
    batch.train()
    if batch.diverged:
        print(f"  diverged members (stopped, their last values kept): {batch.diverged}")
    return {name: torch.tensor([[row[name] for row in iteration] for iteration in batch.history], dtype=torch.float64)
            for name in [*DIAGNOSTICS, "episode_return_mean", "gradient_steps", "return_variance"]}


runs = {CORRECT: train(PPO, {}, SEEDS)}
print(f"trained {CORRECT}")
for name, (trainer_class, change) in BUGS.items():
    runs[name] = train(trainer_class, change, SEEDS)
    print(f"trained {name}")

# %% [markdown]
"""
## The diagnostics side by side

One row per bug, one column per diagnostic. In every panel the correct run is grey
(the same seeds), the bug has its own colour, the line is the median over the seeds and
the band their range (smallest to largest).
"""

# %%
COLOURS = dict(zip(BUGS, ["tab:red", "tab:blue", "tab:orange", "tab:purple", "tab:green"]))
REFERENCE_COLOUR = "0.55"


def draw(axis, history: torch.Tensor, colour: str, label: str) -> None:
    """Median over the seeds (line) and their range (band) of one diagnostic, against iterations."""
    iterations = torch.arange(1, history.shape[0] + 1)
    axis.fill_between(iterations, history.min(dim=1).values, history.max(dim=1).values, color=colour, alpha=0.2,
                      linewidth=0)
    axis.plot(iterations, history.median(dim=1).values, color=colour, lw=1.5, label=label)


def diagnostics_grid(rows: dict[str, dict[str, torch.Tensor]], colours: dict[str, str], title: str):
    figure, axes = plt.subplots(len(rows), len(DIAGNOSTICS), figsize=(2.6 * len(DIAGNOSTICS), 2.1 * len(rows) + 0.8),
                                squeeze=False)
    for row_axes, (name, run) in zip(axes, rows.items()):
        for axis, (metric, label) in zip(row_axes, DIAGNOSTICS.items()):
            draw(axis, runs[CORRECT][metric], REFERENCE_COLOUR, CORRECT)
            draw(axis, run[metric], colours[name], textwrap.fill(name, 22))
            axis.set_xlabel("iteration")
            axis.tick_params(labelsize=7)
            axis.locator_params(nbins=4)
            axis.grid(alpha=0.3)
            if name == next(iter(rows)):
                axis.set_title(label, fontsize=9)
        row_axes[0].set_ylabel(f"{name}\n{DIAGNOSTICS['episode_return_recent']}", fontsize=8)
        row_axes[0].legend(fontsize=7, loc="upper left")  # early iterations: every return is still low there
    figure.suptitle(title, fontsize=11)
    return figure


figure = diagnostics_grid({name: runs[name] for name in BUGS}, COLOURS,
                          f"Each bug (colour) against the correct run (grey), CartPole preset, seeds {SEEDS[0]}–{SEEDS[-1]}: "
                          "median over the seeds, band = their range")
lecture.save_figure(figure, "signatures.png")


# %% [markdown]
"""
## Each run in numbers

Per seed, a few numbers sum each diagnostic up; the table gives their median over the
seeds. The **untrained return** is the mean return of the episodes finished in the
correct run's first rollout, played by the policy before any update.
"""


# %%
def summary(run: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Per seed: the numbers the signatures are read from."""
    last_quarter = slice(-max(1, run["approx_kl"].shape[0] // 4), None)
    return {
        "final return": run["episode_return_recent"][last_quarter].mean(dim=0),
        "first KL": run["approx_kl"][0],
        "largest KL": run["approx_kl"].max(dim=0).values,
        "largest clip fraction": run["clip_fraction"].max(dim=0).values,
        "final clip fraction": run["clip_fraction"][last_quarter].mean(dim=0),
        "final entropy": run["entropy"][last_quarter].mean(dim=0),
        "final explained variance": run["explained_variance"][last_quarter].mean(dim=0),
        "final value loss": run["value_loss"][last_quarter].mean(dim=0),
        "largest gradient norm": run["grad_norm"].max(dim=0).values,
        "largest ratio error": run["first_minibatch_ratio_error"].max(dim=0).values,
    }


summaries = {name: summary(run) for name, run in runs.items()}
untrained = runs[CORRECT]["episode_return_mean"][0]  # (seeds,) episodes of the untrained policy
initial_entropy = runs[CORRECT]["entropy"][0]
print_table([{"run": name, **{key: float(values.median()) for key, values in numbers.items()}}
             for name, numbers in summaries.items()],
            title=f"Median over {len(SEEDS)} seeds (final = the last quarter of the run; largest = over every iteration)")
print(f"untrained return (the correct run's first rollout), per seed: "
      + ", ".join(f"{value:.1f}" for value in untrained.tolist()))
return_variance = {name: run["return_variance"][-max(1, run["return_variance"].shape[0] // 4):].mean(dim=0)
                   for name, run in runs.items()}  # per seed, mean over the last quarter
print("Var[R] of a rollout's returns, last quarter, median over the seeds: "
      + ", ".join(f"{name} {float(values.median()):.3g}" for name, values in return_variance.items()))

# %% [markdown]
r"""
## The signatures

Read the figure row by row, then the table of numbers; what each bug leaves behind (the
numbers in brackets are the run shown):

* **Wrong sign** (red): the return *falls* below the untrained policy's, in every seed
  (to about 8.7, from 16 to 17.5), and the entropy collapses far below the correct run's: the policy becomes sure of
  the actions that end the episode fastest. The approx KL and clip fraction of its
  first update are within 10% of the correct run's on the same seed (within 2.6%): flipping the
  advantage flips the first step's direction, not its size. They rise above the
  correct run's for a few updates while the policy commits to failing, then fall to
  near 0 with the entropy; the return is the plainer signal.
* **$\log \pi_\text{old}$ recomputed each minibatch** (blue): approx KL and clip fraction are **exactly 0 in every
  iteration** of every seed, the first update included: the ratio is always 1, so the
  clip never acts and the <a href="../glossary.html#term-KL-divergence">KL</a> the loop measures is between a policy and itself. With
  $r = 1$ the loss is the plain <a href="../glossary.html#term-Policy-gradient">policy gradient</a>, taken 24 times per rollout (the
  `gradient_steps` the run logs) with nothing to stop it, and the seeds split (the wide band of the return panel): on some the
  return still reaches the 500 limit (3 of 5 seeds), on others the policy collapses to a
  deterministic one (entropy ~0) and the return ends below the untrained policy's.
  The largest value loss and gradient norm over its seeds are more than five times the
  correct run's (931 against 31, 709 against 45 in this run).
* **Too-large step** (orange): the first update's approx KL is thousands of times the
  correct run's (1,200 to 2,090 times in this run) and most of the batch is clipped (94%
  to 95%); within that one update the entropy falls from the untrained policy's 0.69 to
  under a twentieth of it, and to nearly 0 on most seeds (all 5 in this run): the policy is now all but
  deterministic. The entropy stays far below the correct run's to the end (under a tenth
  of it on every seed). What the return does from there depends on the seed, and on where
  rounding takes a chaotic run: it ends below the correct run's on every seed and below a
  fifth of it on most (all 5 in this run); on some it ends below the untrained policy's
  (3 of 5 in this run), while the others climb only a little way back (to 51 and 63,
  the band of the return panel). After the first update the KL and the clip fraction
  read exactly 0 in many iterations (59% of the later iterations × seeds in this run,
  all of them on the three seeds whose return ends below the untrained policy's) — a
  deterministic policy has $\log \pi = 0$ for the only action it takes — so a KL of 0
  alone does not mean a recomputed $\log \pi_\text{old}$: look at the first update.
* **Shared trunk, raw returns** (purple): no exact zeros, no ratio error, no outsized
  first step; the critic's diagnostics are what differ. The value loss at the end is
  many times the correct run's and the gradient norm peaks higher (the critic's
  gradient dominates the shared weights), while the entropy stays above the correct
  run's: the policy learns more slowly, and its return ends lower.
* **One number reads backwards.** The correct run's explained variance at the end (median
  0.371 in this run's table, its seeds from 0.18 to 0.98) is below that of the wrong sign
  and the too-large step (0.98 or more), runs that fail. Its critic is not worse: its
  value loss at the end is smaller than theirs. Its returns have saturated: with episodes
  at the 500 limit the discounted return is nearly the same at every step, so $\operatorname{Var}[R]$, the
  denominator of explained variance, is more than ten times smaller than theirs (the line
  under the table), and a small error of the critic is a large share of it. Read the
  explained variance beside the value loss, never alone.
* **Ratio against the reference** (green): the first-minibatch ratio error is
  **above 0** (in a correct run it is 0), the clip fraction stays high to the end of
  the run, the entropy barely moves from the untrained policy's (the clip holds the
  policy near the reference), and the return stalls far below the correct run's.
"""

# %% [markdown]
"""
### The signature table

The same findings as rules, in the order to check them: the first rule that matches
names the bug. The order matters: an exact 0 or a nonzero ratio error is certain, a
"larger than" is a judgement against the reference run.
"""

# %%
S = summaries
C = S[CORRECT]
SIGNATURES = [  # (what the diagnostics show, the bug, the rule on a run's summary `s` against the correct run's `c`)
    ("first-minibatch ratio error > 0", "ratio against the reference",
     lambda s, c: s["largest ratio error"] > 1e-3),
    ("approx KL and clip fraction exactly 0 in every iteration, the first included", RECOMPUTED,
     lambda s, c: s["largest KL"] == 0 and s["largest clip fraction"] == 0),
    ("first approx KL > 10 × the correct run's, then entropy ~0", "too-large step (lr × 30)",
     lambda s, c: s["first KL"] > 10 * c["first KL"]),
    ("return below the untrained policy's, first update ordinary", "wrong sign",
     lambda s, c: s["final return"] < c["untrained return"]),
    ("value loss at the end > 10 × the correct run's, entropy higher", "shared trunk, raw returns",
     lambda s, c: s["final value loss"] > 10 * c["final value loss"] and s["final entropy"] > c["final entropy"]),
]
NO_BUG = "no bug visible"


def diagnose(numbers: dict[str, float], reference: dict[str, float]) -> str:
    """The first signature that matches a run's summary (medians over its seeds, or one seed's numbers)."""
    for _, bug, matches in SIGNATURES:
        if matches(numbers, reference):
            return bug
    return NO_BUG


def medians(numbers: dict[str, torch.Tensor]) -> dict[str, float]:
    return {key: float(values.median()) for key, values in numbers.items()}


reference_numbers = {**medians(C), "untrained return": float(untrained.median())}
print_table([{"diagnostics show": shows, "bug": bug, "diagnosed from this run's medians": diagnose(medians(S[bug]),
                                                                                                   reference_numbers)}
             for shows, bug, _ in SIGNATURES], title="Signatures: what the diagnostics show → the bug")

# %% tags=["claims"]
def every(values: torch.Tensor) -> bool:
    return bool(values.all())


def median(values: torch.Tensor) -> float:
    return float(values.median())


def seeds_text(values: torch.Tensor, digits: int = 3) -> str:
    return ", ".join(f"{value:.{digits}g}" for value in values.tolist())


wrong, recomputed, large, trunk, reference = (S[name] for name in BUGS)
lecture.claim("Wrong sign: the return falls below the untrained policy's, in every seed",
              every(wrong["final return"] < untrained),
              measured=f"final return {seeds_text(wrong['final return'])} vs untrained {seeds_text(untrained)}", quick=False)
lecture.claim("the entropy collapses far below the correct run's (wrong sign)",
              every(wrong["final entropy"] < 0.25 * C["final entropy"]),
              measured=f"final entropy {seeds_text(wrong['final entropy'])} vs correct {seeds_text(C['final entropy'])}",
              quick=False)


def relative_gap(values: torch.Tensor, reference_values: torch.Tensor) -> float:
    return float(((values - reference_values).abs() / reference_values).max())


first_kl_gap = relative_gap(wrong["first KL"], C["first KL"])
first_clip_gap = relative_gap(runs["wrong sign"]["clip_fraction"][0], runs[CORRECT]["clip_fraction"][0])
lecture.claim("The approx KL and clip fraction of its first update are within 10% of the correct run's on the same seed",
              first_kl_gap < 0.1 and first_clip_gap < 0.1,
              measured=f"first KL {seeds_text(wrong['first KL'])} vs {seeds_text(C['first KL'])}; first clip fraction "
                       f"{seeds_text(runs['wrong sign']['clip_fraction'][0])} vs {seeds_text(runs[CORRECT]['clip_fraction'][0])}"
                       f" (largest gaps {first_kl_gap:.1%}, {first_clip_gap:.1%})")
recomputed_run = runs[RECOMPUTED]
lecture.claim("log π_old recomputed each minibatch: approx KL and clip fraction are exactly 0 in every iteration of every seed",
              every(recomputed_run["approx_kl"] == 0) and every(recomputed_run["clip_fraction"] == 0),
              measured=f"largest approx KL {float(recomputed_run['approx_kl'].max())}, "
                       f"largest clip fraction {float(recomputed_run['clip_fraction'].max())}")
collapsed = recomputed["final return"] < untrained
lecture.claim("the loss is the plain policy gradient, taken 24 times per rollout (log π_old recomputed)",
              every(recomputed_run["gradient_steps"] == 24),
              measured=f"gradient steps per update: {int(recomputed_run['gradient_steps'].min())} to "
                       f"{int(recomputed_run['gradient_steps'].max())} ({CONFIG.update_epochs} epochs × "
                       f"{CONFIG.num_minibatches} minibatches)")
lecture.claim("the seeds split: on some the return still reaches the 500 limit, on others it ends below the untrained "
              "policy's (log π_old recomputed)", bool((recomputed["final return"] >= 495).any()) and bool(collapsed.any()),
              measured=f"final return {seeds_text(recomputed['final return'])} vs untrained {seeds_text(untrained)}", quick=False)
lecture.claim("on those the policy collapses to a deterministic one (entropy ~0) (log π_old recomputed)",
              every(recomputed["final entropy"][collapsed] < 1e-3),
              measured=f"final entropy {seeds_text(recomputed['final entropy'])}", quick=False)
largest = {name: {metric: float(runs[name][metric].max()) for metric in ("value_loss", "grad_norm")}
           for name in (CORRECT, RECOMPUTED)}
lecture.claim("The largest value loss and gradient norm over its seeds are more than five times the correct run's "
              "(log π_old recomputed)",
              all(largest[RECOMPUTED][metric] > 5 * largest[CORRECT][metric] for metric in ("value_loss", "grad_norm")),
              measured=f"value loss {largest[RECOMPUTED]['value_loss']:.3g} vs {largest[CORRECT]['value_loss']:.3g}, "
                       f"gradient norm {largest[RECOMPUTED]['grad_norm']:.3g} vs {largest[CORRECT]['grad_norm']:.3g}",
              quick=False)
lecture.claim("They rise above the correct run's for a few updates, then fall to near 0 with the entropy (wrong sign)",
              median(wrong["largest KL"]) > median(C["largest KL"]) and median(wrong["final clip fraction"]) < 0.01,
              measured=f"largest KL, median {median(wrong['largest KL']):.3g} vs {median(C['largest KL']):.3g}; last-quarter "
                       f"clip fraction {seeds_text(wrong['final clip fraction'])}", quick=False)
kl_factor = large["first KL"] / C["first KL"]
lecture.claim("Too-large step: the first update's approx KL is thousands of times the correct run's",
              every(kl_factor > 1000), measured=f"factor per seed {seeds_text(kl_factor)}")
lecture.claim("most of the batch is clipped (too-large step, first update)",
              every(runs["too-large step (lr × 30)"]["clip_fraction"][0] > 0.5),
              measured=f"first clip fraction {seeds_text(runs['too-large step (lr × 30)']['clip_fraction'][0])}")
large_run = runs["too-large step (lr × 30)"]
second_entropy = large_run["entropy"][1]  # the entropy logged in the second update: of the policy the first one left
nearly_0 = int((second_entropy < 0.01).sum())
lecture.claim("within that one update the entropy falls from the untrained policy's to under a twentieth of it, and "
              "to nearly 0 (below 0.01) on most seeds (too-large step)",
              every(second_entropy < 0.05 * initial_entropy) and nearly_0 > len(SEEDS) / 2,
              measured=f"entropy of the second update {seeds_text(second_entropy)} vs the untrained policy's "
                       f"{seeds_text(initial_entropy)}: {nearly_0} of {len(SEEDS)} below 0.01")
lecture.claim("The entropy stays far below the correct run's to the end: under a tenth of it on every seed "
              "(too-large step)", every(large["final entropy"] < 0.1 * C["final entropy"]),
              measured=f"last-quarter entropy {seeds_text(large['final entropy'])} vs correct "
                       f"{seeds_text(C['final entropy'])}", quick=False)
below_untrained = int((large["final return"] < untrained).sum())
below_fifth = int((large["final return"] < 0.2 * C["final return"].min()).sum())
lecture.claim("the return ends below the correct run's on every seed and below a fifth of it on most; on some (two or "
              "more) below the untrained policy's (too-large step)",
              every(large["final return"] < C["final return"].min()) and below_fifth > len(SEEDS) / 2
              and below_untrained >= 2,
              measured=f"final return {seeds_text(large['final return'])} vs correct {seeds_text(C['final return'])}, "
                       f"untrained {seeds_text(untrained)}: {below_fifth} of {len(SEEDS)} below a fifth of the "
                       f"correct run's, {below_untrained} below the untrained policy's", quick=False)
after_first = (large_run["approx_kl"][1:] == 0) & (large_run["clip_fraction"][1:] == 0)
zero_seeds = int(after_first.any(dim=0).sum())
lecture.claim("After the first update the KL and the clip fraction read exactly 0 in many iterations: more than a "
              "quarter of the later iterations × seeds, on two or more seeds (too-large step)",
              float(after_first.double().mean()) > 0.25 and zero_seeds >= 2,
              measured=f"{float(after_first.double().mean()):.0%} of the later iterations × seeds; per seed "
                       + ", ".join(f"{share:.0%}" for share in after_first.double().mean(dim=0).tolist())
                       + f"; final return {seeds_text(large['final return'])}", quick=False)
lecture.claim("the first update's KL is not 0 (too-large step), unlike the recomputed log π_old's", every(large["first KL"] > 0),
              measured=f"first KL {seeds_text(large['first KL'])}")
lecture.claim("Shared trunk: no exact zeros, no ratio error, no outsized first step",
              every(trunk["largest KL"] > 0) and every(trunk["largest ratio error"] < 1e-5)
              and every(trunk["first KL"] < 10 * C["first KL"]),
              measured=f"largest KL {seeds_text(trunk['largest KL'])}, largest ratio error "
                       f"{seeds_text(trunk['largest ratio error'])}, first KL {seeds_text(trunk['first KL'])} vs correct "
                       f"{seeds_text(C['first KL'])}")
lecture.claim("Shared trunk: the value loss at the end is many times the correct run's",
              every(trunk["final value loss"] > 10 * C["final value loss"]),
              measured=f"{seeds_text(trunk['final value loss'])} vs {seeds_text(C['final value loss'])}", quick=False)
lecture.claim("the gradient norm peaks higher (shared trunk)",
              median(trunk["largest gradient norm"]) > median(C["largest gradient norm"]),
              measured=f"largest gradient norm, median {median(trunk['largest gradient norm']):.3g} vs "
                       f"{median(C['largest gradient norm']):.3g}", quick=False)
lecture.claim("the entropy stays above the correct run's (shared trunk)", every(trunk["final entropy"] > C["final entropy"]),
              measured=f"{seeds_text(trunk['final entropy'])} vs {seeds_text(C['final entropy'])}", quick=False)
lecture.claim("its return ends lower (shared trunk)", median(trunk["final return"]) < median(C["final return"]),
              measured=f"median final return {median(trunk['final return']):.1f} vs {median(C['final return']):.1f}",
              quick=False)
failing = ("wrong sign", "too-large step (lr × 30)")
lecture.claim("The correct run's explained variance at the end (its median over the seeds) is below that of the wrong "
              "sign and the too-large step (0.98 or more)",
              all(median(S[name]["final explained variance"]) >= 0.98 for name in failing)
              and all(median(C["final explained variance"]) < median(S[name]["final explained variance"])
                      for name in failing),
              measured=", ".join(f"{name} {median(S[name]['final explained variance']):.3g}" for name in (CORRECT, *failing))
                       + f" (correct, per seed: {seeds_text(C['final explained variance'], 2)})", quick=False)
lecture.claim("its value loss at the end is smaller than theirs (correct run against wrong sign and too-large step)",
              all(median(C["final value loss"]) < median(S[name]["final value loss"]) for name in failing),
              measured=", ".join(f"{name} {median(S[name]['final value loss']):.3g}" for name in (CORRECT, *failing)),
              quick=False)
lecture.claim("Var[R] is more than ten times smaller than theirs (correct run's last quarter, medians)",
              all(10 * median(return_variance[CORRECT]) < median(return_variance[name]) for name in failing),
              measured=", ".join(f"{name} {median(return_variance[name]):.3g}" for name in (CORRECT, *failing)),
              quick=False)
lecture.claim("in a correct run the first-minibatch ratio error is 0", every(C["largest ratio error"] < 1e-5),
              measured=f"largest over the run {float(C['largest ratio error'].max()):.2g}")
lecture.claim("Ratio against the reference: the first-minibatch ratio error is above 0",
              every(reference["largest ratio error"] > 0.01),
              measured=f"largest per seed {seeds_text(reference['largest ratio error'])}")
lecture.claim("the clip fraction stays high to the end of the run (ratio against the reference)",
              every(reference["final clip fraction"] > 10 * C["final clip fraction"]) and every(reference["final clip fraction"] > 0.2),
              measured=f"last quarter {seeds_text(reference['final clip fraction'])} vs correct "
                       f"{seeds_text(C['final clip fraction'])}", quick=False)
lecture.claim("the entropy barely moves from the untrained policy's (ratio against the reference)",
              every((reference["final entropy"] - initial_entropy).abs() < 0.05),
              measured=f"final {seeds_text(reference['final entropy'])} vs first update {seeds_text(initial_entropy)}",
              quick=False)
lecture.claim("the return stalls far below the correct run's (ratio against the reference)",
              every(reference["final return"] < 0.5 * C["final return"].min()),
              measured=f"final return {seeds_text(reference['final return'])} vs correct {seeds_text(C['final return'])}",
              quick=False)
named = {name: diagnose(medians(S[name]), reference_numbers) for name in [CORRECT, *BUGS]}
lecture.claim("the first rule that matches names the bug (every planted bug, and none for the correct run)",
              all(named[name] == name for name in BUGS) and named[CORRECT] == NO_BUG,
              measured=", ".join(f"{name} → {diagnosis}" for name, diagnosis in named.items()), quick=False)

# %% [markdown]
"""
## The same reading as a command: `ppo-diagnose`

`ppo-diagnose RUN_DIR` reads a run folder's metrics.csv with rules drawn from these
signatures and from [lecture 7](07_diagnostics_and_tuning.ipynb)
(`experiments/commands/findings.py`; the guide's page "Diagnosing a run"). For each finding
it names the metric, what the metric did and when, its healthy range, the likely causes
and the lecture section that explains them. Unlike the table above, it reads one run
alone, with no correct run to compare against. Here its rules read every run above, seed
by seed, as they would read that seed's metrics.csv; the table lists the metrics each
rule flags as a problem.
"""

# %%
from experiments.commands.findings import diagnose_rows


def as_rows(run: dict[str, torch.Tensor], member: int) -> list[dict]:
    """Seed number `member`'s diagnostics as the rows of its metrics.csv, one per iteration."""
    columns = [*DIAGNOSTICS, "episode_return_mean"]
    return [{"iteration": i + 1, "global_step": (i + 1) * CONFIG.batch_size,
             **{name: float(run[name][i, member]) for name in columns}} for i in range(run["approx_kl"].shape[0])]


run_settings = {CORRECT: {}, **{name: change for name, (_, change) in BUGS.items()}}  # what config.json would hold
problems = {name: [sorted({finding.metric for finding in diagnose_rows(as_rows(run, member), run_settings[name], 475.0)
                           if finding.severity == "problem"}) for member in range(len(SEEDS))]
            for name, run in runs.items()}
print_table([{"run": name, **{f"seed {seed}": ", ".join(found) or "—" for seed, found in zip(SEEDS, per_seed)}}
             for name, per_seed in problems.items()], title="ppo-diagnose's problems, per run and seed")

# %% tags=["claims"]
flagged = {name: sum(bool(found) for found in problems[name]) for name in BUGS}
lecture.claim("ppo-diagnose finds no problem in any seed of the correct run",
              not any(problems[CORRECT]), measured=f"{sum(map(bool, problems[CORRECT]))} of {len(SEEDS)} seeds flagged",
              quick=False)
lecture.claim("reading each run alone, ppo-diagnose flags a problem on most seeds of every planted bug",
              all(count > len(SEEDS) / 2 for count in flagged.values()),
              measured=", ".join(f"{name}: {count} of {len(SEEDS)}" for name, count in flagged.items()), quick=False)

# %% [markdown]
"""
## Exercise: three mystery runs

Three more runs of the preset, one seed each (seeds 41–43, seen by nobody while the
rules above were written), each with one of the five bugs, no two the same. Below are their
diagnostics, in black against the correct run's grey, and their numbers next to the
correct run's. Before you read on: which bug does each run have? Use the
figure first, the table second, the signature table last. The answers follow the
table. (Exercise 14.2, in `lectures/exercises/lecture_14.py`, asks you to write the
signature table as a function and checks it on numbers of its own.)
"""

# %%
# Which bug each letter has is hidden behind a shuffle: run on before you print MYSTERY.
DRAWN = torch.randperm(len(BUGS), generator=torch.Generator().manual_seed(229)).tolist()[:3]  # three different bugs
MYSTERY = dict(zip("ABC", (list(BUGS)[i] for i in DRAWN)))
mystery_runs = {}
for (letter, bug), seed in zip(MYSTERY.items(), MYSTERY_SEEDS):
    trainer_class, change = BUGS[bug]
    mystery_runs[f"mystery {letter}"] = train(trainer_class, change, [seed])
mystery_summaries = {name: summary(run) for name, run in mystery_runs.items()}
figure = diagnostics_grid(mystery_runs, {name: "black" for name in mystery_runs},
                          f"Three mystery runs (black, seeds {MYSTERY_SEEDS[0]}–{MYSTERY_SEEDS[-1]}) against the correct run "
                          f"(grey, median and range of seeds {SEEDS[0]}–{SEEDS[-1]})")
lecture.save_figure(figure, "mystery_runs.png")
print_table([{"run": name, **{key: float(values.median()) for key, values in numbers.items()}}
             for name, numbers in {**mystery_summaries, CORRECT: C}.items()],
            title="The mystery runs' numbers; last row: the correct run's medians over its seeds")

# %% [markdown]
"""
## Answers to the exercise

Each mystery run's bug, and what the signature table's rules say from its numbers.
"""

# %%
for letter, bug in MYSTERY.items():
    print(f"mystery {letter}: {bug}; the signature table names it: "
          f"{diagnose(medians(mystery_summaries[f'mystery {letter}']), reference_numbers)}")

# %% [markdown]
"""
Mystery A, the shared trunk, is the one to remember: at its best its return comes within 10% of the
correct run's median (it reaches the 500 limit in this run) and it ends above half of it (484 in this run;
how far it sags by the end varies with where rounding takes this one chaotic run), and it has a bug all
the same. Its return stays inside the range of the correct run's seeds and reaches the limit with them:
read alone, it says nothing is wrong. Its critic gives it away (a value loss whose last-quarter mean
is far above the correct run's, from the spikes of its value loss panel, and an explained variance below
it that swings under 0) with the entropy of a policy that has not committed. B and C both end at the
shortest episodes CartPole allows, with an entropy near 0; the first update tells them apart: B's approx KL is
already thousands of times the correct run's (the too-large step), C's is ordinary (the
wrong sign).
"""

# %% tags=["claims"]
lecture.claim("the signature table names each mystery run's bug (seeds not used to write it)",
              all(diagnose(medians(mystery_summaries[f"mystery {letter}"]), reference_numbers) == bug
                  for letter, bug in MYSTERY.items()),
              measured=", ".join(f"{letter}: {diagnose(medians(mystery_summaries[f'mystery {letter}']), reference_numbers)}"
                                 for letter in MYSTERY), quick=False)
mystery = {letter: {key: float(values.median()) for key, values in mystery_summaries[f"mystery {letter}"].items()}
           for letter in MYSTERY}
best_A = float(mystery_runs["mystery A"]["episode_return_recent"].max())
lecture.claim("Mystery A, the shared trunk: at its best its return comes within 10% of the correct run's median, and "
              "it ends above half of it",
              MYSTERY["A"] == "shared trunk, raw returns" and best_A >= 0.9 * reference_numbers["final return"]
              and mystery["A"]["final return"] > 0.5 * reference_numbers["final return"],
              measured=f"best {best_A:.1f}, final {mystery['A']['final return']:.1f} vs correct "
                       f"{reference_numbers['final return']:.1f}", quick=False)
lecture.claim("Mystery A: a value loss whose last-quarter mean is far above the correct run's, and an explained "
              "variance below it that swings under 0",
              mystery["A"]["final value loss"] > 10 * reference_numbers["final value loss"]
              and mystery["A"]["final explained variance"] < reference_numbers["final explained variance"]
              and float(mystery_runs["mystery A"]["explained_variance"].min()) < 0,
              measured=f"value loss {mystery['A']['final value loss']:.3g} vs {reference_numbers['final value loss']:.3g}, "
                       f"explained variance {mystery['A']['final explained variance']:.3g} vs "
                       f"{reference_numbers['final explained variance']:.3g}, lowest "
                       f"{float(mystery_runs['mystery A']['explained_variance'].min()):.3g}", quick=False)
lecture.claim("B and C both end at the shortest episodes, with an entropy near 0",
              all(mystery[letter]["final return"] < reference_numbers["untrained return"]
                  and mystery[letter]["final entropy"] < 0.02 for letter in "BC"),
              measured=", ".join(f"{letter}: return {mystery[letter]['final return']:.2f}, entropy "
                                 f"{mystery[letter]['final entropy']:.2g}" for letter in "BC"), quick=False)
lecture.claim("B's approx KL is already thousands of times the correct run's (the too-large step), C's is "
              "ordinary (the wrong sign)",
              MYSTERY["B"] == "too-large step (lr × 30)" and MYSTERY["C"] == "wrong sign"
              and mystery["B"]["first KL"] > 1000 * reference_numbers["first KL"]
              and mystery["C"]["first KL"] < 2 * reference_numbers["first KL"],
              measured=f"first KL: B {mystery['B']['first KL']:.3g}, C {mystery['C']['first KL']:.3g}, "
                       f"correct {reference_numbers['first KL']:.3g}")

# %% [markdown]
"""
## What to take away

A broken PPO is read from its diagnostics, each against a correct run of the same
configuration: the return says that something is wrong (or, as mystery A shows, not
clearly: a return that at its best reaches the correct run's, the 500 limit in this run),
and the other seven say what. Exact values are the strongest evidence: a clip fraction
and a KL that are 0 from the first update on, or a first-minibatch ratio error that is
not 0, each point at one line of code. A first update's KL thousands of times the reference's points at the step
size. A return below the untrained policy's after an ordinary first update points at a
sign. A critic whose loss stays large points at the value loss's scale or its path into
the policy.
"""

# %%
lecture.finish()
