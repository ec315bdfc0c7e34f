"""Fine-tune the tiny language model with PPO and a KL penalty to its SFT starting point.

    python -m experiments.commands.rlhf                                   # "ravin likes pizza", rule reward
    python -m experiments.commands.rlhf --kl-coef 0                       # no penalty: the rule reward cannot be gamed,
                                                                 # so this lands on the same optimum
    python -m experiments.commands.rlhf --algorithm rloo                  # no critic: leave-one-out baseline (or grpo)
    python -m experiments.commands.rlhf --kl-target 2.0 --kl-coef 0.1     # adaptive β
    python -m experiments.commands.rlhf --reward model --person all       # the full pipeline: preferences → reward model → PPO
    python -m experiments.commands.rlhf --critic shared --seed 3
    python -m experiments.commands.rlhf --task two-choice                 # a reward for a relation (t = 0) and a food (t = 6)
    python -m experiments.commands.rlhf --resume runs/rlhf-pizza-rule__seed1           # continue a stopped run

Two tasks (--task): food (experiments.tasks.food_task: "ravin likes " → a food; the reward is
decided at the first token) and two-choice (experiments.tasks.two_choice_task: "ravin " → a
relation and a food; paid only for the right combination). Every field of
ppo.lm.trainers.rlhf_config.RLHFConfig (the trainer) and of the chosen task's config
(FoodTaskConfig or TwoChoiceTaskConfig) is a flag; a flag of the other task is refused.
The SFT model comes from the cache (trained first if it is missing). The run folder gets
config.json (the trainer's settings), task.json (the task and its settings), metrics.csv,
TensorBoard events, checkpoint.pt, training_grid.png, critic_values.png and summary.json.
At the end the policy is measured on fresh samples at the temperature it was trained at
(--temperature, which the exact optimum uses too) and compared with the SFT model and
with the exact optimum of the KL-regularised objective (for two-choice, also by the total
variation of each to it). Ctrl-C (or SIGTERM) finishes the current iteration, saves the
checkpoint and prints the --resume command; a resumed run continues bit for bit.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import time
from pathlib import Path

import torch

from envs import corpus
from envs.token_task import HEALTHINESS, MALFORMED_HEALTHINESS, preference_pairs
from experiments.commands.cli import (
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
from experiments.tasks.food_task import FoodTaskAdapter, FoodTaskConfig, learned_food_scores
from experiments.commands.run_folder import (ABBREVIATIONS, RunFolderClaims, claim_on_process_zero, format_value,
                                             named_fields, removed_if_refused, require_run_folder)
from experiments.tasks.two_choice_task import TwoChoiceTaskAdapter
from ppo.runs.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from ppo.config import ConfigError
from ppo.lm.trainers.diagnostics import critic_values_along, plot_critic_values, plot_training_grid
from ppo.lm.trainers.evaluation import evaluate_lm_policy
from ppo.lm.exact.optimum import MALFORMED, NO_EOS
from ppo.lm.models.pretrain import PretrainingInterrupted, cache_dir_source, load_or_pretrain_sft
from ppo.lm.algorithm.reward_model import RewardModel, encode_comparisons, pairwise_accuracy, train_reward_model
from ppo.lm.algorithm.kl_penalty import KL_PENALTIES
from ppo.lm.trainers.rlhf_config import RLHFConfig
from ppo.lm.trainers.group_trainer import trainer_class
from ppo.lm.trainers.rlhf_trainer import RLHFTrainer
from ppo.lm.algorithm.rollout import repeat_prompts, sample_completions
from ppo.parallel.distributed import close_world, init_world

PROG = "ppo-rlhf"
# run folder names: `__rloo`, `__klloss-k3`, else the field's name without underscores (`__kltarget2`)
NAME_ABBREVIATIONS = {**ABBREVIATIONS, "algorithm": "", "kl_penalty": "kl"}
NOT_IN_NAMES = ("sample_every",)  # only prints
# --task: what ppo-rlhf needs of each task (the same methods in each module)
TASKS = {adapter.name: adapter for adapter in (FoodTaskAdapter, TwoChoiceTaskAdapter)}
DEFAULT_TASK = "food"


def task_adapter(task_config) -> FoodTaskAdapter | TwoChoiceTaskAdapter:
    """The adapter of a task config (FoodTaskConfig or TwoChoiceTaskConfig)."""
    [adapter] = [adapter for adapter in TASKS.values() if isinstance(task_config, adapter.config_class)]
    return adapter(task_config)


def run_folder_name(config: RLHFConfig, task_config) -> str:
    """`rlhf-LABEL__...__seedN`, named as ppo-train names its runs (experiments.commands.run_folder): the task's
    label (the food and the reward: `pizza-rule`; or `two-choice`), then every setting that
    differs from the defaults, then the seed; e.g. `rlhf-pizza-rule__rloo__kltarget2__seed1`,
    `rlhf-two-choice__personravin__seed1`."""
    adapter = task_adapter(task_config)
    parts = [f"{NAME_ABBREVIATIONS.get(name, name.replace('_', ''))}{format_value(getattr(current, name))}"
             for current, defaults in ((task_config, adapter.config_class()), (config, RLHFConfig()))
             for name in named_fields(current, defaults, [])
             if name not in NOT_IN_NAMES and name not in adapter.in_folder_label]
    return "__".join([f"rlhf-{format_value(adapter.folder_label())}", *parts, f"seed{config.seed}"])


def _task_fields() -> dict[str, list[str]]:
    """Each task setting's name -> the tasks that have it (`person`: both)."""
    owners: dict[str, list[str]] = {}
    for name, adapter in TASKS.items():
        for field in dataclasses.fields(adapter.config_class):
            owners.setdefault(field.name, []).append(name)
    return owners


