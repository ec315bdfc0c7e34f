"""Solutions to lectures/exercises/mystery_runs.py."""

import csv


def diagnose(path):
    with open(path, newline="") as file:
        rows = list(csv.DictReader(file))
    column = lambda name: [float(row[name]) for row in rows if row[name] not in ("", "nan")]  # noqa: E731
    kl, clip, returns = column("approx_kl"), column("clip_fraction"), column("episode_return_recent")
    if max(kl) == 0 and max(clip) == 0:
        return "old log-prob recomputed each minibatch"  # r_t(θ) = 1 at every minibatch: π_old is the network itself
    if kl[0] > 0.5:
        return "learning rate too large"  # one update moved π far beyond any trust region
    last_quarter = returns[-max(1, len(returns) // 4):]
    if sum(last_quarter) / len(last_quarter) < returns[0]:
        return "wrong advantage sign"  # below the untrained policy: it learns to fail
    return "healthy"
