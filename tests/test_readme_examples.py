"""The documents' examples run as written: the Python examples of the guide's Python API page,
each block on its own, in order; the README's Python example; and the commands of the README
and the guide, from `ppo-train` to `ppo-plot runs/`, in order in one fresh folder.

The documents are the README and the guide's pages (docs/book/guide/), in the order of the
guide's table of contents; a command shown on several of them counts once.
The Python blocks share one working folder, as a reader's session would: the first trains into
runs/cartpole-api, the next two train from a preset and a batch of seeds, the two after them load
runs/cartpole-api, the last trains and loads the language model.
The SFT model's cache goes to a temporary folder, so the test does not depend on (or
fill) the reader's cache; the small model there trains in seconds.
"""

import csv
import math
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from _tiny_lm import tiny_sft
from experiments.commands import plot, rlhf, train
from experiments.commands.cli import given_flags
from ppo.lm.trainers.rlhf_config import RLHFConfig

REPO_ROOT = Path(__file__).resolve().parents[1]
README = REPO_ROOT / "README.md"
GUIDE = REPO_ROOT / "docs" / "book" / "guide"
EXAMPLE_TIMEOUT_S = 600  # seconds of work each, but CI machines are slow and shared


def guide_pages() -> list[Path]:
    """The guide's index, then its pages in the order of its toctree."""
    index = (GUIDE / "index.md").read_text()
    toctree = re.search(r"```\{toctree\}\n(.*?)```", index, flags=re.DOTALL).group(1)
    names = [line.strip() for line in toctree.splitlines() if line.strip() and not line.startswith(":")]
    return [GUIDE / "index.md", *(GUIDE / f"{name}.md" for name in names)]


def documents() -> list[Path]:
    return [README, *guide_pages()]


def python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), flags=re.DOTALL)


def python_api_examples() -> list[str]:
    return python_blocks(GUIDE / "python-api.md")


def test_the_guide_lists_every_page_it_has():
    assert sorted(guide_pages()) == sorted(GUIDE.glob("*.md"))


def test_the_guide_has_a_python_api_page_with_examples():
    assert len(python_api_examples()) >= 4


def test_the_readme_links_only_to_files_that_exist():
    targets = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README.read_text())
    assert targets and [target for target in targets if not (REPO_ROOT / target).exists()] == []


@pytest.mark.slow  # full tier: README flows
def test_the_readme_python_example_runs(tmp_path: Path):
    environment = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    (example,) = python_blocks(README)
    result = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, env=environment,
                            capture_output=True, text=True, timeout=EXAMPLE_TIMEOUT_S)
    assert result.returncode == 0, f"the README's example failed:\n{example}\n{result.stderr[-3000:]}"
    assert (tmp_path / "runs" / "cartpole-readme" / "checkpoint.pt").is_file()


