"""Comparisons of the SFT model's own samples, labelled by a simulated Bradley–Terry rater.

For prompt x, two completions y₁, y₂ ~ π_ref(·|x) are drawn, and a rater who knows the
rule r prefers y₁ with probability

    P(y₁ ≻ y₂) = σ((r(y₁) − r(y₂)) / t),          t > 0 the rater temperature

(a coin flip when r(y₁) = r(y₂), nearly never wrong as t → 0). This is the Bradley–Terry
model with the reward r/t: whatever learns from these comparisons — a reward model, DPO —
can at best recover r/t up to a constant, so the optimum of the KL-regularised objective
at coefficient β that the comparisons define is

    π*_β(y|x) ∝ π_ref(y|x) · exp(r(y) / (t·β)),

the rule's optimum at coefficient t·β (`ppo.lm.exact.optimum`). Only pairs in which both
completions end with EOS within the length limit are kept (a pair with a run-on completion
is drawn again), as a rater reads finished answers; the prompts take turns, so each gets
the same number of comparisons (±1).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import torch

from ppo.lm.models.gpt import GPT
from ppo.lm.algorithm.rollout import sample_completions
from ppo.lm.models.tokenizer import CharTokenizer

Comparison = tuple[str, str, str]  # (prompt, chosen completion, rejected completion)


def preference_probability(first_score: float, second_score: float, temperature: float) -> float:
    """P(first ≻ second) = σ((r₁ − r₂) / t)."""
    return 1.0 / (1.0 + math.exp(-(first_score - second_score) / temperature))


def label_pair(prompt: str, first: str, second: str, score: Callable[[str], float], temperature: float,
               rng: random.Random) -> Comparison:
    """(prompt, chosen, rejected): `first` is chosen with probability σ((score(first) − score(second)) / t)."""
    prefers_first = rng.random() < preference_probability(score(first), score(second), temperature)
    return (prompt, first, second) if prefers_first else (prompt, second, first)


def rater_comparisons(sft: GPT, tokenizer: CharTokenizer, prompts: list[str], score: Callable[[str], float],
                      num_comparisons: int, temperature: float, max_new_tokens: int, seed: int,
                      max_rounds: int = 20) -> list[Comparison]:
    """`num_comparisons` labelled pairs of SFT samples (the module docstring), prompts in turn.

    `score(completion text)` is r of a completion that ended with EOS. Pairs are drawn in
    rounds, each replacing the pairs a run-on completion spoiled; ValueError after
    `max_rounds` rounds that left some still unfilled.
    """
    if not temperature > 0:
        raise ValueError(f"rater temperature = {temperature} must be positive")
    rng = random.Random(seed)
    generator = torch.Generator().manual_seed(seed)
    wanted = [prompts[i % len(prompts)] for i in range(num_comparisons)]
    comparisons: list[Comparison | None] = [None] * num_comparisons
    for _ in range(max_rounds):
        missing = [i for i, comparison in enumerate(comparisons) if comparison is None]
        if not missing:
            break
        batch = sample_completions(sft, tokenizer, [wanted[i] for i in missing for _ in range(2)], max_new_tokens,
                                   generator=generator)
        for k, i in enumerate(missing):
            if bool(batch.ended_with_eos[2 * k : 2 * k + 2].all()):
                comparisons[i] = label_pair(wanted[i], batch.texts[2 * k], batch.texts[2 * k + 1], score,
                                            temperature, rng)
    if any(comparison is None for comparison in comparisons):
        raise ValueError(f"the SFT model ran past {max_new_tokens} tokens too often to draw {num_comparisons} pairs "
                         f"of finished completions in {max_rounds} rounds")
    return comparisons
