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
