"""Dual-clip PPO (Ye et al. 2020): its objective by hand, its gradient, its trainer, and that it learns."""

import json
import math

import pytest
import torch

from envs.factory import gymnasium_env_factory
from experiments.commands import train
from experiments.commands.presets import build_config
from experiments.commands.train import training_envs
from ppo.algorithm.losses import clipped_surrogate_loss, dual_clip_fraction, dual_clip_surrogate_loss
from ppo.config import ConfigError
from ppo.runs.evaluation import Policy, evaluate_policy
from ppo.trainers.variants import DualClipPPO

# π_old(a) = 0.5 for all four samples; r = 1.5, 4, 2, 0.5; Â = +1, −1, −1, −2; ε = 0.2, c = 3:
#   1: Â > 0, min(1.5, 1.2) = 1.2                    (clipped above; no gradient)
#   2: Â < 0, min(−4, −1.2) = −4, max(−4, −3) = −3    (the dual clip holds it at c·Â; no gradient)
#   3: Â < 0, min(−2, −1.2) = −2, max(−2, −3) = −2    (r < c: PPO-Clip's r·Â, gradient r·Â = −2)
#   4: Â < 0, min(−1, −1.6) = −1.6                   (clipped below; no gradient)
# objective mean (1.2 − 3 − 2 − 1.6) / 4 = −1.35, so L = 1.35; PPO-Clip's L = (−1.2 + 4 + 2 + 1.6) / 4 = 1.6
RATIOS = torch.tensor([1.5, 4.0, 2.0, 0.5])
ADVANTAGES = torch.tensor([1.0, -1.0, -1.0, -2.0])
OLD = torch.log(torch.full((4,), 0.5))


def _new_log_probs() -> torch.Tensor:
    return (OLD + torch.log(RATIOS)).clone().requires_grad_()


def test_dual_clip_objective_hand_worked_four_samples():
    loss = dual_clip_surrogate_loss(_new_log_probs(), OLD, ADVANTAGES, clip_coef=0.2, dual_clip=3.0)
    assert loss.item() == pytest.approx(1.35, abs=1e-6)
    assert clipped_surrogate_loss(_new_log_probs(), OLD, ADVANTAGES, 0.2).item() == pytest.approx(1.6, abs=1e-6)
    assert dual_clip_fraction(_new_log_probs().detach(), OLD, ADVANTAGES, 3.0).item() == pytest.approx(0.25)


def test_dual_clip_gradient_leaves_only_the_samples_inside_both_clips():
    """∂L/∂log π_θ = −r·Â / n where r·Â is the active term, else 0: only sample 3 moves. PPO-Clip also
    pushes sample 2 (r = 4 > c, Â < 0) with −r·Â / n = 1; the dual clip takes that push away."""
    new = _new_log_probs()
    dual_clip_surrogate_loss(new, OLD, ADVANTAGES, clip_coef=0.2, dual_clip=3.0).backward()
    torch.testing.assert_close(new.grad, torch.tensor([0.0, 0.0, 0.5, 0.0]))
    plain = _new_log_probs()
    clipped_surrogate_loss(plain, OLD, ADVANTAGES, 0.2).backward()
    torch.testing.assert_close(plain.grad, torch.tensor([0.0, 1.0, 0.5, 0.0]))


def test_dual_clip_equals_ppo_clip_where_no_ratio_runs_away():
    """Below r = c (or for Â ≥ 0) the bound never binds: the loss and its gradient are PPO-Clip's."""
    torch.manual_seed(0)
    old = torch.randn(64)
    new = (old + 0.3 * torch.randn(64)).requires_grad_()  # ratios e^{±0.3·N(0,1)}, all below 3 here
    advantages = torch.randn(64)
    assert float(torch.exp(new.detach() - old).max()) < 3.0
    dual = dual_clip_surrogate_loss(new, old, advantages, 0.2, 3.0)
    (dual_gradient,) = torch.autograd.grad(dual, new)
    plain = clipped_surrogate_loss(new, old, advantages, 0.2)
    (plain_gradient,) = torch.autograd.grad(plain, new)
    assert dual.item() == plain.item()
    assert torch.equal(dual_gradient, plain_gradient)


def test_dual_clip_refuses_a_bound_at_or_below_one():
    config = build_config({"env_id": "CartPole-v1", "num_envs": 4, "num_steps": 8, "tensorboard": False}, "auto")
    for value in (1.0, 0.5, math.inf, math.nan):
        with pytest.raises(ConfigError, match=f"dual_clip = {value} must be a finite number > 1"):
            DualClipPPO(config, training_envs(config), progress=False, dual_clip=value)


def test_dual_clip_trains_from_the_command_line_with_its_setting_recorded(tmp_path):
    run_dir = tmp_path / "run"
    assert train.main(["--env-id", "CartPole-v1", "--num-envs", "4", "--num-steps", "32", "--total-timesteps", "256",
                       "--algorithm", "dual-clip", "--dual-clip", "1.7", "--run-dir", str(run_dir), "--no-progress",
                       "--no-tensorboard", "--eval-episodes", "0"]) == 0
    assert json.loads((run_dir / "config.json").read_text())["trainer"] == {"class": "DualClipPPO", "dual_clip": 1.7}
    header = (run_dir / "metrics.csv").read_text().splitlines()[0].split(",")
    assert "dual_clip_fraction" in header


def test_dual_clip_learns_cartpole():
    """The CartPole preset with dual-clip PPO (c = 3) on seed 1: solved as PPO-Clip's preset solves it."""
    config = build_config({"env_id": "CartPole-v1", "seed": 1, "tensorboard": False}, "auto")
    trainer = DualClipPPO(config, training_envs(config), progress=False)
    metrics = trainer.train()
    returns = evaluate_policy(Policy(trainer.model, config, trainer.obs_normalizer),
                              gymnasium_env_factory(config.env_id), 100)
    assert metrics["episode_return_recent"] >= 195
    assert returns.mean() >= 475
