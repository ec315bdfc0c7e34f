"""Numbers that a flag's --help states are the numbers the code computes."""

import dataclasses
import re

from ppo.config import PPOConfig


def test_total_timesteps_help_states_the_rounding_the_trainer_does():
    help_text = {f.name: f.metadata["help"] for f in dataclasses.fields(PPOConfig)}["total_timesteps"]
    asked, envs, steps, trained = map(int, re.search(r"\((\d+) with (\d+) × (\d+) trains (\d+)\)", help_text).groups())
    config = PPOConfig(total_timesteps=asked, num_envs=envs, num_steps=steps)
    assert config.num_iterations * config.batch_size == trained < asked
