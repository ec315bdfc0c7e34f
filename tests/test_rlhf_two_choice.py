"""`ppo-rlhf --task two-choice`: the task chosen on the command line, recorded in task.json, resumed from it, and
measured against the exact optimum π*_β; a flag of the other task is refused before anything is written."""

import csv
import functools
import json
import math
import re

import pytest
import torch
from _tiny_lm import one_torch_thread, tiny_sft  # noqa: F401 (one_torch_thread is an autouse fixture)
from test_rlhf_cli import exit_code  # ppo-rlhf's exit code, argparse's own exits (--help) included

from experiments.commands import rlhf
from experiments.tasks import two_choice_task
from experiments.tasks.food_task import FoodTaskAdapter, FoodTaskConfig
from experiments.tasks.two_choice_task import (
    ANSWERS,
    PAID,
    TwoChoiceTaskAdapter,
    TwoChoiceTaskConfig,
    answer_shares,
    group_rates,
)
from ppo.config import ConfigError
from ppo.lm.models.gpt import completion_log_probs
from ppo.lm.exact.optimum import MALFORMED, NO_EOS
from ppo.lm.exact.optimum_distance import distance_to_optimum
from ppo.lm.trainers.rlhf_config import RLHFConfig

# The tiny SFT model is rough: its prefix tree of EOS-free 16-token completions at the library's ε = 1e-8 takes
# about 10 s per prompt and model. ε = 1e-5 brackets π_ref(NO_EOS) more loosely, in well under a second.
COARSE_DISTANCE = functools.partial(distance_to_optimum, min_probability=1e-5)
TINY_RUN = ["--batch-size", "16", "--num-minibatches", "2", "--eval-samples", "16", "--no-progress",
            "--no-tensorboard"]


@pytest.fixture
def tiny_model(monkeypatch, tmp_path):
    """ppo-rlhf on the tiny SFT model, with the coarse prefix tree; run from an empty tmp_path."""
    monkeypatch.setattr(rlhf, "load_or_pretrain_sft", lambda *args, **kwargs: tiny_sft())
    monkeypatch.setattr(two_choice_task, "distance_to_optimum", COARSE_DISTANCE)
    monkeypatch.chdir(tmp_path)


def test_help_lists_task_and_each_tasks_settings_under_its_own_heading(capsys):
    assert exit_code(["--help"]) == 0
    text = capsys.readouterr().out
    flowing = " ".join(text.split())  # argparse wraps the help at the terminal's width
    assert "--task {food,two-choice}" in flowing and "(default: food)" in flowing
    assert "(default: ravin with --task food, all with --task two-choice)" in flowing  # --person: both tasks
    food = text.split("the food task (--task food: FoodTaskConfig):")[1].split("\n\n")[0]
    two_choice = text.split("the two-choice task (--task two-choice: TwoChoiceTaskConfig):")[1].split("\n\n")[0]
    assert "--target-food" in food and "--reward-model-steps" in food and "--likes-score" not in food
    assert "--likes-score" in two_choice and "--hates-score" in two_choice and "--target-food" not in two_choice


@pytest.mark.parametrize("argv, message", [
    (["--task", "two-choice", "--target-food", "salad"],
     "--target-food is a setting of --task food, not of --task two-choice"),
    (["--task", "two-choice", "--reward", "model"],
     "--reward is a setting of --task food, not of --task two-choice (it pays by its rule alone"),
    (["--likes-score", "2"], "--likes-score is a setting of --task two-choice, not of --task food"),
    (["--task", "food", "--hates-score", "1"], "--hates-score is a setting of --task two-choice, not of --task food"),
    (["--task", "two-choice", "--person", "bob"], "person = 'bob' is not in the corpus"),
    (["--task", "two-choices"], "argument --task: invalid choice: 'two-choices'"),
])
def test_a_setting_of_the_other_task_is_refused_in_one_line_and_nothing_is_written(argv, message, tiny_model,
                                                                                 tmp_path, capsys):
    for where in ([], ["--run-dir", "mine"]):
        assert exit_code([*argv, *where, "--sft-cache-dir", "cache", *TINY_RUN]) == 2
        error = capsys.readouterr().err
        assert error.count("\n") == 1 and error.startswith("ppo-rlhf: error:") and message in error, error
        assert list(tmp_path.iterdir()) == []  # no runs/, no run folder, no cache


def test_run_folder_names_say_the_task():
    assert rlhf.run_folder_name(RLHFConfig(), TwoChoiceTaskConfig()) == "rlhf-two-choice__seed1"
    assert rlhf.run_folder_name(RLHFConfig(seed=3, algorithm="rloo"), TwoChoiceTaskConfig(
        person="maya", likes_score=2.0)) == "rlhf-two-choice__personmaya__likesscore2__rloo__seed3"
    assert rlhf.run_folder_name(RLHFConfig(), FoodTaskConfig(target_food="ice cream", reward="model")) == \
        "rlhf-ice_cream-model__seed1"


