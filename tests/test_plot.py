"""`ppo-plot`: the figures and CSVs of a comparison over seeds, checked against hand computations
on run folders written by hand (test_statistics.write_run), and its one-line errors."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from experiments.commands.plot import main, planned_iterations
from ppo.trainers.seed_batch import DIVERGED_NAME
from test_statistics import two_settings, write_run

REPS = ["--reps", "200"]
T_975_3 = 3.182446305284263  # the 97.5% quantile of Student's t with 3 degrees of freedom (4 seeds)
PNG = b"\x89PNG\r\n\x1a\n"
REPO_ROOT = Path(__file__).resolve().parents[1]


def read_csv(path: Path) -> list[dict]:
    with open(path, newline="") as file:
        return list(csv.DictReader(file))


@pytest.fixture
def compared(tmp_path, capsys):
    """Two settings × 4 seeds under runs/, plotted into out/ with a threshold of 100 and 7 grid points."""
    groups = two_settings(tmp_path / "runs")
    exit_code = main([str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--threshold", "100",
                      "--points", "7", *REPS])
    assert exit_code == 0
    return groups, tmp_path / "out", capsys.readouterr().out


def test_every_figure_and_table_is_written(compared):
    _, out, printed = compared
    for name in ("learning_curves.png", "aggregates.png", "performance_profile.png"):
        assert (out / name).read_bytes().startswith(PNG)
    assert {path.name for path in out.iterdir()} == {"learning_curves.png", "aggregates.png", "performance_profile.png",
                                                     "curves.csv", "aggregates.csv", "profile.csv"}
    assert "learning_rate=1e-3" in printed and "learning_rate=3e-3 *" in printed  # the summary table


def test_the_mean_curve_and_its_t_interval_at_the_grid_points(compared):
    _, out, _ = compared
    rows = read_csv(out / "curves.csv")
    assert list(rows[0]) == ["x", "group", "mean", "low", "high"]
    slow = [row for row in rows if row["group"] == "learning_rate=1e-3"]
    assert [float(row["x"]) for row in slow] == [1000, 1500, 2000, 2500, 3000, 3500, 4000]
    # seed s logs 10·s·k at step 1000·k, so at step 1500 it is 15·s: 15, 30, 45, 60
    at_1500 = np.array([15.0, 30.0, 45.0, 60.0])
    half = T_975_3 * at_1500.std(ddof=1) / 2
    assert float(slow[1]["mean"]) == pytest.approx(37.5)
    assert float(slow[1]["low"]) == pytest.approx(37.5 - half)
    assert float(slow[1]["high"]) == pytest.approx(37.5 + half)
    assert [float(row["mean"]) for row in slow] == pytest.approx([25 * k for k in (1, 1.5, 2, 2.5, 3, 3.5, 4)])
    fast = [row for row in rows if row["group"] == "learning_rate=3e-3"]
    assert float(fast[5]["mean"]) == pytest.approx((300 + 90) / 2)  # halfway from 300 to 90
    assert float(fast[5]["low"]) == pytest.approx(195.0) == float(fast[5]["high"])  # four identical seeds


def test_the_aggregates_and_the_profile_match_a_hand_computation(compared):
    _, out, _ = compared
    slow, fast = read_csv(out / "aggregates.csv")
    assert slow["group"] == "learning_rate=1e-3" and int(slow["successes"]) == 3 and int(slow["reached"]) == 2
    assert float(slow["iqm"]) == pytest.approx(125.0) and float(slow["mean"]) == pytest.approx(175.0)
    assert float(slow["iqm_low"]) <= 125.0 <= float(slow["iqm_high"])
    assert float(slow["median_time_to_threshold"]) == pytest.approx(5.25)
    assert int(fast["from_training"]) == 1 and float(fast["mean"]) == pytest.approx(272.5)
    scores = {"learning_rate=1e-3": np.array([50.0, 100.0, 150.0, 400.0]),
              "learning_rate=3e-3": np.array([200.0, 300.0, 500.0, 90.0])}
    profile = read_csv(out / "profile.csv")
    assert list(profile[0]) == ["tau", "group", "fraction", "low", "high"]
    for row in profile:
        expected = (scores[row["group"]] > float(row["tau"])).mean()
        assert float(row["fraction"]) == pytest.approx(expected)
        assert float(row["low"]) <= expected <= float(row["high"])
    assert float(profile[0]["fraction"]) == 1.0 and float(profile[-1]["fraction"]) == 0.0


def test_one_setting_gets_curves_and_aggregates_in_plots_next_to_the_runs(tmp_path, capsys):
    runs = [write_run(tmp_path / "runs" / f"seed{s}", s, [s, 2 * s, 3 * s, 4 * s], eval_return=10.0 * s)
            for s in (1, 2, 3)]
    assert main([*map(str, runs), "--x", "time_s", *REPS]) == 0
    out = tmp_path / "runs" / "plots"
    assert {path.name for path in out.iterdir()} == {"learning_curves.png", "curves.csv", "aggregates.csv"}
    (row,) = read_csv(out / "aggregates.csv")
    assert row["group"] == "all" and float(row["mean"]) == pytest.approx(20.0)
    assert float(read_csv(out / "curves.csv")[0]["x"]) == pytest.approx(1.5)  # time_s of the first row
    assert "all" in capsys.readouterr().out


@pytest.mark.parametrize("make, message", [
    (lambda root: (root / "empty").mkdir(), "empty has no metrics.csv"),
    (lambda root: write_run(root / "run", 1, [1, 2, 3, 4]).joinpath("metrics.csv").unlink(), "run has no metrics.csv"),
    (lambda root: None, "missing does not exist"),
])
def test_a_folder_without_metrics_is_a_one_line_error(tmp_path, capsys, make, message):
    good = write_run(tmp_path / "good", 1, [1, 2, 3, 4])
    make(tmp_path)
    bad = tmp_path / message.split()[0]
    assert main([str(good), str(bad), "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and error.startswith("ppo-plot: error:") and message in error, error
    assert not (tmp_path / "out").exists()


def test_bad_flags_are_one_line_errors(tmp_path, capsys):
    run = write_run(tmp_path / "run", 1, [1, 2, 3, 4])
    assert main([str(run), "--metric", "no_such_column", "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "has no column no_such_column" in error
    with pytest.raises(SystemExit) as exit_info:
        main([str(run), "--reps", "0"])
    assert exit_info.value.code == 2 and len(capsys.readouterr().err.strip().splitlines()) == 1


def test_the_module_runs_as_a_command(tmp_path):
    result = subprocess.run([sys.executable, "-m", "experiments.commands.plot", str(tmp_path / "nowhere")],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"ppo-plot: error: {tmp_path / 'nowhere'} does not exist"]


def finished_run(folder: Path, seed: int, returns: list[float], planned: int = 4, **kwargs) -> Path:
    """write_run, with the iteration column ppo-train logs and a config that plans `planned`
    iterations of 1000 steps (4 envs × 250 steps), the rows write_run logs."""
    write_run(folder, seed, returns, num_envs=4, num_steps=250, total_timesteps=1000 * planned, **kwargs)
    metrics = folder / "metrics.csv"
    header, *rows = metrics.read_text().splitlines()
    metrics.write_text("\n".join([f"{header},iteration", *(f"{row},{k}" for k, row in enumerate(rows, start=1))]) + "\n")
    return folder


def left_out(printed: str) -> list[str]:
    return [line for line in printed.splitlines() if line.startswith("left out")]


def age(folder: Path, seconds_ago: float) -> None:
    """Date the run's metrics.csv (when it was last written) `seconds_ago`."""
    when = time.time() - seconds_ago
    os.utime(folder / "metrics.csv", (when, when))


