"""PPO-Penalty, adaptive clipping and dual-clip: the losses and the KL feedback rules by hand, and as trainers."""

import json
import math

import pytest
import torch

from envs.factory import make_seed_batch_env
from experiments.commands.train import training_envs
from ppo.runs.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from ppo.config import ConfigError, PPOConfig
from ppo.algorithm.losses import clipped_surrogate_loss
from ppo.trainers.ppo import PPO
from ppo.trainers.variants import (
    ON_TARGET,
    TOO_CLOSE,
    TOO_FAR,
    AdaptiveClipPPO,
    PPOPenalty,
    kl_feedback,
    kl_penalty_loss,
    unclipped_surrogate_loss,
    update_clip_coefficient,
    update_kl_coefficient,
)

SMALL = dict(env_id="CartPole-v1", env_backend="torch", num_envs=8, num_steps=32, total_timesteps=1024,
             update_epochs=4, learning_rate=3e-3, tensorboard=False)


def small_envs():
    return training_envs(PPOConfig(**SMALL))


def test_penalty_loss_hand_worked_two_samples():
    # π_old(a) = 0.5 for both samples; π_θ(a) = 0.6 and 0.25, so r = 1.2 and 0.5; Â = +1, −2.
    #   surrogate  −E[r Â] = −(1.2·1 + 0.5·(−2)) / 2 = −0.1
    #   k3 = (r − 1) − log r:  0.2 − log 1.2 = 0.0176784,  −0.5 + log 2 = 0.1931472;  mean 0.1054128
    #   β = 2:  L = −0.1 + 2 · 0.1054128 = 0.1108256
    old = torch.log(torch.tensor([0.5, 0.5]))
    new = torch.log(torch.tensor([0.6, 0.25]))
    advantages = torch.tensor([1.0, -2.0])
    loss = kl_penalty_loss(new, old, advantages, beta=2.0)
    assert loss.item() == pytest.approx(-0.1 + 2.0 * ((0.2 - math.log(1.2)) + (-0.5 + math.log(2.0))) / 2, abs=1e-6)
    assert loss.item() == pytest.approx(0.1108256, abs=1e-6)


def test_penalty_has_no_gradient_at_the_old_policy():
    # At θ = θ_old, r = 1: the KL term is 0 and so is its slope (d k3 / d log r = r − 1 = 0),
    # so the first step of PPO-Penalty is the plain policy-gradient step.
    new = torch.zeros(3, requires_grad=True)
    advantages = torch.tensor([1.0, -1.0, 0.5])
    loss = kl_penalty_loss(new, torch.zeros(3), advantages, beta=10.0)
    loss.backward()
    assert loss.item() == pytest.approx(-advantages.mean().item())
    torch.testing.assert_close(new.grad, -advantages / 3)


def test_unclipped_surrogate_keeps_ratios_far_outside_the_clip_range():
    new = torch.log(torch.tensor([3.0, 0.1]))
    advantages = torch.tensor([1.0, -1.0])
    assert unclipped_surrogate_loss(new, torch.zeros(2), advantages).item() == pytest.approx(-(3.0 - 0.1) / 2)
    # The clipped loss at ε = 0.2 caps both samples: −(1.2·1 + 0.8·(−1)) / 2 = −0.2
    assert clipped_surrogate_loss(new, torch.zeros(2), advantages, 0.2).item() == pytest.approx(-0.2)


@pytest.mark.parametrize(
    "kl, feedback",
    [(0.02, TOO_FAR), (0.0151, TOO_FAR), (0.015, ON_TARGET), (0.01, ON_TARGET),
     (0.01 / 1.5, ON_TARGET), (0.0066, TOO_CLOSE), (0.0, TOO_CLOSE)],
)
def test_kl_feedback_uses_a_factor_of_one_and_a_half_around_the_target(kl, feedback):
    assert kl_feedback(kl, 0.01) == feedback


