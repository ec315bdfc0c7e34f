"""The measured figures of the README and the book's guide are what their records (docs/figures/*.json) render to.

A hand edit of a marked block, a record changed without re-rendering, a block lost or found
twice, fails here; the renderers are checked against small hand-worked records.
"""

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.tools import readme_figures
from experiments.tools.readme_figures import BLOCKS, DOCUMENTS, EARLIER, MEASURED_HERE, check, marked_blocks, rewrite

REPO_ROOT = Path(__file__).resolve().parent.parent


def test_every_block_equals_what_its_record_renders_to():
    result = subprocess.run([sys.executable, "-m", "experiments.tools.readme_figures", "--check"], cwd=REPO_ROOT,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_record_says_where_and_how_it_was_measured():
    for block in BLOCKS.values():
        name = block.record_name
        record = json.loads((REPO_ROOT / "docs" / "figures" / f"{name}.json").read_text())
        assert record["block"] == name
        for measurement in record["measurements"]:
            assert measurement["commands"], (name, measurement["label"])
            if measurement["provenance"] == MEASURED_HERE:
                assert measurement["date"] and {"cpu", "cores", "torch", "load_average_start"} <= set(measurement["machine"])
            else:
                assert measurement["machine"]["description"], (name, measurement["label"])


@pytest.fixture
def documents(tmp_path) -> list[Path]:
    """A copy of every document that holds blocks, in the same folders."""
    copies = []
    for path in DOCUMENTS:
        copy = tmp_path / "repo" / path.relative_to(REPO_ROOT)
        copy.parent.mkdir(parents=True, exist_ok=True)
        if path.is_file():
            shutil.copy(path, copy)
        copies.append(copy)
    return copies


def _holding(documents: list[Path], name: str) -> Path:
    (path,) = [path for path in documents if path.is_file() and name in marked_blocks(path.read_text())]
    return path


def _plant(documents: list[Path], name: str, old: str, new: str) -> None:
    path = _holding(documents, name)
    text = path.read_text()
    block = marked_blocks(text)[name]
    assert old in block
    path.write_text(text.replace(block, block.replace(old, new, 1)))


def test_every_page_of_the_guide_is_a_document_the_tool_reads():
    guide = REPO_ROOT / "docs" / "book" / "guide"
    assert set(guide.glob("*.md")) <= set(DOCUMENTS)


def test_the_readme_holds_a_block_and_so_do_the_guide_pages():
    holders = {path.relative_to(REPO_ROOT).parts[0] for path in DOCUMENTS if path.is_file() and marked_blocks(path.read_text())}
    assert holders == {"README.md", "docs"}


def test_a_number_changed_by_hand_in_a_marked_block_is_caught_and_rendering_restores_it(documents):
    path = _holding(documents, "env-table")
    original = path.read_text()
    _plant(documents, "env-table", "200,000", "300,000")
    assert [line.split(":")[0] for line in check(documents)] == ["env-table"]
    rewrite(["env-table"], documents)
    assert path.read_text() == original
    assert check(documents) == []


def test_check_fails_from_the_command_line_on_a_planted_number(documents):
    _plant(documents, "seed-batch-rounding", "497.3", "499.3")
    result = subprocess.run([sys.executable, "-m", "experiments.tools.readme_figures", "--check", "--documents",
                             *map(str, documents)], cwd=REPO_ROOT, capture_output=True, text=True)
    assert result.returncode == 1
    assert result.stdout.startswith("seed-batch-rounding:")


def test_a_missing_marker_is_reported(documents):
    path = _holding(documents, "distributed")
    path.write_text(path.read_text().replace("<!-- /figures:distributed -->", "", 1))
    assert [line.split(":")[0] for line in check(documents)] == ["distributed"]
    assert check(documents)[0].startswith("distributed: no markers in ")


def test_a_block_found_in_two_documents_is_reported(documents):
    path = _holding(documents, "sb3-comparison")
    block = marked_pattern_text(path.read_text(), "sb3-comparison")
    readme = documents[0]
    readme.write_text(readme.read_text() + "\n" + block + "\n")
    assert [line for line in check(documents) if "one place" in line] == [
        f"sb3-comparison: markers in {readme.name} and {path.name}; a block lives in one place"]


def test_a_block_shared_by_a_record_is_re_rendered_with_it(documents, tmp_path):
    figures = tmp_path / "figures"
    shutil.copytree(REPO_ROOT / "docs" / "figures", figures)
    record = json.loads((figures / "minatar-ppo.json").read_text())
    record["measurements"][0]["date"] = "2000-01-02"
    (figures / "minatar-ppo.json").write_text(json.dumps(record))
    assert sorted(line.split(":")[0] for line in check(documents, figures)) == ["minatar-figure", "minatar-ppo"]
    rewrite(["minatar-figure", "minatar-ppo"], documents, figures)
    assert check(documents, figures) == []
    assert "on 2000-01-02" in marked_blocks(documents[0].read_text())["minatar-figure"]


def marked_pattern_text(text: str, name: str) -> str:
    return readme_figures.marked_pattern(name).search(text).group(0)


def test_a_changed_record_no_longer_matches_its_block(documents, tmp_path):
    figures = tmp_path / "figures"
    shutil.copytree(REPO_ROOT / "docs" / "figures", figures)
    record = json.loads((figures / "sb3-comparison.json").read_text())
    for row in record["measurements"][0]["results"]["rows"]:
        row["command_seconds"] *= 2  # every median doubles
    (figures / "sb3-comparison.json").write_text(json.dumps(record))
    assert [line.split(":")[0] for line in check(documents, figures)] == ["sb3-comparison"]


def _measured(label: str, results: dict) -> dict:
    machine = {"cpu": "Test CPU", "cores": 2, "torch": "9.9", "load_average_start": 0.5, "load_average_end": 3.0}
    return {"label": label, "provenance": MEASURED_HERE, "date": "2000-01-02", "machine": machine,
            "commands": ["cmd"], "results": results}


def test_command_figures_are_medians_and_counts_of_the_rows():
    rows = [{"seed": 201, "command_seconds": 3.0, "seconds_to_solved": 1.0, "eval_mean": 500.0},
            {"seed": 202, "command_seconds": 5.0, "seconds_to_solved": 2.0, "eval_mean": 470.0},
            {"seed": 203, "command_seconds": 4.0, "seconds_to_solved": 4.0, "eval_mean": 498.6}]
    text = readme_figures.render_cartpole_command({"measurements": [_measured("ppo-train", {"rows": rows})]})
    assert "over 3 seeds never used for tuning (201–203)" in text
    assert "on 2000-01-02 on a 2-core Test CPU (torch 9.9; load average 0.5 at the start, 3.0 at the end)" in text
    assert "a median 4.0 s (3.0–5.0)" in text and "after a median 2.0 s of training" in text
    assert text.endswith("2 of 3 evaluated ≥ 475 (1 at 500, the others 470.0 and 498.6")


def test_env_table_rows_count_successes_and_say_where_each_was_measured():
    earlier = {"label": "Acrobot-v1", "provenance": EARLIER, "date": None, "machine": {"description": "a 2-core CPU"},
               "commands": ["cmd"], "results": {"steps": 500000, "threshold": -100.0, "zoo": "z",
                                                "per_seed": [{"seed": 201, "eval_mean": -80.0}], "median_train_s": 45.9,
                                                "median_steps_per_s": 10894}}
    measured = _measured("CartPole-v1", {"steps": 100000, "threshold": 475.0, "zoo": "y", "per_seed": [
        {"seed": s, "eval_mean": e, "train_wall_s": t, "steps_per_s": r}
        for s, e, t, r in ((201, 500.0, 2.0, 100.0), (202, 474.9, 6.0, 300.0), (203, 480.0, 4.0, 200.0))]})
    text = readme_figures.render_env_table({"measurements": [measured, earlier]})
    assert "| CartPole-v1 | 100,000 | 2/3 (≥ 475) | 500.0, 474.9, 480.0 (seeds 201–203) | 4.0 | 200 | y |" in text
    assert "| Acrobot-v1 | 500,000 | 1/1 (≥ -100) | -80.0 (seed 201) | 45.9 | 10,894 | z |" in text
    assert "Acrobot-v1 on a 2-core CPU in an earlier version (no date recorded), not re-run." in text


def test_seed_batch_table_ratio_is_sequential_over_batched():
    rows = [{"seeds": 64, "batched_s": 80.0, "sequential_s": 120.0, "sequential_timed": 16}]
    text = readme_figures.render_seed_batch_table({"measurements": [_measured("benchmark_seeds", {"rows": rows})]})
    assert "| 64 | 80.0 s | 120.0 s (16 timed, scaled) | 1.50 |" in text


def test_blocks_without_a_measuring_function_are_refused_in_one_line(capsys, monkeypatch):
    unmeasured = readme_figures.Block("recorded-only", readme_figures.render_recorded_text, None, "text")
    monkeypatch.setitem(BLOCKS, "recorded-only", unmeasured)
    with pytest.raises(SystemExit) as exit_info:
        readme_figures.main(["recorded-only"])
    assert exit_info.value.code == 2
    assert "no measuring function" in capsys.readouterr().err


def test_distributed_speedup_is_the_median_of_per_seed_ratios():
    runs = []
    for setting in ("env-bound", "update-bound"):
        for seed, one, two in ((1, 1000.0, 1500.0), (2, 3000.0, 3300.0)):  # ratios 1.5 and 1.1: median 1.3
            runs.append({"setting": setting, "seed": seed, "processes": 1, "steps_per_second": one,
                         "seconds_to_475": float(seed), "eval": 500.0})
            runs.append({"setting": setting, "seed": seed, "processes": 2, "steps_per_second": two,
                         "seconds_to_475": float("nan") if seed == 2 else 3.0, "eval": 400.0 if seed == 2 else 480.0})
    notes = {"label": "notes", "provenance": EARLIER, "date": None, "machine": {"description": "m"}, "commands": ["c"],
             "results": {"text": "Notes {where}."}}
    text = readme_figures.render_distributed({"measurements": [_measured("benchmark_distributed", {"runs": runs}), notes]})
    assert "| CartPole-v1, seeds 1–2 | 1 process | 2 processes | speed-up |" in text
    assert "| env-bound: gymnasium, 512 envs × 64 steps | 2,000 steps/s | 2,400 steps/s | 1.30× (65 % efficiency) |" in text
    assert ("| update-bound: torch preset, 64 envs × 32 steps | 2,000 steps/s, 475 after 1.5 s | 2,400 steps/s, 475 after "
            "3.0 s | 1.30× |") in text
    assert "on 2 of 2 seeds with 1 process and on 1 of 2 with 2. Notes on m in an earlier version (no date recorded), not re-run." in text


def _final(gold: float, proxy: float, kl: float, text: str, share: float, top_gold: float) -> dict:
    return {"gold": gold, "proxy": proxy, "kl": kl, "most_frequent": f"{text!r} {share:.0%}", "top_text": text,
            "top_share": share, "top_gold": top_gold}


def _overoptimization_run(finals: dict) -> dict:
    return {"argv": [], "default_beta": 0.15, "gold_sft": 0.412, "proxy_sft": 0.731,
            "food_scores": {"lettuce": 2.71, "soda": -1.2}, "cpu_seconds": 77.4, "wall_seconds": 80.0, "final": finals}


def test_overoptimization_paragraph_is_written_from_the_record():
    seed1 = {"0.0": _final(-0.411, 3.104, 41.27, "lxxxxe", 0.93, -0.5),
             "0.001": _final(-0.45, 2.9, 30.12, "lexxe", 0.8, -0.5),
             "0.002": _final(-0.44, 2.8, 29.94, "lexxe", 0.8, -0.5),
             "0.005": _final(-0.3, 2.5, 12.34, "letxe", 0.6, -0.5),
             "0.01": _final(0.987, 2.6, 3.21, "lettuce", 0.95, 1.0),
             "0.15": _final(0.965, 2.5, 2.87, "lettuce", 0.9, 1.0)}
    beta0 = {"0.0": _final(0.7, 2.0, 5.0, "salad", 0.6, 0.9), "0.15": _final(0.9, 2.1, 2.0, "lettuce", 0.9, 1.0)}
    hacked = {"0.0": _final(-0.5, 3.0, 40.0, "lxxe", 0.9, -0.5), "0.15": _final(0.9, 2.1, 2.0, "lettuce", 0.9, 1.0)}
    record = {"measurements": [_measured("overoptimization", {"runs": {
        "1": _overoptimization_run(seed1), "2": _overoptimization_run(beta0), "3": _overoptimization_run(hacked)}})]}
    text = readme_figures.render_overoptimization(record)
    assert text.startswith("One machine's run, from the record `docs/figures/overoptimization.json`, measured on "
                           "2000-01-02 on a 2-core Test CPU")
    assert "seed 1's sweep took 77 s of one core." in text
    assert '"lxxxxe" (93% of fresh samples): proxy +3.104 (lettuce: +2.71), gold −0.411'.replace("−", "-") in text
    assert "KL 41.27 nats (SFT model: gold +0.412, proxy +0.731)" in text
    assert 'β = 0.001 to 0.002 ended at "lexxe" (KL 29.9–30.1, gold -0.450 to -0.440)' in text
    assert 'β = 0.005 ended at "letxe" (KL 12.3, gold -0.300)' in text
    assert "β = 0.01 and above ended at lettuce (gold +0.987 at 0.01, KL 3.21; +0.965 at 0.15, KL 2.87)" in text
    assert text.endswith("Over seeds 1, 2 and 3 (`--betas 0 --seed N` runs β = 0 next to the default β = 0.15), β = 0 "
                         "found such a string (one that is no food: the healthiness rule scores it as malformed) on "
                         "seeds 1 and 3, not on 2; the default β ended at a food on 3 of 3 (KL 2.00–2.87).")
    for seed, finals in (("2", beta0), ("3", hacked)):
        record["measurements"][0]["results"]["runs"][seed] = _overoptimization_run(
            {**finals, "0.0": _final(-0.5, 3.0, 40.0, "lxxe", 0.9, -0.5)})
    assert ("scores it as malformed) on every seed tried (1, 2 and 3);"
            in readme_figures.render_overoptimization(record))


def test_a_hacked_string_is_one_the_healthiness_rule_calls_malformed():
    from experiments.tools.readme_figures import _first_completion

    assert _first_completion("'lttttte' 97%, 'letttte' 2%") == ("lttttte", True, 0.97)
    assert _first_completion("'lettu…' 5%") == ("lettu", False, 0.05)
    assert readme_figures.is_hacked(_final(0.0, 0.0, 0.0, "lttttte", 0.9, -0.5))
    assert not readme_figures.is_hacked(_final(0.0, 0.0, 0.0, "soda", 0.9, 0.0))


def test_seed_batch_rounding_is_written_from_the_distances_and_evaluations_of_the_record():
    default = [{"seed": 1, "max_abs_distance": [0.0, 1e-6, 1e-3, 2e-3, 0.2, 0.3], "max_abs_theta": [1.0, 1.93],
                "gradient_steps_batch": [40] * 6, "gradient_steps_single": [40] * 6,
                "eval_batch": 500.0, "eval_single": 497.3},
               {"seed": 2, "max_abs_distance": [0.0, 5e-6, 3e-3, 4e-3, 0.4, 0.5], "max_abs_theta": [1.2],
                "gradient_steps_batch": [40] * 6, "gradient_steps_single": [40] * 6,
                "eval_batch": 480.5, "eval_single": 500.0}]
    early = [{**default[0], "gradient_steps_batch": [40, 40, 12, 40], "gradient_steps_single": [40, 40, 12, 30]},
             {**default[1], "gradient_steps_batch": [40, 20, 40, 40], "gradient_steps_single": [40, 21, 40, 40]}]
    text = readme_figures.render_seed_batch_rounding({"measurements": [
        _measured("default", {"seeds": default}), _measured("target_kl", {"seeds": early})]})
    assert "(seeds 1–2, 6 iterations, measured on 2000-01-02" in text
    assert "stays ≤ 1e-5 for the first 2 iterations on every seed" in text
    assert "is 2.0e-03 to 4.0e-03 after iteration 4 and 3.0e-01 to 5.0e-01 at the end (weights up to 1.9)" in text
    assert "batched / alone: 500 / 497.3, 480.5 / 500." in text
    assert "(3 iterations of the single runs stop early" in text
    assert "match for the first 3 and 1 iterations on seeds 1 and 2 before the runs part" in text
    assert text.endswith("(evaluations 500 / 497.3, 480.5 / 500)")


def test_recurrent_paragraph_counts_seeds_over_the_bar_and_divides_the_medians():
    def row(env_id, trainer, seed, steps, seconds, mean_return):
        return {"env_id": env_id, "trainer": trainer, "seed": seed, "steps": steps, "seconds": seconds,
                "mean_return": mean_return}

    rows = [row("CartPoleNoVel-v1", "library", 301, 200_000, 20.0, 500.0),
            row("CartPoleNoVel-v1", "library", 301, 100_000, 11.0, 400.0),
            row("CartPoleNoVel-v1", "sb3-contrib", 301, 100_000, 600.0, 500.0),
            row("CartPoleNoVel-v1", "library", 302, 200_000, 40.0, 474.9),
            row("CartPoleNoVel-v1", "library", 303, 200_000, 30.0, 475.0),
            row("PendulumNoVel-v1", "library", 301, 200_000, 90.0, -250.0),
            row("PendulumNoVel-v1", "sb3-contrib", 301, 100_000, 450.0, -218.0),
            row("PendulumNoVel-v1", "library", 302, 200_000, 110.0, -250.1)]
    text = readme_figures.render_recurrent_zoo({"measurements": [
        _measured(env_id, {"rows": [row for row in rows if row["env_id"] == env_id]})
        for env_id in ("CartPoleNoVel-v1", "PendulumNoVel-v1")]})
    assert text.startswith("Measured on 2000-01-02 on a 2-core Test CPU") and text.count("Measured") == 1
    assert ("`CartPoleNoVel-v1` with its preset (200,000 steps) evaluated ≥ 475 on 2 of 3 seeds never used for "
            "tuning (301–303: 500.0, 474.9, 475.0), the whole command a median 30.0 s (at the zoo's 100,000 steps, "
            "seed 301: 400.0 in 11.0 s); sb3-contrib's RecurrentPPO with the zoo's settings (100,000 steps, seed 301) "
            "took 600 s and evaluated 500.0: 20.0× the preset's time") in text
    assert "evaluated ≥ -250 on 1 of 2 seeds" in text and "median 100.0 s" in text and ": 4.5× the preset's time." in text
    assert text.endswith("The memory work's goals: `CartPoleNoVel-v1` ≥ 475 on 9 of 10 seeds (not met: 2 of 3) in a "
                         "twentieth of sb3-contrib's time (met: 20.0×); `PendulumNoVel-v1` ≥ -250 on 4 of 5 seeds (not "
                         "met: 1 of 2) in a twentieth of sb3-contrib's time (not met: 4.5×).")


def test_recurrent_zoo_re_measures_only_the_envs_asked_for_and_says_where_each_was_measured(tmp_path, monkeypatch):
    """`recurrent-zoo --envs CartPoleNoVel-v1` keeps PendulumNoVel-v1's measurement as recorded; the paragraph
    then names each measurement's own machine and date."""
    from experiments.benchmarks import recurrent_zoo as benchmark_recurrent_zoo

    def row(env_id, trainer, seed, steps, seconds, mean_return):
        return {"env_id": env_id, "trainer": trainer, "seed": seed, "steps": steps, "seconds": seconds,
                "mean_return": mean_return}

    pendulum = _measured("PendulumNoVel-v1", {"rows": [row("PendulumNoVel-v1", "library", 301, 200_000, 90.0, -200.0),
                                                        row("PendulumNoVel-v1", "sb3-contrib", 301, 100_000, 450.0,
                                                            -218.0)]})
    old_cartpole = _measured("CartPoleNoVel-v1", {"rows": []})
    (tmp_path / "recurrent-zoo.json").write_text(json.dumps({"block": "recurrent-zoo",
                                                            "measurements": [old_cartpole, pendulum]}))
    asked = []

    def fake_benchmark(env_ids, seeds, sb3_seeds, same_steps):
        asked.append((env_ids, seeds, sb3_seeds, same_steps))
        return [row(env_ids[0], "library", seed, 300_000, 10.0, 500.0) for seed in seeds] + [
            row(env_ids[0], "sb3-contrib", sb3_seeds[0], 100_000, 250.0, 300.0)]

    monkeypatch.setattr(benchmark_recurrent_zoo, "benchmark", fake_benchmark)
    record = readme_figures.measure_recurrent_zoo(argparse.Namespace(envs=["CartPoleNoVel-v1"],
                                                                     figures_dir=tmp_path))
    assert asked == [(["CartPoleNoVel-v1"], list(range(501, 511)), [501], True)]
    assert [measurement["label"] for measurement in record["measurements"]] == ["CartPoleNoVel-v1",
                                                                                "PendulumNoVel-v1"]
    assert record["measurements"][1] == pendulum and record["measurements"][0]["date"] != "2000-01-02"
    text = readme_figures.render_recurrent_zoo(record)
    assert text.count("Measured on") == 2 and "Measured on 2000-01-02 on a 2-core Test CPU" in text
    assert "evaluated ≥ 475 on 10 of 10 seeds never used for tuning" in text and "25.0× the preset's time" in text


def test_the_recurrent_benchmark_refuses_an_unknown_env_in_one_line(capsys):
    from experiments.benchmarks import recurrent_zoo as benchmark_recurrent_zoo

    with pytest.raises(SystemExit) as exit_info:
        benchmark_recurrent_zoo.main(["--env-id", "CartPole-v1"])
    error = capsys.readouterr().err
    assert exit_info.value.code == 2 and error.count("\n") == 1 and "'CartPole-v1'" in error


def test_minatar_paragraph_counts_seeds_at_the_published_figure_and_the_first_step_that_reached_it():
    def row(env_id, seed, greedy, seconds, curve):
        return {"env_id": env_id, "seed": seed, "steps": 1_000_000, "train_seconds": seconds, "greedy_mean": greedy,
                "eval_max_episode_steps": 1_000, "curve": curve}

    million = 1_000_000
    rows = [row("MinAtar/Breakout-v1", 101, 28.0, 600.0, [(million, 10.0, 5.0), (2 * million, 20.0, 29.0),
                                                           (3 * million, 30.0, 40.0)]),
            row("MinAtar/Breakout-v1", 102, 27.9, 1200.0, [(million, 10.0, 5.0), (2 * million, 20.0, 10.0),
                                                            (3 * million, 60.0, 28.0)]),
            row("MinAtar/Breakout-v1", 103, 40.0, 900.0, [(million, 10.0, None), (2 * million, 20.0, 27.0),
                                                           (4 * million, 120.0, 30.0)]),
            row("MinAtar/SpaceInvaders-v1", 101, 100.0, 60.0, [(million, 10.0, 5.0), (2 * million, 20.0, 130.9)])]
    published = {"MinAtar/Breakout-v1": {"source": "pub", "steps": 10_000_000, "return": 28.0},
                 "MinAtar/SpaceInvaders-v1": {"source": "pub", "steps": 10_000_000, "return": 131.0}}
    text = readme_figures.render_minatar_ppo({"measurements": [_measured("minatar-ppo",
                                                                         {"rows": rows, "published": published})]})
    assert text.startswith("Measured on 2000-01-02 on a 2-core Test CPU")
    assert "greedy means over 100 episodes (sticky actions on, each episode at most 1,000 steps)" in text
    assert ("`MinAtar/Breakout-v1`: 28.0, 27.9, 40.0 (mean 32.0; seeds 101, 102, 103), at or above the pub figure of "
            "28 at 10M steps on 2 of 3 seeds; each run 1,000,000 steps in a median 15 min of training on one thread; "
            "the mean of its last 20 training episodes (sampled actions, no step limit) first reached 28 after a median of 3.0M steps and 1 min on "
            "the 3 seeds that reached it") in text
    assert ("`MinAtar/SpaceInvaders-v1`: 100.0 (mean 100.0; seeds 101), at or above the pub figure of 131 at 10M "
            "steps on 0 of 1 seeds; each run 1,000,000 steps in a median 1 min of training on one thread; the mean "
            "of its last 20 training episodes (sampled actions, no step limit) never reached 131.") in text


def test_a_measurement_names_the_share_of_cpu_time_a_virtual_machines_host_took():
    """Steal between the two /proc/stat readings of a measurement, over all CPU time between them."""
    assert readme_figures.steal_share({"total": 1000, "steal": 10}, {"total": 2000, "steal": 210}) == 0.2
    assert readme_figures.steal_share(None, {"total": 2000, "steal": 210}) is None
    assert readme_figures.steal_share({"total": 2000, "steal": 0}, {"total": 2000, "steal": 0}) is None
    stolen = _measured("x", {})
    stolen["machine"]["steal_share"] = 0.2
    assert readme_figures.describe_where(stolen).endswith(
        "3.0 at the end; the virtual machine's host took 20% of its CPU time, so times are inflated)")
    stolen["machine"]["steal_share"] = 0.01
    assert readme_figures.describe_where(stolen).endswith("3.0 at the end)")
    stolen["machine"]["torch_cpu_capability"] = "AVX2"
    assert "a 2-core Test CPU (torch 9.9, AVX2 kernels; load average" in readme_figures.describe_where(stolen)
    reading = readme_figures.cpu_times()
    assert reading is None or 0 <= reading["steal"] <= reading["total"]
