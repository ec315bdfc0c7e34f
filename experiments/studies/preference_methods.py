"""DPO, IPO, a reward model + PPO and best-of-n, all from the same comparisons, against the exact π*_β.

    python -m experiments.studies.preference_methods                          # seeds 1 2 3, 2000 comparisons: ~1 CPU-minute a seed
    python -m experiments.studies.preference_methods --seeds 4 5 --comparisons 4000 --json runs/preference_methods.json --out-dir runs/preference_methods

The two-choice task (`experiments/tasks/two_choice_task.py`: eight prompts, a rule r that pays for
a relation at the completion's first token combined with a food six tokens later). For each
seed, N comparisons are drawn from the SFT model's own samples, two completions of one
prompt, the prompts in turn, and labelled by a simulated rater who follows the
Bradley–Terry model on the rule with temperature t (`experiments/tasks/preference_rater.py`):

    P(y₁ ≻ y₂) = σ((r(y₁) − r(y₂)) / t)

so the reward the comparisons imply is r/t, and the target of every method at coefficient β is

    π*_β(y|x) ∝ π_ref(y|x) · exp(r(y) / (t·β))          (the rule's optimum at t·β, computed exactly)

Each method learns from the same N comparisons, with the SFT model as π_ref:

    DPO        the policy itself (`ppo.lm.trainers.dpo`), loss −log σ(β·h), h the difference of the two
               completions' log π/π_ref: under Bradley–Terry its optimum is π*_β
    IPO        loss (h − 1/(2β))² (Azar et al. 2023): its optimum is NOT π*_β but
               π_IPO ∝ π_ref·exp(P(y ≻ π_ref)/β), P(y ≻ π_ref) = E_y'~π_ref[σ((r(y) − r(y'))/t)]
               over finished y' (printed, exact, under the table)
    RM + PPO   a Bradley–Terry reward model r_φ (`ppo.lm.algorithm.reward_model`), normalised as the library
               does to mean 0 and sd 1 on 512 SFT samples (r̃ = s·(r_φ − o)), then PPO with k1 in the
               reward at coefficient s·β: the target π_ref·exp(r̃/(s·β)) ∝ π_ref·exp(r_φ/β) is π*_β
               when r_φ = r/t + const, the same tilt DPO aims at (printed under the table: the reward
               model's own target π_ref·exp(r̃/(s·β)), exact over the groups, its TV to π*_β — the
               reward model's error — and the PPO runs' TV to it — PPO's)
    best-of-n  n SFT samples, the one r̃ ranks highest, computed exactly over every completion with
               π_ref ≥ --enumeration-threshold (`ppo.lm.exact.best_of_n`); not aimed at π*_β, shown for
               the gold it buys per nat of KL

The columns (mean ± sd over seeds; SFT and π* are exact and the same for every seed):

    gold E[r]     the rule's reward (a run-on completion: the training's missing-EOS penalty, −1)
    right         share of right combinations (a healthy food liked or an unhealthy one hated)
    KL to SFT     KL(π ‖ π_ref): k1 over --eval-samples fresh samples for DPO, IPO and PPO;
                  exact over the enumerated completions for best-of-n and π*
    TV to π*      ½ Σ_g |π(g) − π*_β(g)| over the 20 answers, MALFORMED and NO_EOS, exact
                  (`ppo.lm.exact.optimum_distance`), mean over prompts
    comparisons   labelled pairs each method learnt from
    completions   completions sampled beyond the comparisons' 2N: PPO's rollouts, best-of-n's n per answer
    wall s        training (and, for best-of-n, the reward model's training and scoring), one thread

A second table lists best-of-n's exact KL next to log n − (n − 1)/n, the often quoted
value that is only an upper bound for discrete outcomes (Beirami et al. 2024). With
--out-dir, preference_methods.png plots gold against KL: best-of-n's curve over n, π*'s
curve over β (t·β from a quarter to four times the run's), and each run of DPO, IPO and PPO.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
import sys
import time
from pathlib import Path

import torch

from envs import corpus
from experiments.commands.cli import (
    OneLineArgumentParser,
    check_writable_file,
    check_writable_folder,
    configure_process,
    run_with_user_errors,
)
from experiments.studies.compare_lm_trainers import exact_gold_and_right, mean_sd, measure_samples
from experiments.tasks.preference_rater import preference_probability, rater_comparisons
from experiments.tasks.two_choice_task import ANSWERS, TwoChoiceTaskConfig, two_choice_task
from ppo.config import ConfigError
from ppo.lm.exact.best_of_n import best_of_n_kl_bound, best_of_n_probabilities, kl_divergence, log_spaced_counts
from ppo.lm.trainers.dpo import DPOConfig, encode_preference_pairs, ipo_optimum, train_dpo
from ppo.lm.exact.enumeration import enumerate_completions
from ppo.lm.models.gpt import GPT
from ppo.lm.exact.optimum import DEFAULT_MIN_PROBABILITY, MALFORMED, NO_EOS, kl_regularised_optimum, scored_group
from ppo.lm.exact.optimum_distance import PromptOptimum, distance_to_optimum, group_kl, total_variation
from ppo.lm.models.pretrain import load_or_pretrain_sft
from ppo.lm.algorithm.reward_model import RewardModel, encode_texts, train_reward_model
from ppo.lm.trainers.rlhf_config import RLHFConfig
from ppo.lm.trainers.rlhf_trainer import RLHFTrainer, copy_with_value_head
from ppo.lm.algorithm.rollout import repeat_prompts, sample_completions

PROG = "python -m experiments.studies.preference_methods"
NORMALISATION_SAMPLES = 512  # SFT completions the reward model is normalised on
OPTIMUM_CURVE_FACTORS = (0.25, 0.35, 0.5, 0.7, 1.0, 1.4, 2.0, 2.8, 4.0, 8.0, 16.0, 64.0)  # π*'s curve: t·β times these


def build_parser() -> OneLineArgumentParser:
    defaults = RLHFConfig()
    parser = OneLineArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    run = parser.add_argument_group("run")
    run.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3],
                     help="seeds: each draws its own comparisons and trains every method on them (default: 1 2 3)")
    run.add_argument("--person", default="all",
                     help="whose prompt: a person of the corpus, or 'all' (one prompt each; default: all)")
    run.add_argument("--eval-samples", type=int, default=2_000,
                     help="fresh completions measuring each trained policy's gold, right and KL (default: 2000)")
    run.add_argument("--sft-cache-dir", type=Path, default=None,
                     help="where the SFT checkpoint is cached (default: $PPO_CACHE_DIR or ~/.cache/ppo-from-scratch)")
    run.add_argument("--json", type=Path, default=None, help="also write every row's figures to this file")
    run.add_argument("--out-dir", type=Path, default=None,
                     help="write preference_methods.png (gold against KL) in this folder (default: no figure)")
    data = parser.add_argument_group("the comparisons and the target")
    data.add_argument("--comparisons", type=int, default=2_000,
                      help="labelled pairs of SFT samples every method learns from (default: 2000)")
    data.add_argument("--rater-temperature", type=float, default=0.5,
                      help="t of the rater: y₁ ≻ y₂ with probability σ((r(y₁) − r(y₂))/t) (default: 0.5)")
    data.add_argument("--beta", type=float, default=0.3,
                      help="β of every method; the target is π_ref·exp(r/(t·β)) (default: 0.3, so t·β = 0.15, "
                      "the β of compare_lm_trainers)")
    dpo = parser.add_argument_group("DPO and IPO")
    dpo.add_argument("--dpo-epochs", type=int, default=4, help="passes over the comparisons (default: 4)")
    dpo.add_argument("--dpo-batch-size", type=int, default=64, help="comparisons per gradient step (default: 64)")
    dpo.add_argument("--dpo-learning-rate", type=float, default=1e-3, help="Adam learning rate (default: 1e-3)")
    reward = parser.add_argument_group("the reward model, PPO and best-of-n")
    reward.add_argument("--reward-model-steps", type=int, default=300, help="Bradley–Terry steps (default: 300)")
    reward.add_argument("--reward-model-learning-rate", type=float, default=2e-3,
                        help="Adam learning rate of the reward model's trunk (default: 2e-3)")
    reward.add_argument("--ppo-iterations", type=int, default=30, help="PPO rollout + update cycles (default: 30)")
    reward.add_argument("--ppo-batch-size", type=int, default=defaults.batch_size,
                        help=f"completions per PPO rollout (default: {defaults.batch_size})")
    reward.add_argument("--ppo-learning-rate", type=float, default=defaults.learning_rate,
                        help=f"PPO's policy learning rate (default: {defaults.learning_rate})")
    reward.add_argument("--best-of-n", nargs="+", type=int, default=[2, 4, 16, 64], metavar="N",
                        help="the n of best-of-n's rows; the figure's curve runs to the largest (default: 2 4 16 64)")
    reward.add_argument("--enumeration-threshold", type=float, default=1e-6,
                        help="best-of-n enumerates every completion with π_ref(y|x) at least this (default: 1e-6)")
    data.add_argument("--ending-threshold", type=float, default=DEFAULT_MIN_PROBABILITY,
                      help="ε of the prefix tree that brackets π(NO_EOS) for the TV to π* (`ppo.lm.exact.optimum`; "
                      f"default: {DEFAULT_MIN_PROBABILITY:g})")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_with_user_errors(PROG, lambda: _run(args))


def check_args(args) -> None:
    """Raise ConfigError (one line) naming the first impossible flag, before any work."""
    for name in ("comparisons", "eval_samples", "dpo_epochs", "dpo_batch_size", "reward_model_steps",
                 "ppo_iterations", "ppo_batch_size"):
        if getattr(args, name) < 1:
            raise ConfigError(f"{name} = {getattr(args, name)} must be a positive integer")
    if args.eval_samples < 2:
        raise ConfigError(f"eval_samples = {args.eval_samples} must be at least 2")
    for name in ("rater_temperature", "beta", "dpo_learning_rate", "reward_model_learning_rate", "ppo_learning_rate"):
        value = getattr(args, name)
        if not (math.isfinite(value) and value > 0):
            raise ConfigError(f"{name} = {value} must be a finite number > 0")
    if any(n < 1 for n in args.best_of_n):
        raise ConfigError(f"best_of_n = {' '.join(map(str, args.best_of_n))}: every n must be a positive integer")
    for name in ("enumeration_threshold", "ending_threshold"):
        if not 0 < getattr(args, name) < 1:
            raise ConfigError(f"{name} = {getattr(args, name)} must be in (0, 1)")
    if len(set(args.seeds)) != len(args.seeds):
        raise ConfigError(f"seeds = {' '.join(map(str, args.seeds))} repeats a seed")
    TwoChoiceTaskConfig(person=args.person).validate()
    for loss in ("dpo", "ipo"):
        dpo_config(args, loss, seed=0)
    ppo_config(args, scale=1.0, seed=0)
    if args.json is not None:
        check_writable_file(args.json, "--json")
    if args.out_dir is not None:
        check_writable_folder(args.out_dir, "--out-dir")


def dpo_config(args, loss: str, seed: int) -> DPOConfig:
    return DPOConfig(beta=args.beta, loss=loss, learning_rate=args.dpo_learning_rate, epochs=args.dpo_epochs,
                     batch_size=args.dpo_batch_size, seed=seed).validate()


def ppo_config(args, scale: float, seed: int) -> RLHFConfig:
    """PPO at coefficient s·β against the reward model normalised with scale s (the module docstring)."""
    return RLHFConfig(algorithm="ppo", iterations=args.ppo_iterations, batch_size=args.ppo_batch_size,
                      learning_rate=args.ppo_learning_rate, kl_coef=scale * args.beta, seed=seed,
                      tensorboard=False, sample_every=0).validate()


# ---------------------------------------------------------------- the target, exactly


def target_optima(policy: GPT, sft: GPT, tokenizer, prompts: list[str], task_config: TwoChoiceTaskConfig,
                  beta: float, rater_temperature: float, settings: RLHFConfig,
                  min_probability: float = DEFAULT_MIN_PROBABILITY) -> list[PromptOptimum]:
    """π*_β ∝ π_ref·exp(r/(t·β)) of each prompt, and the policy's groups and TV to it (`distance_to_optimum`)."""
    return distance_to_optimum(policy, sft, tokenizer, prompts, ANSWERS, lambda prompt: task_config.answer_scores(),
                               rater_temperature * beta, settings.temperature, max_new_tokens=settings.max_new_tokens,
                               missing_eos_penalty=settings.missing_eos_penalty, min_probability=min_probability)


