"""DPO, IPO, reward model + PPO and best-of-n from the same comparisons: the rater, the target, a tiny run."""

import json
import math
import random

import pytest
from _tiny_lm import one_torch_thread, tiny_sft  # noqa: F401 (one_torch_thread is an autouse fixture)

import experiments.studies.preference_methods as command
from experiments.tasks.preference_rater import label_pair, rater_comparisons
from experiments.tasks.two_choice_task import ANSWERS, TwoChoiceTaskConfig
from ppo.lm.exact.optimum import MALFORMED, NO_EOS, completion_probabilities
from ppo.lm.trainers.rlhf_config import RLHFConfig

SCORES = {"likes salad": 1.0, "hates soda": 0.5, "likes pizza": 0.0, "hates tacos": 0.0}


@pytest.mark.parametrize(("first", "second", "temperature", "expected"), [
    ("likes salad", "hates soda", 0.5, 1 / (1 + math.exp(-1.0))),  # σ((1 − 0.5)/0.5) = σ(1) = 0.7311
    ("likes pizza", "likes salad", 0.25, 1 / (1 + math.exp(4.0))),  # σ((0 − 1)/0.25) = σ(−4) = 0.0180
    ("likes pizza", "hates tacos", 2.0, 0.5),  # a tie: a coin flip
])
def test_the_rater_prefers_the_first_with_probability_sigma_of_the_score_gap_over_t(first, second, temperature,
                                                                                     expected):
    rng, draws = random.Random(0), 40_000
    chosen_first = sum(label_pair("ravin ", first, second, SCORES.get, temperature, rng)[1:] == (first, second)
                       for _ in range(draws))
    bound = 5 * math.sqrt(expected * (1 - expected) / draws)  # five binomial standard errors
    assert abs(chosen_first / draws - expected) <= bound


def test_comparisons_pair_finished_samples_of_one_prompt_in_turn():
    sft, tokenizer = tiny_sft()
    prompts = ["ravin ", "maya "]
    comparisons = rater_comparisons(sft, tokenizer, prompts, lambda text: 0.0, 7, 1.0, 16, seed=3)
    assert [c[0] for c in comparisons] == prompts * 3 + prompts[:1]
    again = rater_comparisons(sft, tokenizer, prompts, lambda text: 0.0, 7, 1.0, 16, seed=3)
    assert again == comparisons  # the same seed draws the same pairs and labels
    with pytest.raises(ValueError, match="temperature"):
        rater_comparisons(sft, tokenizer, prompts, lambda text: 0.0, 7, 0.0, 16, seed=3)


def test_the_target_is_the_rule_optimum_at_t_times_beta():
    """π*(g) = π_ref(g)·exp(r(g)/(t·β)) / Z, computed by hand from π_ref's groups, with t = 0.5 and β = 0.4."""
    sft, tokenizer = tiny_sft()
    task_config, settings, t, beta = TwoChoiceTaskConfig(person="ravin"), RLHFConfig(), 0.5, 0.4
    optimum = command.target_optima(sft, sft, tokenizer, ["ravin "], task_config, beta, t, settings,
                                    min_probability=1e-4)[0].optimum
    reference = completion_probabilities(sft, tokenizer, "ravin ", ANSWERS, 1.0, 16, 1e-4)
    score = {**{a: task_config.completion_score(a, True) for a in ANSWERS}, MALFORMED: 0.0, NO_EOS: -1.0}
    assert score["likes salad"] == 1.0 and score["hates soda"] == 0.5
    weights = {g: p * math.exp(score[g] / (t * beta)) for g, p in reference.items()}  # exp(r/0.2)
    z = sum(weights.values())
    for group, weight in weights.items():
        assert optimum.probabilities[group] == pytest.approx(weight / z, rel=1e-9, abs=1e-12)


def test_ipo_target_tilts_by_the_win_rate_against_the_finished_reference():
    """Two finished groups a (r = 1) and b (r = 0), equally likely, and a run-on group NO_EOS the rater never sees:
    P(a ≻ μ) = ½·½ + ½·σ(1/t), P(b ≻ μ) = ½·σ(−1/t) + ½·½; π_IPO ∝ π_ref·exp(P/β)."""
    t, beta = 0.5, 0.25
    sigma = 1 / (1 + math.exp(-1 / t))
    reference = {"a": 0.45, "b": 0.45, NO_EOS: 0.1}
    target = command.ipo_target(reference, {"a": 1.0, "b": 0.0, NO_EOS: -1.0}, beta, t)
    win = {"a": 0.25 + 0.5 * sigma, "b": 0.5 * (1 - sigma) + 0.25,
           NO_EOS: 0.5 / (1 + math.exp(2 / t)) + 0.5 / (1 + math.exp(1 / t))}  # σ((−1 − 1)/t), σ((−1 − 0)/t)
    weights = {g: reference[g] * math.exp(win[g] / beta) for g in reference}
    z = sum(weights.values())
    assert target == pytest.approx({g: w / z for g, w in weights.items()}, rel=1e-9)


