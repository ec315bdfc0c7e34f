"""PPO with a critic, RLOO and GRPO (and DPO on request) on the two-choice task, against the exact optimum π*_β.

    python -m experiments.studies.compare_lm_trainers                       # 3 algorithms × seeds 1 2 3
    python -m experiments.studies.compare_lm_trainers --seeds 4 5 --iterations 40 --json runs/compare_lm_trainers.json
    python -m experiments.studies.compare_lm_trainers --algorithms ppo grpo rloo dpo    # DPO as a fourth row

The two-choice task (`experiments/tasks/two_choice_task.py`) pays for a relation chosen at the
completion's first token combined with a food chosen six tokens later, for eight prompts
(one per person). Every algorithm trains from the same SFT model at the same β, with the
same number of completions (iterations × batch_size; RLOO and GRPO in groups of
group_size completions of one prompt) and the trainer's other defaults. Each run is then
measured on fresh samples at the training temperature and against π*_β ∝ π_ref·exp(r/β),
computed exactly per prompt (`ppo.lm.exact.optimum_distance`):

    gold        E_π[r]: the rule reward itself (likes a healthy food 1, hates an unhealthy one 0.5)
    right       share of right combinations (either kind)
    KL          KL(π ‖ π_ref), k1 over the samples
    TV to π*    ½ Σ_g |π(g) − π*(g)| over the 20 answers, MALFORMED and NO_EOS, exact, mean over prompts
    KL to π*    log Z − J(π)/β, from the samples (± its standard error)
    half-way    completions until the training batches' gold first reaches half-way from the SFT
                model's to π*'s (mean of two consecutive batches): sample efficiency

and where along the completion the KL is spent: the share of E_π[Σ_t KL(π(·|s_t) ‖ π_ref(·|s_t))]
(the exact per-state KL, summed over the vocabulary) at each token position t. The relation
is decided at t = 0, the food at t = 6 (and t = 7 for soda, salad, sushi).

GRPO runs as published, with β·k3 in the loss (`--kl-penalty loss-k3`, the only placement its
group normalisation allows): that penalty follows the reverse KL at each visited state, so
GRPO is not expected to land on π*_β. PPO and RLOO put k1 in the reward (reward-k1), whose
gradient is that of the objective E[r] − β·KL(π ‖ π_ref).

DPO (`ppo.lm.trainers.dpo`, only when named in --algorithms) samples no rollouts: it learns from
--dpo-comparisons pairs of the SFT model's own samples of the same prompts (the prompts in
turn), labelled by a rater who follows the Bradley–Terry model on the rule,
P(y₁ ≻ y₂) = σ(r(y₁) − r(y₂)) (`experiments/tasks/preference_rater.py`, temperature 1), so that
its optimum at the same β is the same π*_β. Its row reports the same measurements; its
"completions" are the 2N SFT samples of its N comparisons (the default N = iterations ×
batch_size / 2 makes them as many as each RL run samples), shown as "N pairs", and it has
no half-way point, no learning curve (no training batches) and no rollouts.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from envs import corpus
from experiments.commands.cli import OneLineArgumentParser, check_writable_file, configure_process, run_with_user_errors
from experiments.tasks.preference_rater import rater_comparisons
from experiments.tasks.two_choice_task import (
    ANSWERS,
    FOOD_POSITION,
    PAID,
    RELATION_POSITION,
    TwoChoiceTaskConfig,
    two_choice_task,
)
from ppo.config import ConfigError
from ppo.lm.trainers.dpo import DPOConfig, encode_preference_pairs, train_dpo
from ppo.lm.trainers.group_trainer import trainer_class
from ppo.lm.models.gpt import GPT
from ppo.lm.exact.optimum import NO_EOS
from ppo.lm.exact.optimum_distance import distance_to_optimum, group_kl, kl_to_optimum_from_samples
from ppo.lm.models.pretrain import load_or_pretrain_sft
from ppo.lm.trainers.rlhf_config import ALGORITHMS, RLHFConfig
from ppo.lm.trainers.rlhf_trainer import copy_with_value_head
from ppo.lm.algorithm.rollout import exact_token_kl, repeat_prompts, sample_completions, score_completions

PROG = "python -m experiments.studies.compare_lm_trainers"
DPO_DEFAULTS = DPOConfig()
CHOICES = (*ALGORITHMS, "dpo")  # dpo: trained on comparisons, not rollouts
POSITION_COLUMNS = ("t=0", "t=1-5", "t=6", "t=7", "t≥8")  # relation, rest of the relation, food, rest
COLUMN_WIDTHS = (16, 16, 16, 16, 16, 13, 13, 9)


@dataclass
class RunResult:
    algorithm: str
    seed: int
    gold: float
    right_rate: float
    kl: float
    total_variation: float
    kl_to_optimum: float
    kl_to_optimum_stderr: float
    completions: int
    wall_seconds: float
    halfway_completions: int | None  # None: never reached
    kl_shares: list[float]  # share of the KL at each column of POSITION_COLUMNS
    batch_golds: list[float] = field(default_factory=list)  # the training batches' mean score, one per iteration
    comparisons: int = 0  # DPO: the labelled pairs it learnt from (its completions: twice as many SFT samples)


def position_shares(exact_kl: torch.Tensor) -> list[float]:
    """(B, T) exact per-state KL of sampled completions -> its share at t = 0, 1–5, 6, 7, ≥ 8."""
    per_position = exact_kl.double().mean(0)  # (T,)
    total = float(per_position.sum())
    spans = ((0, 1), (1, FOOD_POSITION), (FOOD_POSITION, FOOD_POSITION + 1), (FOOD_POSITION + 1, FOOD_POSITION + 2),
             (FOOD_POSITION + 2, per_position.numel()))
    return [float(per_position[start:end].sum()) / total if total > 0 else float("nan") for start, end in spans]


def exact_gold_and_right(probabilities: list[dict[str, float]], scores: dict[str, float]) -> tuple[float, float]:
    """Mean over prompts of E_π[r] = Σ_g π(g)·r(g) and of the right-combination rate Σ_{g paid} π(g), exact,
    for π over the groups of each prompt (the answers, MALFORMED, NO_EOS) and r per group (`scores`)."""
    gold = statistics.fmean(sum(p * scores[g] for g, p in groups.items()) for groups in probabilities)
    right = statistics.fmean(sum(groups.get(a, 0.0) for a in PAID) for groups in probabilities)
    return gold, right


def first_reaching(values: list[float], level: float, batch_size: int) -> int | None:
    """Completions until the mean of two consecutive batches' values first reaches `level` (None if never)."""
    for i in range(1, len(values)):
        if (values[i - 1] + values[i]) / 2 >= level:
            return (i + 1) * batch_size
    return None


