"""The learned reward model: Bradley–Terry on synthetic preferences generalises to held-out pairs."""

import torch
from _tiny_lm import one_torch_thread, tiny_sft  # noqa: F401 (one_torch_thread is an autouse fixture)

from envs.token_task import HEALTHINESS, preference_pairs, preferred
from ppo.lm.algorithm.reward_model import RewardModel, bradley_terry_loss, encode_comparisons, pairwise_accuracy, train_reward_model


def test_bradley_terry_loss_is_minus_log_sigmoid_of_the_margin():
    chosen, rejected = torch.tensor([2.0, 0.0]), torch.tensor([0.0, 1.0])
    expected = -(torch.sigmoid(torch.tensor(2.0)).log() + torch.sigmoid(torch.tensor(-1.0)).log()) / 2
    torch.testing.assert_close(bradley_terry_loss(chosen, rejected), expected)


def test_preference_rule_prefers_healthier_and_well_formed():
    assert preferred("salad", "donuts") == 0 and preferred("soda", "lettuce") == 1
    assert preferred("soda", "pizzza") == 0  # any food beats a malformed string
    assert preferred("pizza", "pizza") is None
    assert sorted(HEALTHINESS, key=HEALTHINESS.get)[0] == "soda"


def test_reward_model_reaches_high_pairwise_accuracy_on_heldout_pairs():
    model, tokenizer = tiny_sft()
    train = preference_pairs(3000, seed=0)
    heldout = encode_comparisons(tokenizer, preference_pairs(400, seed=1))  # other pairs, mostly unseen strings
    untrained = pairwise_accuracy(RewardModel.from_sft(model), heldout)
    reward_model, losses = train_reward_model(model, tokenizer, train, steps=200, seed=0)
    assert untrained < 0.6 and losses[-1] < losses[0]
    assert pairwise_accuracy(reward_model, heldout) > 0.9
