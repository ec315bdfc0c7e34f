"""The exercises' checks fail on the provided stubs and pass on the solutions.

lectures/exercises/lecture_NN.py holds the stubs a student fills in,
lectures/exercises/solutions/lecture_NN.py the solutions, and
lectures/exercises/test_lecture_NN.py the checks; EXERCISE_SOLUTIONS=1 points the checks
at the solutions (lectures/exercises/conftest.py). Each direction is one pytest run in a
subprocess, read back from its JUnit report.
"""

import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
EXERCISES = REPO_ROOT / "lectures" / "exercises"
LECTURE_NUMBERS = sorted(script.name[:2] for script in (REPO_ROOT / "lectures").glob("[0-9][0-9]_*.py"))


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
