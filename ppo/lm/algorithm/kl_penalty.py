"""Where the KL penalty goes: a detached reward, a differentiated loss term, or both.

The objective is J(π) = E_y~π[score(y)] − β·D(π, π_ref). A sample-based trainer turns the
penalty into a surrogate whose gradient, in expectation over sampled completions, should
be β·∇D. Two ways exist, and they are not interchangeable:

  * in the reward (detached, like the score): the policy-gradient term −Â_t·∇log π(y_t|s_t)
    credits the action y_t with the penalty of everything that follows it;
  * in the loss (differentiated): +β·∇(term) at each visited state s_t, states held fixed.

With ℓ_t = log π(y_t|s_t) − log π_ref(y_t|s_t), ρ_t = e^{−ℓ_t}, and per-state divergences
KL_t = KL(π(·|s_t) ‖ π_ref(·|s_t)) and KL_t^rev = KL(π_ref(·|s_t) ‖ π(·|s_t)), the expected
gradients (every completion enumerated in tests/test_kl_gradients.py) are:

    reward-k1  r_t −= β·ℓ_t                     E[Σ_t ∇log π(y_t|s_t)·Σ_{t'≥t} ℓ_t'] = ∇KL(π ‖ π_ref)
               (the score-function identity ∇E_π[ℓ] = E_π[ℓ·∇log π] + E_π[∇ℓ], and
               E_π[∇ℓ] = E_π[∇log π] = 0)                      → the RLHF objective, exactly
    loss-full  loss += β·KL_t   and   r_t −= β·KL_t (detached)
               chain rule: KL(π ‖ π_ref) = E_π[Σ_t KL_t], so
               ∇KL = E[Σ_t ∇KL_t] (the loss: the decision at s_t)
                   + E[Σ_t KL_t·∇log P(s_t)] (the reward: the moves that led to s_t; KL_t is
                     a function of s_t alone, so it adds nothing to the action taken there)
                                                               → ∇KL(π ‖ π_ref), exactly,
               without the noise of the sampled token. Either half alone is wrong.
    loss-k3    loss += β·k3_t,  k3_t = (ρ_t − 1) − log ρ_t,  π_θ differentiated in ρ_t
               ∇k3_t = (1 − ρ_t)·∇log π(y_t|s_t), and E_{y_t~π}[(1 − ρ_t)∇log π] =
               −Σ_v π_ref(v|s_t)∇log π(v|s_t) = ∇KL_t^rev   → E_π[Σ_t ∇KL_t^rev]: the reverse
               KL at each state the policy visits, the visiting held fixed. That is the
               gradient of neither sequence-level KL (∇KL(π_ref ‖ π) weights states by
               π_ref's visits), and its fixed point is not π* ∝ π_ref·exp(score/β): at each
               state π(a|s) = β·π_ref(a|s)/(λ_s − Q(s,a)). (GRPO, Shao et al. 2024.)

reward-k1 and loss-full have the same expectation but not the same noise where it matters.
At π*, score(y) − β·ℓ(y) = β·log Z for every y: with k1 in the reward every completion's
return is the same constant, so the gradient noise vanishes at the optimum. With loss-full
the return score(y) − β·Σ_t KL_t still varies there, and only its mean cancels the loss
term: a run ends near π* but jitters around it by an amount set by the batch size and the
learning rate (ppo-rlhf at β = 1, 128 completions, 20 iterations: final KL within ±5% of
π*'s for reward-k1 over 9 seeds, within ±25% for loss-full, ±5% with 512 completions).

Refused, because they do not regularise: k3 in the detached reward (at one state,
E_π[k3·∇log π] = ∇KL(π‖π_ref) − ∇KL(π_ref‖π), about 0 near π_ref), the exact KL_t in the
detached reward alone (a function of s_t, it drops out of the advantage of the token chosen
there), and k1 in the loss (E_π[∇ℓ_t] = E_π[∇log π] = 0). Logging still reports k1, k3 and
the exact sum (rlhf_trainer).
"""