def test_beta_doubles_when_kl_overshoots_and_halves_when_it_undershoots():
    assert update_kl_coefficient(1.0, kl=0.02, kl_target=0.01) == 2.0   # 0.02 > 0.015
    assert update_kl_coefficient(1.0, kl=0.005, kl_target=0.01) == 0.5  # 0.005 < 0.00667
    assert update_kl_coefficient(1.0, kl=0.012, kl_target=0.01) == 1.0  # inside the band
    beta = 1.0
    for kl in (0.05, 0.05, 0.001):  # ×2, ×2, ÷2
        beta = update_kl_coefficient(beta, kl, 0.01)
    assert beta == 2.0


def test_clip_coefficient_moves_opposite_to_beta_and_stays_in_bounds():
    assert update_clip_coefficient(0.2, kl=0.02, kl_target=0.01) == 0.1
    assert update_clip_coefficient(0.2, kl=0.005, kl_target=0.01) == 0.4
    assert update_clip_coefficient(0.2, kl=0.012, kl_target=0.01) == 0.2
    assert update_clip_coefficient(0.4, kl=0.0, kl_target=0.01, max_clip=0.5) == 0.5
    assert update_clip_coefficient(0.03, kl=1.0, kl_target=0.01, min_clip=0.02) == 0.02


def test_rollout_kl_is_zero_before_the_policy_moves():
    trainer = PPOPenalty(PPOConfig(**SMALL), small_envs(), progress=False)
    trainer.collect_rollout()
    assert trainer.rollout_kl(trainer.update_samples(*trainer.compute_advantages())) == pytest.approx(0.0, abs=1e-7)


def test_penalty_trainer_applies_the_beta_rule_after_every_update():
    rows = []
    trainer = PPOPenalty(PPOConfig(**SMALL), small_envs(), progress=False, kl_target=0.01, initial_beta=1.0)
    trainer.train(callback=lambda ppo, metrics: rows.append((metrics["beta"], metrics["kl_after_update"], ppo.beta)))
    assert len(rows) == 4
    assert rows[0][0] == 1.0
    for used, kl, after in rows:
        assert kl > 0
        assert after == update_kl_coefficient(used, kl, 0.01)
    for (_, _, after), (used_next, _, _) in zip(rows, rows[1:]):
        assert used_next == after


def test_adaptive_clip_trainer_uses_and_adapts_its_own_epsilon():
    rows = []
    trainer = AdaptiveClipPPO(PPOConfig(**SMALL), small_envs(), progress=False, kl_target=0.01)
    trainer.train(callback=lambda ppo, metrics: rows.append((metrics["clip_coef"], metrics["kl_after_update"], ppo.clip_coef)))
    assert rows[0][0] == 0.2
    for used, kl, after in rows:
        assert after == update_clip_coefficient(used, kl, 0.01)
    assert trainer.config.clip_coef == 0.2  # the config is not touched


def test_adapted_coefficient_survives_a_checkpoint(tmp_path):
    trainer = PPOPenalty(PPOConfig(**SMALL), small_envs(), progress=False)
    trainer.beta = 0.125
    trainer.save(tmp_path / "checkpoint.pt")
    restored = PPOPenalty(PPOConfig(**SMALL), small_envs(), progress=False)
    restored.load_state_dict(load_checkpoint(tmp_path / "checkpoint.pt", required_keys=("model",)))
    assert restored.beta == 0.125


def test_bad_variant_settings_get_a_one_line_error():
    with pytest.raises(ConfigError, match="kl_target"):
        PPOPenalty(PPOConfig(**SMALL), small_envs(), progress=False, kl_target=0.0)
    with pytest.raises(ConfigError, match="initial_beta"):
        PPOPenalty(PPOConfig(**SMALL), small_envs(), progress=False, initial_beta=-1.0)


RESUMED_SETTINGS = [  # every setting away from its default, so a resume that fell back to one is caught
    (PPOPenalty, dict(kl_target=0.003, initial_beta=0.25), "beta"),
    (AdaptiveClipPPO, dict(kl_target=0.003, min_clip=0.05, max_clip=0.3), "clip_coef"),
]
WALL_CLOCK = ("time_s", "steps_per_second")


