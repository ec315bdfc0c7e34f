"""Read a run's diagnostics the way the course does: `ppo-diagnose RUN_DIR`.

    ppo-diagnose runs/CartPole-v1__seed1            # findings, one block each
    ppo-diagnose runs/sweep                          # every run folder under it: seeds, sweep settings
    ppo-diagnose runs/CartPole-v1__seed1 --json      # the findings as a JSON list
    ppo-diagnose runs/sweep --fail-on problem        # exit 1 when any run has a problem (for CI)

Reads each run folder's metrics.csv (and its config.json, where there is one) and checks
the rules of experiments.commands.findings, which the course's runs set: a first-minibatch
ratio error above rounding, an approx KL of exactly 0 or far too large, a clip fraction
that stays high, an entropy that collapses before the return is solved, a value loss that
grows, a gradient norm that is non-finite or huge, a return that ends below the untrained
policy's or falls back from its peak, an explained variance below 0 late in the run, and
target_kl ending every update. Each finding names the metrics.csv column, what it did and
when, the healthy range, the likely causes and the lecture section that explains them. A
"problem" is what the course's runs show only with a bug or a broken setting; a
"warning" is worth a look, and a healthy run of another configuration may show it.

A folder without a metrics.csv stands for every run folder under it (the members of a
seed batch, the runs of a sweep), each diagnosed in turn. The exit code is 0 when the
command ran, whatever it found; 2 for bad input; with --fail-on, 1 when a run has a
finding of that severity or worse.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from experiments.commands.cli import OneLineArgumentParser, run_with_user_errors
from experiments.commands.findings import PROBLEM, SEVERITIES, WARNING, Finding, diagnose_rows
from experiments.commands.plot import check_metrics_lines, find_run_dirs
from experiments.commands.statistics import read_config
from experiments.commands.sweep import success_threshold
from ppo.runs.logger import read_metrics

PROG = "ppo-diagnose"
FAILED_CHECK_EXIT_CODE = 1


def build_parser() -> OneLineArgumentParser:
    parser = OneLineArgumentParser(
        prog=PROG, description="Check a run's metrics.csv against the course's diagnostics and print what is off.",
        epilog="Exit code: 0 when the command ran, findings or not; 1 with --fail-on when a run has a finding of "
               "that severity or worse; 2 for bad input.")
    parser.add_argument("run_dir", type=Path,
                        help="run folder, or a folder of run folders (a seed batch, a sweep): each is diagnosed")
    parser.add_argument("--json", action="store_true",
                        help="print the findings as a JSON list of objects (run, metric, severity, observed, value, "
                             "iteration, global_step, healthy, causes, lecture, rule)")
    parser.add_argument("--fail-on", choices=SEVERITIES, default=None,
                        help="exit with 1 when any run has a finding of this severity or worse "
                             f"({WARNING}: any finding; {PROBLEM}: problems only); default: exit 0 whatever is found")
    parser.add_argument("--success-threshold", type=float, default=None, metavar="RETURN",
                        help="the return at which the env counts as solved, below which an entropy collapse is "
                             "premature (default: the env's gymnasium reward_threshold, 475 for CartPole-v1)")
    return parser


def read_run(run_dir: Path) -> tuple[list[dict], dict]:
    """The metrics rows and the config (empty where config.json is missing) of one run folder;
    ConfigError (one line) for a damaged metrics.csv or config.json."""
    metrics = run_dir / "metrics.csv"
    check_metrics_lines(metrics)
    rows = read_metrics(metrics)
    config = read_config(run_dir) if (run_dir / "config.json").exists() else {}
    return rows, config


def diagnose_run(run_dir: Path, threshold: float | None = None) -> tuple[list[dict], list[Finding]]:
    """One run folder's rows and its findings."""
    rows, config = read_run(run_dir)
    env_id = config.get("env_id")
    solved = success_threshold(env_id, threshold) if isinstance(env_id, str) else threshold
    return rows, diagnose_rows(rows, config, solved)


def format_findings(run_dir: Path, rows: list[dict], findings: list[Finding]) -> str:
    """The text report of one run: a head line, then one block per finding."""
    if not rows:
        return f"{run_dir}: no iterations logged yet"
    problems = sum(item.severity == PROBLEM for item in findings)
    warnings = len(findings) - problems
    if not findings:
        return f"{run_dir}: no findings ({len(rows)} iterations): the diagnostics look healthy"
    lines = [f"{run_dir}: {problems} problem{'s' * (problems != 1)}, {warnings} warning{'s' * (warnings != 1)} "
             f"({len(rows)} iterations)"]
    for item in findings:
        lines += [f"  {item.severity:<7} {item.metric}: {item.observed}",
                  f"          healthy: {item.healthy}",
                  f"          likely:  {item.causes}",
                  f"          read:    {item.lecture}"]
    return "\n".join(lines)


def worst(findings: list[Finding]) -> int:
    """The index in SEVERITIES of the worst finding, -1 for none."""
    return max((SEVERITIES.index(item.severity) for item in findings), default=-1)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    def diagnose() -> int:
        reports = [(run_dir, *diagnose_run(run_dir, args.success_threshold)) for run_dir in find_run_dirs([args.run_dir])]
        if args.json:
            print(json.dumps([{"run": str(run_dir), **item.as_dict()} for run_dir, _, findings in reports
                              for item in findings], indent=2))
        else:
            print("\n".join(format_findings(*report) for report in reports))
        found = max((worst(findings) for _, _, findings in reports), default=-1)
        failing = args.fail_on is not None and found >= SEVERITIES.index(args.fail_on)
        return FAILED_CHECK_EXIT_CODE if failing else 0

    return run_with_user_errors(PROG, diagnose)


if __name__ == "__main__":
    sys.exit(main())
