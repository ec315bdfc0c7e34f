"""Pretrain (SFT) the tiny character-level GPT on the food corpus and check it against the known distribution.

    python -m experiments.commands.pretrain_lm                 # default config, cached checkpoint
    python -m experiments.commands.pretrain_lm --steps 300 --out sft.pt

For every person, the completions of "NAME likes " are sampled and their distribution is
compared with the corpus table: total-variation distance TV(p, q) = 1/2 sum_f |p(f) - q(f)|,
and the fraction of completions that are well-formed (an existing food followed by EOS).
"""

from __future__ import annotations

import math
import sys
import time
from collections import Counter
from pathlib import Path

import torch

from envs import corpus
from experiments.commands.cli import (
    INTERRUPTED_EXIT_CODE,
    GracefulStop,
    OneLineArgumentParser,
    add_dataclass_flags,
    check_writable_file,
    check_writable_folder,
    configure_process,
    given_flags,
    run_with_user_errors,
)
from experiments.commands.run_folder import removed_if_refused
from ppo.config import ConfigError, require_threads
from ppo.lm.models.gpt import completion_log_probs
from ppo.lm.exact.optimum_distance import total_variation as total_variation_over_groups
from ppo.lm.models.pretrain import (
    PretrainConfig,
    PretrainingInterrupted,
    cache_dir_source,
    cached_checkpoint_path,
    encode_corpus,
    evaluate_loss,
    load_or_pretrain_sft,
    pretrain,
    save_sft_checkpoint,
)
from ppo.lm.models.sampling import sample_texts
from ppo.runs.checkpoint import check_checkpoint_target

PROG = "ppo-pretrain-lm"


def build_parser() -> OneLineArgumentParser:
    parser = OneLineArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    run = parser.add_argument_group("run")
    run.add_argument("--out", type=Path, default=None,
                     help="also write the checkpoint to this path (default: only the cache)")
    run.add_argument("--cache-dir", type=Path, default=None,
                     help="checkpoint cache directory (default: $PPO_CACHE_DIR or ~/.cache/ppo-from-scratch)")
    run.add_argument("--no-cache", action="store_true", help="always train; do not read or write the cache")
    run.add_argument("--samples", type=int, default=2000, help="completions sampled per person for the table (default: 2000)")
    run.add_argument("--relation", default="likes", choices=corpus.RELATIONS, help="relation of the table (default: likes)")
    run.add_argument("--num-threads", type=int, default=1,
                     help="torch CPU threads (default: 1, the fastest on a busy 2-core machine)")
    add_dataclass_flags(parser.add_argument_group("pretraining (PretrainConfig)"), PretrainConfig)
    return parser


def sampled_food_distribution(model, tokenizer, person: str, relation: str, samples: int,
                              generator: torch.Generator) -> tuple[dict[str, float], float]:
    """Sample completions of "person relation " at temperature 1: (frequency of each food, well-formed rate)."""
    texts, ended = sample_texts(model, tokenizer, corpus.prompt(person, relation), samples, generator=generator)
    foods = [corpus.parse_completion(t, e) for t, e in zip(texts, ended)]
    counts = Counter(f for f in foods if f is not None)
    return {food: counts[food] / samples for food in corpus.FOODS}, sum(counts.values()) / samples


@torch.no_grad()
def exact_food_distribution(model, tokenizer, person: str, relation: str) -> dict[str, float]:
    """The model's exact probability of each well-formed completion "food<EOS>" (sums to <= 1)."""
    prompt = tokenizer.encode(corpus.prompt(person, relation))
    answers = [tokenizer.encode(food, add_bos=False, add_eos=True) for food in corpus.FOODS]
    return dict(zip(corpus.FOODS, completion_log_probs(model, prompt, answers).exp().tolist()))


def total_variation(p: dict[str, float], q: dict[str, float]) -> float:
    """TV(p, q) = 1/2 sum_x |p(x) - q(x)| over foods, plus 1/2 the mass q puts on malformed completions."""
    return total_variation_over_groups(p, q) + 0.5 * max(0.0, 1.0 - sum(q.values()))