@torch.no_grad()
def measure_samples(policy: GPT, reference: GPT, tokenizer, task, config: RLHFConfig, log_z: dict[str, float],
                    num_samples: int, seed: int) -> dict:
    """Gold, right rate, k1 KL, KL(π ‖ π*) ± s.e. and the KL's position shares on `num_samples` fresh samples of π."""
    generator = torch.Generator().manual_seed(seed)
    prompts = repeat_prompts(task.prompts, num_samples)
    batch = sample_completions(policy, tokenizer, prompts, config.max_new_tokens, config.temperature, generator)
    scored = score_completions(policy, batch, config.temperature, with_distributions=True)
    reference_scored = score_completions(reference, batch, config.temperature, with_distributions=True)
    mask = batch.mask
    log_ratios = ((scored.log_probs - reference_scored.log_probs) * mask).sum(1)  # (N,)
    penalty = torch.full((num_samples,), config.missing_eos_penalty)
    scores = torch.where(batch.ended_with_eos, task.reward(batch).float(), penalty)  # (N,)
    kl_to_optimum = kl_to_optimum_from_samples(log_ratios, scores, torch.tensor([log_z[p] for p in prompts]),
                                               config.kl_coef)
    exact_kl = exact_token_kl(scored.distributions, reference_scored.distributions, mask)  # (N, T)
    return {"gold": float(scores.double().mean()), "right_rate": task.measure(batch)["target_rate"],
            "kl": float(log_ratios.double().mean()),
            "kl_to_optimum": kl_to_optimum, "kl_shares": position_shares(exact_kl)}


def measure_policy(policy: GPT, reference: GPT, tokenizer, task, task_config: TwoChoiceTaskConfig,
                   config: RLHFConfig, eval_samples: int, seed: int) -> dict:
    """`measure_samples` of a trained policy, with its TV to π*_β (exact, mean over prompts) under "total_variation"."""
    prompt_optima = distance_to_optimum(policy, reference, tokenizer, task.prompts, ANSWERS,
                                        lambda prompt: task_config.answer_scores(), config.kl_coef, config.temperature,
                                        max_new_tokens=config.max_new_tokens,
                                        missing_eos_penalty=config.missing_eos_penalty)
    log_z = {result.prompt: result.log_partition for result in prompt_optima}
    measured = measure_samples(policy, reference, tokenizer, task, config, log_z, eval_samples, seed + 10_000)
    return {**measured, "total_variation": statistics.fmean(r.total_variation for r in prompt_optima)}


