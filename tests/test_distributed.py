"""Data-parallel PPO on two CPU processes (gloo), started with torchrun as a user would.

* The gradient average is the full-batch gradient: one update on 2 shares of a batch
  equals one update on the whole batch in one process, to float rounding.
* After training, every process holds bit-identical parameters.
* `torchrun --nproc-per-node 2 -m experiments.train` solves CartPole as one run.
* A process that dies takes the run down within a bounded time; its checkpoint loads.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from ppo.checkpoint import load_checkpoint
from ppo.config import ConfigError, PPOConfig
from ppo.distributed import SINGLE_PROCESS, World, whiten_across
from ppo.losses import normalize_advantages

REPO = Path(__file__).resolve().parents[1]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]


def torchrun(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([*TORCHRUN, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env=environment)


def worker(mode: str, out: Path) -> list[dict]:
    result = torchrun(str(REPO / "tests" / "_distributed_worker.py"), mode, str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(2)]


def test_two_shares_update_like_the_whole_batch(tmp_path):
    results = worker("equivalence", tmp_path)
    for result in results:
        assert result["moved"] > 1e-3  # the update did something
        assert result["max_difference"] < 1e-6  # float32 rounding of a different summation order
        assert result["loss_difference"] < 1e-6


def test_after_training_every_process_holds_the_same_parameters(tmp_path):
    first, second = worker("train", tmp_path)
    assert first["steps"] == second["steps"] == 8 * 32 * 6
    assert first["parameters"] == second["parameters"]  # bit for bit


def test_two_processes_solve_cartpole_as_one_run(tmp_path):
    run_dir = tmp_path / "run"
    result = torchrun("-m", "experiments.train", "--env-id", "CartPole-v1", "--run-dir", str(run_dir),
                      "--no-progress", "--eval-episodes", "20", "--no-tensorboard")
    assert result.returncode == 0, result.stderr[-3000:]
    assert "on 2 processes" in result.stdout
    assert json.loads((run_dir / "eval.json").read_text())["mean_return"] >= 475
    assert load_checkpoint(run_dir)["world_size"] == 2


def _children(pid: int) -> list[int]:
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                children.append(int(entry.name))
    return children


@pytest.mark.skipif(not Path("/proc").exists(), reason="finds the worker processes through /proc")
def test_a_dead_process_takes_the_run_down_within_a_bounded_time(tmp_path):
    run_dir = tmp_path / "run"
    launcher = subprocess.Popen(
        [*TORCHRUN, "-m", "experiments.train", "--env-id", "CartPole-v1", "--total-timesteps", "100000000",
         "--checkpoint-every", "1", "--run-dir", str(run_dir), "--no-progress", "--no-tensorboard"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.monotonic() + 120
    while not (run_dir / "checkpoint.pt").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    workers = _children(launcher.pid)
    assert len(workers) == 2
    os.kill(max(workers), signal.SIGKILL)
    killed_at = time.monotonic()
    launcher.communicate(timeout=90)
    assert launcher.returncode != 0
    assert time.monotonic() - killed_at < 90
    assert load_checkpoint(run_dir)["iteration"] >= 1  # what was saved stays loadable


def test_one_process_world_changes_nothing():
    x = torch.randn(50, generator=torch.Generator().manual_seed(0)) * 3 + 1
    assert SINGLE_PROCESS.average_(x.clone()).equal(x) and SINGLE_PROCESS.gather(5) == [5]
    assert SINGLE_PROCESS.seed(7) == 7 and not SINGLE_PROCESS.any(False) and SINGLE_PROCESS.any(True)
    # the distributed whitening's moment formula, on one process, is the single-process whitening
    torch.testing.assert_close(whiten_across(SINGLE_PROCESS, x), normalize_advantages(x), rtol=1e-6, atol=1e-6)


def test_sizes_that_do_not_divide_among_the_processes_are_refused_in_one_line():
    from experiments.train import training_envs
    from ppo.trainer import PPO

    config = PPOConfig(env_id="CartPole-v1", env_backend="torch", num_envs=3, num_steps=8, num_minibatches=1,
                       tensorboard=False)
    with pytest.raises(ConfigError, match="num_envs = 3 is not divisible by the 2 processes"):
        PPO(config, training_envs(config), progress=False, world=World(rank=0, size=2))
    config = config.replace(num_envs=4, num_steps=3, num_minibatches=4)  # minibatch of 3 samples
    with pytest.raises(ConfigError, match="minibatch size .* = 3 is not divisible by the 2 processes"):
        PPO(config, training_envs(config), progress=False, world=World(rank=0, size=2))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_training_runs_on_the_local_gpu(tmp_path):
    run_dir = tmp_path / "run"
    result = subprocess.run([sys.executable, "-m", "experiments.train", "--device", "cuda", "--total-timesteps", "8192",
                             "--run-dir", str(run_dir), "--no-progress", "--eval-episodes", "5"],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]


def test_a_two_process_run_stopped_and_resumed_under_torchrun_equals_the_run_left_alone(tmp_path):
    args = ["-m", "experiments.train", "--env-id", "CartPole-v1", "--env-backend", "torch", "--total-timesteps",
            str(16 * 2048), "--checkpoint-every", "1", "--eval-episodes", "0", "--no-progress", "--no-tensorboard"]
    assert torchrun(*args, "--run-dir", str(tmp_path / "reference")).returncode == 0
    run_dir = tmp_path / "stopped"
    launcher = subprocess.Popen([*TORCHRUN, *args, "--run-dir", str(run_dir)], cwd=REPO, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    metrics = run_dir / "metrics.csv"
    deadline = time.monotonic() + 120
    while (not metrics.exists() or len(metrics.read_text().splitlines()) < 5) and time.monotonic() < deadline:
        time.sleep(0.01)
    launcher.send_signal(signal.SIGINT)  # torchrun passes it on to both processes
    _, err = launcher.communicate(timeout=120)
    assert "torchrun --nproc-per-node 2 -m experiments.train --resume" in err
    assert torchrun("-m", "experiments.train", "--resume", str(run_dir), "--eval-episodes", "0",
                    "--no-progress").returncode == 0
    reference, resumed = load_checkpoint(tmp_path / "reference"), load_checkpoint(run_dir)
    for key in reference["model"]:
        assert torch.equal(reference["model"][key], resumed["model"][key]), key
    reference_rows = (tmp_path / "reference" / "metrics.csv").read_text().splitlines()
    header = reference_rows[0].split(",")
    kept = [index for index, name in enumerate(header) if name not in {"time_s", "steps_per_second"}]

    def without_wall_clock(lines: list[str]) -> list[list[str]]:
        return [[line.split(",")[index] for index in kept] for line in lines]

    assert without_wall_clock(reference_rows) == without_wall_clock(metrics.read_text().splitlines())
