"""Sweeps from the command line: comma lists, the grid, run folder names, the summary."""

from __future__ import annotations

import json
import math

import pytest
import torch

from experiments.commands.cli import SweepValues
from experiments.commands.presets import build_config
from experiments.commands.run_folder import format_value, run_folder_name
from experiments.commands.sweep import expand_grid
from experiments.commands.train import build_parser, main
from ppo.config import ConfigError


def test_expand_grid_is_the_product_in_flag_order():
    flags = {"learning_rate": SweepValues([1e-3, 3e-3]), "gamma": 0.9, "clip_coef": SweepValues([0.1, 0.2])}
    assert expand_grid(flags) == [
        {"learning_rate": 1e-3, "clip_coef": 0.1}, {"learning_rate": 1e-3, "clip_coef": 0.2},
        {"learning_rate": 3e-3, "clip_coef": 0.1}, {"learning_rate": 3e-3, "clip_coef": 0.2},
    ]
    assert expand_grid({"gamma": 0.9}) == [{}]
    with pytest.raises(ConfigError, match="twice"):
        expand_grid({"clip_coef": SweepValues([0.1, 0.1])})


@pytest.mark.parametrize("value, text", [(0.003, "3e-3"), (0.2, "0.2"), (1e-5, "1e-5"), (2.0, "2"), (0.95, "0.95"),
                                         (100_000, "100000"), (True, "on"), (False, "off"), (None, "none"),
                                         ((64, 32), "64x32"), ("tanh", "tanh")])
def test_format_value(value, text):
    assert format_value(value) == text


def test_run_folder_names_say_what_differs_from_the_defaults():
    defaults = build_config({}, "auto")
    assert run_folder_name(defaults, defaults) == "CartPole-v1__seed1"
    changed = defaults.replace(learning_rate=3e-3, seed=4, num_threads=2)  # threads do not change what is learned
    assert run_folder_name(changed, defaults) == "CartPole-v1__lr3e-3__seed4"
    swept_default = defaults.replace(clip_coef=defaults.clip_coef)
    assert run_folder_name(swept_default, defaults, ["clip_coef"]) == "CartPole-v1__clip0.2__seed1"
    two = defaults.replace(gae_lambda=0.9, norm_adv=True, hidden_sizes=(32, 32))
    assert run_folder_name(two, defaults) == "CartPole-v1__lambda0.9__normadvon__net32x32__seed1"


def test_run_folder_names_say_a_backend_a_preset_and_processes_that_are_not_the_envs_own():
    """Two runs that differ in how they were made do not share a name (nor take name__2)."""
    gymnasium = build_config({"env_backend": "gymnasium"}, "auto")
    assert run_folder_name(gymnasium, gymnasium) == "CartPole-v1__backendgymnasium__seed1"
    borrowed = build_config({"env_id": "CartPoleNoVel-v1"}, "CartPole-v1")
    assert run_folder_name(borrowed, borrowed, preset="CartPole-v1") == "CartPoleNoVel-v1__presetCartPole-v1__seed1"
    own = build_config({"env_id": "CartPoleNoVel-v1"}, "auto")
    assert run_folder_name(own, own, preset="auto") == run_folder_name(own, own) == "CartPoleNoVel-v1__seed1"
    assert run_folder_name(own, own, preset="CartPoleNoVel-v1") == "CartPoleNoVel-v1__seed1"
    plain = build_config({}, "auto")
    assert run_folder_name(plain, plain, preset="none") == "CartPole-v1__presetnone__seed1"
    assert run_folder_name(plain, plain, processes=2) == "CartPole-v1__seed1__procs2"


def test_any_number_flag_takes_a_comma_list():
    args = build_parser([]).parse_args(["--learning-rate", "1e-3,3e-3", "--update-epochs", "4,8", "--gamma", "0.99"])
    assert isinstance(args.learning_rate, SweepValues) and args.learning_rate == [1e-3, 3e-3]
    assert args.update_epochs == [4, 8] and args.gamma == 0.99


