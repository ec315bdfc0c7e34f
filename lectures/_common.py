"""What every lecture script shares: the --quick flag, the output folder, printed tables.

The convention each lecture follows (lectures/README.md explains it):

    lecture = Lecture("NN_name", __doc__)      # parses --quick, makes lecture_outputs/NN_name/
    lecture.save_figure(figure, "plot.png")    # prints "wrote: <path>"
    lecture.claim("the baseline lowers the variance", ratio > 1, measured=f"ratio {ratio:.2f}")
    lecture.finish()                           # "N claims checked", then last: "outputs: <folder>"

A claim is a sentence of the lecture's prose that states a number, a comparison or a
trend, checked on the run's own results: `lecture.claim(sentence, holds, measured=...)`
prints the sentence with what was measured, and when `holds` is False it ends the
lecture with ClaimContradicted, whose message quotes the sentence and the measurement.
The claims of a section sit together in a code cell of their own at the section's end,
tagged `claims` (`# %% tags=["claims"]`), after the cells that teach: the notebooks fold
that cell, and the book shows it as a box "✔ N claims checked by this run" that opens on
each claim and what was measured (lectures/_notebooks.py labels it).
A claim that a quick run cannot show is marked `quick=False`: under --quick it is
reported as not checked instead. With LECTURE_KEEP_GOING=1 a contradicted claim is
printed and the run goes on; `finish` then fails, listing every one (handy while a
lecture is being written, one run shows all).

The output root is `lecture_outputs/` in the repository, or the folder named by the
environment variable LECTURE_OUTPUTS (the tests point it at a temporary folder).

Quick or full: `--quick` on the command line, or the environment variable
LECTURE_QUICK=1, which is how a notebook asks for it (`%env LECTURE_QUICK=1` in a cell
before the first one, or set it before starting Jupyter). In a notebook every PNG a
lecture announces is also shown inline; from the shell the files are only written.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # `ppo` and `envs` importable without installing
    sys.path.insert(0, str(REPO_ROOT))

import matplotlib  # noqa: E402

IN_NOTEBOOK = "ipykernel" in sys.modules  # a Jupyter kernel (or nbclient) runs this lecture
if IN_NOTEBOOK:  # the notebook shows what the script prints and the figures, no Out[] of a cell's last value
    get_ipython().ast_node_interactivity = "none"  # noqa: F821  (defined inside IPython)
else:
    matplotlib.use("Agg")  # files only, no window
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from ppo.parallel.malloc import keep_freed_memory  # noqa: E402

# The process-wide settings the training commands make (experiments/commands/cli.py, configure_process):
torch.set_num_threads(1)  # tiny networks: one thread is fastest, and the machine is shared
keep_freed_memory()  # autograd's freed buffers stay in the process instead of being page-faulted in again

OUTPUT_ROOT_VARIABLE = "LECTURE_OUTPUTS"
QUICK_VARIABLE = "LECTURE_QUICK"  # 1 = quick run; works where no command line does (a notebook)
KEEP_GOING_VARIABLE = "LECTURE_KEEP_GOING"  # 1 = report every contradicted claim at the end, not only the first


class ClaimContradicted(AssertionError):
    """A lecture's run contradicts a sentence of its prose."""


def flag_from_environment(variable: str) -> bool:
    value = os.environ.get(variable, "").strip().lower()
    if value in ("", "0", "false", "no"):
        return False
    if value in ("1", "true", "yes"):
        return True
    raise SystemExit(f"{variable} = {value!r} must be 1 or 0")


def as_truth_value(holds) -> bool:
    """A claim's outcome as a bool. Only a real truth value is accepted: a string, a list
    or a number would always be truthy (a check that cannot fail), a tensor of many elements
    ambiguous."""
    if isinstance(holds, bool):
        return holds
    if "bool" in str(getattr(holds, "dtype", "")) and tuple(holds.shape) in ((), (1,)):
        return bool(holds)  # a one-element torch or numpy boolean
    raise TypeError(f"a claim's outcome must be a bool (a comparison of measured values), "
                    f"not {type(holds).__name__} {holds!r}")


def quick_from_environment() -> bool:
    return flag_from_environment(QUICK_VARIABLE)


