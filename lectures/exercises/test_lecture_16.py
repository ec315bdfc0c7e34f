"""Checks for the exercises of lecture 16."""

import math
from collections import Counter

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from feedback import check_close, check_equal
from ppo.algorithm.distributions import MaskedCategoricalDistribution
from ppo.models.encoders import MinAtarCNN, NatureCNN

# (side, kernel, stride, padding): NatureCNN's three layers on 84 and on its smallest input 36,
# the MinAtar CNN's layer, padding, a kernel that just fits, and strides that do not divide
CONVOLUTIONS = [(84, 8, 4, 0), (20, 4, 2, 0), (9, 3, 1, 0), (36, 8, 4, 0), (8, 4, 2, 0), (3, 3, 1, 0), (10, 3, 1, 0),
                (10, 3, 1, 1), (7, 3, 2, 1), (84, 8, 4, 2), (5, 5, 1, 0), (12, 4, 3, 0), (11, 2, 3, 0), (1, 3, 2, 1)]


def side_mistakes(side: int, kernel: int, stride: int, padding: int = 0) -> dict[str, int]:
    """The side each usual mistake of exercise 16.1 gives."""
    return {
        "the padding forgotten (⌊(side − kernel) / stride⌋ + 1)": (side - kernel) // stride + 1,
        "the padding counted once, not on both sides (side + 2·padding)": (side + padding - kernel) // stride + 1,
        "a forgotten + 1 (the first position of the kernel counts)": (side + 2 * padding - kernel) // stride,
        "a rounding up in place of the floor (a last, incomplete stride is dropped)":
            -(-(side + 2 * padding - kernel) // stride) + 1,
        "the kernel not subtracted (⌊(side + 2·padding) / stride⌋ + 1)": (side + 2 * padding) // stride + 1,
    }


@pytest.mark.parametrize("side, kernel, stride, padding", CONVOLUTIONS)
def test_conv_output_side_is_the_side_torchs_convolution_gives(exercise, side, kernel, stride, padding):
    convolution = nn.Conv2d(1, 1, kernel, stride=stride, padding=padding)
    with torch.no_grad():
        expected = convolution(torch.zeros(1, 1, side, side)).shape[-1]
    result = exercise.conv_output_side(side, kernel, stride, padding)
    name = f"conv_output_side(side = {side}, kernel = {kernel}, stride = {stride}, padding = {padding})"
    check_equal(type(result).__name__, "int", f"the type of {name}",
                {"/ in place of // (a float)": "float", "a tensor in place of a Python int": "Tensor"})
    check_equal(result, expected, name, side_mistakes(side, kernel, stride, padding))


def test_conv_output_side_follows_the_librarys_cnns_to_their_linear_layers(exercise):
    """84 → 20 → 9 → 7 (NatureCNN's linear layer reads 64 × 7 × 7) and 10 → 8 (the MinAtar
    CNN's reads 16 × 8 × 8), the encoders of ppo/models/encoders.py built on those images."""
    side = 84
    for kernel, stride in ((8, 4), (4, 2), (3, 1)):
        side = exercise.conv_output_side(side, kernel, stride)
    check_equal(side, 7, "NatureCNN's three layers from 84 (84 → 20 → 9 → 7)")
    nature = NatureCNN(gym.spaces.Box(0, 255, (4, 84, 84), dtype=np.uint8), ortho_init=False)
    assert nature.body[-2].in_features == 64 * side * side
    minatar_side = exercise.conv_output_side(10, 3, 1)
    check_equal(minatar_side, 8, "conv_output_side(10, kernel 3, stride 1): the MinAtar CNN's layer",
                side_mistakes(10, 3, 1))
    minatar = MinAtarCNN(gym.spaces.Box(0.0, 1.0, (4, 10, 10), dtype=np.float32), ortho_init=False)
    assert minatar.body[-2].in_features == 16 * minatar_side * minatar_side


def test_conv_output_side_refuses_a_kernel_that_does_not_fit(exercise):
    with pytest.raises(RuntimeError):  # what torch says for it, three frames deep
        nn.Conv2d(1, 1, 7, padding=1)(torch.zeros(1, 1, 4, 4))
    with pytest.raises(ValueError, match=r"(?s)(\b7\b.*\b6\b)|(\b6\b.*\b7\b)"):  # kernel 7, padded side 4 + 2 = 6
        exercise.conv_output_side(4, 7, 1, padding=1)
    with pytest.raises(ValueError):
        exercise.conv_output_side(2, 3, 1)
    assert exercise.conv_output_side(1, 3, 1, padding=1) == 1  # 1 + 2 = 3 cells: the kernel just fits


LOWEST = {dtype: torch.finfo(dtype).min for dtype in (torch.float32, torch.float64)}


def log_softmax_mistakes(logits: torch.Tensor, mask: torch.Tensor) -> dict[str, torch.Tensor]:
    """The log-probabilities each usual mistake of exercise 16.2 gives."""
    logits, lowest = logits.detach(), LOWEST[logits.dtype]
    right = torch.log_softmax(torch.where(mask, logits, lowest), dim=-1)
    return {
        "a softmax over every logit, masked afterwards (the invalid ones still take probability)":
            torch.where(mask, torch.log_softmax(logits, dim=-1), lowest),
        "−inf in place of the dtype's most negative number (0 · log 0 = 0 · −inf is NaN in an entropy)":
            torch.where(mask, right, -math.inf),
        "the invalid logits left as they are (no mask)": torch.log_softmax(logits, dim=-1),
        "a large negative number added to the invalid logits, not put in their place":
            torch.log_softmax(logits - 1e9 * (~mask).to(logits.dtype), dim=-1),
    }


def test_masked_log_softmax_of_a_hand_worked_case(exercise):
    """Valid logits ln 3 and 0: π = 3/4 and 1/4, whatever the invalid logits are (100 among
    them: a softmax over all four would give the valid ones almost nothing); a row with one
    valid action gives it log π = 0."""
    logits = torch.tensor([[math.log(3.0), 100.0, 0.0, -7.0],
                           [1.5, -2.0, 30.0, 0.25]], dtype=torch.float64)
    mask = torch.tensor([[True, False, True, False],
                         [False, False, False, True]])
    lowest = LOWEST[torch.float64]
    expected = torch.tensor([[math.log(0.75), lowest, math.log(0.25), lowest],
                             [lowest, lowest, lowest, 0.0]], dtype=torch.float64)
    result = exercise.masked_log_softmax(logits, mask)
    check_equal(str(result.dtype), "torch.float64", "the dtype of masked_log_softmax of float64 logits")
    check_close(result, expected, "masked_log_softmax of the hand-worked case (log ¾, log ¼; log 1 = 0 for a lone "
                "valid action; the dtype's most negative number elsewhere)", log_softmax_mistakes(logits, mask),
                rtol=0.0, atol=1e-15)


def random_case(rows: int, actions: int, seed: int, dtype=torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits of spread 5 and masks with at least one valid action per row."""
    generator = torch.Generator().manual_seed(seed)
    logits = 5 * torch.randn(rows, actions, generator=generator, dtype=dtype)
    mask = torch.rand(rows, actions, generator=generator) < 0.5
    mask[torch.arange(rows), torch.randint(0, actions, (rows,), generator=generator)] = True
    return logits, mask


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_masked_probabilities_are_exactly_zero_and_the_valid_ones_sum_to_one(exercise, dtype):
    logits, mask = random_case(200, 6, seed=0, dtype=dtype)
    log_probs = exercise.masked_log_softmax(logits, mask)
    assert log_probs.shape == logits.shape
    assert bool((log_probs[~mask] == LOWEST[dtype]).all())
    probabilities = log_probs.exp()
    assert bool((probabilities[~mask] == 0).all())
    # a sum of at most 6 terms, each within an ulp or two of its value
    assert torch.allclose(probabilities.sum(-1), torch.ones(200, dtype=dtype), rtol=0.0,
                          atol=16 * torch.finfo(dtype).eps)


def test_the_policy_gradient_through_it_is_zero_on_masked_logits_and_softmax_minus_onehot_on_valid(exercise):
    """L = −Σ_b Â_b log π(a_b | s_b), actions among the valid ones:
    ∂L/∂z_{b,i} = −Â_b (1[i = a_b] − π_{b,i}) for valid i, with π the softmax over the valid
    logits, and exactly 0 for invalid i (no gradient reaches them)."""
    logits, mask = random_case(64, 7, seed=1, dtype=torch.float64)
    generator = torch.Generator().manual_seed(2)
    actions = torch.multinomial(mask.double(), 1, generator=generator).squeeze(1)  # (B,) a valid action each
    advantages = torch.randn(64, generator=generator, dtype=torch.float64)
    logits.requires_grad_(True)
    log_probs = exercise.masked_log_softmax(logits, mask)
    loss = -(advantages * log_probs.gather(1, actions.unsqueeze(1)).squeeze(1)).sum()
    (gradient,) = torch.autograd.grad(loss, logits)
    assert bool((gradient[~mask] == 0).all())
    expected = torch.zeros(64, 7, dtype=torch.float64)
    for row in range(64):  # by hand, one row at a time, over the valid logits only
        valid = mask[row].nonzero().squeeze(1)
        valid_probs = torch.softmax(logits.detach()[row, valid], dim=0)
        onehot = (valid == actions[row]).double()
        expected[row, valid] = -advantages[row] * (onehot - valid_probs)
    assert torch.allclose(gradient, expected, rtol=0.0, atol=1e-12)


def test_no_gradient_reaches_a_masked_logit_whatever_the_loss(exercise):
    """Every vector-Jacobian product, for weights on all the outputs (the masked ones
    included), is exactly 0 on the masked logits: they do not take part in the computation.
    A large negative number added to them, or the mask applied after the softmax, fails."""
    logits, mask = random_case(50, 5, seed=3)
    logits.requires_grad_(True)
    log_probs = exercise.masked_log_softmax(logits, mask)
    weights = torch.randn(50, 5, generator=torch.Generator().manual_seed(4))
    (gradient,) = torch.autograd.grad(log_probs, logits, grad_outputs=weights)

    def masked_logits_reached(function) -> int:
        (wrong,) = torch.autograd.grad(function(logits), logits, grad_outputs=weights)
        return int((wrong[~mask] != 0).sum())

    check_equal(int((gradient[~mask] != 0).sum()), 0, f"the number of masked logits (of {int((~mask).sum())}) that "
                "a gradient reaches", {
                    "a large negative number added to the masked logits (they still take part)": masked_logits_reached(
                        lambda z: torch.log_softmax(z - 1e9 * (~mask).float(), dim=-1)),
                    "the mask applied after the softmax (the masked logits shaped the valid probabilities)":
                        masked_logits_reached(lambda z: torch.where(mask, torch.log_softmax(z, dim=-1), LOWEST[z.dtype])),
                })
    assert bool((gradient[mask] != 0).any())


def test_an_entropy_summed_over_every_action_is_the_valid_actions_entropy_with_a_finite_gradient(exercise):
    """H = −Σ_a π_a log π_a over all n actions: 0 · log π = 0 on the masked ones (with −inf it
    would be NaN), so H is the entropy of the renormalised valid probabilities; its gradient
    is finite, and 0 on the masked logits."""
    logits, mask = random_case(40, 6, seed=5, dtype=torch.float64)
    logits.requires_grad_(True)
    log_probs = exercise.masked_log_softmax(logits, mask)
    entropy = -(log_probs.exp() * log_probs).sum(-1)  # (B,)
    expected = torch.stack([torch.special.entr(torch.softmax(row[valid], dim=0)).sum()
                            for row, valid in zip(logits.detach(), mask)])
    assert torch.allclose(entropy.detach(), expected, rtol=0.0, atol=1e-12)
    (gradient,) = torch.autograd.grad(entropy.sum(), logits)
    assert bool(torch.isfinite(gradient).all())
    assert bool((gradient[~mask] == 0).all())


def test_masked_log_softmax_matches_the_librarys_masked_categorical(exercise):
    """Against ppo.algorithm.distributions.MaskedCategoricalDistribution on random float32 inputs:
    the same numbers on the masked actions, and within float32 rounding on the valid ones
    (log-probabilities down to about −60 here; a different order of operations moves them
    by a few ulps, 1e-6 relative is 8)."""
    logits, mask = random_case(256, 9, seed=6)
    library = MaskedCategoricalDistribution(logits, mask)
    result = exercise.masked_log_softmax(logits, mask)
    check_close(result, library.log_probs, "masked_log_softmax of 256 random float32 rows, against the library",
                log_softmax_mistakes(logits, mask), rtol=1e-6, atol=1e-6)
    assert torch.equal(result[~mask], library.log_probs[~mask])
    entropy = -(result.exp() * result).sum(-1)
    assert torch.allclose(entropy, library.entropy(), rtol=1e-6, atol=1e-6)


def accuracy_mistakes(keys: torch.Tensor, targets: torch.Tensor) -> dict[str, float]:
    """The accuracy each usual mistake of exercise 16.3 gives."""
    per_key: dict[int, Counter] = {}
    for key, target in zip(keys.tolist(), targets.tolist()):
        per_key.setdefault(key, Counter())[target] += 1
    best = sum(max(counts.values()) for counts in per_key.values())
    return {
        "one guess for every key, the overall majority (the key ignored)":
            max(Counter(targets.tolist()).values()) / len(targets),
        "a count of right guesses, not a share": float(best),
        "min in place of max (each key's least common target)":
            sum(min(counts.values()) for counts in per_key.values()) / len(targets),
        "an average over the keys of each key's accuracy (a key's weight is its count)":
            sum(max(counts.values()) / sum(counts.values()) for counts in per_key.values()) / len(per_key),
    }


def test_best_guess_accuracy_of_a_hand_worked_table(exercise):
    """key −3: targets 5, 5, 7 → guess 5, right twice; key 1: targets 7, 3 → right once
    (either guess); key 40: target 1 → right once. 4 of 6."""
    keys = torch.tensor([-3, 1, -3, 40, 1, -3])
    targets = torch.tensor([5, 7, 5, 1, 3, 7])
    result = exercise.best_guess_accuracy(keys, targets)
    check_equal(type(result).__name__, "float", "the type of best_guess_accuracy",
                {"a tensor in place of a Python float (.item() or float())": "Tensor"})
    check_close(result, 4 / 6, "best_guess_accuracy of the hand-worked table (4 of 6)",
                accuracy_mistakes(keys, targets), atol=1e-12, rtol=0.0)


def test_best_guess_accuracy_is_one_when_the_key_determines_the_target(exercise):
    generator = torch.Generator().manual_seed(7)
    keys = torch.randint(0, 50, (1000,), generator=generator)
    assert exercise.best_guess_accuracy(keys, (keys * 7) % 5 + 100) == 1.0
    assert exercise.best_guess_accuracy(torch.arange(300), torch.randint(0, 4, (300,), generator=generator)) == 1.0


def test_best_guess_accuracy_is_the_majority_share_when_the_key_says_nothing(exercise):
    """Keys uniform over 4 values, targets 0, 1, 2 drawn with probabilities 0.6, 0.3, 0.1
    apart from them: each key's best guess is target 0, so the accuracy is exactly the share
    of 0s among the targets, and near 0.6 (its standard error at n = 20,000 is 0.0035)."""
    generator = torch.Generator().manual_seed(8)
    keys = torch.randint(0, 4, (20_000,), generator=generator)
    targets = torch.multinomial(torch.tensor([0.6, 0.3, 0.1]), 20_000, replacement=True, generator=generator)
    result = exercise.best_guess_accuracy(keys, targets)
    check_close(result, float((targets == 0).double().mean()), "best_guess_accuracy of a key that says nothing (the "
                "share of 0s)", accuracy_mistakes(keys, targets), atol=1e-12, rtol=0.0)
    assert abs(result - 0.6) < 0.02


def test_best_guess_accuracy_matches_a_count_by_hand_on_a_partly_informative_key(exercise):
    """The target depends on the key and on noise; the reference counts each key's targets
    with a Counter, one step at a time."""
    generator = torch.Generator().manual_seed(9)
    keys = torch.randint(0, 12, (3000,), generator=generator)
    noise = torch.randint(0, 3, (3000,), generator=generator)
    targets = torch.where(torch.rand(3000, generator=generator) < 0.7, keys % 4, noise)
    per_key: dict[int, Counter] = {}
    for key, target in zip(keys.tolist(), targets.tolist()):
        per_key.setdefault(key, Counter())[target] += 1
    expected = sum(max(counts.values()) for counts in per_key.values()) / len(keys)
    check_close(exercise.best_guess_accuracy(keys, targets), expected, "best_guess_accuracy of a partly informative key",
                accuracy_mistakes(keys, targets), atol=1e-12, rtol=0.0)
