"""Each KL placement's expected gradient, every completion of a tiny model enumerated, against −∇ of a divergence.

The reference gradients here are computed independently of the library: one forward pass
per completion, log π(y) summed by hand, autograd on Σ_y π(y)·log(π(y)/π_ref(y)). The
models are in float64 so that the exact identities hold to ~1e-10, not float32 noise.
"""

import itertools

import pytest
import torch
from _tiny_lm import one_torch_thread  # noqa: F401 (autouse fixture)

from ppo.lm.exact.kl_gradients import CHECKED_PLACEMENTS, enumerated_batch, placement_gradients
from ppo.lm.models.gpt import GPT, GPTConfig, next_token_log_probs

VOCAB, EOS, PAD, MAX_NEW_TOKENS = 7, 1, 2, 3  # BOS, EOS, PAD and four letters; 259 completions


def small_model(seed: int) -> GPT:
    generator = torch.Generator().manual_seed(seed)
    model = GPT(GPTConfig(vocab_size=VOCAB, block_size=6, n_layer=1, n_head=2, n_embd=16), generator=generator)
    return model.eval().double()


def flat(gradients, parameters) -> torch.Tensor:
    return torch.cat([(g if g is not None else torch.zeros_like(p)).reshape(-1) for g, p in zip(gradients, parameters)])


def exact_forward_kl_gradient(policy: GPT, reference: GPT, temperature: float) -> torch.Tensor:
    """∇_θ KL(π ‖ π_ref) = ∇ Σ_y π(y)·(log π(y) − log π_ref(y)), one completion at a time."""
    total = torch.zeros((), dtype=torch.float64)
    for length in range(1, MAX_NEW_TOKENS + 1):
        for completion in itertools.product(range(VOCAB), repeat=length):
            if EOS in completion[:-1] or (length < MAX_NEW_TOKENS and completion[-1] != EOS):
                continue
            tokens = torch.tensor([[0, *completion]])
            chosen = tokens[0, 1:, None]

            def log_prob(model):
                return next_token_log_probs(model(tokens[:, :-1]), temperature)[0].gather(1, chosen).sum()

            log_p = log_prob(policy)
            with torch.no_grad():
                log_q = log_prob(reference)
            total = total + log_p.exp() * (log_p - log_q)
    parameters = list(policy.parameters())
    return flat(torch.autograd.grad(total, parameters, allow_unused=True), parameters)


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(torch.nn.functional.cosine_similarity(a, b, dim=0))


@pytest.mark.parametrize("seeds, temperature", [((1, 2), 1.0), ((3, 4), 1.0), ((5, 6), 0.7)])
def test_offered_placements_follow_the_gradient_of_the_divergence_they_name(seeds, temperature):
    policy, reference = small_model(seeds[0]), small_model(seeds[1])
    batch = enumerated_batch([0], VOCAB, EOS, PAD, MAX_NEW_TOKENS)
    exact, results = placement_gradients(policy, reference, batch, temperature)
    forward = exact_forward_kl_gradient(policy, reference, temperature)
    # the library's enumeration agrees with the one-completion-at-a-time sum above
    torch.testing.assert_close(exact["KL(π‖π_ref)"], forward, rtol=1e-8, atol=1e-12)
    for name in ("reward-k1", "loss-full"):  # unbiased for ∇KL(π ‖ π_ref): equal, not only parallel
        gradient = results[name].gradient
        assert cosine(gradient, forward) >= 0.999, name
        assert float((gradient - forward).norm() / forward.norm()) < 1e-6, name
    # loss-k3: the reverse KL at each state the policy visits, visits held fixed
    state_reverse = exact["state reverse KL"]
    assert cosine(results["loss-k3"].gradient, state_reverse) >= 0.999
    assert float((results["loss-k3"].gradient - state_reverse).norm() / state_reverse.norm()) < 1e-6
    # ... which is a different direction from the objective's KL(π ‖ π_ref)
    assert cosine(results["loss-k3"].gradient, forward) < 0.999


def test_k3_in_a_detached_reward_does_not_follow_the_kl_gradient():
    """At seeds (1, 2) k3 in the reward points away from ∇KL(π ‖ π_ref): cosine −0.42, a tenth of its norm."""
    policy, reference = small_model(1), small_model(2)
    _, results = placement_gradients(policy, reference, enumerated_batch([0], VOCAB, EOS, PAD, MAX_NEW_TOKENS))
    forward = results["reward-k1"].gradient
    assert cosine(results["k3 in the reward (refused)"].gradient, forward) < 0.0
    # the exact per-state KL alone in the reward steers only which states are visited: it misses the decision
    assert results["exact KL in the reward alone (refused)"].norm_ratio < 0.1
    assert cosine(results["exact KL in the reward alone (refused)"].gradient, forward) < 0.5
    # and k1 differentiated in the loss has expected gradient E_π[∇log π] = 0
    assert results["k1 in the loss (not offered)"].norm_ratio < 1e-6
    assert set(CHECKED_PLACEMENTS) >= {"reward-k1", "loss-full", "loss-k3"}


def test_either_half_of_loss_full_alone_is_wrong():
    """Seeds (3, 4): the exact KL in the loss alone misses E[Σ_t KL_t·∇log P(s_t)], the reward half alone the rest."""
    policy, reference = small_model(3), small_model(4)
    _, results = placement_gradients(policy, reference, enumerated_batch([0], VOCAB, EOS, PAD, MAX_NEW_TOKENS))
    forward = results["reward-k1"].gradient
    for name in ("exact KL in the loss alone", "exact KL in the reward alone (refused)"):
        assert float((results[name].gradient - forward).norm() / forward.norm()) > 0.02, name  # measured 0.049, 1.005
    torch.testing.assert_close(results["exact KL in the loss alone"].gradient
                               + results["exact KL in the reward alone (refused)"].gradient, forward)
