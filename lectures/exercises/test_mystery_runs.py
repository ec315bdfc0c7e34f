"""Checks for mystery_runs.py: the label of each metrics file made by make_mystery_runs.py."""

from pathlib import Path

import pytest

from feedback import check_equal
from mystery_runs import LABELS

FILES = Path(__file__).resolve().parent / "mystery_metrics"
ANSWERS = {"run_1.csv": "learning rate too large", "run_2.csv": "healthy", "run_3.csv": "old log-prob recomputed each minibatch",
           "run_4.csv": "wrong advantage sign"}

# For each answer, what a wrong label says the diagnosis missed: {right label: {wrong label: the likely mistake}}.
CONFUSIONS = {
    "learning rate too large": {
        "wrong advantage sign": "the return falls in both; read the first iterations' approx_kl and clip_fraction: one "
                                "update far beyond any trust region is a step that is too large",
        "healthy": "the end of a run hides its start: approx_kl at the first iteration is far above a healthy run's "
                   "0.01 to 0.02",
    },
    "healthy": {
        "learning rate too large": "a threshold on approx_kl set too low: a healthy run's KL stays near 0.01",
        "wrong advantage sign": "a return that dips and recovers is not falling: compare the last quarter of the run "
                                "with its start",
        "old log-prob recomputed each minibatch": "a small KL is not a zero one: the bug gives approx_kl and "
                                                  "clip_fraction of exactly 0 at every iteration",
    },
    "old log-prob recomputed each minibatch": {
        "healthy": "approx_kl and clip_fraction are exactly 0 at every iteration: the ratio is always 1, π_old is the "
                   "network itself",
        "wrong advantage sign": "the return falls, but approx_kl and clip_fraction are exactly 0 throughout: the ratio "
                                "never left 1, so π_old was the network itself",
    },
    "wrong advantage sign": {
        "healthy": "compare the last returns with the first: this run ends below the untrained policy",
        "learning rate too large": "the first update's KL is moderate here; the return falls steadily instead, as it "
                                   "does when the policy climbs the wrong way",
    },
}


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_diagnose_names_the_bug(exercise, name):
    label = exercise.diagnose(str(FILES / name))
    assert label in LABELS, f"{label!r} is not one of {LABELS}"
    check_equal(label, ANSWERS[name], f"diagnose({name})",
                {mistake: wrong for wrong, mistake in CONFUSIONS[ANSWERS[name]].items()})
