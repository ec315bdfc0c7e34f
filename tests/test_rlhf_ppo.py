"""PPO on the tiny language model: first-minibatch identities, short learning runs on two tasks, resuming."""

import pytest
import torch
from _tiny_lm import one_torch_thread, tiny_sft  # noqa: F401 (one_torch_thread is an autouse fixture)

from envs import corpus
from experiments.food_task import FoodTaskConfig, food_task
from ppo.lm.evaluation import evaluate_lm_policy
from ppo.lm.optimum import completion_probabilities
from ppo.lm.rewards import rule_scorer
from ppo.lm.rlhf_config import RLHFConfig
from ppo.lm.rlhf_trainer import RLHFTrainer, load_lm_policy
from ppo.lm.task import CompletionTask

TINY = dict(batch_size=32, num_minibatches=2, max_new_tokens=10, sample_every=0, tensorboard=False)
PIZZA = food_task(FoodTaskConfig(target_food="pizza", person="ravin"))


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_with_policy_equal_to_reference_the_first_minibatch_has_ratio_one_and_kl_zero(temperature):
    model, tokenizer = tiny_sft()
    trainer = RLHFTrainer(RLHFConfig(temperature=temperature, seed=3, **TINY), model, tokenizer, PIZZA)
    rollout = trainer.collect()
    mask = rollout.batch.mask
    # the recomputed log-probs are those of the distribution actually sampled from, softmax(z / τ)
    torch.testing.assert_close(rollout.log_probs, rollout.batch.sampler_log_probs, atol=1e-5, rtol=0)
    token_rewards = trainer.rewards(rollout)
    assert torch.equal(rollout.log_probs, rollout.reference_log_probs)
    assert torch.equal(token_rewards.kl, torch.zeros_like(token_rewards.kl))  # KL exactly 0
    advantages, returns = trainer.advantages(rollout, token_rewards)
    rows = torch.randperm(len(rollout.batch))[: trainer.config.minibatch_size]
    samples = trainer.update_samples(rollout, advantages, returns)
    result = trainer.minibatch_loss({name: tensor[rows] for name, tensor in samples.items()})
    ratio = result.log_ratio.exp()[mask[rows]]
    assert torch.equal(ratio, torch.ones_like(ratio))  # r_t(θ) = 1 exactly, before any step
    metrics = trainer.update(rollout, advantages, returns)  # the shared routine measures the same on its first minibatch
    assert metrics["first_minibatch_ratio_error"] == 0.0


def test_short_seeded_run_raises_the_target_rate_well_above_sft():
    model, tokenizer = tiny_sft()
    prompt = PIZZA.prompts[0]
    sft_rate = completion_probabilities(model, tokenizer, prompt, corpus.FOODS)["pizza"]
    config = RLHFConfig(iterations=12, learning_rate=1e-3, seed=1, **{**TINY, "batch_size": 64})
    trainer = RLHFTrainer(config, model, tokenizer, PIZZA)
    trainer.train()
    generator = torch.Generator().manual_seed(0)
    result = evaluate_lm_policy(trainer.policy, trainer.reference, tokenizer, PIZZA, 400, max_new_tokens=10,
                                generator=generator)
    assert sft_rate < 0.2
    assert result.rates["target_rate"] > max(0.6, sft_rate + 0.4), result.summary()
    assert result.rates["well_formed_rate"] > 0.8, result.summary()


def has_letter_c(text: str, ended_with_eos: bool) -> bool:
    return ended_with_eos and "c" in text


# A second task the language-model subpackage has never heard of: two other prompts, a
# reward for any completion containing the letter "c" (cookies, ice cream, lettuce, tacos,
# ... or anything else that has one), no well-formedness check.
LETTER_C = CompletionTask(
    prompts=["maya hates ", "omar likes "],
    reward=rule_scorer(has_letter_c),
    rates={"with_c": rule_scorer(has_letter_c)},
)


