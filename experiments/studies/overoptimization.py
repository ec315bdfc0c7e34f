"""Reward over-optimisation as a measured curve (Gao, Schulman & Hilton, 2022) on the food task.

    python -m experiments.studies.overoptimization                          # the figure and CSV in runs/overoptimization
    python -m experiments.studies.overoptimization --seed 3 --betas 0 0.03 0.15 --iterations 60
    python -m experiments.studies.overoptimization --preference-pairs 5000 --rater-noise 0   # a better proxy: no fall

The gold score is the hidden healthiness rule (`envs/token_task.py`: HEALTHINESS, −0.5 for
a malformed completion). The proxy is a Bradley–Terry reward model fitted, as in
InstructGPT, to comparisons of the SFT model's own samples, labelled by noisy raters who
prefer a over b with probability σ((gold(a) − gold(b)) / rater_noise). Two imperfections
follow, as in real reward models: few comparisons (and very few between the healthy foods
the SFT model rarely says), and a blind spot — the SFT model almost never writes a
malformed string, so the reward model has hardly seen one. Then, for prompt x:

* best-of-n, exactly: every completion with π_ref(y|x) ≥ --enumeration-threshold is
  enumerated with its probability (`ppo.lm.exact.enumeration`); π_bon, KL(π_bon ‖ π_ref) and
  E_bon[gold], E_bon[proxy] follow in closed form (`ppo.lm.exact.best_of_n`) for n = 1 … --best-of-n-max,
  next to the commonly quoted log n − (n−1)/n (an upper bound here);
* PPO against the proxy with a KL penalty β, for every β of --betas: gold, proxy and the
  sequence KL of each iteration's rollout, and of --eval-samples fresh samples at the end.

With d = √KL, the gold score gained over the SFT model is fitted by least squares
(`ppo.lm.exact.overoptimization_fit`) with d(α − βd) for best-of-n and d(α − β log d) for PPO (all
iterations of all β), each held inside the gold range the rule allows over the measured
distances; the KL at which each fit peaks is printed where it lies inside the measured range
(else the fit's best point there), with the β whose final policy has the best gold score. The output folder gets overoptimization.png,
overoptimization.csv (one row per point) and fits.json.
"""

from __future__ import annotations

import csv
import json
import math
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch

from envs import corpus
from envs.token_task import HEALTHINESS, MALFORMED_HEALTHINESS, healthiness, task_prompts
from experiments.commands.cli import OneLineArgumentParser, check_writable_folder, configure_process, run_with_user_errors
from experiments.tasks.food_task import FoodTaskConfig, food_task
from ppo.config import ConfigError
from ppo.lm.exact.best_of_n import best_of_n_curve, log_spaced_counts
from ppo.lm.exact.enumeration import enumerate_completions
from ppo.lm.exact.overoptimization_fit import OveroptimizationFit, fit_overoptimization
from ppo.lm.models.pretrain import load_or_pretrain_sft
from ppo.lm.algorithm.reward_model import RewardModel, encode_texts, train_reward_model
from ppo.lm.algorithm.rewards import sequence_kl
from ppo.lm.trainers.rlhf_config import RLHFConfig
from ppo.lm.trainers.rlhf_trainer import RLHFTrainer
from ppo.lm.algorithm.rollout import CompletionBatch, repeat_prompts, sample_completions, score_completions

PROG = "python -m experiments.studies.overoptimization"
DEFAULT_BETA = RLHFConfig.kl_coef  # the β of a default ppo-rlhf run
GOLD_RANGE = (MALFORMED_HEALTHINESS, max(HEALTHINESS.values()))  # every gold score the rule can give


