"""One preset's PPO update three ways: float32 as the library runs it, under bfloat16 autocast, compiled.

    python -m experiments.benchmarks.update_variants                          # MinAtar Breakout, all three
    python -m experiments.benchmarks.update_variants --env-id CartPole-v1 --variants float32 bfloat16
    python -m experiments.benchmarks.update_variants --rounds 20 --variants float32 compile

Each variant gets its own trainer, built alike from the env's preset (the same seed), and
the variants take turns: every round, each collects a rollout and its advantages, and its
update (K epochs of minibatch steps, `PPO.update`) alone is timed. The table gives each
variant's median update over the rounds after the first, its ratio to float32's, and the
median number of gradient steps its updates took (a preset with target_kl stops an update
early, and a variant that trains otherwise may stop elsewhere, so compare times of updates
with the same number of steps):

    float32   the update as the library runs it (eager, float32)
    bfloat16  each minibatch's loss inside torch.autocast("cpu", dtype=torch.bfloat16), its
              backward and the optimiser step outside: products and convolutions in
              bfloat16, the rest as autocast leaves it in float32
    compile   the trainer's minibatch loss wrapped in torch.compile (inductor): its forward
              and backward compiled, the optimiser step eager; the first round's update,
              which compiles, is given apart (inductor keeps what it compiled in a cache on
              disk, so a second command compiles the same graphs in less time)

The variants do not train alike: bfloat16 rounds differently, so after the first round its
trainer has its own parameters. This times the update's arithmetic; it says nothing of how
a run learns in bfloat16. Whether this CPU has bfloat16 instructions (AVX-512 BF16, AMX) is
printed: without them autocast's bfloat16 products are emulated and slow.
"""

from __future__ import annotations

import statistics
import time

import torch

from envs.factory import make_vec_env
from experiments.commands.cli import OneLineArgumentParser, configure_process, run_with_user_errors
from experiments.commands.presets import build_config
from ppo.trainers.choice import trainer_class

PROG = "python -m experiments.benchmarks.update_variants"
VARIANTS = ("float32", "bfloat16", "compile")


def build_trainer(config, variant: str):
    """A trainer of `config` whose minibatch loss runs as `variant`."""
    trainer = trainer_class()(config, make_vec_env(config.env_id, config.num_envs, config.env_backend),
                              progress=False)
    loss = trainer.minibatch_loss
    if variant == "compile":
        trainer.minibatch_loss = torch.compile(loss)
    elif variant == "bfloat16":
        def minibatch_loss_in_bfloat16(minibatch):
            # One context per minibatch: autocast keeps its bfloat16 copies of the weights until
            # the outermost context ends, so one around the whole update would run every
            # minibatch at the weights the update started from.
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return loss(minibatch)

        trainer.minibatch_loss = minibatch_loss_in_bfloat16
    return trainer


def timed_update(trainer) -> tuple[float, int]:
    """Seconds of one update on a fresh rollout of the trainer's own policy, and its gradient steps."""
    trainer.collect_rollout()
    advantages, returns = trainer.compute_advantages()
    started = time.perf_counter()
    metrics = trainer.update(advantages, returns)
    return time.perf_counter() - started, int(metrics["gradient_steps"])


def bfloat16_hardware() -> str:
    """Which bfloat16 instructions this CPU has, as torch sees them ("unknown" where this torch cannot tell)."""
    probes = [(name, getattr(torch.cpu, probe, None)) for name, probe in
              (("AVX-512 BF16", "_is_avx512_bf16_supported"), ("AMX", "_is_amx_tile_supported"))]
    if any(probe is None for _, probe in probes):
        return "unknown to this torch"
    has = [name for name, probe in probes if probe()]
    return " and ".join(has) if has else "neither AVX-512 BF16 nor AMX (bfloat16 emulated)"


def main(argv: list[str] | None = None) -> int:
    parser = OneLineArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="MinAtar/Breakout-v1", help="its preset is used (default: MinAtar/Breakout-v1)")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS),
                        help=f"which updates to time (default: all: {' '.join(VARIANTS)}); float32 is always timed")
    parser.add_argument("--rounds", type=int, default=12, help="rounds in turn, the first untimed (default: 12)")
    args = parser.parse_args(argv)
    if args.rounds < 2:
        parser.error(f"--rounds {args.rounds}: give at least 2 (the first round is not counted)")
    variants = ["float32"] + [variant for variant in dict.fromkeys(args.variants) if variant != "float32"]
    config = build_config({"env_id": args.env_id, "tensorboard": False, "checkpoint_every": 0})
    config = config.replace(total_timesteps=config.batch_size * (args.rounds + 1))
    configure_process(config.num_threads)
    print(f"{config.env_id}'s preset: {config.num_envs} envs × {config.num_steps} steps, {config.update_epochs} "
          f"epochs × {config.num_minibatches} minibatches, {torch.get_num_threads()} thread(s); bfloat16 "
          f"instructions: {bfloat16_hardware()}; median update of rounds 2-{args.rounds}, variants in turn")
    trainers = {variant: build_trainer(config, variant) for variant in variants}
    seconds = {variant: [] for variant in variants}
    steps = {variant: [] for variant in variants}
    for _ in range(args.rounds):
        for variant, trainer in trainers.items():
            took, gradient_steps = timed_update(trainer)
            seconds[variant].append(took)
            steps[variant].append(gradient_steps)
    base = statistics.median(seconds["float32"][1:])
    for variant in variants:
        median = statistics.median(seconds[variant][1:])
        first = f"; its first update took {seconds[variant][0]:.1f} s (compiling)" if variant == "compile" else ""
        print(f"  {variant:<9} {median * 1e3:>8.1f} ms  {median / base:>5.2f}× float32's  "
              f"gradient steps per update: median {statistics.median(steps[variant][1:]):g}{first}")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_with_user_errors(PROG, main))
