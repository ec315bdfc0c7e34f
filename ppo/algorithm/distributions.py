"""Action distributions: what a policy head returns, one kind per action space.

    Discrete(n)               CategoricalDistribution        π(a | s) = softmax(z)_a
    Discrete(n) + mask m      MaskedCategoricalDistribution  π(a | s) = softmax(z̃)_a,  z̃_a = z_a if m_a else −∞
    MultiDiscrete(n_1..n_k)   MultiCategoricalDistribution   π(a | s) = Π_j π_j(a_j | s), each π_j (masked) categorical
    Box(d)                    diagonal_gaussian              π(a | s) = Π_i N(a_i; μ_i, σ_i²)

Each has what PPO uses: `sample`, `log_prob`, `entropy` (and `log_probs` / `probs` for the
categorical kinds, whose `sample` takes its uniforms, or a generator to draw them from, as
an argument). `sample_action` draws from any of them with a trainer's own generator.

Invalid-action masking (Huang & Ontañón 2022, "A Closer Look at Invalid Action Masking in
Policy Gradient Algorithms"; sb3-contrib's MaskablePPO). The logits of invalid actions are
replaced by the most negative finite number of their dtype before the softmax, so

    π(a | s) = 0 exactly for every invalid a (exp underflows to 0), and never sampled;
    H = −Σ_{a valid} π(a | s) log π(a | s)   (the invalid terms are left out, not 0·(−∞) = NaN);
    ∂/∂z_a of anything = 0 exactly for invalid a (the replacement is a `torch.where`);

a row with no valid action at all reads as uniform over every action (the env's error;
the trainer refuses it). The same mask is applied when the rollout samples, when the
update recomputes log π and H, and at evaluation, so the ratio r_t(θ) compares like with like.
"""

from __future__ import annotations

import torch
from torch.distributions import Distribution, Independent, Normal


class CategoricalDistribution:
    """π(a | s) = softmax(z)_a for a batch of logits z (B, n), in as few tensor ops as possible.

        log π(a | s) = z_a − logsumexp(z)        H = −Σ_a π(a | s) log π(a | s)

    Sampling uses the Gumbel-max trick: argmax_a (z_a + g_a), g_a = −log(−log U_a), U ~ U(0, 1).
    It has the interface of `torch.distributions.Categorical` that PPO uses, with a
    fraction of its Python overhead (it matters when the network is this small).
    """

    def __init__(self, logits: torch.Tensor):
        self.log_probs = torch.log_softmax(logits, dim=-1)  # (B, n)

    def sample(self, uniform: torch.Tensor | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
        """One action per row; `uniform` (the U of the docstring, shaped like the logits)
        is drawn from `generator` (the global generator when None) unless given."""
        if uniform is None:
            uniform = torch.rand(self.log_probs.shape, dtype=self.log_probs.dtype, device=self.log_probs.device,
                                 generator=generator)
        uniform = uniform.clamp(min=torch.finfo(self.log_probs.dtype).tiny)
        return (self.log_probs - torch.log(-torch.log(uniform))).argmax(dim=-1)

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        return self.log_probs.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)

    def entropy(self) -> torch.Tensor:
        return -(self.log_probs.exp() * self.log_probs).sum(dim=-1)

    @property
    def probs(self) -> torch.Tensor:
        return self.log_probs.exp()


