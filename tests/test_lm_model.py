import math

import pytest
import torch

from ppo.lm.models.gpt import GPT, GPTConfig, completion_log_probs, log_probs_of, next_token_log_probs


CONFIG = GPTConfig(vocab_size=11, block_size=16, n_layer=2, n_head=2, n_embd=16)


def make_model(config=CONFIG, seed=0):
    model = GPT(config, generator=torch.Generator().manual_seed(seed)).eval()
    with torch.no_grad():  # non-zero biases and LayerNorm parameters so every weight is exercised
        g = torch.Generator().manual_seed(seed + 1)
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn(p.shape, generator=g))
    return model


def random_tokens(batch, length, seed=0, vocab=CONFIG.vocab_size):
    return torch.randint(vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


def reference_logits(model: GPT, idx: torch.Tensor) -> torch.Tensor:
    """A slow transformer written out with explicit loops over heads and positions."""
    cfg = model.config
    B, L = idx.shape
    D = cfg.head_dim

    def layer_norm(x, ln):
        mean = x.mean(-1, keepdim=True)
        var = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(var + ln.eps) * ln.weight + ln.bias

    x = model.token_embedding.weight[idx] + model.position_embedding.weight[:L]  # (B, L, C)
    for block in model.blocks:
        h = layer_norm(x, block.ln_1)
        qkv = h @ block.attn.qkv.weight.T + block.attn.qkv.bias
        q, k, v = qkv.split(cfg.n_embd, dim=-1)
        out = torch.zeros_like(h)
        for head in range(cfg.n_head):
            cols = slice(head * D, (head + 1) * D)
            for i in range(L):
                scores = torch.stack([(q[:, i, cols] * k[:, j, cols]).sum(-1) / math.sqrt(D)
                                      for j in range(i + 1)], dim=-1)
                weights = torch.softmax(scores, dim=-1)  # (B, i+1): only positions j <= i
                out[:, i, cols] = sum(weights[:, j, None] * v[:, j, cols] for j in range(i + 1))
        x = x + out @ block.attn.proj.weight.T + block.attn.proj.bias
        h = layer_norm(x, block.ln_2)
        hidden = torch.nn.functional.gelu(h @ block.mlp.fc.weight.T + block.mlp.fc.bias)
        x = x + hidden @ block.mlp.proj.weight.T + block.mlp.proj.bias
    return layer_norm(x, model.ln_f) @ model.token_embedding.weight.T  # tied head


def test_forward_matches_slow_reference():
    model, idx = make_model(), random_tokens(3, 9)
    with torch.no_grad():
        assert model(idx).shape == (3, 9, CONFIG.vocab_size)
        torch.testing.assert_close(model(idx), reference_logits(model, idx), atol=1e-5, rtol=1e-4)


def test_changing_a_later_token_never_changes_earlier_logits():
    model, idx = make_model(), random_tokens(2, 12)
    with torch.no_grad():
        base = model(idx)
        for k in range(12):
            changed = idx.clone()
            changed[:, k] = (changed[:, k] + 1) % CONFIG.vocab_size
            out = model(changed)
            torch.testing.assert_close(out[:, :k], base[:, :k], atol=0, rtol=0)
            assert not torch.allclose(out[:, k], base[:, k])  # the changed position does see it


def test_kv_cache_decoding_matches_full_recomputation():
    model, idx = make_model(), random_tokens(4, CONFIG.block_size, seed=5)
    prompt_len = 5
    with torch.no_grad():
        cache = model.new_kv_cache(batch_size=4)
        cached = [model(idx[:, :prompt_len], kv_cache=cache, start_pos=0)[:, -1]]  # prefill
        for t in range(prompt_len, CONFIG.block_size):
            cached.append(model(idx[:, t : t + 1], kv_cache=cache, start_pos=t)[:, -1])  # decode, L = 1
        full = [model(idx[:, : t + 1])[:, -1] for t in range(prompt_len - 1, CONFIG.block_size)]
    torch.testing.assert_close(torch.stack(cached), torch.stack(full), atol=1e-5, rtol=1e-5)


def test_kv_cache_chunked_prefill_after_start():
    """A multi-token chunk at start_pos > 0 needs the offset causal mask."""
    model, idx = make_model(), random_tokens(2, 12, seed=7)
    with torch.no_grad():
        cache = model.new_kv_cache(batch_size=2)
        first = model(idx[:, :4], kv_cache=cache, start_pos=0)
        second = model(idx[:, 4:12], kv_cache=cache, start_pos=4)
        torch.testing.assert_close(torch.cat([first, second], 1), model(idx), atol=1e-5, rtol=1e-5)


def test_positions_beyond_block_size_are_rejected():
    model = make_model()
    with pytest.raises(ValueError, match="block_size"):
        model(random_tokens(1, CONFIG.block_size + 1))


def test_tied_embeddings():
    model = make_model()
    assert model.lm_head.weight is model.token_embedding.weight


def test_value_head_starts_at_zero_and_learns():
    config = GPTConfig(vocab_size=11, block_size=16, n_layer=1, n_head=2, n_embd=16, value_head=True)
    model, idx = GPT(config, generator=torch.Generator().manual_seed(0)), random_tokens(3, 6)
    values = model.values(idx)
    assert values.shape == (3, 6) and torch.count_nonzero(values) == 0
    logits, values2 = model.logits_and_values(idx)
    assert logits.shape == (3, 6, 11) and values2.shape == (3, 6)
    (values - 1.0).pow(2).mean().backward()
    assert model.value_head.weight.grad.abs().sum() > 0 or model.value_head.bias.grad.abs().sum() > 0
    with pytest.raises(RuntimeError, match="value head"):
        make_model().values(idx)


def test_log_probs_of_by_hand():
    model, idx = make_model(), random_tokens(2, 7, seed=3)
    for temperature in (1.0, 0.6):
        got = log_probs_of(model, idx, temperature)
        with torch.no_grad():
            logits = reference_logits(model, idx)
        for b in range(2):
            for t in range(6):
                z = logits[b, t] / temperature
                expected = z[idx[b, t + 1]] - torch.logsumexp(z, 0)
                assert got[b, t].item() == pytest.approx(expected.item(), abs=1e-5)


def test_top_k_log_probs_by_hand():
    logits = torch.tensor([1.0, 2.0, 3.0, 4.0])
    log_p = next_token_log_probs(logits, temperature=2.0, top_k=2)
    norm = math.log(math.exp(1.5) + math.exp(2.0))
    assert log_p[0] == -math.inf and log_p[1] == -math.inf
    assert log_p[2].item() == pytest.approx(1.5 - norm) and log_p[3].item() == pytest.approx(2.0 - norm)
    with pytest.raises(ValueError, match="temperature"):
        next_token_log_probs(logits, temperature=0.0)


def test_completion_log_probs_by_chain_rule():
    model, prompt = make_model(), [0, 4, 5]
    completions = [[6], [7, 8, 1], [3, 3]]
    got = completion_log_probs(model, prompt, completions, temperature=0.8)
    with torch.no_grad():
        for n, completion in enumerate(completions):
            sequence = torch.tensor([prompt + completion])
            logits = reference_logits(model, sequence)[0] / 0.8  # (L, V)
            expected = sum(torch.log_softmax(logits[len(prompt) - 1 + t], 0)[c] for t, c in enumerate(completion))
            assert got[n].item() == pytest.approx(expected.item(), abs=1e-5)
