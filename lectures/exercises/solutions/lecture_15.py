"""Solutions to the exercises of lecture 15 — memory."""

import torch


def masked_gru_step(inputs: torch.Tensor, state: torch.Tensor, episode_start: torch.Tensor,
                    weight_ih: torch.Tensor, weight_hh: torch.Tensor, bias_ih: torch.Tensor,
                    bias_hh: torch.Tensor) -> torch.Tensor:
    """Exercise 15.1: h ← h · (1 − start), then torch's GRUCell equations."""
    state = state * (~episode_start).to(state.dtype).unsqueeze(1)  # (B, H): zero where an episode starts
    input_r, input_z, input_n = (inputs @ weight_ih.T + bias_ih).chunk(3, dim=1)
    hidden_r, hidden_z, hidden_n = (state @ weight_hh.T + bias_hh).chunk(3, dim=1)
    reset = torch.sigmoid(input_r + hidden_r)
    update = torch.sigmoid(input_z + hidden_z)
    candidate = torch.tanh(input_n + reset * hidden_n)
    return (1 - update) * candidate + update * state


def linear_probe_r2(train_features: torch.Tensor, train_targets: torch.Tensor,
                    test_features: torch.Tensor, test_targets: torch.Tensor) -> torch.Tensor:
    """Exercise 15.2: least squares on [features, 1], R² per target on the test rows."""
    def with_intercept(features):
        return torch.cat([features, torch.ones(len(features), 1, dtype=features.dtype)], dim=1)

    weights = torch.linalg.lstsq(with_intercept(train_features), train_targets).solution  # (d + 1, k)
    predicted = with_intercept(test_features) @ weights
    errors = ((test_targets - predicted) ** 2).sum(0)
    spread = ((test_targets - test_targets.mean(0)) ** 2).sum(0)
    return 1 - errors / spread