@pytest.mark.slow  # full tier: README flows
def test_the_python_api_examples_run(tmp_path: Path):
    environment = {**os.environ, "PPO_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(REPO_ROOT)}
    outputs = []
    for number, example in enumerate(python_api_examples(), start=1):
        result = subprocess.run([sys.executable, "-c", example], cwd=tmp_path, env=environment,
                                capture_output=True, text=True, timeout=EXAMPLE_TIMEOUT_S)
        assert result.returncode == 0, f"Python API example {number} failed:\n{example}\n{result.stderr[-3000:]}"
        outputs.append(result.stdout)
    trained, from_preset, batched, acted, evaluated, language_model = outputs
    assert "stopped after" in trained
    assert "64 envs × 32 steps, lr 0.005, backend auto" in from_preset and "after 20,480 steps" in from_preset
    assert "mean of the last 20 episodes per seed:" in batched
    assert all((tmp_path / "runs" / "cartpole-batch" / f"seed{seed}" / "checkpoint.pt").is_file() for seed in (1, 2, 3, 4))
    assert (tmp_path / "runs" / "cartpole-api" / "checkpoint.pt").is_file()
    assert "one greedy episode: return" in acted
    assert "greedy evaluation:" in evaluated
    assert "iteration 8:" in language_model and "samples:" in language_model and "KL to SFT" in language_model


# The README's commands as a newcomer types them, at budgets a test can afford: CartPole runs of one
# iteration, two evaluation episodes, seeds 1-2 where the README has more; language-model runs of two
# iterations on the tiny SFT model (whose context leaves room for 13 new tokens).
COMMANDS = {"ppo-train": train.main, "ppo-rlhf": rlhf.main, "ppo-plot": plot.main}
SMALL_BUDGET = {"ppo-train": ["--total-timesteps", "2048", "--eval-episodes", "2", "--no-progress"],
                "ppo-rlhf": ["--iterations", "2", "--batch-size", "32", "--eval-samples", "32", "--max-new-tokens",
                             "12", "--no-progress"],
                "ppo-plot": []}
SMALL_SEEDS = "1-2"
SMALL_REWARD_MODEL = ["--reward-model-steps", "5", "--reward-model-pairs", "64"]  # with ppo-rlhf --reward model


def readme_commands() -> list[list[str]]:
    """Every line of the documents' bash blocks that runs one of the project's commands, without its comment,
    in the order of the documents; a command shown twice counts once."""
    lines = [line.split("  #")[0].strip() for path in documents()
             for block in re.findall(r"```bash\n(.*?)```", path.read_text(), flags=re.DOTALL)
             for line in block.splitlines()]
    return [shlex.split(line) for line in dict.fromkeys(line for line in lines if line.startswith("ppo-"))]


def test_no_command_was_lost_when_the_readme_moved_into_the_guide():
    assert len(readme_commands()) >= 29  # the commands the README showed before the guide held most of them


def fine_tunings() -> list[list[str]]:
    """The README's `ppo-rlhf` examples that start a run."""
    return [command for command in readme_commands() if command[0] == "ppo-rlhf" and "--resume" not in command]


def newcomer_flow() -> list[list[str]]:
    """`ppo-train`, its seed batch and its sweep, `ppo-rlhf` and its first variant, then `ppo-plot runs/`
    (each `ppo-rlhf` run costs seconds in its exact optimum and figures: two stand for all)."""
    commands = readme_commands()
    trainings = [command for command in commands if command[0] == "ppo-train"
                 and (command == ["ppo-train"] or "--seeds" in command)]
    assert len(trainings) >= 3 and fine_tunings()[0] == ["ppo-rlhf"] and ["ppo-plot", "runs/"] in commands
    return [*trainings, *fine_tunings()[:2], ["ppo-plot", "runs/"]]


def test_every_ppo_rlhf_example_gets_a_folder_named_after_what_it_changes():
    names = []
    for _, *argv in fine_tunings():
        args = rlhf.build_parser().parse_args(argv)
        config = RLHFConfig(**given_flags(args, RLHFConfig)).validate()
        names.append(rlhf.run_folder_name(config, rlhf.task_from_flags(args).config))
    assert names[0] == "rlhf-pizza-rule__seed1" and len(set(names)) == len(names) >= 4, names
    assert "rlhf-pizza-rule__kltarget2__seed1" in names and "rlhf-pizza-model__seed1" in names
    assert "rlhf-pizza-rule__rloo__seed1" in names and "rlhf-two-choice__seed1" in names


def run_command(command: list[str], capsys) -> str:
    program, *argv = command
    argv = [SMALL_SEEDS if flag == "--seeds" else value for flag, value in zip(["", *argv], argv)]
    budget = [*SMALL_BUDGET[program], *(SMALL_REWARD_MODEL if "--reward" in argv else [])]
    exit_code = COMMANDS[program]([*argv, *budget])
    printed = capsys.readouterr()
    assert exit_code == 0, f"{shlex.join(command)} exited with {exit_code}:\n{printed.err[-3000:]}"
    return printed.out


@pytest.mark.slow  # full tier: README flows
def test_the_readme_commands_run_in_order_in_a_fresh_folder_and_ppo_plot_compares_them(tmp_path, monkeypatch,
                                                                                       capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PPO_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(rlhf, "load_or_pretrain_sft", lambda *args, **kwargs: tiny_sft())
    flow = newcomer_flow()
    printed = [run_command(command, capsys) for command in flow]

    runs = tmp_path / "runs"
    language_model_runs = sorted(path.name for path in runs.iterdir() if path.name.startswith("rlhf-"))
    assert len(language_model_runs) == sum(command[0] == "ppo-rlhf" for command in flow)  # one folder each
    assert not [name for name in language_model_runs if re.search(r"__\d+$", name)]  # named by what differs

    plain = "runs/CartPole-v1__budget2048__seed1"  # ppo-train, then seed 1 again in ppo-train --seeds
    assert [line for line in printed[-1].splitlines() if line.startswith("left out")] == [
        "left out, another kind of run (metrics.csv has no column episode_return_recent): "
        + ", ".join(f"runs/{name}" for name in language_model_runs),
        f"left out, an earlier run of a setting and seed run again (the latest counts): {plain} ({plain}__2 counts)"]
    sweep = next(command for command in flow if any("," in value for value in command))
    grid = math.prod(len(value.split(",")) for flag, value in zip(sweep, sweep[1:]) if "," in value and flag != "--seeds")
    with open(runs / "plots" / "aggregates.csv", newline="") as file:
        assert len(list(csv.DictReader(file))) == 1 + grid  # the preset's setting and the sweep's
    assert (runs / "plots" / "performance_profile.png").is_file()

    hint = next(line for output in printed for line in output.splitlines() if line.startswith("compare them: "))
    assert run_command(shlex.split(hint.removeprefix("compare them: ")), capsys)  # the sweep's own hint works too
