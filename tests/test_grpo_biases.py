"""experiments/studies/grpo_biases.py: each bias points the way the options' equations say, on hand-worked cases."""

import json
import math

import pytest
from _tiny_lm import one_torch_thread  # noqa: F401 (an autouse fixture)

from experiments.studies import grpo_biases


def test_difficulty_weights_of_a_group_of_three_by_hand():
    """G = 3, k successes: group-std gives Â = ±2/√3 to the odd one out and ±1/√3 to the two alike (std 1/√3), so
    a_1 − a_0 = (2/√3)((1 − p)² + 2p(1 − p) + p²) = 2/√3 for every p; none gives 1 − 1/G = 2/3."""
    result = grpo_biases.difficulty_bias([0.1, 0.5], group_size=3)
    for row in result["rows"]:
        assert row["c_group-std"] == pytest.approx(2 / 3 ** 0.5, rel=1e-5)
        assert row["c_none"] == pytest.approx(2 / 3, rel=1e-12)
        assert row["tie_share"] == pytest.approx((1 - row["p"]) ** 3 + row["p"] ** 3, rel=1e-12)
    # E|Â| per completion, none: E[2k(G − k)/G] / G over k ~ Binomial(3, p): 2·(2/3)/3 for k = 1 and k = 2
    p = 0.1
    expected = (3 * p * (1 - p) ** 2 + 3 * p ** 2 * (1 - p)) * (2 * 2 / 3) / 3
    assert result["rows"][0]["mean_abs_none"] == pytest.approx(expected, rel=1e-12)


def test_group_std_up_weights_prompts_near_zero_or_one_and_the_other_scales_do_not():
    result = grpo_biases.difficulty_bias([0.05, 0.5, 0.95], group_size=8)
    hard, even, easy = result["rows"]
    relative = [row["c_group-std"] / row["c_none"] for row in (hard, even, easy)]
    assert relative[0] > 1.2 * relative[1] and relative[2] > 1.2 * relative[1]  # measured 2.644 vs 1.984
    for row in (hard, even, easy):
        assert row["c_none"] == pytest.approx(1 - 1 / 8, rel=1e-12)  # unbiased: the same weight on ∇p for every p
        assert row["c_batch-std"] == pytest.approx(row["c_none"] / result["batch_std"], rel=1e-5)
    # the batch std, by hand: E[A²] per completion = p(1 − p)(G − 1)/G, averaged over the three p
    second_moment = sum(p * (1 - p) * 7 / 8 for p in (0.05, 0.5, 0.95)) / 3
    assert result["batch_std"] == pytest.approx(math.sqrt(second_moment), rel=1e-12)


def test_sequence_averaging_pushes_a_wrong_answer_less_per_token_the_longer_it_is():
    """pizza (6 tokens with EOS, R = 1), soda (5), ice cream (10): Â = 2/3, −1/3, −1/3; b = 3, T = 16, Σ|y| = 21."""
    result = grpo_biases.group_weights(["pizza", "soda", "ice cream"], max_new_tokens=16)
    assert result["lengths"] == [6, 5, 10]
    push = result["per_token_push"]
    assert push["sequence"] == pytest.approx([2 / 3 / 18, -1 / 3 / 15, -1 / 3 / 30], rel=1e-12)  # Â / (b |y|)
    assert push["token"] == pytest.approx([2 / 3 / 21, -1 / 3 / 21, -1 / 3 / 21], rel=1e-12)  # Â / Σ|y|
    assert push["constant"] == pytest.approx([2 / 3 / 48, -1 / 3 / 48, -1 / 3 / 48], rel=1e-12)  # Â / (b T)


def test_the_cli_prints_the_three_tables_and_the_model_shows_the_length_bias(tmp_path, capsys):
    output = tmp_path / "biases.json"
    assert grpo_biases.main(["--quick", "--sft-cache-dir", str(tmp_path / "cache"), "--group-size", "4",
                             "--success-rates", "0.05", "0.5", "--min-probability", "1e-4", "--json",
                             str(output)]) == 0
    printed = capsys.readouterr().out
    assert "1. Difficulty bias" in printed and "2. Length bias" in printed and "3. Length bias on the model" in printed
    figures = json.loads(output.read_text())
    change = figures["expected_change"]
    # every averaging's step raises E_π[R] by the same 0.01
    for averaging in ("token", "sequence", "constant"):
        rise = sum(p * s * c for p, s, c in zip(change["probabilities"], change["scores"], change["changes"][averaging]))
        assert rise == pytest.approx(0.01, rel=1e-9)
    # token and constant averaging differ by a constant factor in expectation: the same direction
    assert change["changes"]["token"] == pytest.approx(change["changes"]["constant"], rel=1e-6, abs=1e-12)
    # sequence averaging: longer completions than token averaging gives, long wrong answers pushed down less, short
    # wrong answers more
    assert change["length_change"]["sequence"] > change["length_change"]["token"]
    for longer, sign in ((True, 1), (False, -1)):
        difference = (grpo_biases.wrong_mass_change(change, "sequence", longer)
                      - grpo_biases.wrong_mass_change(change, "token", longer))
        assert sign * difference > 0, (longer, difference)


@pytest.mark.parametrize("arguments, message", [
    (["--group-size", "1"], "group_size = 1 must be at least 2"),
    (["--success-rates", "0.5", "1"], "success rate 1 is not in (0, 1)"),
    (["--group", "pizza", "burger"], "group answer 'burger' is not a food of the corpus"),
    (["--max-new-tokens", "5"], "max_new_tokens = 5 is shorter than the group's longest answer"),
])
def test_bad_arguments_are_refused_in_one_line_and_write_nothing(arguments, message, tmp_path, capsys):
    output = tmp_path / "biases.json"
    assert grpo_biases.main([*arguments, "--json", str(output)]) == 2
    error = capsys.readouterr().err
    assert message in error and len(error.strip().splitlines()) == 1
    assert not output.exists()


def test_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        grpo_biases.main(["--help"])
    assert exit_info.value.code == 0
    text = capsys.readouterr().out
    assert all(flag in text for flag in ("--group-size", "--success-rates", "--quick", "--json"))
