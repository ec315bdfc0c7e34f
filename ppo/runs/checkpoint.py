"""Checkpoints that survive a crash mid-write, detect corruption, and load without unpickling code.

A checkpoint is a plain dict of tensors, numbers, strings, lists and dicts written by
`torch.save`, so the first thing every PyTorch user tries opens it:

    state = torch.load("runs/CartPole-v1__seed1/checkpoint.pt", weights_only=True)

and loading a file never runs code that someone put in it. The dict carries its own
checksum, the sha256 of its contents (every key, number, string and tensor byte, in
order; `content_digest`), under the key "sha256"; `load_checkpoint` recomputes it, so
one flipped byte that changes anything the file holds is caught (`CheckpointError`),
and a flip that makes the file unreadable is reported the same way.

It is written to a temporary file in the same folder and moved over the old one with
`os.replace`, an atomic rename: a crash during the write leaves the previous
checkpoint intact, and the temporary file is removed at the next save into that folder
(`remove_stale_temporaries`). A Ctrl-C (SIGINT) or SIGTERM that comes during the write is
held until the new file is in place and then acts as it would have (`signals_held`), so
pressing Ctrl-C twice never costs the checkpoint being saved. A write that fails (a full disk, a quota, a read-only
folder) raises WriteFailed, one line naming the file and what is kept. The file's
permissions follow the umask, like any file the process creates. Older files still load: format 2 (a header "PPO-CHECKPOINT-2 ",
the sha256 of the torch payload in hex and a newline, then the payload) and format 1
(a bare torch.save, no checksum).

Run folders. Every writer of a checkpoint obeys one rule, `check_run_folder`, before it
writes its first file into a run folder: a new run never goes into a folder that holds
a run (its checkpoint.pt), and a resumed run's log (metrics.csv) holds every iteration
its checkpoint has done. A checkpoint knows the kind of run it belongs to
(`checkpoint_kind`: ppo-train, ppo-rlhf, ppo-dpo or an SFT model of ppo-pretrain-lm),
so a command asked to resume or to overwrite another kind's file says so
(`load_checkpoint(kind=...)`, `check_checkpoint_target`).
"""

from __future__ import annotations

import contextlib
import csv
import errno
import hashlib
import io
import os
import signal
import struct
import tempfile
import threading
import warnings
from pathlib import Path

import torch

from ppo.config import ConfigError

CHECKPOINT_FORMAT = 3
CHECKPOINT_NAME = "checkpoint.pt"  # a run folder's checkpoint
LOG_NAME = "metrics.csv"  # a run folder's log: one row per iteration
CHECKSUM_KEY = "sha256"
FORMAT_2_MAGIC = b"PPO-CHECKPOINT-2 "  # format 2's header: magic, 64 hex digits of sha256, "\n"
_DIGEST_LENGTH = 64  # hex digits of a sha256
TEMPORARY_SUFFIX = ".tmp"


class CheckpointError(Exception):
    """A checkpoint that is missing, corrupt or does not match; one-line message."""


class WriteFailed(CheckpointError, OSError):
    """A file of a run could not be written (a full disk, a quota, a read-only folder); one-line
    message naming the file, why, and what is kept. `path`, `reason`: the file and the OS's words.
    An OSError too, so code that catches the OS's errors still catches it."""

    def __init__(self, message: str, path: Path, reason: str):
        super().__init__(message)
        self.path, self.reason = Path(path), reason


def _os_reason(error: BaseException) -> str:
    return getattr(error, "strerror", None) or str(error)


def _write_error(error: BaseException) -> OSError | None:
    """The OSError behind a failed write: `error` itself, or the one torch's zip writer failed on."""
    if isinstance(error, OSError):
        return error
    if isinstance(error, RuntimeError) and isinstance(error.__context__, OSError):
        return error.__context__
    return None


def write_run_file(path: str | os.PathLike, text: str) -> Path:
    """Write a small text file of a run (config.json, ...); WriteFailed naming it if the OS refuses."""
    path = Path(path)
    try:
        path.write_text(text)
    except OSError as error:
        raise WriteFailed(f"cannot write {path} ({_os_reason(error)})", path, _os_reason(error)) from None
    return path


