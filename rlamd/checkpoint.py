"""Checkpoints: written atomically, checksummed, loaded with ``weights_only=True``.

A checkpoint is one ``torch.save`` file holding only tensors, numbers, strings, lists and
dicts, so it loads with ``torch.load(..., weights_only=True)`` (no pickled code runs).
It is written to a temporary file in the same folder, flushed to disk, then renamed over
the old one: an interrupted write never leaves a half checkpoint, and a failed load
never touches the file. A write that fails for want of space or permission raises a
one-line :class:`rlamd.storage.StorageError` and leaves the old checkpoint in place.

Each checkpoint carries a SHA-256 of its payload (:func:`payload_digest`: every tensor's
bytes, dtype and shape, every other value, in a fixed order), checked on load: bytes
flipped anywhere in the file are refused, not trained on. A checkpoint without one
(written by an older rlamd) still loads, with a note.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

from rlamd.storage import storage_error, sync_folder, temp_name

__all__ = [
    "CHECKSUM",
    "FILENAME",
    "FORMAT",
    "CheckpointError",
    "find_checkpoint",
    "load_checkpoint",
    "payload_digest",
    "save_checkpoint",
]

FORMAT = 1
FILENAME = "checkpoint.pt"
CHECKSUM = "rlamd_sha256"
"""The key holding the payload's SHA-256 (hex); every other key is the payload."""


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used; the file on disk is left as it was."""


def _feed(h: Any, value: Any) -> None:
    """Add ``value`` to the hash ``h`` in a form that survives a save and a load."""
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous().reshape(-1)
        h.update(f"T{t.dtype}{tuple(value.shape)};".encode())
        h.update(t.view(torch.uint8).numpy().data if t.numel() else b"")
    elif isinstance(value, Mapping):
        h.update(f"D{len(value)};".encode())
        for key in sorted(value, key=lambda k: (type(k).__name__, repr(k))):
            _feed(h, key)
            _feed(h, value[key])
    elif isinstance(value, (list, tuple)):
        h.update(f"L{len(value)};".encode())
        for item in value:
            _feed(h, item)
    else:  # None, bool, int, float, str, bytes
        text = f"{type(value).__name__}:{value!r};"
        h.update(text.encode("utf-8", "surrogatepass"))


def _write_cause(exc: BaseException) -> BaseException | None:
    """What really stopped a write: the ``OSError`` or the interrupt (Ctrl-C) in ``exc``'s
    context chain. ``torch.save`` reports either one, raised inside its writes, as
    ``RuntimeError: [enforce fail at inline_container.cc] unexpected pos``."""
    seen: set[int] = set()
    here: BaseException | None = exc
    while here is not None and id(here) not in seen:
        if isinstance(here, OSError) or not isinstance(here, Exception):
            return here
        seen.add(id(here))
        here = here.__cause__ or here.__context__
    return None


def payload_digest(state: Mapping[str, Any]) -> str:
    """The SHA-256 (hex) of a checkpoint's payload: every key but :data:`CHECKSUM`."""
    h = hashlib.sha256()
    _feed(h, {k: v for k, v in state.items() if k != CHECKSUM})
    return h.hexdigest()


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> Path:
    """Write ``state`` to ``path`` atomically (temporary file + fsync + rename), with the
    payload's checksum.

    Raises:
        StorageError: the folder cannot be written or the disk filled up; the temporary
            file is removed and the checkpoint already at ``path`` is left as it was.
    """
    path = Path(path)
    payload = {"rlamd_checkpoint": FORMAT, **state}
    payload[CHECKSUM] = payload_digest(payload)
    tmp = temp_name(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except (OSError, RuntimeError) as exc:
        cause = _write_cause(exc)
        if isinstance(cause, OSError):
            raise storage_error(cause, path) from None
        if cause is not None:  # a second Ctrl-C inside the write: an interrupt, not an error
            raise cause from None
        raise  # torch.save failing on its own: a bug, not the storage
    finally:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
    sync_folder(path.parent)
    return path


def find_checkpoint(run_or_ckpt: str | Path, logdir: str | Path = "runs") -> Path:
    """Resolve a checkpoint file, a run folder, or a run name under ``logdir``."""
    given = Path(run_or_ckpt)
    candidates = [given, given / FILENAME, Path(logdir) / given / FILENAME]
    for c in candidates:
        if c.is_file():
            return c
    if given.is_dir():
        again = (
            f"; it holds the run's settings: start it again with --config {given / 'config.toml'}"
            if (given / "config.toml").is_file()
            else ""
        )
        raise CheckpointError(
            f"No checkpoint in the folder '{given}': looked for {given / FILENAME}, which does "
            "not exist (a run writes it at its first --checkpoint-every, on Ctrl-C and at the "
            f"end){again}"
        )
    root = Path(logdir)
    known = sorted(p.parent.name for p in root.glob(f"*/{FILENAME}")) if root.is_dir() else []
    close = difflib.get_close_matches(given.name, known, n=3)
    if close:
        hint = f" Closest runs: {', '.join(close)}."
    elif known:
        hint = f" Runs with a checkpoint in {root}/: {', '.join(known[:10])}."
    else:
        hint = ""
    raise CheckpointError(
        f"No checkpoint at '{run_or_ckpt}': give a checkpoint file, a run folder holding "
        f"{FILENAME}, or a run name under {logdir}/.{hint}"
    )


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _check_payload(path: Path, state: dict[str, Any], advice: str, note) -> None:
    """The checksum (when there is one) and the keys every checkpoint has."""
    if CHECKSUM not in state:
        note(
            f"rlamd: {path} carries no checksum (written by an older rlamd); it is loaded "
            "without an integrity check"
        )
    elif state[CHECKSUM] != payload_digest(state):
        raise CheckpointError(
            f"{path} failed its integrity check: its contents no longer match the checksum "
            f"written with them (the file was changed or damaged after it was saved). The "
            f"file was left untouched; {advice}."
        )
    missing = [k for k in ("config", "step", "agent") if k not in state]
    if missing:
        raise CheckpointError(f"{path} is incomplete: missing {', '.join(missing)}")
    config, step = state["config"], state["step"]
    if not (
        isinstance(config, dict)
        and isinstance(config.get("train"), dict)
        and isinstance(config["train"].get("algo"), str)
        and isinstance(step, int)
        and step >= 0
        and isinstance(state["agent"], dict)
    ):
        raise CheckpointError(
            f"{path} is damaged: its config, step or agent is not what rlamd writes. The "
            f"file was left untouched; {advice}."
        )


def load_checkpoint(
    path: str | Path,
    *,
    algo: str | None = None,
    advice: str = "resume from another checkpoint or start a new run",
    note: Callable[[str], None] = _say,
) -> dict[str, Any]:
    """Load and check a checkpoint; raises :class:`CheckpointError` with the reason.

    ``advice`` ends the message for an unreadable file (what the caller's user can do);
    ``note`` hears that a checkpoint has no checksum (default: a line on stderr). The
    file is never written.
    """
    path = Path(path)
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise CheckpointError(f"{path}: no such file") from None
    except Exception as exc:  # truncated zip, pickle refused by weights_only, garbage...
        raise CheckpointError(
            f"{path} is not a readable rlamd checkpoint ({exc.__class__.__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else 'no detail'}). The file was left "
            f"untouched; {advice}."
        ) from None
    if not isinstance(state, dict) or "rlamd_checkpoint" not in state:
        raise CheckpointError(
            f"{path} is a torch file but not an rlamd checkpoint (no 'rlamd_checkpoint' key)"
        )
    if state["rlamd_checkpoint"] != FORMAT:
        raise CheckpointError(
            f"{path} has checkpoint format {state['rlamd_checkpoint']!r}; this rlamd reads "
            f"format {FORMAT}"
        )
    _check_payload(path, state, advice, note)
    if algo is not None and state["config"]["train"]["algo"] != algo:
        raise CheckpointError(
            f"{path} was trained with algo={state['config']['train']['algo']!r}, not {algo!r}"
        )
    return state
