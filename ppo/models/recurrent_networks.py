"""A recurrent actor-critic: the feed-forward network of ppo.models.networks with a GRU or LSTM
between its hidden layers and its heads, for tasks the current observation does not settle.

    separate (default):  o_t → MLP_actor  → x_t → GRU_actor(x_t, h_{t−1})  → h_t → policy head → π(a | o_≤t)
                         o_t → MLP_critic → y_t → GRU_critic(y_t, g_{t−1}) → g_t → value head  → V(o_≤t)
    shared:              o_t → MLP → x_t → GRU(x_t, h_{t−1}) → h_t ─┬─ policy head
                                                                     └─ value head

Separate or shared follows the config's `shared_network`, as for the feed-forward
network: separate by default (SB3's RecurrentPPO default; CleanRL's LSTM agent shares one),
so the value loss's gradients stay out of the policy's memory.

The state is zeroed at every episode start, before the cell reads the episode's first
observation — the reset of the first rollout, and the SAME_STEP autoreset step, whose
observation already belongs to the next episode:

    h_{t−1} ← h_{t−1} · (1 − start_t)        h_t = GRU(x_t, h_{t−1})

`unroll` does exactly this over T steps for a batch of env sequences, one cell call per
step; the rollout calls it with T = 1 and the update with T = L steps of a stored sequence
(the whole rollout by default), from the state stored at the sequence's start, so the update
recomputes the rollout's log-probs.

A GRU (the default) rather than an LSTM: one state instead of two, three gates instead of
four, and fewer operations per step. Both are stepped in a Python loop over t, one step
of both cores (actor and critic) as one batched computation (`RecurrentCores`): the loop
needs no cutting of sequences at episode starts and no padding, and the input side of
every step is one matmul before it. The GRU's loop has its backward written by hand
(ppo.models.gru_sequence), the LSTM's is differentiated by autograd. (Two nn.GRUCell calls per
step ran the update 1.3 to 2.5 times as slowly, side by side; torch's nn.GRU over whole
sequences cannot zero the state inside them, and on a CPU it was no faster than the loop.)

The state of a batch of B envs is one tensor (B, K, S): K = 2 cores (actor, critic) or 1
shared; S = H for a GRU and 2H for an LSTM (h and c side by side), H = recurrent_hidden_size.

Initialisation as CleanRL's recurrent agent: the cells' weights orthogonal with gain 1,
their biases 0 (the MLP and heads as in ppo.models.networks); torch's default if ortho_init is off.
"""

from __future__ import annotations

import gymnasium as gym
import torch
from torch import nn

from ppo.algorithm.distributions import sample_from_noise
from ppo.models.gru_sequence import GRUSequence, gru_step
from ppo.models.networks import ActorCritic, init_layer, make_policy_head, mlp, network_settings, observation_dim

CELLS = ("gru", "lstm")
GATES = {"gru": 3, "lstm": 4}  # gate blocks in the weight matrices, in torch's order (r, z, n) and (i, f, g, o)


