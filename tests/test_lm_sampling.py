import pytest
import torch

from ppo.lm.models.gpt import GPT, GPTConfig, log_probs_of
from ppo.lm.models.sampling import sample, sample_naive


CONFIG = GPTConfig(vocab_size=12, block_size=24, n_layer=2, n_head=2, n_embd=16)
BOS, EOS, PAD = 0, 1, 2
PROMPT = [BOS, 5, 6, 7]


def make_model(seed=0):
    return GPT(CONFIG, generator=torch.Generator().manual_seed(seed)).eval()


def draw(sampler=sample, seed=0, **kwargs):
    kwargs = {"num_samples": 64, "temperature": 2.0, **kwargs}  # hot: EOS comes often but not always
    return sampler(make_model(), PROMPT, eos_id=EOS, pad_id=PAD, generator=torch.Generator().manual_seed(seed),
                   **kwargs)


def first_eos(row: torch.Tensor) -> int | None:
    hits = (row == EOS).nonzero()
    return int(hits[0]) if len(hits) else None


@pytest.mark.parametrize("temperature, top_k", [(1.0, None), (0.7, None), (2.0, None), (1.3, 4)])
def test_sampler_log_probs_equal_a_fresh_forward_pass(temperature, top_k):
    batch = draw(temperature=temperature, top_k=top_k)
    P = batch.prompt_length
    with torch.no_grad():
        recomputed = log_probs_of(make_model(), batch.tokens, temperature, top_k)[:, P - 1 :]  # (B, T)
    assert batch.log_probs.shape == batch.mask.shape == batch.completion.shape
    torch.testing.assert_close(batch.log_probs[batch.mask], recomputed[batch.mask], atol=1e-5, rtol=1e-5)
    assert torch.all(batch.log_probs[~batch.mask] == 0)
    assert torch.isfinite(batch.log_probs).all()


def test_mask_covers_exactly_up_to_and_including_eos():
    batch = draw(max_new_tokens=12)
    T = batch.completion.size(1)
    endings = [first_eos(row) for row in batch.completion]
    assert any(e is None for e in endings) and any(e is not None for e in endings)  # both kinds occur
    for row, mask, ended, e in zip(batch.completion, batch.mask, batch.ended_with_eos, endings):
        if e is None:
            assert not ended and mask.all()
        else:
            assert ended
            assert mask.tolist() == [True] * (e + 1) + [False] * (T - e - 1)
            assert (row[e + 1 :] == PAD).all()  # finished rows emit PAD


def test_loop_stops_when_every_row_has_ended():
    model = make_model()
    with torch.no_grad():  # make EOS near-certain: the final features become e_0 and EOS's embedding is 50 e_0
        model.ln_f.weight.zero_()
        model.ln_f.bias.zero_()
        model.ln_f.bias[0] = 1.0
        model.token_embedding.weight[EOS, 0] = 50.0
    batch = sample(model, PROMPT, eos_id=EOS, pad_id=PAD, num_samples=8, max_new_tokens=10,
                   generator=torch.Generator().manual_seed(0))
    assert batch.completion.tolist() == [[EOS]] * 8
    assert batch.mask.all() and batch.ended_with_eos.all()
    assert batch.tokens.tolist() == [PROMPT + [EOS]] * 8


def test_cached_and_naive_samplers_agree():
    cached, naive = draw(sample, seed=3), draw(sample_naive, seed=3)
    assert torch.equal(cached.tokens, naive.tokens)
    assert torch.equal(cached.mask, naive.mask)
    torch.testing.assert_close(cached.log_probs, naive.log_probs, atol=1e-5, rtol=1e-5)


def test_same_seed_same_samples_and_different_seed_different():
    assert torch.equal(draw(seed=1).tokens, draw(seed=1).tokens)
    assert not torch.equal(draw(seed=1).tokens, draw(seed=2).tokens)


def test_without_eos_every_row_runs_to_max_new_tokens():
    batch = sample(make_model(), PROMPT, eos_id=None, pad_id=PAD, num_samples=5, max_new_tokens=7)
    assert batch.completion.shape == (5, 7) and batch.mask.all() and not batch.ended_with_eos.any()


def test_batch_of_different_prompts():
    prompts = torch.tensor([[BOS, 5, 6], [BOS, 7, 8], [BOS, 9, 9]])
    batch = sample(make_model(), prompts, eos_id=EOS, pad_id=PAD, max_new_tokens=5,
                   generator=torch.Generator().manual_seed(0))
    assert torch.equal(batch.tokens[:, :3], prompts) and batch.prompt_length == 3


def test_too_long_generation_is_rejected():
    with pytest.raises(ValueError, match="max_new_tokens"):
        draw(max_new_tokens=CONFIG.block_size)


def test_returned_tensors_can_enter_autograd():
    """PPO recomputes log-probs of sampled tokens with gradients; inference-mode tensors would refuse."""
    model = make_model()
    batch = draw(num_samples=4, max_new_tokens=5)
    new_log_probs = log_probs_of(model, batch.tokens)[:, batch.prompt_length - 1 :]  # (B, T)
    ratio = torch.exp(new_log_probs - batch.log_probs)[batch.mask]
    ratio.mean().backward()
    assert model.token_embedding.weight.grad is not None


def test_benchmark_script_runs(capsys):
    from experiments.benchmarks import sampling as benchmark_sampling

    assert benchmark_sampling.main(["--batch-sizes", "2", "--repeats", "1", "--new-tokens", "3"]) == 0
    assert "speed-up" in capsys.readouterr().out
