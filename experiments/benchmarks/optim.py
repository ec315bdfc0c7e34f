"""Cost of one PPO gradient step: torch.optim.Adam + clip_grad_norm_ vs ppo.parallel.optim.FlatAdam.

    python -m experiments.benchmarks.optim
    python -m experiments.benchmarks.optim --minibatch-sizes 64 256 1024 --rounds 7

Both optimizers train identical copies of the default actor-critic (64-64, separate actor
and critic) on the same minibatches. Rounds alternate between them and the table shows
medians, so a noisy machine slows both alike. "optimizer" is the clip + Adam step alone;
"whole step" adds the forward and backward pass. A last line times, in a fresh process,
the first construction of a torch.optim optimizer (it imports torch._dynamo).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import subprocess
import sys
import time

import gymnasium as gym
import torch

from ppo.algorithm.losses import clipped_surrogate_loss, value_loss
from ppo.models.networks import ActorCritic
from ppo.parallel.optim import FlatAdam


def make_pair(hidden_sizes: tuple[int, ...], max_grad_norm: float):
    torch.manual_seed(0)
    model = ActorCritic(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), hidden_sizes)
    twin = copy.deepcopy(model)
    torch_adam = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-5, fused=True)

    def torch_optimizer_step():
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        torch_adam.step()

    flat_adam = FlatAdam(twin.parameters(), lr=1e-3, eps=1e-5)

    def flat_adam_step():
        flat_adam.clip_grad_norm(max_grad_norm)
        flat_adam.step()

    return {"torch.optim": (model, torch_adam, torch_optimizer_step), "FlatAdam": (twin, flat_adam, flat_adam_step)}


def gradient_step(model, optimizer, optimizer_step, batch) -> None:
    obs, actions, advantages, returns, old_log_probs = batch
    log_probs, entropy, values = model.evaluate_actions(obs, actions)
    loss = clipped_surrogate_loss(log_probs, old_log_probs, advantages, 0.2) + 0.5 * value_loss(values, None, returns)
    optimizer.zero_grad()
    loss.backward()
    optimizer_step()


def microseconds(function, repeats: int) -> float:
    start = time.perf_counter()
    for _ in range(repeats):
        function()
    return (time.perf_counter() - start) / repeats * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, prog="python -m experiments.benchmarks.optim", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--minibatch-sizes", type=int, nargs="+", default=[64, 256, 1024], help="samples per step")
    parser.add_argument("--steps", type=int, default=200, help="timed steps per round and cell")
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds; medians are reported")
    parser.add_argument("--hidden-sizes", type=int, nargs="+", default=[64, 64], help="hidden layer widths")
    args = parser.parse_args(argv)
    if min(args.minibatch_sizes + [args.steps, args.rounds] + args.hidden_sizes) <= 0:
        parser.error("--minibatch-sizes, --steps, --rounds and --hidden-sizes must all be > 0")
    torch.set_num_threads(1)
    pair = make_pair(tuple(args.hidden_sizes), max_grad_norm=0.5)

    print(f"{'minibatch':>9} | {'optimizer':>11} {'torch.optim':>12} {'FlatAdam':>9} {'ratio':>6} |"
          f" {'whole step':>10} {'torch.optim':>12} {'FlatAdam':>9} {'ratio':>6}")
    for size in args.minibatch_sizes:
        batch = (torch.randn(size, 4), torch.randint(0, 2, (size,)), torch.randn(size), torch.randn(size),
                 torch.full((size,), -0.69))
        times = {(name, part): [] for name in pair for part in ("optimizer", "whole")}
        for _ in range(args.rounds):
            for name, (model, optimizer, optimizer_step) in pair.items():
                gradient_step(model, optimizer, optimizer_step, batch)  # warm-up, and gradients to step on
                times[name, "optimizer"].append(microseconds(optimizer_step, args.steps))
                times[name, "whole"].append(
                    microseconds(lambda: gradient_step(model, optimizer, optimizer_step, batch), args.steps)
                )
        median = {key: statistics.median(values) for key, values in times.items()}
        print(f"{size:>9} | {'µs':>11} {median['torch.optim', 'optimizer']:>12.0f} {median['FlatAdam', 'optimizer']:>9.0f}"
              f" {median['torch.optim', 'optimizer'] / median['FlatAdam', 'optimizer']:>5.1f}× |"
              f" {'µs':>10} {median['torch.optim', 'whole']:>12.0f} {median['FlatAdam', 'whole']:>9.0f}"
              f" {median['torch.optim', 'whole'] / median['FlatAdam', 'whole']:>5.1f}×")

    probe = ("import time, torch; m = torch.nn.Linear(2, 2); t = time.perf_counter(); "
             "torch.optim.Adam(m.parameters()); print(time.perf_counter() - t)")
    seconds = float(subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout)
    print(f"first torch.optim.Adam(...) in a fresh process: {seconds:.2f} s (FlatAdam imports nothing)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
