"""Fine-tune the tiny language model with PPO and a KL penalty to its SFT starting point.

    python -m experiments.rlhf                                   # "ravin likes pizza", rule reward
    python -m experiments.rlhf --kl-coef 0                       # no penalty: the rule reward cannot be gamed,
                                                                 # so this lands on the same optimum
    python -m experiments.rlhf --algorithm rloo                  # no critic: leave-one-out baseline (or grpo)
    python -m experiments.rlhf --kl-target 2.0 --kl-coef 0.1     # adaptive β
    python -m experiments.rlhf --reward model --person all       # the full pipeline: preferences → reward model → PPO
    python -m experiments.rlhf --critic shared --seed 3
    python -m experiments.rlhf --resume runs/rlhf-pizza-rule__seed1           # continue a stopped run

Every field of ppo.lm.rlhf_config.RLHFConfig (the trainer) and of
experiments.food_task.FoodTaskConfig (the task) is a flag. The SFT model comes from the
cache (trained first if it is missing). The run folder gets config.json (the trainer's
settings), task.json, metrics.csv, TensorBoard events, checkpoint.pt, training_grid.png,
critic_values.png and summary.json. At the end the policy is measured on fresh samples
at the temperature it was trained at (--temperature, which the exact optimum uses too)
and compared with the SFT model and with the exact optimum of the
KL-regularised objective. Ctrl-C (or SIGTERM) finishes the current iteration, saves
the checkpoint and prints the --resume command; a resumed run continues bit for bit.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from pathlib import Path

import torch

from envs import corpus
from envs.token_task import HEALTHINESS, MALFORMED_HEALTHINESS, preference_pairs
from experiments.cli import (
    INTERRUPTED_EXIT_CODE,
    GracefulStop,
    OneLineArgumentParser,
    add_dataclass_flags,
    check_writable_folder,
    configure_process,
    given_flags,
    run_with_user_errors,
    train_stoppably,
)
from experiments.food_task import FoodTaskConfig, food_shares, food_task
from experiments.run_folder import RunFolderClaims, claim_on_process_zero
from experiments.sweep import ABBREVIATIONS, format_value, named_fields
from ppo.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from ppo.config import ConfigError
from ppo.lm.diagnostics import critic_values_along, plot_critic_values, plot_training_grid
from ppo.lm.evaluation import evaluate_lm_policy
from ppo.lm.optimum import MALFORMED, NO_EOS, malformed_group, optimum_over_prompts, rule_scores
from ppo.lm.pretrain import PretrainingInterrupted, default_cache_dir, load_or_pretrain_sft
from ppo.lm.reward_model import RewardModel, encode_comparisons, encode_texts, pairwise_accuracy, train_reward_model
from ppo.lm.kl_penalty import KL_PENALTIES
from ppo.lm.rlhf_config import RLHFConfig
from ppo.lm.group_trainer import trainer_class
from ppo.lm.rlhf_trainer import RLHFTrainer
from ppo.lm.rollout import repeat_prompts, sample_completions

PROG = "ppo-rlhf"
# run folder names: `__rloo`, `__klloss-k3`, else the field's name without underscores (`__kltarget2`)
NAME_ABBREVIATIONS = {**ABBREVIATIONS, "algorithm": "", "kl_penalty": "kl"}
NOT_IN_NAMES = ("target_food", "reward", "sample_every")  # the first two start the name; the last only prints


def run_folder_name(config: RLHFConfig, task_config: FoodTaskConfig) -> str:
    """`rlhf-FOOD-REWARD__...__seedN`, named as ppo-train names its runs (experiments.sweep): the
    task's food and reward, then every setting that differs from the defaults, then the seed;
    e.g. `rlhf-pizza-rule__rloo__kltarget2__seed1`."""
    parts = [f"{NAME_ABBREVIATIONS.get(name, name.replace('_', ''))}{format_value(getattr(current, name))}"
             for current, defaults in ((task_config, FoodTaskConfig()), (config, RLHFConfig()))
             for name in named_fields(current, defaults, []) if name not in NOT_IN_NAMES]
    return "__".join([f"rlhf-{format_value(task_config.target_food.replace(' ', '_'))}-{task_config.reward}",
                      *parts, f"seed{config.seed}"])


def build_parser() -> OneLineArgumentParser:
    parser = OneLineArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    run = parser.add_argument_group("run")
    run.add_argument("--run-dir", type=Path, default=None,
                     help="run folder (default: runs/rlhf-FOOD-REWARD__…__seedSEED, named after the flags that "
                     "differ from the defaults, numbered if taken)")
    run.add_argument("--sft-cache-dir", type=Path, default=None,
                     help="where the SFT checkpoint is cached (default: $PPO_CACHE_DIR or ~/.cache/ppo-from-scratch)")
    run.add_argument("--eval-samples", type=int, default=1_000,
                     help="fresh completions (at the training --temperature) for the final evaluation (default: 1000)")
    run.add_argument("--resume", type=Path, default=None, metavar="RUN_DIR",
                     help="continue the run in RUN_DIR from its checkpoint (only --iterations may change)")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_dataclass_flags(parser.add_argument_group("the task (FoodTaskConfig)"), FoodTaskConfig)
    add_dataclass_flags(parser.add_argument_group("PPO on the language model (RLHFConfig)"), RLHFConfig)
    parser.add_argument("--kl-estimator", default=None, help=argparse.SUPPRESS)  # removed: refused in _run
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_with_user_errors(PROG, lambda: _run(args))


def _run(args) -> int:
    """Under torchrun, each process runs this; process 0 alone writes, prints and evaluates."""
    from ppo.distributed import close_world, init_world

    if args.kl_estimator is not None:
        raise ConfigError(f"--kl-estimator {args.kl_estimator} was replaced by --kl-penalty ({', '.join(KL_PENALTIES)}): "
                          f"k3 or the exact KL inside the detached reward does not regularise (ppo/lm/kl_penalty.py)")
    if args.eval_samples < 1:
        raise ConfigError(f"eval_samples = {args.eval_samples} must be a positive integer")
    world = init_world("cpu")
    try:
        with RunFolderClaims(PROG) as claims:  # the run folder, held until the command ends
            return _run_process(args, world, claims)
    finally:
        close_world(world)


def _run_process(args, world, claims: RunFolderClaims) -> int:
    if args.resume is not None:
        trainer, task_config, reward_model, summary = _resume(args, world, claims)
        config, run_dir, tokenizer = trainer.config, args.resume, trainer.tokenizer
    else:
        config = RLHFConfig(**given_flags(args, RLHFConfig)).validate()
        task_config = FoodTaskConfig(**given_flags(args, FoodTaskConfig)).validate()
        if world.is_main:
            check_writable_folder(args.sft_cache_dir or default_cache_dir(), "--sft-cache-dir")
        # process 0 claims the run folder and names it for all; a command refused later leaves it as it was
        default = Path("runs") / run_folder_name(config, task_config)
        run_dir = claim_on_process_zero(world, lambda: claims.new_run(args.run_dir, default))
        configure_process(config.num_threads)
        try:
            if not world.is_main:
                world.gather(None)  # wait until process 0 has the SFT model in the cache, then load it
            with GracefulStop(PROG, "the current pretraining step") as stop:
                sft, tokenizer = load_or_pretrain_sft(corpus.FOOD_CORPUS, cache_dir=args.sft_cache_dir,
                                                      verbose=world.is_main, stop=stop.callback)
            if world.is_main:
                world.gather(None)
        except PretrainingInterrupted as interrupted:
            print(f"{PROG}: {interrupted}; run the same command again to continue", file=sys.stderr)
            return INTERRUPTED_EXIT_CODE
        summary: dict = {"config": config.to_dict(), "task": task_config.to_dict()}
        reward_model = None
        if task_config.reward == "model":
            # Every process trains the same reward model (same seed, same data): no weights to send.
            reward_model, summary["reward_model"] = _train_reward_model(task_config, config, sft, tokenizer,
                                                                        task_config.prompts(), world.is_main)
        task = food_task(task_config, reward_model.score_batch if reward_model else None)
        trainer = trainer_class(config.algorithm)(config, sft, tokenizer, task, run_dir=run_dir,
                                                  progress=not args.no_progress, world=world)
        if world.is_main:  # only once the trainer accepted the settings: a refused command writes nothing
            (run_dir / "task.json").write_text(json.dumps(task_config.to_dict(), indent=2) + "\n")
            if reward_model is not None:
                save_checkpoint({"reward_model": reward_model.state_dict(), "summary": summary["reward_model"]},
                                run_dir / "reward_model.pt")
    task = trainer.task
    prompts = task_config.prompts()
    summary["load_average_start"] = os.getloadavg()[0]
    probe_texts = _probe_texts(prompts[0], task_config.target_food)
    critic_before = ({text: critic_values_along(trainer.value_model, tokenizer, text) for text in probe_texts}
                     if trainer.uses_critic else None)

    beta = f"β {config.kl_coef} ({config.effective_kl_penalty})" + (f" adaptive ({config.kl_controller} rule) → KL {config.kl_target}"
                                    if config.adaptive_kl else "")
    processes = f" on {world.size} processes" if world.distributed else ""
    if world.is_main:
        print(f"{config.algorithm.upper()}: {config.iterations} iterations × {config.batch_size} completions of "
              f"{', '.join(repr(p) for p in prompts)}, reward {task_config.reward}, {beta}, {_method(config)}, "
              f"seed {config.seed}{processes}")
    wall_start, cpu_start = time.perf_counter(), time.process_time()
    exit_code = train_stoppably(PROG, trainer, run_dir, world)
    if exit_code is not None:
        return exit_code
    ppo_wall, ppo_cpu = time.perf_counter() - wall_start, time.process_time() - cpu_start
    summary.update(ppo_wall_seconds=ppo_wall, ppo_cpu_seconds=ppo_cpu, load_average_end=os.getloadavg()[0],
                   final_beta=trainer.kl_controller.beta)

    grid = plot_training_grid(run_dir, f"{config.algorithm.upper()} on {prompts[0]!r}… ({task_config.reward} reward, "
                                       f"seed {config.seed})", kl_target=config.kl_target)
    written = ["checkpoint.pt", "metrics.csv", grid.name]
    if trainer.uses_critic:
        critic_after = {text: critic_values_along(trainer.value_model, tokenizer, text) for text in probe_texts}
        critic_plot = plot_critic_values(probe_texts, critic_before, critic_after, run_dir / "critic_values.png",
                                         f"critic ({config.critic}) before and after PPO", prompt=prompts[0])
        written.append(critic_plot.name)

    eval_generator = torch.Generator().manual_seed(config.seed + 10_000)
    evaluations = {}
    target = task_config.target_food
    for name, model in (("sft", trainer.reference), ("ppo", trainer.policy)):
        evaluation = evaluate_lm_policy(model, trainer.reference, tokenizer, task, args.eval_samples,
                                        config.temperature, config.max_new_tokens, eval_generator,
                                        config.missing_eos_penalty)
        evaluations[name] = evaluation
        summary[name] = {**evaluation.to_dict(), "target_rate": evaluation.rates["target_rate"],
                         "well_formed_rate": evaluation.rates["well_formed_rate"],
                         "food_rates": food_shares(evaluation.completion_shares)}
        label = "SFT" if name == "sft" else config.algorithm.upper()
        print(f"{label:>4}: {target} rate {evaluation.rates['target_rate']:.1%}, well-formed "
              f"{evaluation.rates['well_formed_rate']:.1%}, KL to SFT {evaluation.kl_k1:.2f} ± {evaluation.kl_k1_stderr:.2f}"
              f" nats (k1; k3 {evaluation.kl_k3:.2f}) on {evaluation.num_samples} samples at temperature "
              f"{evaluation.temperature:g}")
        print(f"      most frequent: {', '.join(evaluation.examples[:6])}")

    optimum = _optimum(task_config, config, trainer, tokenizer, prompts, reward_model)
    summary["optimum"] = optimum
    print(f" OPT: π* ∝ π_ref·exp(r/β) at β = {optimum['beta']:.3g}: {target} rate "
          f"{optimum['target_rate']:.1%}, well-formed {optimum['well_formed_rate']:.1%}, KL {optimum['kl']:.2f} nats, "
          f"E[score] {optimum['expected_score']:.3f}"
          + (f" (malformed: soft value β·log E[exp(r/β)] over the strings enumerated, "
             f"{optimum['reference_malformed_scored'] / max(optimum['reference_probabilities'][MALFORMED], 1e-300):.2%}"
             f" of their SFT mass)" if reward_model else ""))
    print(f"      no EOS within {config.max_new_tokens} tokens (score {config.missing_eos_penalty:g}): SFT "
          f"{optimum['reference_no_eos_lower']:.1e} to {optimum['reference_no_eos']:.1e}, "
          f"π* {optimum['probabilities'][NO_EOS]:.1e}")
    if config.adaptive_kl:
        _print_kl_control(config, summary, optimum, target, reward_model is None)
    if reward_model is not None:
        for name in ("sft", "ppo"):
            summary[name]["learned_score"] = _mean_learned_score(reward_model, trainer, name, tokenizer, prompts, config,
                                                                 args.eval_samples)
            summary[name]["healthiness"] = _mean_healthiness(summary[name]["food_rates"])
        sft, ppo = summary["sft"], summary["ppo"]
        print(f"learned score (normalised): SFT {sft['learned_score']:+.3f} → PPO {ppo['learned_score']:+.3f}; "
              f"true healthiness (the hidden rule): SFT {sft['healthiness']:.3f} → PPO {ppo['healthiness']:.3f}; "
              f"held-out pairwise accuracy {summary['reward_model']['heldout_accuracy']:.1%}")

    print(f"PPO took {ppo_wall:.1f} s wall-clock{processes} ({ppo_cpu:.1f} s CPU, {config.num_threads} thread(s); "
          f"load average {summary['load_average_start']:.1f} → {summary['load_average_end']:.1f})")
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"run folder {run_dir}: {', '.join(written)}, summary.json")
    return 0


def _print_kl_control(config: RLHFConfig, summary: dict, optimum: dict, target: str, rule_reward: bool) -> None:
    """β's path and where the KL ended against the target; for the rule reward, whether the target is reachable."""
    final_kl = summary["ppo"]["kl_k1"]
    print(f"  KL: target {config.kl_target:g} nats, β {config.kl_coef:g} → {summary['final_beta']:.3g} "
          f"({config.kl_controller} rule); the policy ends at {final_kl:.2f} nats ({final_kl / config.kl_target:.0%} "
          f"of the target), the optimum at the final β at {optimum['kl']:.2f}")
    if rule_reward:  # as β → 0, π* keeps only the target: KL → −log π_ref(target)
        largest = -math.log(max(optimum["reference_probabilities"][target], 1e-300))
        if largest < config.kl_target:
            print(f"      the target is out of reach: the rule pays only for {target!r}, so no policy it prefers is "
                  f"further than −log π_ref({target}) = {largest:.2f} nats from the SFT model, whatever β")


