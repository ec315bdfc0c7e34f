"""Results over seeds (experiments.commands.statistics): grouping by setting, IQM and mean with bootstrap
intervals, performance profiles, the summary table of a sweep — on run folders written by hand."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from experiments.commands.statistics import (format_summary_table, group_runs, interval_estimates, iqm, load_run,
                                    performance_profiles, summarize_runs)
from ppo.config import ConfigError

REPS = 200  # few resamples: fast, and enough to check the intervals' properties
STEPS = [1000, 2000, 3000, 4000]


def write_run(folder: Path, seed: int, returns: list[float], eval_return: float | None = None,
              seconds_per_step: float = 1.5e-3, **config) -> Path:
    """A run folder as ppo-train leaves it: config.json, metrics.csv (one row per entry of
    STEPS; None leaves the return empty) and, if eval_return is given, eval.json."""
    folder.mkdir(parents=True)
    full_config = {"env_id": "CartPole-v1", "seed": seed, "learning_rate": 1e-3, "clip_coef": 0.2,
                   "hidden_sizes": [64, 64], "num_threads": 1, "device": "cpu", **config}
    (folder / "config.json").write_text(json.dumps(full_config))
    lines = ["global_step,policy_loss,episode_return_recent,episode_return_mean,time_s"]
    for step, value in zip(STEPS, returns):
        lines.append(f"{step},0.1,{'' if value is None else value},{'' if value is None else value},"
                     f"{step * seconds_per_step}")
    (folder / "metrics.csv").write_text("\n".join(lines) + "\n")
    if eval_return is not None:
        (folder / "eval.json").write_text(json.dumps({"mean_return": eval_return, "episodes": 10}))
    return folder


def two_settings(parent: Path) -> dict[str, list[Path]]:
    """2 settings × 4 seeds. learning_rate=1e-3: seed s earns 10·s·k at the k-th row and is
    evaluated at 50, 100, 150, 400. learning_rate=3e-3: evaluated at 200, 300, 500, and the
    fourth run has no eval.json (its last training return is 90)."""
    slow = [write_run(parent / f"lr1e-3__seed{s}", s, [10 * s * k for k in (1, 2, 3, 4)], eval_return)
            for s, eval_return in zip((1, 2, 3, 4), (50.0, 100.0, 150.0, 400.0))]
    fast = [write_run(parent / f"lr3e-3__seed{s}", s, [100.0, 200.0, 300.0, 90.0], eval_return,
                      learning_rate=3e-3, num_threads=s)  # the thread count is not a setting
            for s, eval_return in zip((1, 2, 3, 4), (200.0, 300.0, 500.0, None))]
    return {"learning_rate=1e-3": slow, "learning_rate=3e-3": fast}


def test_runs_are_grouped_by_setting_and_labelled_by_what_differs(tmp_path):
    expected = two_settings(tmp_path)
    runs = [run for group in expected.values() for run in group]
    assert group_runs(runs) == expected
    assert group_runs(expected["learning_rate=1e-3"]) == {"all": expected["learning_rate=1e-3"]}
    other = write_run(tmp_path / "clip", 1, [1, 2, 3, 4], clip_coef=0.1, hidden_sizes=[32, 32])
    labels = list(group_runs([*runs, other]))
    assert labels == ["learning_rate=1e-3 clip_coef=0.2 hidden_sizes=64x64",
                      "learning_rate=3e-3 clip_coef=0.2 hidden_sizes=64x64",
                      "learning_rate=1e-3 clip_coef=0.1 hidden_sizes=32x32"]


def test_a_seed_twice_in_one_setting_is_refused(tmp_path):
    first = write_run(tmp_path / "a", 1, [1, 2, 3, 4])
    copy = write_run(tmp_path / "a__2", 1, [1, 2, 3, 4], num_threads=4)
    with pytest.raises(ConfigError, match="same seed 1"):
        group_runs([first, copy])


def test_iqm_is_the_mean_of_the_middle_half_with_a_reproducible_interval():
    scores = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 100.0])
    middle_four = np.sort(scores)[2:6].mean()  # 8 runs: drop 2 at each end
    assert iqm(scores) == pytest.approx(middle_four) == pytest.approx(4.5)
    estimates = interval_estimates({"a": scores, "b": scores[:, None] + 1}, reps=REPS, seed=3)
    a = estimates["a"]
    assert a["iqm"] == pytest.approx(4.5) and a["mean"] == pytest.approx(scores.mean())
    assert estimates["b"]["iqm"] == pytest.approx(5.5)  # runs × tasks works as runs alone
    for group in estimates.values():
        assert group["iqm_low"] <= group["iqm"] <= group["iqm_high"]
        assert group["mean_low"] <= group["mean"] <= group["mean_high"]
    assert a["mean_high"] > a["iqm_high"]  # the outlier widens the mean's interval, not the IQM's
    again = interval_estimates({"a": scores}, reps=REPS, seed=3)["a"]
    assert again == a  # same seed, same interval, whatever the other groups
    other = interval_estimates({"a": scores}, reps=REPS, seed=4)["a"]
    assert (other["iqm_low"], other["iqm_high"], other["mean_low"], other["mean_high"]) != \
           (a["iqm_low"], a["iqm_high"], a["mean_low"], a["mean_high"])


def test_the_bootstrap_leaves_numpys_global_generator_alone():
    np.random.seed(11)
    expected = np.random.random()
    np.random.seed(11)
    interval_estimates({"a": np.arange(5.0)}, reps=REPS, seed=0)
    assert np.random.random() == expected


def test_performance_profile_is_the_fraction_of_runs_above_tau():
    profile = performance_profiles({"a": np.array([1.0, 2.0, 3.0, 4.0])}, [0.0, 2.5, 4.0], reps=REPS, seed=0)["a"]
    np.testing.assert_allclose(profile["fraction"], [1.0, 0.5, 0.0])
    assert (profile["low"] <= profile["fraction"]).all() and (profile["fraction"] <= profile["high"]).all()


def test_summary_rows_match_a_hand_computation(tmp_path):
    groups = two_settings(tmp_path)
    rows = summarize_runs([run for runs in groups.values() for run in runs], threshold=100.0, reps=REPS)
    slow, fast = rows
    assert slow["setting"] == "learning_rate=1e-3" and slow["runs"] == 4 and slow["from_training"] == 0
    assert slow["successes"] == 3  # 100, 150, 400 ≥ 100
    assert slow["mean"] == pytest.approx(175.0) and slow["iqm"] == pytest.approx(125.0)  # middle two: 100, 150
    assert slow["iqm_low"] <= slow["iqm"] <= slow["iqm_high"]
    # seed 3 reaches 100 at step 4000 (90, then 120), seed 4 at step 3000 (120); seeds 1, 2 never
    assert slow["reached"] == 2
    assert slow["median_steps_to_threshold"] == pytest.approx(3500.0)
    assert slow["median_time_to_threshold"] == pytest.approx((4.5 + 6.0) / 2)
    # the fourth fast run has no eval.json: its score is its last training return, 90
    assert fast["from_training"] == 1 and fast["successes"] == 3
    assert fast["mean"] == pytest.approx((200 + 300 + 500 + 90) / 4)
    assert fast["reached"] == 4 and fast["median_time_to_threshold"] == pytest.approx(1.5)
    assert summarize_runs(groups["learning_rate=1e-3"], threshold=100.0, reps=REPS)[0]["iqm"] == slow["iqm"]


def test_the_summary_table_names_each_setting_and_what_it_counted(tmp_path):
    groups = two_settings(tmp_path)
    table = format_summary_table(summarize_runs([run for runs in groups.values() for run in runs], 100.0, REPS))
    lines = table.splitlines()
    assert lines[0].split()[:2] == ["setting", "runs"] and "final ≥ 100" in lines[0]
    assert lines[1].startswith("learning_rate=1e-3 ") and "3/4" in lines[1] and "(2/4 reached)" in lines[1]
    assert lines[2].startswith("learning_rate=3e-3 *") and "1.5 s (4/4 reached)" in lines[2]
    assert "175.0 [" in lines[1] and "125.0 [" in lines[1]
    assert "middle 50%" in table and "1 of 4 runs have no eval.json" in table
    no_threshold = format_summary_table(summarize_runs(groups["learning_rate=1e-3"], None, REPS))
    assert no_threshold.splitlines()[1].startswith("all ") and "no success threshold" in no_threshold


def test_a_folder_without_metrics_is_a_one_line_error(tmp_path):
    folder = tmp_path / "not_a_run"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    with pytest.raises(ConfigError, match="not_a_run has no metrics.csv"):
        load_run(folder)
    broken = write_run(tmp_path / "broken", 1, [1, 2, 3, 4])
    (broken / "metrics.csv").write_text("global_step,episode_return_recent\n1000,abc\n")
    with pytest.raises(ConfigError, match="cannot be read"):
        load_run(broken)


def test_the_statistics_package_is_imported_only_when_used():
    code = ("import sys, experiments.commands.train, experiments.commands.sweep, experiments.commands.statistics, experiments.commands.plot; "
            "print(sorted({'rliable', 'arch', 'pandas', 'scipy', 'statsmodels'} & set(sys.modules)))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