def _add_task_flags(parser: argparse.ArgumentParser) -> None:
    """--task and the settings every task has, then each task's own under its heading (--help shows them all;
    `task_from_flags` refuses those of a task not chosen)."""
    group = parser.add_argument_group("the task")
    group.add_argument("--task", choices=list(TASKS), default=None,
                       help="food: \"ravin likes \" → a food, the reward decided at the first token "
                       "(experiments/tasks/food_task.py); two-choice: \"ravin \" → a relation and a food, paid only for "
                       f"the right combination (experiments/tasks/two_choice_task.py) (default: {DEFAULT_TASK})")
    owners = _task_fields()
    shared = [name for name, tasks in owners.items() if len(tasks) > 1]
    for name in shared:  # one flag, its default for each task
        defaults = ", ".join(f"{getattr(TASKS[task].config_class(), name)} with --task {task}" for task in owners[name])
        add_dataclass_flags(group, TASKS[owners[name][0]].config_class, skip=tuple(owners.keys() - {name}),
                            shown_defaults={name: defaults})
    for name, adapter in TASKS.items():
        heading = f"the {name} task (--task {name}: {adapter.config_class.__name__})"
        add_dataclass_flags(parser.add_argument_group(heading), adapter.config_class, skip=tuple(shared))


def task_from_flags(args) -> FoodTaskAdapter | TwoChoiceTaskAdapter:
    """The chosen task with the settings given; ConfigError naming the first flag of another task."""
    chosen = args.task or DEFAULT_TASK
    adapter = TASKS[chosen]
    for name, tasks in _task_fields().items():
        if chosen not in tasks and name in vars(args):
            why = f" ({adapter.why_not[name]})" if name in adapter.why_not else ""
            raise ConfigError(f"--{name.replace('_', '-')} is a setting of --task {' and '.join(tasks)}, not of "
                              f"--task {chosen}{why}")
    return adapter(adapter.config_class(**given_flags(args, adapter.config_class)).validate())


