"""S actor-critics of one architecture evaluated as one batched computation.

Two stacks of feed-forward networks, one interface (`stack_networks` picks):
`StackedActorCritic` for MLP networks, written out layer by layer, and
`VmappedActorCritic` for any other ActorCritic (a CNN encoder, an action mask, a
MultiDiscrete head), which maps the network's own `forward` over the members with
torch.func.vmap. Recurrent networks have their own (ppo.models.stacked_recurrent).

`StackedActorCritic` holds the parameters of S `ppo.models.networks.ActorCritic` members
stacked along a leading member axis: a weight W of shape (out, in) in one member is
a tensor (S, out, in) here. Observations come as (S, B, obs_dim), one batch per member,
and every linear layer is one batched matrix product over the members:

    h_s = x_s W_sᵀ + b_s     for s = 1 … S          (torch.baddbmm: one call for all S)

Member s computes exactly the function of its own ActorCritic (the same layers, the same
activation, the same heads); only the arithmetic is batched. `member_state_dict(s)`
gives member s back as an ordinary ActorCritic state dict, so a member's checkpoint is
an ordinary run's checkpoint.

Random draws (sampling actions) take one `torch.Generator` per member, so each member
draws the numbers its own run would draw (`ppo.trainers.seed_batch`).
"""

from __future__ import annotations

import copy
from collections import OrderedDict
from typing import Sequence

import torch
from torch import nn
from torch.distributions import Distribution, Independent, Normal
from torch.func import functional_call, vmap

from ppo.models.encoders import MLPEncoder
from ppo.models.networks import (ActorCritic, CategoricalDistribution, CategoricalHead, GaussianHead,
                                 MultiCategoricalDistribution, MultiCategoricalHead, categorical, diagonal_gaussian)


def stack_networks(members: Sequence[ActorCritic]) -> "StackedActorCritic | VmappedActorCritic":
    """The members as one stack: layer by layer for MLPs on vectors, by vmap for any other network."""
    template = members[0]
    written_out = (isinstance(template.actor_body, MLPEncoder) and not template.action_masked
                   and isinstance(template.policy_head, (CategoricalHead, GaussianHead)))
    return StackedActorCritic(members) if written_out else VmappedActorCritic(members)


def sample_members(dist, generators: Sequence[torch.Generator], continuous: bool,
                   nvec: Sequence[int] | None = None) -> torch.Tensor:
    """a_s ~ π_s for every member (the distribution's leading axis), drawn with member s's
    generator as its run draws: the Gaussian noise, or the Gumbel uniforms of each categorical
    in turn (`nvec`: the sizes of a MultiDiscrete action's parts; one categorical by default)."""
    if continuous:
        mean, std = dist.base_dist.loc, dist.base_dist.scale
        return torch.stack([torch.normal(mean[s], std[s], generator=generator) for s, generator in enumerate(generators)])
    log_probs = dist.log_probs  # (S, B, Σ sizes)
    rows, sizes = log_probs.shape[1:-1], nvec or (log_probs.shape[-1],)
    return dist.sample(torch.stack([
        torch.cat([torch.rand((*rows, size), generator=generator, device=log_probs.device) for size in sizes], dim=-1)
        for generator in generators]))


def stacked_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """x (S, B, in), weight (S, out, in), bias (S, out) -> x_s W_sᵀ + b_s, (S, B, out)."""
    return torch.baddbmm(bias.unsqueeze(1), x, weight.transpose(1, 2))


