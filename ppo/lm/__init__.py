"""A tiny character-level language model for PPO on token generation.

The pieces, in the order they are used:
- ``CharTokenizer``: characters <-> ids, with BOS/EOS/PAD special tokens;
- ``GPT``: a small decoder-only transformer with a KV cache and an optional value head;
- ``load_or_pretrain_sft``: supervised pretraining on the synthetic food corpus of
  ``envs.corpus``, cached on disk (the training loop is ``ppo.lm.pretrain.pretrain``;
  it is not re-exported here, so ``ppo.lm.pretrain`` stays the module);
- ``sample``: batched sampling of completions, returning the log-probs PPO needs.
"""

from ppo.lm.model import GPT, GPTConfig, KVCache, completion_log_probs, log_probs_of, next_token_log_probs
from ppo.lm.pretrain import (
    CheckpointError,
    PretrainConfig,
    load_checkpoint,
    load_or_pretrain_sft,
    save_checkpoint,
)
from ppo.lm.sampling import SampleBatch, sample, sample_naive, sample_texts
from ppo.lm.tokenizer import CharTokenizer

__all__ = [
    "CharTokenizer",
    "CheckpointError",
    "GPT",
    "GPTConfig",
    "KVCache",
    "PretrainConfig",
    "SampleBatch",
    "completion_log_probs",
    "load_checkpoint",
    "load_or_pretrain_sft",
    "log_probs_of",
    "next_token_log_probs",
    "sample",
    "sample_naive",
    "sample_texts",
    "save_checkpoint",
]

# PPO with a KL penalty to the SFT model (the RLHF side), built on the same core as CartPole:
# ppo.lm.rollout -> ppo.lm.rewards -> ppo.advantages / ppo.losses, wired up in ppo.lm.rlhf_trainer.
from ppo.lm.evaluation import PolicyEvaluation, evaluate_policy  # noqa: E402
from ppo.lm.optimum import completion_probabilities, kl_regularised_optimum  # noqa: E402
from ppo.lm.reward_model import RewardModel, bradley_terry_loss, pairwise_accuracy, train_reward_model  # noqa: E402
from ppo.lm.rewards import assemble_rewards, per_token_kl, rule_scorer, sequence_kl  # noqa: E402
from ppo.lm.rlhf_config import RLHFConfig  # noqa: E402
from ppo.lm.rlhf_trainer import RLHFTrainer, load_policy  # noqa: E402
from ppo.lm.rollout import CompletionBatch, Rollout, collect_rollout, sample_completions  # noqa: E402

__all__ += [
    "CompletionBatch",
    "PolicyEvaluation",
    "RLHFConfig",
    "RLHFTrainer",
    "RewardModel",
    "Rollout",
    "assemble_rewards",
    "bradley_terry_loss",
    "collect_rollout",
    "completion_probabilities",
    "evaluate_policy",
    "kl_regularised_optimum",
    "load_policy",
    "pairwise_accuracy",
    "per_token_kl",
    "rule_scorer",
    "sample_completions",
    "sequence_kl",
    "train_reward_model",
]
