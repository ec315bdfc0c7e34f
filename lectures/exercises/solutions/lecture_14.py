"""Solutions to lectures/exercises/lecture_14.py."""

import torch


def first_minibatch_ratio_error(new_log_probs, old_log_probs):
    return float(torch.expm1(new_log_probs - old_log_probs).abs().max())


def diagnose(run, correct):
    # Exact evidence first (a ratio error, exact zeros), then comparisons with the correct run.
    if run["largest ratio error"] > 1e-3:
        return "ratio against the reference"
    if run["largest KL"] == 0 and run["largest clip fraction"] == 0:
        return "log π_old recomputed each minibatch"
    if run["first KL"] > 10 * correct["first KL"]:
        return "too-large step"
    if run["final return"] < correct["untrained return"]:
        return "wrong sign"
    if run["final value loss"] > 10 * correct["final value loss"] and run["final entropy"] > correct["final entropy"]:
        return "shared trunk, raw returns"
    return "no bug visible"
