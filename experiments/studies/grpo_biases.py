"""What GRPO's advantage scale and loss averaging do, computed exactly: the difficulty and length biases.

    python -m experiments.studies.grpo_biases                          # both tables, the cached SFT model
    python -m experiments.studies.grpo_biases --group-size 16 --json runs/grpo_biases.json

Difficulty bias of the advantage scale (`--advantage-scale`, ppo.lm.trainers.group_trainer). A prompt
whose score is 1 (solved) with probability p and 0 otherwise; G completions per group, k of
them successes, k ~ Binomial(G, p). Â_i depends only on the G scores (GRPO's loss-k3 keeps
the KL out of R_i), so with ∇log π(y_i) = ∇log P(R_i) + ∇log π(y_i | R_i), whose second part
has mean 0 given R_i, the expected gradient of one completion's term is

    E[Â_i ∇log π(y_i)] = (a_1 − a_0) · ∇p,      a_r = E[Â_i | R_i = r]

with a_r summed exactly over the Binomial(G − 1, p) successes among the other completions,
each group's Â taken from `group_advantages` itself. c(p) = a_1 − a_0 is the weight the
prompt's own ∇p gets: none gives 1 − 1/G whatever p (an unbiased gradient of p, scaled);
group-std divides by the group's std, small when nearly all G scores agree, and so weighs
prompts near p = 0 or 1 up, more the larger G (towards c(p)/c(½) = 1/(2√(p(1 − p))) as
G → ∞; for G = 2 and 3 c(p) is the same for every p); batch-std divides every prompt by
one number, the std of R_i − mean_group R over the batch (taken here for a large batch
holding the listed p in equal shares). Also listed:
E|Â| per completion and the share of groups whose scores all tie ((1 − p)^G + p^G, Â = 0).

Length bias of the loss averaging (`--loss-averaging`). With per-token weights w_it (the
gradient of the averaged loss with respect to the per-token term ℓ_it) a completion y_i's
tokens are pushed by Â_i·w_it: sequence w = 1/(b|y_i|), token w = 1/Σ_j|y_j|, constant
w = 1/(b·T). Table 2 reads these weights off `average_tokens` by autograd for one group of
food answers of different lengths. Table 3 follows the expected gradient on the SFT model,
prompt "ravin likes ", rule reward 1 for pizza: every completion with π(y) ≥ the threshold
is enumerated (`ppo.lm.exact.enumeration`), Ā(y) = E[Â_i | y_i = y] = (1 − 1/G)(R(y) − E_π R) for
the unscaled advantage, and

    g = Σ_y π(y) · Ā(y) · w(y) · ∇log π(y),    w(y) = 1/|y| (sequence), 1/E_π|y| (token), 1/T (constant)

(token: its large-batch limit). Δlog π(y) = η ∇log π(y)·g (forward-mode autograd, float64)
is the first-order change of each completion along that direction, η chosen so that E_π[R]
rises by 0.01. In expectation token and constant averaging point the same way (their
weights differ by the factor E|y|/T), so they differ only through token averaging's
minibatch-dependent denominator; sequence averaging pushes a wrong answer's tokens down by
Ā/|y|, less the longer it is.
"""

from __future__ import annotations

import copy
import json
import math
import sys
import time
import warnings
from pathlib import Path

import torch
from torch.func import functional_call, jvp
from torch.nn.attention import SDPBackend, sdpa_kernel

from envs import corpus
from envs.token_task import target_food_score
from experiments.commands.cli import OneLineArgumentParser, check_writable_file, configure_process, run_with_user_errors
from ppo.config import ConfigError
from ppo.lm.exact.enumeration import enumerate_completions
from ppo.lm.trainers.group_trainer import GROUP_STD_EPS, average_tokens, group_advantages
from ppo.lm.exact.kl_gradients import completions_batch
from ppo.lm.models.gpt import GPT
from ppo.lm.models.pretrain import PretrainConfig, load_or_pretrain_sft
from ppo.lm.trainers.rlhf_config import LOSS_AVERAGINGS
from ppo.lm.algorithm.rollout import TokenBatch, score_completions
from ppo.lm.models.tokenizer import CharTokenizer

