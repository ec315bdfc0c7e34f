"""Critic-free policy optimisation of a language model: GRPO and RLOO baselines.

For a reward paid once per completion, a baseline can come from the other completions
of the same prompt instead of a learned critic. Each rollout samples G completions per
prompt; with the sequence reward of completion i (the reward part of the KL penalty,
summed along the sequence: nothing for grpo's loss-k3, k1 for rloo's default reward-k1),

    R_i = score(y_i) − β · Σ_t KL_t(y_i)

the advantage of every token of y_i is one number:

    GRPO (Shao et al. 2024):            Â_i = (R_i − mean_j R_j) / (std_j R_j + ε)
    RLOO (Ahmadian et al. 2024):        Â_i = R_i − (1 / (G − 1)) Σ_{j ≠ i} R_j

with j over the G completions of the same prompt (std unbiased, ε = 1e-6). RLOO's
baseline does not depend on y_i, so its policy gradient stays unbiased; GRPO's scaling
by the group's std re-weights prompts. GRPO keeps the KL out of R_i, as published: its
penalty is β·k3 differentiated in the loss (kl_penalty loss-k3, `ppo.lm.kl_penalty`). A
KL inside R_i would be divided by the group's std too: in a group whose scores tie, Â_i
would be −(K_i − mean K)/std K whatever β is, a penalty whose strength changes from group
to group. Everything else is PPO's: the sampler, the per-token
log-probs at temperature τ, the clipped surrogate with ε, and `ppo.update.run_update`
(epochs, minibatches, gradient clipping, KL early stop). There is no value loss and
no GAE, and one network fewer to train.
"""

from __future__ import annotations

import torch

from ppo.config import ConfigError
from ppo.lm.rewards import TokenRewards
from ppo.lm.rlhf_trainer import RLHFTrainer
from ppo.lm.rollout import Rollout, TokenBatch, score_completions
from ppo.losses import clipped_surrogate_loss, entropy_bonus, ppo_loss
from ppo.update import MinibatchLoss

GROUP_STD_EPS = 1e-6


def group_advantages(rewards: torch.Tensor, group_size: int, algorithm: str) -> torch.Tensor:
    """(B,) sequence rewards, B/G consecutive groups of G completions of one prompt -> (B,) advantages."""
    grouped = rewards.view(-1, group_size)  # (B / G, G)
    if algorithm == "grpo":
        return ((grouped - grouped.mean(1, keepdim=True)) / (grouped.std(1, keepdim=True) + GROUP_STD_EPS)).reshape(-1)
    if algorithm == "rloo":
        others = (grouped.sum(1, keepdim=True) - grouped) / (group_size - 1)  # mean of the other G − 1
        return (grouped - others).reshape(-1)
    raise ValueError(f"unknown group baseline {algorithm!r}; allowed: grpo, rloo")


class GroupBaselineTrainer(RLHFTrainer):
    """RLHFTrainer with a group baseline (config.algorithm grpo or rloo) in place of the critic."""

    uses_critic = False

    def rollout_prompts(self, prompts: list[str], batch_size: int) -> list[str]:
        """Consecutive groups of G completions share a prompt; the groups cycle through the prompts."""
        group_size = self.config.group_size
        if batch_size % group_size:
            raise ConfigError(f"{batch_size} completions per process are not whole groups of group_size = {group_size}")
        return [prompts[group % len(prompts)] for group in range(batch_size // group_size) for _ in range(group_size)]

    def advantages(self, rollout: Rollout, token_rewards: TokenRewards) -> tuple[torch.Tensor, torch.Tensor]:
        """Â_i at every real token of completion i; the 'returns' are unused (no critic): zeros."""
        mask = rollout.batch.mask  # (B, T)
        sequence_rewards = token_rewards.rewards.sum(dim=1)  # (B,) R_i = score − β Σ_t KL_t
        advantages = group_advantages(sequence_rewards, self.config.group_size, self.config.algorithm)
        token_advantages = advantages.unsqueeze(1) * mask.to(advantages.dtype)  # (B, T)
        return token_advantages, torch.zeros_like(token_advantages)

    def minibatch_loss(self, minibatch: dict[str, torch.Tensor]) -> MinibatchLoss:
        """L = L_clip − c_e·H + β·(KL loss term) on b completions (no value loss)."""
        config = self.config
        tokens = TokenBatch(minibatch["tokens"], minibatch["prompt_lengths"], minibatch["completion"], minibatch["mask"])
        mask = tokens.mask  # (b, T)
        scored = score_completions(self.policy, tokens, config.temperature, with_entropy=True,
                                   with_distributions=self.kl_loss_needs_distributions)
        policy_loss = clipped_surrogate_loss(scored.log_probs, minibatch["log_probs"], minibatch["advantages"],
                                             config.clip_coef, mask)
        entropy = entropy_bonus(scored.entropy, mask)
        kl_loss = self.kl_loss(scored, minibatch)
        zero = torch.zeros((), dtype=policy_loss.dtype)
        return MinibatchLoss(
            loss=ppo_loss(policy_loss, zero, entropy, 0.0, config.ent_coef) + kl_loss,
            log_ratio=(scored.log_probs.detach() - minibatch["log_probs"]) * mask,
            mask=mask,
            terms={"policy_loss": policy_loss, "entropy": entropy, "kl_loss": kl_loss},
        )


def trainer_class(algorithm: str) -> type[RLHFTrainer]:
    """The trainer of config.algorithm: RLHFTrainer for ppo, GroupBaselineTrainer for grpo and rloo."""
    return RLHFTrainer if algorithm == "ppo" else GroupBaselineTrainer
