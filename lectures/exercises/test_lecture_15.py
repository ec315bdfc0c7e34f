"""Checks for the exercises of lecture 15."""

import torch
from torch import nn

from feedback import check_close
from ppo.models.recurrent_networks import RecurrentCores


def gru_weights(input_size: int, hidden_size: int, seed: int) -> nn.GRUCell:
    torch.manual_seed(seed)
    return nn.GRUCell(input_size, hidden_size).double()


def gru_step(cell: nn.GRUCell, inputs, state, starts, swap_update=False, reset_after_bias=True, mask="starts"):
    """torch's GRUCell equations written out, with the usual mistakes of exercise 15.1 as switches."""
    keep = {"starts": ~starts, "none": torch.ones_like(starts), "inverted": starts}[mask]
    state = state * keep.to(state.dtype).unsqueeze(1)
    input_r, input_z, input_n = (inputs @ cell.weight_ih.T + cell.bias_ih).chunk(3, dim=1)
    hidden_r, hidden_z, hidden_n = (state @ cell.weight_hh.T + cell.bias_hh).chunk(3, dim=1)
    reset, update = torch.sigmoid(input_r + hidden_r), torch.sigmoid(input_z + hidden_z)
    if reset_after_bias:
        candidate = torch.tanh(input_n + reset * hidden_n)
    else:  # r ⊙ (W_hn h) + b_hn in place of r ⊙ (W_hn h + b_hn)
        hidden_bias = cell.bias_hh.chunk(3)[2]
        candidate = torch.tanh(input_n + reset * (hidden_n - hidden_bias) + hidden_bias)
    if swap_update:
        return update * candidate + (1 - update) * state
    return (1 - update) * candidate + update * state


def gru_mistakes(cell, inputs, state, starts) -> dict[str, torch.Tensor]:
    """The new state each usual mistake of exercise 15.1 gives."""
    with torch.no_grad():
        return {
            "the update gate's roles swapped (h' = (1 − z) ⊙ n + z ⊙ h: z keeps the old state)":
                gru_step(cell, inputs, state, starts, swap_update=True),
            "the reset gate applied before the hidden bias (torch's GRU: n = tanh(W_in x + b_in + r ⊙ (W_hn h + b_hn)))":
                gru_step(cell, inputs, state, starts, reset_after_bias=False),
            "a forgotten episode-start mask (the state carried across the episode boundary)":
                gru_step(cell, inputs, state, starts, mask="none"),
            "the mask inverted (the state zeroed where an episode goes on)":
                gru_step(cell, inputs, state, starts, mask="inverted"),
        }


def test_a_step_without_episode_starts_is_torchs_gru_cell(exercise):
    cell = gru_weights(5, 4, seed=0)
    generator = torch.Generator().manual_seed(1)
    inputs = torch.randn(6, 5, generator=generator, dtype=torch.float64)
    state = torch.randn(6, 4, generator=generator, dtype=torch.float64)
    no_starts = torch.zeros(6, dtype=torch.bool)
    new_state = exercise.masked_gru_step(inputs, state, no_starts, cell.weight_ih, cell.weight_hh, cell.bias_ih,
                                         cell.bias_hh)
    with torch.no_grad():
        check_close(new_state, cell(inputs, state), "masked_gru_step without episode starts (torch's GRUCell)",
                    gru_mistakes(cell, inputs, state, no_starts), atol=1e-12, rtol=0.0)


def test_an_episode_start_forgets_the_state_exactly_where_it_is_set(exercise):
    cell = gru_weights(3, 4, seed=2)
    generator = torch.Generator().manual_seed(3)
    inputs = torch.randn(4, 3, generator=generator, dtype=torch.float64)
    state = torch.randn(4, 4, generator=generator, dtype=torch.float64)
    starts = torch.tensor([True, False, True, False])
    new_state = exercise.masked_gru_step(inputs, state, starts, cell.weight_ih, cell.weight_hh, cell.bias_ih,
                                         cell.bias_hh)
    with torch.no_grad():
        expected = gru_step(cell, inputs, state, starts)
        check_close(expected[starts], cell(inputs[starts], torch.zeros(2, 4, dtype=torch.float64)),
                    "the check's own reference (a fresh state at an episode start)", atol=1e-12, rtol=0.0)
        check_close(new_state, expected, "masked_gru_step with episode starts at rows 0 and 2 (a zero state there)",
                    gru_mistakes(cell, inputs, state, starts), atol=1e-12, rtol=0.0)


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
            check_close(state, library_state[0], f"masked_gru_step at step {t} of 10, against the library's core",
                        atol=1e-6, rtol=0.0)


