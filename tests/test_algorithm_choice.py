"""`ppo-train --algorithm clip|penalty|adaptive-clip|dual-clip`: the trainer each names, its own
settings, its run folder and its resume (ppo.trainers.choice, ppo.trainers.registry)."""

import csv
import json

import pytest

from envs.factory import make_vec_env
from experiments.commands import train
from experiments.commands.presets import build_config
from ppo.config import ConfigError, PPOConfig
from ppo.trainers.choice import build_trainer, trainer_class
from ppo.trainers.ppo import PPO
from ppo.trainers.recurrent import RecurrentPPO
from ppo.trainers.variants import AdaptiveClipPPO, DualClipPPO, PPOPenalty

TINY_RUN = ["--env-id", "CartPole-v1", "--env-backend", "torch", "--num-envs", "4", "--num-steps", "32",
            "--no-progress", "--no-tensorboard", "--eval-episodes", "0"]  # 128 steps an iteration


def rows(run_dir) -> list[dict[str, str]]:
    with open(run_dir / "metrics.csv") as file:
        return list(csv.DictReader(file))


def test_each_algorithm_names_its_trainer():
    assert trainer_class() is PPO
    assert trainer_class("penalty") is PPOPenalty
    assert trainer_class("adaptive-clip") is AdaptiveClipPPO
    assert trainer_class("dual-clip") is DualClipPPO


@pytest.mark.parametrize("algorithm, settings, message", [
    ("nope", {}, "algorithm = 'nope': choose one of clip, penalty, adaptive-clip, dual-clip"),
    ("clip", {"kl_target": 0.02}, "kl_target = 0.02 is a setting of algorithm penalty or adaptive-clip, not of 'clip'"),
    ("adaptive-clip", {"initial_beta": 2.0}, "initial_beta = 2.0 is a setting of algorithm penalty, not of"),
])
def test_an_unknown_algorithm_or_a_setting_of_another_is_refused(algorithm, settings, message):
    config = PPOConfig(env_id="CartPole-v1", num_envs=2, num_steps=8)
    with pytest.raises(ConfigError, match=message):
        build_trainer(config, make_vec_env("CartPole-v1", 2, "torch"), algorithm, settings, progress=False)


@pytest.mark.parametrize("algorithm", ["penalty", "adaptive-clip", "dual-clip"])
def test_every_variant_trains_a_recurrent_network(algorithm):
    """A variant is PPO with its loss and rule: on a GRU it replays the rollout's sequences, so the
    first minibatch's ratio is 1 (up to rounding), and the rule reads the KL of the replayed policy."""
    config = PPOConfig(env_id="CartPoleNoVel-v1", recurrent="gru", num_envs=4, num_steps=16, total_timesteps=128,
                       tensorboard=False)
    trainer = build_trainer(config, make_vec_env(config.env_id, 4, "torch"), algorithm, progress=False)
    rows = [trainer.train_iteration() for _ in range(2)]
    assert all(row["first_minibatch_ratio_error"] < 1e-5 for row in rows)
    if algorithm != "dual-clip":
        assert all(row["kl_after_update"] > 0 for row in rows)


def test_penalty_from_the_command_line_trains_ppo_penalty_with_its_settings(tmp_path):
    run_dir = tmp_path / "run"
    argv = [*TINY_RUN, "--total-timesteps", "256", "--run-dir", str(run_dir),
            "--algorithm", "penalty", "--kl-target", "0.02", "--initial-beta", "3"]
    assert train.main(argv) == 0
    record = json.loads((run_dir / "config.json").read_text())["trainer"]
    assert record == {"class": "PPOPenalty", "kl_target": 0.02, "initial_beta": 3.0}
    first, second = rows(run_dir)
    assert float(first["beta"]) == 3.0  # the first update used β₀
    kl = float(first["kl_after_update"])  # then β is halved or doubled around the target, or kept
    expected = 6.0 if kl > 1.5 * 0.02 else 1.5 if kl < 0.02 / 1.5 else 3.0
    assert float(second["beta"]) == expected


def test_adaptive_clip_logs_the_epsilon_each_update_used(tmp_path):
    run_dir = tmp_path / "run"
    assert train.main([*TINY_RUN, "--total-timesteps", "384", "--run-dir", str(run_dir),
                       "--algorithm", "adaptive-clip", "--min-clip", "0.05", "--max-clip", "0.4"]) == 0
    epsilons = [float(row["clip_coef"]) for row in rows(run_dir)]
    assert epsilons[0] == 0.2  # the config's clip_coef starts it
    assert all(0.05 <= epsilon <= 0.4 for epsilon in epsilons)
    assert json.loads((run_dir / "config.json").read_text())["trainer"]["class"] == "AdaptiveClipPPO"


