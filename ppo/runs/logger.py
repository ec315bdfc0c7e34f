"""Per-iteration metrics to a CSV file, to TensorBoard, and to a console progress bar.

A write to metrics.csv that the OS refuses (a full disk, a quota) raises
`ppo.runs.checkpoint.WriteFailed` naming the file."""

from __future__ import annotations

import contextlib
import csv
import math
import sys
from pathlib import Path

from tqdm import tqdm

from ppo.runs.checkpoint import LOG_NAME, WriteFailed


class MetricsLogger:
    """Write one row of scalars per iteration to `metrics.csv` (and TensorBoard).

    The CSV columns are fixed by the first row; later rows may leave a column empty
    (an iteration in which no episode finished has no episodic return).
    """

    def __init__(
        self,
        run_dir: str | Path,
        tensorboard: bool = True,
        total_steps: int | None = None,
        progress: bool = True,
        resume_from_step: int = 0,
    ):
        """`resume_from_step` > 0 continues an existing log: the metrics.csv rows and the
        TensorBoard events after that step (written by iterations a resumed run repeats)
        are dropped, so every step is logged once and in order."""
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        path = self.path = self.run_dir / LOG_NAME
        self._csv: csv.DictWriter | None = None
        with self._writing():
            header = _truncate_csv(path, resume_from_step) if resume_from_step and path.exists() else None
            if header:
                self._csv_file = open(path, "a", newline="")
                self._csv = csv.DictWriter(self._csv_file, fieldnames=header, extrasaction="ignore")
            else:
                self._csv_file = open(path, "w", newline="")
        self._tensorboard = None
        if tensorboard:
            from torch.utils.tensorboard import SummaryWriter

            # purge_step: TensorBoard discards the events of earlier files at steps ≥ it
            purge_step = resume_from_step + 1 if resume_from_step else None
            self._tensorboard = SummaryWriter(log_dir=str(self.run_dir), purge_step=purge_step)
        self._progress = (
            tqdm(total=total_steps, unit="step", unit_scale=True, dynamic_ncols=True, file=sys.stderr, leave=True)
            if progress and total_steps
            else None
        )
        if self._progress is not None and resume_from_step:
            self._progress.update(resume_from_step)

    @contextlib.contextmanager
    def _writing(self):
        """An OSError inside the block becomes WriteFailed naming metrics.csv."""
        try:
            yield
        except OSError as error:
            reason = error.strerror or str(error)
            raise WriteFailed(f"cannot write {self.path} ({reason})", self.path, reason) from None

    def log(self, step: int, metrics: dict[str, float]) -> None:
        row = {"global_step": step, **metrics}
        with self._writing():
            if self._csv is None:
                self._csv = csv.DictWriter(self._csv_file, fieldnames=list(row), extrasaction="ignore")
                self._csv.writeheader()
            self._csv.writerow({key: _csv_value(value) for key, value in row.items()})
            self._csv_file.flush()
        if self._tensorboard is not None:
            for key, value in metrics.items():
                if value is not None and not (isinstance(value, float) and math.isnan(value)):
                    self._tensorboard.add_scalar(_tensorboard_tag(key), value, step)

    def progress(self, step: int, description: str) -> None:
        if self._progress is not None:
            self._progress.update(step - self._progress.n)
            self._progress.set_postfix_str(description, refresh=False)

    def close(self) -> None:
        if self._progress is not None:
            self._progress.close()
        if self._tensorboard is not None:
            self._tensorboard.close()
        with contextlib.suppress(OSError):  # a failed write was reported already
            self._csv_file.close()


def _truncate_csv(path: Path, last_step: int) -> list[str] | None:
    """Keep the rows of metrics.csv up to `last_step` (rewritten atomically); returns its header."""
    with open(path, newline="") as file:
        reader = csv.reader(file)
        header = next(reader, None)
        if not header:
            return None
        step_column = header.index("global_step") if "global_step" in header else 0
        kept = [row for row in reader if row and _step(row[step_column]) <= last_step]
    temporary = path.with_name(f".{path.name}.tmp")
    with open(temporary, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(header)
        writer.writerows(kept)
    temporary.replace(path)
    return header


def _step(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.inf  # a damaged row is dropped


def _csv_value(value):
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return value


UPDATE_DIAGNOSTICS = {  # TensorBoard's "losses/" group; every other scalar goes to "charts/"
    "policy_loss", "value_loss", "entropy", "old_approx_kl", "approx_kl", "clip_fraction",
    "value_clip_fraction", "explained_variance", "first_minibatch_ratio_error", "gradient_steps",
    "early_stopped", "grad_norm",
}


def _tensorboard_tag(key: str) -> str:
    return f"{'losses' if key in UPDATE_DIAGNOSTICS else 'charts'}/{key}"


def read_metrics(path: str | Path) -> list[dict[str, float | None]]:
    """Read a metrics.csv back as a list of rows of floats (None for empty cells)."""
    with open(path, newline="") as file:
        return [{key: (float(value) if value != "" else None) for key, value in row.items()} for row in csv.DictReader(file)]
