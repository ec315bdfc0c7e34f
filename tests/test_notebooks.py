"""Every lecture notebook matches its script and runs as a notebook, figures inline.

The `# %%` scripts are the source; lectures/NN_name.ipynb is generated from each with
jupytext and shipped executed (`make notebooks`, lectures/_notebooks.py). Here each
shipped notebook is checked against a fresh conversion of its script (same cells, same
sources), checked for its shipped outputs, and executed again with nbclient in quick
mode (LECTURE_QUICK=1), outputs into a temporary folder.
"""

import sys
from pathlib import Path

import nbformat
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "lectures"))
import _notebooks  # noqa: E402

SCRIPTS = _notebooks.lecture_scripts()
IDS = [script.stem for script in SCRIPTS]


def saved_figures(notebook) -> list[str]:
    """The PNG files a run announced with 'wrote: …png' (save_figure; the library's own plots too)."""
    text = "".join(output.get("text", "") for cell in notebook.cells if cell.cell_type == "code"
                   for output in cell.get("outputs", []) if output.get("output_type") == "stream")
    return [line for line in text.splitlines() if line.startswith("wrote: ") and line.endswith(".png")]


@pytest.mark.parametrize("script", SCRIPTS, ids=IDS)
def test_notebook_is_in_sync_with_its_script(script: Path):
    assert _notebooks.out_of_sync(script) is None, f"{_notebooks.out_of_sync(script)}: run make notebooks"


@pytest.mark.parametrize("script", SCRIPTS, ids=IDS)
def test_shipped_notebook_holds_its_outputs_and_figures(script: Path):
    notebook = nbformat.read(_notebooks.notebook_path(script), as_version=4)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.execution_count for cell in code_cells), "every code cell of the shipped notebook was executed"
    assert not [output for cell in code_cells for output in cell.outputs if output.output_type == "error"]
    assert _notebooks.inline_images(notebook) >= 1, "a reader sees the figures without running anything"


@pytest.mark.parametrize("script", SCRIPTS, ids=IDS)
def test_notebook_executes_in_quick_mode_with_its_figures_inline(script: Path, tmp_path: Path):
    notebook = _notebooks.execute(_notebooks.notebook_from_script(script), quick=True, output_root=tmp_path)
    text = "".join(output.get("text", "") for cell in notebook.cells for output in cell.get("outputs", []))
    assert f"{script.stem} (quick run)" in text
    assert (tmp_path / script.stem).is_dir()
    assert _notebooks.inline_images(notebook) >= 1
    # every figure the lecture saves with save_figure is also shown (the library's own plots are files only)
    lecture_figures = [line for line in saved_figures(notebook) if line.count("/") == 2]  # NN_name/file.png
    assert _notebooks.inline_images(notebook) >= len(lecture_figures)