def print_report(model, tokenizer, relation: str, samples: int, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    print(f'\ncompletions of "NAME {relation} " at temperature 1 vs the corpus table; "exact" scores every food '
          f"with the model, \"sampled\" counts {samples} samples (sampling noise alone gives TV ~0.02-0.03)")
    print(f"{'person':<7} {'exact TV':>8} {'sampled TV':>10} {'well-formed':>11}   "
          "top foods: sampled% / exact% / corpus%")
    for person in corpus.PEOPLE:
        truth = corpus.food_distribution(person, relation)
        exact = exact_food_distribution(model, tokenizer, person, relation)
        sampled, well_formed = sampled_food_distribution(model, tokenizer, person, relation, samples, generator)
        top = sorted(truth, key=truth.get, reverse=True)[:3]
        foods = "  ".join(f"{f} {100 * sampled[f]:.1f}/{100 * exact[f]:.1f}/{100 * truth[f]:.0f}" for f in top)
        print(f"{person:<7} {total_variation(truth, exact):8.3f} {total_variation(truth, sampled):10.3f} "
              f"{100 * well_formed:10.1f}%   {foods}")
        if person == "ravin":
            pizza = sampled["pizza"], exact["pizza"], truth["pizza"]
    if relation == "likes":
        print(f'"ravin likes pizza": {100 * pizza[0]:.1f}% of samples, exact model probability '
              f"{100 * pizza[1]:.1f}%, corpus {100 * pizza[2]:.0f}%")


def print_exact_tv(model, tokenizer) -> float:
    """The exact TV from the corpus table for every person and both relations; returns the largest."""
    print("\nexact TV(corpus table, model) of the food + EOS completions, every person and relation:")
    print(f"{'person':<7} " + " ".join(f"{relation:>7}" for relation in corpus.RELATIONS))
    largest = 0.0
    for person in corpus.PEOPLE:
        distances = [total_variation(corpus.food_distribution(person, relation),
                                     exact_food_distribution(model, tokenizer, person, relation))
                     for relation in corpus.RELATIONS]
        largest = max(largest, *distances)
        print(f"{person:<7} " + " ".join(f"{distance:7.3f}" for distance in distances))
    print(f"largest exact TV: {largest:.3f}")
    return largest


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run_with_user_errors(PROG, lambda: _pretrain(args))


def _pretrain(args) -> int:
    """Check every setting and path, then pretrain; a refused command leaves no folder behind."""
    config = PretrainConfig(**given_flags(args, PretrainConfig)).validate()
    if args.samples <= 0:
        raise ConfigError(f"samples = {args.samples} must be a positive integer")
    require_threads(args.num_threads)
    cache_dir, cache_name = cache_dir_source(args.cache_dir, "the cache folder")
    outputs = [*([args.out.parent] if args.out else []), *([] if args.no_cache else [cache_dir])]
    with removed_if_refused(*outputs):
        return _check_and_pretrain(args, config, cache_dir, cache_name)


def _check_and_pretrain(args, config: PretrainConfig, cache_dir: Path, cache_name: str) -> int:
    if args.out:
        check_checkpoint_target(args.out, "ppo-pretrain-lm", "--out")
        check_writable_file(args.out, "--out")
    if not args.no_cache:
        check_writable_folder(cache_dir, cache_name)
    configure_process(args.num_threads)

    start, cpu_start = time.perf_counter(), time.process_time()
    try:
        with GracefulStop(PROG, "the current step") as stop:
            if args.no_cache:
                result = pretrain(corpus.FOOD_CORPUS, config, stop=stop.callback)
                model, tokenizer = result.model, result.tokenizer
                metrics = {"val_loss": result.val_loss, "seconds": result.seconds}
            else:
                model, tokenizer = load_or_pretrain_sft(corpus.FOOD_CORPUS, config, cache_dir=args.cache_dir,
                                                        stop=stop.callback)
                metrics = {}
    except PretrainingInterrupted as interrupted:
        again = "run the same command again to continue" if interrupted.partial_path else "nothing to resume (--no-cache)"
        print(f"{PROG}: {interrupted}; {again}", file=sys.stderr)
        return INTERRUPTED_EXIT_CODE
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    print(f"model ready after {wall:.1f} s wall-clock, {cpu:.1f} s CPU ({args.num_threads} thread(s))")
    if args.out:
        save_sft_checkpoint(model, tokenizer, args.out, config, metrics)
        print(f"wrote {args.out}")

    # The validation split is the first val_size sentences of the corpus draw, so it can be redrawn cheaply.
    val = encode_corpus(corpus.sample_sentences(config.val_size, seed=config.seed), tokenizer, config.block_size)
    n_targets = (val[:, 1:] != tokenizer.pad_id).sum().item()
    floor = corpus.sentence_entropy() * len(val) / n_targets  # entropy of a sentence spread over its tokens
    print(f"\nvalidation loss {evaluate_loss(model, val, tokenizer.pad_id):.4f} nats/token   "
          f"uniform model log V = {math.log(tokenizer.vocab_size):.4f}   corpus entropy ~ {floor:.4f}")
    print_report(model, tokenizer, args.relation, args.samples, seed=config.seed)
    print_exact_tv(model, tokenizer)
    if not args.no_cache:
        print(f"\ncheckpoint: {cached_checkpoint_path(corpus.FOOD_CORPUS, config, args.cache_dir)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
