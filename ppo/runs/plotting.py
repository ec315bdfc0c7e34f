"""The learning-curve plot saved in every run folder."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from ppo.runs.logger import read_metrics  # noqa: E402


def plot_learning_curve(run_dir: str | Path, title: str | None = None) -> Path:
    """Plot the recent mean episodic return against environment steps; return the PNG path."""
    run_dir = Path(run_dir)
    rows = [row for row in read_metrics(run_dir / "metrics.csv") if row.get("episode_return_recent") is not None]
    figure, axis = plt.subplots(figsize=(7, 4))
    if rows:
        axis.plot([row["global_step"] for row in rows], [row["episode_return_recent"] for row in rows], color="tab:blue")
    axis.set_xlabel("environment steps")
    axis.set_ylabel("mean return of the last 20 training episodes")
    axis.set_title(title or run_dir.name)
    axis.grid(alpha=0.3)
    figure.tight_layout()
    path = run_dir / "learning_curve.png"
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
