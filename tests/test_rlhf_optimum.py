"""The exact KL-regularised optimum π* ∝ π_ref·exp(r/β) used as PPO's yardstick."""

import math

import pytest
import torch
from _tiny_lm import one_torch_thread, tiny_sft  # noqa: F401 (one_torch_thread is an autouse fixture)

from envs import corpus
from ppo.lm.exact.enumeration import ending_mass
from ppo.lm.models.gpt import GPT, GPTConfig, completion_log_probs
from ppo.lm.exact.optimum import (
    MALFORMED,
    NO_EOS,
    completion_probabilities,
    kl_regularised_optimum,
    optimum_over_prompts,
    rule_scores,
)
from ppo.lm.algorithm.rollout import sample_completions
from ppo.lm.models.tokenizer import CharTokenizer


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


def uniform_model(tokenizer: CharTokenizer) -> GPT:
    """A GPT with every weight 0: logits 0, so each step is uniform over the K tokens it may emit (EOS and
    the characters; BOS and PAD never)."""
    model = GPT(GPTConfig(vocab_size=tokenizer.vocab_size, block_size=8, n_layer=1, n_head=1, n_embd=4,
                          never_emitted=(tokenizer.bos_id, tokenizer.pad_id)))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
    return model.eval()


# Alphabet {a, b} and EOS: every token has probability 1/3 at every step. Within T tokens,
# π(answer + EOS) = 3^−(len + 1) if len + 1 ≤ T (else 0), π(no EOS within T) = (2/3)^T, and
# MALFORMED is what is left: T = 2: 1 − 1/9 − 1/9 − 0 − 4/9 = 1/3 (only the empty string);
# T = 3: 1 − 3/27 − 3/27 − 1/27 − 8/27 = 12/27 (the empty string 9/27, "aa", "ba", "bb").
HAND_WORKED = {
    2: {"a": 1 / 9, "b": 1 / 9, "ab": 0.0, NO_EOS: 4 / 9, MALFORMED: 1 / 3},
    3: {"a": 1 / 9, "b": 1 / 9, "ab": 1 / 27, NO_EOS: 8 / 27, MALFORMED: 12 / 27},
}


@pytest.mark.parametrize("max_new_tokens", sorted(HAND_WORKED))
def test_groups_of_a_uniform_model_by_hand(max_new_tokens):
    tokenizer = CharTokenizer("ab")
    model = uniform_model(tokenizer)
    groups = completion_probabilities(model, tokenizer, "", ("a", "b", "ab"), max_new_tokens=max_new_tokens)
    assert groups == pytest.approx(HAND_WORKED[max_new_tokens], abs=1e-7)  # the answers: float32 teacher forcing
    assert groups[NO_EOS] == pytest.approx(HAND_WORKED[max_new_tokens][NO_EOS], abs=1e-15)  # the tree: float64
    mass = ending_mass(model, tokenizer, "", max_new_tokens, min_probability=1e-3)  # nothing dropped
    assert mass.unresolved == 0.0 and mass.no_eos == pytest.approx((2 / 3) ** max_new_tokens, abs=1e-15)


def test_the_optimum_scores_running_out_of_tokens_with_the_missing_eos_penalty():
    """T = 3, reward 1 for "a" + EOS, β = 1/2, missing-EOS penalty −1, by hand:

        Z = (3/27)·e² + (3/27 + 1/27 + 12/27)·e⁰ + (8/27)·e⁻²
        π*(a) = (3/27)·e² / Z,   π*(NO_EOS) = (8/27)·e⁻² / Z,   KL = E_π*[r] / β − log Z
    """
    tokenizer = CharTokenizer("ab")
    model = uniform_model(tokenizer)
    beta, penalty = 0.5, -1.0
    scores = rule_scores(("a", "b", "ab"), "a", 1.0, missing_eos_penalty=penalty)
    assert scores == {"a": 1.0, "b": 0.0, "ab": 0.0, MALFORMED: 0.0, NO_EOS: -1.0}
    optimum = optimum_over_prompts(model, tokenizer, [""], ("a", "b", "ab"), lambda prompt: scores, beta,
                                   max_new_tokens=3, missing_eos_penalty=penalty)
    with pytest.raises(ValueError, match="missing_eos_penalty"):  # a reward that disagrees with training
        optimum_over_prompts(model, tokenizer, [""], ("a", "b", "ab"), lambda prompt: {**scores, NO_EOS: 0.0}, beta,
                             max_new_tokens=3, missing_eos_penalty=penalty)
    z = 3 / 27 * math.exp(2) + 16 / 27 + 8 / 27 * math.exp(-2)
    expected_score = (3 / 27 * math.exp(2) - 8 / 27 * math.exp(-2)) / z
    assert optimum.probabilities["a"] == pytest.approx(3 / 27 * math.exp(2) / z, rel=1e-6)
    assert optimum.probabilities[NO_EOS] == pytest.approx(8 / 27 * math.exp(-2) / z, rel=1e-6)
    assert optimum.expected_score == pytest.approx(expected_score, rel=1e-6)
    assert optimum.kl == pytest.approx(expected_score / beta - math.log(z), rel=1e-6)
    assert optimum.no_eos_unresolved == 0.0
    # scored 0 instead (the optimum before the split), running out of tokens would be 7× likelier
    z_if_zero = 3 / 27 * math.exp(2) + 24 / 27
    assert optimum.probabilities[NO_EOS] < 0.2 * (8 / 27) / z_if_zero


