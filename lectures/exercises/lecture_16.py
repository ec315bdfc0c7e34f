"""Exercises for lecture 16 — seeing. Check: pytest lectures/exercises/test_lecture_16.py

No torch.nn in this module: 16.1 is arithmetic, not a convolution (torch.log_softmax and
torch.logsumexp are in torch itself).
"""

import torch


def conv_output_side(side: int, kernel: int, stride: int, padding: int = 0) -> int:
    """Exercise 16.1. The side of a square convolution's output (torch.nn.Conv2d, dilation 1).

    An image of side `side` is padded with `padding` zeros on each border and read by a
    `kernel` × `kernel` filter that starts at the top-left corner and moves `stride` cells
    at a time. How many positions along one side does the filter take while it still fits
    entirely inside the padded image? Count them with integer arithmetic and return an int.
    Test yourself on the library's CNNs: NatureCNN takes 84 to 20, 9 and 7 (kernels 8, 4,
    3; strides 4, 2, 1); the MinAtar CNN takes 10 to 8 (kernel 3, stride 1). When the kernel
    does not fit in the padded image at all, raise ValueError with a one-line message that
    names the kernel and the padded side. (Lecture 16, "2. The convolutional encoder".)
    """
    raise NotImplementedError("exercise 16.1")


def masked_log_softmax(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Exercise 16.2. log π(a | s) of the masked categorical, over the last dimension.

    logits z (..., n) float; mask m (..., n) bool, True where the action is valid (every
    row has at least one). Return (..., n) such that:

    * the valid actions' probabilities exp(log π) are a softmax over the valid logits only,
      and sum to 1;
    * an invalid action's log π is torch.finfo(z.dtype).min, the most negative finite
      number, so that its probability is exactly 0. Not −inf: a loss that sums π · log π
      over every action (the entropy) would meet 0 · (−inf) = NaN;
    * no gradient reaches an invalid action's logit, whatever loss is built on the result:
      the invalid logits must not take part in the computation at all.

    Question: a logit replaced by finfo.min before a log-softmax gives what probability,
    and what log-probability? (Lecture 16, "5. Invalid-action masking", says how the
    library does it.)
    """
    raise NotImplementedError("exercise 16.2")


def best_guess_accuracy(keys: torch.Tensor, targets: torch.Tensor) -> float:
    """Exercise 16.3. How well a discrete key settles a discrete target, on n steps.

    keys (n,) and targets (n,) are integer tensors (any values). Take the best predictor
    of the target from the key: for each key, it answers that key's most frequent target.
    Return its accuracy on the same n steps (the share of steps it gets right), as a
    Python float.

    It is 1.0 when the key determines the target, and the majority target's share when
    the key says nothing about it. Scored on the steps it was read from, it is an upper
    bound on what any function of the key can do there. Hint: a table of counts, keys
    against targets. (Lecture 16, "4. PPO on MinAtar Breakout": the ball's direction from
    the cells of one frame, with and without the trail channel.)
    """
    raise NotImplementedError("exercise 16.3")
