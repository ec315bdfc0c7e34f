"""Every numbered lecture runs with --quick and writes the files it announces.

The convention (lectures/README.md): a lecture `lectures/NN_name.py` writes into one folder
named NN_name (under $LECTURE_OUTPUTS, default lecture_outputs/), prints `wrote: PATH` for
each file, and ends its output with the line `outputs: FOLDER`. Lectures added later are
picked up by the glob below without editing this file.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
LECTURES = sorted(REPO_ROOT.glob("lectures/[0-9][0-9]_*.py"))
QUICK_RUN_TIMEOUT_S = 300  # generous: the quick runs take seconds, but CI machines are slow and shared


def resolve(printed: str) -> Path:
    """A path printed by a lecture: absolute, or relative to the repository root (its working directory)."""
    path = Path(printed)
    return path if path.is_absolute() else REPO_ROOT / path


def test_lectures_are_present():
    assert LECTURES, "no lectures/NN_*.py files found"


@pytest.mark.parametrize("script", LECTURES, ids=[script.stem for script in LECTURES])
def test_lecture_runs_quick_and_writes_its_outputs(script: Path, tmp_path: Path):
    started = time.time()
    environment = {**os.environ, "LECTURE_OUTPUTS": str(tmp_path), "MPLBACKEND": "Agg"}
    result = subprocess.run(
        [sys.executable, str(script), "--quick"],
        cwd=REPO_ROOT, env=environment, capture_output=True, text=True, timeout=QUICK_RUN_TIMEOUT_S,
    )
    assert result.returncode == 0, f"{script.name} --quick failed:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"

    lines = result.stdout.strip().splitlines()
    assert lines and lines[-1].startswith("outputs: "), f"{script.name} must end with 'outputs: <folder>'; last line: {lines[-1:]}"
    folder = resolve(lines[-1].removeprefix("outputs: ").strip())
    assert folder.name == script.stem, f"outputs go into a folder named {script.stem}, not {folder.name}"
    assert folder.resolve().is_relative_to(tmp_path.resolve()), "outputs must go under $LECTURE_OUTPUTS"
    assert folder.is_dir()
    assert any(folder.rglob("*.png")), f"{script.name} wrote no PNG into {folder}"

    announced = [resolve(line.removeprefix("wrote: ").strip()) for line in lines if line.startswith("wrote: ")]
    assert announced, f"{script.name} announced no files with 'wrote: <path>'"
    for path in announced:
        assert path.is_file(), f"{script.name} announced {path} but it does not exist"
        assert path.stat().st_mtime >= started - 1, f"{path} was not written by this run"
        assert path.resolve().is_relative_to(folder.resolve()), f"{path} lies outside the lecture's folder {folder}"
