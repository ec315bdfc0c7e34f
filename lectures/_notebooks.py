"""The lecture notebooks: made from the `# %%` scripts with jupytext, executed with nbclient.

The scripts are the source; each `lectures/NN_name.ipynb` is generated from
`lectures/NN_name.py` and shipped with its outputs, so a reader sees the tables and
figures without running anything. `make notebooks` runs this file:

    python lectures/_notebooks.py                  # regenerate and execute every notebook (full runs)
    python lectures/_notebooks.py --quick          # the same, each lecture in its quick mode
    python lectures/_notebooks.py 05 12            # only lectures 5 and 12
    python lectures/_notebooks.py --check          # exit 1 if a notebook is out of sync or stale

A notebook is *in sync* with its script when it has the same cells, in the same order,
with the same sources (outputs and metadata aside). It is *fresh* when its outputs come
from a full run of the code as it is now: each executed notebook records, in its
metadata under "lecture_run", the mode it ran in and a SHA-256 of every project file the
run executed — the script, `lectures/_common.py` and the modules of `ppo/`, `envs/` and
`experiments/` it imports, followed import by import (the packages' `__init__.py`
included). A change to any of those files makes the notebook stale; a change elsewhere
in the library does not. tests/test_notebooks.py checks both.
The kernel runs in `lectures/`, so that `_common` imports and a reader's Jupyter, opened
on the notebook, behaves the same.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import os
import sys
import time
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

LECTURES_DIR = Path(__file__).resolve().parent
REPO_ROOT = LECTURES_DIR.parent
PROJECT_PACKAGES = ("ppo", "envs", "experiments")  # the library a lecture runs; third-party code is not tracked
RUN_METADATA_KEY = "lecture_run"  # notebook.metadata[...] = {"mode": "full" | "quick", "sources": {path: sha256}}
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


def module_file(module: str, root: Path) -> Path | None:
    """The project file that `import module` runs (a package's __init__.py), None outside the project."""
    parts = module.split(".")
    helper = root / "lectures" / f"{parts[0]}.py"
    if len(parts) == 1 and parts[0].startswith("_") and helper.is_file():  # a helper the lectures share (_common)
        return helper
    if parts[0] not in PROJECT_PACKAGES:
        return None
    base = root.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def imported_modules(path: Path, root: Path) -> set[str]:
    """Every module an `import` or `from … import` in the file names (in functions too), relative
    imports resolved; for `from package import name` both `package` and `package.name`, since
    the name may be a submodule."""
    own = ".".join(path.relative_to(root).with_suffix("").parts)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    package = package.removesuffix(".__init__")
    modules = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            modules.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            modules.add(base)
            modules.update(f"{base}.{alias.name}" for alias in node.names)
    return modules


def files_run_by(script: Path, root: Path = REPO_ROOT) -> list[Path]:
    """The script and every project file its imports run, transitively (parent packages'
    __init__.py included: importing ppo.lm.model runs ppo/__init__.py and ppo/lm/__init__.py)."""
    found, pending = {script}, [script]
    while pending:
        for module in imported_modules(pending.pop(), root):
            parts = module.split(".")
            for depth in range(1, len(parts) + 1):
                path = module_file(".".join(parts[:depth]), root)
                if path is not None and path not in found:
                    found.add(path)
                    pending.append(path)
    return sorted(found)


def file_digest(path: Path) -> str:
    """SHA-256 of a file's text with line endings normalised (a checkout with CRLF is the same code)."""
    return hashlib.sha256(path.read_bytes().replace(b"\r\n", b"\n")).hexdigest()


def source_fingerprint(script: Path, root: Path = REPO_ROOT) -> dict[str, str]:
    """{path relative to the repository: SHA-256} of every project file a run of the script executes."""
    return {path.relative_to(root).as_posix(): file_digest(path) for path in files_run_by(script, root)}


def record_run(notebook: nbformat.NotebookNode, script: Path, quick: bool, root: Path = REPO_ROOT) -> None:
    notebook.metadata[RUN_METADATA_KEY] = {"mode": "quick" if quick else "full",
                                           "sources": source_fingerprint(script, root)}


def stale(script: Path, notebook_file: Path | None = None, root: Path = REPO_ROOT) -> str | None:
    """None when the notebook's outputs come from a full run of the code as it is now, else a
    sentence naming what changed since (or why that cannot be told)."""
    path = notebook_file or notebook_path(script)
    if not path.is_file():
        return f"{path.name} is missing"
    run = nbformat.read(path, as_version=4).metadata.get(RUN_METADATA_KEY)
    if not run or "sources" not in run:
        return f"{path.name} records no fingerprint of the code it ran"
    if run.get("mode") != "full":
        return f"{path.name} holds a {run.get('mode')} run's outputs, not the full run's"
    recorded, current = run["sources"], source_fingerprint(script, root)
    changed = sorted(name for name in recorded.keys() & current.keys() if recorded[name] != current[name])
    added, removed = sorted(current.keys() - recorded.keys()), sorted(recorded.keys() - current.keys())
    if not (changed or added or removed):
        return None
    what = ([f"changed: {', '.join(changed)}"] if changed else []) + \
           ([f"now imported: {', '.join(added)}"] if added else []) + \
           ([f"no longer imported: {', '.join(removed)}"] if removed else [])
    return f"{path.name} is stale, its outputs predate the code it runs ({'; '.join(what)})"


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
    parser.add_argument("lectures", nargs="*", help="lecture numbers (e.g. 05 12); default: all")
    parser.add_argument("--quick", action="store_true", help="execute each lecture in its quick mode")
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
        return 1 if problems else 0
    for script in scripts:
        started = time.perf_counter()
        notebook = execute(notebook_from_script(script), quick=args.quick)
        record_run(notebook, script, quick=args.quick)
        nbformat.write(home_as_tilde(notebook), notebook_path(script))
        print(f"wrote {notebook_path(script).relative_to(LECTURES_DIR.parent)} "
              f"({'quick' if args.quick else 'full'} run, {time.perf_counter() - started:.0f} s, "
              f"{inline_images(notebook)} figures)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
