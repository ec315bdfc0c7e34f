"""Each trainer draws its actions from its own generator: a draw elsewhere in the process
(another trainer, a notebook cell) changes none of its numbers, and a checkpoint keeps it."""

import pytest
import torch

from envs.factory import make_vec_env
from ppo import PPO, PPOConfig, RecurrentPPO
from ppo.trainers.variants import PPOPenalty

TINY = dict(env_id="CartPole-v1", env_backend="torch", num_envs=4, num_steps=32, total_timesteps=384,
            tensorboard=False)
TRAINERS = {
    "feed-forward": (PPO, {}),
    "recurrent": (RecurrentPPO, {"recurrent": "gru", "recurrent_hidden_size": 16, "num_minibatches": 2}),
    "penalty": (PPOPenalty, {}),
}


def make(kind: str, seed: int):
    trainer_class, settings = TRAINERS[kind]
    config = PPOConfig(**TINY, **settings, seed=seed)
    return trainer_class(config, make_vec_env(config.env_id, config.num_envs, config.env_backend), progress=False)


def weights(trainer) -> torch.Tensor:
    return torch.cat([parameter.detach().flatten() for parameter in trainer.model.parameters()])


def alone(kind: str, seed: int, iterations: int) -> tuple[torch.Tensor, list[float]]:
    trainer = make(kind, seed)
    losses = [trainer.train_iteration()["policy_loss"] for _ in range(iterations)]
    return weights(trainer), losses


@pytest.mark.parametrize("kind", TRAINERS)
def test_a_stray_draw_of_the_global_generator_changes_nothing(kind):
    reference = alone(kind, 1, 3)
    trainer = make(kind, 1)
    losses = []
    for _ in range(3):
        torch.rand(1)  # a notebook cell's unrelated draw
        losses.append(trainer.train_iteration()["policy_loss"])
    assert losses == reference[1]
    assert torch.equal(weights(trainer), reference[0])


@pytest.mark.parametrize("kind", TRAINERS)
def test_two_trainers_interleaved_in_one_process_each_equal_their_run_alone(kind):
    first, second = make(kind, 1), make(kind, 2)
    for _ in range(3):
        first.train_iteration()
        second.train_iteration()
    assert torch.equal(weights(first), alone(kind, 1, 3)[0])
    assert torch.equal(weights(second), alone(kind, 2, 3)[0])


def test_the_action_generator_is_saved_and_restored_with_the_checkpoint():
    trainer = make("feed-forward", 1)
    trainer.train_iteration()
    state = trainer.state_dict()
    resumed = make("feed-forward", 1)
    torch.rand(100)
    resumed.load_state_dict(state)
    with torch.inference_mode():  # as the rollout acts
        expected = trainer.model.act(trainer.next_obs, None, trainer.action_generator)[0]
        assert torch.equal(resumed.model.act(resumed.next_obs, None, resumed.action_generator)[0], expected)
    assert torch.equal(resumed.action_generator.get_state(), trainer.action_generator.get_state())


@pytest.mark.parametrize("env_id", ["CartPole-v1", "MinAtar/Breakout-v1"])
def test_a_seeds_initial_weights_do_not_depend_on_the_thread_count(env_id):
    """The orthogonal initialisation (a QR per layer) runs on one thread whatever the run trains with."""
    config = PPOConfig(env_id=env_id, num_envs=2, num_steps=16, num_minibatches=2, total_timesteps=32)
    threads = torch.get_num_threads()
    weights = []
    try:
        for count in (1, 2):
            torch.set_num_threads(count)
            trainer = PPO(config, make_vec_env(env_id, 2, "torch"), progress=False)
            weights.append(trainer.optimizer.flat_params.clone())
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(weights[0], weights[1])