def mask_logits(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """z̃ = z where mask, else the dtype's most negative finite value; no gradient reaches a masked z."""
    return torch.where(mask, logits, torch.finfo(logits.dtype).min)


class MaskedCategoricalDistribution(CategoricalDistribution):
    """A categorical over the valid actions only (mask (B, n) bool, True = valid); module docstring."""

    def __init__(self, logits: torch.Tensor, mask: torch.Tensor):
        self.mask = mask.bool()
        super().__init__(mask_logits(logits, self.mask))

    def entropy(self) -> torch.Tensor:
        terms = self.log_probs.exp() * self.log_probs  # (B, n); 0 · (−3.4e38) = 0 where masked
        return -torch.where(self.mask, terms, 0.0).sum(dim=-1)


def categorical(logits: torch.Tensor, mask: torch.Tensor | None = None) -> CategoricalDistribution:
    """The categorical of `logits`, masked if a mask is given."""
    return CategoricalDistribution(logits) if mask is None else MaskedCategoricalDistribution(logits, mask)


class MultiCategoricalDistribution:
    """k independent categoricals (MultiDiscrete(nvec)) from one row of Σ nvec logits.

        log π(a | s) = Σ_j log π_j(a_j | s)        H = Σ_j H_j        (independence)

    `mask` (B, Σ nvec), if given, is cut the same way: each sub-space has its own valid set.
    Actions are (B, k) integers, a_j ∈ {0, ..., n_j − 1}.
    """

    def __init__(self, logits: torch.Tensor, nvec: tuple[int, ...], mask: torch.Tensor | None = None):
        self.nvec = tuple(int(n) for n in nvec)
        masks = [None] * len(self.nvec) if mask is None else mask.split(self.nvec, dim=-1)
        self.parts = [categorical(part, part_mask) for part, part_mask in zip(logits.split(self.nvec, dim=-1), masks)]

    @property
    def log_probs(self) -> torch.Tensor:
        """(B, Σ nvec): each sub-space's log-probabilities side by side."""
        return torch.cat([part.log_probs for part in self.parts], dim=-1)

    def sample(self, uniform: torch.Tensor | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
        """(B, k) one draw per sub-space; `uniform` (B, Σ nvec) and `generator` as for CategoricalDistribution."""
        uniforms = [None] * len(self.parts) if uniform is None else uniform.split(self.nvec, dim=-1)
        return torch.stack([part.sample(u, generator) for part, u in zip(self.parts, uniforms)], dim=-1)

    def log_prob(self, actions: torch.Tensor) -> torch.Tensor:
        return sum(part.log_prob(actions[..., j]) for j, part in enumerate(self.parts))

    def entropy(self) -> torch.Tensor:
        return sum(part.entropy() for part in self.parts)

    def mode(self) -> torch.Tensor:
        """(B, k) the most likely action of every sub-space."""
        return torch.stack([part.log_probs.argmax(dim=-1) for part in self.parts], dim=-1)


GUMBEL_SAMPLED = (CategoricalDistribution, MultiCategoricalDistribution)  # sample(uniform shaped like log_probs)


def sample_action(dist, generator: torch.Generator | None = None) -> torch.Tensor:
    """a ~ π(· | s) for a batch, drawn from `generator` (the global generator when None): the
    same draws as `dist.sample()` from a global generator in the generator's state."""
    if isinstance(dist, GUMBEL_SAMPLED):
        return dist.sample(generator=generator)
    normal = dist.base_dist  # diagonal_gaussian's Independent(Normal)
    with torch.no_grad():
        return torch.normal(normal.loc, normal.scale, generator=generator)


def sample_from_noise(dist, noise: torch.Tensor) -> torch.Tensor:
    """a ~ π(· | s) from noise drawn beforehand (`ppo.models.networks.ActorCritic.action_noise`):
    the uniforms U of the Gumbel-max trick for the categorical kinds, ε ~ N(0, 1) for a Gaussian,
    a = μ + σ ε. With the noise `sample_action` would draw from a generator, the same actions
    bit for bit (torch.normal(μ, σ) is μ + σ·ε with ε drawn by the same kernel)."""
    if isinstance(dist, GUMBEL_SAMPLED):
        return dist.sample(noise)
    normal = dist.base_dist
    return (normal.loc + normal.scale * noise).detach()


def diagonal_gaussian(mean: torch.Tensor, log_std: torch.Tensor) -> Distribution:
    """N(μ, diag σ²) with σ = exp(log_std) broadcast over the batch; log_prob and entropy sum over dims.

    log π(a | s) = Σ_i [ −(a_i − μ_i)² / (2σ_i²) − log σ_i − ½ log 2π ]
    H[π(· | s)]  = Σ_i [ ½ + ½ log 2π + log σ_i ]

    `log_std` is (d,), or (..., d) with one row per leading index of `mean` (..., B, d) but the batch's.
    """
    std = log_std.exp()
    if 1 < std.dim() == mean.dim() - 1:  # (S, d) against (S, B, d): one σ per member
        std = std.unsqueeze(-2)
    return Independent(Normal(mean, std.expand_as(mean), validate_args=False), 1)