def task_record(adapter) -> dict:
    """What task.json holds: {"kind": "two-choice", "config": {...the task's settings}}."""
    return {"kind": adapter.name, "config": adapter.config.to_dict()}


def task_from_record(record) -> FoodTaskAdapter | TwoChoiceTaskAdapter:
    """The task of task.json; a record without a kind is a food task's settings (as written before --task)."""
    if isinstance(record, dict) and set(record) == {"kind", "config"}:
        kind = record["kind"]
        if not isinstance(kind, str) or kind not in TASKS:
            raise ConfigError(f"task kind {kind!r} is not one of {', '.join(TASKS)}")
        adapter = TASKS[kind]
        return adapter(adapter.config_class.from_dict(record["config"]).validate())
    return FoodTaskAdapter(FoodTaskConfig.from_dict(record).validate())


def build_parser() -> OneLineArgumentParser:
    parser = OneLineArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    run = parser.add_argument_group("run")
    run.add_argument("--run-dir", type=Path, default=None,
                     help="run folder (default: runs/rlhf-FOOD-REWARD__…__seedSEED, or "
                     "runs/rlhf-two-choice__…__seedSEED, named after the flags that differ from the defaults, "
                     "numbered if taken)")
    run.add_argument("--sft-cache-dir", type=Path, default=None,
                     help="where the SFT checkpoint is cached (default: $PPO_CACHE_DIR or ~/.cache/ppo-from-scratch)")
    run.add_argument("--eval-samples", type=int, default=1_000,
                     help="fresh completions (at the training --temperature) for the final evaluation (default: 1000)")
    run.add_argument("--resume", type=Path, default=None, metavar="RUN_DIR",
                     help="continue the run in RUN_DIR from its checkpoint, on the task of its task.json (only "
                     "--iterations may change)")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_task_flags(parser)
    add_dataclass_flags(parser.add_argument_group("PPO on the language model (RLHFConfig)"), RLHFConfig)
    parser.add_argument("--kl-estimator", default=None, help=argparse.SUPPRESS)  # removed: refused in _run
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_with_user_errors(PROG, lambda: _run(args))


def _run(args) -> int:
    """Under torchrun, each process runs this; process 0 alone writes, prints and evaluates."""
    if args.kl_estimator is not None:
        raise ConfigError(f"--kl-estimator {args.kl_estimator} was replaced by --kl-penalty ({', '.join(KL_PENALTIES)}): "
                          f"k3 or the exact KL inside the detached reward does not regularise (ppo/lm/algorithm/kl_penalty.py)")
    if args.eval_samples < 1:
        raise ConfigError(f"eval_samples = {args.eval_samples} must be a positive integer")
    world = init_world("cpu")
    try:
        with RunFolderClaims(PROG) as claims:  # the run folder, held until the command ends
            return _run_process(args, world, claims)
    finally:
        close_world(world)


def _run_process(args, world, claims: RunFolderClaims) -> int:
    cache_dir, _ = cache_dir_source(args.sft_cache_dir, "--sft-cache-dir")
    with removed_if_refused(cache_dir):  # a refused command leaves no cache folder behind
        return _train_process(args, world, claims)


