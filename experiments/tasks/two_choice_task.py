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
NO_EOS (`ppo.lm.exact.optimum`), as in the food task. `TwoChoiceTaskAdapter` is what
`ppo-rlhf --task two-choice` needs of the task: the run folder's label, the probes of the
critic plot, the rates it prints, and π*_β with the policy's total variation to it
(`ppo.lm.exact.optimum_distance`, the yardstick of experiments/studies/compare_lm_trainers.py).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

import torch

from envs import corpus
from envs.token_task import HEALTHINESS
from ppo.config import ConfigBase, ConfigError, require_finite
from ppo.lm.trainers.evaluation import LMEvaluation
from ppo.lm.models.gpt import GPT
from ppo.lm.exact.optimum import MALFORMED, NO_EOS
from ppo.lm.exact.optimum_distance import distance_to_optimum, total_variation
from ppo.lm.algorithm.rewards import SequenceScorer, rule_scorer
from ppo.lm.trainers.rlhf_config import RLHFConfig
from ppo.lm.algorithm.task import CompletionTask
from ppo.lm.models.tokenizer import CharTokenizer

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
        """r of each group of the exact optimum (`ppo.lm.exact.optimum`): the 20 answers and MALFORMED (0)."""
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
        self.check_effects()
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


def answer_shares(completion_shares: dict[str, float]) -> dict[str, float]:
    """The share of each of the 20 answers (then EOS) and of everything else, "<malformed>"."""
    shares = {answer: completion_shares.get(answer, 0.0) for answer in ANSWERS}
    shares[MALFORMED] = max(0.0, 1.0 - sum(shares.values()))
    return shares


def group_rates(probabilities: dict[str, float]) -> dict[str, float]:
    """The task's rates of a distribution over the groups (answers, MALFORMED, NO_EOS): right combinations,
    "likes <food>", and every answer."""
    def mass(answers) -> float:
        return sum(probabilities.get(answer, 0.0) for answer in answers)

    return {"target_rate": mass(PAID), "likes_rate": mass(a for a in ANSWERS if a.startswith("likes ")),
            "well_formed_rate": mass(ANSWERS)}


