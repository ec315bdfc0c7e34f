"""Config validation and the command line's one-line errors with exit code 2."""

import json
import subprocess
import sys

import pytest

from envs.factory import EnvError
from experiments.commands import evaluate, train
from experiments.commands.presets import build_config
from ppo.config import ConfigError, PPOConfig


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"learning_rate": 0.0}, "learning_rate = 0.0 must be a finite number > 0"),
        ({"learning_rate": -3e-4}, "learning_rate = -0.0003"),
        ({"clip_coef": 0.0}, "clip_coef = 0.0"),
        ({"clip_coef": -0.1}, "clip_coef = -0.1"),
        ({"clip_coef": 1.5}, "clip_coef = 1.5 must be in (0, 1), or inf for no clipping; its lower bound 1 − ε = -0.5 "
                             "is not a ratio"),
        ({"clip_coef": float("nan")}, "clip_coef = nan must be in (0, 1)"),
        ({"gamma": 1.5}, "gamma = 1.5 is outside [0, 1]"),
        ({"gae_lambda": -0.1}, "gae_lambda = -0.1 is outside [0, 1]"),
        ({"num_envs": 5, "num_steps": 100, "num_minibatches": 3}, "num_envs * num_steps = 500 is not divisible by num_minibatches = 3"),
        ({"num_envs": 0}, "num_envs = 0 must be a positive integer"),
        ({"update_epochs": 0}, "update_epochs = 0"),
        ({"total_timesteps": 100}, "less than one rollout"),
        ({"max_grad_norm": float("nan")}, "max_grad_norm = nan must be a finite number > 0"),
        ({"value_clip_coef": -0.2}, "value_clip_coef = -0.2"),
        ({"gamma": "0.99"}, "gamma = '0.99' has the wrong type (expected float)"),
        ({"hidden_sizes": (64, 0)}, "hidden_sizes = [64, 0] must be one or more positive widths"),
        ({"ent_coef": -1.0}, "ent_coef = -1.0"),
        ({"target_kl": 0.0}, "target_kl = 0.0"),
    ],
)
def test_validation_names_the_value_and_what_is_allowed(changes, message):
    with pytest.raises(ConfigError) as error:
        PPOConfig(**changes).validate()
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_defaults_are_valid_and_derived_sizes():
    config = PPOConfig().validate()
    assert (config.batch_size, config.minibatch_size, config.num_iterations) == (512, 128, 976)


def test_unknown_env_id_backend_and_unsupported_spaces():
    with pytest.raises(EnvError, match="'NoSuchEnv-v0' is not a registered gymnasium environment"):
        build_config({"env_id": "NoSuchEnv-v0"})
    with pytest.raises(EnvError, match="has no batched torch version"):
        build_config({"env_id": "LunarLander-v3", "env_backend": "torch"})
    with pytest.raises(EnvError, match="env_backend = 'jax' is not one of auto, gymnasium, torch"):
        build_config({"env_backend": "jax"})


def test_explicit_flags_override_presets():
    config = build_config({"env_id": "CartPole-v1", "learning_rate": 0.123, "env_backend": "gymnasium"})
    assert config.learning_rate == 0.123


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=120)