def group_scores(task_config: TwoChoiceTaskConfig, missing_eos_penalty: float) -> dict[str, float]:
    """r of every group: the 20 answers, MALFORMED (0) and NO_EOS (the missing-EOS penalty)."""
    return {**task_config.answer_scores(), NO_EOS: missing_eos_penalty}


def ipo_target(reference_probabilities: dict[str, float], scores: dict[str, float], beta: float,
               rater_temperature: float) -> dict[str, float]:
    """IPO's own optimum π_IPO ∝ π_ref·exp(P(g ≻ μ)/β) (`ppo.lm.trainers.dpo.ipo_optimum`), μ = π_ref over the finished
    groups (the rater compares no run-on completion), P(g ≻ h) = σ((r(g) − r(h))/t)."""
    finished = {g: p for g, p in reference_probabilities.items() if g != NO_EOS}
    return ipo_optimum(reference_probabilities,
                       lambda g, h: preference_probability(scores[g], scores[h], rater_temperature), beta, finished)


# ---------------------------------------------------------------- the methods


def train_reward(sft: GPT, tokenizer, comparisons, prompts: list[str], args, seed: int,
                 max_new_tokens: int) -> RewardModel:
    """A Bradley–Terry reward model of the comparisons, normalised on SFT samples of the task's prompts."""
    model, _ = train_reward_model(sft, tokenizer, comparisons, args.reward_model_steps,
                                  args.reward_model_learning_rate, seed=seed)
    model.normalize_on(sample_completions(sft, tokenizer, repeat_prompts(prompts, NORMALISATION_SAMPLES),
                                          max_new_tokens, generator=torch.Generator().manual_seed(seed + 1)))
    return model


