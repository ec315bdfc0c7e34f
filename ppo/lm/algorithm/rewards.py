"""Per-token rewards of sampled completions: the score at the last token, a KL penalty along the way.

A completion y = (y_0, ..., y_{n−1}) ends with EOS at position n − 1 (or is cut off by
the length limit). With the policy π, the frozen reference π_ref and KL coefficient β:

    r_t  = −β · KL_t  +  1{t = n − 1} · score(y)        for t < n
    r_t  = 0                                             for t ≥ n (padding after EOS)

where KL_t is what the chosen placement (`ppo.lm.algorithm.kl_penalty`) puts in the detached reward:
k1, ℓ_t = log π(y_t | s_t) − log π_ref(y_t | s_t), for reward-k1; the exact per-state
KL(π(·|s_t) ‖ π_ref(·|s_t)) for loss-full (whose other half is a loss term); nothing for
loss-k3 (all in the loss). Only k1 is a correct KL penalty on its own inside a detached
reward: `ppo.lm.algorithm.kl_penalty` derives why.

The score goes on the EOS token itself — the last real token — not one position past it
(the bug TRL users hit). A completion without EOS gets `missing_eos_penalty` as its score
instead of what the reward function said.

For measuring (not penalising), `per_token_kl` offers three estimates of the per-token KL:
k1 = ℓ_t, k3 = (ρ_t − 1) − log ρ_t with ρ_t = π_ref(y_t|s_t) / π(y_t|s_t), and "full", the
exact KL(π(·|s_t) ‖ π_ref(·|s_t)) summed over the (small) vocabulary. All three have
E[KL_t | s_t] = KL(π(·|s_t) ‖ π_ref(·|s_t)), so by the chain rule each Σ_t KL_t is an
unbiased estimate of the sequence-level KL(π ‖ π_ref), "full" without the noise of the
sampled token. k1 can be negative; k3 never is, and has the lower variance while π stays
close to π_ref. Far from it, k3 is the noisier one: a token the policy has nearly given up
but the reference still likes has ρ_t ≫ 1, and k3 grows like ρ_t while k1 grows like log ρ_t.
Equal values do not mean equal gradients: see `ppo.lm.algorithm.kl_penalty`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from ppo.lm.algorithm.kl_penalty import penalised_kl, reward_kl
from ppo.lm.algorithm.rollout import CompletionBatch
from ppo.algorithm.losses import kl_per_sample

SequenceScorer = Callable[[CompletionBatch], torch.Tensor]  # B completions -> (B,) scores

KL_ESTIMATORS = ("k1", "k3", "full")  # for measuring the KL; which one may penalise it: ppo.lm.algorithm.kl_penalty


@dataclass
class TokenRewards:
    rewards: torch.Tensor  # (B, T) r_t, zero after EOS
    kl: torch.Tensor  # (B, T) the per-token KL β is charged for (ℓ_t, exact KL_t or k3_t), zero after EOS
    scores: torch.Tensor  # (B,) the score each completion received (missing-EOS penalty applied)

    @property
    def sequence_kl(self) -> torch.Tensor:  # (B,)
        return self.kl.sum(dim=1)


def last_token_index(mask: torch.Tensor) -> torch.Tensor:
    """Index of each row's last real token, n − 1 (the EOS position if the row has one). (B, T) -> (B,)."""
    lengths = mask.sum(dim=1)  # (B,)
    if bool((lengths == 0).any()):
        raise ValueError("every completion needs at least one real token")
    return lengths - 1


def per_token_kl(
    policy_log_probs: torch.Tensor,  # (B, T) log π(y_t | s_t)
    reference_log_probs: torch.Tensor,  # (B, T) log π_ref(y_t | s_t)
    mask: torch.Tensor,  # (B, T) bool
    estimator: str = "k1",
    exact_kl: torch.Tensor | None = None,  # (B, T) KL(π(·|s_t) ‖ π_ref(·|s_t)), needed by "full"
) -> torch.Tensor:
    """KL_t measured with estimator k1, k3 or full (see the module docstring), zero where mask is False. (B, T)."""
    if estimator not in KL_ESTIMATORS:
        raise ValueError(f"unknown KL estimator {estimator!r}; allowed: {', '.join(KL_ESTIMATORS)}")
    if estimator == "full":
        if exact_kl is None:
            raise ValueError("the 'full' KL estimator needs the exact per-token KL (ppo.lm.algorithm.rollout.exact_token_kl)")
        return exact_kl * mask.to(exact_kl.dtype)
    log_ratio = reference_log_probs - policy_log_probs  # log ρ_t
    return kl_per_sample(log_ratio, estimator) * mask.to(log_ratio.dtype)


def sequence_kl(policy_log_probs, reference_log_probs, mask, estimator: str = "k1") -> torch.Tensor:
    """Σ_t KL_t over each completion's real tokens: an unbiased estimate of KL(π ‖ π_ref). (B,)."""
    return per_token_kl(policy_log_probs, reference_log_probs, mask, estimator).sum(dim=1)


def assemble_rewards(
    scores: torch.Tensor,  # (B,) score(y) from a rule or a reward model
    ended_with_eos: torch.Tensor,  # (B,) bool
    policy_log_probs: torch.Tensor,  # (B, T)
    reference_log_probs: torch.Tensor,  # (B, T)
    mask: torch.Tensor,  # (B, T) bool: True up to and including EOS
    beta: float,
    kl_penalty: str = "reward-k1",
    missing_eos_penalty: float = -1.0,
    exact_kl: torch.Tensor | None = None,  # (B, T), for kl_penalty loss-full
) -> TokenRewards:
    """r_t = −β·KL_t (the placement's reward part) everywhere real, plus the score at the last real token; 0 after EOS."""
    in_reward = reward_kl(kl_penalty, policy_log_probs, reference_log_probs, mask, exact_kl)  # (B, T)
    scores = torch.where(ended_with_eos, scores.to(in_reward.dtype), torch.full_like(in_reward[:, 0], missing_eos_penalty))
    rewards = -beta * in_reward  # (B, T), already zero after EOS
    rows = torch.arange(rewards.size(0), device=rewards.device)
    rewards[rows, last_token_index(mask)] += scores
    kl = penalised_kl(kl_penalty, policy_log_probs, reference_log_probs, mask, exact_kl)
    return TokenRewards(rewards=rewards, kl=kl, scores=scores)


def rule_scorer(rule: Callable[[str, bool], float]) -> SequenceScorer:
    """Turn a plain rule (completion text, ended with EOS) -> score into a scorer of a batch. (B,)."""

    def score(batch: CompletionBatch) -> torch.Tensor:
        return torch.tensor([float(rule(text, bool(eos))) for text, eos in zip(batch.texts, batch.ended_with_eos)])

    return score