class TwoChoiceTaskAdapter:
    """The two-choice task as `ppo-rlhf --task two-choice` runs it (experiments.tasks.food_task.FoodTaskAdapter has the
    same methods)."""

    name = "two-choice"
    config_class = TwoChoiceTaskConfig
    in_folder_label = ()  # the folder's label is the task's name; every setting that differs is named after it
    # settings of the food task that have no counterpart here, and why (ppo-rlhf says so when one is given)
    why_not = {"reward": "it pays by its rule alone; the reward model learns food preferences, not the combination "
                         "of relation and food"}

    def __init__(self, config: TwoChoiceTaskConfig):
        self.config = config

    def folder_label(self) -> str:
        return self.name

    @property
    def reward_name(self) -> str:
        return "two-choice"

    @property
    def uses_reward_model(self) -> bool:
        return False

    def task(self, reward: SequenceScorer | None = None) -> CompletionTask:
        if reward is not None:
            raise ValueError("the two-choice task pays by its rule alone; it takes no other reward")
        return two_choice_task(self.config)

    def probe_texts(self) -> list[str]:
        """'ravin likes sala', 'ravin hates sod', 'ravin likes sod': a healthy food liked (paid likes_score), an
        unhealthy one hated (hates_score) and liked (0), each missing its last letter: the critic's values along
        them show whether it tells the relation at t = 0 and the food at t = 6 apart."""
        prompt = self.config.prompts()[0]
        return [prompt + answer[:-1] for answer in ("likes salad", "hates soda", "likes soda")]

    def rates_text(self, rates: dict[str, float]) -> str:
        """'right combination 80.1%, likes 75.0%, well-formed 99.0%' of an evaluation's rates (or of the optimum's)."""
        return (f"right combination {rates['target_rate']:.1%}, likes {rates['likes_rate']:.1%}, well-formed "
                f"{rates['well_formed_rate']:.1%}")

    def rates_summary(self, evaluation: LMEvaluation) -> dict:
        return {name: evaluation.rates[name] for name in ("target_rate", "likes_rate", "well_formed_rate")} | {
            "answer_rates": answer_shares(evaluation.completion_shares)}

    @torch.no_grad()
    def optimum(self, policy: GPT, reference: GPT, tokenizer: CharTokenizer, beta: float, config: RLHFConfig,
                reward_model=None) -> dict:
        """π* ∝ π_ref·exp(r/β) of each prompt over the 20 answers, MALFORMED and NO_EOS, averaged over the
        prompts, and the total variation ½ Σ_g |π(g) − π*(g)| of the policy and of π_ref to it (exact, mean over
        the prompts; `ppo.lm.exact.optimum_distance.distance_to_optimum`)."""
        if reward_model is not None:
            raise ValueError("the two-choice task pays by its rule alone; it has no reward model")
        scores = self.config.answer_scores()
        per_prompt = distance_to_optimum(policy, reference, tokenizer, self.config.prompts(), ANSWERS,
                                         lambda prompt: scores, beta, config.temperature,
                                         max_new_tokens=config.max_new_tokens,
                                         missing_eos_penalty=config.missing_eos_penalty)

        def mean_over_prompts(probabilities_of) -> dict[str, float]:
            return {g: statistics.fmean(probabilities_of(r)[g] for r in per_prompt)
                    for g in per_prompt[0].optimum.probabilities}

        probabilities = mean_over_prompts(lambda r: r.optimum.probabilities)
        reference_probabilities = mean_over_prompts(lambda r: r.optimum.reference_probabilities)
        best = self._best_answers(config.missing_eos_penalty)
        return {"beta": beta, **group_rates(probabilities), "kl": statistics.fmean(r.optimum.kl for r in per_prompt),
                "expected_score": statistics.fmean(r.optimum.expected_score for r in per_prompt),
                "probabilities": probabilities, "reference_probabilities": reference_probabilities,
                "policy_probabilities": mean_over_prompts(lambda r: r.policy_probabilities),
                "reference_no_eos": reference_probabilities[NO_EOS],
                "total_variation": {
                    "sft": statistics.fmean(total_variation(r.optimum.reference_probabilities, r.optimum.probabilities)
                                            for r in per_prompt),
                    "policy": statistics.fmean(r.total_variation for r in per_prompt)},
                "groups": len(probabilities), "prompts": len(per_prompt),
                # KL of π*_β as β → 0, per prompt: −log π_ref(the best-paid answers | x)
                "best_answers_kl": statistics.fmean(-math.log(max(sum(r.optimum.reference_probabilities[a]
                                                                      for a in best), 1e-300))
                                                    for r in per_prompt) if best else None}

    def _best_answers(self, missing_eos_penalty: float) -> tuple[str, ...]:
        """The answers the rule pays most for, if they beat MALFORMED (0) and NO_EOS; else none."""
        scores = self.config.answer_scores()
        top = max(scores[answer] for answer in ANSWERS)
        if top <= max(scores[MALFORMED], missing_eos_penalty):
            return ()
        return tuple(answer for answer in ANSWERS if scores[answer] == top)

    def kl_ceiling(self, optimum: dict) -> tuple[str, str, float] | None:
        """(what the rule pays most for, its name in π_ref(·), the mean over the prompts of −log π_ref of it):
        the KL of π*_β as β → 0, which no β exceeds; None when no answer beats a malformed string."""
        if optimum["best_answers_kl"] is None:
            return None
        likes_best = self.config.likes_score > self.config.hates_score
        what = ("a healthy food liked" if likes_best else "an unhealthy food hated"
                if self.config.hates_score > self.config.likes_score else "a right combination")
        return f"most for {what}", what, optimum["best_answers_kl"]
