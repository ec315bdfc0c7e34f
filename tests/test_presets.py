"""What a run with the shipped defaults uses is what --help and --list-presets say it uses.

Every gymnasium classic-control task has a preset, on the batched torch backend by
default, the same on gymnasium's backend, within the SB3 zoo's budget for the task
(MountainCarContinuous-v0 excepted: the zoo's 20k steps rely on gSDE); and the progress
bar ends at 100 % at the steps the iterations cover.
"""

from __future__ import annotations

import re

import pytest

from envs.factory import gymnasium_env_factory
from experiments.commands import train
from experiments.benchmarks.continuous import CLASSIC_CONTROL, SUCCESS_THRESHOLD, ZOO_FIGURE
from experiments.commands.presets import PRESETS, build_config, format_presets
from ppo.config import PPOConfig
from ppo.trainers.ppo import PPO

# The SB3 zoo's training budget for each task (its benchmark table), in env steps.
ZOO_BUDGET = {"CartPole-v1": 100_000, "Acrobot-v1": 1_000_000, "MountainCar-v0": 1_000_000, "Pendulum-v1": 2_000_000}


@pytest.mark.parametrize("env_id", CLASSIC_CONTROL)
def test_every_classic_control_task_has_a_preset_on_the_torch_backend_and_the_same_on_gymnasium(env_id):
    assert env_id in PRESETS and env_id in SUCCESS_THRESHOLD and env_id in ZOO_FIGURE
    config = build_config({"env_id": env_id})
    assert config.env_backend == "torch"
    on_gymnasium = build_config({"env_id": env_id, "env_backend": "gymnasium"})
    assert on_gymnasium.replace(env_backend="torch") == config  # no silent fallback to other settings
    if env_id in ZOO_BUDGET:
        assert config.total_timesteps <= ZOO_BUDGET[env_id]


def test_list_presets_names_every_env_with_its_backends(capsys):
    text = format_presets()
    for env_id in CLASSIC_CONTROL:
        assert f"{env_id} (--env-backend auto: torch)" in text
    assert "LunarLander-v3 (--env-backend auto: gymnasium)" in text
    for env_id in PRESETS:  # the backend shown is the one a run picks (the NoVel envs once showed gymnasium)
        assert f"{env_id} (--env-backend auto: {build_config({'env_id': env_id}).env_backend})" in text
    assert "torch and gymnasium: num_envs=64, num_steps=32" in text  # CartPole: one row for both backends
    assert train.main(["--list-presets"]) == 0
    assert capsys.readouterr().out.strip() == text


def shown_default(help_text: str, flag: str) -> str:
    """The '(default: X)' of `flag` in an argparse help text."""
    squashed = " ".join(help_text.split())
    match = re.search(re.escape(flag) + r" [A-Z|]+ .*?\(default: ([^)]*)\)", squashed)
    assert match, flag
    return match.group(1)


@pytest.mark.parametrize("argv, env_id", [([], "CartPole-v1"), (["--env-id", "MountainCarContinuous-v0"], "MountainCarContinuous-v0"),
                                          (["--env-id", "Pendulum-v1", "--env-backend", "gymnasium"], "Pendulum-v1")])
def test_help_shows_the_values_a_run_with_that_env_uses(argv, env_id):
    config = build_config({"env_id": env_id})
    help_text = train.build_parser(argv).format_help()
    assert env_id in " ".join(help_text.split())
    assert shown_default(help_text, "--total-timesteps") == str(config.total_timesteps)
    assert shown_default(help_text, "--num-envs") == str(config.num_envs)
    assert shown_default(help_text, "--learning-rate") == str(config.learning_rate)


def test_help_for_an_unknown_env_falls_back_to_the_dataclass_defaults():
    help_text = train.build_parser(["--env-id", "NoSuchEnv-v0"]).format_help()
    assert shown_default(help_text, "--total-timesteps") == str(PPOConfig.total_timesteps)
    assert "PPOConfig defaults" in help_text


def test_progress_bar_ends_at_100_percent_of_the_steps_the_iterations_cover(tmp_path, capsys):
    # 1000 requested steps, batches of 4 × 64 = 256: 3 iterations cover 768 steps.
    config = PPOConfig(env_backend="torch", num_envs=4, num_steps=64, total_timesteps=1000, tensorboard=False).validate()
    trainer = PPO(config, train.training_envs(config), run_dir=tmp_path, progress=True)
    trainer.train()
    bar = capsys.readouterr().err.replace("\r", "\n").strip().splitlines()[-1]
    assert "100%" in bar and "768/768" in bar


def test_cartpole_evaluation_factory_is_gymnasiums_numpy_vectorised_env():
    assert gymnasium_env_factory("CartPole-v1").make_vec(2) is not None


def test_benchmark_tables_report_success_counts_medians_and_the_sb3_ratio():
    from experiments.benchmarks.continuous import format_summary_table
    from experiments.benchmarks.environments import format_command_table

    results = [{"eval_mean": m, "train_wall_s": t, "steps_per_s": 1000.0 * t} for m, t in [(500, 1.0), (470, 3.0), (500, 2.0)]]
    table = format_summary_table([{"env_id": "CartPole-v1", "threshold": 475.0, "config": {"total_timesteps": 100_000},
                                   "results": results, "successes": 2, "zoo": ZOO_FIGURE["CartPole-v1"]}])
    assert "| CartPole-v1 | 100,000 | 2/3 (≥ 475) | 500.0, 470.0, 500.0 | 2.0 | 2,000 | 500.0 ± 0.0 at 100k |" in table
    rows = [{"who": "ppo-train", "command_seconds": s, "eval_mean": 500.0, "seconds_to_solved": 1.0} for s in (4.0, 5.0, 6.0)]
    rows += [{"who": "sb3-zoo", "command_seconds": 50.0, "eval_mean": 500.0, "seconds_to_solved": float("nan")}]
    text = format_command_table(rows)
    assert "sb3-zoo / ppo-train, median command seconds: 10.0x" in text
    assert text.splitlines()[1].split()[:5] == ["ppo-train", "3", "3", "5.0", "1.00"]
