"""An algorithm is written once, for one run: a batch of seeds is derived from the class, a user's subclass
included, and what a batch cannot honour it refuses in one line (ppo.trainers.seed_batch)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from envs.factory import make_seed_batch_env, make_vec_env
from experiments.commands.presets import build_config
from ppo.algorithm.losses import clipped_surrogate_loss
from ppo.config import ConfigError
from ppo.trainers.ppo import PPO
from ppo.trainers.seed_batch import SeedBatch
from ppo.trainers.settings import Setting

CONFIG = dict(env_id="CartPole-v1", num_envs=4, num_steps=64, total_timesteps=3 * 256, tensorboard=False,
              checkpoint_every=0)
SEEDS = [3, 1]


def _config(**overrides):
    return build_config({**CONFIG, **overrides}, "auto")


def _batch(trainer, config, **settings):
    return trainer(config, make_seed_batch_env(config.env_id, len(SEEDS), config.num_envs, "torch"), seeds=SEEDS,
                   progress=False, **settings)


def _single(trainer, config, seed, **settings):
    return trainer(config.replace(seed=seed), make_vec_env(config.env_id, config.num_envs, "torch"), progress=False,
                   **settings)


class HalvedAdvantages(PPO):
    """A user's variant: the clipped surrogate on Â / 2 (a planted change of the policy loss)."""

    def policy_loss(self, new_log_probs, old_log_probs, advantages):
        return clipped_surrogate_loss(new_log_probs, old_log_probs, advantages / 2, self.clip_coef)


def test_a_users_override_of_the_policy_loss_changes_a_batch_as_it_changes_one_run():
    """Member s of a batch of HalvedAdvantages is HalvedAdvantages with seed s (within float32 rounding,
    its policy loss half PPO's on the same θ), and not PPO with seed s: the override is honoured."""
    config = _config()
    batch = _batch(HalvedAdvantages, config)
    assert isinstance(batch, HalvedAdvantages) and isinstance(batch, SeedBatch)
    rows = [batch.train_iteration() for _ in range(3)]
    for member, seed in enumerate(SEEDS):
        own, plain = _single(HalvedAdvantages, config, seed), _single(PPO, config, seed)
        for iteration in range(3):
            mine, theirs = own.train_iteration(), plain.train_iteration()
            assert rows[iteration][member]["policy_loss"] == pytest.approx(mine["policy_loss"], rel=1e-4, abs=1e-7)
            if iteration == 0:  # the same θ and rollout: the loss of the first minibatch is half
                assert mine["policy_loss"] != pytest.approx(theirs["policy_loss"], rel=1e-3)
        assert float((batch.optimizer.flat_params[member] - own.optimizer.flat_params).abs().max()) < 1e-4
        assert float((batch.optimizer.flat_params[member] - plain.optimizer.flat_params).abs().max()) > 1e-3


class EntropyBonusDecay(PPO):
    """A user's variant with a setting of its own and a rule after each update: the entropy
    coefficient of the loss halves after each update (a number each run adapts)."""

    settings = {"initial_ent": Setting(0.05, "c_e of the first update")}
    adapted = ("entropy_coef",)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.entropy_coef = self.initial_ent

    def policy_loss(self, new_log_probs, old_log_probs, advantages):
        return super().policy_loss(new_log_probs, old_log_probs, advantages) - self.entropy_coef * (-new_log_probs).mean()

    def after_update(self, samples):
        metrics = super().after_update(samples)
        self.entropy_coef = self.entropy_coef / 2
        return metrics


def test_a_users_setting_rule_and_adapted_number_reach_every_member():
    config = _config()
    batch = _batch(EntropyBonusDecay, config, initial_ent=0.08)
    rows = [batch.train_iteration() for _ in range(3)]
    assert [row[0]["entropy_coef"] for row in rows] == [0.08, 0.04, 0.02]
    own = _single(EntropyBonusDecay, config, SEEDS[1], initial_ent=0.08)
    for iteration in range(3):
        assert rows[iteration][1]["policy_loss"] == pytest.approx(own.train_iteration()["policy_loss"], rel=1e-4)
    assert batch.member(1).state_dict()["adapted"] == {"entropy_coef": 0.01}


