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

A fit describes the measured points, not beyond them: it records the largest measured
distance d_max, `peak_in_range` says whether d* ≤ d_max (a peak further out is an
extrapolation), and `best_in_range` is the fitted curve's highest point on [0, d_max].
The gold score of a rule lies in a known range [g_min, g_max], so the gain does too:
with `gain_bounds = (g_min − g_0, g_max − g_0)` the coefficients minimise the same squared
error subject to

    g_min − g_0 ≤ R(d) ≤ g_max − g_0    at GRID_POINTS distances evenly spread over [0, d_max]

(a convex quadratic in two unknowns under linear constraints: the minimum is the
unconstrained one, or lies on one constraint or at the crossing of two, and every such
candidate is tried), so the fitted curve never leaves the rule's range where it was measured.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

FORMS = ("best_of_n", "rl")
GRID_POINTS = 129  # distances of [0, d_max] where a bounded fit must stay inside the bounds


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
    largest_distance: float  # d_max, the largest measured d: the fit describes [0, d_max]
    gain_bounds: tuple[float, float] | None = None  # the (low, high) the fit was held inside, if any

    def predict(self, d: torch.Tensor | float) -> torch.Tensor:
        """R(d), the gold score gained over the initial policy at distance d = √KL."""
        d = torch.as_tensor(d, dtype=torch.float64)
        return _features(self.form, d.reshape(-1)) @ torch.tensor([self.alpha, self.beta], dtype=torch.float64)

    @property
    def peak_distance(self) -> float:
        """d* where the fitted form is highest; inf when it never turns down (β ≤ 0). May lie beyond d_max."""
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
    def peak_in_range(self) -> bool:
        """Whether the form's peak lies among the measured distances, d* ≤ d_max (else it is an extrapolation)."""
        return self.peak_distance <= self.largest_distance

    @property
    def best_in_range(self) -> tuple[float, float]:
        """(d, R(d)) of the fitted curve's highest point on [0, d_max]: the peak when it is in range, else an end."""
        if self.peak_in_range:
            candidates = [self.peak_distance]
        else:
            candidates = [0.0, self.largest_distance]
        gains = self.predict(torch.tensor(candidates, dtype=torch.float64)).tolist()
        best = max(range(len(candidates)), key=lambda i: gains[i])
        return candidates[best], gains[best]

    def to_dict(self) -> dict:
        best_distance, best_gain = self.best_in_range
        return {**asdict(self), "peak_distance": self.peak_distance, "peak_kl": self.peak_kl,
                "peak_in_range": self.peak_in_range, "best_in_range_distance": best_distance,
                "best_in_range_gain": best_gain}


def fit_overoptimization(form: str, distances, gold_gains,
                         gain_bounds: tuple[float, float] | None = None) -> OveroptimizationFit:
    """Least-squares (α, β) of R = d(α − β·d) (form "best_of_n") or R = d(α − β·log d) ("rl").

    `distances` are d = √KL ≥ 0 and `gold_gains` the gold score minus the initial policy's,
    one per measured point; at least two points with d > 0 are needed. With
    `gain_bounds = (low, high)` (low ≤ 0 ≤ high, as R(0) = 0) the fitted curve is held inside
    [low, high] over the measured range [0, d_max] (the module docstring says how).
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
    largest = float(d.max())
    coefficients = torch.linalg.solve(gram, x.T @ gains)  # (2,)
    if gain_bounds is not None:
        low, high = gain_bounds
        if not (math.isfinite(low) and math.isfinite(high) and low <= 0 <= high):
            raise ValueError(f"gain_bounds = {gain_bounds} must be finite with low ≤ 0 ≤ high (R(0) = 0)")
        coefficients = _bounded_least_squares(gram, x.T @ gains, form, largest, low, high)
    alpha, beta = coefficients.tolist()
    residual = gains - x @ coefficients
    return OveroptimizationFit(form, alpha, beta, len(d), float(residual.pow(2).mean().sqrt()), largest,
                               None if gain_bounds is None else (float(gain_bounds[0]), float(gain_bounds[1])))


def _bounded_least_squares(gram: torch.Tensor, moment: torch.Tensor, form: str, largest: float,
                           low: float, high: float) -> torch.Tensor:
    """argmin θᵀGθ − 2θᵀm (the squared error up to a constant) subject to low ≤ x(d)ᵀθ ≤ high on the grid.

    The constraints are rows aᵢᵀθ ≤ bᵢ. The objective is strictly convex, so its constrained
    minimum is unique and is one of: the unconstrained minimum G⁻¹m; the minimum on one line
    aᵢᵀθ = bᵢ, θ = G⁻¹(m − λaᵢ) with λ = (aᵢᵀG⁻¹m − bᵢ) / (aᵢᵀG⁻¹aᵢ); or the crossing of two
    lines. The feasible candidate with the least objective is it.
    """
    grid = torch.linspace(0, largest, GRID_POINTS, dtype=torch.float64)[1:]  # R(0) = 0 is always inside
    rows = _features(form, grid)  # (K, 2)
    a = torch.cat([rows, -rows])  # (2K, 2): R ≤ high and −R ≤ −low
    b = torch.cat([torch.full((len(grid),), high, dtype=torch.float64),
                   torch.full((len(grid),), -low, dtype=torch.float64)])
    inverse = torch.linalg.inv(gram)
    free = inverse @ moment  # (2,)
    on_lines = free - ((a @ free - b) / ((a @ inverse) * a).sum(1)).unsqueeze(1) * (a @ inverse)  # (2K, 2)
    i, j = torch.triu_indices(len(a), len(a), offset=1)
    pairs = torch.stack([a[i], a[j]], dim=1)  # (P, 2, 2)
    determinants = torch.linalg.det(pairs)
    regular = determinants.abs() > 1e-12 * (pairs.abs().amax(dim=(1, 2)) ** 2)
    crossings = torch.linalg.solve(pairs[regular], torch.stack([b[i], b[j]], dim=1)[regular])  # (P', 2)
    candidates = torch.cat([free.unsqueeze(0), on_lines, crossings])  # (C, 2)
    slack = 1e-9 * max(1.0, abs(low), abs(high))
    feasible = ((candidates @ a.T) <= b + slack).all(dim=1)
    objective = ((candidates @ gram) * candidates).sum(1) - 2 * candidates @ moment
    objective[~feasible] = math.inf
    return candidates[int(objective.argmin())]
