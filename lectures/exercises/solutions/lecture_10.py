"""Solutions to lectures/exercises/lecture_10.py."""

import math

import torch


def gaussian_log_prob(actions, mean, log_std):
    return (-(actions - mean) ** 2 / (2 * torch.exp(2 * log_std)) - log_std - 0.5 * math.log(2 * math.pi)).sum(dim=-1)


def gaussian_entropy(log_std):
    return (0.5 * math.log(2 * math.pi * math.e) + log_std).sum()


def merge_moments(mean_a, var_a, count_a, mean_b, var_b, count_b):
    count = count_a + count_b
    delta = mean_b - mean_a
    mean = mean_a + delta * count_b / count
    variance = (var_a * count_a + var_b * count_b + delta**2 * count_a * count_b / count) / count
    return mean, variance, count
