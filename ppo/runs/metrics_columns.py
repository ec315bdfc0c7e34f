"""Every column of metrics.csv: what it measures, its unit, its healthy range, which trainer logs it.

An environment trainer (`ppo.trainers`: PPO and its variants, one seed or a batch, recurrent
or not) writes one row per iteration to metrics.csv and TensorBoard (`ppo.runs.logger`).
This table is the one description of those columns: the book's page on the run folder
renders it, and `tests/test_metrics_columns.py` trains each trainer for one iteration and
checks that it logs exactly the columns the table gives it. `COLUMNS` are every run's; a
variant that logs more declares them in its class (`columns`, ppo.trainers.variants), so a
variant's columns are written where the variant is, and the table takes them from the
algorithms `ppo-train` offers (`table_rows(ALGORITHMS)`, ppo.trainers.registry). The
language-model trainers (`ppo.lm`) write other columns.

The symbols are the lectures': r_t(θ) = π_θ(a_t | s_t) / π_old(a_t | s_t), Â_t the
advantage as the loss uses it (whitened per minibatch with norm_adv), R_t = Â_t + V_old(s_t)
the λ-return, ε the clip, ε_v the value clip, c the dual clip, β the KL coefficient and
d_targ the KL target of the adaptive variants. "The minibatches visited" are every
minibatch of the update, the one whose KL stopped it included, each measured before its
own step. A healthy range is one the course measured (the cheat sheet's diagnostics:
lectures 7 and 14, the CartPole preset); another environment or configuration has other
healthy values, so read a run against a reference run of the same configuration.

    column("approx_kl").healthy                      # what a healthy run logs there
    columns_logged_by(PPOPenalty)                    # the columns of a PPO-Penalty run, in the table's order
    table_rows(ALGORITHMS)                           # the book's table
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MetricsColumn:
    """One column: `meaning` in one sentence, its `unit` or range, and the `healthy` values the
    course measured ("" where it states none)."""

    name: str
    meaning: str
    unit: str = ""
    healthy: str = ""


COLUMNS: tuple[MetricsColumn, ...] = (
    MetricsColumn("global_step", "Environment steps collected so far, over every env copy (and every process): "
                  "the x axis of every curve.", "steps"),
    MetricsColumn("policy_loss", "L_policy, mean over the minibatches visited: "
                  "−E[min(r_t(θ)Â_t, clip(r_t(θ), 1 − ε, 1 + ε)Â_t)] for PPO-Clip and adaptive clipping "
                  "(dual-clip: the objective bounded below by c·Â_t where Â_t < 0), "
                  "−E[r_t(θ)Â_t] + β·KL(π_old ‖ π_θ) for PPO-Penalty."),
    MetricsColumn("value_loss", "L_value = ½E[(V_θ(s_t) − R_t)²] (with ε_v, the larger of the clipped and unclipped "
                  "errors), mean over the minibatches visited.", "(return units)²",
                  "small next to the returns' scale (0.013 at the end of lecture 14's correct CartPole runs); "
                  "more than 10× a reference run's: the value gradient swamps the policy's"),
    MetricsColumn("entropy", "H[π_θ(· | s_t)], mean over the samples of the minibatches visited.",
                  "nats (ln 2 ≈ 0.69: a uniform choice of CartPole's two actions)",
                  "falls slowly as the policy commits (the CartPole preset's last quarter: 0.194); "
                  "≈ 0 early: the policy stopped exploring"),
    MetricsColumn("value_clip_fraction", "Share of samples whose value moved further than ε_v from V_old: "
                  "E[1{|V_θ(s_t) − V_old(s_t)| > ε_v}] (0 with value clipping off).", "[0, 1]"),
    MetricsColumn("old_approx_kl", "The k1 estimate of KL(π_old ‖ π_θ), E[−log r_t(θ)], over the samples of "
                  "the minibatches visited: unbiased but noisy, and it can be negative.", "nats"),
    MetricsColumn("approx_kl", "The k3 estimate of KL(π_old ‖ π_θ), E[(r_t(θ) − 1) − log r_t(θ)] ≥ 0, over the "
                  "samples of the minibatches visited: how far the update moved the policy (`target_kl` "
                  "stops on the same estimate, per minibatch).", "nats",
                  "small, falling as the learning rate anneals (the CartPole preset: mean 0.00381, largest "
                  "iteration 0.0201); exactly 0 from the first iteration on: the ratio is always 1 "
                  "(log π_old recomputed each minibatch)"),
    MetricsColumn("clip_fraction", "Share of samples whose ratio left [1 − ε, 1 + ε], E[1{|r_t(θ) − 1| > ε}] "
                  "with the ε in force, over the minibatches visited.", "[0, 1]",
                  "a few percent (the CartPole preset: mean 0.0457; lecture 14's largest iteration 0.204); 0 whatever the "
                  "step when ε = inf, so read it next to approx_kl"),
    MetricsColumn("first_minibatch_ratio_error", "The largest |r_t(θ) − 1| on the update's first minibatch, "
                  "before any step, where π_θ = π_old.", "≥ 0",
                  "0 up to float32 rounding; above that (0.293 in lecture 14) the ratio is taken against another "
                  "policy than the one that collected the rollout: a bug"),
    MetricsColumn("gradient_steps", "Adam steps the update took: update_epochs × num_minibatches, fewer when "
                  "`target_kl` ended it.", "count", "K·M when `target_kl` is off (24 for the CartPole preset)"),
    MetricsColumn("early_stopped", "1 when `target_kl` ended the update (the minibatch whose KL passed it took no "
                  "step), else 0.", "0 or 1"),
    MetricsColumn("grad_norm", "‖g‖₂ of the loss's gradient over every trained parameter before clipping to "
                  "`max_grad_norm`, mean over the update's steps.", "≥ 0",
                  "finite (a non-finite value stops the run); lecture 14's correct CartPole runs peaked at 15.8, "
                  "clipped to 0.5 before each step"),
    MetricsColumn("explained_variance", "1 − Var[R_t − V_old(s_t)] / Var[R_t] over the rollout: how much of the "
                  "λ-returns the critic that collected it predicted (1 perfect, 0 the mean's, below 0 worse; "
                  "empty when the returns do not vary).", "≤ 1",
                  "well above 0 and towards 1 while the return grows (0.74 for the CartPole preset at a fifth of "
                  "its budget); it reads low once every return saturates, since Var[R_t] ≈ 0"),
    MetricsColumn("episodes", "Episodes that ended during this iteration's rollout, over every env copy.", "count"),
    MetricsColumn("episode_return_mean", "Mean undiscounted return of those episodes (empty when none ended).",
                  "return units"),
    MetricsColumn("episode_length_mean", "Mean length of those episodes (empty when none ended).", "steps"),
    MetricsColumn("episode_return_recent", "Mean return of the last 20 finished episodes: the learning curve and "
                  "the progress bar.", "return units",
                  "CartPole: from about 17 untrained to the 500 limit; 475 counts as solved"),
    MetricsColumn("learning_rate", "α of this iteration's update: α₀ · (1 − (i − 1) / I) at iteration i of I "
                  "with `anneal_lr`, else α₀.", "> 0"),
    MetricsColumn("iteration", "Iterations done, this one included.", "count"),
    MetricsColumn("time_s", "Seconds spent in iterations so far (rollouts and updates; logging, checkpoints and "
                  "evaluation left out); a resumed run continues the count.", "seconds"),
    MetricsColumn("steps_per_second", "global_step / time_s: training throughput.", "steps per second"),
)

TABLE_HEADER = ("column", "meaning", "unit or range", "healthy", "logged by")
VARIANT_COLUMNS_BEFORE = "episodes"  # where the table lists the variants' own columns


def own_columns(trainer: type) -> list[MetricsColumn]:
    """The columns a trainer class logs beyond every run's: the `columns` its class and its bases declare."""
    declared: dict[str, MetricsColumn] = {}
    for cls in reversed(trainer.__mro__):
        for entry in vars(cls).get("columns", ()):
            declared[entry.name] = entry
    return list(declared.values())


