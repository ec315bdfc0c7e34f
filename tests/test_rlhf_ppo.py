"""PPO on the tiny language model: first-minibatch identities and a short learning run."""

import pytest
import torch
from _tiny_lm import one_torch_thread, tiny_sft  # noqa: F401 (one_torch_thread is an autouse fixture)

from envs.token_task import task_prompts
from ppo.lm.evaluation import evaluate_policy
from ppo.lm.optimum import completion_probabilities
from ppo.lm.rlhf_config import RLHFConfig
from ppo.checkpoint import load_checkpoint
from ppo.lm.rlhf_trainer import RLHFTrainer, load_policy

TINY = dict(batch_size=32, num_minibatches=2, max_new_tokens=10, sample_every=0, tensorboard=False)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_with_policy_equal_to_reference_the_first_minibatch_has_ratio_one_and_kl_zero(temperature):
    model, tokenizer = tiny_sft()
    trainer = RLHFTrainer(RLHFConfig(temperature=temperature, seed=3, **TINY), model, tokenizer)
    rollout = trainer.collect()
    mask = rollout.batch.mask
    # the recomputed log-probs are those of the distribution actually sampled from, softmax(z / τ)
    torch.testing.assert_close(rollout.log_probs, rollout.batch.sampler_log_probs, atol=1e-5, rtol=0)
    token_rewards = trainer.rewards(rollout)
    assert torch.equal(rollout.log_probs, rollout.reference_log_probs)
    assert torch.equal(token_rewards.kl, torch.zeros_like(token_rewards.kl))  # KL exactly 0
    advantages, returns = trainer.advantages(rollout, token_rewards)
    first_minibatch = torch.randperm(len(rollout.batch))[: trainer.config.minibatch_size]
    result = trainer.minibatch_loss(rollout, first_minibatch, advantages, returns)
    ratio = result.log_ratio.exp()[mask[first_minibatch]]
    assert torch.equal(ratio, torch.ones_like(ratio))  # r_t(θ) = 1 exactly, before any step
    assert result.clip_fraction == 0 and result.approx_kl == 0


def test_short_seeded_run_raises_the_target_rate_well_above_sft():
    model, tokenizer = tiny_sft()
    prompt = task_prompts("ravin")[0]
    sft_rate = completion_probabilities(model, tokenizer, prompt)["pizza"]
    config = RLHFConfig(iterations=12, learning_rate=1e-3, seed=1, **{**TINY, "batch_size": 64})
    trainer = RLHFTrainer(config, model, tokenizer)
    trainer.train()
    generator = torch.Generator().manual_seed(0)
    result = evaluate_policy(trainer.policy, trainer.reference, tokenizer, [prompt], "pizza", 400,
                             max_new_tokens=10, generator=generator)
    assert sft_rate < 0.2
    assert result.target_rate > max(0.6, sft_rate + 0.4), result.summary()
    assert result.well_formed_rate > 0.8, result.summary()


def test_checkpoint_round_trip_restores_the_policy(tmp_path):
    model, tokenizer = tiny_sft()
    trainer = RLHFTrainer(RLHFConfig(iterations=1, seed=2, **TINY), model, tokenizer)
    trainer.train_iteration()
    trainer.save(tmp_path / "checkpoint.pt")
    policy, reference, restored_tokenizer = load_policy(load_checkpoint(tmp_path))  # weights_only=True
    tokens = torch.tensor([tokenizer.encode("ravin likes pizza", add_eos=True)])
    assert restored_tokenizer == tokenizer
    assert torch.equal(policy(tokens), trainer.policy(tokens)) and torch.equal(reference(tokens), model(tokens))
