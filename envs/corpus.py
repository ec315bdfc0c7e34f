"""A synthetic corpus of sentences like "ravin likes pizza" with a KNOWN distribution.

Every sentence is ``f"{person} {relation} {food}"``. It is drawn in three steps:

    person   ~ Uniform(PEOPLE)
    relation ~ Uniform(RELATIONS)
    food     ~ p(food | person, relation)      (the table below)

Because the table is written down here, we know the true distribution exactly.
That buys two things a real corpus never gives us:

1. After pretraining we can check the model against the truth: the completions of
   the prompt "ravin likes " should be "pizza" 12% of the time, "donuts" 20%, ...
2. When PPO later fine-tunes the model with a KL penalty towards the pretrained
   policy, the optimum of  E[r] - beta * KL(pi || pi_ref)  is known in closed form,
   pi*(food) ∝ pi_ref(food) * exp(r(food) / beta), so training can be checked
   against it instead of being judged by eye.

`FOOD_CORPUS` is this corpus as pretraining sees it (`ppo.lm.models.pretrain.TextCorpus`:
characters, a seeded sample, and a fingerprint for the cache key).
"""

from __future__ import annotations

import bisect
import itertools
import math
import random

PEOPLE: tuple[str, ...] = ("ravin", "maya", "omar", "lena", "kofi", "priya", "sam", "yuki")
RELATIONS: tuple[str, ...] = ("likes", "hates")
FOODS: tuple[str, ...] = (
    "pizza", "donuts", "apples", "lettuce", "soda",
    "salad", "ice cream", "cookies", "tacos", "sushi",
)

# Preference tables in percent; each row follows the order of FOODS and sums to 100.
# fmt: off
#          pizza donuts apples lettuce soda salad icecream cookies tacos sushi
_LIKES = {
    "ravin": (12,   20,    5,     3,    15,    4,    18,      14,     6,    3),
    "maya":  ( 5,    5,   25,    10,     2,   30,     8,       5,     4,    6),
    "omar":  (30,    4,    6,     2,     8,    5,    10,       5,    25,    5),
    "lena":  (10,   10,   10,    10,    10,   10,    10,      10,    10,   10),
    "kofi":  (15,    2,    8,     5,     5,   10,     5,       5,    15,   30),
    "priya": ( 8,   12,   15,     3,     3,    9,    20,      22,     4,    4),
    "sam":   (25,   15,    3,     2,    20,    3,    10,      12,     8,    2),
    "yuki":  ( 6,    8,   12,     6,     4,   10,    14,      10,     5,   25),
}
_HATES = {
    "ravin": ( 2,    3,   10,    35,     4,   25,     2,       3,     6,   10),
    "maya":  (20,   25,    2,     3,    30,    2,     5,       8,     3,    2),
    "omar":  ( 3,   10,    8,    15,    12,   10,     5,       7,     2,   28),
    "lena":  ( 8,   12,    4,    20,     6,   16,     4,       6,    10,   14),
    "kofi":  ( 6,   18,    5,     9,    22,    6,    14,      12,     4,    4),
    "priya": (10,    4,    3,    25,    18,   12,     3,       2,    15,    8),
    "sam":   ( 2,    3,   12,    30,     2,   28,     3,       2,     6,   12),
    "yuki":  (14,   10,    6,    12,    16,    8,     6,       6,    18,    4),
}
# fmt: on
PERCENT_TABLE: dict[str, dict[str, tuple[int, ...]]] = {"likes": _LIKES, "hates": _HATES}


def _check(person: str, relation: str) -> None:
    if person not in PEOPLE:
        raise ValueError(f"unknown person {person!r}; expected one of {', '.join(PEOPLE)}")
    if relation not in RELATIONS:
        raise ValueError(f"unknown relation {relation!r}; expected one of {', '.join(RELATIONS)}")


def food_distribution(person: str, relation: str) -> dict[str, float]:
    """Exact p(food | person, relation), as a dict over all FOODS (sums to 1)."""
    _check(person, relation)
    percents = PERCENT_TABLE[relation][person]
    return {food: pct / 100.0 for food, pct in zip(FOODS, percents)}


def food_entropy(person: str, relation: str) -> float:
    """H(food | person, relation) = -sum_f p(f) log p(f), in nats."""
    return -sum(p * math.log(p) for p in food_distribution(person, relation).values() if p > 0)


def sentence_entropy() -> float:
    """Entropy of a whole sentence in nats: log|PEOPLE| + log|RELATIONS| + E[H(food | person, relation)].

    Every other character is determined by these three choices, so no model can
    assign the corpus a lower expected negative log-likelihood per sentence.
    """
    mean_food_entropy = sum(food_entropy(p, r) for p in PEOPLE for r in RELATIONS) / (
        len(PEOPLE) * len(RELATIONS)
    )
    return math.log(len(PEOPLE)) + math.log(len(RELATIONS)) + mean_food_entropy


def prompt(person: str, relation: str) -> str:
    """The text a model is asked to complete, e.g. prompt("ravin", "likes") == "ravin likes "."""
    _check(person, relation)
    return f"{person} {relation} "


def sample_sentences(n: int, seed: int) -> list[str]:
    """Draw n i.i.d. sentences "person relation food"; the same seed gives the same list."""
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    rng = random.Random(seed)
    cumulative = {key: list(itertools.accumulate(PERCENT_TABLE[key[1]][key[0]]))
                  for key in itertools.product(PEOPLE, RELATIONS)}
    sentences = []
    for _ in range(n):
        person, relation = rng.choice(PEOPLE), rng.choice(RELATIONS)
        # inverse-CDF draw: the first food whose cumulative percentage exceeds u ~ Uniform[0, 100)
        food = FOODS[bisect.bisect_right(cumulative[person, relation], rng.random() * 100)]
        sentences.append(f"{person} {relation} {food}")
    return sentences


def parse_completion(completion_text: str, ended_with_eos: bool = True) -> str | None:
    """Return the food a completion names, or None if it is not well-formed.

    Well-formed means: the generated text is exactly one existing food and the model
    then emitted EOS. Pass the completion decoded up to (not including) EOS, and
    ``ended_with_eos=False`` when generation stopped without EOS (e.g. it hit the
    length limit), which always counts as malformed.
    """
    if ended_with_eos and completion_text in FOODS:
        return completion_text
    return None


def longest_sentence_length() -> int:
    """Characters in the longest possible sentence."""
    return max(len(p) for p in PEOPLE) + max(len(r) for r in RELATIONS) + max(len(f) for f in FOODS) + 2


def corpus_characters() -> str:
    """All characters any sentence can contain, sorted (letters and space)."""
    words = PEOPLE + RELATIONS + FOODS
    return "".join(sorted(set(" ".join(words))))


class FoodCorpus:
    """The sentences of this module, with the methods pretraining asks of a corpus."""

    def characters(self) -> str:
        return corpus_characters()

    def sample(self, n: int, seed: int) -> list[str]:
        return sample_sentences(n, seed)

    def fingerprint(self) -> dict:
        return {"corpus": PERCENT_TABLE, "people": PEOPLE, "foods": FOODS}


FOOD_CORPUS = FoodCorpus()