def test_planned_iterations_read_either_commands_config():
    assert planned_iterations({"total_timesteps": 100_000, "num_envs": 64, "num_steps": 32}) == 48  # 98,304 steps
    assert planned_iterations({"algorithm": "ppo", "iterations": 20, "batch_size": 128}) == 20  # a ppo-rlhf run
    assert planned_iterations({"algorithm": "ppo", "iterations": True}) is None


def test_of_a_setting_and_seed_run_twice_the_latest_counts_and_the_earlier_is_named(tmp_path, capsys):
    runs = tmp_path / "runs"
    earlier = finished_run(runs / "A__seed1__2", 1, [1, 2, 3, 4], eval_return=100.0)  # the name sorts last
    latest = finished_run(runs / "A__seed1", 1, [1, 2, 3, 4], eval_return=300.0, num_threads=4)
    other = finished_run(runs / "A__seed2", 2, [1, 2, 3, 4], eval_return=200.0)
    age(earlier, 60), age(other, 60), age(latest, 10)
    assert main([str(runs), *REPS]) == 0
    (row,) = read_csv(runs / "plots" / "aggregates.csv")
    assert int(row["runs"]) == 2 and float(row["mean"]) == pytest.approx((300.0 + 200.0) / 2)
    printed = capsys.readouterr().out
    assert left_out(printed) == [
        f"left out, an earlier run of a setting and seed run again (the latest counts): {earlier} ({latest} counts)"]
    assert "2 runs compared" in printed


