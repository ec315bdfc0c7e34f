"""Every way a run stops ends in one line that says what was saved and where: a full disk,
a signal during pretraining, a run that diverges before its first checkpoint."""

from __future__ import annotations

import errno
import os
import signal
from pathlib import Path

import pytest

from envs.factory import make_vec_env
from experiments.commands import dpo, train
from ppo.config import PPOConfig
from ppo.lm.models.pretrain import PretrainingInterrupted
from ppo.runs import checkpoint
from ppo.runs.checkpoint import WriteFailed
from ppo.trainers.base import TrainingDiverged
from ppo.trainers.ppo import PPO

TINY = ["--env-id", "CartPole-v1", "--total-timesteps", "64", "--num-envs", "2", "--num-steps", "16",
        "--eval-episodes", "0", "--no-progress", "--no-tensorboard"]


def one_line_error(capsys) -> str:
    error = capsys.readouterr().err
    assert error.count("\n") == 1, error
    return error


def disk_full(monkeypatch, as_torch_does: bool):
    """torch.save fails as on a full disk: the OSError itself, or (as torch's zip writer does)
    a RuntimeError raised while handling it."""
    def failing_save(*args, **kwargs):
        try:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        except OSError:
            if as_torch_does:
                raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 4736 vs 4630")
            raise

    monkeypatch.setattr(checkpoint.torch, "save", failing_save)


@pytest.mark.parametrize("as_torch_does", [False, True])
def test_a_full_disk_in_a_fresh_run_ends_in_one_line_naming_the_checkpoint_and_that_none_was_saved(
        tmp_path, monkeypatch, capsys, as_torch_does):
    run_dir = tmp_path / "run"
    disk_full(monkeypatch, as_torch_does)
    assert train.main([*TINY, "--run-dir", str(run_dir)]) == 2
    error = one_line_error(capsys)
    assert f"cannot write checkpoint {run_dir / 'checkpoint.pt'} (No space left on device)" in error
    assert "no checkpoint was saved there" in error
    assert not list(run_dir.glob(".*.tmp"))


def test_a_full_disk_on_resume_keeps_the_last_checkpoint_and_says_which(tmp_path, monkeypatch, capsys):
    run_dir = tmp_path / "run"
    assert train.main([*TINY, "--run-dir", str(run_dir)]) == 0
    saved = (run_dir / "checkpoint.pt").read_bytes()
    capsys.readouterr()
    disk_full(monkeypatch, as_torch_does=True)
    assert train.main(["--resume", str(run_dir), "--total-timesteps", "128", "--no-progress"]) == 2
    error = one_line_error(capsys)
    assert f"cannot write checkpoint {run_dir / 'checkpoint.pt'} (No space left on device)" in error
    assert "the checkpoint saved there before is kept (iteration 2)" in error
    assert (run_dir / "checkpoint.pt").read_bytes() == saved


def test_a_full_disk_while_logging_names_metrics_csv_and_the_checkpoint_kept(tmp_path, monkeypatch):
    from ppo.runs import logger

    def full_disk_row(self, row):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    config = PPOConfig(env_id="CartPole-v1", num_envs=2, num_steps=16, total_timesteps=64, tensorboard=False)
    trainer = PPO(config, make_vec_env("CartPole-v1", 2), run_dir=tmp_path / "run", progress=False)
    monkeypatch.setattr(logger.csv.DictWriter, "writerow", full_disk_row)
    with pytest.raises(WriteFailed, match=f"cannot write {tmp_path / 'run' / 'metrics.csv'} \\(No space left on "
                                          "device\\); .* holds no checkpoint"):
        trainer.train()


def test_a_run_diverging_before_its_first_checkpoint_says_there_is_none(tmp_path):
    config = PPOConfig(env_id="CartPole-v1", num_envs=2, num_steps=16, total_timesteps=64, tensorboard=False,
                       learning_rate=1e30)
    trainer = PPO(config, make_vec_env("CartPole-v1", 2), run_dir=tmp_path / "run", progress=False)
    with pytest.raises(TrainingDiverged) as stopped:
        trainer.train()
    assert f"{tmp_path / 'run'} holds no checkpoint, none was due yet" in str(stopped.value)
    assert "the last checkpoint is kept" not in str(stopped.value)
    assert not (tmp_path / "run" / "checkpoint.pt").exists()


def test_ppo_dpo_stopped_while_pretraining_says_what_was_saved_and_leaves_no_run_folder(
        tmp_path, monkeypatch, capsys):
    def pretraining_then_sigterm(corpus, cache_dir=None, stop=None, **kwargs):
        assert stop is not None, "ppo-dpo's pretraining cannot be stopped"
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop()
        partial = Path(cache_dir) / "sft.partial.pt"
        partial.write_bytes(b"progress")
        raise PretrainingInterrupted(3, partial)

    monkeypatch.setattr(dpo, "load_or_pretrain_sft", pretraining_then_sigterm)
    monkeypatch.chdir(tmp_path)
    assert dpo.main(["--sft-cache-dir", str(tmp_path / "cache"), "--no-progress"]) == 130
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error == (f"ppo-dpo: pretraining stopped after step 3; progress saved to {tmp_path / 'cache' / 'sft.partial.pt'}; "
                     "run the same command again to continue")
    assert not (tmp_path / "runs").exists()
