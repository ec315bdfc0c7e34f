"""Checks for the exercises of lecture 1."""

import itertools

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


def test_discounted_back_to_start_multiplies_g_t_by_gamma_to_the_t(exercise):
    weights = exercise.discounted_back_to_start(torch.tensor([4.0, 2.0, 1.0]), gamma=0.5)
    assert torch.allclose(weights, torch.tensor([4.0, 1.0, 0.25]))


def test_gamma_t_weights_give_the_exact_gradient_of_the_discounted_return(exercise):
    """Two steps, two actions, a policy with its own logits at each step: enumerate the four
    episodes, so E[Σ_t ∇log π(a_t)·w_t] is exact and can be compared with ∇ E[G_0] from autograd."""
    gamma = 0.5
    logits = torch.tensor([[0.3, -0.2], [-0.4, 0.6]], dtype=torch.float64, requires_grad=True)
    reward = torch.tensor([[1.0, 0.0], [0.0, 3.0]], dtype=torch.float64)  # r_t(a_t)
    probabilities = logits.softmax(-1)
    objective = sum(probabilities[0, a0] * probabilities[1, a1] * (reward[0, a0] + gamma * reward[1, a1])
                    for a0, a1 in itertools.product(range(2), repeat=2))
    (true_gradient,) = torch.autograd.grad(objective, logits)

    def expected_estimate(discounted: bool) -> torch.Tensor:
        total = torch.zeros_like(logits)
        for actions in itertools.product(range(2), repeat=2):
            actions = torch.tensor(actions)
            rewards = reward[torch.arange(2), actions]
            returns = torch.stack([rewards[0] + gamma * rewards[1], rewards[1]])  # G_t
            weights = exercise.discounted_back_to_start(returns, gamma) if discounted else returns
            log_probs = Categorical(logits=logits).log_prob(actions)
            (gradient,) = torch.autograd.grad(-exercise.reinforce_loss(log_probs, weights), logits)
            total += log_probs.detach().sum().exp() * gradient
        return total

    assert torch.allclose(expected_estimate(discounted=True), true_gradient, atol=1e-12)
    assert not torch.allclose(expected_estimate(discounted=False), true_gradient, atol=1e-3)  # G_t alone: biased
