"""Checks for the exercises of lecture 4. In float64: the checks compare linear algebra to 1e-9,
far below float32's rounding."""

import pytest
import torch

from feedback import check_close, check_equal

F64 = torch.float64


def categorical(seed: int, size: int) -> torch.Tensor:
    return torch.softmax(torch.randn(size, generator=torch.Generator().manual_seed(seed), dtype=F64), 0)


def estimate_mistakes(values, new_log_probs, old_log_probs) -> dict[str, torch.Tensor]:
    """The estimate each usual mistake of exercise 4.1 gives on these samples."""
    log_ratio = new_log_probs.detach() - old_log_probs
    return {
        "the ratio upside down, π_old / π_θ": ((-log_ratio).exp() * values).mean(),
        "a ratio without exp (log π_θ − log π_old is its logarithm)": (log_ratio * values).mean(),
        "no importance weight (the plain sample mean estimates the expectation under π_old)": values.mean(),
        "a sum in place of the mean over the samples": (log_ratio.exp() * values).sum(),
    }


def test_importance_sampled_mean_over_the_whole_support_is_the_expectation_under_pi(exercise):
    """Every action of a 6-action π_old, each repeated in proportion to π_old (10⁶ draws
    without sampling noise): the estimate must be Σ_a π(a) f(a), the expectation under π."""
    old, new = categorical(0, 6), categorical(1, 6)
    f = torch.arange(6, dtype=F64) ** 2 - 3
    actions = torch.repeat_interleave(torch.arange(6), torch.round(old * 1_000_000).long())
    estimate = exercise.importance_sampled_mean(f[actions], new.log()[actions], old.log()[actions])
    check_close(float(estimate), float((new * f).sum()), "importance_sampled_mean over the whole support (Σ_a π(a) f(a))",
                estimate_mistakes(f[actions], new.log()[actions], old.log()[actions]),
                atol=1e-4, rtol=0.0)  # the counts' rounding, 0.5 in 10⁶ each


def test_importance_sampled_mean_of_samples_is_within_the_sampling_error(exercise):
    old, new = categorical(4, 5), categorical(5, 5)
    f = torch.tensor([2.0, -1.0, 0.5, 3.0, -2.0], dtype=F64)
    actions = torch.multinomial(old, 200_000, replacement=True, generator=torch.Generator().manual_seed(3))
    weighted = (new[actions] / old[actions]) * f[actions]
    estimate = exercise.importance_sampled_mean(f[actions], new.log()[actions], old.log()[actions])
    check_close(float(estimate), float((new * f).sum()), "importance_sampled_mean of 200,000 samples (within 4 standard "
                "errors of Σ_a π(a) f(a))", estimate_mistakes(f[actions], new.log()[actions], old.log()[actions]),
                atol=4 * float(weighted.std()) / 200_000 ** 0.5, rtol=0.0)
    same = exercise.importance_sampled_mean(f[actions], old.log()[actions], old.log()[actions])
    check_close(float(same), float(f[actions].mean()), "importance_sampled_mean with π = π_old (the plain sample mean)",
                {"a sum in place of the mean over the samples": float(f[actions].sum())}, atol=1e-12, rtol=0.0)


def test_importance_sampled_mean_has_the_gradient_of_the_surrogate(exercise):
    """∂/∂log π(a_i) of the estimate is r_i f(a_i) / N: what an update on the surrogate follows."""
    old = categorical(6, 4).log()
    actions = torch.tensor([0, 1, 1, 2, 3, 3, 3, 0])
    shift = 0.3 * torch.randn(4, generator=torch.Generator().manual_seed(7), dtype=F64)
    new = (old + shift)[actions].requires_grad_(True)
    f = torch.linspace(-1.0, 2.0, 8, dtype=F64)
    estimate = exercise.importance_sampled_mean(f, new, old[actions])
    check_equal(estimate.requires_grad, True, "whether importance_sampled_mean is attached to new_log_probs (a "
                "detached ratio gives no gradient)")
    (gradient,) = torch.autograd.grad(estimate, new)
    ratio = (new.detach() - old[actions]).exp()
    check_close(gradient, ratio * f / 8, "∂ importance_sampled_mean / ∂ log π_θ(a_i) (r_i f(a_i) / N)", {
        "a sum in place of the mean (the gradient is N times too large)": ratio * f,
        "the ratio upside down, π_old / π_θ": -(1 / ratio) * f / 8,
        "a ratio without exp": f / 8,
    }, atol=1e-12, rtol=0.0)