@pytest.mark.parametrize("argv, message", [
    (["--seeds", "3-1"], "seeds"),
    (["--seeds", "1-2", "--seed", "3"], "--seed or --seeds"),
    (["--seeds", "1-2", "--resume", "runs/x"], "--resume continues one run"),
    (["--env-id", "CartPole-v1,Acrobot-v1", "--seeds", "1-2"], "--env-id takes one value"),
    (["--learning-rate", "1e-3,abc"], "invalid float value"),
    (["--learning-rate", "1e-3,-1"], "learning_rate"),
])
def test_bad_sweeps_are_one_line_errors(argv, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    try:
        exit_code = main([*argv, "--no-progress", "--total-timesteps", "2048"])
    except SystemExit as exit_info:  # argparse's own errors
        exit_code = exit_info.code
    assert exit_code == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and message in error, error
    assert not (tmp_path / "runs").exists()


def test_a_sweep_trains_every_setting_over_every_seed(tmp_path, capsys):
    exit_code = main(["--learning-rate", "5e-3,1e-2", "--seeds", "1-2", "--total-timesteps", "4096",
                      "--eval-episodes", "3", "--run-dir", str(tmp_path), "--no-progress", "--no-tensorboard"])
    assert exit_code == 0
    names = sorted(path.name for path in tmp_path.iterdir())
    assert names == [f"CartPole-v1__lr{lr}__budget4096__seed{seed}" for lr in ("0.01", "5e-3") for seed in (1, 2)]
    for name in names:
        folder = tmp_path / name
        config = json.loads((folder / "config.json").read_text())
        assert config["seed"] == int(name[-1])
        assert config["learning_rate"] == (0.01 if "lr0.01" in name else 0.005)
        assert {"checkpoint.pt", "metrics.csv", "eval.json", "learning_curve.png"} <= {p.name for p in folder.iterdir()}
        assert json.loads((folder / "eval.json").read_text())["episodes"] == 3
    out = capsys.readouterr().out
    assert "learning_rate=5e-3" in out and "learning_rate=0.01" in out  # one summary row per setting


def test_a_sweep_outlives_diverging_runs(tmp_path, capsys, monkeypatch):
    """lr 1e30 diverges at once (both seeds); a planted fault makes seed 2 of lr 0.01 diverge in
    iteration 2. Every setting still trains, the table has a row for each and counts the
    diverged runs as failures, and each diverged folder keeps its last good checkpoint (none
    for a run that diverged in its first iteration), gets diverged.json and no evaluation."""
    from ppo.trainers.seed_batch import DIVERGED_NAME, SeedBatch

    correct_loss = SeedBatch.member_losses

    def loss_with_a_fault(batch, minibatch):
        result = correct_loss(batch, minibatch)
        if batch.config.learning_rate == 0.01 and batch.iteration == 1:
            result.loss = result.loss * torch.tensor([1.0, math.nan])  # seed 2 only
        return result

    monkeypatch.setattr(SeedBatch, "member_losses", loss_with_a_fault)
    exit_code = main(["--learning-rate", "5e-3,1e-2,1e30", "--seeds", "1-2", "--total-timesteps", "4096",
                      "--checkpoint-every", "1", "--eval-episodes", "2", "--run-dir", str(tmp_path), "--no-progress",
                      "--no-tensorboard"])
    assert exit_code == 0
    captured = capsys.readouterr()
    table = captured.out[captured.out.index("setting "):]
    rows = {line.split()[0]: line for line in table.splitlines() if line.startswith("learning_rate=")}
    assert set(rows) == {"learning_rate=5e-3", "learning_rate=0.01", "learning_rate=1e30"}
    assert "0/2 (2 diverged)" in rows["learning_rate=1e30"] and "/2 (1 diverged)" in rows["learning_rate=0.01"]
    assert "diverged" not in rows["learning_rate=5e-3"]
    assert "learning_rate=0.01: 1 of 2 runs diverged (seed 2 at iteration 2: policy_loss = nan)" in table
    assert "seed 2 of learning_rate=0.01 diverged at iteration 2" in captured.err
    for name, diverged_at, last_checkpoint in [("lr5e-3__budget4096__seed1", None, 2),
                                               ("lr0.01__budget4096__seed1", None, 2),
                                               ("lr0.01__budget4096__seed2", 2, 1),
                                               ("lr1e30__budget4096__seed1", 1, None),
                                               ("lr1e30__budget4096__seed2", 1, None)]:
        folder = tmp_path / f"CartPole-v1__{name}"
        assert (folder / "eval.json").exists() == (diverged_at is None), name
        if diverged_at is None:
            assert not (folder / DIVERGED_NAME).exists()
        else:
            assert json.loads((folder / DIVERGED_NAME).read_text())["iteration"] == diverged_at
        if last_checkpoint is None:
            assert not (folder / "checkpoint.pt").exists()
        else:
            assert torch.load(folder / "checkpoint.pt", weights_only=True)["iteration"] == last_checkpoint


def test_no_clipping_names_its_folder(tmp_path, monkeypatch):
    """`--clip-coef inf`, which --help offers as no clipping, trains into a folder named after it."""
    from experiments.commands.run_folder import format_value

    assert format_value(float("inf")) == "inf" and format_value(-float("inf")) == "-inf"
    monkeypatch.chdir(tmp_path)
    assert main(["--clip-coef", "inf", "--total-timesteps", "2048", "--eval-episodes", "0", "--no-progress",
                 "--no-tensorboard"]) == 0
    assert [folder.name for folder in (tmp_path / "runs").iterdir()] == ["CartPole-v1__clipinf__budget2048__seed1"]


def test_a_seed_batch_trains_on_a_thread_per_eight_members_up_to_the_cores_unless_told(monkeypatch):
    from experiments.commands import sweep
    from ppo.config import PPOConfig

    monkeypatch.setattr(sweep.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    config = PPOConfig(num_threads=3)
    assert [sweep.batch_threads(config, members, given=False) for members in (1, 4, 7, 8, 15, 16, 64)] == \
        [1, 1, 1, 1, 1, 2, 2]
    assert sweep.batch_threads(config, 16, given=True) == 3  # --num-threads, as given
