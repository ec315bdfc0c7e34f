"""Checks for the exercises of lecture 15."""

import torch
from torch import nn

from ppo.models.recurrent_networks import RecurrentCores


def gru_weights(input_size: int, hidden_size: int, seed: int) -> nn.GRUCell:
    torch.manual_seed(seed)
    return nn.GRUCell(input_size, hidden_size).double()


def test_a_step_without_episode_starts_is_torchs_gru_cell(exercise):
    cell = gru_weights(5, 4, seed=0)
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(6, 5, generator=generator, dtype=torch.float64)
    state = torch.randn(6, 4, generator=generator, dtype=torch.float64)
    new_state = exercise.masked_gru_step(inputs, state, torch.zeros(6, dtype=torch.bool), cell.weight_ih,
                                         cell.weight_hh, cell.bias_ih, cell.bias_hh)
    with torch.no_grad():
        assert torch.allclose(new_state, cell(inputs, state), atol=1e-12)


def test_an_episode_start_forgets_the_state_exactly_where_it_is_set(exercise):
    cell = gru_weights(3, 4, seed=2)
    generator = torch.Generator().manual_seed(3)
    inputs = torch.randn(4, 3, generator=generator, dtype=torch.float64)
    state = torch.randn(4, 4, generator=generator, dtype=torch.float64)
    starts = torch.tensor([True, False, True, False])
    new_state = exercise.masked_gru_step(inputs, state, starts, cell.weight_ih, cell.weight_hh, cell.bias_ih,
                                         cell.bias_hh)
    with torch.no_grad():
        fresh = cell(inputs[starts], torch.zeros(2, 4, dtype=torch.float64))
        assert torch.allclose(new_state[starts], fresh, atol=1e-12)
        assert torch.allclose(new_state[~starts], cell(inputs[~starts], state[~starts]), atol=1e-12)
    assert not torch.allclose(new_state[starts], cell(inputs[starts], state[starts]).detach(), atol=1e-3)


def test_steps_agree_with_the_librarys_recurrent_core_over_a_sequence(exercise):
    """Ten steps with episode starts inside, against ppo.models.recurrent_networks (float32; the
    library's batched matmuls round differently, so the bound is a few float32 ulps)."""
    torch.manual_seed(4)
    cores = RecurrentCores("gru", num_cores=1, input_size=3, hidden_size=5, ortho_init=False)
    generator = torch.Generator().manual_seed(5)
    inputs = torch.randn(10, 2, 3, generator=generator)  # (T, B, I)
    starts = torch.zeros(10, 2, dtype=torch.bool)
    starts[0], starts[4, 0], starts[7, 1] = True, True, True
    library_state = torch.randn(1, 2, 5, generator=generator)  # (K, B, H)
    state = library_state[0].clone()
    with torch.no_grad():
        gates = cores.input_gates(inputs.reshape(1, 20, 3)).view(1, 10, 2, -1)
        for t in range(10):
            library_state = cores.step(gates[:, t], library_state * (~starts[t]).float().view(1, 2, 1))
            state = exercise.masked_gru_step(inputs[t], state, starts[t], cores.weight_ih[0], cores.weight_hh[0],
                                             cores.bias_ih[0], cores.bias_hh[0])
            assert torch.allclose(state, library_state[0], atol=1e-6), f"step {t}"


def test_probe_of_an_exact_affine_target_scores_one_and_of_noise_scores_near_zero(exercise):
    generator = torch.Generator().manual_seed(6)
    features = torch.randn(400, 3, generator=generator, dtype=torch.float64)
    affine = torch.stack([2 * features[:, 0] - features[:, 2] + 5, -3 * features[:, 1] + 0.5], dim=1)  # (400, 2)
    r2 = exercise.linear_probe_r2(features[:300], affine[:300], features[300:], affine[300:])
    assert r2.shape == (2,)
    assert torch.allclose(r2, torch.ones(2, dtype=torch.float64), atol=1e-9)
    noise = torch.randn(400, 1, generator=generator, dtype=torch.float64) + 7.0  # unrelated to the features
    r2_noise = exercise.linear_probe_r2(features[:300], noise[:300], features[300:], noise[300:])
    assert -0.1 < float(r2_noise[0]) < 0.05


def test_probe_r2_is_measured_on_the_test_rows_against_their_own_mean(exercise):
    """A hand-worked case: train rows fit y = x exactly; the test rows' targets are off by a constant 1."""
    train_x = torch.tensor([[0.0], [1.0], [2.0]], dtype=torch.float64)
    test_x = torch.tensor([[0.0], [2.0]], dtype=torch.float64)
    test_y = torch.tensor([[1.0], [3.0]], dtype=torch.float64)  # predictions 0 and 2: errors 1, 1; spread 1 + 1
    r2 = exercise.linear_probe_r2(train_x, train_x.clone(), test_x, test_y)
    assert torch.allclose(r2, torch.tensor([0.0], dtype=torch.float64), atol=1e-12)
