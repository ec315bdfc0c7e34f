"""The lecture notebooks: made from the `# %%` scripts with jupytext, executed with nbclient.

The scripts are the source; each `lectures/NN_name.ipynb` is generated from
`lectures/NN_name.py` and shipped with its outputs, so a reader sees the tables and
figures without running anything. `make notebooks` runs this file:

    python lectures/_notebooks.py                  # regenerate and execute every notebook (full runs)
    python lectures/_notebooks.py --quick          # the same, each lecture in its quick mode
    python lectures/_notebooks.py 04 11            # only lectures 4 and 11
    python lectures/_notebooks.py --check          # exit 1 if a notebook's cells differ from its script

A notebook is *in sync* with its script when it has the same cells, in the same order,
with the same sources (outputs and metadata aside); tests/test_notebooks.py checks it.
The kernel runs in `lectures/`, so that `_common` imports and a reader's Jupyter, opened
on the notebook, behaves the same.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

LECTURES_DIR = Path(__file__).resolve().parent
KERNEL_NAME = "python3"  # the kernel of the Python that runs this file
CELL_TIMEOUT_S = 1800  # a full run's longest cell takes minutes, not an hour


def lecture_scripts() -> list[Path]:
    return sorted(LECTURES_DIR.glob("[0-9][0-9]_*.py"))


def notebook_path(script: Path) -> Path:
    return script.with_suffix(".ipynb")


def notebook_from_script(script: Path) -> nbformat.NotebookNode:
    """The script as a notebook without outputs: `# %%` cells, markdown from the docstring cells."""
    notebook = jupytext.read(script)
    notebook.metadata["kernelspec"] = {"name": KERNEL_NAME, "display_name": "Python 3", "language": "python"}
    return notebook


def cell_sources(notebook: nbformat.NotebookNode) -> list[tuple[str, str]]:
    """What must match between a script and its notebook: each cell's type and source."""
    return [(cell.cell_type, cell.source) for cell in notebook.cells]


def out_of_sync(script: Path) -> str | None:
    """None when the shipped notebook has the script's cells, else a sentence saying what differs."""
    path = notebook_path(script)
    if not path.is_file():
        return f"{path.name} is missing"
    expected, shipped = cell_sources(notebook_from_script(script)), cell_sources(nbformat.read(path, as_version=4))
    if len(expected) != len(shipped):
        return f"{path.name} has {len(shipped)} cells, {script.name} has {len(expected)}"
    for number, (want, have) in enumerate(zip(expected, shipped), start=1):
        if want != have:
            return f"cell {number} of {path.name} differs from {script.name}"
    return None


def execute(notebook: nbformat.NotebookNode, quick: bool, output_root: Path | None = None) -> nbformat.NotebookNode:
    """Run every cell in a fresh kernel (working directory `lectures/`); the outputs land in the cells.

    `quick` sets LECTURE_QUICK for the kernel; `output_root` sets LECTURE_OUTPUTS (default:
    the repository's lecture_outputs/).
    """
    environment = {**os.environ, "LECTURE_QUICK": "1" if quick else "0"}
    environment.pop("MPLBACKEND", None)  # the kernel's inline backend shows the figures
    if output_root is not None:
        environment["LECTURE_OUTPUTS"] = str(output_root)
    client = NotebookClient(notebook, kernel_name=KERNEL_NAME, timeout=CELL_TIMEOUT_S,
                            resources={"metadata": {"path": str(LECTURES_DIR)}},
                            # as _common sets it from the second cell on: no Out[] of a cell's last value
                            extra_arguments=["--InteractiveShell.ast_node_interactivity=none"])
    client.execute(env=environment)
    return notebook


def home_as_tilde(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Printed paths under the home folder (the SFT cache, say) shown as ~/…: a shipped
    notebook should not carry the machine it ran on."""
    home = str(Path.home())
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "stream":
                output["text"] = output["text"].replace(home + "/", "~/")
    return notebook


def inline_images(notebook: nbformat.NotebookNode) -> int:
    """How many PNG figures the executed notebook shows."""
    return sum("image/png" in output.get("data", {}) for cell in notebook.cells if cell.cell_type == "code"
               for output in cell.get("outputs", []))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate the lecture notebooks from the scripts and execute them.")
    parser.add_argument("lectures", nargs="*", help="lecture numbers (e.g. 04 11); default: all")
    parser.add_argument("--quick", action="store_true", help="execute each lecture in its quick mode")
    parser.add_argument("--check", action="store_true", help="only check that every notebook matches its script")
    args = parser.parse_args(argv)
    scripts = [script for script in lecture_scripts()
               if not args.lectures or any(script.name.startswith(number.zfill(2) + "_") for number in args.lectures)]
    if not scripts:
        parser.error(f"no lecture numbered {' or '.join(args.lectures)}")
    if args.check:
        problems = [problem for problem in map(out_of_sync, scripts) if problem]
        for problem in problems:
            print(f"out of sync: {problem} (run make notebooks)")
        return 1 if problems else 0
    for script in scripts:
        started = time.perf_counter()
        notebook = execute(notebook_from_script(script), quick=args.quick)
        nbformat.write(home_as_tilde(notebook), notebook_path(script))
        print(f"wrote {notebook_path(script).relative_to(LECTURES_DIR.parent)} "
              f"({'quick' if args.quick else 'full'} run, {time.perf_counter() - started:.0f} s, "
              f"{inline_images(notebook)} figures)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
