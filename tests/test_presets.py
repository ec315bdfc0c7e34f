"""What a run with the shipped defaults uses is what --help and --list-presets say it uses, and a script gets it too.

Every gymnasium classic-control task has a preset, on the batched torch backend by
default, the same on gymnasium's backend, within the SB3 zoo's budget for the task
(MountainCarContinuous-v0 excepted: the zoo's 20k steps rely on gSDE); and the progress
bar ends at 100 % at the steps the iterations cover.
"""

from __future__ import annotations

import re

import pytest

from envs.factory import EnvError, gymnasium_env_factory, make_vec_env
from experiments.commands import presets as command_presets
from experiments.commands import train
from experiments.benchmarks.continuous import CLASSIC_CONTROL, SUCCESS_THRESHOLD, ZOO_FIGURE
from experiments.commands.presets import PRESETS, build_config, format_presets
from ppo import presets
from ppo.config import ConfigError, PPOConfig
from ppo.presets import preset_config, preset_for, preset_overrides
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


# What build_config returned for each preset before the presets moved into the core (ppo.presets) and the
# CartPole row stopped depending on the backend: the values that differ from the PPOConfig defaults, on every
# backend alike. A preset row that changes must change here too, with its comment's measurements.
FROZEN_ROWS = {
    "Acrobot-v1": {},
    "CartPole-v1": {"update_epochs": 6, "learning_rate": 0.005, "norm_adv": False, "value_clip_coef": None,
                    "ent_coef": 0.0, "num_envs": 64, "num_steps": 32, "total_timesteps": 100000},
    "CartPoleNoVel-v1": {"target_kl": 0.03, "learning_rate": 0.002, "value_clip_coef": None,
                         "ent_coef": 0.003, "num_envs": 64, "num_steps": 32, "total_timesteps": 300000,
                         "recurrent": "gru", "sequence_length": 16, "normalize_obs": True},
    "HalfCheetah-v5": {"update_epochs": 10, "num_minibatches": 32, "learning_rate": 0.0003, "ent_coef": 0.0,
                       "num_envs": 1, "num_steps": 2048, "total_timesteps": 1000000, "normalize_obs": True,
                       "normalize_reward": True},
    "Hopper-v5": {"update_epochs": 10, "num_minibatches": 32, "learning_rate": 0.0003, "ent_coef": 0.0,
                  "num_envs": 1, "num_steps": 2048, "total_timesteps": 1000000, "normalize_obs": True,
                  "normalize_reward": True},
    "LunarLander-v3": {"num_minibatches": 256, "learning_rate": 0.0003, "anneal_lr": False, "gamma": 0.999,
                       "gae_lambda": 0.98, "value_clip_coef": None, "num_envs": 16, "num_steps": 1024,
                       "total_timesteps": 1000000},
    "MinAtar/Breakout-v1": {"num_minibatches": 8, "learning_rate": 0.001, "num_envs": 128, "num_steps": 32,
                            "total_timesteps": 10000000, "shared_network": True},
    "MinAtar/SpaceInvaders-v1": {"num_minibatches": 8, "learning_rate": 0.001, "num_envs": 128, "num_steps": 32,
                                 "total_timesteps": 10000000, "shared_network": True},
    "MountainCar-v0": {"learning_rate": 0.001, "gae_lambda": 0.98, "value_clip_coef": None, "ent_coef": 0.0,
                       "num_envs": 64, "num_steps": 16, "total_timesteps": 1000000, "normalize_obs": True,
                       "normalize_reward": True},
    "MountainCarContinuous-v0": {"update_epochs": 10, "learning_rate": 0.0003, "value_clip_coef": None,
                                 "ent_coef": 0.0, "num_envs": 64, "num_steps": 64, "total_timesteps": 200000,
                                 "normalize_obs": True, "normalize_reward": True},
    "Pendulum-v1": {"update_epochs": 10, "num_minibatches": 8, "learning_rate": 0.002, "gamma": 0.95, "num_envs": 8,
                    "num_steps": 256, "total_timesteps": 200000, "normalize_obs": True, "normalize_reward": True},
    "PendulumNoVel-v1": {"update_epochs": 10, "learning_rate": 0.002, "gamma": 0.95, "num_envs": 16,
                         "total_timesteps": 200000, "recurrent": "gru", "normalize_obs": True,
                         "normalize_reward": True},
}
GYMNASIUM_ONLY = {"HalfCheetah-v5", "Hopper-v5", "LunarLander-v3"}  # no batched torch version: auto is gymnasium


def frozen_config(row: str, env_id: str, backend: str) -> dict:
    return {**PPOConfig().to_dict(), **FROZEN_ROWS[row], "env_id": env_id, "env_backend": backend}


