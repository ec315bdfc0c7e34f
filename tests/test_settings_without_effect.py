"""A setting that cannot take effect with the others is refused: one rule, for every config and command.

Each config class declares in `no_effect` the fields that do nothing while another field (or
what the trainer meets: the action space, the encoder 'auto' resolves to, the algorithm) has
certain values. These tests enumerate every declaration of every config class, so a new one is
tested as soon as it is written: set away from its default with its condition off, the field is
refused by the Python API and, as a flag, by its command (exit code 2, one line naming it,
nothing left on disk); and every preset still validates.
"""

from __future__ import annotations

import dataclasses
import re
import typing

import pytest

import experiments.commands.dpo  # noqa: F401 (every command's configs imported, for the census below)
import experiments.commands.pretrain_lm  # noqa: F401
from experiments.commands import presets as command_presets
from experiments.commands import rlhf, train
from experiments.tasks.food_task import FoodTaskConfig
from experiments.tasks.two_choice_task import TwoChoiceTaskConfig
from ppo.config import ConfigBase, ConfigError, PPOConfig, UpdateConfig
from ppo.lm.models.pretrain import PretrainConfig
from ppo.lm.trainers.dpo import DPOConfig
from ppo.lm.trainers.rlhf_config import RLHFConfig
from ppo.presets import PRESETS, preset_config
from _commands import run_command

CONFIG_CLASSES = (PPOConfig, RLHFConfig, DPOConfig, PretrainConfig, FoodTaskConfig, TwoChoiceTaskConfig)

# A valid value other than the default, for the text fields that have a condition (numbers and
# booleans get theirs from `another_value`).
TEXT_EXAMPLES = {"activation": "relu", "critic": "shared", "advantage_scale": "none", "loss_averaging": "sequence",
                 "kl_penalty": "reward-k1", "kl_controller": "proportional"}

# Each command with its configs, and the flags of a tiny run that stops early for any refusal.
TINY_TRAIN = ["--env-id", "CartPole-v1", "--env-backend", "torch", "--num-envs", "2", "--num-steps", "16",
              "--total-timesteps", "64", "--num-minibatches", "2", "--eval-episodes", "0", "--no-progress",
              "--no-tensorboard"]
COMMANDS = {PPOConfig: ("ppo-train", train.main, TINY_TRAIN, "--run-dir"),
            RLHFConfig: ("ppo-rlhf", rlhf.main, ["--no-progress"], "--run-dir"),
            FoodTaskConfig: ("ppo-rlhf", rlhf.main, ["--no-progress", "--task", "food"], "--run-dir")}

# What the trainer meets, and a ppo-train command line on which it leaves the setting without effect.
CONTEXTS = {"action_space": ["--env-id", "CartPole-v1"],
            "encoder": ["--env-id", "MinAtar/Breakout-v1", "--num-envs", "2", "--num-steps", "16",
                        "--num-minibatches", "2"],
            "algorithm": ["--algorithm", "penalty"]}


def all_subclasses(cls) -> set[type]:
    return set(cls.__subclasses__()).union(*(all_subclasses(sub) for sub in cls.__subclasses__()))


def another_value(cls, name: str):
    """A valid value of field `name` of `cls` other than its default."""
    default, hint = cls.defaults()[name], typing.get_type_hints(cls)[name]
    if name in TEXT_EXAMPLES:
        return TEXT_EXAMPLES[name]
    if isinstance(default, bool):
        return not default
    if isinstance(default, tuple):
        return (32,)
    if default is None:
        return 64 if int in typing.get_args(hint) else 0.5
    if isinstance(default, int):
        return default * 2
    if isinstance(default, float):
        return default / 2 if default else 0.5
    raise AssertionError(f"{cls.__name__}.{name}: give an example value in TEXT_EXAMPLES")


def field_conditions():
    """(class, field, condition, the field's other conditions) for every condition on a field of the config."""
    for cls in CONFIG_CLASSES:
        names = {f.name for f in dataclasses.fields(cls)}
        for name, conditions in cls.no_effect.items():
            for condition in conditions:
                if condition.on in names:
                    others = [other for other in conditions if other is not condition and other.on in names]
                    yield pytest.param(cls, name, condition, others, id=f"{cls.__name__}.{name}-{condition.on}")


def context_conditions():
    for cls in CONFIG_CLASSES:
        names = {f.name for f in dataclasses.fields(cls)}
        for name, conditions in cls.no_effect.items():
            for condition in conditions:
                if condition.on not in names:
                    yield pytest.param(cls, name, condition, id=f"{cls.__name__}.{name}-{condition.on}")


def without_effect(cls, name, condition, others) -> dict:
    """Settings with `name` away from its default and `condition` off (the field's other conditions on)."""
    settings = {condition.on: condition.values[0], name: another_value(cls, name)}
    for other in others:
        default = cls.defaults()[other.on]
        if other.applies(default):
            settings[other.on] = another_value(cls, other.on)
            assert not other.applies(settings[other.on]), f"{cls.__name__}.{name}: no example turns {other.on} on"
    return settings


def refused_fields(name, others) -> str:
    """The fields a refusal may name: `name`, or a field set to turn one of its other conditions on
    that is itself idle under the condition tested (kl_controller beside kl_horizon, without kl_target)."""
    return "(" + "|".join(re.escape(field) for field in [name, *(other.on for other in others)]) + ")"


