"""The measured figures of the README and the book: re-measure a block, record it, and render it where it lives.

    python -m experiments.tools.readme_figures --list                 # the blocks, and which can be re-measured
    python -m experiments.tools.readme_figures cartpole-command       # re-measure, record, rewrite the block
    python -m experiments.tools.readme_figures env-table --envs CartPole-v1 MountainCarContinuous-v0
    python -m experiments.tools.readme_figures --render               # rewrite every block from its record, no training
    python -m experiments.tools.readme_figures --check                # every block equals its record (exit 1 if not)

Every measured figure sits between two invisible markers,
`<!-- figures:NAME -->` … `<!-- /figures:NAME -->`, in one of the documents of DOCUMENTS
(the README, the book's benchmarks page and its guide's pages), and is rendered from a record,
`docs/figures/NAME.json`: the raw measurements, each with its date, the machine (CPU
model, cores, torch version, load average at its start and end) and the exact commands.
A block is re-measured by the benchmark scripts (`experiments/benchmarks/*.py`), never
edited by hand: `--check` fails on a block that differs from what its record renders to,
on a block found in no document and on a block found twice.

A record holds one or more measurements. One measured by this script says so
("measured by experiments.tools.readme_figures"); one carried over from an earlier version of
the README keeps its figures and says "measured in an earlier version, not re-run"
until the block is re-measured; such a measurement has no date, and its rendering says so.
Blocks without a measuring function (figures that no benchmark script produces yet) are
recorded that way only. A block may render from another block's record (the README's
figure caption renders from the MinAtar record).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import platform
import re
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Callable, Sequence

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"
GUIDE = REPO_ROOT / "docs" / "book" / "guide"
DOCUMENTS = (README, REPO_ROOT / "docs" / "book" / "benchmarks.md",
             *(GUIDE / f"{page}.md" for page in ("index", "installing", "training", "own-environments", "run-folder",
                                                 "seeds-and-sweeps", "comparing-runs", "diagnosing", "fast-environments", "classic-control",
                                                 "continuous-control", "memory", "images-and-minatar",
                                                 "language-model", "scaling-out", "python-api", "extending", "design", "layout",
                                                 "lectures", "tests")))
FIGURES_DIR = REPO_ROOT / "docs" / "figures"
MEASURED_HERE = "measured by experiments.tools.readme_figures"
EARLIER = "measured in an earlier version, not re-run"


# ----- the machine and the record -----------------------------------------------------------


def cpu_times() -> dict | None:
    """The whole machine's CPU time so far, in clock ticks (/proc/stat): {"total", "steal"}; None where unreadable.

    Steal is the time a virtual machine's CPUs were ready to run but the host ran something
    else: a share of it over a measurement slows every timed command of it alike."""
    try:
        fields = [int(value) for value in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return None
    return {"total": sum(fields[:8]), "steal": fields[7] if len(fields) > 7 else 0}


def steal_share(start: dict | None, end: dict | None) -> float | None:
    """The share of the CPU time between two `cpu_times` readings that the host took (steal)."""
    if not start or not end or end["total"] <= start["total"]:
        return None
    return (end["steal"] - start["steal"]) / (end["total"] - start["total"])


def machine_description() -> dict:
    """CPU model, cores, torch version and the vector kernels it runs on this CPU (AVX2, AVX512, ...: one CPU
    model name can cover kinds that differ there, and so in their timings and their rounding), the 1-minute
    load average now, and the CPU times so far (cpu_times)."""
    import torch

    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "torch": torch.__version__,
            "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(), "python": platform.python_version(),
            "load_average_start": round(os.getloadavg()[0], 2), "cpu_times_start": cpu_times()}


def new_measurement(label: str, commands: list[str], results: dict, machine: dict) -> dict:
    """One measurement as recorded: what, when, where, how, and the raw results."""
    start = machine.get("cpu_times_start")
    machine = {key: value for key, value in machine.items() if key != "cpu_times_start"}
    machine["load_average_end"] = round(os.getloadavg()[0], 2)
    share = steal_share(start, cpu_times())
    if share is not None:
        machine["steal_share"] = round(share, 3)
    return {"label": label, "provenance": MEASURED_HERE, "date": datetime.date.today().isoformat(),
            "machine": machine, "commands": commands, "results": results}


def describe_where(measurement: dict) -> str:
    """Where and when: 'on 2025-01-31 on a 2-core AMD EPYC (torch 2.13.0; load average 6.0 at the start, ...)'."""
    if measurement["provenance"] == EARLIER:
        return f"on {measurement['machine']['description']} in an earlier version (no date recorded), not re-run"
    if measurement["provenance"] != MEASURED_HERE:
        return f"on {measurement['date']} on {measurement['machine']['description']} ({measurement['provenance']})"
    machine = measurement["machine"]
    kernels = f", {machine['torch_cpu_capability']} kernels" if machine.get("torch_cpu_capability") else ""
    return (f"on {measurement['date']} on a {machine['cores']}-core {machine['cpu']} (torch {machine['torch']}{kernels}; "
            f"load average {machine['load_average_start']:.1f} at the start, {machine['load_average_end']:.1f} at "
            f"the end{': other work shared the cores, so times are inflated' if machine['load_average_start'] > 1.5 else ''}"
            f"{_steal_note(machine.get('steal_share'))})")


STEAL_NOTED = 0.05  # a host that took this share of the CPU time or more is named in the record's description


def _steal_note(share: float | None) -> str:
    if share is None or share < STEAL_NOTED:
        return ""
    return f"; the virtual machine's host took {share:.0%} of its CPU time, so times are inflated"


def record_path(name: str, figures_dir: Path = FIGURES_DIR) -> Path:
    return figures_dir / f"{name}.json"


def load_record(name: str, figures_dir: Path = FIGURES_DIR) -> dict:
    return json.loads(record_path(name, figures_dir).read_text())


def save_record(record: dict, figures_dir: Path = FIGURES_DIR) -> None:
    figures_dir.mkdir(parents=True, exist_ok=True)
    record_path(record["block"], figures_dir).write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n")


def by_label(record: dict) -> dict[str, dict]:
    return {measurement["label"]: measurement for measurement in record["measurements"]}


def _python() -> str:
    return "python -m"  # as a reader types it; the interpreter's own path would name this machine


# ----- block: the whole ppo-train command on CartPole, seeds 201-210 -------------------------

COMMAND_SEEDS = tuple(range(201, 211))


def measure_cartpole_command(args) -> dict:
    from experiments.benchmarks.environments import benchmark_commands

    machine = machine_description()
    rows = benchmark_commands(COMMAND_SEEDS, None, 1)
    commands = [f"ppo-train --seed {seed} --run-dir TMP/seed{seed} --no-progress" for seed in COMMAND_SEEDS]
    return {"block": "cartpole-command", "measurements": [new_measurement("ppo-train", commands, {"rows": rows}, machine)]}


def _listing(values: list[str]) -> str:
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " and " + values[-1]


def render_cartpole_command(record: dict) -> str:
    measurement = by_label(record)["ppo-train"]
    rows = measurement["results"]["rows"]
    seconds = [row["command_seconds"] for row in rows]
    evaluations = [row["eval_mean"] for row in rows]
    full = sum(value == 500.0 for value in evaluations)
    others = [f"{value:.1f}" for value in evaluations if value != 500.0]
    seeds = [row["seed"] for row in rows]
    reached = [row["seconds_to_solved"] for row in rows if row["seconds_to_solved"] == row["seconds_to_solved"]]  # NaN: never
    return (f"over {len(rows)} seeds never used for tuning ({seeds[0]}–{seeds[-1]}), measured "
            f"{describe_where(measurement)}, the whole command from start to exit (imports, training, the plot, the "
            f"100-episode evaluation) took a median {statistics.median(seconds):.1f} s ({min(seconds):.1f}–"
            f"{max(seconds):.1f}), the mean of the last 20 training episodes reached 475 after a median "
            f"{statistics.median(reached):.1f} s of training"
            f"{'' if len(reached) == len(rows) else f' ({len(reached)} of {len(rows)} runs reached it)'}, and "
            f"{sum(value >= 475 for value in evaluations)} of {len(rows)} evaluated ≥ 475 ({full} at 500"
            f"{', the others ' + _listing(others) if others else ''}")  # the README closes the parenthesis


# ----- block: Stable-Baselines3's zoo job in turns with ppo-train ----------------------------


def measure_sb3_comparison(args) -> dict:
    from experiments.benchmarks.environments import benchmark_commands

    machine = machine_description()
    rows = benchmark_commands(COMMAND_SEEDS, args.sb3_python, 1)
    commands = [f"{_python()} experiments.benchmarks.environments --skip-stepping --train-seeds --command-seeds "
                f"{' '.join(map(str, COMMAND_SEEDS))} --sb3-python PYTHON --sb3-every 1"]
    return {"block": "sb3-comparison", "measurements": [new_measurement("sb3-zoo", commands, {"rows": rows}, machine)]}


def render_sb3_comparison(record: dict) -> str:
    measurement = by_label(record)["sb3-zoo"]
    results = measurement["results"]
    if "rows" in results:
        sb3 = [row["command_seconds"] for row in results["rows"] if row["who"] == "sb3-zoo"]
        ours = statistics.median(row["command_seconds"] for row in results["rows"] if row["who"] == "ppo-train")
        results = {"median_s": statistics.median(sb3), "min_s": min(sb3), "max_s": max(sb3), "ppo_train_median_s": ours}
    return (f"Stable-Baselines3 with the zoo's tuned CartPole settings, run in turns with `ppo-train` "
            f"{describe_where(measurement)}, took a median {results['median_s']:.0f} s ({results['min_s']:.0f}–"
            f"{results['max_s']:.0f} s), {results['median_s'] / results['ppo_train_median_s']:.1f}× the "
            f"{results['ppo_train_median_s']:.1f} s of `ppo-train` in those turns.")


# ----- block: the per-environment table (benchmark_continuous) ------------------------------

ENV_SEEDS = (201, 202, 203, 204, 205)


def measure_env_table(args) -> dict:
    from experiments.benchmarks.continuous import CLASSIC_CONTROL, benchmark_env
    from experiments.commands.presets import build_config

    record = load_record("env-table", args.figures_dir)
    measurements = by_label(record)
    for env_id in args.envs or CLASSIC_CONTROL:
        machine = machine_description()
        options = argparse.Namespace(seeds=list(args.seeds or ENV_SEEDS), preset="auto", threshold=None,
                                     runs_dir=None, eval_episodes=100)
        summary = benchmark_env(build_config, {"env_id": env_id}, options)
        command = (f"{_python()} experiments.benchmarks.continuous --env-id {env_id} "
                   f"--seeds {' '.join(map(str, options.seeds))}")
        measurements[env_id] = new_measurement(env_id, [command], {
            "steps": summary["config"]["total_timesteps"], "threshold": summary["threshold"], "zoo": summary["zoo"],
            "per_seed": summary["results"]}, machine)
    return {**record, "measurements": [measurements[label] for label in sorted(measurements, key=_env_order)]}


def _env_order(env_id: str) -> int:
    from experiments.benchmarks.continuous import CLASSIC_CONTROL

    return CLASSIC_CONTROL.index(env_id) if env_id in CLASSIC_CONTROL else len(CLASSIC_CONTROL)


def render_env_table(record: dict) -> str:
    lines = ["| env | steps | solved | greedy eval per seed (100 episodes) | median train s | median steps/s | "
             "SB3 zoo (PPO) |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for measurement in record["measurements"]:
        results = measurement["results"]
        per_seed = results["per_seed"]
        seeds = [row["seed"] for row in per_seed]
        evaluations = [row["eval_mean"] for row in per_seed]
        solved = sum(value >= results["threshold"] for value in evaluations)
        seed_note = "" if tuple(seeds) == ENV_SEEDS else (f" (seed {seeds[0]})" if len(seeds) == 1
                                                          else f" (seeds {seeds[0]}–{seeds[-1]})")
        train_s = f"{results.get('median_train_s') or statistics.median(row['train_wall_s'] for row in per_seed):.1f}"
        if "batch_wall_s" in results:
            train_s += f" (batched: {len(seeds)} seeds in {results['batch_wall_s']:.1f} s)"
        steps_per_s = results.get("median_steps_per_s") or statistics.median(row["steps_per_s"] for row in per_seed)
        lines.append(f"| {measurement['label']} | {results['steps']:,} | {solved}/{len(seeds)} "
                     f"(≥ {results['threshold']:g}) | {', '.join(f'{value:.1f}' for value in evaluations)}{seed_note} "
                     f"| {train_s} | {steps_per_s:,.0f} | {results['zoo']} |")
    lines.append("")
    groups: dict[str, list[str]] = {}
    for measurement in record["measurements"]:
        groups.setdefault(describe_where(measurement), []).append(measurement["label"])
    lines.append("Measured: " + "; ".join(f"{_listing(labels)} {where}" for where, labels in groups.items()) + ".")
    return "\n" + "\n".join(lines) + "\n"


# ----- block: S seeds batched against one after another (benchmark_seeds) --------------------

BATCH_SIZES = (1, 4, 16, 64)


def measure_seed_batch_table(args) -> dict:
    from experiments.benchmarks.seeds import time_batch, time_sequential
    from experiments.commands.presets import build_config

    machine = machine_description()
    config = build_config({"env_id": "CartPole-v1", "env_backend": "torch", "tensorboard": False}, "auto")
    rows = []
    for size in args.sizes or BATCH_SIZES:
        seeds = list(range(1, size + 1))
        batched, _ = time_batch(config, seeds, 1)
        timed = seeds[:16]
        sequential, _ = time_sequential(config, timed)
        rows.append({"seeds": size, "batched_s": batched, "sequential_s": sequential * size / len(timed),
                     "sequential_timed": len(timed)})
        print(f"  {size} seeds: batched {batched:.1f} s, one after another {rows[-1]['sequential_s']:.1f} s", flush=True)
    command = f"{_python()} experiments.benchmarks.seeds --sizes {' '.join(str(row['seeds']) for row in rows)}"
    return {"block": "seed-batch-table", "measurements": [new_measurement("benchmark_seeds", [command], {"rows": rows},
                                                                          machine)]}


def render_seed_batch_table(record: dict) -> str:
    measurement = by_label(record)["benchmark_seeds"]
    lines = ["| seeds | batched | one after another | ratio |", "| ---: | ---: | ---: | ---: |"]
    for row in measurement["results"]["rows"]:
        scaled = "" if row["sequential_timed"] == row["seeds"] else f" ({row['sequential_timed']} timed, scaled)"
        lines.append(f"| {row['seeds']} | {row['batched_s']:.1f} s | {row['sequential_s']:.1f} s{scaled} | "
                     f"{row.get('ratio', row['sequential_s'] / row['batched_s']):.2f} |")  # earlier rows: ratio as printed
    return "\n" + "\n".join(lines) + f"\n\nMeasured {describe_where(measurement)}.\n"


# ----- block: ppo-train --seeds as whole commands ------------------------------------------


def measure_seeds_command(args) -> dict:
    from experiments.benchmarks.environments import run_command
    from experiments.commands.entry_points import console_argv

    machine = machine_description()
    results: dict = {}
    commands = []
    with tempfile.TemporaryDirectory() as folder:
        for label, seeds in (("batch", "1-16"), ("batch_untuned", "101-116")):
            argv = ["--seeds", seeds, "--run-dir", f"{folder}/{label}", "--no-progress"]
            seconds, _ = run_command([*console_argv("ppo-train"), *argv])
            evaluations = [json.loads(path.read_text())["mean_return"]
                           for path in sorted(Path(folder, label).glob("*/eval.json"))]
            results[label] = {"seeds": seeds, "command_seconds": seconds, "evaluations": evaluations}
            print(f"  ppo-train --seeds {seeds}: {seconds:.1f} s", flush=True)
            commands.append("ppo-train " + " ".join(argv).replace(folder, "TMP"))
        singles = []
        for seed in range(1, 17):  # the batch's own 16 seeds, one command after another
            argv = ["--seed", str(seed), "--run-dir", f"{folder}/single{seed}", "--no-progress"]
            singles.append(run_command([*console_argv("ppo-train"), *argv])[0])
            commands.append("ppo-train " + " ".join(argv).replace(folder, "TMP"))
        results["single_command_seconds"] = singles
    return {"block": "seeds-command", "measurements": [new_measurement("ppo-train", commands, results, machine)]}


def render_seeds_command(record: dict) -> str:
    measurement = by_label(record)["ppo-train"]
    results = measurement["results"]
    batch, untuned = results["batch"], results["batch_untuned"]
    singles = results["single_command_seconds"]

    def solved(evaluations: list[float]) -> str:
        return f"{sum(value >= 475 for value in evaluations)} of {len(evaluations)}"

    runs = len(batch["evaluations"])
    return (f"\nAs whole commands, measured {describe_where(measurement)}, `ppo-train --seeds {batch['seeds']}` took "
            f"{batch['command_seconds']:.1f} s for {runs} runs ({solved(batch['evaluations'])} evaluated ≥ 475; seeds "
            f"{untuned['seeds'].replace('-', '–')}, not tuned on: {solved(untuned['evaluations'])}), against "
            f"{sum(singles):.1f} s for {len(singles)} `ppo-train --seed k` one after another: "
            f"{batch['command_seconds'] / runs:.1f} s per run against {sum(singles) / len(singles):.1f} s, "
            f"{sum(singles) / len(singles) / (batch['command_seconds'] / runs):.1f}× less per seed.")


# ----- block: one process against two (benchmark_distributed) -------------------------------

DISTRIBUTED_SEEDS = (1, 2, 3, 4, 5)
DISTRIBUTED_ROWS = {"env-bound": "env-bound: gymnasium, 512 envs × 64 steps",
                    "update-bound": "update-bound: torch preset, 64 envs × 32 steps"}


def measure_distributed(args) -> dict:
    from experiments.benchmarks.distributed import run_once

    record = load_record("distributed", args.figures_dir)
    machine = machine_description()
    runs = []
    with tempfile.TemporaryDirectory() as folder:
        for setting in DISTRIBUTED_ROWS:
            for index, seed in enumerate(DISTRIBUTED_SEEDS):  # alternating, as benchmark_distributed does
                for processes in ((1, 2) if index % 2 == 0 else (2, 1)):
                    runs.append({"setting": setting, "seed": seed, "processes": processes,
                                 **run_once(setting, seed, processes, Path(folder))})
                    print(f"  {setting} seed {seed} × {processes}: {runs[-1]['steps_per_second']:,.0f} steps/s",
                          flush=True)
    command = (f"{_python()} experiments.benchmarks.distributed --seeds {' '.join(map(str, DISTRIBUTED_SEEDS))} "
               f"--processes 2")
    measurements = {**by_label(record), "benchmark_distributed": new_measurement(
        "benchmark_distributed", [command], {"runs": runs}, machine)}
    return {**record, "measurements": list(measurements.values())}


def distributed_summary(runs: list[dict]) -> dict:
    """Per setting and process count: median steps/s, median seconds to 475, evaluations ≥ 475; the speed-up."""
    summary: dict = {}
    for setting in DISTRIBUTED_ROWS:
        mine = [run for run in runs if run["setting"] == setting]
        one = sorted((run for run in mine if run["processes"] == 1), key=lambda run: run["seed"])
        two = sorted((run for run in mine if run["processes"] == 2), key=lambda run: run["seed"])
        summary[setting] = {"speedup": statistics.median(b["steps_per_second"] / a["steps_per_second"]
                                                         for a, b in zip(one, two))}
        for processes, rows in (("1", one), ("2", two)):
            reached = [row["seconds_to_475"] for row in rows if row["seconds_to_475"] == row["seconds_to_475"]]
            summary[setting][processes] = {"steps_per_s": statistics.median(row["steps_per_second"] for row in rows),
                                           "seconds_to_475": statistics.median(reached) if reached else None,
                                           "solved": sum(row["eval"] >= 475 for row in rows), "seeds": len(rows)}
    return summary


def render_distributed(record: dict) -> str:
    measurements = by_label(record)
    table, notes = measurements["benchmark_distributed"], measurements["notes"]
    results = table["results"]
    summary = distributed_summary(results["runs"]) if "runs" in results else results["summary"]
    seeds = sorted({run["seed"] for run in results["runs"]}) if "runs" in results else results["seeds"]

    def cell(side: dict, with_time: bool) -> str:
        text = f"{round(side['steps_per_s'], -2):,.0f} steps/s"
        return text + (f", 475 after {side['seconds_to_475']:.1f} s" if with_time else "")

    lines = [f"| CartPole-v1, seeds {seeds[0]}–{seeds[-1]} | 1 process | 2 processes | speed-up |", "| --- | --- | --- | --- |"]
    for setting, title in DISTRIBUTED_ROWS.items():
        row = summary[setting]
        with_time = setting == "update-bound"
        speedup = f"{row['speedup']:.2f}×" + ("" if with_time else f" ({row['speedup'] / 2:.0%} efficiency)")
        lines.append(f"| {title} | {cell(row['1'], with_time)} | {cell(row['2'], with_time)} | {speedup.replace('%', ' %')} |")
    torch_preset = summary["update-bound"]
    return (f"(figures below). Measured {describe_where(table)}:\n\n" + "\n".join(lines) + "\n\n"
            f"The torch preset evaluates ≥ 475 on {torch_preset['1']['solved']} of {torch_preset['1']['seeds']} seeds with "
            f"1 process and on {torch_preset['2']['solved']} of {torch_preset['2']['seeds']} with 2. "
            + notes["results"]["text"].replace("{where}", describe_where(notes)))


# ----- block: a batch of seeds against the same seeds alone (ppo.trainers.seed_batch) ---------------

ROUNDING_SEEDS = (1, 2, 3, 4)
ROUNDING_VARIANTS = {"default": {}, "target_kl": {"target_kl": 0.02}}  # label -> config overrides


def _flat(state: dict) -> "torch.Tensor":
    import torch

    return torch.cat([value.detach().reshape(-1).double() for value in state.values()])


def _batch_against_singles(config, folder: Path) -> dict:
    """Train ROUNDING_SEEDS as one seed batch of PPO and each alone as PPO; per iteration and seed,
    max |θ_batch − θ_single| and max |θ_single|, the gradient steps each side took (an early stop
    shows as fewer), and each side's final greedy evaluation (100 episodes, as ppo-eval)."""
    from envs.factory import make_seed_batch_env, make_vec_env
    from experiments.commands.evaluate import evaluate_run
    from ppo.trainers.ppo import PPO

    seeds = list(ROUNDING_SEEDS)
    batch_states, batch_steps = [], []

    def on_batch(trainer, metrics):
        batch_states.append([_flat(member.model.state_dict()) for member in trainer.members])
        batch_steps.append([row["gradient_steps"] for row in metrics])

    batch = PPO(config, make_seed_batch_env(config.env_id, len(seeds), config.num_envs, "torch", config.device),
                seeds=seeds, run_dirs=[folder / f"batch{seed}" for seed in seeds], progress=False)
    batch.train(on_batch)
    per_seed = []
    for member, seed in enumerate(seeds):
        distances, largest, single_steps = [], [], []

        def on_single(trainer, metrics):
            theta = _flat(trainer.model.state_dict())
            distances.append(float((batch_states[trainer.iteration - 1][member] - theta).abs().max()))
            largest.append(float(theta.abs().max()))
            single_steps.append(metrics["gradient_steps"])

        single = PPO(config.replace(seed=seed), make_vec_env(config.env_id, config.num_envs, "torch", config.device),
                     run_dir=folder / f"single{seed}", progress=False)
        single.train(on_single)
        per_seed.append({"seed": seed, "max_abs_distance": distances, "max_abs_theta": largest,
                         "gradient_steps_batch": [steps[member] for steps in batch_steps],
                         "gradient_steps_single": single_steps,
                         "eval_batch": evaluate_run(folder / f"batch{seed}", 100, verbose=False)["mean_return"],
                         "eval_single": evaluate_run(folder / f"single{seed}", 100, verbose=False)["mean_return"]})
    return {"seeds": per_seed}