TINY_RUN = ["--person", "ravin", "--seeds", "2", "--comparisons", "256", "--dpo-epochs", "4",
            "--dpo-learning-rate", "1e-3", "--reward-model-steps", "40", "--ppo-iterations", "3",
            "--ppo-batch-size", "32", "--best-of-n", "2", "8", "--eval-samples", "64",
            "--ending-threshold", "1e-4", "--enumeration-threshold", "1e-4"]


def test_a_tiny_run_writes_every_row_and_dpo_moves_towards_the_optimum(tmp_path, monkeypatch, capsys):
    """On seed 2 with these sizes DPO's TV to π*_β is below the SFT model's (0.424 against 0.814 when written)."""
    monkeypatch.setattr(command, "load_or_pretrain_sft", lambda *args, **kwargs: tiny_sft())
    assert command.main([*TINY_RUN, "--json", str(tmp_path / "rows.json"), "--out-dir", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "rows.json").read_text())
    assert (tmp_path / "preference_methods.png").stat().st_size > 0
    assert results["optimum"]["total_variation"] == pytest.approx(0.0, abs=1e-12)
    rows = {row["method"]: row for row in results["rows"] if row["method"] != "best-of-n curve"}
    assert set(rows) == {"DPO", "IPO", "RM + PPO", "best-of-2", "best-of-8"}
    for row in rows.values():
        assert 0.0 <= row["total_variation"] <= 1.0 and row["comparisons"] == 256
    assert rows["RM + PPO"]["completions"] == 3 * 32
    for key in ("tv_to_own_target", "own_target_tv_to_optimum"):  # the reward model's target, PPO's distance to it
        assert 0.0 <= rows["RM + PPO"][key] <= 1.0
    assert rows["best-of-8"]["kl"] <= rows["best-of-8"]["kl_bound"] + 1e-12
    assert rows["DPO"]["total_variation"] < results["sft"]["total_variation"]
    printed = capsys.readouterr().out
    assert "IPO's optimum is not π*_β" in printed and "log n − (n − 1)/n" in printed


@pytest.mark.parametrize(("flags", "message"), [
    (["--rater-temperature", "0"], "rater_temperature = 0.0 must be a finite number > 0"),
    (["--comparisons", "0"], "comparisons = 0 must be a positive integer"),
    (["--best-of-n", "0"], "every n must be a positive integer"),
    (["--person", "bob"], "person = 'bob'"),
])
def test_a_bad_flag_is_one_line_and_exit_2(flags, message, capsys, tmp_path):
    assert command.main([*flags, "--json", str(tmp_path / "rows.json")]) == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1
    assert not (tmp_path / "rows.json").exists()


def test_exact_gold_and_right_by_hand():
    """Two prompts: gold Σ_g π(g)·r(g) and the right rate Σ_{g paid} π(g), then their mean over the prompts."""
    from experiments.studies.compare_lm_trainers import exact_gold_and_right

    scores = {"likes salad": 1.0, "hates soda": 0.5, "likes soda": 0.0, MALFORMED: 0.0, NO_EOS: -1.0}
    first = {"likes salad": 0.5, "hates soda": 0.2, "likes soda": 0.2, MALFORMED: 0.05, NO_EOS: 0.05}
    second = {"likes salad": 0.1, "hates soda": 0.0, "likes soda": 0.9, MALFORMED: 0.0, NO_EOS: 0.0}
    gold, right = exact_gold_and_right([first, second], scores)
    assert gold == pytest.approx(((0.5 + 0.1 - 0.05) + 0.1) / 2)
    assert right == pytest.approx((0.7 + 0.1) / 2)


def test_the_trainer_table_gives_dpo_its_pairs_and_no_half_way_point(capsys):
    from experiments.studies.compare_lm_trainers import RunResult, print_table

    shares = [0.2, 0.1, 0.4, 0.2, 0.1]
    results = [RunResult("ppo", 1, 0.9, 0.9, 1.5, 0.2, 0.3, 0.01, 256, 3.0, 128, shares, [0.3, 0.5, 0.7, 0.9]),
               RunResult("dpo", 1, 0.8, 0.85, 1.2, 0.3, 0.5, 0.02, 512, 2.0, None, shares, comparisons=256)]
    print_table(results, {"gold": 0.27, "right_rate": 0.36, "total_variation": 0.78, "kl_to_optimum": 3.0},
                {"gold": 0.97, "right_rate": 0.99, "kl": 1.69}, 0.15)
    lines = capsys.readouterr().out.splitlines()
    dpo = next(line for line in lines if line.startswith("DPO "))
    assert "256 pairs" in dpo and "—" in dpo and "never" not in dpo
    curves = lines[lines.index(next(line for line in lines if line.startswith("learning curves"))):]
    assert any(line.startswith("PPO ") for line in curves[:4]) and not any(line.startswith("DPO ") for line in curves[:4])