def test_task_json_names_the_task_and_a_record_without_a_kind_is_a_food_task():
    adapter = rlhf.task_from_record(rlhf.task_record(TwoChoiceTaskAdapter(TwoChoiceTaskConfig(hates_score=0.25))))
    assert isinstance(adapter, TwoChoiceTaskAdapter) and adapter.config == TwoChoiceTaskConfig(hates_score=0.25)
    legacy = rlhf.task_from_record(FoodTaskConfig(target_food="salad").to_dict())  # task.json before --task
    assert isinstance(legacy, FoodTaskAdapter) and legacy.config.target_food == "salad"
    with pytest.raises(ConfigError, match="task kind 'chess' is not one of food, two-choice"):
        rlhf.task_from_record({"kind": "chess", "config": {}})
    with pytest.raises(ConfigError, match="unknown config field"):
        rlhf.task_from_record({"kind": "two-choice", "config": {"target_food": "salad"}})


def test_rates_and_shares_by_hand():
    probabilities = {"likes salad": 0.4, "hates soda": 0.1, "likes soda": 0.2, "hates salad": 0.05,
                     "likes pizza": 0.05, MALFORMED: 0.15, NO_EOS: 0.05}
    assert group_rates(probabilities) == pytest.approx({"target_rate": 0.5, "likes_rate": 0.65,
                                                        "well_formed_rate": 0.8})
    shares = answer_shares({"likes salad": 0.5, "hates soda": 0.25, "likes saladd": 0.125, "likes sal…": 0.125})
    assert len(shares) == 21 and shares["likes salad"] == 0.5 and shares["hates soda"] == 0.25
    assert shares[MALFORMED] == 0.25 and shares["likes pizza"] == 0.0


@torch.no_grad()
def reference_answer_probabilities(model, tokenizer, prompt: str) -> dict[str, float]:
    """π_ref(answer + EOS | prompt) of the 20 answers, by teacher forcing, each on its own."""
    return {answer: float(completion_log_probs(model, tokenizer.encode(prompt),
                                               [tokenizer.encode(answer, add_bos=False, add_eos=True)]).exp())
            for answer in ANSWERS}


def test_the_optimum_ppo_rlhf_reports_is_pi_ref_tilted_by_the_task_settings(monkeypatch):
    """One prompt, scores 2 and 1 (not the defaults), β = 0.5: π*(g) = π_ref(g)·exp(r(g)/β)/Z, its rates summed
    by hand; at β = 0, π* is π_ref on the best-paid answers: KL = −log π_ref(them) (the adaptive controller's
    ceiling) and TV(π_ref, π*) = 1 − π_ref(them)."""
    monkeypatch.setattr(two_choice_task, "distance_to_optimum", COARSE_DISTANCE)
    model, tokenizer = tiny_sft()
    adapter = TwoChoiceTaskAdapter(TwoChoiceTaskConfig(person="ravin", likes_score=2.0, hates_score=1.0))
    config = RLHFConfig(max_new_tokens=16)
    optimum = adapter.optimum(model, model, tokenizer, 0.5, config)
    reference = reference_answer_probabilities(model, tokenizer, "ravin ")
    other = {MALFORMED: (optimum["reference_probabilities"][MALFORMED], 0.0),
             NO_EOS: (optimum["reference_probabilities"][NO_EOS], -1.0)}
    score = {answer: (2.0 if answer.startswith("likes") else 1.0) if answer in PAID else 0.0 for answer in ANSWERS}
    weights = {answer: p * math.exp(score[answer] / 0.5) for answer, p in reference.items()}
    z = sum(weights.values()) + sum(p * math.exp(r / 0.5) for p, r in other.values())
    # float32 teacher forcing in both, the same kernels but batched differently: a few 1e-7 apart
    assert optimum["target_rate"] == pytest.approx(sum(weights[a] for a in PAID) / z, abs=1e-5)
    assert optimum["likes_rate"] == pytest.approx(sum(w for a, w in weights.items() if a.startswith("likes")) / z,
                                                  abs=1e-5)
    assert optimum["expected_score"] == pytest.approx(
        (sum(weights[a] * score[a] for a in ANSWERS) - other[NO_EOS][0] * math.exp(-2.0)) / z, abs=1e-5)
    assert optimum["total_variation"]["policy"] == optimum["total_variation"]["sft"] > 0.1  # policy = π_ref

    at_zero = adapter.optimum(model, model, tokenizer, 0.0, config)
    liked_healthy = sum(reference[a] for a in PAID if a.startswith("likes"))
    assert at_zero["best_answers_kl"] == pytest.approx(-math.log(liked_healthy), abs=1e-5)
    assert at_zero["kl"] == pytest.approx(at_zero["best_answers_kl"], abs=1e-5)
    assert at_zero["total_variation"]["sft"] == pytest.approx(1.0 - liked_healthy, abs=1e-5)
    assert adapter.kl_ceiling(at_zero) == ("most for a healthy food liked", "a healthy food liked",
                                           at_zero["best_answers_kl"])
    scores_of_answers = adapter.config.answer_scores()
    at_beta = functools.partial(COARSE_DISTANCE, model, model, tokenizer, ["ravin "], ANSWERS,
                                lambda prompt: scores_of_answers, max_new_tokens=16, missing_eos_penalty=-1.0)
    with pytest.raises(ValueError, match="log Z and KL"):  # log Z = log Σ π_ref·exp(r/β) has no value at β = 0
        at_beta(beta=0.0)[0].log_partition
    with pytest.raises(ValueError, match="beta = -0.1 must be ≥ 0"):
        at_beta(beta=-0.1)


