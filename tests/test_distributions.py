"""Action distributions: masked categoricals give invalid actions no probability, no entropy
and no gradient; MultiDiscrete sums its parts; each checked against hand-worked numbers."""

import math

import gymnasium as gym
import pytest
import torch
from torch.distributions import Categorical

from ppo.algorithm.distributions import (
    CategoricalDistribution,
    MaskedCategoricalDistribution,
    MultiCategoricalDistribution,
    diagonal_gaussian,
)
from ppo.models.networks import ActorCritic, CategoricalHead

LOGITS = [1.0, 2.0, 3.0, 4.0]
MASK = [True, False, True, False]  # actions 0 and 2 valid


def masked_example(requires_grad: bool = False):
    logits = torch.tensor([LOGITS], requires_grad=requires_grad)
    return logits, MaskedCategoricalDistribution(logits, torch.tensor([MASK]))


def test_masked_actions_have_probability_exactly_zero_and_valid_ones_renormalise():
    _, dist = masked_example()
    probs = dist.probs[0]
    assert probs[1].item() == 0.0 and probs[3].item() == 0.0  # exactly, not merely small
    # by hand: softmax over the valid logits (1, 3): e^1 / (e^1 + e^3) = 1 / (1 + e^2)
    p0 = 1.0 / (1.0 + math.exp(2.0))
    assert probs[0].item() == pytest.approx(p0, rel=1e-6)
    assert probs[2].item() == pytest.approx(1.0 - p0, rel=1e-6)


def test_masked_entropy_counts_only_the_valid_actions():
    _, dist = masked_example()
    p0 = 1.0 / (1.0 + math.exp(2.0))
    by_hand = -(p0 * math.log(p0) + (1 - p0) * math.log(1 - p0))  # 0.1269...
    assert dist.entropy().item() == pytest.approx(by_hand, rel=1e-6)
    assert math.isfinite(dist.entropy().item())


def test_masked_logits_get_exactly_zero_gradient_and_valid_ones_the_reference_gradient():
    logits, dist = masked_example(requires_grad=True)
    (dist.log_prob(torch.tensor([2])) + 0.5 * dist.entropy()).sum().backward()
    assert logits.grad[0, 1].item() == 0.0 and logits.grad[0, 3].item() == 0.0
    # reference: a categorical over the two valid logits only
    valid = torch.tensor([1.0, 3.0], requires_grad=True)
    reference = Categorical(logits=valid)
    (reference.log_prob(torch.tensor(1)) + 0.5 * reference.entropy()).backward()
    assert torch.allclose(logits.grad[0, [0, 2]], valid.grad, atol=1e-6)
    assert valid.grad.abs().min() > 1e-3  # the check above compares something


def test_sampling_never_picks_a_masked_action_and_follows_the_valid_probabilities():
    torch.manual_seed(0)
    draws = 200_000
    logits = torch.tensor(LOGITS).expand(draws, 4)
    mask = torch.tensor(MASK).expand(draws, 4)
    actions = MaskedCategoricalDistribution(logits, mask).sample()
    counts = torch.bincount(actions, minlength=4)
    assert counts[1] == 0 and counts[3] == 0
    p0 = 1.0 / (1.0 + math.exp(2.0))
    assert abs(counts[0].item() / draws - p0) < 5 * math.sqrt(p0 * (1 - p0) / draws)


def test_masked_categorical_with_large_logits_on_invalid_actions_still_gives_them_nothing():
    logits = torch.tensor([[50.0, -50.0, 80.0]])
    dist = MaskedCategoricalDistribution(logits, torch.tensor([[False, True, False]]))
    assert dist.probs[0].tolist() == [0.0, 1.0, 0.0]
    assert dist.log_prob(torch.tensor([1])).item() == 0.0 and dist.entropy().item() == 0.0


def test_an_all_true_mask_is_the_plain_categorical():
    logits = torch.randn(5, 6, generator=torch.Generator().manual_seed(1))
    plain, masked = CategoricalDistribution(logits), MaskedCategoricalDistribution(logits, torch.ones(5, 6, dtype=torch.bool))
    assert torch.equal(plain.log_probs, masked.log_probs)
    assert torch.allclose(plain.entropy(), masked.entropy())