def test_no_eos_probability_is_bracketed_around_brute_force_enumeration():
    """T = 3: every one of the (V − 1)³ EOS-free completions, and every one that ends within 3 tokens
    (the 1 + (V − 1) + (V − 1)² strings s of up to two tokens, then EOS), scored by teacher forcing."""
    model, tokenizer = tiny_sft()
    prompt = corpus.prompt("ravin", "likes")
    emitted = torch.tensor([i for i in range(tokenizer.vocab_size)
                            if i not in (tokenizer.bos_id, tokenizer.pad_id, tokenizer.eos_id)])
    running_on = [ids.tolist() for ids in torch.cartesian_prod(emitted, emitted, emitted)]
    ending = [[tokenizer.eos_id]] + [[i, tokenizer.eos_id] for i in emitted.tolist()]
    ending += [[*ids.tolist(), tokenizer.eos_id] for ids in torch.cartesian_prod(emitted, emitted)]
    with torch.no_grad():
        no_eos, ended = (float(completion_log_probs(model, tokenizer.encode(prompt), completions).double().exp().sum())
                         for completions in (running_on, ending))
    assert no_eos + ended == pytest.approx(1.0, abs=1e-5) and ended > 1e-4  # float32 teacher forcing
    for min_probability in (1e-3, 1e-6, 1e-12):
        mass = ending_mass(model, tokenizer, prompt, 3, min_probability)
        assert mass.ended + mass.no_eos + mass.unresolved == pytest.approx(1.0, abs=1e-12)
        assert mass.no_eos - 1e-6 <= no_eos <= mass.no_eos_upper + 1e-6, (min_probability, mass, no_eos)
        assert mass.ended - 1e-6 <= ended <= mass.ended + mass.unresolved + 1e-6, (min_probability, mass, ended)
    assert mass.unresolved < 1e-9
    assert (mass.no_eos, mass.ended) == pytest.approx((no_eos, ended), abs=1e-6)


def test_no_eos_and_malformed_groups_match_sampled_frequencies_at_a_short_limit():
    """At T = 6 the foods of six letters or more cannot end: much of the mass runs out of tokens."""
    model, tokenizer = tiny_sft()
    prompt, limit, n = corpus.prompt("ravin", "likes"), 6, 4000
    groups = completion_probabilities(model, tokenizer, prompt, corpus.FOODS, max_new_tokens=limit)
    assert groups["donuts"] == 0.0 and groups["pizza"] > 0.0 and sum(groups.values()) == pytest.approx(1.0)
    mass = ending_mass(model, tokenizer, prompt, limit, 1e-8)
    assert groups[NO_EOS] == pytest.approx(mass.no_eos_upper) and mass.unresolved < 1e-3
    batch = sample_completions(model, tokenizer, [prompt] * n, max_new_tokens=limit,
                               generator=torch.Generator().manual_seed(1))
    sampled = {NO_EOS: float((~batch.ended_with_eos).double().mean()),
               MALFORMED: sum(bool(eos) and text not in corpus.FOODS
                              for text, eos in zip(batch.texts, batch.ended_with_eos)) / n,
               "pizza": sum(bool(eos) and text == "pizza" for text, eos in zip(batch.texts, batch.ended_with_eos)) / n}
    assert sampled[NO_EOS] > 0.2
    for group, frequency in sampled.items():
        standard_error = math.sqrt(groups[group] * (1 - groups[group]) / n)
        assert abs(frequency - groups[group]) < 4 * standard_error + mass.unresolved + 1e-3, (group, frequency, groups)


