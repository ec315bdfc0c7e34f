"""The functional forms of reward over-optimisation (Gao, Schulman & Hilton, 2022), fitted by least squares.

Measured against the distance d = √KL(π ‖ π_ref) from the initial policy, the gold score
R gained over the initial policy's follows, for best-of-n sampling and for RL,

    R_bon(d) = d · (α_bon − β_bon · d)
    R_RL(d)  = d · (α_RL  − β_RL · log d)

(α, β here are the paper's fit coefficients, not the KL coefficient of the penalty).
Both are linear in (α, β): R = α·x₁ + β·x₂ with x₁ = d and x₂ = −d² (best-of-n) or
x₂ = −d·log d (RL, with 0·log 0 = 0), so the least-squares fit is the closed form

    (α, β) = argmin Σ_i (R_i − α·x₁ᵢ − β·x₂ᵢ)²      (the 2×2 normal equations).

Where β > 0 the gold score peaks, at dR/dd = 0:

    best-of-n:  d* = α / (2β),          R(d*) = α² / (4β)
    RL:         d* = exp(α/β − 1),      R(d*) = β · d*

and KL* = d*² is the KL at which more optimisation starts to lower the gold score.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

FORMS = ("best_of_n", "rl")


def _features(form: str, d: torch.Tensor) -> torch.Tensor:
    """(N, 2) columns x₁ = d and x₂ = −d² (best_of_n) or −d·log d (rl)."""
    if form == "best_of_n":
        second = -d * d
    elif form == "rl":
        second = -torch.where(d > 0, d * d.clamp(min=1e-300).log(), torch.zeros_like(d))
    else:
        raise ValueError(f"form = {form!r} is not one of {', '.join(FORMS)}")
    return torch.stack([d, second], dim=1)


@dataclass
class OveroptimizationFit:
    form: str  # "best_of_n" or "rl"
    alpha: float
    beta: float
    num_points: int
    rms_error: float  # √(mean squared residual), in gold-score units

    def predict(self, d: torch.Tensor | float) -> torch.Tensor:
        """R(d), the gold score gained over the initial policy at distance d = √KL."""
        d = torch.as_tensor(d, dtype=torch.float64)
        return _features(self.form, d.reshape(-1)) @ torch.tensor([self.alpha, self.beta], dtype=torch.float64)

    @property
    def peak_distance(self) -> float:
        """d* where the fitted gold score is highest; inf when the fit never turns down (β ≤ 0)."""
        if self.beta <= 0:
            return math.inf
        if self.form == "best_of_n":
            return self.alpha / (2 * self.beta)
        exponent = self.alpha / self.beta - 1
        return math.exp(exponent) if exponent < 700 else math.inf

    @property
    def peak_kl(self) -> float:
        """KL* = d*², in nats."""
        return self.peak_distance**2

    @property
    def peak_gain(self) -> float:
        """R(d*): the most gold score the fitted curve gains over the initial policy."""
        if not math.isfinite(self.peak_distance):
            return math.inf
        return float(self.predict(self.peak_distance)[0])

    def to_dict(self) -> dict:
        return {**asdict(self), "peak_distance": self.peak_distance, "peak_kl": self.peak_kl,
                "peak_gain": self.peak_gain}


def fit_overoptimization(form: str, distances, gold_gains) -> OveroptimizationFit:
    """Least-squares (α, β) of R = d(α − β·d) (form "best_of_n") or R = d(α − β·log d) ("rl").

    `distances` are d = √KL ≥ 0 and `gold_gains` the gold score minus the initial policy's,
    one per measured point; at least two points with d > 0 are needed.
    """
    d = torch.as_tensor(distances, dtype=torch.float64).reshape(-1)
    gains = torch.as_tensor(gold_gains, dtype=torch.float64).reshape(-1)
    if d.shape != gains.shape:
        raise ValueError(f"{len(d)} distances but {len(gains)} gold gains")
    if bool((d < 0).any()) or not bool(torch.isfinite(d).all() and torch.isfinite(gains).all()):
        raise ValueError("distances must be finite and ≥ 0, gold gains finite")
    x = _features(form, d)  # (N, 2)
    gram = x.T @ x  # (2, 2)
    if int((d > 0).sum()) < 2 or abs(float(torch.linalg.det(gram))) < 1e-12 * float(gram.diagonal().prod()):
        raise ValueError("the fit needs at least two points at different distances d > 0")
    alpha, beta = torch.linalg.solve(gram, x.T @ gains).tolist()
    residual = gains - x @ torch.tensor([alpha, beta], dtype=torch.float64)
    return OveroptimizationFit(form, alpha, beta, len(d), float(residual.pow(2).mean().sqrt()))