def build_parser() -> OneLineArgumentParser:
    parser = OneLineArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    run = parser.add_argument_group("run")
    run.add_argument("--out-dir", type=Path, default=Path("runs/overoptimization"),
                     help="folder for overoptimization.png, overoptimization.csv and fits.json (default: runs/overoptimization)")
    run.add_argument("--sft-cache-dir", type=Path, default=None,
                     help="where the SFT checkpoint is cached (default: $PPO_CACHE_DIR or ~/.cache/ppo-from-scratch)")
    run.add_argument("--seed", type=int, default=1, help="seed of the comparisons, the reward model and every PPO run (default: 1)")
    run.add_argument("--num-threads", type=int, default=1, help="torch CPU threads (default: 1)")
    task = parser.add_argument_group("the task")
    task.add_argument("--person", default="ravin", help="whose prompt is optimised: a person of the corpus, or 'all' (default: ravin)")
    task.add_argument("--relation", default="likes", help="likes or hates (default: likes)")
    proxy = parser.add_argument_group("the proxy reward model")
    proxy.add_argument("--preference-pairs", type=int, default=300,
                       help="comparisons of two SFT samples (every person's prompt) the reward model is fitted to (default: 300)")
    proxy.add_argument("--rater-noise", type=float, default=0.1,
                       help="T of the raters: a ≻ b with probability σ((gold(a) − gold(b)) / T); 0 = never wrong (default: 0.1)")
    proxy.add_argument("--reward-model-steps", type=int, default=200, help="Bradley–Terry steps (default: 200)")
    proxy.add_argument("--reward-model-learning-rate", type=float, default=2e-3,
                       help="Adam learning rate of the reward model's trunk (default: 2e-3)")
    bon = parser.add_argument_group("best-of-n")
    bon.add_argument("--best-of-n-max", type=int, default=10_000, help="largest n (default: 10000)")
    bon.add_argument("--enumeration-threshold", type=float, default=1e-8,
                     help="enumerate every completion with π_ref(y|x) at least this (default: 1e-8)")
    ppo = parser.add_argument_group("PPO against the proxy")
    ppo.add_argument("--betas", type=float, nargs="+", default=[0.0, 0.001, 0.002, 0.003, 0.005, 0.01, 0.03],
                     metavar="BETA", help="KL coefficients β of the sweep, the default β = "
                     f"{DEFAULT_BETA:g} always added (default: 0 0.001 0.002 0.003 0.005 0.01 0.03: on the food task "
                     "the outcome changes between 0.001 and 0.01)")
    ppo.add_argument("--iterations", type=int, default=100, help="PPO iterations per β (default: 100)")
    ppo.add_argument("--batch-size", type=int, default=128, help="completions per PPO iteration (default: 128)")
    ppo.add_argument("--max-new-tokens", type=int, default=RLHFConfig.max_new_tokens,
                     help=f"completion length limit in tokens (default: {RLHFConfig.max_new_tokens})")
    ppo.add_argument("--eval-samples", type=int, default=1_000,
                     help="fresh samples measuring each β's final policy (default: 1000)")
    return parser


@dataclass
class Settings:
    """The command's flags, checked."""

    out_dir: Path
    sft_cache_dir: Path | None
    seed: int
    num_threads: int
    prompts: list[str]
    preference_pairs: int
    rater_noise: float
    reward_model_steps: int
    reward_model_learning_rate: float
    best_of_n_max: int
    enumeration_threshold: float
    betas: list[float]  # the sweep, with the default β always in it
    ppo: RLHFConfig  # the trainer's settings, all but kl_coef
    eval_samples: int


