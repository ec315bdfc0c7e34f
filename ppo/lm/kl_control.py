"""The coefficient β of the KL penalty to the reference policy, fixed or adapted.

PPO for a language model maximises the reward minus a penalty for drifting from the
reference (the SFT model):

    max_π  E_y~π [ r(y) ] − β · KL(π ‖ π_ref)

A large β keeps the text sane but learns slowly; a small β lets the policy hack the
reward. Two ways to choose β:

* `FixedKLController`: β stays where it was set.
* `AdaptiveKLController` (Ziegler et al. 2019, `lm-human-preferences`): after each batch
  of n completions whose mean sequence KL was KL, with proportional error

      e = clip(KL / KL_target − 1, −0.2, 0.2)
      β ← β · (1 + e · n / horizon)

  β grows while the policy is further from the reference than the target, and shrinks
  while it is closer; `horizon` (in completions) sets how fast.
"""

from __future__ import annotations


class FixedKLController:
    """β = const."""

    def __init__(self, beta: float):
        if beta < 0:
            raise ValueError(f"beta = {beta} must be ≥ 0")
        self.beta = float(beta)

    def update(self, mean_sequence_kl: float, num_completions: int) -> float:
        return self.beta


class AdaptiveKLController:
    """β ← β · (1 + clip(KL / KL_target − 1, −0.2, 0.2) · n / horizon)."""

    ERROR_CLIP = 0.2

    def __init__(self, beta: float, target: float, horizon: int = 10_000):
        if beta <= 0:
            raise ValueError(f"beta = {beta} must be > 0 for the adaptive controller (β = 0 never moves)")
        if target <= 0:
            raise ValueError(f"KL target = {target} must be > 0")
        if horizon <= 0:
            raise ValueError(f"KL horizon = {horizon} must be > 0")
        self.beta, self.target, self.horizon = float(beta), float(target), int(horizon)

    def update(self, mean_sequence_kl: float, num_completions: int) -> float:
        error = min(max(mean_sequence_kl / self.target - 1.0, -self.ERROR_CLIP), self.ERROR_CLIP)
        self.beta *= 1.0 + error * num_completions / self.horizon
        return self.beta