def rows(run_dir) -> list[dict]:
    with open(run_dir / "metrics.csv") as file:
        return list(csv.DictReader(file))


def test_a_tiny_two_choice_run_records_its_task_prints_the_optimum_and_resumes(tiny_model, tmp_path, capsys):
    argv = ["--task", "two-choice", "--person", "ravin", "--hates-score", "0.25", "--iterations", "2", *TINY_RUN,
            "--sft-cache-dir", "cache"]
    assert exit_code(argv) == 0
    printed = capsys.readouterr().out
    [run_dir] = (tmp_path / "runs").iterdir()
    assert run_dir.name.startswith("rlhf-two-choice__personravin__hatesscore0.25__iterations2__batchsize16__")
    assert run_dir.name.endswith("__seed1")
    config = TwoChoiceTaskConfig(person="ravin", hates_score=0.25)
    assert json.loads((run_dir / "task.json").read_text()) == {"kind": "two-choice", "config": config.to_dict()}
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["task"] == {"kind": "two-choice", "config": config.to_dict()}
    optimum = summary["optimum"]
    assert set(summary["ppo"]["answer_rates"]) == {*ANSWERS, MALFORMED}
    for label, rates in (("SFT", summary["sft"]), ("PPO", summary["ppo"])):
        assert f"{label:>4}: right combination {rates['target_rate']:.1%}, likes {rates['likes_rate']:.1%}, " \
               f"well-formed {rates['well_formed_rate']:.1%}, KL to SFT" in printed
    assert (f" OPT: π* ∝ π_ref·exp(r/β) at β = 0.15: right combination {optimum['target_rate']:.1%}, likes "
            f"{optimum['likes_rate']:.1%}, well-formed {optimum['well_formed_rate']:.1%}, KL {optimum['kl']:.2f} nats, "
            f"E[score] {optimum['expected_score']:.3f}") in printed
    tv = optimum["total_variation"]
    assert (f"TV to π* (exact over 22 groups: the answers, malformed, no EOS; mean over 1 prompts): SFT "
            f"{tv['sft']:.3f} → PPO {tv['policy']:.3f}") in printed
    assert len(rows(run_dir)) == 2

    task_json = (run_dir / "task.json").read_bytes()
    assert exit_code(["--resume", str(run_dir), "--task", "food", "--no-progress"]) == 2  # not the run's task
    assert "--task food contradicts run" in capsys.readouterr().err and len(rows(run_dir)) == 2
    assert exit_code(["--resume", str(run_dir), "--iterations", "3", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "reward two-choice" in printed and "TV to π*" in printed
    assert len(rows(run_dir)) == 3 and (run_dir / "task.json").read_bytes() == task_json
    assert json.loads((run_dir / "summary.json").read_text())["task"]["kind"] == "two-choice"


def test_a_short_two_choice_run_from_the_command_line_learns_the_right_combinations(tiny_model, tmp_path, capsys):
    """6 × 64 completions over the eight prompts. Right-combination rate on 400 fresh samples, SFT → PPO, when
    written: seed 1 0.330 → 0.775, seeds 2–4 (not tuned on) 0.348 → 0.792, 0.358 → 0.807, 0.323 → 0.843."""
    assert exit_code(["--task", "two-choice", "--iterations", "6", "--batch-size", "64", "--num-minibatches", "2",
                      "--learning-rate", "1e-3", "--eval-samples", "400", "--run-dir", "run", "--no-progress",
                      "--no-tensorboard", "--sft-cache-dir", "cache"]) == 0
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    sft, ppo = summary["sft"]["target_rate"], summary["ppo"]["target_rate"]
    assert ppo > sft + 0.3, (sft, ppo)
    assert summary["optimum"]["total_variation"]["policy"] < summary["optimum"]["total_variation"]["sft"] - 0.2
    assert re.search(r"TV to π\* .*mean over 8 prompts", capsys.readouterr().out)
