"""The actor-critic network: a policy head π_θ(a | s) and a value head V_φ(s).

Two layouts, chosen by `shared`:

    shared trunk:   s → MLP → h ─┬─ policy head → π(a | s)
                                 └─ value head  → V(s)
    separate:       s → MLP_actor  → policy head → π(a | s)
                    s → MLP_critic → value head  → V(s)

A shared trunk is the textbook design; separate networks keep the value loss's
gradients out of the policy's features, which the PPO implementation studies find
better on small tasks. Measured here on CartPole-v1 (the torch preset at 150k steps, seeds
1–5, greedy 100-episode evaluation): separate networks 500 in all 5 seeds,
a shared trunk 175–301 in all 5 — so `shared_network` defaults to False.

The MLP is the encoder of flat observations; images get a CNN instead (ppo.models.encoders:
the config's `encoder`, "auto" by default, picks it from the observation space).

The policy head depends on the action space (the distributions are in ppo.algorithm.distributions):
    Discrete(n):  logits z = W h + b,  π(a | s) = softmax(z)_a               (categorical)
    MultiDiscrete(n_1..n_k):  Σ n_j logits, k independent categoricals        (log-probs summed)
    Box(d):       μ = W h + b, a state-independent log σ ∈ ℝ^d,
                  π(a | s) = Π_i N(a_i; μ_i, σ_i²)                           (diagonal Gaussian)
An observation space with an action mask (a Dict, see ppo.models.encoders) makes the categorical
heads mask: every method that reads π takes the batch's mask (B, number of logits) and
gives invalid actions probability 0 (ppo.algorithm.distributions).

Orthogonal initialisation: hidden layers with gain √2, the policy head with gain 0.01
(near-uniform / near-zero-mean first policy), the value head with gain 1; biases 0.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions import Distribution

from ppo.algorithm.distributions import (  # noqa: F401  (re-exported: other modules import them from here)
    CategoricalDistribution,
    MultiCategoricalDistribution,
    categorical,
    diagonal_gaussian,
    mask_logits,
    sample_action,
    sample_from_noise,
)
from ppo.models.encoders import (  # noqa: F401  (re-exported)
    ACTIVATION_LAYERS,
    init_layer,
    make_encoder,
    mlp,
    split_observation_space,
)


class CategoricalHead(nn.Module):
    """Discrete actions: logits → Categorical(softmax(z)); greedy action = argmax z."""

    def __init__(self, in_dim: int, num_actions: int, ortho_init: bool):
        super().__init__()
        self.logits = init_layer(nn.Linear(in_dim, num_actions), 0.01, ortho_init)

    def forward(self, features: torch.Tensor, mask: torch.Tensor | None = None) -> CategoricalDistribution:
        return categorical(self.logits(features), mask)

    def greedy(self, features: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        logits = self.logits(features)
        return (logits if mask is None else mask_logits(logits, mask)).argmax(dim=-1)

    def noise(self, rows: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """The uniforms U (rows, n) sampling draws: the Gumbel-max trick's, one per logit."""
        weight = self.logits.weight
        return torch.rand((rows, weight.shape[0]), dtype=weight.dtype, device=weight.device, generator=generator)


