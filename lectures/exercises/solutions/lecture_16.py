"""Solutions to the exercises of lecture 16 — seeing."""

import torch


def conv_output_side(side: int, kernel: int, stride: int, padding: int = 0) -> int:
    """Exercise 16.1: ⌊(side + 2·padding − kernel) / stride⌋ + 1, refused when the kernel does not fit."""
    padded = side + 2 * padding
    if padded < kernel:
        raise ValueError(f"kernel {kernel} does not fit in an image of side {padded} (side {side} + 2 × padding "
                         f"{padding}); it must be at most {padded}")
    return (padded - kernel) // stride + 1


def masked_log_softmax(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Exercise 16.2: log_softmax(z̃), z̃ = z where valid, else finfo.min; a torch.where: no gradient to z_invalid."""
    lowest = torch.finfo(logits.dtype).min
    masked = torch.where(mask, logits, lowest)  # exp(lowest − max) underflows to exactly 0
    return torch.log_softmax(masked, dim=-1)  # invalid: lowest − logsumexp rounds back to lowest


def best_guess_accuracy(keys: torch.Tensor, targets: torch.Tensor) -> float:
    """Exercise 16.3: (1/n) Σ_k max_y count(k, y), from a key × target table of counts."""
    _, key_index = torch.unique(keys, return_inverse=True)  # (n,) 0..K−1
    _, target_index = torch.unique(targets, return_inverse=True)  # (n,) 0..Y−1
    counts = torch.zeros(int(key_index.max()) + 1, int(target_index.max()) + 1, dtype=torch.int64)  # (K, Y)
    counts.index_put_((key_index, target_index), torch.ones_like(key_index), accumulate=True)
    return int(counts.amax(dim=1).sum()) / len(targets)
