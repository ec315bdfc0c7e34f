"""Every lecture notebook matches its script and runs as a notebook, figures inline.

The `# %%` scripts are the source; lectures/NN_name.ipynb is generated from each with
jupytext and shipped executed (`make notebooks`, lectures/_notebooks.py). Here each
shipped notebook is checked against a fresh conversion of its script (same cells, same
sources), checked for its shipped outputs and for being fresh (its metadata's fingerprint
of the code it ran matches the code now, by the rule of lectures/_fingerprint.py, which
planted changes to the real project check both ways), and, in the full tier, executed
again with nbclient in quick mode (LECTURE_QUICK=1), outputs into a temporary folder.
"""

import ast
import shutil
import sys
from pathlib import Path

import nbformat
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT / "lectures"))
import _fingerprint  # noqa: E402
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
    assert "ppo/algorithm/advantages.py" in notebook.metadata["lecture_run"]["code"]  # imported by the lecture
    notebook.metadata["lecture_run"]["code"]["ppo/algorithm/advantages.py"]["code"] = "0" * 64  # an older compute_gae
    nbformat.write(notebook, path)
    assert _notebooks.stale(script, path) == (
        "03_gae.ipynb is stale, its outputs predate the code it runs (changed: ppo/algorithm/advantages.py)")


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
    assert [path.relative_to(tmp_path).as_posix() for path in _fingerprint.files_run_by(script, tmp_path)] == [
        "lectures/07_x.py", "lectures/_common.py", "lectures/_shared.py", "ppo/__init__.py", "ppo/a.py", "ppo/b.py",
        "ppo/lm/__init__.py", "ppo/lm/d.py"]
    path = planted_notebook(script, tmp_path / "lectures", root=tmp_path)
    (tmp_path / "ppo/c.py").write_text("x = 2\n")  # not run by the lecture: still fresh
    (tmp_path / "ppo/lm/__init__.py").write_text('"""A docstring runs nothing."""\n')  # still fresh
    assert _notebooks.stale(script, path, root=tmp_path) is None
    (tmp_path / "ppo/lm/d.py").write_text("def h():\n    return 3\n")  # two imports away: stale
    (tmp_path / "lectures/_shared.py").write_text("import math\ny = 1\n")  # a lectures' helper: stale
    (tmp_path / "ppo/e.py").write_text("z = 0\n")
    (tmp_path / "ppo/a.py").write_text("from .b import g\nfrom . import e\n\ndef f():\n    return g()\n")
    assert _notebooks.stale(script, path, root=tmp_path) == (
        "07_x.ipynb is stale, its outputs predate the code it runs (changed: lectures/_shared.py, ppo/a.py, ppo/lm/d.py; "
        "now imported: ppo/e.py)")


def test_the_fingerprint_ignores_comments_docstrings_layout_and_statements_that_do_nothing(tmp_path: Path):
    written = {"ppo/__init__.py": "", "ppo/m.py": "def f(x):\n    return 2 * x\n"}
    rewritten = {"ppo/__init__.py": '"""The package."""\n',
                 "ppo/m.py": '"""A module."""\n\n# a comment\ndef f(x):  # doubles\n    """Twice x."""\n'
                             '    "a bare string"\n    pass\n    return (\n        2 * x\n    )\n'}
    digests = []
    for files in (written, rewritten):
        for name, text in files.items():
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text(text)
        digests.append(_fingerprint.code_digests([tmp_path / "ppo/m.py"], tmp_path)[tmp_path / "ppo/m.py"])
    assert digests[0] == digests[1]
    (tmp_path / "ppo/m.py").write_text("def f(x):\n    return 3 * x\n")
    assert _fingerprint.code_digests([tmp_path / "ppo/m.py"], tmp_path)[tmp_path / "ppo/m.py"] != digests[0]


def project_copy(destination: Path) -> Path:
    """The project's Python files (lectures, ppo, envs, experiments), without the notebooks."""
    for folder in ("ppo", "envs", "experiments"):
        shutil.copytree(REPO_ROOT / folder, destination / folder, ignore=shutil.ignore_patterns("__pycache__"))
    (destination / "lectures").mkdir()
    for script in (REPO_ROOT / "lectures").glob("*.py"):
        shutil.copy(script, destination / "lectures" / script.name)
    return destination


def stale_lectures(root: Path) -> dict[str, str]:
    """{lecture: why} for every shipped notebook that the code under root makes stale."""
    reasons = {script.stem: _notebooks.stale(root / "lectures" / script.name, _notebooks.notebook_path(script), root)
               for script in SCRIPTS}
    return {name: reason for name, reason in reasons.items() if reason is not None}