def spd_problem(seed: int, size: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    factor = torch.randn(size, size, generator=generator, dtype=F64)
    return factor @ factor.T + 0.5 * torch.eye(size, dtype=F64), torch.randn(size, generator=generator, dtype=F64)


def natural_step(gradient, fisher, max_kl) -> torch.Tensor:
    """s = √(2δ / gᵀF⁻¹g) · F⁻¹g, by a direct solve."""
    direction = torch.linalg.solve(fisher, gradient)
    return (2 * max_kl / (gradient @ direction)) ** 0.5 * direction


def step_mistakes(gradient, fisher, max_kl) -> dict[str, torch.Tensor]:
    """The step each usual mistake of exercise 4.3 gives."""
    direction = torch.linalg.solve(fisher, gradient)
    return {
        "the direction F⁻¹g without its step size √(2δ / gᵀF⁻¹g)": direction,
        "the Euclidean gradient g scaled to the boundary, not F⁻¹g":
            gradient * (2 * max_kl / (gradient @ fisher @ gradient)) ** 0.5,
        "δ in place of 2δ under the square root (the KL is ½ sᵀ F s)": (max_kl / (gradient @ direction)) ** 0.5 * direction,
        "a step size without its square root": 2 * max_kl / (gradient @ direction) * direction,
    }


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("max_kl", [0.01, 0.5])
def test_natural_gradient_step_sits_on_the_kl_boundary_with_the_largest_gain(exercise, seed, max_kl):
    fisher, gradient = spd_problem(seed)
    step = exercise.natural_gradient_step(gradient, fisher, max_kl)
    check_close(step, natural_step(gradient, fisher, max_kl), f"natural_gradient_step(δ = {max_kl})",
                step_mistakes(gradient, fisher, max_kl), atol=1e-9, rtol=1e-9)
    check_close(float(0.5 * step @ fisher @ step), max_kl, f"the step's KL, ½ sᵀ F s (δ = {max_kl})", atol=1e-9, rtol=0.0)
    best_gain = (2 * max_kl * gradient @ torch.linalg.solve(fisher, gradient)) ** 0.5  # Cauchy–Schwarz in F's metric
    check_close(float(gradient @ step), float(best_gain), f"the step's gain gᵀs (δ = {max_kl})", atol=1e-9, rtol=0.0)
    directions = torch.randn(200, len(gradient), generator=torch.Generator().manual_seed(seed + 10), dtype=F64)
    for direction in directions:
        on_the_boundary = direction * (2 * max_kl / (direction @ fisher @ direction)) ** 0.5
        assert gradient @ on_the_boundary <= gradient @ step + 1e-12


def test_natural_gradient_step_follows_the_metric_not_the_euclidean_gradient(exercise):
    """With F = diag(100, 1), moving the first parameter costs 100 times more KL: the step
    turns from g = (1, 1) towards the cheap direction, (0.01, 1) normalised."""
    fisher = torch.diag(torch.tensor([100.0, 1.0], dtype=F64))
    step = exercise.natural_gradient_step(torch.tensor([1.0, 1.0], dtype=F64), fisher, 0.02)
    expected = torch.tensor([0.01, 1.0], dtype=F64)
    check_close(step / step.norm(), expected / expected.norm(), "the direction of natural_gradient_step(g = (1, 1), "
                "F = diag(100, 1))", {"the Euclidean direction g, not F⁻¹g": torch.ones(2, dtype=F64) / 2 ** 0.5,
                                     "F g in place of F⁻¹g": torch.tensor([100.0, 1.0], dtype=F64) / 10_001 ** 0.5},
                atol=1e-9, rtol=0.0)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_conjugate_gradient_solves_with_products_only(exercise, seed):
    fisher, b = spd_problem(seed, size=8)
    calls = []

    def product(vector):
        calls.append(1)
        return fisher @ vector

    x = exercise.conjugate_gradient(product, b, iterations=8)
    check_close(x, torch.linalg.solve(fisher, b), "conjugate_gradient after 8 iterations (P = 8 solve it)", {
        "b returned unchanged (no step taken)": b, "F b in place of F⁻¹ b": fisher @ b,
    }, atol=1e-8, rtol=1e-8)
    if len(calls) > 8:
        raise AssertionError(f"conjugate_gradient(iterations = 8): expected at most 8 products F·v, got {len(calls)}.\n"
                             "  Likely mistake: the residual recomputed as b − F x each iteration (r ← r − α F d reuses "
                             "the product).")


def test_conjugate_gradient_after_one_iteration_is_the_exact_line_search_along_b(exercise):
    fisher, b = spd_problem(3)
    x = exercise.conjugate_gradient(lambda vector: fisher @ vector, b, iterations=1)
    check_close(x, (b @ b) / (b @ fisher @ b) * b, "conjugate_gradient after 1 iteration (α b, α = bᵀb / bᵀFb)", {
        "b without its step size α = bᵀb / bᵀFb": b,
        "the step size upside down, bᵀFb / bᵀb": (b @ fisher @ b) / (b @ b) * b,
        "a solve in place of one iteration": torch.linalg.solve(fisher, b),
    }, atol=1e-12, rtol=0.0)
