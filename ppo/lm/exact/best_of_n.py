"""Best-of-n sampling, computed exactly: its distribution, its KL to the reference, its scores.

Best-of-n draws n completions y_1 … y_n ~ π_ref independently and returns the one the
proxy reward r scores highest (a tie broken uniformly at random). Over a finite set of
outcomes y with probabilities p(y) = π_ref(y), write, for a score level s,

    F(s)  = P_ref(r(y) ≤ s),      F⁻(s) = P_ref(r(y) < s),      q(s) = F(s) − F⁻(s)

The best of n scores s exactly when all n draws score ≤ s but not all < s, with
probability F(s)ⁿ − F⁻(s)ⁿ; the draw returned is then one of those at level s, and by
symmetry each outcome y of that level is it in proportion to p(y):

    π_bon(y) = p(y) / q(r(y)) · ( F(r(y))ⁿ − F⁻(r(y))ⁿ )

Without ties this is F(r(y))ⁿ − F⁻(r(y))ⁿ. Everything else follows by summing over the
outcomes: KL(π_bon ‖ π_ref) = Σ_y π_bon(y) log(π_bon(y) / p(y)), E_bon[r], and the
expected score under any other function (the gold score). The often quoted

    KL_bon = log n − (n − 1) / n

is the KL when no two draws can tie (a continuous distribution of scores); with
discrete outcomes it is only an upper bound (Beirami et al., 2024), and far from tight
once the best outcome is likely to be among the n draws.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


def best_of_n_probabilities(reference_probabilities: torch.Tensor, proxy_scores: torch.Tensor, n: int) -> torch.Tensor:
    """π_bon(y) for every outcome (the module docstring), shape (K,) like the inputs, in float64.

    `reference_probabilities` (K,) must be ≥ 0 and sum to 1; outcomes with equal
    `proxy_scores` (K,) are ties.
    """
    if n < 1:
        raise ValueError(f"n = {n} must be a positive integer")
    p = reference_probabilities.to(torch.float64)
    scores = proxy_scores.to(torch.float64)
    if p.shape != scores.shape or p.dim() != 1:
        raise ValueError(f"probabilities {tuple(p.shape)} and scores {tuple(scores.shape)} must be the same 1-D shape")
    if bool((p < 0).any()) or abs(float(p.sum()) - 1.0) > 1e-6:
        raise ValueError(f"reference probabilities must be ≥ 0 and sum to 1 (sum {float(p.sum()):.6g})")
    levels, level_of = torch.unique(scores, sorted=True, return_inverse=True)  # (S,), (K,)
    q = torch.zeros(len(levels), dtype=torch.float64).index_add_(0, level_of, p)  # (S,) q(s)
    at_most = q.cumsum(0).clamp(max=1.0)  # (S,) F(s)
    below = (at_most - q).clamp(min=0.0)  # (S,) F⁻(s)
    # F(s)ⁿ − F⁻(s)ⁿ = Fⁿ · (1 − exp(n·log(F⁻/F))): no overflow, and its digits kept when F⁻ ≈ F
    positive = at_most > 0
    log_at_most = torch.where(positive, at_most, torch.ones_like(at_most)).log()
    level_mass = torch.where(positive, (n * log_at_most).exp() * -torch.expm1(n * (below.log() - log_at_most)),
                             torch.zeros_like(at_most))  # (S,) P(the best of n scores s)
    share = torch.where(q[level_of] > 0, p / q[level_of], torch.zeros_like(p))  # (K,) p(y) / q(r(y))
    return share * level_mass[level_of]


def kl_divergence(probabilities: torch.Tensor, reference_probabilities: torch.Tensor) -> float:
    """KL(π ‖ π_ref) = Σ π log(π / π_ref) in nats, over outcomes with π > 0."""
    pi = probabilities.to(torch.float64)
    ref = reference_probabilities.to(torch.float64)
    support = pi > 0
    if bool((ref[support] <= 0).any()):
        return math.inf
    return float((pi[support] * (pi[support].log() - ref[support].log())).sum())


def best_of_n_kl_bound(n: int) -> float:
    """log n − (n − 1)/n: the KL of best-of-n when scores never tie; an upper bound otherwise."""
    return math.log(n) - (n - 1) / n


@dataclass
class BestOfNPoint:
    n: int
    kl: float  # exact KL(π_bon ‖ π_ref), nats
    kl_bound: float  # log n − (n − 1)/n
    proxy: float  # E_bon[r]
    gold: float  # E_bon[gold score]


def best_of_n_curve(reference_probabilities: torch.Tensor, proxy_scores: torch.Tensor, gold_scores: torch.Tensor,
                    ns: list[int]) -> list[BestOfNPoint]:
    """Exact KL, E[proxy] and E[gold] of best-of-n for every n in `ns` (all tensors (K,))."""
    points = []
    for n in ns:
        pi = best_of_n_probabilities(reference_probabilities, proxy_scores, n)
        points.append(BestOfNPoint(n, kl_divergence(pi, reference_probabilities), best_of_n_kl_bound(n),
                                   float((pi * proxy_scores.double()).sum()), float((pi * gold_scores.double()).sum())))
    return points


def log_spaced_counts(largest: int, num: int = 40) -> list[int]:
    """About `num` distinct integers from 1 to `largest`, evenly spaced in log n."""
    if largest < 1:
        raise ValueError(f"largest = {largest} must be a positive integer")
    steps = torch.logspace(0, math.log10(largest), num, dtype=torch.float64).round().long().tolist()
    return sorted(set(steps) | {1, largest})