def lectures_importing(module: str, root: Path) -> set[str]:
    return {script.stem for script in SCRIPTS
            if root / module in _fingerprint.files_run_by(root / "lectures" / script.name, root)}


PLANTED_CHANGES = {  # module: (a line of its code, the same line changed)
    "ppo/algorithm/losses.py": ("return 0.5 * masked_mean(squared_error, mask)",
                                "return 0.6 * masked_mean(squared_error, mask)"),
    "ppo/lm/algorithm/kl_penalty.py": ('return "loss-k3" if algorithm == "grpo" else "reward-k1"',
                                       'return "loss-k3" if algorithm == "rloo" else "reward-k1"'),
}


@pytest.mark.parametrize("module", PLANTED_CHANGES)
def test_a_changed_constant_makes_exactly_the_lectures_that_import_it_stale(tmp_path: Path, module: str):
    """Every lecture imports the core (ppo/__init__.py imports its modules), only the language-model
    lectures import ppo.lm."""
    root = project_copy(tmp_path)
    assert stale_lectures(root) == {}  # the copy is the code the shipped notebooks ran
    line, changed = PLANTED_CHANGES[module]
    text = (root / module).read_text()
    assert text.count(line) == 1
    (root / module).write_text(text.replace(line, changed))
    users = lectures_importing(module, root)
    assert users and (module.startswith("ppo/lm/") == (len(users) < len(SCRIPTS)))
    stale = stale_lectures(root)
    assert set(stale) == users
    assert all(reason.endswith(f"(changed: {module})") for reason in stale.values())


def test_a_docstring_and_comment_edit_in_the_losses_makes_no_lecture_stale(tmp_path: Path):
    root = project_copy(tmp_path)
    losses = root / "ppo/algorithm/losses.py"
    tree = ast.parse(losses.read_text())
    documented = [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) and ast.get_docstring(node)]
    assert documented
    lines = losses.read_text().splitlines()
    lines[0] = lines[0] + " Edited."  # the module docstring's first line
    for node in documented:  # every function's docstring gains a word, and a comment precedes each return
        line = node.body[0].lineno - 1
        lines[line] = lines[line].replace('"""', '"""Edited: ', 1)
    losses.write_text("\n".join(lines).replace("\n    return", "\n    # a comment\n    return") + "\n")
    assert losses.read_text() != (REPO_ROOT / "ppo/algorithm/losses.py").read_text()
    assert stale_lectures(root) == {}


def test_moving_a_module_and_renaming_its_imports_makes_no_lecture_stale(tmp_path: Path):
    """ppo/algorithm/advantages.py moves to a new subpackage as ppo/estimators/gae.py, and every
    import follows it."""
    root = project_copy(tmp_path)
    (root / "ppo/estimators").mkdir()
    (root / "ppo/estimators/__init__.py").write_text('"""Estimators of the advantage."""\n')
    (root / "ppo/algorithm/advantages.py").rename(root / "ppo/estimators/gae.py")
    for path in root.rglob("*.py"):
        lines = path.read_text().splitlines(keepends=True)
        moved = [line.replace("ppo.algorithm.advantages", "ppo.estimators.gae")
                 .replace("from ppo.algorithm import advantages", "from ppo.estimators import gae as advantages")
                 if line.lstrip().startswith(("from ", "import ")) else line for line in lines]
        if moved != lines:
            path.write_text("".join(moved))
    assert "03_gae" in lectures_importing("ppo/estimators/gae.py", root)
    assert stale_lectures(root) == {}
    gae = root / "ppo/estimators/gae.py"  # the moved code changed: stale again
    gae.write_text(gae.read_text().replace("gamma * gae_lambda", "gae_lambda * gamma", 1))
    assert "03_gae" in stale_lectures(root)


def test_a_script_whose_text_alone_changed_gives_its_notebook_the_new_cells_and_keeps_the_outputs(tmp_path: Path):
    script = tmp_path / "03_gae.py"
    text = (REPO_ROOT / "lectures/03_gae.py").read_text()
    assert text.count("# Lecture 3 — ") == 1 and text.count("\nGAMMA = 0.95\n") == 1
    shipped = nbformat.read(_notebooks.notebook_path(REPO_ROOT / "lectures/03_gae.py"), as_version=4)
    script.write_text(text.replace("# Lecture 3 — ", "# Lecture 3, reworded — ")
                      .replace("\nGAMMA = 0.95\n", "\nGAMMA = 0.95  # the discount, as in the trainer\n"))
    synced = _notebooks.synced(script, shipped)
    assert synced is not None
    assert "Lecture 3, reworded" in synced.cells[0].source
    assert [cell.outputs for cell in synced.cells if cell.cell_type == "code"] == \
        [cell.outputs for cell in shipped.cells if cell.cell_type == "code"]
    assert synced.metadata["lecture_run"] == shipped.metadata["lecture_run"]
    script.write_text(text.replace("\nGAMMA = 0.95\n", "\nGAMMA = 0.9\n"))  # new code: outputs cannot be kept
    assert _notebooks.synced(script, shipped) is None


