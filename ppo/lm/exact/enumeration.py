"""Every likely completion of a prompt, with its exact probability: a search over the token tree.

A completion y = (y_0, …, y_{n−1}) of prompt x has π(y | x) = Π_t π(y_t | x, y_<t), and a
prefix is never more likely than any of its continuations' sum. So expanding the tree of
prefixes breadth-first and dropping every prefix whose probability is below a threshold ε
finds *every* completion with π(y | x) ≥ ε — those that end with EOS, and those cut off by
the length limit — each with its exact probability (one forward pass per depth for the
whole frontier). What is dropped is the residual mass

    residual = 1 − Σ_found π(y | x),

all of it in completions rarer than ε. A statistic of n independent draws computed over
the found completions alone (best-of-n, `ppo.lm.exact.best_of_n`) is then off by at most the
chance that one of the draws falls in the residual: total variation ≤ 1 − (1 − residual)ⁿ.

Whether a completion ends within the length limit T = max_new_tokens needs no list of
completions, only three sums over the same tree (`ending_mass`). Every prefix s kept in
the tree sends π(s)·π(EOS | s) into the mass that ends, exactly, however small; of its
other children, those with π(s v) ≥ ε are kept and the rest are dropped, unexpanded:

    ended       = Σ_kept s, |s| < T   π(s) · π(EOS | s)            (exact)
    no_eos      = Σ_kept s, |s| = T   π(s)                          (exact, a lower bound)
    unresolved  = Σ_dropped s         π(s)                          (how each of them ends is unknown)

    ended + no_eos + unresolved = 1,     no_eos ≤ π(no EOS within T | x) ≤ no_eos + unresolved

so the probability of running out of tokens is bracketed by an interval of width
`unresolved`, which shrinks with ε. An exact value in general needs every one of the
(V − 1)^T prefixes (V − 1 tokens other than EOS): with a transformer nothing is Markov,
and a dropped prefix may still end or run on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ppo.lm.models.gpt import GPT, next_token_log_probs
from ppo.lm.models.tokenizer import CharTokenizer


@dataclass
class EnumeratedCompletions:
    texts: list[str]  # completion text, without EOS
    ended_with_eos: list[bool]  # False: cut off by the length limit
    probabilities: torch.Tensor  # (N,) float64, π(y | x) of each
    residual: float  # 1 − Σ probabilities: the completions rarer than the threshold

    def __len__(self) -> int:
        return len(self.texts)


def _frontier_log_probs(model: GPT, prompt_ids: torch.Tensor, prefixes: torch.Tensor, temperature: float,
                        chunk_size: int, in_float64: bool) -> torch.Tensor:
    """log π(v | prompt + prefix) for every prefix of the frontier and every token v, as float64 on the CPU,
    `chunk_size` prefixes per forward pass; `in_float64` turns the logits into log-probs in float64. (F, V)"""
    device = model.token_embedding.weight.device
    step_log_probs = []
    for start in range(0, len(prefixes), chunk_size):
        chunk = prefixes[start : start + chunk_size]
        tokens = torch.cat([prompt_ids.expand(len(chunk), -1), chunk], dim=1).to(device)  # (f, P+t)
        logits = model(tokens)[:, -1]  # (f, V)
        log_probs = next_token_log_probs(logits.double(), temperature) if in_float64 else \
            next_token_log_probs(logits, temperature).double()
        step_log_probs.append(log_probs.cpu())
    return torch.cat(step_log_probs)


@torch.no_grad()
def enumerate_completions(model: GPT, tokenizer: CharTokenizer, prompt: str, min_probability: float,
                          max_new_tokens: int, temperature: float = 1.0,
                          chunk_size: int = 4096) -> EnumeratedCompletions:
    """All completions of `prompt` with π(y | x) ≥ `min_probability` at temperature τ (the module docstring)."""
    if not 0 < min_probability < 1:
        raise ValueError(f"min_probability = {min_probability} must be in (0, 1)")
    was_training = model.training
    model.eval()
    prompt_ids = torch.tensor(tokenizer.encode(prompt))
    log_threshold = math.log(min_probability)
    prefixes = torch.empty(1, 0, dtype=torch.long)  # (F, t) the frontier's completion tokens so far
    prefix_log_probs = torch.zeros(1, dtype=torch.float64)  # (F,)
    texts, ended, log_probs = [], [], []
    for depth in range(max_new_tokens):
        if len(prefixes) == 0:
            break
        step_log_probs = _frontier_log_probs(model, prompt_ids, prefixes, temperature, chunk_size, in_float64=False)
        joint = prefix_log_probs.unsqueeze(1) + step_log_probs  # (F, V) log π(prefix + token)
        rows, token_ids = (joint >= log_threshold).nonzero(as_tuple=True)
        extended = torch.cat([prefixes[rows], token_ids.unsqueeze(1)], dim=1)  # (F', t+1)
        extended_log_probs = joint[rows, token_ids]  # (F',)
        finished = token_ids == tokenizer.eos_id
        for ids, log_p in zip(extended[finished].tolist(), extended_log_probs[finished].tolist()):
            texts.append(tokenizer.decode_completion(ids[:-1]))
            ended.append(True)
            log_probs.append(log_p)
        prefixes, prefix_log_probs = extended[~finished], extended_log_probs[~finished]
    for ids, log_p in zip(prefixes.tolist(), prefix_log_probs.tolist()):  # cut off by the length limit
        texts.append(tokenizer.decode_completion(ids))
        ended.append(False)
        log_probs.append(log_p)
    model.train(was_training)
    probabilities = torch.tensor(log_probs, dtype=torch.float64).exp()
    return EnumeratedCompletions(texts, ended, probabilities, max(0.0, 1.0 - float(probabilities.sum())))


@dataclass
class EndingMass:
    """Where the probability of `prompt`'s completions goes with a length limit T (the module docstring)."""

    ended: float  # π(a completion ends with EOS within T), over the kept prefixes: exact
    no_eos: float  # π of the kept T-token prefixes without EOS: a lower bound on π(no EOS within T)
    unresolved: float  # π of the prefixes dropped below the threshold, ending or not

    @property
    def no_eos_upper(self) -> float:
        """The upper bound on π(no EOS within T): every dropped prefix counted as running on."""
        return self.no_eos + self.unresolved


