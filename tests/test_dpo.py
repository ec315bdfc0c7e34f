"""DPO and IPO (ppo/lm/trainers/dpo.py): the losses and their gradients, the sequence log-probs, the optimum each
one reaches when minimised exactly, and training a tiny model on comparisons."""

import copy
import math

import pytest
import torch
from _tiny_lm import one_torch_thread, tiny_sft  # noqa: F401 (one_torch_thread is an autouse fixture)

from envs import corpus
from ppo.config import ConfigError
from ppo.lm.trainers.dpo import DPOConfig, dpo_loss, encode_preference_pairs, ipo_optimum, sequence_log_probs, train_dpo
from ppo.lm.models.gpt import completion_log_probs
from ppo.trainers.base import TrainingDiverged
from ppo.lm.algorithm.reward_model import encode_comparisons
from ppo.lm.algorithm.rollout import sample_completions

# ---------------------------------------------------------------- the losses


def test_dpo_and_ipo_losses_match_hand_worked_numbers():
    # h = (−1 − (−1.5)) − (−2 − (−1.5)) = 0.5 + 0.5 = 1
    inputs = [torch.tensor([x]) for x in (-1.0, -2.0, -1.5, -1.5)]
    # DPO, β = 0.25: −log σ(0.25) = log(1 + e^−0.25) = log 1.7788008 = 0.5759394
    assert float(dpo_loss(*inputs, beta=0.25)) == pytest.approx(0.5759394, abs=1e-6)
    # IPO, β = 0.25: (1 − 1/(2·0.25))² = (1 − 2)² = 1; β = 0.5: (1 − 1)² = 0
    assert float(dpo_loss(*inputs, beta=0.25, kind="ipo")) == pytest.approx(1.0, abs=1e-6)
    assert float(dpo_loss(*inputs, beta=0.5, kind="ipo")) == pytest.approx(0.0, abs=1e-6)
    # DPO, β = 0.5, and a second pair with h = −2 (the mean of both): (log(1 + e^−0.5) + log(1 + e^1)) / 2
    two = [torch.tensor([x, y]) for x, y in ((-1.0, -3.0), (-2.0, -1.0), (-1.5, -1.0), (-1.5, -1.0))]
    assert float(dpo_loss(*two, beta=0.5)) == pytest.approx((0.4740770 + 1.3132617) / 2, abs=1e-6)


@pytest.mark.parametrize("kind", ["dpo", "ipo"])
def test_loss_gradients_match_the_hand_derived_formulas(kind):
    """DPO: ∂/∂log π(y_w) = −β·σ(−βh)/B, ∂/∂log π(y_l) = +β·σ(−βh)/B (the reference's: the opposite signs);
    IPO: ±2(h − 1/(2β))/B."""
    generator = torch.Generator().manual_seed(0)
    beta = 0.7
    inputs = [(-3 * torch.rand(5, generator=generator, dtype=torch.float64)).requires_grad_() for _ in range(4)]
    policy_chosen, policy_rejected, reference_chosen, reference_rejected = inputs
    dpo_loss(*inputs, beta=beta, kind=kind).backward()
    with torch.no_grad():
        h = (policy_chosen - reference_chosen) - (policy_rejected - reference_rejected)
        if kind == "dpo":
            towards_chosen = -beta * torch.sigmoid(-beta * h) / 5
        else:
            towards_chosen = 2 * (h - 1 / (2 * beta)) / 5
    torch.testing.assert_close(policy_chosen.grad, towards_chosen)
    torch.testing.assert_close(policy_rejected.grad, -towards_chosen)
    torch.testing.assert_close(reference_chosen.grad, -towards_chosen)
    torch.testing.assert_close(reference_rejected.grad, towards_chosen)


