"""The lecture notebooks: made from the `# %%` scripts with jupytext, executed with nbclient.

The scripts are the source; each `lectures/NN_name.ipynb` is generated from
`lectures/NN_name.py` and shipped with its full run's outputs, so a reader sees the
tables and figures without running anything. `make notebooks` runs this file:

    python lectures/_notebooks.py                  # bring every notebook up to date (see below)
    python lectures/_notebooks.py 05 12            # execute lectures 5 and 12 in full
    python lectures/_notebooks.py --all            # execute every lecture in full
    python lectures/_notebooks.py --quick 05       # a quick run, into lecture_outputs/notebooks/
    python lectures/_notebooks.py --check          # exit 1 if a notebook is out of sync or stale

A notebook is *in sync* with its script when it has the same cells, in the same order,
with the same sources (outputs and metadata aside). It is *fresh* when its outputs come
from a full run of the code as it is now: each executed notebook records, in its
metadata under "lecture_run", the mode it ran in and the fingerprint of the code the run
executed (lectures/_fingerprint.py): one digest per project file, taken of what the file
does, so that comments, docstrings, layout and moving a module do not count, and any
other change does. tests/test_notebooks.py checks both.

Bringing a notebook up to date executes it only when it is stale. A notebook whose
script changed only in its text (markdown cells, comments in code cells) gets the new
cell sources and keeps its outputs, which the same code would print again.
A quick run never writes the shipped notebook: it goes to lecture_outputs/notebooks/.

A section's checks sit in a code cell of their own, tagged `claims` in the script
(`# %% tags=["claims"]`), after the cells that teach. Every notebook written here labels
such a cell from its output: it is folded (tag `hide-cell`), and the book shows it as a
box "✔ N claims checked by this run" that opens on the claims and what was measured.
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

from _fingerprint import differences, fingerprint, normalised_code

LECTURES_DIR = Path(__file__).resolve().parent
REPO_ROOT = LECTURES_DIR.parent
RUN_METADATA_KEY = "lecture_run"  # notebook.metadata[...] = {"mode": "full" | "quick", "code": {path: digest}}
KERNEL_NAME = "python3"  # the kernel of the Python that runs this file
CELL_TIMEOUT_S = 1800  # a full run's longest cell takes minutes, not an hour
CLAIMS_TAG = "claims"  # the script's tag of a cell that holds a section's checks
FOLDED_TAG = "hide-cell"  # the book shows such a cell folded, behind its prompt


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


def record_run(notebook: nbformat.NotebookNode, script: Path, quick: bool, root: Path = REPO_ROOT) -> None:
    notebook.metadata[RUN_METADATA_KEY] = {"mode": "quick" if quick else "full", "code": fingerprint(script, root)}


def stale(script: Path, notebook_file: Path | None = None, root: Path = REPO_ROOT) -> str | None:
    """None when the notebook's outputs come from a full run of the code as it is now, else a
    sentence naming what changed since (or why that cannot be told)."""
    path = notebook_file or notebook_path(script)
    if not path.is_file():
        return f"{path.name} is missing"
    run = nbformat.read(path, as_version=4).metadata.get(RUN_METADATA_KEY)
    if not run or "code" not in run:
        return f"{path.name} records no fingerprint of the code it ran"
    if run.get("mode") != "full":
        return f"{path.name} holds a {run.get('mode')} run's outputs, not the full run's"
    changes = differences(run["code"], fingerprint(script, root))
    return f"{path.name} is stale, its outputs predate the code it runs ({'; '.join(changes)})" if changes else None


def code_cells(notebook: nbformat.NotebookNode) -> list[str]:
    """What the kernel runs: each code cell's code, without comments, layout and bare strings."""
    return [normalised_code(cell.source, "", REPO_ROOT)[0] for cell in notebook.cells if cell.cell_type == "code"]


def synced(script: Path, shipped: nbformat.NotebookNode) -> nbformat.NotebookNode | None:
    """The script's cells with the shipped notebook's outputs, where the two run the same code
    (only markdown cells and comments differ); None where the code differs."""
    notebook = notebook_from_script(script)
    if code_cells(notebook) != code_cells(shipped):
        return None
    old_cells = {kind: iter([cell for cell in shipped.cells if cell.cell_type == kind]) for kind in ("code", "markdown")}
    same_layout = [cell.cell_type for cell in notebook.cells] == [cell.cell_type for cell in shipped.cells]
    for cell in notebook.cells:
        if cell.cell_type == "code" or same_layout:  # keep the cell's id (and a code cell's run) for a small diff
            old = next(old_cells[cell.cell_type])
            script_tags = cell.metadata.get("tags")
            cell.id, cell.metadata = old.get("id", cell.get("id")), old.metadata
            cell.metadata.pop("mystnb", None)
            cell.metadata.pop("tags", None)
            if script_tags:  # the tags are the script's, the rest (the run's timing) the shipped cell's
                cell.metadata["tags"] = script_tags
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = old.outputs, old.execution_count
    notebook.metadata = shipped.metadata  # the kernel's, and the run record: the same code ran
    return label_claims(notebook)


