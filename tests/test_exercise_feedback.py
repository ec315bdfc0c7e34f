"""A failed exercise check says what was expected, what came back, and the mistake it looks like.

Each test below runs one of lectures/exercises' checks against a wrong implementation, written
as a learner would write it, and reads the failure's message.
"""

import importlib
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

EXERCISES = Path(__file__).resolve().parents[1] / "lectures" / "exercises"
sys.path.insert(0, str(EXERCISES))
feedback = importlib.import_module("feedback")


def failure_message(check, *arguments) -> str:
    """The message of the AssertionError the check raises (it must raise one)."""
    with pytest.raises(AssertionError) as failure:
        check(*arguments)
    return str(failure.value)


def surrogate_with_max(new_log_probs, old_log_probs, advantages, epsilon):
    ratio = (new_log_probs - old_log_probs).exp()
    return -torch.max(ratio * advantages, ratio.clamp(1 - epsilon, 1 + epsilon) * advantages).mean()


def surrogate_without_the_minus(new_log_probs, old_log_probs, advantages, epsilon):
    ratio = (new_log_probs - old_log_probs).exp()
    return torch.min(ratio * advantages, ratio.clamp(1 - epsilon, 1 + epsilon) * advantages).mean()


def surrogate_without_the_clip(new_log_probs, old_log_probs, advantages, epsilon):
    return -((new_log_probs - old_log_probs).exp() * advantages).mean()


def surrogate_message(wrong_surrogate, epsilon: float) -> str:
    """The failure of exercise 5.1's check when the learner's clipped_surrogate_loss is `wrong_surrogate`."""
    checks = importlib.import_module("test_lecture_05")
    return failure_message(checks.test_clipped_surrogate_loss_matches_the_library,
                           SimpleNamespace(clipped_surrogate_loss=wrong_surrogate), epsilon)


def test_a_surrogate_with_max_for_min_is_named():
    message = surrogate_message(surrogate_with_max, 0.1)
    assert "clipped_surrogate_loss(ε = 0.1): expected 0.04392, got -0.1731" in message
    assert "Likely mistake: max in place of min" in message


def test_a_surrogate_without_its_minus_sign_is_a_sign_error():
    message = surrogate_message(surrogate_without_the_minus, 0.1)
    assert "expected 0.04392, got -0.04392" in message
    assert "Likely mistake: a sign error" in message


def test_a_surrogate_without_its_clip_is_named():
    assert "a missing clip" in surrogate_message(surrogate_without_the_clip, 0.2)


def gae_without_the_done_mask(rewards, values, next_values, terminated, dones, gamma, gae_lambda):
    deltas = rewards + gamma * (1.0 - terminated.float()) * next_values - values
    advantages, running = torch.zeros_like(rewards), 0.0
    for t in reversed(range(len(rewards))):
        running = deltas[t] + gamma * gae_lambda * running
        advantages[t] = running
    return advantages


def test_a_gae_without_its_done_mask_is_named():
    checks = importlib.import_module("test_lecture_03")
    message = failure_message(checks.test_gae_matches_the_library, SimpleNamespace(gae=gae_without_the_done_mask))
    assert "gae(γ = 0.9, λ = 0.8)" in message and "largest difference at index" in message
    assert "a forgotten done mask" in message


def test_a_td_error_that_bootstraps_a_termination_is_named():
    checks = importlib.import_module("test_lecture_03")
    always_bootstrap = SimpleNamespace(td_errors=lambda rewards, values, next_values, terminated, gamma:
                                       rewards + gamma * next_values - values)
    message = failure_message(checks.test_td_errors_bootstrap_unless_terminated, always_bootstrap)
    assert "td_errors at step 5, terminated" in message and "a bootstrap after a termination" in message


def test_whitening_with_the_population_std_is_named():
    checks = importlib.import_module("test_lecture_08")
    population = SimpleNamespace(whiten=lambda advantages: (advantages - advantages.mean()) / advantages.std(unbiased=False))
    message = failure_message(checks.test_whiten_matches_the_library, population)
    assert "whiten: expected a tensor of shape (256,)" in message
    assert "the population std (n) in place of the unbiased one (n − 1)" in message


def test_an_early_stop_after_the_step_is_named():
    checks = importlib.import_module("test_lecture_07")

    def one_step_too_many(minibatch_kls, target_kl):
        for step, kl in enumerate(minibatch_kls):
            if target_kl is not None and kl > target_kl:
                return step + 1
        return len(minibatch_kls)

    message = failure_message(checks.test_gradient_steps_taken_stops_before_the_step_that_would_overshoot,
                              SimpleNamespace(gradient_steps_taken=one_step_too_many))
    assert "expected 3, got 4" in message and "the check comes before the step" in message


