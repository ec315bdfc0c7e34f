"""Adam over one flat parameter vector, gradient-norm clipping, and the learning-rate schedule.

For parameters θ (all of a model's weights, as one vector), gradient g, step t:

    m ← β₁ m + (1 − β₁) g                       first moment
    v ← β₂ v + (1 − β₂) g²                      second moment
    θ ← θ − α / (1 − β₁ᵗ) · m / (√v / √(1 − β₂ᵗ) + ε)

which is `torch.optim.Adam`, written out. Clipping is a separate call, made by the
update just before the step (`ppo.update.gradient_step`):

    g ← g · min(1, c / (‖g‖₂ + 10⁻⁶))           clip the global norm to c

Why not torch.optim: PPO's networks are tiny (a few thousand weights), so an update step
costs what its Python overhead costs. torch.optim walks a list of parameter tensors and
its first use imports torch._dynamo (over a second of start-up on a small CPU);
clip_grad_norm_ walks the list again. Here every parameter is a view into one
contiguous vector, and so is every gradient, so the whole step is a handful of tensor
operations on one vector: the optimizer part of a step is 4–8× faster on a 2-core CPU
(`python -m experiments.benchmark_optim`). It is a speed annex: read it last.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable

import torch
from torch import nn


def linear_annealing(initial: float, iterations_done: int, iterations: int) -> float:
    """α = α₀ · (1 − iterations_done / iterations): α₀ for the first iteration, α₀ / iterations for the last."""
    return initial * (1.0 - iterations_done / iterations)


@dataclass
class ParameterGroup:
    """A contiguous slice [start, end) of the flat vector with a learning rate of its own."""

    start: int
    end: int
    initial_lr: float
    lr: float


class FlatAdam:
    """Adam on `parameters`, which are re-pointed into one contiguous vector.

    `parameters` is an iterable of parameters (one learning rate `lr`) or a list of groups
    `{"params": [...], "lr": ...}`, as in torch.optim. After construction each parameter's
    `.data` and `.grad` are views into `self.flat_params` and `self.flat_grads`. Gradients
    accumulate there in place, so keep them allocated: zero them with this optimizer's
    `zero_grad()`, not the module's (which sets them to None; `step()` then refuses to
    run). Moving the module to another device afterwards would break the views; move it first.
    """

    def __init__(
        self,
        parameters: Iterable[nn.Parameter] | list[dict],
        lr: float | None = None,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ):
        groups = _as_groups(parameters, lr)
        seen: set[int] = set()
        group_parameters = [_unique(group["params"], seen) for group in groups]
        self.parameters = [p for members in group_parameters for p in members]
        if not self.parameters:
            raise ValueError("FlatAdam got no parameters that require gradients")
        first = self.parameters[0]
        if any(p.dtype != first.dtype or p.device != first.device for p in self.parameters):
            raise ValueError("FlatAdam needs every parameter on one device with one dtype")
        self.beta1, self.beta2 = betas
        self.eps = eps
        total = sum(p.numel() for p in self.parameters)
        self.flat_params = torch.empty(total, dtype=first.dtype, device=first.device)
        self.flat_grads = torch.zeros_like(self.flat_params)
        self.groups: list[ParameterGroup] = []
        offset = 0
        for group, members in zip(groups, group_parameters):
            start = offset
            for p in members:
                size = p.numel()
                self.flat_params[offset : offset + size].copy_(p.detach().reshape(-1))
                p.data = self.flat_params[offset : offset + size].view_as(p)
                p.grad = self.flat_grads[offset : offset + size].view_as(p)
                offset += size
            self.groups.append(ParameterGroup(start, offset, float(group["lr"]), float(group["lr"])))
        self._grad_views = [p.grad for p in self.parameters]
        self.exp_avg = torch.zeros_like(self.flat_params)  # m
        self.exp_avg_sq = torch.zeros_like(self.flat_params)  # v
        self.steps = 0  # t

    @property
    def lr(self) -> float:
        """The learning rate of the first group (the only one for a single model)."""
        return self.groups[0].lr

    @lr.setter
    def lr(self, value: float) -> None:
        for group in self.groups:
            group.lr = float(value)

    def scale_learning_rates(self, factor: float) -> None:
        """Every group's lr ← its initial lr · factor (the schedule's fraction)."""
        for group in self.groups:
            group.lr = group.initial_lr * factor

    def zero_grad(self) -> None:
        """Zero every gradient in place (the views into the flat vector stay)."""
        self.flat_grads.zero_()

    def clip_grad_norm(self, max_norm: float | None) -> torch.Tensor:
        """g ← g · min(1, max_norm / (‖g‖₂ + 10⁻⁶)) over all parameters; returns ‖g‖₂ before clipping.

        With max_norm None the gradient is left as it is (the norm is still returned).
        """
        norm = torch.linalg.vector_norm(self.flat_grads)
        if max_norm is not None:
            self.flat_grads.mul_(torch.clamp(max_norm / (norm + 1e-6), max=1.0))
        return norm

    @torch.no_grad()
    def step(self) -> None:
        """One Adam step on the current gradients."""
        if any(p.grad is not view for p, view in zip(self.parameters, self._grad_views)):
            raise RuntimeError(
                "a parameter's .grad no longer points into FlatAdam's flat vector (module.zero_grad() "
                "or set_to_none replaced it); zero gradients with the optimizer's zero_grad()"
            )
        self.steps += 1
        grads = self.flat_grads
        self.exp_avg.lerp_(grads, 1.0 - self.beta1)
        self.exp_avg_sq.mul_(self.beta2).addcmul_(grads, grads, value=1.0 - self.beta2)
        bias_correction1 = 1.0 - self.beta1**self.steps
        bias_correction2 = 1.0 - self.beta2**self.steps
        denominator = (self.exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(self.eps)
        for group in self.groups:
            part = slice(group.start, group.end)
            self.flat_params[part].addcdiv_(self.exp_avg[part], denominator[part], value=-group.lr / bias_correction1)

    def state_dict(self) -> dict:
        return {
            "lr": [group.lr for group in self.groups],
            "steps": self.steps,
            "exp_avg": self.exp_avg.clone(),
            "exp_avg_sq": self.exp_avg_sq.clone(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore `state_dict()`; ValueError if it belongs to a different parameter count."""
        for key in ("exp_avg", "exp_avg_sq"):
            if tuple(state[key].shape) != tuple(self.flat_params.shape):
                raise ValueError(
                    f"optimizer state {key} has shape {tuple(state[key].shape)}, expected {tuple(self.flat_params.shape)}"
                )
        rates = state["lr"] if isinstance(state["lr"], (list, tuple)) else [state["lr"]] * len(self.groups)
        if len(rates) != len(self.groups):
            raise ValueError(f"optimizer state has {len(rates)} parameter groups, expected {len(self.groups)}")
        for group, rate in zip(self.groups, rates):
            group.lr = float(rate)
        self.steps = int(state["steps"])
        self.exp_avg.copy_(state["exp_avg"])
        self.exp_avg_sq.copy_(state["exp_avg_sq"])


def _as_groups(parameters, lr: float | None) -> list[dict]:
    parameters = list(parameters)
    if parameters and isinstance(parameters[0], dict):
        return [{"params": list(group["params"]), "lr": group.get("lr", lr)} for group in parameters]
    if lr is None:
        raise ValueError("FlatAdam needs lr (or a learning rate per parameter group)")
    return [{"params": parameters, "lr": lr}]


def _unique(parameters: Iterable[nn.Parameter], seen: set[int]) -> list[nn.Parameter]:
    unique = []
    for p in parameters:
        if p.requires_grad and id(p) not in seen:
            seen.add(id(p))
            unique.append(p)
    return unique
