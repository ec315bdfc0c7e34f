"""Compare runs over seeds: `ppo-plot RUN_DIR...`.

    ppo-plot runs/sweep                                  # every run folder under runs/sweep
    ppo-plot runs/A__seed1 runs/A__seed2 runs/B__seed1 runs/B__seed2 --threshold 475
    ppo-plot runs/sweep --x time_s --metric episode_return_mean --out comparison

The runs are grouped by setting (their config.json without the seed and the fields that
do not change what is learned; experiments.commands.statistics.group_runs), and each group is
one curve or one row:

* learning_curves.png, curves.csv: each run's metric (default episode_return_recent,
  the mean return of the last training episodes) interpolated linearly onto a grid of
  --points x values over the range every run of the group covers; the mean over seeds
  and a 95% t-interval, mean ± t(0.975, n−1)·s/√n (s the standard deviation over the
  n seeds at that x; no band for one seed). Columns x, group, mean, low, high.
* aggregates.csv: per group, the final score (eval.json's mean return, else the final
  training return): mean and IQM (interquartile mean, the mean of the middle 50% of
  runs) with 95% stratified-bootstrap intervals, and with --threshold the success count
  and median time to threshold (experiments.commands.statistics.summarize_runs).
* with more than one group, aggregates.png (IQM and mean with their intervals) and
  performance_profile.png, profile.csv: the fraction of runs with final score > τ, with
  its bootstrap band. Columns tau, group, fraction, low, high.

The files go to --out (default: plots/ in the folder the run folders share). The
summary table is printed too. Runs of several environments are compared env by env: each
env's files go to a folder of its own under --out (named as the env id), its groups
labelled by what differs among that env's runs only.

Which folders count (select_runs). Every folder with a metrics.csv under the paths
given is a candidate; these are left out, each reason with one line that names the
folders, and only if none is left is that an error:

* not a run: no config.json;
* another kind of run: its metrics.csv has no column --metric or --x (a ppo-rlhf run
  logs no episode_return_recent: plot those with --metric target_rate, say);
* unfinished: its last logged iteration is below the iterations its config plans
  (still running, stopped, or failed). Its curve would cut its group's common range
  short and its score is not final; --include-unfinished compares it all the same;
* an earlier repeat: runs of one setting with one seed are one sample, so of several
  (a command run twice writes `NAME__2`) the latest counts, the one whose metrics.csv
  was written last.

A finished run without eval.json counts, scored by its final training return (the
table marks it). A seed of a batch that diverged (diverged.json) is over too: the
table counts it as a failure, and the curves, which average runs to a common end,
leave it out.
"""

from __future__ import annotations

import csv
import math
import os
import sys
import textwrap
from collections import defaultdict
from pathlib import Path

import numpy as np

from experiments.commands.cli import OneLineArgumentParser, check_writable_folder, run_with_user_errors
from experiments.commands.run_folder import env_folder_name
from experiments.commands.statistics import (DEFAULT_REPS, STEP_COLUMN, TIME_COLUMN, Run, format_summary_table, group_runs,
                                    load_run, performance_profiles, scores_by_group, setting_key, summarize_groups)
from ppo.config import ConfigError, PPOConfig

PROG = "ppo-plot"
X_LABELS = {STEP_COLUMN: "environment steps", TIME_COLUMN: "wall-clock seconds"}
CONFIDENCE = 0.95
PROFILE_POINTS = 101


# ---------------------------------------------------------------- run folders

def find_run_dirs(paths: list[Path]) -> list[Path]:
    """The run folders among `paths`: a folder with a metrics.csv is one; any other folder
    stands for every run folder under it (sorted). ConfigError (one line) for a path that
    does not exist or holds no run folder."""
    found: list[Path] = []
    for path in map(Path, paths):
        if not path.exists():
            raise ConfigError(f"{path} does not exist")
        if not path.is_dir():
            raise ConfigError(f"{path} is not a folder (give run folders, or a folder of run folders)")
        if (path / "metrics.csv").is_file():
            found.append(path)
            continue
        below = sorted(metrics.parent for metrics in path.rglob("metrics.csv"))
        if not below:
            raise ConfigError(f"{path} has no metrics.csv (not a run folder, and no run folders under it)")
        found.extend(below)
    return list(dict.fromkeys(found))  # a folder given twice counts once


