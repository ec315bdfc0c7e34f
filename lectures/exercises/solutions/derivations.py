"""Solutions to lectures/exercises/derivations.py."""

import torch


def score_function(logits):
    # ∂/∂z_c [z_a − log Σ_b exp z_b] = 1[a = c] − π(c): row a is e_a − π
    probabilities = logits.softmax(-1)
    return torch.eye(len(logits), dtype=logits.dtype) - probabilities.unsqueeze(0)


def expected_gradient(logits, weights):
    probabilities = logits.softmax(-1)
    return (probabilities.unsqueeze(1) * score_function(logits) * weights.unsqueeze(1)).sum(dim=0)


def gae_as_discounted_sum(rewards, values, last_value, gamma, gae_lambda):
    next_values = torch.cat([values[1:], torch.tensor([last_value], dtype=values.dtype)])
    deltas = rewards + gamma * next_values - values
    steps = len(rewards)
    advantages = torch.zeros_like(values)
    for t in range(steps):
        for offset in range(steps - t):
            advantages[t] += (gamma * gae_lambda) ** offset * deltas[t + offset]
    return advantages


def lambda_return_minus_value(rewards, values, last_value, gamma, gae_lambda):
    steps = len(rewards)
    bootstrap = torch.cat([values, torch.tensor([last_value], dtype=values.dtype)])  # V(s_0) … V(s_T)
    result = torch.zeros_like(values)
    for t in range(steps):
        horizon = steps - t
        discounted_rewards = [gamma**k * rewards[t + k] for k in range(horizon)]
        n_step = [sum(discounted_rewards[:n]) + gamma**n * bootstrap[t + n] for n in range(1, horizon + 1)]
        weights = [(1 - gae_lambda) * gae_lambda ** (n - 1) for n in range(1, horizon)] + [gae_lambda ** (horizon - 1)]
        result[t] = sum(weight * value for weight, value in zip(weights, n_step)) - values[t]
    return result


def kl_regularised_objective(logits, reference_probabilities, rewards, beta):
    log_probabilities = logits.log_softmax(-1)
    probabilities = log_probabilities.exp()
    return (probabilities * rewards).sum() - beta * (probabilities * (log_probabilities - reference_probabilities.log())).sum()


def maximise_by_gradient_ascent(reference_probabilities, rewards, beta, steps=400, learning_rate=0.2):
    logits = reference_probabilities.log().clone().requires_grad_(True)
    optimizer = torch.optim.Adam([logits], lr=learning_rate)
    for _ in range(steps):
        optimizer.zero_grad()
        (-kl_regularised_objective(logits, reference_probabilities, rewards, beta)).backward()
        optimizer.step()
    return logits.detach().softmax(-1)


def closed_form_optimum(reference_probabilities, rewards, beta):
    # π* ∝ π_ref exp(r / β); softmax subtracts the largest exponent, so nothing overflows
    return (reference_probabilities.log() + rewards / beta).softmax(-1)


def optimal_objective_value(reference_probabilities, rewards, beta):
    # J(π*) = β log Σ_y π_ref(y) exp(r(y) / β) = β log Z
    return float(beta * torch.logsumexp(reference_probabilities.log() + rewards / beta, dim=-1))
