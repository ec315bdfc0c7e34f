"""Every user mistake, in every command: one line on stderr, exit code 2, nothing written.

Each row names a command, its arguments (with {run}, {tmp}, ... filled in below) and a
piece of the expected message. The checkpoint rows damage a real checkpoint in a
specific way: a flipped byte, a value of the wrong type, an impossible network, missing
counters, another env's checkpoint in a run folder.
"""

import json
import os
import shutil

import pytest

from experiments.commands import evaluate, pretrain_lm, rlhf, train
from ppo.runs.checkpoint import load_checkpoint, save_checkpoint

COMMANDS = {"ppo-train": train.main, "ppo-eval": evaluate.main, "ppo-pretrain-lm": pretrain_lm.main,
            "ppo-rlhf": rlhf.main}
TINY_RUN = ["--env-id", "CartPole-v1", "--env-backend", "torch", "--num-envs", "4", "--num-steps", "32",
            "--total-timesteps", "256", "--eval-episodes", "0", "--no-progress", "--no-tensorboard"]


def exit_code(command: str, argv: list[str]) -> int:
    try:
        return COMMANDS[command](argv)
    except SystemExit as stop:  # argparse's own errors exit from inside parse_args
        return stop.code


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("trained") / "run"
    assert train.main([*TINY_RUN, "--run-dir", str(run_dir)]) == 0
    return run_dir


def damaged_copy(trained_run, tmp_path, damage: str):
    """A copy of the trained run folder with its checkpoint damaged as named."""
    run_dir = tmp_path / "damaged"
    shutil.copytree(trained_run, run_dir)
    path = run_dir / "checkpoint.pt"
    if damage == "flipped byte":
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0x01
        path.write_bytes(bytes(data))
        return run_dir
    state = load_checkpoint(path)
    if damage == "string gamma":
        state["config"]["gamma"] = "0.99"
    elif damage == "negative width":
        state["config"]["hidden_sizes"] = [-4]
    elif damage == "no counters":
        del state["global_step"], state["iteration"]
    elif damage == "another env":
        state["config"]["env_id"] = "Acrobot-v1"
    del state["format"]
    save_checkpoint(state, path)
    return run_dir


CHECKPOINT_ROWS = [
    ("flipped byte", "checksum does not match"),
    ("string gamma", "gamma"),
    ("negative width", "hidden_sizes = [-4]"),
    ("no counters", "lacks iteration, global_step"),
    ("another env", "does not belong to the run"),
]


@pytest.mark.parametrize("command", ["ppo-eval", "ppo-train"])
@pytest.mark.parametrize("damage, message", CHECKPOINT_ROWS)
def test_a_damaged_checkpoint_is_refused_in_one_line(trained_run, tmp_path, capsys, command, damage, message):
    run_dir = damaged_copy(trained_run, tmp_path, damage)
    before = sorted(p.name for p in run_dir.iterdir())
    argv = [str(run_dir), "--episodes", "2"] if command == "ppo-eval" else ["--resume", str(run_dir), "--no-progress"]
    if damage == "no counters" and command == "ppo-eval":
        pytest.skip("evaluation needs no counters")
    assert exit_code(command, argv) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith(f"{command}: error:") and message in error, error
    assert sorted(p.name for p in run_dir.iterdir()) == before  # nothing written


def a_file(tmp_path):
    path = tmp_path / "a_file"
    path.write_text("not a folder")
    return path


