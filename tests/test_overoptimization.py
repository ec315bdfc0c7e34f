"""Reward over-optimisation: exact best-of-n against simulation, the functional-form fits, the command."""

import csv
import math

import pytest
import torch

from _tiny_lm import one_torch_thread, tiny_sft  # noqa: F401 (one_torch_thread is an autouse fixture)
from envs import corpus
from ppo.lm.exact.best_of_n import best_of_n_curve, best_of_n_kl_bound, best_of_n_probabilities, kl_divergence
from ppo.lm.exact.enumeration import enumerate_completions
from ppo.lm.exact.optimum import completion_probabilities
from ppo.lm.exact.overoptimization_fit import fit_overoptimization


def simulate_best_of_n(p: torch.Tensor, scores: torch.Tensor, n: int, trials: int, seed: int) -> torch.Tensor:
    """Brute force: draw n outcomes trials times, keep the highest score, break ties uniformly. (trials,) indices."""
    generator = torch.Generator().manual_seed(seed)
    draws = torch.multinomial(p.float(), trials * n, replacement=True, generator=generator).view(trials, n)
    rank = torch.unique(scores, return_inverse=True)[1][draws].double()  # (trials, n) integer score levels
    key = rank + torch.rand(trials, n, generator=generator, dtype=torch.float64)  # random tie-break inside a level
    return draws.gather(1, key.argmax(dim=1, keepdim=True)).squeeze(1)


def test_best_of_two_of_two_equally_likely_outcomes_by_hand():
    p, scores = torch.tensor([0.5, 0.5]), torch.tensor([0.0, 1.0])
    pi = best_of_n_probabilities(p, scores, 2)  # the worse one only if both draws are it: 1/4
    assert pi.tolist() == pytest.approx([0.25, 0.75])
    assert kl_divergence(pi, p) == pytest.approx(0.25 * math.log(0.5) + 0.75 * math.log(1.5))


def test_tied_outcomes_share_their_level_in_proportion_to_the_reference():
    p, scores = torch.tensor([0.2, 0.3, 0.5]), torch.tensor([1.0, 1.0, 0.0])
    pi = best_of_n_probabilities(p, scores, 3)  # level 1 wins unless all three draws are outcome 2: 1 − 0.5³
    assert pi.tolist() == pytest.approx([0.875 * 0.4, 0.875 * 0.6, 0.125])


@pytest.mark.parametrize("n", [1, 3, 8])
def test_best_of_n_distribution_kl_and_scores_match_brute_force_simulation(n):
    p = torch.tensor([0.30, 0.25, 0.15, 0.12, 0.10, 0.05, 0.03], dtype=torch.float64)
    proxy = torch.tensor([0.0, 1.0, 1.0, 2.0, -1.0, 3.0, 2.0], dtype=torch.float64)  # two ties
    gold = torch.tensor([0.2, 0.9, 0.1, 0.5, 0.0, -0.5, 0.7], dtype=torch.float64)
    trials = 200_000
    chosen = simulate_best_of_n(p, proxy, n, trials, seed=n)
    frequencies = torch.bincount(chosen, minlength=len(p)).double() / trials
    exact = best_of_n_probabilities(p, proxy, n)
    standard_error = (exact * (1 - exact) / trials).sqrt()
    assert bool((frequencies - exact).abs().le(5 * standard_error + 1e-12).all()), (frequencies, exact)
    point = best_of_n_curve(p, proxy, gold, [n])[0]
    assert point.kl == pytest.approx(kl_divergence(frequencies, p), abs=0.01)
    assert point.gold == pytest.approx(float(gold[chosen].mean()), abs=5 * float(gold.std()) / math.sqrt(trials))
    assert point.proxy == pytest.approx(float(proxy[chosen].mean()), abs=5 * float(proxy.std()) / math.sqrt(trials))


