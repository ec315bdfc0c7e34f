"""Runs that survive faults, through the real command: kills, Ctrl-C, resume.

A run killed at a random moment and resumed (as often as it takes) must end with the
same weights, optimizer state and metrics.csv rows (wall-clock columns aside) as the
same run left alone, on the batched torch backend. On the gymnasium backend the envs
restart their episodes, so only the log's shape is checked: every step once, in order.
"""

import csv
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from ppo.checkpoint import load_checkpoint

REPO = Path(__file__).resolve().parents[1]
WALL_CLOCK_COLUMNS = {"time_s", "steps_per_second"}
ITERATIONS = 24
TORCH_RUN = ["--env-id", "CartPole-v1", "--env-backend", "torch", "--total-timesteps", str(ITERATIONS * 2048),
             "--checkpoint-every", "1", "--eval-episodes", "0", "--no-progress", "--no-tensorboard"]


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "experiments.train", *args]


def start(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen(command(*args), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def rows(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.csv"
    if not path.exists():
        return []
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


def interrupt_after(process: subprocess.Popen, run_dir: Path, min_rows: int, sig: int, rng: random.Random) -> None:
    """Send `sig` once metrics.csv has at least `min_rows` rows, a random few ms later."""
    deadline = time.monotonic() + 60
    while process.poll() is None and len(rows(run_dir)) < min_rows and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(rng.uniform(0.0, 0.03))
    if process.poll() is None:
        process.send_signal(sig)
    process.communicate(timeout=60)


def run_with_kills(run_dir: Path, base_args: list[str], kills: int, seed: int) -> int:
    """Start the run, SIGKILL it `kills` times at random moments, resuming each time; returns resumes done."""
    rng = random.Random(seed)
    resumes = 0
    process = start([*base_args, "--run-dir", str(run_dir)])
    for _ in range(kills):
        interrupt_after(process, run_dir, rng.randint(1, ITERATIONS - 2), signal.SIGKILL, rng)
        if (run_dir / "checkpoint.pt").exists():
            process = start(["--resume", str(run_dir), "--eval-episodes", "0", "--no-progress"])
            resumes += 1
        else:  # killed before the first checkpoint: start again in the same folder
            process = start([*base_args, "--run-dir", str(run_dir)])
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    return resumes


def assert_same_run(reference: Path, other: Path) -> None:
    a, b = load_checkpoint(reference), load_checkpoint(other)
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
    for key in ("exp_avg", "exp_avg_sq"):
        assert torch.equal(a["optimizer"][key], b["optimizer"][key]), key
    rows_a, rows_b = rows(reference), rows(other)
    assert len(rows_a) == len(rows_b) == ITERATIONS
    for row_a, row_b in zip(rows_a, rows_b):
        assert {k: v for k, v in row_a.items() if k not in WALL_CLOCK_COLUMNS} == \
               {k: v for k, v in row_b.items() if k not in WALL_CLOCK_COLUMNS}


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("reference") / "run"
    result = subprocess.run(command(*TORCH_RUN, "--run-dir", str(run_dir)), cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return run_dir


def test_killed_three_times_and_resumed_equals_the_run_left_alone(reference_run, tmp_path):
    resumes = run_with_kills(tmp_path / "run", TORCH_RUN, kills=3, seed=0)
    assert resumes >= 1
    assert_same_run(reference_run, tmp_path / "run")


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_killed_ten_times_and_resumed_equals_the_run_left_alone(reference_run, tmp_path, seed):
    resumes = run_with_kills(tmp_path / "run", TORCH_RUN, kills=10, seed=seed)
    assert resumes >= 5
    assert_same_run(reference_run, tmp_path / "run")


def test_ctrl_c_saves_a_checkpoint_that_resumes_to_the_same_result(reference_run, tmp_path):
    run_dir = tmp_path / "run"
    process = start([*TORCH_RUN, "--run-dir", str(run_dir)])
    interrupt_after(process, run_dir, 5, signal.SIGINT, random.Random(3))
    assert process.returncode == 130
    done = load_checkpoint(run_dir)["iteration"]
    assert 5 <= done < ITERATIONS
    assert len(rows(run_dir)) == done
    result = subprocess.run(command("--resume", str(run_dir), "--eval-episodes", "0", "--no-progress"), cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert_same_run(reference_run, run_dir)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_the_stop_message_names_the_resume_command(tmp_path, sig):
    run_dir = tmp_path / "run"
    process = start([*TORCH_RUN, "--run-dir", str(run_dir)])
    deadline = time.monotonic() + 60
    while len(rows(run_dir)) < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    process.send_signal(sig)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130
    assert f"--resume {run_dir}" in err and "Traceback" not in err


def test_a_second_ctrl_c_aborts_at_once_and_leaves_a_loadable_checkpoint(tmp_path):
    run_dir = tmp_path / "run"
    process = start([*TORCH_RUN, "--run-dir", str(run_dir)])
    deadline = time.monotonic() + 60
    while len(rows(run_dir)) < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    process.send_signal(signal.SIGINT)
    time.sleep(0.001)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130 and "Traceback" not in err
    assert load_checkpoint(run_dir)["iteration"] >= 1


@pytest.mark.slow
def test_gymnasium_backend_resumed_logs_every_step_once_in_order(tmp_path):
    args = ["--env-id", "CartPole-v1", "--env-backend", "gymnasium", "--num-envs", "4", "--num-steps", "64",
            "--total-timesteps", str(ITERATIONS * 256), "--checkpoint-every", "2", "--eval-episodes", "0",
            "--no-progress", "--no-tensorboard"]
    run_with_kills(tmp_path / "run", args, kills=4, seed=5)
    steps = [int(float(row["global_step"])) for row in rows(tmp_path / "run")]
    assert steps == [256 * (i + 1) for i in range(ITERATIONS)]


def test_interrupted_save_leaves_no_temporary_file_behind(tmp_path):
    from ppo.checkpoint import save_checkpoint

    stale = tmp_path / ".checkpoint.pt.abc123.tmp"
    stale.write_bytes(b"half a checkpoint")
    save_checkpoint({"x": 1}, tmp_path / "checkpoint.pt")
    assert not stale.exists()
    assert load_checkpoint(tmp_path / "checkpoint.pt")["x"] == 1


def test_checkpoint_follows_the_umask(tmp_path):
    from ppo.checkpoint import save_checkpoint

    previous = os.umask(0o022)
    try:
        save_checkpoint({"x": 1}, tmp_path / "checkpoint.pt")
    finally:
        os.umask(previous)
    assert (tmp_path / "checkpoint.pt").stat().st_mode & 0o777 == 0o644