def rlhf_run(folder: Path, iterations_logged: int = 2, planned: int = 2) -> Path:
    """A run folder as ppo-rlhf leaves it: other config fields, other metrics.csv columns."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps({"algorithm": "ppo", "seed": 1, "iterations": planned}))
    rows = [f"{128 * k},{0.5 * k},{0.1 * k},{k}" for k in range(1, iterations_logged + 1)]
    (folder / "metrics.csv").write_text("\n".join(["global_step,target_rate,time_s,iteration", *rows]) + "\n")
    return folder


def test_runs_of_another_kind_and_folders_that_are_no_runs_are_left_out_with_a_note(tmp_path, capsys):
    runs = tmp_path / "runs"
    cartpole = [finished_run(runs / f"A__seed{s}", s, [1, 2, 3, 4], eval_return=10.0 * s) for s in (1, 2)]
    language_model = rlhf_run(runs / "rlhf-pizza-rule__seed1")
    (runs / "notes").mkdir()
    (runs / "notes" / "metrics.csv").write_text("step,loss\n1,2\n")
    assert main([str(runs), *REPS]) == 0
    assert left_out(capsys.readouterr().out) == [
        f"left out, not a run folder (no config.json): {runs / 'notes'}",
        f"left out, another kind of run (metrics.csv has no column episode_return_recent): {language_model}"]
    assert int(read_csv(runs / "plots" / "aggregates.csv")[0]["runs"]) == len(cartpole)
    # the other kind's own column compares it, and leaves the CartPole runs out
    assert main([str(runs), "--metric", "target_rate", "--out", str(tmp_path / "lm"), *REPS]) == 0
    printed = capsys.readouterr().out
    assert left_out(printed) == [
        f"left out, another kind of run (metrics.csv has no column target_rate): {cartpole[0]}, {cartpole[1]}",
        f"left out, not a run folder (no config.json): {runs / 'notes'}"]
    assert "1 run compared" in printed
    assert float(read_csv(tmp_path / "lm" / "curves.csv")[-1]["mean"]) == pytest.approx(1.0)  # 0.5·k at k = 2


def test_an_unfinished_run_is_left_out_unless_asked_for(tmp_path, capsys):
    runs = tmp_path / "runs"
    done = [finished_run(runs / f"A__seed{s}", s, [10 * s * k for k in (1, 2, 3, 4)]) for s in (1, 2)]
    running = finished_run(runs / "A__seed3", 3, [5.0, 6.0], planned=4)  # 2 of 4 iterations logged, no eval.json
    assert main([str(runs), "--points", "3", *REPS]) == 0
    assert left_out(capsys.readouterr().out) == [
        f"left out, unfinished: still running, stopped or failed (--include-unfinished compares it): "
        f"{running} (iteration 2 of 4)"]
    curves = read_csv(runs / "plots" / "curves.csv")
    assert [float(row["x"]) for row in curves] == [1000, 2500, 4000]  # the finished runs' whole range
    assert float(curves[-1]["mean"]) == pytest.approx((40 + 80) / 2)
    assert main([str(runs), "--points", "3", "--include-unfinished", *REPS]) == 0
    curves = read_csv(runs / "plots" / "curves.csv")
    assert [float(row["x"]) for row in curves] == [1000, 1500, 2000]  # cut to the unfinished run's range
    printed = capsys.readouterr().out
    assert not left_out(printed) and "3 runs compared" in printed


def test_a_run_that_diverged_is_no_unfinished_run_but_a_failure_in_the_table(tmp_path, capsys):
    runs = tmp_path / "runs"
    for s in (1, 2):
        finished_run(runs / f"A__seed{s}", s, [10 * s * k for k in (1, 2, 3, 4)], eval_return=100.0 * s)
    diverged = finished_run(runs / "A__seed3", 3, [5.0, 6.0], planned=4)  # stopped at its last good iteration
    (diverged / DIVERGED_NAME).write_text(json.dumps({"seed": 3, "iteration": 3, "quantity": "policy_loss",
                                                      "value": "nan"}))
    assert main([str(runs), *REPS]) == 0
    printed = capsys.readouterr().out
    assert not left_out(printed) and "3 runs compared" in printed and "(1 diverged)" in printed
    (row,) = read_csv(runs / "plots" / "aggregates.csv")
    assert int(row["runs"]) == 3 and float(row["mean"]) == pytest.approx(150.0)  # the failure has no score
    curves = read_csv(runs / "plots" / "curves.csv")
    assert float(curves[0]["x"]) == 1000 and float(curves[-1]["x"]) == 4000  # not cut short by the diverged run
    assert float(curves[-1]["mean"]) == pytest.approx((40 + 80) / 2)


def test_when_every_run_is_left_out_the_error_says_why_in_one_line(tmp_path, capsys):
    running = finished_run(tmp_path / "runs" / "A__seed1", 1, [5.0], planned=4)
    assert main([str(tmp_path / "runs"), "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err.strip()
    assert error == (f"ppo-plot: error: no run to compare; left out, unfinished: still running, stopped or failed "
                     f"(--include-unfinished compares it): {running} (iteration 1 of 4)")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("missing", ["scipy", "rliable"])
def test_without_the_stats_extra_the_command_says_how_to_install_it(tmp_path, missing):
    """As after `make demo`, which installs the core only: a None in sys.modules makes the import fail."""
    run = finished_run(tmp_path / "runs" / "A__seed1", 1, [1, 2, 3, 4])
    script = (f"import sys; sys.modules[{missing!r}] = None\n"
              "from experiments.commands.plot import main\n"
              f"sys.exit(main([{str(run)!r}]))")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO_ROOT)
    assert result.returncode == 2, result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("ppo-plot: error: ppo-plot needs the optional extra 'stats'") and missing in line
    assert line.endswith("pip install -c constraints.txt -e '.[stats]'")
    assert not (tmp_path / "runs" / "plots").exists()


def test_runs_of_several_envs_are_compared_env_by_env(tmp_path, capsys):
    """CartPole's two settings and one Acrobot setting: two folders, and CartPole's groups
    labelled by the learning rate alone (what differs among CartPole's runs), not by the env."""
    two_settings(tmp_path / "runs")
    for seed in (1, 2):
        write_run(tmp_path / "runs" / f"acrobot__seed{seed}", seed, [-500, -400, -300, -200], -150.0,
                  env_id="Acrobot-v1", hidden_sizes=[128, 128])
    assert main([str(tmp_path / "runs"), "--out", str(tmp_path / "out"), "--points", "7", *REPS]) == 0
    printed = capsys.readouterr().out
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == ["Acrobot-v1", "CartPole-v1"]
    cartpole = {row["group"] for row in read_csv(tmp_path / "out" / "CartPole-v1" / "curves.csv")}
    assert cartpole == {"learning_rate=1e-3", "learning_rate=3e-3"}
    assert {row["group"] for row in read_csv(tmp_path / "out" / "Acrobot-v1" / "curves.csv")} == {"all"}
    assert (tmp_path / "out" / "CartPole-v1" / "performance_profile.png").read_bytes().startswith(PNG)
    assert "\nAcrobot-v1: 2 runs" in printed and "\nCartPole-v1: 8 runs" in printed
    assert "10 runs compared" in printed