def probe_r2(train_x, train_y, test_x, test_y, intercept=True, rows="test", mean_of="test") -> torch.Tensor:
    """R² of a least-squares probe, with the usual mistakes of exercise 15.2 as switches."""
    def design(features):
        ones = torch.ones(len(features), 1, dtype=features.dtype)
        return torch.cat([features, ones], dim=1) if intercept else features
    weights = torch.linalg.lstsq(design(train_x), train_y).solution
    x, y = (test_x, test_y) if rows == "test" else (train_x, train_y)
    errors = ((y - design(x) @ weights) ** 2).sum(0)
    spread = ((y - (train_y if mean_of == "train" else y).mean(0)) ** 2).sum(0)
    return 1 - errors / spread


def probe_mistakes(train_x, train_y, test_x, test_y) -> dict[str, torch.Tensor]:
    """The R² each usual mistake of exercise 15.2 gives."""
    right = probe_r2(train_x, train_y, test_x, test_y)
    return {
        "R² measured on the training rows (a probe always fits those best)": probe_r2(train_x, train_y, test_x, test_y,
                                                                                      rows="train"),
        "no intercept column (a probe through the origin cannot fit an offset)": probe_r2(train_x, train_y, test_x,
                                                                                          test_y, intercept=False),
        "the spread taken about the training targets' mean, not the test rows' own": probe_r2(
            train_x, train_y, test_x, test_y, mean_of="train"),
        "the unexplained share, errors / spread, in place of 1 − errors / spread": 1 - right,
        "one R² averaged over the targets, not one per target": right.mean().reshape(1),
    }


def test_probe_of_an_exact_affine_target_scores_one_and_of_noise_scores_near_zero(exercise):
    generator = torch.Generator().manual_seed(6)
    features = torch.randn(400, 3, generator=generator, dtype=torch.float64)
    affine = torch.stack([2 * features[:, 0] - features[:, 2] + 5, -3 * features[:, 1] + 0.5], dim=1)  # (400, 2)
    r2 = exercise.linear_probe_r2(features[:300], affine[:300], features[300:], affine[300:])
    check_close(r2, torch.ones(2, dtype=torch.float64), "linear_probe_r2 of two exact affine targets",
                probe_mistakes(features[:300], affine[:300], features[300:], affine[300:]), atol=1e-9, rtol=0.0)
    noise = torch.randn(400, 1, generator=generator, dtype=torch.float64) + 7.0  # unrelated to the features
    r2_noise = exercise.linear_probe_r2(features[:300], noise[:300], features[300:], noise[300:])
    check_close(r2_noise, probe_r2(features[:300], noise[:300], features[300:], noise[300:]),
                "linear_probe_r2 of a target unrelated to the features (near 0, below it on test rows)",
                probe_mistakes(features[:300], noise[:300], features[300:], noise[300:]), atol=1e-9, rtol=0.0)
    assert -0.1 < float(r2_noise[0]) < 0.05  # the reference itself: no information, no fit


def test_probe_r2_is_measured_on_the_test_rows_against_their_own_mean(exercise):
    """A hand-worked case: train rows fit y = x exactly; the test rows' targets are off by a constant 1."""
    train_x = torch.tensor([[0.0], [1.0], [2.0]], dtype=torch.float64)
    test_x = torch.tensor([[0.0], [2.0]], dtype=torch.float64)
    test_y = torch.tensor([[1.0], [3.0]], dtype=torch.float64)  # predictions 0 and 2: errors 1, 1; spread 1 + 1
    r2 = exercise.linear_probe_r2(train_x, train_x.clone(), test_x, test_y)
    check_close(r2, torch.tensor([0.0], dtype=torch.float64), "linear_probe_r2 of the hand-worked case",
                probe_mistakes(train_x, train_x.clone(), test_x, test_y), atol=1e-12, rtol=0.0)
