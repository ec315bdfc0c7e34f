"""The exact optimum of the KL-regularised objective, as a yardstick for PPO.

PPO with per-token rewards r_t = −β·KL_t + score at EOS maximises, per prompt x,

    J(π) = E_y~π [ r(y) ] − β · KL(π ‖ π_ref),

whose maximiser is known in closed form (a Gibbs distribution tilted by the reward):

    π*(y) = π_ref(y) · exp(r(y) / β) / Z,          Z = Σ_y π_ref(y) · exp(r(y) / β)
    KL(π* ‖ π_ref) = E_π*[r] / β − log Z

When the reward is constant on a few groups of completions, the sum over y collapses to
one term per group, and because r is constant inside each group (π* ∝ π_ref there), the
KL over whole strings equals the KL over the groups. In the food task, with the length
limit T = max_new_tokens of training, the groups are

    answer a      a then EOS, within T tokens:    π_ref(a + EOS | x), one forward pass
                  (0 if a + EOS is longer than T: training cuts it off first)
    NO_EOS        no EOS within T tokens: r = missing_eos_penalty, as in training
    MALFORMED     anything else that ends with EOS within T: the rule's 0, or, for a
                  reward that scores these strings differently, the group's soft value
                  (`malformed_group`, below)
                  π_ref(MALFORMED) = 1 − Σ_a π_ref(a) − π_ref(NO_EOS)

π_ref(NO_EOS) is a sum over every EOS-free T-token prefix (up to (V − 1)^T of them): no
formula shortens it for a transformer, so it comes from the prefix tree of
`ppo.lm.exact.enumeration.ending_mass`: every EOS branch of every prefix with π ≥ ε is summed
exactly, and the prefixes dropped below ε (mass `unresolved`) are counted as running on.
π_ref(NO_EOS) is then an upper bound at most `unresolved` above the exact value (for
the default SFT model and prompt, T = 16: within [2.3e-5, 6.1e-5] at ε = 1e-8 and
[3.8e-5, 4.3e-5] at ε = 1e-10, so about 4e-5 of its mass runs on). Moving mass δ
between NO_EOS and MALFORMED moves Z by δ·|exp(r_MALFORMED/β) − exp(r_NO_EOS/β)|, so
every other group's π* by a relative δ·|…|/Z at most: far below what any table shows.
Without a length limit (max_new_tokens=None) NO_EOS is not split off: MALFORMED is the
whole rest.

As β → 0, π* keeps only the best-scoring group, re-weighted by π_ref inside it, with
KL = −log π_ref(best group).

A group G whose members y score differently (a learned reward on malformed strings)
enters π* through its soft value, and the tilt goes on inside it:

    v_G = β · log E_{π_ref(·|G)}[exp(r/β)]        π*(G) ∝ π_ref(G) · exp(v_G / β)
    π*(y | G) ∝ π_ref(y | G) · exp(r(y)/β)        KL_G = KL(π*(·|G) ‖ π_ref(·|G))
    KL(π* ‖ π_ref) = Σ_G π*(G) · (log(π*(G)/π_ref(G)) + KL_G),   E_π*[r] = Σ_G π*(G) · E_π*(·|G)[r]

(v_G ≤ E_π*(·|G)[r]; v_G tends to max_G r as β → 0 and to the plain mean E_π_ref(·|G)[r]
only as β → ∞.) `malformed_group` computes v, E_π*(·|G)[r] and KL_G for MALFORMED by
enumerating its members with π_ref ≥ ε (`ppo.lm.exact.enumeration`); the rarer ones, a share
1 − covered/π_ref(MALFORMED) of the group, are taken to score like those found.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ppo.lm.exact.enumeration import ending_mass, enumerate_completions
from ppo.lm.models.gpt import GPT, completion_log_probs
from ppo.lm.models.tokenizer import CharTokenizer

MALFORMED = "<malformed>"  # ends with EOS within the limit, but is none of the answers
NO_EOS = "<no eos>"  # no EOS within max_new_tokens: scored missing_eos_penalty, as in training
DEFAULT_MIN_PROBABILITY = 1e-8  # ε of the prefix tree that brackets π_ref(NO_EOS)


@torch.no_grad()
def completion_probabilities(model: GPT, tokenizer: CharTokenizer, prompt: str, answers: tuple[str, ...] | list[str],
                             temperature: float = 1.0, max_new_tokens: int | None = None,
                             min_probability: float = DEFAULT_MIN_PROBABILITY) -> dict[str, float]:
    """π(answer + EOS | prompt) at temperature τ for every answer, and the rest (the module docstring).

    Without `max_new_tokens` the rest is one group, MALFORMED = 1 − Σ_a π(a). With it, an
    answer longer than the limit has probability 0, NO_EOS holds the mass that emits no EOS
    within the limit (an upper bound, off by at most the prefix tree's unresolved mass
    below `min_probability`), and MALFORMED = 1 − Σ_a π(a) − π(NO_EOS).
    """
    return _group_probabilities(model, tokenizer, prompt, answers, temperature, max_new_tokens, min_probability)[0]


def _group_probabilities(model, tokenizer, prompt, answers, temperature, max_new_tokens,
                         min_probability) -> tuple[dict[str, float], float]:
    """(completion_probabilities, the unresolved mass counted in NO_EOS: 0 without a length limit)."""
    was_training = model.training
    model.eval()
    encoded = [tokenizer.encode(answer, add_bos=False, add_eos=True) for answer in answers]
    with torch.no_grad():
        log_probs = completion_log_probs(model, tokenizer.encode(prompt), encoded, temperature)  # (F,)
    model.train(was_training)
    probabilities = dict(zip(answers, log_probs.exp().tolist()))
    unresolved = 0.0
    if max_new_tokens is not None:
        for answer, tokens in zip(answers, encoded):
            if len(tokens) > max_new_tokens:  # cut off before its EOS: part of NO_EOS
                probabilities[answer] = 0.0
        mass = ending_mass(model, tokenizer, prompt, max_new_tokens, min_probability, temperature)
        probabilities[NO_EOS] = min(1.0, mass.no_eos_upper)
        unresolved = mass.unresolved
    probabilities[MALFORMED] = max(0.0, 1.0 - sum(probabilities.values()))
    return probabilities, unresolved


@dataclass(frozen=True)
class ScoredGroup:
    """A group whose members score differently, as π*_β sees it (the module docstring)."""

    beta: float
    soft_value: float  # v = β · log E_{π_ref(·|G)}[exp(r/β)] (max r at β = 0): the group's score in π*(G)
    tilted_mean: float  # E_{π*(·|G)}[r]
    inner_kl: float  # KL(π*(·|G) ‖ π_ref(·|G)) = (tilted_mean − soft_value) / β
    covered: float  # π_ref mass of the members it was computed from


def scored_group(scores: torch.Tensor, reference_probabilities: torch.Tensor, beta: float) -> ScoredGroup:
    """v, E_π*(·|G)[r] and KL(π*(·|G) ‖ π_ref(·|G)) of members with scores r (N,) and π_ref (N,), in float64."""
    scores, probabilities = scores.double(), reference_probabilities.double()
    log_ref = torch.log_softmax(probabilities.log(), dim=0)  # log π_ref(y | G)
    if beta > 0:
        log_tilted = log_ref + scores / beta
        soft_value = beta * float(torch.logsumexp(log_tilted, dim=0))
        log_tilted = torch.log_softmax(log_tilted, dim=0)  # log π*(y | G)
    else:  # β → 0: π*(·|G) keeps the best members, re-weighted by π_ref
        soft_value = float(scores.max())
        log_tilted = torch.log_softmax(log_ref.masked_fill(scores < scores.max(), -math.inf), dim=0)
    tilted = log_tilted.exp()
    inner_kl = float((tilted * (log_tilted - log_ref)).nan_to_num().sum())  # 0 · log 0 = 0
    return ScoredGroup(beta, soft_value, float((tilted * scores).sum()), inner_kl, float(probabilities.sum()))


def malformed_group(model: GPT, tokenizer: CharTokenizer, prompt: str, answers: tuple[str, ...] | list[str],
                    score_texts: Callable[[list[str]], torch.Tensor], beta: float, temperature: float = 1.0, *,
                    max_new_tokens: int, min_probability: float = DEFAULT_MIN_PROBABILITY) -> ScoredGroup:
    """MALFORMED as a `ScoredGroup`: every completion of `prompt` that ends with EOS within max_new_tokens, is none
    of the answers and has π_ref ≥ min_probability, scored by `score_texts(completion texts) -> (N,)`."""
    found = enumerate_completions(model, tokenizer, prompt, min_probability, max_new_tokens, temperature)
    members = [i for i, (text, ended) in enumerate(zip(found.texts, found.ended_with_eos))
               if ended and text not in answers]
    if not members:
        raise ValueError(f"no malformed completion of {prompt!r} has π_ref ≥ {min_probability:g}; "
                         f"give a smaller min_probability")
    scores = torch.as_tensor(score_texts([found.texts[i] for i in members]), dtype=torch.float64)
    return scored_group(scores, found.probabilities[members], beta)


@dataclass
class KLRegularisedOptimum:
    beta: float
    probabilities: dict[str, float]  # π*(group)
    reference_probabilities: dict[str, float]  # π_ref(group)
    kl: float  # KL(π* ‖ π_ref) in nats
    expected_score: float  # E_π*[r]
    # π_ref mass whose ending the prefix tree left open, counted in NO_EOS (so π_ref(NO_EOS)
    # is exact to within it, from above; 0 without NO_EOS)
    no_eos_unresolved: float = 0.0

    @property
    def objective(self) -> float:
        return self.expected_score - self.beta * self.kl


def kl_regularised_optimum(reference_probabilities: dict[str, float], scores: dict[str, float | ScoredGroup],
                           beta: float) -> KLRegularisedOptimum:
    """π* ∝ π_ref · exp(r / β) over the groups of `reference_probabilities` (scores: r per group, or a
    `ScoredGroup` of this β for a group whose members score differently: the module docstring)."""
    groups = [g for g, p in reference_probabilities.items() if p > 0]
    scored = {g: scores[g] if isinstance(scores[g], ScoredGroup) else ScoredGroup(beta, scores[g], scores[g], 0.0, 0.0)
              for g in groups}
    for g, group in scored.items():
        if group.beta != beta:
            raise ValueError(f"group {g!r} was scored at β = {group.beta}, not at β = {beta}")
    log_ref = {g: math.log(reference_probabilities[g]) for g in groups}
    if beta > 0:
        logits = {g: log_ref[g] + scored[g].soft_value / beta for g in groups}
    else:  # β → 0: only the best-scoring groups survive
        best = max(group.soft_value for group in scored.values())
        logits = {g: log_ref[g] if scored[g].soft_value == best else -math.inf for g in groups}
    log_z = torch.logsumexp(torch.tensor(list(logits.values()), dtype=torch.float64), dim=0).item()
    optimum = {g: math.exp(logits[g] - log_z) for g in groups}
    kl = sum(p * (math.log(p) - log_ref[g] + scored[g].inner_kl) for g, p in optimum.items() if p > 0)
    expected = sum(p * scored[g].tilted_mean for g, p in optimum.items())
    probabilities = {g: optimum.get(g, 0.0) for g in reference_probabilities}
    return KLRegularisedOptimum(beta, probabilities, dict(reference_probabilities), kl, expected)


def optimum_over_prompts(reference: GPT, tokenizer: CharTokenizer, prompts: list[str], answers: tuple[str, ...],
                         scores_for: Callable[[str], dict[str, float | ScoredGroup]], beta: float,
                         temperature: float = 1.0, *,
                         max_new_tokens: int, missing_eos_penalty: float,
                         min_probability: float = DEFAULT_MIN_PROBABILITY) -> KLRegularisedOptimum:
    """π* for each prompt (prompts drawn uniformly), averaged: mean probabilities, mean KL, mean E[r].

    The groups are those of `completion_probabilities` with the training length limit:
    the answers, MALFORMED and NO_EOS. `scores_for(prompt)` gives r for the answers and
    MALFORMED (for a rule reward the same dict for every prompt; for a learned reward,
    MALFORMED as `malformed_group` of the prompt at this β); NO_EOS gets
    `missing_eos_penalty`, which training gives a completion without EOS whatever the
    reward says (a different NO_EOS score from `scores_for` is an error).
    """
    optima, unresolved = [], []
    for prompt in prompts:
        reference_probabilities, left_open = _group_probabilities(reference, tokenizer, prompt, answers, temperature,
                                                                  max_new_tokens, min_probability)
        scores = scores_for(prompt)
        if scores.get(NO_EOS, missing_eos_penalty) != missing_eos_penalty:
            raise ValueError(f"scores_for gives {NO_EOS} the score {scores[NO_EOS]}, but training gives a completion "
                             f"without EOS missing_eos_penalty = {missing_eos_penalty}")
        scores = {**scores, NO_EOS: missing_eos_penalty}
        optima.append(kl_regularised_optimum(reference_probabilities, scores, beta))
        unresolved.append(left_open)
    n = len(optima)

    def mean_of(field: str) -> dict[str, float]:
        return {g: sum(getattr(o, field)[g] for o in optima) / n for g in optima[0].probabilities}

    return KLRegularisedOptimum(beta, mean_of("probabilities"), mean_of("reference_probabilities"),
                                sum(o.kl for o in optima) / n, sum(o.expected_score for o in optima) / n,
                                sum(unresolved) / n)


def rule_scores(answers: tuple[str, ...], target: str, score: float,
                missing_eos_penalty: float | None = None) -> dict[str, float]:
    """r per group for a rule reward: `score` for the target answer, 0 for other answers and MALFORMED;
    with `missing_eos_penalty`, NO_EOS gets it (the groups of a length limit)."""
    scores = {group: (score if group == target else 0.0) for group in (*answers, MALFORMED)}
    if missing_eos_penalty is not None:
        scores[NO_EOS] = float(missing_eos_penalty)
    return scores