def measure_seed_batch_rounding(args) -> dict:
    from experiments.commands.presets import build_config

    measurements = []
    for label, overrides in ROUNDING_VARIANTS.items():
        machine = machine_description()
        config = build_config({"env_id": "CartPole-v1", "env_backend": "torch", "tensorboard": False,
                               **overrides}, "auto")
        with tempfile.TemporaryDirectory() as folder:
            results = _batch_against_singles(config, Path(folder))
        flags = "".join(f" --{key.replace('_', '-')} {value}" for key, value in overrides.items())
        seeds = f"{ROUNDING_SEEDS[0]}-{ROUNDING_SEEDS[-1]}"
        commands = [f"ppo-train --seeds {seeds}{flags}", f"ppo-train --seed k{flags} for k = {seeds.replace('-', '..')}",
                    "θ of each seed compared after every iteration; ppo-eval of each run (100 greedy episodes)"]
        measurements.append(new_measurement(label, commands, results, machine))
    return {"block": "seed-batch-rounding", "measurements": measurements}


def _matching_prefix(first: list, second: list) -> int:
    """How many leading entries of the two lists are equal."""
    count = 0
    for a, b in zip(first, second):
        if a != b:
            break
        count += 1
    return count


def _evaluations(rows: list[dict]) -> str:
    return ", ".join(f"{row['eval_batch']:.1f} / {row['eval_single']:.1f}".replace(".0 ", " ").removesuffix(".0")
                     for row in rows)


