"""Checks for the exercises of lecture 14."""

import math

import pytest
import torch

from feedback import check_close, check_equal

# A correct run of the CartPole preset (numbers of the kind lecture 14 prints), and one
# run per bug: what each bug left in the same numbers on lecture 14's seeds.
CORRECT = {"final return": 496.0, "first KL": 0.0074, "largest KL": 0.022, "largest clip fraction": 0.35,
           "final clip fraction": 0.008, "final entropy": 0.17, "final explained variance": 0.4,
           "final value loss": 0.01, "largest gradient norm": 20.0, "largest ratio error": 0.0,
           "untrained return": 20.5}
BUGGY = {
    "ratio against the reference": dict(final_return=40.0, largest_clip_fraction=0.55, final_clip_fraction=0.45,
                                        final_entropy=0.675, final_value_loss=30.0, largest_ratio_error=0.3),
    "log π_old recomputed each minibatch": dict(final_return=300.0, first_KL=0.0, largest_KL=0.0,
                                                largest_clip_fraction=0.0, final_clip_fraction=0.0, final_entropy=0.05,
                                                largest_gradient_norm=370.0),
    "too-large step": dict(final_return=9.4, first_KL=15.0, largest_KL=15.0, largest_clip_fraction=0.95,
                           final_clip_fraction=0.0, final_entropy=1e-34, final_value_loss=0.007),
    "wrong sign": dict(final_return=8.7, largest_KL=0.18, largest_clip_fraction=0.5, final_clip_fraction=0.003,
                       final_entropy=0.01, final_explained_variance=0.99, final_value_loss=0.03),
    "shared trunk, raw returns": dict(final_return=340.0, first_KL=0.0085, largest_KL=0.3, final_clip_fraction=0.01,
                                      final_entropy=0.56, final_value_loss=27.0, largest_gradient_norm=126.0),
}


def run_with(**changes) -> dict[str, float]:
    run = {key: value for key, value in CORRECT.items() if key != "untrained return"}
    run.update({key.replace("_", " "): value for key, value in changes.items()})
    return run


def test_first_minibatch_ratio_error_by_hand(exercise):
    old = torch.log(torch.tensor([0.5, 0.2, 0.9]))
    check_equal(exercise.first_minibatch_ratio_error(old.clone(), old), 0.0,
                "first_minibatch_ratio_error with π_θ = π_old", {"the ratio itself, not |r − 1| (the ratio is 1 there)": 1.0})
    new = torch.log(torch.tensor([0.5, 0.3, 0.63]))  # ratios 1, 1.5, 0.7
    check_close(exercise.first_minibatch_ratio_error(new, old), 0.5, "first_minibatch_ratio_error, ratios 1, 1.5, 0.7", {
        "the mean of |r − 1| in place of the largest": 0.8 / 3,
        "the largest ratio, not the largest |r − 1|": 1.5,
        "|log r| in place of |r − 1|": math.log(1.5)}, atol=0.0, rtol=1e-5)
    new = torch.log(torch.tensor([0.5, 0.2, 0.18]))  # ratio 0.2 on the last sample: |0.2 − 1| = 0.8
    check_close(exercise.first_minibatch_ratio_error(new, old), 0.8, "first_minibatch_ratio_error, ratios 1, 1, 0.2", {
        "the largest r − 1 without the absolute value (a ratio below 1 counts too)": 0.0,
        "the largest ratio, not the largest |r − 1|": 1.0}, atol=0.0, rtol=1e-5)


def test_a_correct_run_shows_no_bug(exercise):
    check_equal(exercise.diagnose(run_with(), CORRECT), "no bug visible", "diagnose(the correct run itself)")
    check_equal(exercise.diagnose(run_with(final_return=470.0, largest_gradient_norm=30.0), CORRECT), "no bug visible",
                "diagnose(a correct run, return 470, gradient norm 30: within a seed's spread)")


@pytest.mark.parametrize("bug", list(BUGGY))
def test_each_signature_names_its_bug(exercise, bug):
    check_equal(exercise.diagnose(run_with(**BUGGY[bug]), CORRECT), bug, f"diagnose(a run with {BUGGY[bug]})")


def test_a_collapsed_policy_reads_zero_kl_but_is_not_a_recomputed_log_prob(exercise):
    # After a too-large first step the policy is deterministic: KL and clip fraction 0 from then on.
    collapsed = run_with(final_return=9.4, first_KL=15.0, largest_KL=15.0, largest_clip_fraction=0.95,
                         final_clip_fraction=0.0, final_entropy=0.0)
    check_equal(exercise.diagnose(collapsed, CORRECT), "too-large step", "diagnose(a policy collapsed by a huge first step)",
                {"the zero KL read before the first KL (a collapsed policy reads 0 after its huge first step)":
                 "log π_old recomputed each minibatch"})
    # A return below the untrained policy's is the wrong sign only when the steps were of ordinary size.
    check_equal(exercise.diagnose(run_with(final_return=9.0), CORRECT), "wrong sign",
                "diagnose(a return of 9 with ordinary steps)")