def settings_of(algorithm: str, settings: dict) -> dict:
    """The shared settings as `algorithm` takes them: group_size only where groups of completions are sampled."""
    return settings if algorithm in ("grpo", "rloo") else {k: v for k, v in settings.items() if k != "group_size"}


def run_one(algorithm: str, seed: int, sft: GPT, tokenizer, task, task_config: TwoChoiceTaskConfig,
            settings: dict, eval_samples: int, sft_gold: float, optimum_gold: float) -> RunResult:
    config = RLHFConfig(algorithm=algorithm, seed=seed, tensorboard=False, sample_every=0,
                        **settings_of(algorithm, settings)).validate()
    trainer = trainer_class(algorithm)(config, sft, tokenizer, task, progress=False)
    golds: list[float] = []  # the training batches' mean score
    started = time.perf_counter()
    trainer.train(callback=lambda _trainer, metrics: golds.append(metrics["score"]))
    wall = time.perf_counter() - started
    measured = measure_policy(trainer.policy, trainer.reference, tokenizer, task, task_config, config, eval_samples,
                              seed)
    halfway = first_reaching(golds, (sft_gold + optimum_gold) / 2, config.batch_size)
    return RunResult(algorithm, seed, measured["gold"], measured["right_rate"], measured["kl"],
                     measured["total_variation"], *measured["kl_to_optimum"],
                     trainer.samples_seen, wall, halfway, measured["kl_shares"], golds)


def run_dpo(seed: int, sft: GPT, tokenizer, task, task_config: TwoChoiceTaskConfig, settings: dict,
            dpo_config: DPOConfig, num_comparisons: int, eval_samples: int) -> RunResult:
    """DPO at the same β on `num_comparisons` rater-labelled pairs of SFT samples (the module docstring)."""
    config = RLHFConfig(seed=seed, **settings_of("dpo", settings)).validate()
    comparisons = rater_comparisons(sft, tokenizer, task.prompts,
                                    lambda text: task_config.completion_score(text, True), num_comparisons, 1.0,
                                    config.max_new_tokens, seed)
    policy = copy_with_value_head(sft, value_head=False)
    reference = copy_with_value_head(sft, value_head=False).requires_grad_(False)
    started = time.perf_counter()
    train_dpo(policy, reference, encode_preference_pairs(tokenizer, comparisons), dpo_config.replace(seed=seed))
    wall = time.perf_counter() - started
    measured = measure_policy(policy, reference, tokenizer, task, task_config, config, eval_samples, seed)
    return RunResult("dpo", seed, measured["gold"], measured["right_rate"], measured["kl"],
                     measured["total_variation"], *measured["kl_to_optimum"], 2 * len(comparisons), wall, None,
                     measured["kl_shares"], comparisons=len(comparisons))


def mean_sd(values: list[float], digits: int) -> str:
    """"mean ± sd" (0 for a single value) with `digits` decimals."""
    mean = statistics.fmean(values)
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{mean:.{digits}f} ± {spread:.{digits}f}"


def _row(name: str, cells: list[str]) -> str:
    return f"{name:<7}" + "".join(f"{cell:>{width}}" for cell, width in zip(cells, COLUMN_WIDTHS))


