"""PPO on the tiny language model: first-minibatch identities, short learning runs on two tasks, resuming."""

import pytest
import torch
from _tiny_lm import one_torch_thread, tiny_sft  # noqa: F401 (one_torch_thread is an autouse fixture)

from envs import corpus
from experiments.tasks.food_task import FoodTaskConfig, food_task
from ppo.lm.trainers.evaluation import evaluate_lm_policy
from ppo.lm.exact.optimum import completion_probabilities
from ppo.lm.algorithm.rewards import rule_scorer
from ppo.lm.trainers.rlhf_config import RLHFConfig
from ppo.lm.trainers.rlhf_trainer import RLHFTrainer, load_lm_policy
from ppo.lm.algorithm.task import CompletionTask

TINY = dict(batch_size=32, num_minibatches=2, max_new_tokens=10, sample_every=0, tensorboard=False)
PIZZA = food_task(FoodTaskConfig(target_food="pizza", person="ravin"))
RATIO_ONE_TOLERANCE = 32 * torch.finfo(torch.float32).eps  # as in test_trainer.py: rounding of other batch shapes


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_with_policy_equal_to_reference_the_first_minibatch_has_ratio_one_and_kl_zero(temperature):
    model, tokenizer = tiny_sft()
    trainer = RLHFTrainer(RLHFConfig(temperature=temperature, seed=3, **TINY), model, tokenizer, PIZZA)
    rollout = trainer.collect()
    mask = rollout.batch.mask
    # the recomputed log-probs are those of the distribution actually sampled from, softmax(z / τ)
    torch.testing.assert_close(rollout.log_probs, rollout.batch.sampler_log_probs, atol=1e-5, rtol=0)
    token_rewards = trainer.rewards(rollout)
    # policy and reference are copies scored on the same (B, T) batch: the same arithmetic, bit for bit
    assert torch.equal(rollout.log_probs, rollout.reference_log_probs)
    assert torch.equal(token_rewards.kl, torch.zeros_like(token_rewards.kl))  # KL exactly 0
    advantages, returns = trainer.advantages(rollout, token_rewards)
    rows = torch.randperm(len(rollout.batch))[: trainer.config.minibatch_size]
    samples = trainer.update_samples(rollout, advantages, returns)
    result = trainer.minibatch_loss({name: tensor[rows] for name, tensor in samples.items()})
    ratio = result.log_ratio.exp()[mask[rows]]
    # r_t(θ) = 1 before any step, to rounding: the minibatch is scored as (b, T), the rollout
    # as (B, T), and a CPU's matmul kernels may round the two shapes differently (a few
    # float32 ulps; a stale or misaligned log-prob would be off by far more)
    assert (ratio - 1).abs().max() <= RATIO_ONE_TOLERANCE
    metrics = trainer.update(rollout, advantages, returns)  # the shared routine measures the same on its first minibatch
    assert metrics["first_minibatch_ratio_error"] <= RATIO_ONE_TOLERANCE


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


def test_progress_off_prints_no_sample_lines(capsys):
    model, tokenizer = tiny_sft()
    config = RLHFConfig(iterations=1, seed=6, **{**TINY, "sample_every": 1})
    RLHFTrainer(config, model, tokenizer, PIZZA, progress=False).train()
    assert "[iteration" not in capsys.readouterr().out
    RLHFTrainer(config, model, tokenizer, PIZZA, progress=True).train()
    assert "[iteration 1]" in capsys.readouterr().out  # the same run with progress on does print them