def render_seed_batch_rounding(record: dict) -> str:
    measurements = by_label(record)
    default, early = measurements["default"], measurements["target_kl"]
    rows = default["results"]["seeds"]
    seeds = [row["seed"] for row in rows]
    iterations = len(rows[0]["max_abs_distance"])

    def at(index: int) -> str:  # the range over seeds of max |Δθ| after iteration index + 1
        values = sorted(row["max_abs_distance"][index] for row in rows)
        return f"{values[0]:.1e}" if f"{values[0]:.1e}" == f"{values[-1]:.1e}" else f"{values[0]:.1e} to {values[-1]:.1e}"

    tiny = min(_matching_prefix([d <= 1e-5 for d in row["max_abs_distance"]], [True] * iterations) for row in rows)
    middle = min(iterations - 1, max(tiny, 1) * 2 - 1)
    weights = max(max(row["max_abs_theta"]) for row in rows)
    early_rows = early["results"]["seeds"]
    matched = [_matching_prefix(row["gradient_steps_batch"], row["gradient_steps_single"]) for row in early_rows]
    stopped = sum(steps < max(row["gradient_steps_single"]) for row in early_rows for steps in row["gradient_steps_single"])
    return (f"on the default CartPole run (seeds {seeds[0]}–{seeds[-1]}, {iterations} iterations, measured "
            f"{describe_where(default)}), max |θ_batch − θ_single| stays ≤ 1e-5 for the first {tiny} iterations on "
            f"every seed, is {at(middle)} after iteration {middle + 1} and {at(iterations - 1)} at the end (weights up "
            f"to {weights:.2g}); final greedy evaluations batched / alone: {_evaluations(rows)}. With "
            f"`--target-kl 0.02` ({stopped} iterations of the single runs stop early; measured "
            f"{describe_where(early)}) the gradient steps of each iteration, and so the early stops, match for the first "
            f"{_listing([str(count) for count in matched])} iterations on seeds "
            f"{_listing([str(row['seed']) for row in early_rows])} before the runs part (evaluations "
            f"{_evaluations(early_rows)})")