def columns_logged_by(trainer: type) -> list[str]:
    """The columns a run of `trainer` logs, in the table's order."""
    return [entry.name for entry in COLUMNS] + [entry.name for entry in own_columns(trainer)]


def column(name: str, algorithms: dict[str, type] | None = None) -> MetricsColumn:
    """The column called `name` (among every run's and, with `algorithms`, their own); KeyError naming
    the known columns if there is none."""
    entries = [*COLUMNS, *(entry for trainer in (algorithms or {}).values() for entry in own_columns(trainer))]
    for entry in entries:
        if entry.name == name:
            return entry
    raise KeyError(f"{name!r} is not a metrics.csv column; the columns are {', '.join(c.name for c in entries)}")


def table_rows(algorithms: dict[str, type]) -> list[tuple[str, str, str, str, str]]:
    """The table as text, one row per column under TABLE_HEADER (`name` in backticks marks code):
    every run's columns, and each of `algorithms`' own (name → trainer class) with the names of
    the algorithms that log it."""
    own: dict[str, tuple[MetricsColumn, list[str]]] = {}
    for algorithm, trainer in algorithms.items():
        for entry in own_columns(trainer):
            own.setdefault(entry.name, (entry, []))[1].append(algorithm)
    rows = []
    for entry in COLUMNS:
        if entry.name == VARIANT_COLUMNS_BEFORE:
            rows += [(f"`{variant.name}`", variant.meaning, variant.unit, variant.healthy,
                      " and ".join(names) + " only") for variant, names in own.values()]
        rows.append((f"`{entry.name}`", entry.meaning, entry.unit, entry.healthy, "every run"))
    return rows
