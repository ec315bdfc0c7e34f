"""Per-token rewards, GAE along tokens and the KL controllers, on hand-worked tensors."""

import math

import pytest
import torch

from ppo.lm.algorithm.rewards import assemble_rewards, last_token_index, per_token_kl
from ppo.lm.trainers.rlhf_trainer import token_advantages

# Row 0 ends with EOS at t = 2; row 1 never emitted EOS (cut off at T = 4).
MASK = torch.tensor([[True, True, True, False], [True, True, True, True]])
ENDED = torch.tensor([True, False])
POLICY = torch.tensor([[-0.5, -1.0, -0.2, -9.0], [-1.0, -0.1, -0.3, -0.4]])  # -9 after EOS: garbage
REFERENCE = torch.tensor([[-0.7, -1.0, -0.6, -1.0], [-0.4, -0.1, -0.3, -0.9]])


def test_kl_penalty_per_token_and_score_at_the_eos_position():
    beta = 0.5
    out = assemble_rewards(torch.tensor([2.0, 2.0]), ENDED, POLICY, REFERENCE, MASK, beta, "reward-k1",
                           missing_eos_penalty=-3.0)
    # k1_t = log π − log π_ref: row 0 → [0.2, 0, 0.4], row 1 → [-0.6, 0, 0, 0.5]
    expected_kl = torch.tensor([[0.2, 0.0, 0.4, 0.0], [-0.6, 0.0, 0.0, 0.5]])
    torch.testing.assert_close(out.kl, expected_kl)
    expected = torch.tensor([
        [-0.1, 0.0, -0.2 + 2.0, 0.0],  # score on the EOS token itself, not one past it
        [0.3, 0.0, 0.0, -0.25 - 3.0],  # no EOS: the penalty replaces the score, at the last token
    ])
    torch.testing.assert_close(out.rewards, expected)
    torch.testing.assert_close(out.scores, torch.tensor([2.0, -3.0]))
    torch.testing.assert_close(out.sequence_kl, torch.tensor([0.6, -0.1]))


def test_nothing_is_rewarded_after_eos():
    for placement in ("reward-k1", "loss-k3"):
        out = assemble_rewards(torch.tensor([1.0, 0.0]), ENDED, POLICY, REFERENCE, MASK, 1.0, placement)
        assert out.rewards[0, 3] == 0 and out.kl[0, 3] == 0  # despite log-probs -9 vs -1 there
    assert last_token_index(MASK).tolist() == [2, 3]


def test_loss_placements_put_only_their_reward_part_in_the_reward():
    beta, scores = 0.5, torch.tensor([2.0, 2.0])
    exact = torch.tensor([[0.3, 0.1, 0.2, 5.0], [0.4, 0.0, 0.1, 0.2]])  # 5.0 after EOS must not count
    # loss-k3: the whole penalty is in the loss; the reward is the score alone, the KL charged is k3
    out = assemble_rewards(scores, ENDED, POLICY, REFERENCE, MASK, beta, "loss-k3", missing_eos_penalty=-3.0)
    torch.testing.assert_close(out.rewards, torch.tensor([[0.0, 0.0, 2.0, 0.0], [0.0, 0.0, 0.0, -3.0]]))
    torch.testing.assert_close(out.kl, per_token_kl(POLICY, REFERENCE, MASK, "k3"))
    # loss-full: the exact per-state KL in the reward (its loss term is the other half)
    out = assemble_rewards(scores, ENDED, POLICY, REFERENCE, MASK, beta, "loss-full", -3.0, exact)
    expected = torch.tensor([[-0.15, -0.05, -0.1 + 2.0, 0.0], [-0.2, 0.0, -0.05, -0.1 - 3.0]])
    torch.testing.assert_close(out.rewards, expected)
    torch.testing.assert_close(out.kl, exact * MASK)


def test_placements_that_do_not_regularise_are_refused():
    for removed in ("k3", "full", "reward-k3"):
        with pytest.raises(ValueError, match="allowed: reward-k1, loss-full, loss-k3"):
            assemble_rewards(torch.tensor([1.0, 0.0]), ENDED, POLICY, REFERENCE, MASK, 1.0, removed)


def test_k3_per_token_formula():
    kl = per_token_kl(POLICY, REFERENCE, MASK, "k3")
    log_rho = REFERENCE[0, 0] - POLICY[0, 0]  # log(π_ref / π) = -0.2
    assert kl[0, 0].item() == pytest.approx(math.expm1(log_rho) - log_rho)
    assert (kl >= 0).all() and kl[0, 3] == 0


def test_unknown_estimator_is_refused():
    with pytest.raises(ValueError, match="k1, k3"):
        per_token_kl(POLICY, REFERENCE, MASK, "k9")


def test_gae_along_tokens_stops_at_eos_and_ignores_values_after_it():
    rewards = torch.tensor([[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, -1.0]])  # (B, T)
    values = torch.tensor([[0.5, 0.5, 0.5, 7.0], [0.1, 0.2, 0.3, 0.4]])  # 7.0 after EOS must not leak
    advantages, returns = token_advantages(rewards, values, MASK, gamma=1.0, gae_lambda=1.0)
    # γ = λ = 1: R_t = reward-to-go inside the completion; Â_t = R_t − V(s_t)
    torch.testing.assert_close(returns, torch.tensor([[1.0, 1.0, 1.0, 0.0], [-1.0, -1.0, -1.0, -1.0]]))
    torch.testing.assert_close(advantages, returns - values * MASK)
    # λ = 0: one-step TD errors; the EOS step does not bootstrap from the next position
    advantages, _ = token_advantages(rewards, values, MASK, gamma=1.0, gae_lambda=0.0)
    torch.testing.assert_close(advantages[0], torch.tensor([0.0, 0.0, 0.5, 0.0]))
