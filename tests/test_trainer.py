"""The PPO loop: ratio = 1 on the first minibatch, reproducibility, checkpoints, resuming."""


import pytest
import torch

from envs.factory import gymnasium_env_factory
from experiments.commands.train import training_envs
from ppo.runs.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from ppo.config import PPOConfig
from ppo.runs.evaluation import evaluate_policy, load_policy
from ppo.runs.logger import read_metrics
from ppo.trainers.ppo import PPO


def make_trainer(config: PPOConfig, **kwargs) -> PPO:
    return PPO(config, training_envs(config), **kwargs)

SMALL = dict(env_id="CartPole-v1", env_backend="gymnasium", num_envs=4, num_steps=64, total_timesteps=1024, tensorboard=False)


# How far the first minibatch's ratio may sit from 1 (before any step π_θ = π_old).
# The rollout scores N = 4 observations per call and the update 64 at once: the same
# weights and inputs, but a CPU's matmul kernels may split the two batch shapes
# differently and so round the hidden layers' 64-term dot products in another order.
# Each such rounding moves a log-prob by a float32 ulp or so, so |r − 1| is a few ulps
# of 1.0 (5.96e-8 = 2⁻²⁴, one float32 step below 1.0, was seen on a CPU with AVX-512).
# 32 ulps of 1.0 (3.8e-6) bounds that with room; a real mismatch (a stale log-prob, a row paired with another row's action)
# moves the ratio by 1e-3 or more.
RATIO_ONE_TOLERANCE = 32 * torch.finfo(torch.float32).eps


def test_first_minibatch_of_every_update_has_ratio_one_to_rounding():
    trainer = make_trainer(PPOConfig(**SMALL), progress=False)
    errors = []
    trainer.train(callback=lambda ppo, metrics: errors.append(metrics["first_minibatch_ratio_error"]))
    assert len(errors) == 4
    assert max(errors) <= RATIO_ONE_TOLERANCE


def test_same_seed_gives_identical_metrics_and_different_seed_differs():
    def run(seed):
        rows = []
        make_trainer(PPOConfig(**SMALL, seed=seed), progress=False).train(callback=lambda ppo, m: rows.append(
            {k: v for k, v in m.items() if k not in ("time_s", "steps_per_second")}))
        return rows

    first, second, other = run(3), run(3), run(4)
    assert first == second
    assert first != other


def test_truncation_flag_reaches_the_buffer():
    # Pendulum-v1 always truncates at 200 steps: with bootstrapping the buffer keeps the
    # truncation separate; with the classic mistake it becomes a termination.
    config = PPOConfig(env_id="Pendulum-v1", env_backend="gymnasium", num_envs=2, num_steps=200, num_minibatches=2, total_timesteps=400)
    trainer = make_trainer(config, progress=False)
    results = []
    step = trainer.envs.step
    trainer.envs.step = lambda actions: results.append(step(actions)) or results[-1]
    trainer.collect_rollout()
    assert trainer.buffer.truncated[-1].all() and not trainer.buffer.terminated.any()
    # the final observation kept for bootstrapping is not the reset observation that follows
    assert torch.equal(trainer.buffer.final_obs[-1], results[-1].final_obs)
    assert not torch.equal(trainer.buffer.final_obs[-1], trainer.next_obs)
    # and the value GAE bootstraps from is that observation's: V(s_T), not V of the reset one
    with torch.inference_mode():
        _, final_values = trainer.bootstrap_values()
        torch.testing.assert_close(final_values[-1], trainer.model.value(results[-1].final_obs))
        assert not torch.allclose(final_values[-1], trainer.model.value(trainer.next_obs))
    assert not final_values[:-1].any()  # no episode was cut before the last step
    trainer = make_trainer(config.replace(bootstrap_truncated=False), progress=False)
    trainer.collect_rollout()
    assert trainer.buffer.terminated[-1].all() and not trainer.buffer.truncated.any()