def settings_from(args) -> Settings:
    """Raise ConfigError (one line) naming the first impossible flag."""
    if args.person != "all" and args.person not in corpus.PEOPLE:
        raise ConfigError(f"person = {args.person!r} is not in the corpus; allowed: all, {', '.join(corpus.PEOPLE)}")
    if args.relation not in corpus.RELATIONS:
        raise ConfigError(f"relation = {args.relation!r} is not one of {', '.join(corpus.RELATIONS)}")
    for name in ("preference_pairs", "reward_model_steps", "best_of_n_max", "eval_samples", "num_threads"):
        if getattr(args, name) < 1:
            raise ConfigError(f"{name} = {getattr(args, name)} must be a positive integer")
    if not (math.isfinite(args.rater_noise) and args.rater_noise >= 0):
        raise ConfigError(f"rater_noise = {args.rater_noise} must be a finite number ≥ 0")
    if not (math.isfinite(args.reward_model_learning_rate) and args.reward_model_learning_rate > 0):
        raise ConfigError(f"reward_model_learning_rate = {args.reward_model_learning_rate} must be a finite number > 0")
    if not 0 < args.enumeration_threshold < 1:
        raise ConfigError(f"enumeration_threshold = {args.enumeration_threshold} must be in (0, 1)")
    if any(not (math.isfinite(beta) and beta >= 0) for beta in args.betas):
        raise ConfigError(f"betas = {' '.join(map(str, args.betas))}: every β must be a finite number ≥ 0")
    ppo = RLHFConfig(iterations=args.iterations, batch_size=args.batch_size, max_new_tokens=args.max_new_tokens,
                     seed=args.seed, num_threads=args.num_threads, sample_every=0, tensorboard=False).validate()
    return Settings(args.out_dir, args.sft_cache_dir, args.seed, args.num_threads,
                    task_prompts(args.person, args.relation), args.preference_pairs, args.rater_noise,
                    args.reward_model_steps, args.reward_model_learning_rate, args.best_of_n_max,
                    args.enumeration_threshold, sorted(set(args.betas) | {DEFAULT_BETA}), ppo, args.eval_samples)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_with_user_errors(PROG, lambda: _run(settings_from(args), args.relation))


# ---------------------------------------------------------------- the proxy


def rater_comparisons(sft, tokenizer, relation: str, num_pairs: int, rater_noise: float, max_new_tokens: int,
                      seed: int) -> list[tuple[str, str, str]]:
    """(prompt, chosen, rejected): two SFT samples of a random person's prompt, labelled by a noisy rater.

    The rater prefers a with probability σ((gold(a) − gold(b)) / T) (always the healthier at
    T = 0); pairs of equal gold or without EOS are dropped, so there may be fewer than asked.
    """
    rng = random.Random(seed)
    prompts = [corpus.prompt(rng.choice(corpus.PEOPLE), relation) for _ in range(num_pairs)]
    batch = sample_completions(sft, tokenizer, [p for p in prompts for _ in range(2)], max_new_tokens,
                               generator=torch.Generator().manual_seed(seed))
    pairs = []
    for i, prompt in enumerate(prompts):
        (a, b), ended = batch.texts[2 * i : 2 * i + 2], batch.ended_with_eos[2 * i : 2 * i + 2]
        gold_a, gold_b = healthiness(a), healthiness(b)
        if not bool(ended.all()) or gold_a == gold_b:
            continue
        if rater_noise > 0:
            prefers_a = rng.random() < 1 / (1 + math.exp(-(gold_a - gold_b) / rater_noise))
        else:
            prefers_a = gold_a > gold_b
        pairs.append((prompt, a, b) if prefers_a else (prompt, b, a))
    return pairs


def train_proxy(settings: Settings, sft, tokenizer, relation: str) -> tuple[RewardModel, int]:
    """The proxy reward model, normalised to mean 0 and std 1 on the SFT model's completions of the task's prompts."""
    pairs = rater_comparisons(sft, tokenizer, relation, settings.preference_pairs, settings.rater_noise,
                              settings.ppo.max_new_tokens, settings.seed)
    if not pairs:
        raise ConfigError(f"preference_pairs = {settings.preference_pairs} gave no usable comparison; ask for more")
    model, _ = train_reward_model(sft, tokenizer, pairs, settings.reward_model_steps,
                                  settings.reward_model_learning_rate, seed=settings.seed)
    model.normalize_on(sample_completions(sft, tokenizer, repeat_prompts(settings.prompts, 512),
                                          settings.ppo.max_new_tokens,
                                          generator=torch.Generator().manual_seed(settings.seed + 1)))
    return model, len(pairs)


def gold_scores(batch: CompletionBatch) -> torch.Tensor:
    """The hidden rule of every completion of a batch. (B,)"""
    return torch.tensor([healthiness(text, bool(eos)) for text, eos in zip(batch.texts, batch.ended_with_eos)],
                        dtype=torch.float64)