def run_main_in_process(main, argv, capsys) -> tuple[int, str]:
    """Call a CLI's main(argv) as the console script would: (exit code, stderr)."""
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own errors exit
        code = exit_.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize(
    "main, argv, fragment",
    [
        (train.main, ["--learning-rate", "-1"], "learning_rate = -1.0 must be a finite number > 0"),
        (train.main, ["--gamma", "1.2"], "gamma = 1.2 is outside [0, 1]"),
        (train.main, ["--num-minibatches", "3"], "not divisible by num_minibatches = 3"),
        (train.main, ["--env-id", "NoSuchEnv-v0"], "'NoSuchEnv-v0' is not a registered gymnasium environment"),
        (train.main, ["--env-id", "FrozenLake-v1", "--env-backend", "gymnasium"], "supports Box observations"),
        (train.main, ["--num-envs", "four"], "invalid int value: 'four'"),
        (train.main, ["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
        (train.main, ["--resume", "does/not/exist"], "does not exist"),
        (evaluate.main, ["does/not/exist"], "does not exist"),
        (evaluate.main, ["does/not/exist", "--episodes", "0"], "episodes = 0 must be a positive integer"),
    ],
)
def test_cli_user_errors_are_one_line_with_exit_code_2(main, argv, fragment, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a command that wrongly made runs/... would make it here, not in the checkout
    code, stderr = run_main_in_process(main, argv, capsys)
    assert list(tmp_path.iterdir()) == []  # refused: nothing made
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert fragment in lines[0]


def test_console_entry_point_prints_no_traceback():
    result = run_cli("experiments.commands.train", "--clip-coef", "0")
    assert result.returncode == 2
    assert result.stderr.strip() == "ppo-train: error: clip_coef = 0.0 must be in (0, 1), or inf for no clipping"


def test_corrupt_checkpoint_is_one_line_error(tmp_path, capsys):
    (tmp_path / "checkpoint.pt").write_bytes(b"not a checkpoint")
    code, stderr = run_main_in_process(evaluate.main, [str(tmp_path)], capsys)
    assert code == 2
    assert "is corrupt" in stderr and len(stderr.strip().splitlines()) == 1


def test_help_lists_every_config_field():
    help_text = train.build_parser().format_help()
    for name in PPOConfig.__dataclass_fields__:
        assert "--" + name.replace("_", "-") in help_text


def test_train_then_evaluate_writes_the_run_folder(tmp_path, capsys):
    run_dir = tmp_path / "run"
    argv = ["--env-backend", "gymnasium", "--num-envs", "8", "--total-timesteps", "1024", "--run-dir", str(run_dir),
            "--eval-episodes", "3", "--no-progress"]
    assert train.main(argv) == 0
    for name in ("config.json", "metrics.csv", "checkpoint.pt", "learning_curve.png", "eval.json"):
        assert (run_dir / name).exists(), name
    assert any(path.name.startswith("events.out.tfevents") for path in run_dir.iterdir())
    result = json.loads((run_dir / "eval.json").read_text())
    assert result["episodes"] == 3 and {"mean_return", "std_return"} <= set(result)
    assert train.main(argv) == 2  # refuses to overwrite the saved run
    assert "already holds a run" in capsys.readouterr().err
    assert evaluate.main([str(run_dir), "--episodes", "2", "--sample"]) == 0


TINY_RUN = ["--env-id", "CartPole-v1", "--env-backend", "torch", "--num-envs", "4", "--num-steps", "32",
            "--no-progress", "--no-tensorboard"]  # 128 steps an iteration


def test_resume_with_a_budget_that_leaves_nothing_to_train_is_refused_and_changes_nothing(tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert train.main([*TINY_RUN, "--total-timesteps", "512", "--eval-episodes", "0", "--run-dir", str(run_dir)]) == 0
    before = {path.name: path.read_bytes() for path in run_dir.iterdir()}
    capsys.readouterr()
    for budget in ("256", "512", "600"):  # below the 512 steps done, equal, and short of one more iteration
        code, stderr = run_main_in_process(train.main, ["--resume", str(run_dir), "--total-timesteps", budget,
                                                        "--no-progress"], capsys)
        assert code == 2
        assert stderr == (f"ppo-train: error: --total-timesteps {budget} leaves nothing to train: run {run_dir} has "
                          "done 512 steps, in iterations of 128; give --total-timesteps 640 or more\n")
    code, stderr = run_main_in_process(train.main, ["--resume", str(run_dir), "--no-progress"], capsys)
    assert code == 2
    assert stderr == (f"ppo-train: error: run {run_dir} is complete (512 steps); to train it further give "
                      "--total-timesteps 640 or more\n")
    assert {path.name: path.read_bytes() for path in run_dir.iterdir()} == before  # config.json's budget too


def test_a_resumed_run_evaluates_as_many_episodes_as_it_was_started_with(tmp_path):
    run_dir = tmp_path / "run"
    assert train.main([*TINY_RUN, "--total-timesteps", "256", "--eval-episodes", "0", "--run-dir", str(run_dir)]) == 0
    assert train.main(["--resume", str(run_dir), "--total-timesteps", "384", "--no-progress"]) == 0
    assert not (run_dir / "eval.json").exists()  # started with --eval-episodes 0: still none
    assert train.main(["--resume", str(run_dir), "--total-timesteps", "512", "--eval-episodes", "3",
                       "--no-progress"]) == 0
    assert json.loads((run_dir / "eval.json").read_text())["episodes"] == 3  # given again: as given


def test_a_resumed_runs_summary_counts_the_steps_and_seconds_of_this_command_only(tmp_path, capsys):
    from ppo.runs.checkpoint import load_checkpoint

    run_dir = tmp_path / "run"
    assert train.main([*TINY_RUN, "--total-timesteps", "256", "--eval-episodes", "0", "--run-dir", str(run_dir)]) == 0
    seconds_before = load_checkpoint(run_dir)["train_seconds"]
    capsys.readouterr()
    assert train.main(["--resume", str(run_dir), "--total-timesteps", "1024", "--no-progress"]) == 0
    seconds = load_checkpoint(run_dir)["train_seconds"] - seconds_before
    summary = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("trained"))
    assert summary.startswith("trained CartPole-v1 for 768 steps (1,024 in all) in "), summary
    printed_rate = float(summary.split(" s (")[1].split(" steps/s")[0].replace(",", ""))
    assert abs(printed_rate - 768 / seconds) <= 0.5 + 1e-9, (printed_rate, 768 / seconds)  # printed rounded to 1


def test_clip_coef_inf_turns_clipping_off_and_survives_the_run_folder(tmp_path):
    """ε = inf is the plain importance-sampled surrogate; config.json writes it and reads it back."""
    config = PPOConfig(clip_coef=float("inf")).validate()
    assert PPOConfig.from_dict(json.loads(json.dumps(config.to_dict()))).clip_coef == float("inf")