from __future__ import annotations

import torch

from ppo.lm.algorithm.rollout import exact_token_kl
from ppo.algorithm.losses import kl_per_sample

KL_PENALTIES = ("reward-k1", "loss-full", "loss-k3")
# the only placement whose penalty is all in the loss: a group-normalised reward would rescale any other
GROUP_NORMALISED_KL_PENALTIES = ("loss-k3",)
REMOVED_ESTIMATORS = {
    "k3": "k3 in the detached reward estimates ∇KL(π‖π_ref) − ∇KL(π_ref‖π), about 0 near π_ref: β is ignored",
    "full": "the exact per-state KL in the detached reward drops out of the advantage of the token chosen there, "
            "so the decision itself is never penalised",
}


def default_kl_penalty(algorithm: str) -> str:
    """reward-k1 for ppo and rloo; loss-k3 for grpo, as published (its std normalisation would rescale a reward KL)."""
    return "loss-k3" if algorithm == "grpo" else "reward-k1"


def check_kl_penalty(placement: str) -> None:
    if placement not in KL_PENALTIES:
        raise ValueError(f"unknown KL penalty {placement!r}; allowed: {', '.join(KL_PENALTIES)}")


def reward_kl(
    placement: str,
    policy_log_probs: torch.Tensor,  # (B, T) log π(y_t | s_t)
    reference_log_probs: torch.Tensor,  # (B, T) log π_ref(y_t | s_t)
    mask: torch.Tensor,  # (B, T) bool
    exact_kl: torch.Tensor | None = None,  # (B, T) KL(π(·|s_t) ‖ π_ref(·|s_t)), needed by loss-full
) -> torch.Tensor:
    """The per-token KL the detached reward pays, r_t −= β·(this): ℓ_t, KL_t or 0 (loss-k3). (B, T)."""
    check_kl_penalty(placement)
    real = mask.to(policy_log_probs.dtype)
    if placement == "reward-k1":
        return (policy_log_probs - reference_log_probs) * real
    if placement == "loss-full":
        if exact_kl is None:
            raise ValueError("the loss-full penalty needs the exact per-token KL (ppo.lm.algorithm.rollout.exact_token_kl)")
        return exact_kl * real
    return torch.zeros_like(policy_log_probs)


def penalised_kl(placement: str, policy_log_probs, reference_log_probs, mask, exact_kl=None) -> torch.Tensor:
    """The per-token KL value each placement charges β for (ℓ_t, KL_t or k3_t), for the non-score reward. (B, T)."""
    if placement == "loss-k3":
        return kl_per_sample(reference_log_probs - policy_log_probs, "k3") * mask.to(policy_log_probs.dtype)
    return reward_kl(placement, policy_log_probs, reference_log_probs, mask, exact_kl)


def kl_loss_per_token(
    placement: str,
    policy_log_probs: torch.Tensor,  # (B, T) log π_θ(y_t | s_t), with gradient
    reference_log_probs: torch.Tensor,  # (B, T) log π_ref(y_t | s_t)
    mask: torch.Tensor,  # (B, T) bool
    policy_log_p: torch.Tensor | None = None,  # (B, T, V) log π_θ(· | s_t), with gradient (loss-full)
    reference_log_p: torch.Tensor | None = None,  # (B, T, V) log π_ref(· | s_t) (loss-full)
) -> torch.Tensor:
    """The differentiated term the loss adds, β times its masked mean: k3_t, KL_t, or 0 (reward-k1). (B, T)."""
    check_kl_penalty(placement)
    real = mask.to(policy_log_probs.dtype)
    if placement == "loss-k3":
        return kl_per_sample(reference_log_probs - policy_log_probs, "k3") * real
    if placement == "loss-full":
        if policy_log_p is None or reference_log_p is None:
            raise ValueError("the loss-full penalty needs the next-token distributions of the policy and the reference")
        return exact_token_kl(policy_log_p, reference_log_p, mask)
    return torch.zeros_like(policy_log_probs)