class OwnUpdate(PPO):
    def update(self, advantages, returns):
        return super().update(advantages, returns)


class PerSeedState(PPO):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.noise_scale = float(self.config.seed)  # differs per run, and the loss would read one value


class UndeclaredRule(PPO):
    def after_update(self, samples):
        metrics = super().after_update(samples)
        self.bonus = float(samples["returns"].mean())  # a number each run changes, not named in `adapted`
        return metrics


def test_what_a_batch_cannot_honour_is_refused_in_one_line():
    config = _config()
    with pytest.raises(ConfigError, match="OwnUpdate overrides update, which a seed batch runs its own way"):
        _batch(OwnUpdate, config)
    with pytest.raises(ConfigError, match=r"PerSeedState gives seed 1 its own self.noise_scale .*adapted"):
        _batch(PerSeedState, config)
    batch = _batch(UndeclaredRule, config)
    with pytest.raises(ConfigError, match=r"UndeclaredRule.after_update sets self.bonus differently for each seed"):
        batch.train_iteration()
    with pytest.raises(ConfigError, match="run_dirs are the folders of a seed batch's members"):
        PPO(config, make_vec_env(config.env_id, config.num_envs, "torch"), run_dirs=["a"])
    envs = make_seed_batch_env(config.env_id, 2, config.num_envs, "torch")
    with pytest.raises(ConfigError, match=r"seeds = \[1, 1\] names a seed twice"):
        PPO(config, envs, seeds=[1, 1])
    with pytest.raises(ConfigError, match="run_dirs name one folder twice"):
        PPO(config, envs, seeds=[1, 2], run_dirs=["same", "same"])
    with pytest.raises(ConfigError, match="the envs have 8 copies but 3 seeds × num_envs = 4 need 12"):
        PPO(config, envs, seeds=[1, 2, 3])


def test_one_seed_in_a_batch_is_its_single_run_within_rounding_and_its_checkpoint_is_the_runs():
    config = _config()
    batch = _batch(PPO, config)
    batch.train_iteration()
    single = _single(PPO, config, SEEDS[0])
    single.train_iteration()
    member, own = batch.member(0).state_dict(), single.state_dict()
    assert set(member) == set(own) and member["trainer"] == own["trainer"] == {"class": "PPO"}
    assert torch.equal(member["torch_rng"], own["torch_rng"]) and torch.equal(member["shuffle_rng"], own["shuffle_rng"])
    for name, tensor in own["model"].items():
        assert torch.allclose(member["model"][name], tensor, atol=1e-5), name


EXTENDING = Path(__file__).resolve().parents[1] / "docs" / "book" / "guide" / "extending.md"


def test_the_extending_pages_example_trains_a_users_variant_for_one_seed_and_a_batch(tmp_path):
    (example,) = re.findall(r"```python\n(.*?)```", EXTENDING.read_text(), flags=re.DOTALL)
    result = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": str(EXTENDING.parents[3])}, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "one seed: last 20 episodes" in result.stdout
    assert "three seeds as one batch: [" in result.stdout
    assert "seed 1's run in the batch: ClipHigherPPO 0.3" in result.stdout


def test_the_extending_page_shows_the_refusals_as_they_are_printed():
    page = " ".join(EXTENDING.read_text().split())
    config = _config()
    for trainer in (OwnUpdate, PerSeedState):
        with pytest.raises(ConfigError) as refused:
            _batch(trainer, config)
        assert str(refused.value) in page
    with pytest.raises(ConfigError) as refused:
        _batch(UndeclaredRule, config).train_iteration()
    assert str(refused.value) in page