class GoldRecorder:
    """The proxy's scores for PPO; the mean gold score of every batch it scored, on the side."""

    def __init__(self, reward_model: RewardModel):
        self.reward_model = reward_model
        self.gold_means: list[float] = []

    def __call__(self, batch: CompletionBatch) -> torch.Tensor:
        self.gold_means.append(float(gold_scores(batch).mean()))
        return self.reward_model.score_batch(batch)


# ---------------------------------------------------------------- best-of-n, exactly


@torch.no_grad()
def best_of_n_points(settings: Settings, sft, tokenizer, reward_model: RewardModel) -> tuple[list[dict], float]:
    """Exact best-of-n rows for n on a log grid, averaged over the prompts; and the largest residual mass."""
    ns = log_spaced_counts(settings.best_of_n_max)
    per_prompt, residuals = [], []
    for prompt in settings.prompts:
        found = enumerate_completions(sft, tokenizer, prompt, settings.enumeration_threshold,
                                      settings.ppo.max_new_tokens, settings.ppo.temperature)
        tokens, last = encode_texts(tokenizer, [prompt + text for text in found.texts])
        proxy = reward_model(tokens, last).double()  # (N,)
        ended = torch.tensor(found.ended_with_eos)
        proxy = torch.where(ended, proxy, torch.full_like(proxy, settings.ppo.missing_eos_penalty))
        gold = torch.tensor([healthiness(t, e) for t, e in zip(found.texts, found.ended_with_eos)], dtype=torch.float64)
        # the residual (completions rarer than the threshold) is one more outcome, never the best of n
        probabilities = torch.cat([found.probabilities, torch.tensor([found.residual], dtype=torch.float64)])
        proxy = torch.cat([proxy, proxy.min().reshape(1) - 1.0])
        gold = torch.cat([gold, torch.tensor([MALFORMED_HEALTHINESS], dtype=torch.float64)])
        per_prompt.append(best_of_n_curve(probabilities / probabilities.sum(), proxy, gold, ns))
        residuals.append(found.residual)
    rows = []
    for points in zip(*per_prompt):
        mean = lambda name: sum(getattr(p, name) for p in points) / len(points)  # noqa: E731
        rows.append({"method": "best_of_n", "n": points[0].n, "kl": mean("kl"), "kl_bound": points[0].kl_bound,
                     "proxy": mean("proxy"), "gold": mean("gold")})
    return rows, max(residuals)


# ---------------------------------------------------------------- PPO over a sweep of β


@torch.no_grad()
def measure(policy, reference, tokenizer, reward_model: RewardModel, settings: Settings, seed: int) -> dict:
    """Proxy (missing-EOS penalty where EOS is missing), gold and KL (k1) of fresh samples of `policy`."""
    config = settings.ppo
    batch = sample_completions(policy, tokenizer, repeat_prompts(settings.prompts, settings.eval_samples),
                               config.max_new_tokens, config.temperature, torch.Generator().manual_seed(seed))
    proxy = torch.where(batch.ended_with_eos, reward_model.score_batch(batch),
                        torch.tensor(config.missing_eos_penalty))
    kl = sequence_kl(score_completions(policy, batch, config.temperature).log_probs,
                     score_completions(reference, batch, config.temperature).log_probs, batch.mask, "k1")
    counts = Counter(text + ("" if eos else "…") for text, eos in zip(batch.texts, batch.ended_with_eos.tolist()))
    return {"kl": float(kl.mean()), "proxy": float(proxy.mean()), "gold": float(gold_scores(batch).mean()),
            "most_frequent": ", ".join(f"{text!r} {count / len(batch):.0%}" for text, count in counts.most_common(2))}


