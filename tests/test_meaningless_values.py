"""Values the commands used to accept though they mean nothing, refused in one line by the command and the API alike.

Seeds outside [0, 2**63 − 1]; more seeds than the process can keep files open for; a success
threshold that is not a number; an empty run folder; a resumed budget below the run's own;
a damaged metrics.csv; a warmup as long as the pretraining.
"""

from __future__ import annotations

import pytest
import torch

from envs.factory import make_seed_batch_env, make_vec_env
from experiments.commands import plot, pretrain_lm, sweep, train
from ppo.config import MAX_SEED, ConfigError, PPOConfig, open_files_left
from ppo.lm.models.pretrain import PretrainConfig
from ppo.lm.trainers.dpo import DPOConfig
from ppo.trainers.ppo import PPO
from _commands import run_command

TINY = ["--env-id", "CartPole-v1", "--env-backend", "torch", "--num-envs", "2", "--num-steps", "16",
        "--num-minibatches", "2", "--total-timesteps", "64", "--eval-episodes", "0", "--no-progress",
        "--no-tensorboard"]
TINY_CONFIG = PPOConfig(env_id="CartPole-v1", env_backend="torch", num_envs=2, num_steps=16, num_minibatches=2,
                        total_timesteps=64, tensorboard=False)


def refused(main, argv, capsys, prog: str = "ppo-train") -> str:
    """The one line a refused command printed, without its `PROG: error: ` prefix."""
    code, err = run_command(main, argv, capsys)
    assert code == 2 and err.count("\n") == 1 and err.startswith(f"{prog}: error: "), err
    return err.removeprefix(f"{prog}: error: ").rstrip("\n")


def api_message(call) -> str:
    with pytest.raises(ConfigError) as error:
        call()
    return str(error.value)


# ---------------------------------------------------------------- seeds


@pytest.mark.parametrize("seed", [-1, MAX_SEED + 1, 99999999999999999999])
def test_a_seed_outside_the_generators_range_is_refused_by_the_command_and_the_api(seed, tmp_path, capsys):
    message = f"seed = {seed} must be an integer in [0, 2**63 - 1]"
    shown = message  # an integer no int64 holds is refused by the parser, as for every integer flag:
    if seed > MAX_SEED:
        shown = f"argument --seed: {seed} is beyond what an integer setting holds (at most 2**63 - 1)"
    assert refused(train.main, [*TINY, "--seed", str(seed), "--run-dir", str(tmp_path / "run")], capsys) == shown
    assert refused(train.main, [*TINY, "--seed", f"1,{seed}", "--run-dir", str(tmp_path / "runs")], capsys) == shown
    assert api_message(lambda: TINY_CONFIG.replace(seed=seed).validate()) == message
    assert not list(tmp_path.iterdir())


def test_seeds_beyond_the_range_are_refused_by_the_api_batch_and_the_lm_configs():
    message = f"seed = {MAX_SEED + 1} must be an integer in [0, 2**63 - 1]"
    envs = make_seed_batch_env("CartPole-v1", 2, 2, "torch", torch.device("cpu"), 1)
    assert api_message(lambda: PPO(TINY_CONFIG, envs, seeds=[1, MAX_SEED + 1], progress=False)) == message
    assert api_message(lambda: DPOConfig(seed=MAX_SEED + 1).validate()) == message
    assert api_message(lambda: PretrainConfig(seed=-1).validate()) == "seed = -1 must be an integer in [0, 2**63 - 1]"


def test_the_largest_seed_trains():
    trainer = PPO(TINY_CONFIG.replace(seed=MAX_SEED), make_vec_env("CartPole-v1", 2, "torch"), progress=False)
    trainer.train()
    assert trainer.global_step == 64


def test_more_seeds_than_files_the_process_may_open_are_refused_before_any_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sweep, "open_files_left", lambda: 100)  # two files a run: 50 seeds of one setting
    sweep.check_open_files(50, 1, "seeds = '1-50'")
    message = refused(train.main, [*TINY, "--seeds", "1-51", "--run-dir", str(tmp_path)], capsys)
    assert message == ("seeds = '1-51': 51 runs keep 102 files open (each run folder's lock, and its metrics.csv "
                       "while it trains), but this process may open 100 more (ulimit -n); give at most 50 seeds, "
                       "or raise ulimit -n")
    grid = refused(train.main, [*TINY, "--learning-rate", "1e-3,2e-3", "--seeds", "1-34", "--run-dir", str(tmp_path)],
                   capsys)
    assert "2 settings × 34 seeds keep 102 files open" in grid and "give at most 33 seeds" in grid
    assert "give at most 33 seeds" in refused(train.main, [*TINY, "--learning-rate", "1e-3,2e-3", "--seed",
                                                           ",".join(map(str, range(34)))], capsys)
    assert not list(tmp_path.iterdir())


