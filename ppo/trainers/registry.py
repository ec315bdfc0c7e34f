"""The algorithms `ppo-train --algorithm` offers, by name: each registers itself where it is defined.

    @register_algorithm("dual-clip", "PPO-Clip whose objective is bounded below by c·Â where Â < 0")
    class DualClipPPO(PPO):
        settings = {"dual_clip": Setting(3.0, "c of the lower bound c·Â", above=1.0)}

One decoration is the whole registration: the command line's `--algorithm` choices and
help, each setting's flag, the refusal of a setting given to another algorithm and the
run folder's name all read `ALGORITHMS` (ppo.trainers.choice, experiments.commands.train),
and a checkpoint names its trainer class, which `TRAINERS` finds again on resume. The class
keeps its name as `algorithm_name` (a subclass inherits it), which the trainer gives the config
for the settings that take effect only with some algorithms (PPOConfig.no_effect).
"""

from __future__ import annotations

ALGORITHMS: dict[str, type] = {}  # --algorithm name → trainer class, in the order they registered
SUMMARIES: dict[str, str] = {}  # --algorithm name → what it is, in a line (the flag's help)
TRAINERS: dict[str, type] = {}  # class name → trainer class: what a checkpoint's record names


def register_algorithm(name: str, summary: str):
    """Decorate a trainer class (a subclass of ppo.trainers.ppo.PPO) to offer it as `--algorithm NAME`."""
    def register(trainer: type) -> type:
        if name in ALGORITHMS and ALGORITHMS[name] is not trainer:
            raise ValueError(f"algorithm {name!r} is registered already, by {ALGORITHMS[name].__name__}")
        ALGORITHMS[name], SUMMARIES[name] = trainer, summary
        trainer.algorithm_name = name
        register_trainer(trainer)
        return trainer

    return register


def register_trainer(trainer: type) -> type:
    """Let `resume_run` continue checkpoints written by `trainer` (registered algorithms are already)."""
    TRAINERS[trainer.__name__] = trainer
    return trainer