@pytest.mark.parametrize("env_id", sorted(FROZEN_ROWS))
def test_every_preset_gives_the_config_it_gave_before_on_every_backend(env_id):
    assert sorted(PRESETS) == sorted(FROZEN_ROWS)
    auto = "gymnasium" if env_id in GYMNASIUM_ONLY else "torch"
    assert build_config({"env_id": env_id}).to_dict() == frozen_config(env_id, env_id, auto)
    for backend in ("gymnasium",) if env_id in GYMNASIUM_ONLY else ("torch", "gymnasium"):
        config = build_config({"env_id": env_id, "env_backend": backend})
        assert config.to_dict() == frozen_config(env_id, env_id, backend)
    if env_id in GYMNASIUM_ONLY:
        with pytest.raises(EnvError, match="has no batched torch version"):
            build_config({"env_id": env_id, "env_backend": "torch"})


def test_a_preset_named_for_another_env_or_none_gives_the_config_it_gave_before():
    assert build_config({"env_id": "CartPoleNoVel-v1"}, "CartPole-v1").to_dict() == frozen_config(
        "CartPole-v1", "CartPoleNoVel-v1", "torch")
    assert build_config({"env_id": "Acrobot-v1", "env_backend": "gymnasium"}, "Pendulum-v1").to_dict() == frozen_config(
        "Pendulum-v1", "Acrobot-v1", "gymnasium")
    assert build_config({}, "none").to_dict() == frozen_config("Acrobot-v1", "CartPole-v1", "torch")  # no row at all
    assert build_config({"env_id": "Acrobot-v1"}, None) == build_config({"env_id": "Acrobot-v1"}, "none")


@pytest.mark.parametrize("env_id", sorted(FROZEN_ROWS))
def test_a_script_gets_ppo_train_s_config_from_the_core_with_the_backend_left_to_the_envs(env_id):
    config = preset_config(env_id)
    assert config.env_backend == "auto"
    assert config.replace(env_backend=build_config({"env_id": env_id}).env_backend) == build_config({"env_id": env_id})


def test_make_vec_env_resolves_the_auto_backend_a_preset_config_leaves():
    config = preset_config("CartPole-v1", num_envs=2)
    envs, batched = make_vec_env(config.env_id, 2, config.env_backend), make_vec_env(config.env_id, 2, "torch")
    assert type(envs) is type(batched)
    envs.close(), batched.close()


def test_preset_config_layers_the_defaults_the_row_and_the_values_given():
    assert preset_config("CartPole-v1", learning_rate=0.1, env_backend="gymnasium").to_dict() == {
        **frozen_config("CartPole-v1", "CartPole-v1", "gymnasium"), "learning_rate": 0.1}
    assert preset_config("CartPoleNoVel-v1", preset="CartPole-v1") == PPOConfig(
        **{**presets.CARTPOLE_BATCHED, "env_id": "CartPoleNoVel-v1"})
    assert preset_config("Acrobot-v1", preset="none") == preset_config("Acrobot-v1", None) == PPOConfig(env_id="Acrobot-v1")
    assert preset_config() == preset_config("CartPole-v1")
    assert preset_config(env_id="Pendulum-v1", seed=3).seed == 3


@pytest.mark.parametrize("values, message", [
    ({"preset": "Cartpole-v1"}, "preset = 'Cartpole-v1' is not one of: none, Acrobot-v1, CartPole-v1"),
    ({"learning_rat": 1e-3}, "unknown config field(s) learning_rat"),
    ({"learning_rate": -1e-3}, "learning_rate = -0.001 must be a finite number > 0"),
    ({"num_minibatches": 3}, "num_envs * num_steps = 2048 is not divisible by num_minibatches = 3"),
])
def test_preset_config_refuses_in_one_line(values, message):
    with pytest.raises(ConfigError) as refused:
        preset_config("CartPole-v1", **values)
    assert str(refused.value).startswith(message) and "\n" not in str(refused.value)


def test_the_preset_for_an_env_and_a_copy_of_its_row():
    assert preset_for("CartPole-v1") == "CartPole-v1" and preset_for("NoPreset-v0") is None
    assert preset_for("CartPole-v1", "none") is None and preset_for("CartPole-v1", "Pendulum-v1") == "Pendulum-v1"
    row = preset_overrides("CartPole-v1")
    row["learning_rate"] = 1.0
    assert presets.PRESETS["CartPole-v1"]["learning_rate"] == 5e-3 and preset_overrides(None) == {}


def test_the_command_layer_serves_the_core_s_presets():
    for name in ("PRESETS", "CARTPOLE_BATCHED", "MINATAR", "CLEANRL_CONTINUOUS", "preset_names", "preset_overrides"):
        assert getattr(command_presets, name) is getattr(presets, name), name


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
