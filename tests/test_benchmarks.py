"""The benchmark scripts run: each prints its table on a tiny budget (their figures are for the book's guide and benchmarks page)."""

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