PROG = "python -m experiments.studies.grpo_biases"
SCALES = ("group-std", "batch-std", "none")
DEFAULT_SUCCESS_RATES = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.98)
DEFAULT_GROUP = ("pizza", "pizza", "soda", "tacos", "apples", "lettuce", "cookies", "ice cream")
PROMPT = "ravin likes "
TARGET_FOOD = "pizza"
QUICK_PRETRAIN = PretrainConfig(seed=0, corpus_size=6_000, val_size=200, steps=250, batch_size=64, learning_rate=1e-2,
                                warmup_steps=20, eval_interval=250)


# ------------------------------------------------------------------ difficulty bias (exact)

def binomial(n: int, k: int, p: float) -> float:
    return math.comb(n, k) * p ** k * (1 - p) ** (n - k)


def group_of(successes: int, group_size: int) -> torch.Tensor:
    """The scores of a group with `successes` ones first, then zeros. (G,) float64."""
    return torch.tensor([1.0] * successes + [0.0] * (group_size - successes), dtype=torch.float64)


def batch_std_of(success_rates: list[float], group_size: int) -> float:
    """Large-batch std of A_i = R_i − mean_group R over prompts at the listed p in equal shares: √(mean_p E[A_i²])."""
    second_moments = []
    for p in success_rates:
        second_moments.append(sum(binomial(group_size, k, p) * float((group_advantages(
            group_of(k, group_size), group_size, "grpo", "none") ** 2).mean()) for k in range(group_size + 1)))
    return math.sqrt(sum(second_moments) / len(second_moments))


def difficulty_row(p: float, group_size: int, batch_std: float) -> dict:
    """c(p) = a_1 − a_0 and E|Â| per completion under each scale, and the tie share, exact over the binomial."""
    G = group_size
    divisor = {"group-std": None, "batch-std": batch_std + GROUP_STD_EPS, "none": 1.0}
    row = {"p": p, "tie_share": binomial(G, 0, p) + binomial(G, G, p)}
    for scale in SCALES:
        def advantages(successes: int) -> torch.Tensor:  # (G,) Â of a group with that many successes
            if scale == "group-std":
                return group_advantages(group_of(successes, G), G, "grpo", "group-std")
            return group_advantages(group_of(successes, G), G, "grpo", "none") / divisor[scale]

        a_success = sum(binomial(G - 1, k, p) * float(advantages(k + 1)[0]) for k in range(G))  # a_1
        a_failure = sum(binomial(G - 1, k, p) * float(advantages(k)[-1]) for k in range(G))  # a_0
        row[f"c_{scale}"] = a_success - a_failure
        row[f"mean_abs_{scale}"] = sum(binomial(G, k, p) * float(advantages(k).abs().mean()) for k in range(G + 1))
    return row


def difficulty_bias(success_rates: list[float], group_size: int) -> dict:
    sigma = batch_std_of(success_rates, group_size)
    rows = [difficulty_row(p, group_size, sigma) for p in success_rates]
    return {"group_size": group_size, "batch_std": sigma, "rows": rows}


def print_difficulty(result: dict) -> None:
    G = result["group_size"]
    print(f"\n1. Difficulty bias: a 0/1 score solved with probability p, G = {G}; the expected gradient of one "
          f"completion's term is c(p)·∇p (exact over the binomial)")
    print(f"   batch-std divides by {result['batch_std']:.4f}, the std of R − mean_group R over a large batch holding "
          f"these p in equal shares")
    header = ["p", "ties", "c group-std", "c batch-std", "c none", "group-std/none", "E|Â| g-std", "E|Â| none"]
    print("".join(f"{h:>15}" for h in header))
    for row in result["rows"]:
        cells = [f"{row['p']:.2f}", f"{row['tie_share']:.3f}", f"{row['c_group-std']:.4f}", f"{row['c_batch-std']:.4f}",
                 f"{row['c_none']:.4f}", f"{row['c_group-std'] / row['c_none']:.3f}", f"{row['mean_abs_group-std']:.4f}",
                 f"{row['mean_abs_none']:.4f}"]
        print("".join(f"{c:>15}" for c in cells))


# ------------------------------------------------------------------ length bias: weights of one group

