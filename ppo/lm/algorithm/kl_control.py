"""The coefficient β of the KL penalty to the reference policy, fixed or adapted.

PPO for a language model maximises the reward minus a penalty for drifting from the
reference (the SFT model):

    max_π  E_y~π [ r(y) ] − β · KL(π ‖ π_ref)

A large β keeps the text sane but learns slowly; a small β lets the policy hack the
reward. Three ways to choose β, each a controller with `beta` and `update(feedback)`
called once per iteration with that iteration's batch (`KLFeedback`):

* `FixedKLController`: β stays where it was set.
* `ProportionalKLController` (Ziegler et al. 2019, `lm-human-preferences`): after each
  batch of n completions whose mean sequence KL was KL, with proportional error

      e = clip(KL / KL_target − 1, −0.2, 0.2)
      β ← β · (1 + e · n / horizon)

  β grows while the policy is further from the reference than the target and shrinks
  while it is closer; `horizon` (in completions) sets how fast. Made for long runs: the
  KL answers a change of β only after the policy has moved, so in a run as short as the
  policy's own convergence the rule first lowers β (the KL starts at 0), the policy
  overshoots, and a policy that has collapsed onto one answer barely moves back, as
  every completion of the batch earns the same reward and the advantages vanish.
* `OptimumKLController` (the default for a KL target): β solved from the batch. The
  maximiser of the objective above is known, π*_β(y) ∝ π_ref(y)·exp(r(y)/β), and the
  batch estimates its KL for every β at once. With scores r_i and sequence log-ratios
  ℓ_i = log π(y_i) − log π_ref(y_i) of the n completions y_i ~ π,

      q_i = exp(−ℓ_i) / Σ_j exp(−ℓ_j)                  the batch re-weighted to π_ref
      p_i(β) = q_i · exp(r_i/β) / Σ_j q_j · exp(r_j/β)  re-weighted to π*_β
      K(β) = Σ_i p_i · log(p_i / q_i)                    ≈ KL(π*_β ‖ π_ref)

  K falls as β grows (dK/dθ = θ·Var_p(r) with θ = 1/β: an exponential tilt) from
  K_max = −log Σ_{i: r_i = max r} q_i as β → 0 to 0 as β → ∞, so K(β̂) = KL_target has one
  root, found by bisection in log β, and

      β ← β · clip(β̂ / β, 1/m, m)          (m = max_factor, 2 by default)

  β̂ depends on π_ref, r and the target only, not on the policy that drew the batch, so
  every batch estimates the same number; the controller pools them, weighting each by
  its effective sample size ESS_t = (Σ_i e^{−ℓ_i})² / Σ_i e^{−2ℓ_i} (n for a batch of the
  SFT model, few once the policy has moved far and the re-weighting rests on a handful
  of completions). One batch's influence is bounded: its solution enters clipped to
  within a factor m of the pooled value β̄_{t−1} before it,

      log β̃_t = clip(log β̂_t, log β̄_{t−1} − log m, log β̄_{t−1} + log m)
      β̄_t = exp(Σ_{s≤t} ESS_s · log β̃_s / Σ_{s≤t} ESS_s),      β ← β · clip(β̄_t / β, 1/m, m)

  so no single batch moves β̄ by more than a factor m^{ESS_t / Σ_{s≤t} ESS_s} ≤ m (the
  first batch that identifies β̂ sets β̄ on its own), with m = max_factor (2 by default).
  β goes where the optimum has the target KL before the policy gets there, and PPO then
  converges to that optimum. A batch that cannot tell adds nothing: K_max ≤ KL_target
  (every completion scored alike, or the target above what the batch can show), where
  scores within SCORE_TIE_TOLERANCE · max(1, |max r|) of the best count as the best (a
  gap of float rounding, 1e-6 between two scorings of one string, would otherwise claim
  an optimum that separates them, solved by β at the bracket's floor). Until some batch
  has told, the proportional rule takes the step.

  This rule is the library's own, not a published one. Its finite-sample bias: K(β) is
  a self-normalised importance-sampling estimate, and it reads low once the policy is
  far from π_ref: the batch then holds few of the completions π_ref puts its mass on
  and the policy avoids, so the re-weighted sample over-represents those the policy
  favours (Σ_{best} q_i reads high, K_max low, and K(β) with it; the typical batch of
  such a policy misses the rest altogether). A low K puts the root β̂_t low, so β̄ — and
  with it β — errs small and the policy settles above the target KL. The ESS weights let the early, near-π_ref
  batches dominate the pool, which shrinks the bias but does not remove it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch


@dataclass
class KLFeedback:
    """One iteration's batch, as a controller sees it."""

    mean_sequence_kl: float  # the mean over the batch of the sequence KL in the reward
    num_completions: int  # n
    scores: torch.Tensor | None = None  # (n,) r_i, the score each completion received
    log_ratios: torch.Tensor | None = None  # (n,) ℓ_i = Σ_t log π(y_t | s_t) − log π_ref(y_t | s_t)