# (command, argv template, expected piece of the message)
ROWS = [
    ("ppo-train", [*TINY_RUN, "--run-dir", "{file}/run"], "run_dir {file}/run cannot be written"),
    ("ppo-train", [*TINY_RUN, "--log-std-init", "nan", "--run-dir", "{tmp}/run"], "log_std_init"),
    ("ppo-train", [*TINY_RUN, "--log-std-init", "1000", "--run-dir", "{tmp}/run"], "log_std_init"),
    ("ppo-train", ["--resume", "{run}", "--run-dir", "{tmp}/other"], "(got --run-dir)"),
    ("ppo-train", ["--resume", "{run}", "--preset", "none"], "(got --preset)"),
    ("ppo-train", ["--resume", "{run}", "--learning-rate", "0.1"], "(got --learning-rate)"),
    ("ppo-train", ["--resume", "{tmp}/missing"], "does not exist"),
    ("ppo-train", [*TINY_RUN, "--learning-rat", "1e-3", "--run-dir", "{tmp}/run"], "unrecognized arguments: --learning-rat"),
    ("ppo-eval", ["{run}", "--seed", "-1"], "seed = -1"),
    ("ppo-eval", ["{run}", "--episodes", "0"], "episodes = 0"),
    ("ppo-eval", ["{tmp}/missing"], "does not exist"),
    ("ppo-eval", ["{run}", "--episode", "2"], "unrecognized arguments: --episode 2"),
    ("ppo-pretrain-lm", ["--learning-rate", "inf"], "learning_rate"),
    ("ppo-pretrain-lm", ["--learning-rat", "1e-3"], "unrecognized arguments: --learning-rat"),
    ("ppo-pretrain-lm", ["--weight-decay", "nan"], "weight_decay"),
    ("ppo-pretrain-lm", ["--max-grad-norm", "nan"], "max_grad_norm"),
    ("ppo-pretrain-lm", ["--cache-dir", "{file}/cache"], "cache folder {file}/cache cannot be written"),
    ("ppo-pretrain-lm", ["--out", "{file}/sft.pt", "--cache-dir", "{tmp}/cache"], "cannot be written"),
    ("ppo-pretrain-lm", ["--cache-dir", "{corrupt_cache}"], "corrupt"),
    ("ppo-rlhf", ["--eval-samples", "0", "--run-dir", "{tmp}/run"], "eval_samples = 0"),
    ("ppo-rlhf", ["--iteration", "2", "--run-dir", "{tmp}/run"], "unrecognized arguments: --iteration 2"),
    ("ppo-rlhf", ["--group-size", "4", "--run-dir", "{tmp}/run"], "group_size = 4 has no effect with algorithm = 'ppo'"),
    ("ppo-rlhf", ["--norm-adv", "--kl-penalty", "loss-k3", "--run-dir", "{tmp}/run"],
     "norm_adv whitens the advantages"),
    ("ppo-rlhf", ["--kl-target", "1", "--kl-controller", "pid", "--run-dir", "{tmp}/run"],
     "kl_controller = 'pid' is not one of optimum, proportional"),
    ("ppo-rlhf", ["--kl-target", "1", "--kl-horizon", "10", "--run-dir", "{tmp}/run"],
     "kl_horizon = 10 must be more than batch_size / 5"),
    ("ppo-rlhf", ["--sft-cache-dir", "{file}/cache", "--run-dir", "{tmp}/run"], "--sft-cache-dir {file}/cache"),
    ("ppo-rlhf", ["--run-dir", "{file}/run"], "run_dir {file}/run cannot be written"),
    ("ppo-rlhf", ["--resume", "{tmp}/missing"], "run folder {tmp}/missing does not exist"),
    ("ppo-rlhf", ["--resume", "{tmp}/missing", "--kl-coef", "0.3"], "(got --kl-coef)"),
    # integers beyond int64, thread counts torch cannot take, empty paths: refused by every command's parser
    ("ppo-train", [*TINY_RUN, "--frame-stack", "99999999999999999999", "--run-dir", "{tmp}/run"],
     "argument --frame-stack: 99999999999999999999 is beyond what an integer setting holds"),
    ("ppo-train", [*TINY_RUN, "--num-threads", "99999999999999999999", "--run-dir", "{tmp}/run"],
     "is beyond what an integer setting holds"),
    ("ppo-train", [*TINY_RUN, "--num-threads", "5000", "--run-dir", "{tmp}/run"],
     "num_threads = 5000 must be an integer in [1, 1024]"),
    ("ppo-pretrain-lm", ["--num-threads", "5000"], "num_threads = 5000 must be an integer in [1, 1024]"),
    ("ppo-pretrain-lm", ["--batch-size", "99999999999999999999"], "is beyond what an integer setting holds"),
    ("ppo-rlhf", ["--run-dir", ""], "argument --run-dir: '' is an empty path, which would be the current folder"),
    ("ppo-rlhf", ["--resume", ""], "argument --resume: '' is an empty path"),
    ("ppo-eval", [""], "argument run_dir: '' is an empty path"),
]


