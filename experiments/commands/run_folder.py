"""One process per run folder: a run claims its folder atomically and holds it while it runs.

    with RunFolderClaims(PROG) as claims:                  # held until the block ends
        run_dir = claims.new_run(args.run_dir, Path("runs/CartPole-v1__seed1"))  # --run-dir, or __2, __3, ...
        run_dir = claims.resumed(args.resume)              # --resume: refused while its run is live
        folders = [claims.fresh(base) for base in bases]   # the members of a batch of seeds

The claim is the lock file LOCK_NAME inside the folder, held with flock(2) for the run's
whole life. A second command on the same folder finds it locked and is refused in one
line (RunFolderBusy). The kernel drops the lock when its process ends, however it ends,
so a folder left by a killed run is free: the next command takes it over and says so
(the lock file still names the killed process). A fresh folder name is taken with
os.mkdir, which fails when the folder exists: two commands never pick the same name.

Releasing a claim removes the lock file, then the folders the claim created if they are
still empty: a command refused after its claim (an env it cannot make) leaves nothing.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import math
import os
import sys
import time
from pathlib import Path
from typing import Callable

from envs.factory import resolve_backend, split_env_id
from experiments.commands.presets import PRESETS
from ppo.config import ConfigError, PPOConfig
from ppo.runs.checkpoint import CheckpointError, check_run_folder

LOCK_NAME = ".lock"
HOLDER_WAIT_S = 0.5  # how long a refused command waits to read the id of the process that beat it


class RunFolderBusy(ConfigError):
    """Another live process holds the run folder; one-line message."""


class RunFolderClaim:
    """A held run folder: `path`; `release()` (or leaving the `with` block) gives it up."""

    def __init__(self, path: Path, lock_fd: int, created: list[Path]):
        self.path = path
        self._lock_fd: int | None = lock_fd
        self._created = created  # folders this claim made, outermost first

    def release(self) -> None:
        """Remove the lock file while still holding it, unlock; remove the folders made that stayed empty."""
        if self._lock_fd is None:
            return
        with contextlib.suppress(FileNotFoundError):
            (self.path / LOCK_NAME).unlink()
        os.close(self._lock_fd)  # closing the last descriptor releases the flock
        self._lock_fd = None
        _remove_empty(self._created)

    def __enter__(self) -> "RunFolderClaim":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


# config fields that say how a run was carried out, not what was learned: runs that differ
# only in these are samples of one setting (experiments.commands.statistics groups them so)
NOT_A_SETTING = ("seed", "num_threads", "checkpoint_every", "tensorboard", "device")
NOT_IN_NAMES = (*NOT_A_SETTING, "env_id")  # the env id starts the name already
ABBREVIATIONS = {
    "learning_rate": "lr", "clip_coef": "clip", "update_epochs": "epochs", "num_minibatches": "minibatches",
    "num_envs": "envs", "num_steps": "steps", "total_timesteps": "budget", "ent_coef": "ent", "vf_coef": "vf",
    "gae_lambda": "lambda", "max_grad_norm": "maxgrad", "target_kl": "targetkl", "value_clip_coef": "vclip",
    "hidden_sizes": "net", "env_backend": "backend", "adam_eps": "eps", "anneal_lr": "anneal",
    "norm_adv": "normadv", "shared_network": "shared", "normalize_obs": "normobs", "normalize_reward": "normreward",
}


def format_value(value) -> str:
    """A value as a folder name shows it: the shorter of 0.003 and 3e-3, on/off, 64x64, inf."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if value is None:
        return "none"
    if isinstance(value, (tuple, list)):
        return "x".join(format_value(part) for part in value)
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)  # inf, -inf (nan is refused before a folder is named)
    if isinstance(value, float):
        positional = repr(value)
        mantissa, exponent = f"{value:e}".split("e")
        scientific = f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"
        return scientific if len(scientific) < len(positional) else positional.removesuffix(".0")
    return str(value).replace("/", "_")


def env_folder_name(env_id: str) -> str:
    """The env's part of a folder name: the registered id, without the MODULE of 'MODULE:ENV_ID'
    ('walkmod:RandomWalk-v0' → 'RandomWalk-v0'), '/' as '_' ('MinAtar/Breakout-v1' → 'MinAtar_Breakout-v1')."""
    return split_env_id(env_id)[1].replace("/", "_")