@torch.no_grad()
def ending_mass(model: GPT, tokenizer: CharTokenizer, prompt: str, max_new_tokens: int, min_probability: float,
                temperature: float = 1.0, chunk_size: int = 4096) -> EndingMass:
    """ended, no_eos and unresolved (the module docstring) of `prompt` at temperature τ, in float64.

    The EOS branch of every kept prefix is summed whatever its size; only prefixes that
    continue are dropped below `min_probability`. Logits are turned into log-probs in
    float64, so the three parts add up to 1 to within rounding of the order of 1e-15.
    """
    if not 0 < min_probability < 1:
        raise ValueError(f"min_probability = {min_probability} must be in (0, 1)")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens = {max_new_tokens} must be a positive integer")
    was_training = model.training
    model.eval()
    prompt_ids = torch.tensor(tokenizer.encode(prompt))
    log_threshold = math.log(min_probability)
    prefixes = torch.empty(1, 0, dtype=torch.long)  # (F, t) the kept prefixes' completion tokens
    prefix_log_probs = torch.zeros(1, dtype=torch.float64)  # (F,)
    ended = unresolved = 0.0
    for _ in range(max_new_tokens):
        if len(prefixes) == 0:
            break
        step_log_probs = _frontier_log_probs(model, prompt_ids, prefixes, temperature, chunk_size, in_float64=True)
        joint = prefix_log_probs.unsqueeze(1) + step_log_probs  # (F, V) log π(prefix + token)
        ended += float(joint[:, tokenizer.eos_id].exp().sum())
        joint[:, tokenizer.eos_id] = -math.inf
        kept = joint >= log_threshold  # (F, V)
        unresolved += float(joint.exp().masked_fill(kept, 0.0).sum())
        rows, token_ids = kept.nonzero(as_tuple=True)
        prefixes = torch.cat([prefixes[rows], token_ids.unsqueeze(1)], dim=1)  # (F', t+1)
        prefix_log_probs = joint[rows, token_ids]  # (F',)
    model.train(was_training)
    return EndingMass(ended=ended, no_eos=float(prefix_log_probs.exp().sum()) if len(prefixes) else 0.0,
                      unresolved=unresolved)