@pytest.fixture
def corrupt_cache(tmp_path):
    from envs.corpus import FOOD_CORPUS
    from ppo.lm.models.pretrain import PretrainConfig, cached_checkpoint_path

    cache = tmp_path / "corrupt_cache"
    path = cached_checkpoint_path(FOOD_CORPUS, PretrainConfig(), cache)
    path.parent.mkdir(parents=True)
    path.write_bytes(b"PPO-CHECKPOINT-2 " + b"0" * 64 + b"\nnot a checkpoint")
    return cache


@pytest.mark.parametrize("command, argv, message", ROWS, ids=[f"{c} {' '.join(a)}"[:70] for c, a, _ in ROWS])
def test_every_user_mistake_is_one_line_and_exit_2(command, argv, message, trained_run, corrupt_cache, tmp_path,
                                                   capsys):
    names = {"run": trained_run, "tmp": tmp_path, "file": a_file(tmp_path), "corrupt_cache": corrupt_cache}
    argv = [part.format(**names) for part in argv]
    message = message.format(**names)
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    run_before = sorted(p.name for p in trained_run.iterdir())
    assert exit_code(command, argv) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith(f"{command}: error:") and message in error, error
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before  # nothing written
    assert sorted(p.name for p in trained_run.iterdir()) == run_before


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


# settings refused only once the env or the device is made: (argv, expected piece of the message)
REFUSED_SETUPS = [
    pytest.param(["--env-id", "FrozenLake-v1"], "has observation space Discrete(16)", id="FrozenLake"),
    pytest.param(["--env-id", "Blackjack-v1"], "has observation space Tuple", id="Blackjack"),
    pytest.param(["--env-id", "LunarLander-v3"], "needs the optional extra 'box2d'", id="LunarLander",
                 marks=pytest.mark.skipif(_has("Box2D"), reason="box2d is installed here")),
    pytest.param(["--device", "cuda"], "CUDA is not available", id="cuda",
                 marks=pytest.mark.skipif(_cuda(), reason="CUDA is available here")),
]
WHERE = {  # how the run folder is chosen
    "default folder": [],
    "--run-dir": ["--run-dir", "runs/mine"],
    "--seeds": ["--seeds", "1-2"],
    "--seeds --run-dir": ["--seeds", "1-2", "--run-dir", "runs/sweep"],
}


def listing(folder) -> list[str]:
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


@pytest.mark.parametrize("where", WHERE)
@pytest.mark.parametrize("runs_exists", [False, True], ids=["no runs folder", "runs folder"])
@pytest.mark.parametrize("argv, message", REFUSED_SETUPS)
def test_a_refused_env_or_device_leaves_the_folders_as_they_were(argv, message, where, runs_exists, tmp_path,
                                                                  monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    if runs_exists:
        (tmp_path / "runs" / "an_earlier_run").mkdir(parents=True)
        (tmp_path / "runs" / "an_earlier_run" / "config.json").write_text("{}")
    before = listing(tmp_path)
    assert exit_code("ppo-train", [*argv, *WHERE[where], "--no-progress", "--no-tensorboard"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and error.startswith("ppo-train: error:") and message in error, error
    assert listing(tmp_path) == before


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_run_folder_is_refused_before_training(tmp_path, capsys):
    folder = tmp_path / "read_only"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        assert exit_code("ppo-train", [*TINY_RUN, "--run-dir", str(folder / "run")]) == 2
    finally:
        folder.chmod(0o700)
    assert "cannot be written" in capsys.readouterr().err


def test_a_diverging_run_stops_in_one_line_and_keeps_its_last_checkpoint(tmp_path, capsys, monkeypatch):
    from ppo.trainers.ppo import PPO

    run_dir = tmp_path / "run"
    original = PPO.run_iteration

    def poisoned(self):
        metrics = original(self)
        if self.iteration == 3:  # the 4th iteration's loss goes non-finite
            metrics["value_loss"] = float("nan")
        return metrics

    monkeypatch.setattr(PPO, "run_iteration", poisoned)
    argv = [*TINY_RUN, "--total-timesteps", "1024", "--checkpoint-every", "1", "--eval-episodes", "5",
            "--run-dir", str(run_dir)]
    assert exit_code("ppo-train", argv) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "iteration 4: value_loss = nan" in error
    assert load_checkpoint(run_dir)["iteration"] == 3  # the last good one
    assert not (run_dir / "eval.json").exists()
    rows = (run_dir / "metrics.csv").read_text().splitlines()
    assert len(rows) == 1 + 3 and "nan" not in json.dumps(rows).lower()
