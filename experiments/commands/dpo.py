"""Fine-tune the tiny language model with DPO (or IPO) on comparisons of its own samples, and measure it exactly.

    ppo-dpo                                        # "ravin likes ", raters who prefer pizza, β 0.5
    ppo-dpo --loss ipo                             # IPO: its own optimum, printed next to π*_β
    ppo-dpo --beta 1 --rater-noise 0.5 --seed 3    # aims at ppo-rlhf --kl-coef 0.5's optimum too
    ppo-dpo --resume runs/dpo-pizza-dpo__seed1     # continue a stopped run from its last epoch

The comparisons are pairs of the SFT model's samples of the task's prompts, labelled by a
Bradley–Terry rater of the food task's rule r (--score for the target food then EOS, 0 for
anything else): the rater prefers a to b with probability σ((r(a) − r(b)) / T), T =
--rater-noise. A pair of one string twice (no information) or with a completion that ran out
of tokens (no text to compare) is dropped. The Bradley–Terry reward is r/T, so DPO's optimum is

    π*_β(y | x) ∝ π_ref(y | x) · exp(r(y) / (T·β)),

the exact optimum that `ppo-rlhf --kl-coef T·β` aims at (`ppo.lm.exact.optimum`); IPO aims at
π_ref·exp(p(y ≻ π_ref)/β) instead (`ppo.lm.trainers.dpo.ipo_optimum`). At the end the SFT model, the
trained policy and the optimum are compared: the exact target rate, the KL to the SFT model
(from fresh samples) and the total variation to the optimum over the answers, MALFORMED and
NO_EOS (`ppo.lm.exact.optimum_distance`). Every field of ppo.lm.trainers.dpo.DPOConfig is a flag. The run
folder gets config.json (DPOConfig), task.json (the task and the comparisons), metrics.csv
(one row per epoch), checkpoint.pt (policy and reference; `torch.load(..., weights_only=True)`)
and summary.json. The checkpoint is written after every epoch with what continues the run
(the comparisons themselves, the optimizer, the learning-rate schedule, the order
generator): Ctrl-C stops after the current epoch, and `--resume RUN_DIR` trains the epochs
left exactly as the uninterrupted run would have, then measures.
"""

from __future__ import annotations

import copy
import csv
import dataclasses
import io
import json
import math
import sys
import time
from pathlib import Path

import torch

from envs import corpus
from experiments.commands.cli import (
    INTERRUPTED_EXIT_CODE,
    GracefulStop,
    OneLineArgumentParser,
    add_dataclass_flags,
    check_writable_folder,
    configure_process,
    given_flags,
    run_with_user_errors,
)
from experiments.tasks.food_task import FoodTaskConfig, food_task
from experiments.commands.run_folder import RunFolderClaims, removed_if_refused
from ppo.trainers.base import CHECKPOINT_NAME
from ppo.runs.checkpoint import LOG_NAME, check_run_folder, load_checkpoint, save_checkpoint, write_run_file
from ppo.config import ConfigError, require_count, require_positive, require_threads
from ppo.lm.trainers.dpo import TRAINING_STATE, DPOConfig, encode_preference_pairs, ipo_optimum, train_dpo
from ppo.lm.trainers.rlhf_trainer import POLICY_STATE, lm_policy_from_state
from ppo.lm.trainers.evaluation import evaluate_lm_policy
from ppo.lm.exact.optimum import NO_EOS, rule_scores
from ppo.lm.exact.optimum_distance import distance_to_optimum, total_variation
from ppo.lm.models.pretrain import PretrainingInterrupted, cache_dir_source, load_or_pretrain_sft
from ppo.lm.algorithm.rollout import repeat_prompts, sample_completions

PROG = "ppo-dpo"
TASK_FLAGS = ("target_food", "person", "relation", "score")  # of FoodTaskConfig: the rule the raters follow


@dataclasses.dataclass
class Comparisons:
    """How the comparisons are made (the module docstring)."""

    pairs: int = 8_000
    rater_noise: float = 1.0
    max_new_tokens: int = 16

    def validate(self) -> Comparisons:
        require_count("pairs", self.pairs)
        require_positive("rater_noise", self.rater_noise)
        require_count("max_new_tokens", self.max_new_tokens)
        return self


