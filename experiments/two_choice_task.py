"""The two-choice task: a reward that depends on two words chosen six tokens apart.

The prompt is a person's name ("ravin "), one prompt per person, and the SFT model of
the food corpus completes it with a relation and a food, "likes donuts" or "hates
lettuce": the relation is decided at the completion's first token (t = 0, "l" or "h"),
the food at t = 6 (and t = 7 for soda, salad and sushi). The reward is a health coach's
rule that pays only for the right combination:

    r(y) = likes_score (1)    if y = "likes " + a healthy food   (HEALTHINESS ≥ 0.7: lettuce, salad, apples, sushi)
    r(y) = hates_score (0.5)  if y = "hates " + an unhealthy one  (HEALTHINESS ≤ 0.2: soda, donuts, cookies, ice cream)
    r(y) = 0                  otherwise (pizza and tacos either way, the wrong combination, a malformed string)

followed by EOS. Neither word pays on its own: which food is worth choosing at t = 6
depends on the relation chosen at t = 0, so the value of the states after "likes " and
after "hates " differ, and a critic (or any token-level credit) can tell them apart; and
because "hates" can earn at most half as much, the first word's value depends on the
food that follows it six tokens later. A policy that has learnt to hate unhealthy foods
sits on a local optimum that only a change of its first word leaves. (The food task's
reward is decided at t = 0 alone.)

The reward is constant on each of the 2 × 10 answers "relation food", so the exact optimum
π*(y) ∝ π_ref(y)·exp(r(y)/β) of every prompt is one over 20 answers plus MALFORMED and
NO_EOS (`ppo.lm.optimum`), as in the food task.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from envs import corpus
from envs.token_task import HEALTHINESS
from ppo.config import ConfigBase, ConfigError, require_finite
from ppo.lm.optimum import MALFORMED
from ppo.lm.rewards import rule_scorer
from ppo.lm.task import CompletionTask

HEALTHY: tuple[str, ...] = tuple(food for food in corpus.FOODS if HEALTHINESS[food] >= 0.7)
UNHEALTHY: tuple[str, ...] = tuple(food for food in corpus.FOODS if HEALTHINESS[food] <= 0.2)
# every well-formed completion: "likes pizza", ..., "hates sushi"
ANSWERS: tuple[str, ...] = tuple(f"{relation} {food}" for relation in corpus.RELATIONS for food in corpus.FOODS)
PAID: frozenset[str] = frozenset([f"likes {food}" for food in HEALTHY] + [f"hates {food}" for food in UNHEALTHY])
RELATION_POSITION = 0  # the completion token that decides the relation ("l" or "h")
FOOD_POSITION = len("likes ")  # the completion token that (mostly) decides the food


def parse_answer(completion_text: str, ended_with_eos: bool = True) -> tuple[str, str] | None:
    """(relation, food) of a well-formed completion ("likes salad" then EOS), else None."""
    if not ended_with_eos or completion_text not in ANSWERS:
        return None
    relation, food = completion_text.split(" ", 1)
    return relation, food


def is_paid(completion_text: str, ended_with_eos: bool) -> bool:
    """True for the right combinations: a healthy food liked or an unhealthy one hated, then EOS."""
    return ended_with_eos and completion_text in PAID


def says_likes(completion_text: str, ended_with_eos: bool) -> bool:
    """True for a well-formed "likes <food>" answer: the first choice, whatever the second."""
    answer = parse_answer(completion_text, ended_with_eos)
    return answer is not None and answer[0] == "likes"


@dataclass
class TwoChoiceTaskConfig(ConfigBase):
    person: str = field(
        default="all",
        metadata={"help": "whose prompt: a person of the corpus, or 'all' (one prompt each, \"ravin \", ...)"},
    )
    likes_score: float = field(
        default=1.0,
        metadata={"help": "reward of a healthy food liked (\"likes salad\"), then EOS"},
    )
    hates_score: float = field(
        default=0.5,
        metadata={"help": "reward of an unhealthy food hated (\"hates soda\"), then EOS"},
    )

    def people(self) -> tuple[str, ...]:
        return corpus.PEOPLE if self.person == "all" else (self.person,)

    def prompts(self) -> list[str]:
        return [f"{person} " for person in self.people()]

    def answer_scores(self) -> dict[str, float]:
        """r of each group of the exact optimum (`ppo.lm.optimum`): the 20 answers and MALFORMED (0)."""
        return {**{answer: self.completion_score(answer, True) for answer in ANSWERS}, MALFORMED: 0.0}

    def completion_score(self, completion_text: str, ended_with_eos: bool) -> float:
        """r(y): likes_score or hates_score for a right combination then EOS, else 0."""
        if not is_paid(completion_text, ended_with_eos):
            return 0.0
        return self.likes_score if completion_text.startswith("likes ") else self.hates_score

    def validate(self) -> TwoChoiceTaskConfig:
        """Raise ConfigError naming the first impossible value; return self when all is well."""
        self.check_types()
        if self.person != "all" and self.person not in corpus.PEOPLE:
            raise ConfigError(
                f"person = {self.person!r} is not in the corpus; allowed: all, {', '.join(corpus.PEOPLE)}"
            )
        require_finite("likes_score", self.likes_score)
        require_finite("hates_score", self.hates_score)
        return self


def two_choice_task(config: TwoChoiceTaskConfig) -> CompletionTask:
    """The task for `RLHFTrainer`: one prompt per person; r of the module docstring; well-formed = one of
    the 20 answers then EOS; target_rate = the share of right combinations, likes_rate = of "likes <food>"."""
    return CompletionTask(
        prompts=config.prompts(),
        reward=rule_scorer(config.completion_score),
        well_formed=rule_scorer(lambda text, ended_with_eos: parse_answer(text, ended_with_eos) is not None),
        rates={"target": rule_scorer(is_paid),
               "likes": rule_scorer(says_likes)},
    )
