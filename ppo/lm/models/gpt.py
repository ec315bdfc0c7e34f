"""A tiny decoder-only transformer (GPT) in the spirit of nanoGPT.

    tokens (B, L) -> token embedding + position embedding -> n_layer x Block -> LayerNorm
                  -> LM head (weights tied to the token embedding) -> logits (B, L, V)

Each Block is pre-LayerNorm:  x = x + Attention(LN(x));  x = x + MLP(LN(x)).

Two additions over the textbook model, both for RL fine-tuning:
- an optional scalar value head (one value per position), so a critic or a reward
  model can reuse the same architecture;
- a KV cache, so sampling feeds one new token per step instead of the whole sequence.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

# The logit of a token the model must never emit: exp(NEVER_LOGIT / τ − max) is exactly 0 in
# float32 for any temperature used here, and unlike −∞ it keeps p·log p = 0 (no NaN entropy).
NEVER_LOGIT = -1e9


@dataclass
class GPTConfig:
    vocab_size: int = 32
    block_size: int = 32  # longest sequence (prompt + completion) the model can see
    n_layer: int = 2
    n_head: int = 4
    n_embd: int = 64
    dropout: float = 0.0
    bias: bool = True  # biases in Linear and LayerNorm layers
    value_head: bool = False  # add a scalar head: one value per position
    # Token ids the model never emits (BOS and PAD inside generated text): their logits are
    # NEVER_LOGIT, so sampling, scoring, KL and the exact optimum all see one distribution.
    never_emitted: tuple[int, ...] = ()

    def __post_init__(self):
        self.never_emitted = tuple(int(i) for i in self.never_emitted)  # a checkpoint stores a list
        if self.n_embd % self.n_head != 0:
            raise ValueError(f"n_embd ({self.n_embd}) must be divisible by n_head ({self.n_head})")

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


class KVCache:
    """Preallocated keys and values of every layer: k[layer], v[layer] are (B, n_head, T_max, head_dim).

    A forward pass at start_pos with L new tokens writes positions start_pos..start_pos+L-1
    and attends to positions 0..start_pos+L-1. The caller tracks start_pos.
    """

    def __init__(self, config: GPTConfig, batch_size: int, max_len: int | None = None,
                 device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32):
        self.max_len = config.block_size if max_len is None else max_len
        if self.max_len > config.block_size:
            raise ValueError(f"max_len {self.max_len} exceeds block_size {config.block_size}")
        shape = (batch_size, config.n_head, self.max_len, config.head_dim)
        self.k = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(config.n_layer)]
        self.v = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(config.n_layer)]


class CausalSelfAttention(nn.Module):
    """Multi-head attention where position i only sees positions <= i:

        Attention(Q, K, V) = softmax(Q K^T / sqrt(head_dim) + causal_mask) V
    """

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.n_head, self.head_dim = config.n_head, config.head_dim
        self.qkv = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = config.dropout
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor, layer_cache: tuple[torch.Tensor, torch.Tensor] | None = None,
                start_pos: int = 0) -> torch.Tensor:
        B, L, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)  # 3 x (B, L, C)
        q, k, v = (t.view(B, L, self.n_head, self.head_dim).transpose(1, 2) for t in (q, k, v))  # (B, H, L, D)
        dropout_p = self.dropout if self.training else 0.0

        if layer_cache is None:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
        else:
            cache_k, cache_v = layer_cache  # (B, H, T_max, D)
            end = start_pos + L
            cache_k[:, :, start_pos:end] = k
            cache_v[:, :, start_pos:end] = v
            k, v = cache_k[:, :, :end], cache_v[:, :, :end]  # (B, H, end, D)
            if L == 1:  # decoding: the single new query may see every cached key
                mask = None
            else:  # prefill: query at absolute position start_pos+i sees keys 0..start_pos+i
                query_pos = torch.arange(start_pos, end, device=x.device)[:, None]  # (L, 1)
                key_pos = torch.arange(end, device=x.device)[None, :]  # (1, end)
                mask = key_pos <= query_pos  # (L, end), True = may attend
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)

        y = y.transpose(1, 2).reshape(B, L, C)  # (B, L, C)
        return self.resid_dropout(self.proj(y))


class MLP(nn.Module):
    """Position-wise feed-forward: Linear(C -> 4C), GELU, Linear(4C -> C)."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.proj(F.gelu(self.fc(x))))


