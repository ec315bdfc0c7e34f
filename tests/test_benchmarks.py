"""The benchmark scripts run: each prints its table on a tiny budget (their figures are for the book's guide and benchmarks page)."""

import gc

from experiments.benchmarks import optim


def test_the_optimizer_benchmark_prints_both_optimizers_ratios(capsys):
    assert optim.main(["--minibatch-sizes", "8", "--steps", "2", "--rounds", "1"]) in (0, None)
    out = capsys.readouterr().out
    assert "torch.optim" in out and "FlatAdam" in out and "×" in out


def test_the_gpu_check_says_in_one_line_that_a_machine_has_no_cuda(capsys, monkeypatch):
    from experiments.benchmarks import gpu_check

    monkeypatch.setattr(gpu_check.torch.cuda, "is_available", lambda: False)
    assert gpu_check.main([]) == 0
    assert capsys.readouterr().out.strip().splitlines() == [
        "gpu-check: no CUDA device here (torch.cuda.is_available() is False); nothing was run"]


def test_the_gpu_check_runs_its_batches_and_minatar_on_a_cpu(capsys):
    from experiments.benchmarks import gpu_check

    assert gpu_check.main(["--device", "cpu", "--sizes", "1", "3", "--total-timesteps", "4096",
                           "--minatar-timesteps", "4096", "--no-torchrun"]) == 0
    out = capsys.readouterr().out
    assert "3 seeds as one batch" in out and "3 seeds took" in out and "MinAtar Breakout: 4,096 steps" in out
    assert "torchrun with NCCL: skipped (--no-torchrun)" in out


def test_the_breakdown_counts_cartpoles_flops_per_step_as_worked_by_hand():
    """The CartPole preset: actor 4→64→64→2 and critic 4→64→64→1, 8,896 multiply-adds per sample
    forward. Backward: every weight's gradient (8,896) and every input's but the observation's
    (8,896 − 2·256 = 8,384). Per env step: the rollout's forward (2·8,896), V(next obs) of 64 copies
    once per 2,048 steps (2·4,416·64 / 2,048 = 276), and 6 epochs of forward and backward
    (6·2·(8,896 + 8,896 + 8,384) = 314,112): 332,180 FLOPs, one run or a batch alike."""
    from experiments.benchmarks.breakdown import count_iteration_flops
    from experiments.commands.presets import build_config

    config = build_config({"env_id": "CartPole-v1", "tensorboard": False}, "auto").to_dict()
    single = count_iteration_flops(config)
    assert single["flops_per_step"] == 17_792 + 276 + 314_112
    assert count_iteration_flops(config, seeds=[1, 2])["flops_per_step"] == single["flops_per_step"]
    assert single["dominant"][0] == "aten.addmm.default"  # the 64×64 hidden layers' forward


def test_the_breakdown_counts_the_minatar_presets_flops_per_step_as_worked_by_hand():
    """MinAtar Breakout's preset, one shared trunk. Multiply-adds per sample forward: conv 4→16
    3×3 on 10×10, no padding, to 8×8 (16·4·9·64 = 36,864), linear 1024→128 (131,072), policy
    head 128→3 (384), value head 128→1 (128): 168,448, so 336,896 FLOPs. Per env step:
      the rollout's forward, in inference mode, where the conv dispatches as aten.conv2d: 336,896;
      V(next obs) of the 128 envs once per 128 × 32 = 4,096 steps: 2·168,064·128 / 4,096 = 10,504;
      each of 4 epochs (8 minibatches of 512 visit every sample once): forward 336,896, weight
      gradients 336,896, and the gradients of every layer's input but the observation's
      (2·(131,072 + 384 + 128) = 263,168), 936,960 in all; × 4 = 3,747,840.
    In all 4,095,240 FLOPs per env step. (MinAtar has no time limit, so no V(final obs) pass.)"""
    from experiments.benchmarks.breakdown import count_iteration_flops
    from experiments.commands.presets import build_config

    config = build_config({"env_id": "MinAtar/Breakout-v1", "tensorboard": False}, "auto").to_dict()
    assert count_iteration_flops(config)["flops_per_step"] == 336_896 + 10_504 + 3_747_840


def test_the_ceiling_sums_each_operations_flops_over_its_own_rate(monkeypatch):
    """K = Σ FLOPs / rate over the counted operations, grouped by operation for the largest."""
    from experiments.benchmarks import breakdown

    rates = {"mm": 1e10, "conv": 5e9}
    monkeypatch.setattr(breakdown, "operation_rate", lambda example, seconds: rates[example[0]])
    counted = {"operations": [("mm a", 2e10, ("mm", (), {})), ("conv", 1e10, ("conv", (), {})),
                              ("mm b", 1e10, ("mm", (), {}))]}
    kernels = breakdown.counted_kernel_seconds(counted)
    assert kernels["kernel_seconds"] == 3.0 + 2.0
    assert kernels["kernels"] == [["mm", 3.0 / 5.0, 1e10], ["conv", 2.0 / 5.0, 5e9]]
    measured = breakdown.counted_kernel_seconds(counted, rates={"mm a": 2e10})  # not replayed again
    assert measured["kernel_seconds"] == 1.0 + 2.0 + 1.0
    assert breakdown.kernel_shares(kernels["kernels"]) == "mm 60% at 10 GFLOP/s, conv 40% at 5 GFLOP/s"
    assert breakdown.kernel_shares([["mm", 0.95, 1e10], ["conv", 0.05, 5e9]], code="`") == "`mm` 95% at 10 GFLOP/s"


