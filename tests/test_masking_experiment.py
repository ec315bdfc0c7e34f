"""The masking experiment's learning curves: the points fall where stated (iteration 0 to the
last), scoring them leaves training as it was, the last point is the final score, the
intervals bracket the IQM, the JSON and the plot hold the curves, and a bad --curve-points
is refused in one line before anything is written."""

import json

import numpy as np
import pytest
import torch

from envs.toy_masked import MaskedChoiceVecEnv
from experiments.studies.learning_curves import curve_iterations
from experiments.studies.masking_experiment import build_parser, main, make_config, train_one
from ppo.config import ConfigError
from ppo.trainers.ppo import PPO

# 4 iterations of 512 steps: curve points at iterations 0, 2, 4
TINY = ["--total-timesteps", "2048", "--curve-points", "3", "--eval-envs", "60", "--curve-eval-envs", "20"]


def test_curve_iterations_are_evenly_spaced_from_zero_to_the_last():
    assert curve_iterations(11, 30) == [0, 3, 6, 9, 12, 15, 18, 21, 24, 27, 30]
    assert curve_iterations(10, 30) == [0, 3, 7, 10, 13, 17, 20, 23, 27, 30]  # 30/9 = 3.33 per point, rounded
    assert curve_iterations(3, 4) == [0, 2, 4]
    assert curve_iterations(2, 1) == [0, 1]
    assert curve_iterations(31, 30) == list(range(31))
    for points, iterations in ((1, 30), (0, 30), (-2, 30), (32, 30)):
        with pytest.raises(ConfigError, match=f"--curve-points {points} "):
            curve_iterations(points, iterations)


def reference_rates(model, config, args, setting: str) -> tuple[float, float]:
    """The final score as the experiment computed it before it had curves, from the network's
    logits: greedy play (argmax over the valid actions under a mask, over all of them under the
    penalty) on --eval-envs episodes seeded with seed + 10000; the shares of target and of invalid choices."""
    env = MaskedChoiceVecEnv(args.eval_envs, args.num_actions, args.num_valid, args.episode_length, setting,
                             args.penalty)
    obs = env.reset(seed=config.seed + 10_000)
    chose_target, chose_invalid = [], []
    with torch.no_grad():
        for _ in range(args.episode_length):
            inputs = obs["observation"] if setting == "mask" else obs
            logits = model.policy_head.logits(model.actor_body(inputs))  # (B, K)
            if setting == "mask":
                logits = logits.masked_fill(~env.mask, -torch.inf)
            action = logits.argmax(dim=1)
            chose_target.append((action == env.target).numpy())
            chose_invalid.append((~env.mask[torch.arange(len(action)), action]).numpy())
            obs = env.step(action).obs
    return float(np.mean(chose_target)), float(np.mean(chose_invalid))


@pytest.mark.parametrize("setting", ["mask", "penalty"])
def test_scoring_the_curve_leaves_the_run_and_its_final_score_as_without_it(setting):
    args = build_parser().parse_args(TINY + ["--curve-points", "5"])
    run = train_one(args, setting, seed=7)
    assert [point["iteration"] for point in run["curve"]] == [0, 1, 2, 3, 4]
    assert [point["env_steps"] for point in run["curve"]] == [0, 512, 1024, 1536, 2048]
    assert [point["episodes"] for point in run["curve"]] == [20, 20, 20, 20, 60]

    # the same run trained without any scoring, then scored once as before the curves existed
    config = make_config(args, setting, 7)
    untrained = PPO(config, MaskedChoiceVecEnv(16, 32, 3, 8, setting, 0.1), progress=False)
    trained = PPO(config, MaskedChoiceVecEnv(16, 32, 3, 8, setting, 0.1), progress=False)
    trained.train()
    # Training is bit-equal: the same code, shapes and kernels on one machine, and scoring
    # draws from no generator that training uses, so the two runs do the same arithmetic.
    assert run["train_return"] == trained.recent_return()
    # The rates are shares of 8 · 60 choices (steps of 1/480); the experiment averages float32
    # per-step means, the reference float64 counts, so they may differ by a few float32 ulps
    # (far below one choice: a different action anywhere would fail).
    close = dict(abs=1e-6, rel=0)
    target, invalid = reference_rates(trained.model, config, args, setting)
    assert (run["target_rate"], run["invalid_rate"]) == (pytest.approx(target, **close), pytest.approx(invalid, **close))
    assert (run["curve"][-1]["target_rate"], run["curve"][-1]["invalid_rate"]) == (run["target_rate"], run["invalid_rate"])
    # the first point scores the untrained policy (on 20 episodes instead of 60)
    args.eval_envs = 20
    target, invalid = reference_rates(untrained.model, config, args, setting)
    assert run["curve"][0]["target_rate"] == pytest.approx(target, **close)
    assert run["curve"][0]["invalid_rate"] == pytest.approx(invalid, **close)
    if setting == "mask":
        assert all(point["invalid_rate"] == 0.0 for point in run["curve"])


