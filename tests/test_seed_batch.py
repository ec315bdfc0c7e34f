"""A batch of seeds (ppo.trainers.seed_batch) against the single runs it stands for."""

from __future__ import annotations

import json
import math
import statistics

import numpy as np
import pytest
import torch
from _tiny_lm import one_torch_thread  # noqa: F401 (an autouse fixture: one torch thread per test)

from envs.classic import make_torch_vec_env
from envs.factory import make_seed_batch_env, make_vec_env
from experiments.commands.presets import build_config
from ppo.config import ConfigError
from ppo.parallel.optim import FlatAdam, StackedAdam
from ppo.runs.checkpoint import CheckpointError
from ppo.runs.logger import read_metrics
from ppo.trainers.seed_batch import DIVERGED_NAME, SeedBatch, parse_seeds
from ppo.trainers.ppo import PPO

COMPARED = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "grad_norm",
            "episode_return_mean", "gradient_steps", "early_stopped")


def _config(env_id="CartPole-v1", **overrides):
    return build_config({"env_id": env_id, "tensorboard": False, "checkpoint_every": 0, **overrides}, "auto")


def _batch(config, seeds, run_dirs=None):
    envs = make_seed_batch_env(config.env_id, len(seeds), config.num_envs, "torch")
    return PPO(config, envs, seeds=seeds, run_dirs=run_dirs, progress=False)


def _single(config, seed, run_dir=None):
    return PPO(config.replace(seed=seed), make_vec_env(config.env_id, config.num_envs, "torch"), run_dir=run_dir,
               progress=False)