def texts_batch(tokenizer: CharTokenizer, prompt: str, texts: list[str], ended: list[bool]) -> TokenBatch:
    """The completions `texts` of `prompt` (EOS appended where `ended`) as one right-padded TokenBatch."""
    completions = [tokenizer.encode(text, add_bos=False) + ([tokenizer.eos_id] if eos else [])
                   for text, eos in zip(texts, ended)]
    return completions_batch(tokenizer.encode(prompt), completions, tokenizer.pad_id)


def group_weights(answers: list[str], max_new_tokens: int) -> dict:
    """Per answer of one group (each a food then EOS): |y|, R, Â (none), and per averaging the push on log π of each
    of its tokens, −∂L/∂log π(y_it) = Â_i·w_it at r = 1, with w_it read off `average_tokens` by autograd."""
    rule = target_food_score(TARGET_FOOD)
    lengths = torch.tensor([len(answer) + 1 for answer in answers])  # characters + EOS
    scores = torch.tensor([rule(answer, True) for answer in answers], dtype=torch.float64)
    advantages = group_advantages(scores, len(answers), "grpo", "none")  # (G,)
    T = max_new_tokens
    mask = torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)  # (G, T)
    pushes = {}
    for averaging in LOSS_AVERAGINGS:
        per_token = torch.zeros(len(answers), T, dtype=torch.float64, requires_grad=True)  # ℓ_it = −r_it·Â_i
        loss = average_tokens(per_token, mask, averaging, T)
        (weights,) = torch.autograd.grad(loss, per_token)  # (G, T) w_it = ∂L/∂ℓ_it
        pushes[averaging] = (advantages * weights[:, 0]).tolist()  # Â_i·w_i1: every real token of y_i has the same
    return {"answers": list(answers), "lengths": lengths.tolist(), "scores": scores.tolist(),
            "advantages": advantages.tolist(), "per_token_push": pushes}


def print_group_weights(result: dict) -> None:
    print(f"\n2. Length bias, one group of G = {len(result['answers'])} answers to {PROMPT!r} (score 1 for "
          f"{TARGET_FOOD}), Â = R − mean_group R: the push on log π of each token, Â·w (from average_tokens), "
          f"and on the whole answer, Â·w·|y|")
    header = ["answer", "|y|", "Â"] + [f"Â·w {a}" for a in LOSS_AVERAGINGS] + [f"Â·w·|y| {a}" for a in LOSS_AVERAGINGS]
    print(f"{header[0]:<11}" + "".join(f"{h:>17}" for h in header[1:]))
    for i, answer in enumerate(result["answers"]):
        length = result["lengths"][i]
        pushes = [result["per_token_push"][a][i] for a in LOSS_AVERAGINGS]
        cells = [str(length), f"{result['advantages'][i]:+.3f}"] + [f"{x:+.5f}" for x in pushes] + \
                [f"{x * length:+.5f}" for x in pushes]
        print(f"{answer:<11}" + "".join(f"{c:>17}" for c in cells))


# ------------------------------------------------------------------ length bias: the expected gradient on a model

class _CompletionLogProbs(torch.nn.Module):
    """log π(y) of each row of a fixed TokenBatch, as a module whose parameters functional_call can replace."""

    def __init__(self, model: GPT, batch: TokenBatch):
        super().__init__()
        self.model, self.batch = model, batch

    def forward(self) -> torch.Tensor:
        return score_completions(self.model, self.batch).log_probs.sum(1)  # (N,)


