"""One process per run folder (experiments.commands.run_folder), in the library and through the real commands.

The command tests start real processes. To make "a second command while the first is
training" deterministic, the first is frozen with SIGSTOP once it has claimed its folder
and logged an iteration, the second runs, and the first is woken with SIGCONT to finish.
"""

import csv
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from experiments.commands import rlhf, train
from experiments.commands.run_folder import (
    LOCK_NAME,
    RunFolderBusy,
    RunFolderClaims,
    claim_fresh_run_folder,
    claim_run_folder,
)
from ppo.runs.checkpoint import load_checkpoint

REPO = Path(__file__).resolve().parents[1]
BATCH = 4 * 32
RUN = ["--env-id", "CartPole-v1", "--env-backend", "torch", "--num-envs", "4", "--num-steps", "32",
       "--eval-episodes", "0", "--no-progress", "--no-tensorboard", "--checkpoint-every", "1"]


# ---------------------------------------------------------------------------------------- the library
def test_a_held_folder_refuses_a_second_claim_and_is_free_after_release(tmp_path):
    folder = tmp_path / "run"
    with claim_run_folder(folder, "test") as first:
        assert (folder / LOCK_NAME).read_text().strip() == str(os.getpid())
        with pytest.raises(RunFolderBusy, match=f"run folder {folder} is in use by process {os.getpid()}"):
            claim_run_folder(folder, "test")  # flock: a second open file of the same process conflicts too
        (folder / "metrics.csv").write_text("step\n")
    assert not (folder / LOCK_NAME).exists()
    assert first.path == folder and (folder / "metrics.csv").exists()  # a folder with a run in it stays
    with claim_run_folder(folder, "test"):
        pass


def test_release_removes_only_the_empty_folders_the_claim_made(tmp_path):
    existing = tmp_path / "existing"
    existing.mkdir()
    with claim_run_folder(existing, "test"):
        pass
    assert existing.is_dir() and list(existing.iterdir()) == []  # not made by the claim: kept
    with claim_run_folder(tmp_path / "made" / "deeper" / "run", "test"):
        pass
    assert sorted(path.name for path in tmp_path.iterdir()) == ["existing"]


def test_a_fresh_name_skips_taken_names(tmp_path):
    (tmp_path / "run").mkdir()
    (tmp_path / "run__2").write_text("a file takes the name too")
    with RunFolderClaims("test") as claims:
        assert claims.fresh(tmp_path / "run") == tmp_path / "run__3"
        assert claims.fresh(tmp_path / "run") == tmp_path / "run__4"


def _claim_fresh_at_once(base: str, barrier, results) -> None:
    barrier.wait()
    claim = claim_fresh_run_folder(Path(base), "test")
    results.put(str(claim.path))
    barrier.wait()  # hold it until every process has claimed
    claim.release()


def test_processes_claiming_fresh_names_at_once_all_get_their_own_folder(tmp_path):
    count = 6
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(count), context.Queue()
    workers = [context.Process(target=_claim_fresh_at_once, args=(str(tmp_path / "runs" / "run"), barrier, results))
               for _ in range(count)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert [worker.exitcode for worker in workers] == [0] * count
    names = sorted(Path(results.get(timeout=5)).name for _ in range(count))
    assert names == sorted(["run", *(f"run__{number}" for number in range(2, count + 1))])
    assert list(tmp_path.glob("runs/*")) == []  # all released while empty: all removed


def test_a_folder_that_is_a_file_is_refused_in_one_line(tmp_path):
    (tmp_path / "a_file").write_text("")
    with pytest.raises(ValueError, match="run_dir .*a_file/run cannot be written"):
        claim_run_folder(tmp_path / "a_file" / "run", "test")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a_file"]


# ---------------------------------------------------------------------------------------- the commands
def start(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "experiments.commands.train", *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})


def run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "experiments.commands.train", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})


def metrics_rows(run_dir: Path) -> list[dict]:
    if not (run_dir / "metrics.csv").exists():
        return []
    with open(run_dir / "metrics.csv", newline="") as file:
        return list(csv.DictReader(file))