def print_table(results: list[RunResult], sft_row: dict, optimum_row: dict, beta: float) -> None:
    print(f"\nat β = {beta:g}; mean ± sd over seeds {sorted({r.seed for r in results})} (gold, right and KL on fresh "
          f"samples; TV exact over the groups; SFT and π* rows exact)")
    print(_row("", ["gold E[r]", "right", "KL to SFT", "TV to π*", "KL(π‖π*)", "half-way at", "completions", "wall s"]))
    print(_row("SFT", [f"{sft_row['gold']:.3f}", f"{sft_row['right_rate']:.3f}", "0", f"{sft_row['total_variation']:.3f}",
                       f"{sft_row['kl_to_optimum']:.3f}"]))
    by_algorithm: dict[str, list[RunResult]] = {}
    for result in results:
        by_algorithm.setdefault(result.algorithm, []).append(result)
    for algorithm, rows in by_algorithm.items():
        reached = [r.halfway_completions for r in rows if r.halfway_completions is not None]
        halfway = "never" if not reached else f"{statistics.fmean(reached):.0f}" + (
            "" if len(reached) == len(rows) else f" ({len(reached)}/{len(rows)})")
        completions = str(rows[0].completions)
        if algorithm == "dpo":  # no training batches; its completions are the SFT samples of its comparisons
            halfway, completions = "—", f"{rows[0].comparisons} pairs"
        print(_row(algorithm.upper(), [mean_sd([r.gold for r in rows], 3), mean_sd([r.right_rate for r in rows], 3),
                                       mean_sd([r.kl for r in rows], 3), mean_sd([r.total_variation for r in rows], 3),
                                       mean_sd([r.kl_to_optimum for r in rows], 3), halfway, completions,
                                       f"{statistics.fmean(r.wall_seconds for r in rows):.1f}"]))
    print(_row("π*", [f"{optimum_row['gold']:.3f}", f"{optimum_row['right_rate']:.3f}", f"{optimum_row['kl']:.3f}", "0",
                      "0"]))
    trained = {algorithm: rows for algorithm, rows in by_algorithm.items() if rows[0].batch_golds}  # not DPO
    if trained:
        first = next(iter(trained.values()))[0]
        iterations = len(first.batch_golds)
        checkpoints = sorted({max(1, iterations * k // 8) for k in (1, 2, 4, 8)})
        batch_size = first.completions // iterations
        print("\nlearning curves: the training batches' gold after this many completions (mean over seeds)")
        print(f"{'':<7}" + "".join(f"{i * batch_size:>10}" for i in checkpoints))
        for algorithm, rows in trained.items():
            print(f"{algorithm.upper():<7}" + "".join(f"{statistics.fmean(r.batch_golds[i - 1] for r in rows):>10.3f}"
                                                      for i in checkpoints))
    print("\nwhere the KL is spent: share of E_π[Σ_t KL(π(·|s_t) ‖ π_ref(·|s_t))] at completion token t "
          f"(t = {RELATION_POSITION}: the relation, t = {FOOD_POSITION}: the food)")
    print(f"{'':<7}" + "".join(f"{column:>10}" for column in POSITION_COLUMNS))
    for algorithm, rows in by_algorithm.items():
        shares = [statistics.fmean(r.kl_shares[i] for r in rows) for i in range(len(POSITION_COLUMNS))]
        print(f"{algorithm.upper():<7}" + "".join(f"{share:>10.1%}" for share in shares))


def build_parser() -> OneLineArgumentParser:
    defaults = RLHFConfig()
    parser = OneLineArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--algorithms", nargs="+", default=list(ALGORITHMS), choices=CHOICES, metavar="ALGORITHM",
                        help=f"which to train ({', '.join(CHOICES)}; default: {' '.join(ALGORITHMS)})")
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3], help="seeds of every algorithm (default: 1 2 3)")
    parser.add_argument("--iterations", type=int, default=30, help="rollout + update cycles of every run (default: 30)")
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size,
                        help=f"completions per rollout (default: {defaults.batch_size})")
    parser.add_argument("--group-size", type=int, default=defaults.group_size,
                        help=f"RLOO/GRPO completions per prompt in a rollout (default: {defaults.group_size})")
    parser.add_argument("--kl-coef", type=float, default=defaults.kl_coef, help=f"β (default: {defaults.kl_coef})")
    parser.add_argument("--learning-rate", type=float, default=defaults.learning_rate,
                        help=f"policy learning rate (default: {defaults.learning_rate})")
    parser.add_argument("--dpo-comparisons", type=int, default=None,
                        help="DPO: rater-labelled pairs of SFT samples it learns from (default: iterations × "
                        "batch_size / 2, as many completions as an RL run samples)")
    parser.add_argument("--dpo-epochs", type=int, default=DPO_DEFAULTS.epochs,
                        help=f"DPO: passes over the comparisons (default: {DPO_DEFAULTS.epochs})")
    parser.add_argument("--dpo-learning-rate", type=float, default=DPO_DEFAULTS.learning_rate,
                        help=f"DPO: Adam learning rate, annealed to 0 (default: {DPO_DEFAULTS.learning_rate:g})")
    parser.add_argument("--eval-samples", type=int, default=2_000,
                        help="fresh completions per run for the measurements (default: 2000)")
    parser.add_argument("--sft-cache-dir", type=Path, default=None,
                        help="where the SFT checkpoint is cached (default: $PPO_CACHE_DIR or ~/.cache/ppo-from-scratch)")
    parser.add_argument("--json", type=Path, default=None, help="also write every run's figures to this file")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_with_user_errors(PROG, lambda: _run(args))