def check_metrics_lines(path: Path) -> None:
    """ConfigError (one line) naming the first line of the metrics.csv at `path` that is not a row of
    numbers under its header: the line number and what is wrong with it."""
    try:
        with open(path, newline="") as file:
            reader = csv.reader(file)
            header = next(reader, [])
            for row in reader:
                if row:
                    _check_metrics_row(path, reader.line_num, header, row)
    except (csv.Error, UnicodeDecodeError) as error:
        raise ConfigError(f"{path} is not a CSV file ({error})") from None


def _check_metrics_row(path: Path, line: int, header: list[str], row: list[str]) -> None:
    if len(row) != len(header):
        raise ConfigError(f"{path} line {line}: {len(row)} values under a header of {len(header)} columns "
                          "(a damaged or hand-edited file)")
    for name, cell in zip(header, row):
        try:
            float(cell or 0)
        except ValueError:
            raise ConfigError(f"{path} line {line}: {name} = {cell!r} is not a number") from None


def planned_iterations(config: dict) -> int | None:
    """The iterations a run's config plans: ppo-train's num_iterations (total_timesteps // batch_size),
    ppo-rlhf's iterations; None for a config that is neither's."""
    try:
        return PPOConfig.from_dict(config).num_iterations
    except (ConfigError, TypeError):
        iterations = config.get("iterations")
        return iterations if isinstance(iterations, int) and not isinstance(iterations, bool) else None


def _unfinished(run: Run) -> str | None:
    """"iteration i of I" if the run logged fewer iterations than it plans; None if it is done (or cannot tell)."""
    if run.diverged is not None:  # a seed batch's member that diverged ended there, a failure the table counts
        return None
    planned = planned_iterations(run.config)
    if not run.metrics:
        return f"no iteration of {planned}" if planned else "no iteration"
    done = run.metrics[-1].get("iteration")
    if planned is None or done is None or done >= planned:
        return None
    return f"iteration {done:.0f} of {planned}"


def select_runs(run_dirs: list[Path], x: str = STEP_COLUMN, metric: str = "episode_return_recent",
                include_unfinished: bool = False) -> tuple[list[Run], list[str]]:
    """The runs to compare among `run_dirs`, read, and one line per reason others were left out
    (the module docstring: not a run, another kind, unfinished unless `include_unfinished`, an
    earlier repeat). ConfigError (one line) if none is left."""
    left_out: dict[str, list[str]] = defaultdict(list)
    candidates: list[Run] = []
    for path in run_dirs:
        if not (path / "config.json").is_file():
            left_out["not a run folder (no config.json)"].append(str(path))
            continue
        try:
            run = load_run(path)
        except ConfigError:
            check_metrics_lines(path / "metrics.csv")  # a damaged line: say which, and how
            raise
        missing = [name for name in (x, metric) if run.metrics and name not in run.metrics[0]]
        if missing:
            left_out[f"another kind of run (metrics.csv has no column {missing[0]})"].append(str(path))
        elif not include_unfinished and (progress := _unfinished(run)) is not None:
            left_out["unfinished: still running, stopped or failed (--include-unfinished compares it)"].append(
                f"{path} ({progress})")
        else:
            candidates.append(run)
    repeats: dict[tuple[str, str], list[Run]] = defaultdict(list)
    for run in candidates:
        repeats[setting_key(run.config), repr(run.config.get("seed"))].append(run)
    runs = []
    for same in repeats.values():
        latest = max(same, key=lambda run: ((run.path / "metrics.csv").stat().st_mtime_ns, str(run.path)))
        runs.append(latest)
        for earlier in (run for run in same if run is not latest):
            left_out["an earlier run of a setting and seed run again (the latest counts)"].append(
                f"{earlier.path} ({latest.path} counts)")
    notes = [f"left out, {reason}: {', '.join(folders)}" for reason, folders in left_out.items()]
    if not runs:
        raise ConfigError("no run to compare; " + "; ".join(notes))
    return runs, notes


def default_out(run_dirs: list[Path]) -> Path:
    """plots/ in the folder the run folders share."""
    parents = [str(path.resolve().parent) for path in run_dirs]
    return Path(os.path.commonpath(parents)) / "plots"


# ---------------------------------------------------------------- learning curves

