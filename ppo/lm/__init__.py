"""A tiny character-level language model, and PPO on its token generation.

The pieces, in the order they are used:
- ``CharTokenizer``: characters <-> ids, with BOS/EOS/PAD special tokens;
- ``GPT``: a small decoder-only transformer with a KV cache and an optional value head;
- ``load_or_pretrain_sft``: supervised pretraining on a corpus the caller passes (the food
  corpus of ``envs.corpus`` in the commands and lectures), cached on disk;
- ``sample``: batched sampling of completions, returning the log-probs PPO needs;
- ``RLHFTrainer``: PPO with a KL penalty to the SFT model, on the task the caller passes
  (``CompletionTask``: prompts and a reward), built on the same core as CartPole:
  ppo.lm.algorithm.rollout -> ppo.lm.algorithm.rewards -> ppo.algorithm.advantages / ppo.algorithm.update / ppo.algorithm.losses.

This subpackage imports only the core (``ppo``) and itself; tasks and corpora come in
from the caller.
"""

from ppo.lm.trainers.evaluation import LMEvaluation, evaluate_lm_policy
from ppo.lm.models.gpt import GPT, GPTConfig, KVCache, completion_log_probs, log_probs_of, next_token_log_probs
from ppo.lm.exact.optimum import completion_probabilities, kl_regularised_optimum
from ppo.lm.models.pretrain import PretrainConfig, TextCorpus, load_or_pretrain_sft, load_sft_checkpoint, save_sft_checkpoint
from ppo.lm.algorithm.reward_model import RewardModel, bradley_terry_loss, pairwise_accuracy, train_reward_model
from ppo.lm.algorithm.rewards import assemble_rewards, per_token_kl, rule_scorer, sequence_kl
from ppo.lm.trainers.rlhf_config import RLHFConfig
from ppo.lm.trainers.rlhf_trainer import RLHFTrainer, load_lm_policy
from ppo.lm.algorithm.rollout import CompletionBatch, Rollout, TokenBatch, collect_rollout, sample_completions
from ppo.lm.models.sampling import SampleBatch, sample, sample_naive, sample_texts
from ppo.lm.algorithm.task import CompletionTask
from ppo.lm.models.tokenizer import CharTokenizer

__all__ = [
    "CharTokenizer",
    "CompletionBatch",
    "CompletionTask",
    "GPT",
    "GPTConfig",
    "KVCache",
    "LMEvaluation",
    "PretrainConfig",
    "RLHFConfig",
    "RLHFTrainer",
    "RewardModel",
    "Rollout",
    "SampleBatch",
    "TextCorpus",
    "TokenBatch",
    "assemble_rewards",
    "bradley_terry_loss",
    "collect_rollout",
    "completion_log_probs",
    "completion_probabilities",
    "evaluate_lm_policy",
    "kl_regularised_optimum",
    "load_lm_policy",
    "load_or_pretrain_sft",
    "load_sft_checkpoint",
    "log_probs_of",
    "next_token_log_probs",
    "pairwise_accuracy",
    "per_token_kl",
    "rule_scorer",
    "sample",
    "sample_completions",
    "sample_naive",
    "sample_texts",
    "save_sft_checkpoint",
    "sequence_kl",
    "train_reward_model",
]
