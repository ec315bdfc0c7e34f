"""Exercises for lecture 16 — seeing. Check: pytest lectures/exercises/test_lecture_16.py

No torch.nn in this module: 16.1 is arithmetic, not a convolution (torch.log_softmax and
torch.logsumexp are in torch itself).
"""

import torch


def conv_output_side(side: int, kernel: int, stride: int, padding: int = 0) -> int:
    """Exercise 16.1. The side of a square convolution's output (torch.nn.Conv2d, dilation 1).

    An image of side `side`, padded with `padding` zeros on each border, read by a
    `kernel` × `kernel` filter that moves `stride` cells at a time, gives an output of side

        ⌊(side + 2·padding − kernel) / stride⌋ + 1

    (NatureCNN: 84 → 20 → 9 → 7; the MinAtar CNN: 10 → 8). Return it as an int. When the
    kernel does not fit in the padded image (side + 2·padding < kernel), raise ValueError
    with a one-line message that names the kernel and the padded side.
    """
    raise NotImplementedError("exercise 16.1")


def masked_log_softmax(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Exercise 16.2. log π(a | s) of the masked categorical, over the last dimension.

    logits z (..., n) float; mask m (..., n) bool, True where the action is valid (every
    row has at least one). Return (..., n):

        log π(a | s) = z_a − log Σ_{b valid} exp(z_b)    for a valid action a,
        log π(a | s) = torch.finfo(z.dtype).min          for an invalid one,

    so that π(a | s) = exp(log π(a | s)) is exactly 0 for an invalid action and the valid
    ones' probabilities sum to 1. The most negative finite number, not −inf: a loss that
    sums π · log π over every action (the entropy) would meet 0 · (−inf) = NaN.
    No gradient may reach an invalid action's logit, whatever loss is built on the result:
    the invalid logits must not take part in the computation at all (the lecture's
    section 5 says how the library makes sure of it).
    """
    raise NotImplementedError("exercise 16.2")


def best_guess_accuracy(keys: torch.Tensor, targets: torch.Tensor) -> float:
    """Exercise 16.3. How well a discrete key settles a discrete target, on n steps.

    keys (n,) and targets (n,) are integer tensors (any values). The best predictor of the
    target from the key answers, for each key k, its most frequent target; its accuracy,
    scored on the same n steps, is

        accuracy = (1/n) Σ_k max_y #{i : keys_i = k, targets_i = y}.

    1.0 when the key determines the target; the majority target's share when it says
    nothing about it. Scored on the steps it was read from, it is an upper bound on what
    any function of the key can do there (lecture 16: the ball's direction from the cells
    of one frame, with and without the trail channel). Return a Python float.
    """
    raise NotImplementedError("exercise 16.3")
