"""`ppo-plot`: the figures and CSVs of a comparison over seeds, checked against hand computations
on run folders written by hand (test_statistics.write_run), and its one-line errors."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from experiments.plot import main
from test_statistics import two_settings, write_run

REPS = ["--reps", "200"]
T_975_3 = 3.182446305284263  # the 97.5% quantile of Student's t with 3 degrees of freedom (4 seeds)
PNG = b"\x89PNG\r\n\x1a\n"


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
    result = subprocess.run([sys.executable, "-m", "experiments.plot", str(tmp_path / "nowhere")],
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"ppo-plot: error: {tmp_path / 'nowhere'} does not exist"]
