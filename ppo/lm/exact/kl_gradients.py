"""Exact expected gradients of every KL placement, by enumerating all completions of a tiny model.

For a model small enough that every completion y of at most T tokens can be listed, the
expected gradient of a trainer's surrogate is a finite sum. Per completion, the surrogate
at r_t(θ) = 1 (the first minibatch of an update) is

    S(y) = −Σ_t Â_t · log π_θ(y_t | s_t)  +  Σ_t term_t(θ)

with Â_t the reward-to-go of the detached rewards r_t = −KL_t (γ = λ = 1, no critic: a
state-dependent baseline changes no expectation) and term_t the differentiated loss term.
Then E_π[∇S] = Σ_y π(y)·∇S(y), computed with autograd with π(y) held fixed. It is set
against the exact gradient of each candidate divergence (β = 1):

    ∇KL(π ‖ π_ref)       = ∇ Σ_y π_θ(y) · log(π_θ(y) / π_ref(y))
    ∇ state reverse KL   = ∇ Σ_y sg[π(y)] · Σ_t KL(π_ref(·|s_t) ‖ π_θ(·|s_t))   (visits held fixed)
    ∇KL(π_ref ‖ π)       = ∇ Σ_y π_ref(y) · log(π_ref(y) / π_θ(y))

The rewards, advantages and loss terms come from the functions the trainers call
(`ppo.lm.algorithm.rewards`, `ppo.lm.trainers.rlhf_trainer.token_advantages`, `ppo.lm.algorithm.kl_penalty`); the
placements the trainers refuse are listed too, to show why.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import torch

from ppo.lm.algorithm.kl_penalty import kl_loss_per_token
from ppo.lm.models.gpt import GPT
from ppo.lm.algorithm.rewards import assemble_rewards, per_token_kl
from ppo.lm.trainers.rlhf_trainer import token_advantages
from ppo.lm.algorithm.rollout import TokenBatch, exact_token_kl, score_completions

# name -> (what the detached reward charges, what the loss differentiates); None = nothing there
CHECKED_PLACEMENTS = {
    "reward-k1": ("reward-k1", None),
    "loss-full": ("loss-full", "loss-full"),
    "loss-k3": (None, "loss-k3"),
    "k3 in the reward (refused)": ("k3", None),
    "exact KL in the reward alone (refused)": ("full", None),
    "exact KL in the loss alone": (None, "loss-full"),
    "k1 in the loss (not offered)": (None, "k1"),
}


def all_completions(vocab_size: int, eos_id: int, max_new_tokens: int) -> list[tuple[int, ...]]:
    """Every completion: EOS ends it; one without EOS runs to max_new_tokens. Any token may be drawn."""
    out = []
    for length in range(1, max_new_tokens + 1):
        for completion in itertools.product(range(vocab_size), repeat=length):
            if eos_id not in completion[:-1] and (completion[-1] == eos_id or length == max_new_tokens):
                out.append(completion)
    return out


def enumerated_batch(prompt_ids: list[int], vocab_size: int, eos_id: int, pad_id: int, max_new_tokens: int) -> TokenBatch:
    """All completions of one prompt as one right-padded TokenBatch (N rows)."""
    return completions_batch(prompt_ids, all_completions(vocab_size, eos_id, max_new_tokens), pad_id, max_new_tokens)


def completions_batch(prompt_ids: list[int], completions: list, pad_id: int, width: int | None = None) -> TokenBatch:
    """The given completions (token ids, EOS included where they end) of one prompt as one TokenBatch, N rows
    right-padded to `width` tokens (default: the longest)."""
    N, P = len(completions), len(prompt_ids)
    T = max(len(ids) for ids in completions) if width is None else width
    tokens = torch.full((N, P + T), pad_id, dtype=torch.long)  # (N, L)
    completion = torch.full((N, T), pad_id, dtype=torch.long)  # (N, T)
    mask = torch.zeros(N, T, dtype=torch.bool)  # (N, T)
    tokens[:, :P] = torch.tensor(prompt_ids)
    for row, ids in enumerate(completions):
        tokens[row, P : P + len(ids)] = torch.tensor(ids)
        completion[row, : len(ids)] = torch.tensor(ids)
        mask[row, : len(ids)] = True
    return TokenBatch(tokens, torch.full((N,), P), completion, mask)


@dataclass
class PlacementGradient:
    gradient: torch.Tensor  # flat E_π[∇S]
    cosines: dict[str, float]  # with each exact divergence gradient
    norm_ratio: float  # |E_π[∇S]| / |∇KL(π ‖ π_ref)|


def _flat_gradient(value: torch.Tensor, parameters: list[torch.Tensor]) -> torch.Tensor:
    grads = torch.autograd.grad(value, parameters, retain_graph=True, allow_unused=True)
    return torch.cat([(g if g is not None else torch.zeros_like(p)).reshape(-1) for g, p in zip(grads, parameters)])


def placement_gradients(policy: GPT, reference: GPT, batch: TokenBatch, temperature: float = 1.0
                        ) -> tuple[dict[str, torch.Tensor], dict[str, PlacementGradient]]:
    """(exact divergence gradients, E_π[∇S] of every CHECKED_PLACEMENTS entry with its cosines), β = 1."""
    parameters = [p for p in policy.parameters() if p.requires_grad]
    scored = score_completions(policy, batch, temperature, with_distributions=True)
    with torch.no_grad():
        reference_scored = score_completions(reference, batch, temperature, with_distributions=True)
    mask = batch.mask
    log_pi = scored.log_probs.sum(1)  # (N,) log π_θ(y)
    log_ref = reference_scored.log_probs.sum(1)  # (N,) log π_ref(y)
    weights = log_pi.detach().exp()  # (N,) π(y), held fixed
    if abs(float(weights.sum()) - 1.0) > 1e-4:
        raise ValueError(f"the completions hold probability {float(weights.sum()):.6f}, not 1: the list is incomplete")
    reverse_state_kl = exact_token_kl(reference_scored.distributions, scored.distributions, mask)  # (N, T)
    exact = {
        "KL(π‖π_ref)": _flat_gradient((log_pi.exp() * (log_pi - log_ref)).sum(), parameters),
        "state reverse KL": _flat_gradient((weights * reverse_state_kl.sum(1)).sum(), parameters),
        "KL(π_ref‖π)": _flat_gradient((log_ref.exp() * (log_ref - log_pi)).sum(), parameters),
    }
    detached = scored.log_probs.detach()
    exact_kl = exact_token_kl(scored.distributions.detach(), reference_scored.distributions, mask)  # (N, T)
    no_score, ended = torch.zeros_like(weights), torch.ones(len(weights), dtype=torch.bool)
    results = {}
    for name, (in_reward, in_loss) in CHECKED_PLACEMENTS.items():
        surrogate = torch.zeros_like(weights)  # (N,)
        if in_reward is not None:
            if in_reward in ("k3", "full"):  # refused by the trainers: built here from the measuring estimators
                rewards = -per_token_kl(detached, reference_scored.log_probs, mask, in_reward, exact_kl)
            else:
                rewards = assemble_rewards(no_score, ended, detached, reference_scored.log_probs, mask, 1.0, in_reward,
                                           0.0, exact_kl).rewards
            advantages, _ = token_advantages(rewards, torch.zeros_like(rewards), mask, 1.0, 1.0)  # reward-to-go
            surrogate = surrogate - (advantages * scored.log_probs).sum(1)
        if in_loss == "k1":
            surrogate = surrogate + ((scored.log_probs - reference_scored.log_probs) * mask).sum(1)
        elif in_loss is not None:
            surrogate = surrogate + kl_loss_per_token(in_loss, scored.log_probs, reference_scored.log_probs, mask,
                                                      scored.distributions, reference_scored.distributions).sum(1)
        gradient = _flat_gradient((weights * surrogate).sum(), parameters)
        results[name] = PlacementGradient(
            gradient, {key: float(torch.nn.functional.cosine_similarity(gradient, g, dim=0)) for key, g in exact.items()},
            float(gradient.norm() / exact["KL(π‖π_ref)"].norm()))
    return exact, results