def train_preference_policy(sft: GPT, tokenizer, comparisons, config: DPOConfig) -> GPT:
    """A copy of the SFT model trained by DPO or IPO on the comparisons, the SFT model as reference."""
    policy = copy_with_value_head(sft, value_head=False)
    reference = copy_with_value_head(sft, value_head=False).requires_grad_(False)
    train_dpo(policy, reference, encode_preference_pairs(tokenizer, comparisons), config)
    return policy.eval()


@torch.no_grad()
def enumerate_prompts(sft: GPT, tokenizer, prompts: list[str], threshold: float, settings: RLHFConfig) -> dict:
    """Every completion of each prompt with π_ref ≥ threshold (`ppo.lm.exact.enumeration`), once for all seeds."""
    return {prompt: enumerate_completions(sft, tokenizer, prompt, threshold, settings.max_new_tokens,
                                          settings.temperature) for prompt in prompts}


@torch.no_grad()
def reward_model_optimum(reward_model: RewardModel, tokenizer, enumerated: dict, optima: list[PromptOptimum],
                         kl_coef: float, missing_eos_penalty: float) -> list[dict[str, float]]:
    """The target PPO aims at: π_ref·exp(r̃/kl_coef) over the groups of each prompt, r̃ the reward model's score
    of each answer, MALFORMED tilted inside by r̃ over its enumerated members (`ppo.lm.exact.optimum.scored_group`)."""
    targets = []
    for optimum in optima:
        found = enumerated[optimum.prompt]
        malformed = [i for i, (text, ended) in enumerate(zip(found.texts, found.ended_with_eos))
                     if ended and text not in ANSWERS]
        if not malformed:
            raise ConfigError(f"no malformed completion of {optimum.prompt!r} has π_ref ≥ the enumeration threshold: "
                              f"give a smaller --enumeration-threshold")
        texts = list(ANSWERS) + [found.texts[i] for i in malformed]
        scores = reward_model(*encode_texts(tokenizer, [optimum.prompt + text for text in texts])).double()  # (K,)
        groups = {**dict(zip(ANSWERS, scores[: len(ANSWERS)].tolist())), NO_EOS: missing_eos_penalty,
                  MALFORMED: scored_group(scores[len(ANSWERS):], found.probabilities[malformed], kl_coef)}
        targets.append(kl_regularised_optimum(optimum.optimum.reference_probabilities, groups, kl_coef).probabilities)
    return targets


