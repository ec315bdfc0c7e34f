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


def test_the_rollout_is_charged_its_own_time_less_its_env_steps(monkeypatch):
    from experiments.commands import phase_clock

    ticks = iter(range(100))
    monkeypatch.setattr(phase_clock.time, "perf_counter", lambda: float(next(ticks)))

    class Envs:
        def step(self, actions):
            return actions

    class Trainer:
        envs = Envs()

        def collect_rollout(self):  # ticks 0 … 5: two env steps of one tick each
            self.envs.step(0)
            self.envs.step(1)

        def compute_advantages(self):  # ticks 6, 7
            return "advantages", "returns"

        def update(self, advantages, returns):  # ticks 8, 9
            assert (advantages, returns) == ("advantages", "returns")

        def log(self):
            raise AssertionError("an iteration's clock times the three steps alone")

    trainer = Trainer()
    clock = iteration_profile.iteration_clock(trainer)
    assert iteration_profile.time_iteration(trainer, clock) == {"env step": 2.0, "rest of rollout": 3.0,
                                                                "advantages": 1.0, "update": 1.0}
    assert "log" not in vars(trainer)