def _rows(trainer) -> list[dict]:
    return [{key: value for key, value in row.items() if key not in WALL_CLOCK} for row in trainer.history]


@pytest.mark.parametrize("variant, settings, adapted", RESUMED_SETTINGS, ids=["penalty", "adaptive-clip"])
def test_variant_stopped_and_resumed_equals_the_run_left_alone(tmp_path, variant, settings, adapted):
    """Torch backend, same process: the resumed run repeats the arithmetic of the one left alone
    (same kernels, same shapes), so its weights and every logged number are bit-identical."""
    config = PPOConfig(**SMALL, checkpoint_every=1)  # 4 iterations
    alone = variant(config, small_envs(), run_dir=tmp_path / "alone", progress=False, **settings)
    alone.train()

    stopped = variant(config, small_envs(), run_dir=tmp_path / "stopped", progress=False, **settings)
    stopped.train(callback=lambda trainer, metrics: trainer.iteration == 2)
    resumed = variant.resume(tmp_path / "stopped", training_envs, progress=False)
    for name, value in settings.items():
        assert getattr(resumed, name) == value  # not the constructor's default
    assert getattr(resumed, adapted) == getattr(stopped, adapted)  # where the rule had moved it
    assert resumed.iteration == 2
    resumed.train()

    assert _rows(stopped) + _rows(resumed) == _rows(alone)
    assert getattr(resumed, adapted) == getattr(alone, adapted)
    for name, tensor in alone.model.state_dict().items():
        assert torch.equal(resumed.model.state_dict()[name], tensor), name
    record = json.loads((tmp_path / "stopped" / "config.json").read_text())["trainer"]
    assert record == {"class": variant.__name__, **settings}


def test_resume_refuses_a_checkpoint_another_trainer_wrote(tmp_path):
    config = PPOConfig(**SMALL)
    PPOPenalty(config, small_envs(), run_dir=tmp_path / "penalty", progress=False).train(callback=lambda *_: True)
    with pytest.raises(CheckpointError, match="written by 'PPOPenalty', not PPO; resume it with PPOPenalty.resume"):
        PPO.resume(tmp_path / "penalty", training_envs, progress=False)
    with pytest.raises(CheckpointError, match="written by 'PPOPenalty', not AdaptiveClipPPO"):
        AdaptiveClipPPO.resume(tmp_path / "penalty", training_envs, progress=False)

    # A checkpoint without the record (written before it existed) resumes as plain PPO;
    # a variant refuses it rather than guess its settings.
    PPO(config, small_envs(), run_dir=tmp_path / "plain", progress=False).train(callback=lambda *_: True)
    state = load_checkpoint(tmp_path / "plain")
    del state["trainer"]
    save_checkpoint(state, tmp_path / "plain" / "checkpoint.pt")
    assert PPO.resume(tmp_path / "plain", training_envs, progress=False).iteration == 1
    with pytest.raises(CheckpointError, match="does not record PPOPenalty's kl_target, initial_beta"):
        PPOPenalty.resume(tmp_path / "plain", training_envs, progress=False)


def _batch_envs(config, num_seeds):
    return make_seed_batch_env(config.env_id, num_seeds, config.num_envs, "torch")


BATCH_CONFIG = dict(env_id="CartPole-v1", num_envs=4, num_steps=64, num_minibatches=4, update_epochs=4,
                    total_timesteps=4 * 4 * 64, tensorboard=False, checkpoint_every=0)