class RecurrentCores(nn.Module):
    """K independent GRU or LSTM cells stepped as one batched computation (K = 2: actor and critic).

    Core k holds torch's GRUCell / LSTMCell parameters in row k (W_ih (G·H, I), W_hh (G·H, H),
    b_ih, b_hh), so a step of both cores is one batched matmul and one set of element-wise
    ops instead of two cell calls; the input side W_ih x + b_ih of every step is computed
    before the loop, in one matmul. With x̂ = W_ih x + b_ih and ĥ = W_hh h + b_hh:

        GRU:   r = σ(x̂_r + ĥ_r), z = σ(x̂_z + ĥ_z), n = tanh(x̂_n + r ⊙ ĥ_n),  h' = n + z ⊙ (h − n)
        LSTM:  i, f, o = σ(x̂ + ĥ)_{i,f,o}, g = tanh(x̂_g + ĥ_g),  c' = f ⊙ c + i ⊙ g,  h' = o ⊙ tanh(c')

    (tests/test_recurrent.py checks them against nn.GRUCell and nn.LSTMCell.)
    """

    def __init__(self, cell: str, num_cores: int, input_size: int, hidden_size: int, ortho_init: bool):
        super().__init__()
        if cell not in CELLS:
            raise ValueError(f"cell = {cell!r} is not one of {', '.join(CELLS)}")
        self.cell, self.hidden_size = cell, hidden_size
        rows = GATES[cell] * hidden_size
        self.weight_ih = nn.Parameter(torch.empty(num_cores, rows, input_size))
        self.weight_hh = nn.Parameter(torch.empty(num_cores, rows, hidden_size))
        self.bias_ih = nn.Parameter(torch.empty(num_cores, rows))
        self.bias_hh = nn.Parameter(torch.empty(num_cores, rows))
        with torch.no_grad():
            for k in range(num_cores):
                for weight in (self.weight_ih[k], self.weight_hh[k]):
                    if ortho_init:  # CleanRL's recurrent agent: orthogonal (gain 1), biases 0
                        nn.init.orthogonal_(weight, 1.0)
                    else:  # torch's own default for its cells
                        nn.init.uniform_(weight, -hidden_size ** -0.5, hidden_size ** -0.5)
            for bias in (self.bias_ih, self.bias_hh):
                nn.init.zeros_(bias) if ortho_init else nn.init.uniform_(bias, -hidden_size ** -0.5, hidden_size ** -0.5)

    def input_gates(self, inputs: torch.Tensor) -> torch.Tensor:
        """x̂ = W_ih x + b_ih for every core: (K, R, I) → (K, R, G·H)."""
        return torch.baddbmm(self.bias_ih.unsqueeze(1), inputs, self.weight_ih.transpose(1, 2))

    def sequence(self, input_gates: torch.Tensor, kept: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """T steps of every core (`core_sequence` with this module's W_hh, b_hh)."""
        return core_sequence(self.cell, input_gates, kept, state, self.weight_hh, self.bias_hh)

    def step(self, input_gates: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """One step of every core (`core_step` with this module's W_hh, b_hh)."""
        return core_step(self.cell, input_gates, state, self.weight_hh, self.bias_hh)


def core_sequence(cell: str, input_gates: torch.Tensor, kept: torch.Tensor, state: torch.Tensor,
                  weight_hh: torch.Tensor, bias_hh: torch.Tensor) -> torch.Tensor:
    """T steps of K cores, the state multiplied by m_t before step t: x̂ (K, T, B, G·H),
    m (T, 1, B, 1) (or (T, K, B, 1), one per core), state (K, B, S) → the state after every step (K, T, B, S).

    With gradients, a GRU runs as ppo.models.gru_sequence.GRUSequence (the same arithmetic,
    backpropagation written by hand); an LSTM, and a GRU without gradients, as a loop over
    `core_step`, which autograd differentiates.
    """
    if cell == "gru" and torch.is_grad_enabled():
        return GRUSequence.apply(input_gates, kept, state, weight_hh, bias_hh)[0]
    states = []  # without gradients (the rollout) the loop alone, the same arithmetic
    for t in range(input_gates.shape[1]):
        state = core_step(cell, input_gates[:, t], state * kept[t], weight_hh, bias_hh)
        states.append(state)
    return torch.stack(states, dim=1)


def core_step(cell: str, input_gates: torch.Tensor, state: torch.Tensor, weight_hh: torch.Tensor,
              bias_hh: torch.Tensor) -> torch.Tensor:
    """One step of K cores: x̂ (K, B, G·H), state (K, B, S) → new state (K, B, S); h' is [..., :H]."""
    if cell == "gru":  # the state is h
        return gru_step(input_gates, state, weight_hh, bias_hh)[0]
    hidden, memory = state.chunk(2, dim=-1)  # the state is (h, c)
    gates = input_gates + torch.baddbmm(bias_hh.unsqueeze(1), hidden, weight_hh.transpose(1, 2))
    input_gate, forget_gate, cell_input, output_gate = gates.chunk(4, dim=-1)
    memory = torch.sigmoid(forget_gate) * memory + torch.sigmoid(input_gate) * torch.tanh(cell_input)
    return torch.cat([torch.sigmoid(output_gate) * torch.tanh(memory), memory], dim=-1)


class RecurrentActorCritic(nn.Module):
    """π_θ(a | o_≤t) and V(o_≤t) with a recurrent core; see the module docstring."""

    def __init__(
        self,
        observation_space: gym.Space,
        action_space: gym.Space,
        hidden_sizes: tuple[int, ...] = (64, 64),
        activation: str = "tanh",
        shared: bool = False,
        ortho_init: bool = True,
        log_std_init: float = 0.0,
        cell: str = "gru",
        recurrent_size: int = 64,
    ):
        super().__init__()
        in_dim = observation_dim(observation_space)
        self.shared, self.cell_type, self.recurrent_size = shared, cell, recurrent_size
        self.num_cores = 1 if shared else 2
        self.state_width = recurrent_size * (2 if cell == "lstm" else 1)
        self.actor_body = mlp(in_dim, hidden_sizes, activation, ortho_init)
        self.critic_body = self.actor_body if shared else mlp(in_dim, hidden_sizes, activation, ortho_init)
        self.cores = RecurrentCores(cell, self.num_cores, hidden_sizes[-1], recurrent_size, ortho_init)
        self.policy_head = make_policy_head(action_space, recurrent_size, ortho_init, log_std_init)
        self.value_head = init_layer(nn.Linear(recurrent_size, 1), 1.0, ortho_init)

    @classmethod
    def from_config(cls, config, observation_space: gym.Space, action_space: gym.Space) -> "RecurrentActorCritic":
        """The network of a PPOConfig: its network fields, with recurrent (the cell) and recurrent_hidden_size."""
        return cls(observation_space, action_space, **network_settings(config), cell=config.recurrent,
                   recurrent_size=config.recurrent_hidden_size)

    def initial_state(self, batch: int, device: torch.device | str = "cpu") -> torch.Tensor:
        """The zero state of `batch` envs: (B, K, S)."""
        return torch.zeros(batch, self.num_cores, self.state_width, device=device)

    # ------------------------------------------------------------------ the recurrence
    def state_kept(self, episode_starts: torch.Tensor) -> torch.Tensor:
        """1 − start_t (T, B): the factor each env's state is multiplied by before step t."""
        return (~episode_starts).to(torch.float32)

    def unroll(self, obs: torch.Tensor, state: torch.Tensor, episode_starts: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Step the cores over T steps of B env sequences.

        obs (T, B, obs_dim), state (B, K, S) entering step 0, episode_starts (T, B) bool.
        Returns (actor features (T, B, H), critic features (T, B, H), state after step T − 1).
        """
        T, B = episode_starts.shape
        flat_obs = obs.reshape(T * B, -1)
        bodies = [self.actor_body(flat_obs)] if self.shared else [self.actor_body(flat_obs), self.critic_body(flat_obs)]
        input_gates = self.cores.input_gates(torch.stack(bodies)).view(self.num_cores, T, B, -1)  # (K, T, B, G·H)
        kept = self.state_kept(episode_starts).to(state.dtype).view(T, 1, B, 1)
        states = self.cores.sequence(input_gates, kept, state.transpose(0, 1))  # (K, T, B, S)
        features = states[..., : self.recurrent_size]  # h of every step
        return features[0], features[-1], states[:, -1].transpose(0, 1)

    # ------------------------------------------------------------------ what the trainer and evaluation call
    def act(self, obs: torch.Tensor, state: torch.Tensor, episode_start: torch.Tensor,
            generator: torch.Generator | None = None, noise: torch.Tensor | None = None):
        """One rollout step for B envs: a ~ π(· | o_≤t), drawn from `generator` (the global one
        when None) or from `noise` drawn beforehand; returns (action, log π(a), V, new state)."""
        if noise is None:
            noise = self.action_noise(obs.shape[0], generator)
        actor, critic, state = self.unroll(obs.unsqueeze(0), state, episode_start.unsqueeze(0))
        dist = self.policy_head(actor[0])
        action = sample_from_noise(dist, noise)
        return action, dist.log_prob(action), self.value_head(critic[0]).squeeze(-1), state

    def action_noise(self, rows: int, generator: torch.Generator | None = None) -> torch.Tensor:
        """The random numbers sampling `rows` actions draws (as ActorCritic.action_noise)."""
        return self.policy_head.noise(rows, generator)

    def value(self, obs: torch.Tensor, state: torch.Tensor, episode_start: torch.Tensor) -> torch.Tensor:
        """V(o_≤t) for one step of B envs (B,); the state is not advanced."""
        _, critic, _ = self.unroll(obs.unsqueeze(0), state, episode_start.unsqueeze(0))
        return self.value_head(critic[0]).squeeze(-1)

    def evaluate_actions(self, obs: torch.Tensor, actions: torch.Tensor, state: torch.Tensor,
                         episode_starts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(log π_θ(a_t | o_≤t), H[π_θ], V(o_≤t)), each (T, B), for stored sequences replayed from `state`."""
        actor, critic, _ = self.unroll(obs, state, episode_starts)
        T, B = episode_starts.shape
        dist = self.policy_head(actor.reshape(T * B, -1))
        flat_actions = actions.reshape(T * B, *actions.shape[2:])
        values = self.value_head(critic.reshape(T * B, -1)).view(T, B)
        return dist.log_prob(flat_actions).view(T, B), dist.entropy().view(T, B), values

    def distribution(self, obs: torch.Tensor, state: torch.Tensor, episode_start: torch.Tensor):
        """(π(· | o_≤t), new state) for one step of B envs."""
        actor, _, state = self.unroll(obs.unsqueeze(0), state, episode_start.unsqueeze(0))
        return self.policy_head(actor[0]), state

    def greedy_action(self, obs: torch.Tensor, state: torch.Tensor, episode_start: torch.Tensor):
        """(the most likely action, new state) for one step of B envs."""
        actor, _, state = self.unroll(obs.unsqueeze(0), state, episode_start.unsqueeze(0))
        return self.policy_head.greedy(actor[0]), state


def actor_critic_from_config(config, observation_space: gym.Space, action_space: gym.Space) -> nn.Module:
    """The network a PPOConfig describes: RecurrentActorCritic when config.recurrent is a cell, else ActorCritic."""
    if getattr(config, "recurrent", "none") != "none":
        return RecurrentActorCritic.from_config(config, observation_space, action_space)
    return ActorCritic.from_config(config, observation_space, action_space)


def is_recurrent(model: nn.Module) -> bool:
    return isinstance(model, RecurrentActorCritic)