def _run(args) -> int:
    if args.kl_coef <= 0:
        raise ConfigError(f"kl_coef = {args.kl_coef} must be positive: π*_β and KL(π ‖ π*) need β > 0")
    if args.eval_samples < 2:
        raise ConfigError(f"eval_samples = {args.eval_samples} must be at least 2")
    settings = {"iterations": args.iterations, "batch_size": args.batch_size, "group_size": args.group_size,
                "kl_coef": args.kl_coef, "learning_rate": args.learning_rate}
    for algorithm in args.algorithms:  # every setting checked before anything is trained
        RLHFConfig(algorithm=algorithm if algorithm != "dpo" else "ppo", **settings_of(algorithm, settings)).validate()
    num_comparisons = args.iterations * args.batch_size // 2 if args.dpo_comparisons is None else args.dpo_comparisons
    for name, value in (("dpo_comparisons", num_comparisons), ("dpo_epochs", args.dpo_epochs)):
        if value < 1:
            raise ConfigError(f"{name} = {value} must be a positive integer")
    if not args.dpo_learning_rate > 0:
        raise ConfigError(f"dpo_learning_rate = {args.dpo_learning_rate} must be positive")
    dpo_config = DPOConfig(beta=args.kl_coef, learning_rate=args.dpo_learning_rate, epochs=args.dpo_epochs).validate()
    if args.json is not None:
        check_writable_file(args.json, "--json")
    configure_process(1)
    task_config = TwoChoiceTaskConfig()
    task = two_choice_task(task_config)
    sft, tokenizer = load_or_pretrain_sft(corpus.FOOD_CORPUS, cache_dir=args.sft_cache_dir, verbose=True)
    reference_config = RLHFConfig(**settings_of("ppo", settings))
    sft_optima = distance_to_optimum(sft, sft, tokenizer, task.prompts, ANSWERS, lambda prompt: task_config.answer_scores(),
                                     args.kl_coef, reference_config.temperature,
                                     max_new_tokens=reference_config.max_new_tokens,
                                     missing_eos_penalty=reference_config.missing_eos_penalty)
    scores = {**task_config.answer_scores(), NO_EOS: reference_config.missing_eos_penalty}
    sft_gold, sft_right = exact_gold_and_right([r.optimum.reference_probabilities for r in sft_optima], scores)
    optimum_gold, optimum_right = exact_gold_and_right([r.optimum.probabilities for r in sft_optima], scores)
    # π* ∝ π_ref inside each group, so KL(π_ref ‖ π*) over the groups is the KL over strings: exact
    sft_row = {"gold": sft_gold, "right_rate": sft_right,
               "total_variation": statistics.fmean(r.total_variation for r in sft_optima),
               "kl_to_optimum": statistics.fmean(group_kl(r.optimum.reference_probabilities, r.optimum.probabilities)
                                                 for r in sft_optima)}
    optimum_row = {"gold": optimum_gold, "right_rate": optimum_right,
                   "kl": statistics.fmean(r.optimum.kl for r in sft_optima)}
    print(f"{len(task.prompts)} prompts ({', '.join(repr(p) for p in task.prompts)}); exact gold: SFT "
          f"{sft_row['gold']:.3f}, π*_β {optimum_row['gold']:.3f} at KL {optimum_row['kl']:.3f} nats")

    results = []
    for algorithm in args.algorithms:
        for seed in args.seeds:
            if algorithm == "dpo":
                result = run_dpo(seed, sft, tokenizer, task, task_config, settings, dpo_config, num_comparisons,
                                 args.eval_samples)
            else:
                result = run_one(algorithm, seed, sft, tokenizer, task, task_config, settings, args.eval_samples,
                                 sft_row["gold"], optimum_row["gold"])
            results.append(result)
            print(f"{algorithm:>5} seed {seed}: gold {result.gold:.3f}, right {result.right_rate:.3f}, KL {result.kl:.3f}, TV to π* "
                  f"{result.total_variation:.3f}, KL to π* {result.kl_to_optimum:.3f} ± {result.kl_to_optimum_stderr:.3f}, "
                  f"{result.wall_seconds:.1f} s", flush=True)
    print_table(results, sft_row, optimum_row, args.kl_coef)
    if args.json is not None:
        if "dpo" in args.algorithms:
            settings = {**settings, "dpo_comparisons": num_comparisons, "dpo_epochs": args.dpo_epochs,
                        "dpo_learning_rate": args.dpo_learning_rate}
        args.json.write_text(json.dumps({"settings": settings, "sft": sft_row, "optimum": optimum_row,
                                         "runs": [vars(r) for r in results]}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
