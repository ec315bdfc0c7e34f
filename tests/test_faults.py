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

from ppo.runs.checkpoint import load_checkpoint

REPO = Path(__file__).resolve().parents[1]
WALL_CLOCK_COLUMNS = {"time_s", "steps_per_second"}
ITERATIONS = 24
TORCH_RUN = ["--env-id", "CartPole-v1", "--env-backend", "torch", "--total-timesteps", str(ITERATIONS * 2048),
             "--checkpoint-every", "1", "--eval-episodes", "0", "--no-progress", "--no-tensorboard"]


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "experiments.commands.train", *args]


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


@pytest.mark.slow  # full tier: the default tier resumes after ctrl-c
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
    assert process.returncode == 130 and "Traceback" not in err, f"exit {process.returncode}: {err[-3000:]}"
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
    from ppo.runs.checkpoint import save_checkpoint

    stale = tmp_path / ".checkpoint.pt.abc123.tmp"
    stale.write_bytes(b"half a checkpoint")
    save_checkpoint({"x": 1}, tmp_path / "checkpoint.pt")
    assert not stale.exists()
    assert load_checkpoint(tmp_path / "checkpoint.pt")["x"] == 1


def test_ctrl_c_inside_torch_save_is_an_interrupt_and_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    """A second Ctrl-C can land inside torch.save, whose zip writer then raises a RuntimeError on its way
    out; the command must see the KeyboardInterrupt (exit 130, no traceback), not the RuntimeError."""
    from ppo.runs import checkpoint

    path = tmp_path / "checkpoint.pt"
    checkpoint.save_checkpoint({"x": 1}, path)

    def save_interrupted_midway(contents, file):
        file.write(b"half a checkpoint")
        try:
            raise KeyboardInterrupt
        finally:
            raise RuntimeError("[enforce fail at inline_container.cc] unexpected pos")

    monkeypatch.setattr(checkpoint.torch, "save", save_interrupted_midway)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save_checkpoint({"x": 2}, path)
    assert load_checkpoint(path)["x"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]


