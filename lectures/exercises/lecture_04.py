"""Exercises for lecture 4 — the surrogate objective and trust regions. Check: pytest lectures/exercises/test_lecture_04.py"""

from collections.abc import Callable

import torch


def importance_sampled_mean(values: torch.Tensor, new_log_probs: torch.Tensor,
                            old_log_probs: torch.Tensor) -> torch.Tensor:
    """Exercise 4.1. An estimate of E_{a~π}[f(a)] from N actions drawn from π_old, not from π.
    values: f(a_i); new_log_probs: log π(a_i); old_log_probs: log π_old(a_i); all (N,) → a
    scalar. It must be unbiased for every π that gives no action π_old never takes, and
    differentiable in new_log_probs (the surrogate of lecture 4 is this estimate with
    f = γ^t Â_t, and its gradient is what an update follows).
    """
    raise NotImplementedError("exercise 4.1")


def conjugate_gradient(matrix_vector_product: Callable[[torch.Tensor], torch.Tensor], b: torch.Tensor,
                       iterations: int) -> torch.Tensor:
    """Exercise 4.2. Solve F x = b for a symmetric positive definite F that you can only
    multiply with (matrix_vector_product(v) = F v), as TRPO does with the Fisher matrix of a
    network too large to form: the conjugate gradient method, started at x = 0, for the
    given number of iterations (stop early once the residual is 0). b: (P,) → x (P,).
    """
    raise NotImplementedError("exercise 4.2")


def natural_gradient_step(gradient: torch.Tensor, fisher: torch.Tensor, max_kl: float) -> torch.Tensor:
    """Exercise 4.3. TRPO's step in its local model: the Δθ that maximises the linear gain
    gᵀΔθ subject to the quadratic model of the KL, ½ ΔθᵀFΔθ ≤ δ. gradient: g (P,);
    fisher: F (P, P), symmetric positive definite; max_kl: δ > 0. Returns Δθ (P,).
    (Write the Lagrangian; which constraint is active at the optimum?) torch.linalg is off
    limits in this module: apply F⁻¹ with your conjugate_gradient.
    """
    raise NotImplementedError("exercise 4.3")