def completion_group(text: str, ended_with_eos: bool) -> str:
    """The group of `ppo.lm.exact.optimum` a completion falls in: its answer, MALFORMED or NO_EOS."""
    if not ended_with_eos:
        return NO_EOS
    return text if text in ANSWERS else MALFORMED


@torch.no_grad()
def best_of_n_rows(enumerated: dict, reward_model: RewardModel, tokenizer, ns: list[int],
                   optima: list[PromptOptimum], scores: dict[str, float], settings: RLHFConfig) -> list[dict]:
    """Exact best-of-n under r̃ for every n: gold, right, KL (exact and its bound), TV to π*; mean over prompts.

    Completions rarer than the threshold (the residual) are one more outcome, ranked last
    and counted as MALFORMED: best-of-n picks it with probability residualⁿ.
    """
    per_prompt = []
    for optimum in optima:
        found = enumerated[optimum.prompt]
        tokens, last = encode_texts(tokenizer, [optimum.prompt + text for text in found.texts])
        proxy = reward_model(tokens, last).double()  # (K,)
        proxy = torch.where(torch.tensor(found.ended_with_eos), proxy,
                            torch.full_like(proxy, settings.missing_eos_penalty))
        probabilities = torch.cat([found.probabilities, torch.tensor([found.residual], dtype=torch.float64)])
        proxy = torch.cat([proxy, proxy.min().reshape(1) - 1.0])
        groups = [completion_group(t, e) for t, e in zip(found.texts, found.ended_with_eos)] + [MALFORMED]
        rows = []
        for n in ns:
            chosen = best_of_n_probabilities(probabilities / probabilities.sum(), proxy, n)  # (K + 1,)
            grouped: dict[str, float] = {}
            for group, p in zip(groups, chosen.tolist()):
                grouped[group] = grouped.get(group, 0.0) + p
            rows.append({"n": n, "kl": kl_divergence(chosen, probabilities), "grouped": grouped,
                         "total_variation": total_variation(grouped, optimum.optimum.probabilities)})
        per_prompt.append(rows)
    rows = []
    for points in zip(*per_prompt):
        gold, right = exact_gold_and_right([p["grouped"] for p in points], scores)
        rows.append({"method": f"best-of-{points[0]['n']}", "n": points[0]["n"], "gold": gold, "right_rate": right,
                     "kl": statistics.fmean(p["kl"] for p in points), "kl_bound": best_of_n_kl_bound(points[0]["n"]),
                     "total_variation": statistics.fmean(p["total_variation"] for p in points)})
    return rows


