"""S networks of one architecture evaluated as one batched computation, derived from the network itself.

A seed batch trains S runs of one trainer; each run builds its own network, seeded as its
single run seeds it (`ppo.trainers.seed_batch`). `MemberNetworks` holds their parameters
stacked along a leading member axis, θ: (S, ...) per parameter, and evaluates any method
of the network as each member's own network evaluates it:

    f_s(x_s) = f(θ_s, x_s)   for s = 1 … S        (torch.func.vmap of the network's own method)

The trainer calls it as it calls one network, on every copy the batch steps: S·N rows,
member s's N copies in rows s·N … (s+1)·N − 1, and gets S·N rows back. Nothing of the
network is written a second time: an MLP, a CNN, a GRU or a user's own network is mapped
by the same few lines, and the arithmetic is its own (batched matrix products round
differently from one run's, by float32 rounding).

`map(fn, ...)` maps any function of one network over the members the same way: the seed
batch computes every member's loss with the single run's own `minibatch_loss` through it.
Inside, the network's parameters are member s's (a BatchedTensor that vmap cuts per member):
they are swapped into the network's modules for the call and put back after it.

Random draws cannot come from each member's own generator inside vmap, so an action's
noise is drawn outside, member by member, with the network's `action_noise(rows, generator)`,
and passed in (`act(..., noise=...)`): member s draws exactly what its run draws.

Where a network's code already broadcasts over a leading axis (an MLP's: every layer acts on
the last axis), the stack runs that code once on the stacked parameters themselves, (S, ...)
in place of each parameter and (S, N, ...) inputs, with each `nn.Linear` computing
x_s W_sᵀ + b_s as one `torch.baddbmm` over the members: the network's own code, without
vmap's wrapping of every operation (which cost a quarter of an MLP update's time on a CPU).
Whether a method broadcasts is not assumed: its first call runs both ways and keeps the
direct one only if it gives vmap's results (to float32 rounding); a CNN, a GRU or any code
that does not broadcast stays with vmap.
"""

from __future__ import annotations

import copy
import types
from contextlib import contextmanager
from typing import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import vmap
from torch.utils._pytree import tree_map


def stacked_parameters(network: nn.Module, optimizers) -> dict[str, torch.Tensor]:
    """name → (S, ...) for every parameter of `network` (member 0 of a stack), from the StackedAdams
    (ppo.parallel.optim) that hold the members' parameters: one for all, or one per group (an actor's
    and a critic's, say)."""
    names = {id(parameter): name for name, parameter in network.named_parameters()}
    return {names[id(parameter)]: stacked for optimizer in optimizers
            for parameter, stacked in zip(optimizer.members[0].parameters, optimizer.parameters())}


def _member_linear(layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
    """x Wᵀ + b: F.linear for one network's weight (out, in); for stacked weights (S, out, in) and
    inputs (S, ..., in), each member's own product, as one baddbmm."""
    weight, bias = layer.weight, layer.bias
    if weight.dim() == 2:
        return F.linear(x, weight, bias)
    rows = x.reshape(x.shape[0], -1, x.shape[-1])
    if bias is None:
        product = torch.bmm(rows, weight.transpose(1, 2))
    else:
        product = torch.baddbmm(bias.unsqueeze(1), rows, weight.transpose(1, 2))
    return product.view(*x.shape[:-1], weight.shape[1])


def _same_results(first, second) -> bool:
    """Whether two outputs (tensors, or tuples of them) agree: integers exactly, floats to float32 rounding."""
    if isinstance(first, torch.Tensor) and isinstance(second, torch.Tensor):
        if first.shape != second.shape or first.dtype != second.dtype:
            return False
        if first.is_floating_point():
            return bool(torch.allclose(first, second, rtol=1e-4, atol=1e-5))
        return bool(torch.equal(first, second))
    if isinstance(first, (tuple, list)) and isinstance(second, (tuple, list)) and len(first) == len(second):
        return all(_same_results(a, b) for a, b in zip(first, second))
    return first == second


def _is_generators(value) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(g, torch.Generator) for g in value)


