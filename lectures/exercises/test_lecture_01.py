"""Checks for the exercises of lecture 1."""

import itertools

import torch
from torch.distributions import Categorical

from feedback import check_close


def test_rewards_to_go_sums_the_discounted_future(exercise):
    returns = exercise.rewards_to_go(torch.tensor([1.0, 2.0, 3.0]), gamma=0.5)
    expected = torch.tensor([1 + 0.5 * 2 + 0.25 * 3, 2 + 0.5 * 3, 3.0])
    check_close(returns, expected, "rewards_to_go([1, 2, 3], γ = 0.5)", {
        "a forward pass (G_t sums the rewards from t on, not those up to t)": torch.tensor([1.0, 2.5, 4.25]),
        "a missing discount": torch.tensor([6.0, 5.0, 3.0]),
        "γ on the step's own reward too (G_t = r_t + γ G_{t+1})": 0.5 * expected,
        "the episode's return G_0 on every step": torch.full((3,), 2.75),
    })


def test_rewards_to_go_with_gamma_one_counts_the_steps_left(exercise):
    check_close(exercise.rewards_to_go(torch.ones(5), gamma=1.0), torch.tensor([5.0, 4, 3, 2, 1]),
                "rewards_to_go([1, 1, 1, 1, 1], γ = 1)", {
                    "a forward pass (G_t sums the rewards from t on, not those up to t)": torch.tensor([1.0, 2, 3, 4, 5]),
                    "the episode's return G_0 on every step": torch.full((5,), 5.0)})


def test_reinforce_loss_has_the_policy_gradient_and_leaves_the_weights_alone(exercise):
    logits = torch.tensor([[0.2, -0.3], [1.0, 0.5], [0.0, 0.0]], requires_grad=True)
    actions = torch.tensor([0, 1, 1])
    weights = torch.tensor([3.0, 2.0, 1.0], requires_grad=True)
    loss = exercise.reinforce_loss(Categorical(logits=logits).log_prob(actions), weights)
    loss.backward()
    probabilities = logits.detach().softmax(-1)
    expected = -(torch.eye(2)[actions] - probabilities) * weights.detach().unsqueeze(1)  # −G_t ∇_z log π
    check_close(logits.grad, expected, "the gradient of reinforce_loss with respect to the logits", {
        "a mean in place of the sum over the steps": expected / 3,
        "weights left out (the log-probabilities alone)": expected / weights.detach().unsqueeze(1),
    }, atol=1e-6)
    reaching_the_weights = torch.zeros(3) if weights.grad is None else weights.grad
    check_close(reaching_the_weights, torch.zeros(3), "the gradient that reaches the weights G_t", {
        "weights not detached (G_t is a fixed weight, not something to optimise)":
            -Categorical(logits=logits.detach()).log_prob(actions)}, atol=0.0, rtol=0.0)


def test_noise_equals_signal_at_the_ratio_of_trace_to_squared_mean(exercise):
    mean = torch.tensor([1.0, 2.0])
    offsets = torch.tensor([[3.0, 0.0], [-3.0, 0.0], [0.0, 1.0], [0.0, -1.0]])  # tr Cov = (9 + 9 + 1 + 1) / 4 = 5
    for scale, trace in ((1, 5.0), (2, 20.0)):  # |mean|² = 5
        check_close(exercise.batch_size_where_noise_equals_signal(mean + scale * offsets), trace / 5.0,
                    f"batch_size_where_noise_equals_signal (tr Cov = {trace:g}, |mean|² = 5)", {
                        "|mean| in place of |mean|² in the denominator": trace / 5.0 ** 0.5,
                        "the unbiased (n − 1) covariance": trace * 4 / 3 / 5.0,
                        "the ratio upside down, |mean|² / tr Cov": 5.0 / trace,
                    }, atol=1e-6, rtol=0.0)


def test_discounted_back_to_start_multiplies_g_t_by_gamma_to_the_t(exercise):
    weights = exercise.discounted_back_to_start(torch.tensor([4.0, 2.0, 1.0]), gamma=0.5)
    check_close(weights, torch.tensor([4.0, 1.0, 0.25]), "discounted_back_to_start([4, 2, 1], γ = 0.5)", {
        "γ^(t+1) in place of γ^t (step 0 is not discounted)": torch.tensor([2.0, 0.5, 0.125]),
        "G_t left as it is": torch.tensor([4.0, 2.0, 1.0]),
        "the powers of γ in reverse, γ^(T−1−t)": torch.tensor([1.0, 1.0, 1.0]),
    })


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

    check_close(expected_estimate(discounted=True), true_gradient,
                "E[Σ_t ∇log π(a_t)·w_t] with w_t = discounted_back_to_start(G_t), against ∇E[G_0]",
                {"G_t left as it is (that estimate is biased)": expected_estimate(discounted=False)}, atol=1e-12, rtol=0.0)
    undiscounted = expected_estimate(discounted=False)
    assert not torch.allclose(undiscounted, true_gradient, atol=1e-3), (
        f"with G_t alone the estimate should be biased, off ∇E[G_0] = {true_gradient.tolist()}; it came back "
        f"{undiscounted.tolist()}: reinforce_loss does not weigh each step's log-probability by its own weight")
