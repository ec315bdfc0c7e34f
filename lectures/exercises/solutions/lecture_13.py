"""Solutions to lectures/exercises/lecture_13.py."""

import math

import torch.nn.functional as F


def bradley_terry_loss(chosen_scores, rejected_scores):
    return F.softplus(rejected_scores - chosen_scores).mean()


def group_normalised_advantages(rewards, eps=1e-6):
    return (rewards - rewards.mean(dim=1, keepdim=True)) / (rewards.std(dim=1, keepdim=True) + eps)


def leave_one_out_advantages(rewards):
    size = rewards.shape[1]
    others_mean = (rewards.sum(dim=1, keepdim=True) - rewards) / (size - 1)
    return rewards - others_mean


def predict_best_of_n_kl(n):
    # ∫ n u^(n−1) log(n u^(n−1)) du = log n + (n − 1) ∫ n u^(n−1) log u du = log n − (n − 1)/n
    return math.log(n) - (n - 1) / n