def build_parser() -> OneLineArgumentParser:
    parser = OneLineArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    run = parser.add_argument_group("run")
    run.add_argument("--run-dir", type=Path, default=None,
                     help="run folder (default: runs/dpo-FOOD-LOSS__seedSEED, numbered if taken)")
    run.add_argument("--sft-cache-dir", type=Path, default=None,
                     help="where the SFT checkpoint is cached (default: $PPO_CACHE_DIR or ~/.cache/ppo-from-scratch)")
    run.add_argument("--eval-samples", type=int, default=1_000,
                     help="fresh completions of each model for the KL to the SFT model (default: 1000)")
    run.add_argument("--num-threads", type=int, default=1, help="torch CPU threads (default: 1)")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument("--resume", type=Path, default=None, metavar="RUN_DIR",
                     help="continue the run in RUN_DIR from its last epoch's checkpoint, with its settings and "
                     "comparisons (no setting may change), then measure it")
    add_dataclass_flags(parser.add_argument_group("the task (FoodTaskConfig): the rule the raters follow"),
                        FoodTaskConfig, skip=tuple(f.name for f in dataclasses.fields(FoodTaskConfig)
                                                   if f.name not in TASK_FLAGS))
    comparisons = parser.add_argument_group("the comparisons")
    comparisons.add_argument("--pairs", type=int, default=None,
                             help="pairs of SFT samples drawn and labelled; those dropped (one string twice, no EOS) "
                             f"are not replaced (default: {Comparisons.pairs})")
    comparisons.add_argument("--rater-noise", type=float, default=None,
                             help="T: a ≻ b with probability σ((r(a) − r(b)) / T); DPO's optimum is then "
                             f"π_ref·exp(r/(T·β)) (default: {Comparisons.rater_noise:g})")
    comparisons.add_argument("--max-new-tokens", type=int, default=None,
                             help=f"length limit of the sampled completions (default: {Comparisons.max_new_tokens})")
    add_dataclass_flags(parser.add_argument_group("DPO (DPOConfig)"), DPOConfig)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_with_user_errors(PROG, lambda: _run(args))


COMPARISON_FLAGS = ("pairs", "rater_noise", "max_new_tokens")  # the fields of Comparisons, as flags


def _run(args) -> int:
    require_count("eval_samples", args.eval_samples)
    require_threads(args.num_threads)
    if args.resume is not None:
        return _resume(args)
    config = DPOConfig(**given_flags(args, DPOConfig)).validate()
    task = FoodTaskConfig(**given_flags(args, FoodTaskConfig)).validate()
    comparisons = Comparisons(**{name: getattr(args, name) for name in COMPARISON_FLAGS
                                 if getattr(args, name) is not None}).validate()
    cache_dir, cache_name = cache_dir_source(args.sft_cache_dir, "--sft-cache-dir")
    if args.run_dir is not None:
        check_run_folder(args.run_dir, 0, resume_with=f"--resume {args.run_dir}", instead="another --run-dir")
    with removed_if_refused(cache_dir), RunFolderClaims(PROG) as claims:  # a refused command leaves no folder
        check_writable_folder(cache_dir, cache_name)
        run_dir = claims.new_run(args.run_dir, Path("runs") / f"dpo-{task.target_food.replace(' ', '_')}-"
                                                              f"{config.loss}__seed{config.seed}")
        configure_process(args.num_threads)
        try:
            with GracefulStop(PROG, "the current pretraining step") as stop:
                sft, tokenizer = load_or_pretrain_sft(corpus.FOOD_CORPUS, cache_dir=cache_dir,
                                                      stop=lambda: stop.requested)
        except PretrainingInterrupted as interrupted:  # the claim's release removes the run folder, still empty
            print(f"{PROG}: {interrupted}; run the same command again to continue", file=sys.stderr)
            return INTERRUPTED_EXIT_CODE
        room = sft.config.block_size - max(len(tokenizer.encode(prompt)) for prompt in task.prompts())
        if comparisons.max_new_tokens > room:
            raise ConfigError(f"max_new_tokens = {comparisons.max_new_tokens} does not fit the SFT model's context "
                              f"({sft.config.block_size} tokens, prompt included); at most {room}")
        return _train_and_measure(args, config, task, comparisons, sft, tokenizer, run_dir)