def _method(config: RLHFConfig) -> str:
    if config.algorithm == "ppo":
        return f"critic {config.critic}"
    return f"{config.algorithm} baseline over groups of {config.group_size}, no critic"


def _resume(args, world, claims: RunFolderClaims):
    """(trainer, task config, reward model or None, summary so far) of the run in args.resume."""
    trainer_flags = given_flags(args, RLHFConfig)
    unexpected = sorted(set(trainer_flags) - {"iterations"}) + sorted(given_flags(args, FoodTaskConfig))
    unexpected += ["run_dir"] if args.run_dir is not None else []
    if unexpected:
        raise ConfigError(f"--resume keeps the run's folder, task and config; only --iterations may change "
                          f"(got {', '.join('--' + name.replace('_', '-') for name in unexpected)})")
    run_dir = args.resume
    task_path = run_dir / "task.json"
    try:
        task_config = FoodTaskConfig.from_dict(json.loads(task_path.read_text())).validate()
    except (OSError, ValueError) as error:  # ConfigError is a ValueError
        raise CheckpointError(f"{task_path} cannot be used to resume ({error})") from None
    claim_on_process_zero(world, lambda: claims.resumed(run_dir))
    summary: dict = {"task": task_config.to_dict()}
    reward_model = None
    reward_state = None
    if task_config.reward == "model":
        reward_state = load_checkpoint(run_dir / "reward_model.pt", required_keys=("reward_model",))
        summary["reward_model"] = reward_state.get("summary", {})
    task = food_task(task_config)  # the reward is set below once the reward model exists
    checkpoint, saved_config = RLHFTrainer.load_run(run_dir, RLHFConfig, required_keys=RLHFTrainer.REQUIRED_STATE)
    trainer = trainer_class(saved_config.algorithm).from_checkpoint(
        checkpoint, saved_config, run_dir, task, trainer_flags.get("iterations"), progress=not args.no_progress, world=world)
    if trainer.iteration >= trainer.total_iterations:
        done = trainer.iteration
        if "iterations" in trainer_flags:
            raise ConfigError(f"--iterations {trainer_flags['iterations']} leaves nothing to train: run {run_dir} "
                              f"has done {done} iterations; give --iterations {done + 1} or more")
        raise ConfigError(f"run {run_dir} is complete ({done} iterations); to train it further give --iterations "
                          f"{done + 1} or more")
    configure_process(trainer.config.num_threads)
    if reward_state is not None:
        reward_model = RewardModel.from_sft(trainer.reference)
        try:
            reward_model.load_state_dict(reward_state["reward_model"])
        except (RuntimeError, TypeError) as error:
            raise CheckpointError(f"{run_dir / 'reward_model.pt'} does not fit ({str(error).splitlines()[0][:120]})") from None
        reward_model.eval()
        trainer.task = food_task(task_config, reward_model.score_batch)
    summary["config"] = trainer.config.to_dict()
    return trainer, task_config, reward_model, summary