def expected_change(model: GPT, tokenizer: CharTokenizer, group_size: int, max_new_tokens: int,
                    min_probability: float, reward_rise: float = 0.01) -> dict:
    """Table 3 (the module docstring): Δlog π(y) along each averaging's expected gradient, E_π[R] up by reward_rise."""
    model = copy.deepcopy(model).double().eval()
    found = enumerate_completions(model, tokenizer, PROMPT, min_probability, max_new_tokens)
    rule = target_food_score(TARGET_FOOD)
    missing_eos_score = -1.0  # RLHFConfig's missing_eos_penalty
    scores = torch.tensor([rule(text, True) if eos else missing_eos_score
                           for text, eos in zip(found.texts, found.ended_with_eos)], dtype=torch.float64)
    batch = texts_batch(tokenizer, PROMPT, found.texts, found.ended_with_eos)
    lengths = batch.mask.sum(1).double()  # (N,) |y|, EOS included
    probabilities = found.probabilities / found.probabilities.sum()  # π over the found completions
    mean_score, mean_length = float((probabilities * scores).sum()), float((probabilities * lengths).sum())
    advantages = (1 - 1 / group_size) * (scores - mean_score)  # Ā(y)
    weights = {"sequence": 1 / lengths, "token": torch.full_like(lengths, 1 / mean_length),
               "constant": torch.full_like(lengths, 1 / max_new_tokens)}
    module = _CompletionLogProbs(model, batch)
    names = [name for name, _ in module.named_parameters()]
    parameters = {name: parameter.detach() for name, parameter in module.named_parameters()}

    def log_probs(values: dict[str, torch.Tensor]) -> torch.Tensor:
        return functional_call(module, values, ())

    result = {"texts": found.texts, "ended": found.ended_with_eos, "probabilities": probabilities.tolist(),
              "residual": found.residual, "lengths": lengths.tolist(), "scores": scores.tolist(),
              "advantages": advantages.tolist(), "mean_length": mean_length, "reward_rise": reward_rise,
              "changes": {}, "length_change": {}}
    for averaging in LOSS_AVERAGINGS:
        trainable = {name: value.clone().requires_grad_(True) for name, value in parameters.items()}
        objective = (probabilities * advantages * weights[averaging] * log_probs(trainable)).sum()
        direction = dict(zip(names, torch.autograd.grad(objective, [trainable[name] for name in names])))
        with sdpa_kernel(SDPBackend.MATH), warnings.catch_warnings():  # forward-mode autograd needs attention
            warnings.simplefilter("ignore", DeprecationWarning)  # written out; torch loads its rules with jit.script
            _, slope = jvp(log_probs, (parameters,), (direction,))  # (N,) ∇log π(y)·g
        step = reward_rise / float((probabilities * scores * slope).sum())
        change = step * slope  # Δlog π(y)
        result["changes"][averaging] = change.tolist()
        result["length_change"][averaging] = float((probabilities * lengths * change).sum())
    return result


def wrong_mass_change(result: dict, averaging: str, longer: bool) -> float:
    """Δπ of the wrong answers longer (or not longer) than the right one: Σ π(y)·Δlog π(y) over them."""
    right_length = len(TARGET_FOOD) + 1
    return sum(p * change for p, change, length, score in zip(result["probabilities"], result["changes"][averaging],
                                                               result["lengths"], result["scores"])
               if score <= 0 and (length > right_length) == longer)


def print_expected_change(result: dict, shown: int) -> None:
    rise = result["reward_rise"]
    print(f"\n3. Length bias on the model: Δlog π(y) along the expected gradient of each averaging, scaled so that "
          f"E_π[R] rises by {rise:g} ({len(result['texts'])} completions of {PROMPT!r} with π ≥ the threshold, "
          f"{result['residual']:.2e} of the mass below it; E_π|y| = {result['mean_length']:.3f} tokens)")
    header = ["completion", "|y|", "π(y)", "Ā(y)"] + [f"Δlog π {a}" for a in LOSS_AVERAGINGS]
    print(f"{header[0]:<14}" + "".join(f"{h:>18}" for h in header[1:]))
    order = sorted(range(len(result["texts"])), key=lambda i: -result["probabilities"][i])[:shown]
    for i in sorted(order, key=lambda i: (result["lengths"][i], result["texts"][i])):
        name = result["texts"][i] + ("" if result["ended"][i] else "…")
        cells = [f"{result['lengths'][i]:.0f}", f"{result['probabilities'][i]:.4f}", f"{result['advantages'][i]:+.4f}"]
        cells += [f"{result['changes'][a][i]:+.5f}" for a in LOSS_AVERAGINGS]
        print(f"{name:<14}" + "".join(f"{c:>18}" for c in cells))
    print(f"{'ΔE|y| tokens':<14}" + f"{'':>54}" + "".join(f"{result['length_change'][a]:>+18.5f}"
                                                             for a in LOSS_AVERAGINGS))
    for longer in (False, True):
        label = "Δπ long wrong" if longer else "Δπ short wrong"
        print(f"{label:<14}" + f"{'':>54}" + "".join(f"{wrong_mass_change(result, a, longer):>+18.5f}"
                                                     for a in LOSS_AVERAGINGS))
    print(f"(short/long: not longer / longer than {TARGET_FOOD!r}, {len(TARGET_FOOD) + 1} tokens)")