def rater_comparisons(sft, tokenizer, task: FoodTaskConfig, comparisons: Comparisons,
                      seed: int) -> list[tuple[str, str, str]]:
    """(prompt, chosen, rejected): two SFT samples of a prompt, a ≻ b with probability σ((r(a) − r(b)) / T)."""
    generator = torch.Generator().manual_seed(seed)
    prompts = repeat_prompts(task.prompts(), comparisons.pairs)
    batch = sample_completions(sft, tokenizer, [p for p in prompts for _ in range(2)], comparisons.max_new_tokens,
                               generator=generator)
    uniforms = torch.rand(comparisons.pairs, generator=generator, dtype=torch.float64).tolist()
    pairs = []
    for i, prompt in enumerate(prompts):
        (a, b), ended = batch.texts[2 * i : 2 * i + 2], batch.ended_with_eos[2 * i : 2 * i + 2]
        if a == b or not bool(ended.all()):
            continue
        r_a, r_b = (task.score if text == task.target_food else 0.0 for text in (a, b))
        exponent = min(-(r_a - r_b) / comparisons.rater_noise, 709.0)  # exp overflows a float beyond 709.78
        prefers_a = uniforms[i] < 1 / (1 + math.exp(exponent))
        pairs.append((prompt, a, b) if prefers_a else (prompt, b, a))
    return pairs


def _train_and_measure(args, config: DPOConfig, task: FoodTaskConfig, comparisons: Comparisons, sft, tokenizer,
                       run_dir: Path) -> int:
    pairs = rater_comparisons(sft, tokenizer, task, comparisons, config.seed)
    if not pairs:
        raise ConfigError(f"pairs = {comparisons.pairs} gave no usable comparison; ask for more")
    target = task.target_food
    print(f"{config.loss.upper()}: {config.epochs} epochs over {len(pairs)} comparisons of "
          f"{', '.join(repr(p) for p in task.prompts())} (of {comparisons.pairs} pairs drawn), rater noise "
          f"{comparisons.rater_noise:g} ({target} ≻ another answer with probability "
          f"{1 / (1 + math.exp(-task.score / comparisons.rater_noise)):.1%}), β {config.beta:g}, seed {config.seed}")
    (run_dir / "config.json").write_text(json.dumps(config.to_dict(), indent=2) + "\n")
    (run_dir / "task.json").write_text(json.dumps({**{name: getattr(task, name) for name in TASK_FLAGS},
                                                   **dataclasses.asdict(comparisons),
                                                   "usable_pairs": len(pairs)}, indent=2) + "\n")
    return _train_epochs(args, config, task, comparisons, sft, copy.deepcopy(sft), tokenizer, pairs, run_dir, None)


def _resume(args) -> int:
    """Continue the run in --resume from its last epoch: its settings, its comparisons, its state."""
    given = [name for name in (*given_flags(args, DPOConfig), *given_flags(args, FoodTaskConfig))]
    given += [name for name in (*COMPARISON_FLAGS, "run_dir") if getattr(args, name) is not None]
    if given:
        raise ConfigError(f"--resume keeps the run's settings and comparisons; none may change "
                          f"(got {', '.join('--' + name.replace('_', '-') for name in given)})")
    with RunFolderClaims(PROG) as claims:
        run_dir = claims.resumed(args.resume)
        state = load_checkpoint(run_dir, required_keys=(*POLICY_STATE, "pairs", "task", "comparisons", *TRAINING_STATE),
                                kind=PROG)
        try:
            config = DPOConfig.from_dict(state["config"]).validate()
            task = FoodTaskConfig.from_dict(state["task"]).validate()
            comparisons = Comparisons(**state["comparisons"]).validate()
        except (ConfigError, TypeError) as error:
            raise ConfigError(f"checkpoint {run_dir} has unusable settings ({error})") from None
        if len(state["history"]) >= config.epochs:
            raise ConfigError(f"run {run_dir} is complete ({config.epochs} epoch{'s' * (config.epochs > 1)}); "
                              "start a new run to train more")
        configure_process(args.num_threads)
        policy, sft, tokenizer = lm_policy_from_state(state, run_dir)  # the checkpoint is read once
        print(f"{config.loss.upper()}: resuming {run_dir} after epoch {len(state['history'])} of {config.epochs}, "
              f"{len(state['pairs'])} comparisons")
        pairs = [tuple(pair) for pair in state["pairs"]]
        return _train_epochs(args, config, task, comparisons, sft, policy, tokenizer, pairs, run_dir, state)