# ----- block: reward over-optimisation on the food task (experiments.studies.overoptimization) -------

OVEROPTIMIZATION_SEEDS = (1, 2, 3)  # seed 1 sweeps the default β set; the others run β = 0 (and the default β)


def _first_completion(most_frequent: str) -> tuple[str, bool, float]:
    """("'lttttte' 97%, 'letttte' 2%") -> ('lttttte', ended with EOS, 0.97): the most frequent completion."""
    import ast

    match = re.match(r"""('(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*") (\d+)%""", most_frequent)
    if match is None:
        raise ValueError(f"most_frequent = {most_frequent!r}: expected a quoted completion and its share")
    text = ast.literal_eval(match.group(1))
    ended_with_eos = not text.endswith("…")
    return text.removesuffix("…"), ended_with_eos, int(match.group(2)) / 100


def _overoptimization_run(argv: list[str], folder: Path) -> dict:
    """Run experiments.studies.overoptimization in this process; its fits.json, each β's final policy with its
    most frequent completion, and the gold score the healthiness rule gives that completion."""
    from envs.token_task import healthiness
    from experiments.studies import overoptimization

    code = overoptimization.main([*argv, "--out-dir", str(folder)])
    if code != 0:
        raise SystemExit(f"readme_figures: experiments.studies.overoptimization {' '.join(argv)} exited with {code}")
    fits = json.loads((folder / "fits.json").read_text())
    finals = {}
    for beta, row in fits["final"].items():
        text, ended_with_eos, share = _first_completion(row["most_frequent"])
        finals[beta] = {"gold": row["gold"], "proxy": row["proxy"], "kl": row["kl"], "most_frequent": row["most_frequent"],
                        "top_text": text, "top_share": share, "top_gold": healthiness(text, ended_with_eos)}
    return {"argv": argv, "default_beta": fits["default_beta"], "gold_sft": fits["gold_sft"], "proxy_sft": fits["proxy_sft"], "food_scores": fits["food_scores"],
            "cpu_seconds": fits["cpu_seconds"], "wall_seconds": fits["wall_seconds"], "final": finals}


