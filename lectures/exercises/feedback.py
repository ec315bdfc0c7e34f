"""What a failed exercise check says: what was expected, what came back, and which mistake
that answer looks like.

    check_close(mine, library, "clipped_surrogate_loss(ε = 0.2)",
                mistakes={"max in place of min (keep the pessimistic, smaller term)": with_max})

A check computes the answers that the usual mistakes give (`mistakes`: a few words naming
the mistake → the value it produces) and passes them with the right one. When what came
back is not close to the expected value but is close to one of the wrong ones, the message
names that mistake; a value that is minus the expected one is recognised as a sign error
without being listed. Numbers, booleans, strings, lists and tensors are all compared the
same way, as tensors of float64 (strings and other objects by ==).
"""

from __future__ import annotations

import torch

SIGN_ERROR = "a sign error (this is minus the expected value)"
SHOWN_ENTRIES = 6  # a tensor with more entries is summarised by its largest difference


def check_close(got, expected, name: str, mistakes: dict | None = None, atol: float = 1e-6,
                rtol: float = 1e-5) -> None:
    """Pass when `got` equals `expected` within atol + rtol·|expected| entry by entry (and has
    its shape); otherwise fail with one message: name, expected, got, and the likely mistake."""
    __tracebackhide__ = True  # pytest shows the check's line, not this one
    if _close(got, expected, atol, rtol):
        return
    message = f"{name}: expected {describe(expected)}, got {describe(got)}"
    difference = _largest_difference(got, expected)
    if difference:
        message += f" ({difference})"
    mistake = likely_mistake(got, expected, mistakes or {}, atol, rtol)
    if mistake:
        message += f".\n  Likely mistake: {mistake}"
    raise AssertionError(message + ".")


def check_equal(got, expected, name: str, mistakes: dict | None = None) -> None:
    """check_close with no tolerance: integers, booleans, labels, exact tensors."""
    __tracebackhide__ = True
    check_close(got, expected, name, mistakes, atol=0.0, rtol=0.0)


def likely_mistake(got, expected, mistakes: dict, atol: float, rtol: float) -> str | None:
    """The first mistake whose answer `got` matches; a sign error if got ≈ −expected ≠ 0."""
    for mistake, wrong in mistakes.items():
        if _close(got, wrong, atol, rtol):
            return mistake
    numbers = _as_tensor(expected)
    if numbers is not None and numbers.dtype != torch.bool and bool((numbers.abs() > atol).any()):
        if _close(got, -numbers, atol, rtol):
            return SIGN_ERROR
    return None


def describe(value) -> str:
    """A value as a message shows it: a number to 4 significant digits, a small tensor in
    full, a larger one by its shape and first entries."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        if value.dim() == 0:
            return _number(value.item())
        entries = ", ".join(_number(entry) for entry in value.flatten()[:SHOWN_ENTRIES].tolist())
        if value.numel() <= SHOWN_ENTRIES and value.dim() == 1:
            return f"[{entries}]"
        return f"a tensor of shape {tuple(value.shape)} starting [{entries}, ...]"
    if isinstance(value, (list, tuple)) and all(isinstance(entry, (int, float)) for entry in value):
        return "[" + ", ".join(_number(entry) for entry in value) + "]"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _number(value)
    return repr(value)


def _number(value) -> str:
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return str(value)
    return f"{value:.4g}"


def _as_tensor(value) -> torch.Tensor | None:
    """value as a float64 tensor (a bool one for booleans), or None when it is not numeric."""
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        return value if value.dtype == torch.bool else value.to(torch.float64)
    if isinstance(value, bool):
        return torch.tensor(value)
    if isinstance(value, (int, float)):
        return torch.tensor(float(value), dtype=torch.float64)
    if isinstance(value, (list, tuple)) and all(isinstance(entry, (int, float)) and not isinstance(entry, bool)
                                                for entry in value):
        return torch.tensor([float(entry) for entry in value], dtype=torch.float64)
    return None


def _close(got, expected, atol: float, rtol: float) -> bool:
    mine, theirs = _as_tensor(got), _as_tensor(expected)
    if mine is None or theirs is None:
        return type(got) is type(expected) and got == expected
    if mine.shape != theirs.shape or (mine.dtype == torch.bool) != (theirs.dtype == torch.bool):
        return False
    if theirs.dtype == torch.bool:
        return torch.equal(mine, theirs)
    return bool(torch.isclose(mine, theirs, rtol=rtol, atol=atol).all())


def _largest_difference(got, expected) -> str:
    """Where a tensor of more than a few entries is furthest from the expected one, or its
    wrong shape; "" for numbers and small tensors, whose message shows them whole."""
    mine, theirs = _as_tensor(got), _as_tensor(expected)
    if mine is None or theirs is None:
        return ""
    if mine.shape != theirs.shape:
        return f"shape {tuple(mine.shape)} where {tuple(theirs.shape)} was expected"
    if theirs.dtype == torch.bool or mine.dtype == torch.bool:
        wrong = (mine != theirs).flatten().nonzero().flatten()
        if theirs.numel() <= SHOWN_ENTRIES and theirs.dim() <= 1 or len(wrong) == 0:
            return ""
        return f"{len(wrong)} of {theirs.numel()} entries differ, the first at flat index {int(wrong[0])}"
    if theirs.numel() <= SHOWN_ENTRIES and theirs.dim() <= 1:
        return ""
    gaps = (mine - theirs).abs().nan_to_num(nan=float("inf"))
    where = int(gaps.flatten().argmax())
    index = tuple(int(i) for i in torch.unravel_index(torch.tensor(where), theirs.shape))
    shown = index[0] if len(index) == 1 else index
    return (f"largest difference at index {shown}: expected {_number(theirs.flatten()[where].item())}, "
            f"got {_number(mine.flatten()[where].item())}")
