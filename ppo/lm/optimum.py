"""The exact optimum of the KL-regularised objective, as a yardstick for PPO.

PPO with per-token rewards r_t = −β·KL_t + score at EOS maximises, per prompt x,

    J(π) = E_y~π [ r(y) ] − β · KL(π ‖ π_ref),

whose maximiser is known in closed form (a Gibbs distribution tilted by the reward):

    π*(y) = π_ref(y) · exp(r(y) / β) / Z,          Z = Σ_y π_ref(y) · exp(r(y) / β)
    KL(π* ‖ π_ref) = E_π*[r] / β − log Z

When the reward pays for a short list of answers (in the food task: ten foods, each
followed by EOS), the SFT model's probability of each, π_ref(answer + EOS | x), is one
forward pass. Everything else — the malformed strings — has the leftover mass
1 − Σ_answer π_ref(answer), and if the reward gives all of it the same score, the sum over
y collapses to one term per answer plus one, and because r is constant inside each group,
the KL over whole strings equals the KL over these groups. As β → 0, π* keeps only the
best-scoring group, re-weighted by π_ref inside it, with KL = −log π_ref(best group).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ppo.lm.model import GPT, completion_log_probs
from ppo.lm.tokenizer import CharTokenizer

MALFORMED = "<malformed>"


@torch.no_grad()
def completion_probabilities(model: GPT, tokenizer: CharTokenizer, prompt: str, answers: tuple[str, ...] | list[str],
                             temperature: float = 1.0) -> dict[str, float]:
    """π(answer + EOS | prompt) at temperature τ for every answer, and the leftover mass under MALFORMED."""
    was_training = model.training
    model.eval()
    encoded = [tokenizer.encode(answer, add_bos=False, add_eos=True) for answer in answers]
    log_probs = completion_log_probs(model, tokenizer.encode(prompt), encoded, temperature)  # (F,)
    model.train(was_training)
    probabilities = dict(zip(answers, log_probs.exp().tolist()))
    probabilities[MALFORMED] = max(0.0, 1.0 - sum(probabilities.values()))
    return probabilities


@dataclass
class KLRegularisedOptimum:
    beta: float
    probabilities: dict[str, float]  # π*(group)
    reference_probabilities: dict[str, float]  # π_ref(group)
    kl: float  # KL(π* ‖ π_ref) in nats
    expected_score: float  # E_π*[r]

    @property
    def objective(self) -> float:
        return self.expected_score - self.beta * self.kl


def kl_regularised_optimum(reference_probabilities: dict[str, float], scores: dict[str, float],
                           beta: float) -> KLRegularisedOptimum:
    """π* ∝ π_ref · exp(r / β) over the groups of `reference_probabilities` (scores: r per group)."""
    groups = [g for g, p in reference_probabilities.items() if p > 0]
    log_ref = {g: math.log(reference_probabilities[g]) for g in groups}
    if beta > 0:
        logits = {g: log_ref[g] + scores[g] / beta for g in groups}
    else:  # β → 0: only the best-scoring groups survive
        best = max(scores[g] for g in groups)
        logits = {g: log_ref[g] if scores[g] == best else -math.inf for g in groups}
    log_z = torch.logsumexp(torch.tensor(list(logits.values()), dtype=torch.float64), dim=0).item()
    optimum = {g: math.exp(logits[g] - log_z) for g in groups}
    kl = sum(p * (math.log(p) - log_ref[g]) for g, p in optimum.items() if p > 0)
    expected = sum(p * scores[g] for g, p in optimum.items())
    probabilities = {g: optimum.get(g, 0.0) for g in reference_probabilities}
    return KLRegularisedOptimum(beta, probabilities, dict(reference_probabilities), kl, expected)


def optimum_over_prompts(reference: GPT, tokenizer: CharTokenizer, prompts: list[str], answers: tuple[str, ...],
                         scores_for: Callable[[str], dict[str, float]], beta: float,
                         temperature: float = 1.0) -> KLRegularisedOptimum:
    """π* for each prompt (prompts drawn uniformly), averaged: mean probabilities, mean KL, mean E[r].

    `scores_for(prompt)` gives r for every group of `completion_probabilities` (the answers
    and MALFORMED); for a rule reward that is the same dict for every prompt.
    """
    optima = []
    for prompt in prompts:
        reference_probabilities = completion_probabilities(reference, tokenizer, prompt, answers, temperature)
        optima.append(kl_regularised_optimum(reference_probabilities, scores_for(prompt), beta))
    n = len(optima)

    def mean_of(field: str) -> dict[str, float]:
        return {g: sum(getattr(o, field)[g] for o in optima) / n for g in optima[0].probabilities}

    return KLRegularisedOptimum(beta, mean_of("probabilities"), mean_of("reference_probabilities"),
                                sum(o.kl for o in optima) / n, sum(o.expected_score for o in optima) / n)


def rule_scores(answers: tuple[str, ...], target: str, score: float) -> dict[str, float]:
    """r per group for a rule reward: `score` for the target answer, 0 for other answers and malformed strings."""
    return {group: (score if group == target else 0.0) for group in (*answers, MALFORMED)}
