"""Every setting of a PPO run on the tiny language model, with its default and meaning.

Derived sizes:
    minibatch_size = batch_size / num_minibatches      completions per gradient step
    gradient steps per iteration = update_epochs · num_minibatches
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field, fields

from envs import corpus
from ppo.config import ConfigError, require_positive

REWARD_KINDS = ("rule", "model")
CRITIC_KINDS = ("separate", "shared")
KL_ESTIMATORS = ("k1", "k3")


@dataclass
class RLHFConfig:
    # --- the task -------------------------------------------------------------------------
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
    missing_eos_penalty: float = field(
        default=-1.0,
        metadata={"help": "score of a completion that never emitted EOS"},
    )

    # --- the KL penalty to the reference (SFT) model ------------------------------------------
    kl_coef: float = field(
        default=0.15,
        metadata={"help": "β of r_t = −β·KL_t (the initial β when adaptive); 0 = no penalty"},
    )
    kl_target: float | None = field(
        default=None,
        metadata={"help": "target mean sequence KL (nats) of the adaptive controller; none = fixed β"},
    )
    kl_horizon: int = field(
        default=1_000,
        metadata={
            "help": "adaptive controller horizon, in completions (lm-human-preferences: 10000, for far longer"
            " runs)"
        },
    )
    kl_estimator: str = field(
        default="k1",
        metadata={"help": "per-token KL_t in the reward: k1 = log π − log π_ref, or k3"},
    )

    # --- rollout and update sizes -------------------------------------------------------------
    iterations: int = field(default=20, metadata={"help": "rollout + update cycles"})
    batch_size: int = field(default=128, metadata={"help": "completions B per rollout"})
    num_minibatches: int = field(default=2, metadata={"help": "minibatches per epoch (split by completion)"})
    update_epochs: int = field(default=4, metadata={"help": "epochs K over each rollout"})
    max_new_tokens: int = field(
        default=16,
        metadata={"help": "completion length limit in tokens (the longest food + EOS is 10)"},
    )
    temperature: float = field(
        default=1.0,
        metadata={"help": "sampling temperature τ; log-probs are recomputed at the same τ"},
    )

    # --- optimisation ---------------------------------------------------------------------------
    learning_rate: float = field(default=3e-4, metadata={"help": "Adam learning rate of the policy"})
    critic_learning_rate: float = field(
        default=1e-3,
        metadata={"help": "Adam learning rate of a separate critic"},
    )
    anneal_lr: bool = field(default=True, metadata={"help": "anneal the learning rates linearly to 0"})
    max_grad_norm: float = field(default=1.0, metadata={"help": "gradient-norm clip, per model"})
    target_kl: float | None = field(
        default=0.02,
        metadata={"help": "end an update early once a minibatch's approx KL(π_old ‖ π_θ) exceeds this; none = off"},
    )
    clip_coef: float = field(default=0.2, metadata={"help": "surrogate clip ε"})
    value_clip_coef: float | None = field(
        default=0.2,
        metadata={"help": "value clip ε_v; none = unclipped value loss"},
    )
    vf_coef: float = field(default=0.1, metadata={"help": "value-loss coefficient c_v"})
    ent_coef: float = field(default=0.0, metadata={"help": "entropy coefficient c_e"})
    gamma: float = field(default=1.0, metadata={"help": "discount γ along the tokens"})
    gae_lambda: float = field(default=0.95, metadata={"help": "GAE λ"})
    norm_adv: bool = field(
        default=False,
        metadata={
            "help": "whiten Â over the real tokens of the batch (blows up noise once every completion is the "
            "same)"
        },
    )
    whiten_rewards: bool = field(
        default=False,
        metadata={"help": "scale the per-token rewards to unit variance (mean kept)"},
    )
    critic: str = field(
        default="separate",
        metadata={
            "help": "separate (a value model initialised from the SFT weights) or shared (a value head on the"
            " policy's trunk)"
        },
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

    # --- bookkeeping ------------------------------------------------------------------------------
    seed: int = field(
        default=1,
        metadata={"help": "seed of the weights of new heads, the sampling and the minibatch order"},
    )
    num_threads: int = field(
        default=1,
        metadata={"help": "torch CPU threads (the model is tiny: 1 is fastest on a busy machine)"},
    )
    sample_every: int = field(
        default=5,
        metadata={"help": "print sample completions every this many iterations; 0 = never"},
    )
    eval_samples: int = field(
        default=1_000,
        metadata={"help": "fresh completions (at temperature 1) for the final evaluation"},
    )
    tensorboard: bool = field(default=True, metadata={"help": "write TensorBoard event files"})

    @property
    def minibatch_size(self) -> int:
        return self.batch_size // self.num_minibatches

    @property
    def adaptive_kl(self) -> bool:
        return self.kl_target is not None

    def people(self) -> tuple[str, ...]:
        return corpus.PEOPLE if self.person == "all" else (self.person,)

    def replace(self, **changes) -> RLHFConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> RLHFConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown config field(s) {', '.join(unknown)}")
        return cls(**data)

    def validate(self) -> RLHFConfig:
        """Raise ConfigError naming the first impossible value; return self when all is well."""
        if self.target_food not in corpus.FOODS:
            raise ConfigError(
                f"target_food = {self.target_food!r} is not a food of the corpus; allowed: {', '.join(corpus.FOODS)}"
            )
        if self.person != "all" and self.person not in corpus.PEOPLE:
            raise ConfigError(
                f"person = {self.person!r} is not in the corpus; allowed: all, {', '.join(corpus.PEOPLE)}"
            )
        _one_of("relation", self.relation, corpus.RELATIONS)
        _one_of("reward", self.reward, REWARD_KINDS)
        _one_of("critic", self.critic, CRITIC_KINDS)
        _one_of("kl_estimator", self.kl_estimator, KL_ESTIMATORS)
        for name in ("score", "missing_eos_penalty"):
            if not math.isfinite(getattr(self, name)):
                raise ConfigError(f"{name} = {getattr(self, name)} must be a finite number")
        for name in ("kl_coef", "vf_coef", "ent_coef"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ConfigError(f"{name} = {value} must be a finite number ≥ 0")
        if self.kl_target is not None:
            require_positive("kl_target", self.kl_target)
            if self.kl_coef <= 0:
                raise ConfigError("the adaptive KL controller (kl_target set) needs kl_coef > 0 to start from")
        for name in ("learning_rate", "critic_learning_rate", "max_grad_norm", "clip_coef", "temperature",
                     "reward_model_learning_rate"):
            require_positive(name, getattr(self, name))
        for name in ("value_clip_coef", "target_kl"):
            if getattr(self, name) is not None:
                require_positive(name, getattr(self, name))
        for name in ("gamma", "gae_lambda", "reward_model_malformed_fraction"):
            if not 0 <= getattr(self, name) <= 1:
                raise ConfigError(f"{name} = {getattr(self, name)} is outside [0, 1]")
        for name in ("kl_horizon", "iterations", "batch_size", "num_minibatches", "update_epochs", "max_new_tokens",
                     "num_threads", "reward_model_pairs", "reward_model_steps"):
            _positive_int(name, getattr(self, name))
        for name in ("sample_every", "eval_samples"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} = {getattr(self, name)} must be ≥ 0")
        if self.batch_size % self.num_minibatches != 0:
            raise ConfigError(f"batch_size = {self.batch_size} is not divisible by num_minibatches = {self.num_minibatches}")
        return self


def _one_of(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"{name} = {value!r} is not one of {', '.join(allowed)}")


def _positive_int(name: str, value: int) -> None:
    if value < 1:
        raise ConfigError(f"{name} = {value} must be ≥ 1")