def test_the_same_trainer_learns_a_second_unrelated_task():
    model, tokenizer = tiny_sft()
    generator = torch.Generator().manual_seed(0)
    before = evaluate_lm_policy(model, model, tokenizer, LETTER_C, 400, max_new_tokens=10, generator=generator)
    config = RLHFConfig(iterations=12, learning_rate=1e-3, seed=2, **{**TINY, "batch_size": 64})
    trainer = RLHFTrainer(config, model, tokenizer, LETTER_C)
    metrics = trainer.train()
    after = evaluate_lm_policy(trainer.policy, trainer.reference, tokenizer, LETTER_C, 400, max_new_tokens=10,
                               generator=generator)
    assert "well_formed_rate" not in metrics and "with_c_rate" in metrics
    assert before.rates["with_c_rate"] < 0.45  # the corpus: 19% of maya's hates, 42% of omar's likes
    assert after.rates["with_c_rate"] > max(0.7, before.rates["with_c_rate"] + 0.3), after.summary()


def test_checkpoint_round_trip_restores_the_policy(tmp_path):
    model, tokenizer = tiny_sft()
    trainer = RLHFTrainer(RLHFConfig(iterations=1, seed=2, **TINY), model, tokenizer, PIZZA)
    trainer.train_iteration()
    trainer.save(tmp_path / "checkpoint.pt")
    policy, reference, restored_tokenizer = load_lm_policy(tmp_path)  # weights_only=True
    tokens = torch.tensor([tokenizer.encode("ravin likes pizza", add_eos=True)])
    assert restored_tokenizer == tokenizer
    assert torch.equal(policy(tokens), trainer.policy(tokens)) and torch.equal(reference(tokens), model(tokens))


def test_a_resumed_run_ends_where_the_uninterrupted_run_ends(tmp_path):
    model, tokenizer = tiny_sft()
    config = RLHFConfig(iterations=4, checkpoint_every=2, seed=5, **TINY)
    whole = RLHFTrainer(config, model, tokenizer, PIZZA, run_dir=tmp_path / "whole", progress=False)
    whole.train()
    first_half = RLHFTrainer(config, model, tokenizer, PIZZA, run_dir=tmp_path / "halves", progress=False)
    first_half.train(callback=lambda trainer, metrics: trainer.iteration == 2)
    resumed = RLHFTrainer.resume(tmp_path / "halves", PIZZA, progress=False)
    assert resumed.iteration == 2
    resumed.train()
    for name, tensor in whole.policy.state_dict().items():
        assert torch.equal(resumed.policy.state_dict()[name], tensor), name
    assert resumed.kl_controller.beta == whole.kl_controller.beta


def test_the_kl_controller_sees_every_completion_with_its_score_and_sequence_log_ratio():
    model, tokenizer = tiny_sft()
    trainer = RLHFTrainer(RLHFConfig(iterations=2, kl_target=0.5, seed=4, **TINY), model, tokenizer, PIZZA)
    seen = []
    update = trainer.kl_controller.update
    trainer.kl_controller.update = lambda feedback: seen.append(feedback) or update(feedback)
    trainer.train_iteration()
    trainer.train_iteration()
    first, second = seen
    assert len(first.scores) == len(first.log_ratios) == 32 == first.num_completions
    assert torch.equal(first.log_ratios, torch.zeros(32, dtype=torch.float64))  # the policy is the reference
    assert set(first.scores.tolist()) <= {0.0, 1.0, -1.0}  # the rule's scores and the missing-EOS penalty
    assert float(second.log_ratios.abs().max()) > 0
    # with the k1 estimator, the sequence KL in the reward is ℓ itself
    assert second.mean_sequence_kl == pytest.approx(float(second.log_ratios.mean()), abs=1e-6)
    assert trainer.history[1]["beta"] != trainer.history[0]["beta"]  # β moved after the first batch
