"""Data-parallel PPO on two CPU processes (gloo), started with torchrun as a user would.

* The gradient average is the full-batch gradient: one update on 2 shares of a batch
  equals one update on the whole batch in one process, to float rounding.
* After training, every process holds bit-identical parameters.
* `torchrun --nproc-per-node 2 -m experiments.commands.train` solves CartPole as one run.
* A process that dies takes the run down within a bounded time; its checkpoint loads.
* Every collective runs on the process group's device (World.device): in a group that
  serves CUDA tensors only, as NCCL does, no collective hands it a CPU tensor.
* Only a lost peer is reported as "another process of this run stopped"; a bug of this
  process (a tensor on a device the group does not serve) keeps its own error.
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

from ppo.runs.checkpoint import load_checkpoint
from ppo.config import ConfigError, PPOConfig
from ppo.parallel.distributed import SINGLE_PROCESS, World, is_peer_failure, whiten_across
from ppo.algorithm.losses import normalize_advantages

# one pytest process runs this module's tests, one after another: two gloo meshes forming at
# once on a loaded machine were seen to lose a connection (make test runs with --dist loadgroup)
pytestmark = pytest.mark.xdist_group("torchrun")

REPO = Path(__file__).resolve().parents[1]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]


def torchrun(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    environment = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run([*TORCHRUN, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout,
                          env=environment)


def worker(mode: str, out: Path, *args: str, ranks: int = 2) -> list[dict]:
    result = torchrun(str(REPO / "tests" / "_distributed_worker.py"), mode, str(out), *args)
    assert result.returncode == 0, result.stderr[-3000:]
    return [json.loads((out / f"rank{rank}.json").read_text()) for rank in range(ranks)]


# What each World collective in the worker's every_collective must give on both processes
# (process k holds k): sums and means of 0 and 1, process 0's tensor broadcast, both
# processes' episodes in rank order, the normaliser's mean of the samples [1, 0] (process 0)
# and 2 x [2, -2] (process 1), i.e. [5/3, -4/3].
RUN_VALUES = {
    "sum_ cpu": [2.0, 1.0], "average_ cpu": [0.5], "average_ device": [0.5, 0.5, 0.5], "broadcast_ cpu": [1.0],
    "broadcast_ device": [1.0, 1.0], "any one": True, "any none": False, "mean_of": 0.5,
    "normaliser": [5 / 3, -4 / 3], "gather episodes": [[[0.5], [7]], [[1.5], [8]]],
}


def assert_run_values(results: dict) -> None:
    values = {name: result.get("value", result) for name, result in results.items()}
    for name, expected in RUN_VALUES.items():  # sums of small integers and halves: exact in floating point
        if name != "normaliser":
            assert values[name] == expected, name
    assert values["normaliser"] == pytest.approx(RUN_VALUES["normaliser"], rel=1e-15)  # float64 divisions by 3
    # the whitened share equals the share of the whole batch whitened by one process, to float64 rounding
    assert values["whiten"] < 1e-12


def test_every_collective_of_a_two_process_world_gives_the_runs_value(tmp_path):
    for result in worker("collectives", tmp_path, "gloo", "cpu"):
        assert_run_values(result["cpu"])


@pytest.fixture(scope="module")
def cuda_only_group(tmp_path_factory) -> list[dict]:
    """Every collective in a group whose only backend serves CUDA tensors (as NCCL does):
    once with the World's device the GPU, once with the World's device the CPU (a planted bug)."""
    return worker("collectives", tmp_path_factory.mktemp("cuda_only"), "cuda:gloo", "cuda", "cpu")


def test_every_collective_runs_on_the_groups_device_in_a_group_that_refuses_cpu_tensors(cuda_only_group):
    for result in cuda_only_group:
        if torch.cuda.is_available():
            assert_run_values(result["cuda"])
        else:  # no GPU here: each collective must fail trying CUDA, never by handing the group a CPU tensor
            for name, outcome in result["cuda"].items():  # "Torch not compiled with CUDA", "no NVIDIA driver"
                assert "error" in outcome and not outcome["peer_failure"], (name, outcome)
                assert any(word in outcome["message"].lower() for word in ("cuda", "nvidia")), (name, outcome)


def test_a_cpu_tensor_in_a_group_that_refuses_them_is_reported_as_itself_not_as_a_lost_peer(cuda_only_group):
    for result in cuda_only_group:
        for name, outcome in result["cpu"].items():  # the World told the wrong device: the bug the rule prevents
            if name == "gather episodes":  # objects travel on the group's own device, whatever World.device says
                assert not outcome.get("peer_failure"), outcome
            else:
                assert outcome == {"error": "RuntimeError", "peer_failure": False,
                                   "message": "No backend type associated with device type cpu"}, name


def test_a_peer_that_exits_is_reported_as_another_process_of_this_run_stopped(tmp_path):
    (survivor,) = worker("peer-exits", tmp_path, ranks=1)
    assert survivor["error"] == "PeerFailure"
    assert survivor["message"].startswith("process 0: another process of this run stopped (")
    assert "by peer" in survivor["message"]  # gloo says "closed by peer" or "reset by peer", as the timing falls


@pytest.mark.parametrize("message, lost_peer", [
    # gloo, when the process at the other end has exited or crashed (as torch 2.13 prints them)
    ("[third_party/gloo/gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:4224. This is "
     "typically caused by a remote worker crashing.", True),
    ("[third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:19851: Connection reset by peer.",
     True),
    ("[third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 600000ms for recv operation",
     True),
    # NCCL (worded as ProcessGroupNCCL and NCCL word them): a remote process gone, a peer that hangs
    ("NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited or there was a network error, NCCL version "
     "2.21.5 ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
     "prematurely.", True),
    ("[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 600092 "
     "milliseconds before timing out.", True),
    # this process's own bugs
    ("No backend type associated with device type cpu", False),
    ("Tensors must be CUDA and dense", False),
    ("NCCL error in: ProcessGroupNCCL.cpp:1970, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version "
     "2.21.5 ncclInvalidUsage: This usually reflects invalid usage of NCCL library.", False),
    ("Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1b000", False),
])
def test_only_errors_of_a_lost_peer_count_as_peer_failures(message, lost_peer):
    assert is_peer_failure(RuntimeError(message)) is lost_peer
    assert is_peer_failure(ValueError(message)) is False  # not an error a collective raises for a lost peer
    assert is_peer_failure(ConnectionResetError(message)) is True


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


@pytest.mark.slow  # full tier: torchrun runs
def test_two_processes_solve_cartpole_as_one_run(tmp_path):
    run_dir = tmp_path / "run"
    result = torchrun("-m", "experiments.commands.train", "--env-id", "CartPole-v1", "--run-dir", str(run_dir),
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
        [*TORCHRUN, "-m", "experiments.commands.train", "--env-id", "CartPole-v1", "--total-timesteps", "100000000",
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
    for collective in (SINGLE_PROCESS.average_, SINGLE_PROCESS.sum_, SINGLE_PROCESS.broadcast_):
        y = x.clone()
        assert collective(y) is y and y.equal(x)  # the same tensor, untouched
    assert SINGLE_PROCESS.gather(5) == [5] and SINGLE_PROCESS.mean_of(0.1) == 0.1
    assert SINGLE_PROCESS.seed(7) == 7 and not SINGLE_PROCESS.any(False) and SINGLE_PROCESS.any(True)
    assert SINGLE_PROCESS.device == torch.device("cpu")
    assert SINGLE_PROCESS.whiten(x).equal(normalize_advantages(x))
    # the distributed whitening's moment formula, on one process, is the single-process whitening
    torch.testing.assert_close(whiten_across(SINGLE_PROCESS, x), normalize_advantages(x), rtol=1e-6, atol=1e-6)


def test_sizes_that_do_not_divide_among_the_processes_are_refused_in_one_line():
    from experiments.commands.train import training_envs
    from ppo.trainers.ppo import PPO

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
    result = subprocess.run([sys.executable, "-m", "experiments.commands.train", "--device", "cuda", "--total-timesteps", "8192",
                             "--run-dir", str(run_dir), "--no-progress", "--eval-episodes", "5"],
                            cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.slow  # full tier: torchrun runs
def test_a_two_process_run_stopped_and_resumed_under_torchrun_equals_the_run_left_alone(tmp_path):
    args = ["-m", "experiments.commands.train", "--env-id", "CartPole-v1", "--env-backend", "torch", "--total-timesteps",
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
    assert "torchrun --nproc-per-node 2 -m experiments.commands.train --resume" in err
    assert torchrun("-m", "experiments.commands.train", "--resume", str(run_dir), "--eval-episodes", "0",
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


@pytest.mark.parametrize("rank, says", [("0", True), ("1", False)])
def test_a_user_mistake_under_torchrun_is_said_once_by_process_zero(monkeypatch, capsys, rank, says):
    """Every process meets the same bad argument (--device cuda without a GPU, say): one line in all."""
    from experiments.commands.cli import run_with_user_errors
    from ppo.config import ConfigError

    monkeypatch.setenv("RANK", rank)
    monkeypatch.setenv("WORLD_SIZE", "2")

    def body():
        raise ConfigError("device = 'cuda' but torch sees no CUDA GPU")

    assert run_with_user_errors("ppo-train", body) == 2
    assert (capsys.readouterr().err == "ppo-train: error: device = 'cuda' but torch sees no CUDA GPU\n") == says
