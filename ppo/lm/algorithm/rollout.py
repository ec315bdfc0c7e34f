"""Batched rollouts for PPO on a language model: sample B completions, then score every token.

One rollout is a batch of B episodes. Episode i is a prompt x_i (state s_0) followed by
the completion y_i = (y_0, ..., y_{n_i−1}), where action y_t is taken in state
s_t = (x_i, y_<t) and y_{n_i−1} is EOS (unless the length limit came first). Stored per
token, all (B, T) with T the longest completion and everything after EOS masked:

    log π_old(y_t | s_t)     the sampling policy's log-probs (the r_t(θ) denominator)
    log π_ref(y_t | s_t)     the frozen reference's log-probs (for the KL penalty)
    V(s_t)                   the critic's values, zero after EOS

Prompts of different lengths are sampled in groups of equal length (the sampler needs a
rectangular prompt batch) and then stored right-padded in one (B, L) token tensor with
each row's prompt length, so one forward pass scores all rows: the distribution of y_t
is read at position P_i − 1 + t.

The log-probs are recomputed by a full forward pass rather than taken from the sampler
(whose KV-cache arithmetic rounds differently), with logits divided by the sampling
temperature τ: then the first PPO minibatch sees r_t(θ) = 1 exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ppo.lm.models.gpt import GPT, next_token_log_probs
from ppo.lm.models.sampling import sample
from ppo.lm.models.tokenizer import CharTokenizer


@dataclass
class TokenBatch:
    """The token tensors of B completions: all a forward pass needs to score them."""

    tokens: torch.Tensor  # (B, L) BOS + prompt + completion + PAD
    prompt_lengths: torch.Tensor  # (B,) P_i, BOS included
    completion: torch.Tensor  # (B, T) generated ids, PAD after EOS
    mask: torch.Tensor  # (B, T) bool: True up to and including EOS


@dataclass
class CompletionBatch(TokenBatch):
    """B sampled completions of (possibly different) prompts, right-padded with PAD."""

    ended_with_eos: torch.Tensor  # (B,) bool
    prompts: list[str]
    texts: list[str]  # completion text up to (not including) EOS
    sampler_log_probs: torch.Tensor  # (B, T) log-probs the sampler reported (KV-cache arithmetic)

    def __len__(self) -> int:
        return self.completion.size(0)

    def select(self, rows: torch.Tensor) -> CompletionBatch:
        index = rows.tolist()
        return CompletionBatch(self.tokens[rows], self.prompt_lengths[rows], self.completion[rows],
                               self.mask[rows], self.ended_with_eos[rows], [self.prompts[i] for i in index],
                               [self.texts[i] for i in index], self.sampler_log_probs[rows])


@dataclass
class CompletionScores:
    log_probs: torch.Tensor  # (B, T) log π(y_t | s_t) at temperature τ, zero after EOS
    entropy: torch.Tensor | None  # (B, T) H[π(· | s_t)] at temperature τ, zero after EOS
    values: torch.Tensor | None  # (B, T) V(s_t), zero after EOS
    distributions: torch.Tensor | None = None  # (B, T, V) log π(· | s_t) at temperature τ


@dataclass
class Rollout:
    """What PPO needs from one batch of episodes; every (B, T) tensor is zero after EOS."""

    batch: CompletionBatch
    log_probs: torch.Tensor  # (B, T) log π_old(y_t | s_t)
    reference_log_probs: torch.Tensor  # (B, T) log π_ref(y_t | s_t)
    values: torch.Tensor  # (B, T) V_old(s_t)
    entropy: torch.Tensor  # (B, T) H[π_old(· | s_t)]
    exact_kl: torch.Tensor  # (B, T) KL(π_old(·|s_t) ‖ π_ref(·|s_t)), summed over the vocabulary
    reference_distributions: torch.Tensor | None = None  # (B, T, V) log π_ref(· | s_t), for a loss-full KL penalty


def repeat_prompts(prompts: list[str], batch_size: int) -> list[str]:
    """B prompts cycling through the list: one prompt repeated, or every prompt equally often."""
    return [prompts[i % len(prompts)] for i in range(batch_size)]


@torch.no_grad()
def sample_completions(
    model: GPT, tokenizer: CharTokenizer, prompts: list[str], max_new_tokens: int,
    temperature: float = 1.0, generator: torch.Generator | None = None,
) -> CompletionBatch:
    """Sample one completion per entry of `prompts` (KV-cache sampler, one call per prompt length)."""
    encoded = [tokenizer.encode(text) for text in prompts]
    lengths = torch.tensor([len(ids) for ids in encoded])  # (B,)
    groups = []  # (rows of this prompt length, prompt length, SampleBatch)
    for length in sorted(set(lengths.tolist())):
        rows = (lengths == length).nonzero().squeeze(1)  # (B_g,)
        group_prompts = torch.tensor([encoded[i] for i in rows.tolist()])  # (B_g, P)
        drawn = sample(model, group_prompts, eos_id=tokenizer.eos_id, pad_id=tokenizer.pad_id,
                       max_new_tokens=max_new_tokens, temperature=temperature, generator=generator)
        groups.append((rows, length, drawn))

    B, T = len(prompts), max(drawn.completion.size(1) for _, _, drawn in groups)
    tokens = torch.full((B, int(lengths.max()) + T), tokenizer.pad_id, dtype=torch.long)  # (B, L)
    completion = torch.full((B, T), tokenizer.pad_id, dtype=torch.long)  # (B, T)
    mask = torch.zeros(B, T, dtype=torch.bool)  # (B, T)
    sampler_log_probs = torch.zeros(B, T)  # (B, T)
    ended = torch.zeros(B, dtype=torch.bool)  # (B,)
    for rows, P, drawn in groups:
        width = drawn.completion.size(1)
        tokens[rows, : P + width] = drawn.tokens
        completion[rows, :width] = drawn.completion
        mask[rows, :width] = drawn.mask
        sampler_log_probs[rows, :width] = drawn.log_probs
        ended[rows] = drawn.ended_with_eos
    lengths_generated = mask.sum(1).tolist()  # real tokens of each completion, EOS included
    texts = [tokenizer.decode_completion(row[:n]) for row, n in zip(completion.tolist(), lengths_generated)]
    return CompletionBatch(tokens, lengths, completion, mask, ended, list(prompts), texts, sampler_log_probs)


def completion_positions(prompt_lengths: torch.Tensor, width: int) -> torch.Tensor:
    """(B, T) positions whose output predicts completion token t: P_i − 1 + t."""
    return prompt_lengths.unsqueeze(1) - 1 + torch.arange(width).unsqueeze(0)


def score_completions(
    model: GPT, batch: TokenBatch, temperature: float = 1.0,
    with_entropy: bool = False, with_values: bool = False, critic: GPT | None = None,
    with_distributions: bool = False,
) -> CompletionScores:
    """log π(y_t | s_t) (and optionally H[π(·|s_t)], V(s_t)) for every completion token.

    Logits are divided by τ exactly as the sampler does (`next_token_log_probs`). Values
    come from `critic` if given, else from the model's own value head (shared trunk).
    Gradients flow unless called under torch.no_grad().
    """
    inputs = batch.tokens[:, :-1]  # (B, L−1): the last token is never an input
    T = batch.completion.size(1)
    positions = completion_positions(batch.prompt_lengths, T).clamp(max=inputs.size(1) - 1)  # (B, T)
    real = batch.mask.to(torch.float32)  # (B, T)
    shared_values = with_values and critic is None
    if shared_values:
        logits, all_values = model.logits_and_values(inputs)  # (B, L−1, V), (B, L−1)
    else:
        logits = model(inputs)  # (B, L−1, V)
    logits = logits.gather(1, positions.unsqueeze(-1).expand(-1, -1, logits.size(-1)))  # (B, T, V)
    log_p = next_token_log_probs(logits, temperature)  # (B, T, V)
    log_probs = log_p.gather(-1, batch.completion.unsqueeze(-1)).squeeze(-1) * real  # (B, T)

    entropy = values = None
    if with_entropy:
        entropy = -(log_p.exp() * log_p).sum(-1) * real  # (B, T)
    if with_values:
        if not shared_values:
            all_values = critic.values(inputs)  # (B, L−1)
        values = all_values.gather(1, positions) * real  # (B, T)
    return CompletionScores(log_probs, entropy, values, log_p if with_distributions else None)


def exact_token_kl(policy_log_p: torch.Tensor, reference_log_p: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """KL(π(·|s_t) ‖ π_ref(·|s_t)) = Σ_v π(v|s_t)·(log π(v|s_t) − log π_ref(v|s_t)) at every real position.

    policy_log_p, reference_log_p: (B, T, V) next-token log-probabilities; returns (B, T).
    """
    kl = (policy_log_p.exp() * (policy_log_p - reference_log_p)).sum(dim=-1)  # (B, T)
    return kl * mask.to(kl.dtype)


@torch.no_grad()
def collect_rollout(
    policy: GPT, reference: GPT, critic: GPT | None, tokenizer: CharTokenizer, prompts: list[str],
    max_new_tokens: int, temperature: float = 1.0, generator: torch.Generator | None = None,
    with_values: bool = True,
) -> Rollout:
    """Sample from π_old, then log π_old, log π_ref and V_old for every token (critic None = shared trunk).

    Without values (a trainer with no critic) the values are zeros.
    """
    batch = sample_completions(policy, tokenizer, prompts, max_new_tokens, temperature, generator)
    scored = score_completions(policy, batch, temperature, with_entropy=True, with_values=with_values, critic=critic,
                               with_distributions=True)
    if not with_values:
        scored.values = torch.zeros_like(scored.log_probs)
    reference_scored = score_completions(reference, batch, temperature, with_distributions=True)
    exact_kl = exact_token_kl(scored.distributions, reference_scored.distributions, batch.mask)
    return Rollout(batch, scored.log_probs, reference_scored.log_probs, scored.values, scored.entropy, exact_kl,
                   reference_scored.distributions)