def test_greedy_action_skips_a_masked_best_logit():
    head = CategoricalHead(2, 3, ortho_init=True)
    with torch.no_grad():
        head.logits.weight.zero_()
        head.logits.bias.copy_(torch.tensor([0.0, 5.0, 1.0]))
    features = torch.zeros(1, 2)
    assert head.greedy(features).item() == 1
    assert head.greedy(features, torch.tensor([[True, False, True]])).item() == 2


# ---------------------------------------------------------------------- MultiDiscrete
# nvec = (2, 3), logits [0, ln 3 | 0, 0, ln 2]: π_1 = (1/4, 3/4), π_2 = (1/4, 1/4, 1/2)
MULTI_LOGITS = torch.tensor([[0.0, math.log(3.0), 0.0, 0.0, math.log(2.0)]])


def entropy_of(*probabilities):
    return -sum(p * math.log(p) for p in probabilities if p > 0)


def test_multi_discrete_log_prob_and_entropy_are_the_sums_of_the_parts_by_hand():
    dist = MultiCategoricalDistribution(MULTI_LOGITS, (2, 3))
    assert dist.log_prob(torch.tensor([[1, 2]])).item() == pytest.approx(math.log(3 / 4 * 1 / 2), rel=1e-6)
    assert dist.log_prob(torch.tensor([[0, 0]])).item() == pytest.approx(math.log(1 / 4 * 1 / 4), rel=1e-6)
    by_hand = entropy_of(1 / 4, 3 / 4) + entropy_of(1 / 4, 1 / 4, 1 / 2)
    assert dist.entropy().item() == pytest.approx(by_hand, rel=1e-6)


def test_multi_discrete_masks_each_sub_space_separately():
    mask = torch.tensor([[True, True, True, False, True]])  # sub-space 2: action 1 invalid
    dist = MultiCategoricalDistribution(MULTI_LOGITS, (2, 3), mask)
    # π_2 over the valid (0, 2): (1/3, 2/3)
    assert dist.log_prob(torch.tensor([[1, 2]])).item() == pytest.approx(math.log(3 / 4 * 2 / 3), rel=1e-6)
    assert dist.entropy().item() == pytest.approx(entropy_of(1 / 4, 3 / 4) + entropy_of(1 / 3, 2 / 3), rel=1e-6)
    draws = MultiCategoricalDistribution(MULTI_LOGITS.expand(50_000, 5), (2, 3), mask.expand(50_000, 5)).sample()
    assert draws.shape == (50_000, 2) and not bool((draws[:, 1] == 1).any())
    assert set(draws[:, 0].tolist()) == {0, 1}


def test_actor_critic_with_a_multi_discrete_space_gives_k_actions_and_the_sum_of_the_log_probs():
    torch.manual_seed(0)
    model = ActorCritic(gym.spaces.Box(-1, 1, (3,)), gym.spaces.MultiDiscrete([2, 3, 4]))
    obs = torch.randn(5, 3)
    action, log_prob, _ = model.act(obs)
    assert action.shape == (5, 3)
    logits = model.policy_head.logits(model.actor_body(obs))
    parts = logits.split([2, 3, 4], dim=-1)
    by_parts = sum(torch.log_softmax(part, -1).gather(1, action[:, [j]]).squeeze(1) for j, part in enumerate(parts))
    assert torch.allclose(log_prob, by_parts, atol=1e-6)


def test_diagonal_gaussian_log_prob_matches_the_formula():
    mean, log_std = torch.tensor([[0.5, -1.0]]), torch.tensor([0.0, math.log(2.0)])
    action = torch.tensor([[1.5, 1.0]])
    by_hand = sum(-(a - m) ** 2 / (2 * s ** 2) - math.log(s) - 0.5 * math.log(2 * math.pi)
                  for a, m, s in [(1.5, 0.5, 1.0), (1.0, -1.0, 2.0)])
    assert diagonal_gaussian(mean, log_std).log_prob(action).item() == pytest.approx(by_hand, rel=1e-6)
