"""Results over seeds: runs grouped by setting, interval estimates, performance profiles, a summary table.

One training run is one sample of a random outcome (its seed draws the weights, the
minibatches and the episodes), so a setting is judged by many runs, and every number
comes with a confidence interval. The estimators are rliable's (Agarwal et al., "Deep
Reinforcement Learning at the Edge of the Statistical Precipice", NeurIPS 2021):

* IQM, the interquartile mean: the mean of the middle 50% of runs (the scores sorted,
  the lowest and the highest quarter dropped; with n runs, ⌊n/4⌋ at each end). Less
  thrown by one lucky or failed run than the mean, less noisy than the median.
* the mean over runs.
* 95% confidence intervals by the stratified bootstrap: resample the runs with
  replacement within each task (one task here: one environment), recompute the
  statistic, and take the 2.5th and 97.5th percentiles over `reps` resamples. The
  resamples are drawn from `seed`: the same scores and seed give the same interval.
  With few runs (say 4) the percentile bootstrap is too narrow; read it as a floor.
* the performance profile: the fraction of runs whose score is above τ, for every τ,
  with its bootstrap interval.

The score of a run is its final evaluation (the mean return of eval.json), or, where a
run has no eval.json, the final `episode_return_recent` of its metrics.csv (the mean
return of the last training episodes); the summary table says which runs that was.

rliable is imported inside the functions that need it (importing it takes about a
second: it brings scipy, pandas, statsmodels and arch), so a command that computes no
statistics never loads it. It is in the optional extra 'stats'.
"""

from __future__ import annotations

import json
import math
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from experiments.commands.run_folder import NOT_A_SETTING, format_value
from ppo.config import ConfigError
from ppo.runs.logger import read_metrics
from ppo.trainers.seed_batch import DIVERGED_NAME

DEFAULT_REPS = 2000  # bootstrap resamples; about 0.15 ms each for a few runs
CONFIDENCE = 0.95
RETURN_COLUMN = "episode_return_recent"
TIME_COLUMN = "time_s"
STEP_COLUMN = "global_step"


# ---------------------------------------------------------------- reading run folders

@dataclass
class Run:
    """What a run folder holds: its config, its metrics.csv rows (floats, None for empty
    cells), its evaluation (eval.json, or None where there is none) and, for a run of a
    seed batch that diverged, when and why (DIVERGED_NAME, else None)."""

    path: Path
    config: dict
    metrics: list[dict]
    evaluation: dict | None
    diverged: dict | None = None


def read_config(run_dir: Path) -> dict:
    """The config.json of a run folder; ConfigError (one line) if it is missing or damaged."""
    path = Path(run_dir) / "config.json"
    if not path.is_file():
        raise ConfigError(f"{run_dir} has no config.json (not a run folder written by ppo-train)")
    try:
        config = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path} is not valid JSON ({error})") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{path} does not hold a mapping of config fields")
    return config