@pytest.mark.parametrize("env_id, overrides", [
    ("CartPole-v1", {"total_timesteps": 8192}),
    # Gaussian actions, observation normalisation and reward scaling, value clipping, whitening
    ("Pendulum-v1", {"total_timesteps": 4096, "num_envs": 8, "num_steps": 64, "value_clip_coef": 0.2,
                     "norm_adv": True}),
    # image observations read by the MinAtar CNN: the stack maps each member's network (VmappedActorCritic)
    ("MinAtar/Breakout-v1", {"total_timesteps": 1024, "num_envs": 4, "num_steps": 64}),
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


# One iteration of a member and of its own run, from the same θ, m, v, differ by how batched
# and plain matrix products round: measured ≤ 1.2e-7 over these 12 iterations (one float32
# ulp of a weight near 1; the largest weights are ~1.2). 1e-5 leaves room for another CPU's
# kernels and stays far below what one different permutation does (6e-3 in the iteration
# after a member drew one permutation too many).
ONE_ITERATION_TOLERANCE = 1e-5


def test_every_member_draws_decides_and_steps_as_its_own_run_for_many_iterations():
    """12 iterations with target_kl active (members stop after 3 to 24 of their 24 steps):
    per iteration and member, the same random draws (the shuffle and action generators end in
    the single run's states), the same early-stop decision and step count, and θ equal to
    rounding. Each iteration starts the single run from the member's θ, m and v: rounding
    grows over many iterations in this chaotic system (the guide's seed-batch-rounding block), and what is tested here is
    that each iteration does what the single run's does; the random streams are never
    copied over, so a member that draws more or less than its run is caught whenever it happens."""
    config = _config(total_timesteps=12 * 2048, target_kl=0.02)
    seeds = [1, 2, 3]
    batch = _batch(config, seeds)
    trace = []
    for _ in range(config.num_iterations):
        rows = batch.train_iteration()
        trace.append([(rows[member], batch.optimizer.flat_params[member].clone(),
                       batch.members[member].optimizer.state_dict(), batch.shuffle_generator[member].get_state(),
                       batch.action_generator[member].get_state()) for member in range(len(seeds))])
    decisions = set()
    for member, seed in enumerate(seeds):
        single = _single(config, seed)
        for iteration, members in enumerate(trace, start=1):
            row, parameters, optimizer_state, shuffle_state, action_state = members[member]
            metrics = single.train_iteration()
            where = f"seed {seed}, iteration {iteration}"
            assert torch.equal(single.shuffle_generator.get_state(), shuffle_state), where
            assert torch.equal(single.action_generator.get_state(), action_state), where
            assert (row["early_stopped"], row["gradient_steps"]) == (metrics["early_stopped"],
                                                                   metrics["gradient_steps"]), where
            difference = float((single.optimizer.flat_params - parameters).abs().max())
            assert difference < ONE_ITERATION_TOLERANCE, (where, difference)
            single.optimizer.load_state_dict(optimizer_state)
            single.optimizer.flat_params.copy_(parameters)
            decisions.add((metrics["early_stopped"], metrics["gradient_steps"]))
    assert len({steps for stopped, steps in decisions if stopped}) > 2, \
        "early stopping must end updates at several different steps for this test to mean anything"


def test_stacked_adam_is_one_flat_adam_per_member_and_skips_inactive_ones():
    torch.manual_seed(0)
    rows = [torch.randn(5) for _ in range(3)]
    singles = [FlatAdam([torch.nn.Parameter(row.clone())], lr=0.1) for row in rows]
    members = [FlatAdam([torch.nn.Parameter(row.clone())], lr=0.1) for row in rows]
    optimizer = StackedAdam(members)
    stacked = optimizer.parameters()[0]  # (3, 5), row s: member s's parameter
    assert torch.equal(stacked.detach(), torch.stack(rows))
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
            # each member's own FlatAdam reads its row: its network's parameters and its checkpoint
            assert torch.equal(members[member].parameters[0].detach(), optimizer.flat_params[member])
            assert torch.equal(members[member].state_dict()["exp_avg"], optimizer.exp_avg[member])
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


def _batch_envs(config, num_seeds):
    return make_seed_batch_env(config.env_id, num_seeds, config.num_envs, "torch")


@pytest.mark.parametrize("env_id, overrides", [
    ("CartPole-v1", {"total_timesteps": 5 * 4 * 64, "num_envs": 4, "num_steps": 64}),
    # observation and reward normalisation, Gaussian actions, an episode cut by the time limit mid-run
    ("Pendulum-v1", {"total_timesteps": 5 * 4 * 64, "num_envs": 4, "num_steps": 64, "normalize_obs": True,
                     "normalize_reward": True}),
    ("MinAtar/Breakout-v1", {"total_timesteps": 5 * 4 * 64, "num_envs": 4, "num_steps": 64}),  # CNN members
])
def test_a_seed_batch_resumes_bit_for_bit(tmp_path, env_id, overrides):
    config = _config(env_id, **overrides)
    seeds = [4, 2, 9]
    whole = _batch(config, seeds, [tmp_path / "whole" / str(seed) for seed in seeds])
    whole.train()
    folders = [tmp_path / "parts" / str(seed) for seed in seeds]
    _batch(config, seeds, folders).train(lambda batch, metrics: batch.iteration == 2)
    resumed = SeedBatch.resume(folders, _batch_envs, progress=False)  # the class the checkpoints name
    assert resumed.iteration == 2 and resumed.seeds == seeds and isinstance(resumed, PPO)
    resumed.train()
    assert torch.equal(resumed.optimizer.flat_params, whole.optimizer.flat_params)
    assert torch.equal(resumed.optimizer.exp_avg_sq, whole.optimizer.exp_avg_sq)
    for seed in seeds:  # every iteration logged once, and as the uninterrupted batch logged it
        parts, uninterrupted = (read_metrics(root / str(seed) / "metrics.csv") for root in (tmp_path / "parts", tmp_path / "whole"))
        assert [row["iteration"] for row in parts] == [1, 2, 3, 4, 5]
        for name in COMPARED:
            assert [row[name] for row in parts] == [row[name] for row in uninterrupted], (seed, name)


def test_a_seed_batch_refuses_members_saved_apart(tmp_path):
    config = _config(total_timesteps=4 * 4 * 64, num_envs=4, num_steps=64)
    folders = [tmp_path / "1", tmp_path / "2"]
    _batch(config, [1, 2], folders).train(lambda batch, metrics: batch.iteration == 2)
    for name in ("checkpoint.pt", "metrics.csv"):  # seed 2 again, alone, in its folder made empty
        (folders[1] / name).unlink()
    _single(config, 2, folders[1]).train(lambda trainer, metrics: trainer.iteration == 1)
    with pytest.raises(CheckpointError, match=r"stands at iteration 1, .* at 2: resume each alone"):
        PPO.resume(folders, _batch_envs, progress=False)
    other = _config(total_timesteps=4 * 4 * 64, num_envs=4, num_steps=64, learning_rate=1e-3)
    _batch(other, [3], [tmp_path / "3"]).train(lambda batch, metrics: batch.iteration == 2)
    with pytest.raises(CheckpointError, match="differs from .* in learning_rate"):
        PPO.resume([folders[0], tmp_path / "3"], _batch_envs, progress=False)


@pytest.mark.slow  # full tier: the default tier checks every member step by step
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


def test_a_diverging_member_stops_alone_and_the_others_go_on_bit_for_bit(tmp_path):
    """Seed 2's loss turns NaN in iteration 3 of 5: seed 2 stops with its θ of iteration 2, its
    folder keeps the checkpoint and metrics of iteration 2 and says it diverged; seeds 1 and 3
    end exactly where a batch without the fault ends (the same arithmetic: torch.equal)."""
    config = _config(total_timesteps=5 * 2048, checkpoint_every=1)
    seeds = [1, 2, 3]
    reference = _batch(config, seeds)
    after_two = []
    reference.train(callback=lambda batch, metrics: after_two.append(batch.optimizer.flat_params.clone())
                    if batch.iteration == 2 else None)
    folders = [tmp_path / f"seed{seed}" for seed in seeds]
    faulty = _batch(config, seeds, folders)
    correct_loss = faulty.member_losses

    def loss_with_a_fault(minibatch):
        result = correct_loss(minibatch)
        if faulty.iteration == 2:  # during the third iteration
            result.loss = result.loss * torch.tensor([1.0, math.nan, 1.0])
        return result

    faulty.member_losses = loss_with_a_fault
    faulty.train()
    assert faulty.iteration == 5 and list(faulty.diverged) == [1]
    assert faulty.diverged[1] == {"seed": 2, "iteration": 3, "quantity": "policy_loss", "value": "nan"}
    for member in (0, 2):
        assert torch.equal(faulty.optimizer.flat_params[member], reference.optimizer.flat_params[member]), member
    assert torch.equal(faulty.optimizer.flat_params[1], after_two[0][1])
    assert json.loads((folders[1] / DIVERGED_NAME).read_text())["iteration"] == 3
    for folder, iterations in zip(folders, (5, 2, 5)):
        assert torch.load(folder / "checkpoint.pt", weights_only=True)["iteration"] == iterations
        assert len(read_metrics(folder / "metrics.csv")) == iterations
    assert not (folders[0] / DIVERGED_NAME).exists()
    assert math.isnan(faulty.recent_returns_by_member()[1])


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
    from experiments.commands.train import main

    assert main(["--seeds", "101-116", "--run-dir", str(tmp_path), "--no-progress", "--no-tensorboard"]) == 0
    scores = [json.loads((folder / "eval.json").read_text())["mean_return"] for folder in tmp_path.iterdir()
              if folder.name.startswith("CartPole")]
    assert len(scores) == 16 and sum(score >= 475 for score in scores) >= 15


def _member_networks(members):
    from ppo.models.member_networks import MemberNetworks

    optimizer = StackedAdam([FlatAdam(member.parameters(), lr=1e-3) for member in members])
    names = [name for name, _ in members[0].named_parameters()]
    return MemberNetworks(members, dict(zip(names, optimizer.parameters())))


def test_member_networks_compute_each_members_own_network_on_its_block_of_copies():
    """An MLP on (3, 2) uint8 observations (flattened, read as numbers) and a shared trunk: the stack of
    two members called on 2·5 copies gives, in each block, what that member's own network gives, and
    an action drawn with each member's generator is the one its network draws with that generator."""
    import gymnasium as gym

    from ppo.models.networks import ActorCritic

    space, actions = gym.spaces.Box(0, 255, (3, 2), dtype=np.uint8), gym.spaces.Discrete(4)
    for shared in (False, True):
        members = []
        for seed in (1, 2):
            torch.manual_seed(seed)
            members.append(ActorCritic(space, actions, encoder="mlp", shared=shared))
        stack = _member_networks(members)
        obs = torch.randint(0, 256, (10, 3, 2), dtype=torch.uint8)
        chosen = torch.randint(0, 4, (10,))
        values = stack.value(obs)
        log_probs, entropy, _ = stack.evaluate_actions(obs, chosen)
        drawn = stack.act(obs, None, [torch.Generator().manual_seed(7), torch.Generator().manual_seed(8)])
        for member, network in enumerate(members):
            block = slice(5 * member, 5 * member + 5)
            assert torch.allclose(values[block], network.value(obs[block]), atol=1e-6)
            own_log_probs, own_entropy, _ = network.evaluate_actions(obs[block], chosen[block])
            assert torch.allclose(log_probs[block], own_log_probs, atol=1e-6)
            assert torch.allclose(entropy[block], own_entropy, atol=1e-6)
            own = network.act(obs[block], None, torch.Generator().manual_seed(7 + member))
            assert torch.equal(drawn[0][block], own[0])
            assert torch.allclose(drawn[1][block], own[1], atol=1e-6)
        with pytest.raises(ValueError, match="called on its S·N copies"):
            stack.value(obs[:7])


def test_a_seed_batch_refuses_to_resume_a_member_that_diverged_and_what_it_does_not_have(tmp_path):
    config = _config(total_timesteps=4 * 4 * 64, num_envs=4, num_steps=64)
    folders = [tmp_path / "1", tmp_path / "2"]
    batch = _batch(config, [1, 2], folders)
    batch.train(lambda batch, metrics: batch.iteration == 1)
    (folders[1] / DIVERGED_NAME).write_text("{}")
    with pytest.raises(CheckpointError, match="diverged .diverged.json.: resume the other runs"):
        PPO.resume(folders, _batch_envs, progress=False)
    with pytest.raises(TypeError, match="one checkpoint per member"):
        batch.state_dict()
    with pytest.raises(TypeError, match="recent_returns_by_member"):
        batch.recent_return()


def test_member_networks_run_an_mlps_own_code_on_the_stacked_weights_and_vmap_what_does_not_broadcast():
    """The first call of each method runs both ways: an MLP's code broadcasts over the members (direct: the
    stacked weights in place, one baddbmm a layer); a network that centres its inputs over the batch
    (a mean over dim 0, which the member axis would join) does not, and is mapped by vmap."""
    import gymnasium as gym

    from ppo.models.networks import ActorCritic

    class CentredInputs(ActorCritic):
        def value(self, obs):
            return super().value(obs - obs.mean(dim=0))

    space, actions = gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2)
    for network_class, direct in ((ActorCritic, True), (CentredInputs, False)):
        members = []
        for seed in (1, 2, 3):
            torch.manual_seed(seed)
            members.append(network_class(space, actions))
        stack = _member_networks(members)
        obs = torch.randn(15, 4)
        values = stack.value(obs)
        assert stack._direct[("value", (False,), ())] is direct
        for member, network in enumerate(members):
            block = slice(5 * member, 5 * member + 5)
            assert torch.allclose(values[block], network.value(obs[block]), atol=1e-6), (network_class, member)
