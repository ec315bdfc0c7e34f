"""The learning-curve plot saved in every run folder.

matplotlib is imported when a curve is drawn, not with this module, and the figure is drawn
on its own canvas (matplotlib.figure.Figure), not through pyplot: a command that does not
plot pays nothing for it, and a caller's pyplot state and backend are left as they are.
"""

from __future__ import annotations

from pathlib import Path

from ppo.runs.logger import read_metrics

FIGURE_INCHES = (7, 4)
MARGINS = dict(left=0.1, right=0.97, bottom=0.12, top=0.92)  # fractions of the figure; the labels fit inside


def plot_learning_curve(run_dir: str | Path, title: str | None = None) -> Path:
    """Plot the recent mean episodic return against environment steps; return the PNG path."""
    from matplotlib.figure import Figure

    run_dir = Path(run_dir)
    rows = [row for row in read_metrics(run_dir / "metrics.csv") if row.get("episode_return_recent") is not None]
    figure = Figure(figsize=FIGURE_INCHES)
    axis = figure.subplots()
    if rows:
        axis.plot([row["global_step"] for row in rows], [row["episode_return_recent"] for row in rows], color="tab:blue")
    axis.set_xlabel("environment steps")
    axis.set_ylabel("mean return of the last 20 training episodes")
    axis.set_title(title or run_dir.name)
    axis.grid(alpha=0.3)
    figure.subplots_adjust(**MARGINS)
    path = run_dir / "learning_curve.png"
    figure.savefig(path, dpi=110)
    return path
