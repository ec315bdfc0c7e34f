"""PPO's losses and diagnostics as pure tensor functions.

Notation: r_t(θ) = π_θ(a_t | s_t) / π_θ_old(a_t | s_t) is the probability ratio, Â_t the
advantage, ε the clip coefficient. Every function takes an optional boolean `mask` of
the same shape as its inputs; positions where it is False (padding after an EOS token,
for instance) do not count. Without a mask, every position counts equally.

The total loss a PPO step minimises is

    L(θ) = L_policy − c_e · H[π_θ] + c_v · L_value .
"""

from __future__ import annotations

import torch


def masked_mean(x: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """mean of x over the positions where mask is True (all positions if mask is None)."""
    if mask is None:
        return x.mean()
    mask = mask.to(x.dtype)
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def normalize_advantages(
    advantages: torch.Tensor, mask: torch.Tensor | None = None, eps: float = 1e-8
) -> torch.Tensor:
    """Whiten: (Â − mean Â) / (std Â + eps), statistics over the masked positions."""
    mean = masked_mean(advantages, mask)
    variance = masked_mean((advantages - mean) ** 2, mask)
    count = advantages.numel() if mask is None else int(mask.sum())
    if count > 1:  # unbiased variance, as torch.std
        variance = variance * count / (count - 1)
    whitened = (advantages - mean) / (variance.sqrt() + eps)
    return whitened if mask is None else whitened * mask.to(advantages.dtype)


def clipped_surrogate_loss(
    new_log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    clip_coef: float,
    mask: torch.Tensor | None = None,
    *,
    clip_coef_high: float | None = None,
) -> torch.Tensor:
    """L_policy = −E[ min( r_t(θ) Â_t, clip(r_t(θ), 1 − ε, 1 + ε) Â_t ) ].

    The minimum makes the objective pessimistic: once the ratio has moved past 1 + ε
    (for Â > 0) or below 1 − ε (for Â < 0) the clipped term is the smaller one and is
    constant in θ, so that sample contributes no gradient. `clip_coef_high` (ε_high)
    replaces the upper bound, clip(r_t(θ), 1 − ε, 1 + ε_high): DAPO's clip-higher.
    """
    return -masked_mean(clipped_surrogate_objective(new_log_probs, old_log_probs, advantages, clip_coef,
                                                    clip_coef_high=clip_coef_high), mask)


def clipped_surrogate_objective(
    new_log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    clip_coef: float,
    *,
    clip_coef_high: float | None = None,
) -> torch.Tensor:
    """Per sample, min( r_t(θ) Â_t, clip(r_t(θ), 1 − ε, 1 + ε_high) Â_t ), ε_high = ε unless given.

    With ε_high > ε (clip-higher, Yu et al. 2025, DAPO) a sample with Â_t > 0 keeps its
    gradient until its ratio reaches 1 + ε_high: a rare token can gain more per update,
    while Â_t < 0 is still clipped at 1 − ε. `clipped_surrogate_loss` is −(its mean).
    """
    ratio = torch.exp(new_log_probs - old_log_probs)
    unclipped = ratio * advantages
    upper = clip_coef if clip_coef_high is None else clip_coef_high
    clipped = torch.clamp(ratio, 1.0 - clip_coef, 1.0 + upper) * advantages
    return torch.min(unclipped, clipped)


def dual_clip_surrogate_objective(
    new_log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    clip_coef: float,
    dual_clip: float,
) -> torch.Tensor:
    """Per sample, dual-clip PPO's objective (Ye et al. 2020), with c = dual_clip > 1:

        Â_t ≥ 0:  min( r_t Â_t, clip(r_t, 1 − ε, 1 + ε) Â_t )
        Â_t < 0:  max( min( r_t Â_t, clip(r_t, 1 − ε, 1 + ε) Â_t ),  c · Â_t )

    For Â_t < 0 the clipped objective equals r_t Â_t once r_t > 1 + ε, unbounded below as r_t
    grows; the second max holds it at c·Â_t for r_t > c, where the sample's gradient is 0.
    """
    clipped = clipped_surrogate_objective(new_log_probs, old_log_probs, advantages, clip_coef)
    return torch.where(advantages < 0, torch.max(clipped, dual_clip * advantages), clipped)


def dual_clip_surrogate_loss(
    new_log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    clip_coef: float,
    dual_clip: float,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """L_policy = −E[ dual-clip objective ] (`dual_clip_surrogate_objective`)."""
    return -masked_mean(dual_clip_surrogate_objective(new_log_probs, old_log_probs, advantages, clip_coef, dual_clip),
                        mask)


def dual_clip_fraction(
    new_log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    advantages: torch.Tensor,
    dual_clip: float,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Share of samples held at the dual-clip bound: E[ 1{Â_t < 0 and r_t(θ) > c} ]."""
    held = (advantages < 0) & (torch.exp(new_log_probs - old_log_probs) > dual_clip)
    return masked_mean(held.to(new_log_probs.dtype), mask)


def value_loss(
    new_values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    clip_coef: float | None = None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """L_value = ½ E[(V_θ(s_t) − R_t)²], or with value clipping (clip_coef = ε_v)

        V_clip = V_old + clip(V_θ − V_old, −ε_v, ε_v)
        L_value = ½ E[ max((V_θ − R_t)², (V_clip − R_t)²) ].
    """
    squared_error = (new_values - returns) ** 2
    if clip_coef is not None:
        clipped_values = old_values + torch.clamp(new_values - old_values, -clip_coef, clip_coef)
        squared_error = torch.max(squared_error, (clipped_values - returns) ** 2)
    return 0.5 * masked_mean(squared_error, mask)


def ppo_loss(
    policy_loss: torch.Tensor, value_loss: torch.Tensor, entropy: torch.Tensor, vf_coef: float, ent_coef: float
) -> torch.Tensor:
    """L(θ) = L_policy − c_e · H + c_v · L_value; with c_e = 0 the entropy is left out of the graph."""
    loss = policy_loss + vf_coef * value_loss
    if ent_coef:
        loss = loss - ent_coef * entropy
    return loss


def transition_loss(new_log_probs: torch.Tensor, entropy: torch.Tensor, new_values: torch.Tensor,
                    minibatch: dict[str, torch.Tensor], advantages: torch.Tensor, policy_loss, config):
    """(L, its terms) on b transitions: L = L_policy − c_e·H + c_v·L_value.

    `minibatch` holds the rollout's log π_old ("log_probs"), V_old ("values") and R
    ("returns"); `advantages` are Â as the update uses them (whitened or not);
    `policy_loss(new_log_probs, old_log_probs, advantages)` is L_policy (the clipped
    surrogate, or a variant's); `config` supplies c_v, c_e and ε_v (vf_coef, ent_coef,
    value_clip_coef). The terms (policy_loss, value_loss, entropy, value_clip_fraction)
    are what the logs show.
    """
    policy = policy_loss(new_log_probs, minibatch["log_probs"], advantages)
    critic = value_loss(new_values, minibatch["values"], minibatch["returns"], config.value_clip_coef)
    entropy_mean = entropy_bonus(entropy)
    return ppo_loss(policy, critic, entropy_mean, config.vf_coef, config.ent_coef), {
        "policy_loss": policy,
        "value_loss": critic,
        "entropy": entropy_mean,
        "value_clip_fraction": value_clip_fraction(new_values, minibatch["values"], config.value_clip_coef),
    }


def entropy_bonus(entropy: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """H[π_θ] averaged over samples; it enters the loss as −c_e · H to keep exploring."""
    return masked_mean(entropy, mask)


def kl_estimate(
    log_ratio: torch.Tensor, estimator: str = "k3", mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Monte-Carlo estimate of KL(q ‖ p) from samples x ~ q (Schulman, 2020).

    `log_ratio` = log p(x) − log q(x), i.e. log ρ with ρ = p(x) / q(x). Per sample:

        k1 = −log ρ              unbiased, high variance, can be negative
        k2 = ½ (log ρ)²          biased, low variance, ≥ 0
        k3 = (ρ − 1) − log ρ     unbiased, low variance, ≥ 0

    For PPO's "approx KL" between the rollout policy q = π_old and the updated policy
    p = π_θ, log_ratio = log π_θ(a) − log π_old(a). For the KL of a language-model
    policy q = π_θ to its reference p = π_ref, log_ratio = log π_ref(y) − log π_θ(y).
    """
    return masked_mean(kl_per_sample(log_ratio, estimator), mask)


def kl_per_sample(log_ratio: torch.Tensor, estimator: str = "k3") -> torch.Tensor:
    """The per-sample terms k1, k2 or k3 of `kl_estimate` (same shape as log_ratio)."""
    if estimator == "k1":
        return -log_ratio
    if estimator == "k2":
        return 0.5 * log_ratio**2
    if estimator == "k3":
        return torch.expm1(log_ratio) - log_ratio
    raise ValueError(f"unknown KL estimator {estimator!r}; allowed: 'k1', 'k2', 'k3'")


def value_clip_fraction(
    new_values: torch.Tensor,
    old_values: torch.Tensor,
    clip_coef: float | None,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Share of samples whose value moved further than ε_v from V_old: E[ 1{|V_θ − V_old| > ε_v} ] (0 unclipped)."""
    if clip_coef is None:
        return torch.zeros((), dtype=new_values.dtype, device=new_values.device)
    moved = ((new_values.detach() - old_values).abs() > clip_coef).to(new_values.dtype)
    return masked_mean(moved, mask)


def clip_fraction(
    new_log_probs: torch.Tensor,
    old_log_probs: torch.Tensor,
    clip_coef: float,
    mask: torch.Tensor | None = None,
    *,
    clip_coef_high: float | None = None,
) -> torch.Tensor:
    """Fraction of samples whose ratio left [1 − ε, 1 + ε]: E[ 1{|r_t(θ) − 1| > ε} ]
    (left [1 − ε, 1 + ε_high] when `clip_coef_high` is given)."""
    return log_ratio_clip_fraction(new_log_probs - old_log_probs, clip_coef, mask, clip_coef_high=clip_coef_high)


def log_ratio_clip_fraction(log_ratio: torch.Tensor, clip_coef: float, mask: torch.Tensor | None = None, *,
                            clip_coef_high: float | None = None) -> torch.Tensor:
    """`clip_fraction` from log r_t(θ) directly: E[ 1{|exp(log r_t) − 1| > ε} ]."""
    return masked_mean(outside_clip_range(torch.exp(log_ratio), clip_coef, clip_coef_high).to(log_ratio.dtype), mask)


def outside_clip_range(ratio: torch.Tensor, clip_coef: float, clip_coef_high: float | None = None) -> torch.Tensor:
    """1{ r_t ∉ [1 − ε, 1 + ε] } = 1{|r_t − 1| > ε}, or 1{ r_t < 1 − ε or r_t > 1 + ε_high } with ε_high given."""
    if clip_coef_high is None:
        return (ratio - 1.0).abs() > clip_coef
    return (ratio < 1.0 - clip_coef) | (ratio > 1.0 + clip_coef_high)


def explained_variance(
    predictions: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor | None = None
) -> float:
    """1 − Var[R − V] / Var[R]: 1 is a perfect critic, 0 predicts only the mean,
    negative is worse than predicting the mean. NaN when the targets do not vary."""
    if mask is not None:
        predictions, targets = predictions[mask], targets[mask]
    target_variance = targets.var(unbiased=False)
    if target_variance == 0:
        return float("nan")
    return float(1.0 - (targets - predictions).var(unbiased=False) / target_variance)