def load_run(run_dir: str | Path) -> Run:
    """Read a run folder; ConfigError (one line) for a missing or damaged metrics.csv, config.json or eval.json."""
    run_dir = Path(run_dir)
    metrics_path = run_dir / "metrics.csv"
    if not metrics_path.is_file():
        raise ConfigError(f"{run_dir} has no metrics.csv (not a run folder written by ppo-train)")
    config = read_config(run_dir)
    try:
        metrics = read_metrics(metrics_path)
    except (ValueError, TypeError, UnicodeDecodeError) as error:  # a cell that is no number, a cut row
        raise ConfigError(f"{metrics_path} cannot be read ({error})") from None
    evaluation = None
    eval_path = run_dir / "eval.json"
    if eval_path.is_file():
        try:
            evaluation = json.loads(eval_path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ConfigError(f"{eval_path} is not valid JSON ({error})") from None
        if not isinstance(evaluation, dict) or not isinstance(evaluation.get("mean_return"), (int, float)):
            raise ConfigError(f"{eval_path} has no mean_return")
    diverged = None
    diverged_path = run_dir / DIVERGED_NAME
    if diverged_path.is_file():
        try:
            diverged = json.loads(diverged_path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ConfigError(f"{diverged_path} is not valid JSON ({error})") from None
    return Run(run_dir, config, metrics, evaluation, diverged)


def final_score(run: Run) -> tuple[float | None, str]:
    """The run's score and where it comes from: ("evaluation") eval.json's mean return;
    ("training") without eval.json, the last `episode_return_recent` in metrics.csv;
    (None, "diverged") for a run that diverged (a failure, whatever it reached before);
    (None, "none") if the run has neither (no episode finished yet)."""
    if run.diverged is not None:
        return None, "diverged"
    if run.evaluation is not None:
        return float(run.evaluation["mean_return"]), "evaluation"
    for row in reversed(run.metrics):
        if row.get(RETURN_COLUMN) is not None:
            return float(row[RETURN_COLUMN]), "training"
    return None, "none"


def time_to_threshold(run: Run, threshold: float) -> tuple[float, float] | None:
    """(time_s, global_step) of the first metrics.csv row whose `episode_return_recent`
    (the mean return of the last training episodes) is ≥ threshold; None if none is."""
    for row in run.metrics:
        value = row.get(RETURN_COLUMN)
        if value is not None and value >= threshold:
            return row.get(TIME_COLUMN), row.get(STEP_COLUMN)
    return None


# ---------------------------------------------------------------- settings

def _setting(config: dict) -> dict:
    """The config without the fields that do not change what is learned (NOT_A_SETTING)."""
    return {name: value for name, value in config.items() if name not in NOT_A_SETTING}


def _key(setting: dict) -> str:
    return json.dumps(setting, sort_keys=True)


def setting_key(config: dict) -> str:
    """What runs of one setting share (group_runs): the config without NOT_A_SETTING, as one string."""
    return _key(_setting(config))


def _labels(settings: list[dict]) -> list[str]:
    """`name=value ...` of the fields whose values differ between the settings; "all" for one setting."""
    if len(settings) == 1:
        return ["all"]
    names = list(dict.fromkeys(name for setting in settings for name in setting))
    differing = [name for name in names
                 if len({json.dumps(setting.get(name, "<missing>"), sort_keys=True) for setting in settings}) > 1]
    labels: list[str] = []
    for setting in settings:
        label = " ".join(f"{name}={format_value(setting[name]) if name in setting else 'missing'}"
                         for name in differing)
        labels.append(label if label not in labels else f"{label} ({len(labels) + 1})")  # values that print alike
    return labels


def group_runs(run_dirs: Iterable[str | Path]) -> dict[str, list[Path]]:
    """The run folders grouped by setting, in the order the settings first appear.

    A setting is a run's config.json without its seed and the fields that do not change
    what is learned (NOT_A_SETTING). The label of a group names the fields that differ
    between the groups, e.g. "learning_rate=3e-3 clip_coef=0.1"; "all" if there is one
    group. ConfigError (one line) if a folder has no config.json, or a setting holds the
    same seed twice (a copy of a run is not another sample)."""
    groups: dict[str, tuple[dict, list[Path], dict]] = {}
    for run_dir in map(Path, run_dirs):
        config = read_config(run_dir)
        setting = _setting(config)
        _, folders, seeds = groups.setdefault(_key(setting), (setting, [], {}))
        seed = config.get("seed")
        if seed in seeds:
            raise ConfigError(f"{seeds[seed]} and {run_dir} are the same setting with the same seed {seed}: "
                              "a repeated run is not another sample; pass one of them")
        seeds[seed] = run_dir
        folders.append(run_dir)
    if not groups:
        raise ConfigError("no run folders given")
    labels = _labels([setting for setting, _, _ in groups.values()])
    return {label: folders for label, (_, folders, _) in zip(labels, groups.values())}


# ---------------------------------------------------------------- estimates (rliable)

def _rliable():
    try:
        from rliable import library, metrics
    except ImportError as error:
        raise ConfigError(f"the statistics need the optional extra 'stats' ({error}): "
                          "pip install -c constraints.txt -e '.[stats]'") from None
    return library, metrics


@contextmanager
def _seeded_numpy(seed: int) -> Iterator[None]:
    """rliable's bootstrap draws its resamples from NumPy's global generator (np.random.choice),
    not from the random_state it takes: seed that generator for the call, then put it back."""
    state = np.random.get_state()
    np.random.seed(seed)
    try:
        yield
    finally:
        np.random.set_state(state)


def _score_matrix(scores, group: str) -> np.ndarray:
    """Scores as rliable takes them: runs × tasks (a 1-D array is one task)."""
    matrix = np.asarray(scores, dtype=float)
    if matrix.ndim == 1:
        matrix = matrix[:, None]
    if matrix.ndim != 2 or matrix.size == 0:
        raise ConfigError(f"the scores of {group!r} must be a non-empty runs × tasks array, not shape {matrix.shape}")
    if not np.isfinite(matrix).all():
        raise ConfigError(f"the scores of {group!r} are not all finite")
    return matrix


def iqm(scores) -> float:
    """The interquartile mean of `scores` (runs, or runs × tasks, pooled): the mean of the middle 50%."""
    _, metrics = _rliable()
    return float(metrics.aggregate_iqm(_score_matrix(scores, "scores")))


def interval_estimates(scores_by_group: dict[str, np.ndarray], reps: int = DEFAULT_REPS, seed: int = 0,
                       confidence: float = CONFIDENCE) -> dict[str, dict[str, float]]:
    """IQM and mean of each group's scores (runs × tasks, or runs) with stratified-bootstrap confidence intervals.

    Returns {group: {"iqm", "iqm_low", "iqm_high", "mean", "mean_low", "mean_high"}}. IQM is
    the mean of the middle 50% of the runs (pooled over tasks); mean is the mean over tasks
    of the mean over runs. The interval is the percentile interval over `reps` resamples of
    the runs within each task (rliable's stratified bootstrap); every group's resamples
    are drawn from `seed`, so the same scores and seed give the same interval, whatever
    the other groups."""
    library, metrics = _rliable()

    def iqm_and_mean(matrix: np.ndarray) -> np.ndarray:
        return np.array([metrics.aggregate_iqm(matrix), metrics.aggregate_mean(matrix)])

    results = {}
    for group, scores in scores_by_group.items():
        matrix = _score_matrix(scores, group)
        with _seeded_numpy(seed):
            points, intervals = library.get_interval_estimates(
                {group: matrix}, iqm_and_mean, reps=reps, confidence_interval_size=confidence)
        (iqm_point, mean_point), ((iqm_low, mean_low), (iqm_high, mean_high)) = points[group], intervals[group]
        results[group] = {"iqm": float(iqm_point), "iqm_low": float(iqm_low), "iqm_high": float(iqm_high),
                          "mean": float(mean_point), "mean_low": float(mean_low), "mean_high": float(mean_high)}
    return results


def performance_profiles(scores_by_group: dict[str, np.ndarray], taus, reps: int = DEFAULT_REPS, seed: int = 0,
                         confidence: float = CONFIDENCE) -> dict[str, dict[str, np.ndarray]]:
    """Each group's performance profile: the fraction of its runs (over all tasks) with score > τ, for each τ
    in `taus`, with its stratified-bootstrap confidence band.

    Returns {group: {"fraction", "low", "high"}}, arrays of len(taus). This is rliable's
    score distribution (create_performance_profile), given as one comparison of every
    score with every τ rather than a loop over τ: the same numbers, forty times faster."""
    library, _ = _rliable()
    taus = np.asarray(taus, dtype=float)

    def fraction_above(matrix: np.ndarray, tau_list) -> np.ndarray:
        return (matrix.reshape(-1, 1) > np.asarray(tau_list)).mean(axis=0)

    results = {}
    for group, scores in scores_by_group.items():
        matrix = _score_matrix(scores, group)
        with _seeded_numpy(seed):
            profiles, bands = library.create_performance_profile(
                {group: matrix}, taus, custom_profile_func=fraction_above, reps=reps,
                confidence_interval_size=confidence)
        results[group] = {"fraction": np.asarray(profiles[group], dtype=float),
                          "low": np.asarray(bands[group][0], dtype=float),
                          "high": np.asarray(bands[group][1], dtype=float)}
    return results


# ---------------------------------------------------------------- the summary of a sweep

def scores_by_group(groups: dict[str, list[Run]]) -> dict[str, np.ndarray]:
    """The final scores (final_score) of each group's runs; runs without one are left out."""
    return {label: np.array([score for score, _ in map(final_score, runs) if score is not None])
            for label, runs in groups.items()}


def load_groups(run_dirs: Iterable[str | Path]) -> dict[str, list[Run]]:
    """group_runs, with every run folder read (load_run)."""
    return {label: [load_run(path) for path in paths] for label, paths in group_runs(run_dirs).items()}


def summarize_groups(groups: dict[str, list[Run]], threshold: float | None, reps: int = DEFAULT_REPS,
                     seed: int = 0) -> list[dict]:
    """summarize_runs for runs already read and grouped (load_groups)."""
    rows = []
    for label, runs in groups.items():
        scored = [(score, source) for score, source in map(final_score, runs) if score is not None]
        row = {"setting": label, "runs": len(runs), "scored": len(scored),
               "diverged": [run.diverged for run in runs if run.diverged is not None],
               "from_training": sum(source == "training" for _, source in scored),
               "threshold": threshold, "reps": reps}
        if scored:
            row.update(interval_estimates({label: np.array([score for score, _ in scored])}, reps, seed)[label])
        else:
            row.update(dict.fromkeys(("iqm", "iqm_low", "iqm_high", "mean", "mean_low", "mean_high")))
        row.update(successes=None, reached=None, median_time_to_threshold=None, median_steps_to_threshold=None)
        if threshold is not None:
            row["successes"] = sum(score >= threshold for score, _ in scored)
            firsts = [first for first in (time_to_threshold(run, threshold) for run in runs) if first is not None]
            row["reached"] = len(firsts)
            times = [time_s for time_s, _ in firsts if time_s is not None]
            steps = [step for _, step in firsts if step is not None]
            row["median_time_to_threshold"] = float(np.median(times)) if times else None
            row["median_steps_to_threshold"] = float(np.median(steps)) if steps else None
        rows.append(row)
    return rows


def summarize_runs(run_dirs: Iterable[str | Path], threshold: float | None, reps: int = DEFAULT_REPS,
                   seed: int = 0) -> list[dict]:
    """One row per setting (group_runs) of the runs' final scores (final_score).

    Each row: "setting" (the group's label), "runs", "scored" (runs with a score),
    "diverged" (what DIVERGED_NAME says of each run that diverged: no score, a failure),
    "from_training" (runs scored by their training return: no eval.json), "threshold",
    "reps"; "iqm", "mean" and their 95% bootstrap intervals ("iqm_low", ... see
    interval_estimates; None if no run has a score); with a threshold, "successes"
    (runs whose final score is ≥ threshold), "reached" (runs whose training return,
    `episode_return_recent`, reached the threshold at some iteration) and the median
    over those runs of the first `time_s` and `global_step` at which it did
    ("median_time_to_threshold", "median_steps_to_threshold"; None if no run did).
    Without a threshold those are None."""
    return summarize_groups(load_groups(run_dirs), threshold, reps, seed)


def _number(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if value == 0 or abs(value) >= 1000:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def _with_interval(row: dict, name: str) -> str:
    if row.get(name) is None:
        return "-"
    return f"{_number(row[name])} [{_number(row[name + '_low'])}, {_number(row[name + '_high'])}]"


def format_summary_table(rows: list[dict]) -> str:
    """summarize_runs' rows as a text table, one line per setting, with the footnotes that say
    what the numbers are."""
    if not rows:
        return "no runs to summarize"
    threshold = rows[0].get("threshold")
    thr = f"{threshold:g}" if threshold is not None else None
    header = ["setting", "runs", f"final ≥ {thr}" if thr else "final ≥ threshold", "mean [95% CI]",
              "IQM [95% CI]", f"median time to {thr}" if thr else "median time to threshold"]
    lines = []
    for row in rows:
        marked = row["setting"] + (" *" if row["from_training"] else "")
        solved = f"{row['successes']}/{row['runs']}" if row["successes"] is not None else "-"
        if row.get("diverged"):
            solved += f" ({len(row['diverged'])} diverged)"
        if row["reached"] is None:
            timing = "-"
        elif row["median_time_to_threshold"] is None:
            timing = f"never ({row['reached']}/{row['runs']} reached)"
        else:
            timing = f"{_number(row['median_time_to_threshold'])} s ({row['reached']}/{row['runs']} reached)"
        lines.append([marked, str(row["runs"]), solved, _with_interval(row, "mean"), _with_interval(row, "iqm"),
                      timing])
    widths = [max(len(line[column]) for line in [header, *lines]) for column in range(len(header))]
    right = {1}
    text = ["  ".join(cell.rjust(width) if column in right else cell.ljust(width)
                      for column, (cell, width) in enumerate(zip(line, widths))).rstrip()
            for line in [header, *lines]]
    reps = rows[0].get("reps", DEFAULT_REPS)
    text.append("final score: the mean return of a run's evaluation (eval.json); IQM: interquartile mean, "
                "the mean of the middle 50% of runs")
    text.append(f"95% CI: confidence interval, stratified bootstrap over the runs ({reps} resamples)")
    if thr:
        text.append(f"median time to {thr}: over the runs whose training return (episode_return_recent) "
                    f"reached {thr}, the first time_s at which it did")
    else:
        text.append("no success threshold given: no success counts or times to threshold")
    for row in rows:
        if row["from_training"]:
            text.append(f"* {row['setting']}: {row['from_training']} of {row['runs']} runs have no eval.json; "
                        f"their final score is the final training return (episode_return_recent)")
        diverged = row.get("diverged") or []
        if diverged:
            text.append(f"  {row['setting']}: {len(diverged)} of {row['runs']} runs diverged ("
                        + "; ".join(f"seed {run.get('seed')} at iteration {run.get('iteration')}: "
                                    f"{run.get('quantity')} = {run.get('value')}" for run in diverged)
                        + "): failures, left out of the mean and IQM")
        if row["scored"] + len(diverged) < row["runs"]:
            text.append(f"  {row['setting']}: {row['runs'] - row['scored'] - len(diverged)} of {row['runs']} runs "
                        "finished no episode: left out of the statistics")
    return "\n".join(text)