def test_a_phase_inside_another_is_charged_for_its_own_time_alone(monkeypatch):
    from experiments.commands import phase_clock

    now = iter([0.0, 1.0, 3.0, 10.0]).__next__  # outer starts, inner starts, inner ends, outer ends
    monkeypatch.setattr(phase_clock.time, "perf_counter", now)
    clock = phase_clock.PhaseClock()
    inner = clock.timed("inner", lambda: None)
    clock.timed("outer", inner)()
    assert dict(clock.seconds) == {"inner": 2.0, "outer": 8.0}


def test_the_breakdown_times_every_phase_of_a_whole_command_and_puts_back_what_it_wraps(tmp_path):
    from experiments.benchmarks import breakdown
    from experiments.commands import train
    from ppo.runs.plotting import CurveDrawer
    from ppo.trainers.base import BaseTrainer

    before = (BaseTrainer.train, CurveDrawer.draw, CurveDrawer.finish, train.evaluate_run)
    try:
        record = breakdown.run_command_timed(["--env-id", "CartPole-v1", "--total-timesteps", "4096",
                                              "--eval-episodes", "2", "--run-dir", str(tmp_path / "run")])
    finally:
        gc.unfreeze()  # the command was imported as a console command imports it (entry_points.import_main)
    assert (BaseTrainer.train, CurveDrawer.draw, CurveDrawer.finish, train.evaluate_run) == before
    assert record["steps"] == 4096
    seconds = record["seconds"]
    assert set(breakdown.PHASES) - {"start-up"} <= set(seconds) <= set(breakdown.PHASES)  # no phase left out of the table
    assert all(value >= 0 for value in seconds.values())
    assert seconds["update"] > 0 and seconds["env step"] > 0 and seconds["evaluation"] > 0
    assert abs(sum(seconds.values()) - record["command_wall"]) < 1e-6


def test_a_run_that_never_reached_475_reads_not_reached():
    from experiments.benchmarks.environments import reached_in

    assert reached_in(1.234, 2, " of training") == "after 1.23 s of training"
    assert reached_in(float("nan"), 2, " of training") == "not reached"


def test_the_update_variants_benchmark_times_float32_as_the_library_runs_it_and_bfloat16_at_the_moving_weights(
        capsys, monkeypatch):
    """float32's trainer ends where a plain trainer ends, bit for bit. bfloat16's ends elsewhere
    (autocast took hold), and its update moves π_θ as far from π_old as float32's: autocast
    keeps its bfloat16 copies of the weights for as long as its outermost context lasts, so an
    update run inside one context would see the starting weights in every minibatch, with an
    approximate KL near 0 (about 1e-6 against float32's 9e-3 on CartPole)."""
    import torch

    from envs.factory import make_vec_env
    from experiments.benchmarks import update_variants
    from experiments.commands.presets import build_config
    from ppo.trainers.choice import trainer_class

    config = build_config({"env_id": "CartPole-v1", "tensorboard": False, "checkpoint_every": 0})
    plain = trainer_class()(config, make_vec_env(config.env_id, config.num_envs, config.env_backend), progress=False)
    plain.collect_rollout()
    plain.update(*plain.compute_advantages())
    ends, kls = {}, {}
    for variant in ("float32", "bfloat16"):
        trainer = update_variants.build_trainer(config, variant)
        trainer.collect_rollout()
        kls[variant] = trainer.update(*trainer.compute_advantages())["approx_kl"]
        ends[variant] = torch.nn.utils.parameters_to_vector(trainer.model.parameters())
    expected = torch.nn.utils.parameters_to_vector(plain.model.parameters())
    assert torch.equal(ends["float32"], expected)
    assert not torch.allclose(ends["bfloat16"], expected, rtol=0, atol=1e-6)
    assert 0.5 * kls["float32"] < kls["bfloat16"] < 2 * kls["float32"]

    monkeypatch.setattr(update_variants, "configure_process", lambda threads: None)  # this process keeps its settings
    assert update_variants.main(["--env-id", "CartPole-v1", "--variants", "bfloat16", "--rounds", "2"]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [row.split()[0] for row in rows] == ["float32", "bfloat16"]
    assert all("gradient steps per update: median 24" in row for row in rows)  # 6 epochs × 4 minibatches, no KL stop


def test_the_update_variants_benchmark_refuses_a_single_round_in_one_line(capsys):
    import pytest

    from experiments.benchmarks import update_variants

    with pytest.raises(SystemExit) as exit_info:
        update_variants.main(["--rounds", "1"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "python -m experiments.benchmarks.update_variants: error: --rounds 1: give at least 2 (the first round is not counted)"]