def test_continuous_actions_are_stored_unclipped_and_sent_clipped():
    config = PPOConfig(env_id="Pendulum-v1", env_backend="gymnasium", num_envs=2, num_steps=64, num_minibatches=2,
                       total_timesteps=128, log_std_init=1.5)
    trainer = make_trainer(config, progress=False)
    trainer.collect_rollout()
    actions = trainer.buffer.actions
    assert actions.abs().max() > 2.0  # σ = e^1.5 samples leave [−2, 2]
    sent = trainer.env_action(actions)
    assert sent.abs().max() <= 2.0
    log_probs, _, _ = trainer.model.evaluate_actions(trainer.buffer.obs.reshape(-1, 3), actions.reshape(-1, 1))
    torch.testing.assert_close(log_probs, trainer.buffer.log_probs.reshape(-1))


def test_checkpoint_round_trip_and_resume(tmp_path):
    config = PPOConfig(**SMALL, checkpoint_every=2)
    trainer = make_trainer(config, run_dir=tmp_path, progress=False)
    trainer.train()
    state = load_checkpoint(tmp_path / "checkpoint.pt")
    assert state["global_step"] == 1024 and state["iteration"] == 4
    policy = load_policy(tmp_path)
    for name, tensor in trainer.model.state_dict().items():
        assert torch.equal(policy.model.state_dict()[name], tensor)
    assert len(evaluate_policy(policy, gymnasium_env_factory("CartPole-v1"), episodes=3)) == 3

    resumed = PPO.resume(tmp_path, training_envs, total_timesteps=2048, progress=False)
    assert resumed.global_step == 1024
    resumed.train()
    rows = read_metrics(tmp_path / "metrics.csv")
    assert [row["iteration"] for row in rows] == [1, 2, 3, 4, 5, 6, 7, 8]


def test_atomic_save_keeps_previous_checkpoint_when_the_write_fails(tmp_path, monkeypatch):
    path = tmp_path / "checkpoint.pt"
    save_checkpoint({"value": torch.tensor(1.0)}, path)

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", crash)
    with pytest.raises(OSError):
        save_checkpoint({"value": torch.tensor(2.0)}, path)
    assert load_checkpoint(path)["value"].item() == 1.0
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


def test_checkpoint_refuses_pickled_code_and_foreign_files(tmp_path):
    import pickle

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    path = tmp_path / "evil.pt"
    torch.save({"format": 1, "x": Evil()}, path)
    with pytest.raises(CheckpointError, match="corrupt"):
        load_checkpoint(path)
    torch.save({"something": 1}, tmp_path / "other.pt")
    with pytest.raises(CheckpointError, match="not a checkpoint of this project"):
        load_checkpoint(tmp_path / "other.pt")
    assert pickle  # the pickle module is what weights_only=True refuses to run


def test_extending_a_run_continues_the_learning_rate_from_where_it_stands(tmp_path):
    """4 iterations planned, 2 done (α/α₀ = 1, 0.75), then extended to 6: the line restarts
    at the last iteration done, (i₀, f₀) = (1, 0.75), and falls to 0 after iteration 6:
    f(i) = 0.75 · (1 − (i − 1) / 5) = 0.6, 0.45, 0.3, 0.15 (hand-computed)."""
    config = PPOConfig(**{**SMALL, "env_backend": "torch", "learning_rate": 1e-3})  # 4 iterations of 256 steps
    trainer = make_trainer(config, run_dir=tmp_path, progress=False)
    trainer.train(callback=lambda ppo, metrics: ppo.iteration == 2)
    resumed = PPO.resume(tmp_path, training_envs, total_timesteps=6 * 256, progress=False)
    resumed.train()
    rates = [row["learning_rate"] for row in read_metrics(tmp_path / "metrics.csv")]
    assert rates == pytest.approx([1e-3 * f for f in (1.0, 0.75, 0.6, 0.45, 0.3, 0.15)], rel=1e-12)


def test_an_unchanged_budget_keeps_the_plain_schedule(tmp_path):
    config = PPOConfig(**{**SMALL, "env_backend": "torch", "learning_rate": 1e-3})
    trainer = make_trainer(config, run_dir=tmp_path, progress=False)
    trainer.train(callback=lambda ppo, metrics: ppo.iteration == 1)
    PPO.resume(tmp_path, training_envs, progress=False).train()
    rates = [row["learning_rate"] for row in read_metrics(tmp_path / "metrics.csv")]
    assert rates == [1e-3 * f for f in (1.0, 0.75, 0.5, 0.25)]