def test_kl_is_below_log_n_minus_n_minus_1_over_n_and_reaches_it_without_ties():
    p = torch.tensor([0.5, 0.3, 0.2])
    scores = torch.tensor([2.0, 1.0, 0.0])
    for n in (1, 2, 5, 50, 1000):
        pi = best_of_n_probabilities(p, scores, n)
        assert kl_divergence(pi, p) <= best_of_n_kl_bound(n) + 1e-12
    # 1000 → ∞: everything on the best outcome, KL = −log 0.5, far below log 1000 − 0.999
    assert kl_divergence(best_of_n_probabilities(p, scores, 1000), p) == pytest.approx(math.log(2))
    # many equally likely outcomes with distinct scores: the continuous case, where the bound is the KL
    many = 100_000
    uniform = torch.full((many,), 1.0 / many, dtype=torch.float64)
    for n in (2, 10):
        pi = best_of_n_probabilities(uniform, torch.arange(many, dtype=torch.float64), n)
        assert kl_divergence(pi, uniform) == pytest.approx(best_of_n_kl_bound(n), abs=1e-3)


def test_best_of_n_stays_a_distribution_for_huge_n():
    p = torch.tensor([0.9, 0.1 - 1e-9, 1e-9], dtype=torch.float64)
    pi = best_of_n_probabilities(p, torch.tensor([2.0, 1.0, 0.0]), 10**7)
    assert bool(torch.isfinite(pi).all()) and float(pi.sum()) == pytest.approx(1.0)
    assert pi.tolist() == pytest.approx([1.0, 0.0, 0.0])