def ppo_points(settings: Settings, sft, tokenizer, reward_model: RewardModel, relation: str) -> list[dict]:
    """For every β: one row per training iteration (its rollout) and one for the final policy (fresh samples)."""
    rows = []
    person = "all" if len(settings.prompts) > 1 else settings.prompts[0].split(" ")[0]
    task_config = FoodTaskConfig(person=person, relation=relation, reward="model").validate()
    for beta in settings.betas:
        recorder = GoldRecorder(reward_model)
        trainer = RLHFTrainer(settings.ppo.replace(kl_coef=beta), sft, tokenizer,
                              food_task(task_config, reward=recorder), progress=False)
        trainer.train()
        for iteration, (metrics, gold) in enumerate(zip(trainer.history, recorder.gold_means), start=1):
            kl = metrics.get("sequence_kl_full", metrics["sequence_kl"])
            rows.append({"method": "ppo", "beta": beta, "iteration": iteration, "kl": kl,
                         "proxy": metrics["score"], "gold": gold})
        final = measure(trainer.policy, trainer.reference, tokenizer, reward_model, settings, settings.seed + 10_000)
        rows.append({"method": "ppo_final", "beta": beta, "iteration": settings.ppo.iterations, **final})
        print(f"  β = {beta:<5g} final: gold {final['gold']:+.3f}, proxy {final['proxy']:+.3f}, "
              f"KL {final['kl']:.2f} nats (√KL {math.sqrt(max(final['kl'], 0)):.2f}); {final['most_frequent']}", flush=True)
    return rows


# ---------------------------------------------------------------- the command


