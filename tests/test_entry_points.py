"""The console commands: every one in setup.cfg runs its module's main() and then freezes the collector."""

import configparser
import gc
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.commands import entry_points

ROOT = Path(__file__).resolve().parents[1]
COMMAND_MODULES = {"ppo-train": "train", "ppo-eval": "evaluate", "ppo-pretrain-lm": "pretrain_lm", "ppo-rlhf": "rlhf",
                   "ppo-dpo": "dpo", "ppo-plot": "plot", "ppo-diagnose": "diagnose"}


def console_scripts() -> dict[str, str]:
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    lines = parser["options.entry_points"]["console_scripts"].strip().splitlines()
    return dict(line.replace(" ", "").split("=") for line in lines)


def test_every_console_script_is_an_entry_point_running_its_commands_main():
    scripts = console_scripts()
    assert sorted(scripts) == sorted(COMMAND_MODULES)
    for name, target in scripts.items():
        module, _, function = target.partition(":")
        assert module == "experiments.commands.entry_points", name
        command = getattr(entry_points, function)
        assert command.__doc__.startswith(f"{command.module}.main()"), name
        assert command.module == f"experiments.commands.{COMMAND_MODULES[name]}", name
        assert callable(importlib.import_module(command.module).main), name
        assert entry_points.console_argv(name)[-1].endswith(f"sys.exit({function}())"), name
    with pytest.raises(ValueError, match="'command' is not one of the console commands"):
        entry_points.console_argv("command")


def test_an_entry_point_imports_with_the_collector_off_then_runs_main_and_freezes(monkeypatch):
    seen, kept = [], []
    module = importlib.import_module("experiments.commands.plot")

    def importing(name):
        seen.append(("import", name, gc.isenabled()))
        return module

    def main():
        seen.append(("main", gc.isenabled(), gc.get_freeze_count()))
        kept.append([[] for _ in range(1000)])  # objects main makes, which the collector tracks
        return 7

    monkeypatch.setattr(entry_points.importlib, "import_module", importing)
    monkeypatch.setattr(module, "main", main)
    gc.unfreeze()
    try:
        assert entry_points.ppo_plot() == 7
        (_, name, collecting), (_, collecting_in_main, frozen_in_main) = seen
        assert name == "experiments.commands.plot" and not collecting  # imported with the collector off
        assert collecting_in_main and frozen_in_main > 0  # what the import left is frozen; main collects
        assert gc.get_freeze_count() >= frozen_in_main + 1000  # what main made is frozen after it
        assert gc.isenabled()
    finally:
        gc.unfreeze()


@pytest.mark.parametrize("flags, code", [(["--help"], 0), (["--env-id", "NoSuchEnv-v0"], 2)])
def test_the_console_command_exits_with_mains_code(flags, code):
    finished = subprocess.run([sys.executable, "-c", "import sys; from experiments.commands.entry_points import"
                               " ppo_train; sys.argv[0] = 'ppo-train'; sys.exit(ppo_train())", *flags],
                              capture_output=True, text=True, cwd=ROOT)
    assert finished.returncode == code, finished.stderr
    if code:
        assert finished.stderr.count("\n") == 1 and "NoSuchEnv-v0" in finished.stderr
