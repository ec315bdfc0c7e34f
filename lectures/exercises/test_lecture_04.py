"""Checks for the exercises of lecture 4. In float64: the checks compare linear algebra to 1e-9,
far below float32's rounding."""

import pytest
import torch

F64 = torch.float64


def categorical(seed: int, size: int) -> torch.Tensor:
    return torch.softmax(torch.randn(size, generator=torch.Generator().manual_seed(seed), dtype=F64), 0)


def test_importance_sampled_mean_over_the_whole_support_is_the_expectation_under_pi(exercise):
    """Every action of a 6-action π_old, each repeated in proportion to π_old (10⁶ draws
    without sampling noise): the estimate must be Σ_a π(a) f(a), the expectation under π."""
    old, new = categorical(0, 6), categorical(1, 6)
    f = torch.arange(6, dtype=F64) ** 2 - 3
    actions = torch.repeat_interleave(torch.arange(6), torch.round(old * 1_000_000).long())
    estimate = exercise.importance_sampled_mean(f[actions], new.log()[actions], old.log()[actions])
    assert abs(float(estimate) - float((new * f).sum())) < 1e-4  # the counts' rounding, 0.5 in 10⁶ each


def test_importance_sampled_mean_of_samples_is_within_the_sampling_error(exercise):
    old, new = categorical(4, 5), categorical(5, 5)
    f = torch.tensor([2.0, -1.0, 0.5, 3.0, -2.0], dtype=F64)
    actions = torch.multinomial(old, 200_000, replacement=True, generator=torch.Generator().manual_seed(3))
    weighted = (new[actions] / old[actions]) * f[actions]
    estimate = exercise.importance_sampled_mean(f[actions], new.log()[actions], old.log()[actions])
    assert abs(float(estimate) - float((new * f).sum())) < 4 * float(weighted.std()) / 200_000 ** 0.5
    same = exercise.importance_sampled_mean(f[actions], old.log()[actions], old.log()[actions])
    assert abs(float(same) - float(f[actions].mean())) < 1e-12  # π = π_old: the plain sample mean


def test_importance_sampled_mean_has_the_gradient_of_the_surrogate(exercise):
    """∂/∂log π(a_i) of the estimate is r_i f(a_i) / N: what an update on the surrogate follows."""
    old = categorical(6, 4).log()
    actions = torch.tensor([0, 1, 1, 2, 3, 3, 3, 0])
    shift = 0.3 * torch.randn(4, generator=torch.Generator().manual_seed(7), dtype=F64)
    new = (old + shift)[actions].requires_grad_(True)
    f = torch.linspace(-1.0, 2.0, 8, dtype=F64)
    (gradient,) = torch.autograd.grad(exercise.importance_sampled_mean(f, new, old[actions]), new)
    assert torch.allclose(gradient, (new.detach() - old[actions]).exp() * f / 8, atol=1e-12)


def spd_problem(seed: int, size: int = 6) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    factor = torch.randn(size, size, generator=generator, dtype=F64)
    return factor @ factor.T + 0.5 * torch.eye(size, dtype=F64), torch.randn(size, generator=generator, dtype=F64)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("max_kl", [0.01, 0.5])
def test_natural_gradient_step_sits_on_the_kl_boundary_with_the_largest_gain(exercise, seed, max_kl):
    fisher, gradient = spd_problem(seed)
    step = exercise.natural_gradient_step(gradient, fisher, max_kl)
    assert abs(float(0.5 * step @ fisher @ step) - max_kl) < 1e-9
    best_gain = (2 * max_kl * gradient @ torch.linalg.solve(fisher, gradient)) ** 0.5  # Cauchy–Schwarz in F's metric
    assert abs(float(gradient @ step) - float(best_gain)) < 1e-9
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
    assert torch.allclose(step / step.norm(), expected / expected.norm(), atol=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_conjugate_gradient_solves_with_products_only(exercise, seed):
    fisher, b = spd_problem(seed, size=8)
    calls = []

    def product(vector):
        calls.append(1)
        return fisher @ vector

    x = exercise.conjugate_gradient(product, b, iterations=8)
    assert torch.allclose(x, torch.linalg.solve(fisher, b), atol=1e-8, rtol=1e-8)  # P = 8 steps solve it (up to rounding)
    assert len(calls) <= 8


def test_conjugate_gradient_after_one_iteration_is_the_exact_line_search_along_b(exercise):
    fisher, b = spd_problem(3)
    x = exercise.conjugate_gradient(lambda vector: fisher @ vector, b, iterations=1)
    assert torch.allclose(x, (b @ b) / (b @ fisher @ b) * b, atol=1e-12)
