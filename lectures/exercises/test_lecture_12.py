"""Checks for the exercises of lecture 12."""

import math

import torch

from feedback import check_close, check_equal
from ppo.lm.exact.optimum import kl_regularised_optimum
from ppo.lm.algorithm.rewards import assemble_rewards

EOS = 9


def test_completion_mask_keeps_the_first_eos_and_nothing_after(exercise):
    tokens = torch.tensor([[1, 2, EOS, 0, 0], [3, EOS, 4, EOS, 0], [1, 1, 1, 1, 1]])
    expected = torch.tensor([[True, True, True, False, False], [True, True, False, False, False], [True] * 5])
    check_equal(exercise.completion_mask(tokens, EOS), expected, "completion_mask", {
        "the EOS token itself masked out (the score is paid on it: it counts)":
            torch.tensor([[True, True, False, False, False], [True, False, False, False, False], [True] * 5]),
        "every non-EOS token kept (only the tokens after the first EOS are padding)": tokens != EOS,
        "the mask cut at the last EOS, not the first":
            torch.tensor([[True, True, True, False, False], [True, True, True, True, False], [True] * 5]),
    })


def test_token_rewards_match_the_library(exercise):
    generator = torch.Generator().manual_seed(0)
    policy, reference = -torch.rand(3, 5, generator=generator), -torch.rand(3, 5, generator=generator)
    mask = torch.tensor([[True, True, True, False, False], [True] * 5, [True, False, False, False, False]])
    score = torch.tensor([4.0, -1.0, 0.5])
    library = assemble_rewards(score, torch.ones(3, dtype=torch.bool), policy, reference, mask, beta=0.2).rewards
    penalty = -0.2 * (policy - reference) * mask.float()
    check_close(exercise.token_rewards(score, policy, reference, mask, 0.2), library, "token_rewards(β = 0.2)", {
        "a forgotten mask (no reward after EOS)": library - 0.2 * (policy - reference) * (~mask).float(),
        "the score missing (it is added on each completion's last real token)": penalty,
        "the KL penalty with the wrong sign": library - 2 * penalty,
        "the score on the last position, not the last real token": penalty + torch.zeros_like(penalty).index_put_(
            (torch.arange(3), torch.full((3,), 4)), score),
    }, atol=1e-6)


def test_the_optimum_matches_the_library_even_for_a_tiny_beta(exercise):
    reference = {"pizza": 0.12, "salad": 0.5, "soup": 0.38}
    scores = {"pizza": 4.0, "salad": 0.0, "soup": 0.0}
    for beta in (10.0, 1.0, 0.01):
        library = kl_regularised_optimum(reference, scores, beta).probabilities
        mine = exercise.kl_regularised_optimum(torch.tensor(list(reference.values()), dtype=torch.float64),
                                               torch.tensor(list(scores.values()), dtype=torch.float64), beta)
        check_close(mine, torch.tensor(list(library.values()), dtype=torch.float64),
                    f"kl_regularised_optimum(β = {beta})", {
                        "π_ref · exp(r/β) not normalised by Z": torch.tensor(
                            [p * math.exp(min(r / beta, 700)) for p, r in zip(reference.values(), scores.values())],
                            dtype=torch.float64),
                        "exp(r · β) in place of exp(r / β)": torch.softmax(
                            torch.tensor(list(reference.values()), dtype=torch.float64).log()
                            + beta * torch.tensor(list(scores.values()), dtype=torch.float64), dim=0),
                    }, atol=1e-9)
