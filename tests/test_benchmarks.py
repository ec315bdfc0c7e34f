"""The benchmark scripts run: each prints its table on a tiny budget (their figures are for the book's guide and benchmarks page)."""

from experiments.benchmarks import optim


def test_the_optimizer_benchmark_prints_both_optimizers_ratios(capsys):
    assert optim.main(["--minibatch-sizes", "8", "--steps", "2", "--rounds", "1"]) in (0, None)
    out = capsys.readouterr().out
    assert "torch.optim" in out and "FlatAdam" in out and "×" in out