def test_rewards_to_go_summed_forwards_is_named():
    checks = importlib.import_module("test_lecture_01")

    def forwards(rewards, gamma):
        returns, running = torch.zeros_like(rewards), 0.0
        for t in range(len(rewards)):
            running = gamma * running + rewards[t]
            returns[t] = running
        return returns

    message = failure_message(checks.test_rewards_to_go_sums_the_discounted_future, SimpleNamespace(rewards_to_go=forwards))
    assert "expected [2.75, 3.5, 3], got [1, 2.5, 4.25]" in message and "a forward pass" in message


def test_a_wrong_answer_no_mistake_explains_says_only_what_was_expected_and_what_came_back():
    with pytest.raises(AssertionError) as failure:
        feedback.check_close(torch.tensor([1.0, 2.5]), torch.tensor([1.0, 2.0]), "f(x)", {"a missing square": torch.ones(2)})
    assert str(failure.value) == "f(x): expected [1, 2], got [1, 2.5]."


def test_a_wrong_shape_is_reported():
    with pytest.raises(AssertionError) as failure:
        feedback.check_close(torch.zeros(8, 1), torch.zeros(8), "gae")
    assert "shape (8, 1) where (8,) was expected" in str(failure.value)


def test_a_close_answer_passes():
    feedback.check_close(torch.tensor([1.0, 2.0 + 1e-7]), torch.tensor([1.0, 2.0]), "f(x)")
    feedback.check_equal("healthy", "healthy", "diagnose")


def test_a_natural_gradient_step_without_its_step_size_is_named():
    checks = importlib.import_module("test_lecture_04")
    unscaled = SimpleNamespace(natural_gradient_step=lambda gradient, fisher, max_kl: torch.linalg.solve(fisher, gradient))
    message = failure_message(checks.test_natural_gradient_step_sits_on_the_kl_boundary_with_the_largest_gain,
                              unscaled, 0, 0.01)
    assert "natural_gradient_step(δ = 0.01): expected" in message
    assert "Likely mistake: the direction F⁻¹g without its step size √(2δ / gᵀF⁻¹g)" in message


def gru_step_without_the_episode_start_mask(inputs, state, episode_start, weight_ih, weight_hh, bias_ih, bias_hh):
    input_r, input_z, input_n = (inputs @ weight_ih.T + bias_ih).chunk(3, dim=1)
    hidden_r, hidden_z, hidden_n = (state @ weight_hh.T + bias_hh).chunk(3, dim=1)
    reset, update = torch.sigmoid(input_r + hidden_r), torch.sigmoid(input_z + hidden_z)
    return (1 - update) * torch.tanh(input_n + reset * hidden_n) + update * state


def test_a_gru_step_that_carries_the_state_across_an_episode_start_is_named():
    checks = importlib.import_module("test_lecture_15")
    message = failure_message(checks.test_an_episode_start_forgets_the_state_exactly_where_it_is_set,
                              SimpleNamespace(masked_gru_step=gru_step_without_the_episode_start_mask))
    assert "masked_gru_step with episode starts at rows 0 and 2" in message and "largest difference at index (0" in message
    assert "Likely mistake: a forgotten episode-start mask" in message


def test_a_convolution_side_that_forgets_the_padding_is_named():
    checks = importlib.import_module("test_lecture_16")
    no_padding = SimpleNamespace(conv_output_side=lambda side, kernel, stride, padding=0: (side - kernel) // stride + 1)
    message = failure_message(checks.test_conv_output_side_is_the_side_torchs_convolution_gives, no_padding, 7, 3, 2, 1)
    assert "conv_output_side(side = 7, kernel = 3, stride = 2, padding = 1): expected 4, got 3" in message
    assert "Likely mistake: the padding forgotten" in message


def test_a_diagnosis_that_calls_a_falling_run_healthy_says_what_to_compare():
    checks = importlib.import_module("test_mystery_runs")
    message = failure_message(checks.test_diagnose_names_the_bug, SimpleNamespace(diagnose=lambda path: "healthy"),
                              "run_4.csv")
    assert "diagnose(run_4.csv): expected 'wrong advantage sign', got 'healthy'" in message
    assert "Likely mistake: compare the last returns with the first" in message
