"""Throughput of recurrent PPO against feed-forward PPO, side by side in one run.

    python -m experiments.benchmarks.recurrent
    python -m experiments.benchmarks.recurrent --rounds 7 --iterations 4 --num-envs 16 --num-steps 128

Both train on the batched torch CartPole-v1 with the same sizes (N envs × T steps, M
minibatches × K epochs, the same hidden layers); the recurrent one adds a GRU of
`--recurrent-hidden-size` after them (ppo.trainers.recurrent). Rounds alternate between the
two, each round timing `--iterations` training iterations (rollout and update) of a trainer
built before the round, and the table shows the median environment steps per second, so a
noisy machine slows both alike. The last line is the ratio of the medians.

With sb3-contrib installed (the optional extra 'benchmarks'), a second table times
sb3-contrib's RecurrentPPO (an LSTM) against this library's RecurrentPPO with an LSTM on
gymnasium's CartPoleNoVel-v1 (the same env object type for both: gymnasium's vector env
of N Python copies), the same sizes; without it the table is skipped with a note. The
layouts differ: here two 64 tanh layers before the LSTM, in sb3-contrib's default policy
its 64-64 layers after it (separate actor and critic LSTMs in both).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import time

import torch

from envs.factory import make_vec_env
from ppo.config import PPOConfig
from ppo.trainers.choice import trainer_class


def config_for(args, recurrent: str, env_id: str = "CartPole-v1", backend: str = "torch") -> PPOConfig:
    return PPOConfig(env_id=env_id, env_backend=backend, num_envs=args.num_envs, num_steps=args.num_steps,
                     num_minibatches=args.num_minibatches, update_epochs=args.update_epochs,
                     total_timesteps=args.num_envs * args.num_steps * args.iterations * (args.rounds + 1),
                     recurrent=recurrent,
                     **({} if recurrent == "none" else {"recurrent_hidden_size": args.recurrent_hidden_size}),
                     tensorboard=False, checkpoint_every=0).validate()


def steps_per_second(config: PPOConfig, iterations: int) -> float:
    """Environment steps per second of `iterations` training iterations of a fresh trainer."""
    trainer = trainer_class()(config, make_vec_env(config.env_id, config.num_envs, config.env_backend),
                                    progress=False)
    started = time.perf_counter()
    for _ in range(iterations):
        trainer.train_iteration()
    return iterations * config.batch_size / (time.perf_counter() - started)


def sb3_contrib_steps_per_second(args) -> float:
    """sb3-contrib's RecurrentPPO (MlpLstmPolicy) on CartPoleNoVel-v1, the same sizes."""
    import gymnasium as gym
    from sb3_contrib import RecurrentPPO as Sb3RecurrentPPO
    from stable_baselines3.common.env_util import make_vec_env as sb3_make_vec_env

    import envs  # noqa: F401  (registers CartPoleNoVel-v1 with gymnasium)

    env = sb3_make_vec_env(lambda: gym.make("CartPoleNoVel-v1"), n_envs=args.num_envs)
    model = Sb3RecurrentPPO("MlpLstmPolicy", env, n_steps=args.num_steps, n_epochs=args.update_epochs,
                            batch_size=args.num_envs * args.num_steps // args.num_minibatches, device="cpu",
                            policy_kwargs=dict(lstm_hidden_size=args.recurrent_hidden_size), verbose=0)
    steps = args.num_envs * args.num_steps * args.iterations
    started = time.perf_counter()
    model.learn(total_timesteps=steps)
    return steps / (time.perf_counter() - started)


def print_table(title: str, results: dict[str, list[float]]) -> None:
    print(title)
    for name, values in results.items():
        print(f"  {name:<34} {statistics.median(values):>10,.0f} steps/s   (rounds: "
              + ", ".join(f"{value:,.0f}" for value in values) + ")")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per trainer")
    parser.add_argument("--iterations", type=int, default=3, help="training iterations timed per round")
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--num-steps", type=int, default=128)
    parser.add_argument("--num-minibatches", type=int, default=4)
    parser.add_argument("--update-epochs", type=int, default=4)
    parser.add_argument("--recurrent-hidden-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    print(f"{args.num_envs} envs × {args.num_steps} steps, {args.num_minibatches} minibatches × "
          f"{args.update_epochs} epochs, hidden layers 64-64, {args.threads} thread(s); "
          f"{args.rounds} alternating rounds of {args.iterations} iterations")

    configs = {"feed-forward PPO (CartPole-v1, torch)": config_for(args, "none"),
               "recurrent PPO, GRU (CartPole-v1, torch)": config_for(args, "gru")}
    results: dict[str, list[float]] = {name: [] for name in configs}
    for _ in range(args.rounds):
        for name, config in configs.items():
            results[name].append(steps_per_second(config, args.iterations))
    print_table("Library PPO, feed-forward against recurrent:", results)
    feed_forward, recurrent = (statistics.median(values) for values in results.values())
    print(f"  recurrent / feed-forward: {recurrent / feed_forward:.3f}")

    if importlib.util.find_spec("sb3_contrib") is None:
        print("sb3-contrib is not installed: its RecurrentPPO is not timed "
              "(pip install -c constraints.txt -e '.[benchmarks]')")
        return 0
    ours = config_for(args, "lstm", env_id="CartPoleNoVel-v1", backend="gymnasium")
    contrib: dict[str, list[float]] = {"this library's RecurrentPPO (LSTM)": [], "sb3-contrib RecurrentPPO (LSTM)": []}
    for _ in range(args.rounds):
        contrib["this library's RecurrentPPO (LSTM)"].append(steps_per_second(ours, args.iterations))
        contrib["sb3-contrib RecurrentPPO (LSTM)"].append(sb3_contrib_steps_per_second(args))
    print_table("CartPoleNoVel-v1 on gymnasium's vector env, LSTM 64:", contrib)
    ours_median, theirs_median = (statistics.median(values) for values in contrib.values())
    print(f"  this library / sb3-contrib: {ours_median / theirs_median:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