def run_curve(run: Run, x: str, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """The run's (x, metric) pairs where both are logged, in increasing x; ConfigError if there are none."""
    if run.metrics and any(name not in run.metrics[0] for name in (x, metric)):
        missing = next(name for name in (x, metric) if name not in run.metrics[0])
        raise ConfigError(f"{run.path / 'metrics.csv'} has no column {missing}")
    pairs = sorted((row[x], row[metric]) for row in run.metrics if row[x] is not None and row[metric] is not None)
    if not pairs:
        raise ConfigError(f"{run.path / 'metrics.csv'} has no values of {metric} yet")
    xs, ys = map(np.array, zip(*pairs))
    return xs, ys


def mean_curve(curves: list[tuple[np.ndarray, np.ndarray]], points: int = 100,
               confidence: float = CONFIDENCE) -> dict[str, np.ndarray]:
    """The mean over runs of curves (x, y), with a t-interval, on a common grid.

    Every curve is interpolated linearly onto `points` x values evenly spaced over the
    range all curves cover (the largest first x to the smallest last x: no curve is
    extrapolated). At each x: the mean over the n runs and mean ± t·s/√n, t the
    (1 + confidence)/2 quantile of Student's t with n − 1 degrees of freedom and s the
    standard deviation over the runs (NaN for one run). Returns {"x", "mean", "low", "high"}."""
    from scipy import stats

    start = max(xs[0] for xs, _ in curves)
    stop = min(xs[-1] for xs, _ in curves)
    if start > stop:
        raise ConfigError("the runs of a group cover no common range of x: their curves cannot be averaged")
    grid = np.linspace(start, stop, points)
    values = np.array([np.interp(grid, xs, ys) for xs, ys in curves])  # runs × points
    mean = values.mean(axis=0)
    runs = len(curves)
    if runs < 2:
        half = np.full_like(mean, np.nan)
    else:
        half = stats.t.ppf((1 + confidence) / 2, runs - 1) * values.std(axis=0, ddof=1) / math.sqrt(runs)
    return {"x": grid, "mean": mean, "low": mean - half, "high": mean + half}


# ---------------------------------------------------------------- files

def _cell(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    return str(value)


def write_csv(path: Path, header: list[str], rows: list[list]) -> Path:
    with open(path, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(header)
        writer.writerows([_cell(value) for value in row] for row in rows)
    return path


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _title(groups: dict[str, list[Run]]) -> str:
    envs = sorted({str(run.config.get("env_id", "?")) for runs in groups.values() for run in runs})
    return ", ".join(envs)


LABEL_WIDTH = 48  # characters per line of a legend entry or a row label


def fitted(label: str) -> str:
    """A group's label broken into lines of LABEL_WIDTH characters, at spaces."""
    return textwrap.fill(label, LABEL_WIDTH, break_long_words=True)


def _legend(axis) -> None:
    """The legend inside the axes for a few entries; below them, in columns, for more."""
    entries = len(axis.get_legend_handles_labels()[0])
    if entries <= 4:
        axis.legend(fontsize="small")
    else:
        axis.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.15), ncol=2)


def plot_curves(curves: dict[str, dict], counts: dict[str, int], path: Path, x: str, metric: str,
                threshold: float | None, title: str) -> Path:
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(8, 4.5))
    for label, curve in curves.items():
        line, = axis.plot(curve["x"], curve["mean"], label=fitted(f"{label} ({counts[label]} seeds)"))
        if counts[label] > 1:
            axis.fill_between(curve["x"], curve["low"], curve["high"], color=line.get_color(), alpha=0.2, linewidth=0)
    if threshold is not None:
        axis.axhline(threshold, color="gray", linestyle="--", linewidth=1, label=f"threshold {threshold:g}")
    axis.set_xlabel(X_LABELS.get(x, x))
    axis.set_ylabel(metric)
    axis.set_title(f"{title}: mean over seeds, 95% t-interval")
    axis.grid(alpha=0.3)
    _legend(axis)
    return _save(plt, figure, path)


def _save(plt, figure, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=110, bbox_inches="tight")  # a legend below the axes stays in the file
    plt.close(figure)
    return path