class KLController:
    """β and what a checkpoint keeps of a controller; `update` returns the β of the next batch."""

    def __init__(self, beta: float):
        self.beta = float(beta)

    def update(self, feedback: KLFeedback) -> float:
        raise NotImplementedError

    def state_dict(self) -> dict:
        return {"beta": self.beta}

    def load_state_dict(self, state: dict) -> None:
        self.beta = float(state["beta"])


class FixedKLController(KLController):
    """β = const."""

    def __init__(self, beta: float):
        if beta < 0:
            raise ValueError(f"beta = {beta} must be ≥ 0")
        super().__init__(beta)

    def update(self, feedback: KLFeedback) -> float:
        return self.beta


class ProportionalKLController(KLController):
    """β ← β · (1 + clip(KL / KL_target − 1, −0.2, 0.2) · n / horizon)."""

    ERROR_CLIP = 0.2

    def __init__(self, beta: float, target: float, horizon: int = 10_000):
        if beta <= 0:
            raise ValueError(f"beta = {beta} must be > 0 for the adaptive controller (β = 0 never moves)")
        if target <= 0:
            raise ValueError(f"KL target = {target} must be > 0")
        if horizon <= 0:
            raise ValueError(f"KL horizon = {horizon} must be > 0")
        super().__init__(beta)
        self.target, self.horizon = float(target), int(horizon)

    def update(self, feedback: KLFeedback) -> float:
        error = min(max(feedback.mean_sequence_kl / self.target - 1.0, -self.ERROR_CLIP), self.ERROR_CLIP)
        factor = 1.0 + error * feedback.num_completions / self.horizon
        if factor <= 0:
            raise ValueError(f"horizon = {self.horizon} is too short for {feedback.num_completions} completions: "
                             f"the step would make β ≤ 0 (the horizon must exceed n·{self.ERROR_CLIP})")
        self.beta *= factor
        return self.beta


def tilted_kl(inverse_beta: float, scores: torch.Tensor, log_ratios: torch.Tensor) -> float:
    """K(β) = Σ_i p_i · log(p_i / q_i) with θ = 1/β (the module docstring), in float64."""
    log_q = torch.log_softmax(-log_ratios.double(), dim=0)
    log_p = torch.log_softmax(log_q + inverse_beta * scores.double(), dim=0)
    return float((log_p.exp() * (log_p - log_q)).sum())


# Scores within this much (times max(1, |max r|)) of the best count as tied with it. Two
# float32 scorings of one string differ by rounding (a few ulps, ~1e-6); inside the bracket
# of solve_beta (β ≥ 1e-4) a gap of 1e-5 tilts by at most e^0.1, so no β there separates them.
SCORE_TIE_TOLERANCE = 1e-5


def best_scored(scores: torch.Tensor) -> torch.Tensor:
    """(n,) bool: r_i ≥ max r − SCORE_TIE_TOLERANCE · max(1, |max r|), the completions tied for the best."""
    scores = scores.double()
    best = scores.max()
    return scores >= best - SCORE_TIE_TOLERANCE * max(1.0, abs(float(best)))


def largest_tilted_kl(scores: torch.Tensor, log_ratios: torch.Tensor) -> float:
    """K_max = lim_{β→0} K(β) = −log Σ_{i: r_i = max r} q_i, near-ties counted as ties (`best_scored`)."""
    log_q = torch.log_softmax(-log_ratios.double(), dim=0)
    return float(-torch.logsumexp(log_q[best_scored(scores)], dim=0))


