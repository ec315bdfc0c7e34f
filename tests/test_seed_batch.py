"""A batch of seeds (ppo.seed_batch) against the single runs it stands for."""

from __future__ import annotations

import math
import statistics

import pytest
import torch
from _tiny_lm import one_torch_thread  # noqa: F401 (an autouse fixture: one torch thread per test)

from envs.classic import make_torch_vec_env
from envs.factory import make_seed_batch_env, make_vec_env
from experiments.presets import build_config
from ppo.config import ConfigError
from ppo.optim import FlatAdam, StackedAdam
from ppo.seed_batch import SeedBatchPPO, parse_seeds
from ppo.trainer import PPO

COMPARED = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm",
            "episode_return_mean", "gradient_steps", "early_stopped")


def _config(env_id="CartPole-v1", **overrides):
    return build_config({"env_id": env_id, "tensorboard": False, "checkpoint_every": 0, **overrides}, "auto")


def _batch(config, seeds, run_dirs=None):
    envs = make_seed_batch_env(config.env_id, len(seeds), config.num_envs, "torch")
    return SeedBatchPPO(config, seeds, envs, run_dirs=run_dirs, progress=False)


def _single(config, seed, run_dir=None):
    return PPO(config.replace(seed=seed), make_vec_env(config.env_id, config.num_envs, "torch"), run_dir=run_dir,
               progress=False)


@pytest.mark.parametrize("env_id, overrides", [
    ("CartPole-v1", {"total_timesteps": 8192}),
    # Gaussian actions, observation normalisation and reward scaling, value clipping, whitening
    ("Pendulum-v1", {"total_timesteps": 4096, "num_envs": 8, "num_steps": 64, "value_clip_coef": 0.2,
                     "norm_adv": True}),
])
def test_first_iteration_equals_each_seeds_own_run(env_id, overrides):
    config = _config(env_id, **overrides)
    seeds = [3, 1, 7]
    batch = _batch(config, seeds)
    batch_metrics = batch.train_iteration()
    for member, seed in enumerate(seeds):
        single = _single(config, seed)
        metrics = single.train_iteration()
        for name in COMPARED:
            assert batch_metrics[member][name] == pytest.approx(metrics[name], rel=1e-5, abs=1e-6, nan_ok=True), \
                (seed, name)
        difference = (batch.optimizer.flat_params[member] - single.optimizer.flat_params).abs().max()
        assert float(difference) < 1e-5, seed
        assert batch.optimizer.steps[member] == single.optimizer.steps


def test_target_kl_stops_each_member_on_its_own():
    config = _config(total_timesteps=4096, target_kl=0.02)  # seeds 1-4 stop after 4, 24, 24, 24 steps
    seeds = [1, 2, 3, 4]
    batch_metrics = _batch(config, seeds).train_iteration()
    steps = []
    for member, seed in enumerate(seeds):
        metrics = _single(config, seed).train_iteration()
        assert batch_metrics[member]["gradient_steps"] == metrics["gradient_steps"]
        assert batch_metrics[member]["early_stopped"] == metrics["early_stopped"]
        assert batch_metrics[member]["approx_kl"] == pytest.approx(metrics["approx_kl"], rel=1e-4)
        steps.append(metrics["gradient_steps"])
    assert len(set(steps)) > 1, "the members should stop at different steps for this test to mean anything"


def test_stacked_adam_is_one_flat_adam_per_member_and_skips_inactive_ones():
    torch.manual_seed(0)
    rows = [torch.randn(5, requires_grad=True) for _ in range(3)]
    singles = [FlatAdam([torch.nn.Parameter(row.detach().clone())], lr=0.1) for row in rows]
    stacked = torch.nn.Parameter(torch.stack([row.detach() for row in rows]))
    optimizer = StackedAdam([stacked], lr=0.1)
    for step, active in enumerate([None, [True, False, True], [False, True, True]]):
        gradients = torch.randn(3, 5) * 10
        optimizer.zero_grad()
        (stacked * gradients).sum().backward()
        norms = optimizer.clip_grad_norm(1.0)
        before = optimizer.flat_params.clone()
        optimizer.step(active)
        for member, single in enumerate(singles):
            if active is not None and not active[member]:
                assert torch.equal(optimizer.flat_params[member], before[member])
                continue
            single.zero_grad()
            single.flat_grads.copy_(gradients[member])
            assert float(single.clip_grad_norm(1.0)) == pytest.approx(float(norms[member]), rel=1e-6)
            single.step()
            assert torch.allclose(optimizer.flat_params[member], single.flat_params, atol=1e-7), (step, member)
    assert optimizer.steps == [single.steps for single in singles] == [2, 2, 3]