@pytest.mark.parametrize("change, message", [
    ({"beta": 0.0}, "beta = 0.0 must be a finite number > 0"),
    ({"loss": "kto"}, "loss = 'kto' is not one of dpo, ipo"),
    ({"epochs": 0}, "epochs = 0 must be a positive integer"),
    ({"batch_size": 2.5}, "batch_size = 2.5 has the wrong type"),
    ({"grad_clip": -1.0}, "grad_clip = -1.0 must be a finite number > 0"),
    ({"learning_rate": float("nan")}, "learning_rate = nan must be a finite number > 0"),
])
def test_config_refuses_impossible_values_in_one_line(change, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")) as error:
        DPOConfig(**change).validate()
    assert "\n" not in str(error.value)


# ---------------------------------------------------------------- the optimum, exactly

REFERENCE = torch.tensor([0.4, 0.3, 0.2, 0.1], dtype=torch.float64)  # π_ref over four answers
REWARD = torch.tensor([1.0, 0.2, -0.5, 0.7], dtype=torch.float64)  # r: P(a ≻ b) = σ(r_a − r_b)
BETA = 0.5


def expected_loss(logits: torch.Tensor, kind: str) -> torch.Tensor:
    """E over a, b ~ π_ref and the Bradley–Terry label of the loss of a tabular policy softmax(logits)."""
    log_policy, log_reference = torch.log_softmax(logits, dim=0), REFERENCE.log()
    total = logits.new_zeros(())
    for a in range(len(REFERENCE)):
        for b in range(len(REFERENCE)):
            a_wins = torch.sigmoid(REWARD[a] - REWARD[b])

            def loss(w: int, l: int) -> torch.Tensor:  # y_w = answer w, y_l = answer l
                return dpo_loss(log_policy[w : w + 1], log_policy[l : l + 1], log_reference[w : w + 1],
                                log_reference[l : l + 1], BETA, kind)

            total = total + REFERENCE[a] * REFERENCE[b] * (a_wins * loss(a, b) + (1 - a_wins) * loss(b, a))
    return total


def minimise_expected_loss(kind: str) -> torch.Tensor:
    logits = REFERENCE.log().clone().requires_grad_()
    optimizer = torch.optim.LBFGS([logits], max_iter=500, tolerance_grad=1e-13, tolerance_change=1e-15,
                                  line_search_fn="strong_wolfe")

    def closure():
        optimizer.zero_grad()
        loss = expected_loss(logits, kind)
        loss.backward()
        return loss

    optimizer.step(closure)
    return torch.softmax(logits.detach(), dim=0)


def closed_form_ipo_optimum() -> torch.Tensor:
    """π ∝ π_ref·exp(p(a ≻ π_ref)/β), p(a ≻ π_ref) = Σ_b π_ref(b)·σ(r_a − r_b): where the expected IPO loss's
    gradient in log π(a) vanishes (Azar et al. 2023, Prop. 4, for pairs drawn from π_ref)."""
    win_rate = (torch.sigmoid(REWARD[:, None] - REWARD[None, :]) * REFERENCE[None, :]).sum(dim=1)
    tilted = REFERENCE * torch.exp(win_rate / BETA)
    return tilted / tilted.sum()


def test_the_exact_minimiser_of_the_expected_dpo_loss_is_the_kl_regularised_optimum():
    tilted = REFERENCE * torch.exp(REWARD / BETA)
    torch.testing.assert_close(minimise_expected_loss("dpo"), tilted / tilted.sum(), atol=1e-4, rtol=0)


def test_the_exact_minimiser_of_the_expected_ipo_loss_is_the_win_rate_tilt_not_pi_star():
    minimiser = minimise_expected_loss("ipo")
    torch.testing.assert_close(minimiser, closed_form_ipo_optimum(), atol=1e-4, rtol=0)
    tilted = REFERENCE * torch.exp(REWARD / BETA)
    assert (minimiser - tilted / tilted.sum()).abs().max() > 0.05  # a different optimum, told apart
    answers = "abcd"
    library = ipo_optimum(dict(zip(answers, REFERENCE.tolist())),
                          lambda g, h: float(torch.sigmoid(REWARD[answers.index(g)] - REWARD[answers.index(h)])), BETA)
    torch.testing.assert_close(torch.tensor([library[g] for g in answers], dtype=torch.float64), minimiser,
                               atol=1e-4, rtol=0)


def test_ipo_optimum_draws_the_pairs_from_the_given_distribution():
    """Pairs from μ = (1/2, 1/2, 0) over three answers, a ≻ b always: p(a ≻ μ) = 3/4, p(b ≻ μ) = 1/4, and
    p(c ≻ μ) = 1/2 for c, tied with both; at β = 1, π ∝ π_ref · (e^0.75, e^0.25, e^0.5)."""
    reference = {"a": 0.2, "b": 0.3, "c": 0.5}
    wins = {("a", "b"): 1.0, ("b", "a"): 0.0}
    optimum = ipo_optimum(reference, lambda g, h: wins.get((g, h), 0.5), beta=1.0,
                          pair_distribution={"a": 2.0, "b": 2.0, "c": 0.0})
    tilted = {"a": 0.2 * math.exp(0.75), "b": 0.3 * math.exp(0.25), "c": 0.5 * math.exp(0.5)}
    assert optimum == pytest.approx({g: value / sum(tilted.values()) for g, value in tilted.items()}, abs=1e-12)


# ---------------------------------------------------------------- the sequence log-probabilities

PROMPT = corpus.prompt("ravin", "likes")


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sequence_log_probs_match_a_product_of_softmax_probabilities_one_position_at_a_time(temperature):
    model, tokenizer = tiny_sft()
    pairs = [(PROMPT, "pizza", "ice cream"), (corpus.prompt("sam", "hates"), "soda", "tacos")]
    encoded = encode_preference_pairs(tokenizer, pairs)
    tokens, mask, last = encoded.stacked()  # rows of different prompts, lengths and padding
    with torch.no_grad():
        fast = sequence_log_probs(model, tokens, mask, temperature)  # (4,)
        slow = []
        for row, (start, end) in enumerate(zip(encoded.prompt_lengths.repeat(2).tolist(), (last + 1).tolist())):
            probability = 1.0
            for position in range(start, end):  # every completion token, EOS included
                logits = model(tokens[row : row + 1, :position])[0, -1].double()  # the prefix alone
                probability *= float(torch.softmax(logits / temperature, dim=0)[tokens[row, position]])
            slow.append(math.log(probability))
    # float32 log-softmax summed over ≤ 10 tokens against float64 products: a few 1e-7 apart
    torch.testing.assert_close(fast.double(), torch.tensor(slow, dtype=torch.float64), atol=1e-5, rtol=0)


def test_the_completion_mask_covers_exactly_the_completion_and_its_eos():
    _, tokenizer = tiny_sft()
    encoded = encode_preference_pairs(tokenizer, [(PROMPT, "salad", "ice cream")])
    for tokens, mask in ((encoded.chosen, encoded.chosen_mask), (encoded.rejected, encoded.rejected_mask)):
        masked = tokens[0][mask[0]].tolist()
        assert masked[-1] == tokenizer.eos_id and tokenizer.decode_completion(masked[:-1]) in ("salad", "ice cream")
        assert int(mask[0, : encoded.prompt_lengths[0]].sum()) == 0


# ---------------------------------------------------------------- training a tiny model

TARGET = "pizza"


def rule_comparisons(model, tokenizer, num_pairs: int, seed: int) -> list[tuple[str, str, str]]:
    """Pairs of the model's own samples in which exactly one is TARGET then EOS: that one is preferred."""
    batch = sample_completions(model, tokenizer, [PROMPT] * (2 * num_pairs), max_new_tokens=12,
                               generator=torch.Generator().manual_seed(seed))
    pairs = []
    for i in range(num_pairs):
        (a, b), ended = batch.texts[2 * i : 2 * i + 2], batch.ended_with_eos[2 * i : 2 * i + 2]
        if bool(ended.all()) and (a == TARGET) != (b == TARGET):
            pairs.append((PROMPT, a, b) if a == TARGET else (PROMPT, b, a))
    return pairs


def target_probability(model, tokenizer) -> float:
    with torch.no_grad():
        ids = [tokenizer.encode(TARGET, add_bos=False, add_eos=True)]
        return float(completion_log_probs(model, tokenizer.encode(PROMPT), ids).exp())


@pytest.mark.parametrize("loss", ["dpo", "ipo"])
def test_training_on_comparisons_raises_the_preferred_answer_and_repeats_bit_for_bit(loss):
    sft, tokenizer = tiny_sft()
    comparisons = encode_preference_pairs(tokenizer, rule_comparisons(sft, tokenizer, num_pairs=300, seed=0))
    assert len(comparisons) >= 30
    config = DPOConfig(beta=0.5, loss=loss, learning_rate=1e-3, epochs=3, batch_size=16, seed=4)
    reference_before = copy.deepcopy(sft.state_dict())
    policies = [copy.deepcopy(sft) for _ in range(2)]
    histories = [train_dpo(policy, sft, comparisons, config) for policy in policies]
    before, after = target_probability(sft, tokenizer), target_probability(policies[0], tokenizer)
    assert after > 1.5 * before, (before, after)
    assert histories[0][-1]["reward_accuracy"] > 0.9 and histories[0][-1]["reward_margin"] > 0
    assert histories[0][-1]["loss"] < histories[0][0]["loss"]
    # same machine, same seed, same sequence of kernels: the two runs are identical
    assert histories[0] == histories[1]
    for first, second in zip(policies[0].state_dict().values(), policies[1].state_dict().values()):
        assert torch.equal(first, second)
    assert all(torch.equal(p, q) for p, q in zip(sft.state_dict().values(), reference_before.values()))  # frozen


def test_a_diverging_dpo_run_stops_in_one_line_naming_its_epoch():
    sft, tokenizer = tiny_sft()
    comparisons = encode_preference_pairs(tokenizer, rule_comparisons(sft, tokenizer, num_pairs=100, seed=2))
    with pytest.raises(TrainingDiverged, match=r"^epoch 1: loss = nan; training stopped after 0 finished epochs "
                                               r"\(try a smaller learning rate\)$"):
        train_dpo(copy.deepcopy(sft), sft, comparisons, DPOConfig(learning_rate=1e20, epochs=2, batch_size=4))


def test_a_different_seed_visits_the_comparisons_in_another_order():
    sft, tokenizer = tiny_sft()
    comparisons = encode_preference_pairs(tokenizer, rule_comparisons(sft, tokenizer, num_pairs=200, seed=1))
    weights = []
    for seed in (1, 2):
        policy = copy.deepcopy(sft)
        train_dpo(policy, sft, comparisons, DPOConfig(epochs=1, batch_size=8, seed=seed))
        weights.append(policy.token_embedding.weight.detach().clone())
    assert not torch.equal(*weights)


def test_comparisons_without_completion_boundaries_are_refused():
    sft, tokenizer = tiny_sft()
    plain = encode_comparisons(tokenizer, [(PROMPT, "pizza", "soda")])
    with pytest.raises(TypeError, match="train_dpo needs PreferencePairs"):
        train_dpo(copy.deepcopy(sft), sft, plain, DPOConfig())
    none = encode_preference_pairs(tokenizer, [(PROMPT, "pizza", "soda")])
    none = type(none)(*(t[:0] for t in (none.chosen, none.chosen_last, none.rejected, none.rejected_last,
                                        none.prompt_lengths)))
    with pytest.raises(ValueError, match="no comparisons to train on"):
        train_dpo(copy.deepcopy(sft), sft, none, DPOConfig())
