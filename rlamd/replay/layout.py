"""The storage's layout: record flags, how a frame and an action are kept, the records
a stream needs, and zeroed host arrays that cost nothing until written."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

__all__ = [
    "END",
    "FIRST",
    "NOT_SAMPLEABLE",
    "TERMINAL",
    "Window",
    "layout",
    "min_records_per_stream",
    "records_per_stream",
    "unsampleable_per_stream",
    "zeros",
]

FIRST, TERMINAL, END, NOT_SAMPLEABLE = 1, 2, 4, 8
"""Record flags: an episode's first record, a termination, an episode's end, and a record
that is never sampled (history frames, FINAL records)."""


class Window(NamedTuple):
    """n-step quantities for a batch of sampled records (all device tensors)."""

    returns: torch.Tensor
    """sum_j gamma^j r_{t+j} over the steps taken (float32)."""
    discounts: torch.Tensor
    """gamma^m, m the steps taken; 0 where the window ended in a terminal."""
    next_index: torch.Tensor
    """flat index of the record whose stack is the bootstrap observation."""


def min_records_per_stream(n_step: int, frame_stack: int) -> int:
    """Records a stream needs at least: its unsampleable ones, a record to sample and
    room for an episode's FINAL record (``n_step + frame_stack + 2``)."""
    return n_step + frame_stack + 2


def unsampleable_per_stream(n_step: int, frame_stack: int) -> int:
    """Records of each stream that are never sampleable at once: those whose n-step
    window or frame stack is incomplete (``n_step + frame_stack - 1``)."""
    return n_step + frame_stack - 1


def zeros(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Zeros that cost nothing until written, on the host: ``torch.zeros`` writes every byte
    (a million Atari frames, 7 GB: 25 s before a run's first line); numpy takes zero pages
    from the OS as the ring fills. The memory check before a run counts the whole ring."""
    if device.type == "cpu":
        try:
            np_dtype = torch.empty(0, dtype=dtype).numpy().dtype
        except TypeError:  # no numpy twin (bfloat16): zero it the torch way
            pass
        else:
            return torch.from_numpy(np.zeros(shape, dtype=np_dtype))
    return torch.zeros(shape, dtype=dtype, device=device)


def layout(
    obs_shape: tuple[int, ...],
    frame_stack: int,
    num_actions: int,
    action_shape: tuple[int, ...] = (),
    action_dtype: torch.dtype | None = None,
) -> tuple[tuple[int, ...], torch.dtype]:
    """Shape of one stored frame and the action dtype: discrete actions (``action_shape``
    ``()``) as uint8 up to 256 actions, else int32; others float32 unless given."""
    frame_shape = tuple(obs_shape[1:]) if frame_stack > 1 else tuple(obs_shape)
    if action_dtype is None:
        discrete = torch.uint8 if num_actions <= 256 else torch.int32
        action_dtype = discrete if tuple(action_shape) == () else torch.float32
    return frame_shape, action_dtype


def records_per_stream(
    capacity: int,
    num_streams: int,
    obs_shape: tuple[int, ...],
    frame_stack: int,
    n_step: int,
    gamma: float,
) -> int:
    """Records each stream's ring gets, after checking a storage's arguments.

    Raises:
        ValueError: a bad argument, or too few records per stream, in one line.
    """
    if capacity <= 0:
        raise ValueError(f"capacity={capacity}; accepted: an integer > 0")
    if num_streams <= 0:
        raise ValueError(f"num_streams={num_streams}; accepted: an integer > 0")
    if n_step < 1:
        raise ValueError(f"n_step={n_step}; accepted: an integer >= 1")
    if not 0.0 <= gamma <= 1.0:
        raise ValueError(f"gamma={gamma}; accepted: a number in [0, 1]")
    if frame_stack > 1 and (len(obs_shape) < 2 or obs_shape[0] != frame_stack):
        raise ValueError(
            f"frame_stack={frame_stack} needs observations shaped (k={frame_stack}, ...); "
            f"got obs_shape={obs_shape}"
        )
    per_stream = capacity // num_streams
    minimum = min_records_per_stream(n_step, frame_stack)
    if per_stream < minimum:
        raise ValueError(
            f"capacity={capacity} gives {per_stream} records per stream for "
            f"{num_streams} streams; accepted: at least {minimum * num_streams} "
            f"(n_step + frame_stack + 2 = {minimum} per stream)"
        )
    return per_stream
