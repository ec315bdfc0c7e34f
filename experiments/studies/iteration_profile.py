"""Where a PPO iteration's time goes: env stepping, the rest of the rollout, advantages, update.

    python -m experiments.studies.iteration_profile --env-id MinAtar/Breakout-v1
    python -m experiments.studies.iteration_profile --env-id CartPole-v1 --iterations 20
    python -m experiments.studies.iteration_profile --env-id MinAtar/Breakout-v1 --num-envs 256 --num-steps 32

One trainer, built from the env's preset (or the PPOConfig defaults where it has none)
with the flags given, runs `--warmup` iterations untimed and then `--iterations` timed
ones, each cut into the three steps `PPO.train_iteration` runs:

    env step         the VecEnv's step calls alone (the rollout's env.step, timed inside it)
    rest of rollout  the policy's forward pass and sampling for every step, and the storage
    advantages       GAE over the rollout
    update           K epochs of minibatch gradient steps

The table gives the median milliseconds of each part per iteration and its share of the
sum, and the training steps per second of the timed iterations as a whole. The network,
not the env, should be the cost on the batched torch envs.
"""

from __future__ import annotations

import statistics
import time

from envs.factory import make_vec_env
from experiments.commands.phase_clock import ENV_STEP, PhaseClock, instrument_trainer
from experiments.commands.cli import OneLineArgumentParser, configure_process, run_with_user_errors
from experiments.commands.presets import build_config
from ppo.trainers.choice import trainer_class

PROG = "python -m experiments.studies.iteration_profile"
# (the trainer's method, its part); the envs' step calls are the part ENV_STEP, inside the rollout
ITERATION_PHASES = (("collect_rollout", "rest of rollout"), ("compute_advantages", "advantages"),
                    ("update", "update"))
PARTS = (ENV_STEP, *(part for _, part in ITERATION_PHASES))


def iteration_clock(trainer) -> PhaseClock:
    """A PhaseClock around `trainer`'s three steps and its envs' step calls (PARTS), for time_iteration."""
    return instrument_trainer(PhaseClock(), trainer, ITERATION_PHASES)


def time_iteration(trainer, clock: PhaseClock) -> dict[str, float]:
    """Seconds of each of PARTS in one training iteration of `trainer`, timed by its
    `iteration_clock`: the rollout is charged its own time less its env steps."""
    clock.seconds.clear()
    trainer.collect_rollout()
    advantages, returns = trainer.compute_advantages()
    trainer.update(advantages, returns)
    return {part: clock.seconds[part] for part in PARTS}


def profile(config, iterations: int, warmup: int) -> dict:
    """{part: median ms per iteration}, with the timed iterations' env steps per second."""
    envs = make_vec_env(config.env_id, config.num_envs, config.env_backend)
    trainer = trainer_class()(config, envs, progress=False)
    clock = iteration_clock(trainer)
    for _ in range(warmup):
        trainer.train_iteration()
    started = time.perf_counter()
    timed = [time_iteration(trainer, clock) for _ in range(iterations)]
    seconds = time.perf_counter() - started
    envs.close()
    return {"ms": {name: 1e3 * statistics.median(row[name] for row in timed) for name in PARTS},
            "steps_per_second": iterations * config.batch_size / seconds}


def main(argv: list[str] | None = None) -> int:
    parser = OneLineArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="MinAtar/Breakout-v1")
    parser.add_argument("--env-backend", default="auto", help="auto (batched torch where it exists), torch, gymnasium")
    parser.add_argument("--iterations", type=int, default=5, help="timed iterations (default: 5)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed iterations first (default: 1)")
    for flag in ("num-envs", "num-steps", "num-minibatches", "update-epochs"):
        parser.add_argument(f"--{flag}", type=int, default=None, help="default: the preset's, or PPOConfig's")
    args = parser.parse_args(argv)
    if args.iterations < 1 or args.warmup < 0:
        parser.error(f"--iterations {args.iterations} / --warmup {args.warmup}: need at least 1 timed iteration "
                     "and no negative warm-up")
    flags = {"env_id": args.env_id, "env_backend": args.env_backend, "tensorboard": False, "checkpoint_every": 0}
    flags.update({name: value for name in ("num_envs", "num_steps", "num_minibatches", "update_epochs")
                  if (value := getattr(args, name)) is not None})
    config = build_config(flags)
    config = config.replace(total_timesteps=config.batch_size * (args.iterations + args.warmup + 1))
    configure_process(config.num_threads)
    print(f"{config.env_id} on {config.env_backend}: {config.num_envs} envs × {config.num_steps} steps, "
          f"{config.update_epochs} epochs × {config.num_minibatches} minibatches, encoder {config.encoder}, "
          f"{config.num_threads} thread(s); median of {args.iterations} iterations")
    result = profile(config, args.iterations, args.warmup)
    total = sum(result["ms"].values())
    for name, ms in result["ms"].items():
        print(f"  {name:<16} {ms:>9.1f} ms  {ms / total:>6.1%}")
    print(f"  {'sum':<16} {total:>9.1f} ms;  {result['steps_per_second']:,.0f} training steps/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(run_with_user_errors(PROG, main))
