"""Exercises for lecture 6 — the whole PPO loop. Check: pytest lectures/exercises/test_lecture_06.py"""

import torch


def update_sizes(num_envs: int, num_steps: int, num_minibatches: int, update_epochs: int,
                 total_timesteps: int) -> dict[str, int]:
    """Exercise 6.1. The arithmetic of a run, as a dict with the keys batch_size (samples per
    rollout), minibatch_size, num_iterations (whole rollouts within total_timesteps) and
    gradient_steps (in the whole run).
    """
    raise NotImplementedError("exercise 6.1")


def learning_rate(initial: float, iterations_done: int, iterations: int) -> float:
    """Exercise 6.2. The annealed learning rate of the next iteration: α₀ for the first,
    falling on a straight line so that it would reach 0 after the last.
    """
    raise NotImplementedError("exercise 6.2")


def finished_episode_returns(rewards: torch.Tensor, dones: torch.Tensor,
                             running: torch.Tensor) -> tuple[list[float], torch.Tensor]:
    """Exercise 6.3. The returns of the episodes that end during a rollout. rewards, dones:
    (T, N); running: (N,) the return each env's current episode had collected before the
    rollout. Return (the finished episodes' returns in order of time, then of env index;
    the running returns after the rollout). An episode that ends at step t includes r_t.
    """
    raise NotImplementedError("exercise 6.3")