def test_a_group_that_scores_its_members_differently_by_hand():
    """Members with π_ref(·|G) = (1/4, 3/4) and r = (1, 0), β = 1: v = log(e/4 + 3/4), π*(·|G) = (e, 3)/(e + 3),
    E_π*(·|G)[r] = e/(e + 3), KL_G = E[r]/β − v/β. At β = 0: v = 1, π*(·|G) on the first member, KL_G = log 4."""
    from ppo.lm.exact.optimum import scored_group

    group = scored_group(torch.tensor([1.0, 0.0]), torch.tensor([0.01, 0.03]), beta=1.0)
    e = math.e
    assert group.soft_value == pytest.approx(math.log(e / 4 + 3 / 4), rel=1e-12)
    assert group.tilted_mean == pytest.approx(e / (e + 3), rel=1e-12)
    assert group.inner_kl == pytest.approx(e / (e + 3) - math.log(e / 4 + 3 / 4), rel=1e-12)
    assert group.covered == pytest.approx(0.04, rel=1e-6)
    at_zero = scored_group(torch.tensor([1.0, 0.0]), torch.tensor([0.01, 0.03]), beta=0.0)
    assert (at_zero.soft_value, at_zero.tilted_mean) == (1.0, 1.0)
    assert at_zero.inner_kl == pytest.approx(math.log(4), rel=1e-12)


def test_the_malformed_group_by_enumeration_matches_brute_force_over_every_string():
    """T = 3 on the tiny model: every completion, scored by a reward that differs from string to string, gives
    π*(y) ∝ π_ref(y)·exp(r(y)/β) by brute force. The optimum over the groups, with MALFORMED as its enumerated soft
    value, must give the same π*(MALFORMED), KL and E[r]; scoring MALFORMED by its members' plain mean does not."""
    from ppo.lm.exact.optimum import ScoredGroup, malformed_group

    model, tokenizer = tiny_sft()
    prompt, limit, beta, penalty = corpus.prompt("ravin", "likes"), 3, 0.3, -1.0
    answers = ("p", "pi")

    def reward(text: str) -> float:  # any function of the string
        return (sum(map(ord, text)) % 7) / 3.0 - 1.0

    emitted = torch.tensor([i for i in range(tokenizer.vocab_size)
                            if i not in (tokenizer.bos_id, tokenizer.pad_id, tokenizer.eos_id)])
    ending = [[tokenizer.eos_id]] + [[i, tokenizer.eos_id] for i in emitted.tolist()]
    ending += [[*ids.tolist(), tokenizer.eos_id] for ids in torch.cartesian_prod(emitted, emitted)]
    running_on = [ids.tolist() for ids in torch.cartesian_prod(emitted, emitted, emitted)]
    with torch.no_grad():
        log_ref = torch.cat([completion_log_probs(model, tokenizer.encode(prompt), completions).double()
                             for completions in (ending, running_on)])  # (N,)
    texts = [tokenizer.decode_completion(ids) for ids in ending]
    malformed = torch.tensor([text not in answers for text in texts] + [False] * len(running_on))  # (N,)
    scores = torch.tensor([reward(text) for text in texts] + [penalty] * len(running_on), dtype=torch.float64)
    log_optimum = torch.log_softmax(log_ref + scores / beta, dim=0)  # π* over every string
    optimum = log_optimum.exp()
    brute_kl = float((optimum * (log_optimum - log_ref)).sum())
    brute_score = float((optimum * scores).sum())
    member_ref = log_ref[malformed].exp()
    brute_soft_value = beta * math.log(float((member_ref * (scores[malformed] / beta).exp()).sum() / member_ref.sum()))

    group = malformed_group(model, tokenizer, prompt, answers, lambda found: [reward(text) for text in found], beta,
                            max_new_tokens=limit, min_probability=1e-30)  # nothing dropped
    # float32 teacher forcing on both sides: bound the difference well above its rounding
    assert group.soft_value == pytest.approx(brute_soft_value, abs=1e-5)
    assert group.covered == pytest.approx(float(member_ref.sum()), rel=1e-4)
    group_scores = {**{answer: reward(answer) for answer in answers}, MALFORMED: group}
    result = optimum_over_prompts(model, tokenizer, [prompt], answers, lambda _: group_scores, beta,
                                  max_new_tokens=limit, missing_eos_penalty=penalty, min_probability=1e-30)
    assert result.probabilities[MALFORMED] == pytest.approx(float(optimum[malformed].sum()), abs=1e-5)
    assert result.kl == pytest.approx(brute_kl, abs=1e-4)
    assert result.expected_score == pytest.approx(brute_score, abs=1e-5)
    # the plain mean over the group (what a uniform average of its strings estimates at best) is another optimum
    plain_mean = float((member_ref * scores[malformed]).sum() / member_ref.sum())
    assert abs(plain_mean - brute_soft_value) > 0.05
    mean_scored = optimum_over_prompts(model, tokenizer, [prompt], answers,
                                       lambda _: {**group_scores, MALFORMED: plain_mean}, beta,
                                       max_new_tokens=limit, missing_eos_penalty=penalty, min_probability=1e-30)
    assert abs(mean_scored.probabilities[MALFORMED] - float(optimum[malformed].sum())) > 1e-3
    with pytest.raises(ValueError, match="scored at β = 0.3, not at β = 0.5"):
        kl_regularised_optimum({MALFORMED: 1.0}, {MALFORMED: group}, 0.5)
    assert isinstance(group, ScoredGroup)
