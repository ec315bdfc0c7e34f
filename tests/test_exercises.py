"""The exercises' checks fail on the provided stubs and pass on the solutions.

lectures/exercises/NAME.py holds the stubs a student fills in (lecture_NN, derivations,
ppo_from_scratch, mystery_runs), lectures/exercises/solutions/NAME.py the solutions, and
lectures/exercises/test_NAME.py the checks; EXERCISE_SOLUTIONS=1 points the checks at the
solutions (lectures/exercises/conftest.py). Each direction is one pytest run in a
subprocess, read back from its JUnit report. The checks refuse a module that calls the
library's own implementation of what it asks for (lectures/exercises/library_shortcuts.py);
the tests below plant such modules and see them refused.
"""

import importlib
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
EXERCISES = REPO_ROOT / "lectures" / "exercises"
LECTURE_NUMBERS = sorted(script.name[:2] for script in (REPO_ROOT / "lectures").glob("[0-9][0-9]_*.py"))
EXERCISE_MODULES = sorted(path.name.removeprefix("test_").removesuffix(".py") for path in EXERCISES.glob("test_*.py"))
sys.path.insert(0, str(EXERCISES))
library_shortcuts = importlib.import_module("library_shortcuts")


def run_checks(tmp_path: Path, solutions: bool) -> dict[str, str]:
    """{test id: 'passed' | 'failed'} for every check, run against the stubs or the solutions."""
    report = tmp_path / "report.xml"
    environment = {**os.environ, "EXERCISE_SOLUTIONS": "1" if solutions else "0"}
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
                    str(EXERCISES)], cwd=REPO_ROOT, env=environment, capture_output=True, text=True, timeout=600)
    outcomes = {}
    for case in ElementTree.parse(report).iter("testcase"):
        failed = case.find("failure") is not None or case.find("error") is not None
        skipped = case.find("skipped") is not None
        outcomes[f"{case.get('classname')}::{case.get('name')}"] = "skipped" if skipped else ("failed" if failed else "passed")
    return outcomes


@pytest.mark.parametrize("number", LECTURE_NUMBERS)
def test_every_lecture_has_stubs_solutions_and_checks(number: str):
    for path in (EXERCISES / f"lecture_{number}.py", EXERCISES / "solutions" / f"lecture_{number}.py",
                 EXERCISES / f"test_lecture_{number}.py"):
        assert path.is_file(), f"missing {path.relative_to(REPO_ROOT)}"


def test_every_check_passes_on_the_solutions(tmp_path: Path):
    outcomes = run_checks(tmp_path, solutions=True)
    assert len(outcomes) >= 2 * len(LECTURE_NUMBERS)
    assert {test for test, outcome in outcomes.items() if outcome != "passed"} == set()
    for number in LECTURE_NUMBERS:
        assert any(f"test_lecture_{number}" in test for test in outcomes), f"no checks ran for lecture {number}"


def test_every_check_fails_on_the_stubs(tmp_path: Path):
    outcomes = run_checks(tmp_path, solutions=False)
    assert len(outcomes) >= 2 * len(LECTURE_NUMBERS)
    assert {test for test, outcome in outcomes.items() if outcome != "failed"} == set()


@pytest.mark.parametrize("name", EXERCISE_MODULES)
def test_every_exercise_module_has_a_solution(name: str):
    assert (EXERCISES / "solutions" / f"{name}.py").is_file()


@pytest.mark.parametrize("name", sorted(library_shortcuts.FORBIDDEN))
def test_the_shortcut_table_names_functions_that_exist(name: str):
    """A row of the table for a function that was renamed would guard nothing."""
    for folder in (EXERCISES, EXERCISES / "solutions"):
        source = (folder / f"{name}.py").read_text(encoding="utf-8")
        for function in library_shortcuts.FORBIDDEN[name]:
            assert f"def {function}(" in source, f"{folder.name}/{name}.py has no {function}"


