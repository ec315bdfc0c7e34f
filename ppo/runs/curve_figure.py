"""The learning-curve figure of a run's metrics.csv; and a loop that draws them on request.

This module imports nothing of the project and matplotlib only when it draws, so a helper
process can run it as a script without importing torch (ppo.runs.plotting.CurveDrawer):

    python curve_figure.py      # imports matplotlib, then reads one request per line of stdin,
                                # {"metrics", "path", "title"} as JSON, and answers each with a
                                # line: "ok", or the error that stopped the drawing

A curve is written to a temporary file beside it and renamed over it, so an interrupted
drawing leaves the previous PNG whole, never half of one.
"""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import sys
from typing import TextIO

FIGURE_INCHES = (7, 4)
MARGINS = dict(left=0.1, right=0.97, bottom=0.12, top=0.92)  # fractions of the figure; the labels fit inside
DPI = 110
STEP_COLUMN, RETURN_COLUMN = "global_step", "episode_return_recent"  # ppo.runs.metrics_columns
TEMPORARY_SUFFIX = ".tmp"  # ppo.runs.checkpoint's: what an interrupted write leaves is cleared as its are


def curve_points(metrics_path: str) -> tuple[list[float], list[float]]:
    """(env steps, recent mean return) of every row of a metrics.csv that has a recent return."""
    with open(metrics_path, newline="") as file:
        rows = [row for row in csv.DictReader(file) if row.get(RETURN_COLUMN, "") != ""]
    return [float(row[STEP_COLUMN]) for row in rows], [float(row[RETURN_COLUMN]) for row in rows]


def draw_run_curve(metrics_path: str, path: str, title: str) -> None:
    """Save the PNG at `path` of the run whose metrics are at `metrics_path` (written whole, then renamed)."""
    folder, name = os.path.split(path)
    temporary = os.path.join(folder, f".{name}.{os.getpid()}{TEMPORARY_SUFFIX}")
    try:
        draw_curve(temporary, *curve_points(metrics_path), title)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def draw_curve(path, steps: list[float], returns: list[float], title: str) -> None:
    """Save the PNG at `path` (a file name or a binary file): the recent mean episodic return
    against environment steps.

    The figure is drawn on its own canvas (matplotlib.figure.Figure), not through pyplot, so a
    caller's pyplot state and backend are left as they are.
    """
    from matplotlib.figure import Figure

    figure = Figure(figsize=FIGURE_INCHES)
    axis = figure.subplots()
    if steps:
        axis.plot(steps, returns, color="tab:blue")
    axis.set_xlabel("environment steps")
    axis.set_ylabel("mean return of the last 20 training episodes")
    axis.set_title(title)
    axis.grid(alpha=0.3)
    figure.subplots_adjust(**MARGINS)
    figure.savefig(path, dpi=DPI, format="png")


def serve(requests: TextIO | None = None, answers: TextIO | None = None) -> None:
    """Import matplotlib and draw a throwaway curve now (the backend and the fonts load on the
    first drawing), then draw each line of `requests` (standard input) until it ends, answering
    on `answers` (standard output)."""
    requests, answers = requests or sys.stdin, answers or sys.stdout
    draw_curve(io.BytesIO(), [0.0, 1.0], [0.0, 1.0], "")
    for line in requests:
        try:
            request = json.loads(line)
            draw_run_curve(request["metrics"], request["path"], request["title"])
            answer = "ok"
        except Exception as error:  # noqa: BLE001  (the caller draws it again itself and sees the error)
            answer = f"{type(error).__name__}: {error}".replace("\n", " ")
        print(answer, file=answers, flush=True)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C is meant for the training this helper serves
    serve()
    sys.stdout.flush()
    os._exit(0)  # at the end of its input: no teardown of matplotlib to wait for
