"""A tiny SFT model for the RLHF tests, pretrained once per test session in a few seconds.

CI starts without the cached default SFT model, so the tests never rely on it: they use
a one-layer, 32-wide GPT trained briefly on the food corpus. It is rough (a few percent of
its completions are malformed) but knows the foods and ends them with EOS, which is all
the PPO tests need.
"""

from __future__ import annotations

import functools

import pytest
import torch

from envs.corpus import FOOD_CORPUS
from ppo.lm.models.pretrain import PretrainConfig, pretrain

TINY_PRETRAIN = PretrainConfig(
    seed=0, corpus_size=6_000, val_size=200, steps=250, batch_size=64, learning_rate=1e-2, warmup_steps=20,
    eval_interval=250, n_layer=1, n_head=2, n_embd=32, block_size=26,
)


@functools.cache
def tiny_sft():
    """(model in eval mode, tokenizer); trained once, then shared by every test of the session."""
    result = pretrain(FOOD_CORPUS, TINY_PRETRAIN, verbose=False)
    return result.model, result.tokenizer


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Run each test on one torch thread (two threads are slower on a busy 2-core machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