def _mean_healthiness(food_rates: dict[str, float]) -> float:
    """E[healthiness] of the completions: the rule the reward model was trained to imitate."""
    return sum(rate * (HEALTHINESS[food] if food in HEALTHINESS else MALFORMED_HEALTHINESS)
               for food, rate in food_rates.items())


def _probe_texts(prompt: str, target_food: str) -> list[str]:
    """'ravin likes pizz' and 'ravin likes sala': the target and another food, each missing its last letter."""
    other = "salad" if target_food != "salad" else "pizza"
    return [prompt + target_food[:-1], prompt + other[:-1]]


def _train_reward_model(task_config: FoodTaskConfig, config: RLHFConfig, sft, tokenizer, prompts, verbose=True):
    people = task_config.people()
    malformed = task_config.reward_model_malformed_fraction
    train_pairs = preference_pairs(task_config.reward_model_pairs, config.seed, people, task_config.relation, malformed)
    heldout_pairs = preference_pairs(1_000, config.seed + 1_000_000, people, task_config.relation, malformed)
    started = time.perf_counter()
    model, losses = train_reward_model(sft, tokenizer, train_pairs, task_config.reward_model_steps,
                                       task_config.reward_model_learning_rate, seed=config.seed)
    seconds = time.perf_counter() - started
    train_accuracy = pairwise_accuracy(model, encode_comparisons(tokenizer, train_pairs))
    heldout_accuracy = pairwise_accuracy(model, encode_comparisons(tokenizer, heldout_pairs))
    generator = torch.Generator().manual_seed(config.seed + 20_000)
    model.normalize_on(sample_completions(sft, tokenizer, repeat_prompts(prompts, 512), config.max_new_tokens,
                                          config.temperature, generator))  # the SFT completions PPO starts from
    food_scores = _food_scores(model, tokenizer, prompts[0])
    if verbose:
        print(f"reward model: {task_config.reward_model_steps} Bradley–Terry steps on {len(train_pairs)} pairs in "
              f"{seconds:.1f} s, final loss {sum(losses[-20:]) / len(losses[-20:]):.3f}, pairwise accuracy train "
              f"{train_accuracy:.1%}, held-out {heldout_accuracy:.1%}")
        print("  normalised scores for " + repr(prompts[0]) + ": "
              + ", ".join(f"{food} {score:+.2f}" for food, score in sorted(food_scores.items(), key=lambda kv: -kv[1])))
    return model, {"train_accuracy": train_accuracy, "heldout_accuracy": heldout_accuracy, "seconds": seconds,
                   "final_loss": losses[-1], "food_scores": food_scores}