@pytest.mark.parametrize("form, alpha, beta", [("best_of_n", 0.8, 0.2), ("rl", 0.5, 0.3)])
def test_fit_recovers_known_coefficients_and_the_peak(form, alpha, beta):
    d = torch.linspace(0.05, 4.0, 60, dtype=torch.float64)
    second = d * d if form == "best_of_n" else d * d.log()
    gains = d * alpha - beta * second
    fit = fit_overoptimization(form, d, gains)
    assert (fit.alpha, fit.beta) == pytest.approx((alpha, beta), abs=1e-9)
    grid = torch.linspace(1e-4, 10, 200_001, dtype=torch.float64)  # the peak found by brute force
    assert fit.peak_distance == pytest.approx(float(grid[fit.predict(grid).argmax()]), abs=1e-4)
    assert fit.peak_kl == pytest.approx(fit.peak_distance**2)
    noisy = gains + 0.02 * torch.randn(len(d), generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    noisy_fit = fit_overoptimization(form, d, noisy)
    assert (noisy_fit.alpha, noisy_fit.beta) == pytest.approx((alpha, beta), abs=0.03)
    assert noisy_fit.rms_error == pytest.approx(0.02, abs=0.006)


def test_a_peak_beyond_the_measured_distances_is_not_in_range_and_the_best_measured_point_is_the_last():
    d = torch.linspace(0.1, 2.0, 20, dtype=torch.float64)
    fit = fit_overoptimization("best_of_n", d, d * (0.5 - 0.0625 * d))  # peak at d* = 0.5 / 0.125 = 4
    assert fit.peak_distance == pytest.approx(4.0) and fit.largest_distance == pytest.approx(2.0)
    assert not fit.peak_in_range
    assert fit.best_in_range == pytest.approx((2.0, 2.0 * (0.5 - 0.0625 * 2.0)))  # still rising at d_max = 2
    inside = fit_overoptimization("best_of_n", d, d * (0.5 - 0.25 * d))  # peak at d* = 1, gain 0.25
    assert inside.peak_in_range and inside.best_in_range == pytest.approx((1.0, 0.25))


def brute_force_bounded_fit(form, d, gains, low, high):
    """An independent slow reference: the least squared error over (α, β) grids, among the
    coefficient pairs whose curve stays inside [low, high] on a dense grid of [0, d_max]. The
    curves inside the bounds form a convex set (each bound is linear in α and β) and the
    error is convex, so a grid of steps 0.025 over [-1, 2]² finds the basin, and grids of
    steps 0.001 centred on the best point so far walk to the bottom (until the best point
    stays where it is). (α, β, error)"""
    dense = torch.linspace(1e-6, float(d.max()), 1000, dtype=torch.float64)

    def best_on(alphas, betas):
        alpha, beta = torch.meshgrid(alphas, betas, indexing="ij")
        alpha, beta = alpha.reshape(-1), beta.reshape(-1)  # (G,)
        def curve(points):  # (G, len(points))
            second = points * points if form == "best_of_n" else points * points.log()
            return alpha[:, None] * points[None, :] - beta[:, None] * second[None, :]
        values = curve(dense)
        inside = (values >= low - 1e-9).all(1) & (values <= high + 1e-9).all(1)
        errors = (curve(d) - gains[None, :]).pow(2).sum(1)
        errors[~inside] = math.inf
        best = int(errors.argmin())
        return float(alpha[best]), float(beta[best]), float(errors[best])

    best = best_on(*(torch.linspace(-1, 2, 121, dtype=torch.float64),) * 2)
    fine = torch.linspace(-0.05, 0.05, 101, dtype=torch.float64)
    for _ in range(100):
        alpha, beta, error = best
        best = best_on(alpha + fine, beta + fine)
        if best[2] >= error:
            return alpha, beta, error
    raise AssertionError("the grid search did not settle")


@pytest.mark.parametrize("form", ["best_of_n", "rl"])
def test_a_bounded_fit_stays_inside_the_rule_range_and_is_the_least_squares_among_such_curves(form):
    # gold rises to the top of the range, then jumps to the bottom far out (a hacked reward): the
    # unconstrained fit overshoots both bounds
    d = torch.tensor([0.3, 0.6, 1.0, 1.5, 1.9, 1.95, 2.0, 6.9], dtype=torch.float64)
    gains = torch.tensor([0.45, 0.65, 0.72, 0.73, 0.73, 0.73, 0.73, -0.77], dtype=torch.float64)
    low, high = -0.77, 0.73
    free = fit_overoptimization(form, d, gains)
    dense = torch.linspace(0, 6.9, 5001, dtype=torch.float64)
    free_curve = free.predict(dense)
    assert float(free_curve.min()) < low - 0.01 or float(free_curve.max()) > high + 0.01  # the case is a real one
    bounded = fit_overoptimization(form, d, gains, gain_bounds=(low, high))
    curve = bounded.predict(dense)
    assert float(curve.min()) >= low - 1e-3 and float(curve.max()) <= high + 1e-3  # 129-point grid: tiny overshoot
    error = float((bounded.predict(d) - gains).pow(2).sum())
    assert bounded.rms_error == pytest.approx(math.sqrt(error / len(d)))
    _, _, reference_error = brute_force_bounded_fit(form, d, gains, low, high)
    assert error <= reference_error + 1e-9  # no curve of the grid inside the bounds does better ...
    assert error >= float((free.predict(d) - gains).pow(2).sum())  # ... and the bounds cost something
    assert reference_error - error < 0.1 * reference_error  # and the grid (steps of 0.001) nearly reaches it


def test_a_bounded_fit_whose_free_fit_is_inside_is_the_free_fit():
    d = torch.linspace(0.1, 2.0, 20, dtype=torch.float64)
    gains = d * (0.5 - 0.25 * d)  # between −0.5 and 0.25
    free = fit_overoptimization("best_of_n", d, gains)
    bounded = fit_overoptimization("best_of_n", d, gains, gain_bounds=(-1.0, 1.0))
    assert (bounded.alpha, bounded.beta) == pytest.approx((free.alpha, free.beta), abs=1e-12)
    with pytest.raises(ValueError, match="low ≤ 0 ≤ high"):
        fit_overoptimization("best_of_n", d, gains, gain_bounds=(0.1, 1.0))


def test_fit_refuses_too_few_points():
    with pytest.raises(ValueError, match="at least two points"):
        fit_overoptimization("rl", [0.0, 1.0], [0.0, 0.5])
    with pytest.raises(ValueError, match="form"):
        fit_overoptimization("linear", [1.0, 2.0], [0.1, 0.2])


def test_enumeration_finds_every_food_with_the_probability_teacher_forcing_gives():
    model, tokenizer = tiny_sft()
    prompt = corpus.prompt("ravin", "likes")
    found = enumerate_completions(model, tokenizer, prompt, 1e-5, max_new_tokens=10)
    reference = completion_probabilities(model, tokenizer, prompt, corpus.FOODS)
    for food in corpus.FOODS:
        index = [i for i, (text, eos) in enumerate(zip(found.texts, found.ended_with_eos)) if eos and text == food]
        assert len(index) == 1
        assert float(found.probabilities[index[0]]) == pytest.approx(reference[food], rel=1e-4)
    assert bool((found.probabilities >= 1e-5).all())
    assert found.residual == pytest.approx(1 - float(found.probabilities.sum()), abs=1e-12)
    finer = enumerate_completions(model, tokenizer, prompt, 1e-7, max_new_tokens=10)
    assert len(finer) > len(found) and finer.residual < found.residual


def test_command_writes_the_figure_csv_and_fits(tmp_path, monkeypatch, capsys):
    import experiments.studies.overoptimization as command

    monkeypatch.setattr(command, "load_or_pretrain_sft", lambda *args, **kwargs: tiny_sft())
    out = tmp_path / "out"
    argv = ["--out-dir", str(out), "--betas", "0", "--iterations", "3", "--batch-size", "16",
            "--max-new-tokens", "10", "--preference-pairs", "40", "--reward-model-steps", "5",
            "--eval-samples", "32", "--best-of-n-max", "50", "--enumeration-threshold", "1e-4"]
    assert command.main(argv) == 0
    printed = capsys.readouterr().out
    assert ("gold peaks at KL" in printed or "no peak inside the measured range" in printed)
    assert "the default β = 0.15" in printed
    assert (out / "overoptimization.png").stat().st_size > 0 and (out / "fits.json").exists()
    with (out / "overoptimization.csv").open() as file:
        rows = list(csv.DictReader(file))
    methods = [row["method"] for row in rows]
    assert methods.count("ppo") == 2 * 3 and methods.count("ppo_final") == 2  # β = 0 and the default 0.15
    best_of_n = [row for row in rows if row["method"] == "best_of_n"]
    assert best_of_n[0]["n"] == "1" and float(best_of_n[0]["kl"]) == pytest.approx(0.0, abs=1e-9)
    assert all(float(row["kl"]) <= float(row["kl_bound"]) + 1e-9 for row in best_of_n)


@pytest.mark.parametrize("argv, message", [
    (["--betas", "-0.1"], "every β must be a finite number ≥ 0"),
    (["--person", "bob"], "person = 'bob' is not in the corpus"),
    (["--rater-noise", "nan"], "rater_noise = nan"),
    (["--enumeration-threshold", "2"], "enumeration_threshold = 2.0 must be in (0, 1)"),
    (["--iterations", "0"], "iterations = 0"),
    (["--best-of-n-max", "many"], "invalid int value"),
])
def test_bad_input_gets_one_line_and_exit_code_2(argv, message, capsys, tmp_path):
    from experiments.studies.overoptimization import main

    try:
        code = main([*argv, "--out-dir", str(tmp_path / "out")])
    except SystemExit as stop:  # argparse's own errors exit from inside parse_args
        code = stop.code
    error = capsys.readouterr().err
    assert code == 2 and error.count("\n") == 1 and message in error, error
    assert not (tmp_path / "out").exists()
