"""Measure a fine-tuned policy on fresh samples: score, the task's rates, KL to the reference.

For N completions y ~ π at temperature τ (prompts cycled):

    score             = (1/N) Σ score(y)      the task's reward, the missing-EOS penalty where EOS is missing
    <name>_rate       = (1/N) Σ 1{...}        the task's well-formedness and rates (ppo.lm.algorithm.task)
    KL(π ‖ π_ref)     ≈ (1/N) Σ_y Σ_t KL_t(y)      with k1 (unbiased) and k3 (never negative)
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass, field

import torch

from ppo.lm.models.gpt import GPT
from ppo.lm.algorithm.rewards import sequence_kl
from ppo.lm.algorithm.rollout import repeat_prompts, sample_completions, score_completions
from ppo.lm.algorithm.task import CompletionTask
from ppo.lm.models.tokenizer import CharTokenizer


@dataclass
class LMEvaluation:
    num_samples: int
    temperature: float
    score: float  # mean score(y), as in training
    rates: dict[str, float]  # well_formed_rate and the task's <name>_rate
    eos_rate: float
    kl_k1: float  # mean sequence KL(π ‖ π_ref), k1 estimate
    kl_k1_stderr: float
    kl_k3: float  # the same with k3
    completion_shares: dict[str, float] = field(default_factory=dict)  # share of each distinct completion ("…": no EOS)
    examples: list[str] = field(default_factory=list)  # the most frequent completions with their counts

    def to_dict(self) -> dict:
        return asdict(self)

    def summary(self) -> str:
        rates = ", ".join(f"{name.removesuffix('_rate').replace('_', '-')} {value:.1%}" for name, value in self.rates.items())
        return (f"{rates}{', ' if rates else ''}score {self.score:.3f}, KL to SFT {self.kl_k1:.2f} ± "
                f"{self.kl_k1_stderr:.2f} nats (k1; k3 {self.kl_k3:.2f}) on {self.num_samples} samples at "
                f"temperature {self.temperature:g}")


@torch.no_grad()
def evaluate_lm_policy(
    policy: GPT, reference: GPT, tokenizer: CharTokenizer, task: CompletionTask,
    num_samples: int = 1000, temperature: float = 1.0, max_new_tokens: int = 16,
    generator: torch.Generator | None = None, missing_eos_penalty: float = -1.0, chunk_size: int = 500,
) -> LMEvaluation:
    """Sample `num_samples` completions of the task's prompts and measure them (the module docstring)."""
    if num_samples < 1:
        raise ValueError(f"num_samples = {num_samples} must be ≥ 1")
    was_training = policy.training
    policy.eval()
    scores, kl_k1, kl_k3, ended, texts = [], [], [], [], []
    measured: Counter = Counter()
    all_prompts = repeat_prompts(task.prompts, num_samples)
    for start in range(0, num_samples, chunk_size):
        batch = sample_completions(policy, tokenizer, all_prompts[start : start + chunk_size], max_new_tokens,
                                   temperature, generator)
        policy_log_probs = score_completions(policy, batch, temperature).log_probs  # (b, T)
        reference_log_probs = score_completions(reference, batch, temperature).log_probs  # (b, T)
        kl_k1.append(sequence_kl(policy_log_probs, reference_log_probs, batch.mask, "k1"))
        kl_k3.append(sequence_kl(policy_log_probs, reference_log_probs, batch.mask, "k3"))
        penalty = torch.full((len(batch),), float(missing_eos_penalty))
        scores.append(torch.where(batch.ended_with_eos, task.reward(batch).float(), penalty))
        for name, rate in task.measure(batch).items():  # means of the chunk; weighted by its size below
            measured[name] += rate * len(batch)
        texts += batch.texts
        ended += batch.ended_with_eos.tolist()
    policy.train(was_training)

    k1 = torch.cat(kl_k1)  # (N,)
    counts = Counter(text + ("" if eos else "…") for text, eos in zip(texts, ended))
    return LMEvaluation(
        num_samples=num_samples,
        temperature=temperature,
        score=float(torch.cat(scores).mean()),
        rates={name: total / num_samples for name, total in measured.items()},
        eos_rate=sum(ended) / num_samples,
        kl_k1=float(k1.mean()),
        kl_k1_stderr=float(k1.std() / math.sqrt(num_samples)) if num_samples > 1 else float("nan"),
        kl_k3=float(torch.cat(kl_k3).mean()),
        completion_shares={text: count / num_samples for text, count in counts.most_common()},
        examples=[f"{text!r} ×{count}" for text, count in counts.most_common(8)],
    )