def test_a_variants_run_resumes_as_the_same_trainer_bit_for_bit(tmp_path):
    """Stopped after two of four iterations and resumed by `ppo-train --resume`, a
    PPO-Penalty run on the torch backend logs what the uninterrupted run logs (β included)."""
    settings = ["--algorithm", "penalty", "--kl-target", "0.005"]
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert train.main([*TINY_RUN, *settings, "--total-timesteps", "512", "--run-dir", str(whole)]) == 0
    config = build_config({"env_id": "CartPole-v1", "env_backend": "torch", "num_envs": 4, "num_steps": 32,
                           "total_timesteps": 512, "tensorboard": False}, "auto")  # as the command builds it
    stopped = build_trainer(config, make_vec_env("CartPole-v1", 4, "torch"), "penalty", {"kl_target": 0.005},
                            run_dir=parts, progress=False)
    stopped.train(callback=lambda trainer, metrics: trainer.iteration == 2)
    assert train.main(["--resume", str(parts), "--no-progress", "--eval-episodes", "0"]) == 0
    timing = {"time_s", "steps_per_second"}
    same = [{key: value for key, value in row.items() if key not in timing} for row in rows(whole)]
    assert [{key: value for key, value in row.items() if key not in timing} for row in rows(parts)] == same
    assert len({row["beta"] for row in rows(whole)}) > 1  # β moved: the resumed run carried it on


@pytest.mark.parametrize("argv, message", [
    (["--kl-target", "0.02", "--learning-rate", "1e-3,2e-3"], "kl_target = 0.02 is a setting of algorithm penalty"),
    (["--algorithm", "penalty", "--initial-beta", "-1", "--seeds", "1-2"], "initial_beta = -1.0 must be a finite"),
    (["--algorithm", "adaptive-clip", "--max-clip", "1.5"], "max_clip = 1.5 must be a finite number > 0 and < 1"),
    (["--algorithm", "adaptive-clip", "--min-clip", "0.3", "--max-clip", "0.1"], "clip bounds [0.3, 0.1] must satisfy"),
    (["--kl-target", "0.02"], "kl_target = 0.02 is a setting of algorithm penalty or adaptive-clip"),
    (["--dual-clip", "2"], "dual_clip = 2.0 is a setting of algorithm dual-clip, not of 'clip'"),
    (["--algorithm", "dual-clip", "--dual-clip", "0.9"], "dual_clip = 0.9 must be a finite number > 1"),
    (["--algorithm", "penalty", "--initial-beta", "0"], "initial_beta = 0.0 must be a finite number > 0"),
])
def test_refused_algorithm_settings_leave_nothing_behind(argv, message, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert train.main([*TINY_RUN, "--total-timesteps", "256", *argv]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and message in error, error
    assert list(tmp_path.iterdir()) == []


def test_resume_refuses_a_new_algorithm_or_setting(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert train.main([*TINY_RUN, "--total-timesteps", "256", "--run-dir", str(run_dir)]) == 0
    before = (run_dir / "metrics.csv").read_text()
    capsys.readouterr()
    assert train.main(["--resume", str(run_dir), "--total-timesteps", "512", "--algorithm", "penalty"]) == 2
    assert "only --total-timesteps may change (got --algorithm)" in capsys.readouterr().err
    assert (run_dir / "metrics.csv").read_text() == before


def test_the_folder_name_says_the_algorithm_and_its_settings(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert train.main([*TINY_RUN, "--total-timesteps", "128", "--algorithm", "penalty", "--kl-target", "0.02"]) == 0
    (folder,) = (tmp_path / "runs").iterdir()
    assert folder.name.startswith("CartPole-v1__penalty__kltarget0.02__") and folder.name.endswith("__seed1")


def test_seeds_of_a_variant_train_as_one_batch_each_member_its_own_variant_run(tmp_path, capsys):
    """`--algorithm penalty --seeds 1-2` trains one batch of PPOPenalty: each member adapts its own β
    as `--seed N` alone does, lands within float32 rounding of that run's losses, and its
    folder is that run's (named alike, recorded as PPOPenalty)."""
    batch, alone = tmp_path / "batch", tmp_path / "alone"
    variant = ["--algorithm", "penalty", "--kl-target", "0.005", "--total-timesteps", "256"]
    assert train.main([*TINY_RUN, *variant, "--seeds", "1-2", "--run-dir", str(batch)]) == 0
    assert "one after another" not in capsys.readouterr().out
    for seed in (1, 2):
        assert train.main([*TINY_RUN, *variant, "--seed", str(seed), "--run-dir", str(alone / str(seed))]) == 0
        (folder,) = batch.glob(f"*__seed{seed}")
        assert folder.name == f"CartPole-v1__penalty__kltarget5e-3__envs4__budget256__seed{seed}"
        member, single = rows(folder), rows(alone / str(seed))
        assert [row["beta"] for row in member] == [row["beta"] for row in single] and len(member) > 1
        for name in ("policy_loss", "value_loss", "kl_after_update"):
            assert [float(row[name]) for row in member] == pytest.approx([float(row[name]) for row in single],
                                                                       rel=1e-3), name
        assert json.loads((folder / "config.json").read_text())["trainer"]["class"] == "PPOPenalty"
