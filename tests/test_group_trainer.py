"""GRPO and RLOO: the group baselines by hand, and a short run of each learns the task."""

import pytest
import torch
from _tiny_lm import one_torch_thread, tiny_sft  # noqa: F401 (one_torch_thread is an autouse fixture)

from envs import corpus
from experiments.tasks.food_task import FoodTaskConfig, food_task
from ppo.config import ConfigError
from ppo.lm.trainers.evaluation import evaluate_lm_policy
from ppo.lm.trainers.group_trainer import GroupBaselineTrainer, group_advantages
from ppo.lm.exact.optimum import completion_probabilities
from ppo.lm.trainers.rlhf_config import RLHFConfig


def test_rloo_advantages_by_hand():
    # group 1: R = 1, 0, 0, 3 → the mean of the others: 1, 4/3, 4/3, 1/3
    # group 2: R = 2, 2, 2, 2 → all 0
    rewards = torch.tensor([1.0, 0.0, 0.0, 3.0, 2.0, 2.0, 2.0, 2.0])
    expected = torch.tensor([0.0, -4 / 3, -4 / 3, 8 / 3, 0.0, 0.0, 0.0, 0.0])
    torch.testing.assert_close(group_advantages(rewards, 4, "rloo"), expected)


def test_grpo_advantages_by_hand():
    # group 1: R = 1, 0, 0, 3: mean 1, unbiased std = sqrt((0 + 1 + 1 + 4) / 3) = sqrt(2)
    rewards = torch.tensor([1.0, 0.0, 0.0, 3.0, 2.0, 2.0, 2.0, 2.0])
    root2 = 2 ** 0.5
    expected = torch.tensor([0.0, -1 / root2, -1 / root2, 2 / root2, 0.0, 0.0, 0.0, 0.0])
    torch.testing.assert_close(group_advantages(rewards, 4, "grpo"), expected, rtol=1e-5, atol=1e-5)


def test_a_rollout_holds_whole_groups_of_one_prompt():
    model, tokenizer = tiny_sft()
    task = food_task(FoodTaskConfig(person="all"))
    config = RLHFConfig(algorithm="rloo", group_size=4, batch_size=16, num_minibatches=2, max_new_tokens=10)
    trainer = GroupBaselineTrainer(config, model, tokenizer, task)
    assert trainer.critic is None and trainer.policy.value_head is None
    groups = [trainer.prompts[i : i + 4] for i in range(0, 16, 4)]
    assert all(len(set(group)) == 1 for group in groups) and len({g[0] for g in groups}) == 4
    with pytest.raises(ConfigError, match="not divisible by group_size"):
        RLHFConfig(algorithm="grpo", group_size=5, batch_size=16).validate()


@pytest.mark.parametrize("algorithm", ["grpo", "rloo"])
def test_a_short_run_of_each_raises_the_target_rate(algorithm):
    model, tokenizer = tiny_sft()
    task = food_task(FoodTaskConfig(target_food="pizza"))
    sft_rate = completion_probabilities(model, tokenizer, task.prompts[0], corpus.FOODS)["pizza"]
    config = RLHFConfig(algorithm=algorithm, group_size=8, iterations=12, batch_size=64, num_minibatches=2,
                        learning_rate=1e-3, max_new_tokens=10, seed=1)
    trainer = GroupBaselineTrainer(config, model, tokenizer, task)
    trainer.train()
    result = evaluate_lm_policy(trainer.policy, trainer.reference, tokenizer, task, 400, max_new_tokens=10,
                                generator=torch.Generator().manual_seed(0))
    assert sft_rate < 0.2
    assert result.rates["target_rate"] > max(0.6, sft_rate + 0.4), result.summary()


def test_grpo_keeps_the_kl_out_of_the_group_normalised_advantage():
    """With loss-k3 (grpo's default) R_i is the score alone: a group whose scores tie gets Â = 0 whatever the KL and
    β, and β scales the loss's k3 term instead. With KL in R_i, Â would be −(K_i − mean K)/std K for any β."""
    model, tokenizer = tiny_sft()
    task = food_task(FoodTaskConfig(target_food="pizza"))
    advantages_at, kl_losses = {}, {}
    for beta in (0.1, 1.0):
        config = RLHFConfig(algorithm="grpo", group_size=4, batch_size=32, num_minibatches=1, max_new_tokens=10,
                            kl_coef=beta, seed=3, tensorboard=False, sample_every=0)
        trainer = GroupBaselineTrainer(config, model, tokenizer, task)
        assert config.effective_kl_penalty == "loss-k3"
        with torch.no_grad():
            for parameter in trainer.policy.parameters():
                parameter.add_(0.05 * torch.randn(parameter.shape, generator=torch.Generator().manual_seed(2)))
        rollout = trainer.collect()
        token_rewards = trainer.rewards(rollout)
        advantages, returns = trainer.advantages(rollout, token_rewards)
        scores = token_rewards.scores.view(-1, 4)
        mask = rollout.batch.mask
        torch.testing.assert_close(advantages[:, 0], group_advantages(token_rewards.scores, 4, "grpo"))
        tied = (scores == scores[:, :1]).all(1).repeat_interleave(4)  # (B,) rows of groups whose scores all tie
        assert bool(tied.any()) and bool((advantages[tied] == 0).all())
        assert float(token_rewards.kl.sum(1).std()) > 1e-3  # the completions do differ in KL
        advantages_at[beta] = advantages
        kl_losses[beta] = float(trainer.minibatch_loss(trainer.update_samples(rollout, advantages, returns))
                                .terms["kl_loss"].detach())
        assert advantages.abs().sum() > 0 and mask.any()
    torch.testing.assert_close(advantages_at[0.1], advantages_at[1.0])
    assert kl_losses[1.0] == pytest.approx(10 * kl_losses[0.1], rel=1e-5) and kl_losses[0.1] > 0
    with pytest.raises(ConfigError, match="grpo divides by each group's std"):
        RLHFConfig(algorithm="grpo", group_size=8, kl_penalty="reward-k1").validate()


@pytest.mark.parametrize("algorithm", ["grpo", "rloo"])
def test_settings_without_effect_on_a_group_baseline_are_refused_unless_at_their_defaults(algorithm):
    """norm_adv, whiten_rewards, the critic's settings and GAE's do nothing without a critic: a value other than the
    default is refused by name; the defaults (and ppo with the same values) pass."""
    from ppo.lm.trainers.rlhf_config import UNUSED_WITHOUT_CRITIC

    RLHFConfig(algorithm=algorithm).validate()
    changed = {"norm_adv": True, "whiten_rewards": True, "critic": "shared", "critic_learning_rate": 1e-2,
               "vf_coef": 0.5, "value_clip_coef": None, "gamma": 0.99, "gae_lambda": 1.0}
    assert set(changed) == set(UNUSED_WITHOUT_CRITIC)
    for name, value in changed.items():
        RLHFConfig(**{name: value}).validate()  # PPO uses each of them
        with pytest.raises(ConfigError, match=rf"^{name} = {value!r} has no effect with algorithm = '{algorithm}'"):
            RLHFConfig(algorithm=algorithm, **{name: value}).validate()
    # the same value as the default, given explicitly, is accepted
    RLHFConfig(algorithm=algorithm, norm_adv=False, gamma=1.0, critic="separate").validate()
