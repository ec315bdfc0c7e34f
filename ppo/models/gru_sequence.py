"""K GRU cores stepped over T time steps, with backpropagation through time written by hand.

The recurrence (x̂_t = W_ih x_t + b_ih given, one row block per gate r, z, n; m_t ∈ {0, 1}
zeroes the state before an episode's first observation):

    p_t = h_{t−1} · m_t                         ĥ_t = W_hh p_t + b_hh
    r_t = σ(x̂_r + ĥ_r)    z_t = σ(x̂_z + ĥ_z)    n_t = tanh(x̂_n + r_t ⊙ ĥ_n)
    h_t = n_t + z_t ⊙ (p_t − n_t)

Backward, from g_t = ∂L/∂h_t (the output's gradient plus what step t + 1 sends back):

    ∂n = g ⊙ (1 − z) ⊙ (1 − n²)          ∂x̂_n = ∂n        ∂ĥ_n = ∂n ⊙ r
    ∂r = ∂n ⊙ ĥ_n ⊙ r (1 − r)            ∂x̂_r = ∂ĥ_r = ∂r
    ∂z = g ⊙ (p − n) ⊙ z (1 − z)         ∂x̂_z = ∂ĥ_z = ∂z
    ∂p = g ⊙ z + ∂ĥ W_hh                 ∂h_{t−1} = ∂p · m_t
    ∂W_hh = Σ_t ∂ĥ_tᵀ p_t                ∂b_hh = Σ_t ∂ĥ_t

The loop over t cannot be avoided, but everything that does not depend on g is computed
for all t at once after the forward loop (the factors (1 − z)(1 − n²), ĥ_n r(1 − r) and
(p − n) z(1 − z)), and ∂W_hh, ∂b_hh and ∂x̂ once after the backward loop; each step of
the backward loop is then ten tensor operations. The forward pass is the same arithmetic
as autograd would record for the same expressions, so its values equal an autograd loop's
bit for bit; tests/test_recurrent.py checks the gradients against one in float64.
Autograd over the same loop runs two to three times as many operations per step, each
recorded: this is what makes a recurrent update fast on a CPU, where small operations
cost their dispatch, not their arithmetic.
"""

from __future__ import annotations

import torch