def measure_overoptimization(args) -> dict:
    machine = machine_description()
    runs = {}
    with tempfile.TemporaryDirectory() as folder:
        for seed in OVEROPTIMIZATION_SEEDS:
            argv = ["--seed", str(seed)] if seed == OVEROPTIMIZATION_SEEDS[0] else ["--betas", "0", "--seed", str(seed)]
            runs[str(seed)] = _overoptimization_run(argv, Path(folder) / f"seed{seed}")
    commands = [f"{_python()} experiments.studies.overoptimization {' '.join(run['argv'])}" for run in runs.values()]
    return {"block": "overoptimization",
            "measurements": [new_measurement("overoptimization", commands, {"runs": runs}, machine)]}


HACKED = "one that is no food: the healthiness rule scores it as malformed"


def is_hacked(final: dict) -> bool:
    """The rule: a final policy has found a hacked string when its most frequent completion is no food at all
    (the healthiness rule scores it as malformed), whatever the proxy gives it."""
    from envs.token_task import MALFORMED_HEALTHINESS

    return final["top_gold"] == MALFORMED_HEALTHINESS


def _beta_groups(finals: dict) -> list[list[str]]:
    """The β > 0, in increasing order, grouped where neighbours end at the same most frequent completion."""
    groups: list[list[str]] = []
    for beta in sorted((b for b in finals if float(b) > 0), key=float):
        if groups and finals[groups[-1][-1]]["top_text"] == finals[beta]["top_text"]:
            groups[-1].append(beta)
        else:
            groups.append([beta])
    return groups


def _describe_group(group: list[str], finals: dict, last: bool) -> str:
    first, final = finals[group[0]], finals[group[-1]]
    betas = (f"β = {float(group[0]):g}" if len(group) == 1 else
             f"β = {float(group[0]):g} and above" if last else f"β = {float(group[0]):g} to {float(group[-1]):g}")
    if not is_hacked(first):
        points = "; ".join(f"{finals[b]['gold']:+.3f} at {float(b):g}, KL {finals[b]['kl']:.2f}"
                           for b in dict.fromkeys((group[0], group[-1])))
        return f"{betas} ended at {first['top_text']} (gold {points})"
    kls = sorted(finals[b]["kl"] for b in group)
    kl = f"KL {kls[0]:.1f}" if f"{kls[0]:.1f}" == f"{kls[-1]:.1f}" else f"KL {kls[0]:.1f}–{kls[-1]:.1f}"
    golds = [f"{value:+.3f}" for value in sorted(finals[b]["gold"] for b in group)]
    gold = golds[0] if golds[0] == golds[-1] else f"{golds[0]} to {golds[-1]}"
    return f"{betas} ended at \"{first['top_text']}\" ({kl}, gold {gold})"


def _unpenalised(finals: dict) -> dict:
    return finals[next(b for b in finals if float(b) == 0)]


def render_overoptimization(record: dict) -> str:
    """One machine's run, in the past tense and named as such: the strings and KLs differ on another CPU."""
    measurement = by_label(record)["overoptimization"]
    runs = measurement["results"]["runs"]
    seeds = sorted(runs, key=int)
    main_run = runs[seeds[0]]
    finals = main_run["final"]
    unpenalised = _unpenalised(finals)
    best_food, best_score = max(main_run["food_scores"].items(), key=lambda item: item[1])
    groups = _beta_groups(finals)
    described = [_describe_group(group, finals, index == len(groups) - 1) for index, group in enumerate(groups)]
    hacked_beta0 = [seed for seed in seeds if is_hacked(_unpenalised(runs[seed]["final"]))]
    clean_beta0 = [seed for seed in seeds if seed not in hacked_beta0]
    if hacked_beta0 and clean_beta0:
        seeds_text = (f"β = 0 found such a string ({HACKED}) on seed{'s' if len(hacked_beta0) > 1 else ''} "
                      f"{_listing(hacked_beta0)}, not on {_listing(clean_beta0)}")
    elif hacked_beta0:
        seeds_text = f"β = 0 found such a string ({HACKED}) on every seed tried ({_listing(hacked_beta0)})"
    else:
        seeds_text = f"β = 0 found no such string ({HACKED}) on seeds {_listing(clean_beta0)}"
    default_beta = main_run["default_beta"]
    defaults = [runs[seed]["final"][next(b for b in runs[seed]["final"] if float(b) == default_beta)] for seed in seeds]
    on_food = sum(not is_hacked(final) for final in defaults)
    default_kls = sorted(final["kl"] for final in defaults)
    return (f"One machine's run, from the record `docs/figures/overoptimization.json`, measured "
            f"{describe_where(measurement)}: seed {seeds[0]}'s sweep took {main_run['cpu_seconds']:.0f} s of one "
            f"core. With β = 0 the policy ended at \"{unpenalised['top_text']}\" ({unpenalised['top_share']:.0%} of "
            f"fresh samples): proxy {unpenalised['proxy']:+.3f} ({best_food}: {best_score:+.2f}), gold "
            f"{unpenalised['gold']:+.3f}, KL {unpenalised['kl']:.2f} nats (SFT model: gold "
            f"{main_run['gold_sft']:+.3f}, proxy {main_run['proxy_sft']:+.3f}); "
            + ", ".join(described[:-1]) + (", and " if len(described) > 1 else "") + described[-1]
            + f". Over seeds {_listing(seeds)} (`--betas 0 --seed N` runs β = 0 next to the default β = "
            f"{default_beta:g}), {seeds_text}; the default β ended at a food on {on_food} of {len(seeds)} "
            f"(KL {default_kls[0]:.2f}–{default_kls[-1]:.2f}).")