def measured_row(method: str, policy: GPT, sft: GPT, tokenizer, task, task_config, args, settings: RLHFConfig,
                 seed: int) -> dict:
    """Gold, right and KL on fresh samples of a trained policy; its TV to π*_β, exact."""
    optima = target_optima(policy, sft, tokenizer, task.prompts, task_config, args.beta, args.rater_temperature,
                           settings, args.ending_threshold)
    log_z = {o.prompt: o.log_partition for o in optima}
    measured = measure_samples(policy, sft, tokenizer, task, settings.replace(kl_coef=args.rater_temperature * args.beta),
                               log_z, args.eval_samples, seed + 10_000)
    return {"method": method, "gold": measured["gold"], "right_rate": measured["right_rate"], "kl": measured["kl"],
            "total_variation": statistics.fmean(o.total_variation for o in optima),
            "groups": [o.policy_probabilities for o in optima]}


def run_seed(seed: int, sft: GPT, tokenizer, task, task_config: TwoChoiceTaskConfig, args, enumerated: dict,
             sft_optima: list[PromptOptimum]) -> list[dict]:
    """Every method of the module docstring trained on one seed's comparisons: one row each."""
    settings = ppo_config(args, scale=1.0, seed=seed)
    scores = group_scores(task_config, settings.missing_eos_penalty)
    comparisons = rater_comparisons(sft, tokenizer, task.prompts, lambda text: task_config.completion_score(text, True),
                                    args.comparisons, args.rater_temperature, settings.max_new_tokens, seed)
    rows = []
    for loss in ("dpo", "ipo"):
        started = time.perf_counter()
        policy = train_preference_policy(sft, tokenizer, comparisons, dpo_config(args, loss, seed))
        wall = time.perf_counter() - started
        rows.append({**measured_row(loss.upper(), policy, sft, tokenizer, task, task_config, args, settings, seed),
                     "completions": 0, "wall_seconds": wall})

    started = time.perf_counter()
    reward_model = train_reward(sft, tokenizer, comparisons, task.prompts, args, seed, settings.max_new_tokens)
    reward_wall = time.perf_counter() - started
    scale = float(reward_model.scale)
    started = time.perf_counter()
    trainer = RLHFTrainer(ppo_config(args, scale, seed), sft, tokenizer,
                          dataclasses.replace(task, reward=reward_model.score_batch), progress=False)
    trainer.train()
    wall = reward_wall + time.perf_counter() - started
    ppo_row = measured_row("RM + PPO", trainer.policy, sft, tokenizer, task, task_config, args, settings, seed)
    reward_target = reward_model_optimum(reward_model, tokenizer, enumerated, sft_optima, scale * args.beta,
                                         settings.missing_eos_penalty)
    rows.append({**ppo_row, "completions": trainer.samples_seen, "wall_seconds": wall, "ppo_kl_coef": scale * args.beta,
                 "tv_to_own_target": statistics.fmean(total_variation(groups, target) for groups, target
                                                      in zip(ppo_row["groups"], reward_target)),
                 "own_target_tv_to_optimum": statistics.fmean(total_variation(target, o.optimum.probabilities)
                                                              for target, o in zip(reward_target, sft_optima))})

    started = time.perf_counter()
    bon = best_of_n_rows(enumerated, reward_model, tokenizer, sorted(set(args.best_of_n)), sft_optima, scores, settings)
    wall = reward_wall + time.perf_counter() - started
    rows += [{**row, "completions": row["n"], "wall_seconds": wall} for row in bon]
    if args.out_dir is not None:  # the figure's curve over n
        curve = best_of_n_rows(enumerated, reward_model, tokenizer, log_spaced_counts(max(args.best_of_n), 24),
                               sft_optima, scores, settings)
        rows += [{**row, "method": "best-of-n curve", "completions": row["n"], "wall_seconds": 0.0} for row in curve]
    for row in rows:
        row.update(seed=seed, comparisons=len(comparisons))
    return rows


