"""The token-generation task: which prompts PPO sees and how a completion is scored.

A completion is the text the model generates after a prompt such as "ravin likes ",
up to (not including) its EOS token. It is *well-formed* when that text is exactly one
food of the corpus and the model did emit EOS (`envs.corpus.parse_completion`).

Rewards here are plain Python functions of (completion text, ended with EOS), one
number per completion; `ppo.lm.algorithm.rewards` turns them into per-token rewards. Two kinds:

* a rule reward, e.g. `target_food_score`: +score when the completion is the target
  food followed by EOS, 0 otherwise (the seed notebook's "+4 for pizzaE");
* a preference rule for the learned reward model: a fixed healthiness table that the
  corpus does not follow (ravin's favourite foods are donuts, ice cream and soda).
  `preferred` says which of two completions the rule prefers; synthetic preference
  pairs are labelled with it and a reward model is fitted to them
  (`ppo.lm.algorithm.reward_model`).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from envs import corpus

# How healthy each food is, in [0, 1]. Made up, fixed, and unrelated to the corpus table.
HEALTHINESS: dict[str, float] = {
    "lettuce": 1.0,
    "salad": 0.9,
    "apples": 0.8,
    "sushi": 0.7,
    "tacos": 0.5,
    "pizza": 0.35,
    "ice cream": 0.2,
    "cookies": 0.15,
    "donuts": 0.1,
    "soda": 0.0,
}
MALFORMED_HEALTHINESS = -0.5  # a malformed completion is worse than any food

SequenceScore = Callable[[str, bool], float]  # (completion text, ended_with_eos) -> score


def check_food(food: str) -> str:
    """Return `food` if the corpus knows it, else ValueError naming the allowed foods."""
    if food not in corpus.FOODS:
        raise ValueError(f"unknown food {food!r}; expected one of {', '.join(corpus.FOODS)}")
    return food


def task_prompts(person: str, relation: str = "likes") -> list[str]:
    """The prompts of a task: one person's ("ravin likes "), or every person's with person="all"."""
    people = corpus.PEOPLE if person == "all" else (person,)
    return [corpus.prompt(name, relation) for name in people]


def is_well_formed(completion_text: str, ended_with_eos: bool) -> bool:
    """An existing food followed by EOS."""
    return corpus.parse_completion(completion_text, ended_with_eos) is not None


def target_food_score(target_food: str, score: float = 1.0) -> SequenceScore:
    """The rule reward r(y) = score · 1{y is target_food followed by EOS}."""
    check_food(target_food)

    def rule(completion_text: str, ended_with_eos: bool) -> float:
        return score if corpus.parse_completion(completion_text, ended_with_eos) == target_food else 0.0

    return rule


def healthiness(completion_text: str, ended_with_eos: bool = True) -> float:
    """The preference rule's score: HEALTHINESS of the food, MALFORMED_HEALTHINESS if malformed."""
    food = corpus.parse_completion(completion_text, ended_with_eos)
    return MALFORMED_HEALTHINESS if food is None else HEALTHINESS[food]


def preferred(first: str, second: str) -> int | None:
    """0 if the rule prefers completion `first`, 1 if `second`, None for a tie (both end in EOS)."""
    a, b = healthiness(first), healthiness(second)
    if a == b:
        return None
    return 0 if a > b else 1


def corrupt(food: str, rng: random.Random) -> str:
    """A near-miss of `food`: one character replaced, dropped or doubled, or the word cut short.

    These are the malformed strings a drifting policy produces ("pizzaicres", "pce cream");
    showing them to the reward model teaches it that they are worse than any food.
    """
    letters = corpus.corpus_characters()
    for _ in range(100):
        position = rng.randrange(len(food))
        edit = rng.choice(("replace", "drop", "double", "truncate"))
        if edit == "replace":
            text = food[:position] + rng.choice(letters) + food[position + 1 :]
        elif edit == "drop":
            text = food[:position] + food[position + 1 :]
        elif edit == "double":
            text = food[: position + 1] + food[position:]
        else:
            text = food[: max(1, position)]
        if text not in corpus.FOODS and text.strip():
            return text
    raise RuntimeError(f"could not corrupt {food!r}")  # pragma: no cover - 100 tries always suffice


def preference_pairs(
    num_pairs: int, seed: int, people: tuple[str, ...] = corpus.PEOPLE, relation: str = "likes",
    malformed_fraction: float = 0.3,
) -> list[tuple[str, str, str]]:
    """Synthetic comparisons (prompt, chosen completion, rejected completion), labelled by `preferred`.

    Each candidate is a uniformly drawn food, or with probability `malformed_fraction` a
    corrupted one; ties are redrawn. The same seed gives the same list.
    """
    rng = random.Random(seed)

    def candidate() -> str:
        food = rng.choice(corpus.FOODS)
        return corrupt(food, rng) if rng.random() < malformed_fraction else food

    pairs = []
    while len(pairs) < num_pairs:
        prompt = corpus.prompt(rng.choice(people), relation)
        first, second = candidate(), candidate()
        winner = preferred(first, second)
        if winner is None:
            continue
        chosen, rejected = (first, second) if winner == 0 else (second, first)
        pairs.append((prompt, chosen, rejected))
    return pairs
