"""PPO learns MinAtar Breakout with its preset, from the image, well above a random player.

The preset (experiments.commands.presets.MINATAR): one MinAtar CNN trunk shared by the policy and
value heads, 128 batched envs × 32 steps, 4 epochs of 8 minibatches at lr 1e-3, 10M steps.
Here its first 32 iterations (131,072 steps, with the learning rate annealed over them):
a silently broken update (a sign, a mask, a channel layout) leaves the return near the
random player's.
"""

import envs  # noqa: F401  (registers the MinAtar ids)
from envs.factory import make_vec_env
from experiments.commands.evaluation import evaluation_env_factory
from experiments.commands.presets import build_config
from ppo.models.encoders import MinAtarCNN
from ppo.runs.evaluation import Policy, evaluate_policy
from ppo.trainers.ppo import PPO

RANDOM_BREAKOUT_RETURN = 0.4  # a uniformly random player's mean return (lecture 16 measures 0.39)


def test_every_minatar_game_runs_the_minatar_preset_with_one_shared_cnn():
    for env_id in ("MinAtar/Breakout-v1", "MinAtar/SpaceInvaders-v1"):
        config = build_config({"env_id": env_id})
        assert (config.env_backend, config.shared_network, config.total_timesteps) == ("torch", True, 10_000_000)
        trainer = PPO(config.replace(tensorboard=False), make_vec_env(env_id, config.num_envs, "torch"), progress=False)
        assert isinstance(trainer.model.actor_body, MinAtarCNN) and trainer.model.critic_body is trainer.model.actor_body


def test_the_breakout_preset_learns_far_above_a_random_player():
    """Seed 1, 131,072 steps (about 15 s on a free core, 25 s under load): the mean of the last
    20 training episodes passes 3, and the greedy mean over 20 evaluation episodes passes 2,
    against a random player's 0.4. Measured when written, seeds 1-4: 5.05, 4.35, 4.55, 3.75
    (training) and 5.4, 5.65, 5.25, 5.2 (greedy)."""
    config = build_config({"env_id": "MinAtar/Breakout-v1", "tensorboard": False, "seed": 1,
                           "total_timesteps": 131_072})
    trainer = PPO(config, make_vec_env(config.env_id, config.num_envs, config.env_backend), progress=False)
    trainer.train()
    greedy = evaluate_policy(Policy(trainer.model, config, None), evaluation_env_factory(config.env_id), episodes=20)
    assert trainer.recent_return() > 3 > 7 * RANDOM_BREAKOUT_RETURN
    assert greedy.mean() > 2