def _train_process(args, world, claims: RunFolderClaims) -> int:
    if args.resume is not None:
        trainer, adapter, reward_model, summary = _resume(args, world, claims)
        config, run_dir, tokenizer = trainer.config, args.resume, trainer.tokenizer
    else:
        flags = given_flags(args, RLHFConfig)
        config = RLHFConfig(**flags).validate()
        if "group_size" in flags and config.algorithm == "ppo":
            raise ConfigError(f"--group-size {config.group_size} has no effect with --algorithm ppo: only grpo and "
                              f"rloo sample groups of completions per prompt")
        adapter = task_from_flags(args)
        if world.is_main:
            check_writable_folder(*cache_dir_source(args.sft_cache_dir, "--sft-cache-dir"))
        # process 0 claims the run folder and names it for all; a command refused later leaves it as it was
        default = Path("runs") / run_folder_name(config, adapter.config)
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
        summary: dict = {"config": config.to_dict(), "task": task_record(adapter)}
        reward_model = None
        if adapter.uses_reward_model:
            # Every process trains the same reward model (same seed, same data): no weights to send.
            reward_model, summary["reward_model"] = _train_reward_model(adapter.config, config, sft, tokenizer,
                                                                        adapter.config.prompts(), world.is_main)
        task = adapter.task(reward_model.score_batch if reward_model else None)
        trainer = trainer_class(config.algorithm)(config, sft, tokenizer, task, run_dir=run_dir,
                                                  progress=not args.no_progress, world=world)
        if world.is_main:  # only once the trainer accepted the settings: a refused command writes nothing
            (run_dir / "task.json").write_text(json.dumps(task_record(adapter), indent=2) + "\n")
            if reward_model is not None:
                save_checkpoint({"reward_model": reward_model.state_dict(), "summary": summary["reward_model"]},
                                run_dir / "reward_model.pt")
    task = trainer.task
    prompts = task.prompts
    summary["load_average_start"] = os.getloadavg()[0]
    probe_texts = adapter.probe_texts()
    critic_before = ({text: critic_values_along(trainer.value_model, tokenizer, text) for text in probe_texts}
                     if trainer.uses_critic else None)

    beta = f"β {config.kl_coef} ({config.effective_kl_penalty})" + (f" adaptive ({config.kl_controller} rule) → KL {config.kl_target}"
                                    if config.adaptive_kl else "")
    processes = f" on {world.size} processes" if world.distributed else ""
    if world.is_main:
        print(f"{config.algorithm.upper()}: {config.iterations} iterations × {config.batch_size} completions of "
              f"{', '.join(repr(p) for p in prompts)}, reward {adapter.reward_name}, {beta}, {_method(config)}, "
              f"seed {config.seed}{processes}")
    wall_start, cpu_start = time.perf_counter(), time.process_time()
    exit_code = train_stoppably(PROG, trainer, run_dir, world)
    if exit_code is not None:
        return exit_code
    ppo_wall, ppo_cpu = time.perf_counter() - wall_start, time.process_time() - cpu_start
    summary.update(ppo_wall_seconds=ppo_wall, ppo_cpu_seconds=ppo_cpu, load_average_end=os.getloadavg()[0],
                   final_beta=trainer.kl_controller.beta)

    grid = plot_training_grid(run_dir, f"{config.algorithm.upper()} on {prompts[0]!r}… ({adapter.reward_name} reward, "
                                       f"seed {config.seed})", kl_target=config.kl_target)
    written = ["checkpoint.pt", "metrics.csv", grid.name]
    if trainer.uses_critic:
        critic_after = {text: critic_values_along(trainer.value_model, tokenizer, text) for text in probe_texts}
        critic_plot = plot_critic_values(probe_texts, critic_before, critic_after, run_dir / "critic_values.png",
                                         f"critic ({config.critic}) before and after PPO", prompt=prompts[0])
        written.append(critic_plot.name)

    eval_generator = torch.Generator().manual_seed(config.seed + 10_000)
    for name, model in (("sft", trainer.reference), ("ppo", trainer.policy)):
        evaluation = evaluate_lm_policy(model, trainer.reference, tokenizer, task, args.eval_samples,
                                        config.temperature, config.max_new_tokens, eval_generator,
                                        config.missing_eos_penalty)
        summary[name] = {**evaluation.to_dict(), **adapter.rates_summary(evaluation)}
        label = "SFT" if name == "sft" else config.algorithm.upper()
        print(f"{label:>4}: {adapter.rates_text(evaluation.rates)}, KL to SFT {evaluation.kl_k1:.2f} ± "
              f"{evaluation.kl_k1_stderr:.2f} nats (k1; k3 {evaluation.kl_k3:.2f}) on {evaluation.num_samples} samples "
              f"at temperature {evaluation.temperature:g}")
        print(f"      most frequent: {', '.join(evaluation.examples[:6])}")

    optimum = adapter.optimum(trainer.policy, trainer.reference, tokenizer, trainer.kl_controller.beta, config,
                              reward_model)
    summary["optimum"] = optimum
    _print_optimum(optimum, adapter, config)
    if config.adaptive_kl:
        _print_kl_control(config, summary, optimum, adapter.kl_ceiling(optimum))
    if reward_model is not None:
        for name in ("sft", "ppo"):
            summary[name]["learned_score"] = _mean_learned_score(reward_model, trainer, name, tokenizer, prompts, config,
                                                                 args.eval_samples)
            summary[name]["healthiness"] = _mean_healthiness(summary[name]["food_rates"])
        sft, ppo = summary["sft"], summary["ppo"]
        print(f"learned score (normalised): SFT {sft['learned_score']:+.3f} → PPO {ppo['learned_score']:+.3f}; "
              f"true healthiness (the hidden rule): SFT {sft['healthiness']:.3f} → PPO {ppo['healthiness']:.3f}; "
              f"held-out pairwise accuracy {summary['reward_model']['heldout_accuracy']:.1%}")

    print(f"{config.algorithm.upper()} took {ppo_wall:.1f} s wall-clock{processes} ({ppo_cpu:.1f} s CPU, {config.num_threads} thread(s); "
          f"load average {summary['load_average_start']:.1f} → {summary['load_average_end']:.1f})")
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(f"run folder {run_dir}: {', '.join(written)}, summary.json")
    return 0


