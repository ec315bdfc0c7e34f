"""Where a whole training command's time goes, and how close its arithmetic runs to the machine's.

    python -m experiments.benchmarks.breakdown                          # every workload below
    python -m experiments.benchmarks.breakdown --workloads minatar --minatar-steps 1000000
    python -m experiments.benchmarks.breakdown --workloads cartpole --out breakdown.json

Each workload is one `ppo-train` command, run as a fresh process (so its start-up is real):

    cartpole   ppo-train --env-id CartPole-v1 --eval-episodes 100      (the README's first command)
    minatar    ppo-train --env-id MinAtar/Breakout-v1 --total-timesteps STEPS --eval-episodes 10
    recurrent  ppo-train --env-id CartPoleNoVel-v1 --eval-episodes 100  (the GRU preset)
    seeds      ppo-train --env-id CartPole-v1 --seeds 1-16 --eval-episodes 100

Inside the process every phase is timed by wrapping the method that does it, so nothing else
changes: start-up (the interpreter and the imports until the command's code runs, and the
process's exit), setup
(config, envs, trainer, run folder), the rollout cut into env stepping, the policy's forward
pass and sampling, and the rest (storage, episode counters), advantages (GAE), the update (K
epochs of minibatch steps), logging (metrics.csv, TensorBoard, the progress bar), checkpoints,
the learning-curve plot (what the command waits for of it: a helper process imports matplotlib
while the run trains and draws while it evaluates, ppo.runs.plotting.CurveDrawer) and the
greedy evaluation. "other" is the command's wall time less the phases.

Arithmetic efficiency. One training iteration of the same config runs again under a counter of
floating-point operations (torch.utils.flop_counter's formulas, per operation and shape): its
FLOPs per env step, and the operation and shape that hold most of them (the dominant shape).
That operation alone, at that shape, is then timed on one thread in this process: the machine's
rate at the network's own arithmetic. efficiency = FLOPs per step × training steps per second /
that rate; 1.0 would mean the run does nothing but its largest products at full speed.

The ceiling. Every counted operation of that iteration (each operation at each of its shapes)
is replayed alone in the same way, and the iteration's FLOPs of each are divided by its rate:
K, the seconds the iteration's products and convolutions take with no element-wise work and
no optimiser between them (each call still pays its own dispatch). ceiling = the iteration's
FLOPs / K / the dominant rate, the efficiency of a one-thread run that spent only K per
iteration. With the run's iteration taken as its mean (training seconds over iterations),
the efficiency is the ceiling times K's share of it, exactly: a low ceiling is slow kernels
(a convolution far below the dense product's rate), a low share is everything around them.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from experiments.commands.phase_clock import PhaseClock, instrument_trainer

PROG = "python -m experiments.benchmarks.breakdown"
WORKLOADS = ("cartpole", "minatar", "recurrent", "seeds")
PHASES = ("start-up", "setup", "env step", "policy forward", "rest of rollout", "advantages", "update", "logging",
          "checkpoints", "plot", "evaluation", "other")
MARK = "breakdown-record: "
SHOWN_SHARE = 0.1  # an operation is named in the ceiling's line when it holds this much of K


def workload_flags(name: str, minatar_steps: int) -> list[str]:
    """The ppo-train flags of a workload (the run folder is added by the caller)."""
    return {
        "cartpole": ["--env-id", "CartPole-v1", "--eval-episodes", "100"],
        "minatar": ["--env-id", "MinAtar/Breakout-v1", "--total-timesteps", str(minatar_steps),
                    "--eval-episodes", "10"],
        "recurrent": ["--env-id", "CartPoleNoVel-v1", "--eval-episodes", "100"],
        "seeds": ["--env-id", "CartPole-v1", "--seeds", "1-16", "--eval-episodes", "100"],
    }[name]


# ---------------------------------------------------------------------------------- inside the command
def run_command_timed(flags: list[str]) -> dict:
    """Run ppo-train with `flags` in this process, every phase timed; the record of the run.
    What it wraps is put back afterwards."""
    started_imports = time.perf_counter()
    from experiments.commands.entry_points import import_main
    train_main = import_main("experiments.commands.train")  # as the console command imports it
    from ppo.runs.plotting import CurveDrawer
    from ppo.trainers import base
    from experiments.commands import sweep, train

    clock = PhaseClock()
    clock.seconds["start-up"] = time.perf_counter() - started_imports  # the interpreter's own start is added by the caller
    trainers = []
    original_train = base.BaseTrainer.train

    def train_instrumented(self, *args, **kwargs):
        instrument_trainer(clock, self)
        trainers.append(self)
        return clock.timed("training", lambda: original_train(self, *args, **kwargs))()

    wrapped = [(base.BaseTrainer, "train", train_instrumented)]
    wrapped += [(CurveDrawer, name, clock.timed("plot", getattr(CurveDrawer, name))) for name in ("draw", "finish")]
    wrapped += [(module, "evaluate_run", clock.timed("evaluation", module.evaluate_run)) for module in (train, sweep)]
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in wrapped]
    for owner, name, replacement in wrapped:
        setattr(owner, name, replacement)
    command_started = time.perf_counter()
    with open(os.devnull, "w") as quiet:
        stdout, sys.stdout = sys.stdout, quiet
        try:
            exit_code = train_main(flags + ["--no-progress"])
        finally:
            sys.stdout = stdout
            for owner, name, original in originals:
                setattr(owner, name, original)
    wall = time.perf_counter() - command_started
    if exit_code != 0 or not trainers:
        raise SystemExit(f"{PROG}: ppo-train {' '.join(flags)} failed (exit {exit_code})")
    trainer = trainers[-1]
    seconds = dict(clock.seconds)
    seconds["other"] = seconds.pop("training", 0.0)  # the loop's own bookkeeping, outside the wrapped methods
    seconds["setup"] = wall - sum(value for phase, value in seconds.items() if phase != "start-up")
    members = getattr(trainer, "num_members", 1)  # a seed batch's global_step counts one member's steps
    return {"seconds": seconds, "command_wall": wall + seconds["start-up"], "steps": int(trainer.global_step) * members,
            "train_seconds": float(trainer.train_seconds), "config": trainer.config.to_dict()}


# ---------------------------------------------------------------------------------- arithmetic
def operation_flops(func, args, kwargs, out) -> float | None:
    """FLOPs of one aten call by torch.utils.flop_counter's formulas. Inference mode dispatches
    aten.linear and aten.conv1d/2d/3d whole, not as the addmm and aten.convolution the formulas
    know: a linear is counted as its product, 2·rows·in·out, a convolution by aten.convolution's
    formula. None: not counted."""
    import torch
    from torch.utils.flop_counter import flop_registry

    aten = torch.ops.aten
    if func._overloadpacket is aten.linear:
        inputs, weight = args[0], args[1]
        return 2 * (inputs.numel() // inputs.shape[-1]) * weight.shape[0] * weight.shape[1]
    if func._overloadpacket in (aten.conv1d, aten.conv2d, aten.conv3d):
        return flop_registry[aten.convolution](args[0], args[1], None, None, None, None, False, out_val=out)
    if func._overloadpacket in flop_registry:
        return flop_registry[func._overloadpacket](*args, **kwargs, out_val=out)
    return None


def count_iteration_flops(config_dict: dict, seeds: list[int] | None = None) -> dict:
    """FLOPs per env step of one training iteration (rollout, advantages, update) of the config, as a
    seed batch of `seeds` if given; the (operation, shapes) holding most of them, and its share."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from envs.factory import make_seed_batch_env, make_vec_env
    from ppo.config import PPOConfig
    from ppo.trainers.ppo import PPO

    config = PPOConfig.from_dict({**config_dict, "tensorboard": False})
    counts: dict[tuple, float] = defaultdict(float)
    examples: dict[tuple, tuple] = {}

    def described(value):
        if isinstance(value, torch.Tensor):
            return ("tensor", tuple(value.shape), tuple(value.stride()), str(value.dtype))
        if isinstance(value, (list, tuple)):
            return type(value)(described(item) for item in value)
        return value

    class CountedOperations(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            flops = operation_flops(func, args, kwargs, out)
            if flops is not None:
                key = (str(func), repr(described(args)))
                counts[key] += flops
                examples.setdefault(key, (func, described(args), described(kwargs)))
            return out

    torch.set_num_threads(1)
    if seeds:
        envs = make_seed_batch_env(config.env_id, len(seeds), config.num_envs, config.env_backend)
        trainer = PPO(config, envs, seeds=seeds, progress=False)
    else:
        trainer = PPO(config, make_vec_env(config.env_id, config.num_envs, config.env_backend), progress=False)
    trainer.train_iteration()  # the first iteration's one-time work (vmap checks, allocation) stays out
    with CountedOperations():
        trainer.train_iteration()
    steps = config.batch_size * (len(seeds) if seeds else 1)
    dominant = max(counts, key=counts.get)
    return {"flops_per_step": sum(counts.values()) / steps, "dominant": dominant,
            "dominant_share": counts[dominant] / sum(counts.values()), "example": examples[dominant],
            "steps": steps, "operations": [(key, counts[key], examples[key]) for key in counts]}


def counted_kernel_seconds(counted: dict, seconds: float = 0.2, rates: dict | None = None) -> dict:
    """What one iteration's counted operations cost alone: each (operation, shapes) replayed on one
    thread (`operation_rate`) for its FLOPs in the iteration, K = Σ FLOPs / rate. Returns K and, per
    operation (its shapes together), its share of K and its rate, the largest share first. No
    element-wise work and no optimiser between the calls (each still pays its own dispatch),
    caches warm: N steps in K seconds is a ceiling a one-thread run cannot pass. `rates` holds
    rates already measured, by (operation, shapes) key: those are not replayed again."""
    rates = rates or {}
    spent: dict[str, float] = defaultdict(float)
    flops_of: dict[str, float] = defaultdict(float)
    for key, flops, example in counted["operations"]:
        name = str(example[0])
        spent[name] += flops / (rates[key] if key in rates else operation_rate(example, seconds))
        flops_of[name] += flops
    total = sum(spent.values())
    kernels = [[name, spent[name] / total, flops_of[name] / spent[name]]
               for name in sorted(spent, key=spent.get, reverse=True)]
    return {"kernel_seconds": total, "kernels": kernels}


def operation_rate(example: tuple, seconds: float = 0.5) -> float:
    """FLOP/s of one operation replayed on fresh random tensors of its shapes, one thread."""
    import torch

    func, args, kwargs = example

    def built(value):
        if isinstance(value, tuple) and value and value[0] == "tensor":
            _, shape, stride, dtype = value
            tensor = torch.empty_strided(shape, stride, dtype=getattr(torch, dtype.split(".")[1]))
            return tensor.uniform_(-1, 1) if tensor.is_floating_point() else tensor.zero_()
        if isinstance(value, (list, tuple)):
            return type(value)(built(item) for item in value)
        return value

    torch.set_num_threads(1)
    args, kwargs = built(args), built(kwargs)
    flops = operation_flops(func, args, kwargs, func(*args, **kwargs))
    repeats, elapsed = 1, 0.0
    while elapsed < seconds:
        repeats *= 2
        started = time.perf_counter()
        for _ in range(repeats):
            func(*args, **kwargs)
        elapsed = time.perf_counter() - started
    return flops * repeats / elapsed


# ---------------------------------------------------------------------------------- the parent
def measure(name: str, minatar_steps: int) -> dict:
    flags = workload_flags(name, minatar_steps)
    with tempfile.TemporaryDirectory() as folder:
        started = time.perf_counter()  # a fresh folder: a run's own, or the parent of a batch's runs
        finished = subprocess.run([sys.executable, "-m", "experiments.benchmarks.breakdown", "--inside", "--",
                                   *flags, "--run-dir", str(Path(folder) / "runs")], capture_output=True, text=True)
        whole = time.perf_counter() - started
    if finished.returncode != 0:
        raise SystemExit(f"{PROG}: the {name} workload failed: {finished.stderr.strip().splitlines()[-1:]}")
    record = json.loads(next(line for line in finished.stdout.splitlines() if line.startswith(MARK))[len(MARK):])
    record["seconds"]["start-up"] += whole - record["command_wall"]  # the interpreter, and the exit
    record["command_wall"] = whole
    record["command"] = "ppo-train " + " ".join(flags)
    counted = count_iteration_flops(record["config"], list(range(1, 17)) if name == "seeds" else None)
    rate = operation_rate(counted["example"])
    steps_per_second = record["steps"] / record["train_seconds"]
    func, args, _ = counted["example"]
    shapes = [arg[1] for arg in args if isinstance(arg, tuple) and arg and arg[0] == "tensor"]
    kernels = counted_kernel_seconds(counted, rates={counted["dominant"]: rate})  # one rate for the dominant shape
    record.update(flops_per_step=counted["flops_per_step"], dominant_operation=str(func),
                  dominant_shapes=shapes, dominant_share=counted["dominant_share"], dominant_rate=rate,
                  steps_per_second=steps_per_second,
                  efficiency=counted["flops_per_step"] * steps_per_second / rate,
                  iteration_steps=counted["steps"], iteration_seconds=counted["steps"] / steps_per_second,
                  ceiling=counted["flops_per_step"] * counted["steps"] / kernels["kernel_seconds"] / rate, **kernels)
    del record["config"]
    return record


def kernel_shares(kernels: list, code: str = "") -> str:
    """'aten.mm.default 33% at 203 GFLOP/s, ...': the operations holding at least SHOWN_SHARE of K
    (each name between `code` marks)."""
    return ", ".join(f"{code}{name}{code} {share:.0%} at {rate / 1e9:.0f} GFLOP/s"
                     for name, share, rate in kernels if share >= SHOWN_SHARE)


def format_record(name: str, record: dict) -> str:
    whole = record["command_wall"]
    lines = [f"{name}: {record['command']}  ({whole:.2f} s whole, {record['steps']:,} steps)"]
    for phase in PHASES:
        value = record["seconds"].get(phase, 0.0)
        lines.append(f"  {phase:<16} {value:>8.2f} s  {value / whole:>6.1%}")
    shapes = " · ".join("×".join(map(str, shape)) for shape in record["dominant_shapes"])
    lines.append(f"  arithmetic: {record['flops_per_step'] / 1e6:.3f} MFLOP per env step; dominant "
                 f"{record['dominant_operation']} {shapes} ({record['dominant_share']:.0%} of the FLOPs) runs at "
                 f"{record['dominant_rate'] / 1e9:.1f} GFLOP/s on one thread; training at "
                 f"{record['steps_per_second']:,.0f} steps/s does "
                 f"{record['flops_per_step'] * record['steps_per_second'] / 1e9:.1f} GFLOP/s: efficiency "
                 f"{record['efficiency']:.2f}")
    lines.append(f"  counted operations alone: {record['kernel_seconds'] * 1e3:.1f} ms of an iteration's "
                 f"{record['iteration_seconds'] * 1e3:.1f} ms ({record['iteration_steps']:,} steps), "
                 f"ceiling {record['ceiling']:.2f}: {kernel_shares(record['kernels'])}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:2] == ["--inside", "--"]:
        print(MARK + json.dumps(run_command_timed(argv[2:])))
        gc.freeze()  # and exits as the console command does (experiments.commands.entry_points)
        return 0
    parser = argparse.ArgumentParser(prog=PROG, allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS),
                        help=f"which commands to time (default: all: {' '.join(WORKLOADS)})")
    parser.add_argument("--minatar-steps", type=int, default=409_600,
                        help="the MinAtar workload's budget (default: 409,600 steps, 100 iterations)")
    parser.add_argument("--out", type=Path, default=None, help="write the records as JSON to this file")
    args = parser.parse_args(argv)
    if args.minatar_steps < 4096:
        parser.error(f"--minatar-steps {args.minatar_steps}: give at least 4096 (one iteration)")
    records = {}
    for name in args.workloads:
        records[name] = measure(name, args.minatar_steps)
        print(format_record(name, records[name]), flush=True)
    if args.out:
        args.out.write_text(json.dumps(records, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
