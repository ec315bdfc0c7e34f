"""How far a fine-tuned policy π is from the exact optimum π*_β ∝ π_ref·exp(r/β).

Two distances, both per prompt x and then averaged over the prompts:

Total variation over the groups of `ppo.lm.exact.optimum` (the answers, MALFORMED, NO_EOS),

    TV(π, π*) = ½ Σ_g |π(g | x) − π*(g | x)|,

with π(g | x) computed exactly for the policy as for π_ref (teacher forcing for the
answers, the prefix tree for NO_EOS). Merging strings into groups never increases a
total variation, so this is a lower bound on the TV over strings, equal to it when π,
like π*, is proportional to π_ref inside each group.

KL over strings. log π*(y) = log π_ref(y) + r(y)/β − log Z(x), so

    KL(π ‖ π*) = E_y~π[ log π(y)/π_ref(y) − r(y)/β ] + log Z = log Z − J(π)/β,

    J(π) = E_π[r] − β·KL(π ‖ π_ref),      J(π*) = β·log Z,      log Z = E_π*[r]/β − KL(π* ‖ π_ref):

the objective's shortfall from the optimum, divided by β. It is estimated from samples
of π: each completion gives log π(y)/π_ref(y) − r(y)/β + log Z(x) (with r the score that
training gives it: the missing-EOS penalty without EOS), which is 0 for every y when
π = π*, so the estimate's variance vanishes at the optimum.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ppo.lm.models.gpt import GPT
from ppo.lm.exact.optimum import (
    DEFAULT_MIN_PROBABILITY,
    NO_EOS,
    KLRegularisedOptimum,
    completion_probabilities,
    kl_regularised_optimum,
)
from ppo.lm.models.tokenizer import CharTokenizer


def log_partition(optimum: KLRegularisedOptimum) -> float:
    """log Z = E_π*[r]/β − KL(π* ‖ π_ref) (β > 0)."""
    if not optimum.beta > 0:
        raise ValueError(f"beta = {optimum.beta}: log Z and KL(π ‖ π*) need β > 0")
    return optimum.expected_score / optimum.beta - optimum.kl


def total_variation(first: dict[str, float], second: dict[str, float]) -> float:
    """½ Σ_g |p(g) − q(g)| over the groups of either."""
    return 0.5 * sum(abs(first.get(g, 0.0) - second.get(g, 0.0)) for g in set(first) | set(second))


def group_kl(first: dict[str, float], second: dict[str, float]) -> float:
    """KL(p ‖ q) = Σ_g p(g)·log(p(g)/q(g)) over the groups of p (inf where q(g) = 0 < p(g))."""
    total = 0.0
    for g, p in first.items():
        if p > 0:
            q = second.get(g, 0.0)
            total += p * (math.log(p) - math.log(q)) if q > 0 else math.inf
    return total


@dataclass
class PromptOptimum:
    prompt: str
    optimum: KLRegularisedOptimum  # π*_β over the groups, with π_ref's
    policy_probabilities: dict[str, float]  # π(g | x) over the same groups
    total_variation: float  # TV(π, π*) over the groups

    @property
    def log_partition(self) -> float:
        return log_partition(self.optimum)


@torch.no_grad()
def distance_to_optimum(policy: GPT, reference: GPT, tokenizer: CharTokenizer, prompts: list[str],
                        answers: tuple[str, ...], scores_for: Callable[[str], dict[str, float]], beta: float,
                        temperature: float = 1.0, *, max_new_tokens: int, missing_eos_penalty: float,
                        min_probability: float = DEFAULT_MIN_PROBABILITY) -> list[PromptOptimum]:
    """π*_β and TV(π, π*) over the groups of each prompt (the module docstring); β ≥ 0 (π*_0: π_ref on the
    best-scoring groups; log Z and KL(π ‖ π*) need β > 0).

    `scores_for(prompt)` gives r for the answers and MALFORMED; NO_EOS gets `missing_eos_penalty`.
    """
    if not beta >= 0:
        raise ValueError(f"beta = {beta} must be ≥ 0")
    results = []
    for prompt in prompts:
        groups = {}
        for name, model in (("reference", reference), ("policy", policy)):
            groups[name] = completion_probabilities(model, tokenizer, prompt, answers, temperature, max_new_tokens,
                                                    min_probability)
        scores = {**scores_for(prompt), NO_EOS: missing_eos_penalty}
        optimum = kl_regularised_optimum(groups["reference"], scores, beta)
        results.append(PromptOptimum(prompt, optimum, groups["policy"],
                                     total_variation(groups["policy"], optimum.probabilities)))
    return results


def kl_to_optimum_from_samples(sequence_log_ratios: torch.Tensor, scores: torch.Tensor, log_partitions: torch.Tensor,
                               beta: float) -> tuple[float, float]:
    """(mean, standard error) of log π(y)/π_ref(y) − r(y)/β + log Z(x) over samples y ~ π(·|x): KL(π ‖ π*).

    All three tensors are (N,): Σ_t log π(y_t|s_t) − log π_ref(y_t|s_t), the score training
    gives y, and log Z of y's prompt.
    """
    terms = sequence_log_ratios.double() - scores.double() / beta + log_partitions.double()  # (N,)
    n = terms.numel()
    return float(terms.mean()), float(terms.std() / math.sqrt(n)) if n > 1 else float("nan")
