"""Checkpoints that survive a crash mid-write, detect corruption, and load without unpickling code.

A checkpoint is a plain dict of tensors, numbers, strings, lists and dicts, so
`torch.load(..., weights_only=True)` can read it: loading a file never runs code that
someone put in it. The file is

    MAGIC  sha256(payload) as 64 hex digits  "\\n"  payload (torch.save of the dict)

so one flipped byte anywhere in the payload is caught before anything is unpickled.
It is written to a temporary file in the same folder and moved over the old one with
`os.replace`, an atomic rename: a crash during the write leaves the previous
checkpoint intact, and the temporary file is removed at the next save into that folder
(`remove_stale_temporaries`). The file's permissions follow the umask, like any file
the process creates. Files of format 1 (a bare torch.save, no checksum) still load.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import tempfile
import zipfile
from pathlib import Path

import torch

CHECKPOINT_FORMAT = 2
MAGIC = b"PPO-CHECKPOINT-2 "
_DIGEST_LENGTH = 64  # hex digits of a sha256
TEMPORARY_SUFFIX = ".tmp"


class CheckpointError(Exception):
    """A checkpoint that is missing, corrupt or does not match; one-line message."""


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


def save_checkpoint(state: dict, path: str | os.PathLike) -> None:
    """Write `state` atomically to `path` (temporary file + fsync + os.replace), with its checksum."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path.parent)
    buffer = io.BytesIO()
    torch.save({"format": CHECKPOINT_FORMAT, **state}, buffer)
    payload = buffer.getvalue()
    digest = hashlib.sha256(payload).hexdigest().encode()
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMPORARY_SUFFIX)
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(MAGIC + digest + b"\n")
            file.write(payload)
            file.flush()
            os.fsync(file.fileno())
        os.chmod(temporary, 0o666 & ~_umask())  # mkstemp makes 0600; a checkpoint is an ordinary file
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _payload(path: Path, data: bytes) -> tuple[bytes, int]:
    """The torch payload of a checkpoint file and its format; CheckpointError if the checksum fails."""
    if not data.startswith(MAGIC):
        return data, 1  # format 1: a bare torch.save, no checksum
    header_end = len(MAGIC) + _DIGEST_LENGTH
    digest, payload = data[len(MAGIC) : header_end], data[header_end + 1 :]
    if data[header_end : header_end + 1] != b"\n" or hashlib.sha256(payload).hexdigest().encode() != digest:
        raise CheckpointError(f"checkpoint {path} is corrupt (its checksum does not match its contents)")
    return payload, CHECKPOINT_FORMAT


def load_checkpoint(path: str | os.PathLike, required_keys: tuple[str, ...] = ()) -> dict:
    """Read a checkpoint with weights_only=True; CheckpointError if it cannot be used."""
    path = Path(path)
    if path.is_dir():
        path = path / "checkpoint.pt"
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    try:
        data = path.read_bytes()
    except OSError as error:
        raise CheckpointError(f"checkpoint {path} cannot be read ({error.strerror})") from None
    payload, file_format = _payload(path, data)
    try:
        state = torch.load(io.BytesIO(payload), map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, zipfile.BadZipFile, pickle.UnpicklingError, ValueError, OSError):
        raise CheckpointError(
            f"checkpoint {path} is corrupt, truncated, or holds more than tensors and plain data"
        ) from None
    if not isinstance(state, dict) or state.get("format") != file_format:
        raise CheckpointError(f"checkpoint {path} is not a checkpoint of this project (format 1 or {CHECKPOINT_FORMAT})")
    missing = [key for key in required_keys if key not in state]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks {', '.join(missing)}")
    return state