# ---------------------------------------------------------------- the tables


WIDTHS = (16, 16, 16, 16, 12, 13, 8)


def _line(name: str, cells: list[str]) -> str:
    return f"{name:<13}" + "".join(f"{cell:>{width}}" for cell, width in zip(cells, WIDTHS))


def print_tables(rows: list[dict], sft_row: dict, optimum_row: dict, ipo_row: dict, args) -> None:
    seeds = sorted({r["seed"] for r in rows})
    print(f"\nat β = {args.beta:g}, rater temperature t = {args.rater_temperature:g} (target "
          f"π_ref·exp(r/{args.rater_temperature * args.beta:g})), {args.comparisons} comparisons; mean ± sd over seeds "
          f"{seeds} (gold, right and KL of DPO, IPO and PPO on fresh samples; the rest exact)")
    print(_line("", ["gold E[r]", "right", "KL to SFT", "TV to π*", "comparisons", "completions", "wall s"]))
    print(_line("SFT", [f"{sft_row['gold']:.3f}", f"{sft_row['right_rate']:.3f}", "0",
                        f"{sft_row['total_variation']:.3f}", "—", "—", "—"]))
    by_method: dict[str, list[dict]] = {}
    for row in rows:
        if row["method"] != "best-of-n curve":
            by_method.setdefault(row["method"], []).append(row)
    for method, group in by_method.items():
        completions = group[0]["completions"]
        sampled = "—" if completions == 0 else (f"{completions}/answer" if method.startswith("best-of") else
                                                str(completions))
        print(_line(method + ("†" if method == "IPO" else ""),
                    [mean_sd([r[key] for r in group], 3) for key in ("gold", "right_rate", "kl", "total_variation")]
                    + [str(group[0]["comparisons"]), sampled, f"{statistics.fmean(r['wall_seconds'] for r in group):.1f}"]))
    print(_line("π*_β", [f"{optimum_row['gold']:.3f}", f"{optimum_row['right_rate']:.3f}", f"{optimum_row['kl']:.3f}",
                         f"{optimum_row['total_variation']:.3f}", "—", "—", "—"]))
    print(f"† IPO's optimum is not π*_β but π_IPO ∝ π_ref·exp(P(y ≻ π_ref)/β): gold {ipo_row['gold']:.3f}, right "
          f"{ipo_row['right_rate']:.3f}, KL {ipo_row['kl']:.3f}, TV(π_IPO, π*_β) {ipo_row['total_variation']:.3f}; "
          f"the IPO runs' TV to π_IPO: {mean_sd([r['tv_to_own_target'] for r in by_method['IPO']], 3)}")
    ppo_betas = [r["ppo_kl_coef"] for r in by_method["RM + PPO"]]
    print(f"RM + PPO ran at kl_coef s·β = {mean_sd(ppo_betas, 3)} (s: the reward model's normalising scale); its "
          f"target π_ref·exp(r̃/(s·β)), exact over the groups: TV to π*_β "
          f"{mean_sd([r['own_target_tv_to_optimum'] for r in by_method['RM + PPO']], 3)}, the PPO runs' TV to it "
          f"{mean_sd([r['tv_to_own_target'] for r in by_method['RM + PPO']], 3)}")
    print("\nbest-of-n under the learned reward model, exact: KL(π_bon ‖ π_ref) against log n − (n − 1)/n")
    print(f"{'n':>6}{'exact KL':>18}{'log n − (n−1)/n':>18}")
    for method, group in by_method.items():
        if method.startswith("best-of"):
            print(f"{group[0]['n']:>6}{mean_sd([r['kl'] for r in group], 3):>18}{group[0]['kl_bound']:>18.3f}")