def _print_optimum(optimum: dict, adapter, config: RLHFConfig) -> None:
    """The exact optimum's rates, KL and E[score]; for a task that measures it, the total variation of the SFT
    model and of the policy to it; the share of no-EOS completions under π_ref and π*."""
    print(f" OPT: π* ∝ π_ref·exp(r/β) at β = {optimum['beta']:.3g}: {adapter.rates_text(optimum)}, KL "
          f"{optimum['kl']:.2f} nats, E[score] {optimum['expected_score']:.3f}"
          + (f" (malformed: soft value β·log E[exp(r/β)] over the strings enumerated, "
             f"{optimum['reference_malformed_scored'] / max(optimum['reference_probabilities'][MALFORMED], 1e-300):.2%}"
             f" of their SFT mass)" if "reference_malformed_scored" in optimum else ""))
    if "total_variation" in optimum:
        distances = optimum["total_variation"]
        print(f"      TV to π* (exact over {optimum['groups']} groups: the answers, malformed, no EOS; mean over "
              f"{optimum['prompts']} prompts): SFT {distances['sft']:.3f} → {config.algorithm.upper()} "
              f"{distances['policy']:.3f}")
    no_eos = (f"{optimum['reference_no_eos_lower']:.1e} to {optimum['reference_no_eos']:.1e}"
              if "reference_no_eos_lower" in optimum else f"≤ {optimum['reference_no_eos']:.1e}")
    print(f"      no EOS within {config.max_new_tokens} tokens (score {config.missing_eos_penalty:g}): SFT "
          f"{no_eos}, π* {optimum['probabilities'][NO_EOS]:.1e}")


def _print_kl_control(config: RLHFConfig, summary: dict, optimum: dict,
                      ceiling: tuple[str, str, float] | None) -> None:
    """β's path and where the KL ended against the target; for a rule reward, whether the target is reachable
    (`ceiling`: what the rule pays for, its name, and the KL of π*_β as β → 0)."""
    final_kl = summary["ppo"]["kl_k1"]
    print(f"  KL: target {config.kl_target:g} nats, β {config.kl_coef:g} → {summary['final_beta']:.3g} "
          f"({config.kl_controller} rule); the policy ends at {final_kl:.2f} nats ({final_kl / config.kl_target:.0%} "
          f"of the target), the optimum at the final β at {optimum['kl']:.2f}")
    if ceiling is not None:  # as β → 0, π* keeps only what the rule pays most for: KL → −log π_ref(it)
        paid, name, largest = ceiling
        if largest < config.kl_target:
            print(f"      the target is out of reach: the rule pays {paid}, so no policy it prefers is "
                  f"further than −log π_ref({name}) = {largest:.2f} nats from the SFT model, whatever β")


