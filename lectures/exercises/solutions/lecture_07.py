"""Solutions to lectures/exercises/lecture_07.py."""

import torch


def approx_kl(new_log_probs, old_log_probs, estimator):
    log_ratio = new_log_probs - old_log_probs
    if estimator == "k1":
        return float((-log_ratio).mean())
    return float((torch.expm1(log_ratio) - log_ratio).mean())


def gradient_steps_taken(minibatch_kls, target_kl):
    for step, kl in enumerate(minibatch_kls):
        if target_kl is not None and kl > target_kl:
            return step
    return len(minibatch_kls)