def _plot(path: Path, rows: list[dict], sft_row: dict, optimum_curve: list[dict], args) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axis = plt.subplots(figsize=(7.5, 5))
    target = args.rater_temperature * args.beta
    axis.plot([p["kl"] for p in optimum_curve] + [0.0], [p["gold"] for p in optimum_curve] + [sft_row["gold"]], "-",
              color="black", lw=1.2, label=f"π* for t·β from {target * OPTIMUM_CURVE_FACTORS[0]:g} to "
              f"{target * OPTIMUM_CURVE_FACTORS[-1]:g}, and ∞ (SFT)")
    at_beta = next(p for p in optimum_curve if p["factor"] == 1.0)
    axis.plot([at_beta["kl"]], [at_beta["gold"]], "*", color="black", ms=14, label=f"π*_β (t·β = {target:g})")
    seeds = sorted({r["seed"] for r in rows})
    curve = [r for r in rows if r["method"] == "best-of-n curve"]
    ns = sorted({r["n"] for r in curve})
    axis.plot([statistics.fmean(r["kl"] for r in curve if r["n"] == n) for n in ns],
              [statistics.fmean(r["gold"] for r in curve if r["n"] == n) for n in ns], "o-", color="tab:orange",
              ms=3, label=f"best-of-n under the reward model, n = 1 … {max(ns)} (mean over seeds)")
    for method, marker, color in (("DPO", "s", "tab:blue"), ("IPO", "^", "tab:purple"), ("RM + PPO", "D", "tab:green")):
        points = [r for r in rows if r["method"] == method]
        axis.plot([r["kl"] for r in points], [r["gold"] for r in points], marker, color=color, ls="none", ms=7,
                  label=f"{method}, one point per seed")
    axis.plot([0], [sft_row["gold"]], "o", color="gray", ms=8, label="SFT")
    axis.set_xlabel("KL(π ‖ π_ref)  (nats)")
    axis.set_ylabel("gold E_π[r]")
    axis.set_title(f"{args.comparisons} comparisons, rater t = {args.rater_temperature:g}, β = {args.beta:g}, "
                   f"seeds {' '.join(map(str, seeds))}", fontsize=10)
    axis.grid(alpha=0.3)
    axis.legend(fontsize=7, loc="lower right")
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