def test_short_run_prints_saves_and_plots_the_curves(tmp_path, capsys):
    json_path, plot_path = tmp_path / "masking.json", tmp_path / "curves.png"
    assert main(["--seeds", "1,2"] + TINY + ["--json", str(json_path), "--plot", str(plot_path)]) == 0
    printed = capsys.readouterr().out
    record = json.loads(json_path.read_text())
    curves = record["curves"]
    assert curves["iterations"] == [0, 2, 4] and curves["env_steps"] == [0, 1024, 2048]
    assert curves["episodes"] == [20, 20, 60]
    for setting in ("mask", "penalty"):
        rows = curves["target_rate"][setting]
        assert len(rows) == 3 and len(curves["invalid_rate_mean"][setting]) == 3
        for row in rows:
            assert row["iqm_low"] <= row["iqm"] <= row["iqm_high"]
            assert row["mean_low"] <= row["mean"] <= row["mean_high"]
        for run in record["runs"][setting]:
            assert len(run["curve"]) == 3 and run["curve"][0]["iteration"] == 0
            assert run["curve"][-1]["target_rate"] == run["target_rate"]
            assert run["curve"][-1]["invalid_rate"] == run["invalid_rate"]
        # the last point's interval is the final table's (the same scores, the same bootstrap seed)
        assert rows[-1] == record["intervals"][setting]
        assert curves["invalid_rate_mean"][setting][-1] == pytest.approx(
            np.mean([run["invalid_rate"] for run in record["runs"][setting]]), abs=1e-12)
    assert curves["invalid_rate_mean"]["mask"] == [0.0, 0.0, 0.0]
    table = printed[printed.index("iteration"):].splitlines()
    assert [line.split()[:2] for line in table[1:4]] == [["0", "0"], ["2", "1024"], ["4", "2048"]]
    mask_final = record["intervals"]["mask"]
    assert f"{mask_final['iqm']:.3f} [{mask_final['iqm_low']:.3f}, {mask_final['iqm_high']:.3f}]" in table[3]
    assert plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["curves.png", "masking.json"]


@pytest.mark.parametrize("flags, message", [
    (["--curve-points", "0"], "--curve-points 0 must be at least 2"),
    (["--curve-points", "-3"], "--curve-points -3 must be at least 2"),
    (["--curve-points", "6"], "--curve-points 6 is more than the run's 4 iterations + 1"),
    (["--curve-points", "two"], "--curve-points: invalid int value: 'two'"),
    (["--curve-eval-envs", "0"], "--curve-eval-envs 0 must be a positive integer"),
    (["--plot", "curves.nope"], "--plot"),
])
def test_bad_curve_flags_are_refused_in_one_line_leaving_nothing(tmp_path, capsys, monkeypatch, flags, message):
    monkeypatch.chdir(tmp_path)
    argv = ["--seeds", "1,2", "--total-timesteps", "2048", "--curve-points", "3", "--json", str(tmp_path / "out" / "masking.json"),
            "--plot", str(tmp_path / "out" / "curves.png")] + flags
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse refuses a value that is no integer
        code = exit_.code
    errors = capsys.readouterr().err
    assert code == 2
    assert len(errors.strip().splitlines()) == 1 and message in errors and "Traceback" not in errors
    assert list(tmp_path.iterdir()) == []