class MemberNetworks:
    """The networks of S members as one: `act`, `value`, `evaluate_actions`, ... on S·N copies.

    `members` are the members' own networks (one architecture); `parameters` their stacked
    parameters, name → (S, ...) tensor (`ppo.parallel.optim.StackedAdam` lays them out in one
    (S, P) matrix whose row s the member's own network reads too). Attributes that are not
    methods (`num_cores`, `state_width`, ...) are the network's own.
    """

    def __init__(self, members: Sequence[nn.Module], parameters: dict[str, torch.Tensor]):
        template = members[0]
        if any(True for _ in template.buffers()):
            raise ValueError(f"{type(template).__name__} has buffers; a seed batch stacks networks whose state is "
                             "their parameters")
        self.members = list(members)
        self.num_members = len(members)
        self.parameters = parameters
        self.network = copy.deepcopy(template).to("meta")  # the architecture; its parameters are swapped in per call
        self._slots = []  # (module, attribute) of every parameter, shared ones once, in `names` order
        self.names = []
        for name, _ in self.network.named_parameters():
            path, _, attribute = name.rpartition(".")
            self._slots.append((self.network.get_submodule(path), attribute))
            self.names.append(name)
        self._stacked = tuple(parameters[name] for name in self.names)
        for layer in self.network.modules():
            if type(layer) is nn.Linear:  # one network's weight: F.linear; the members' stacked: one baddbmm
                layer.forward = types.MethodType(_member_linear, layer)
        self._direct: dict[tuple, bool] = {}  # (method, which arguments are given) → the code broadcasts

    @contextmanager
    def as_member(self, theta: Sequence[torch.Tensor] | dict[str, torch.Tensor]):
        """The network with parameters `theta` (one member's, inside `map`; by name, or in `names`
        order), restored on leaving."""
        if isinstance(theta, dict):
            theta = [theta[name] for name in self.names]
        saved = [module._parameters[attribute] for module, attribute in self._slots]
        for (module, attribute), parameter in zip(self._slots, theta):
            module._parameters[attribute] = parameter
        try:
            yield self.network
        finally:
            for (module, attribute), parameter in zip(self._slots, saved):
                module._parameters[attribute] = parameter

    def map(self, fn: Callable, *member_args):
        """fn(network_s, *args_s) for every member s, as one computation: each of `member_args` is a
        pytree of tensors with the member axis S in front; the result likewise."""
        def one(theta, *args):
            with self.as_member(theta) as network:
                return fn(network, *args)

        return vmap(one)(self._stacked, *member_args)

    def direct(self, fn: Callable, *member_args):
        """fn(network, *args) once, with the stacked parameters (S, ...) and the arguments (S, ...) as they
        are: the members' results where fn's code broadcasts over the leading axis (`map` where not)."""
        with self.as_member(self._stacked) as network:
            return fn(network, *member_args)

    def run(self, key: tuple, fn: Callable, *member_args):
        """`direct` where this call (`key`: the method and which arguments it is given) broadcasts, else `map`;
        the first call of each key runs both, and keeps `direct` only if its results are `map`'s."""
        if key not in self._direct:
            with torch.no_grad():
                mapped = self.map(fn, *member_args)
                try:
                    self._direct[key] = _same_results(self.direct(fn, *member_args), mapped)
                except Exception:  # the code does not broadcast: indexing, shapes, a kernel of its own
                    self._direct[key] = False
        return self.direct(fn, *member_args) if self._direct[key] else self.map(fn, *member_args)

    def __getattr__(self, name: str):
        attribute = getattr(self.__dict__["network"], name)
        if not callable(attribute) or isinstance(attribute, nn.Module):
            return attribute
        return lambda *args, **kwargs: self.call(name, *args, **kwargs)

    def call(self, method: str, *args, **kwargs):
        """network.method(*args) of every member on its block of the S·N rows; a list of S generators
        draws each member's action noise (`action_noise`) with its own, and is passed on as `noise`."""
        values = [*args, *kwargs.values()]
        rows = sorted({value.shape[0] for value in values if isinstance(value, torch.Tensor) and value.dim() > 0})
        if not rows:
            return self._architecture_call(method, *args, **kwargs)
        S = self.num_members
        if len(rows) > 1 or rows[0] % S:
            raise ValueError(f"a seed batch's networks are called on its S·N copies (S = {S}, in blocks of N); "
                             f"{method} got tensors with {rows} rows")
        copies = rows[0]
        N = copies // S
        generators = next((value for value in values if _is_generators(value)), None)
        args = [None if _is_generators(value) else value for value in args]
        kwargs = {key: None if _is_generators(value) else value for key, value in kwargs.items()}

        def per_copy(value) -> bool:
            return isinstance(value, torch.Tensor) and value.dim() > 0

        positions = [index for index, value in enumerate(args) if per_copy(value)]
        keys = [key for key, value in kwargs.items() if per_copy(value)]
        # contiguous first: batched kernels round alike whatever layout the copies' tensors came in
        member_args = [args[index].contiguous().view(S, N, *args[index].shape[1:]) for index in positions]
        member_kwargs = {key: kwargs[key].contiguous().view(S, N, *kwargs[key].shape[1:]) for key in keys}
        if generators is not None:  # (S, N, ...): member s's own draws
            member_kwargs["noise"] = torch.stack([member.action_noise(N, generator)
                                                  for member, generator in zip(self.members, generators)])

        def per_member(network, positional, named):
            full = list(args)
            for index, value in zip(positions, positional):
                full[index] = value
            return getattr(network, method)(*full, **{**kwargs, **named})

        key = (method, tuple(value is None for value in args), tuple(sorted(kwargs)))
        outputs = self.run(key, per_member, member_args, member_kwargs)
        return tree_map(lambda out: out.flatten(0, 1) if isinstance(out, torch.Tensor) else out, outputs)

    def _architecture_call(self, method: str, *args, **kwargs):
        """A method called without per-copy tensors (`initial_state(copies, device)`): the architecture's
        answer, refused (one line) if it would read the parameters, which belong to no member in particular."""
        result = getattr(self.network, method)(*args, **kwargs)
        leaves = [result] if isinstance(result, torch.Tensor) else list(result) if isinstance(result, tuple) else []
        if any(isinstance(leaf, torch.Tensor) and leaf.is_meta for leaf in leaves):
            raise ValueError(f"{type(self.network).__name__}.{method} reads the parameters without per-copy inputs; "
                             "a seed batch cannot say whose")
        return result