def solve_beta(scores: torch.Tensor, log_ratios: torch.Tensor, target: float, lowest: float = 1e-4,
               highest: float = 1e4, steps: int = 60) -> float | None:
    """β̂ with K(β̂) = target, by bisection of log β on [lowest, highest]; None when K_max ≤ target.

    A root below `lowest` (or above `highest`) returns that bound.
    """
    if largest_tilted_kl(scores, log_ratios) <= target:
        return None
    low, high = math.log(lowest), math.log(highest)  # K(e^low) > target > K(e^high), K decreasing
    if tilted_kl(math.exp(-low), scores, log_ratios) <= target:
        return lowest
    if tilted_kl(math.exp(-high), scores, log_ratios) >= target:
        return highest
    for _ in range(steps):
        middle = 0.5 * (low + high)
        if tilted_kl(math.exp(-middle), scores, log_ratios) > target:
            low = middle
        else:
            high = middle
    return math.exp(0.5 * (low + high))


def effective_sample_size(log_ratios: torch.Tensor) -> float:
    """(Σ w)² / Σ w² of the weights w_i = exp(−ℓ_i) that make the batch a sample of π_ref."""
    log_w = -log_ratios.double()
    return float((2 * torch.logsumexp(log_w, dim=0) - torch.logsumexp(2 * log_w, dim=0)).exp())


class OptimumKLController(ProportionalKLController):
    """β ← β · clip(β̄ / β, 1/m, m), β̄ the ESS-weighted geometric mean of the batches' β̂ (K(β̂) = KL_target),
    each clipped to within a factor m of the β̄ before it (the module docstring)."""

    def __init__(self, beta: float, target: float, horizon: int = 10_000, max_factor: float = 2.0):
        super().__init__(beta, target, horizon)
        if not max_factor > 1:
            raise ValueError(f"max_factor = {max_factor} must be > 1")
        self.max_factor = float(max_factor)
        self.weighted_log_solutions = 0.0  # Σ_t ESS_t · log β̂_t over the batches that identified β̂
        self.total_weight = 0.0  # Σ_t ESS_t
        self.last_solution: float | None = None  # β̂ of the last batch (None: not identified)

    def update(self, feedback: KLFeedback) -> float:
        if feedback.scores is None or feedback.log_ratios is None:
            raise ValueError("OptimumKLController needs the batch's scores and log-ratios")
        self.last_solution = solve_beta(feedback.scores, feedback.log_ratios, self.target)
        if self.last_solution is not None:
            log_solution = math.log(self.last_solution)
            pooled = self.pooled_solution
            if pooled is not None:  # one batch moves β̄ by a factor m^(ESS_t / Σ ESS) at most
                bound = math.log(self.max_factor)
                log_solution = min(max(log_solution, math.log(pooled) - bound), math.log(pooled) + bound)
            weight = effective_sample_size(feedback.log_ratios)
            self.weighted_log_solutions += weight * log_solution
            self.total_weight += weight
        solution = self.pooled_solution
        if solution is None:  # no batch has identified β̂ yet
            return super().update(feedback)
        self.beta *= min(max(solution / self.beta, 1.0 / self.max_factor), self.max_factor)
        return self.beta

    @property
    def pooled_solution(self) -> float | None:
        """β̄ = exp(Σ_t ESS_t · log β̃_t / Σ_t ESS_t); None until a batch has identified β̂."""
        if self.total_weight == 0.0:
            return None
        return math.exp(self.weighted_log_solutions / self.total_weight)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "weighted_log_solutions": self.weighted_log_solutions,
                "total_weight": self.total_weight}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.weighted_log_solutions = float(state.get("weighted_log_solutions", 0.0))
        self.total_weight = float(state.get("total_weight", 0.0))


def kl_controller(beta: float, target: float | None, rule: str = "optimum", horizon: int = 10_000) -> KLController:
    """The controller of a run: fixed β without a target, else the named rule ("optimum" or "proportional")."""
    if target is None:
        return FixedKLController(beta)
    if rule == "optimum":
        return OptimumKLController(beta, target, horizon)
    if rule == "proportional":
        return ProportionalKLController(beta, target, horizon)
    raise ValueError(f"KL controller {rule!r} is not one of: optimum, proportional")
