"""Checkpoints that survive a crash mid-write and load without unpickling code.

A checkpoint is a plain dict of tensors, numbers, strings, lists and dicts, so
`torch.load(path, weights_only=True)` can read it: loading a file never runs code
that someone put in it. It is written to a temporary file in the same folder and
moved over the old one with `os.replace`, an atomic rename: a crash during the write
leaves the previous checkpoint intact.
"""

from __future__ import annotations

import os
import pickle
import tempfile
import zipfile
from pathlib import Path

import torch

CHECKPOINT_FORMAT = 1


class CheckpointError(Exception):
    """A checkpoint that is missing, corrupt or does not match; one-line message."""


def save_checkpoint(state: dict, path: str | os.PathLike) -> None:
    """Write `state` atomically to `path` (temporary file + fsync + os.replace)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as file:
            torch.save({"format": CHECKPOINT_FORMAT, **state}, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def load_checkpoint(path: str | os.PathLike, required_keys: tuple[str, ...] = ()) -> dict:
    """Read a checkpoint with weights_only=True; CheckpointError if it cannot be used."""
    path = Path(path)
    if path.is_dir():
        path = path / "checkpoint.pt"
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, EOFError, zipfile.BadZipFile, pickle.UnpicklingError, ValueError, OSError):
        raise CheckpointError(
            f"checkpoint {path} is corrupt, truncated, or holds more than tensors and plain data"
        ) from None
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"checkpoint {path} is not a format-{CHECKPOINT_FORMAT} checkpoint of this project")
    missing = [key for key in required_keys if key not in state]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks {', '.join(missing)}")
    return state