def plot_aggregates(rows: list[dict], path: Path, title: str) -> Path:
    plt = _pyplot()
    rows = [row for row in rows if row["iqm"] is not None]
    figure, axes = plt.subplots(1, 2, figsize=(9, 1.2 + 0.5 * len(rows)), sharey=True)
    positions = np.arange(len(rows))[::-1]
    for axis, name, heading in zip(axes, ("iqm", "mean"), ("IQM", "mean")):
        for position, row, color in zip(positions, rows, plt.rcParams["axes.prop_cycle"].by_key()["color"] * 10):
            axis.plot([row[f"{name}_low"], row[f"{name}_high"]], [position, position], color=color, linewidth=6,
                      alpha=0.5, solid_capstyle="butt")
            axis.plot([row[name]], [position], marker="|", markersize=14, color="black")
        axis.set_title(f"{heading} of the final score")
        axis.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(positions, [fitted(row["setting"]) for row in rows])
    figure.suptitle(f"{title}: 95% stratified-bootstrap intervals", fontsize="medium")
    return _save(plt, figure, path)


def plot_profiles(taus: np.ndarray, profiles: dict[str, dict], path: Path, threshold: float | None,
                  title: str) -> Path:
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(7, 4))
    for label, profile in profiles.items():
        line, = axis.plot(taus, profile["fraction"], label=fitted(label))
        axis.fill_between(taus, profile["low"], profile["high"], color=line.get_color(), alpha=0.2, linewidth=0)
    if threshold is not None:
        axis.axvline(threshold, color="gray", linestyle="--", linewidth=1, label=f"threshold {threshold:g}")
    axis.set_xlabel("final score τ")
    axis.set_ylabel("fraction of runs with score > τ")
    axis.set_ylim(-0.02, 1.02)
    axis.set_title(f"{title}: performance profile, 95% bootstrap band")
    axis.grid(alpha=0.3)
    _legend(axis)
    return _save(plt, figure, path)


def profile_taus(scores: dict[str, np.ndarray], threshold: float | None = None,
                 points: int = PROFILE_POINTS) -> np.ndarray:
    """`points` values of τ from a little below the lowest to a little above the highest score of all
    groups (and the threshold), so that every profile starts at 1 and ends at 0."""
    pooled = np.concatenate([values for values in scores.values() if len(values)])
    low, high = float(pooled.min()), float(pooled.max())
    if threshold is not None:
        low, high = min(low, threshold), max(high, threshold)
    margin = 0.05 * (high - low) or 1.0
    return np.linspace(low - margin, high + margin, points)


AGGREGATE_COLUMNS = ["runs", "scored", "from_training", "iqm", "iqm_low", "iqm_high", "mean", "mean_low", "mean_high",
                     "threshold", "successes", "reached", "median_time_to_threshold", "median_steps_to_threshold"]


def compare(runs: list[Run], out: Path, threshold: float | None = None, metric: str = "episode_return_recent",
            x: str = STEP_COLUMN, points: int = 100, reps: int = DEFAULT_REPS, seed: int = 0) -> list[Path]:
    """Write the figures and CSVs of the module docstring for `runs` (select_runs) into `out`, or,
    for runs of several envs, each env's into `out/ENV_ID`; print the summary tables. Returns the files."""
    by_env: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        by_env[str(run.config.get("env_id", "?"))].append(run)
    if len(by_env) == 1:
        return compare_one_env(runs, out, threshold, metric, x, points, reps, seed)
    written: list[Path] = []
    for env_id, env_runs in sorted(by_env.items()):
        print(f"\n{env_id}: {len(env_runs)} run{'s' * (len(env_runs) > 1)}")
        env_out = out / env_folder_name(env_id)
        env_out.mkdir(parents=True, exist_ok=True)
        written += compare_one_env(env_runs, env_out, threshold, metric, x, points, reps, seed)
    return written


