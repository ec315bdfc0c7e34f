"""Solutions to lectures/exercises/lecture_05.py."""

import torch


def clipped_surrogate_loss(new_log_probs, old_log_probs, advantages, epsilon):
    ratio = (new_log_probs - old_log_probs).exp()
    return -torch.min(ratio * advantages, ratio.clamp(1 - epsilon, 1 + epsilon) * advantages).mean()


def clip_fraction(new_log_probs, old_log_probs, epsilon):
    ratio = (new_log_probs - old_log_probs).exp()
    return float(((ratio - 1).abs() > epsilon).float().mean())


def has_gradient(ratio, advantage, epsilon):
    if advantage > 0:
        return ratio < 1 + epsilon
    return ratio > 1 - epsilon


def predict_surrogate_gradient(ratio, advantage):
    # ∂(r·Â)/∂log π = r·Â where the min picks the unclipped term; 0 where it picks the clipped constant
    clipped = (advantage > 0 and ratio > 1.2) or (advantage < 0 and ratio < 0.8)
    return 0.0 if clipped else ratio * advantage
