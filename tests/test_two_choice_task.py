"""The two-choice task: its reward by hand, the exact optimum against brute force, and a short run that learns it."""

import itertools
import math
from types import SimpleNamespace

import pytest
import torch
from _tiny_lm import one_torch_thread, tiny_sft  # noqa: F401 (one_torch_thread is an autouse fixture)

from experiments.studies.compare_lm_trainers import first_reaching, position_shares
from experiments.tasks.two_choice_task import ANSWERS, HEALTHY, PAID, UNHEALTHY, TwoChoiceTaskConfig, two_choice_task
from ppo.config import ConfigError
from ppo.lm.trainers.evaluation import evaluate_lm_policy
from ppo.lm.models.gpt import GPT, GPTConfig, completion_log_probs
from ppo.lm.exact.optimum import MALFORMED, NO_EOS
from ppo.lm.exact.optimum_distance import distance_to_optimum, group_kl, kl_to_optimum_from_samples
from ppo.lm.trainers.rlhf_config import RLHFConfig
from ppo.lm.trainers.rlhf_trainer import RLHFTrainer
from ppo.lm.models.tokenizer import CharTokenizer


def completions(*pairs):
    """A stand-in for a CompletionBatch: what a scorer reads (texts, ended_with_eos)."""
    return SimpleNamespace(texts=[text for text, _ in pairs], ended_with_eos=torch.tensor([eos for _, eos in pairs]))


