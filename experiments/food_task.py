"""The food task of the language-model commands and lectures, handed to the task-agnostic trainer.

`FoodTaskConfig` holds the task's settings (whose prompt, which food the rule pays for,
a rule or a learned reward model); `food_task` turns them into the
`ppo.lm.task.CompletionTask` that `RLHFTrainer` takes: the prompts ("ravin likes "),
the reward, the well-formedness check (a food of the corpus, then EOS) and the target
rate, all from `envs/token_task.py` and `envs/corpus.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from envs import corpus
from envs.token_task import is_well_formed, target_food_score, task_prompts
from ppo.config import (
    ConfigBase,
    ConfigError,
    require_count,
    require_finite,
    require_fraction,
    require_one_of,
    require_positive,
)
from ppo.lm.rewards import SequenceScorer, rule_scorer
from ppo.lm.task import CompletionTask

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
