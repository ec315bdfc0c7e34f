"""Exercises for lecture 8 — implementation details. Check: pytest lectures/exercises/test_lecture_08.py"""

import torch


def whiten(advantages: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Exercise 8.1. Advantage normalisation ("whitening", the library's norm_adv):
    shift and scale a batch of advantages so that it has mean 0 and standard deviation 1.
    advantages: (n,) → (n,). Use the unbiased standard deviation (as torch.std), and add
    eps to the standard deviation before you divide, so that a batch of equal advantages
    gives zeros instead of NaN. (Lecture 8, part A, switches it on and off; the trainer
    applies it to each minibatch.)
    """
    raise NotImplementedError("exercise 8.1")


def shuffled_minibatches(batch_size: int, num_minibatches: int, generator: torch.Generator) -> list[torch.Tensor]:
    """Exercise 8.2. One epoch's minibatches: a random permutation of 0 … batch_size − 1
    (drawn with `generator`) cut into num_minibatches equal index tensors. Assume
    num_minibatches divides batch_size.
    """
    raise NotImplementedError("exercise 8.2")


def reward_with_bootstrap(reward: torch.Tensor, truncated: torch.Tensor, final_value: torch.Tensor,
                          gamma: float) -> torch.Tensor:
    """Exercise 8.3. Another way to bootstrap a time-limit cut, for code that treats every
    end of an episode as a termination: change the reward of each truncated step so that
    its TD error, computed as if the step had terminated, equals the bootstrapped one
    (δ_t = r_t + γ V(final observation) − V(s_t)). Return the changed rewards. All
    arguments (N,) (truncated as bools); final_value: V(final observation).
    """
    raise NotImplementedError("exercise 8.3")
