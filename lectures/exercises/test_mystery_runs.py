"""Checks for mystery_runs.py: the label of each metrics file made by make_mystery_runs.py."""

from pathlib import Path

import pytest

from mystery_runs import LABELS

FILES = Path(__file__).resolve().parent / "mystery_metrics"
ANSWERS = {"run_1.csv": "learning rate too large", "run_2.csv": "healthy", "run_3.csv": "old log-prob recomputed each minibatch",
           "run_4.csv": "wrong advantage sign"}


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_diagnose_names_the_bug(exercise, name):
    label = exercise.diagnose(str(FILES / name))
    assert label in LABELS, f"{label!r} is not one of {LABELS}"
    assert label == ANSWERS[name]
