"""Plots of a PPO run on the language model: the training grid and the critic's values per token.

`plot_training_grid` reads metrics.csv and draws the curves to watch (those a PPO run on
a language model is usually judged by, plus what TRL logs): the score and the total
reward r − β·KL with their running averages, the mean sequence KL to the reference, the
entropy, the critic's loss, the target and well-formed rates, the approx KL between
consecutive policies with the clip fraction, and β.

`plot_critic_values` shows V(s_t) along two prompts that differ only at the end, e.g.
"ravin likes pizz" and "ravin likes sala", before and after training: the two curves agree
on the shared prefix and part where the text reveals which food is coming; after
training on a pizza reward the "pizz…" curve rises towards the score.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from ppo.lm.models.gpt import GPT  # noqa: E402
from ppo.lm.models.tokenizer import CharTokenizer  # noqa: E402
from ppo.runs.logger import read_metrics  # noqa: E402

GRID_PANELS = (
    ("score", "score (reward model or rule)", True),
    ("total_reward", "total reward: score − β·KL", True),
    ("sequence_kl", "mean sequence KL to the reference (nats)", True),
    ("entropy", "entropy per token (nats)", False),
    ("value_loss", "critic loss", False),
    ("policy_loss", "policy loss", False),
    (("target_rate", "well_formed_rate"), "target rate and well-formed rate", False),
    (("approx_kl", "clip_fraction"), "approx KL(π_old ‖ π_θ) and clip fraction", False),
    ("beta", "β", False),
)


def running_average(values: list[float]) -> list[float]:
    """Cumulative mean: the k-th entry is the mean of the first k values."""
    out, total = [], 0.0
    for count, value in enumerate(values, start=1):
        total += value
        out.append(total / count)
    return out


def plot_training_grid(run_dir: str | Path, title: str | None = None, kl_target: float | None = None) -> Path:
    """A 3 × 3 grid of the per-iteration metrics of a run; returns the PNG path.

    With `kl_target` (an adaptive β), the KL panel shows the target as a dashed line and
    the β panel is drawn on a log scale, so the controller's steps read as factors.
    """
    run_dir = Path(run_dir)
    rows = read_metrics(run_dir / "metrics.csv")
    iterations = list(range(1, len(rows) + 1))
    figure, axes = plt.subplots(3, 3, figsize=(14, 10))
    for axis, (keys, label, with_running_average) in zip(axes.flat, GRID_PANELS):
        for key in (keys,) if isinstance(keys, str) else keys:
            values = [row.get(key) for row in rows]
            if any(value is None for value in values):
                continue
            axis.plot(iterations, values, label=key, alpha=0.8)
            if with_running_average:
                axis.plot(iterations, running_average(values), label=f"{key} (running average)", color="black", lw=1.2)
        if kl_target is not None and keys == "sequence_kl":
            axis.axhline(kl_target, color="C3", ls="--", lw=1.2, label=f"KL target {kl_target:g}")
        if kl_target is not None and keys == "beta" and axis.lines:
            axis.set_yscale("log")
            label = f"β, adapted towards KL {kl_target:g} (log scale)"
        axis.set_title(label, fontsize=10)
        axis.set_xlabel("iteration")
        axis.grid(alpha=0.3)
        if axis.lines:
            axis.legend(fontsize=7)
    figure.suptitle(title or run_dir.name)
    figure.tight_layout()
    path = run_dir / "training_grid.png"
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


@torch.no_grad()
def critic_values_along(critic: GPT, tokenizer: CharTokenizer, text: str) -> list[float]:
    """V(s_t) for every prefix of BOS + text: entry i is the value after reading i characters."""
    was_training = critic.training
    critic.eval()
    values = critic.values(torch.tensor([tokenizer.encode(text)]))[0]  # (1 + len(text),)
    critic.train(was_training)
    return values.tolist()


def plot_critic_values(texts: list[str], before: dict[str, list[float]], after: dict[str, list[float]],
                       path: str | Path, title: str = "critic's value per token", prompt: str | None = None) -> Path:
    """One line per text for the critic before (dashed) and after (solid) training.

    With `prompt`, the positions inside it are shaded: PPO never visits those states (the
    first state is the whole prompt), so the critic is never trained there.
    """
    figure, axis = plt.subplots(figsize=(9, 4.5))
    if prompt:
        axis.axvspan(-0.5, len(prompt) - 0.5, color="0.92", label="inside the prompt: never trained")
    for index, text in enumerate(texts):
        color = f"C{index}"
        positions = range(len(text) + 1)
        axis.plot(positions, before[text], ls="--", color=color, marker=".", label=f"{text!r} before")
        axis.plot(positions, after[text], ls="-", color=color, marker="o", label=f"{text!r} after")
    width = max(len(text) for text in texts)
    labels = ["BOS"]
    for position in range(width):  # "p/s" where the texts differ
        characters = dict.fromkeys(text[position] if position < len(text) else "" for text in texts)
        labels.append("/".join(c if c != " " else "␣" for c in characters if c))
    axis.set_xticks(range(width + 1), labels)
    axis.set_xlabel("last token read")
    axis.set_ylabel("V(s_t)")
    axis.set_title(title)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=8, loc="best")
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
