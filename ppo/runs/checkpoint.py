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
(`remove_stale_temporaries`). The file's permissions follow the umask, like any file
the process creates. Older files still load: format 2 (a header "PPO-CHECKPOINT-2 ",
the sha256 of the torch payload in hex and a newline, then the payload) and format 1
(a bare torch.save, no checksum).
"""

from __future__ import annotations

import hashlib
import io
import os
import struct
import tempfile
import warnings
from pathlib import Path

import torch

CHECKPOINT_FORMAT = 3
CHECKSUM_KEY = "sha256"
FORMAT_2_MAGIC = b"PPO-CHECKPOINT-2 "  # format 2's header: magic, 64 hex digits of sha256, "\n"
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
            # Ctrl-C inside torch.save: its zip writer then fails on the way out (RuntimeError)
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


def load_checkpoint(path: str | os.PathLike, required_keys: tuple[str, ...] = ()) -> dict:
    """Read a checkpoint with weights_only=True and check its checksum; CheckpointError if it
    cannot be used. Returns the state as saved, with "format" and without "sha256"."""
    path = Path(path)
    if path.is_dir():
        path = path / "checkpoint.pt"
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
    missing = [key for key in required_keys if key not in state]
    if missing:
        raise CheckpointError(f"checkpoint {path} lacks {', '.join(missing)}")
    return state