class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + Attn(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, config: GPTConfig):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x, layer_cache=None, start_pos: int = 0):
        x = x + self.attn(self.ln_1(x), layer_cache, start_pos)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    """Decoder-only transformer with tied input/output embeddings and learned positions."""

    def __init__(self, config: GPTConfig, generator: torch.Generator | None = None):
        super().__init__()
        self.config = config
        self.token_embedding = nn.Embedding(config.vocab_size, config.n_embd)
        self.position_embedding = nn.Embedding(config.block_size, config.n_embd)
        self.dropout = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList(Block(config) for _ in range(config.n_layer))
        self.ln_f = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.lm_head.weight = self.token_embedding.weight  # weight tying
        self.value_head = nn.Linear(config.n_embd, 1) if config.value_head else None
        self.register_buffer("emitted", self._emitted_mask(config), persistent=False)  # (V,) bool
        self._init_weights(generator)

    @staticmethod
    def _emitted_mask(config: GPTConfig) -> torch.Tensor:
        mask = torch.ones(config.vocab_size, dtype=torch.bool)
        mask[list(config.never_emitted)] = False
        return mask

    def never_emit(self, *token_ids: int) -> GPT:
        """From now on, the logits of these ids are NEVER_LOGIT (the model cannot produce them)."""
        self.config = dataclasses.replace(self.config, never_emitted=tuple(sorted(set(token_ids))))
        self.emitted = self._emitted_mask(self.config).to(self.emitted.device)
        return self

    def _logits(self, h: torch.Tensor) -> torch.Tensor:
        logits = self.lm_head(h)  # (B, L, V)
        if self.config.never_emitted:
            logits = logits.masked_fill(~self.emitted, NEVER_LOGIT)
        return logits

    @torch.no_grad()
    def _init_weights(self, generator: torch.Generator | None) -> None:
        """N(0, 0.02) weights, zero biases; residual output projections scaled by 1/sqrt(2 n_layer)
        so the residual stream keeps unit scale; the value head starts at exactly 0."""
        residual_std = 0.02 / math.sqrt(2 * self.config.n_layer)
        for name, module in self.named_modules():
            if isinstance(module, (nn.Linear, nn.Embedding)) and module is not self.lm_head:
                std = residual_std if name.endswith(".proj") else 0.02
                nn.init.normal_(module.weight, mean=0.0, std=std, generator=generator)
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)
        if self.value_head is not None:
            nn.init.zeros_(self.value_head.weight)
            nn.init.zeros_(self.value_head.bias)

    def new_kv_cache(self, batch_size: int, max_len: int | None = None) -> KVCache:
        p = self.token_embedding.weight
        return KVCache(self.config, batch_size, max_len, device=p.device, dtype=p.dtype)

    def hidden_states(self, idx: torch.Tensor, kv_cache: KVCache | None = None,
                      start_pos: int = 0) -> torch.Tensor:
        """Final-LayerNorm features (B, L, C) of tokens idx (B, L) at positions start_pos..start_pos+L-1."""
        B, L = idx.shape
        if start_pos + L > self.config.block_size:
            raise ValueError(f"sequence end {start_pos + L} exceeds block_size {self.config.block_size}")
        positions = torch.arange(start_pos, start_pos + L, device=idx.device)  # (L,)
        x = self.dropout(self.token_embedding(idx) + self.position_embedding(positions))  # (B, L, C)
        for layer, block in enumerate(self.blocks):
            layer_cache = None if kv_cache is None else (kv_cache.k[layer], kv_cache.v[layer])
            x = block(x, layer_cache, start_pos)  # (B, L, C)
        return self.ln_f(x)

    def forward(self, idx: torch.Tensor, kv_cache: KVCache | None = None,
                start_pos: int = 0) -> torch.Tensor:
        """Next-token logits (B, L, V): logits[:, i] scores the token that follows idx[:, i]."""
        return self._logits(self.hidden_states(idx, kv_cache, start_pos))  # (B, L, V)

    def logits_and_values(self, idx: torch.Tensor, kv_cache: KVCache | None = None,
                          start_pos: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits (B, L, V) and values (B, L) from one shared pass (needs value_head=True)."""
        h = self.hidden_states(idx, kv_cache, start_pos)  # (B, L, C)
        return self._logits(h), self._value(h)

    def values(self, idx: torch.Tensor) -> torch.Tensor:
        """Scalar value of every prefix: values[:, i] is V(idx[:, :i+1]), shape (B, L)."""
        return self._value(self.hidden_states(idx))

    def _value(self, h: torch.Tensor) -> torch.Tensor:
        if self.value_head is None:
            raise RuntimeError("this GPT has no value head; build it with GPTConfig(value_head=True)")
        return self.value_head(h).squeeze(-1)  # (B, L)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())


def next_token_log_probs(logits: torch.Tensor, temperature: float = 1.0,
                         top_k: int | None = None) -> torch.Tensor:
    """log pi(a) = log softmax(z / tau)_a over the vocabulary, shape like logits (..., V).

    With top_k, tokens outside the k largest logits get log-prob -inf and the rest are
    renormalised (ties with the k-th logit are kept). The sampler and log_probs_of both
    go through this function, so they define the same distribution.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    z = logits / temperature
    if top_k is not None and top_k < z.size(-1):
        kth_largest = torch.topk(z, top_k, dim=-1).values[..., -1:]  # (..., 1)
        z = z.masked_fill(z < kth_largest, float("-inf"))
    return F.log_softmax(z, dim=-1)


def log_probs_of(model: GPT, tokens: torch.Tensor, temperature: float = 1.0,
                 top_k: int | None = None) -> torch.Tensor:
    """Log-prob of every next token of tokens (B, L) under the model, shape (B, L-1):

        out[:, t] = log softmax(z_t / tau)[tokens[:, t+1]],   z_t = model(tokens)[:, t]

    This is how PPO recomputes log pi(a_t | s_t) of sampled completions; it agrees with
    the log_probs returned by ppo.lm.models.sampling.sample for the same temperature and top_k.
    Gradients flow unless called under torch.no_grad()/inference_mode().
    """
    logits = model(tokens[:, :-1])  # (B, L-1, V)
    log_p = next_token_log_probs(logits, temperature, top_k)  # (B, L-1, V)
    return log_p.gather(-1, tokens[:, 1:].unsqueeze(-1)).squeeze(-1)  # (B, L-1)


def completion_log_probs(model: GPT, prompt: list[int], completions: list[list[int]],
                         temperature: float = 1.0) -> torch.Tensor:
    """Exact log-probability of whole completions of one prompt, shape (N,):

        log pi(c | prompt) = sum_t log softmax(z_t / tau)[c_t]

    Scoring every possible answer this way gives the model's exact distribution over them,
    with none of the noise of counting samples.
    """
    P, longest = len(prompt), max(len(c) for c in completions)
    tokens = torch.zeros(len(completions), P + longest, dtype=torch.long)  # (N, P+C); 0 fills the tails
    in_completion = torch.zeros(len(completions), P + longest - 1, dtype=torch.bool)  # (N, P+C-1)
    for row, completion in enumerate(completions):
        tokens[row, : P + len(completion)] = torch.tensor(list(prompt) + list(completion))
        in_completion[row, P - 1 : P - 1 + len(completion)] = True
    device = model.token_embedding.weight.device
    log_p = log_probs_of(model, tokens.to(device), temperature)  # (N, P+C-1)
    return (log_p * in_completion.to(device)).sum(dim=1)  # (N,)
