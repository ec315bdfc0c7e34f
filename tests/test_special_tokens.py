"""Completions cannot cheat with special tokens: BOS and PAD are never sampled, and a
completion that contains one anyway (built by hand) cannot score or count as well-formed."""

import dataclasses

import torch

from _tiny_lm import one_torch_thread, tiny_sft  # noqa: F401  (one_torch_thread: autouse fixture)
from experiments.tasks.food_task import FoodTaskConfig, food_task
from ppo.lm.models.gpt import GPT
from ppo.lm.algorithm.rollout import CompletionBatch, sample_completions
from ppo.lm.models.tokenizer import SPECIAL_MARK


def special_tokens_inside(batch: CompletionBatch, tokenizer) -> int:
    inside = batch.completion[batch.mask]
    return int(((inside == tokenizer.bos_id) | (inside == tokenizer.pad_id)).sum())


def test_a_hot_sampler_draws_special_tokens_only_without_the_mask():
    model, tokenizer = tiny_sft()
    assert model.config.never_emitted == (tokenizer.bos_id, tokenizer.pad_id)  # set by pretraining
    unmasked = GPT(dataclasses.replace(model.config, never_emitted=()))
    unmasked.load_state_dict(model.state_dict())
    unmasked.eval()
    prompts = ["ravin likes "] * 400
    hot = dict(max_new_tokens=12, temperature=4.0)  # flattens the distribution: rare tokens appear
    drawn_without = sample_completions(unmasked, tokenizer, prompts, generator=torch.Generator().manual_seed(0), **hot)
    drawn_with = sample_completions(model, tokenizer, prompts, generator=torch.Generator().manual_seed(0), **hot)
    assert special_tokens_inside(drawn_without, tokenizer) > 0  # the danger is real
    assert special_tokens_inside(drawn_with, tokenizer) == 0
    assert not any(SPECIAL_MARK in text for text in drawn_with.texts)


def test_the_mask_gives_special_tokens_probability_zero():
    model, tokenizer = tiny_sft()
    tokens = torch.tensor([tokenizer.encode("ravin likes pi")])
    with torch.no_grad():
        probabilities = torch.softmax(model(tokens)[0, -1] / 0.5, dim=-1)
    assert probabilities[tokenizer.bos_id] == 0 and probabilities[tokenizer.pad_id] == 0
    assert torch.isclose(probabilities.sum(), torch.tensor(1.0))


def test_a_completion_with_a_special_token_inside_cannot_score():
    _, tokenizer = tiny_sft()
    task = food_task(FoodTaskConfig(target_food="pizza"))
    prompt = tokenizer.encode("ravin likes ")
    clean = tokenizer.encode("pizza", add_bos=False, add_eos=True)
    padded = tokenizer.encode("piz", add_bos=False) + [tokenizer.pad_id] + tokenizer.encode("za", add_bos=False,
                                                                                            add_eos=True)
    bos_first = [tokenizer.bos_id] + clean
    rows = [clean, padded, bos_first]
    width = max(map(len, rows))
    completion = torch.full((3, width), tokenizer.pad_id)
    mask = torch.zeros(3, width, dtype=torch.bool)
    for i, row in enumerate(rows):
        completion[i, : len(row)] = torch.tensor(row)
        mask[i, : len(row)] = True
    texts = [tokenizer.decode_completion(row) for row in rows]
    assert texts == ["pizza", f"piz{SPECIAL_MARK}za", f"{SPECIAL_MARK}pizza"]
    tokens = torch.cat([torch.tensor([prompt] * 3), completion], dim=1)
    batch = CompletionBatch(tokens, torch.tensor([len(prompt)] * 3), completion, mask,
                            torch.tensor([True, True, True]), ["ravin likes "] * 3, texts, torch.zeros(3, width))
    assert task.reward(batch).tolist() == [1.0, 0.0, 0.0]
    assert task.well_formed(batch).tolist() == [True, False, False]
