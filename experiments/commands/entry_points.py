"""The console commands of setup.cfg (ppo-train, ppo-eval, …): each imports its module with the
garbage collector paused, runs its `main()` and leaves the interpreter's teardown to the
operating system.

Importing torch builds an object graph of about a million objects, and the collections that
its allocations set off go through all of it: on a 2-core EPYC, 0.23 s of ppo-train's 1.5 s of
imports were collections (three of them full ones, 0.16 s), which found next to nothing to free.
So the command's module is imported with the collector off, and then `gc.freeze()` moves what
the imports built into the collector's permanent generation: the command's own collections
then examine only the objects it makes (ppo-train on CartPole: 0.95× the wall time, 1.2 MiB
more peak memory, median of 10 pairs in turn).

A process that has imported torch spends about half a second at exit taking its object graph
apart (0.5–0.7 s on a 2-core EPYC: `python -c "import torch"` takes 1.8–2.3 s there, and 1.2–1.6 s
when the interpreter skips that work). The time goes to the final garbage collections and to
freeing the modules' reference cycles one object at a time, memory the operating system takes
back at once when the process ends. So once a command's `main()` has returned (every file it
wrote closed, every log flushed), `gc.freeze()` moves every live object into the collector's
permanent generation, which no collection examines, the one at exit included. Everything else
about the exit stays: atexit handlers run, standard output and error are flushed, objects whose
last reference goes are freed as usual. Only cycles are left for the OS to reclaim.

`main()` itself does not freeze: tests, lectures and notebooks call it in a process that goes on.
The benchmarks that time a whole command start it with `console_argv`, as its installed script runs,
or (experiments.benchmarks.breakdown, which times its phases from inside) import it with `import_main`.
"""

from __future__ import annotations

import gc
import importlib
import sys
from typing import Callable


def import_main(module: str) -> Callable[..., int]:
    """`module`'s main(), the module imported with the collector paused and what it built frozen."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return importlib.import_module(module).main
    finally:
        gc.freeze()
        if collecting:
            gc.enable()


def command(module: str) -> Callable[[], int]:
    """The console entry point of `module`: import_main, its main(), then gc.freeze(); returns main's exit code."""

    def run() -> int:
        exit_code = import_main(module)()
        gc.freeze()
        return exit_code

    run.module = module
    run.__doc__ = f"{module}.main(), then the exit without teardown (experiments.commands.entry_points)."
    return run


def console_argv(name: str) -> list[str]:
    """The argv that runs console command `name` ('ppo-train', …) with this Python as its installed script does."""
    function = name.replace("-", "_")
    if not hasattr(globals().get(function), "module"):  # made by `command`, not another name of this module
        raise ValueError(f"{name!r} is not one of the console commands")
    return [sys.executable, "-c", f"import sys; from {__name__} import {function}; sys.argv[0] = {name!r}; "
                                  f"sys.exit({function}())"]


ppo_train = command("experiments.commands.train")
ppo_eval = command("experiments.commands.evaluate")
ppo_pretrain_lm = command("experiments.commands.pretrain_lm")
ppo_rlhf = command("experiments.commands.rlhf")
ppo_dpo = command("experiments.commands.dpo")
ppo_plot = command("experiments.commands.plot")
ppo_diagnose = command("experiments.commands.diagnose")
