"""The API's factories and networks refuse a bad argument in one line, as the commands do.

`make_vec_env` refuses a count below one (the configs' words: "must be a positive integer")
before any env is made, and a network given observations of another shape says which
shape it was built for instead of failing inside a matrix product.
"""

import gymnasium as gym
import pytest
import torch

from envs.factory import EnvError, make_seed_batch_env, make_vec_env
from ppo.models.encoders import ObservationShapeError
from ppo.models.networks import ActorCritic


@pytest.mark.parametrize("backend", ["torch", "gymnasium"])
@pytest.mark.parametrize("count", [0, -4, 2.0, True, "4"])
def test_make_vec_env_refuses_a_count_that_is_not_a_positive_integer(backend, count):
    with pytest.raises(EnvError, match=rf"^num_envs = {count!r} must be a positive integer$".replace("(", r"\(")):
        make_vec_env("CartPole-v1", count, backend)


def test_make_vec_env_refuses_a_frame_stack_below_one():
    with pytest.raises(EnvError, match=r"^frame_stack = 0 must be a positive integer$"):
        make_vec_env("CartPole-v1", 2, frame_stack=0)


@pytest.mark.parametrize("name, arguments", [("num_seeds", (0, 2)), ("num_envs", (2, -1))])
def test_make_seed_batch_env_refuses_a_count_below_one(name, arguments):
    with pytest.raises(EnvError, match=rf"^{name} = -?\d must be a positive integer$"):
        make_seed_batch_env("CartPole-v1", *arguments)


def test_a_module_path_that_gymnasium_accepts_names_its_env():
    envs = make_vec_env("gymnasium.envs.classic_control:CartPole-v1", 2)
    assert envs.single_observation_space.shape == (4,) and envs.num_envs == 2
    envs.close()


@pytest.mark.parametrize("space", [gym.spaces.Box(-1, 1, (4,)), gym.spaces.Box(0, 255, (10, 10, 4), dtype="uint8")])
def test_a_network_given_observations_of_another_shape_names_the_shape_it_was_built_for(space):
    network = ActorCritic(space, gym.spaces.Discrete(2))
    good = torch.zeros(3, *space.shape)
    action, log_prob, value = network.act(good)
    assert action.shape == (3,) and value.shape == (3,)
    wrong = torch.zeros(3, *space.shape[:-1], space.shape[-1] + 1)
    for call in (network.act, network.value, network.greedy_action, network.distribution):
        with pytest.raises(ObservationShapeError, match=rf"do not end in the shape \({space.shape[0]},"):
            call(wrong)