def _train_epochs(args, config: DPOConfig, task: FoodTaskConfig, comparisons: Comparisons, sft, policy, tokenizer,
                  pairs: list[tuple[str, str, str]], run_dir: Path, resume_from: dict | None) -> int:
    """Train (checkpoint and metrics.csv after every epoch, stoppable with Ctrl-C), then measure."""
    seconds_before = resume_from["train_seconds"] if resume_from is not None else 0.0
    start = time.perf_counter()

    def save(state: dict) -> bool:
        seconds = seconds_before + time.perf_counter() - start
        save_checkpoint({"config": config.to_dict(), "gpt_config": dataclasses.asdict(sft.config),
                         "tokenizer": tokenizer.state_dict(), "reference": sft.state_dict(),
                         "policy": policy.state_dict(), "pairs": [list(pair) for pair in pairs],
                         "task": dataclasses.asdict(task), "comparisons": dataclasses.asdict(comparisons),
                         "train_seconds": seconds, **state}, run_dir / CHECKPOINT_NAME)
        write_run_file(run_dir / LOG_NAME, _csv_text(state["history"]))
        return stop.requested

    with GracefulStop(PROG, "the current epoch") as stop:
        history = train_dpo(policy, sft, encode_preference_pairs(tokenizer, pairs), config,
                            progress=not args.no_progress, resume_from=resume_from, after_epoch=save)
    if len(history) < config.epochs:
        print(f"{PROG}: stopped after epoch {len(history)} of {config.epochs}; checkpoint saved. Resume with: "
              f"{PROG} --resume {run_dir}", file=sys.stderr)
        return INTERRUPTED_EXIT_CODE
    seconds = seconds_before + time.perf_counter() - start
    for row in (history[0], history[-1]):
        print(f"  epoch {row['epoch']}: loss {row['loss']:.4f}, implicit reward margin β·h {row['reward_margin']:+.3f}, "
              f"accuracy {row['reward_accuracy']:.1%}")
    summary = {"config": config.to_dict(), "comparisons": len(pairs), "train_seconds": seconds, "history": history,
               **_measure(args, config, task, comparisons, sft, policy, tokenizer)}
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"trained in {seconds:.1f} s; run folder {run_dir}: config.json, task.json, metrics.csv, "
          f"{CHECKPOINT_NAME}, summary.json")
    return 0


def _csv_text(rows: list[dict]) -> str:
    """`rows` as the text of a CSV file, their keys the header."""
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    return text.getvalue()