def test_a_quick_run_writes_its_notebook_beside_the_outputs_and_leaves_the_shipped_one(tmp_path, monkeypatch, capsys):
    shipped = _notebooks.notebook_path(REPO_ROOT / "lectures/03_gae.py")
    before = shipped.read_bytes()
    monkeypatch.setenv("LECTURE_OUTPUTS", str(tmp_path))
    monkeypatch.setattr(_notebooks, "execute", lambda notebook, quick: notebook)  # no kernel: only where it goes
    assert _notebooks.main(["--quick", "03"]) == 0
    written = tmp_path / "notebooks" / "03_gae.ipynb"
    assert nbformat.read(written, as_version=4).metadata["lecture_run"]["mode"] == "quick"
    assert shipped.read_bytes() == before
    assert f"wrote {written}" in capsys.readouterr().out


def test_the_check_says_when_every_notebook_is_fresh(capsys):
    assert _notebooks.main(["--check"]) == 0
    assert capsys.readouterr().out == f"all {len(SCRIPTS)} notebooks are in sync with their scripts and fresh\n"


@pytest.mark.parametrize("script", SCRIPTS, ids=IDS)
def test_shipped_notebook_holds_its_outputs_and_figures(script: Path):
    notebook = nbformat.read(_notebooks.notebook_path(script), as_version=4)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert all(cell.execution_count for cell in code_cells), "every code cell of the shipped notebook was executed"
    assert not [output for cell in code_cells for output in cell.outputs if output.output_type == "error"]
    assert _notebooks.inline_images(notebook) >= 1, "a reader sees the figures without running anything"


@pytest.mark.slow  # full tier: a kernel per lecture
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


def claims_notebook(outputs: list[str]) -> nbformat.NotebookNode:
    """A notebook of one teaching cell and one cell tagged `claims` that printed `outputs`."""
    teaching = nbformat.v4.new_code_cell("x = 3")
    claims = nbformat.v4.new_code_cell("lecture.claim(...)", metadata={"tags": ["claims"]})
    claims.outputs = [nbformat.v4.new_output("stream", name="stdout", text="".join(line + "\n" for line in outputs))]
    return nbformat.v4.new_notebook(cells=[teaching, claims])


def test_a_claims_cell_is_folded_behind_the_count_of_claims_its_run_checked():
    notebook = _notebooks.label_claims(claims_notebook([
        "claim checked: x is three [measured: x = 3]",
        "claim checked: x is odd [measured: x = 3]",
        "claim not checked in a quick run: x is prime",
    ]))
    teaching, claims = notebook.cells
    assert claims.metadata["tags"] == ["claims", "hide-cell"]
    assert claims.metadata["mystnb"] == {"code_prompt_show": "✔ 2 claims checked by this run (1 more need the full run)",
                                         "code_prompt_hide": "hide the claims"}
    assert "tags" not in teaching.metadata and "mystnb" not in teaching.metadata
    single = _notebooks.label_claims(claims_notebook(["claim checked: x is three [measured: x = 3]"])).cells[1]
    assert single.metadata["mystnb"]["code_prompt_show"] == "✔ 1 claim checked by this run"


def test_every_claims_cell_of_a_shipped_notebook_is_folded_behind_its_count():
    """What the book shows: each lecture's claims cells, folded, their counts adding up to the lecture's."""
    for script in SCRIPTS:
        notebook = nbformat.read(_notebooks.notebook_path(script), as_version=4)
        cells = [cell for cell in notebook.cells if "claims" in cell.metadata.get("tags", [])]
        assert cells, f"{script.name} has no claims cell"
        counted = 0
        for cell in cells:
            assert "hide-cell" in cell.metadata["tags"], script.name
            prompt = cell.metadata["mystnb"]["code_prompt_show"]
            assert prompt == _notebooks.claims_prompt(cell), script.name
            counted += int(prompt.split()[1])
        printed = "".join(output.get("text", "") for cell in notebook.cells for output in cell.get("outputs", []))
        assert counted == printed.count("claim checked:"), f"{script.name}: a claim sits outside its claims cells"