@pytest.mark.parametrize("variant, settings, adapted", [
    (PPOPenalty, {"kl_target": 0.001, "initial_beta": 0.5}, "beta"),
    (AdaptiveClipPPO, {"kl_target": 0.001, "min_clip": 0.05, "max_clip": 0.4}, "clip_coef"),
])
def test_a_variant_seed_batch_is_each_seeds_own_variant_run(variant, settings, adapted):
    """Member s uses, measures and adapts its own β or ε: after each of three iterations its
    coefficient is its single run's, and its losses and weights agree within float32 rounding."""
    config = PPOConfig(**BATCH_CONFIG)
    seeds = [6, 1]
    batch = variant(config, _batch_envs(config, len(seeds)), seeds=seeds, progress=False, **settings)
    singles = [variant(config.replace(seed=seed), training_envs(config.replace(env_backend="torch")),
                       progress=False, **settings) for seed in seeds]
    initial = [getattr(member, adapted) for member in batch.members]
    for _ in range(3):
        rows = batch.train_iteration()
        for member, single in enumerate(singles):
            metrics = single.train_iteration()
            assert rows[member][adapted] == metrics[adapted]  # the value the update used
            assert getattr(batch.members[member], adapted) == getattr(single, adapted)  # and where the rule moved it
            for name in ("policy_loss", "kl_after_update", "clip_fraction"):
                assert rows[member][name] == pytest.approx(metrics[name], rel=1e-3, abs=1e-6), (member, name)
    assert [getattr(member, adapted) for member in batch.members] != initial  # the rule moved the coefficients
    for member, single in enumerate(singles):
        assert float((batch.optimizer.flat_params[member] - single.optimizer.flat_params).abs().max()) < 1e-4


@pytest.mark.parametrize("variant, settings, adapted", [
    (PPOPenalty, {"kl_target": 0.002, "initial_beta": 2.0}, "beta"),
    (AdaptiveClipPPO, {"kl_target": 0.002, "min_clip": 0.05, "max_clip": 0.4}, "clip_coef"),
])
def test_a_variant_seed_batch_resumes_bit_for_bit_and_its_members_resume_alone(tmp_path, variant, settings, adapted):
    config = PPOConfig(**BATCH_CONFIG)
    seeds = [3, 8]
    whole = variant(config, _batch_envs(config, 2), seeds=seeds, run_dirs=[tmp_path / "whole" / str(s) for s in seeds],
                    progress=False, **settings)
    whole.train()
    folders = [tmp_path / "parts" / str(seed) for seed in seeds]
    variant(config, _batch_envs(config, 2), seeds=seeds, run_dirs=folders, progress=False, **settings).train(
        lambda batch, metrics: batch.iteration == 2)
    resumed = variant.resume(folders, _batch_envs, progress=False)
    assert resumed.iteration == 2 and {name: getattr(resumed, name) for name in settings} == settings
    resumed.train()
    assert torch.equal(resumed.optimizer.flat_params, whole.optimizer.flat_params)
    assert [getattr(m, adapted) for m in resumed.members] == [getattr(m, adapted) for m in whole.members]
    alone = variant.resume(folders[1], lambda member_config: training_envs(member_config.replace(
        env_backend="torch")), progress=False)  # a member's folder is its variant run's
    assert type(alone) is variant and alone.iteration == 4
    assert getattr(alone, adapted) == getattr(resumed.members[1], adapted)
    assert json.loads((folders[1] / "config.json").read_text())["trainer"]["class"] == variant.__name__


def test_rollout_kl_reads_the_policy_under_the_masks_the_actions_were_drawn_with():
    """Before the update π_θ = π_old, so the rollout's KL is 0 when the masks are applied; without
    them a near-uniform policy over 3 valid actions of 16 would read log(16/3) apart."""
    from envs.toy_masked import MaskedChoiceVecEnv

    config = PPOConfig(env_id="MaskedChoice", num_envs=8, num_steps=32, num_minibatches=4, tensorboard=False,
                       total_timesteps=8 * 32 * 2)
    trainer = PPOPenalty(config, MaskedChoiceVecEnv(8), progress=False)
    trainer.collect_rollout()
    assert abs(trainer.rollout_kl(trainer.update_samples(*trainer.compute_advantages()))) < 1e-6