# ----- block: the recurrent presets on untuned seeds, and sb3-contrib's RecurrentPPO in turns ----

RECURRENT_SEEDS = {"CartPoleNoVel-v1": tuple(range(501, 511)), "PendulumNoVel-v1": tuple(range(301, 306))}
RECURRENT_BARS = {"CartPoleNoVel-v1": 475.0, "PendulumNoVel-v1": -250.0}
RECURRENT_GOALS = {"CartPoleNoVel-v1": (9, 10), "PendulumNoVel-v1": (4, 5)}  # (seeds at the bar, of seeds)
RECURRENT_SPEED_GOAL = 20  # sb3-contrib's whole-process seconds over the preset's


def measure_recurrent_zoo(args) -> dict:
    """One measurement per env, labelled by its id: `--envs` re-measures those, the others keep their records."""
    from experiments.benchmarks.recurrent_zoo import benchmark

    record = load_record("recurrent-zoo", args.figures_dir)
    measurements = by_label(record)
    for env_id in args.envs or RECURRENT_SEEDS:
        seeds = RECURRENT_SEEDS[env_id]
        machine = machine_description()
        rows = benchmark([env_id], list(seeds), [seeds[0]], same_steps=True)
        command = (f"{_python()} experiments.benchmarks.recurrent_zoo --env-id {env_id} --seeds "
                   f"{' '.join(map(str, seeds))} --sb3-seeds {seeds[0]} --same-steps")
        measurements[env_id] = new_measurement(env_id, [command], {"rows": rows}, machine)
    return {**record, "measurements": [measurements[env_id] for env_id in RECURRENT_SEEDS]}


def render_recurrent_zoo(record: dict) -> str:
    measurements = by_label(record)
    parts, goals = {}, []
    for env_id, bar in RECURRENT_BARS.items():
        measurement = measurements[env_id]
        rows = measurement["results"]["rows"]
        library = [row for row in rows if row["env_id"] == env_id and row["trainer"] == "library"]
        preset_steps = statistics.mode(row["steps"] for row in library)
        ours = [row for row in library if row["steps"] == preset_steps]
        (theirs,) = [row for row in rows if row["env_id"] == env_id and row["trainer"] == "sb3-contrib"]
        same = [row for row in library if row["steps"] == theirs["steps"] and row["steps"] != preset_steps]
        seconds = statistics.median(row["seconds"] for row in ours)
        returns = [row["mean_return"] for row in ours]
        reached, ratio = sum(value >= bar for value in returns), theirs["seconds"] / seconds
        needed, of = RECURRENT_GOALS[env_id]
        met = len(ours) == of and reached >= needed
        goals.append(f"`{env_id}` ≥ {bar:g} on {needed} of {of} seeds "
                     f"({'met' if met else 'not met'}: {reached} of {len(ours)}) in a "
                     f"{_ordinal_fraction(RECURRENT_SPEED_GOAL)} of sb3-contrib's time "
                     f"({'met' if ratio >= RECURRENT_SPEED_GOAL else 'not met'}: {ratio:.1f}×)")
        parts.setdefault(describe_where(measurement), []).append(
            f"`{env_id}` with its preset ({preset_steps:,} steps) evaluated ≥ {bar:g} on "
            f"{reached} of {len(ours)} seeds never used for tuning "
            f"({ours[0]['seed']}–{ours[-1]['seed']}: {', '.join(f'{value:.1f}' for value in returns)}), the whole "
            f"command a median {seconds:.1f} s"
            + "".join(f" (at the zoo's {row['steps']:,} steps, seed {row['seed']}: {row['mean_return']:.1f} in "
                      f"{row['seconds']:.1f} s)" for row in same)
            + f"; sb3-contrib's RecurrentPPO with the zoo's settings ({theirs['steps']:,} steps, seed "
            f"{theirs['seed']}) took {theirs['seconds']:.0f} s and evaluated {theirs['mean_return']:.1f}: "
            f"{ratio:.1f}× the preset's time")
    measured = ". ".join(f"Measured {where}: " + "; ".join(texts) for where, texts in parts.items())
    return measured + ". The memory work's goals: " + "; ".join(goals) + "."


def _ordinal_fraction(denominator: int) -> str:
    """20 → 'twentieth' (the denominators the goals use)."""
    return {10: "tenth", 20: "twentieth"}[denominator]


# ----- block: PPO on MinAtar with its preset, untuned seeds, next to the published figures -----

MINATAR_SEEDS = (101, 102, 103)
MINATAR_RUN_ROOT = REPO_ROOT / "runs" / "minatar-ppo"  # finished runs there are read, not retrained
MINATAR_PLOT = "minatar-ppo.png"  # in docs/figures


def measure_minatar_ppo(args) -> dict:
    from experiments.benchmarks.minatar_ppo import ENV_IDS, PUBLISHED, benchmark, plot

    machine = machine_description()
    rows = benchmark(list(ENV_IDS), list(MINATAR_SEEDS), MINATAR_RUN_ROOT, jobs=2)
    plot(rows, args.figures_dir / MINATAR_PLOT)
    command = (f"{_python()} experiments.benchmarks.minatar_ppo --seeds {' '.join(map(str, MINATAR_SEEDS))} "
               f"--run-root runs/minatar-ppo --jobs 2 --plot docs/figures/{MINATAR_PLOT}")
    published = {env_id: {"source": source, "steps": steps, "return": value}
                 for env_id, (source, steps, value) in PUBLISHED.items()}
    return {"block": "minatar-ppo", "measurements": [new_measurement(
        "minatar-ppo", [command], {"rows": rows, "published": published}, machine)]}


def _first_reaching(curve: list, value: float) -> tuple[int, float] | None:
    """(steps, seconds) of the first curve point whose last-20 training return is ≥ value, or None."""
    return next(((step, seconds) for step, seconds, recent in curve if recent is not None and recent >= value), None)


def render_minatar_ppo(record: dict) -> str:
    measurement = by_label(record)["minatar-ppo"]
    rows, published = measurement["results"]["rows"], measurement["results"]["published"]
    parts = []
    for env_id, quoted in published.items():
        ours = [row for row in rows if row["env_id"] == env_id]
        means = [row["greedy_mean"] for row in ours]
        at_or_above = sum(value >= quoted["return"] for value in means)
        crossings = [crossing for row in ours if (crossing := _first_reaching(row["curve"], quoted["return"]))]
        training_mean = "the mean of its last 20 training episodes (sampled actions, no step limit)"
        reached_text = (f"{training_mean} first reached {quoted['return']:g} after a median of "
                        f"{statistics.median(step for step, _ in crossings) / 1e6:.1f}M steps and "
                        f"{statistics.median(seconds for _, seconds in crossings) / 60:.0f} min on the "
                        f"{len(crossings)} seed{'' if len(crossings) == 1 else 's'} that reached it" if crossings else
                        f"{training_mean} never reached {quoted['return']:g}")
        parts.append(
            f"`{env_id}`: {', '.join(f'{value:.1f}' for value in means)} (mean {statistics.mean(means):.1f}; seeds "
            f"{', '.join(str(row['seed']) for row in ours)}), at or above the {quoted['source']} figure of "
            f"{quoted['return']:g} at {quoted['steps'] / 1e6:g}M steps on {at_or_above} of {len(ours)} seeds; each run "
            f"{ours[0]['steps']:,} steps in a median {statistics.median(row['train_seconds'] for row in ours) / 60:.0f} "
            f"min of training on one thread; {reached_text}")
    (limit,) = {row["eval_max_episode_steps"] for row in rows}
    return (f"Measured {describe_where(measurement)}, two runs at a time: greedy means over 100 episodes "
            f"(sticky actions on, each episode at most {limit:,} steps) of the preset on seeds never used for tuning. "
            + "; ".join(parts) + f". The learning curves against steps and against minutes: "
            f"`docs/figures/{MINATAR_PLOT}`.")