def test_a_huge_seed_range_is_refused_without_listing_it(capsys):
    if open_files_left() is None:
        pytest.skip("this system reports no limit on open files")
    assert "give at most" in refused(train.main, [*TINY, "--seeds", f"0-{MAX_SEED}"], capsys)


# ---------------------------------------------------------------- the success threshold


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_success_threshold_that_is_no_number_is_refused_before_any_run(value, tmp_path, capsys):
    message = refused(train.main, [*TINY, "--seeds", "1-2", "--success-threshold", value, "--run-dir", str(tmp_path)],
                      capsys)
    assert message == f"success_threshold = {float(value)} must be a finite number"
    assert not list(tmp_path.iterdir())


def test_a_success_threshold_has_no_effect_on_one_run(tmp_path, capsys):
    message = refused(train.main, [*TINY, "--success-threshold", "400", "--run-dir", str(tmp_path / "run")], capsys)
    assert message.startswith("success_threshold = 400 has no effect with one run")
    assert not list(tmp_path.iterdir())


# ---------------------------------------------------------------- run folders and budgets


@pytest.mark.parametrize("flag", ["--run-dir", "--resume"])
@pytest.mark.parametrize("more", [[], ["--seeds", "1-2"]])
def test_an_empty_folder_path_is_refused_and_the_current_folder_stays_empty(flag, more, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = [flag, ""] if flag == "--resume" else [*TINY, *more, flag, ""]
    message = refused(train.main, argv, capsys)
    name = flag[2:].replace("-", "_")
    assert message == f"{name} = '' is an empty path, which would be the current folder; give a folder"
    assert not list(tmp_path.iterdir())


def test_a_resumed_budget_below_the_runs_own_is_refused_naming_both(tmp_path, capsys):
    run_dir = tmp_path / "run"
    config = TINY_CONFIG.replace(total_timesteps=256)
    trainer = PPO(config, make_vec_env("CartPole-v1", 2, "torch"), run_dir=run_dir, progress=False)
    trainer.train(callback=lambda trainer, metrics: trainer.iteration == 2)  # 64 of 256 steps done
    before = {path.name: path.read_bytes() for path in run_dir.iterdir()}
    message = refused(train.main, ["--resume", str(run_dir), "--total-timesteps", "128", "--no-progress"], capsys)
    assert message == (f"total_timesteps = 128 is below the budget of run {run_dir}, 256 (it has done 64 steps): a "
                       "resumed run's budget only grows; give total_timesteps ≥ 256, or leave it unset")
    assert {path.name: path.read_bytes() for path in run_dir.iterdir()} == before
    assert train.main(["--resume", str(run_dir), "--total-timesteps", "256", "--no-progress", "--eval-episodes",
                       "0"]) == 0


# ---------------------------------------------------------------- ppo-plot on a damaged metrics.csv


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("plot") / "run"
    assert train.main([*TINY, "--total-timesteps", "128", "--run-dir", str(run_dir)]) == 0
    return run_dir


@pytest.mark.parametrize("damage, what", [
    (lambda line: line + ",1,2", "values under a header of"),
    (lambda line: line.rsplit(",", 1)[0], "values under a header of"),
    (lambda line: "abc" + line[line.index(","):], "global_step = 'abc' is not a number"),
])
def test_ppo_plot_names_the_file_and_line_of_a_damaged_metrics_csv(finished_run, damage, what, tmp_path, capsys):
    import shutil
    run_dir = tmp_path / "run"
    shutil.copytree(finished_run, run_dir)
    metrics = run_dir / "metrics.csv"
    lines = metrics.read_text().splitlines()
    lines[2] = damage(lines[2])
    metrics.write_text("\n".join(lines) + "\n")
    message = refused(plot.main, [str(run_dir), "--out", str(tmp_path / "plots")], capsys, prog="ppo-plot")
    assert message.startswith(f"{metrics} line 3: ") and what in message, message
    assert not (tmp_path / "plots").exists()


# ---------------------------------------------------------------- pretraining


def test_a_warmup_as_long_as_the_pretraining_is_refused_and_nothing_is_cached(tmp_path, capsys):
    message = ("warmup_steps = 5000 must be less than steps = 100: the learning rate rises to its peak over the "
               "warmup, then decays over the steps left")
    assert api_message(lambda: PretrainConfig(warmup_steps=5000, steps=100).validate()) == message
    assert api_message(lambda: PretrainConfig(warmup_steps=100, steps=100).validate()).startswith("warmup_steps = 100")
    argv = ["--warmup-steps", "5000", "--steps", "100", "--cache-dir", str(tmp_path / "cache")]
    assert refused(pretrain_lm.main, argv, capsys, prog="ppo-pretrain-lm") == message
    assert not (tmp_path / "cache").exists() or not list((tmp_path / "cache").iterdir())
