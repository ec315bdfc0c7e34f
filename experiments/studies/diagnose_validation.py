"""How often `ppo-diagnose` is right: lecture 14's planted bugs, the exercises' mystery runs, healthy runs.

    python -m experiments.studies.diagnose_validation                      # about 6 minutes on 2 cores
    python -m experiments.studies.diagnose_validation --seeds 101 102 --healthy-envs CartPole-v1

Planted bugs. Lecture 14's five: its three trainer classes (the flipped advantage sign,
log π_old recomputed at every minibatch, the ratio taken against the initial policy; read
from the lecture's own cells, so there is one definition) and its two configuration
mistakes (a learning rate 30 times the preset's, a shared trunk on raw returns). Each trains
the CartPole preset on every seed of --seeds, as one seed batch. A hit is a run whose
findings include the bug's signature, the (metric, severity) of PLANTED; a miss one that
lacks it.

Mystery runs. The four metrics files of the mystery_runs exercise (three broken CartPole
runs and a healthy one, seed 31; lectures/exercises/make_mystery_runs.py): a hit is a
problem found in a broken run, or none in the healthy one.

Healthy runs. Correct runs of the presets of --healthy-envs, each on every seed of
--seeds as one batch, with the preset's budget: a false alarm is a run with a finding of
severity 'problem' (warnings are allowed: a healthy run of another configuration may show
one, as the diagnosing guide says).

None of these seeds was used to tune the rules (they were written against lecture 14's
seed 31 and 32 runs and the mystery files).
"""

from __future__ import annotations

import ast
import copy
import sys
import tempfile
from pathlib import Path

import torch

from envs.factory import make_seed_batch_env
from experiments.commands.cli import OneLineArgumentParser, configure_process, run_with_user_errors
from experiments.commands.diagnose import diagnose_run
from experiments.commands.findings import diagnose_rows
from experiments.commands.presets import build_config
from ppo.config import ConfigError
from ppo.runs.logger import read_metrics
from ppo.trainers.ppo import PPO

PROG = "python -m experiments.studies.diagnose_validation"
REPO_ROOT = Path(__file__).resolve().parents[2]
LECTURE_14 = REPO_ROOT / "lectures" / "14_debugging_a_run.py"
MYSTERY_DIR = REPO_ROOT / "lectures" / "exercises" / "mystery_metrics"
MYSTERY_ANSWERS = {"run_1.csv": "learning rate too large", "run_2.csv": "healthy",
                   "run_3.csv": "old log-prob recomputed each minibatch", "run_4.csv": "wrong advantage sign"}
DEFAULT_SEEDS = tuple(range(101, 109))
HEALTHY_ENVS = ("CartPole-v1", "Acrobot-v1", "CartPoleNoVel-v1")


def lecture_14_bugs() -> dict[str, type]:
    """Lecture 14's planted bug classes, read from the lecture's own cells (one definition: the lecture's)."""
    tree = ast.parse(LECTURE_14.read_text())
    classes = [node for node in tree.body if isinstance(node, ast.ClassDef)
               and node.name in ("WrongSign", "RecomputedOldLogProb", "RatioToReference")]
    namespace = {"PPO": PPO, "copy": copy, "torch": torch}
    exec(compile(ast.Module(body=classes, type_ignores=[]), str(LECTURE_14.relative_to(REPO_ROOT)), "exec"), namespace)
    return {node.name: namespace[node.name] for node in classes}


def planted_bugs() -> dict[str, tuple[type, dict, tuple[str, str]]]:
    """Lecture 14's bugs: name → (trainer, change to the CartPole preset, the (metric, severity) a run must show)."""
    bugs = lecture_14_bugs()
    rate = build_config({"env_id": "CartPole-v1"}).learning_rate
    return {
        "wrong sign": (bugs["WrongSign"], {}, ("episode_return_recent", "problem")),
        "log π_old recomputed": (bugs["RecomputedOldLogProb"], {}, ("approx_kl", "problem")),
        "too-large step": (PPO, {"learning_rate": 30 * rate}, ("approx_kl", "problem")),
        "shared trunk, raw returns": (PPO, {"shared_network": True}, ("value_loss", "problem")),
        "ratio against the reference": (bugs["RatioToReference"], {}, ("first_minibatch_ratio_error", "problem")),
    }


def train_batch(trainer_class: type, config, seeds: list[int], folder: Path) -> list[Path]:
    """Train `seeds` of `config` as one batch of `trainer_class` into folder/seedS; the run folders."""
    run_dirs = [folder / f"seed{seed}" for seed in seeds]
    configure_process(config.num_threads)
    envs = make_seed_batch_env(config.env_id, len(seeds), config.num_envs, config.env_backend)
    trainer_class(config, envs, seeds=seeds, run_dirs=run_dirs, progress=False).train()
    return run_dirs


