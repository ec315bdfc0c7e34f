"""Every likely completion of a prompt, with its exact probability: a search over the token tree.

A completion y = (y_0, …, y_{n−1}) of prompt x has π(y | x) = Π_t π(y_t | x, y_<t), and a
prefix is never more likely than any of its continuations' sum. So expanding the tree of
prefixes breadth-first and dropping every prefix whose probability is below a threshold ε
finds *every* completion with π(y | x) ≥ ε — those that end with EOS, and those cut off by
the length limit — each with its exact probability (one forward pass per depth for the
whole frontier). What is dropped is the residual mass

    residual = 1 − Σ_found π(y | x),

all of it in completions rarer than ε. A statistic of n independent draws computed over
the found completions alone (best-of-n, `ppo.lm.best_of_n`) is then off by at most the
chance that one of the draws falls in the residual: total variation ≤ 1 − (1 − residual)ⁿ.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ppo.lm.model import GPT, next_token_log_probs
from ppo.lm.tokenizer import CharTokenizer


@dataclass
class EnumeratedCompletions:
    texts: list[str]  # completion text, without EOS
    ended_with_eos: list[bool]  # False: cut off by the length limit
    probabilities: torch.Tensor  # (N,) float64, π(y | x) of each
    residual: float  # 1 − Σ probabilities: the completions rarer than the threshold

    def __len__(self) -> int:
        return len(self.texts)


@torch.no_grad()
def enumerate_completions(model: GPT, tokenizer: CharTokenizer, prompt: str, min_probability: float,
                          max_new_tokens: int, temperature: float = 1.0,
                          chunk_size: int = 4096) -> EnumeratedCompletions:
    """All completions of `prompt` with π(y | x) ≥ `min_probability` at temperature τ (the module docstring)."""
    if not 0 < min_probability < 1:
        raise ValueError(f"min_probability = {min_probability} must be in (0, 1)")
    was_training = model.training
    model.eval()
    device = model.token_embedding.weight.device
    prompt_ids = tokenizer.encode(prompt)
    log_threshold = math.log(min_probability)
    prefixes = torch.empty(1, 0, dtype=torch.long)  # (F, t) the frontier's completion tokens so far
    prefix_log_probs = torch.zeros(1, dtype=torch.float64)  # (F,)
    texts, ended, log_probs = [], [], []
    for depth in range(max_new_tokens):
        if len(prefixes) == 0:
            break
        step_log_probs = []
        for start in range(0, len(prefixes), chunk_size):
            chunk = prefixes[start : start + chunk_size]
            tokens = torch.cat([torch.tensor(prompt_ids).expand(len(chunk), -1), chunk], dim=1).to(device)  # (f, P+t)
            step_log_probs.append(next_token_log_probs(model(tokens)[:, -1], temperature).double().cpu())  # (f, V)
        joint = prefix_log_probs.unsqueeze(1) + torch.cat(step_log_probs)  # (F, V) log π(prefix + token)
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