def gru_step(input_gates: torch.Tensor, state: torch.Tensor, weight_hh: torch.Tensor,
             bias_hh: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """One step of K cores: x̂ (K, B, 3H), p (K, B, H) → (h', (rz, n, ĥ_n)), the gates the backward needs."""
    hidden = weight_hh.shape[2]
    gates_h = torch.baddbmm(bias_hh.unsqueeze(1), state, weight_hh.transpose(1, 2))
    reset_update = torch.sigmoid(input_gates[..., : 2 * hidden] + gates_h[..., : 2 * hidden])
    hidden_n = gates_h[..., 2 * hidden:]
    candidate = torch.tanh(input_gates[..., 2 * hidden:] + reset_update[..., :hidden] * hidden_n)
    return candidate + reset_update[..., hidden:] * (state - candidate), (reset_update, candidate, hidden_n)


class GRUSequence(torch.autograd.Function):
    """h_0 … h_{T−1} of K GRU cores (the module docstring); differentiable in x̂, h_{−1}, W_hh and b_hh.

    `apply` returns (h, and what the backward reuses: p, (r, z), n, ĥ_n, not differentiable);
    h (K, T, B, H) is the result. Under torch.func.vmap over a stack of S networks (a seed
    batch, ppo.models.member_networks) the members' cores are one stack of S·K cores (`vmap`):
    the loop runs once for all members, forward and backward, on plain tensors.
    """

    @staticmethod
    def forward(input_gates: torch.Tensor, kept: torch.Tensor, state: torch.Tensor, weight_hh: torch.Tensor,
                bias_hh: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """input_gates (K, T, B, 3H), kept m (T, 1, B, 1), state h_{−1} (K, B, H) → h (K, T, B, H), and the gates."""
        previous, states, gates = [], [], []
        h = state
        for t in range(input_gates.shape[1]):
            h = h * kept[t]
            previous.append(h)
            h, step_gates = gru_step(input_gates[:, t], h, weight_hh, bias_hh)
            states.append(h)
            gates.append(step_gates)
        reset_update, candidate, hidden_n = (torch.stack(gate, dim=1) for gate in zip(*gates))
        return torch.stack(states, dim=1), torch.stack(previous, dim=1), reset_update, candidate, hidden_n

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        kept, weight_hh = inputs[1], inputs[3]
        _, previous, reset_update, candidate, hidden_n = output
        ctx.mark_non_differentiable(previous, reset_update, candidate, hidden_n)
        ctx.save_for_backward(kept, weight_hh, previous, reset_update, candidate, hidden_n)

    @staticmethod
    def vmap(info, in_dims, input_gates, kept, state, weight_hh, bias_hh):
        """The batching rule: member s's core k is core s·K + k of one call, m_t repeated per core.

        Every input comes with its member axis first (expanded where it has none); x̂ (S, K, T, B, 3H),
        h_{−1} (S, K, B, H), W_hh (S, K, 3H, H) and b_hh (S, K, 3H) fold S·K together; m_t (S, T, K', B, 1)
        with K' ∈ {1, K} becomes (T, S·K, B, 1). Every output is (S·K, …) unfolded to (S, K, …).
        """
        members = info.batch_size

        def first(tensor, dim):
            return tensor.unsqueeze(0).expand(members, *tensor.shape) if dim is None else tensor.movedim(dim, 0)

        input_gates, kept, state, weight_hh, bias_hh = (
            first(tensor, dim) for tensor, dim in zip((input_gates, kept, state, weight_hh, bias_hh), in_dims))
        cores = input_gates.shape[1]
        kept = kept.expand(-1, -1, cores, -1, -1).transpose(0, 1).reshape(kept.shape[1], members * cores,
                                                                          *kept.shape[3:])
        outputs = GRUSequence.apply(input_gates.flatten(0, 1), kept, state.flatten(0, 1), weight_hh.flatten(0, 1),
                                    bias_hh.flatten(0, 1))
        return tuple(output.unflatten(0, (members, cores)) for output in outputs), (0,) * len(outputs)

    @staticmethod
    def backward(ctx, grad_states: torch.Tensor, *_gates_have_no_gradient):
        kept, weight_hh, previous, reset_update, candidate, hidden_n = ctx.saved_tensors
        K, T, B, H = previous.shape
        reset, update = reset_update[..., :H], reset_update[..., H:]
        derivative = reset_update * (1 - reset_update)
        candidate_factor = (1 - update) * (1 - candidate * candidate)  # ∂n / g
        reset_factor = hidden_n * derivative[..., :H]  # ∂r / ∂n
        update_factor = (previous - candidate) * derivative[..., H:]  # ∂z / g
        d_hidden_steps, d_candidate_steps = [None] * T, [None] * T
        carry = torch.zeros_like(previous[:, 0])
        for t in reversed(range(T)):
            g = grad_states[:, t] + carry
            d_candidate = g * candidate_factor[:, t]
            d_hidden = torch.cat([d_candidate * reset_factor[:, t], g * update_factor[:, t],
                                  d_candidate * reset[:, t]], dim=-1)
            d_hidden_steps[t], d_candidate_steps[t] = d_hidden, d_candidate
            carry = (g * update[:, t] + torch.bmm(d_hidden, weight_hh)) * kept[t]
        d_hidden = torch.stack(d_hidden_steps, dim=1)  # ∂ĥ (K, T, B, 3H)
        d_input = torch.cat([d_hidden[..., : 2 * H], torch.stack(d_candidate_steps, dim=1)], dim=-1)  # ∂x̂
        flat = d_hidden.reshape(K, T * B, 3 * H)
        d_weight = torch.bmm(flat.transpose(1, 2), previous.reshape(K, T * B, H))
        return d_input, None, carry, d_weight, flat.sum(dim=1)
