"""Diagnose three broken runs from their metrics. Check: pytest lectures/exercises/test_mystery_runs.py

mystery_metrics/run_1.csv … run_4.csv are the metrics.csv files of four CartPole runs of
the library's PPO (the CartPole preset of lecture 6, 65,536 steps, one seed): one healthy,
and three each broken in one way. One row per iteration (2,048 environment steps), with
the columns

    global_step            environment steps so far
    episode_return_recent  mean return of the last 20 finished episodes (an untrained policy: ~20)
    approx_kl              k3 estimate of KL(π_old ‖ π_θ) over the update's minibatches
    clip_fraction          share of samples with |r_t(θ) − 1| > ε (ε = 0.2)
    entropy                mean entropy of π_θ (log 2 ≈ 0.69 for a uniform policy over 2 actions)
    value_loss, explained_variance, grad_norm   the critic's loss and fit, the gradient's norm

Lecture 7 reads these diagnostics; lecture 5 explains the ratio and the clip; lecture 14
names planted bugs from the same columns.
"""

# What diagnose may answer.
LABELS = ("healthy", "wrong advantage sign", "old log-prob recomputed each minibatch", "learning rate too large")


def diagnose(path: str) -> str:
    """Exercise M.1. Read the metrics file at `path` and name what is wrong with its run:
    one of LABELS. Decide from the numbers, not from the file's name.

    Before you write code, predict what each bug does:
    * the advantage's sign flipped: which way does the return go? what do the clip
      fraction and KL look like, since the ratio still starts at 1 in every update?
    * log π_old recomputed from the current network instead of taken from the rollout:
      what is the ratio r_t(θ) at every minibatch then, and so the clip fraction and KL?
    * a learning rate far too large: how big is the very first update's KL? What happens
      to the entropy?
    Then open the files (any CSV reader will do) and check your predictions.
    """
    raise NotImplementedError("exercise M.1")
