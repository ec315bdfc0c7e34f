"""The exact optimum of the KL-regularised objective, as a yardstick for PPO.

PPO with per-token rewards r_t = −β·KL_t + score at EOS maximises, per prompt x,

    J(π) = E_y~π [ r(y) ] − β · KL(π ‖ π_ref),

whose maximiser is known in closed form (a Gibbs distribution tilted by the reward):

    π*(y) = π_ref(y) · exp(r(y) / β) / Z,          Z = Σ_y π_ref(y) · exp(r(y) / β)
    KL(π* ‖ π_ref) = E_π*[r] / β − log Z

In this toy world every well-formed completion is one of ten foods, and the SFT model's
probability of each, π_ref(food + EOS | x), is one forward pass. Everything else — the
malformed strings — has the leftover mass 1 − Σ_food π_ref(food), and a rule reward gives
all of it the same score, so the sum over y collapses to eleven terms, and because r is
constant inside each group, the KL over whole strings equals the KL over these groups.
As β → 0, π* keeps only the best-scoring group, re-weighted by π_ref inside it, with
KL = −log π_ref(best group).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from envs import corpus
from ppo.lm.model import GPT, completion_log_probs
from ppo.lm.tokenizer import CharTokenizer

MALFORMED = "<malformed>"


@torch.no_grad()
def completion_probabilities(model: GPT, tokenizer: CharTokenizer, prompt: str,
                             temperature: float = 1.0) -> dict[str, float]:
    """π(food + EOS | prompt) at temperature τ for every food, and the leftover mass under MALFORMED."""
    was_training = model.training
    model.eval()
    foods = [tokenizer.encode(food, add_bos=False, add_eos=True) for food in corpus.FOODS]
    log_probs = completion_log_probs(model, tokenizer.encode(prompt), foods, temperature)  # (F,)
    model.train(was_training)
    probabilities = dict(zip(corpus.FOODS, log_probs.exp().tolist()))
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


def rule_optimum(reference: GPT, tokenizer: CharTokenizer, prompts: list[str], target_food: str,
                 score: float, beta: float, temperature: float = 1.0) -> tuple[float, float, float]:
    """(reference target rate, π* target rate, KL(π* ‖ π_ref)) for the rule reward, averaged over prompts."""
    reference_rate = optimum_rate = kl = 0.0
    for prompt in prompts:
        reference_probabilities = completion_probabilities(reference, tokenizer, prompt, temperature)
        scores = {group: (score if group == target_food else 0.0) for group in reference_probabilities}
        optimum = kl_regularised_optimum(reference_probabilities, scores, beta)
        reference_rate += reference_probabilities[target_food] / len(prompts)
        optimum_rate += optimum.probabilities[target_food] / len(prompts)
        kl += optimum.kl / len(prompts)
    return reference_rate, optimum_rate, kl