def render_minatar_figure(record: dict) -> str:
    """The caption of the learning-curve figure drawn from the same record."""
    measurement = by_label(record)["minatar-ppo"]
    rows, published = measurement["results"]["rows"], measurement["results"]["published"]
    seeds = list(dict.fromkeys(row["seed"] for row in rows))
    games = " and ".join(f"`{env_id}`" for env_id in published)
    quoted = dict.fromkeys(quoted["source"] for quoted in published.values())
    return (f"PPO with the library's MinAtar preset on {games}, seeds {_listing([str(seed) for seed in seeds])} "
            f"(never used for tuning): the mean return of the last 20 training episodes against environment steps "
            f"(left) and training minutes on one CPU thread (right); the stars, on the left, are the {_listing(list(quoted))} "
            f"figures at {next(iter(published.values()))['steps'] / 1e6:g}M steps, quoted, not run here. Measured "
            f"{describe_where(measurement)}, two runs at a time.")


# ----- blocks recorded as text, from an earlier version ---------------------------------------


def render_recorded_text(record: dict) -> str:
    """A block whose figures no script measures yet: its recorded text, as it was measured."""
    (measurement,) = record["measurements"]
    return measurement["results"]["text"].replace("{where}", describe_where(measurement))


# ----- block: where each workload's whole command spends its time, its efficiency and ceiling -----

BREAKDOWN_MINATAR_STEPS = 409_600


def measure_breakdown(args) -> dict:
    from experiments.benchmarks.breakdown import WORKLOADS, measure

    machine = machine_description()
    rows = {name: measure(name, BREAKDOWN_MINATAR_STEPS) for name in WORKLOADS}
    command = f"{_python()} experiments.benchmarks.breakdown --minatar-steps {BREAKDOWN_MINATAR_STEPS}"
    return {"block": "breakdown", "measurements": [new_measurement("breakdown", [command], {"rows": rows}, machine)]}


def render_breakdown(record: dict) -> str:
    from experiments.benchmarks.breakdown import PHASES, kernel_shares

    measurement = by_label(record)["breakdown"]
    rows = measurement["results"]["rows"]
    names = list(rows)
    lines = [f"Measured {describe_where(measurement)}, each command a fresh process:", "",
             "| phase | " + " | ".join(names) + " |", "| --- |" + " ---: |" * len(names)]
    for phase in PHASES:
        lines.append(f"| {phase} | " + " | ".join(
            f"{rows[name]['seconds'].get(phase, 0.0):.2f} s ({rows[name]['seconds'].get(phase, 0.0) / rows[name]['command_wall']:.0%})"
            for name in names) + " |")
    lines.append("| **whole command** | " + " | ".join(f"**{rows[name]['command_wall']:.1f} s**" for name in names) + " |")
    lines += ["", "| workload | command | MFLOP per env step | dominant operation | its rate, one thread | "
                  "training steps/s | GFLOP/s done | efficiency |", "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: |"]
    for name in names:
        row = rows[name]
        shapes = " · ".join("×".join(map(str, shape)) for shape in row["dominant_shapes"])
        lines.append(f"| {name} | `{row['command']}` | {row['flops_per_step'] / 1e6:.3f} | "
                     f"`{row['dominant_operation']}` {shapes} ({row['dominant_share']:.0%} of the FLOPs) | "
                     f"{row['dominant_rate'] / 1e9:.1f} GFLOP/s | {row['steps_per_second']:,.0f} | "
                     f"{row['flops_per_step'] * row['steps_per_second'] / 1e9:.1f} | {row['efficiency']:.2f} |")
    lines += ["", "| workload | an iteration | its counted operations alone | their share | ceiling | "
                  "the operations holding a tenth of those seconds or more |", "| --- | ---: | ---: | ---: | ---: | --- |"]
    for name in names:
        row = rows[name]
        shares = kernel_shares(row["kernels"], code="`")
        lines.append(f"| {name} | {row['iteration_seconds'] * 1e3:.1f} ms ({row['iteration_steps']:,} steps) | "
                     f"{row['kernel_seconds'] * 1e3:.1f} ms | {row['kernel_seconds'] / row['iteration_seconds']:.0%} | "
                     f"{row['ceiling']:.2f} | {shares} |")
    return "\n".join(lines)


# ----- the blocks ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Block:
    name: str
    render: Callable[[dict], str]
    measure: Callable[[argparse.Namespace], dict] | None  # None: no script measures it yet
    what: str
    record: str = ""  # the record it renders from, when not its own

    @property
    def record_name(self) -> str:
        return self.record or self.name


BLOCKS = {block.name: block for block in (
    Block("cartpole-command", render_cartpole_command, measure_cartpole_command,
          "the whole `ppo-train` command on CartPole-v1, seeds 201-210 (benchmark_envs section 3)"),
    Block("sb3-comparison", render_sb3_comparison, measure_sb3_comparison,
          "SB3's zoo CartPole job in turns with ppo-train (needs --sb3-python)"),
    Block("env-table", render_env_table, measure_env_table,
          "every classic-control task with its preset (benchmark_continuous; --envs picks rows)"),
    Block("seed-batch-table", render_seed_batch_table, measure_seed_batch_table,
          "S seeds batched against one after another (benchmark_seeds)"),
    Block("seeds-command", render_seeds_command, measure_seeds_command,
          "`ppo-train --seeds 1-16` and 101-116 against the 16 single commands of seeds 1-16"),
    Block("seed-batch-rounding", render_seed_batch_rounding, measure_seed_batch_rounding,
          "a batch of seeds 1-4 against each alone: parameter distances, evaluations, --target-kl 0.02"),
    Block("distributed", render_distributed, measure_distributed,
          "1 process against 2 on CartPole (benchmark_distributed; torchrun)"),
    Block("recurrent-zoo", render_recurrent_zoo, measure_recurrent_zoo,
          "the recurrent presets on untuned seeds, sb3-contrib's RecurrentPPO in turns (needs sb3-contrib; --envs picks envs)"),
    Block("minatar-ppo", render_minatar_ppo, measure_minatar_ppo,
          "PPO on MinAtar Breakout and Space Invaders with the preset, seeds 101-103 (benchmark_minatar_ppo)"),
    Block("overoptimization", render_overoptimization, measure_overoptimization,
          "experiments.studies.overoptimization: seed 1's β sweep, and β = 0 on seeds 2 and 3"),
    Block("breakdown", render_breakdown, measure_breakdown,
          "where each workload's whole ppo-train command spends its time, its arithmetic efficiency and "
          "the ceiling its products set (experiments.benchmarks.breakdown)"),
    Block("minatar-figure", render_minatar_figure, measure_minatar_ppo,
          "the caption of docs/figures/minatar-ppo.png, from the minatar-ppo record (re-measures it)", "minatar-ppo"),
)}