def _measure(args, config: DPOConfig, task: FoodTaskConfig, comparisons: Comparisons, sft, policy,
             tokenizer) -> dict:
    """Target rate (exact), KL to SFT (samples), TV to π*_β (and, for IPO, to its own optimum), averaged over prompts."""
    prompts, target, noise = task.prompts(), task.target_food, comparisons.rater_noise
    bradley_terry = rule_scores(corpus.FOODS, target, task.score / noise)  # the rater's log-odds scale: r / T
    per_prompt = distance_to_optimum(policy, sft, tokenizer, prompts, corpus.FOODS, lambda prompt: bradley_terry,
                                     config.beta, max_new_tokens=comparisons.max_new_tokens, missing_eos_penalty=0.0)

    def mean(values) -> float:
        values = list(values)
        return sum(values) / len(values)

    def ipo_target(result) -> dict[str, float]:
        reference = result.optimum.reference_probabilities
        return ipo_optimum(reference, lambda g, h: 1 / (1 + math.exp(-(bradley_terry.get(g, 0.0)
                                                                       - bradley_terry.get(h, 0.0)))),
                           config.beta, pair_distribution={g: p for g, p in reference.items() if g != NO_EOS})

    ipo = [ipo_target(result) for result in per_prompt] if config.loss == "ipo" else None
    generator = torch.Generator().manual_seed(config.seed + 10_000)
    evaluations = {name: evaluate_lm_policy(model, sft, tokenizer, food_task(task), args.eval_samples,
                                            max_new_tokens=comparisons.max_new_tokens, generator=generator,
                                            missing_eos_penalty=0.0)
                   for name, model in (("sft", sft), ("policy", policy))}
    rows = {
        "sft": {"target_rate": mean(r.optimum.reference_probabilities[target] for r in per_prompt),
                "kl_to_sft": 0.0,
                "tv_to_optimum": mean(total_variation(r.optimum.reference_probabilities, r.optimum.probabilities)
                                      for r in per_prompt)},
        "policy": {"target_rate": mean(r.policy_probabilities[target] for r in per_prompt),
                   "kl_to_sft": evaluations["policy"].kl_k1, "kl_to_sft_stderr": evaluations["policy"].kl_k1_stderr,
                   "tv_to_optimum": mean(r.total_variation for r in per_prompt)},
        "optimum": {"target_rate": mean(r.optimum.probabilities[target] for r in per_prompt),
                    "kl_to_sft": mean(r.optimum.kl for r in per_prompt), "tv_to_optimum": 0.0},
    }
    if ipo is not None:
        for name, groups in (("sft", [r.optimum.reference_probabilities for r in per_prompt]),
                             ("policy", [r.policy_probabilities for r in per_prompt])):
            rows[name]["tv_to_ipo_optimum"] = mean(total_variation(g, o) for g, o in zip(groups, ipo))
        rows["optimum"]["tv_to_ipo_optimum"] = mean(total_variation(r.optimum.probabilities, o)
                                                    for r, o in zip(per_prompt, ipo))
        rows["ipo_optimum"] = {"target_rate": mean(o[target] for o in ipo), "tv_to_ipo_optimum": 0.0,
                               "tv_to_optimum": rows["optimum"]["tv_to_ipo_optimum"],
                               "kl_to_sft": mean(sum(p * math.log(p / r.optimum.reference_probabilities[g])
                                                     for g, p in o.items() if p > 0) for o, r in zip(ipo, per_prompt))}

    label = {"sft": "SFT", "policy": config.loss.upper(), "optimum": "π*_β", "ipo_optimum": "IPO*"}
    print(f"{'':>5}  {target} rate (exact)  KL to SFT (nats)   TV to π*_β" + ("  TV to IPO*" if ipo else ""))
    for name, row in rows.items():
        kl = (f"{row['kl_to_sft']:.3f} ± {row['kl_to_sft_stderr']:.3f}" if "kl_to_sft_stderr" in row
              else f"{row['kl_to_sft']:.3f}")
        print(f"{label[name]:>5}  {row['target_rate']:>17.1%}  {kl:>16}   {row['tv_to_optimum']:>10.3f}"
              + (f"  {row['tv_to_ipo_optimum']:>11.3f}" if ipo else ""))
    print(f"π*_β ∝ π_ref·exp(r/(T·β)) with T·β = {noise * config.beta:g}: the optimum of ppo-rlhf --kl-coef "
          f"{noise * config.beta:g}" + ("; IPO* ∝ π_ref·exp(p(y ≻ π_ref)/β), IPO's own" if ipo else "")
          + f". KL of the policy from {args.eval_samples} fresh samples (k1), of the optima exact; TV over the foods, "
          "malformed and no-EOS completions")
    return {"measures": rows, "policy_examples": evaluations["policy"].examples}


if __name__ == "__main__":
    sys.exit(main())