@pytest.mark.parametrize("placement", ["reward-k1", "loss-full", "loss-k3"])
def test_each_kl_placement_charges_beta_where_it_says(placement):
    """Policy moved off the reference; on the whole rollout as one minibatch (r_t(θ) = 1), the loss's KL term is
    β × the token mean of k3 (loss-k3), of the exact per-state KL (loss-full) or 0, and the reward's part is
    −β·k1, −β·exact KL or 0."""
    model, tokenizer = tiny_sft()
    beta = 0.7
    trainer = RLHFTrainer(RLHFConfig(kl_coef=beta, kl_penalty=placement, seed=7, **TINY), model, tokenizer, PIZZA)
    with torch.no_grad():
        for parameter in trainer.policy.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=torch.Generator().manual_seed(1)))
    rollout = trainer.collect()
    mask = rollout.batch.mask
    token_rewards = trainer.rewards(rollout)
    advantages, returns = trainer.advantages(rollout, token_rewards)
    terms = trainer.minibatch_loss(trainer.update_samples(rollout, advantages, returns)).terms
    k1 = (rollout.log_probs - rollout.reference_log_probs) * mask
    log_rho = rollout.reference_log_probs - rollout.log_probs
    k3 = (torch.exp(log_rho) - 1 - log_rho) * mask
    expected_loss = {"reward-k1": 0.0, "loss-full": beta * rollout.exact_kl[mask].mean(), "loss-k3": beta * k3[mask].mean()}
    expected_in_reward = {"reward-k1": k1, "loss-full": rollout.exact_kl, "loss-k3": torch.zeros_like(k1)}[placement]
    assert float(terms["kl_loss"].detach()) == pytest.approx(float(expected_loss[placement]), rel=1e-4, abs=1e-7)
    without_score = token_rewards.rewards.clone()
    without_score[torch.arange(len(mask)), mask.sum(1) - 1] -= token_rewards.scores
    torch.testing.assert_close(without_score, -beta * expected_in_reward, atol=1e-6, rtol=1e-5)
    assert float(k1.sum(1).mean().abs()) > 1e-3  # the policy has really moved


def test_old_configs_load_when_they_trained_with_k1_and_are_refused_otherwise():
    from ppo.config import ConfigError

    old = RLHFConfig(**TINY).to_dict()
    del old["kl_penalty"]
    assert RLHFConfig.from_dict({**old, "kl_estimator": "k1"}).effective_kl_penalty == "reward-k1"
    for estimator, reason in (("k3", "β is ignored"), ("full", "never penalised")):
        with pytest.raises(ConfigError, match=f"kl_estimator = '{estimator}' is no longer offered.*{reason}"):
            RLHFConfig.from_dict({**old, "kl_estimator": estimator})
    with pytest.raises(ConfigError, match="grpo run kept the KL in the group-normalised reward"):
        RLHFConfig.from_dict({**old, "kl_estimator": "k1", "algorithm": "grpo", "group_size": 8})
    with pytest.raises(ConfigError, match="whiten_rewards rescales the reward but not the KL term"):
        RLHFConfig(whiten_rewards=True, kl_penalty="loss-full").validate()
    assert RLHFConfig(whiten_rewards=True).validate().effective_kl_penalty == "reward-k1"
    for placement in ("loss-full", "loss-k3"):
        with pytest.raises(ConfigError, match=f"norm_adv whitens the advantages.*kl_penalty = '{placement}' in the loss"):
            RLHFConfig(norm_adv=True, kl_penalty=placement).validate()
    assert RLHFConfig(norm_adv=True).validate().effective_kl_penalty == "reward-k1"


def test_a_run_folder_written_before_kl_penalty_resumes_or_is_refused_in_one_line(tmp_path):
    import json

    from ppo.runs.checkpoint import CheckpointError, load_checkpoint, save_checkpoint

    model, tokenizer = tiny_sft()
    config = RLHFConfig(iterations=2, seed=8, **TINY)
    RLHFTrainer(config, model, tokenizer, PIZZA, run_dir=tmp_path, progress=False).train(
        callback=lambda trainer, metrics: trainer.iteration == 1)

    def write_legacy(estimator: str) -> None:  # the folder as the version with --kl-estimator wrote it
        state = load_checkpoint(tmp_path / "checkpoint.pt")
        legacy = {**{k: v for k, v in state["config"].items() if k != "kl_penalty"}, "kl_estimator": estimator}
        save_checkpoint({**state, "config": legacy}, tmp_path / "checkpoint.pt")
        (tmp_path / "config.json").write_text(json.dumps(legacy))

    write_legacy("k1")
    resumed = RLHFTrainer.resume(tmp_path, PIZZA, progress=False)
    assert resumed.iteration == 1 and resumed.config.effective_kl_penalty == "reward-k1"
    write_legacy("k3")
    with pytest.raises(CheckpointError, match="kl_estimator = 'k3' is no longer offered"):
        RLHFTrainer.resume(tmp_path, PIZZA, progress=False)
