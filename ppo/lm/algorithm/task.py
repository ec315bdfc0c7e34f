"""What the language-model trainer is told about a task: its prompts, a reward, diagnostics.

The trainer (`ppo.lm.trainers.rlhf_trainer`) knows nothing about foods or any other task. The
caller — a command, a lecture, a test — hands it a `CompletionTask`, as TRL's trainers
take a dataset of prompts and a reward function:

    task = CompletionTask(
        prompts=["ravin likes "],
        reward=rule_scorer(lambda text, ended_with_eos: float(text == "pizza" and ended_with_eos)),
        well_formed=rule_scorer(lambda text, ended_with_eos: ended_with_eos and text in FOODS),
        rates={"target": ...},
    )

The reward is a sequence score, one number per completion; `ppo.lm.algorithm.rewards` turns it
into per-token rewards with the KL penalty. `well_formed` and `rates` are only measured
and logged (`well_formed_rate`, `<name>_rate`): they never reach the loss.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ppo.lm.algorithm.rewards import SequenceScorer
from ppo.lm.algorithm.rollout import CompletionBatch


@dataclass
class CompletionTask:
    prompts: list[str]  # every rollout cycles through them: B / len(prompts) completions each
    reward: SequenceScorer  # (B,) score(y); a completion without EOS gets the missing-EOS penalty instead
    well_formed: SequenceScorer | None = None  # (B,) bool or 0/1: a completion the task accepts as an answer
    rates: dict[str, SequenceScorer] = field(default_factory=dict)  # name -> (B,) 0/1, logged as "<name>_rate"

    def __post_init__(self):
        if not self.prompts or not all(isinstance(prompt, str) for prompt in self.prompts):
            raise ValueError("a CompletionTask needs one or more prompt strings")

    def measure(self, batch: CompletionBatch) -> dict[str, float]:
        """The task's diagnostics of a batch: well_formed_rate and every <name>_rate."""
        measured = {}
        if self.well_formed is not None:
            measured["well_formed_rate"] = float(self.well_formed(batch).double().mean())
        for name, rate in self.rates.items():
            measured[f"{name}_rate"] = float(rate(batch).double().mean())
        return measured