def _run(settings: Settings, relation: str) -> int:
    check_writable_folder(settings.out_dir, "--out-dir")
    configure_process(settings.num_threads)
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    sft, tokenizer = load_or_pretrain_sft(corpus.FOOD_CORPUS, cache_dir=settings.sft_cache_dir)
    room = sft.config.block_size - max(len(tokenizer.encode(p)) for p in settings.prompts)
    if settings.ppo.max_new_tokens > room:
        raise ConfigError(f"max_new_tokens = {settings.ppo.max_new_tokens} does not fit: the model has room for "
                          f"{room} tokens after the longest prompt")

    reward_model, num_pairs = train_proxy(settings, sft, tokenizer, relation)
    food_scores = _food_scores(reward_model, tokenizer, settings.prompts[0])
    print(f"proxy: a reward model fitted to {num_pairs} comparisons of SFT samples (rater noise T = "
          f"{settings.rater_noise:g}); for {settings.prompts[0]!r} (gold in brackets): "
          + ", ".join(f"{food} {score:+.2f} [{healthiness(food):.2f}]"
                      for food, score in sorted(food_scores.items(), key=lambda kv: -kv[1])))

    bon_rows, residual = best_of_n_points(settings, sft, tokenizer, reward_model)
    gold_sft = bon_rows[0]["gold"]  # n = 1 is π_ref itself
    print(f"best-of-n: exact for n = 1 … {settings.best_of_n_max:,} over every completion with π_ref ≥ "
          f"{settings.enumeration_threshold:g} (residual mass {residual:.1e}, so within total variation "
          f"{1 - (1 - residual) ** settings.best_of_n_max:.2g} at the largest n)")
    print(f"PPO against the proxy: {settings.ppo.iterations} iterations × {settings.ppo.batch_size} completions for "
          f"each β of {' '.join(f'{b:g}' for b in settings.betas)}")
    ppo_rows = ppo_points(settings, sft, tokenizer, reward_model, relation)

    rows = bon_rows + ppo_rows
    for row in rows:
        row["sqrt_kl"] = math.sqrt(max(row["kl"], 0.0))
        row["gold_gain"] = row["gold"] - gold_sft
    fits = {
        "best_of_n": fit_gold_curve("best_of_n", bon_rows, gold_sft),
        "rl": fit_gold_curve("rl", [r for r in ppo_rows if r["method"] == "ppo"], gold_sft),
    }
    finals = {r["beta"]: r for r in ppo_rows if r["method"] == "ppo_final"}
    best_beta = max(finals, key=lambda beta: finals[beta]["gold"])
    print(f"SFT model: gold {gold_sft:+.3f}, proxy {bon_rows[0]['proxy']:+.3f}")
    for name, fit in fits.items():
        label = "best-of-n: R = d(α − βd)    " if name == "best_of_n" else "PPO:       R = d(α − β log d)"
        print(f"{label} {describe_fit(fit, gold_sft)}")
    print(f"best final gold at KL coefficient β = {best_beta:g}: gold {finals[best_beta]['gold']:+.3f}, KL "
          f"{finals[best_beta]['kl']:.2f}; the default β = {DEFAULT_BETA:g}: gold {finals[DEFAULT_BETA]['gold']:+.3f}, "
          f"KL {finals[DEFAULT_BETA]['kl']:.2f}")

    csv_path = _write_csv(settings.out_dir / "overoptimization.csv", rows)
    figure_path = _plot(settings.out_dir / "overoptimization.png", bon_rows, ppo_rows, fits, gold_sft, settings)
    cpu_seconds, wall_seconds = time.process_time() - cpu_start, time.perf_counter() - wall_start
    summary = {"gold_sft": gold_sft, "proxy_sft": bon_rows[0]["proxy"], "residual_mass": residual,
               "fits": {name: fit and fit.to_dict() for name, fit in fits.items()}, "best_beta": best_beta,
               "default_beta": DEFAULT_BETA, "final": {str(beta): row for beta, row in finals.items()},
               "comparisons": num_pairs, "food_scores": food_scores, "cpu_seconds": cpu_seconds,
               "wall_seconds": wall_seconds,
               "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(settings).items() if k != "ppo"}}
    (settings.out_dir / "fits.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"{cpu_seconds:.0f} s CPU, {wall_seconds:.0f} s wall-clock; wrote {figure_path}, {csv_path}, "
          f"{settings.out_dir / 'fits.json'}")
    return 0


def fit_gold_curve(form: str, rows: list[dict], gold_sft: float) -> OveroptimizationFit | None:
    """The least-squares fit of `form` to the rows' (√KL, gold gain), held inside the gains the rule allows
    (GOLD_RANGE − gold_sft) over the measured distances; None when the points cannot determine it."""
    try:
        return fit_overoptimization(form, [r["sqrt_kl"] for r in rows], [r["gold_gain"] for r in rows],
                                    gain_bounds=(GOLD_RANGE[0] - gold_sft, GOLD_RANGE[1] - gold_sft))
    except ValueError:
        return None


def describe_fit(fit: OveroptimizationFit | None, gold_sft: float) -> str:
    """One line: the coefficients, and the peak where it lies inside the measured range (else the fit's best there)."""
    if fit is None:
        return "too few distinct distances to fit"
    text = (f"α = {fit.alpha:.4f}, β = {fit.beta:.4f} (rms error {fit.rms_error:.3f} over {fit.num_points} points, "
            f"KL ≤ {fit.largest_distance ** 2:.2f} measured); ")
    if fit.peak_in_range:
        return text + (f"gold peaks at KL {fit.peak_kl:.2f} nats (d = {fit.peak_distance:.2f}), "
                       f"gold {gold_sft + fit.best_in_range[1]:+.3f}")
    distance, gain = fit.best_in_range
    beyond = f"at KL {fit.peak_kl:.2f}" if math.isfinite(fit.peak_kl) else "nowhere"
    return text + (f"no peak inside the measured range: the fit is highest at KL {distance ** 2:.2f}, gold "
            f"{gold_sft + gain:+.3f} (the form's own peak lies {beyond}, an extrapolation)")


@torch.no_grad()
def _food_scores(reward_model: RewardModel, tokenizer, prompt: str) -> dict[str, float]:
    tokens, last = encode_texts(tokenizer, [prompt + food for food in corpus.FOODS])
    return dict(zip(corpus.FOODS, reward_model(tokens, last).tolist()))


CSV_COLUMNS = ("method", "beta", "iteration", "n", "kl", "kl_bound", "sqrt_kl", "proxy", "gold", "gold_gain")


def _write_csv(path: Path, rows: list[dict]) -> Path:
    with path.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({key: row.get(key, "") for key in CSV_COLUMNS})
    return path


def _plot(path: Path, bon_rows: list[dict], ppo_rows: list[dict], fits: dict[str, OveroptimizationFit | None],
          gold_sft: float, settings: Settings) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (bon_axis, gold_axis, proxy_axis) = plt.subplots(1, 3, figsize=(17, 4.6))
    d = [r["sqrt_kl"] for r in bon_rows]
    bon_axis.plot(d, [r["gold"] for r in bon_rows], "o-", color="tab:orange", ms=3, label="gold (exact)")
    bon_axis.plot([math.sqrt(r["kl_bound"]) for r in bon_rows], [r["gold"] for r in bon_rows], ":", color="tab:orange",
                  label="gold against √(log n − (n−1)/n)")
    if fits["best_of_n"] is not None:
        _plot_fit(bon_axis, fits["best_of_n"], max(d), gold_sft, "fit d(α − βd)")
    proxy_twin = bon_axis.twinx()
    proxy_twin.plot(d, [r["proxy"] for r in bon_rows], "s-", color="tab:blue", ms=3, label="proxy (exact)")
    proxy_twin.set_ylabel("proxy score (reward model)", color="tab:blue")
    for n in (1, 10, 100, 1_000, 10_000):
        row = next((r for r in bon_rows if r["n"] == n), None)
        if row is not None:
            bon_axis.annotate(f"n={n:,}", (row["sqrt_kl"], row["gold"]), fontsize=7, xytext=(2, 4),
                              textcoords="offset points")
    bon_axis.set_title(f"best-of-n, exact (n = 1 … {settings.best_of_n_max:,})")
    handles = bon_axis.get_legend_handles_labels()
    twin_handles = proxy_twin.get_legend_handles_labels()
    bon_axis.legend(handles[0] + twin_handles[0], handles[1] + twin_handles[1], fontsize=7, loc="lower left")

    colors = plt.get_cmap("viridis")
    betas = settings.betas
    for index, beta in enumerate(betas):
        color = colors(index / max(1, len(betas) - 1))
        training = [r for r in ppo_rows if r["method"] == "ppo" and r["beta"] == beta]
        final = next(r for r in ppo_rows if r["method"] == "ppo_final" and r["beta"] == beta)
        label = f"β = {beta:g}" + (" (default)" if beta == DEFAULT_BETA else "")
        for axis, key in ((gold_axis, "gold"), (proxy_axis, "proxy")):
            axis.plot([r["sqrt_kl"] for r in training], [r[key] for r in training], "-", color=color, alpha=0.7,
                      lw=1.2, label=label)
            axis.plot([final["sqrt_kl"]], [final[key]], "*", color=color, ms=10, mec="black", mew=0.5)
    largest = max(r["sqrt_kl"] for r in ppo_rows)
    if fits["rl"] is not None:
        _plot_fit(gold_axis, fits["rl"], largest, gold_sft, "fit d(α − β log d), all iterations")
    gold_axis.set_title("PPO against the proxy: gold score over training")
    proxy_axis.set_title("PPO against the proxy: proxy score over training")
    gold_axis.legend(fontsize=7, loc="lower left")
    for axis in (bon_axis, gold_axis, proxy_axis):
        axis.set_xlabel("d = √KL(π ‖ π_ref)  (√nats)")
        axis.grid(alpha=0.3)
    bon_axis.set_ylabel("gold score (hidden healthiness rule)", color="tab:orange")
    gold_axis.set_ylabel("gold score")
    proxy_axis.set_ylabel("proxy score (reward model)")
    figure.suptitle(f"Reward over-optimisation on {settings.prompts[0]!r}: ★ = final policy on fresh samples, "
                    f"seed {settings.seed}", fontsize=10)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def _plot_fit(axis, fit: OveroptimizationFit, largest_d: float, gold_sft: float, label: str) -> None:
    grid = torch.linspace(0, max(largest_d, 1e-3), 200, dtype=torch.float64)
    axis.plot(grid.tolist(), (gold_sft + fit.predict(grid)).tolist(), "--", color="black", lw=1.2,
              label=f"{label}: α {fit.alpha:.3f}, β {fit.beta:.3f}")
    if math.isfinite(fit.peak_distance) and fit.peak_distance <= largest_d:
        axis.axvline(fit.peak_distance, color="gray", lw=0.8, ls=":")


if __name__ == "__main__":
    sys.exit(main())