def as_flags(settings: dict) -> list[str]:
    """The command-line flags that set these fields (add_dataclass_flags' spelling)."""
    argv = []
    for name, value in settings.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            argv.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, tuple):
            argv += [flag, *map(str, value)]
        else:
            argv += [flag, "none" if value is None else str(value)]
    return argv


def refusal_pattern(name: str, on: str, current: str) -> str:
    """The one line of a refusal; `name` a regular expression."""
    return rf"^{name} = .+ has no effect with {on} = {re.escape(current)}: .+; leave it at its default .+$"


def test_every_config_class_of_the_commands_is_enumerated():
    configs = {cls for cls in all_subclasses(ConfigBase) if dataclasses.is_dataclass(cls) and cls is not UpdateConfig
               and cls.__module__.split(".")[0] in ("ppo", "experiments")}
    assert configs == set(CONFIG_CLASSES)
    assert any(cls.no_effect for cls in CONFIG_CLASSES)


@pytest.mark.parametrize("cls, name, condition, others", list(field_conditions()))
def test_the_api_refuses_a_setting_whose_condition_is_off(cls, name, condition, others):
    settings = without_effect(cls, name, condition, others)
    pattern = refusal_pattern(refused_fields(name, others), condition.on, repr(condition.values[0]))
    with pytest.raises(ConfigError, match=pattern) as error:
        cls(**settings).validate()
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("cls, name, condition, others", [param for param in field_conditions()
                                                          if param.values[0] in COMMANDS])
def test_the_command_refuses_the_flag_in_one_line_and_leaves_nothing(cls, name, condition, others, tmp_path,
                                                                     capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    prog, main, base, run_dir_flag = COMMANDS[cls]
    settings = without_effect(cls, name, condition, others)
    code, err = run_command(main, [*base, *as_flags(settings), run_dir_flag, str(tmp_path / "run")], capsys)
    assert code == 2, err
    assert err.count("\n") == 1, err
    pattern = refusal_pattern(refused_fields(name, others), condition.on, repr(condition.values[0]))
    assert re.match(f"{prog}: error: {pattern[1:]}", err), err
    assert not list(tmp_path.iterdir())  # no run folder, no runs/ folder, no lock


@pytest.mark.parametrize("cls, name, condition", list(context_conditions()))
def test_a_condition_only_the_trainer_knows_is_checked_with_what_it_meets(cls, name, condition):
    config = cls(**{name: another_value(cls, name)})
    config.validate()  # the config alone cannot tell
    with pytest.raises(ConfigError, match=refusal_pattern(name, condition.on, repr(condition.values[0]))):
        config.check_effects(**{condition.on: condition.values[0]})


def trainer_conditions():
    """The conditions on what the trainer meets: beyond the config, or a field it resolves ('auto')."""
    for name, conditions in PPOConfig.no_effect.items():
        for condition in conditions:
            if condition.on in CONTEXTS or condition.on not in PPOConfig.defaults():
                yield pytest.param(PPOConfig, name, condition, id=f"{name}-{condition.on}")


@pytest.mark.parametrize("cls, name, condition", list(trainer_conditions()))
def test_the_trainer_refuses_it_when_it_meets_the_env(cls, name, condition, tmp_path, capsys, monkeypatch):
    assert condition.on in CONTEXTS, f"give CONTEXTS a command line on which {condition.on} leaves {name} idle"
    monkeypatch.chdir(tmp_path)
    argv = [*TINY_TRAIN, *CONTEXTS[condition.on], *as_flags({name: another_value(cls, name)}),
            "--run-dir", str(tmp_path / "run")]
    code, err = run_command(train.main, argv, capsys)
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith(f"ppo-train: error: {name} = ") and "has no effect with" in err, err
    assert not list(tmp_path.iterdir())


def test_a_value_equal_to_the_default_and_a_condition_that_holds_pass():
    PPOConfig(obs_clip=10.0, reward_clip=10).validate()
    PPOConfig(normalize_obs=True, obs_clip=5.0, recurrent="gru", sequence_length=16,
              recurrent_hidden_size=32).validate()
    RLHFConfig(kl_target=1.0, kl_controller="proportional", kl_horizon=1000).validate()
    FoodTaskConfig(reward="model", reward_model_steps=10).validate()


def test_a_config_read_back_from_a_saved_run_keeps_its_settings():
    """A run saved before a rule existed still evaluates and resumes (its budget may change)."""
    saved = PPOConfig(obs_clip=5.0).to_dict()
    config = PPOConfig.from_dict(saved).validate()
    assert config.obs_clip == 5.0 and config.replace(total_timesteps=1024).validate().total_timesteps == 1024
    with pytest.raises(ConfigError, match="^obs_clip = 5.0 has no effect"):
        PPOConfig(**saved).validate()  # a new run with the same settings is refused


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_still_validates(name):
    """The rows of ppo/presets.py (which experiments/commands/presets.py offers as ppo-train's) break no rule."""
    assert command_presets.PRESETS is PRESETS
    assert preset_config(name).env_id == name  # validated, the no-effect rule included
