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
penalty is β·k3 differentiated in the loss (kl_penalty loss-k3, `ppo.lm.algorithm.kl_penalty`). A
KL inside R_i would be divided by the group's std too: in a group whose scores tie, Â_i
would be −(K_i − mean K)/std K whatever β is, a penalty whose strength changes from group
to group. Everything else is PPO's: the sampler, the per-token
log-probs at temperature τ, the clipped surrogate with ε, and `ppo.algorithm.update.run_update`
(epochs, minibatches, gradient clipping, KL early stop). There is no value loss and
no GAE, and one network fewer to train.

GRPO's divisor (`advantage_scale`), with A_i = R_i − mean_group R:

    group-std (as published):           Â_i = A_i / (std_group R + ε)
    batch-std (REINFORCE++ w/ baseline, Hu et al. 2025):
                                        Â_i = A_i / (std_batch A + ε)   (std over all B completions)
    none (Dr. GRPO, Liu et al. 2025):   Â_i = A_i

For a 0/1 score with success rate p, the expected gradient of a completion's term is
c(p)·∇p (`experiments/studies/grpo_biases.py` derives it and sums it exactly over the binomial
number of successes). none gives c = 1 − 1/G for every p: an unbiased gradient of p,
scaled. group-std divides by the group's std, small when nearly all of its G scores agree,
so it weighs a prompt the policy nearly always (p → 1) or never (p → 0) solves up against
one it solves half the time — a difficulty bias that grows with G towards the factor
1/(2√(p(1 − p))) of G → ∞ (c(0.05)/c(0.5) = 1.33 at G = 8, 1.69 at G = 16; none at G ≤ 3).
batch-std divides every prompt by the same number, so it keeps none's weighting. A group
whose scores all tie (zero spread) has A_i = 0 under every divisor: its scores say nothing,
only a KL term moves it; its share is logged each iteration as zero_spread_groups.

How a minibatch of b completions (lengths |y_i|) turns the per-token terms ℓ_it of the
clipped surrogate, ℓ_it = −min(r_it Â_i, clip(r_it, 1 − ε, 1 + ε_high) Â_i), and of a KL
loss term (β·k3_it) into one loss (`loss_averaging`, `average_tokens`):

    token (default; DAPO, Yu et al. 2025):      L = Σ_it ℓ_it / Σ_i |y_i|
    sequence (published GRPO):                  L = (1/b) Σ_i (1/|y_i|) Σ_t ℓ_it
    constant (Dr. GRPO):                        L = Σ_it ℓ_it / (b · max_new_tokens)

