"""One rule for every writer of a run folder (ppo.runs.checkpoint.check_run_folder): a finished or
foreign run is never overwritten, a resumed run whose log is missing says so, and a command
given another kind's folder or file names that kind."""

from __future__ import annotations

import pytest

from envs.factory import make_seed_batch_env, make_vec_env
from experiments.commands import dpo, pretrain_lm, rlhf, train
from ppo.config import ConfigError, PPOConfig
from ppo.runs.checkpoint import save_checkpoint
from ppo.trainers.ppo import PPO

TINY = PPOConfig(env_id="CartPole-v1", num_envs=2, num_steps=16, total_timesteps=64, tensorboard=False,
                 checkpoint_every=0)


def make_envs(config):
    return make_vec_env(config.env_id, config.num_envs, config.env_backend, "cpu", config.frame_stack)


@pytest.fixture
def finished_run(tmp_path):
    """A run folder holding a finished two-iteration PPO run."""
    run_dir = tmp_path / "run"
    PPO(TINY, make_envs(TINY), run_dir=run_dir, progress=False).train()
    return run_dir


def contents(folder):
    return {path.name: path.read_bytes() for path in folder.iterdir() if path.is_file()}


def one_line_error(capsys) -> str:
    error = capsys.readouterr().err
    assert error.count("\n") == 1, error
    return error


def test_a_new_run_is_refused_in_a_folder_holding_a_finished_run_and_the_folder_is_unchanged(finished_run):
    before = contents(finished_run)
    trainer = PPO(TINY.replace(seed=2), make_envs(TINY), run_dir=finished_run, progress=False)
    with pytest.raises(ConfigError, match=f"run_dir {finished_run} already holds a run; use PPO.resume"):
        trainer.train()
    assert contents(finished_run) == before