def signatures(run_dir: Path) -> set[tuple[str, str]]:
    """The (metric, severity) of every finding ppo-diagnose makes on a run folder."""
    return {(item.metric, item.severity) for item in diagnose_run(run_dir)[1]}


def final_return(run_dir: Path) -> float | None:
    """The last logged mean return of the last 20 training episodes of a run folder."""
    returns = [row["episode_return_recent"] for row in read_metrics(run_dir / "metrics.csv")
               if row.get("episode_return_recent") is not None]
    return returns[-1] if returns else None


def planted_results(seeds: list[int], folder: Path, bugs: list[str] | None = None) -> list[dict]:
    """Per bug (all of PLANTED's, or `bugs`) and seed: whether its run shows the bug's signature."""
    rows = []
    for name, (trainer_class, change, signature) in planted_bugs().items():
        if bugs is not None and name not in bugs:
            continue
        config = build_config({"env_id": "CartPole-v1", "env_backend": "torch", "tensorboard": False,
                               "checkpoint_every": 0, **change})
        for seed, run_dir in zip(seeds, train_batch(trainer_class, config, seeds, folder / name.replace(" ", "_"))):
            found = signatures(run_dir)
            rows.append({"bug": name, "seed": seed, "signature": signature, "hit": signature in found,
                         "found": sorted(found), "final_return": final_return(run_dir)})
    return rows


def mystery_results() -> list[dict]:
    rows = []
    for name, answer in MYSTERY_ANSWERS.items():
        found = diagnose_rows(read_metrics(MYSTERY_DIR / name), {"env_id": "CartPole-v1"}, 475.0)
        problems = sorted({item.metric for item in found if item.severity == "problem"})
        hit = not problems if answer == "healthy" else bool(problems)
        rows.append({"file": name, "answer": answer, "problems": problems, "hit": hit})
    return rows


def healthy_results(env_ids: list[str], seeds: list[int], folder: Path) -> list[dict]:
    rows = []
    for env_id in env_ids:
        config = build_config({"env_id": env_id, "tensorboard": False, "checkpoint_every": 0})
        for seed, run_dir in zip(seeds, train_batch(PPO, config, seeds, folder / env_id.replace("/", "_"))):
            found = signatures(run_dir)
            problems = sorted(metric for metric, severity in found if severity == "problem")
            warnings = sorted(metric for metric, severity in found if severity == "warning")
            rows.append({"env_id": env_id, "seed": seed, "problems": problems, "warnings": warnings,
                         "false_alarm": bool(problems)})
    return rows


def report(planted: list[dict], mystery: list[dict], healthy: list[dict]) -> str:
    lines = []
    hits = sum(row["hit"] for row in planted)
    lines.append(f"planted bugs: {hits} of {len(planted)} runs show their signature")
    for row in planted:
        if not row["hit"]:
            lines.append(f"  miss: {row['bug']}, seed {row['seed']}: expected {row['signature']}, found {row['found']} "
                         f"(final training return {row['final_return']:.1f})")
    lines.append(f"mystery runs: {sum(row['hit'] for row in mystery)} of {len(mystery)} read right "
                 f"(broken: a problem found; healthy: none)")
    for row in mystery:
        lines.append(f"  {row['file']} ({row['answer']}): problems {', '.join(row['problems']) or 'none'}")
    alarms = sum(row["false_alarm"] for row in healthy)
    lines.append(f"healthy runs: {alarms} false alarms in {len(healthy)} runs "
                 f"({', '.join(sorted({row['env_id'] for row in healthy}))})")
    for row in healthy:
        if row["false_alarm"] or row["warnings"]:
            lines.append(f"  {row['env_id']} seed {row['seed']}: problems {', '.join(row['problems']) or 'none'}; "
                         f"warnings {', '.join(row['warnings']) or 'none'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = OneLineArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=list(DEFAULT_SEEDS),
                        help=f"seeds of every planted bug and healthy env (default: {DEFAULT_SEEDS[0]}-{DEFAULT_SEEDS[-1]})")
    parser.add_argument("--healthy-envs", nargs="+", default=list(HEALTHY_ENVS),
                        help=f"presets whose correct runs must get no problem (default: {' '.join(HEALTHY_ENVS)})")
    args = parser.parse_args(argv)

    def run() -> int:
        if len(set(args.seeds)) != len(args.seeds):
            raise ConfigError(f"seeds = {args.seeds}: a seed listed twice")
        with tempfile.TemporaryDirectory() as folder:
            planted = planted_results(args.seeds, Path(folder) / "planted")
            healthy = healthy_results(args.healthy_envs, args.seeds, Path(folder) / "healthy")
        print(report(planted, mystery_results(), healthy))
        return 0

    return run_with_user_errors(PROG, run)


if __name__ == "__main__":
    sys.exit(main())