def remove_stale_temporaries(folder: str | os.PathLike) -> list[Path]:
    """Delete the temporary files interrupted saves left in `folder`; returns what was removed."""
    removed = []
    for path in Path(folder).glob(f".*{TEMPORARY_SUFFIX}"):
        if path.is_file():
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def content_digest(value) -> str:
    """sha256 (hex) of a checkpoint's contents, independent of how torch.save lays out the file.

    Each value is fed as a type tag and its data: a tensor as dtype, shape and the bytes
    of its elements; numbers exactly (a float as its 8 IEEE bytes); dicts key by key in
    their order, lists and tuples item by item. TypeError for anything else (what
    `torch.load(weights_only=True)` could not read back either).
    """
    digest = hashlib.sha256()
    _feed(digest, value)
    return digest.hexdigest()


def _feed(digest, value) -> None:
    if isinstance(value, torch.Tensor):
        tensor = value.detach().to("cpu").contiguous().reshape(-1)
        digest.update(f"tensor {tensor.dtype} {tuple(value.shape)};".encode())
        digest.update(memoryview(tensor.view(torch.uint8).numpy()))
    elif isinstance(value, dict):
        digest.update(f"dict {len(value)};".encode())
        for key, item in value.items():
            _feed(digest, key)
            _feed(digest, item)
    elif isinstance(value, (list, tuple)):
        digest.update(f"{type(value).__name__} {len(value)};".encode())
        for item in value:
            _feed(digest, item)
    elif value is None or isinstance(value, (bool, int, str, torch.dtype, torch.device)):
        text = str(value).encode()
        digest.update(f"{type(value).__name__} {len(text)};".encode() + text)
    elif isinstance(value, float):
        digest.update(b"float;" + struct.pack("<d", value))
    elif isinstance(value, bytes):
        digest.update(f"bytes {len(value)};".encode() + value)
    else:
        raise TypeError(f"a checkpoint holds tensors, numbers, strings, None, lists, tuples and dicts, "
                        f"not {type(value).__name__}")


def save_checkpoint(state: dict, path: str | os.PathLike) -> None:
    """Write `state` atomically to `path` (temporary file + fsync + os.replace), with its checksum.

    The file holds {"format": 3, **state, "sha256": content_digest of the rest}; a
    "format" or "sha256" already in `state` (a loaded checkpoint saved again) is replaced.
    """
    path = Path(path)
    contents = {"format": CHECKPOINT_FORMAT,
                **{key: value for key, value in state.items() if key not in ("format", CHECKSUM_KEY)}}
    contents[CHECKSUM_KEY] = content_digest(contents)
    try:
        _write_atomically(contents, path)
    except (OSError, RuntimeError) as error:
        cause = _write_error(error)
        if cause is None:
            raise
        kept = "the checkpoint saved there before is kept" if path.is_file() else "no checkpoint was saved there"
        raise WriteFailed(f"cannot write checkpoint {path} ({_os_reason(cause)}); {kept}", path,
                          _os_reason(cause)) from None


HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def signals_held(signals=HELD_SIGNALS):
    """Hold `signals` while the block runs, then deliver the ones that came, in order, to
    the handlers that were in place before (a Ctrl-C raises KeyboardInterrupt there).

    Only the main thread can change handlers, so elsewhere (and for a signal whose
    handler was not set from Python) the block runs unheld.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[int] = []
    previous = {}
    try:
        for sig in signals:
            if signal.getsignal(sig) is not None:
                previous[sig] = signal.signal(sig, lambda signum, frame: arrived.append(signum))
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for signum in arrived:
            signal.raise_signal(signum)


def _write_atomically(contents: dict, path: Path) -> None:
    """torch.save `contents` to a temporary file in `path`'s folder, fsync, rename it to
    `path`; a SIGINT or SIGTERM meanwhile acts once the file is in place (`signals_held`)."""
    with signals_held():
        _write_and_rename(contents, path)


def _write_and_rename(contents: dict, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path.parent)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMPORARY_SUFFIX)
    try:
        with os.fdopen(handle, "wb") as file:
            torch.save(contents, file)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, 0o666 & ~_umask())  # mkstemp makes 0600; a checkpoint is an ordinary file
        os.replace(temporary, path)
    except BaseException as error:
        Path(temporary).unlink(missing_ok=True)
        if isinstance(error.__context__, KeyboardInterrupt):
            # Ctrl-C inside torch.save where it could not be held (a thread other than the main
            # one): its zip writer then fails on the way out (RuntimeError)
            raise KeyboardInterrupt from error
        raise


def _corrupt(path: Path) -> CheckpointError:
    return CheckpointError(f"checkpoint {path} is corrupt (its checksum does not match its contents)")


def _digest_matches(stored, state: dict) -> bool:
    try:
        return stored == content_digest(state)
    except TypeError:  # something no checkpoint of ours holds
        return False


def _torch_payload(path: Path, data: bytes) -> tuple[bytes, int | None]:
    """The torch.save bytes of a checkpoint file and the format its header names (2), or
    (data, None) for a file without a header; CheckpointError if format 2's checksum fails."""
    if not data.startswith(FORMAT_2_MAGIC):
        return data, None
    header_end = len(FORMAT_2_MAGIC) + _DIGEST_LENGTH
    digest, payload = data[len(FORMAT_2_MAGIC) : header_end], data[header_end + 1 :]
    if data[header_end : header_end + 1] != b"\n" or hashlib.sha256(payload).hexdigest().encode() != digest:
        raise _corrupt(path)
    return payload, 2


