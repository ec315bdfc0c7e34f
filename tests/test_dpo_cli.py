"""`ppo-dpo`: its help, one-line refusals that leave nothing behind, and a tiny run's folder."""

import json

import pytest
import torch
from _tiny_lm import one_torch_thread, tiny_sft  # noqa: F401 (one_torch_thread is an autouse fixture)

from experiments.commands import dpo
from ppo.lm.trainers.rlhf_trainer import load_lm_policy


def exit_code(argv: list[str]) -> int:
    try:
        return dpo.main(argv)
    except SystemExit as stop:  # argparse's own exits (--help, a malformed value) come from inside parse_args
        return stop.code


def test_help_lists_every_dpo_setting_and_the_comparisons(capsys):
    assert exit_code(["--help"]) == 0
    text = capsys.readouterr().out
    for flag in ("--beta", "--loss", "--learning-rate", "--anneal-lr", "--epochs", "--batch-size", "--grad-clip",
                 "--seed", "--pairs", "--rater-noise", "--max-new-tokens", "--target-food", "--run-dir"):
        assert flag in text, flag
    assert "--reward-model-steps" not in text  # the food task's reward-model settings do not apply


@pytest.mark.parametrize("argv, message", [
    (["--beta", "0"], "beta = 0.0 must be a finite number > 0"),
    (["--loss", "kto"], "loss = 'kto' is not one of dpo, ipo"),
    (["--rater-noise", "0"], "rater_noise = 0.0 must be a finite number > 0"),
    (["--pairs", "0"], "pairs = 0 must be a positive integer"),
    (["--target-food", "burger"], "target_food = 'burger' is not a food of the corpus"),
    (["--grad-clip", "-1"], "grad_clip = -1.0 must be a finite number > 0"),
    (["--epochs", "two"], "invalid int value"),
    (["--max-new-tokens", "40"], "max_new_tokens = 40 does not fit"),  # checked once the SFT model is loaded
])
def test_bad_values_get_one_line_exit_code_2_and_nothing_written(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(dpo, "load_or_pretrain_sft", lambda *args, **kwargs: tiny_sft())
    monkeypatch.chdir(tmp_path)
    for where in ([], ["--run-dir", "run"]):
        assert exit_code([*argv, *where, "--no-progress", "--sft-cache-dir", "cache"]) == 2
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and error.startswith("ppo-dpo: error:") and message in error, error
        assert {path.name for path in tmp_path.iterdir()} <= {"cache"}  # no run folder, no runs/


def test_a_tiny_run_writes_its_folder_and_a_checkpoint_that_loads_without_code(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(dpo, "load_or_pretrain_sft", lambda *args, **kwargs: tiny_sft())
    run_dir = tmp_path / "run"
    argv = ["--pairs", "300", "--epochs", "2", "--batch-size", "32", "--max-new-tokens", "12", "--eval-samples", "50",
            "--no-progress", "--run-dir", str(run_dir), "--sft-cache-dir", str(tmp_path / "cache")]
    assert exit_code(argv) == 0
    out = capsys.readouterr().out
    assert "TV to π*_β" in out and "pizza rate (exact)" in out
    assert sorted(p.name for p in run_dir.iterdir()) == ["checkpoint.pt", "config.json", "metrics.csv",
                                                         "summary.json", "task.json"]
    assert json.loads((run_dir / "config.json").read_text())["epochs"] == 2
    assert len((run_dir / "metrics.csv").read_text().splitlines()) == 3  # header + one row per epoch
    summary = json.loads((run_dir / "summary.json").read_text())
    measures = summary["measures"]
    assert measures["optimum"]["tv_to_optimum"] == 0.0 and 0 < measures["sft"]["tv_to_optimum"] < 1
    state = torch.load(run_dir / "checkpoint.pt", weights_only=True)
    assert not torch.equal(state["policy"]["token_embedding.weight"], state["reference"]["token_embedding.weight"])
    policy, reference, _ = load_lm_policy(run_dir / "checkpoint.pt")  # the library's loader reads it too
    assert torch.equal(reference.token_embedding.weight, tiny_sft()[0].token_embedding.weight)
    # a second run into the same folder is refused, and the first run's files are kept
    before = {p.name: p.read_bytes() for p in run_dir.iterdir()}
    assert exit_code(argv) == 2
    assert "already holds a run" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in run_dir.iterdir()} == before


class StopAfterTheFirstEpoch:
    """Stands in for GracefulStop: as if Ctrl-C came during the first epoch."""

    def __init__(self, *args):
        self.requested = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_a_stopped_run_resumes_to_what_the_uninterrupted_run_trains(capsys, tmp_path, monkeypatch):
    """Stopped after epoch 1 of 3 and resumed with --resume, the run logs the epochs and ends
    with the weights of the run never stopped, bit for bit; the comparisons come from its checkpoint."""
    monkeypatch.setattr(dpo, "load_or_pretrain_sft", lambda *args, **kwargs: tiny_sft())
    settings = ["--pairs", "200", "--epochs", "3", "--batch-size", "32", "--max-new-tokens", "12", "--eval-samples",
                "20", "--no-progress", "--sft-cache-dir", str(tmp_path / "cache")]
    whole, parts = tmp_path / "whole", tmp_path / "parts"
    assert exit_code([*settings, "--run-dir", str(whole)]) == 0
    with monkeypatch.context() as patch:
        patch.setattr(dpo, "GracefulStop", StopAfterTheFirstEpoch)
        assert exit_code([*settings, "--run-dir", str(parts)]) == 130
    assert f"stopped after epoch 1 of 3; checkpoint saved. Resume with: ppo-dpo --resume {parts}" \
        in capsys.readouterr().err
    assert len((parts / "metrics.csv").read_text().splitlines()) == 2 and not (parts / "summary.json").exists()
    assert exit_code(["--resume", str(parts), "--no-progress", "--eval-samples", "20"]) == 0
    assert "resuming" in capsys.readouterr().out
    assert (parts / "metrics.csv").read_text() == (whole / "metrics.csv").read_text()
    resumed, uninterrupted = (torch.load(folder / "checkpoint.pt", weights_only=True) for folder in (parts, whole))
    assert all(torch.equal(resumed["policy"][name], value) for name, value in uninterrupted["policy"].items())
    assert (json.loads((parts / "summary.json").read_text())["measures"]
            == json.loads((whole / "summary.json").read_text())["measures"])


def test_resume_refuses_a_changed_setting_and_a_complete_run(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(dpo, "load_or_pretrain_sft", lambda *args, **kwargs: tiny_sft())
    run_dir = tmp_path / "run"
    assert exit_code(["--pairs", "100", "--epochs", "1", "--batch-size", "32", "--max-new-tokens", "12",
                      "--eval-samples", "10", "--no-progress", "--run-dir", str(run_dir),
                      "--sft-cache-dir", str(tmp_path / "cache")]) == 0
    capsys.readouterr()
    before = {path.name: path.read_bytes() for path in run_dir.iterdir()}
    for argv, message in [(["--beta", "2"], "none may change (got --beta)"),
                          (["--pairs", "50"], "none may change (got --pairs)"),
                          ([], "is complete (1 epoch); start a new run")]:
        assert exit_code(["--resume", str(run_dir), *argv]) == 2
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and message in error, error
    assert exit_code(["--resume", str(tmp_path / "nowhere")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert {path.name: path.read_bytes() for path in run_dir.iterdir()} == before
