"""Adam over one flat parameter vector, gradient-norm clipping, and the learning-rate schedule.

For parameters θ (all of a model's weights, as one vector), gradient g, step t:

    m ← β₁ m + (1 − β₁) g                       first moment
    v ← β₂ v + (1 − β₂) g²                      second moment
    θ ← θ − α / (1 − β₁ᵗ) · m / (√v / √(1 − β₂ᵗ) + ε)

which is `torch.optim.Adam`, written out. Clipping is a separate call, made by the
update just before the step (`ppo.algorithm.update.gradient_step`):

    g ← g · min(1, c / (‖g‖₂ + 10⁻⁶))           clip the global norm to c

Why not torch.optim: PPO's networks are tiny (a few thousand weights), so an update step
costs what its Python overhead costs. torch.optim walks a list of parameter tensors and
its first use imports torch._dynamo (over a second of start-up on a small CPU);
clip_grad_norm_ walks the list again. Here every parameter is a view into one
contiguous vector, and so is every gradient, so the whole step is a handful of tensor
operations on one vector (`python -m experiments.benchmarks.optim` times it against
torch.optim side by side). It is a speed annex: read it last.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Iterable, Sequence

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

    def rebase(self, params: torch.Tensor, grads: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor) -> None:
        """Move θ, g, m and v into the given vectors (their values copied in), and every parameter's
        `.data` and `.grad` with them: a seed batch lays its members' vectors out as the rows of one
        matrix (StackedAdam), and each member's network goes on reading its own row."""
        for new, old in ((params, self.flat_params), (grads, self.flat_grads), (exp_avg, self.exp_avg),
                         (exp_avg_sq, self.exp_avg_sq)):
            new.copy_(old)
        self.flat_params, self.flat_grads, self.exp_avg, self.exp_avg_sq = params, grads, exp_avg, exp_avg_sq
        offset = 0
        for p in self.parameters:
            size = p.numel()
            p.data = params[offset : offset + size].view_as(p)
            p.grad = grads[offset : offset + size].view_as(p)
            offset += size
        self._grad_views = [p.grad for p in self.parameters]

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


class StackedAdam:
    """The Adams of S members (one FlatAdam each, of identical networks) stepped as one.

    Each member's flat vectors θ_s, g_s, m_s, v_s become row s of one (S, P) matrix
    (`FlatAdam.rebase`: the member's network reads its row), and `parameters()` gives every
    parameter of the network stacked along a leading member axis, (S, ...), as views into
    that matrix: what the members' batched network (ppo.models.member_networks) computes
    with, and where their gradients land. Adam acts element by element, so one step on
    the matrix is S FlatAdam steps, with

        g_s ← g_s · min(1, c / (‖g_s‖₂ + 10⁻⁶))       each member's own global norm

    and each member its own step count t_s (kept by its FlatAdam): a member left out of a
    step (`active[s]` False, an update it ended early) keeps its θ, m, v and t. Rows with the
    same t are updated with FlatAdam's very arithmetic (Python-float bias corrections), so a
    member's step equals its own run's; its FlatAdam's `state_dict` is what its run saves.
    """

    def __init__(self, members: Sequence[FlatAdam]):
        first = members[0]
        if any(len(member.groups) != 1 for member in members):
            raise ValueError("StackedAdam steps members with one learning rate each (one parameter group)")
        if any(member.flat_params.shape != first.flat_params.shape or member.flat_params.dtype != first.flat_params.dtype
               or member.flat_params.device != first.flat_params.device for member in members):
            raise ValueError("StackedAdam needs members of one parameter count, dtype and device")
        self.members = list(members)
        self.num_members = len(members)
        self.beta1, self.beta2, self.eps = first.beta1, first.beta2, first.eps
        matrices = [torch.stack([getattr(member, name) for member in members])
                    for name in ("flat_params", "flat_grads", "exp_avg", "exp_avg_sq")]
        self.flat_params, self.flat_grads, self.exp_avg, self.exp_avg_sq = matrices
        for row, member in enumerate(members):
            member.rebase(*(matrix[row] for matrix in matrices))
        self._stacked = []
        offset = 0
        for p in first.parameters:
            columns = slice(offset, offset + p.numel())
            stacked = nn.Parameter(self.flat_params[:, columns].view(self.num_members, *p.shape))
            stacked.grad = self.flat_grads[:, columns].view(self.num_members, *p.shape)
            self._stacked.append(stacked)
            offset += p.numel()
        self._grad_views = [p.grad for p in self._stacked]
        # A member's slice of a row is not dense memory, which autograd's layout check notes
        # once; gradients still accumulate in place into these views.
        warnings.filterwarnings("ignore", message="grad and param do not obey the gradient layout contract")

    def parameters(self) -> list[nn.Parameter]:
        """Every parameter (S, ...), in the order the members' FlatAdams lay out one network's."""
        return self._stacked

    @property
    def steps(self) -> list[int]:
        """t_s of every member."""
        return [member.steps for member in self.members]

    @property
    def lr(self) -> float:
        return self.members[0].lr

    @lr.setter
    def lr(self, value: float) -> None:
        for member in self.members:
            member.lr = value

    def zero_grad(self) -> None:
        self.flat_grads.zero_()

    def clip_grad_norm(self, max_norm: float | None) -> torch.Tensor:
        """Clip each member's gradient to its own global norm `max_norm`; returns the (S,) norms before."""
        norm = torch.linalg.vector_norm(self.flat_grads, dim=1)
        if max_norm is not None:
            self.flat_grads.mul_(torch.clamp(max_norm / (norm + 1e-6), max=1.0).unsqueeze(1))
        return norm

    @torch.no_grad()
    def step(self, active: list[bool] | None = None) -> None:
        """One Adam step for every member (or those with `active[s]`)."""
        if any(p.grad is not view for p, view in zip(self._stacked, self._grad_views)):
            raise RuntimeError("a parameter's .grad no longer points into StackedAdam's matrix; "
                               "zero gradients with the optimizer's zero_grad()")
        members = [s for s in range(self.num_members) if active is None or active[s]]
        for s in members:
            self.members[s].steps += 1
        by_step: dict[int, list[int]] = {}
        for s in members:
            by_step.setdefault(self.members[s].steps, []).append(s)
        for steps, rows in by_step.items():
            if len(rows) == self.num_members:
                self._adam(self.flat_params, self.flat_grads, self.exp_avg, self.exp_avg_sq, steps)
                continue
            index = torch.tensor(rows, device=self.flat_params.device)
            parts = [tensor.index_select(0, index) for tensor in
                     (self.flat_params, self.flat_grads, self.exp_avg, self.exp_avg_sq)]
            self._adam(*parts, steps)
            for tensor, part in zip((self.flat_params, self.exp_avg, self.exp_avg_sq), (parts[0], parts[2], parts[3])):
                tensor.index_copy_(0, index, part)

    def _adam(self, params, grads, exp_avg, exp_avg_sq, steps: int) -> None:
        """FlatAdam.step's arithmetic on rows that share the step count t."""
        exp_avg.lerp_(grads, 1.0 - self.beta1)
        exp_avg_sq.mul_(self.beta2).addcmul_(grads, grads, value=1.0 - self.beta2)
        bias_correction1 = 1.0 - self.beta1**steps
        bias_correction2 = 1.0 - self.beta2**steps
        denominator = (exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(self.eps)
        params.addcdiv_(exp_avg, denominator, value=-self.lr / bias_correction1)