def test_seed_groups_draw_what_each_seed_draws_alone():
    grouped = make_torch_vec_env("CartPole-v1", 3 * 16, groups=3)
    alone = [make_torch_vec_env("CartPole-v1", 16) for _ in range(3)]
    seeds = [5, 9, 2]
    torch.testing.assert_close(grouped.reset(seed=seeds), torch.cat([env.reset(seed=seed)
                                                                     for env, seed in zip(alone, seeds)]))
    generator = torch.Generator().manual_seed(0)
    for _ in range(200):  # long enough for many episodes to end and restart
        actions = torch.randint(0, 2, (48,), generator=generator)
        result = grouped.step(actions)
        parts = [env.step(block) for env, block in zip(alone, actions.view(3, 16))]
        torch.testing.assert_close(result.obs, torch.cat([part.obs for part in parts]))
        assert torch.equal(result.terminated, torch.cat([part.terminated for part in parts]))
    for group, env in enumerate(alone):
        state = grouped.group_state_dict(group)
        assert torch.equal(state["generator"], env.generator.get_state())


def test_a_members_checkpoint_is_an_ordinary_run_that_resumes(tmp_path):
    config = _config(total_timesteps=6144, checkpoint_every=2)
    seeds = [4, 5]
    folders = [tmp_path / f"seed{seed}" for seed in seeds]
    batch = _batch(config, seeds, folders)
    batch.train(callback=lambda trainer, metrics: trainer.iteration == 2)  # stop after 2 of 3 iterations
    last = batch.train_iteration()  # what the batch does next (not saved)
    for member, folder in enumerate(folders):
        assert (folder / "config.json").is_file() and (folder / "metrics.csv").is_file()
        resumed = PPO.resume(folder, lambda c: make_vec_env(c.env_id, c.num_envs, "torch"), progress=False)
        assert resumed.config.seed == seeds[member] and resumed.iteration == 2
        metrics = resumed.train_iteration()
        for name in ("policy_loss", "value_loss", "approx_kl", "episode_return_mean"):
            assert metrics[name] == pytest.approx(last[member][name], rel=1e-4, abs=1e-6), name


def test_batched_and_separate_runs_learn_alike():
    """Over 6 seeds and a short budget, the batch and the separate runs reach the same mean
    return within three standard errors (trajectories part after a few iterations: float
    rounding grows in a chaotic system, so this compares distributions, not numbers)."""
    config = _config(total_timesteps=30_000)
    seeds = list(range(11, 17))
    batch = _batch(config, seeds)
    batch.train()
    batched = batch.recent_returns_by_member()
    separate = []
    for seed in seeds:
        single = _single(config, seed)
        single.train()
        separate.append(single.recent_return())
    spread = math.sqrt(statistics.variance(batched) / len(seeds) + statistics.variance(separate) / len(seeds))
    assert abs(statistics.mean(batched) - statistics.mean(separate)) < 3 * spread + 1.0
    assert statistics.mean(batched) > 100  # and both learn (random play: ~22)


@pytest.mark.parametrize("text, seeds", [("1-4", [1, 2, 3, 4]), ("1,3,5", [1, 3, 5]), ("0-2,9", [0, 1, 2, 9]),
                                         ("7", [7])])
def test_parse_seeds(text, seeds):
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize("text", ["4-1", "a", "1,1", "-3", "1-"])
def test_parse_seeds_refuses(text):
    with pytest.raises(ConfigError, match="seeds"):
        parse_seeds(text)


@pytest.mark.slow
def test_sixteen_batched_cartpole_seeds_solve_it(tmp_path):
    """`ppo-train --seeds 101-116` (seeds not tuned on): at least 15 of 16 runs evaluate ≥ 475
    over 100 greedy episodes."""
    import json

    from experiments.train import main

    assert main(["--seeds", "101-116", "--run-dir", str(tmp_path), "--no-progress", "--no-tensorboard"]) == 0
    scores = [json.loads((folder / "eval.json").read_text())["mean_return"] for folder in tmp_path.iterdir()
              if folder.name.startswith("CartPole")]
    assert len(scores) == 16 and sum(score >= 475 for score in scores) >= 15