@torch.no_grad()
def _food_scores(model: RewardModel, tokenizer, prompt: str) -> dict[str, float]:
    tokens, last = encode_texts(tokenizer, [prompt + food for food in corpus.FOODS])
    return dict(zip(corpus.FOODS, model(tokens, last).tolist()))


@torch.no_grad()
def _optimum(task_config: FoodTaskConfig, config: RLHFConfig, trainer: RLHFTrainer, tokenizer, prompts,
             reward_model) -> dict:
    """π* ∝ π_ref·exp(r/β) per prompt at the final β, averaged over the prompts.

    The groups: each food, MALFORMED (ended with EOS, not a food: the rule's 0, or, for
    the reward model, the group's soft value β·log E_π_ref[exp(r/β)] over its enumerated
    strings, `ppo.lm.optimum.malformed_group`) and NO_EOS (no EOS within max_new_tokens:
    missing_eos_penalty, as in training).
    """
    beta = trainer.kl_controller.beta
    malformed_covered = []  # per prompt: π_ref mass of the malformed strings the enumeration scored
    if reward_model is None:
        rule = rule_scores(corpus.FOODS, task_config.target_food, task_config.score, config.missing_eos_penalty)
        scores_for = lambda prompt: rule  # noqa: E731
    else:
        def scores_for(prompt: str) -> dict:
            """The reward model's score of each food, and MALFORMED as its soft value at β."""
            def score_texts(texts: list[str]) -> torch.Tensor:
                return torch.cat([reward_model(*encode_texts(tokenizer, [prompt + text for text in texts[i : i + 1024]]))
                                  for i in range(0, len(texts), 1024)])

            scores = _food_scores(reward_model, tokenizer, prompt)
            scores[MALFORMED] = malformed_group(trainer.reference, tokenizer, prompt, corpus.FOODS, score_texts, beta,
                                                config.temperature, max_new_tokens=config.max_new_tokens)
            malformed_covered.append(scores[MALFORMED].covered)
            return scores

    optimum = optimum_over_prompts(trainer.reference, tokenizer, prompts, corpus.FOODS, scores_for, beta,
                                   config.temperature, max_new_tokens=config.max_new_tokens,
                                   missing_eos_penalty=config.missing_eos_penalty)
    return {"beta": optimum.beta, "target_rate": optimum.probabilities[task_config.target_food],
            "well_formed_rate": 1.0 - optimum.probabilities[MALFORMED] - optimum.probabilities[NO_EOS],
            "kl": optimum.kl, "expected_score": optimum.expected_score, "probabilities": optimum.probabilities,
            "reference_probabilities": optimum.reference_probabilities,
            "reference_no_eos": optimum.reference_probabilities[NO_EOS],
            "reference_no_eos_lower": max(0.0, optimum.reference_probabilities[NO_EOS] - optimum.no_eos_unresolved),
            **({"reference_malformed_scored": sum(malformed_covered) / len(malformed_covered)}
               if malformed_covered else {})}


@torch.no_grad()
def _mean_learned_score(reward_model: RewardModel, trainer: RLHFTrainer, name: str, tokenizer, prompts, config,
                        num_samples: int) -> float:
    model = trainer.reference if name == "sft" else trainer.policy
    generator = torch.Generator().manual_seed(config.seed + 30_000)
    batch = sample_completions(model, tokenizer, repeat_prompts(prompts, num_samples), config.max_new_tokens,
                               config.temperature, generator)
    scores = reward_model.score_batch(batch)  # (N,)
    return float(torch.where(batch.ended_with_eos, scores, torch.full_like(scores, config.missing_eos_penalty)).mean())


if __name__ == "__main__":
    sys.exit(main())