# ---------------------------------------------------------------- the command


def _run(args) -> int:
    check_args(args)
    configure_process(1)
    task_config = TwoChoiceTaskConfig(person=args.person).validate()
    task = two_choice_task(task_config)
    sft, tokenizer = load_or_pretrain_sft(corpus.FOOD_CORPUS, cache_dir=args.sft_cache_dir, verbose=True)
    settings = ppo_config(args, scale=1.0, seed=0)
    scores = group_scores(task_config, settings.missing_eos_penalty)
    target = args.rater_temperature * args.beta
    sft_optima = target_optima(sft, sft, tokenizer, task.prompts, task_config, args.beta, args.rater_temperature,
                               settings, args.ending_threshold)
    references = [o.optimum.reference_probabilities for o in sft_optima]
    sft_gold, sft_right = exact_gold_and_right(references, scores)
    sft_row = {"gold": sft_gold, "right_rate": sft_right,
               "total_variation": statistics.fmean(o.total_variation for o in sft_optima)}
    optimum_curve = []
    for factor in OPTIMUM_CURVE_FACTORS:
        optima = [kl_regularised_optimum(reference, scores, target * factor) for reference in references]
        gold, right = exact_gold_and_right([o.probabilities for o in optima], scores)
        optimum_curve.append({"factor": factor, "beta": args.beta * factor, "gold": gold, "right_rate": right,
                              "kl": statistics.fmean(o.kl for o in optima)})
    optimum_row = {**next(p for p in optimum_curve if p["factor"] == 1.0),  # its TV: 0 when both paths use t·β
                   "total_variation": statistics.fmean(total_variation(kl_regularised_optimum(r, scores, target).probabilities,
                                                                       o.optimum.probabilities)
                                                       for r, o in zip(references, sft_optima))}
    ipo_targets = [ipo_target(reference, scores, args.beta, args.rater_temperature) for reference in references]
    ipo_gold, ipo_right = exact_gold_and_right(ipo_targets, scores)
    ipo_row = {"gold": ipo_gold, "right_rate": ipo_right,  # π_IPO ∝ π_ref inside each group: its KL over groups is exact
               "kl": statistics.fmean(group_kl(o, reference) for o, reference in zip(ipo_targets, references)),
               "total_variation": statistics.fmean(total_variation(o, s.optimum.probabilities)
                                                   for o, s in zip(ipo_targets, sft_optima))}
    print(f"{len(task.prompts)} prompts; exact: SFT gold {sft_gold:.3f}, π*_β (π_ref·exp(r/{target:g})) gold "
          f"{optimum_row['gold']:.3f} at KL {optimum_row['kl']:.3f} nats", flush=True)
    enumerated = enumerate_prompts(sft, tokenizer, task.prompts, args.enumeration_threshold, settings)

    rows = []
    for seed in args.seeds:
        seed_rows = run_seed(seed, sft, tokenizer, task, task_config, args, enumerated, sft_optima)
        for row in seed_rows:
            if row["method"] == "IPO":
                row["tv_to_own_target"] = statistics.fmean(total_variation(groups, o)
                                                           for groups, o in zip(row["groups"], ipo_targets))
            row.pop("groups", None)
            row.pop("grouped", None)
            if row["method"] != "best-of-n curve":
                print(f"seed {seed} {row['method']:>12}: gold {row['gold']:.3f}, right {row['right_rate']:.3f}, "
                      f"KL {row['kl']:.3f}, TV to π* {row['total_variation']:.3f}, {row['wall_seconds']:.1f} s",
                      flush=True)
        rows += seed_rows
    print_tables(rows, sft_row, optimum_row, ipo_row, args)
    written = []
    if args.out_dir is not None:
        written.append(_plot(args.out_dir / "preference_methods.png", rows, sft_row, optimum_curve, args))
    if args.json is not None:
        settings_out = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
        args.json.write_text(json.dumps({"settings": settings_out, "sft": sft_row, "optimum": optimum_row,
                                         "optimum_curve": optimum_curve, "ipo_target": ipo_row, "rows": rows},
                                        indent=2) + "\n")
        written.append(args.json)
    if written:
        print("wrote " + ", ".join(map(str, written)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