def compare_one_env(runs: list[Run], out: Path, threshold: float | None = None,
                    metric: str = "episode_return_recent", x: str = STEP_COLUMN, points: int = 100,
                    reps: int = DEFAULT_REPS, seed: int = 0) -> list[Path]:
    """`compare` for runs of one env."""
    by_path = {run.path: run for run in runs}
    groups = {label: [by_path[path] for path in paths] for label, paths in group_runs(list(by_path)).items()}
    title = _title(groups)
    # a run that diverged ends early: the table counts it as a failure, the curves (to a common end) leave it out
    curving = {label: [run for run in runs if run.diverged is None] for label, runs in groups.items()}
    curves = {label: mean_curve([run_curve(run, x, metric) for run in runs], points)
              for label, runs in curving.items() if runs}
    counts = {label: len(runs) for label, runs in curving.items()}
    written = [write_csv(out / "curves.csv", ["x", "group", "mean", "low", "high"],
                         [[x_value, label, mean, low, high] for label, curve in curves.items()
                          for x_value, mean, low, high in zip(curve["x"], curve["mean"], curve["low"], curve["high"])]),
               plot_curves(curves, counts, out / "learning_curves.png", x, metric, threshold, title)]
    rows = summarize_groups(groups, threshold, reps, seed)
    written.append(write_csv(out / "aggregates.csv", ["group", *AGGREGATE_COLUMNS],
                             [[row["setting"], *(row[name] for name in AGGREGATE_COLUMNS)] for row in rows]))
    scores = {label: values for label, values in scores_by_group(groups).items() if len(values)}
    if len(groups) > 1 and scores:
        taus = profile_taus(scores, threshold)
        profiles = performance_profiles(scores, taus, reps, seed)
        written.append(write_csv(out / "profile.csv", ["tau", "group", "fraction", "low", "high"],
                                 [[tau, label, *values] for label, profile in profiles.items()
                                  for tau, *values in zip(taus, profile["fraction"], profile["low"], profile["high"])]))
        written.append(plot_aggregates(rows, out / "aggregates.png", title))
        written.append(plot_profiles(taus, profiles, out / "performance_profile.png", threshold, title))
    print(format_summary_table(rows))
    return written


# ---------------------------------------------------------------- command line

def _at_least(minimum: int):
    """An argparse type: an integer ≥ minimum."""

    def parse(text: str) -> int:
        value = int(text)
        if value < minimum:
            raise ValueError(text)
        return value

    parse.__name__ = f"integer ≥ {minimum}"  # argparse names the type in its error
    return parse


def build_parser() -> OneLineArgumentParser:
    parser = OneLineArgumentParser(prog=PROG, description="Compare runs over seeds: learning curves with 95% "
                                   "intervals, IQM and mean with bootstrap intervals, performance profiles.")
    parser.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR",
                        help="run folders, or folders of run folders (every run folder under them)")
    parser.add_argument("--out", type=Path, default=None, metavar="DIR",
                        help="folder for the figures and CSVs (default: plots/ in the folder the runs share)")
    parser.add_argument("--threshold", type=float, default=None, metavar="X",
                        help="the return that counts as solved: success counts and time to threshold (default: none)")
    parser.add_argument("--metric", default="episode_return_recent", metavar="COLUMN",
                        help="the metrics.csv column of the learning curves (default: episode_return_recent)")
    parser.add_argument("--x", choices=sorted(X_LABELS), default=STEP_COLUMN,
                        help="the x axis of the learning curves (default: global_step)")
    parser.add_argument("--points", type=_at_least(2), default=100, metavar="N",
                        help="grid points of the averaged learning curves (default: 100)")
    parser.add_argument("--include-unfinished", action="store_true",
                        help="also compare runs that logged fewer iterations than they plan (still running, "
                        "stopped or failed): their curves end early, their scores are their last training return")
    parser.add_argument("--reps", type=_at_least(1), default=DEFAULT_REPS, metavar="N",
                        help=f"bootstrap resamples (default: {DEFAULT_REPS})")
    parser.add_argument("--seed", type=_at_least(0), default=0, metavar="N",
                        help="seed of the bootstrap resamples (default: 0)")
    return parser


def require_stats_extra() -> None:
    """ConfigError (one line: how to install it) unless the optional extra 'stats' imports: the
    t-intervals need scipy, the bootstrap intervals and profiles rliable."""
    try:
        import rliable.library  # noqa: F401
        import scipy.stats  # noqa: F401
    except ImportError as error:
        raise ConfigError(f"{PROG} needs the optional extra 'stats' ({error}): "
                          "pip install -c constraints.txt -e '.[stats]'") from None


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def plot() -> int:
        if args.threshold is not None and not math.isfinite(args.threshold):
            raise ConfigError(f"--threshold {args.threshold} must be a finite number")
        require_stats_extra()
        runs, notes = select_runs(find_run_dirs(args.run_dirs), args.x, args.metric, args.include_unfinished)
        out = check_writable_folder(args.out or default_out([run.path for run in runs]), "--out")
        print("\n".join(notes), end="\n" * bool(notes))
        written = compare(runs, out, args.threshold, args.metric, args.x, args.points, args.reps, args.seed)
        print(f"{len(runs)} run{'s' * (len(runs) > 1)} compared; written: " + ", ".join(map(str, written)))
        return 0

    return run_with_user_errors(PROG, plot)


if __name__ == "__main__":
    sys.exit(main())
