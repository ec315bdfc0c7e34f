"""Every lecture notebook matches its script and runs as a notebook, figures inline.

The `# %%` scripts are the source; lectures/NN_name.ipynb is generated from each with
jupytext and shipped executed (`make notebooks`, lectures/_notebooks.py). Here each
shipped notebook is checked against a fresh conversion of its script (same cells, same
sources), checked for its shipped outputs and for being fresh (its metadata's fingerprint
of the code it ran equals the code now), and executed again with nbclient in quick mode
(LECTURE_QUICK=1), outputs into a temporary folder.
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
def test_notebook_ran_in_full_on_the_code_as_it_is_now(script: Path):
    assert _notebooks.stale(script) is None, f"{_notebooks.stale(script)}: run make notebooks"


def planted_notebook(script: Path, folder: Path, root: Path = REPO_ROOT, quick: bool = False) -> Path:
    """The script's notebook, unexecuted, with the run record a run on today's code would leave."""
    notebook = _notebooks.notebook_from_script(script)
    _notebooks.record_run(notebook, script, quick=quick, root=root)
    path = folder / script.with_suffix(".ipynb").name
    nbformat.write(notebook, path)
    return path


def test_a_planted_stale_notebook_is_caught_naming_the_file_that_changed(tmp_path: Path):
    script = REPO_ROOT / "lectures" / "03_gae.py"
    path = planted_notebook(script, tmp_path)
    assert _notebooks.stale(script, path) is None  # fresh: recorded on the code as it is
    notebook = nbformat.read(path, as_version=4)
    assert "ppo/advantages.py" in notebook.metadata["lecture_run"]["sources"]  # imported by the lecture
    notebook.metadata["lecture_run"]["sources"]["ppo/advantages.py"] = "0" * 64  # an older compute_gae
    nbformat.write(notebook, path)
    assert _notebooks.stale(script, path) == (
        "03_gae.ipynb is stale, its outputs predate the code it runs (changed: ppo/advantages.py)")


def test_a_notebook_without_a_fingerprint_or_from_a_quick_run_is_stale(tmp_path: Path):
    script = REPO_ROOT / "lectures" / "03_gae.py"
    path = planted_notebook(script, tmp_path, quick=True)
    assert "quick run's outputs" in _notebooks.stale(script, path)
    notebook = nbformat.read(path, as_version=4)
    del notebook.metadata["lecture_run"]
    nbformat.write(notebook, path)
    assert "records no fingerprint" in _notebooks.stale(script, path)


def test_a_notebook_is_stale_only_when_a_file_its_run_imports_changes(tmp_path: Path):
    """A small project: the lecture imports ppo.a, which imports .b, which imports ppo.lm's d.
    ppo/c.py is imported by nothing the lecture runs."""
    files = {
        "lectures/_common.py": "", "lectures/_shared.py": "import math\n",
        "lectures/07_x.py": "import torch\nfrom _common import Lecture\nfrom _shared import y\nfrom ppo.a import f\n",
        "ppo/__init__.py": "", "ppo/a.py": "from .b import g\n\ndef f():\n    return g()\n",
        "ppo/b.py": "def g():\n    from ppo.lm import d\n    return d.h()\n", "ppo/c.py": "x = 1\n",
        "ppo/lm/__init__.py": "", "ppo/lm/d.py": "def h():\n    return 2\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    script = tmp_path / "lectures/07_x.py"
    assert [path.relative_to(tmp_path).as_posix() for path in _notebooks.files_run_by(script, tmp_path)] == [
        "lectures/07_x.py", "lectures/_common.py", "lectures/_shared.py", "ppo/__init__.py", "ppo/a.py", "ppo/b.py",
        "ppo/lm/__init__.py", "ppo/lm/d.py"]
    path = planted_notebook(script, tmp_path / "lectures", root=tmp_path)
    (tmp_path / "ppo/c.py").write_text("x = 2\n")  # not run by the lecture: still fresh
    assert _notebooks.stale(script, path, root=tmp_path) is None
    (tmp_path / "ppo/lm/d.py").write_text("def h():\n    return 3\n")  # two imports away: stale
    (tmp_path / "lectures/_shared.py").write_text("import math\ny = 1\n")  # a lectures' helper: stale
    (tmp_path / "ppo/e.py").write_text("")
    (tmp_path / "ppo/a.py").write_text("from .b import g\nfrom . import e\n\ndef f():\n    return g()\n")
    assert _notebooks.stale(script, path, root=tmp_path) == (
        "07_x.ipynb is stale, its outputs predate the code it runs (changed: lectures/_shared.py, ppo/a.py, ppo/lm/d.py; "
        "now imported: ppo/e.py)")


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
