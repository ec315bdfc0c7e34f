"""S recurrent actor-critics of one architecture evaluated as one batched computation.

A `ppo.models.recurrent_networks.RecurrentActorCritic` already steps its K cores (actor and
critic, K = 2; one when shared) as one batched computation, core k's weights in row k.
S members are S·K cores: member s's core k is row s·K + k. So the recurrence of the whole
stack is the members' own kernel (`core_sequence`, GRUSequence for a GRU) over S·K rows,
and everything around it is a stacked linear layer (ppo.models.stacked_networks):

    features_s = MLP_s(o_s)                                  (S, T·B, H)     one baddbmm a layer
    x̂_{s,k} = W_ih[s,k] features_{s,k} + b_ih[s,k]            (S·K, T, B, G·H)
    h_{s,k,t} = cell(x̂_{s,k,t}, h_{s,k,t−1} · m_{s,t})         core_sequence over S·K cores
    π_s, V_s from the stacked heads on h                      (S, T, B)

with m_{s,t} = 1 − start_{s,t}, each member's own episode starts. Member s computes its
own network's function; only the arithmetic is batched. States are (S, B, K, S_w), one
member's (B, K, S_w) in row s, as its run keeps them.
"""

from __future__ import annotations

from typing import Sequence

import torch

from ppo.models.recurrent_networks import RecurrentActorCritic, core_sequence
from ppo.models.stacked_networks import StackedActorCritic, sample_members


class StackedRecurrentActorCritic(StackedActorCritic):
    """The members' parameters stacked (leading axis S); see the module docstring. The MLP bodies
    and the heads are StackedActorCritic's; `act`, `value` and `evaluate_actions` carry states."""

    def __init__(self, members: Sequence[RecurrentActorCritic]):
        super().__init__(members)
        template = members[0]
        self.cell, self.num_cores, self.recurrent_size = template.cell_type, template.num_cores, template.recurrent_size

    def _cores(self, name: str) -> torch.Tensor:
        """A core parameter (S, K, ...) as the S·K rows the kernel steps."""
        parameter = self._parameter(f"cores.{name}")
        return parameter.reshape(-1, *parameter.shape[2:])

    def unroll(self, obs: torch.Tensor, state: torch.Tensor, episode_starts: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Every member's cores over T steps of its B env sequences: obs (S, T, B, obs_dim),
        state (S, B, K, S_w), episode_starts (S, T, B) → (actor features (S, T·B, H),
        critic features (S, T·B, H), the state after step T − 1 (S, B, K, S_w))."""
        S, T, B = episode_starts.shape
        K = self.num_cores
        flat_obs = obs.reshape(S, T * B, -1)
        actor = self._body(self.actor_layers, flat_obs)
        bodies = [actor] if self.shared else [actor, self._body(self.critic_layers, flat_obs)]
        inputs = torch.stack(bodies, dim=1).flatten(0, 1)  # (S·K, T·B, H), member s's core k in row s·K + k
        input_gates = torch.baddbmm(self._cores("bias_ih").unsqueeze(1), inputs,
                                    self._cores("weight_ih").transpose(1, 2)).view(S * K, T, B, -1)
        kept = (~episode_starts).to(state.dtype)  # (S, T, B)
        kept = kept.unsqueeze(1).expand(S, K, T, B).reshape(S * K, T, B).transpose(0, 1).unsqueeze(-1)  # (T, S·K, B, 1)
        entering = state.transpose(1, 2).reshape(S * K, B, -1)  # (S·K, B, S_w)
        states = core_sequence(self.cell, input_gates, kept, entering, self._cores("weight_hh"),
                               self._cores("bias_hh")).view(S, K, T, B, -1)
        features = states[..., : self.recurrent_size].reshape(S, K, T * B, -1)
        return features[:, 0], features[:, -1], states[:, :, -1].transpose(1, 2)

    def act(self, obs: torch.Tensor, state: torch.Tensor, episode_start: torch.Tensor,
            generators: Sequence[torch.Generator]):
        """One rollout step of every member's B envs (obs (S, B, ...)), member s drawing with its own
        generator; (action, log π(a), V, new state)."""
        actor, critic, state = self.unroll(obs.unsqueeze(1), state, episode_start.unsqueeze(1))
        dist = self._policy(actor)
        action = sample_members(dist, generators, self.continuous)
        return action, dist.log_prob(action), self._value(critic), state

    def value(self, obs: torch.Tensor, state: torch.Tensor, episode_start: torch.Tensor) -> torch.Tensor:
        """V_s for one step of every member's B envs (S, B); the state is not advanced."""
        _, critic, _ = self.unroll(obs.unsqueeze(1), state, episode_start.unsqueeze(1))
        return self._value(critic)

    def evaluate_actions(self, obs: torch.Tensor, actions: torch.Tensor, state: torch.Tensor,
                         episode_starts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(log π_s(a_t | o_≤t), H, V_s), each (S, T, B), for every member's stored sequences
        (obs (S, T, B, ...), actions (S, T, B, ...)) replayed from `state` (S, B, K, S_w)."""
        actor, critic, _ = self.unroll(obs, state, episode_starts)
        S, T, B = episode_starts.shape
        dist = self._policy(actor)
        flat_actions = actions.reshape(S, T * B, *actions.shape[3:])
        return (dist.log_prob(flat_actions).view(S, T, B), dist.entropy().view(S, T, B),
                self._value(critic).view(S, T, B))

