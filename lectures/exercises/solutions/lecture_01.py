"""Solutions to lectures/exercises/lecture_01.py."""

import torch


def rewards_to_go(rewards: torch.Tensor, gamma: float) -> torch.Tensor:
    returns = torch.zeros_like(rewards)
    running = 0.0
    for t in reversed(range(len(rewards))):
        running = rewards[t] + gamma * running
        returns[t] = running
    return returns


def discounted_back_to_start(returns: torch.Tensor, gamma: float) -> torch.Tensor:
    return gamma ** torch.arange(len(returns), dtype=returns.dtype) * returns


def reinforce_loss(log_probs: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    return -(log_probs * weights.detach()).sum()


def batch_size_where_noise_equals_signal(gradients: torch.Tensor) -> float:
    mean = gradients.mean(dim=0)
    trace_of_covariance = ((gradients - mean) ** 2).sum(dim=1).mean()
    return float(trace_of_covariance / mean.pow(2).sum())