# ----- the markers, in every document ---------------------------------------------------------


def marked_pattern(name: str) -> re.Pattern:
    return re.compile(rf"(<!-- figures:{re.escape(name)} -->)(.*?)(<!-- /figures:{re.escape(name)} -->)", re.DOTALL)


def marked_blocks(text: str) -> dict[str, str]:
    """{name: the text between its two markers} for every marked block of `text`."""
    return {match.group(1): match.group(2)
            for match in re.finditer(r"<!-- figures:([\w-]+) -->(.*?)<!-- /figures:\1 -->", text, re.DOTALL)}


def document_name(path: Path) -> str:
    """A document as a reader finds it: its path from the repository root (else its file name)."""
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else path.name


def blocks_by_document(documents: Sequence[Path]) -> dict[Path, dict[str, str]]:
    """{document: its marked blocks} for every document that exists."""
    return {path: marked_blocks(path.read_text()) for path in documents if path.is_file()}


def check(documents: Sequence[Path] = DOCUMENTS, figures_dir: Path = FIGURES_DIR) -> list[str]:
    """One line per block that is missing, found twice, unknown, or not what its record renders to (empty: all agree)."""
    found = blocks_by_document(documents)
    homes: dict[str, list[Path]] = {}
    for path, blocks in found.items():
        for name in blocks:
            homes.setdefault(name, []).append(path)
    where = ", ".join(document_name(path) for path in documents)
    problems = [f"{name}: no markers in {where}" for name in BLOCKS if name not in homes]
    problems += [f"{name}: markers in {' and '.join(map(document_name, paths))}; a block lives in one place"
                 for name, paths in homes.items() if len(paths) > 1]
    for path, blocks in found.items():
        for name, text in blocks.items():
            if name not in BLOCKS:
                problems.append(f"{name}: markers in {document_name(path)} but no such block")
            elif text != render(name, figures_dir):
                problems.append(f"{name}: the text in {document_name(path)} differs from what "
                                f"{record_path(BLOCKS[name].record_name, figures_dir).name} renders to; run "
                                f"`python -m experiments.tools.readme_figures --render` (or re-measure the block)")
    return problems


def render(name: str, figures_dir: Path = FIGURES_DIR) -> str:
    block = BLOCKS[name]
    return block.render(load_record(block.record_name, figures_dir))


def rewrite(names: list[str], documents: Sequence[Path] = DOCUMENTS, figures_dir: Path = FIGURES_DIR) -> None:
    """Replace each named block's text, in the one document that holds it, by its record's rendering; nothing
    else changes."""
    found = blocks_by_document(documents)
    for name in names:
        homes = [path for path, blocks in found.items() if name in blocks]
        if len(homes) != 1:
            raise SystemExit(f"readme_figures: {len(homes)} documents hold a block marked {name}; expected 1")
        (path,) = homes
        rendered = render(name, figures_dir)
        text, count = marked_pattern(name).subn(lambda match: match.group(1) + rendered + match.group(3),
                                                path.read_text())
        if count != 1:
            raise SystemExit(f"readme_figures: {document_name(path)} has {count} blocks marked {name}; expected 1")
        path.write_text(text)


def main(argv: list[str] | None = None) -> int:
    from experiments.commands.cli import OneLineArgumentParser

    parser = OneLineArgumentParser(prog="readme_figures", description=__doc__.splitlines()[0])
    parser.add_argument("blocks", nargs="*", help="blocks to re-measure (see --list)")
    parser.add_argument("--list", action="store_true", help="list the blocks")
    parser.add_argument("--check", action="store_true", help="every block equals its record; exit 1 if not")
    parser.add_argument("--render", action="store_true", help="rewrite every block from its record (no training)")
    parser.add_argument("--documents", type=Path, nargs="+", default=list(DOCUMENTS),
                        help="the documents to check or rewrite (default: the README and the book's pages that hold "
                             "blocks)")
    parser.add_argument("--figures-dir", type=Path, default=FIGURES_DIR, help="the records (default: docs/figures)")
    parser.add_argument("--envs", nargs="+", default=None,
                        help="env-table, recurrent-zoo: the envs to re-measure (default: all)")
    parser.add_argument("--seeds", type=int, nargs="+", default=None, help="env-table: seeds (default: 201-205)")
    parser.add_argument("--sizes", type=int, nargs="+", default=None, help="seed-batch-table: S (default: 1 4 16 64)")
    parser.add_argument("--sb3-python", default=None, help="sb3-comparison: a Python with stable-baselines3")
    args = parser.parse_args(argv)
    unknown = [name for name in args.blocks if name not in BLOCKS]
    if unknown:
        parser.error(f"unknown block {unknown[0]!r}; the blocks are {', '.join(BLOCKS)}")
    from experiments.benchmarks.continuous import CLASSIC_CONTROL

    rows_of = {"env-table": CLASSIC_CONTROL, "recurrent-zoo": tuple(RECURRENT_SEEDS)}
    picking = [name for name in args.blocks if name in rows_of] if args.envs else []
    if args.envs and not picking:
        parser.error(f"--envs {args.envs[0]}: it picks the rows of {' or '.join(rows_of)}, and neither is measured")
    for name in picking:
        wrong = [env_id for env_id in args.envs if env_id not in rows_of[name]]
        if wrong:
            parser.error(f"--envs {wrong[0]}: the rows of {name} are {', '.join(rows_of[name])}")
    if "sb3-comparison" in args.blocks and not args.sb3_python:
        parser.error("sb3-comparison needs --sb3-python PATH, a Python that has stable-baselines3")
    if args.list:
        for block in BLOCKS.values():
            print(f"{block.name:>20}  {block.what}{'' if block.measure else '  [recorded; no script measures it yet]'}")
        return 0
    if args.check:
        problems = check(args.documents, args.figures_dir)
        print("\n".join(problems) if problems else f"{len(BLOCKS)} blocks agree with their records")
        return 1 if problems else 0
    fixed = [name for name in args.blocks if BLOCKS[name].measure is None]
    if fixed:
        parser.error(f"block {fixed[0]!r} has no measuring function yet; its record holds its earlier figures")
    import torch

    torch.set_num_threads(1)
    measured = {BLOCKS[name].record_name: name for name in args.blocks}  # each record measured once
    for name in measured.values():
        save_record(BLOCKS[name].measure(args), args.figures_dir)
    renewed = [name for name in BLOCKS if BLOCKS[name].record_name in measured]  # with the blocks that share a record
    if args.render:  # every block the documents hold
        held = {name for blocks in blocks_by_document(args.documents).values() for name in blocks}
        renewed = [name for name in BLOCKS if name in held]
    rewrite(renewed, args.documents, args.figures_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
