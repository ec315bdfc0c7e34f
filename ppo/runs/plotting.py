"""The learning-curve plot saved in every run folder: `plot_learning_curve` draws it in this
process; a `CurveDrawer` has a helper process draw it, so that importing matplotlib (about
half a second) overlaps the training instead of following it.

matplotlib is imported when a curve is drawn, not with this module (ppo.runs.curve_figure
holds the figure): a command that does not plot pays nothing for it.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

from ppo.runs import curve_figure
from ppo.runs.checkpoint import LOG_NAME

CURVE_NAME = "learning_curve.png"
HELPER_PATIENCE_S = 120.0  # for all the answers; matplotlib's first import on a machine builds its font cache
HELPER_EXIT_S = 2.0  # for the helper to end by itself once its input is closed, before it is killed
# The helper runs curve_figure.py by its path: `python -m ppo.runs.curve_figure` would import the
# package, and torch with it, and `python .../curve_figure.py` would put ppo/runs/ first on the
# module path. The working folder is taken off the path before any import, so that a user's
# signal.py or runpy.py there is not run in its place.
HELPER_CODE = ("import sys\n"
               "if sys.path and sys.path[0] == '':\n"
               "    del sys.path[0]\n"
               "import runpy\n"
               "runpy.run_path(sys.argv[1], run_name='__main__')\n")


def plot_learning_curve(run_dir: str | Path, title: str | None = None) -> Path:
    """Plot the recent mean episodic return against environment steps; return the PNG path."""
    run_dir = Path(run_dir)
    path = run_dir / CURVE_NAME
    curve_figure.draw_run_curve(str(run_dir / LOG_NAME), str(path), title or run_dir.name)
    return path


class CurveDrawer:
    """Learning curves drawn by a helper process while this one goes on.

        with CurveDrawer() as drawer:       # before training: the helper imports matplotlib meanwhile
            trainer.train()
            curve = drawer.draw(run_dir, title)   # returns the PNG's path at once
            evaluate_run(run_dir, episodes)       # while the helper draws
        # leaving the block waits until every curve handed over is saved (finish)

    A curve the helper does not answer "ok" is drawn in this process, as plot_learning_curve
    draws it, so no curve is lost to the helper and a real error (a full disk) is raised here.
    `helper=None` starts a helper unless this process has imported matplotlib already (a
    notebook, a test session), where drawing here costs only the drawing.
    """

    def __init__(self, helper: bool | None = None):
        self.handed: list[tuple[Path, str]] = []  # what the helper was asked to draw, in order
        self.process: subprocess.Popen | None = None
        if sys.executable and (helper or (helper is None and "matplotlib.figure" not in sys.modules)):
            try:
                self.process = subprocess.Popen([sys.executable, "-c", HELPER_CODE, curve_figure.__file__],
                                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                stderr=subprocess.DEVNULL)
            except OSError:
                self.process = None

    def draw(self, run_dir: str | Path, title: str) -> Path:
        """Hand over the curve of the run in `run_dir` (drawn here where there is no helper); its PNG path.

        The run's earlier PNG (a resumed run's) is removed as the curve is handed over: a curve
        the command is stopped before drawing is missing, never stale.
        """
        run_dir = Path(run_dir)
        if self.process is not None:
            (run_dir / CURVE_NAME).unlink(missing_ok=True)
            request = {"metrics": str(run_dir / LOG_NAME), "path": str(run_dir / CURVE_NAME), "title": title}
            try:
                self.process.stdin.write(json.dumps(request).encode() + b"\n")
                self.process.stdin.flush()
                self.handed.append((run_dir, title))
                return run_dir / CURVE_NAME
            except OSError:  # the helper has ended: what it was handed is drawn again in finish
                pass
        return plot_learning_curve(run_dir, title)

    def finish(self) -> None:
        """Wait for the helper's answers and end it; draw here every curve it did not answer "ok"."""
        if self.process is None:
            return
        try:
            answered = self._answers(len(self.handed))
        finally:
            self.stop()
        handed, self.handed = self.handed, []
        for index, (run_dir, title) in enumerate(handed):
            if index >= len(answered) or answered[index] != "ok":
                plot_learning_curve(run_dir, title)

    def _answers(self, count: int) -> list[str]:
        """The helper's first `count` answer lines, or those that came before it ended or
        HELPER_PATIENCE_S passed."""
        answers, deadline = b"", time.monotonic() + HELPER_PATIENCE_S
        output = self.process.stdout.fileno()
        while answers.count(b"\n") < count:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([output], [], [], left)[0]:
                break
            chunk = os.read(output, 1 << 16)
            if not chunk:  # the helper has ended
                break
            answers += chunk
        return answers.decode(errors="replace").split("\n")[:count]

    def stop(self) -> None:
        """End the helper: its input closed, it ends once it has drawn what it was handed, or
        is killed after HELPER_EXIT_S."""
        if self.process is not None:
            try:
                self.process.stdin.close()
            except OSError:
                pass
            try:
                self.process.wait(timeout=HELPER_EXIT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process.stdout.close()
            self.process = None

    def __enter__(self) -> CurveDrawer:
        return self

    def __exit__(self, *exc_info) -> None:
        self.finish()
