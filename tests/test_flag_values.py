"""A negative number after a flag reaches the config's check; --hidden-sizes 64,64 is refused in words that say why.

The functions of experiments.commands.flag_values on ppo-train's own flags (every PPOConfig
field, as experiments.commands.cli makes them) and on a parser with a --hidden-sizes of
their type.
"""

from __future__ import annotations

import argparse

import pytest

from experiments.commands.cli import OneLineArgumentParser, add_dataclass_flags, given_flags
from experiments.commands.flag_values import int_list_item, is_negative_number, join_negative_values
from ppo.config import ConfigError, PPOConfig


def hyperparameter_parser() -> OneLineArgumentParser:
    parser = OneLineArgumentParser(prog="ppo-train")
    parser.add_argument("--no-progress", action="store_true")
    add_dataclass_flags(parser, PPOConfig, sweepable=True)
    return parser


@pytest.mark.parametrize("text", ["-1e-3", "-1E-3", "-0.5", "-.5", "-3", "-inf", "-1e-3,1e-3"])
def test_negative_numbers_in_every_notation_are_recognised(text):
    assert is_negative_number(text)


@pytest.mark.parametrize("text", ["1e-3", "--seed", "-h", "-", "-1e-3,x", "--", "-e3"])
def test_flags_and_other_text_are_not_negative_numbers(text):
    assert not is_negative_number(text)


def test_a_negative_value_is_joined_to_its_flag_and_nothing_else_changes():
    parser = hyperparameter_parser()
    argv = ["--learning-rate", "-1e-3", "--no-progress", "--ent-coef", "-0.5", "--seed", "3", "--hidden-sizes", "64"]
    assert join_negative_values(argv, parser) == [
        "--learning-rate=-1e-3", "--no-progress", "--ent-coef=-0.5", "--seed", "3", "--hidden-sizes", "64"]
    assert join_negative_values(["--", "--learning-rate", "-1e-3"], parser) == ["--", "--learning-rate", "-1e-3"]
    assert join_negative_values(["--learning-rate"], parser) == ["--learning-rate"]  # argparse says what is missing
    assert join_negative_values(["--norm-adv", "-1"], parser) == ["--norm-adv", "-1"]  # a switch takes no value


def test_argparse_alone_refuses_the_scientific_notation(capsys):
    with pytest.raises(SystemExit):
        plain = argparse.ArgumentParser(prog="plain")
        plain.add_argument("--learning-rate", type=float)
        plain.parse_args(["--learning-rate", "-1e-3"])
    assert "expected one argument" in capsys.readouterr().err


@pytest.mark.parametrize("argv, message", [
    (["--learning-rate", "-1e-3"], "learning_rate = -0.001 must be a finite number > 0"),
    (["--hidden-sizes", "64,64"], "hidden sizes are given separated by spaces, not commas: --hidden-sizes 64 64"),
])
def test_ppo_train_says_what_is_wrong_with_the_value_in_one_line(argv, message, tmp_path, monkeypatch, capsys):
    from experiments.commands import train

    monkeypatch.chdir(tmp_path)
    try:
        code = train.main([*argv, "--no-progress"])
    except SystemExit as exit_:  # argparse's own refusal exits from inside
        code = exit_.code
    assert code == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and message in error, error
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argv, message", [
    (["--learning-rate", "-1e-3"], "learning_rate = -0.001 must be a finite number > 0"),
    (["--ent-coef", "-0.5"], "ent_coef = -0.5 must be a finite number ≥ 0"),
    (["--clip-coef", "-2E-1"], "clip_coef = -0.2 must be in (0, 1), or inf for no clipping"),
    (["--max-grad-norm", "-inf"], "max_grad_norm = -inf must be a finite number > 0"),
])
def test_the_joined_value_reaches_the_configs_own_one_line_check(argv, message):
    parser = hyperparameter_parser()
    flags = given_flags(parser.parse_args(join_negative_values(argv, parser)), PPOConfig)
    with pytest.raises(ConfigError) as refused:
        PPOConfig(**flags).validate()
    assert str(refused.value) == message


def test_a_negative_comma_list_is_joined_as_a_sweep():
    parser = hyperparameter_parser()
    args = parser.parse_args(join_negative_values(["--ent-coef", "-0.01,0.01"], parser))
    assert args.ent_coef == [-0.01, 0.01]


def widths_parser() -> OneLineArgumentParser:
    parser = OneLineArgumentParser(prog="ppo-train")
    parser.add_argument("--hidden-sizes", type=int_list_item("--hidden-sizes", (64, 64)), nargs="+")
    return parser


def refusal(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exited:
        widths_parser().parse_args(argv)
    assert exited.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    return line


def test_widths_separated_by_spaces_are_read():
    assert widths_parser().parse_args(["--hidden-sizes", "128", "32"]).hidden_sizes == [128, 32]


def test_widths_given_with_commas_are_refused_with_the_spaced_form(capsys):
    assert refusal(["--hidden-sizes", "64,64"], capsys) == (
        "ppo-train: error: argument --hidden-sizes: '64,64': hidden sizes are given separated by spaces, "
        "not commas: --hidden-sizes 64 64")
    assert refusal(["--hidden-sizes", "256, 128"], capsys).endswith("--hidden-sizes 256 128")


@pytest.mark.parametrize("text", ["big", "64.5", "64,"])
def test_a_width_that_is_no_whole_number_is_named(text, capsys):
    assert refusal(["--hidden-sizes", text], capsys) == (
        f"ppo-train: error: argument --hidden-sizes: {text!r} is not a whole number (hidden sizes are whole "
        "numbers separated by spaces: --hidden-sizes 64 64)")


def test_the_type_reports_through_argparse_not_as_a_crash():
    with pytest.raises(argparse.ArgumentTypeError):
        int_list_item("--hidden-sizes", (64, 64))("64,64")