def _method(config: RLHFConfig) -> str:
    if config.algorithm == "ppo":
        return f"critic {config.critic}"
    return f"{config.algorithm} baseline over groups of {config.group_size}, no critic"


def _resume(args, world, claims: RunFolderClaims):
    """(trainer, task adapter, reward model or None, summary so far) of the run in args.resume."""
    trainer_flags = given_flags(args, RLHFConfig)
    task_flags = [name for name in _task_fields() if name in vars(args)]
    unexpected = sorted(set(trainer_flags) - {"iterations"}) + sorted(task_flags)
    unexpected += ["run_dir"] if args.run_dir is not None else []
    if unexpected:
        raise ConfigError(f"--resume keeps the run's folder, task and config; only --iterations may change "
                          f"(got {', '.join('--' + name.replace('_', '-') for name in unexpected)})")
    run_dir = require_run_folder(args.resume)
    claim_on_process_zero(world, lambda: claims.resumed(run_dir))
    # the checkpoint first: a folder of another kind of run is named as such
    checkpoint, saved_config = RLHFTrainer.load_run(run_dir, RLHFConfig, required_keys=RLHFTrainer.REQUIRED_STATE)
    task_path = run_dir / "task.json"
    try:
        adapter = task_from_record(json.loads(task_path.read_text()))
    except (OSError, ValueError) as error:  # ConfigError is a ValueError
        raise CheckpointError(f"{task_path} cannot be used to resume ({error})") from None
    if args.task is not None and args.task != adapter.name:
        raise ConfigError(f"--task {args.task} contradicts run {run_dir}, a {adapter.name} run ({task_path}); "
                          f"leave --task out to resume it")
    summary: dict = {"task": task_record(adapter)}
    reward_model = None
    reward_state = None
    if adapter.uses_reward_model:
        reward_state = load_checkpoint(run_dir / "reward_model.pt", required_keys=("reward_model",))
        summary["reward_model"] = reward_state.get("summary", {})
    task = adapter.task()  # the reward is set below once the reward model exists
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
        trainer.task = adapter.task(reward_model.score_batch)
    summary["config"] = trainer.config.to_dict()
    return trainer, adapter, reward_model, summary


def _mean_healthiness(food_rates: dict[str, float]) -> float:
    """E[healthiness] of the completions: the rule the reward model was trained to imitate."""
    return sum(rate * (HEALTHINESS[food] if food in HEALTHINESS else MALFORMED_HEALTHINESS)
               for food, rate in food_rates.items())


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
    food_scores = learned_food_scores(model, tokenizer, prompts[0])
    if verbose:
        print(f"reward model: {task_config.reward_model_steps} Bradley–Terry steps on {len(train_pairs)} pairs in "
              f"{seconds:.1f} s, final loss {sum(losses[-20:]) / len(losses[-20:]):.3f}, pairwise accuracy train "
              f"{train_accuracy:.1%}, held-out {heldout_accuracy:.1%}")
        print("  normalised scores for " + repr(prompts[0]) + ": "
              + ", ".join(f"{food} {score:+.2f}" for food, score in sorted(food_scores.items(), key=lambda kv: -kv[1])))
    return model, {"train_accuracy": train_accuracy, "heldout_accuracy": heldout_accuracy, "seconds": seconds,
                   "final_loss": losses[-1], "food_scores": food_scores}


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
