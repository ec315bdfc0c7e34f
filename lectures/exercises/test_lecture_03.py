"""Checks for the exercises of lecture 3."""

import functools

import pytest
import torch

from feedback import check_close, check_equal
from ppo.algorithm.advantages import compute_gae

GAMMA, LAMBDA = 0.9, 0.8
LAMBDAS = (0.0, 0.2, 0.4, 0.6, 0.8, 0.9, 0.95, 0.97, 0.99, 1.0)


@functools.cache
def chain_errors(critic_error: float, num_envs: int = 500, steps: int = 256, measured: int = 128, seed: int = 0):
    """Lecture 3's experiment, small: {λ: (bias², variance)} of R^λ as an estimate of Q(s, a) on the
    11-state random walk (γ = 0.95, π(right) = ½, ±1 for leaving right/left), critic V + noise."""
    states, gamma = 11, 0.95
    transition = torch.zeros(states + 2, states + 2, dtype=torch.float64)
    reward = torch.zeros(states + 2, dtype=torch.float64)
    for s in range(1, states + 1):
        transition[s, s - 1] = transition[s, s + 1] = 0.5
    reward[1], reward[states] = -0.5, 0.5
    values = torch.linalg.solve(torch.eye(states + 2, dtype=torch.float64) - gamma * transition, reward)
    step_reward = torch.zeros(states + 2, dtype=torch.float64)
    step_reward[0], step_reward[-1] = -1.0, 1.0  # reward of arriving in each state
    q = torch.stack([step_reward[:-2] + gamma * values[:-2], step_reward[2:] + gamma * values[2:]], dim=1)  # (s−1, a)
    noise = torch.randn(states + 2, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    critic = values + noise * critic_error * float(values[1:-1].std())
    critic[0] = critic[-1] = 0.0
    generator = torch.Generator().manual_seed(seed)
    state, visited, actions = torch.full((num_envs,), 6), [], []
    for _ in range(steps):
        action = (torch.rand(num_envs, generator=generator) < 0.5).long()
        visited.append(state)
        actions.append(action)
        state = state + 2 * action - 1
        state = torch.where((state == 0) | (state == states + 1), torch.full_like(state, 6), state)
    visited, actions = torch.stack(visited), torch.stack(actions)  # (T, N)
    arrived = visited + 2 * actions - 1
    ended = (arrived == 0) | (arrived == states + 1)
    pair = (visited * 2 + actions)[:measured].flatten()
    results = {}
    for gae_lambda in LAMBDAS:
        _, returns = compute_gae(step_reward[arrived], critic[visited], critic[arrived], ended, ended, gamma, gae_lambda)
        error = (returns - q[visited - 1, actions])[:measured].flatten()
        count = torch.zeros(2 * (states + 2), dtype=torch.float64).index_add_(0, pair, torch.ones_like(error))
        mean = torch.zeros_like(count).index_add_(0, pair, error) / count.clamp(min=1)
        square = torch.zeros_like(count).index_add_(0, pair, error**2) / count.clamp(min=1)
        weight = count / count.sum()
        results[gae_lambda] = (float((weight * mean**2).sum()), float((weight * (square - mean**2)).sum()))
    return results


@pytest.mark.parametrize("batch_size", [1, 16, 4096])
def test_predicted_best_lambda_is_what_the_lecture_finds(exercise, batch_size):
    predicted = exercise.predict_best_lambda(batch_size)
    errors = {gae_lambda: bias + variance / batch_size for gae_lambda, (bias, variance) in chain_errors(0.5).items()}
    check_equal(predicted in errors, True, f"whether predict_best_lambda({batch_size}) = {predicted} is one of "
                f"the lecture's λs {sorted(errors)}")
    best = min(errors, key=errors.get)
    assert errors[predicted] <= 1.1 * errors[best], (
        f"predict_best_lambda({batch_size}): expected λ = {best} (error bias² + variance/B = {errors[best]:.3g}) or one "
        f"within 10% of it, got λ = {predicted} (error {errors[predicted]:.3g})"
        + (".\n  The variance of a batch of B estimates is divided by B, its bias is not: a large batch wants a "
           "larger λ" if predicted < best else ".\n  A small batch is dominated by the variance, which a smaller λ "
           "lowers"))


def an_episode_fragment():
    generator = torch.Generator().manual_seed(0)
    rewards = torch.randn(8, generator=generator)
    values = torch.randn(8, generator=generator)
    next_values = torch.cat([values[1:], torch.randn(1, generator=generator)])
    next_values[2] = 5.0  # V(final observation) of the episode truncated at step 2
    terminated = torch.zeros(8, dtype=torch.bool)
    terminated[5] = True
    dones = terminated.clone()
    dones[2] = True
    return rewards, values, next_values, terminated, dones


def test_td_errors_bootstrap_unless_terminated(exercise):
    rewards, values, next_values, terminated, _ = an_episode_fragment()
    deltas = exercise.td_errors(rewards, values, next_values, terminated, GAMMA)
    check_close(deltas[2], rewards[2] + GAMMA * 5.0 - values[2], "td_errors at step 2, truncated (V(final obs) = 5)",
                {"no bootstrap after a truncation (only a termination has no future)": rewards[2] - values[2]})
    check_close(deltas[5], rewards[5] - values[5], "td_errors at step 5, terminated",
                {"a bootstrap after a termination (the next state has value 0)":
                 rewards[5] + GAMMA * next_values[5] - values[5]})
    check_close(deltas[0], rewards[0] + GAMMA * values[1] - values[0], "td_errors at step 0", {
        "a missing γ": rewards[0] + values[1] - values[0],
        "V(s_t) not subtracted": rewards[0] + GAMMA * values[1]})


def test_gae_matches_the_library(exercise):
    rewards, values, next_values, terminated, dones = an_episode_fragment()
    mine = exercise.gae(rewards, values, next_values, terminated, dones, GAMMA, LAMBDA)
    column = lambda x: x.unsqueeze(1)  # noqa: E731  (T,) → (T, 1), one environment
    library, _ = compute_gae(column(rewards), column(values), column(next_values), column(terminated), column(dones),
                             GAMMA, LAMBDA)
    never = torch.zeros_like(dones)

    def gae_with(terminated_flags, done_flags, gae_lambda=LAMBDA):
        return compute_gae(column(rewards), column(values), column(next_values), column(terminated_flags),
                           column(done_flags), GAMMA, gae_lambda)[0].squeeze(1)

    check_close(mine, library.squeeze(1), f"gae(γ = {GAMMA}, λ = {LAMBDA}) on 8 steps ending episodes at 2 and 5", {
        "a forgotten done mask (the sum runs on into the next episode)": gae_with(terminated, never),
        "the recursion cut only at terminations (a truncation ends the episode too)": gae_with(terminated, terminated),
        "truncations treated as terminations (no bootstrap at step 2)": gae_with(dones, dones),
        "the TD errors alone (λ left out of the recursion)": gae_with(terminated, dones, 0.0),
    }, atol=1e-6)


def test_lambda_return_is_gae_plus_the_value(exercise):
    rewards, values, _, _, _ = an_episode_fragment()
    next_values = torch.cat([values[1:], torch.tensor([0.7])])  # one episode: V(s_{t+1}) is the next step's value
    no_end = torch.zeros(8, dtype=torch.bool)
    advantages, returns = compute_gae(rewards.unsqueeze(1), values.unsqueeze(1), next_values.unsqueeze(1),
                                      no_end.unsqueeze(1), no_end.unsqueeze(1), GAMMA, LAMBDA)
    check_close(exercise.lambda_return(rewards, values, next_values, GAMMA, LAMBDA), returns.squeeze(1),
                f"lambda_return(γ = {GAMMA}, λ = {LAMBDA})", {
                    "GAE's advantage, without + V(s_t)": advantages.squeeze(1),
                }, atol=1e-5)
