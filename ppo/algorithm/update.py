"""The PPO update: K epochs of shuffled minibatches, one gradient step each.

Every trainer of this project — `ppo.trainers.ppo.PPO` and its relatives (environments),
`ppo.lm.trainers.rlhf_trainer.RLHFTrainer` (token generation) — runs its update through
`run_update`, and a seed batch through `run_member_update`, the same loop; only the loss of
a minibatch differs, and each trainer passes its own.

    for epoch = 1 .. K:
        shuffle the B samples of the rollout (one permutation per epoch)
        for each minibatch of B / M consecutive shuffled samples:
            L(θ), log r_t(θ) ← minibatch_loss(minibatch)
            if target_kl is set and KL̂(π_old ‖ π_θ) > target_kl:  stop the update here
            zero the gradients; backward L; clip the global gradient norm; Adam step

The meaning of `target_kl`: per minibatch, checked before its step. KL̂ is the k3
estimate of KL(π_old ‖ π_θ) on the minibatch's own samples, with θ as it is before that
minibatch's step. The first minibatch whose KL̂ exceeds the target takes no step, and
the update ends there (as in Spinning Up; SB3 checks at the same place against 1.5 ·
target_kl; CleanRL checks once per epoch). The policy is never moved from a point that
is already further from π_old than the target allows.

A sample is whatever the trainer stores per row: a transition (CartPole) or a whole
completion (the language model, whose tensors are (B, T) with a mask after EOS).

One loop, one run or many. `run_member_update` runs the same loop for S independent
runs trained as one batched computation (`ppo.trainers.seed_batch`): samples (S, B, ...), a loss
(S,) with one L_s per member. Every line of the loop above then holds per member: member
s draws its permutation from its own generator, stops at its own KL̂, clips its own
gradient and steps its own Adam. A member whose update has ended draws no more
permutations and takes no more steps, exactly as its own run, which has left the loop.
The two layouts differ only in how a minibatch is cut and a step is taken (`OneRun`,
`MemberStack`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from ppo.parallel.distributed import SINGLE_PROCESS, World
from ppo.algorithm.losses import kl_estimate, kl_per_sample, outside_clip_range
from ppo.parallel.optim import FlatAdam, StackedAdam


@dataclass
class MinibatchLoss:
    """What a trainer's minibatch loss returns to `run_update` (with a leading member axis S in `run_member_update`)."""

    loss: torch.Tensor  # L(θ) to minimise: a scalar, or (S,)
    log_ratio: torch.Tensor  # log r_t(θ) = log π_θ − log π_old per sample (or token), detached
    mask: torch.Tensor | None = None  # which entries of log_ratio are real (tokens up to EOS)
    terms: dict[str, torch.Tensor] = field(default_factory=dict)  # detached scalars (or (S,)) to average


def gradient_step(optimizer: FlatAdam, loss: torch.Tensor, max_grad_norm: float | None,
                  world: World = SINGLE_PROCESS) -> torch.Tensor:
    """One step of gradient descent on `loss`; returns the gradient norm before clipping.

    With several processes the gradient is averaged over them (one all-reduce of the flat
    gradient vector, ppo.parallel.distributed) before it is clipped, so every process steps alike.
    """
    optimizer.zero_grad()
    loss.backward()
    world.average_(optimizer.flat_grads)
    grad_norm = optimizer.clip_grad_norm(max_grad_norm)
    optimizer.step()
    return grad_norm


def update_settings(config, clip_coef: float | None = None) -> dict:
    """run_update's keyword settings from an UpdateConfig (clip_coef: the ε in force, if not config's)."""
    return dict(
        update_epochs=config.update_epochs,
        num_minibatches=config.num_minibatches,
        max_grad_norm=config.max_grad_norm,
        target_kl=config.target_kl,
        clip_coef=config.clip_coef if clip_coef is None else clip_coef,
    )


class OneRun:
    """One run's samples (B, ...), shuffled by one generator; a data-parallel run's processes act as one."""

    num_members = 1

    def __init__(self, generator: torch.Generator, world: World = SINGLE_PROCESS):
        self.generator, self.world = generator, world

    def num_samples(self, samples: dict[str, torch.Tensor]) -> int:
        return len(next(iter(samples.values())))

    def shuffle(self, samples: dict[str, torch.Tensor], updating: list[bool]) -> dict[str, torch.Tensor]:
        """Every tensor gathered with this epoch's permutation (called only while the update goes on)."""
        order = torch.randperm(self.num_samples(samples), generator=self.generator, device=self.generator.device)
        return {name: tensor.index_select(0, order) for name, tensor in samples.items()}

    def rows(self, shuffled: dict[str, torch.Tensor], rows: slice) -> dict[str, torch.Tensor]:
        return {name: tensor[rows] for name, tensor in shuffled.items()}

    def member_kls(self, result: MinibatchLoss) -> list[float]:
        """The minibatch's k3 KL̂, averaged over the processes: all stop alike."""
        return [self.world.mean_of(float(kl_estimate(result.log_ratio, "k3", result.mask)))]

    def step(self, optimizer: FlatAdam, loss: torch.Tensor, max_grad_norm: float | None,
             updating: list[bool]) -> torch.Tensor:
        return gradient_step(optimizer, loss, max_grad_norm, self.world)

    def stacked(self, tensor: torch.Tensor) -> torch.Tensor:
        """A per-sample (or per-minibatch) tensor with the member axis in front: (1, ...)."""
        return tensor.unsqueeze(0)

    def average(self, tensor: torch.Tensor) -> torch.Tensor:
        """The mean over the processes (equal shares)."""
        return self.world.average_(tensor)