GAE_FROM_THE_LIBRARY = {
    "from-import": "from ppo.algorithm.advantages import compute_gae\n",
    "module alias": "import ppo.algorithm.advantages as advantages\n",
    "from the package": "from ppo.algorithm import advantages\n",
    "the package": "import ppo\n",
    "dotted use": "import ppo.models.networks\nfunction = ppo.algorithm.advantages.compute_gae\n",
    "by a string": "import importlib\nadvantages = importlib.import_module('ppo.algorithm.advantages')\n",
    "inside the function": "def gae(*args):\n    from ppo.algorithm.advantages import compute_gae\n    return compute_gae(*args)\n",
    "the solutions": "from solutions.lecture_03 import gae\n",
    "the solutions, relatively": "from .solutions.lecture_03 import gae\n",
}


@pytest.mark.parametrize("source", GAE_FROM_THE_LIBRARY.values(), ids=GAE_FROM_THE_LIBRARY.keys())
def test_the_shortcut_check_catches_a_gae_from_the_library(source: str):
    assert library_shortcuts.shortcuts(source, library_shortcuts.forbidden_names("lecture_03"))


def test_the_shortcut_check_lets_other_imports_through():
    allowed = "import math\nimport torch\nfrom torch.distributions import Categorical\nfrom ppo import networks\n"
    assert library_shortcuts.shortcuts(allowed, library_shortcuts.forbidden_names("lecture_03")) == []
    assert library_shortcuts.shortcuts(allowed, library_shortcuts.forbidden_names("ppo_from_scratch")) == []


def test_the_shortcut_check_catches_autograd_only_where_it_is_forbidden():
    source = ("def score_function(logits):\n    logits.sum().backward()\n\n"
              "def maximise_by_gradient_ascent(logits):\n    logits.sum().backward()\n")
    found = library_shortcuts.shortcuts(source, set(), library_shortcuts.forbidden_methods("derivations"))
    assert found == ["line 2: .backward in score_function"]


def test_a_gae_that_calls_the_library_fails_its_checks(tmp_path: Path):
    """The solution's gae replaced by a call to compute_gae: it would pass the comparison
    with the library, and the fixture fails it instead."""
    exercises = tmp_path / "lectures" / "exercises"
    shutil.copytree(EXERCISES, exercises, ignore=shutil.ignore_patterns("__pycache__"))
    for package in ("ppo", "envs", "experiments"):
        (tmp_path / package).symlink_to(REPO_ROOT / package)
    solution = (EXERCISES / "solutions" / "lecture_03.py").read_text(encoding="utf-8")
    cheat = ("\n\nfrom ppo.algorithm.advantages import compute_gae\n\n\n"
             "def gae(rewards, values, next_values, terminated, dones, gamma, gae_lambda):\n"
             "    column = lambda x: x.unsqueeze(1)\n"
             "    advantages, _ = compute_gae(column(rewards), column(values), column(next_values), column(terminated),\n"
             "                                column(dones), gamma, gae_lambda)\n"
             "    return advantages.squeeze(1)\n")
    (exercises / "lecture_03.py").write_text(solution + cheat, encoding="utf-8")
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "gae_matches",
                             str(exercises / "test_lecture_03.py")], cwd=tmp_path,
                            env={**os.environ, "EXERCISE_SOLUTIONS": "0"}, capture_output=True, text=True, timeout=300)
    assert result.returncode == 1, result.stdout
    assert "uses the library's own implementation" in result.stdout and "from ppo.algorithm.advantages import compute_gae" in result.stdout


def test_the_mystery_answers_are_the_runs_the_script_made():
    """make_mystery_runs.RUNS made each file; the check's answer key must agree with it."""
    test_module = importlib.import_module("test_mystery_runs")
    runs = importlib.import_module("make_mystery_runs").RUNS
    assert {name: label for name, (label, _, _) in runs.items()} == test_module.ANSWERS
    assert sorted(path.name for path in (EXERCISES / "mystery_metrics").glob("*.csv")) == sorted(runs)
    assert set(test_module.ANSWERS.values()) == set(importlib.import_module("mystery_runs").LABELS)