def wait_for(condition, process: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 120
    while not condition():
        assert process.poll() is None, f"the run ended before {what}: {process.communicate()[1]}"
        assert time.monotonic() < deadline, f"no {what} after 120 s"
        time.sleep(0.01)


def frozen_while_training(run_dir: Path, iterations: int) -> subprocess.Popen:
    """A run of `iterations` in `run_dir`, stopped with SIGSTOP once it has logged an iteration and saved a checkpoint."""
    process = start([*RUN, "--total-timesteps", str(iterations * BATCH), "--run-dir", str(run_dir)])
    wait_for(lambda: len(metrics_rows(run_dir)) >= 1 and (run_dir / "checkpoint.pt").exists(), process,
             "a first iteration")
    process.send_signal(signal.SIGSTOP)
    return process


def assert_intact(run_dir: Path, iterations: int) -> None:
    """The folder of one whole run: its config, every iteration's row once, its final checkpoint, no lock."""
    assert json.loads((run_dir / "config.json").read_text())["total_timesteps"] == iterations * BATCH
    rows = metrics_rows(run_dir)
    assert [int(row["iteration"]) for row in rows] == list(range(1, iterations + 1))
    assert all(float(value) == float(value) for row in rows for value in row.values() if value)  # all numbers
    assert load_checkpoint(run_dir)["iteration"] == iterations
    assert not (run_dir / LOCK_NAME).exists()
    assert not list(run_dir.glob(".*.tmp"))


def one_line(stderr: str) -> str:
    assert stderr.count("\n") == 1 and "Traceback" not in stderr, stderr
    return stderr.strip()


@pytest.mark.parametrize("second", ["--run-dir", "--resume"])
def test_a_second_command_on_a_live_run_is_refused_and_the_run_finishes_intact(tmp_path, second):
    run_dir, iterations = tmp_path / "run", 6
    first = frozen_while_training(run_dir, iterations)
    try:
        args = [*RUN, "--total-timesteps", str(iterations * BATCH), "--run-dir", str(run_dir)] \
            if second == "--run-dir" else ["--resume", str(run_dir), "--no-progress"]
        refused = run(args)
        assert load_checkpoint(run_dir)["iteration"] >= 1  # the live run's files untouched
    finally:
        first.send_signal(signal.SIGCONT)
    assert refused.returncode == 2 and refused.stdout == ""
    hint = "choose another --run-dir" if second == "--run-dir" else "let it finish, or stop it (Ctrl-C) before resuming"
    assert one_line(refused.stderr) == (f"ppo-train: error: run folder {run_dir} is in use by process {first.pid}, "
                                        f"which is still running there; {hint}")
    _, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert_intact(run_dir, iterations)


def test_two_commands_started_together_on_one_folder_one_trains_one_is_refused(tmp_path):
    run_dir, iterations = tmp_path / "run", 4
    args = [*RUN, "--total-timesteps", str(iterations * BATCH), "--run-dir", str(run_dir)]
    processes = [start(args), start(args)]
    results = [(process.wait(timeout=300), *process.communicate()) for process in processes]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 2], results
    refused = next(err for code, _, err in results if code == 2)
    winner = next(process.pid for process, (code, _, _) in zip(processes, results) if code == 0)
    # the loser found the folder held: by the winner's recorded pid, or by "another process" when
    # it looked between the winner's flock and its writing of the pid (experiments/commands/run_folder.py);
    # or, had the winner already finished, the folder holding a run
    held = (f"is in use by process {winner}," in one_line(refused)
            or "is in use by another process," in one_line(refused))
    assert held or "already holds a run" in refused
    assert_intact(run_dir, iterations)


def test_a_folder_whose_run_was_killed_is_taken_over_with_a_note(tmp_path):
    run_dir, iterations = tmp_path / "run", 6
    process = frozen_while_training(run_dir, iterations)
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=60)
    assert (run_dir / LOCK_NAME).read_text().strip() == str(process.pid)  # left behind by the killed process
    resumed = run(["--resume", str(run_dir), "--no-progress"])
    assert resumed.returncode == 0, resumed.stderr
    assert one_line(resumed.stderr) == (f"ppo-train: taking over run folder {run_dir}: process {process.pid}, "
                                        "which held it, is gone")
    assert_intact(run_dir, iterations)


def test_every_member_folder_of_a_seed_batch_is_held_while_it_trains(tmp_path):
    parent = tmp_path / "runs"
    process = start([*RUN, "--total-timesteps", str(6 * BATCH), "--seeds", "1-2", "--run-dir", str(parent)])
    members = lambda: sorted(parent.glob("CartPole-v1__*__seed[12]"))  # noqa: E731
    wait_for(lambda: len(members()) == 2 and all(metrics_rows(member) for member in members()), process,
             "an iteration of both seeds")
    members = members()
    process.send_signal(signal.SIGSTOP)
    try:
        for member in members:
            with pytest.raises(RunFolderBusy, match=f"in use by process {process.pid}"):
                claim_run_folder(member, "test")
    finally:
        process.send_signal(signal.SIGCONT)
    _, err = process.communicate(timeout=300)
    assert process.returncode == 0, err
    assert all(not (member / LOCK_NAME).exists() for member in members)


def test_ppo_train_in_process_is_refused_on_a_held_folder(tmp_path, capsys):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with claim_run_folder(run_dir, "test"):
        assert train.main([*RUN, "--total-timesteps", str(2 * BATCH), "--run-dir", str(run_dir)]) == 2
    assert "is in use by process" in one_line(capsys.readouterr().err)
    assert list(run_dir.iterdir()) == []


def test_ppo_rlhf_is_refused_on_a_held_folder_for_a_new_run_and_a_resume(tmp_path, capsys):
    from experiments.tasks.food_task import FoodTaskConfig

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "task.json").write_text(json.dumps(FoodTaskConfig().to_dict()))
    with claim_run_folder(run_dir, "test"):
        assert rlhf.main(["--run-dir", str(run_dir), "--no-progress", "--sft-cache-dir", str(tmp_path / "cache")]) == 2
        assert "choose another --run-dir" in one_line(capsys.readouterr().err)
        assert rlhf.main(["--resume", str(run_dir), "--no-progress"]) == 2
        assert "before resuming" in one_line(capsys.readouterr().err)
    assert sorted(path.name for path in run_dir.iterdir()) == ["task.json"]


def test_a_refused_command_names_the_winner_that_has_not_written_its_id_yet(tmp_path):
    """The winner of a race locks the folder and then writes its id: the loser, refused in
    between, waits for the id rather than saying "another process"."""
    from experiments.commands.run_folder import LOCK_NAME, RunFolderBusy, claim_run_folder

    folder = tmp_path / "run"
    folder.mkdir()
    (folder / LOCK_NAME).write_text("")
    winner = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time\n"
         f"fd = os.open({str(folder / LOCK_NAME)!r}, os.O_RDWR)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX)\nprint('locked', flush=True)\ntime.sleep(0.2)\n"
         "os.pwrite(fd, f'{os.getpid()}\\n'.encode(), 0)\ntime.sleep(30)\n"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert winner.stdout.readline().strip() == "locked"
        with pytest.raises(RunFolderBusy, match=f"in use by process {winner.pid}, which is still running"):
            claim_run_folder(folder, "ppo-train")
    finally:
        winner.kill()
        winner.wait()
