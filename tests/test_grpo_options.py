"""GRPO's published options and their successors: advantage scaling, loss averaging, clip-higher, zero spread.

Every expected value is worked by hand in the test (or written out as its own formula),
never recomputed with the function under test.
"""

import math

import pytest
import torch
from _tiny_lm import one_torch_thread, tiny_sft  # noqa: F401 (one_torch_thread is an autouse fixture)

from experiments.tasks.food_task import FoodTaskConfig, food_task
from ppo.config import ConfigError
from ppo.lm.trainers.group_trainer import (
    GroupBaselineTrainer,
    average_tokens,
    group_advantages,
    trainer_class,
    zero_spread_fraction,
)
from ppo.lm.trainers.rlhf_config import RLHFConfig
from ppo.lm.algorithm.rollout import TokenBatch, score_completions
from ppo.lm.algorithm.task import CompletionTask
from ppo.algorithm.losses import clip_fraction, clipped_surrogate_loss
from ppo.parallel.optim import FlatAdam
from ppo.algorithm.update import MinibatchLoss, run_update

# ---------------------------------------------------------------- advantage scaling


def test_each_advantage_scale_by_hand():
    # group 1: R = 1, 0, 1, 0: mean 1/2, A = ±1/2, unbiased std √(4 · 1/4 / 3) = 1/√3
    # group 2: R = 3, 0, 0, 0: mean 3/4, A = 9/4, −3/4, −3/4, −3/4, unbiased std √((81/16 + 27/16) / 3) = 3/2
    # batch: Σ A² = 4 · 1/4 + 81/16 + 27/16 = 1 + 108/16 = 31/4 over N − 1 = 7: std √(31/28)
    rewards = torch.tensor([1.0, 0.0, 1.0, 0.0, 3.0, 0.0, 0.0, 0.0])
    centred = torch.tensor([0.5, -0.5, 0.5, -0.5, 2.25, -0.75, -0.75, -0.75])
    torch.testing.assert_close(group_advantages(rewards, 4, "grpo", "none"), centred)
    torch.testing.assert_close(group_advantages(rewards, 4, "grpo", "group-std"),
                               torch.tensor([0.5 * 3 ** 0.5, -0.5 * 3 ** 0.5, 0.5 * 3 ** 0.5, -0.5 * 3 ** 0.5,
                                             1.5, -0.5, -0.5, -0.5]), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(group_advantages(rewards, 4, "grpo", "batch-std"), centred / (31 / 28) ** 0.5,
                               rtol=1e-5, atol=1e-5)
    # the published default is group-std
    torch.testing.assert_close(group_advantages(rewards, 4, "grpo"), group_advantages(rewards, 4, "grpo", "group-std"))
    with pytest.raises(ValueError, match="unknown advantage scale 'group'"):
        group_advantages(rewards, 4, "grpo", "group")


def test_a_trainers_advantages_follow_advantage_scale():
    """The scale chosen in the config reaches the trainer's Â: none gives score − group mean at every real token."""
    model, tokenizer = tiny_sft()
    task = food_task(FoodTaskConfig(target_food="pizza"))
    config = RLHFConfig(algorithm="grpo", advantage_scale="none", group_size=4, batch_size=16, num_minibatches=1,
                        max_new_tokens=10, seed=5, sample_every=0, tensorboard=False)
    trainer = GroupBaselineTrainer(config, model, tokenizer, task)
    rollout = trainer.collect()
    token_rewards = trainer.rewards(rollout)
    advantages, _ = trainer.advantages(rollout, token_rewards)
    scores = token_rewards.scores.view(4, 4)
    expected = (scores - scores.mean(1, keepdim=True)).reshape(-1, 1) * rollout.batch.mask
    torch.testing.assert_close(advantages, expected)


# ---------------------------------------------------------------- loss averaging


def test_each_loss_averaging_and_its_gradient_by_hand():
    # completion 0: ℓ = 1, 2, 3 (|y| = 3), completion 1: ℓ = 4, 5 (|y| = 2); the 9s are padding; T = 4
    per_token = torch.tensor([[1.0, 2.0, 3.0, 9.0], [4.0, 5.0, 9.0, 9.0]], requires_grad=True)
    mask = torch.tensor([[True, True, True, False], [True, True, False, False]])
    # value, then ∂L/∂ℓ_it at the real tokens of completion 0 and of completion 1
    expected = {"token": (15 / 5, 1 / 5, 1 / 5),  # Σ ℓ / Σ |y|
                "sequence": ((6 / 3 + 9 / 2) / 2, 1 / 6, 1 / 4),  # (1/b) Σ_i mean_t ℓ_it: 1/(b |y_i|)
                "constant": (15 / 8, 1 / 8, 1 / 8)}  # Σ ℓ / (b · T)
    for averaging, (value, weight_0, weight_1) in expected.items():
        per_token.grad = None
        loss = average_tokens(per_token, mask, averaging, max_new_tokens=4)
        loss.backward()
        assert float(loss.detach()) == pytest.approx(value, rel=1e-6), averaging
        expected_grad = torch.tensor([[weight_0] * 3 + [0.0], [weight_1] * 2 + [0.0, 0.0]])
        torch.testing.assert_close(per_token.grad, expected_grad, msg=averaging)
    with pytest.raises(ValueError, match="unknown loss averaging 'mean'"):
        average_tokens(per_token, mask, "mean", 4)


def _length_task() -> CompletionTask:
    """score = completion length / 10: no two completions of different lengths tie, so every group has Â ≠ 0."""
    prompts = food_task(FoodTaskConfig(target_food="pizza")).prompts
    return CompletionTask(prompts=prompts, reward=lambda batch: torch.tensor([len(t) / 10 for t in batch.texts]))


def _perturbed_trainer(algorithm: str, seed: int = 3, **settings):
    model, tokenizer = tiny_sft()
    task = _length_task()
    config = RLHFConfig(algorithm=algorithm, batch_size=16, num_minibatches=1, max_new_tokens=10, seed=seed,
                        sample_every=0, tensorboard=False, **({"group_size": 4} if algorithm != "ppo" else {}),
                        **settings)
    trainer = trainer_class(algorithm)(config, model, tokenizer, task)
    rollout = trainer.collect()
    token_rewards = trainer.rewards(rollout)
    advantages, returns = trainer.advantages(rollout, token_rewards)
    samples = trainer.update_samples(rollout, advantages, returns)
    with torch.no_grad():  # move π_θ away from π_old so that ratios differ from 1 and some are clipped
        for parameter in trainer.policy.parameters():
            parameter.add_(0.03 * torch.randn(parameter.shape, generator=torch.Generator().manual_seed(seed)))
    return trainer, samples


def _surrogate_by_hand(log_probs, old_log_probs, advantages, low, high):
    """min(r Â, clip(r, 1 − low, 1 + high) Â) per token, written out here."""
    ratio = (log_probs - old_log_probs).exp()
    return torch.minimum(ratio * advantages, ratio.clamp(1 - low, 1 + high) * advantages)


def _grpo_loss_by_hand(trainer, samples, averaging: str, clip_high: float | None = None):
    """GRPO's loss on the whole batch with each token's weight written out: w_it = 1/Σ|y| (token),
    1/(b |y_i|) (sequence), 1/(b T) (constant); L = −Σ w·surrogate + β Σ w·k3."""
    config = trainer.config
    tokens = TokenBatch(samples["tokens"], samples["prompt_lengths"], samples["completion"], samples["mask"])
    scored = score_completions(trainer.policy, tokens, config.temperature)
    real = samples["mask"].double()
    lengths = real.sum(1, keepdim=True)
    b, T = real.shape
    weights = {"token": real / real.sum(), "sequence": real / (b * lengths),
               "constant": real / (b * config.max_new_tokens)}[averaging]
    surrogate = _surrogate_by_hand(scored.log_probs.double(), samples["log_probs"].double(),
                                   samples["advantages"].double(), config.clip_coef,
                                   config.clip_coef if clip_high is None else clip_high)
    log_rho = samples["reference_log_probs"].double() - scored.log_probs.double()
    k3 = log_rho.exp() - log_rho - 1
    return -(weights * surrogate).sum() + config.kl_coef * (weights * k3).sum()


@pytest.mark.parametrize("averaging", ["token", "sequence", "constant"])
def test_the_group_trainers_loss_and_its_gradient_follow_loss_averaging(averaging):
    trainer, samples = _perturbed_trainer("grpo", loss_averaging=averaging, clip_coef=0.1, clip_coef_high=0.3)
    lengths = samples["mask"].sum(1)
    assert len(set(lengths.tolist())) > 1  # completions of different lengths, so the three differ
    tokens = TokenBatch(samples["tokens"], samples["prompt_lengths"], samples["completion"], samples["mask"])
    with torch.no_grad():
        ratio = (score_completions(trainer.policy, tokens).log_probs - samples["log_probs"]).exp()
    between = (ratio > 1.1) & (ratio <= 1.3) & (samples["advantages"] > 0) & samples["mask"]
    assert int(between.sum()) > 0  # tokens that only clip-higher leaves unclipped
    result = trainer.minibatch_loss(samples)
    trainer.optimizer.zero_grad()
    result.loss.backward()
    library_grad = trainer.optimizer.flat_grads.clone()
    reference = _grpo_loss_by_hand(trainer, samples, averaging, clip_high=0.3)
    trainer.optimizer.zero_grad()
    reference.float().backward()
    # float32 network; the reference sums in float64: agreement to rounding, far below the options' differences
    assert float(result.loss.detach()) == pytest.approx(float(reference.detach()), rel=1e-5, abs=1e-6)
    torch.testing.assert_close(library_grad, trainer.optimizer.flat_grads, rtol=1e-4, atol=1e-6)


def test_the_default_grpo_loss_is_the_token_mean_it_always_was():
    """Defaults (token averaging, symmetric clip, group-std): the loss written out with one weight 1/Σ|y| per token."""
    trainer, samples = _perturbed_trainer("grpo")
    assert trainer.config.loss_averaging == "token" and trainer.config.clip_coef_high is None
    reference = _grpo_loss_by_hand(trainer, samples, "token")
    assert float(trainer.minibatch_loss(samples).loss.detach()) == pytest.approx(float(reference.detach()), rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("clip", [{}, {"clip_coef": 0.1, "clip_coef_high": 0.3}], ids=["default", "clip-higher"])
def test_the_ppo_loss_is_the_masked_token_mean_it_always_was(clip):
    """PPO's loss: −masked mean of the clipped surrogate + c_v · value loss (reward-k1: no KL term), by hand; with
    the defaults as before, and with ε_high where it is set."""
    trainer, samples = _perturbed_trainer("ppo", **clip)
    config = trainer.config
    high = config.clip_coef if config.clip_coef_high is None else config.clip_coef_high
    result = trainer.minibatch_loss(samples)
    tokens = TokenBatch(samples["tokens"], samples["prompt_lengths"], samples["completion"], samples["mask"])
    scored = score_completions(trainer.policy, tokens, config.temperature, with_values=True, critic=trainer.critic)
    real = samples["mask"].double()
    surrogate = _surrogate_by_hand(scored.log_probs.double(), samples["log_probs"].double(),
                                   samples["advantages"].double(), config.clip_coef, high)
    policy_loss = -(surrogate * real).sum() / real.sum()
    values, old_values, returns = (t.double() for t in (scored.values, samples["values"], samples["returns"]))
    clipped_values = old_values + (values - old_values).clamp(-config.value_clip_coef, config.value_clip_coef)
    value_loss = 0.5 * (torch.maximum((values - returns) ** 2, (clipped_values - returns) ** 2) * real).sum() / real.sum()
    assert float(result.terms["policy_loss"].detach()) == pytest.approx(float(policy_loss.detach()), rel=1e-5, abs=1e-6)
    assert float(result.loss.detach()) == pytest.approx(float((policy_loss + config.vf_coef * value_loss).detach()), rel=1e-5, abs=1e-6)
    ratio = (scored.log_probs - samples["log_probs"]).exp()[samples["mask"]]
    assert bool(((ratio - 1).abs() > config.clip_coef).any())  # the clip is exercised


# ---------------------------------------------------------------- clip-higher


def test_clip_higher_keeps_the_gradient_of_a_ratio_between_the_two_bounds():
    # r = 1.25, between 1 + ε_low = 1.2 and 1 + ε_high = 1.28
    old = torch.zeros(1)
    for advantage, symmetric, (high_value, high_grad), symmetric_grad in [
        # Â = +1: symmetric clip → min(1.25, 1.2) = 1.2, flat; clip-higher → min(1.25, 1.25) = 1.25, ∂/∂log π = −r
        (1.0, -1.2, (-1.25, -1.25), 0.0),
        # Â = −1: min(−1.25, −1.2) = −1.25 either way, ∂(−(−r))/∂log π = +r: ε_high never clips a negative Â above
        (-1.0, 1.25, (1.25, 1.25), 1.25),
    ]:
        for clip_high, expected_value, expected_grad in [(None, symmetric, symmetric_grad),
                                                         (0.28, high_value, high_grad)]:
            new = torch.tensor([math.log(1.25)], requires_grad=True)
            loss = clipped_surrogate_loss(new, old, torch.tensor([advantage]), 0.2, clip_coef_high=clip_high)
            loss.backward()
            assert float(loss.detach()) == pytest.approx(expected_value, rel=1e-6)
            assert float(new.grad) == pytest.approx(expected_grad, rel=1e-6, abs=1e-12)
    # below 1 − ε_low with Â < 0: clipped at 0.8 by both, no gradient
    new = torch.tensor([math.log(0.75)], requires_grad=True)
    loss = clipped_surrogate_loss(new, old, torch.tensor([-1.0]), 0.2, clip_coef_high=0.28)
    loss.backward()
    assert float(loss.detach()) == pytest.approx(0.8) and float(new.grad) == 0.0


def test_without_clip_coef_high_the_surrogate_is_bit_for_bit_the_symmetric_one():
    """The same operations on the same tensors (one process, same kernels): equal to the last bit."""
    generator = torch.Generator().manual_seed(0)
    new, old, advantages = (torch.randn(64, generator=generator) * 0.3 for _ in range(3))
    mask = torch.rand(64, generator=generator) > 0.3
    ratio = torch.exp(new - old)
    by_hand = torch.min(ratio * advantages, torch.clamp(ratio, 1.0 - 0.2, 1.0 + 0.2) * advantages)
    expected = -(by_hand * mask.float()).sum() / mask.float().sum()
    assert torch.equal(clipped_surrogate_loss(new, old, advantages, 0.2, mask), expected)
    assert torch.equal(clipped_surrogate_loss(new, old, advantages, 0.2, mask, clip_coef_high=0.2), expected)


def test_the_clip_fraction_counts_ratios_outside_the_asymmetric_range():
    log_ratio = torch.tensor([0.75, 1.1, 1.25, 1.3]).log()
    zero = torch.zeros(4)
    assert float(clip_fraction(log_ratio, zero, 0.2)) == 0.75  # 0.75, 1.25 and 1.3 leave [0.8, 1.2]
    assert float(clip_fraction(log_ratio, zero, 0.2, clip_coef_high=0.28)) == 0.5  # only 0.75 and 1.3 leave [0.8, 1.28]
    # and the update's logged clip_fraction says the same
    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = FlatAdam([parameter], lr=1e-3)

    def minibatch_loss(minibatch):
        return MinibatchLoss(loss=parameter.sum() * 0.0, log_ratio=minibatch["log_ratio"])

    for clip_high, expected in [(None, 0.75), (0.28, 0.5)]:
        metrics = run_update({"log_ratio": log_ratio}, minibatch_loss, optimizer, update_epochs=1, num_minibatches=1,
                             max_grad_norm=None, target_kl=None, clip_coef=0.2, generator=torch.Generator(),
                             clip_coef_high=clip_high)
        assert metrics["clip_fraction"] == pytest.approx(expected)


# ---------------------------------------------------------------- zero spread


def test_zero_spread_fraction_by_hand():
    # groups: all 1 (tie), 0 1 0 0, all 0 (tie), 2 2 2 2.5 → 2 of 4 tie
    scores = torch.tensor([1.0, 1, 1, 1, 0, 1, 0, 0, 0, 0, 0, 0, 2, 2, 2, 2.5])
    assert zero_spread_fraction(scores, 4) == 0.5
    assert zero_spread_fraction(scores, 8) == 0.0
    assert zero_spread_fraction(torch.zeros(6), 3) == 1.0


@pytest.mark.parametrize("algorithm", ["grpo", "rloo"])
def test_zero_spread_groups_is_logged_each_iteration(algorithm):
    """The logged share equals the share of groups whose scores are one value, counted here from the scores the
    trainer used; a reward that pays everyone the same (and no EOS the same) gives 1."""
    model, tokenizer = tiny_sft()
    food = food_task(FoodTaskConfig(target_food="pizza"))
    flat = CompletionTask(prompts=food.prompts, reward=lambda batch: torch.full((len(batch.texts),), 0.5))
    for task, missing_eos_penalty in [(flat, 0.5), (food, -1.0)]:
        config = RLHFConfig(algorithm=algorithm, group_size=4, batch_size=32, num_minibatches=1, iterations=3,
                            max_new_tokens=6, seed=2, sample_every=0, tensorboard=False,
                            missing_eos_penalty=missing_eos_penalty)
        trainer = GroupBaselineTrainer(config, model, tokenizer, task, progress=False)
        used_scores, rows = [], []
        rewards = trainer.rewards
        trainer.rewards = lambda rollout: used_scores.append(rewards(rollout).scores) or rewards(rollout)
        trainer.train(callback=lambda _trainer, metrics: rows.append(metrics["zero_spread_groups"]))
        by_hand = [sum(len(set(scores[i:i + 4].tolist())) == 1 for i in range(0, 32, 4)) / 8 for scores in used_scores]
        assert rows == by_hand
        if task is flat:
            assert by_hand == [1.0, 1.0, 1.0]
        else:
            assert any(0 < share < 1 for share in by_hand), by_hand  # some groups tie, some do not


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize("settings, message", [
    ({"advantage_scale": "group"}, r"^advantage_scale = 'group' is not one of auto, group-std, batch-std, none$"),
    ({"algorithm": "rloo", "advantage_scale": "none"},
     r"^advantage_scale = 'none' has no effect with algorithm = 'rloo': only grpo scales"),
    ({"algorithm": "ppo", "advantage_scale": "group-std"},
     r"^advantage_scale = 'group-std' has no effect with algorithm = 'ppo'"),
    ({"loss_averaging": "mean"}, r"^loss_averaging = 'mean' is not one of token, sequence, constant$"),
    ({"algorithm": "ppo", "loss_averaging": "sequence"},
     r"^loss_averaging = 'sequence' has no effect with algorithm = 'ppo'"),
    ({"clip_coef_high": 0.0}, r"^clip_coef_high = 0.0 must be a finite number > 0$"),
    ({"algorithm": "grpo", "advantage_scale": "batch-std", "kl_penalty": "reward-k1"},
     r"grpo divides by the batch's std, so β would change from batch to batch"),
    ({"algorithm": "grpo", "kl_penalty": "reward-k1"}, r"grpo divides by each group's std"),
])
def test_bad_or_ineffective_settings_are_refused_in_one_line(settings, message):
    with pytest.raises(ConfigError, match=message) as error:
        group = {} if settings.get("algorithm", "ppo") == "ppo" else {"group_size": 8}  # ppo samples no groups
        RLHFConfig(**group, **settings).validate()
    assert "\n" not in str(error.value)


def test_the_settings_each_algorithm_uses_are_accepted():
    for scale in ("auto", "group-std", "batch-std", "none"):
        RLHFConfig(algorithm="grpo", advantage_scale=scale).validate()
    for averaging in ("token", "sequence", "constant"):
        for algorithm in ("grpo", "rloo"):
            RLHFConfig(algorithm=algorithm, loss_averaging=averaging).validate()
    for algorithm in ("ppo", "grpo", "rloo"):
        RLHFConfig(algorithm=algorithm, clip_coef_high=0.28).validate()
    # Dr. GRPO divides by nothing, so a KL in the reward keeps its β
    RLHFConfig(algorithm="grpo", advantage_scale="none", kl_penalty="reward-k1").validate()
    assert RLHFConfig(algorithm="grpo").effective_advantage_scale == "group-std"
    assert RLHFConfig(algorithm="rloo").effective_advantage_scale == "none"
