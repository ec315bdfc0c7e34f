"""Checks for the exercises of lecture 5."""

import math

import pytest
import torch

from feedback import check_close, check_equal
from ppo.algorithm import losses


def random_batch(seed: int):
    generator = torch.Generator().manual_seed(seed)
    old = torch.randn(500, generator=generator)
    return old + 0.4 * torch.randn(500, generator=generator), old, torch.randn(500, generator=generator)


def surrogate_mistakes(new, old, advantages, epsilon) -> dict[str, torch.Tensor]:
    """The loss each usual mistake of exercise 5.1 gives on this batch."""
    new, ratio = new.detach(), (new.detach() - old).exp()
    clipped = ratio.clamp(1 - epsilon, 1 + epsilon)
    inverse = (old - new).exp()
    return {
        "max in place of min (L^CLIP keeps the smaller, pessimistic term)":
            -torch.max(ratio * advantages, clipped * advantages).mean(),
        "a missing clip (the plain surrogate r_t·Â_t)": -(ratio * advantages).mean(),
        "the clipped term alone, without the min": -(clipped * advantages).mean(),
        "a sum in place of the mean over the samples": -torch.min(ratio * advantages, clipped * advantages).sum(),
        "the ratio upside down, π_old / π_θ": -torch.min(inverse * advantages,
                                                          inverse.clamp(1 - epsilon, 1 + epsilon) * advantages).mean(),
        "a ratio without exp (log π_θ − log π_old is its logarithm)":
            -torch.min((new - old) * advantages, (new - old).clamp(1 - epsilon, 1 + epsilon) * advantages).mean(),
    }


@pytest.mark.parametrize("epsilon", [0.1, 0.2, 0.3])
def test_clipped_surrogate_loss_matches_the_library(exercise, epsilon):
    new, old, advantages = random_batch(0)
    new.requires_grad_(True)
    mine = exercise.clipped_surrogate_loss(new, old, advantages, epsilon)
    library = losses.clipped_surrogate_loss(new, old, advantages, epsilon)
    check_close(mine, library.detach(), f"clipped_surrogate_loss(ε = {epsilon})",
                surrogate_mistakes(new, old, advantages, epsilon), atol=1e-6)
    check_equal(mine.requires_grad, True, "whether the loss is attached to new_log_probs (a detached ratio "
                "gives no gradient)")
    (mine_gradient,) = torch.autograd.grad(mine, new)
    (library_gradient,) = torch.autograd.grad(library, new)
    check_close(mine_gradient, library_gradient, f"the gradient of clipped_surrogate_loss(ε = {epsilon})",
                {"a ratio that does not depend on θ": torch.zeros_like(library_gradient)}, atol=1e-6)


def test_clip_fraction_matches_the_library(exercise):
    new, old, _ = random_batch(1)
    ratio = (new - old).exp()
    check_close(exercise.clip_fraction(new, old, 0.2), float(losses.clip_fraction(new, old, 0.2)),
                "clip_fraction(ε = 0.2)", {
                    "the share inside [1 − ε, 1 + ε], not outside": float(((ratio - 1).abs() <= 0.2).float().mean()),
                    "a count, not a share": float(((ratio - 1).abs() > 0.2).sum()),
                    "|log r − 0| > ε in place of |r − 1| > ε": float(((new - old).abs() > 0.2).float().mean()),
                    "only the ratios above 1 + ε counted": float((ratio > 1.2).float().mean()),
                }, atol=1e-6, rtol=0.0)


@pytest.mark.parametrize("ratio", [0.5, 0.85, 1.0, 1.15, 1.6])
@pytest.mark.parametrize("advantage", [1.0, -1.0])
def test_has_gradient_agrees_with_autograd(exercise, ratio, advantage):
    log_prob = torch.tensor([math.log(ratio)], requires_grad=True)
    losses.clipped_surrogate_loss(log_prob, torch.zeros(1), torch.tensor([advantage]), 0.2).backward()
    expected = bool(log_prob.grad.abs().item() > 0)
    inside = 0.8 <= ratio <= 1.2
    mistakes = {} if expected == inside else {
        "a gradient only inside [1 − ε, 1 + ε] (outside it, the min picks the unclipped term on one side)": inside}
    check_equal(exercise.has_gradient(ratio, advantage, 0.2), expected,
                f"has_gradient(ratio = {ratio}, advantage = {advantage}, ε = 0.2)", mistakes)


@pytest.mark.parametrize("ratio", [0.6, 0.9, 1.0, 1.1, 1.5])
@pytest.mark.parametrize("advantage", [1.0, -1.0])
def test_predicted_surrogate_gradient_is_the_lectures_table(exercise, ratio, advantage):
    log_prob = torch.tensor([math.log(ratio)], requires_grad=True)
    (-losses.clipped_surrogate_loss(log_prob, torch.zeros(1), torch.tensor([advantage]), 0.2)).backward()
    expected = log_prob.grad.item()
    mistakes = {"∂/∂r_t in place of ∂/∂log π (∂r/∂log π = r: the gradient is r·Â)": advantage} if expected else {
        "a gradient where the clip holds the term constant": ratio * advantage}
    check_close(exercise.predict_surrogate_gradient(ratio, advantage), expected,
                f"predict_surrogate_gradient(ratio = {ratio}, advantage = {advantage})", mistakes, atol=1e-6, rtol=0.0)