@pytest.fixture
def ctrl_c_raises():
    """SIGINT handled as a Python program starts with it, by raising KeyboardInterrupt, for the test's
    length: the tests below are about what a save does with such a Ctrl-C, and a test process may hold
    another handler (one another test or a library in the same worker left, or one set outside Python)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    if previous is not None:  # None: a handler set outside Python, which Python cannot put back
        signal.signal(signal.SIGINT, previous)


def _save_signalled_midway(monkeypatch, *signals):
    """Make torch.save send `signals` to this process halfway through its write."""
    from ppo.runs import checkpoint

    real_save = checkpoint.torch.save

    def save_signalled(contents, file):
        file.write(b"half")
        for signum in signals:
            signal.raise_signal(signum)
        file.seek(0)
        real_save(contents, file)

    monkeypatch.setattr(checkpoint.torch, "save", save_signalled)


def test_ctrl_c_during_a_save_acts_once_the_new_checkpoint_is_in_place(tmp_path, monkeypatch, ctrl_c_raises):
    from ppo.runs.checkpoint import save_checkpoint

    path = tmp_path / "checkpoint.pt"
    save_checkpoint({"x": 1}, path)
    _save_signalled_midway(monkeypatch, signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint({"x": 2}, path)
    assert load_checkpoint(path)["x"] == 2
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.pt"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_two_ctrl_c_during_a_save_first_ask_to_stop_then_abort_after_it(tmp_path, monkeypatch, ctrl_c_raises):
    from experiments.commands.cli import GracefulStop
    from ppo.runs.checkpoint import save_checkpoint

    path = tmp_path / "checkpoint.pt"
    _save_signalled_midway(monkeypatch, signal.SIGINT, signal.SIGINT)
    with GracefulStop("ppo-train") as stop:
        with pytest.raises(KeyboardInterrupt):
            save_checkpoint({"x": 3}, path)
    assert stop.requested and load_checkpoint(path)["x"] == 3


def test_sigterm_during_a_save_reaches_its_handler_after_the_save(tmp_path, monkeypatch):
    from ppo.runs.checkpoint import save_checkpoint

    path = tmp_path / "checkpoint.pt"
    delivered = []

    def handler(signum, frame):
        delivered.append((signum, path.is_file()))

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        _save_signalled_midway(monkeypatch, signal.SIGTERM)
        save_checkpoint({"x": 4}, path)
        assert signal.getsignal(signal.SIGTERM) is handler
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert delivered == [(signal.SIGTERM, True)] and load_checkpoint(path)["x"] == 4


def test_a_save_from_another_thread_runs_without_holding_signals(tmp_path):
    import threading

    from ppo.runs.checkpoint import save_checkpoint

    errors = []

    def save():
        try:
            save_checkpoint({"x": 5}, tmp_path / "checkpoint.pt")
        except BaseException as error:  # noqa: BLE001 (reported below)
            errors.append(error)

    thread = threading.Thread(target=save)
    thread.start()
    thread.join()
    assert errors == [] and load_checkpoint(tmp_path)["x"] == 5


def test_checkpoint_follows_the_umask(tmp_path):
    from ppo.runs.checkpoint import save_checkpoint

    previous = os.umask(0o022)
    try:
        save_checkpoint({"x": 1}, tmp_path / "checkpoint.pt")
    finally:
        os.umask(previous)
    assert (tmp_path / "checkpoint.pt").stat().st_mode & 0o777 == 0o644


# ---------------------------------------------------------------- the checkpoint file

MARKED = {"model": {"weight": torch.linspace(-1.0, 1.0, 24).reshape(4, 6)}, "note": "unmistakable", "count": 7,
          "values": [1, 2.5, None, (3, 4), True]}


def assert_same_contents(state: dict, expected: dict) -> None:
    assert torch.equal(state["model"]["weight"], expected["model"]["weight"])
    assert {k: v for k, v in state.items() if k != "model"} == {k: v for k, v in expected.items() if k != "model"}


def flipped(path: Path, position: int) -> Path:
    data = bytearray(path.read_bytes())
    data[position] ^= 0x10
    damaged = path.with_name("damaged.pt")
    damaged.write_bytes(bytes(data))
    return damaged


def test_a_checkpoint_opens_with_plain_torch_load_weights_only(tmp_path):
    from experiments.commands.train import training_envs
    from ppo.config import PPOConfig
    from ppo.trainers.ppo import PPO

    config = PPOConfig(env_id="CartPole-v1", env_backend="torch", num_envs=4, num_steps=16, total_timesteps=64,
                       tensorboard=False)
    trainer = PPO(config, training_envs(config), run_dir=tmp_path, progress=False)
    trainer.train()
    state = torch.load(tmp_path / "checkpoint.pt", weights_only=True)  # what every PyTorch user tries first
    assert state["iteration"] == 1 and state["config"]["env_id"] == "CartPole-v1"
    for name, tensor in trainer.model.state_dict().items():
        assert torch.equal(state["model"][name], tensor), name


def test_a_flipped_byte_in_the_tensors_or_the_plain_data_is_caught(tmp_path):
    from ppo.runs.checkpoint import CheckpointError, save_checkpoint

    path = tmp_path / "checkpoint.pt"
    save_checkpoint(MARKED, path)
    data = path.read_bytes()
    in_tensor = data.index(MARKED["model"]["weight"].numpy().tobytes()) + 37
    in_string = data.index(b"unmistakable") + 3
    for position in (in_tensor, in_string):  # torch itself reads both back without complaint
        assert torch.load(flipped(path, position), weights_only=True) is not None
        with pytest.raises(CheckpointError, match=r"^checkpoint \S+damaged.pt is corrupt \(its checksum does not match"):
            load_checkpoint(flipped(path, position))


def test_no_flipped_byte_anywhere_goes_unnoticed(tmp_path):
    """A flip anywhere in the file is caught (one line), or changes nothing the file holds
    (zip padding, the archive's own bookkeeping): 150 positions spread over the whole file."""
    from ppo.runs.checkpoint import CheckpointError, save_checkpoint

    path = tmp_path / "checkpoint.pt"
    save_checkpoint(MARKED, path)
    size = path.stat().st_size
    caught = 0
    for position in range(0, size, max(1, size // 150)):
        try:
            state = load_checkpoint(flipped(path, position))
        except CheckpointError as error:
            message = str(error)
            assert "\n" not in message and ("corrupt" in message or "not a checkpoint" in message), message
            caught += 1
        else:
            assert_same_contents(state, {"format": 3, **MARKED})
    assert caught > 0


def write_format_2(state: dict, path: Path) -> None:
    """A checkpoint as this project wrote them before they became plain torch files: a
    header (magic, sha256 of the payload in hex, newline) and then the torch.save payload."""
    import hashlib
    import io

    buffer = io.BytesIO()
    torch.save({"format": 2, **state}, buffer)
    payload = buffer.getvalue()
    path.write_bytes(b"PPO-CHECKPOINT-2 " + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)


def test_checkpoints_of_the_older_formats_still_load(tmp_path):
    from ppo.runs.checkpoint import CheckpointError

    write_format_2(MARKED, tmp_path / "format2.pt")
    assert_same_contents(load_checkpoint(tmp_path / "format2.pt"), {"format": 2, **MARKED})
    position = tmp_path.joinpath("format2.pt").read_bytes().index(b"unmistakable")
    with pytest.raises(CheckpointError, match="is corrupt \\(its checksum does not match"):
        load_checkpoint(flipped(tmp_path / "format2.pt", position))

    torch.save({"format": 1, **MARKED}, tmp_path / "format1.pt")  # a bare torch.save, no checksum
    assert_same_contents(load_checkpoint(tmp_path / "format1.pt"), {"format": 1, **MARKED})


def test_a_loaded_checkpoint_saved_again_gets_a_fresh_checksum(tmp_path):
    from ppo.runs.checkpoint import save_checkpoint

    write_format_2(MARKED, tmp_path / "old.pt")
    state = load_checkpoint(tmp_path / "old.pt")
    state["count"] = 8
    save_checkpoint(state, tmp_path / "new.pt")
    assert load_checkpoint(tmp_path / "new.pt")["count"] == 8
    assert torch.load(tmp_path / "new.pt", weights_only=True)["format"] == 3


def test_the_checksum_tells_apart_what_prints_alike():
    from ppo.runs.checkpoint import content_digest

    digests = {content_digest(value) for value in (
        [1], [1.0], [True], ["1"], (1,), {"a": 1}, {"a": 1.0},
        torch.zeros(2, 3), torch.zeros(3, 2), torch.zeros(6), torch.zeros(6, dtype=torch.int32),
        {"a": 1, "b": 2}, {"b": 2, "a": 1},
    )}
    assert len(digests) == 13
    assert content_digest({"w": torch.arange(6.0).reshape(2, 3).t()}) == \
           content_digest({"w": torch.tensor([[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]])})  # a view: its values count


# ---------------------------------------------------------------- normalised observations after a resume

def test_resumed_gymnasium_run_normalises_its_first_observation_with_the_loaded_statistics(tmp_path):
    """The gymnasium backend cannot checkpoint its envs, so a resumed run starts fresh episodes.
    Their first observation must be normalised with the checkpoint's statistics (after merging
    that observation, as every observation is merged before the network sees it), not with
    the statistics of a fresh normaliser, which put every entry near ±1."""
    from experiments.commands.train import training_envs
    from ppo.config import PPOConfig
    from ppo.trainers.ppo import PPO

    config = PPOConfig(env_id="CartPole-v1", env_backend="gymnasium", num_envs=4, num_steps=32,
                       total_timesteps=4 * 128, normalize_obs=True, tensorboard=False)
    PPO(config, training_envs(config), run_dir=tmp_path, progress=False).train(callback=lambda t, m: t.iteration == 2)
    saved = load_checkpoint(tmp_path)["obs_normalizer"]["stats"]
    resumed = PPO.resume(tmp_path, training_envs, progress=False)

    raw = training_envs(config).reset(seed=config.seed).double()  # (N, 4) the fresh episodes' first observation
    # Chan et al.'s merge of (μ_a, σ²_a, n_a) with the batch's moments, written out by hand
    n_a, n_b = saved["count"], raw.shape[0]
    delta = raw.mean(0) - saved["mean"]
    mean = saved["mean"] + delta * n_b / (n_a + n_b)
    var = (saved["var"] * n_a + raw.var(0, unbiased=False) * n_b + delta**2 * n_a * n_b / (n_a + n_b)) / (n_a + n_b)
    expected = ((raw - mean) / torch.sqrt(var + 1e-8)).clamp(-config.obs_clip, config.obs_clip).float()
    torch.testing.assert_close(resumed.next_obs, expected, rtol=0, atol=1e-6)  # float32 rounding of float64 maths
    fresh = (raw - raw.mean(0)) / raw.std(0, unbiased=False)  # what a fresh normaliser gives, about
    assert not torch.allclose(resumed.next_obs.double(), fresh, atol=0.05)
