"""Solutions to lectures/exercises/lecture_04.py."""

import torch


def importance_sampled_mean(values, new_log_probs, old_log_probs):
    # E_{a~π}[f] = Σ_a π(a) f(a) = Σ_a π_old(a) (π(a)/π_old(a)) f(a) = E_{a~π_old}[r f]
    return ((new_log_probs - old_log_probs).exp() * values).mean()


def conjugate_gradient(matrix_vector_product, b, iterations):
    x = torch.zeros_like(b)
    residual = b.clone()  # b − F x at x = 0
    direction = residual.clone()
    residual_norm = residual @ residual
    for _ in range(iterations):
        if residual_norm == 0:
            break
        product = matrix_vector_product(direction)
        step = residual_norm / (direction @ product)
        x = x + step * direction
        residual = residual - step * product
        new_norm = residual @ residual
        direction = residual + (new_norm / residual_norm) * direction
        residual_norm = new_norm
    return x


def natural_gradient_step(gradient, fisher, max_kl):
    # Lagrangian gᵀΔθ − λ(½ΔθᵀFΔθ − δ): Δθ = F⁻¹g / λ; the constraint is active (g ≠ 0),
    # ½ gᵀF⁻¹g / λ² = δ gives 1/λ = √(2δ / gᵀF⁻¹g)
    direction = conjugate_gradient(lambda vector: fisher @ vector, gradient, iterations=len(gradient))
    return torch.sqrt(2 * max_kl / (gradient @ direction)) * direction