def named_fields(config: PPOConfig, defaults: PPOConfig, swept: list[str]) -> list[str]:
    """The fields a run folder's name shows: those swept and those that differ from the defaults."""
    ours, theirs = config.to_dict(), defaults.to_dict()
    return [name for name in ours if name not in NOT_IN_NAMES and (name in swept or ours[name] != theirs[name])]


def run_folder_name(config: PPOConfig, defaults: PPOConfig, swept: list[str] = (), preset: str | None = None,
                    processes: int = 1, algorithm: str = "clip", settings: dict | None = None) -> str:
    """`ENV__backendB__presetP__penalty__kltarget0.02__lr3e-3__clip0.1__seedN__procsK`: the env;
    its backend and preset where they are not the env's own; the algorithm when it is not
    PPO-Clip, with the settings of its own given; what differs from `defaults` (the config of
    the same env, backend and preset) and what is swept; the seed; the processes of a torchrun run."""
    own = [f"backend{config.env_backend}"] if config.env_backend != resolve_backend(config.env_id, "auto") else []
    if preset not in (None, "auto", config.env_id) and not (preset == "none" and config.env_id not in PRESETS):
        own.append(f"preset{format_value(preset)}")
    if algorithm != "clip":
        own.append(algorithm)
    own += [f"{name.replace('_', '')}{format_value(value)}" for name, value in sorted((settings or {}).items())]
    parts = [f"{ABBREVIATIONS.get(name, name.replace('_', ''))}{format_value(getattr(config, name))}"
             for name in named_fields(config, defaults, list(swept))]
    return "__".join([env_folder_name(config.env_id), *own, *parts, f"seed{config.seed}",
                      *([f"procs{processes}"] if processes > 1 else [])])


def require_run_folder(path: Path) -> Path:
    """`path`, a folder that exists; else a CheckpointError saying what it is instead."""
    if not path.is_dir():
        raise CheckpointError(f"run folder {path} {'is not a folder' if path.exists() else 'does not exist'}")
    return path


def claim_run_folder(path: Path, prog: str, create: bool = True, in_use_hint: str = "") -> RunFolderClaim:
    """Claim the folder `path` (made, with its parents, when `create`). RunFolderBusy if a live
    process holds it; CheckpointError if it must exist and does not; ConfigError if it cannot be written."""
    path = Path(path)
    if not create:
        require_run_folder(path)
    created = _make_folders(path) if create else []
    try:
        return RunFolderClaim(path, _lock(path, prog, in_use_hint), created)
    except BaseException:
        _remove_empty(created)
        raise


def claim_fresh_run_folder(base: Path, prog: str) -> RunFolderClaim:
    """Claim `base`, or `base__2`, `base__3`, ...: the first name no folder has yet, made with os.mkdir."""
    base = Path(base)
    parents = _make_folders(base.parent)
    number = 1
    while True:
        candidate = base if number == 1 else base.with_name(f"{base.name}__{number}")
        try:
            os.mkdir(candidate)
            break
        except FileExistsError:
            number += 1
        except FileNotFoundError:  # another command removed the parent it had made and left empty
            parents += _make_folders(base.parent)
        except OSError as error:
            _remove_empty(parents)
            raise _unwritable(candidate, error) from None
    created = [*parents, candidate]
    try:
        return RunFolderClaim(candidate, _lock(candidate, prog), created)
    except BaseException:
        _remove_empty(created)
        raise


class RunFolderClaims(contextlib.ExitStack):
    """The claims of one command, released together when its `with` block ends."""

    def __init__(self, prog: str):
        super().__init__()
        self.prog = prog

    def fresh(self, base: Path) -> Path:
        """claim_fresh_run_folder(base); returns the folder claimed."""
        return self.enter_context(claim_fresh_run_folder(base, self.prog)).path

    def new_run(self, given: Path | None, default: Path) -> Path:
        """The folder of a new run: --run-dir `given`, refused once it holds a checkpoint, or
        without one the first free name from `default`."""
        if given is None:
            return self.fresh(default)
        self.enter_context(claim_run_folder(given, self.prog, in_use_hint="choose another --run-dir"))
        check_run_folder(given, 0, resume_with=f"--resume {given}", instead="another --run-dir")
        return Path(given)

    def resumed(self, run_dir: Path) -> Path:
        """The folder of a run to resume: it must exist, and no live process may be training in it."""
        return self.enter_context(claim_run_folder(
            run_dir, self.prog, create=False, in_use_hint="let it finish, or stop it (Ctrl-C) before resuming")).path


