"""Shared command-line plumbing: dataclass fields as flags, user errors as one line, process settings.

Every field of a config dataclass becomes a flag (`learning_rate` → `--learning-rate`)
whose help text is the field's documentation. Flags the user did not give are absent
from the parsed namespace, so presets can fill them in before the dataclass defaults.
Every command builds its parser this way and runs its body under `run_with_user_errors`.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import signal
import sys
import typing
from pathlib import Path
from typing import Callable, NoReturn

import torch

from envs.factory import EnvError
from experiments.commands.flag_values import int_list_item, join_negative_values
from ppo.trainers.base import TrainingDiverged
from ppo.runs.checkpoint import CheckpointError, prove_writable
from ppo.config import EMPTY_PATH, ConfigError, field_help, require_threads
from ppo.parallel.distributed import PeerFailure
from ppo.parallel.malloc import keep_freed_memory

USER_ERROR_EXIT_CODE = 2
INTERRUPTED_EXIT_CODE = 130  # 128 + SIGINT, what a shell reports for Ctrl-C
USER_ERRORS: tuple[type[BaseException], ...] = (ConfigError, CheckpointError, EnvError, TrainingDiverged)


LARGEST_INTEGER = 2**63 - 1  # what torch and numpy hold in an int64: every integer flag stays within ±this


def bounded_int(text: str) -> int:
    """int(text), refused (argparse's one line) beyond ±(2**63 − 1), where torch and numpy overflow."""
    value = int(text)
    if abs(value) > LARGEST_INTEGER:
        raise argparse.ArgumentTypeError(f"{text} is beyond what an integer setting holds (at most 2**63 - 1)")
    return value


bounded_int.__name__ = "int"  # argparse names the type in its errors: "invalid int value"


def nonempty_path(text: str) -> Path:
    """Path(text), refused for an empty text, which Path reads as the current folder."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} {EMPTY_PATH}")
    return Path(text)


class OneLineArgumentParser(argparse.ArgumentParser):
    """argparse, but a bad flag or value prints one line on stderr and exits with 2, and a flag
    is never taken from its prefix (`--learning-rat` is refused, not read as `--learning-rate`).
    An integer flag refuses values beyond ±(2**63 − 1) and a path flag an empty path."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **{"allow_abbrev": False, **kwargs})
        self.register("type", int, bounded_int)  # argparse converts through its registry: groups too
        self.register("type", Path, nonempty_path)

    def parse_known_args(self, args=None, namespace=None):
        args = sys.argv[1:] if args is None else list(args)
        return super().parse_known_args(join_negative_values(args, self), namespace)

    def error(self, message: str) -> NoReturn:
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(USER_ERROR_EXIT_CODE)


def _optional_float(text: str) -> float | None:
    if text.lower() in ("none", "off"):
        return None
    return float(text)


def _optional_int(text: str) -> int | None:
    if text.lower() in ("none", "off"):
        return None
    return bounded_int(text)


class SweepValues(list):
    """The values of a flag given as a comma list (`--learning-rate 1e-3,3e-3`): a sweep over them."""


def _comma_list(convert: Callable):
    """A flag type that reads one value, or a comma list of values as SweepValues."""

    def parse(text: str):
        if "," not in text:
            return convert(text)
        return SweepValues(convert(part.strip()) for part in text.split(","))

    parse.__name__ = getattr(convert, "__name__", "value")  # argparse names it in its errors
    return parse


def configure_process(num_threads: int) -> None:
    """Process-wide settings every training command makes before any work: torch's CPU
    thread count, and glibc's malloc kept from returning autograd's buffers (ppo.parallel.malloc)."""
    require_threads(num_threads)
    torch.set_num_threads(num_threads)
    keep_freed_memory()


def add_dataclass_flags(parser: argparse.ArgumentParser, cls, skip: tuple[str, ...] = (),
                        shown_defaults: dict | None = None, sweepable: bool = False) -> None:
    """One flag per field of dataclass `cls`, default shown in the help, value omitted
    from the namespace unless given. `shown_defaults` replaces the dataclass defaults in
    the help text (a command shows the values its preset will use). With `sweepable`,
    every number or text flag also takes a comma list (SweepValues: a sweep)."""
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        if field.name in skip:
            continue
        flag = "--" + field.name.replace("_", "-")
        hint = hints[field.name]
        default = field.default if field.default is not dataclasses.MISSING else field.default_factory()
        if shown_defaults and field.name in shown_defaults:
            default = shown_defaults[field.name]
        help_text = field_help(cls, field.name)
        kwargs: dict = {"dest": field.name, "default": argparse.SUPPRESS}
        if hint is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
            help_text += f" (default: {'on' if default else 'off'})"
        elif typing.get_origin(hint) is tuple:
            kwargs.update(type=int_list_item(flag, default), nargs="+", metavar="N")
            help_text += f" (default: {' '.join(map(str, default))})"
        elif hint == (float | None):
            kwargs.update(type=_optional_float, metavar="FLOAT|none")
            help_text += f" (default: {default if default is not None else 'none'})"
        elif hint == (int | None):
            kwargs.update(type=_optional_int, metavar="INT|none")
            help_text += f" (default: {default if default is not None else 'none'})"
        else:
            kwargs.update(type=bounded_int if hint is int else hint, metavar=hint.__name__.upper())
            help_text += f" (default: {default})"
        if sweepable and "type" in kwargs and "nargs" not in kwargs:
            kwargs["type"] = _comma_list(kwargs["type"])
        parser.add_argument(flag, help=help_text, **kwargs)


def given_flags(namespace: argparse.Namespace, cls) -> dict:
    """The fields of `cls` the user set on the command line."""
    names = {field.name for field in dataclasses.fields(cls)}
    values = {name: value for name, value in vars(namespace).items() if name in names}
    return {name: tuple(value) if type(value) is list else value for name, value in values.items()}


def run_with_user_errors(
    prog: str, body: Callable[[], int | None], errors: tuple[type[BaseException], ...] = USER_ERRORS
) -> int:
    """Call body(); a user error becomes `prog: error: ...` on stderr and exit code 2.

    A file-system error (a folder that cannot be written, a full disk) is reported the
    same way, in one line; Ctrl-C outside a training loop exits with 130. Under torchrun
    every process meets the same mistake in the same arguments: process 0 alone says so.
    """
    try:
        return body() or 0
    except errors as error:
        if int(os.environ.get("RANK", "0")) == 0:
            print(f"{prog}: error: {error}", file=sys.stderr)
        return USER_ERROR_EXIT_CODE
    except PeerFailure as error:  # not the user's mistake, but one line all the same
        print(f"{prog}: error: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        where = f" ({error.filename})" if error.filename else ""
        print(f"{prog}: error: {error.strerror or error}{where}", file=sys.stderr)
        return USER_ERROR_EXIT_CODE
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return INTERRUPTED_EXIT_CODE


def check_writable_folder(path: Path, what: str) -> Path:
    """Prove a file can be written in `path` (ppo.runs.checkpoint.prove_writable), then create it;
    ConfigError (one line) if not. Called before any training starts, so a bad output path costs
    no computation."""
    path = prove_writable(path, what)
    path.mkdir(parents=True, exist_ok=True)
    return path


def check_writable_file(path: Path, what: str) -> Path:
    """The folder of `path` is writable and `path` itself, if it exists, is a writable file."""
    path = Path(path)
    check_writable_folder(path.parent, f"the folder of {what}")
    if path.exists() and (path.is_dir() or not os.access(path, os.W_OK)):
        raise ConfigError(f"{what} {path} cannot be written ({'a folder' if path.is_dir() else 'read-only'})")
    return path


MODULES = {"ppo-train": "experiments.commands.train", "ppo-rlhf": "experiments.commands.rlhf"}


def resume_command(prog: str, world) -> str:
    """How to start the command again: itself, or under torchrun with as many processes."""
    if not world.distributed:
        return prog
    return f"torchrun --nproc-per-node {world.size} -m {MODULES[prog]}"


def train_stoppably(prog: str, trainer, run_dir: Path, world) -> int | None:
    """trainer.train() under GracefulStop. Returns the exit code when the command should end
    here — the run was stopped (checkpoint saved, resume command printed: 130), or this
    process is not process 0 (0), which writes and reports — and None when it goes on."""
    with GracefulStop(prog) as stop:
        trainer.train(callback=stop.callback)
    if not world.is_main:
        return INTERRUPTED_EXIT_CODE if stop.requested else 0
    if stop.requested or trainer.iteration < trainer.total_iterations:
        print(f"{prog}: stopped after iteration {trainer.iteration} of {trainer.total_iterations}; checkpoint saved. "
              f"Resume with: {resume_command(prog, world)} --resume {run_dir}", file=sys.stderr)
        return INTERRUPTED_EXIT_CODE
    return None


class GracefulStop:
    """SIGINT / SIGTERM ask a training loop to stop after the current iteration.

        with GracefulStop(PROG) as stop:
            trainer.train(callback=stop.callback)   # True once a signal came
        if stop.requested: ...                      # the loop saved its checkpoint; say how to resume

    The first signal only sets `requested`; a second Ctrl-C raises KeyboardInterrupt at
    once (a second SIGTERM ends the process), as a user who presses it twice expects.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, prog: str, what: str = "the current iteration"):
        self.prog, self.what = prog, what
        self.requested = False
        self._previous: dict = {}

    def _handle(self, signum, frame) -> None:
        self.requested = True
        for sig in self.SIGNALS:  # the next signal acts at once
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
        name = signal.Signals(signum).name
        print(f"\n{self.prog}: {name}: finishing {self.what}, then saving (Ctrl-C again to abort)",
              file=sys.stderr, flush=True)

    def callback(self, *_) -> bool:
        return self.requested

    def __enter__(self) -> "GracefulStop":
        for sig in self.SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
