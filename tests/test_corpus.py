import math
from collections import Counter

import pytest

from envs import corpus


def test_every_distribution_is_a_distribution_over_all_foods():
    for person in corpus.PEOPLE:
        for relation in corpus.RELATIONS:
            dist = corpus.food_distribution(person, relation)
            assert list(dist) == list(corpus.FOODS)
            assert all(p >= 0 for p in dist.values())
            assert math.isclose(sum(dist.values()), 1.0, abs_tol=1e-12)


def test_ravin_likes_pizza_twelve_percent():
    assert corpus.food_distribution("ravin", "likes")["pizza"] == pytest.approx(0.12)
    assert corpus.prompt("ravin", "likes") == "ravin likes "


def test_sampled_frequencies_match_the_table():
    n = 64_000
    sentences = corpus.sample_sentences(n, seed=1)
    counts = Counter(sentences)
    contexts = Counter(" ".join(s.split(" ")[:2]) for s in sentences)
    assert len(contexts) == len(corpus.PEOPLE) * len(corpus.RELATIONS)
    for person in corpus.PEOPLE:
        for relation in corpus.RELATIONS:
            m = contexts[f"{person} {relation}"]
            assert abs(m / n - 1 / 16) < 5 * math.sqrt((1 / 16) * (15 / 16) / n)  # uniform contexts
            for food, p in corpus.food_distribution(person, relation).items():
                freq = counts[f"{person} {relation} {food}"] / m
                assert abs(freq - p) < 5 * math.sqrt(p * (1 - p) / m) + 1e-9, (person, relation, food)


def test_sampling_is_seeded():
    assert corpus.sample_sentences(50, seed=3) == corpus.sample_sentences(50, seed=3)
    assert corpus.sample_sentences(50, seed=3) != corpus.sample_sentences(50, seed=4)


def test_parse_completion():
    assert corpus.parse_completion("pizza") == "pizza"
    assert corpus.parse_completion("ice cream") == "ice cream"
    assert corpus.parse_completion("pizz") is None
    assert corpus.parse_completion("pizza pizza") is None
    assert corpus.parse_completion("pizza", ended_with_eos=False) is None


def test_sentence_entropy_by_hand():
    h_food = sum(corpus.food_entropy(p, r) for p in corpus.PEOPLE for r in corpus.RELATIONS) / 16
    assert corpus.food_entropy("lena", "likes") == pytest.approx(math.log(10))  # lena likes uniformly
    assert corpus.sentence_entropy() == pytest.approx(math.log(8) + math.log(2) + h_food)


def test_unknown_person_is_rejected():
    with pytest.raises(ValueError, match="bob"):
        corpus.food_distribution("bob", "likes")


def test_longest_sentence_length():
    longest = max(len(s) for s in corpus.sample_sentences(20_000, seed=0))
    assert corpus.longest_sentence_length() == longest == len("priya hates ice cream")