def test_a_run_folder_that_cannot_be_made_is_refused_by_the_constructor_naming_it_and_why(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(ConfigError, match=f"run_dir {blocker / 'run'} cannot be written \\(Not a directory\\)"):
        PPO(TINY, make_envs(TINY), run_dir=blocker / "run", progress=False)
    folder = tmp_path / "new" / "run"
    PPO(TINY, make_envs(TINY), run_dir=folder, progress=False)
    assert not (tmp_path / "new").exists()  # the check leaves nothing behind


def test_a_seed_batch_member_folder_holding_a_run_is_refused_before_any_member_is_written(finished_run, tmp_path):
    envs = make_seed_batch_env(TINY.env_id, 2, TINY.num_envs, "torch")
    other = tmp_path / "other"
    batch = PPO(TINY.replace(env_backend="torch"), envs, seeds=[1, 2], run_dirs=[other, finished_run], progress=False)
    with pytest.raises(ConfigError, match=f"run_dir {finished_run} already holds a run"):
        batch.train()
    assert not other.exists()


def test_a_finished_run_resumed_with_its_own_budget_is_refused_and_not_rewritten(finished_run):
    before = contents(finished_run)
    trainer = PPO.resume(finished_run, make_envs, progress=False)
    with pytest.raises(ConfigError, match="is complete \\(2 of 2 iterations\\): nothing to train; .* larger "
                                          "total_timesteps"):
        trainer.train()
    assert contents(finished_run) == before
    PPO.resume(finished_run, make_envs, total_timesteps=96, progress=False).train()  # a larger budget trains


@pytest.mark.parametrize("damage", ["deleted", "cut"])
def test_a_run_resumed_without_its_whole_log_is_refused_naming_the_log(finished_run, damage):
    log = finished_run / "metrics.csv"
    if damage == "deleted":
        log.unlink()
    else:
        log.write_text("".join(log.read_text().splitlines(keepends=True)[:2]))  # the header and iteration 1
    before = contents(finished_run)
    trainer = PPO.resume(finished_run, make_envs, total_timesteps=128, progress=False)
    expected = "is missing" if damage == "deleted" else "holds 1 of them"
    with pytest.raises(ConfigError, match=f"has done 2 iterations but its log {log} {expected}"):
        trainer.train()
    assert contents(finished_run) == before


def test_ppo_train_resume_of_a_run_without_its_log_is_refused_in_one_line(finished_run, capsys):
    (finished_run / "metrics.csv").unlink()
    assert train.main(["--resume", str(finished_run), "--total-timesteps", "128", "--no-progress"]) == 2
    assert "its log" in one_line_error(capsys)
    assert sorted(path.name for path in finished_run.iterdir()) == ["checkpoint.pt", "config.json"]


def test_ppo_rlhf_resume_of_a_run_without_its_log_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    from _tiny_lm import tiny_sft

    monkeypatch.setattr(rlhf, "load_or_pretrain_sft", lambda *args, **kwargs: tiny_sft())
    run_dir = tmp_path / "run"
    assert rlhf.main(["--iterations", "2", "--run-dir", str(run_dir), "--batch-size", "8", "--num-minibatches",
                      "2", "--max-new-tokens", "6", "--eval-samples", "8", "--no-progress", "--no-tensorboard",
                      "--sft-cache-dir", str(tmp_path / "cache")]) == 0
    capsys.readouterr()
    (run_dir / "metrics.csv").unlink()
    before = contents(run_dir)
    assert rlhf.main(["--resume", str(run_dir), "--iterations", "3", "--no-progress"]) == 2
    assert f"run {run_dir} has done 2 iterations but its log {run_dir / 'metrics.csv'} is missing" \
        in one_line_error(capsys)
    assert contents(run_dir) == before


def fake_run(folder, *keys):
    """A run folder whose checkpoint has the keys that tell its kind (and nothing else of use)."""
    folder.mkdir()
    save_checkpoint({"config": {}, "iteration": 1, **{key: 0 for key in keys}}, folder / "checkpoint.pt")
    return folder


@pytest.mark.parametrize("command, kind, keys, expected", [
    (dpo, "ppo-rlhf", ("reference", "critic"), "ppo-dpo"),
    (rlhf, "ppo-dpo", ("reference", "policy", "pairs", "comparisons"), "ppo-rlhf"),
    (rlhf, "ppo-train", ("model", "spaces"), "ppo-rlhf"),
    (train, "ppo-rlhf", ("reference", "critic"), "ppo-train"),
    (dpo, "ppo-train", ("model", "spaces"), "ppo-dpo"),
])
def test_a_resume_of_another_commands_run_names_its_kind(tmp_path, capsys, command, kind, keys, expected):
    folder = fake_run(tmp_path / "run", *keys)
    assert command.main(["--resume", str(folder), "--no-progress"]) == 2
    assert f"{folder} is a {kind} run, not a {expected} run" in one_line_error(capsys)


def test_pretrain_lm_out_refuses_to_replace_a_run_checkpoint_or_write_into_a_run_folder(finished_run, capsys):
    before = contents(finished_run)
    tiny = ["--no-cache", "--steps", "2", "--corpus-size", "200", "--val-size", "10", "--batch-size", "8",
            "--eval-interval", "1", "--warmup-steps", "1", "--samples", "2"]
    assert pretrain_lm.main(["--out", str(finished_run / "checkpoint.pt"), *tiny]) == 2
    assert "is a ppo-train run, not an SFT model of ppo-pretrain-lm" in one_line_error(capsys)
    assert pretrain_lm.main(["--out", str(finished_run / "sft.pt"), *tiny]) == 2
    assert f"is inside {finished_run}, which is a ppo-train run" in one_line_error(capsys)
    assert contents(finished_run) == before
    sft = finished_run.parent / "sft.pt"
    assert pretrain_lm.main(["--out", str(sft), *tiny]) == 0
    assert pretrain_lm.main(["--out", str(sft), *tiny]) == 0  # an SFT model of this command may be replaced


def test_a_refused_pretrain_lm_leaves_no_cache_folder(tmp_path, capsys):
    cache = tmp_path / "cache" / "sft"
    assert pretrain_lm.main(["--block-size", "5", "--cache-dir", str(cache), "--steps", "2", "--warmup-steps", "1"]) == 2
    assert "block_size = 5 is too small" in one_line_error(capsys)
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("command", [dpo, rlhf, pretrain_lm])
def test_an_unusable_cache_folder_from_the_environment_is_named_as_the_environment_variable(
        tmp_path, monkeypatch, capsys, command):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("PPO_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.chdir(tmp_path)
    assert command.main([]) == 2
    error = one_line_error(capsys)
    assert f"PPO_CACHE_DIR {blocker / 'cache'} cannot be written" in error and "--sft-cache-dir" not in error
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a-file"]
