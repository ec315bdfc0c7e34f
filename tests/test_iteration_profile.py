"""experiments.studies.iteration_profile: the parts of an iteration add up to what the trainer ran."""

from __future__ import annotations

import pytest

from experiments.studies import iteration_profile
from experiments.commands.presets import build_config


def test_the_parts_cover_the_iteration_and_the_env_steps_are_counted():
    config = build_config({"env_id": "CartPole-v1", "num_envs": 8, "num_steps": 16, "tensorboard": False,
                           "checkpoint_every": 0})
    config = config.replace(total_timesteps=config.batch_size * 4)
    result = iteration_profile.profile(config, iterations=2, warmup=1)
    assert set(result["ms"]) == set(iteration_profile.PARTS)
    assert all(ms > 0 for ms in result["ms"].values())  # each part ran: the env step too, timed inside the rollout
    sum_seconds = sum(result["ms"].values()) / 1e3
    assert result["steps_per_second"] == pytest.approx(config.batch_size / sum_seconds, rel=0.5)


def test_the_table_names_every_part(capsys):
    assert iteration_profile.main(["--env-id", "CartPole-v1", "--iterations", "1", "--warmup", "0",
                                   "--num-envs", "8", "--num-steps", "16"]) == 0
    out = capsys.readouterr().out
    assert all(part in out for part in iteration_profile.PARTS) and "training steps/s" in out


def test_a_bad_count_is_refused_in_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        iteration_profile.main(["--iterations", "0"])
    error = capsys.readouterr().err
    assert exit_info.value.code == 2 and error.count("\n") == 1 and "--iterations 0" in error
