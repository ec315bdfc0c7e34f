"""What every lecture script shares: the --quick flag, the output folder, printed tables.

The convention each lecture follows (lectures/README.md explains it):

    lecture = Lecture("NN_name", __doc__)      # parses --quick, makes lecture_outputs/NN_name/
    lecture.save_figure(figure, "plot.png")    # prints "wrote: <path>"
    lecture.finish()                           # last line printed: "outputs: <folder>"

The output root is `lecture_outputs/` in the repository, or the folder named by the
environment variable LECTURE_OUTPUTS (the tests point it at a temporary folder).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # `ppo` and `envs` importable without installing
    sys.path.insert(0, str(REPO_ROOT))

import matplotlib  # noqa: E402

matplotlib.use("Agg")  # files only, no window
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from ppo.malloc import keep_freed_memory  # noqa: E402

# The process-wide settings the training commands make (experiments/cli.py, configure_process):
torch.set_num_threads(1)  # tiny networks: one thread is fastest, and the machine is shared
keep_freed_memory()  # autograd's freed buffers stay in the process instead of being page-faulted in again

OUTPUT_ROOT_VARIABLE = "LECTURE_OUTPUTS"


class Lecture:
    """One run of a lecture script: its mode (full or --quick) and its output folder."""

    def __init__(self, name: str, description: str | None = None):
        parser = argparse.ArgumentParser(
            description=(description or name).strip().splitlines()[0],
            epilog=f"Files go to lecture_outputs/{name}/ (or $LECTURE_OUTPUTS/{name}/).",
        )
        parser.add_argument("--quick", action="store_true", help="a short version: fewer seeds and steps")
        # parse_known_args: a notebook kernel passes arguments of its own
        args, _ = parser.parse_known_args()
        self.name = name
        self.quick: bool = args.quick
        root = Path(os.environ.get(OUTPUT_ROOT_VARIABLE, REPO_ROOT / "lecture_outputs"))
        self.folder = root / name
        self.folder.mkdir(parents=True, exist_ok=True)
        self.started = time.perf_counter()
        print(f"{name} ({'quick' if self.quick else 'full'} run)")

    def choose(self, full, quick):
        """`quick` under --quick, else `full`: lecture.choose(full=5, quick=2)."""
        return quick if self.quick else full

    def path(self, filename: str) -> Path:
        """Where an output file of this lecture goes (announce it with `wrote`)."""
        return self.folder / filename

    def wrote(self, path: Path) -> Path:
        print(f"wrote: {shown_path(path)}")
        return path

    def save_figure(self, figure, filename: str) -> Path:
        """Save a matplotlib figure as a PNG in the output folder and close it."""
        path = self.path(filename)
        figure.tight_layout()
        figure.savefig(path, dpi=110)
        plt.close(figure)
        return self.wrote(path)

    def finish(self) -> None:
        print(f"\nfinished in {time.perf_counter() - self.started:.1f} s")
        print(f"outputs: {shown_path(self.folder)}")


def shown_path(path: Path) -> str:
    """The path relative to the working directory when it lies below it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def print_table(rows: list[dict], title: str | None = None, digits: int = 3) -> None:
    """Print dictionaries as an aligned text table; floats with `digits` significant digits."""

    def cell(value) -> str:
        if isinstance(value, float):
            return f"{value:.{digits}g}"
        return str(value)

    columns = list(rows[0]) if rows else []
    cells = [[cell(row.get(column, "")) for column in columns] for row in rows]
    widths = [max(len(column), *(len(line[i]) for line in cells)) for i, column in enumerate(columns)]
    if title:
        print(f"\n{title}")
    print("  ".join(column.rjust(width) for column, width in zip(columns, widths)))
    print("  ".join("-" * width for width in widths))
    for line in cells:
        print("  ".join(value.rjust(width) for value, width in zip(line, widths)))


def mean_and_spread(values) -> str:
    """'mean ± standard deviation' of a list of numbers (population std)."""
    values = torch.as_tensor(list(values), dtype=torch.float64)
    return f"{values.mean():.1f} ± {values.std(unbiased=False):.1f}"
