"""Exercises for lecture 14 — debugging a PPO run. Check: pytest lectures/exercises/test_lecture_14.py"""

import torch

# The names `diagnose` may return (lecture 14's five planted bugs, and none).
BUG_NAMES = ("ratio against the reference", "log π_old recomputed each minibatch", "too-large step",
             "wrong sign", "shared trunk, raw returns", "no bug visible")


def first_minibatch_ratio_error(new_log_probs: torch.Tensor, old_log_probs: torch.Tensor) -> float:
    """Exercise 14.1. The trainer's first_minibatch_ratio_error: the largest |r_t(θ) − 1| over
    the samples of an update's first minibatch, before any gradient step, from log π_θ(a_t|s_t)
    (`new_log_probs`) and the log π_old(a_t|s_t) stored with the rollout (`old_log_probs`), both (b,).
    """
    raise NotImplementedError("exercise 14.1")


def diagnose(run: dict[str, float], correct: dict[str, float]) -> str:
    """Exercise 14.2. Name the bug of a CartPole run from its diagnostics, as lecture 14's
    signature table does: one of BUG_NAMES.

    `run` and `correct` (a correct run of the same configuration) hold the numbers of the
    lecture's table: "final return", "final clip fraction", "final entropy", "final
    explained variance", "final value loss" (means over the last quarter of the run),
    "first KL" (the approx KL of the first update), "largest KL", "largest clip fraction",
    "largest gradient norm", "largest ratio error" (the largest first-minibatch ratio
    error); `correct` also holds "untrained return", the return of the policy before any
    update. Predict first what each bug does to these numbers, then check with the lecture.
    """
    raise NotImplementedError("exercise 14.2")
