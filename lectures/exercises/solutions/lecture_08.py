"""Solutions to lectures/exercises/lecture_08.py."""

import torch


def whiten(advantages, eps=1e-8):
    return (advantages - advantages.mean()) / (advantages.std() + eps)


def shuffled_minibatches(batch_size, num_minibatches, generator):
    return list(torch.randperm(batch_size, generator=generator).chunk(num_minibatches))


def reward_with_bootstrap(reward, truncated, final_value, gamma):
    return reward + gamma * truncated.float() * final_value