class MemberParameters(nn.Module):
    """The parameters of S networks of one architecture, stacked along a leading member axis
    (a weight (out, in) of one member is (S, out, in) here), and each member back as its own
    network's state dict (so a member's checkpoint is an ordinary run's)."""

    def __init__(self, members: Sequence[nn.Module]):
        super().__init__()
        template = members[0]
        self.num_members = len(members)
        self.names = [name for name, _ in template.named_parameters()]  # one network's order (FlatAdam's)
        member_parameters = [dict(member.named_parameters()) for member in members]
        self.stacked = nn.ParameterDict({
            _key(name): nn.Parameter(torch.stack([parameters[name].detach() for parameters in member_parameters]))
            for name in self.names
        })
        # state_dict keys of one member -> the parameter each holds (a shared trunk appears twice)
        identity = {id(parameter): name for name, parameter in template.named_parameters()}
        self.state_keys = {key: identity[id(value)] for key, value in template.state_dict(keep_vars=True).items()}

    def parameters_in_member_order(self) -> list[nn.Parameter]:
        """The stacked parameters in the order one member lists its own (for StackedAdam)."""
        return [self.stacked[_key(name)] for name in self.names]

    def _parameter(self, name: str) -> torch.Tensor:
        return self.stacked[_key(name)]

    def member_state_dict(self, member: int) -> OrderedDict:
        """Member `member` as an ordinary state dict of its network (copies)."""
        return OrderedDict((key, self._parameter(name)[member].detach().clone())
                           for key, name in self.state_keys.items())

    @torch.no_grad()
    def load_member_state_dict(self, member: int, state: dict) -> None:
        """Member `member`'s parameters from an ordinary state dict of its network (its run's checkpoint)."""
        missing = sorted(set(self.state_keys) - set(state))
        if missing:
            raise KeyError(f"the member's network lacks {', '.join(missing[:3])}")
        for key, name in self.state_keys.items():
            self._parameter(name)[member].copy_(state[key])


class StackedActorCritic(MemberParameters):
    """The members' parameters stacked (leading axis S); forward passes batched over the members."""

    def __init__(self, members: Sequence[ActorCritic]):
        template = members[0]
        if not isinstance(template.policy_head, (CategoricalHead, GaussianHead)):
            raise ValueError(f"cannot stack a policy head of type {type(template.policy_head).__name__}")
        super().__init__(members)
        self.shared = template.shared
        self.continuous = isinstance(template.policy_head, GaussianHead)
        self.actor_layers = _layers(template.actor_body, "actor_body")
        self.critic_layers = self.actor_layers if self.shared else _layers(template.critic_body, "critic_body")

    def _body(self, layers, obs: torch.Tensor) -> torch.Tensor:
        """The MLP on (S, B, ...) observations, read as `ppo.models.encoders.MLPEncoder` reads them:
        integers as numbers, more than one axis flattened."""
        x = obs if obs.is_floating_point() else obs.to(torch.float32)
        if x.dim() > 3:
            x = x.flatten(start_dim=2)
        for weight, bias, activation in layers:
            x = activation(stacked_linear(x, self._parameter(weight), self._parameter(bias)))
        return x

    def _policy(self, features: torch.Tensor):
        if self.continuous:
            mean = stacked_linear(features, self._parameter("policy_head.mean.weight"),
                                  self._parameter("policy_head.mean.bias"))
            std = self._parameter("policy_head.log_std").exp().unsqueeze(1).expand_as(mean)
            return Independent(Normal(mean, std, validate_args=False), 1)
        return CategoricalDistribution(stacked_linear(features, self._parameter("policy_head.logits.weight"),
                                                      self._parameter("policy_head.logits.bias")))

    def _value(self, features: torch.Tensor) -> torch.Tensor:
        return stacked_linear(features, self._parameter("value_head.weight"),
                              self._parameter("value_head.bias")).squeeze(-1)  # (S, B)

    def distribution(self, obs: torch.Tensor) -> Distribution | CategoricalDistribution:
        return self._policy(self._body(self.actor_layers, obs))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """V_s(obs_s) for every member: (S, B)."""
        return self._value(self._body(self.critic_layers, obs))

    def act(self, obs: torch.Tensor, generators: Sequence[torch.Generator], mask: torch.Tensor | None = None):
        """a ~ π_s(· | obs_s) drawn with member s's generator; (action, log π(a | s), V(s)), each (S, B, ...)."""
        features = self._body(self.actor_layers, obs)
        dist = self._policy(features)
        action = sample_members(dist, generators, self.continuous)
        critic_features = features if self.shared else self._body(self.critic_layers, obs)
        return action, dist.log_prob(action), self._value(critic_features)

    def evaluate_actions(self, obs: torch.Tensor, actions: torch.Tensor, mask: torch.Tensor | None = None):
        """(log π_s(a | s), H[π_s(· | s)], V_s(s)) for stored actions, each (S, B); no masks (stack_networks)."""
        features = self._body(self.actor_layers, obs)
        dist = self._policy(features)
        critic_features = features if self.shared else self._body(self.critic_layers, obs)
        return dist.log_prob(actions), dist.entropy(), self._value(critic_features)


