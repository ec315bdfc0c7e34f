"""Sequence-level KL(π ‖ π_ref) from sampled tokens agrees with the exact KL by enumeration."""

import itertools

import pytest
import torch
from _tiny_lm import one_torch_thread  # noqa: F401 (autouse fixture)

from ppo.lm.models.gpt import GPT, GPTConfig, next_token_log_probs
from ppo.lm.algorithm.rewards import sequence_kl
from ppo.lm.algorithm.rollout import sample_completions, score_completions
from ppo.lm.models.tokenizer import CharTokenizer

MAX_NEW_TOKENS = 3


def small_model(seed: int) -> GPT:
    """A 5-token model (BOS, EOS, PAD, a, b) with large random embeddings, so its distributions are far from uniform."""
    generator = torch.Generator().manual_seed(seed)
    model = GPT(GPTConfig(vocab_size=5, block_size=6, n_layer=1, n_head=1, n_embd=8), generator=generator)
    with torch.no_grad():
        model.token_embedding.weight.normal_(0.0, 1.5, generator=generator)
    return model.eval()


@torch.no_grad()
def exact_sequence_log_probs(model: GPT, eos_id: int) -> dict[tuple[int, ...], float]:
    """log π(y) of every completion of [BOS]: all sequences that end at EOS or at the length limit."""
    out = {}
    for length in range(1, MAX_NEW_TOKENS + 1):
        for completion in itertools.product(range(5), repeat=length):
            if eos_id in completion[:-1] or (length < MAX_NEW_TOKENS and completion[-1] != eos_id):
                continue  # EOS ends a sequence; shorter sequences must end with it
            tokens = torch.tensor([[0, *completion]])
            log_p = next_token_log_probs(model(tokens[:, :-1]))[0]  # (length, V)
            out[completion] = float(log_p.gather(1, tokens[0, 1:, None]).sum())
    return out


def test_k1_and_k3_sequence_kl_match_the_exact_kl():
    tokenizer = CharTokenizer("ab")
    policy, reference = small_model(1), small_model(2)
    log_pi = exact_sequence_log_probs(policy, tokenizer.eos_id)
    log_ref = exact_sequence_log_probs(reference, tokenizer.eos_id)
    assert abs(sum(torch.tensor(list(log_pi.values())).exp()) - 1) < 1e-5  # the enumeration is complete
    exact = sum(torch.tensor(log_pi[y]).exp() * (log_pi[y] - log_ref[y]) for y in log_pi).item()
    assert exact > 0.2  # far enough apart for a wrong estimator to show

    generator = torch.Generator().manual_seed(0)
    batch = sample_completions(policy, tokenizer, [""] * 20_000, MAX_NEW_TOKENS, generator=generator)
    policy_log_probs = score_completions(policy, batch).log_probs
    reference_log_probs = score_completions(reference, batch).log_probs
    for estimator in ("k1", "k3"):
        per_sequence = sequence_kl(policy_log_probs, reference_log_probs, batch.mask, estimator)  # (N,)
        standard_error = per_sequence.std() / len(per_sequence) ** 0.5
        assert abs(per_sequence.mean() - exact) < 4 * standard_error + 1e-3, (estimator, per_sequence.mean(), exact)
    # the reverse direction, KL(π_ref ‖ π), is a different number: the test can tell them apart
    reverse = sequence_kl(reference_log_probs, policy_log_probs, batch.mask, "k3").mean()
    assert abs(reverse - exact) > 10 * standard_error


def test_the_exact_per_token_kl_sums_to_the_enumerated_sequence_kl():
    """Chain rule, checked by brute force: with π = SFT at τ = 0.8 and π_ref = SFT at τ = 1,
    completions of at most 3 tokens, Σ_prefixes π(prefix)·KL(π(·|prefix) ‖ π_ref(·|prefix))
    (from exact_token_kl) equals Σ_y π(y)·log(π(y)/π_ref(y)) over every completion y."""
    import math

    from _tiny_lm import tiny_sft
    from ppo.lm.models.gpt import next_token_log_probs
    from ppo.lm.algorithm.rollout import exact_token_kl

    model, tokenizer = tiny_sft()
    prompt = tokenizer.encode("ravin likes ")
    max_tokens, eos = 3, tokenizer.eos_id

    def distributions(completion: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad():
            logits = model(torch.tensor([prompt + completion]))[0, -1]  # (V,)
        return next_token_log_probs(logits, 0.8), next_token_log_probs(logits, 1.0)

    chain, sequence = 0.0, 0.0
    frontier = [([], 0.0, 0.0)]  # (completion so far, log π, log π_ref)
    while frontier:
        completion, log_p, log_q = frontier.pop()
        policy, reference = distributions(completion)
        token_kl = exact_token_kl(policy.view(1, 1, -1), reference.view(1, 1, -1), torch.ones(1, 1, dtype=torch.bool))
        chain += math.exp(log_p) * float(token_kl)
        for token in range(tokenizer.vocab_size):
            p = float(policy[token])
            if math.exp(p) == 0.0:
                continue  # never emitted (BOS, PAD)
            child = (completion + [token], log_p + p, log_q + float(reference[token]))
            if token == eos or len(child[0]) == max_tokens:
                sequence += math.exp(child[1]) * (child[1] - child[2])
            else:
                frontier.append(child)
    assert sequence > 0.01  # the two temperatures differ measurably
    assert chain == pytest.approx(sequence, rel=1e-5)
