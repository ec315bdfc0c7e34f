"""Learning curves over seeds: where to score a run during training, interval estimates per point, a plot.

A run is scored at `points` iterations evenly spaced over its training, the first before
any update (iteration 0) and the last after the final one:

    iteration_j = round(j · I / (points − 1)),   j = 0, 1, ..., points − 1,

with I the run's iterations (at most I + 1 points, so that no iteration is scored twice).
At each point the scores of the runs of a setting give an IQM and a mean with 95%
stratified-bootstrap intervals (experiments.commands.statistics.interval_estimates), as the
final scores do.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from experiments.commands.statistics import interval_estimates
from ppo.config import ConfigError


def curve_iterations(points: int, iterations: int) -> list[int]:
    """The `points` iterations at which a run of `iterations` iterations is scored: 0, ..., `iterations`, evenly spaced.

    ConfigError (one line) if `points` < 2 (a curve needs its start and its end) or
    `points` > iterations + 1 (two points would fall on one iteration)."""
    if points < 2:
        raise ConfigError(f"--curve-points {points} must be at least 2 (iteration 0 and the last)")
    if points > iterations + 1:
        raise ConfigError(f"--curve-points {points} is more than the run's {iterations} iterations + 1; "
                          f"give at most {iterations + 1}")
    # a step I / (points − 1) ≥ 1 keeps the rounded iterations distinct
    return [int(value) for value in np.rint(np.linspace(0, iterations, points))]


def curve_intervals(curves: dict[str, np.ndarray]) -> dict[str, list[dict[str, float]]]:
    """Per setting, per point: IQM and mean over runs with their bootstrap intervals.

    `curves` maps a setting to its scores, runs × points; the result maps it to one
    interval_estimates row ({"iqm", "iqm_low", "iqm_high", "mean", "mean_low", "mean_high"}) per point."""
    results = {}
    for setting, scores in curves.items():
        scores = np.asarray(scores, dtype=float)
        results[setting] = [interval_estimates({setting: scores[:, point]})[setting] for point in range(scores.shape[1])]
    return results


def check_plot_path(path: Path) -> None:
    """ConfigError (one line) unless matplotlib can write the format the suffix of `path` names."""
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    if path.suffix.lstrip(".").lower() not in formats:
        raise ConfigError(f"--plot {path}: the suffix {path.suffix or '(none)'!r} is no image format matplotlib "
                          f"writes; use one of {', '.join('.' + name for name in sorted(formats))}")


def plot_learning_curves(path: Path, steps: list[int], intervals: dict[str, list[dict[str, float]]],
                         runs: int, ylabel: str, title: str, chance: float | None = None) -> Path:
    """Each setting's IQM against env steps, with its 95% bootstrap interval shaded; saved to `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7.5, 4.5))
    for setting, rows in intervals.items():
        line, = axis.plot(steps, [row["iqm"] for row in rows], marker="o", markersize=3,
                          label=f"{setting} (IQM of {runs} seeds)")
        axis.fill_between(steps, [row["iqm_low"] for row in rows], [row["iqm_high"] for row in rows],
                          color=line.get_color(), alpha=0.2, linewidth=0)
    if chance is not None:
        axis.axhline(chance, color="gray", linestyle="--", linewidth=1, label=f"chance among the valid ({chance:.3f})")
    axis.set_xlabel("environment steps")
    axis.set_ylabel(ylabel)
    axis.set_title(f"{title}\nIQM over seeds, 95% stratified-bootstrap interval", fontsize="medium")
    axis.grid(alpha=0.3)
    axis.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