def test_the_reward_pays_only_the_right_combination_of_relation_and_food():
    assert HEALTHY == ("apples", "lettuce", "salad", "sushi")
    assert UNHEALTHY == ("donuts", "soda", "ice cream", "cookies")
    task = two_choice_task(TwoChoiceTaskConfig())
    batch = completions(("likes salad", True), ("hates soda", True), ("hates ice cream", True), ("hates salad", True),
                        ("likes soda", True), ("likes pizza", True), ("hates tacos", True), ("likes salad", False),
                        ("likes saladd", True), ("salad", True), ("likes  salad", True), ("", True))
    expected = [1.0, 0.5, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    assert task.reward(batch).tolist() == expected
    assert task.well_formed(batch).tolist() == [1.0] * 7 + [0.0] * 5
    assert task.measure(batch) == pytest.approx({"well_formed_rate": 7 / 12, "target_rate": 3 / 12,
                                                 "likes_rate": 3 / 12})  # likes salad, soda, pizza
    assert task.prompts == ["ravin ", "maya ", "omar ", "lena ", "kofi ", "priya ", "sam ", "yuki "]
    scores = TwoChoiceTaskConfig(likes_score=2.0, hates_score=-1.0).answer_scores()
    assert len(ANSWERS) == 20 and len(PAID) == 8 and set(scores) == {*ANSWERS, MALFORMED}
    assert scores["likes lettuce"] == 2.0 and scores["hates cookies"] == -1.0 and scores["likes cookies"] == 0.0
    assert sum(score != 0 for score in scores.values()) == 8


def test_a_bad_task_setting_is_named():
    with pytest.raises(ConfigError, match="person = 'bob'"):
        TwoChoiceTaskConfig(person="bob").validate()
    with pytest.raises(ConfigError, match="hates_score"):
        TwoChoiceTaskConfig(hates_score=math.nan).validate()
    assert TwoChoiceTaskConfig(person="maya").validate().prompts() == ["maya "]


def random_model(tokenizer: CharTokenizer, seed: int) -> GPT:
    config = GPTConfig(vocab_size=tokenizer.vocab_size, block_size=8, n_layer=1, n_head=1, n_embd=8,
                       never_emitted=(tokenizer.bos_id, tokenizer.pad_id))
    model = GPT(config, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():  # larger logits than the initialisation's, so that the two models differ visibly
        model.lm_head.weight.mul_(5.0)
    return model.eval()


def brute_force(model: GPT, tokenizer: CharTokenizer, prompt: str, limit: int) -> dict[tuple[str, bool], float]:
    """π(y) of every completion within `limit` tokens: each string of < limit letters then EOS, and each of
    exactly `limit` letters without EOS, scored one by one by teacher forcing."""
    letters = tokenizer.encode("ab", add_bos=False)
    strings = [(ids, True) for n in range(limit) for ids in itertools.product(letters, repeat=n)]
    strings += [(ids, False) for ids in itertools.product(letters, repeat=limit)]
    encoded = [list(ids) + ([tokenizer.eos_id] if ended else []) for ids, ended in strings]
    with torch.no_grad():
        log_probs = completion_log_probs(model, tokenizer.encode(prompt), encoded).double()
    return {(tokenizer.decode_completion(list(ids)), ended): float(p)
            for (ids, ended), p in zip(strings, log_probs.exp())}


def test_the_optimum_and_the_distances_match_brute_force_on_a_tiny_model():
    """A two-letter completion whose reward depends on both letters ("ab" 1, "ba" 0.5), every string of a
    tiny random model enumerated: π*, TV over the groups, and KL(π ‖ π*) over the strings."""
    tokenizer, limit, beta, penalty = CharTokenizer("ab"), 3, 0.4, -1.0
    answers = ("aa", "ab", "ba", "bb")
    answer_scores = {"aa": 0.0, "ab": 1.0, "ba": 0.5, "bb": 0.0}
    reference, policy = random_model(tokenizer, 1), random_model(tokenizer, 2)
    [result] = distance_to_optimum(policy, reference, tokenizer, [""], answers,
                                   lambda prompt: {**answer_scores, MALFORMED: 0.0}, beta,
                                   max_new_tokens=limit, missing_eos_penalty=penalty, min_probability=1e-12)

    def reward(text, ended):
        return answer_scores.get(text, 0.0) if ended else penalty

    def group(text, ended):
        return NO_EOS if not ended else (text if text in answers else MALFORMED)

    pi_ref, pi = brute_force(reference, tokenizer, "", limit), brute_force(policy, tokenizer, "", limit)
    assert sum(pi_ref.values()) == pytest.approx(1.0, abs=1e-6)
    z = sum(p * math.exp(reward(*y) / beta) for y, p in pi_ref.items())
    optimum = {y: p * math.exp(reward(*y) / beta) / z for y, p in pi_ref.items()}
    grouped = {name: {} for name in ("optimum", "policy", "reference")}
    for y in pi_ref:
        for name, probabilities in (("optimum", optimum), ("policy", pi), ("reference", pi_ref)):
            grouped[name][group(*y)] = grouped[name].get(group(*y), 0.0) + probabilities[y]
    # float32 teacher forcing on both sides: a few 1e-7 of each probability
    assert result.optimum.probabilities == pytest.approx(grouped["optimum"], abs=1e-6)
    assert result.policy_probabilities == pytest.approx(grouped["policy"], abs=1e-6)
    assert result.optimum.reference_probabilities == pytest.approx(grouped["reference"], abs=1e-6)
    assert result.log_partition == pytest.approx(math.log(z), abs=1e-5)
    tv_groups = 0.5 * sum(abs(grouped["policy"][g] - grouped["optimum"][g]) for g in grouped["optimum"])
    assert result.total_variation == pytest.approx(tv_groups, abs=1e-6) and tv_groups > 0.05
    tv_strings = 0.5 * sum(abs(pi[y] - optimum[y]) for y in pi)
    assert result.total_variation <= tv_strings + 1e-6  # merging strings never increases the TV
    kl_strings = sum(p * math.log(p / optimum[y]) for y, p in pi.items() if p > 0)
    assert group_kl(grouped["reference"], grouped["optimum"]) == pytest.approx(
        sum(p * math.log(p / optimum[y]) for y, p in pi_ref.items()), abs=1e-5)  # π* ∝ π_ref in each group

    # KL(π ‖ π*) from samples of π: the exact per-string terms, drawn 20000 times
    strings = list(pi)
    draws = torch.multinomial(torch.tensor([pi[y] for y in strings]), 20_000, replacement=True,
                              generator=torch.Generator().manual_seed(0)).tolist()
    log_ratios = torch.tensor([math.log(pi[strings[i]] / pi_ref[strings[i]]) for i in draws])
    scores = torch.tensor([reward(*strings[i]) for i in draws])
    mean, stderr = kl_to_optimum_from_samples(log_ratios, scores, torch.full((len(draws),), result.log_partition), beta)
    assert kl_strings > 0.1 and abs(mean - kl_strings) < 4 * stderr, (mean, stderr, kl_strings)
    # at π = π* every term is 0: log π*/π_ref − r/β + log Z
    at_optimum = torch.tensor([reward(*y) / beta - math.log(z) for y in strings], dtype=torch.float64)
    assert kl_to_optimum_from_samples(at_optimum, torch.tensor([reward(*y) for y in strings], dtype=torch.float64),
                                      torch.full((len(strings),), math.log(z), dtype=torch.float64),
                                      beta)[0] == pytest.approx(0.0, abs=1e-12)  # float64 throughout


def test_the_kl_shares_by_position_and_the_half_way_point_by_hand():
    # completion tokens: t = 0 (relation), 1–5, 6 (food), 7, 8+; two completions, 10 tokens
    exact_kl = torch.zeros(2, 10)
    exact_kl[0, 0], exact_kl[1, 0] = 0.2, 0.0  # mean 0.1 at t = 0
    exact_kl[:, 3] = 0.1  # 0.1 in t = 1–5
    exact_kl[:, 6] = 0.5
    exact_kl[0, 7] = 0.4  # mean 0.2
    exact_kl[1, 9] = 0.2  # mean 0.1 in t ≥ 8
    assert position_shares(exact_kl) == pytest.approx([0.1, 0.1, 0.5, 0.2, 0.1])
    # means of consecutive batches: 0.15 (1–2), 0.35 (2–3), 0.55 (3–4) → first ≥ 0.5 after the fourth batch
    assert first_reaching([0.1, 0.2, 0.5, 0.6], 0.5, batch_size=64) == 4 * 64
    assert first_reaching([0.1, 0.2], 0.5, batch_size=64) is None


def test_a_short_ppo_run_beats_the_sft_model_on_the_two_choice_task():
    model, tokenizer = tiny_sft()
    task = two_choice_task(TwoChoiceTaskConfig())
    config = RLHFConfig(iterations=6, batch_size=64, num_minibatches=2, learning_rate=1e-3, max_new_tokens=16,
                        seed=1, tensorboard=False, sample_every=0)
    trainer = RLHFTrainer(config, model, tokenizer, task, progress=False)
    before = evaluate_lm_policy(trainer.reference, trainer.reference, tokenizer, task, 400, max_new_tokens=16,
                                generator=torch.Generator().manual_seed(0))
    trainer.train()
    after = evaluate_lm_policy(trainer.policy, trainer.reference, tokenizer, task, 400, max_new_tokens=16,
                               generator=torch.Generator().manual_seed(0))
    # seed 1 when written: 0.252 → 0.745 after 6 × 64 completions (π*_0.15 of the full SFT model: 0.975)
    assert before.score < 0.35, before.summary()
    assert after.score > before.score + 0.3, (before.summary(), after.summary())