With sequence averaging each token of y_i carries Â_i/|y_i|: among wrong answers (Â < 0)
a long one is pushed down less per token than a short one, and among right answers a
short one gains more (a length bias). Token and constant averaging give every token the
same weight within a minibatch; they differ in the denominator, which for token averaging
depends on the minibatch's lengths. `experiments/studies/grpo_biases.py` computes both biases
exactly. ε_high (`clip_coef_high`, clip-higher) applies to every algorithm.
"""

from __future__ import annotations

import torch

from ppo.config import ConfigError
from ppo.parallel.distributed import SINGLE_PROCESS, World
from ppo.lm.algorithm.rewards import TokenRewards
from ppo.lm.trainers.rlhf_trainer import RLHFTrainer
from ppo.lm.algorithm.rollout import Rollout, TokenBatch, score_completions
from ppo.algorithm.losses import clipped_surrogate_objective, entropy_bonus, masked_mean, ppo_loss
from ppo.algorithm.update import MinibatchLoss

GROUP_STD_EPS = 1e-6


def group_advantages(rewards: torch.Tensor, group_size: int, algorithm: str, scale: str = "group-std",
                     world: World = SINGLE_PROCESS) -> torch.Tensor:
    """(B,) sequence rewards, B/G consecutive groups of G completions of one prompt -> (B,) advantages.

    grpo's `scale` (the module docstring): group-std, batch-std (the std over every
    process's completions together) or none; rloo's Â is never scaled.
    """
    grouped = rewards.view(-1, group_size)  # (B / G, G)
    if algorithm == "grpo":
        centred = grouped - grouped.mean(1, keepdim=True)  # A_i = R_i − mean_group R
        if scale == "group-std":
            return (centred / (grouped.std(1, keepdim=True) + GROUP_STD_EPS)).reshape(-1)
        if scale == "batch-std":
            return (centred / (batch_std(centred, world) + GROUP_STD_EPS)).reshape(-1)
        if scale == "none":
            return centred.reshape(-1)
        raise ValueError(f"unknown advantage scale {scale!r}; allowed: group-std, batch-std, none")
    if algorithm == "rloo":
        others = (grouped.sum(1, keepdim=True) - grouped) / (group_size - 1)  # mean of the other G − 1
        return (grouped - others).reshape(-1)
    raise ValueError(f"unknown group baseline {algorithm!r}; allowed: grpo, rloo")


def batch_std(centred: torch.Tensor, world: World = SINGLE_PROCESS) -> torch.Tensor:
    """Unbiased std of the N = B·K group-centred rewards of all K processes: √(Σ A_i² / (N − 1)).

    Each group's A_i sum to 0, so the batch mean of A is 0 and only Σ A² is needed.
    """
    moments = world.sum_(torch.stack([(centred.double() ** 2).sum(), torch.tensor(float(centred.numel()),
                                                                                     dtype=torch.float64)]))
    squares, count = moments
    return (squares / (count - 1).clamp(min=1.0)).sqrt().to(centred.dtype)


def zero_spread_fraction(scores: torch.Tensor, group_size: int) -> float:
    """Share of the B/G groups whose G scores all tie (std 0): Â_i = 0 for all of them."""
    grouped = scores.view(-1, group_size)  # (B / G, G)
    return float((grouped.amax(1) == grouped.amin(1)).double().mean())


def average_tokens(per_token: torch.Tensor, mask: torch.Tensor, averaging: str, max_new_tokens: int) -> torch.Tensor:
    """(b, T) per-token terms ℓ_it, zero or not after EOS -> one number (the module docstring's loss_averaging).

    token: Σ_it ℓ_it / Σ_i |y_i| (ppo.algorithm.losses.masked_mean); sequence: (1/b) Σ_i (1/|y_i|) Σ_t ℓ_it;
    constant: Σ_it ℓ_it / (b · max_new_tokens). Only the positions where mask is True count.
    """
    if averaging == "token":
        return masked_mean(per_token, mask)
    real = mask.to(per_token.dtype)
    sums = (per_token * real).sum(1)  # (b,) Σ_t ℓ_it
    if averaging == "sequence":
        return (sums / real.sum(1).clamp(min=1.0)).mean()
    if averaging == "constant":
        return sums.sum() / (sums.numel() * max_new_tokens)
    raise ValueError(f"unknown loss averaging {averaging!r}; allowed: token, sequence, constant")


class GroupBaselineTrainer(RLHFTrainer):
    """RLHFTrainer with a group baseline (config.algorithm grpo or rloo) in place of the critic."""

    uses_critic = False
    zero_spread = float("nan")  # the last rollout's share of groups whose scores all tie

    def rollout_prompts(self, prompts: list[str], batch_size: int) -> list[str]:
        """Consecutive groups of G completions share a prompt; the groups cycle through the prompts."""
        group_size = self.config.group_size
        if batch_size % group_size:
            raise ConfigError(f"{batch_size} completions per process are not whole groups of group_size = {group_size}")
        return [prompts[group % len(prompts)] for group in range(batch_size // group_size) for _ in range(group_size)]

    def advantages(self, rollout: Rollout, token_rewards: TokenRewards) -> tuple[torch.Tensor, torch.Tensor]:
        """Â_i at every real token of completion i; the 'returns' are unused (no critic): zeros."""
        config = self.config
        mask = rollout.batch.mask  # (B, T)
        sequence_rewards = token_rewards.rewards.sum(dim=1)  # (B,) R_i = score − β Σ_t KL_t
        advantages = group_advantages(sequence_rewards, config.group_size, config.algorithm,
                                      config.effective_advantage_scale, self.world)
        self.zero_spread = zero_spread_fraction(token_rewards.scores, config.group_size)
        token_advantages = advantages.unsqueeze(1) * mask.to(advantages.dtype)  # (B, T)
        return token_advantages, torch.zeros_like(token_advantages)

    def run_iteration(self) -> dict[str, float]:
        """RLHFTrainer's iteration, with the share of groups whose scores all tie (zero_spread_groups)."""
        metrics = super().run_iteration()
        metrics["zero_spread_groups"] = self.world.mean_of(self.zero_spread)  # equal shares of groups per process
        return metrics

    def token_average(self, per_token: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The loss_averaging of the config (`average_tokens`)."""
        return average_tokens(per_token, mask, self.config.loss_averaging, self.config.max_new_tokens)

    def minibatch_loss(self, minibatch: dict[str, torch.Tensor]) -> MinibatchLoss:
        """L = L_clip − c_e·H + β·(KL loss term) on b completions (no value loss); L_clip and the KL term averaged
        over tokens as loss_averaging says."""
        config = self.config
        tokens = TokenBatch(minibatch["tokens"], minibatch["prompt_lengths"], minibatch["completion"], minibatch["mask"])
        mask = tokens.mask  # (b, T)
        scored = score_completions(self.policy, tokens, config.temperature, with_entropy=True,
                                   with_distributions=self.kl_loss_needs_distributions)
        surrogate = clipped_surrogate_objective(scored.log_probs, minibatch["log_probs"], minibatch["advantages"],
                                                config.clip_coef, clip_coef_high=config.clip_coef_high)  # (b, T)
        policy_loss = -self.token_average(surrogate, mask)
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