def load_checkpoint(path: str | os.PathLike, required_keys: tuple[str, ...] = (), kind: str | None = None) -> dict:
    """Read a checkpoint with weights_only=True and check its checksum; CheckpointError if it
    cannot be used, or if it belongs to a run of another kind than `kind` (RUN_KINDS; checked
    before `required_keys`). Returns the state as saved, with "format" and without "sha256"."""
    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT_NAME
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    try:
        data = path.read_bytes()
    except OSError as error:
        raise CheckpointError(f"checkpoint {path} cannot be read ({error.strerror})") from None
    payload, header_format = _torch_payload(path, data)
    try:
        with warnings.catch_warnings():  # a damaged header may make torch warn before it fails
            warnings.simplefilter("ignore")
            state = torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)
    except Exception:  # a damaged zip or pickle fails in many ways (KeyError, UnicodeDecodeError, ...)
        raise CheckpointError(
            f"checkpoint {path} is corrupt, truncated, or holds more than tensors and plain data"
        ) from None
    stored = state.pop(CHECKSUM_KEY, None) if isinstance(state, dict) else None
    if stored is not None and not _digest_matches(stored, state):
        raise _corrupt(path)
    allowed = (2,) if header_format == 2 else (1, CHECKPOINT_FORMAT)  # format 2 files, and only they, have a header
    if not isinstance(state, dict) or state.get("format") not in allowed:
        raise CheckpointError(f"checkpoint {path} is not a checkpoint of this project (format 1, 2 or {CHECKPOINT_FORMAT})")
    if state["format"] == CHECKPOINT_FORMAT and stored is None:
        raise _corrupt(path)
    if kind is not None:
        require_kind(state, path, kind)
    missing = [key for key in required_keys if key not in state]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks {', '.join(missing)}")
    return state


# ---------------------------------------------------------------- run folders: the rule every writer obeys

# The kind of run a checkpoint belongs to, told by keys only its writer saves (the first match counts).
RUN_KINDS: dict[str, tuple[str, ...]] = {
    "ppo-pretrain-lm": ("pretrain_config",),  # an SFT model, or an interrupted pretraining
    "ppo-dpo": ("pairs", "comparisons"),
    "ppo-rlhf": ("reference", "critic"),
    "ppo-train": ("spaces",),
}
KIND_DESCRIPTIONS = {"ppo-pretrain-lm": "an SFT model of ppo-pretrain-lm", None: "a checkpoint of no known run"}


def checkpoint_kind(state: dict) -> str | None:
    """The command whose run a loaded checkpoint belongs to (a key of RUN_KINDS), None if none."""
    for kind, keys in RUN_KINDS.items():
        if all(key in state for key in keys):
            return kind
    return None


def describe_kind(kind: str | None) -> str:
    """'a ppo-rlhf run', 'an SFT model of ppo-pretrain-lm': a kind as a message names it."""
    return KIND_DESCRIPTIONS.get(kind, f"a {kind} run")


def require_kind(state: dict, path: Path, kind: str) -> None:
    """CheckpointError 'FOLDER is a ppo-rlhf run, not a ppo-dpo run' unless `state` is of `kind`."""
    found = checkpoint_kind(state)
    if found is not None and found != kind:
        where = path.parent if path.name == CHECKPOINT_NAME else path
        raise CheckpointError(f"{where} is {describe_kind(found)}, not {describe_kind(kind)}")


