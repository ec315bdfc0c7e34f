"""Solutions to lectures/exercises/lecture_09.py."""

import torch


def adapt_beta(beta, kl, kl_target):
    if kl > 1.5 * kl_target:
        return 2 * beta
    if kl < kl_target / 1.5:
        return beta / 2
    return beta


def kl_penalty_loss(new_log_probs, old_log_probs, advantages, beta):
    log_ratio = new_log_probs - old_log_probs
    return -(log_ratio.exp() * advantages).mean() + beta * (torch.expm1(log_ratio) - log_ratio).mean()