class Lecture:
    """One run of a lecture script: its mode (full or --quick) and its output folder."""

    def __init__(self, name: str, description: str | None = None):
        parser = argparse.ArgumentParser(
            allow_abbrev=False,
            description=(description or name).strip().splitlines()[0],
            epilog=f"Files go to lecture_outputs/{name}/ (or $LECTURE_OUTPUTS/{name}/).",
        )
        parser.add_argument("--quick", action="store_true",
                            help=f"a short version: fewer seeds and steps (or set {QUICK_VARIABLE}=1)")
        # parse_known_args: a notebook kernel passes arguments of its own
        args, _ = parser.parse_known_args()
        self.name = name
        self.quick: bool = args.quick or quick_from_environment()
        root = Path(os.environ.get(OUTPUT_ROOT_VARIABLE, REPO_ROOT / "lecture_outputs"))
        self.folder = root / name
        self.folder.mkdir(parents=True, exist_ok=True)
        self.started = time.perf_counter()
        self.claims_checked = 0
        self.claims_skipped: list[str] = []  # sentences a quick run cannot show
        self.contradicted: list[str] = []  # under LECTURE_KEEP_GOING=1
        self.keep_going = flag_from_environment(KEEP_GOING_VARIABLE)
        print(f"{name} ({'quick' if self.quick else 'full'} run)")

    def choose(self, full, quick):
        """`quick` under --quick, else `full`: lecture.choose(full=5, quick=2)."""
        return quick if self.quick else full

    def path(self, filename: str) -> Path:
        """Where an output file of this lecture goes (announce it with `wrote`)."""
        return self.folder / filename

    def fresh_folder(self, name: str) -> Path:
        """`path(name)` emptied of an earlier run's files: a trainer refuses to start a new run in a
        folder that holds one (ppo.runs.checkpoint.check_run_folder), and each run of a lecture is new."""
        folder = self.path(name)
        shutil.rmtree(folder, ignore_errors=True)
        return folder

    def wrote(self, path: Path) -> Path:
        """Announce a file the lecture wrote; in a notebook, a PNG is also shown inline."""
        print(f"wrote: {shown_path(path)}")
        if IN_NOTEBOOK and path.suffix == ".png":  # the lecture's own figures and the library's plots alike
            from IPython.display import Image, display

            display(Image(filename=str(path)))
        return path

    def save_figure(self, figure, filename: str) -> Path:
        """Save a matplotlib figure as a PNG in the output folder and close it (a notebook shows the PNG)."""
        path = self.path(filename)
        figure.tight_layout()
        figure.savefig(path, dpi=110)
        plt.close(figure)
        return self.wrote(path)

    def claim(self, sentence: str, holds: bool, *, measured: str, quick: bool = True) -> bool:
        """Check one sentence of the prose against this run: `holds` is the comparison of a
        measured quantity with the sentence's number or direction, `measured` what was
        measured, in words a reader can compare with the sentence. `quick=False` for a
        claim the quick run cannot show (too few seeds or steps): under --quick it is
        reported, not checked. Returns `holds` (True when skipped)."""
        if not sentence.strip() or not measured.strip():
            raise ValueError("a claim needs its sentence and what was measured")
        if self.quick and not quick:
            self.claims_skipped.append(sentence)
            print(f"claim not checked in a quick run: {sentence}")
            return True
        self.claims_checked += 1
        if as_truth_value(holds):
            print(f"claim checked: {sentence} [measured: {measured}]")
            return True
        message = f"this run contradicts the claim \"{sentence}\" (measured: {measured})"
        if not self.keep_going:
            raise ClaimContradicted(message)
        print(f"CONTRADICTED: {message}")
        self.contradicted.append(message)
        return False

    def finish(self) -> None:
        if self.contradicted:
            raise ClaimContradicted(f"{len(self.contradicted)} of {self.claims_checked} claims contradicted:\n"
                                    + "\n".join(self.contradicted))
        skipped = (f"; {len(self.claims_skipped)} more need the full run and were not checked"
                   if self.claims_skipped else "")
        print(f"\n{self.claims_checked} claim{'' if self.claims_checked == 1 else 's'} checked{skipped}")
        print(f"finished in {time.perf_counter() - self.started:.1f} s")
        print(f"outputs: {shown_path(self.folder)}")


def shown_path(path: Path) -> str:
    """The path relative to the working directory, or to the repository (a notebook runs in
    lectures/), when it lies below it."""
    for base in (Path.cwd(), REPO_ROOT):
        try:
            return str(path.resolve().relative_to(base.resolve()))
        except ValueError:
            continue
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