def check_run_folder(folder: str | os.PathLike, iterations_done: int, resume_with: str,
                     instead: str = "another run_dir") -> None:
    """The rule every writer of a run folder obeys before it writes its first file there; ConfigError, one line, if not:

    - a new run (`iterations_done` 0) goes into a folder that holds no run (no checkpoint.pt):
      a finished or foreign run is never overwritten (the message offers `resume_with`, how to
      continue that run, or `instead`);
    - a resumed run (`iterations_done` > 0) has its log: metrics.csv holds a row for each
      iteration done, so the curve it continues starts at the first iteration.
    """
    folder = Path(folder)
    checkpoint = folder / CHECKPOINT_NAME
    if iterations_done == 0:
        if checkpoint.exists():
            raise ConfigError(f"run_dir {folder} already holds a run; use {resume_with} or {instead}")
        return
    log = folder / LOG_NAME
    logged = _logged_iterations(log, iterations_done)
    if logged is None:
        raise ConfigError(f"run {folder} has done {iterations_done} iterations but its log {log} is missing: resumed, "
                          "its curve would start at the next iteration; restore the file, or train a new run")
    if logged < iterations_done:
        raise ConfigError(f"run {folder} has done {iterations_done} iterations but its log {log} holds {logged} of "
                          "them; restore the file, or train a new run")


def _logged_iterations(log: Path, iterations_done: int) -> int | None:
    """How many of iterations 1..`iterations_done` the log has a row for (all its rows, for a log
    without an iteration column); None if there is no log."""
    try:
        with open(log, newline="") as file:
            rows = list(csv.DictReader(file))
    except FileNotFoundError:
        return None
    except (OSError, csv.Error, UnicodeDecodeError):
        return 0
    if rows and "iteration" not in rows[0]:
        return len(rows)
    logged = set()
    for row in rows:
        with contextlib.suppress(TypeError, ValueError):
            logged.add(float(row["iteration"]))
    return sum(1 for iteration in range(1, iterations_done + 1) if iteration in logged)


def prove_writable(folder: str | os.PathLike, what: str) -> Path:
    """`folder` as a Path, once proven that it can be made and a file written in it; ConfigError
    naming `what`, the folder and the OS's reason if not. What the proof made is removed again:
    the check leaves nothing."""
    folder = Path(folder)
    missing = [path for path in (folder, *folder.parents) if not path.is_dir()]
    made: list[Path] = []
    try:
        for path in reversed(missing):
            os.mkdir(path)
            made.append(path)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        reason = _os_reason(error) if not isinstance(error, FileExistsError) else os.strerror(errno.ENOTDIR)
        raise ConfigError(f"{what} {folder} cannot be written ({reason})") from None
    finally:
        for path in reversed(made):
            with contextlib.suppress(OSError):
                path.rmdir()
    return folder


def check_writable_run_dir(folder: str | os.PathLike) -> Path:
    """`prove_writable` for a run folder."""
    return prove_writable(folder, "run_dir")


def _kind_of_file(path: Path) -> str | None:
    """The kind of run the checkpoint at `path` belongs to (`checkpoint_kind`); None if unreadable or of none."""
    try:
        return checkpoint_kind(load_checkpoint(path))
    except CheckpointError:
        return None


def check_checkpoint_target(path: str | os.PathLike, kind: str, what: str) -> Path:
    """ConfigError unless writing a checkpoint of `kind` to `path` replaces at most an earlier
    checkpoint of that kind, outside a run folder of another kind. `what` names the path ('--out')."""
    path = Path(path)
    if path.is_file() and (found := _kind_of_file(path)) != kind:
        raise ConfigError(f"{what} {path} is {describe_kind(found)}, not {describe_kind(kind)}: writing there "
                          "would replace it; choose another path")
    run_checkpoint = path.parent / CHECKPOINT_NAME
    if run_checkpoint.is_file() and run_checkpoint != path and (found := _kind_of_file(run_checkpoint)) != kind:
        raise ConfigError(f"{what} {path} is inside {path.parent}, which is {describe_kind(found)}; "
                          "choose a path outside it")
    return path