@contextlib.contextmanager
def removed_if_refused(*folders: Path):
    """Inside the block a command may make `folders` (a cache folder it checks, say); if the block
    raises, those of them (and their parents) that did not exist before and are still empty are
    removed again: a refused command leaves nothing."""
    missing = []
    for folder in folders:
        for path in (Path(folder), *Path(folder).parents):
            if path.exists():
                break
            missing.append(path)
    try:
        yield
    except BaseException:
        for path in sorted(set(missing), key=lambda path: len(path.parts), reverse=True):  # innermost first
            with contextlib.suppress(OSError):
                path.rmdir()
        raise


def claim_on_process_zero(world, claim: Callable[[], Path]) -> Path:
    """Process 0 calls `claim()`; every process returns the folder it claimed, or raises the
    same one-line error, so that no process waits for one that gave up."""
    outcome: Path | ConfigError | CheckpointError | None = None
    if world.is_main:
        try:
            outcome = claim()
        except (ConfigError, CheckpointError) as error:
            outcome = error
    outcome = world.gather(outcome)[0]
    if isinstance(outcome, Exception):
        raise outcome
    return Path(outcome)


def _make_folders(path: Path) -> list[Path]:
    """mkdir -p `path`; the folders it made, outermost first. ConfigError if it cannot."""
    missing = []
    for folder in (path, *path.parents):
        if folder.is_dir():
            break
        missing.append(folder)
    made = []
    for folder in reversed(missing):
        try:
            os.mkdir(folder)
        except FileExistsError:
            if not folder.is_dir():
                _remove_empty(made)
                raise _unwritable(path, OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))) from None
            continue  # made by another process meanwhile: not ours to remove
        except OSError as error:
            _remove_empty(made)
            raise _unwritable(path, error) from None
        made.append(folder)
    return made


def _remove_empty(folders: list[Path]) -> None:
    """rmdir each of `folders` (outermost first) that is empty, innermost first."""
    for folder in reversed(folders):
        with contextlib.suppress(OSError):
            folder.rmdir()


def _unwritable(path: Path, error: OSError) -> ConfigError:
    return ConfigError(f"run_dir {path} cannot be written ({error.strerror or error})")


def _lock(folder: Path, prog: str, in_use_hint: str = "") -> int:
    """The descriptor of folder/LOCK_NAME, flock-ed by this process, with this process's id in it."""
    path = folder / LOCK_NAME
    while True:
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as error:
            raise _unwritable(folder, error) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            who = f"process {holder}" if holder else "another process"
            raise RunFolderBusy(f"run folder {folder} is in use by {who}, which is still running there"
                                + (f"; {in_use_hint}" if in_use_hint else "")) from None
        if _same_file(fd, path):
            break
        os.close(fd)  # its holder removed that file on release before we locked it: lock the new one
    previous = _recorded_pid(fd)
    if previous and previous != os.getpid():
        print(f"{prog}: taking over run folder {folder}: process {previous}, which held it, is gone", file=sys.stderr)
    record = f"{os.getpid()}\n".encode()
    try:
        os.pwrite(fd, record, 0)  # over the old id, then cut to length: the file is never empty
        os.ftruncate(fd, len(record))
    except OSError as error:  # a full disk: give the claim up, as release() does
        with contextlib.suppress(OSError):
            path.unlink()
        os.close(fd)
        raise _unwritable(folder, error) from None
    return fd


def _holder(fd: int) -> int | None:
    """The id of the live process that holds the lock on `fd`'s file. A winner writes its id just
    after it locks, so while the file names no live process, read again for a moment."""
    deadline = time.monotonic() + HOLDER_WAIT_S
    while True:
        pid = _recorded_pid(fd)
        if pid is not None and _alive(pid):
            return pid
        if time.monotonic() > deadline:
            return None
        time.sleep(0.005)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def _same_file(fd: int, path: Path) -> bool:
    try:
        ours, theirs = os.fstat(fd), os.stat(path)
    except FileNotFoundError:
        return False
    return (ours.st_dev, ours.st_ino) == (theirs.st_dev, theirs.st_ino)


def _recorded_pid(fd: int) -> int | None:
    try:
        return int(os.pread(fd, 32, 0).decode().strip())
    except (OSError, ValueError, UnicodeDecodeError):
        return None
