"""Tokens per second of batched KV-cache sampling vs naive full recomputation.

    python -m experiments.benchmarks.sampling
    python -m experiments.benchmarks.sampling --batch-sizes 1 64 512 --repeats 3

Both samplers generate the same number of tokens from the same (randomly initialised)
model: EOS stopping is switched off so every row runs for the whole length. The naive
sampler re-runs the entire prefix at every step, O(T^2) positions in total; the KV cache
computes each position once, O(T).
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from envs import corpus
from ppo.lm.models.gpt import GPT
from ppo.lm.models.pretrain import PretrainConfig, corpus_tokenizer
from ppo.lm.models.sampling import sample, sample_naive


def tokens_per_second(sampler, model, prompt, batch_size: int, new_tokens: int, pad_id: int,
                      repeats: int, seed: int) -> float:
    """Best of `repeats` timed runs: generated tokens (batch_size * new_tokens) / seconds."""
    best = float("inf")
    for r in range(repeats):
        generator = torch.Generator().manual_seed(seed + r)
        start = time.perf_counter()
        sampler(model, prompt, eos_id=None, pad_id=pad_id, num_samples=batch_size,
                max_new_tokens=new_tokens, generator=generator)
        best = min(best, time.perf_counter() - start)
    return batch_size * new_tokens / best


def main(argv: list[str] | None = None) -> int:
    defaults = PretrainConfig()
    parser = argparse.ArgumentParser(allow_abbrev=False, prog="python -m experiments.benchmarks.sampling", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 64, 512],
                        help="rows sampled in parallel")
    parser.add_argument("--new-tokens", type=int, default=None,
                        help="tokens generated per row (default: fill the block after the prompt)")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs per cell; the fastest is reported")
    parser.add_argument("--seed", type=int, default=0, help="seed of the model init and the samples")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--n-layer", type=int, default=defaults.n_layer, help="transformer blocks")
    parser.add_argument("--n-embd", type=int, default=defaults.n_embd, help="embedding width")
    parser.add_argument("--n-head", type=int, default=defaults.n_head, help="attention heads")
    parser.add_argument("--block-size", type=int, default=defaults.block_size, help="longest sequence in tokens")
    args = parser.parse_args(argv)
    for name in ("repeats", "threads", "n_layer", "n_embd", "n_head", "block_size"):
        if getattr(args, name) <= 0:
            parser.error(f"--{name.replace('_', '-')} must be > 0, got {getattr(args, name)}")
    if any(b <= 0 for b in args.batch_sizes):
        parser.error(f"--batch-sizes must all be > 0, got {args.batch_sizes}")
    torch.set_num_threads(args.threads)

    tokenizer = corpus_tokenizer(corpus.FOOD_CORPUS)
    try:
        pretrain_config = PretrainConfig(n_layer=args.n_layer, n_embd=args.n_embd, n_head=args.n_head,
                                         block_size=args.block_size).validate()
        config = pretrain_config.gpt_config(tokenizer.vocab_size)
    except ValueError as exc:
        parser.error(str(exc))
    model = GPT(config, generator=torch.Generator().manual_seed(args.seed)).eval()
    prompt = tokenizer.encode(corpus.prompt("ravin", "likes"))
    new_tokens = args.new_tokens or config.block_size - len(prompt)
    if not 1 <= new_tokens <= config.block_size - len(prompt):
        parser.error(f"--new-tokens must be in 1..{config.block_size - len(prompt)}, got {new_tokens}")

    print(f"GPT {config.n_layer} layers x {config.n_embd} wide, prompt {len(prompt)} tokens, "
          f"{new_tokens} new tokens per row, {torch.get_num_threads()} thread(s), best of {args.repeats}")
    print(f"{'batch':>6} {'KV cache tok/s':>15} {'naive tok/s':>12} {'speed-up':>9}")
    for batch_size in args.batch_sizes:
        cached = tokens_per_second(sample, model, prompt, batch_size, new_tokens, tokenizer.pad_id,
                                   args.repeats, args.seed)
        naive = tokens_per_second(sample_naive, model, prompt, batch_size, new_tokens, tokenizer.pad_id,
                                  args.repeats, args.seed)
        print(f"{batch_size:>6} {cached:>15,.0f} {naive:>12,.0f} {cached / naive:>8.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
