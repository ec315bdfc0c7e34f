"""Runs each exercise test against your code, or against the solutions.

    pytest lectures/exercises/test_lecture_03.py      # your functions in lectures/exercises/lecture_03.py
    pytest lectures/exercises                         # every lecture's exercises
    EXERCISE_SOLUTIONS=1 pytest lectures/exercises    # the solutions in lectures/exercises/solutions/

A test module test_lecture_NN.py receives the module lecture_NN as the fixture `exercise`.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest

EXERCISES_DIR = Path(__file__).resolve().parent
REPO_ROOT = EXERCISES_DIR.parents[1]
for folder in (REPO_ROOT, EXERCISES_DIR):  # the library, and the exercise modules
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

SOLUTIONS_VARIABLE = "EXERCISE_SOLUTIONS"


@pytest.fixture
def exercise(request):
    """The module with the functions under test: lecture_NN, or solutions.lecture_NN."""
    name = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    package = "solutions." if os.environ.get(SOLUTIONS_VARIABLE) == "1" else ""
    return importlib.import_module(package + name)
