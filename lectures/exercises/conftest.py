"""Runs each exercise test against your code, or against the solutions.

    pytest lectures/exercises/test_lecture_03.py      # your functions in lectures/exercises/lecture_03.py
    pytest lectures/exercises                         # every lecture's exercises
    EXERCISE_SOLUTIONS=1 pytest lectures/exercises    # the solutions in lectures/exercises/solutions/

A test module test_NAME.py receives the module NAME as the fixture `exercise` (lecture_03,
derivations, ...). Every check of a module fails when that module takes a shortcut through
the library's own implementation of what it asks for (library_shortcuts.py lists them).
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

import pytest
import torch

EXERCISES_DIR = Path(__file__).resolve().parent
REPO_ROOT = EXERCISES_DIR.parents[1]
for folder in (REPO_ROOT, EXERCISES_DIR):  # the library, and the exercise modules
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from library_shortcuts import module_shortcuts  # noqa: E402  (found through the path above)

SOLUTIONS_VARIABLE = "EXERCISE_SOLUTIONS"
torch.set_num_threads(1)  # the checks are small: a second thread only spins


@pytest.fixture
def exercise(request):
    """The module with the functions under test: NAME, or solutions.NAME, once it is
    known not to call the library's implementation of what it asks for."""
    name = request.module.__name__.rsplit(".", 1)[-1].removeprefix("test_")
    package = "solutions." if os.environ.get(SOLUTIONS_VARIABLE) == "1" else ""
    module = importlib.import_module(package + name)
    found = module_shortcuts(Path(module.__file__), name)
    if found:
        pytest.fail(f"{Path(module.__file__).name} uses the library's own implementation of its exercise "
                    f"(lectures/exercises/library_shortcuts.py): " + "; ".join(found), pytrace=False)
    return module
