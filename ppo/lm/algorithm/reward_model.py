"""A learned reward model r_φ(x, y), fitted to pairwise preferences with the Bradley–Terry loss.

The model is the tiny transformer with a scalar head, read at the last real token of
prompt x + completion y (the EOS token, which has seen the whole text). It starts from
the SFT weights with the head at zero. Given comparisons (x, y_w, y_l) in which y_w was
preferred, the Bradley–Terry model says P(y_w ≻ y_l) = σ(r_φ(x, y_w) − r_φ(x, y_l)), and
training minimises its negative log-likelihood

    L(φ) = −E_(x, y_w, y_l) [ log σ( r_φ(x, y_w) − r_φ(x, y_l) ) ].

Only differences of r_φ are identified, so after training the score is shifted and scaled
to mean 0 and standard deviation 1 on the SFT model's own completions (as in
`lm-human-preferences`): a β tuned for one reward model then means the same for another.
"""

from __future__ import annotations

import dataclasses
import random

import torch
import torch.nn.functional as F
from torch import nn

from ppo.lm.models.gpt import GPT
from ppo.lm.algorithm.rollout import CompletionBatch
from ppo.lm.models.tokenizer import CharTokenizer


class RewardModel(nn.Module):
    """r_φ(x, y) = scale · (head(h_EOS) − offset), h_EOS the trunk's features at the last real token."""

    def __init__(self, trunk: GPT):
        super().__init__()
        if trunk.value_head is None:
            raise ValueError("the reward model's GPT needs value_head=True")
        self.trunk = trunk
        self.register_buffer("offset", torch.tensor(0.0))
        self.register_buffer("scale", torch.tensor(1.0))

    @classmethod
    def from_sft(cls, sft: GPT) -> RewardModel:
        """The SFT weights, dropout 0, and a zero-initialised scalar head."""
        trunk = GPT(dataclasses.replace(sft.config, value_head=True, dropout=0.0))
        trunk.load_state_dict({k: v for k, v in sft.state_dict().items() if not k.startswith("value_head.")},
                              strict=False)
        return cls(trunk)

    def raw_scores(self, tokens: torch.Tensor, last_index: torch.Tensor) -> torch.Tensor:
        """Head output at position last_index of each row of tokens (B, L), before normalisation. (B,)."""
        values = self.trunk.values(tokens)  # (B, L)
        return values.gather(1, last_index.unsqueeze(1)).squeeze(1)

    def forward(self, tokens: torch.Tensor, last_index: torch.Tensor) -> torch.Tensor:
        return self.scale * (self.raw_scores(tokens, last_index) - self.offset)

    @torch.no_grad()
    def score_batch(self, batch: CompletionBatch) -> torch.Tensor:
        """Normalised r_φ of each sampled completion (read at its EOS, or its last token). (B,)."""
        last_index = batch.prompt_lengths + batch.mask.sum(dim=1) - 1  # (B,)
        return self(batch.tokens, last_index)

    @torch.no_grad()
    def normalize_on(self, batch: CompletionBatch) -> None:
        """Set offset and scale so that the scores of `batch` have mean 0 and std 1."""
        last_index = batch.prompt_lengths + batch.mask.sum(dim=1) - 1
        raw = self.raw_scores(batch.tokens, last_index)  # (B,)
        self.offset.fill_(raw.mean())
        self.scale.fill_(1.0 / raw.std().clamp(min=1e-6))


def encode_texts(tokenizer: CharTokenizer, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    """BOS + text + EOS for each text, right-padded: (tokens (N, L), index of each EOS (N,))."""
    encoded = [tokenizer.encode(text, add_eos=True) for text in texts]
    tokens = torch.full((len(encoded), max(map(len, encoded))), tokenizer.pad_id, dtype=torch.long)
    for row, ids in enumerate(encoded):
        tokens[row, : len(ids)] = torch.tensor(ids)
    return tokens, torch.tensor([len(ids) - 1 for ids in encoded])


@dataclasses.dataclass
class EncodedComparisons:
    chosen: torch.Tensor  # (N, L) prompt + preferred completion + EOS
    chosen_last: torch.Tensor  # (N,)
    rejected: torch.Tensor  # (N, L') prompt + other completion + EOS
    rejected_last: torch.Tensor  # (N,)

    def __len__(self) -> int:
        return self.chosen.size(0)


def encode_comparisons(tokenizer: CharTokenizer, pairs: list[tuple[str, str, str]]) -> EncodedComparisons:
    """(prompt, chosen, rejected) triples -> token tensors for the reward model."""
    chosen, chosen_last = encode_texts(tokenizer, [prompt + good for prompt, good, _ in pairs])
    rejected, rejected_last = encode_texts(tokenizer, [prompt + bad for prompt, _, bad in pairs])
    return EncodedComparisons(chosen, chosen_last, rejected, rejected_last)


def bradley_terry_loss(chosen_scores: torch.Tensor, rejected_scores: torch.Tensor) -> torch.Tensor:
    """−mean log σ(r(y_w) − r(y_l)), written as softplus(−Δ) for numerical safety."""
    return F.softplus(-(chosen_scores - rejected_scores)).mean()


@torch.no_grad()
def pairwise_accuracy(model: RewardModel, comparisons: EncodedComparisons) -> float:
    """Share of comparisons in which r(y_w) > r(y_l)."""
    chosen = model.raw_scores(comparisons.chosen, comparisons.chosen_last)
    rejected = model.raw_scores(comparisons.rejected, comparisons.rejected_last)
    return float((chosen > rejected).float().mean())


def train_reward_model(
    sft: GPT, tokenizer: CharTokenizer, pairs: list[tuple[str, str, str]], steps: int = 400,
    learning_rate: float = 2e-3, batch_size: int = 64, seed: int = 0, head_learning_rate_factor: float = 10.0,
) -> tuple[RewardModel, list[float]]:
    """Fit r_φ (initialised from the SFT model) to the comparisons; returns (model in eval mode, losses).

    Adam with the learning rate decayed linearly to 0 (the loss plateaus, noisily, without
    it); the zero-initialised head learns `head_learning_rate_factor` times faster than the
    pretrained trunk, which only has to be adjusted.
    """
    model = RewardModel.from_sft(sft).train()
    data = encode_comparisons(tokenizer, pairs)
    head = list(model.trunk.value_head.parameters())
    trunk = [p for name, p in model.named_parameters() if not name.startswith("trunk.value_head.")]
    optimizer = torch.optim.Adam([{"params": trunk, "lr": learning_rate},
                                  {"params": head, "lr": learning_rate * head_learning_rate_factor}])
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 - step / steps)
    width = max(data.chosen.size(1), data.rejected.size(1))
    both = torch.cat([F.pad(data.chosen, (0, width - data.chosen.size(1)), value=tokenizer.pad_id),
                      F.pad(data.rejected, (0, width - data.rejected.size(1)), value=tokenizer.pad_id)])  # (2N, L)
    both_last = torch.cat([data.chosen_last, data.rejected_last])  # (2N,)
    rng = random.Random(seed)
    losses = []
    for _ in range(steps):
        rows = torch.tensor(rng.sample(range(len(data)), min(batch_size, len(data))))  # (b,)
        rows = torch.cat([rows, rows + len(data)])  # chosen then rejected, one forward pass
        chosen, rejected = model(both[rows], both_last[rows]).chunk(2)  # (b,), (b,)
        loss = bradley_terry_loss(chosen, rejected)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        losses.append(loss.item())
    return model.eval().requires_grad_(False), losses