class MemberStack:
    """S runs' samples (S, B, ...), member s's in row s, each member shuffled by its own generator."""

    def __init__(self, generators: Sequence[torch.Generator]):
        self.generators = list(generators)
        self.num_members = len(self.generators)

    def num_samples(self, samples: dict[str, torch.Tensor]) -> int:
        return next(iter(samples.values())).shape[1]

    def shuffle(self, samples: dict[str, torch.Tensor], updating: list[bool]) -> dict[str, torch.Tensor]:
        """Row s gathered with member s's permutation; a member whose update has ended draws
        none (as its own run, which has left the loop) and keeps its rows in order."""
        num_samples = self.num_samples(samples)
        device = next(iter(samples.values())).device
        orders = torch.stack([torch.randperm(num_samples, generator=generator, device=generator.device)
                              if member_updating else torch.arange(num_samples, device=device)
                              for generator, member_updating in zip(self.generators, updating)])  # (S, B)
        flat_rows = (orders + num_samples * torch.arange(self.num_members, device=device).unsqueeze(1)).flatten()
        return {name: tensor.flatten(0, 1).index_select(0, flat_rows).view_as(tensor)
                for name, tensor in samples.items()}

    def rows(self, shuffled: dict[str, torch.Tensor], rows: slice) -> dict[str, torch.Tensor]:
        return {name: tensor[:, rows] for name, tensor in shuffled.items()}

    def member_kls(self, result: MinibatchLoss) -> list[float]:
        return member_means(kl_per_sample(result.log_ratio, "k3"), result.mask).tolist()

    def step(self, optimizer: StackedAdam, loss: torch.Tensor, max_grad_norm: float | None,
             updating: list[bool]) -> torch.Tensor:
        """A step of every updating member: ∂/∂θ_s of Σ_s L_s is ∂L_s/∂θ_s, so the members stay independent."""
        optimizer.zero_grad()
        loss.sum().backward()
        grad_norms = optimizer.clip_grad_norm(max_grad_norm)
        optimizer.step(None if all(updating) else updating)
        return grad_norms

    def stacked(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor

    def average(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor


def member_means(values: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """(S, ...) -> (S,): each member's mean over its entries (those where `mask` is True)."""
    if mask is None:
        return values.flatten(1).mean(dim=1)
    mask = mask.to(values.dtype)
    return (values * mask).flatten(1).sum(dim=1) / mask.flatten(1).sum(dim=1)


def run_update(
    samples: dict[str, torch.Tensor],
    minibatch_loss: Callable[[dict[str, torch.Tensor]], MinibatchLoss],
    optimizer: FlatAdam,
    *,
    update_epochs: int,
    num_minibatches: int,
    max_grad_norm: float | None,
    target_kl: float | None,
    clip_coef: float,
    generator: torch.Generator,
    world: World = SINGLE_PROCESS,
    clip_coef_high: float | None = None,
) -> dict[str, float]:
    """K epochs of minibatch steps (the module docstring); returns the update's diagnostics.

    `samples` maps names to tensors whose first dimension indexes the B samples of the
    rollout; `minibatch_loss` receives the same names with b = B / M rows each.

    Diagnostics, over every minibatch visited (the one that stopped the update included):
    the mean of each loss term; old_approx_kl (k1) and approx_kl (k3) estimates of
    KL(π_old ‖ π_θ) and clip_fraction = share of |r_t(θ) − 1| > ε (of r_t(θ) outside
    [1 − ε, 1 + ε_high] with `clip_coef_high`), each over all samples; the first
    minibatch's largest |r_t(θ) − 1| (0 up to rounding: π_θ = π_old there); gradient
    steps taken; whether target_kl ended the update; the mean gradient norm before
    clipping.
    """
    return _update(OneRun(generator, world), samples, minibatch_loss, optimizer, update_epochs, num_minibatches,
                   max_grad_norm, target_kl, clip_coef, frozen=(), clip_coef_high=clip_coef_high)[0]


def run_member_update(
    samples: dict[str, torch.Tensor],
    minibatch_loss: Callable[[dict[str, torch.Tensor]], MinibatchLoss],
    optimizer: StackedAdam,
    *,
    update_epochs: int,
    num_minibatches: int,
    max_grad_norm: float | None,
    target_kl: float | None,
    clip_coef: float,
    generators: Sequence[torch.Generator],
    frozen: Sequence[int] = (),
) -> list[dict[str, float]]:
    """`run_update` for S members at once; returns its diagnostics per member.

    `samples` are (S, B, ...), member s's B samples in row s; `minibatch_loss` receives
    (S, b, ...) and returns a loss (S,). Minibatch j of member s holds the rows its own
    run's minibatch j would hold. Members in `frozen` (runs that diverged) take no part:
    no permutation drawn, no step, their diagnostics meaningless.
    """
    return _update(MemberStack(generators), samples, minibatch_loss, optimizer, update_epochs, num_minibatches,
                   max_grad_norm, target_kl, clip_coef, frozen)


def _update(layout: OneRun | MemberStack, samples, minibatch_loss, optimizer, update_epochs: int,
            num_minibatches: int, max_grad_norm: float | None, target_kl: float | None, clip_coef: float,
            frozen: Sequence[int], clip_coef_high: float | None = None) -> list[dict[str, float]]:
    """The loop of the module docstring, with a list `updating` of which members are still in it."""
    num_samples = layout.num_samples(samples)
    size = num_samples // num_minibatches
    updating = [member not in frozen for member in range(layout.num_members)]
    early_stopped = [False] * layout.num_members
    visits = []  # per minibatch visited: (log_ratio, mask, terms, which members count it)
    steps = []  # per gradient step: (the gradient norms, which members took it)
    for _ in range(update_epochs):
        if not any(updating):
            break
        shuffled = layout.shuffle(samples, updating)
        for start in range(0, num_samples, size):
            result = minibatch_loss(layout.rows(shuffled, slice(start, start + size)))
            visits.append((result.log_ratio, result.mask, {name: value.detach() for name, value in result.terms.items()},
                           list(updating)))
            if target_kl is not None:
                for member, kl in enumerate(layout.member_kls(result)):
                    if updating[member] and kl > target_kl:
                        updating[member], early_stopped[member] = False, True
            if not any(updating):
                break
            steps.append((layout.step(optimizer, result.loss, max_grad_norm, updating), list(updating)))
    return _diagnostics(layout, visits, steps, early_stopped, clip_coef, clip_coef_high)


def _diagnostics(layout: OneRun | MemberStack, visits: list, steps: list, early_stopped: list[bool],
                 clip_coef: float, clip_coef_high: float | None = None) -> list[dict[str, float]]:
    """Per member, over the minibatches it counts (run_update's docstring lists them)."""
    S = layout.num_members
    log_ratio = torch.stack([layout.stacked(ratio) for ratio, _, _, _ in visits])  # (M, S, b, ...)
    counted = torch.tensor([members for _, _, _, members in visits], dtype=log_ratio.dtype,
                           device=log_ratio.device)  # (M, S)
    counts = counted.view(*counted.shape, *[1] * (log_ratio.dim() - 2)).expand_as(log_ratio)
    first_mask = visits[0][1]
    if first_mask is not None:
        counts = counts * torch.stack([layout.stacked(mask) for _, mask, _, _ in visits])
    included = counts.transpose(0, 1) > 0  # (S, M, b, ...)

    def mean_over_counted(per_sample: torch.Tensor) -> torch.Tensor:  # (M, S, b, ...) -> (S,)
        return member_means(per_sample.transpose(0, 1), included)

    first_error = log_ratio[0].exp().sub(1.0).abs()  # (S, b, ...); 0 up to rounding: π_θ = π_old there
    if first_mask is not None:
        first_error = first_error * layout.stacked(first_mask)
    summary = torch.stack([mean_over_counted(kl_per_sample(log_ratio, "k1")),
                           mean_over_counted(kl_per_sample(log_ratio, "k3")),
                           mean_over_counted(outside_clip_range(log_ratio.exp(), clip_coef, clip_coef_high)
                                             .to(log_ratio.dtype)),
                           first_error.flatten(1).amax(dim=1)], dim=1)  # (S, 4)
    summary = layout.average(summary).tolist()  # the mean over processes (equal shares)
    term_names = list(visits[0][2])
    term_means = [[] for _ in range(S)]
    if term_names:
        terms = torch.stack([torch.stack([layout.stacked(value) for value in terms.values()], dim=1)
                             for _, _, terms, _ in visits])  # (M, S, terms)
        weights = counted.unsqueeze(2)
        term_means = layout.average((terms * weights).sum(dim=0) / weights.sum(dim=0)).tolist()
    step_counts, mean_norms = [0] * S, [float("nan")] * S
    if steps:
        norms = torch.stack([norm for norm, _ in steps]).view(len(steps), S)
        took = torch.tensor([members for _, members in steps], dtype=norms.dtype, device=norms.device)
        step_counts = took.sum(dim=0).tolist()
        mean_norms = ((norms * took).sum(dim=0) / took.sum(dim=0)).tolist()
    return [{
        **dict(zip(term_names, term_means[member])),
        "old_approx_kl": summary[member][0],
        "approx_kl": summary[member][1],
        "clip_fraction": summary[member][2],
        "first_minibatch_ratio_error": summary[member][3],
        "gradient_steps": int(step_counts[member]),
        "early_stopped": float(early_stopped[member]),
        "grad_norm": mean_norms[member] if step_counts[member] else float("nan"),
    } for member in range(S)]
