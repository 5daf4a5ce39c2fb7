"""Checkpoints: written atomically, loaded with ``weights_only=True``, refused clearly.

A checkpoint is one ``torch.save`` file holding only tensors, numbers, strings, lists and
dicts, so it loads with ``torch.load(..., weights_only=True)`` (no pickled code runs).
It is written to a temporary file in the same folder, flushed to disk, then renamed over
the old one: an interrupted write never leaves a half checkpoint, and a failed load
never touches the file.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

import torch

__all__ = ["FORMAT", "CheckpointError", "find_checkpoint", "load_checkpoint", "save_checkpoint"]

FORMAT = 1
FILENAME = "checkpoint.pt"


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be used; the file on disk is left as it was."""


def save_checkpoint(path: str | Path, state: dict[str, Any]) -> Path:
    """Write ``state`` to ``path`` atomically (temporary file + fsync + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            torch.save({"rlamd_checkpoint": FORMAT, **state}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def find_checkpoint(run_or_ckpt: str | Path, logdir: str | Path = "runs") -> Path:
    """Resolve a checkpoint file, a run folder, or a run name under ``logdir``."""
    given = Path(run_or_ckpt)
    candidates = [given, given / FILENAME, Path(logdir) / given / FILENAME]
    for c in candidates:
        if c.is_file():
            return c
    if given.is_dir():
        raise CheckpointError(
            f"No checkpoint in the folder '{given}': looked for {given / FILENAME}, which does "
            "not exist (a run writes it at its first --checkpoint-every, on Ctrl-C and at the end)"
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


def load_checkpoint(
    path: str | Path,
    *,
    algo: str | None = None,
    advice: str = "resume from another checkpoint or start a new run",
) -> dict[str, Any]:
    """Load and check a checkpoint; raises :class:`CheckpointError` with the reason.

    ``advice`` ends the message for an unreadable file (what the caller's user can do).
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
            f"{path} has checkpoint format {state['rlamd_checkpoint']}; this rlamd reads format {FORMAT}"
        )
    missing = [k for k in ("config", "step", "agent") if k not in state]
    if missing:
        raise CheckpointError(f"{path} is incomplete: missing {', '.join(missing)}")
    if algo is not None and state["config"]["train"]["algo"] != algo:
        raise CheckpointError(
            f"{path} was trained with algo={state['config']['train']['algo']!r}, not {algo!r}"
        )
    return state
