"""The given loop around ppo_from_scratch.py's functions: nothing to write here.

    python lectures/exercises/training_loop.py              # trains with your functions
    EXERCISE_SOLUTIONS=1 python lectures/exercises/training_loop.py

`train` is what test_ppo_from_scratch.py's learning check runs: with its defaults (seed 1,
32 CartPole copies × 32 steps per rollout, 4 epochs of 4 minibatches, Adam at 2.5e-3,
BUDGET = 16,384 environment steps) the mean return of the last 20 episodes must reach
LEARNED_RETURN = 120. The solutions reached 164–248 on seeds 1–10 (217 on seed 1; tuned
on seeds 1–4), in a few seconds on one CPU thread; an untrained policy scores about 20.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path
from types import ModuleType

import torch
from torch import nn

EXERCISES_DIR = Path(__file__).resolve().parent
for folder in (EXERCISES_DIR.parents[1], EXERCISES_DIR):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from envs.factory import make_vec_env  # noqa: E402  (found through the path above)

BUDGET = 16_384  # environment steps: 16 rollouts of 32 copies × 32 steps
LEARNED_RETURN = 120.0  # mean of the last 20 finished episodes; an untrained policy scores about 20


def layer(inputs: int, outputs: int, gain: float) -> nn.Linear:
    linear = nn.Linear(inputs, outputs)
    nn.init.orthogonal_(linear.weight, gain)
    nn.init.zeros_(linear.bias)
    return linear


class PolicyNetwork(nn.Module):
    """Separate actor and critic MLPs: obs (N, D) → (logits (N, A), values (N,))."""

    def __init__(self, observation_size: int, num_actions: int, hidden: int = 64):
        super().__init__()
        self.actor = nn.Sequential(layer(observation_size, hidden, 2**0.5), nn.Tanh(), layer(hidden, hidden, 2**0.5),
                                   nn.Tanh(), layer(hidden, num_actions, 0.01))
        self.critic = nn.Sequential(layer(observation_size, hidden, 2**0.5), nn.Tanh(), layer(hidden, hidden, 2**0.5),
                                    nn.Tanh(), layer(hidden, 1, 1.0))

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.actor(obs), self.critic(obs).squeeze(-1)


def finished_returns(rewards: torch.Tensor, dones: torch.Tensor, running: torch.Tensor) -> list[float]:
    """Returns of the episodes that end in the rollout (T, N); `running` (N,) is updated in place."""
    finished = []
    for reward, done in zip(rewards, dones):
        running += reward
        finished.extend(running[done].tolist())
        running[done] = 0.0
    return finished


def train(exercise: ModuleType, seed: int = 1, total_steps: int = BUDGET, num_envs: int = 32, num_steps: int = 32,
          epochs: int = 4, num_minibatches: int = 4, learning_rate: float = 2.5e-3, gamma: float = 0.99,
          gae_lambda: float = 0.95) -> list[float]:
    """Train on CartPole with `exercise`'s functions; return every finished episode's return, in order."""
    torch.manual_seed(seed)
    envs = make_vec_env("CartPole-v1", num_envs, "torch")
    policy = PolicyNetwork(envs.single_observation_space.shape[0], int(envs.single_action_space.n))
    optimizer = torch.optim.Adam(policy.parameters(), lr=learning_rate, eps=1e-5)
    generator = torch.Generator().manual_seed(seed)
    obs = envs.reset(seed=seed)
    running, returns = torch.zeros(num_envs), []
    for _ in range(total_steps // (num_envs * num_steps)):
        rollout, obs = exercise.collect_rollout(policy, envs, obs, num_steps)
        advantages, targets = exercise.advantages_and_returns(rollout, gamma, gae_lambda)
        exercise.ppo_update(policy, optimizer, rollout, advantages, targets, epochs=epochs,
                            num_minibatches=num_minibatches, clip_coef=0.2, vf_coef=0.5, ent_coef=0.0,
                            max_grad_norm=0.5, generator=generator)
        returns.extend(finished_returns(rollout["rewards"], rollout["dones"], running))
    return returns


if __name__ == "__main__":
    torch.set_num_threads(1)
    package = "solutions." if os.environ.get("EXERCISE_SOLUTIONS") == "1" else ""
    episode_returns = train(importlib.import_module(package + "ppo_from_scratch"))
    print(f"{len(episode_returns)} episodes; mean return of the last 20: {sum(episode_returns[-20:]) / 20:.1f}")
