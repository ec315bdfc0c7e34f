"""The food task of the language-model commands and lectures, handed to the task-agnostic trainer.

`FoodTaskConfig` holds the task's settings (whose prompt, which food the rule pays for,
a rule or a learned reward model); `food_task` turns them into the
`ppo.lm.algorithm.task.CompletionTask` that `RLHFTrainer` takes: the prompts ("ravin likes "),
the reward, the well-formedness check (a food of the corpus, then EOS) and the target
rate, all from `envs/token_task.py` and `envs/corpus.py`. `FoodTaskAdapter` is what
`ppo-rlhf --task food` needs of it besides: the run folder's label, the probes of the
critic plot, the rates it prints and the exact optimum π*_β it measures the policy against.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from envs import corpus
from envs.token_task import is_well_formed, target_food_score, task_prompts
from ppo.config import (
    ConfigBase,
    ConfigError,
    NoEffect,
    require_count,
    require_finite,
    require_fraction,
    require_one_of,
    require_positive,
)
from ppo.lm.trainers.evaluation import LMEvaluation
from ppo.lm.models.gpt import GPT
from ppo.lm.exact.optimum import MALFORMED, NO_EOS, malformed_group, optimum_over_prompts, rule_scores
from ppo.lm.algorithm.reward_model import RewardModel, encode_texts
from ppo.lm.algorithm.rewards import SequenceScorer, rule_scorer
from ppo.lm.trainers.rlhf_config import RLHFConfig
from ppo.lm.algorithm.task import CompletionTask
from ppo.lm.models.tokenizer import CharTokenizer

REWARD_KINDS = ("rule", "model")


@dataclass
class FoodTaskConfig(ConfigBase):
    target_food: str = field(default="pizza", metadata={"help": "the food the rule reward pays for"})
    person: str = field(
        default="ravin",
        metadata={"help": "whose prompt: a person of the corpus, or 'all' (one prompt each)"},
    )
    relation: str = field(default="likes", metadata={"help": "likes or hates"})
    reward: str = field(
        default="rule",
        metadata={
            "help": "rule (+score for the target food then EOS) or model (a reward model learned from "
            "healthiness preferences)"
        },
    )
    score: float = field(
        default=1.0,
        metadata={"help": "rule reward for a completion that is exactly the target food followed by EOS"},
    )

    # --- the learned reward model (reward = model) -----------------------------------------------
    reward_model_pairs: int = field(
        default=5_000,
        metadata={"help": "synthetic preference pairs to train the reward model on"},
    )
    reward_model_malformed_fraction: float = field(
        default=0.3,
        metadata={
            "help": "share of corrupted completions among the candidates of a preference pair (0 = only "
            "foods: the reward model never sees a malformed string)"
        },
    )
    reward_model_steps: int = field(default=400, metadata={"help": "Bradley–Terry training steps"})
    reward_model_learning_rate: float = field(
        default=2e-3,
        metadata={
            "help": "Adam learning rate of the reward model's trunk (its zero-initialised head: 10×), decayed"
            " linearly to 0"
        },
    )

    # The rule reward's score and the reward model's settings each take effect with one kind of reward.
    no_effect = {
        "score": (NoEffect("reward", ("model",), "the reward model scores the completions"),),
        **{name: (NoEffect("reward", ("rule",), "no reward model is trained for the rule reward"),)
           for name in ("reward_model_pairs", "reward_model_malformed_fraction", "reward_model_steps",
                        "reward_model_learning_rate")},
    }

    def people(self) -> tuple[str, ...]:
        return corpus.PEOPLE if self.person == "all" else (self.person,)

    def prompts(self) -> list[str]:
        return task_prompts(self.person, self.relation)

    def validate(self) -> FoodTaskConfig:
        """Raise ConfigError naming the first impossible value; return self when all is well."""
        self.check_types()
        if self.target_food not in corpus.FOODS:
            raise ConfigError(
                f"target_food = {self.target_food!r} is not a food of the corpus; allowed: {', '.join(corpus.FOODS)}"
            )
        if self.person != "all" and self.person not in corpus.PEOPLE:
            raise ConfigError(
                f"person = {self.person!r} is not in the corpus; allowed: all, {', '.join(corpus.PEOPLE)}"
            )
        require_one_of("relation", self.relation, corpus.RELATIONS)
        require_one_of("reward", self.reward, REWARD_KINDS)
        require_finite("score", self.score)
        require_fraction("reward_model_malformed_fraction", self.reward_model_malformed_fraction)
        require_positive("reward_model_learning_rate", self.reward_model_learning_rate)
        for name in ("reward_model_pairs", "reward_model_steps"):
            require_count(name, getattr(self, name))
        self.check_effects()
        return self


def food_task(config: FoodTaskConfig, reward: SequenceScorer | None = None) -> CompletionTask:
    """The task for `RLHFTrainer`: the config's prompts; the rule reward unless `reward` is given
    (a reward model's scorer); well-formedness; the target food's rate, logged as target_rate."""
    target = config.target_food
    return CompletionTask(
        prompts=config.prompts(),
        reward=reward or rule_scorer(target_food_score(target, config.score)),
        well_formed=rule_scorer(is_well_formed),
        rates={"target": rule_scorer(lambda text, ended_with_eos: ended_with_eos and text == target)},
    )


def food_shares(completion_shares: dict[str, float]) -> dict[str, float]:
    """The share of each food (a completion that is the food, then EOS) and of everything else, "<malformed>"."""
    shares = {food: completion_shares.get(food, 0.0) for food in corpus.FOODS}
    shares["<malformed>"] = max(0.0, 1.0 - sum(shares.values()))
    return shares


@torch.no_grad()
def learned_food_scores(model: RewardModel, tokenizer: CharTokenizer, prompt: str) -> dict[str, float]:
    """The reward model's score of each food of the corpus after `prompt`, then EOS."""
    tokens, last = encode_texts(tokenizer, [prompt + food for food in corpus.FOODS])
    return dict(zip(corpus.FOODS, model(tokens, last).tolist()))


class FoodTaskAdapter:
    """The food task as `ppo-rlhf --task food` runs it (experiments.tasks.two_choice_task.TwoChoiceTaskAdapter has the same
    methods): a one-decision bandit, the food decided at the completion's first token."""

    name = "food"
    config_class = FoodTaskConfig
    in_folder_label = ("target_food", "reward")  # the folder name starts with them, not among its settings
    why_not: dict[str, str] = {}  # settings of other tasks that have no counterpart here, and why

    def __init__(self, config: FoodTaskConfig):
        self.config = config

    def folder_label(self) -> str:
        """`pizza-rule`, `ice_cream-model`: the food the rule pays for and the reward."""
        return f"{self.config.target_food.replace(' ', '_')}-{self.config.reward}"

    @property
    def reward_name(self) -> str:
        return self.config.reward

    @property
    def uses_reward_model(self) -> bool:
        return self.config.reward == "model"

    def task(self, reward: SequenceScorer | None = None) -> CompletionTask:
        return food_task(self.config, reward)

    def probe_texts(self) -> list[str]:
        """'ravin likes pizz' and 'ravin likes sala': the target and another food, each missing its last letter."""
        target = self.config.target_food
        other = "salad" if target != "salad" else "pizza"
        return [self.config.prompts()[0] + food[:-1] for food in (target, other)]

    def rates_text(self, rates: dict[str, float]) -> str:
        """'pizza rate 99.1%, well-formed 100.0%' of an evaluation's rates (or of the optimum's)."""
        return f"{self.config.target_food} rate {rates['target_rate']:.1%}, well-formed {rates['well_formed_rate']:.1%}"

    def rates_summary(self, evaluation: LMEvaluation) -> dict:
        return {name: evaluation.rates[name] for name in ("target_rate", "well_formed_rate")} | {
            "food_rates": food_shares(evaluation.completion_shares)}

    @torch.no_grad()
    def optimum(self, policy: GPT, reference: GPT, tokenizer: CharTokenizer, beta: float, config: RLHFConfig,
                reward_model: RewardModel | None = None) -> dict:
        """π* ∝ π_ref·exp(r/β) per prompt at β, averaged over the prompts (the policy is not needed).

        The groups: each food, MALFORMED (ended with EOS, not a food: the rule's 0, or, for
        the reward model, the group's soft value β·log E_π_ref[exp(r/β)] over its enumerated
        strings, `ppo.lm.exact.optimum.malformed_group`) and NO_EOS (no EOS within max_new_tokens:
        missing_eos_penalty, as in training).
        """
        malformed_covered = []  # per prompt: π_ref mass of the malformed strings the enumeration scored
        if reward_model is None:
            rule = rule_scores(corpus.FOODS, self.config.target_food, self.config.score, config.missing_eos_penalty)
            scores_for = lambda prompt: rule  # noqa: E731
        else:
            def scores_for(prompt: str) -> dict:
                """The reward model's score of each food, and MALFORMED as its soft value at β."""
                def score_texts(texts: list[str]) -> torch.Tensor:  # (N,), in chunks of 1024 strings
                    chunks = [[prompt + text for text in texts[i : i + 1024]] for i in range(0, len(texts), 1024)]
                    return torch.cat([reward_model(*encode_texts(tokenizer, chunk)) for chunk in chunks])

                scores = learned_food_scores(reward_model, tokenizer, prompt)
                scores[MALFORMED] = malformed_group(reference, tokenizer, prompt, corpus.FOODS, score_texts, beta,
                                                    config.temperature, max_new_tokens=config.max_new_tokens)
                malformed_covered.append(scores[MALFORMED].covered)
                return scores

        optimum = optimum_over_prompts(reference, tokenizer, self.config.prompts(), corpus.FOODS, scores_for, beta,
                                       config.temperature, max_new_tokens=config.max_new_tokens,
                                       missing_eos_penalty=config.missing_eos_penalty)
        return {"beta": optimum.beta, "target_rate": optimum.probabilities[self.config.target_food],
                "well_formed_rate": 1.0 - optimum.probabilities[MALFORMED] - optimum.probabilities[NO_EOS],
                "kl": optimum.kl, "expected_score": optimum.expected_score, "probabilities": optimum.probabilities,
                "reference_probabilities": optimum.reference_probabilities,
                "reference_no_eos": optimum.reference_probabilities[NO_EOS],
                "reference_no_eos_lower": max(0.0, optimum.reference_probabilities[NO_EOS] - optimum.no_eos_unresolved),
                **({"reference_malformed_scored": sum(malformed_covered) / len(malformed_covered)}
                   if malformed_covered else {})}

    def kl_ceiling(self, optimum: dict) -> tuple[str, str, float] | None:
        """(what the rule pays for, its name in π_ref(·), −log π_ref of it): the KL of π*_β as β → 0, which
        no β exceeds; None for the reward model, which pays for every string."""
        if self.uses_reward_model:
            return None
        target = self.config.target_food
        return f"only for {target!r}", target, -math.log(max(optimum["reference_probabilities"][target], 1e-300))