def _key(name: str) -> str:
    return name.replace(".", "__")  # ParameterDict keys may not contain dots


def _layers(body: nn.Sequential, prefix: str) -> list[tuple[str, str, nn.Module]]:
    """(weight name, bias name, activation) per Linear + activation pair of an `ppo.models.networks.mlp`."""
    modules = list(body)
    return [(f"{prefix}.{index}.weight", f"{prefix}.{index}.bias", modules[index + 1])
            for index in range(0, len(modules), 2)]


class VmappedActorCritic(MemberParameters):
    """S ActorCritics of any one architecture, their parameters stacked (leading axis S).

        (z_s, V_s) = f(θ_s, obs_s)   for s = 1 … S        (vmap of ActorCritic.forward over θ and obs)

    with z the policy head's output (logits or μ). The distributions are built from the
    (S, B, ...) outputs as one run builds them from (B, ...): every one of their operations
    acts on the last axes, so member s's π is its run's. Each member samples with its own
    generator, drawing what its run draws (the Gumbel noise of each categorical in turn, or
    the Gaussian noise); masks come as (S, B, logits).
    """

    def __init__(self, members: Sequence[ActorCritic]):
        template = members[0]
        if any(True for _ in template.buffers()):
            raise ValueError("cannot stack a network with buffers")
        super().__init__(members)
        head = template.policy_head
        self.continuous = isinstance(head, GaussianHead)
        self.nvec = head.nvec if isinstance(head, MultiCategoricalHead) else None
        self._function = [copy.deepcopy(template).to("meta")]  # the architecture only (a list: not a submodule)

    def _outputs(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(z (S, B, ...), V (S, B)) of every member on its own observations (S, B, ...)."""
        parameters = {name: self._parameter(name) for name in self.names}
        network = self._function[0]
        return vmap(lambda theta, x: functional_call(network, theta, (x,)))(parameters, obs)

    def _distribution(self, policy_output: torch.Tensor, mask: torch.Tensor | None):
        if self.continuous:
            return diagonal_gaussian(policy_output, self._parameter("policy_head.log_std").unsqueeze(1))
        if self.nvec is not None:
            return MultiCategoricalDistribution(policy_output, self.nvec, mask)
        return categorical(policy_output, mask)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """V_s(obs_s) for every member: (S, B)."""
        return self._outputs(obs)[1]

    def act(self, obs: torch.Tensor, generators: Sequence[torch.Generator], mask: torch.Tensor | None = None):
        """a ~ π_s(· | obs_s) drawn with member s's generator; (action, log π(a | s), V(s)), each (S, B, ...)."""
        policy_output, value = self._outputs(obs)
        dist = self._distribution(policy_output, mask)
        action = sample_members(dist, generators, self.continuous, self.nvec)
        return action, dist.log_prob(action), value

    def evaluate_actions(self, obs: torch.Tensor, actions: torch.Tensor, mask: torch.Tensor | None = None):
        """(log π_s(a | s), H[π_s(· | s)], V_s(s)) for stored actions (and their masks), each (S, B)."""
        policy_output, value = self._outputs(obs)
        dist = self._distribution(policy_output, mask)
        return dist.log_prob(actions), dist.entropy(), value
