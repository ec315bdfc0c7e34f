"""Checks for the exercises of lecture 1."""

import torch
from torch.distributions import Categorical


def test_rewards_to_go_sums_the_discounted_future(exercise):
    returns = exercise.rewards_to_go(torch.tensor([1.0, 2.0, 3.0]), gamma=0.5)
    assert torch.allclose(returns, torch.tensor([1 + 0.5 * 2 + 0.25 * 3, 2 + 0.5 * 3, 3.0]))


def test_rewards_to_go_with_gamma_one_counts_the_steps_left(exercise):
    assert torch.allclose(exercise.rewards_to_go(torch.ones(5), gamma=1.0), torch.tensor([5.0, 4, 3, 2, 1]))


def test_reinforce_loss_has_the_policy_gradient_and_leaves_the_weights_alone(exercise):
    logits = torch.tensor([[0.2, -0.3], [1.0, 0.5], [0.0, 0.0]], requires_grad=True)
    actions = torch.tensor([0, 1, 1])
    weights = torch.tensor([3.0, 2.0, 1.0], requires_grad=True)
    loss = exercise.reinforce_loss(Categorical(logits=logits).log_prob(actions), weights)
    loss.backward()
    probabilities = logits.detach().softmax(-1)
    expected = -(torch.eye(2)[actions] - probabilities) * weights.detach().unsqueeze(1)  # −G_t ∇_z log π
    assert torch.allclose(logits.grad, expected, atol=1e-6)
    assert weights.grad is None or torch.all(weights.grad == 0)


def test_noise_equals_signal_at_the_ratio_of_trace_to_squared_mean(exercise):
    mean = torch.tensor([1.0, 2.0])
    offsets = torch.tensor([[3.0, 0.0], [-3.0, 0.0], [0.0, 1.0], [0.0, -1.0]])  # tr Cov = (9 + 9 + 1 + 1) / 4 = 5
    assert abs(exercise.batch_size_where_noise_equals_signal(mean + offsets) - 5.0 / 5.0) < 1e-6
    assert abs(exercise.batch_size_where_noise_equals_signal(mean + 2 * offsets) - 20.0 / 5.0) < 1e-6