# ------------------------------------------------------------------ command line

def build_parser() -> OneLineArgumentParser:
    parser = OneLineArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--group-size", type=int, default=8, help="completions G per group (default: 8)")
    parser.add_argument("--success-rates", type=float, nargs="+", default=list(DEFAULT_SUCCESS_RATES), metavar="P",
                        help="success rates p of table 1, each in (0, 1) (default: "
                             f"{' '.join(f'{p:g}' for p in DEFAULT_SUCCESS_RATES)})")
    parser.add_argument("--group", nargs="+", default=list(DEFAULT_GROUP), metavar="FOOD",
                        help=f"the answers of table 2's group, foods of the corpus (default: {' '.join(DEFAULT_GROUP)})")
    parser.add_argument("--max-new-tokens", type=int, default=16, help="T, the completion length limit (default: 16)")
    parser.add_argument("--min-probability", type=float, default=1e-5,
                        help="table 3 lists every completion at least this likely (default: 1e-5)")
    parser.add_argument("--shown", type=int, default=10, help="table 3's rows: the most likely completions (default: 10)")
    parser.add_argument("--quick", action="store_true",
                        help="a rough SFT model pretrained in seconds (250 steps on 6,000 sentences) instead of the "
                             "default one; table 3's numbers change")
    parser.add_argument("--sft-cache-dir", type=Path, default=None,
                        help="where the SFT checkpoint is cached (default: $PPO_CACHE_DIR or ~/.cache/ppo-from-scratch)")
    parser.add_argument("--json", type=Path, default=None, help="also write every table's figures to this file")
    return parser


def check_arguments(args) -> None:
    if args.group_size < 2:
        raise ConfigError(f"group_size = {args.group_size} must be at least 2")
    bad = [p for p in args.success_rates if not 0 < p < 1]
    if bad:
        raise ConfigError(f"success rate {bad[0]:g} is not in (0, 1)")
    unknown = [food for food in args.group if food not in corpus.FOODS]
    if unknown:
        raise ConfigError(f"group answer {unknown[0]!r} is not a food of the corpus; allowed: {', '.join(corpus.FOODS)}")
    if len(args.group) < 2:
        raise ConfigError("the group needs at least 2 answers")
    if args.max_new_tokens < max(len(food) + 1 for food in args.group):
        raise ConfigError(f"max_new_tokens = {args.max_new_tokens} is shorter than the group's longest answer")
    if not 0 < args.min_probability < 1:
        raise ConfigError(f"min_probability = {args.min_probability:g} is not in (0, 1)")
    if args.shown < 1:
        raise ConfigError(f"shown = {args.shown} must be at least 1")
    if args.json is not None:
        check_writable_file(args.json, "--json")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_with_user_errors(PROG, lambda: _run(args))


def _run(args) -> int:
    check_arguments(args)
    configure_process(1)
    started = time.perf_counter()
    difficulty = difficulty_bias(args.success_rates, args.group_size)
    print_difficulty(difficulty)
    weights = group_weights(args.group, args.max_new_tokens)
    print_group_weights(weights)
    sft, tokenizer = load_or_pretrain_sft(corpus.FOOD_CORPUS, QUICK_PRETRAIN if args.quick else None,
                                          cache_dir=args.sft_cache_dir, verbose=False)
    change = expected_change(sft, tokenizer, args.group_size, args.max_new_tokens, args.min_probability)
    print_expected_change(change, args.shown)
    print(f"\n{time.perf_counter() - started:.1f} s")
    if args.json is not None:
        args.json.write_text(json.dumps({"difficulty": difficulty, "group_weights": weights, "expected_change": change},
                                        indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
