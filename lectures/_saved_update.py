"""The PPO update that lectures 4 and 5 repeat from one saved start.

PPO trains CartPole for a few iterations (so that the advantages mean something) and
collects one more rollout; the network, the optimizer and the generator of the minibatch
order are then saved. `SavedStart.update` restores them and runs the trainer's update on
that rollout, so the same update (same samples, same minibatches) can be repeated with
another ε or another step size, each from the same π_old.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from experiments.commands.train import training_envs
from ppo.config import PPOConfig
from ppo.trainers.ppo import PPO


@dataclass
class SavedStart:
    trainer: PPO
    advantages: torch.Tensor  # (T, N) the rollout's GAE advantages, raw (the update whitens them)
    returns: torch.Tensor  # (T, N) its value targets
    state: tuple  # (model, optimizer, minibatch generator) as they were before any update on the rollout

    def restore(self) -> None:
        """π_old again: the network, optimizer and minibatch order of the saved start."""
        model_state, optimizer_state, shuffle_state = copy.deepcopy(self.state)
        self.trainer.model.load_state_dict(model_state)
        self.trainer.optimizer.load_state_dict(optimizer_state)
        self.trainer.shuffle_generator.set_state(shuffle_state)

    def update(self, epsilon: float, learning_rate: float | None = None) -> dict[str, float]:
        """The saved update from the saved start with this ε (math.inf: no clip) and step size
        (None: the configured one); returns the trainer's update metrics."""
        self.restore()
        self.trainer.optimizer.lr = self.trainer.config.learning_rate if learning_rate is None else learning_rate
        self.trainer.clip_coef = epsilon  # the ε that PPO.policy_loss reads (value clipping keeps config.clip_coef)
        return self.trainer.update(self.advantages, self.returns)


def saved_start(lecture, seed: int = 1) -> SavedStart:
    """K = 10 epochs of 4 minibatches at a large constant learning rate (1e-3): an update that
    wants to move the policy far. 16 CartPole copies × 64 steps (16 in a quick run), after 10
    warm-up iterations with the default ε (1 in a quick run); `seed` seeds the training run."""
    config = PPOConfig(
        env_id="CartPole-v1", env_backend="torch", num_envs=16, num_steps=lecture.choose(full=64, quick=16),
        num_minibatches=4, update_epochs=10, learning_rate=1e-3, anneal_lr=False, total_timesteps=10**6,
        tensorboard=False, seed=seed,
    )
    trainer = PPO(config, training_envs(config), progress=False)
    for _ in range(lecture.choose(full=10, quick=1)):
        trainer.collect_rollout()
        trainer.update(*trainer.compute_advantages())
    trainer.collect_rollout()
    advantages, returns = trainer.compute_advantages()
    state = copy.deepcopy((trainer.model.state_dict(), trainer.optimizer.state_dict(),
                           trainer.shuffle_generator.get_state()))
    return SavedStart(trainer, advantages, returns, state)

