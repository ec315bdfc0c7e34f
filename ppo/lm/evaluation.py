"""Measure a fine-tuned policy on fresh samples: target rate, well-formedness, KL to the reference.

For N completions y ~ π (at temperature τ, 1 by default: the rate the model really has):

    target rate       = (1/N) Σ 1{y is the target food followed by EOS}
    well-formed rate  = (1/N) Σ 1{y is some food followed by EOS}
    KL(π ‖ π_ref)     ≈ (1/N) Σ_y Σ_t KL_t(y)      with k1 (unbiased) and k3 (never negative)
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field

import torch

from envs import corpus
from envs.token_task import is_well_formed
from ppo.lm.model import GPT
from ppo.lm.rewards import sequence_kl
from ppo.lm.rollout import repeat_prompts, sample_completions, score_completions
from ppo.lm.tokenizer import CharTokenizer


@dataclass
class PolicyEvaluation:
    num_samples: int
    temperature: float
    target_food: str
    target_rate: float
    well_formed_rate: float
    eos_rate: float
    kl_k1: float  # mean sequence KL(π ‖ π_ref), k1 estimate
    kl_k1_stderr: float
    kl_k3: float  # the same with k3
    food_rates: dict[str, float] = field(default_factory=dict)  # share of each food, plus "<malformed>"
    examples: list[str] = field(default_factory=list)  # the most frequent completions with their counts

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        return (f"{self.target_food} rate {self.target_rate:.1%}, well-formed {self.well_formed_rate:.1%}, "
                f"KL to SFT {self.kl_k1:.2f} ± {self.kl_k1_stderr:.2f} nats (k1; k3 {self.kl_k3:.2f}) "
                f"on {self.num_samples} samples at temperature {self.temperature:g}")


@torch.no_grad()
def evaluate_policy(
    policy: GPT, reference: GPT, tokenizer: CharTokenizer, prompts: list[str], target_food: str,
    num_samples: int = 1000, temperature: float = 1.0, max_new_tokens: int = 16,
    generator: torch.Generator | None = None, chunk_size: int = 500,
) -> PolicyEvaluation:
    """Sample `num_samples` completions (prompts cycled) and measure them (see the module docstring)."""
    was_training = policy.training
    policy.eval()
    texts, ended, kl_k1, kl_k3 = [], [], [], []
    all_prompts = repeat_prompts(prompts, num_samples)
    for start in range(0, num_samples, chunk_size):
        batch = sample_completions(policy, tokenizer, all_prompts[start : start + chunk_size], max_new_tokens,
                                   temperature, generator)
        policy_log_probs = score_completions(policy, batch, temperature).log_probs  # (b, T)
        reference_log_probs = score_completions(reference, batch, temperature).log_probs  # (b, T)
        kl_k1.append(sequence_kl(policy_log_probs, reference_log_probs, batch.mask, "k1"))
        kl_k3.append(sequence_kl(policy_log_probs, reference_log_probs, batch.mask, "k3"))
        texts += batch.texts
        ended += batch.ended_with_eos.tolist()
    policy.train(was_training)

    k1 = torch.cat(kl_k1)  # (N,)
    well_formed = [is_well_formed(text, eos) for text, eos in zip(texts, ended)]
    foods = Counter(text if ok else "<malformed>" for text, ok in zip(texts, well_formed))
    counts = Counter(text + ("" if eos else "…") for text, eos in zip(texts, ended))
    return PolicyEvaluation(
        num_samples=num_samples,
        temperature=temperature,
        target_food=target_food,
        target_rate=sum(ok and text == target_food for text, ok in zip(texts, well_formed)) / num_samples,
        well_formed_rate=sum(well_formed) / num_samples,
        eos_rate=sum(ended) / num_samples,
        kl_k1=float(k1.mean()),
        kl_k1_stderr=float(k1.std() / math.sqrt(num_samples)) if num_samples > 1 else float("nan"),
        kl_k3=float(torch.cat(kl_k3).mean()),
        food_rates={food: foods[food] / num_samples for food in (*corpus.FOODS, "<malformed>")},
        examples=[f"{text!r} ×{count}" for text, count in counts.most_common(8)],
    )
