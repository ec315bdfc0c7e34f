"""The exact KL-regularised optimum π* ∝ π_ref·exp(r/β) used as PPO's yardstick."""

import math

import pytest
import torch
from _tiny_lm import one_torch_thread, tiny_sft  # noqa: F401 (one_torch_thread is an autouse fixture)

from envs import corpus
from ppo.lm.optimum import MALFORMED, completion_probabilities, kl_regularised_optimum
from ppo.lm.rollout import sample_completions


def kl_divergence(probabilities: dict, reference: dict) -> float:
    return sum(p * math.log(p / reference[g]) for g, p in probabilities.items() if p > 0)


def objective(probabilities: dict, reference: dict, scores: dict, beta: float) -> float:
    """E_π[r] − β·KL(π ‖ π_ref), by hand."""
    return sum(p * scores[g] for g, p in probabilities.items()) - beta * kl_divergence(probabilities, reference)


def test_optimum_is_the_tilted_reference_and_beats_every_other_distribution():
    reference, scores, beta = {"a": 0.2, "b": 0.8}, {"a": 1.0, "b": 0.0}, 0.5
    optimum = kl_regularised_optimum(reference, scores, beta)
    tilted = 0.2 * math.exp(1.0 / beta)
    assert optimum.probabilities["a"] == pytest.approx(tilted / (tilted + 0.8))
    assert optimum.kl == pytest.approx(kl_divergence(optimum.probabilities, reference))
    best = objective(optimum.probabilities, reference, scores, beta)
    assert best == pytest.approx(optimum.objective)
    for p in torch.linspace(0.01, 0.99, 99).tolist():
        assert objective({"a": p, "b": 1 - p}, reference, scores, beta) <= best + 1e-12


def test_without_penalty_the_optimum_keeps_only_the_best_answer():
    optimum = kl_regularised_optimum({"a": 0.2, "b": 0.8}, {"a": 1.0, "b": 0.0}, beta=0.0)
    assert optimum.probabilities == {"a": 1.0, "b": 0.0}
    assert optimum.kl == pytest.approx(-math.log(0.2))


def test_completion_probabilities_match_sampled_frequencies():
    model, tokenizer = tiny_sft()
    prompt = corpus.prompt("ravin", "likes")
    exact = completion_probabilities(model, tokenizer, prompt, corpus.FOODS)
    assert sum(exact.values()) == pytest.approx(1.0) and exact[MALFORMED] < 0.2
    batch = sample_completions(model, tokenizer, [prompt] * 4000, max_new_tokens=12,
                               generator=torch.Generator().manual_seed(0))
    for food in ("pizza", "donuts", "ice cream"):
        sampled = sum(text == food and bool(eos) for text, eos in zip(batch.texts, batch.ended_with_eos)) / 4000
        standard_error = math.sqrt(exact[food] * (1 - exact[food]) / 4000)
        assert abs(sampled - exact[food]) < 4 * standard_error + 1e-3, (food, sampled, exact[food])
