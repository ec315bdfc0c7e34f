"""Checks for the exercises of lecture 12."""

import torch

from ppo.lm.exact.optimum import kl_regularised_optimum
from ppo.lm.algorithm.rewards import assemble_rewards

EOS = 9


def test_completion_mask_keeps_the_first_eos_and_nothing_after(exercise):
    tokens = torch.tensor([[1, 2, EOS, 0, 0], [3, EOS, 4, EOS, 0], [1, 1, 1, 1, 1]])
    expected = torch.tensor([[True, True, True, False, False], [True, True, False, False, False], [True] * 5])
    assert torch.equal(exercise.completion_mask(tokens, EOS), expected)


def test_token_rewards_match_the_library(exercise):
    generator = torch.Generator().manual_seed(0)
    policy, reference = -torch.rand(3, 5, generator=generator), -torch.rand(3, 5, generator=generator)
    mask = torch.tensor([[True, True, True, False, False], [True] * 5, [True, False, False, False, False]])
    score = torch.tensor([4.0, -1.0, 0.5])
    library = assemble_rewards(score, torch.ones(3, dtype=torch.bool), policy, reference, mask, beta=0.2).rewards
    assert torch.allclose(exercise.token_rewards(score, policy, reference, mask, 0.2), library, atol=1e-6)


def test_the_optimum_matches_the_library_even_for_a_tiny_beta(exercise):
    reference = {"pizza": 0.12, "salad": 0.5, "soup": 0.38}
    scores = {"pizza": 4.0, "salad": 0.0, "soup": 0.0}
    for beta in (10.0, 1.0, 0.01):
        library = kl_regularised_optimum(reference, scores, beta).probabilities
        mine = exercise.kl_regularised_optimum(torch.tensor(list(reference.values()), dtype=torch.float64),
                                               torch.tensor(list(scores.values()), dtype=torch.float64), beta)
        assert torch.allclose(mine, torch.tensor(list(library.values()), dtype=torch.float64), atol=1e-9)
