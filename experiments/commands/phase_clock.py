"""Where a trainer's time goes, timed by wrapping the methods that spend it: nothing else changes.

    clock = PhaseClock()
    instrument_trainer(clock, trainer)     # its rollout, forward pass, GAE, update, log, save, env steps
    trainer.train()
    clock.seconds                          # {"update": 2.6, "env step": 0.4, ...}

A phase entered inside another counts for itself alone: the rollout is charged its own
time less the env steps and forward passes it made. The wrappers are attributes of the one
trainer (and its envs) given, so other trainers of the class are untouched. Both
`experiments.benchmarks.breakdown` (a whole command) and `experiments.studies.iteration_profile`
(one iteration at a time, as lectures 11 and 16 use it) time their phases here.
"""

from __future__ import annotations

import time
from collections import defaultdict

# (the trainer's method, the phase it is charged to); the envs' step is the phase "env step"
TRAINER_PHASES = (("collect_rollout", "rest of rollout"), ("act", "policy forward"),
                  ("compute_advantages", "advantages"), ("update", "update"), ("log", "logging"),
                  ("save", "checkpoints"))
ENV_STEP = "env step"


class PhaseClock:
    """Seconds per phase; a phase entered inside another counts for itself alone (the outer one
    is charged only its own time)."""

    def __init__(self):
        self.seconds: dict[str, float] = defaultdict(float)
        self.stack: list[list] = []  # [phase, start, time spent in inner phases]

    def timed(self, phase: str, function):
        """`function`, its calls' time charged to `phase`."""
        def wrapper(*args, **kwargs):
            self.stack.append([phase, time.perf_counter(), 0.0])
            try:
                return function(*args, **kwargs)
            finally:
                name, started, inner = self.stack.pop()
                spent = time.perf_counter() - started
                self.seconds[name] += spent - inner
                if self.stack:
                    self.stack[-1][2] += spent
        return wrapper


def instrument_trainer(clock: PhaseClock, trainer, phases=TRAINER_PHASES) -> PhaseClock:
    """Wrap `trainer`'s methods named in `phases` and its envs' step (instance attributes, so
    only this object changes); returns `clock`."""
    for method, phase in phases:
        setattr(trainer, method, clock.timed(phase, getattr(trainer, method)))
    trainer.envs.step = clock.timed(ENV_STEP, trainer.envs.step)
    return clock