def claims_prompt(cell: nbformat.NotebookNode) -> str:
    """'✔ N claims checked by this run' (and how many a quick run left out), from the cell's output."""
    text = "".join(output.get("text", "") for output in cell.get("outputs", []) if output.get("output_type") == "stream")
    lines = text.splitlines()
    checked = sum(line.startswith("claim checked:") for line in lines)
    skipped = sum(line.startswith("claim not checked in a quick run:") for line in lines)
    prompt = f"✔ {checked} claim{'' if checked == 1 else 's'} checked by this run"
    return prompt + (f" ({skipped} more need the full run)" if skipped else "")


def label_claims(notebook: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Fold every cell tagged `claims` behind a prompt counting the claims its output checked."""
    for cell in notebook.cells:
        tags = cell.metadata.get("tags", [])
        if cell.cell_type != "code" or CLAIMS_TAG not in tags:
            continue
        if FOLDED_TAG not in tags:
            cell.metadata["tags"] = [*tags, FOLDED_TAG]
        cell.metadata["mystnb"] = {"code_prompt_show": claims_prompt(cell), "code_prompt_hide": "hide the claims"}
    return notebook


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


def quick_notebook_path(script: Path) -> Path:
    """Where a quick run's notebook goes: beside the lectures' outputs, never over the shipped one."""
    root = Path(os.environ.get("LECTURE_OUTPUTS", REPO_ROOT / "lecture_outputs"))
    return root / "notebooks" / notebook_path(script).name


def run_and_write(script: Path, quick: bool) -> None:
    started = time.perf_counter()
    notebook = execute(notebook_from_script(script), quick=quick)
    record_run(notebook, script, quick=quick)
    label_claims(notebook)
    path = quick_notebook_path(script) if quick else notebook_path(script)
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(home_as_tilde(notebook), path)
    shown = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
    print(f"wrote {shown} ({'quick' if quick else 'full'} run, {time.perf_counter() - started:.0f} s, "
          f"{inline_images(notebook)} figures)", flush=True)


def bring_up_to_date(script: Path) -> None:
    """Execute the notebook if it is stale; give it the script's text if only that changed."""
    reason = stale(script)
    if reason is None and out_of_sync(script) is not None:
        notebook = synced(script, nbformat.read(notebook_path(script), as_version=4))
        if notebook is not None:
            nbformat.write(notebook, notebook_path(script))
            print(f"synced {notebook_path(script).relative_to(REPO_ROOT)}: new text, same code, outputs kept")
            return
        reason = f"the code of its cells changed in {script.name}"
    if reason is not None:
        print(f"running {script.stem}: {reason}", flush=True)
        run_and_write(script, quick=False)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate the lecture notebooks from the scripts and execute them.",
                                     allow_abbrev=False)
    parser.add_argument("lectures", nargs="*", help="lecture numbers (e.g. 05 12) to execute in full; "
                                                    "default: bring every notebook up to date")
    parser.add_argument("--all", action="store_true", help="execute every lecture in full")
    parser.add_argument("--quick", action="store_true",
                        help="execute in quick mode, into lecture_outputs/notebooks/ (the shipped notebooks stay)")
    parser.add_argument("--check", action="store_true",
                        help="only check that every notebook matches its script and ran on the current code")
    args = parser.parse_args(argv)
    scripts = [script for script in lecture_scripts()
               if not args.lectures or any(script.name.startswith(number.zfill(2) + "_") for number in args.lectures)]
    if not scripts:
        parser.error(f"no lecture numbered {' or '.join(args.lectures)}")
    if args.check:
        problems = [problem for script in scripts for problem in (out_of_sync(script), stale(script)) if problem]
        for problem in problems:
            print(f"{problem} (run make notebooks)")
        if not problems:
            print(f"all {len(scripts)} notebooks are in sync with their scripts and fresh")
        return 1 if problems else 0
    if args.lectures or args.all or args.quick:
        for script in scripts:
            run_and_write(script, quick=args.quick)
    else:
        for script in scripts:
            bring_up_to_date(script)
        print(f"all {len(scripts)} notebooks are up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
