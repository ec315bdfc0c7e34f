"""The course's diagnostics as rules: what a run's metrics.csv shows that a healthy run's does not.

Each rule reads the rows of one run (floats, None for empty cells) and its config, and
returns a Finding or None: the column it read, what that column did and when (its value
at an iteration and step), the healthy range (`ppo.runs.metrics_columns`, the cheat
sheet's numbers), the likely causes and the lecture section that explains them. A
finding is a "problem" where the course's runs show it only with a bug or a broken
setting, a "warning" where a healthy run of another configuration may show it too.

The thresholds were read off the course's runs (the CartPole preset, lecture 7's and
lecture 14's) and checked against healthy runs of CartPole, Acrobot and Pendulum, which
none of them flags as a problem:

* first_minibatch_ratio_error: 0 in a correct run (< 1e-5), 0.293 with the ratio taken
  against the reference;
* approx_kl: the preset's largest iteration 0.0201, its mean 0.0038; the first update of
  the learning rate × 30 about 10;
* clip_fraction: a few percent; 0.49 to the end with the ratio against the reference,
  0.95 at the first update of the learning rate × 30;
* grad_norm: peaks of 15.8 (at most 25) in correct runs, 607 with log π_old recomputed;
* entropy: the preset's last quarter 0.194 of a start at ln 2 ≈ 0.69; about 0 after a
  collapse.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Callable

from ppo.runs.metrics_columns import column

PROBLEM, WARNING = "problem", "warning"
SEVERITIES = (WARNING, PROBLEM)  # in rising order

RATIO_ERROR_LIMIT = 1e-3  # float32 rounding stays below 1e-5
HUGE_FIRST_KL = 0.2  # ten times the preset's largest iteration (0.0201)
PERSISTENT_KL = 0.03  # a median KL over the run's second half above this: steps larger than the clip contains
HIGH_CLIP_FRACTION = 0.3  # the second half's median
MOSTLY_CLIPPED = 0.5  # one update clipping most of its batch
HUGE_GRAD_NORM = 100.0  # four times the largest peak of a correct CartPole run
COLLAPSED_ENTROPY_SHARE = 0.05  # of the first update's entropy
UNCOMMITTED_ENTROPY_SHARE = 0.75  # of the first update's entropy, kept to the end (the preset ends near 30%)
STALLED_CRITIC_ITERATIONS = 16  # a third of the preset's run: the correct critic's loss has fallen tenfold by then
VALUE_LOSS_GROWTH = 100.0  # the last quarter's value loss over its lowest quarter's
RETURN_DROP_SHARE = 0.5  # of the way from the untrained return to the peak, lost by the end
EARLY_STOP_SHARE = 0.9  # of the iterations stopped by target_kl

LECTURE_7_READING = "lecture 7, 'Reading the diagnostics of one run'"
LECTURE_7_FULL_BUDGET = "lecture 7, 'The same question at the full budget'"
LECTURE_14_SIGNATURES = "lecture 14, 'The signatures'"
LECTURE_8_SHARED_TRUNK = "lecture 8, '3. The value loss on unnormalised returns, through a shared trunk'"
LECTURE_8_REFERENCE = "lecture 8, '4. The ratio taken against the reference model'"
LECTURE_6_TRAINING = "lecture 6, 'Training'"
CHEAT_SHEET_TARGET_KL = "the cheat sheet, '12. The target-KL early stop'"


@dataclass
class Finding:
    """What one rule found in one run: `observed` says what `metric` did and when."""

    metric: str
    severity: str
    observed: str
    value: float
    iteration: int | None
    global_step: int | None
    healthy: str
    causes: str
    lecture: str
    rule: str = ""

    def as_dict(self) -> dict:
        """The finding as JSON can hold it: a non-finite value as its text ("nan", "inf")."""
        fields = asdict(self)
        if not math.isfinite(self.value):
            fields["value"] = str(self.value)
        return fields


@dataclass
class RunMetrics:
    """One run's rows and config, with the helpers the rules share."""

    rows: list[dict]
    config: dict = field(default_factory=dict)
    solved_return: float | None = None  # the env's success threshold, where it has one

    def has(self, name: str) -> bool:
        return bool(self.rows) and name in self.rows[0]

    def series(self, name: str) -> list[tuple[int, float]]:
        """(row index, value) of every row where `name` has a value."""
        return [(index, row[name]) for index, row in enumerate(self.rows) if row.get(name) is not None]

    def values(self, name: str) -> list[float]:
        return [value for _, value in self.series(name)]

    def when(self, index: int) -> tuple[int | None, int | None]:
        """(iteration, global_step) of row `index`."""
        row = self.rows[index]
        iteration = row.get("iteration")
        step = row.get("global_step")
        return (int(iteration) if iteration is not None else index + 1), (int(step) if step is not None else None)

    def where(self, index: int) -> str:
        iteration, step = self.when(index)
        return f"iteration {iteration}" + (f", step {step:,}" if step is not None else "")

    def final_return(self) -> float | None:
        """The mean of `episode_return_recent` over the last quarter of the rows."""
        returns = self.values("episode_return_recent")
        return mean(last_quarter(returns)) if returns else None

    def untrained_return(self) -> float | None:
        """The return of the episodes of the first rollout, played before any update."""
        for name in ("episode_return_mean", "episode_return_recent"):
            values = self.values(name)
            if values:
                return values[0]
        return None

    def solved(self) -> bool:
        """Whether the return is at the env's success threshold at the end (False where it has none)."""
        final = self.final_return()
        return self.solved_return is not None and final is not None and final >= self.solved_return

    def clipping(self) -> bool:
        coefficient = self.config.get("clip_coef", 0.2)
        return coefficient is not None and isinstance(coefficient, (int, float)) and math.isfinite(coefficient)


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def last_quarter(values: list):
    return values[-max(1, len(values) // 4):]


def second_half(values: list):
    return values[len(values) // 2:]


HEALTHY_WITHOUT_A_RANGE = {  # columns whose table entry states no healthy range
    "early_stopped": "0 in most iterations (target_kl is off by default: always 0)",
}


def healthy(name: str) -> str:
    """The healthy values of column `name`, as ppo.runs.metrics_columns states them."""
    return column(name).healthy or HEALTHY_WITHOUT_A_RANGE.get(name, "")


def finding(run: RunMetrics, metric: str, severity: str, observed: str, value: float, index: int | None,
            causes: str, lecture: str, rule: str) -> Finding:
    iteration, step = run.when(index) if index is not None else (None, None)
    return Finding(metric, severity, observed, float(value), iteration, step, healthy(metric), causes, lecture, rule)


def fmt(value: float) -> str:
    return f"{value:.3g}"


# ---------------------------------------------------------------- the rules, in the order to check them

def ratio_error(run: RunMetrics) -> Finding | None:
    """first_minibatch_ratio_error above rounding: log π_old is not the rollout policy's."""
    series = run.series("first_minibatch_ratio_error")
    above = [(index, value) for index, value in series if not value <= RATIO_ERROR_LIMIT]  # NaN counts
    if not above:
        return None
    index, value = max(above, key=lambda item: item[1] if math.isfinite(item[1]) else math.inf)
    return finding(run, "first_minibatch_ratio_error", PROBLEM,
                   f"{fmt(value)} at {run.where(index)}; above {RATIO_ERROR_LIMIT:g} in {len(above)} of "
                   f"{len(series)} iterations", value, index,
                   "the ratio is taken against another policy than the one that collected the rollout: "
                   "stale or mismatched log π_old (a frozen reference policy, log-probabilities from "
                   "another network or another observation normalisation)",
                   f"{LECTURE_14_SIGNATURES}; {LECTURE_8_REFERENCE}", "ratio_error")


def zero_kl(run: RunMetrics) -> Finding | None:
    """approx_kl exactly 0 from the first update on: the ratio is always 1."""
    kls = run.values("approx_kl")
    if not kls or any(value != 0 for value in kls):
        return None
    clips = run.values("clip_fraction")
    also = " (and clip_fraction)" if clips and all(value == 0 for value in clips) else ""
    return finding(run, "approx_kl", PROBLEM, f"exactly 0{also} in every one of {len(kls)} iterations, "
                   "the first included", 0.0, 0,
                   "log π_old recomputed from the current network at each minibatch, so r_t(θ) = 1: the clip "
                   "never acts and the update is the plain policy gradient",
                   LECTURE_14_SIGNATURES, "zero_kl")


def huge_first_step(run: RunMetrics) -> Finding | None:
    """A first update's KL ten times the preset's largest iteration: the step size."""
    series = run.series("approx_kl")
    if not series:
        return None
    index, value = series[0]
    clips = run.values("clip_fraction")
    if not value > HUGE_FIRST_KL and not (clips and clips[0] > MOSTLY_CLIPPED):
        return None
    clipped = f", clip_fraction {fmt(clips[0])}" if clips else ""
    return finding(run, "approx_kl", PROBLEM, f"{fmt(value)} at the first update ({run.where(index)}){clipped}",
                   value, index,
                   "steps far too large: a learning rate too high for the batch, too many epochs, or no clip; "
                   "the policy turns near-deterministic within the first update",
                   f"{LECTURE_14_SIGNATURES}; {LECTURE_7_READING}", "huge_first_step")


def late_finding(run: RunMetrics, metric: str, threshold: float, severity: str, causes: str, lecture: str,
                 rule: str) -> Finding | None:
    """A finding for `metric` whose median over the second half of the run exceeds `threshold`
    (named with the row and value of its largest there); None otherwise, or for a run of fewer than 4 rows."""
    series = run.series(metric)
    if len(series) < 4:
        return None
    late = second_half(series)
    level = median([value for _, value in late])
    if not level > threshold:
        return None
    index, value = max(late, key=lambda item: item[1])
    return finding(run, metric, severity,
                   f"median {fmt(level)} over the second half of the run (largest {fmt(value)} at {run.where(index)})",
                   level, index, causes, lecture, rule)


def persistent_kl(run: RunMetrics) -> Finding | None:
    """A KL that stays high over the run's second half: steps larger than the clip contains."""
    return late_finding(run, "approx_kl", PERSISTENT_KL, WARNING,
                        "steps too large, or not shrinking: a high or constant learning rate (anneal_lr off), many "
                        "epochs, a wide or absent clip", LECTURE_7_READING, "persistent_kl")


def high_clip_fraction(run: RunMetrics) -> Finding | None:
    """Most of the late batches clipped: the ratio far from 1 all the time."""
    return late_finding(run, "clip_fraction", HIGH_CLIP_FRACTION, PROBLEM,
                        "the ratio taken against the wrong policy (look at first_minibatch_ratio_error), or steps "
                        "far larger than ε: too high a learning rate or too many epochs",
                        f"{LECTURE_14_SIGNATURES}; {LECTURE_7_READING}", "high_clip_fraction")


def bad_grad_norm(run: RunMetrics) -> Finding | None:
    """A non-finite or outsized gradient norm before clipping."""
    series = run.series("grad_norm")
    if not series:
        return None
    broken = [(index, value) for index, value in series if not math.isfinite(value)]
    if broken:
        index, value = broken[0]
        return finding(run, "grad_norm", PROBLEM, f"{value} at {run.where(index)}", value, index,
                       "the loss became non-finite: a diverged critic, a log-probability of an impossible "
                       "action, or a learning rate far too high", LECTURE_14_SIGNATURES, "grad_norm")
    index, value = max(series, key=lambda item: item[1])
    if not value > HUGE_GRAD_NORM:
        return None
    return finding(run, "grad_norm", WARNING, f"peaks at {fmt(value)} at {run.where(index)}", value, index,
                   "a loss whose scale dwarfs a healthy run's: value loss on raw returns (through a shared "
                   "trunk), or an update left unchecked (log π_old recomputed, so nothing clips)",
                   f"{LECTURE_14_SIGNATURES}; {LECTURE_8_SHARED_TRUNK}", "grad_norm")


def value_loss_growth(run: RunMetrics) -> Finding | None:
    """A value loss that ends far above its best quarter, or non-finite."""
    series = run.series("value_loss")
    broken = [(index, value) for index, value in series if not math.isfinite(value)]
    if broken:
        index, value = broken[0]
        return finding(run, "value_loss", PROBLEM, f"{value} at {run.where(index)}", value, index,
                       "the critic diverged", LECTURE_14_SIGNATURES, "value_loss")
    if len(series) < 8:
        return None
    values = [value for _, value in series]
    size = max(1, len(values) // 4)
    quarters = [mean(values[start:start + size]) for start in range(0, len(values) - size + 1, size)]
    end, lowest = mean(last_quarter(values)), min(quarters)
    if not (lowest > 0 and end > VALUE_LOSS_GROWTH * lowest):
        return None
    index = len(series) - 1
    return finding(run, "value_loss", WARNING,
                   f"{fmt(end)} over the last quarter, {fmt(end / lowest)}× its lowest quarter's {fmt(lowest)}",
                   end, series[index][0],
                   "the critic losing track of the returns: value loss on unnormalised returns through a shared "
                   "trunk, or returns that changed scale (a policy that collapsed after solving)",
                   f"{LECTURE_8_SHARED_TRUNK}; {LECTURE_14_SIGNATURES}", "value_loss")


def entropy_collapse(run: RunMetrics) -> Finding | None:
    """Entropy fallen to about 0 while the return is below the env's success threshold."""
    series = run.series("entropy")
    if len(series) < 2 or not series[0][1] > 0:
        return None
    start = series[0][1]
    end = mean([value for _, value in last_quarter(series)])
    if not end < COLLAPSED_ENTROPY_SHARE * start or run.solved():
        return None
    below = next(index for index, value in series if value < COLLAPSED_ENTROPY_SHARE * start)
    final = run.final_return()
    known = run.solved_return is not None
    severity = PROBLEM if known else WARNING
    against = (f"the return {fmt(final)} below the success threshold {fmt(run.solved_return)}" if known and final is not None
               else "no success threshold known for this env")
    return finding(run, "entropy", severity,
                   f"{fmt(end)} over the last quarter, from {fmt(start)} at the first update; below "
                   f"{COLLAPSED_ENTROPY_SHARE:.0%} of it since {run.where(below)}; {against}", end, below,
                   "premature collapse: steps too large (a collapse within the first update), a flipped "
                   "advantage sign (the policy commits to the worst actions), or too little exploration",
                   f"{LECTURE_7_READING}; {LECTURE_14_SIGNATURES}", "entropy_collapse")


def critic_swamping_policy(run: RunMetrics) -> Finding | None:
    """A value loss that never falls below its first update's while the entropy stays near its start and
    the return is not solved: the critic's gradient, not the policy's, drives the update."""
    losses, entropies = run.series("value_loss"), run.series("entropy")
    if len(losses) < STALLED_CRITIC_ITERATIONS or len(entropies) < 2 or not entropies[0][1] > 0 or run.solved():
        return None
    first_loss, end_loss = losses[0][1], mean([value for _, value in last_quarter(losses)])
    first_entropy, end_entropy = entropies[0][1], mean([value for _, value in last_quarter(entropies)])
    if not (end_loss >= first_loss and end_entropy > UNCOMMITTED_ENTROPY_SHARE * first_entropy):
        return None
    shared = run.config.get("shared_network") is True
    return finding(run, "value_loss", PROBLEM if shared else WARNING,
                   f"{fmt(end_loss)} over the last quarter, not below its {fmt(first_loss)} at the first update, "
                   f"while the entropy stays at {end_entropy / first_entropy:.0%} of its start"
                   + (" (shared_network on)" if shared else ""), end_loss, losses[-1][0],
                   "the value loss's gradient swamps the policy's: a shared trunk trained on unnormalised "
                   "returns (normalize_reward off, a large vf_coef), so the policy learns slowly",
                   f"{LECTURE_14_SIGNATURES}; {LECTURE_8_SHARED_TRUNK}", "critic_swamping_policy")


def return_below_untrained(run: RunMetrics) -> Finding | None:
    """The return ends below the untrained policy's: the policy learned to do worse."""
    untrained, final = run.untrained_return(), run.final_return()
    series = run.series("episode_return_recent")
    if untrained is None or final is None or len(series) < 4:
        return None
    margin = 0.2 * abs(untrained)
    if not final < untrained - margin:
        return None
    return finding(run, "episode_return_recent", PROBLEM,
                   f"{fmt(final)} over the last quarter, below the untrained policy's {fmt(untrained)}",
                   final, series[-1][0],
                   "the update pushes the policy the wrong way: a flipped advantage sign (Â = V − R), or a "
                   "policy collapsed by too large a step onto the actions that end episodes",
                   f"{LECTURE_14_SIGNATURES}", "return_below_untrained")


def return_drop(run: RunMetrics) -> Finding | None:
    """The return fell back from its peak: a collapse after learning."""
    series = run.series("episode_return_recent")
    untrained = run.untrained_return()
    if len(series) < 8 or untrained is None:
        return None
    peak_index, peak = max(series, key=lambda item: item[1])
    end = mean([value for _, value in last_quarter(series)])
    gained = peak - untrained
    if not gained > 0.25 * abs(untrained) or not peak_index < series[-1][0] or not end < peak - RETURN_DROP_SHARE * gained:
        return None
    return finding(run, "episode_return_recent", WARNING,
                   f"peaked at {fmt(peak)} at {run.where(peak_index)}, then fell to {fmt(end)} over the last quarter",
                   end, peak_index,
                   "a collapse after learning: steps that stay large once the policy is good (no clip, a constant "
                   "or high learning rate), a critic that loses track as the returns change",
                   f"{LECTURE_7_FULL_BUDGET}; {LECTURE_6_TRAINING}", "return_drop")


def negative_explained_variance(run: RunMetrics) -> Finding | None:
    """A critic that explains less than the mean late in training, the return not at its ceiling."""
    series = run.series("explained_variance")
    if len(series) < 8 or run.solved():
        return None
    late = [value for _, value in last_quarter(series)]
    level = median(late)
    if not level < 0:
        return None
    index = min(last_quarter(series), key=lambda item: item[1])[0]
    return finding(run, "explained_variance", WARNING,
                   f"median {fmt(level)} over the last quarter (lowest {fmt(min(late))} at {run.where(index)})",
                   level, index,
                   "the critic predicts the returns worse than their mean: a broken value target (returns or "
                   "bootstrapping wrong), a value loss on raw returns through a shared trunk, a critic learning "
                   "rate or vf_coef far off",
                   f"{LECTURE_7_READING}; {LECTURE_8_SHARED_TRUNK}", "explained_variance")


def always_early_stopped(run: RunMetrics) -> Finding | None:
    """target_kl ending (nearly) every update: the target is too small for the step size."""
    series = run.series("early_stopped")
    if len(series) < 4:
        return None
    stopped = sum(1 for _, value in series if value >= 1)
    if not stopped >= EARLY_STOP_SHARE * len(series):
        return None
    steps = run.values("gradient_steps")
    fewer = f"; {fmt(mean(steps))} gradient steps per update on average" if steps else ""
    return finding(run, "early_stopped", WARNING,
                   f"1 in {stopped} of {len(series)} iterations{fewer} (target_kl = {run.config.get('target_kl')})",
                   stopped / len(series), series[0][0],
                   "target_kl too small for the learning rate: every update ends after a few minibatches, so "
                   "the epochs and the batch go unused; raise target_kl or lower the learning rate",
                   CHEAT_SHEET_TARGET_KL, "early_stopped")


RULES: tuple[Callable[[RunMetrics], Finding | None], ...] = (
    ratio_error, zero_kl, huge_first_step, persistent_kl, high_clip_fraction, bad_grad_norm, value_loss_growth,
    entropy_collapse, critic_swamping_policy, return_below_untrained, return_drop, negative_explained_variance,
    always_early_stopped,
)


def diagnose_rows(rows: list[dict], config: dict | None = None, solved_return: float | None = None) -> list[Finding]:
    """Every finding of the rules on one run's metrics rows, problems first."""
    run = RunMetrics(rows, config or {}, solved_return)
    found = [result for rule in RULES if (result := rule(run)) is not None]
    if not run.clipping():
        found = [item for item in found if item.metric != "clip_fraction"]
    return sorted(found, key=lambda item: -SEVERITIES.index(item.severity))