class MultiCategoricalHead(nn.Module):
    """MultiDiscrete(nvec) actions: Σ nvec logits → k independent categoricals; greedy = each one's argmax."""

    def __init__(self, in_dim: int, nvec: tuple[int, ...], ortho_init: bool):
        super().__init__()
        self.nvec = tuple(int(n) for n in nvec)
        self.logits = init_layer(nn.Linear(in_dim, sum(self.nvec)), 0.01, ortho_init)

    def forward(self, features: torch.Tensor, mask: torch.Tensor | None = None) -> MultiCategoricalDistribution:
        return MultiCategoricalDistribution(self.logits(features), self.nvec, mask)

    def greedy(self, features: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.forward(features, mask).mode()

    def noise(self, rows: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """The uniforms (rows, Σ nvec) sampling draws: each categorical's in turn."""
        weight = self.logits.weight
        return torch.cat([torch.rand((rows, size), dtype=weight.dtype, device=weight.device, generator=generator)
                          for size in self.nvec], dim=-1)


class GaussianHead(nn.Module):
    """Box actions: N(μ(s), diag σ²) with σ = exp(log_std) independent of the state.

    log π(a | s) = Σ_i [ −(a_i − μ_i)² / (2σ_i²) − log σ_i − ½ log 2π ]   (summed over dims)
    H[π(· | s)]  = Σ_i [ ½ + ½ log 2π + log σ_i ];   greedy action = μ(s).
    """

    def __init__(self, in_dim: int, action_dim: int, ortho_init: bool, log_std_init: float = 0.0):
        super().__init__()
        self.mean = init_layer(nn.Linear(in_dim, action_dim), 0.01, ortho_init)
        self.log_std = nn.Parameter(torch.full((action_dim,), float(log_std_init)))

    def forward(self, features: torch.Tensor) -> Distribution:
        return diagonal_gaussian(self.mean(features), self.log_std)

    def greedy(self, features: torch.Tensor) -> torch.Tensor:
        return self.mean(features)

    def noise(self, rows: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """ε ~ N(0, 1) (rows, d): sampling takes a = μ + σ ε."""
        return torch.randn((rows, self.log_std.shape[0]), dtype=self.log_std.dtype, device=self.log_std.device,
                           generator=generator)


def spaces_to_dict(observation_space: gym.Space, action_space: gym.Space) -> dict:
    """The two spaces as plain lists and numbers, for a weights_only checkpoint."""

    return {"observation": space_to_dict(observation_space), "action": space_to_dict(action_space)}


def space_to_dict(space: gym.Space) -> dict:
    """One space (Box of any shape, Discrete, MultiDiscrete, MultiBinary, Dict of these) as plain data."""
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "discrete", "n": int(space.n)}
    if isinstance(space, gym.spaces.MultiDiscrete):
        return {"type": "multi_discrete", "nvec": space.nvec.tolist()}
    if isinstance(space, gym.spaces.MultiBinary):
        return {"type": "multi_binary", "n": int(space.n)}
    if isinstance(space, gym.spaces.Dict):
        return {"type": "dict", "spaces": {key: space_to_dict(part) for key, part in space.spaces.items()}}
    return {"type": "box", "low": space.low.tolist(), "high": space.high.tolist(), "dtype": str(space.dtype)}


def space_from_dict(entry: dict) -> gym.Space:
    """The inverse of `space_to_dict`; ValueError for an unknown type."""
    if entry["type"] == "discrete":
        return gym.spaces.Discrete(int(entry["n"]))
    if entry["type"] == "multi_discrete":
        return gym.spaces.MultiDiscrete(np.array(entry["nvec"], dtype=np.int64))
    if entry["type"] == "multi_binary":
        return gym.spaces.MultiBinary(int(entry["n"]))
    if entry["type"] == "dict":
        return gym.spaces.Dict({key: space_from_dict(part) for key, part in entry["spaces"].items()})
    if entry["type"] == "box":
        low, high = np.array(entry["low"], dtype=entry["dtype"]), np.array(entry["high"], dtype=entry["dtype"])
        return gym.spaces.Box(low, high, dtype=low.dtype)
    raise ValueError(f"unknown space type {entry['type']!r}")


def spaces_from_dict(data: dict) -> tuple[gym.Space, gym.Space]:
    """(observation space, action space) from `spaces_to_dict`; ValueError if it is not one."""
    try:
        return space_from_dict(data["observation"]), space_from_dict(data["action"])
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"not a description of two spaces ({error})") from None


def observation_dim(space: gym.Space) -> int:
    if not isinstance(space, gym.spaces.Box):
        raise ValueError(f"observation space {space} is not supported; allowed: Box")
    return int(np.prod(space.shape))


def make_policy_head(action_space: gym.Space, in_dim: int, ortho_init: bool, log_std_init: float) -> nn.Module:
    if isinstance(action_space, gym.spaces.Discrete):
        return CategoricalHead(in_dim, int(action_space.n), ortho_init)
    if isinstance(action_space, gym.spaces.MultiDiscrete) and len(action_space.shape) == 1:
        return MultiCategoricalHead(in_dim, tuple(action_space.nvec.tolist()), ortho_init)
    if isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
        return GaussianHead(in_dim, action_space.shape[0], ortho_init, log_std_init)
    raise ValueError(f"action space {action_space} is not supported; allowed: Discrete, 1-D MultiDiscrete, 1-D Box")


def network_settings(config) -> dict:
    """ActorCritic's keyword arguments from a PPOConfig's network fields."""
    return dict(hidden_sizes=tuple(config.hidden_sizes), activation=config.activation, shared=config.shared_network,
                ortho_init=config.ortho_init, log_std_init=config.log_std_init)


class ActorCritic(nn.Module):
    """π_θ(a | s) and V(s); see the module docstring.

    `observation_space` is a Box, or a Dict holding a Box and an action mask (ppo.models.encoders);
    `encoder` names the encoder ("auto": from the Box). With a mask, every method that reads
    π takes `mask` (B, number of logits) bool, True = valid; without one it is None.
    """

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        hidden_sizes: tuple[int, ...] = (64, 64),
        activation: str = "tanh",
        shared: bool = False,
        ortho_init: bool = True,
        log_std_init: float = 0.0,
        encoder: str = "auto",
    ):
        super().__init__()
        box, mask_space = split_observation_space(observation_space)
        if not isinstance(box, gym.spaces.Box) or not box.shape:
            raise ValueError(f"observation space {observation_space} is not supported; allowed: Box")
        self.action_masked = mask_space is not None
        self.shared = shared
        self.actor_body = make_encoder(encoder, box, hidden_sizes, activation, ortho_init)
        self.critic_body = self.actor_body if shared else make_encoder(encoder, box, hidden_sizes, activation,
                                                                       ortho_init)
        features = self.actor_body.out_dim
        self.policy_head = make_policy_head(action_space, features, ortho_init, log_std_init)
        self.value_head = init_layer(nn.Linear(features, 1), 1.0, ortho_init)

    @classmethod
    def from_config(cls, config, observation_space: gym.Space, action_space: gym.Space) -> "ActorCritic":
        """The network a PPOConfig's network fields describe (hidden_sizes, activation, encoder, ...)."""
        return cls(observation_space, action_space, **network_settings(config), encoder=config.encoder)

    def _policy(self, features: torch.Tensor, mask: torch.Tensor | None):
        return self.policy_head(features) if mask is None else self.policy_head(features, mask)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(the policy head's output z: the logits, or the Gaussian mean μ; V(s)) in one call.
        π(· | s) is z's distribution (and σ = exp(log_std))."""
        features = self.actor_body(obs)
        head = self.policy_head
        policy_output = head.mean(features) if isinstance(head, GaussianHead) else head.logits(features)
        critic_features = features if self.shared else self.critic_body(obs)
        return policy_output, self.value_head(critic_features).squeeze(-1)

    def distribution(self, obs: torch.Tensor, mask: torch.Tensor | None = None) -> Distribution:
        return self._policy(self.actor_body(obs), mask)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.value_head(self.critic_body(obs)).squeeze(-1)  # (B,)

    def act(self, obs: torch.Tensor, mask: torch.Tensor | None = None, generator: torch.Generator | None = None,
            noise: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sample a ~ π(· | s) from `generator` (the global one when None), or from `noise` drawn
        beforehand with `action_noise`; return (action, log π(a | s), V(s)) for a rollout step."""
        if noise is None:
            noise = self.action_noise(obs.shape[0], generator)
        features = self.actor_body(obs)
        dist = self._policy(features, mask)
        action = sample_from_noise(dist, noise)
        critic_features = features if self.shared else self.critic_body(obs)
        value = self.value_head(critic_features).squeeze(-1)
        return action, dist.log_prob(action), value

    def action_noise(self, rows: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """The random numbers sampling `rows` actions draws from `generator` (a seed batch draws them
        outside the batched network, member by member: ppo.models.member_networks)."""
        return self.policy_head.noise(rows, generator)

    def evaluate_actions(
        self, obs: torch.Tensor, actions: torch.Tensor, mask: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(log π_θ(a | s), H[π_θ(· | s)], V(s)) for stored actions (and the masks they were drawn under)."""
        features = self.actor_body(obs)
        dist = self._policy(features, mask)
        critic_features = features if self.shared else self.critic_body(obs)
        value = self.value_head(critic_features).squeeze(-1)
        return dist.log_prob(actions), dist.entropy(), value

    def greedy_action(self, obs: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """The most likely (valid) action: argmax of the logits, or the Gaussian mean."""
        features = self.actor_body(obs)
        return self.policy_head.greedy(features) if mask is None else self.policy_head.greedy(features, mask)
