"""Batched sampling of completions from a GPT, with a KV cache.

Generation of B rows in parallel:
  1. prefill: run the prompt (B, P) once, filling the KV cache for positions 0..P-1;
  2. decode: sample one token per row from softmax(z / tau) (optionally top-k), feed
     those B tokens back (L = 1) at the next position, repeat.
A row that emits EOS is finished: it emits PAD from then on. The loop stops when all
rows are finished or after max_new_tokens steps.

`sample_naive` does the same without a cache, re-running the whole sequence each step.
It is the slow reference for tests and for experiments/benchmarks/sampling.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ppo.lm.models.gpt import GPT, next_token_log_probs


@dataclass
class SampleBatch:
    """B sampled completions; P = prompt length, T = number of decoding steps taken (<= max_new_tokens).

    log_probs are log pi(token | prefix) under the distribution actually sampled from:
    softmax(logits / temperature), restricted to the top-k tokens and renormalised when
    top_k is given. They are 0 where mask is False.
    """

    tokens: torch.Tensor  # (B, P+T) prompt followed by completion
    completion: torch.Tensor  # (B, T) generated ids; PAD after a row's EOS
    log_probs: torch.Tensor  # (B, T)
    mask: torch.Tensor  # (B, T) bool: True on generated tokens up to and including EOS
    ended_with_eos: torch.Tensor  # (B,) bool

    @property
    def prompt_length(self) -> int:
        return self.tokens.size(1) - self.completion.size(1)

    def as_normal_tensors(self) -> SampleBatch:
        """Copies made outside inference mode. Tensors created under torch.inference_mode() cannot
        enter a computation that autograd records (e.g. PPO recomputing log-probs of these tokens)."""
        return SampleBatch(*(t.clone() for t in (self.tokens, self.completion, self.log_probs, self.mask,
                                                  self.ended_with_eos)))


def _prompt_batch(model: GPT, prompt: torch.Tensor | Sequence[int], num_samples: int | None) -> torch.Tensor:
    """A (P,) prompt repeated num_samples times, or a (B, P) batch of equal-length prompts, as (B, P)."""
    device = model.token_embedding.weight.device
    prompt = torch.as_tensor(prompt, dtype=torch.long, device=device)
    if prompt.dim() == 1:
        return prompt.unsqueeze(0).expand(num_samples or 1, -1).contiguous()
    if prompt.dim() == 2:
        if num_samples not in (None, prompt.size(0)):
            raise ValueError(f"num_samples={num_samples} but a batch of {prompt.size(0)} prompts was given")
        return prompt
    raise ValueError(f"prompt must be (P,) or (B, P), got shape {tuple(prompt.shape)}")


def _max_new_tokens(model: GPT, prompt_length: int, max_new_tokens: int | None) -> int:
    room = model.config.block_size - prompt_length
    if max_new_tokens is None:
        max_new_tokens = room
    if max_new_tokens < 1 or max_new_tokens > room:
        raise ValueError(f"max_new_tokens must be in 1..{room} (block_size {model.config.block_size} "
                         f"- prompt length {prompt_length}), got {max_new_tokens}")
    return max_new_tokens


def _sample_step(logits: torch.Tensor, done: torch.Tensor, eos_id: int | None, pad_id: int,
                 temperature: float, top_k: int | None, generator: torch.Generator | None):
    """From last-position logits (B, V): next tokens (B,), their log-probs (B,), mask (B,), new done (B,)."""
    log_p = next_token_log_probs(logits, temperature, top_k)  # (B, V)
    token = torch.multinomial(log_p.exp(), 1, generator=generator).squeeze(-1)  # (B,)
    token_log_p = log_p.gather(-1, token.unsqueeze(-1)).squeeze(-1)  # (B,)
    alive = ~done  # (B,) rows still generating
    token = torch.where(alive, token, torch.full_like(token, pad_id))
    token_log_p = torch.where(alive, token_log_p, torch.zeros_like(token_log_p))
    if eos_id is not None:
        done = done | (token == eos_id)
    return token, token_log_p, alive, done


def _stack(prompt: torch.Tensor, tokens: list, log_probs: list, mask: list, done: torch.Tensor) -> SampleBatch:
    completion = torch.stack(tokens, dim=1)  # (B, T)
    return SampleBatch(
        tokens=torch.cat([prompt, completion], dim=1),
        completion=completion,
        log_probs=torch.stack(log_probs, dim=1),
        mask=torch.stack(mask, dim=1),
        ended_with_eos=done,
    )


def sample(model: GPT, prompt: torch.Tensor | Sequence[int], *, eos_id: int | None, pad_id: int,
           num_samples: int | None = None, max_new_tokens: int | None = None, temperature: float = 1.0,
           top_k: int | None = None, generator: torch.Generator | None = None) -> SampleBatch:
    """Sample completions with a KV cache.

    prompt: (P,) ids repeated num_samples times, or (B, P) equal-length prompts.
    eos_id: the token that ends a row (None: never stop early, always max_new_tokens steps).
    max_new_tokens: default = all the room left in block_size.
    generator: a seeded torch.Generator makes the draw reproducible.
    Runs under torch.inference_mode(); the returned tensors are ordinary ones. Dropout is
    active if the model is in training mode, so call model.eval() first when dropout > 0.
    """
    with torch.inference_mode():
        batch = _sample_with_cache(model, prompt, eos_id, pad_id, num_samples, max_new_tokens,
                                   temperature, top_k, generator)
    return batch.as_normal_tensors()


def _sample_with_cache(model, prompt, eos_id, pad_id, num_samples, max_new_tokens, temperature, top_k,
                       generator) -> SampleBatch:
    prompt = _prompt_batch(model, prompt, num_samples)  # (B, P)
    B, P = prompt.shape
    steps = _max_new_tokens(model, P, max_new_tokens)
    cache = model.new_kv_cache(B, max_len=P + steps)
    logits = model(prompt, kv_cache=cache, start_pos=0)[:, -1]  # prefill -> (B, V)
    done = torch.zeros(B, dtype=torch.bool, device=prompt.device)
    tokens, log_probs, mask = [], [], []
    for t in range(steps):
        token, token_log_p, alive, done = _sample_step(logits, done, eos_id, pad_id, temperature, top_k, generator)
        tokens.append(token)
        log_probs.append(token_log_p)
        mask.append(alive)
        if bool(done.all()) or t == steps - 1:
            break
        logits = model(token.unsqueeze(1), kv_cache=cache, start_pos=P + t)[:, -1]  # decode -> (B, V)
    return _stack(prompt, tokens, log_probs, mask, done)


def sample_naive(model: GPT, prompt: torch.Tensor | Sequence[int], *, eos_id: int | None, pad_id: int,
                 num_samples: int | None = None, max_new_tokens: int | None = None, temperature: float = 1.0,
                 top_k: int | None = None, generator: torch.Generator | None = None) -> SampleBatch:
    """Same contract as `sample`, but recomputes the full sequence at every step (no cache)."""
    with torch.inference_mode():
        batch = _sample_without_cache(model, prompt, eos_id, pad_id, num_samples, max_new_tokens,
                                      temperature, top_k, generator)
    return batch.as_normal_tensors()


def _sample_without_cache(model, prompt, eos_id, pad_id, num_samples, max_new_tokens, temperature, top_k,
                          generator) -> SampleBatch:
    prompt = _prompt_batch(model, prompt, num_samples)  # (B, P)
    B, _ = prompt.shape
    steps = _max_new_tokens(model, prompt.size(1), max_new_tokens)
    sequence = prompt
    done = torch.zeros(B, dtype=torch.bool, device=prompt.device)
    tokens, log_probs, mask = [], [], []
    for _ in range(steps):
        logits = model(sequence)[:, -1]  # (B, V)
        token, token_log_p, alive, done = _sample_step(logits, done, eos_id, pad_id, temperature, top_k, generator)
        tokens.append(token)
        log_probs.append(token_log_p)
        mask.append(alive)
        sequence = torch.cat([sequence, token.unsqueeze(1)], dim=1)  # (B, P+t+1)
        if bool(done.all()):
            break
    return _stack(prompt, tokens, log_probs, mask, done)


def sample_texts(model: GPT, tokenizer, prompt_text: str, num_samples: int, *, temperature: float = 1.0,
                 top_k: int | None = None, generator: torch.Generator | None = None,
                 max_new_tokens: int | None = None) -> tuple[list[str], list[bool]]:
    """Convenience: sample num_samples completions of prompt_text; returns (texts up to EOS, ended_with_eos)."""
    batch = sample(model, tokenizer.encode(prompt_text), eos_id=tokenizer.eos_id, pad_id=tokenizer.pad_id,
                   num_samples=num_samples, max_new_tokens=max_new_tokens, temperature=temperature,
                   top_k=top_k, generator=generator)
    texts = [tokenizer.decode(row.tolist()) for row in batch.completion]
    return texts, batch.ended_with_eos.tolist()
