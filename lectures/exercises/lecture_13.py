"""Exercises for lecture 13 — the RLHF pipeline. Check: pytest lectures/exercises/test_lecture_13.py"""

import torch


def bradley_terry_loss(chosen_scores: torch.Tensor, rejected_scores: torch.Tensor) -> torch.Tensor:
    """Exercise 13.1. The reward model's loss on B comparisons. chosen_scores r(y_w),
    rejected_scores r(y_l): (B,) → a scalar. Under the Bradley–Terry model the labeller
    prefers y_w with probability σ(r(y_w) − r(y_l)); the loss is the mean negative
    log-likelihood of the observed preferences.

    Keep it finite when the score gap is large in either direction: a plain log of a
    sigmoid is not (what does float32's sigmoid return for a gap of −200?). Which torch
    function computes log σ(x), or −log σ(x), without forming σ(x)? (Lecture 13, "2. Stage
    2: a reward model from comparisons".)
    """
    raise NotImplementedError("exercise 13.1")


def group_normalised_advantages(rewards: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """Exercise 13.2. GRPO's critic-free advantage. rewards: (G, K), the rewards of K
    completions of each of G prompts (one row per prompt) → (G, K).

    No value network: a completion is judged against the other completions of its own
    prompt. Standardise each reward within its row: centre it on what its group got, and
    measure it in units of the group's spread. Use the unbiased standard deviation (as
    torch.std) and add eps to it before you divide. No Python loop over the groups.
    (Lecture 13, "5. Without a critic", shows one group by hand; lecture 12, "GRPO's
    division by the group's std, exactly", what the division does.)
    """
    raise NotImplementedError("exercise 13.2")


def leave_one_out_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """Exercise 13.3. RLOO's advantage (REINFORCE leave-one-out). rewards: (G, K) as in
    exercise 13.2 → (G, K). Each completion's baseline is built from the other K − 1
    completions of its own prompt only, never from its own reward; the advantage is the
    reward minus that baseline.

    Questions: why must a completion's own reward stay out of its baseline for the
    gradient estimate to stay unbiased? Compute every baseline at once, without a loop,
    from each row's sum. (Lecture 13, "5. Without a critic".)
    """
    raise NotImplementedError("exercise 13.3")


def predict_best_of_n_kl(n: int) -> float:
    """Exercise 13.4, predict before you run the lecture. Best-of-n draws n completions from
    π_ref and keeps the one the reward model scores highest. Lecture 13 computes
    KL(π_bon ‖ π_ref) exactly for every n. What is it, in nats, when no two completions
    can tie (every completion its own score)? Think of the quantile u = F(r(y)) of the kept
    completion: its density under π_bon is n·u^(n−1), under π_ref 1. Return the value for
    this n (a formula in n is fine); the check compares with the exact KL for n = 2, 16, 256.
    """
    raise NotImplementedError("exercise 13.4")
